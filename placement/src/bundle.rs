//! Bundles: partitions grouped per namespace into ranges of the 32-bit CRC32 hash space, each
//! range owned by one broker (Pulsar's namespace bundles, docs/design/placement.md §1.4).
//!
//! Owns the hash of a partition name, the range layout, the lookup, splitting a range at given
//! cut points, ownership and per-bundle load, and the serializable snapshot operators see. It does
//! not decide where cuts go ([`super::split`]) nor who should own a bundle ([`super::shed`]).

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::{NodeId, PlacementError};

/// Size of the bundle hash space: CRC32 values, zero-extended, lie in [0, 2³²).
pub const HASH_SPACE: u64 = 1 << 32;

/// Bundles a new namespace starts with (`defaultNumberOfNamespaceBundles`).
pub const NAMESPACE_BUNDLES_DEFAULT: usize = 4;

/// Most bundles one namespace may be split into (`loadBalancerNamespaceMaximumBundles`): bounds
/// the map's size and the number of units a shedder has to consider.
pub const NAMESPACE_BUNDLES_MAX: usize = 128;

/// A half-open hash range [lo, hi) with hi ≤ [`HASH_SPACE`]. Pulsar writes the last bundle as the
/// closed range [lo, 0xffffffff]; with 64-bit bounds that is simply [lo, 2³²).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct HashRange {
    /// First hash in the range.
    pub lo: u64,
    /// One past the last hash in the range.
    pub hi: u64,
}

impl HashRange {
    /// Whether `hash` falls in the range.
    pub fn contains(&self, hash: u32) -> bool {
        let h = u64::from(hash);
        self.lo <= h && h < self.hi
    }

    /// Pulsar's bundle name, `0x40000000_0x80000000` (the last bundle ends `_0xffffffff`).
    pub fn name(&self) -> String {
        format!("0x{:08x}_0x{:08x}", self.lo, self.hi.min(HASH_SPACE - 1))
    }
}

/// How a topic name maps to its namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum NamespaceRule {
    /// Each topic is its own namespace: its partitions spread over that topic's bundles.
    Topic,
    /// The namespace is the topic name up to (not including) the `segments`-th `separator`, e.g.
    /// `Prefix { separator: '.', segments: 1 }` puts `orders.eu` and `orders.us` in `orders`.
    /// A topic with fewer separators is its own namespace.
    Prefix {
        /// Separator character.
        separator: char,
        /// Number of leading segments that form the namespace (at least 1).
        segments: usize,
    },
}

impl NamespaceRule {
    /// The namespace of `topic`.
    pub fn namespace_of<'a>(&self, topic: &'a str) -> &'a str {
        match self {
            Self::Topic => topic,
            Self::Prefix {
                separator,
                segments,
            } => topic
                .match_indices(*separator)
                .nth(segments.saturating_sub(1))
                .map_or(topic, |(at, _)| &topic[..at]),
        }
    }
}

/// The name a partition is hashed by: Kafka's `topic-partition` form.
pub fn partition_name(topic: &str, partition: u32) -> String {
    format!("{topic}-{partition}")
}

/// CRC32 (IEEE, as Guava's `crc32()`) of the partition name's UTF-8 bytes. Each partition hashes
/// separately, so the partitions of one topic spread over the bundles.
pub fn partition_hash(topic: &str, partition: u32) -> u32 {
    crc32fast::hash(partition_name(topic, partition).as_bytes())
}

/// Names one bundle: its namespace and hash range.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct BundleId {
    /// Namespace.
    pub namespace: String,
    /// Hash range.
    pub range: HashRange,
}

impl fmt::Display for BundleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.range.name())
    }
}

/// Measured traffic of a bundle (or a partition): what shedders weigh.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct BundleLoad {
    /// Messages in + out per second.
    pub msg_rate_per_second: f64,
    /// Bytes in + out per second.
    pub throughput_bytes_per_second: f64,
}

#[derive(Debug, Clone, PartialEq)]
struct Bundle {
    range: HashRange,
    owner: Option<NodeId>,
    load: BundleLoad,
}

