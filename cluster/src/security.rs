//! The cluster's ACLs and SCRAM users in the metadata store (issue 39): their keys under
//! `R/security/`, their JSON records, the bootstrap markers that say which broker's file was
//! imported, and [`SecurityImage`], the mirror a broker keeps of that prefix from one GET and a
//! watch. Kept apart from [`crate::layout`]'s topic and broker keys so that the image of those
//! (which ignores keys it does not know) and this one never need each other.
//!
//! Keys (`R = /skiff/<cluster>/v1/`):
//! - `R/security/acls/<sha256 of the ACL, hex>`: one ACL ([`AclRecord`]); the key is a function of
//!   the ACL, so creating an ACL twice writes one key, as Kafka keeps one binding;
//! - `R/security/scram/<mechanism>/<user, hex>`: one user's credential for one mechanism
//!   ([`ScramRecord`]); hex so that any user name (a `/` included) is one key segment;
//! - `R/security/bootstrap/acls` and `R/security/bootstrap/scram`: [`BootstrapRecord`], written once
//!   by the broker that imported its file.
//!
//! Must never: talk to a store or read a clock (the broker does), or interpret an ACL (the
//! broker's authorizer does; records carry Kafka's wire codes as they are).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use skiff_meta::{EventKind, GetResponse, KeyValue, WatchBatch};

use crate::layout::Layout;
use crate::records::{decode, RecordError};

/// Longest ACL resource name, principal or host stored, in bytes: far above Kafka's topic and
/// group names, small enough that a request of many ACLs stays within one Txn's byte limit.
pub const ACL_FIELD_BYTES_MAX: usize = 1024;

/// Longest SCRAM user name stored, in bytes (its hex form is one key segment).
pub const SCRAM_USER_BYTES_MAX: usize = 1024;

/// One ACL as stored: Kafka's wire codes for the resource type, pattern type, operation and
/// permission, and its strings as Kafka spells them (`User:alice`, `*`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AclRecord {
    /// ResourceType code (TOPIC 2 … USER 7).
    pub resource_type: i8,
    /// The literal name, `*`, or the prefix.
    pub name: String,
    /// PatternType code (LITERAL 3, PREFIXED 4).
    pub pattern_type: i8,
    /// `User:<name>` or `User:*`.
    pub principal: String,
    /// `*` or one client address.
    pub host: String,
    /// AclOperation code (ALL 2 … TWO_PHASE_COMMIT 15).
    pub operation: i8,
    /// AclPermissionType code (DENY 2, ALLOW 3).
    pub permission: i8,
}

/// One user's salted SCRAM keys for one mechanism (never a password), bytes in lowercase hex.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScramRecord {
    /// The user name (the SCRAM `saslname`, decoded).
    pub user: String,
    /// `SCRAM-SHA-256` or `SCRAM-SHA-512`.
    pub mechanism: String,
    /// PBKDF2 iterations.
    pub iterations: u32,
    /// The salt, hex.
    pub salt: String,
    /// StoredKey = H(ClientKey), hex.
    pub stored_key: String,
    /// ServerKey, hex.
    pub server_key: String,
}

/// Which broker imported its file into the store, and whether it still follows that file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootstrapRecord {
    /// The importing broker's `node.id`.
    pub node_id: i32,
    /// The file's path on that broker.
    pub file: String,
    /// Wall-clock milliseconds of the import.
    pub imported_ms: u64,
    /// True until the first change through Kafka's API: until then the importing broker imports
    /// its file again when it changes; afterwards the store alone is the truth.
    pub follows_file: bool,
}

/// What a bootstrap marker is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum BootstrapKind {
    /// `skiff.acl.file`.
    Acls,
    /// `skiff.sasl.credentials.file`.
    Scram,
}

impl BootstrapKind {
    fn segment(self) -> &'static str {
        match self {
            Self::Acls => "acls",
            Self::Scram => "scram",
        }
    }
}

/// The keys of the security prefix of one cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecurityKeys {
    prefix: String,
}

/// A key of the security prefix, parsed.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum SecurityKey {
    Acl(String),
    Scram(String),
    Bootstrap(BootstrapKind),
}

impl SecurityKeys {
    /// The security keys of the cluster laid out by `layout`.
    pub fn new(layout: &Layout) -> Self {
        Self {
            prefix: format!("{}security/", layout.root()),
        }
    }

    /// Every security key: the prefix a broker GETs and watches.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The prefix of every ACL key.
    pub fn acls_prefix(&self) -> String {
        format!("{}acls/", self.prefix)
    }

    /// The prefix of every SCRAM key.
    pub fn scram_prefix(&self) -> String {
        format!("{}scram/", self.prefix)
    }

    /// The key of `acl`: a hash of its canonical JSON, so one ACL has one key.
    pub fn acl(&self, acl: &AclRecord) -> String {
        let digest = Sha256::digest(crate::records::encode(acl));
        format!("{}acls/{}", self.prefix, hex(&digest))
    }

