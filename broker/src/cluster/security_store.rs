//! The cluster's ACLs and SCRAM users in the metadata store (issue 39), glued to this broker: the
//! mirror of `R/security/` kept by its own watch ([`skiff_cluster::security::SecurityImage`]),
//! which replaces the authorizer's set and the SASL credentials in force whole whenever a key
//! changes; the writes of CreateAcls, DeleteAcls and AlterUserScramCredentials; the fresh reads
//! of DescribeAcls and DescribeUserScramCredentials; and the bootstrap from the files.
//!
//! The bootstrap: a broker that finds no ACLs (or no users) and no marker in the store imports its
//! `skiff.acl.file` (or `skiff.sasl.credentials.file`) and writes the marker, in one Txn guarded
//! on the marker's absence, so of brokers starting together exactly one imports. Until the first
//! change through Kafka's API, the importing broker follows its ACL file (a rewrite is imported
//! again, guarded on the marker's revision); every other broker, and every start after that first
//! change, warns that its file is ignored.
//!
//! Every admin call waits at most [`SECURITY_STORE_WAIT_MS`] for the store, then fails with
//! [`SecurityStoreError`] (the handlers answer REQUEST_TIMED_OUT). An unreachable store leaves the
//! sets in force as they were: authentication and authorization never read the store.
//!
//! Must never: read the store on a request's authorization or authentication path, or apply a
//! half-read set (a watch batch is one Txn; a re-GET replaces the mirror whole).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use skiff_cluster::records::{decode, encode};
use skiff_cluster::security::{
    hex, unhex, AclRecord, BootstrapKind, BootstrapRecord, ScramRecord, SecurityChanges,
    SecurityImage, SecurityKeys,
};
use skiff_meta::limits::TXN_OPS_MAX;
use skiff_meta::{Compare, CompareOp, GetRequest, KeyRange, MetaStore, Txn, TxnOp};
use tokio::sync::watch;
use tokio::time::Instant;

use super::{Cluster, ClusterError, RETRY_BACKOFF};
use crate::security::acl::binding::{record_of, validate_new, AclFilter};
use crate::security::acl::{Acl, AclState, FileAcls};
use crate::security::sasl::{LiveCredentials, ScramCredential, ScramMechanism};

/// The longest an admin request waits for the store before it answers REQUEST_TIMED_OUT: long
/// enough for an etcd leader election, well inside the Java admin client's 30 s request timeout.
pub const SECURITY_STORE_WAIT_MS: u64 = 5_000;

/// Why an admin call on the security keys failed: the handlers answer REQUEST_TIMED_OUT.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SecurityStoreError {
    /// The store did not answer within [`SECURITY_STORE_WAIT_MS`].
    #[error("the metadata store did not answer within {waited_ms} ms")]
    TimedOut {
        /// How long it waited.
        waited_ms: u64,
    },
    /// The store refused or failed the call.
    #[error("metadata store: {0}")]
    Store(#[from] skiff_meta::Error),
    /// A guarded write (a bootstrap import) lost to a concurrent change of its marker.
    #[error("the bootstrap marker changed meanwhile")]
    GuardMoved,
}

/// What the security mirror starts with: the live sets it replaces and the files it may import.
pub(crate) struct SecurityBootstrap {
    /// The ACL set in force, with the ACL file's contents; `None` when authorization is off.
    pub(crate) acl: Option<Arc<AclState>>,
    /// The file's ACLs each time the file changes (only with an ACL file).
    pub(crate) file_acls: Option<FileAcls>,
    /// The SASL credentials in force (their start is the credentials file's users); `None`
    /// without SASL listeners.
    pub(crate) credentials: Option<Arc<LiveCredentials>>,
    /// `skiff.sasl.credentials.file`, named in the marker and the warnings.
    pub(crate) credentials_file: Option<PathBuf>,
}

/// The broker's handle on the security keys.
pub(crate) struct SecurityStore {
    store: MetaStore,
    keys: SecurityKeys,
    node_id: i32,
    image: RwLock<SecurityImage>,
    revision: watch::Sender<i64>,
    acl: Option<Arc<AclState>>,
    credentials: Option<Arc<LiveCredentials>>,
    credentials_file: Option<PathBuf>,
}