/// Every namespace's bundles, their owners and loads.
#[derive(Debug, Clone, PartialEq)]
pub struct BundleMap {
    rule: NamespaceRule,
    bundle_count_default: usize,
    /// Per namespace, bundles sorted by `range.lo`, covering [0, 2³²) without gaps or overlaps.
    namespaces: BTreeMap<String, Vec<Bundle>>,
}

impl BundleMap {
    /// An empty map; namespaces are created with `bundle_count_default` bundles on first use.
    pub fn new(rule: NamespaceRule, bundle_count_default: usize) -> Result<Self, PlacementError> {
        if !(1..=NAMESPACE_BUNDLES_MAX).contains(&bundle_count_default) {
            return Err(PlacementError::BadBundleCount(bundle_count_default));
        }
        Ok(Self {
            rule,
            bundle_count_default,
            namespaces: BTreeMap::new(),
        })
    }

    /// The namespace rule in force.
    pub fn rule(&self) -> &NamespaceRule {
        &self.rule
    }

    /// Creates `namespace` with the default bundle count if it does not exist.
    pub fn ensure_namespace(&mut self, namespace: &str) {
        if self.namespaces.contains_key(namespace) {
            return;
        }
        let count = self.bundle_count_default as u64;
        let step = HASH_SPACE / count;
        let bundles = (0..count)
            .map(|i| Bundle {
                range: HashRange {
                    lo: i * step,
                    hi: if i + 1 == count {
                        HASH_SPACE
                    } else {
                        (i + 1) * step
                    },
                },
                owner: None,
                load: BundleLoad::default(),
            })
            .collect();
        let _ = self.namespaces.insert(namespace.to_owned(), bundles);
    }

    /// The bundle holding partition `partition` of `topic`, creating its namespace if needed.
    /// This is what topic creation calls for every new partition.
    pub fn locate(&mut self, topic: &str, partition: u32) -> BundleId {
        let namespace = self.rule.namespace_of(topic).to_owned();
        self.ensure_namespace(&namespace);
        self.bundle_of(topic, partition).unwrap_or(BundleId {
            // Unreachable by construction (the namespace now exists and covers the whole space);
            // answer the whole space rather than panic.
            namespace,
            range: HashRange {
                lo: 0,
                hi: HASH_SPACE,
            },
        })
    }

    /// The bundle holding partition `partition` of `topic`, if its namespace exists.
    pub fn bundle_of(&self, topic: &str, partition: u32) -> Option<BundleId> {
        let namespace = self.rule.namespace_of(topic);
        self.bundle_of_hash(namespace, partition_hash(topic, partition))
    }

    /// The bundle of `namespace` containing `hash`: a binary search for the last range starting
    /// at or before it.
    pub fn bundle_of_hash(&self, namespace: &str, hash: u32) -> Option<BundleId> {
        let bundles = self.namespaces.get(namespace)?;
        let at = bundles.partition_point(|b| b.range.lo <= u64::from(hash));
        let bundle = bundles.get(at.checked_sub(1)?)?;
        Some(BundleId {
            namespace: namespace.to_owned(),
            range: bundle.range,
        })
    }

    fn bundle(&self, id: &BundleId) -> Result<&Bundle, PlacementError> {
        self.namespaces
            .get(&id.namespace)
            .and_then(|bs| bs.iter().find(|b| b.range == id.range))
            .ok_or_else(|| PlacementError::UnknownBundle(id.to_string()))
    }

    fn bundle_mut(&mut self, id: &BundleId) -> Result<&mut Bundle, PlacementError> {
        self.namespaces
            .get_mut(&id.namespace)
            .and_then(|bs| bs.iter_mut().find(|b| b.range == id.range))
            .ok_or_else(|| PlacementError::UnknownBundle(id.to_string()))
    }

    /// The owner of a bundle (`None` if nobody owns it yet).
    pub fn owner(&self, id: &BundleId) -> Result<Option<NodeId>, PlacementError> {
        Ok(self.bundle(id)?.owner)
    }

