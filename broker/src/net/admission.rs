//! Which connections the broker holds: `max.connections` across listeners and
//! `max.connections.per.ip` (with its overrides) per client address, decided once per accepted
//! socket, and the idle connection closed to make room at the broker-wide limit.
//!
//! At a limit a client is never left waiting (issue 14: a blocked accept loop left new clients
//! timing out in the kernel's queue while idle ones held every slot):
//! - over its address's limit, the new connection is closed at once, as Kafka's acceptor does
//!   (`TooManyConnectionsException`): the limit exists to stop one host taking the broker, so its
//!   own newest connection is the one to refuse;
//! - at `max.connections`, the connection idle longest is closed and the new one takes its slot.
//!   That is the connection Kafka picks when it is over its broker-wide limit (the processor's
//!   `closeExcessConnections` closes the selector's least recently used channel); Kafka does it
//!   only for its protected inter-broker listener and otherwise blocks the acceptor, which is the
//!   lockout. Refusing the newcomer instead would keep the broker serving nobody new until idle
//!   clients reach `connections.max.idle.ms` (10 minutes); a Kafka client whose idle connection
//!   was closed reconnects on its next request. Only a connection between requests that has been
//!   idle at least [`EVICTABLE_IDLE_MS_MIN`] is closed, so a broker full of working clients
//!   refuses the newcomer (closed at once) rather than cycling them through reconnects.
//!
//! The table is pure over the time passed in; a connection marks itself busy and idle through
//! atomics on its own [`Slot`], so requests never take the table's lock.
//!
//! Must never: close a connection in the middle of a request, count a connection twice or forget
//! one (the counts go down exactly once, when a connection is closed or evicted), or hold a
//! connection that no limit admitted.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use crate::config::Config;

/// How long a connection must have been idle before it may be closed to make room: a client
/// between two requests of the same burst is working, not idle.
pub(crate) const EVICTABLE_IDLE_MS_MIN: u64 = 1000;

/// [`Slot::state`] while a request is being read, handled or answered.
const BUSY: u64 = u64::MAX;
/// [`Slot::state`] once the slot was taken away to make room.
const EVICTED: u64 = u64::MAX - 1;

/// One connection's activity, shared by its task and the table: idle since a time (ms on the
/// table's clock), busy, or evicted.
#[derive(Debug)]
pub(crate) struct Slot {
    state: AtomicU64,
    evicted: Notify,
}

impl Slot {
    fn idle_since(now_ms: u64) -> Self {
        debug_assert!(now_ms < EVICTED);
        Self {
            state: AtomicU64::new(now_ms),
            evicted: Notify::new(),
        }
    }

    /// A request's size prefix arrived: the connection is busy. False if it was evicted first
    /// (the connection must close without reading on).
    pub(crate) fn begin_request(&self) -> bool {
        self.state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |state| {
                (state != EVICTED).then_some(BUSY)
            })
            .is_ok()
    }

    /// The response is written: idle again from `now_ms`.
    pub(crate) fn end_request(&self, now_ms: u64) {
        debug_assert!(now_ms < EVICTED);
        // Only a busy slot is ended, and the table never evicts a busy one.
        let previous = self.state.swap(now_ms.min(EVICTED - 1), Ordering::AcqRel);
        debug_assert_eq!(previous, BUSY, "end_request without begin_request");
    }

    /// Resolves once the table has evicted this connection.
    pub(crate) async fn evicted(&self) {
        self.evicted.notified().await;
    }

    /// Takes the slot away if it has been idle since `idle_since_ms` or earlier.
    fn try_evict(&self, idle_since_ms: u64) -> bool {
        let taken = self
            .state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |state| {
                (state <= idle_since_ms).then_some(EVICTED)
            })
            .is_ok();
        if taken {
            // Stores a permit if the connection is not waiting yet: it sees it at its next wait.
            self.evicted.notify_one();
        }
        taken
    }

    /// Since when the connection is idle, if it is.
    fn idle_since_ms(&self) -> Option<u64> {
        let state = self.state.load(Ordering::Acquire);
        (state < EVICTED).then_some(state)
    }
}