impl SecurityStore {
    /// Reads the security keys (retrying until `skiff.metadata.start.timeout.ms`), imports the
    /// files if this broker is the first, puts the store's sets in force and starts the watch.
    pub(crate) async fn start(
        cluster: &Cluster,
        boot: SecurityBootstrap,
        start_timeout_ms: u64,
        shutdown: watch::Receiver<bool>,
    ) -> Result<Arc<Self>, ClusterError> {
        let keys = SecurityKeys::new(&cluster.layout);
        let this = Arc::new(Self {
            store: cluster.store.clone(),
            image: RwLock::new(SecurityImage::new(keys.clone())),
            keys,
            node_id: cluster.node_id,
            revision: watch::channel(0).0,
            acl: boot.acl,
            credentials: boot.credentials,
            credentials_file: boot.credentials_file,
        });
        let deadline = crate::clock::instant() + Duration::from_millis(start_timeout_ms);
        let snapshot = super::retry_until(&cluster.address, deadline, start_timeout_ms, || {
            this.store.get(GetRequest::prefix(this.keys.prefix()))
        })
        .await?;
        this.reload(&snapshot);
        let acls_imported = this.bootstrap_acls().await;
        let users_imported = this.bootstrap_scram().await;
        if acls_imported || users_imported {
            // The imports' own keys, read back whole (the watch starts after this revision).
            let snapshot = super::retry_until(&cluster.address, deadline, start_timeout_ms, || {
                this.store.get(GetRequest::prefix(this.keys.prefix()))
            })
            .await?;
            this.reload(&snapshot);
        }
        let all = SecurityChanges {
            acls: true,
            scram: true,
        };
        this.apply(all);
        tokio::spawn(this.clone().follow(shutdown, boot.file_acls));
        Ok(this)
    }

    fn reload(&self, snapshot: &skiff_meta::GetResponse) {
        let revision = match self.image.write() {
            Ok(mut image) => {
                image.reload(snapshot);
                image.revision()
            }
            Err(_) => return,
        };
        self.revision.send_replace(revision);
    }

    /// Puts the mirror's sets in force: the authorizer's ACLs, the SASL credentials.
    fn apply(&self, changes: SecurityChanges) {
        let Ok(image) = self.image.read() else {
            return;
        };
        for (key, error) in image.undecodable() {
            tracing::warn!(key, %error, "security record in the metadata store is ignored");
        }
        if let (true, Some(acl)) = (changes.acls, &self.acl) {
            let acls: Vec<Acl> = image
                .acls()
                .filter_map(|(key, record)| match validate_new(record) {
                    Ok(acl) => Some(acl),
                    Err(error) => {
                        tracing::warn!(key, %error, "stored ACL is ignored");
                        None
                    }
                })
                .collect();
            acl.replace_acls(&acls);
            tracing::debug!(acls = acls.len(), "ACLs from the metadata store in force");
        }
        if let (true, Some(live)) = (changes.scram, &self.credentials) {
            let users = credentials_of(image.scram());
            let count = users.len();
            match live.replace(users) {
                Ok(()) => tracing::debug!(credentials = count, "SCRAM users in force"),
                Err(error) => tracing::error!(%error, "SCRAM users not replaced"),
            }
        }
    }