    /// The key of `user`'s credential for `mechanism`.
    pub fn scram(&self, mechanism: &str, user: &str) -> String {
        format!("{}scram/{mechanism}/{}", self.prefix, hex(user.as_bytes()))
    }

    /// The bootstrap marker of `kind`.
    pub fn bootstrap(&self, kind: BootstrapKind) -> String {
        format!("{}bootstrap/{}", self.prefix, kind.segment())
    }

    fn parse(&self, key: &[u8]) -> Option<SecurityKey> {
        let key = std::str::from_utf8(key).ok()?;
        let rest = key.strip_prefix(self.prefix.as_str())?;
        let (kind, name) = rest.split_once('/')?;
        match (kind, name) {
            ("acls", id) if !id.is_empty() && !id.contains('/') => {
                Some(SecurityKey::Acl(key.to_owned()))
            }
            ("scram", rest) if rest.contains('/') => Some(SecurityKey::Scram(key.to_owned())),
            ("bootstrap", "acls") => Some(SecurityKey::Bootstrap(BootstrapKind::Acls)),
            ("bootstrap", "scram") => Some(SecurityKey::Bootstrap(BootstrapKind::Scram)),
            _ => None,
        }
    }
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The bytes of lowercase or uppercase hex; `None` for anything else.
pub fn unhex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 {
        return None;
    }
    text.as_bytes()
        .chunks(2)
        .map(|pair| {
            let digits = std::str::from_utf8(pair).ok()?;
            u8::from_str_radix(digits, 16).ok()
        })
        .collect()
}

/// A bootstrap marker with the revision of its last change (the guard of a re-import).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionedBootstrap {
    /// The marker.
    pub record: BootstrapRecord,
    /// Its key's last modification.
    pub mod_revision: i64,
}

/// What a watch batch or a reload changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SecurityChanges {
    /// Some ACL key changed.
    pub acls: bool,
    /// Some SCRAM key changed.
    pub scram: bool,
}

/// A broker's mirror of `R/security/`: every ACL and credential by key, and the markers.
#[derive(Debug, Clone)]
pub struct SecurityImage {
    keys: SecurityKeys,
    revision: i64,
    acls: BTreeMap<String, AclRecord>,
    scram: BTreeMap<String, ScramRecord>,
    bootstrap: BTreeMap<BootstrapKind, VersionedBootstrap>,
    undecodable: BTreeMap<String, RecordError>,
}

impl SecurityImage {
    /// An empty mirror at revision 0.
    pub fn new(keys: SecurityKeys) -> Self {
        Self {
            keys,
            revision: 0,
            acls: BTreeMap::new(),
            scram: BTreeMap::new(),
            bootstrap: BTreeMap::new(),
            undecodable: BTreeMap::new(),
        }
    }

    /// The keys this mirror follows.
    pub fn keys(&self) -> &SecurityKeys {
        &self.keys
    }

    /// The store revision the mirror is at.
    pub fn revision(&self) -> i64 {
        self.revision
    }

    /// Every ACL.
    pub fn acls(&self) -> impl Iterator<Item = (&String, &AclRecord)> {
        self.acls.iter()
    }

    /// Every credential.
    pub fn scram(&self) -> impl Iterator<Item = &ScramRecord> {
        self.scram.values()
    }

    /// The bootstrap marker of `kind`, if a file was imported.
    pub fn bootstrap(&self, kind: BootstrapKind) -> Option<&VersionedBootstrap> {
        self.bootstrap.get(&kind)
    }

    /// Keys whose value did not decode, and why (reported, then ignored).
    pub fn undecodable(&self) -> &BTreeMap<String, RecordError> {
        &self.undecodable
    }

    /// Replaces the mirror with a GET of [`SecurityKeys::prefix`]; every kind counts as changed.
    pub fn reload(&mut self, snapshot: &GetResponse) -> SecurityChanges {
        let mut fresh = SecurityImage::new(self.keys.clone());
        for kv in &snapshot.kvs {
            fresh.put(kv);
        }
        fresh.revision = snapshot.revision;
        *self = fresh;
        SecurityChanges {
            acls: true,
            scram: true,
        }
    }

    /// Applies one watch batch; one at or below the mirror's revision changes nothing.
    pub fn apply(&mut self, batch: &WatchBatch) -> SecurityChanges {
        let mut changes = SecurityChanges::default();
        if batch.revision <= self.revision {
            return changes;
        }
        for event in &batch.events {
            let Some(key) = self.keys.parse(&event.kv.key) else {
                continue;
            };
            match &key {
                SecurityKey::Acl(_) => changes.acls = true,
                SecurityKey::Scram(_) => changes.scram = true,
                SecurityKey::Bootstrap(_) => {}
            }
            match event.kind {
                EventKind::Put => self.put(&event.kv),
                EventKind::Delete => self.remove(&key),
            }
        }
        self.revision = batch.revision;
        changes
    }