/// The limits, from the config (parsed once there; `max.connections` may change at runtime,
/// [`Admissions::set_max_connections`]).
#[derive(Debug, Clone)]
pub(crate) struct ConnectionLimits {
    /// Connections across listeners (`max.connections`, after the open-file check).
    pub(crate) max_connections: usize,
    /// The most connections the open-file limit holds: a dynamic `max.connections` above it is
    /// capped to it.
    pub(crate) max_connections_ceiling: usize,
    /// `max.connections.per.ip`.
    pub(crate) per_ip: usize,
    /// `max.connections.per.ip.overrides`.
    pub(crate) per_ip_overrides: HashMap<IpAddr, usize>,
}

impl ConnectionLimits {
    /// The config's limits with `max_connections` the capacity the open-file limit allows.
    pub(crate) fn new(config: &Config, max_connections: usize, ceiling: usize) -> Self {
        let count = |limit: i32| usize::try_from(limit).unwrap_or(0);
        Self {
            max_connections,
            max_connections_ceiling: ceiling.max(max_connections),
            per_ip: count(config.max_connections_per_ip),
            per_ip_overrides: config
                .max_connections_per_ip_overrides
                .limits
                .iter()
                .map(|(address, limit)| (*address, count(*limit)))
                .collect(),
        }
    }

    fn for_address(&self, address: &IpAddr) -> usize {
        self.per_ip_overrides
            .get(address)
            .copied()
            .unwrap_or(self.per_ip)
    }
}

/// What the table decided about a new connection.
#[derive(Debug)]
pub(crate) enum Decision {
    /// Serve it; `evicted` says whether an idle connection was closed to make room.
    Admitted {
        /// Its id in the table, for [`ConnectionTable::release`].
        id: u64,
        /// Its activity, shared with the table.
        slot: Arc<Slot>,
        /// An idle connection was evicted for it.
        evicted: bool,
    },
    /// Its address holds as many connections as its limit allows.
    RefusedPerIp {
        /// That limit.
        limit: usize,
    },
    /// `max.connections` are open and none has been idle long enough to evict.
    RefusedFull,
}

/// Open connections by id and by client address.
#[derive(Debug)]
pub(crate) struct ConnectionTable {
    limits: ConnectionLimits,
    open: HashMap<u64, (IpAddr, Arc<Slot>)>,
    by_address: HashMap<IpAddr, usize>,
    next_id: u64,
    /// The longest-idle connections found by the last scan, oldest last (see
    /// [`ConnectionTable::evict_longest_idle`]).
    eviction_candidates: Vec<(u64, u64)>,
}

impl ConnectionTable {
    pub(crate) fn new(limits: ConnectionLimits) -> Self {
        Self {
            limits,
            open: HashMap::new(),
            by_address: HashMap::new(),
            next_id: 0,
            eviction_candidates: Vec::new(),
        }
    }