    /// The watch on `R/security/`, resumed after a broken stream and re-read after compaction,
    /// and the ACL file's changes while this broker follows its file.
    async fn follow(
        self: Arc<Self>,
        mut shutdown: watch::Receiver<bool>,
        mut file_acls: Option<FileAcls>,
    ) {
        loop {
            let from = self.image.read().map(|i| i.revision()).unwrap_or(0) + 1;
            let watched = self
                .store
                .watch(KeyRange::prefix(self.keys.prefix()), from)
                .await;
            let mut watcher = match watched {
                Ok(watcher) => Some(watcher),
                Err(error) => {
                    tracing::warn!(%error, "metadata store: security watch failed");
                    if !self.resync_or_wait(&error, &mut shutdown).await {
                        return;
                    }
                    None
                }
            };
            while let Some(active) = watcher.as_mut() {
                let file_changed = async {
                    match file_acls.as_mut() {
                        Some(receiver) => receiver.changed().await.is_ok(),
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    _ = shutdown.changed() => return,
                    changed = file_changed => {
                        if !changed {
                            file_acls = None;
                            continue;
                        }
                        let acls = file_acls.as_ref().and_then(|r| r.borrow().clone());
                        if let Some(acls) = acls {
                            self.follow_file(&acls).await;
                        }
                    }
                    next = active.next() => match next {
                        Ok(batch) => {
                            let changes = match self.image.write() {
                                Ok(mut image) => image.apply(&batch),
                                Err(_) => return,
                            };
                            self.revision.send_replace(batch.revision);
                            self.apply(changes);
                        }
                        Err(error) => {
                            tracing::warn!(%error, "metadata store: security watch stream failed");
                            if !self.resync_or_wait(&error, &mut shutdown).await {
                                return;
                            }
                            watcher = None;
                        }
                    },
                }
            }
        }
    }

    /// After a watch error: re-GET the prefix when the history was compacted, else wait a
    /// backoff. False when the broker shuts down meanwhile.
    async fn resync_or_wait(
        &self,
        error: &skiff_meta::Error,
        shutdown: &mut watch::Receiver<bool>,
    ) -> bool {
        if matches!(error, skiff_meta::Error::Compacted { .. }) {
            if let Ok(snapshot) = self.store.get(GetRequest::prefix(self.keys.prefix())).await {
                self.reload(&snapshot);
                self.apply(SecurityChanges {
                    acls: true,
                    scram: true,
                });
                return !*shutdown.borrow();
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(RETRY_BACKOFF) => {}
            _ = shutdown.changed() => {}
        }
        !*shutdown.borrow()
    }

    /// Every stored ACL, read from the store (not the mirror), so an answer through any broker
    /// shows every change the store took.
    pub(crate) async fn stored_acls(&self) -> Result<Vec<AclRecord>, SecurityStoreError> {
        let deadline = deadline();
        Ok(self
            .read_prefix(self.keys.acls_prefix(), deadline)
            .await?
            .into_values()
            .collect())
    }

    /// Stores `acls` (an ACL already stored is written again, unchanged), and waits (within the
    /// deadline) until this broker's authorizer has them.
    pub(crate) async fn create_acls(&self, acls: &[AclRecord]) -> Result<(), SecurityStoreError> {
        let deadline = deadline();
        let mut ops: Vec<TxnOp> = acls
            .iter()
            .map(|acl| TxnOp::put(self.keys.acl(acl), encode(acl)))
            .collect();
        ops.extend(self.stop_following(BootstrapKind::Acls));
        let revision = self.write(None, ops, deadline).await?;
        self.caught_up(revision, deadline).await;
        Ok(())
    }

    /// Deletes the stored ACLs each filter matches (`None`: a filter refused before, which
    /// matches nothing); an ACL is listed under the first filter that matched it, as in Kafka.
    pub(crate) async fn delete_acls(
        &self,
        filters: &[Option<AclFilter>],
    ) -> Result<Vec<Vec<AclRecord>>, SecurityStoreError> {
        let deadline = deadline();
        let stored = self.read_prefix(self.keys.acls_prefix(), deadline).await?;
        let mut taken = BTreeSet::new();
        let mut ops = Vec::new();
        let matched = filters
            .iter()
            .map(|filter| {
                let Some(filter) = filter else {
                    return Vec::new();
                };
                stored
                    .iter()
                    .filter(|(key, acl)| filter.matches(acl) && taken.insert((*key).clone()))
                    .map(|(key, acl)| {
                        ops.push(TxnOp::delete(key.clone()));
                        acl.clone()
                    })
                    .collect()
            })
            .collect();
        if !ops.is_empty() {
            ops.extend(self.stop_following(BootstrapKind::Acls));
            let revision = self.write(None, ops, deadline).await?;
            self.caught_up(revision, deadline).await;
        }
        Ok(matched)
    }

    /// Every stored SCRAM credential, read from the store.
    pub(crate) async fn stored_scram(&self) -> Result<Vec<ScramRecord>, SecurityStoreError> {
        let deadline = deadline();
        Ok(self
            .read_prefix(self.keys.scram_prefix(), deadline)
            .await?
            .into_values()
            .collect())
    }

    /// Deletes the credentials `deletions` name (mechanism, user) and stores `upsertions`, in
    /// order, and waits (within the deadline) until this broker's SASL set has them.
    pub(crate) async fn alter_scram(
        &self,
        deletions: &[(ScramMechanism, String)],
        upsertions: &[ScramRecord],
    ) -> Result<(), SecurityStoreError> {
        let deadline = deadline();
        let mut ops: Vec<TxnOp> = deletions
            .iter()
            .map(|(mechanism, user)| TxnOp::delete(self.keys.scram(mechanism.name(), user)))
            .collect();
        ops.extend(upsertions.iter().map(|record| {
            TxnOp::put(
                self.keys.scram(&record.mechanism, &record.user),
                encode(record),
            )
        }));
        if ops.is_empty() {
            return Ok(());
        }
        let revision = self.write(None, ops, deadline).await?;
        self.caught_up(revision, deadline).await;
        Ok(())
    }

    /// The op that ends the importing broker's following of its file, if it still follows it.
    fn stop_following(&self, kind: BootstrapKind) -> Option<TxnOp> {
        let image = self.image.read().ok()?;
        let marker = image.bootstrap(kind)?;
        if !marker.record.follows_file {
            return None;
        }
        let record = BootstrapRecord {
            follows_file: false,
            ..marker.record.clone()
        };
        Some(TxnOp::put(self.keys.bootstrap(kind), encode(&record)))
    }

    /// Writes `ops` in Txns of at most the store's op limit, the first guarded by `guard` (when
    /// given). The revision of the last write. Only the first Txn is atomic with the guard: a
    /// file of more ACLs than one Txn holds is imported in several.
    async fn write(
        &self,
        guard: Option<Compare>,
        ops: Vec<TxnOp>,
        deadline: Instant,
    ) -> Result<i64, SecurityStoreError> {
        let mut revision = 0;
        let mut guard = guard;
        let mut ops = ops.into_iter().peekable();
        while ops.peek().is_some() {
            let chunk: Vec<TxnOp> = ops.by_ref().take(TXN_OPS_MAX).collect();
            let txn = Txn::new()
                .when(guard.take().into_iter().collect())
                .and_then(chunk);
            let response = within(deadline, self.store.txn(txn)).await??;
            if !response.succeeded {
                return Err(SecurityStoreError::GuardMoved);
            }
            revision = response.revision;
        }
        Ok(revision)
    }

    /// Every record under `prefix`, decoded (undecodable values are left out), by key.
    async fn read_prefix<T: serde::de::DeserializeOwned>(
        &self,
        prefix: String,
        deadline: Instant,
    ) -> Result<BTreeMap<String, T>, SecurityStoreError> {
        let snapshot = within(deadline, self.store.get(GetRequest::prefix(prefix))).await??;
        Ok(snapshot
            .kvs
            .iter()
            .filter_map(|kv| {
                let key = String::from_utf8_lossy(&kv.key).into_owned();
                let record = decode(&key, &kv.value).ok()?;
                Some((key, record))
            })
            .collect())
    }

    /// Waits until the mirror reached `revision`, or the deadline.
    async fn caught_up(&self, revision: i64, deadline: Instant) {
        let mut receiver = self.revision.subscribe();
        let _ =
            tokio::time::timeout_at(deadline, receiver.wait_for(|seen| *seen >= revision)).await;
    }
}

/// The deadline of one admin call.
fn deadline() -> Instant {
    Instant::now() + Duration::from_millis(SECURITY_STORE_WAIT_MS)
}

/// `call`, or [`SecurityStoreError::TimedOut`] at `deadline`.
async fn within<T>(
    deadline: Instant,
    call: impl std::future::Future<Output = T>,
) -> Result<T, SecurityStoreError> {
    tokio::time::timeout_at(deadline, call)
        .await
        .map_err(|_| SecurityStoreError::TimedOut {
            waited_ms: SECURITY_STORE_WAIT_MS,
        })
}

/// The SASL credentials of stored records; a record that does not convert is logged and left out.
fn credentials_of<'a>(
    records: impl Iterator<Item = &'a ScramRecord>,
) -> HashMap<(ScramMechanism, String), ScramCredential> {
    records
        .filter_map(|record| {
            let credential = credential_of(record);
            if credential.is_none() {
                tracing::warn!(user = %record.user, mechanism = %record.mechanism, "stored SCRAM credential is ignored");
            }
            credential
        })
        .collect()
}

fn credential_of(record: &ScramRecord) -> Option<((ScramMechanism, String), ScramCredential)> {
    let mechanism = ScramMechanism::from_name(&record.mechanism)?;
    let credential = ScramCredential {
        salt: unhex(&record.salt)?,
        iterations: record.iterations,
        stored_key: unhex(&record.stored_key)?,
        server_key: unhex(&record.server_key)?,
    };
    let keys_fit = credential.stored_key.len() == mechanism.key_bytes()
        && credential.server_key.len() == mechanism.key_bytes();
    keys_fit.then(|| ((mechanism, record.user.clone()), credential))
}

/// The stored record of one credential.
pub(crate) fn scram_record(
    mechanism: ScramMechanism,
    user: &str,
    credential: &ScramCredential,
) -> ScramRecord {
    ScramRecord {
        user: user.to_owned(),
        mechanism: mechanism.name().to_owned(),
        iterations: credential.iterations,
        salt: hex(&credential.salt),
        stored_key: hex(&credential.stored_key),
        server_key: hex(&credential.server_key),
    }
}

// The bootstrap from the files.
impl SecurityStore {
    fn marker(&self, kind: BootstrapKind, file: &Path) -> BootstrapRecord {
        BootstrapRecord {
            node_id: self.node_id,
            file: file.display().to_string(),
            imported_ms: u64::try_from(crate::clock::now_ms()).unwrap_or(0),
            follows_file: kind == BootstrapKind::Acls,
        }
    }

