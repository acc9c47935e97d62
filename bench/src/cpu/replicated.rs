//! The replicated paths of the CPU-per-GB bench (issue 41): produce of 1 kB records on one
//! connection to a cluster whose first broker leads every partition, at RF 1 with acks=1 and at
//! RF 2..n with acks=all (the other brokers following in their order), each broker's CPU read
//! apart over the same window. From one round's phases come the produce summed over a topic's
//! brokers, the followers' CPU per GB they replicated, and what replication adds to an
//! unreplicated produce over the same brokers, the leader's share of it apart.
//!
//! Must never: time a phase whose partitions were not all led by the first broker with every
//! replica in sync when it started, or derive a figure from phases that moved different bytes.

use std::time::Duration;

use anyhow::{bail, Context};

use super::{produce_measured, produce_spec, CpuSpec, CpuTimes, Sample};
use crate::client::{Connection, ACKS_ALL, ACKS_LEADER};

/// One broker of the cluster: where it listens, its node id and its process.
#[derive(Debug, Clone)]
pub struct ClusterBroker {
    /// host:port of its PLAINTEXT listener.
    pub address: String,
    /// Its node id, as Metadata names it.
    pub node_id: i32,
    /// Its process, whose CPU is read.
    pub pid: u32,
}

/// The start of the name of a produce summed over a replicated topic's brokers.
pub const PRODUCE_ALL: &str = "produce acks=all";
/// The start of the name of the followers' CPU per GB they replicated.
pub const FOLLOWER: &str = "follower replication";
/// The start of the name of replication's added cost over an unreplicated produce.
pub const ADDED_COST: &str = "replication's added cost";
/// The start of the name of the leader's part of that cost.
pub const LEADER_ADDED_COST: &str = "the leader's added cost";

/// The topic config every replicated topic gets: an acks=all produce then fails rather than
/// being acknowledged by fewer than two replicas (a follower out of the ISR stops the run).
const MIN_INSYNC_REPLICAS: &str = "2";

/// How long a new topic may take until its first broker leads every partition, all replicas in
/// sync.
const REPLICATED_READY_TIMEOUT: Duration = Duration::from_secs(60);