    /// Open connections.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.open.len()
    }

    /// Decides about a connection from `address` accepted at `now_ms`.
    pub(crate) fn admit(&mut self, address: IpAddr, now_ms: u64) -> Decision {
        let address = address.to_canonical();
        let limit = self.limits.for_address(&address);
        if self.by_address.get(&address).copied().unwrap_or(0) >= limit {
            return Decision::RefusedPerIp { limit };
        }
        let mut evicted = false;
        if self.open.len() > self.limits.max_connections {
            // Above a limit lowered at runtime: no room until enough connections close.
            return Decision::RefusedFull;
        }
        if self.open.len() == self.limits.max_connections {
            if !self.evict_longest_idle(now_ms) {
                return Decision::RefusedFull;
            }
            evicted = true;
        }
        let id = self.next_id;
        self.next_id += 1;
        let slot = Arc::new(Slot::idle_since(now_ms));
        self.open.insert(id, (address, slot.clone()));
        *self.by_address.entry(address).or_insert(0) += 1;
        debug_assert!(self.open.len() <= self.limits.max_connections);
        Decision::Admitted { id, slot, evicted }
    }

    /// Forgets connection `id` (closed); nothing if it was evicted already.
    pub(crate) fn release(&mut self, id: u64) {
        if let Some((address, _)) = self.open.remove(&id) {
            self.forget_address(address);
        }
    }

    fn forget_address(&mut self, address: IpAddr) {
        if let Some(count) = self.by_address.get_mut(&address) {
            *count -= 1;
            if *count == 0 {
                self.by_address.remove(&address);
            }
        }
    }

    /// Evicts the connection idle longest if it has been idle at least [`EVICTABLE_IDLE_MS_MIN`].
    ///
    /// Connections mark themselves busy and idle without the table's lock, so the table keeps no
    /// ordered index; instead a scan of the open connections (only at the limit) keeps the
    /// [`EVICTION_CANDIDATES_MAX`] longest idle, oldest last, and the next evictions take from
    /// them. That stays "the longest idle": a connection not among them was idle since later
    /// than all of them at the scan, and idle-since times only grow; one that was active since,
    /// or closed, fails its compare-and-swap or its lookup and the next is tried. (A scan of
    /// 10,016 connections takes about 2 ms: the first fresh client at the limit took 2.4 ms, the
    /// next ones 0.3 ms, in bench/reports/idle-connections.md.)
    fn evict_longest_idle(&mut self, now_ms: u64) -> bool {
        let Some(idle_since_at_most) = now_ms.checked_sub(EVICTABLE_IDLE_MS_MIN) else {
            return false;
        };
        let mut rescanned = false;
        loop {
            let Some((since, id)) = self.eviction_candidates.pop() else {
                if rescanned {
                    return false;
                }
                self.collect_eviction_candidates(idle_since_at_most);
                rescanned = true;
                continue;
            };
            let Some((address, slot)) = self.open.get(&id).cloned() else {
                continue;
            };
            if slot.try_evict(since) {
                self.open.remove(&id);
                self.forget_address(address);
                return true;
            }
        }
    }

    /// Replaces the candidates with the [`EVICTION_CANDIDATES_MAX`] connections idle longest
    /// (since `idle_since_at_most` or earlier), the oldest last.
    fn collect_eviction_candidates(&mut self, idle_since_at_most: u64) {
        let mut idle: Vec<(u64, u64)> = self
            .open
            .iter()
            .filter_map(|(id, (_, slot))| Some((slot.idle_since_ms()?, *id)))
            .filter(|(since, _)| *since <= idle_since_at_most)
            .collect();
        if idle.len() > EVICTION_CANDIDATES_MAX {
            idle.select_nth_unstable(EVICTION_CANDIDATES_MAX);
            idle.truncate(EVICTION_CANDIDATES_MAX);
        }
        idle.sort_unstable_by(|left, right| right.cmp(left));
        self.eviction_candidates = idle;
    }
}

/// Longest-idle connections one scan keeps for the evictions after it.
const EVICTION_CANDIDATES_MAX: usize = 64;

/// The table shared by the accept loop (admissions) and the connections (releases), with the
/// clock its times are measured on.
#[derive(Debug)]
pub(crate) struct Admissions {
    table: Mutex<ConnectionTable>,
    epoch: tokio::time::Instant,
}

impl Admissions {
    pub(crate) fn new(limits: ConnectionLimits) -> Arc<Self> {
        Arc::new(Self {
            table: Mutex::new(ConnectionTable::new(limits)),
            epoch: crate::clock::timer_now(),
        })
    }

    /// Applies a `max.connections` set at runtime (a dynamic broker config), capped to what the
    /// open-file limit holds. Connections above a lowered limit stay; new ones wait for room.
    pub(crate) fn set_max_connections(&self, wanted: usize) {
        let Ok(mut table) = self.table.lock() else {
            return;
        };
        let ceiling = table.limits.max_connections_ceiling;
        if wanted > ceiling {
            tracing::warn!(
                wanted,
                serving = ceiling,
                "max.connections above what the open-file limit holds; capped"
            );
        }
        table.limits.max_connections = wanted.min(ceiling).max(1);
    }

    /// Follows the dynamic broker configs' `max.connections` until shutdown.
    pub(crate) async fn follow_max_connections(
        self: Arc<Self>,
        mut configs: tokio::sync::watch::Receiver<Arc<Config>>,
        mut shutdown: tokio::sync::watch::Receiver<bool>,
    ) {
        loop {
            let wanted = configs.borrow_and_update().max_connections;
            self.set_max_connections(wanted);
            tokio::select! {
                changed = configs.changed() => if changed.is_err() { return },
                _ = shutdown.changed() => return,
            }
        }
    }