    /// Imports the ACL file when the store has no ACLs and no marker; re-imports it when this
    /// broker's import is the one the store still follows; otherwise warns that it is ignored.
    async fn bootstrap_acls(&self) -> bool {
        let Some((path, acls)) = self.acl.as_ref().and_then(|acl| acl.file()) else {
            return false;
        };
        let (marker, stored) = match self.image.read() {
            Ok(image) => (
                image.bootstrap(BootstrapKind::Acls).cloned(),
                image.acls().count(),
            ),
            Err(_) => return false,
        };
        match marker {
            None if stored == 0 => {
                let guard = Compare::absent(self.keys.bootstrap(BootstrapKind::Acls));
                self.import_acls(guard, self.marker(BootstrapKind::Acls, path), acls)
                    .await
            }
            Some(marker) if self.follows(&marker.record, path) => {
                let guard = Compare::mod_revision(
                    self.keys.bootstrap(BootstrapKind::Acls),
                    CompareOp::Equal,
                    marker.mod_revision,
                );
                self.import_acls(guard, marker.record.clone(), acls).await
            }
            marker => {
                ignored_file_warning("skiff.acl.file", path, marker.map(|m| m.record));
                false
            }
        }
    }

    /// Whether `marker` says the store follows this broker's file at `path`.
    fn follows(&self, marker: &BootstrapRecord, path: &Path) -> bool {
        marker.follows_file
            && marker.node_id == self.node_id
            && marker.file == path.display().to_string()
    }

