//! The one definition of Skiff's key layout in the metadata store (docs/design/cluster.md §2a):
//! every key under the root `R = /skiff/<cluster-name>/v1`, built here and parsed back here.
//!
//! Must never: know what a value means (that is [`crate::records`]) or talk to a store.

use std::fmt;

use skiff_placement::bundle::{BundleId, HashRange, HASH_SPACE};

/// The root every key of one Skiff cluster lives under, with its key builders.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    root: String,
}

/// Longest cluster name accepted: keys must stay far below the store's key limit.
pub const CLUSTER_NAME_BYTES_MAX: usize = 64;

/// The cluster name is not usable in a key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cluster name {name:?} is invalid: {reason}")]
pub struct ClusterNameError {
    /// The name given.
    pub name: String,
    /// Why it was refused.
    pub reason: &'static str,
}

/// A key of the layout, parsed.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Key {
    /// `R/cluster`: the cluster id.
    Cluster,
    /// `R/brokers/<id>`: a live broker's registration, on its lease.
    Broker(i32),
    /// `R/controller`: the controller, on its lease.
    Controller,
    /// `R/topics/<topic>`: a topic's assignment and state.
    Topic(String),
    /// `R/partitions/<topic>/<partition>`: leader, epoch, ISR.
    Partition(String, i32),
    /// `R/load/<id>`: a broker's load report, on its lease.
    Load(i32),
    /// `R/ids/producer_id_block`: the next producer-id block.
    ProducerIdBlock,
    /// `R/bundles/<namespace>/<0xLO_0xHI>`: a bundle's owner and move state (controller only).
    Bundle(BundleId),
    /// `R/reassign/<topic>/<partition>`: a partition reassignment in progress.
    Reassign(String, i32),
}

impl Layout {
    /// The layout of the cluster named `name` (`skiff.cluster.name`).
    pub fn new(name: &str) -> Result<Self, ClusterNameError> {
        let refuse = |reason| ClusterNameError {
            name: name.to_owned(),
            reason,
        };
        if name.is_empty() {
            return Err(refuse("it is empty"));
        }
        if name.len() > CLUSTER_NAME_BYTES_MAX {
            return Err(refuse("it is longer than 64 bytes"));
        }
        if !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        {
            return Err(refuse(
                "only ASCII letters, digits, '-', '_' and '.' are allowed",
            ));
        }
        Ok(Self {
            root: format!("/skiff/{name}/v1/"),
        })
    }

    /// Every key of this cluster: the prefix a broker GETs and watches.
    pub fn root(&self) -> &str {
        &self.root
    }

    /// The key of `key`.
    pub fn key(&self, key: &Key) -> String {
        let root = &self.root;
        match key {
            Key::Cluster => format!("{root}cluster"),
            Key::Broker(id) => format!("{root}brokers/{id}"),
            Key::Controller => format!("{root}controller"),
            Key::Topic(topic) => format!("{root}topics/{topic}"),
            Key::Partition(topic, partition) => format!("{root}partitions/{topic}/{partition}"),
            Key::Load(id) => format!("{root}load/{id}"),
            Key::ProducerIdBlock => format!("{root}ids/producer_id_block"),
            Key::Bundle(bundle) => {
                format!("{root}bundles/{}/{}", bundle.namespace, bundle.range.name())
            }
            Key::Reassign(topic, partition) => format!("{root}reassign/{topic}/{partition}"),
        }
    }

    /// The prefix of every bundle key.
    pub fn bundles_prefix(&self) -> String {
        format!("{}bundles/", self.root)
    }

    /// The prefix of every partition key of `topic`.
    pub fn partitions_prefix(&self, topic: &str) -> String {
        format!("{}partitions/{topic}/", self.root)
    }

    /// The prefix of every broker registration.
    pub fn brokers_prefix(&self) -> String {
        format!("{}brokers/", self.root)
    }

    /// Parses a key of this cluster back; `None` for a key outside the layout (another cluster's,
    /// or one written by a later layout version), which readers ignore.
    pub fn parse(&self, key: &[u8]) -> Option<Key> {
        let key = std::str::from_utf8(key).ok()?;
        let rest = key.strip_prefix(self.root.as_str())?;
        let (kind, name) = rest.split_once('/').unwrap_or((rest, ""));
        let id = |text: &str| text.parse::<i32>().ok().filter(|id| *id >= 0);
        match (kind, name) {
            ("cluster", "") => Some(Key::Cluster),
            ("controller", "") => Some(Key::Controller),
            ("brokers", id_text) => id(id_text).map(Key::Broker),
            ("load", id_text) => id(id_text).map(Key::Load),
            ("ids", "producer_id_block") => Some(Key::ProducerIdBlock),
            ("topics", topic) if !topic.is_empty() && !topic.contains('/') => {
                Some(Key::Topic(topic.to_owned()))
            }
            ("partitions", rest) => {
                let (topic, partition) = topic_and_partition(rest)?;
                Some(Key::Partition(topic, id(partition)?))
            }
            ("reassign", rest) => {
                let (topic, partition) = topic_and_partition(rest)?;
                Some(Key::Reassign(topic, id(partition)?))
            }
            ("bundles", rest) => {
                let (namespace, range) = rest.rsplit_once('/')?;
                if namespace.is_empty() || namespace.contains('/') {
                    return None;
                }
                Some(Key::Bundle(BundleId {
                    namespace: namespace.to_owned(),
                    range: parse_range(range)?,
                }))
            }
            _ => None,
        }
    }
}