    /// Milliseconds since the table was made.
    pub(crate) fn now_ms(&self) -> u64 {
        let elapsed = crate::clock::timer_now().saturating_duration_since(self.epoch);
        u64::try_from(elapsed.as_millis()).unwrap_or(EVICTED - 1)
    }

    /// Decides about a connection from `address`; an admitted one is released when the returned
    /// guard drops.
    pub(crate) fn admit(self: &Arc<Self>, address: IpAddr) -> Result<Admitted, Refused> {
        let now_ms = self.now_ms();
        let decision = self
            .table
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .admit(address, now_ms);
        match decision {
            Decision::Admitted { id, slot, evicted } => Ok(Admitted {
                admissions: self.clone(),
                id,
                slot,
                evicted,
            }),
            Decision::RefusedPerIp { limit } => Err(Refused::PerIp { limit }),
            Decision::RefusedFull => Err(Refused::Full),
        }
    }
}

/// Why a new connection was closed at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refused {
    /// The address is at `max.connections.per.ip` (or its override).
    #[error("the address already holds its limit of {limit} connections (max.connections.per.ip)")]
    PerIp {
        /// The limit.
        limit: usize,
    },
    /// `max.connections` are open and every one is busy or recently active.
    #[error("max.connections are open and none has been idle for {EVICTABLE_IDLE_MS_MIN} ms")]
    Full,
}

/// An admitted connection: its slot, released from the table when dropped.
#[derive(Debug)]
pub(crate) struct Admitted {
    admissions: Arc<Admissions>,
    id: u64,
    slot: Arc<Slot>,
    /// Whether an idle connection was evicted to make room for this one.
    pub(crate) evicted: bool,
}

impl Admitted {
    /// See [`Slot::begin_request`].
    pub(crate) fn begin_request(&self) -> bool {
        self.slot.begin_request()
    }

    /// See [`Slot::end_request`].
    pub(crate) fn end_request(&self) {
        self.slot.end_request(self.admissions.now_ms());
    }