    /// A change of the ACL file, while the broker runs: imported when the store follows it.
    async fn follow_file(&self, acls: &[Acl]) {
        let Some((path, _)) = self.acl.as_ref().and_then(|acl| acl.file()) else {
            return;
        };
        let marker = self
            .image
            .read()
            .ok()
            .and_then(|image| image.bootstrap(BootstrapKind::Acls).cloned());
        match marker {
            Some(marker) if self.follows(&marker.record, path) => {
                let guard = Compare::mod_revision(
                    self.keys.bootstrap(BootstrapKind::Acls),
                    CompareOp::Equal,
                    marker.mod_revision,
                );
                self.import_acls(guard, marker.record.clone(), acls).await;
            }
            marker => ignored_file_warning("skiff.acl.file", path, marker.map(|m| m.record)),
        }
    }

    /// Makes the stored ACLs exactly `acls` and writes `marker`, the first Txn guarded by `guard`;
    /// whether the store took it. Waits for no watch: the follow task that calls it is the watch.
    async fn import_acls(&self, guard: Compare, marker: BootstrapRecord, acls: &[Acl]) -> bool {
        let wanted: BTreeMap<String, AclRecord> = acls
            .iter()
            .map(|acl| {
                let record = record_of(acl);
                (self.keys.acl(&record), record)
            })
            .collect();
        let stale: Vec<String> = match self.image.read() {
            Ok(image) => image
                .acls()
                .filter(|(key, _)| !wanted.contains_key(*key))
                .map(|(key, _)| key.clone())
                .collect(),
            Err(_) => return false,
        };
        let mut ops = vec![TxnOp::put(
            self.keys.bootstrap(BootstrapKind::Acls),
            encode(&marker),
        )];
        ops.extend(stale.into_iter().map(TxnOp::delete));
        ops.extend(
            wanted
                .iter()
                .map(|(key, record)| TxnOp::put(key.clone(), encode(record))),
        );
        match self.write(Some(guard), ops, deadline()).await {
            Ok(_) => {
                tracing::info!(file = %marker.file, acls = wanted.len(), "ACL file imported into the metadata store");
                true
            }
            Err(error) => {
                tracing::warn!(file = %marker.file, %error, "ACL file not imported into the metadata store");
                false
            }
        }
    }