    /// Sets the owner of a bundle.
    pub fn set_owner(&mut self, id: &BundleId, owner: NodeId) -> Result<(), PlacementError> {
        self.bundle_mut(id)?.owner = Some(owner);
        Ok(())
    }

    /// Records the measured load of a bundle.
    pub fn set_load(&mut self, id: &BundleId, load: BundleLoad) -> Result<(), PlacementError> {
        self.bundle_mut(id)?.load = load;
        Ok(())
    }

    /// Every bundle with its owner and load, namespaces in name order, ranges ascending.
    pub fn bundles(&self) -> impl Iterator<Item = (BundleId, Option<NodeId>, BundleLoad)> + '_ {
        self.namespaces.iter().flat_map(|(ns, bundles)| {
            bundles.iter().map(move |b| {
                (
                    BundleId {
                        namespace: ns.clone(),
                        range: b.range,
                    },
                    b.owner,
                    b.load,
                )
            })
        })
    }

    /// Number of bundles in `namespace` (0 if it does not exist).
    pub fn bundle_count(&self, namespace: &str) -> usize {
        self.namespaces.get(namespace).map_or(0, Vec::len)
    }

    /// Replaces bundle `id` by the sub-ranges cut at `cuts` (positions strictly inside the range;
    /// others are ignored, duplicates merged). Children keep the parent's owner; the parent's
    /// load is shared out by hash width until the children are measured. Returns the children.
    pub fn split(&mut self, id: &BundleId, cuts: &[u64]) -> Result<Vec<BundleId>, PlacementError> {
        let parent = self.bundle(id)?.clone();
        let mut cuts: Vec<u64> = cuts
            .iter()
            .copied()
            .filter(|&c| parent.range.lo < c && c < parent.range.hi)
            .collect();
        cuts.sort_unstable();
        cuts.dedup();
        if cuts.is_empty() {
            return Err(PlacementError::SplitRefused {
                bundle: id.to_string(),
                why: "no cut point inside the range",
            });
        }
        let count = self.bundle_count(&id.namespace);
        if count + cuts.len() > NAMESPACE_BUNDLES_MAX {
            return Err(PlacementError::SplitRefused {
                bundle: id.to_string(),
                why: "namespace would exceed the maximum bundle count",
            });
        }
        let width = (parent.range.hi - parent.range.lo) as f64;
        let mut edges = vec![parent.range.lo];
        edges.extend(&cuts);
        edges.push(parent.range.hi);
        let children: Vec<Bundle> = edges
            .windows(2)
            .filter_map(|w| {
                let &[lo, hi] = w else {
                    return None; // windows(2) yields pairs only
                };
                let share = (hi - lo) as f64 / width;
                Some(Bundle {
                    range: HashRange { lo, hi },
                    owner: parent.owner,
                    load: BundleLoad {
                        msg_rate_per_second: parent.load.msg_rate_per_second * share,
                        throughput_bytes_per_second: parent.load.throughput_bytes_per_second
                            * share,
                    },
                })
            })
            .collect();
        let ids = children
            .iter()
            .map(|c| BundleId {
                namespace: id.namespace.clone(),
                range: c.range,
            })
            .collect();
        let bundles = self
            .namespaces
            .get_mut(&id.namespace)
            .ok_or_else(|| PlacementError::UnknownBundle(id.to_string()))?;
        let at = bundles
            .iter()
            .position(|b| b.range == parent.range)
            .ok_or_else(|| PlacementError::UnknownBundle(id.to_string()))?;
        let _ = bundles.splice(at..=at, children);
        Ok(ids)
    }

    /// What operators see: every bundle's range, owner and load.
    pub fn snapshot(&self) -> BundleSnapshot {
        BundleSnapshot {
            bundles: self
                .bundles()
                .map(|(id, owner, load)| BundleEntry {
                    name: id.to_string(),
                    namespace: id.namespace.clone(),
                    hash_lo: id.range.lo,
                    hash_hi: id.range.hi,
                    owner,
                    load,
                })
                .collect(),
        }
    }
}