    /// Resolves once this connection has been evicted to make room for a new one.
    pub(crate) async fn evicted(&self) {
        self.slot.evicted().await;
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.admissions
            .table
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .release(self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("ip")
    }

    fn limits(
        max_connections: usize,
        per_ip: usize,
        overrides: &[(&str, usize)],
    ) -> ConnectionLimits {
        ConnectionLimits {
            max_connections,
            max_connections_ceiling: usize::MAX,
            per_ip,
            per_ip_overrides: overrides
                .iter()
                .map(|(address, limit)| (ip(address), *limit))
                .collect(),
        }
    }

    fn admitted(decision: Decision) -> (u64, Arc<Slot>, bool) {
        match decision {
            Decision::Admitted { id, slot, evicted } => (id, slot, evicted),
            other => panic!("expected an admission, got {other:?}"),
        }
    }

    #[test]
    fn per_ip_limits_and_overrides_refuse_the_newest() {
        let mut table = ConnectionTable::new(limits(100, 2, &[("10.0.0.9", 0), ("10.0.0.5", 3)]));
        let first = admitted(table.admit(ip("10.0.0.1"), 0));
        admitted(table.admit(ip("10.0.0.1"), 0));
        assert!(matches!(
            table.admit(ip("10.0.0.1"), 5000),
            Decision::RefusedPerIp { limit: 2 }
        ));
        // The IPv4-mapped form is the same client.
        assert!(matches!(
            table.admit(ip("::ffff:10.0.0.1"), 5000),
            Decision::RefusedPerIp { limit: 2 }
        ));
        assert!(matches!(
            table.admit(ip("10.0.0.9"), 0),
            Decision::RefusedPerIp { limit: 0 }
        ));
        for _ in 0..3 {
            admitted(table.admit(ip("10.0.0.5"), 0));
        }
        assert!(matches!(
            table.admit(ip("10.0.0.5"), 0),
            Decision::RefusedPerIp { limit: 3 }
        ));
        table.release(first.0);
        admitted(table.admit(ip("10.0.0.1"), 0));
        assert_eq!(table.len(), 5);
    }

    #[test]
    fn at_the_limit_the_longest_idle_connection_makes_room() {
        let mut table = ConnectionTable::new(limits(3, usize::MAX, &[]));
        let oldest = admitted(table.admit(ip("10.0.0.1"), 100));
        let busy = admitted(table.admit(ip("10.0.0.2"), 50));
        let newer = admitted(table.admit(ip("10.0.0.3"), 200));
        // The busy one is idle since earliest, but busy connections are never evicted.
        assert!(busy.1.begin_request());
        let fresh = admitted(table.admit(ip("10.0.0.4"), 5000));
        assert!(fresh.2, "an idle connection was evicted");
        assert!(
            !oldest.1.begin_request(),
            "the longest idle one was evicted"
        );
        assert!(newer.1.begin_request());
        newer.1.end_request(5200);
        assert_eq!(table.len(), 3);
        // Its release after the eviction changes nothing.
        table.release(oldest.0);
        assert_eq!(table.len(), 3);
        // Nobody has been idle for 1 s at 5500; at 6000 `fresh` (idle since 5000) has, and is
        // idle longer than `newer` (since 5200).
        assert!(matches!(
            table.admit(ip("10.0.0.5"), 5500),
            Decision::RefusedFull
        ));
        let next = admitted(table.admit(ip("10.0.0.5"), 6000));
        assert!(next.2);
        assert!(!fresh.1.begin_request());
        assert!(
            newer.1.begin_request(),
            "the more recently active one stays"
        );
    }

    #[test]
    fn a_full_table_of_busy_or_recent_connections_refuses_the_newcomer() {
        let mut table = ConnectionTable::new(limits(2, usize::MAX, &[]));
        let a = admitted(table.admit(ip("10.0.0.1"), 0));
        admitted(table.admit(ip("10.0.0.1"), 900));
        assert!(a.1.begin_request());
        // The idle one is only 999 ms idle; the busy one cannot go.
        assert!(matches!(
            table.admit(ip("10.0.0.2"), 1899),
            Decision::RefusedFull
        ));
        assert_eq!(table.len(), 2);
        admitted(table.admit(ip("10.0.0.2"), 1900));
        // An eviction frees the evicted address's per-ip count too.
        let mut one_per_ip = ConnectionTable::new(limits(1, 1, &[]));
        admitted(one_per_ip.admit(ip("10.0.0.1"), 0));
        admitted(one_per_ip.admit(ip("10.0.0.2"), 2000));
        admitted(one_per_ip.admit(ip("10.0.0.1"), 4000));
    }

    #[test]
    fn evictions_keep_taking_the_longest_idle_across_scans() {
        let count = EVICTION_CANDIDATES_MAX * 2 + 10;
        let mut table = ConnectionTable::new(limits(count, usize::MAX, &[]));
        let slots: Vec<Arc<Slot>> = (0..count)
            .map(|index| admitted(table.admit(ip("10.0.0.1"), index as u64 * 10)).1)
            .collect();
        // Once scanned as a candidate, connection 1 works again: it must be passed over.
        let now = count as u64 * 10 + EVICTABLE_IDLE_MS_MIN;
        admitted(table.admit(ip("10.0.0.2"), now));
        assert!(!slots[0].begin_request(), "the longest idle goes first");
        assert!(slots[1].begin_request());
        slots[1].end_request(now);
        let mut evicted = vec![0];
        for _ in 0..count - 3 {
            let (_, _, made_room) = admitted(table.admit(ip("10.0.0.2"), now));
            assert!(made_room);
            let next = (0..count)
                .find(|index| !evicted.contains(index) && slots[*index].idle_since_ms().is_none())
                .expect("one more was evicted");
            evicted.push(next);
        }
        let expected: Vec<usize> = std::iter::once(0).chain(2..count - 1).collect();
        assert_eq!(evicted, expected, "oldest first, the reactivated one last");
        assert!(
            slots[1].begin_request(),
            "still idle since `now`: not old enough yet"
        );
    }

    #[tokio::test]
    async fn an_evicted_connection_is_woken_even_if_it_waits_later() {
        let slot = Slot::idle_since(0);
        assert!(slot.try_evict(0));
        tokio::time::timeout(std::time::Duration::from_secs(5), slot.evicted())
            .await
            .expect("the stored permit wakes it");
        assert!(!slot.try_evict(0), "evicted once");
    }
}