    /// Imports the credentials file's users when the store has none and no marker; otherwise
    /// warns that the file is ignored.
    async fn bootstrap_scram(&self) -> bool {
        let (Some(live), Some(path)) = (&self.credentials, &self.credentials_file) else {
            return false;
        };
        let (marker, stored) = match self.image.read() {
            Ok(image) => (
                image.bootstrap(BootstrapKind::Scram).cloned(),
                image.scram().count(),
            ),
            Err(_) => return false,
        };
        if marker.is_some() || stored > 0 {
            ignored_file_warning(
                "skiff.sasl.credentials.file",
                path,
                marker.map(|m| m.record),
            );
            return false;
        }
        let file_users = live.current();
        let marker = self.marker(BootstrapKind::Scram, path);
        let mut ops = vec![TxnOp::put(
            self.keys.bootstrap(BootstrapKind::Scram),
            encode(&marker),
        )];
        ops.extend(
            file_users
                .credentials()
                .map(|(mechanism, user, credential)| {
                    let record = scram_record(mechanism, user, credential);
                    TxnOp::put(self.keys.scram(&record.mechanism, user), encode(&record))
                }),
        );
        let guard = Compare::absent(self.keys.bootstrap(BootstrapKind::Scram));
        match self.write(Some(guard), ops, deadline()).await {
            Ok(_) => {
                tracing::info!(file = %path.display(), "SASL credentials file imported into the metadata store");
                true
            }
            Err(error) => {
                tracing::warn!(file = %path.display(), %error, "SASL credentials file not imported into the metadata store");
                false
            }
        }
    }
}

/// The warning of a file the store no longer follows, with how to move off it.
fn ignored_file_warning(key: &str, path: &Path, marker: Option<BootstrapRecord>) {
    let source = match &marker {
        Some(marker) => format!(
            "imported from broker {}'s file {}{}",
            marker.node_id,
            marker.file,
            if marker.follows_file {
                ", which it still follows"
            } else {
                " and changed through Kafka's admin APIs since"
            }
        ),
        None => "made through Kafka's admin APIs".to_owned(),
    };
    tracing::warn!(
        key,
        file = %path.display(),
        "{key} is ignored: the cluster's ACLs and SCRAM users live in the metadata store ({source}). \
         Manage them with kafka-acls.sh and kafka-configs.sh --entity-type users, and remove {key} \
         from this broker's configuration"
    );
}