/// `<topic>/<partition text>` of a partition-scoped key.
fn topic_and_partition(rest: &str) -> Option<(String, &str)> {
    let (topic, partition) = rest.rsplit_once('/')?;
    if topic.is_empty() || topic.contains('/') {
        return None;
    }
    Some((topic.to_owned(), partition))
}

/// A bundle range from its Pulsar name, `0x40000000_0x80000000`; the last bundle's closed end
/// `0xffffffff` stands for the end of the hash space ([`HashRange::name`] writes it so).
pub fn parse_range(name: &str) -> Option<HashRange> {
    let (lo, hi) = name.split_once('_')?;
    let hex = |text: &str| {
        let digits = text.strip_prefix("0x")?;
        (digits.len() == 8)
            .then(|| u64::from_str_radix(digits, 16).ok())
            .flatten()
    };
    let (lo, hi) = (hex(lo)?, hex(hi)?);
    let hi = if hi == HASH_SPACE - 1 { HASH_SPACE } else { hi };
    (lo < hi).then_some(HashRange { lo, hi })
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Key::Cluster => write!(f, "cluster"),
            Key::Broker(id) => write!(f, "brokers/{id}"),
            Key::Controller => write!(f, "controller"),
            Key::Topic(topic) => write!(f, "topics/{topic}"),
            Key::Partition(topic, partition) => write!(f, "partitions/{topic}/{partition}"),
            Key::Load(id) => write!(f, "load/{id}"),
            Key::ProducerIdBlock => write!(f, "ids/producer_id_block"),
            Key::Bundle(bundle) => write!(f, "bundles/{bundle}"),
            Key::Reassign(topic, partition) => write!(f, "reassign/{topic}/{partition}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn keys_follow_the_design_layout() {
        let layout = Layout::new("prod").unwrap();
        assert_eq!(layout.root(), "/skiff/prod/v1/");
        assert_eq!(layout.key(&Key::Broker(3)), "/skiff/prod/v1/brokers/3");
        assert_eq!(
            layout.key(&Key::Partition("a.b".into(), 7)),
            "/skiff/prod/v1/partitions/a.b/7"
        );
        assert_eq!(
            layout.key(&Key::ProducerIdBlock),
            "/skiff/prod/v1/ids/producer_id_block"
        );
    }

    #[test]
    fn foreign_and_malformed_keys_are_not_parsed() {
        let layout = Layout::new("a").unwrap();
        for key in [
            "/skiff/b/v1/brokers/1",
            "/skiff/a/v2/brokers/1",
            "/skiff/a/v1/brokers/-1",
            "/skiff/a/v1/brokers/x",
            "/skiff/a/v1/partitions/t",
            "/skiff/a/v1/partitions//1",
            "/skiff/a/v1/topics/",
            "/skiff/a/v1/unknown",
            "/skiff/a/v1/bundles/t/0x00000000",
            "/skiff/a/v1/bundles/t/0x80000000_0x40000000",
            "/skiff/a/v1/bundles//0x00000000_0xffffffff",
            "/skiff/a/v1/reassign/t/x",
        ] {
            assert_eq!(layout.parse(key.as_bytes()), None, "{key}");
        }
        assert_eq!(layout.parse(&[0xff, 0xfe]), None);
    }

    #[test]
    fn bad_cluster_names_are_refused_with_a_reason() {
        assert!(Layout::new("").is_err());
        assert!(Layout::new("a/b").is_err());
        assert!(Layout::new(&"x".repeat(65)).is_err());
        assert!(Layout::new("skiff-1_a.b").is_ok());
    }

    fn any_key() -> impl Strategy<Value = Key> {
        let topic = "[a-zA-Z0-9._-]{1,40}";
        prop_oneof![
            Just(Key::Cluster),
            Just(Key::Controller),
            Just(Key::ProducerIdBlock),
            (0..i32::MAX).prop_map(Key::Broker),
            (0..i32::MAX).prop_map(Key::Load),
            topic.prop_map(Key::Topic),
            (topic, 0..i32::MAX).prop_map(|(t, p)| Key::Partition(t, p)),
            (topic, 0..i32::MAX).prop_map(|(t, p)| Key::Reassign(t, p)),
            (topic, 0..HASH_SPACE - 1, 1..HASH_SPACE).prop_filter_map(
                "lo < hi",
                |(namespace, lo, hi)| {
                    // A range ending at the last hash is written as the end of the space.
                    let hi = if hi == HASH_SPACE - 1 { HASH_SPACE } else { hi };
                    (lo < hi).then_some(Key::Bundle(BundleId {
                        namespace,
                        range: HashRange { lo, hi },
                    }))
                }
            ),
        ]
    }

    proptest! {
        #[test]
        fn every_key_parses_back_to_itself(key in any_key()) {
            let layout = Layout::new("c").unwrap();
            prop_assert_eq!(layout.parse(layout.key(&key).as_bytes()), Some(key));
        }
    }
}