    fn put(&mut self, kv: &KeyValue) {
        let Some(key) = self.keys.parse(&kv.key) else {
            return;
        };
        let text = String::from_utf8_lossy(&kv.key).into_owned();
        self.remove(&key);
        let decoded = match key {
            SecurityKey::Acl(key) => decode(&key, &kv.value).map(|acl| {
                self.acls.insert(key, acl);
            }),
            SecurityKey::Scram(key) => decode(&key, &kv.value).map(|record| {
                self.scram.insert(key, record);
            }),
            SecurityKey::Bootstrap(kind) => decode(&text, &kv.value).map(|record| {
                self.bootstrap.insert(
                    kind,
                    VersionedBootstrap {
                        record,
                        mod_revision: kv.mod_revision,
                    },
                );
            }),
        };
        if let Err(error) = decoded {
            self.undecodable.insert(text, error);
        }
    }

    fn remove(&mut self, key: &SecurityKey) {
        match key {
            SecurityKey::Acl(key) => {
                self.acls.remove(key);
                self.undecodable.remove(key);
            }
            SecurityKey::Scram(key) => {
                self.scram.remove(key);
                self.undecodable.remove(key);
            }
            SecurityKey::Bootstrap(kind) => {
                self.bootstrap.remove(kind);
                self.undecodable.remove(&self.keys.bootstrap(*kind));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use skiff_meta::{Event, GetResponse, KeyValue};

    fn keys() -> SecurityKeys {
        SecurityKeys::new(&Layout::new("c").expect("layout"))
    }

    fn acl(name: &str) -> AclRecord {
        AclRecord {
            resource_type: 2,
            name: name.to_owned(),
            pattern_type: 3,
            principal: "User:alice".to_owned(),
            host: "*".to_owned(),
            operation: 3,
            permission: 3,
        }
    }

    fn kv(key: String, value: Vec<u8>, revision: i64) -> KeyValue {
        KeyValue {
            key: key.into_bytes(),
            value,
            create_revision: revision,
            mod_revision: revision,
            version: 1,
            lease: 0,
        }
    }

    #[test]
    fn one_acl_has_one_key_and_names_do_not_escape_their_segment() {
        let keys = keys();
        assert_eq!(keys.acl(&acl("t")), keys.acl(&acl("t")));
        assert_ne!(keys.acl(&acl("t")), keys.acl(&acl("u")));
        assert!(keys.acl(&acl("a/b")).starts_with(&keys.acls_prefix()));
        let scram = keys.scram("SCRAM-SHA-256", "a/b");
        assert_eq!(scram.rsplit('/').next(), Some("612f62"));
        assert_eq!(unhex("612f62"), Some(b"a/b".to_vec()));
        assert_eq!(unhex("6"), None);
        assert_eq!(unhex("zz"), None);
    }

    #[test]
    fn the_mirror_follows_puts_deletes_and_reports_bad_values() {
        let keys = keys();
        let mut image = SecurityImage::new(keys.clone());
        let first = keys.acl(&acl("t"));
        let snapshot = GetResponse {
            kvs: vec![kv(first.clone(), crate::records::encode(&acl("t")), 2)],
            revision: 2,
            ..GetResponse::default()
        };
        image.reload(&snapshot);
        assert_eq!(image.acls().count(), 1);
        let user = ScramRecord {
            user: "bob".to_owned(),
            mechanism: "SCRAM-SHA-512".to_owned(),
            iterations: 4096,
            salt: "00".to_owned(),
            stored_key: "11".to_owned(),
            server_key: "22".to_owned(),
        };
        let scram_key = keys.scram("SCRAM-SHA-512", "bob");
        let batch = WatchBatch {
            revision: 3,
            events: vec![
                Event {
                    kind: EventKind::Put,
                    kv: kv(scram_key.clone(), crate::records::encode(&user), 3),
                    prev_kv: None,
                },
                Event {
                    kind: EventKind::Delete,
                    kv: kv(first, Vec::new(), 3),
                    prev_kv: None,
                },
                Event {
                    kind: EventKind::Put,
                    kv: kv(keys.bootstrap(BootstrapKind::Acls), b"{".to_vec(), 3),
                    prev_kv: None,
                },
            ],
        };
        let changes = image.apply(&batch);
        assert!(changes.acls && changes.scram);
        assert_eq!(image.acls().count(), 0);
        assert_eq!(image.scram().next(), Some(&user));
        assert_eq!(image.undecodable().len(), 1);
        assert!(image.bootstrap(BootstrapKind::Acls).is_none());
        // A repeated batch changes nothing.
        assert_eq!(image.apply(&batch), SecurityChanges::default());
    }
}