/// The brokers at `addresses` (in order, the first the leader of every topic here) with their
/// processes `pids` and their node ids, once the first broker's Metadata names them all (a
/// cluster just started registers its brokers one by one).
pub async fn cluster_brokers(
    addresses: &[String],
    pids: &[u32],
) -> anyhow::Result<Vec<ClusterBroker>> {
    if addresses.len() != pids.len() || addresses.len() < 2 {
        bail!("a cluster run needs two or more addresses, each with its pid");
    }
    let first = addresses.first().context("no broker")?;
    let mut connection = Connection::connect(first).await?;
    let deadline = tokio::time::Instant::now() + REPLICATED_READY_TIMEOUT;
    loop {
        let metadata = connection.metadata(&[]).await?;
        let found: Option<Vec<ClusterBroker>> = addresses
            .iter()
            .zip(pids)
            .map(|(address, &pid)| {
                let broker = metadata
                    .brokers
                    .iter()
                    .find(|broker| format!("{}:{}", broker.host, broker.port) == *address)?;
                Some(ClusterBroker {
                    address: address.clone(),
                    node_id: broker.node_id.0,
                    pid,
                })
            })
            .collect();
        match found {
            Some(brokers) => return Ok(brokers),
            None if tokio::time::Instant::now() >= deadline => {
                bail!("the cluster's Metadata did not name every broker of {addresses:?}")
            }
            None => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// What one produce phase moved and what each broker spent over it.
#[derive(Debug, Clone)]
pub struct ReplicatedPhase {
    /// Replicas of the phase's topic: the first that many brokers.
    pub replication_factor: usize,
    /// Batch bytes produced.
    pub bytes: u64,
    /// Records produced.
    pub records: u64,
    /// Each broker's CPU over the phase, in the cluster's order.
    pub per_broker: Vec<CpuTimes>,
}

/// One round: a topic per replication factor 1..=n created (outside the measured windows), then
/// a produce to each, RF 1 with acks=1 and the others with acks=all; the samples
/// [`replicated_samples`] derives from them.
pub async fn replicated_round(
    brokers: &[ClusterBroker],
    spec: &CpuSpec,
    round: usize,
) -> anyhow::Result<Vec<Sample>> {
    let leader = brokers.first().context("no broker")?;
    let topic = |factor: usize| format!("cpu-replicated-{}-{round}-rf{factor}", std::process::id());
    let mut connection = Connection::connect(&leader.address).await?;
    for factor in 1..=brokers.len() {
        let replicas: Vec<i32> = brokers.iter().take(factor).map(|b| b.node_id).collect();
        let configs: &[(&str, &str)] = if factor > 1 {
            &[("min.insync.replicas", MIN_INSYNC_REPLICAS)]
        } else {
            &[]
        };
        let assignment = vec![replicas; usize::try_from(spec.partition_count)?];
        connection
            .create_topic_assigned(&topic(factor), &assignment, configs)
            .await?;
        await_led_in_sync(&mut connection, &topic(factor), leader.node_id, factor).await?;
        connection
            .await_partitions_ready(&topic(factor), spec.partition_count)
            .await?;
    }
    let pids: Vec<u32> = brokers.iter().map(|broker| broker.pid).collect();
    let mut phases = Vec::new();
    for factor in 1..=brokers.len() {
        let acks = if factor == 1 { ACKS_LEADER } else { ACKS_ALL };
        let produce = crate::kip283::produce::ProduceSpec {
            acks,
            ..produce_spec(spec, topic(factor), false)
        };
        let (produced, per_broker) = produce_measured(&leader.address, &pids, &produce, 1).await?;
        phases.push(ReplicatedPhase {
            replication_factor: factor,
            bytes: produced.batch_bytes,
            records: produced.record_count,
            per_broker,
        });
    }
    replicated_samples(&phases)
}

/// Waits until the leader's Metadata shows every partition of `topic` led by `leader` with
/// `replicas` in sync: only then does an acks=all produce wait for every follower.
async fn await_led_in_sync(
    connection: &mut Connection,
    topic: &str,
    leader: i32,
    replicas: usize,
) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + REPLICATED_READY_TIMEOUT;
    loop {
        let metadata = connection.metadata(&[topic]).await?;
        let ready = metadata.topics.iter().all(|answer| {
            answer.error_code == 0
                && !answer.partitions.is_empty()
                && answer.partitions.iter().all(|partition| {
                    partition.error_code == 0
                        && partition.leader_id.0 == leader
                        && partition.isr_nodes.len() == replicas
                })
        });
        if ready && !metadata.topics.is_empty() {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            bail!("{topic} was not led by node {leader} with {replicas} replicas in sync within {REPLICATED_READY_TIMEOUT:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The samples of one round's phases (the first at RF 1, acks=1; the others at RF 2.., acks=all):
/// per phase, the produce summed over its topic's brokers (the RF 1 one: its leader alone); per
/// replicated phase, the followers' CPU per GB they replicated, and replication's added cost
/// (the phase's brokers against the same brokers in the RF 1 phase) and the leader's part of it,
/// both per GB replicated (bytes produced times followers).
pub fn replicated_samples(phases: &[ReplicatedPhase]) -> anyhow::Result<Vec<Sample>> {
    let unreplicated = phases
        .iter()
        .find(|phase| phase.replication_factor == 1)
        .context("no RF 1 phase")?;
    let mut samples = Vec::new();
    for phase in phases {
        let factor = phase.replication_factor;
        let over = |cpus: &[CpuTimes], range: std::ops::Range<usize>| -> anyhow::Result<CpuTimes> {
            Ok(CpuTimes::sum(
                cpus.get(range).context("fewer brokers than replicas")?,
            ))
        };
        let sample = |path: String, cpu: CpuTimes, times: u64| Sample {
            path,
            bytes: phase.bytes * times,
            records: phase.records * times,
            cpu,
        };
        if factor == 1 {
            let leader = over(&phase.per_broker, 0..1)?;
            samples.push(sample(
                "produce acks=1, RF 1, 1 kB records, 1 connection (the cluster's leader)".into(),
                leader,
                1,
            ));
            continue;
        }
        if phase.bytes != unreplicated.bytes || phase.records != unreplicated.records {
            bail!("the RF {factor} phase moved other bytes than the RF 1 one");
        }
        let brokers = over(&phase.per_broker, 0..factor)?;
        let followers = u64::try_from(factor - 1)?;
        samples.push(sample(
            format!("{PRODUCE_ALL}, RF {factor}, 1 kB records, 1 connection (its {factor} brokers summed)"),
            brokers,
            1,
        ));
        samples.push(sample(
            format!("{FOLLOWER}, RF {factor} (the followers, per GB each replicated)"),
            over(&phase.per_broker, 1..factor)?,
            followers,
        ));
        let before = over(&unreplicated.per_broker, 0..factor)?;
        samples.push(sample(
            format!("{ADDED_COST}, RF {factor} (acks=all RF {factor} − acks=1 RF 1 over its {factor} brokers, per GB replicated)"),
            brokers.since(before),
            followers,
        ));
        let leader_before = over(&unreplicated.per_broker, 0..1)?;
        samples.push(sample(
            format!("{LEADER_ADDED_COST}, RF {factor} (per GB replicated)"),
            over(&phase.per_broker, 0..1)?.since(leader_before),
            followers,
        ));
    }
    Ok(samples)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu(user_s: f64, system_s: f64) -> CpuTimes {
        CpuTimes { user_s, system_s }
    }

    fn phase(replication_factor: usize, per_broker: Vec<CpuTimes>) -> ReplicatedPhase {
        ReplicatedPhase {
            replication_factor,
            bytes: 2_000_000_000,
            records: 2_000_000,
            per_broker,
        }
    }

    fn find<'a>(samples: &'a [Sample], start: &str) -> &'a Sample {
        samples
            .iter()
            .find(|sample| sample.path.starts_with(start))
            .expect("sample")
    }

    #[test]
    fn followers_and_added_cost_come_from_the_right_brokers_per_gb_replicated() {
        let phases = [
            phase(1, vec![cpu(1.0, 1.0), cpu(0.1, 0.0), cpu(0.1, 0.0)]),
            phase(2, vec![cpu(1.5, 1.5), cpu(1.0, 1.0), cpu(0.1, 0.0)]),
            phase(3, vec![cpu(2.0, 2.0), cpu(1.0, 1.0), cpu(1.0, 1.0)]),
        ];
        let samples = replicated_samples(&phases).expect("samples");
        let near = |value: f64, expected: f64| (value - expected).abs() < 1e-9;
        // RF 1: the leader alone, 2 s over 2 GB.
        assert!(near(find(&samples, "produce acks=1").cpu_s_per_gb(), 1.0));
        // RF 2: leader and first follower, 5 s over 2 GB.
        let rf2 = find(&samples, "produce acks=all, RF 2");
        assert!(near(rf2.cpu_s_per_gb(), 2.5));
        assert!(near(
            find(&samples, "follower replication, RF 2").cpu_s_per_gb(),
            1.0
        ));
        // Added: (3 + 2) - (2 + 0.1) = 2.9 s over 2 GB replicated.
        let added = find(&samples, "replication's added cost, RF 2");
        assert!(near(added.cpu_s_per_gb(), 1.45));
        assert!(near(
            find(&samples, "the leader's added cost, RF 2").cpu_s_per_gb(),
            0.5
        ));
        // RF 3: two followers, 4 s over 4 GB replicated; added (8 - 2.2) over 4 GB.
        assert!(near(
            find(&samples, "follower replication, RF 3").cpu_s_per_gb(),
            1.0
        ));
        let added = find(&samples, "replication's added cost, RF 3");
        assert!(near(added.cpu_s_per_gb(), 5.8 / 4.0));
        assert_eq!(added.records, 4_000_000);
    }

    #[test]
    fn phases_of_other_bytes_or_without_rf_1_are_refused() {
        let mut other = phase(2, vec![cpu(1.0, 0.0), cpu(1.0, 0.0)]);
        other.bytes += 1;
        let phases = [phase(1, vec![cpu(1.0, 0.0), cpu(0.0, 0.0)]), other];
        assert!(replicated_samples(&phases).is_err());
        assert!(replicated_samples(&[phase(2, vec![cpu(1.0, 0.0); 2])]).is_err());
    }
}