/// One bundle in a [`BundleSnapshot`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BundleEntry {
    /// `namespace/0x…_0x…`.
    pub name: String,
    /// Namespace.
    pub namespace: String,
    /// First hash.
    pub hash_lo: u64,
    /// One past the last hash.
    pub hash_hi: u64,
    /// Owning broker, if any.
    pub owner: Option<NodeId>,
    /// Last measured load.
    pub load: BundleLoad,
}

/// The serializable view of all bundles the broker serves as JSON to operators.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BundleSnapshot {
    /// Bundles, namespaces in name order, ranges ascending.
    pub bundles: Vec<BundleEntry>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_layout_matches_pulsar() {
        let mut map = BundleMap::new(NamespaceRule::Topic, NAMESPACE_BUNDLES_DEFAULT).unwrap();
        map.ensure_namespace("t");
        let names: Vec<String> = map.bundles().map(|(id, _, _)| id.range.name()).collect();
        assert_eq!(
            names,
            [
                "0x00000000_0x40000000",
                "0x40000000_0x80000000",
                "0x80000000_0xc0000000",
                "0xc0000000_0xffffffff"
            ]
        );
        // Lookup: greatest lo ≤ h; the top hash lands in the last bundle.
        assert_eq!(
            map.bundle_of_hash("t", 0xffff_ffff).unwrap().range.lo,
            0xc000_0000
        );
        assert_eq!(
            map.bundle_of_hash("t", 0x4000_0000).unwrap().range.lo,
            0x4000_0000
        );
        assert_eq!(map.bundle_of_hash("t", 0x3fff_ffff).unwrap().range.lo, 0);
        assert_eq!(map.bundle_of_hash("nope", 1), None);
    }

    #[test]
    fn crc32_of_partition_name() {
        // CRC32 (IEEE) of "123456789" is the standard check value.
        assert_eq!(crc32fast::hash(b"123456789"), 0xcbf4_3926);
        assert_eq!(partition_hash("orders", 3), crc32fast::hash(b"orders-3"));
    }

    #[test]
    fn namespace_rules() {
        let p = NamespaceRule::Prefix {
            separator: '.',
            segments: 1,
        };
        assert_eq!(p.namespace_of("orders.eu.v1"), "orders");
        assert_eq!(p.namespace_of("plain"), "plain");
        let p2 = NamespaceRule::Prefix {
            separator: '.',
            segments: 2,
        };
        assert_eq!(p2.namespace_of("orders.eu.v1"), "orders.eu");
        assert_eq!(NamespaceRule::Topic.namespace_of("a.b"), "a.b");
    }

    #[test]
    fn split_keeps_owner_and_coverage() {
        let mut map = BundleMap::new(NamespaceRule::Topic, 1).unwrap();
        let id = map.locate("t", 0);
        map.set_owner(&id, 5).unwrap();
        map.set_load(
            &id,
            BundleLoad {
                msg_rate_per_second: 100.0,
                throughput_bytes_per_second: 1000.0,
            },
        )
        .unwrap();
        let kids = map
            .split(&id, &[HASH_SPACE / 4, 0, HASH_SPACE / 4, HASH_SPACE])
            .unwrap();
        assert_eq!(kids.len(), 2);
        assert_eq!(map.owner(&kids[1]).unwrap(), Some(5));
        assert!(map.owner(&id).is_err());
        let total: f64 = map.bundles().map(|(_, _, l)| l.msg_rate_per_second).sum();
        assert!((total - 100.0).abs() < 1e-9);
        assert!(map.split(&kids[0], &[]).is_err());
        let json = serde_json::to_string(&map.snapshot()).unwrap();
        assert!(
            json.contains("\"name\":\"t/0x00000000_0x40000000\""),
            "{json}"
        );
        assert!(BundleMap::new(NamespaceRule::Topic, 0).is_err());
    }

    #[test]
    fn split_respects_namespace_maximum() {
        let mut map = BundleMap::new(NamespaceRule::Topic, NAMESPACE_BUNDLES_MAX).unwrap();
        let id = map.locate("t", 0);
        let mid = (id.range.lo + id.range.hi) / 2;
        assert!(matches!(
            map.split(&id, &[mid]),
            Err(PlacementError::SplitRefused { .. })
        ));
    }
}
