//! The embedded backend, Skiff's default: [`MetaCore`] behind a mutex, every change appended
//! to an fsynced journal before it is answered, a snapshot every
//! [`LocalOptions::journal_bytes_before_snapshot`] bytes of journal, and a tokio task that
//! expires leases on the real (monotonic) clock. It owns the store's directory (locked against a
//! second opener) and nothing outside it.
//!
//! Recovery on open: snapshot (if any) → journal replay → torn tail cut. Leases come back with
//! their full TTL, as etcd's do after a leader change. The history for watches starts at the
//! snapshot: a restart is a compaction up to it.
//!
//! After a failed write or fsync the store is poisoned ([`Error::Poisoned`]) until reopened:
//! memory may hold a change the disk does not, and answering from it could acknowledge a write
//! that a restart loses.

mod files;
pub(crate) mod journal;
mod snapshot;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use skiff_storage::DurableFiles;
use tokio::sync::watch;

use crate::core::{MetaCore, WatchId};
use crate::error::{Error, Result};
use crate::limits;
use crate::types::{
    GetRequest, GetResponse, KeyRange, Lease, LeaseId, LeaseStatus, Txn, TxnResponse, WatchBatch,
};
use journal::Journal;

/// Settings of the embedded store.
#[derive(Clone, Debug)]
pub struct LocalOptions {
    /// Journal bytes after which a snapshot is written and the journal restarted; at most
    /// [`limits::JOURNAL_BYTES_BEFORE_SNAPSHOT`] (a larger value is clamped), so a journal never
    /// outgrows what recovery accepts.
    pub journal_bytes_before_snapshot: u64,
    /// The file operations the journal and snapshot go through: the real file system, or in
    /// tests the power-loss simulation ([`DurableFiles::simulated`]).
    pub files: DurableFiles,
}

impl Default for LocalOptions {
    fn default() -> Self {
        Self {
            journal_bytes_before_snapshot: limits::JOURNAL_BYTES_BEFORE_SNAPSHOT,
            files: DurableFiles::real(),
        }
    }
}

/// The embedded metadata store. Cheap to clone (all clones share one store).
#[derive(Clone, Debug)]
pub struct LocalStore {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    /// The clock's zero: lease times are milliseconds since the store opened.
    epoch: Instant,
    /// Bumped after every persisted change, to wake watchers.
    changed: watch::Sender<u64>,
}

#[derive(Debug)]
struct State {
    core: MetaCore,
    journal: Journal,
    dir: PathBuf,
    options: LocalOptions,
    poisoned: bool,
    /// Held for the store's life: the directory lock.
    _lock: File,
}

impl LocalStore {
    /// Opens (creating if needed) the store in `dir` with default options.
    pub async fn open(dir: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(dir, LocalOptions::default()).await
    }

    /// Opens (creating if needed) the store in `dir`: recovers its state and starts the lease
    /// expiry task on the current tokio runtime.
    pub async fn open_with(dir: impl AsRef<Path>, options: LocalOptions) -> Result<Self> {
        let dir = dir.as_ref().to_path_buf();
        let epoch = Instant::now();
        let state = tokio::task::spawn_blocking(move || State::recover(dir, options, epoch))
            .await
            .map_err(|error| Error::Unavailable {
                reason: error.to_string(),
            })??;
        let (changed, _) = watch::channel(0);
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
            epoch,
            changed,
        });
        tokio::spawn(expire_leases(Arc::downgrade(&shared)));
        Ok(Self { shared })
    }

    /// Reads a key or prefix. Reads do not reap leases: a key whose lease just expired stays
    /// visible until the next write or the expiry task (at most [`limits::LEASE_TICK_MS`] later),
    /// as in etcd, where the leader revokes expired leases asynchronously.
    pub async fn get(&self, request: GetRequest) -> Result<GetResponse> {
        self.shared.lock().core.get(&request)
    }

    /// Runs a Txn; answered once its revision is on disk.
    pub async fn txn(&self, txn: Txn) -> Result<TxnResponse> {
        self.write(move |core, _| core.txn(&txn)).await
    }

    /// Drops history before `revision`.
    pub async fn compact(&self, revision: i64) -> Result<()> {
        self.write(move |core, _| core.compact(revision)).await
    }

    /// Watches a range from `start_revision` (`0`: from the next revision).
    pub async fn watch(&self, range: KeyRange, start_revision: i64) -> Result<LocalWatcher> {
        let mut generation = self.shared.changed.subscribe();
        generation.mark_unchanged();
        let id = self.shared.lock().core.watch(range, start_revision)?;
        Ok(LocalWatcher {
            shared: self.shared.clone(),
            id,
            generation,
        })
    }

    /// Grants a lease of `ttl_secs`.
    pub async fn lease_grant(&self, ttl_secs: i64) -> Result<Lease> {
        self.write(move |core, now_ms| core.lease_grant(ttl_secs, now_ms))
            .await
    }

    /// Renews a lease for its full TTL; returns the TTL.
    pub async fn lease_keep_alive(&self, id: LeaseId) -> Result<i64> {
        let now_ms = self.shared.now_ms();
        self.shared.lock().core.lease_keep_alive(id, now_ms)
    }

    /// Ends a lease and deletes its keys.
    pub async fn lease_revoke(&self, id: LeaseId) -> Result<()> {
        self.write(move |core, _| core.lease_revoke(id).map(|_| ()))
            .await
    }

    /// A lease's granted and remaining TTL.
    pub async fn lease_status(&self, id: LeaseId) -> Result<LeaseStatus> {
        let now_ms = self.shared.now_ms();
        self.shared.lock().core.lease_status(id, now_ms)
    }

    /// The directory the store lives in.
    pub fn dir(&self) -> PathBuf {
        self.shared.lock().dir.clone()
    }

    /// Runs a mutation on a blocking thread (it fsyncs), after expiring due leases.
    async fn write<T: Send + 'static>(
        &self,
        mutation: impl FnOnce(&mut MetaCore, u64) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let shared = self.shared.clone();
        tokio::task::spawn_blocking(move || shared.mutate(mutation))
            .await
            .map_err(|error| Error::Unavailable {
                reason: error.to_string(),
            })?
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves the core possibly half-updated; carrying on
        // would risk answering from it. Poison the store instead of propagating the panic.
        self.state.lock().unwrap_or_else(|poisoned| {
            let mut state = poisoned.into_inner();
            state.poisoned = true;
            state
        })
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn mutate<T>(&self, mutation: impl FnOnce(&mut MetaCore, u64) -> Result<T>) -> Result<T> {
        let now_ms = self.now_ms();
        let mut state = self.lock();
        if state.poisoned {
            return Err(Error::Poisoned);
        }
        state.core.expire_leases(now_ms);
        let result = mutation(&mut state.core, now_ms);
        let persisted = state.persist();
        drop(state);
        self.changed.send_modify(|generation| *generation += 1);
        persisted.and(result)
    }
}

impl State {
    fn recover(dir: PathBuf, options: LocalOptions, epoch: Instant) -> Result<Self> {
        let durable = options.files.clone();
        durable
            .create_dir_all(&dir)
            .map_err(|error| files::file_error("creating", error))?;
        let lock = files::lock_dir(&dir)?;
        let now_ms = u64::try_from(epoch.elapsed().as_millis()).unwrap_or(0);
        let (mut core, snapshot_index) = match snapshot::read(&durable, &dir)? {
            Some((snapshot, index)) => {
                let core = MetaCore::from_snapshot(snapshot, now_ms).map_err(|error| {
                    Error::CorruptSnapshot {
                        path: dir.join(snapshot::SNAPSHOT_FILE),
                        reason: error.to_string(),
                    }
                })?;
                (core, index)
            }
            None => (MetaCore::new(), 0),
        };
        let journal = Journal::recover(&durable, &dir, snapshot_index, |change| {
            core.replay(change, now_ms)
        })?;
        let _ = core.take_changes();
        Ok(Self {
            core,
            journal,
            dir,
            options,
            poisoned: false,
            _lock: lock,
        })
    }

    /// Appends the core's new changes to the journal (fsynced), and snapshots when the journal
    /// has grown past its bound. Any failure poisons the store.
    fn persist(&mut self) -> Result<()> {
        let changes = self.core.take_changes();
        if changes.is_empty() {
            return Ok(());
        }
        let result = self.journal.append(&changes).and_then(|()| {
            let threshold = self
                .options
                .journal_bytes_before_snapshot
                .min(limits::JOURNAL_BYTES_BEFORE_SNAPSHOT);
            if self.journal.bytes() < threshold {
                return Ok(());
            }
            let last_index = self.journal.last_index();
            let files = &self.options.files;
            snapshot::write(files, &self.dir, &self.core.snapshot(), last_index)?;
            self.journal = Journal::create(files, &self.dir, last_index)?;
            Ok(())
        });
        if let Err(error) = &result {
            tracing::error!(%error, dir = %self.dir.display(), "metadata store poisoned");
            self.poisoned = true;
        }
        result
    }
}

/// Expires leases on the real clock until the store is dropped.
async fn expire_leases(shared: Weak<Shared>) {
    let mut tick = tokio::time::interval(Duration::from_millis(limits::LEASE_TICK_MS));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let due = {
            let state = shared.lock();
            !state.poisoned
                && state
                    .core
                    .next_lease_deadline_ms()
                    .is_some_and(|at| at <= shared.now_ms())
        };
        if due {
            // One fsync, rarely (a lease ended): cheaper than a hop to a blocking thread, and
            // it keeps no strong reference alive across an await.
            if let Err(error) = shared.mutate(|_, _| Ok(())) {
                tracing::warn!(%error, "expiring metadata leases failed");
            }
        }
    }
}

/// A watch on the embedded store. Dropping it cancels the watch.
#[derive(Debug)]
pub struct LocalWatcher {
    shared: Arc<Shared>,
    id: WatchId,
    generation: watch::Receiver<u64>,
}

impl LocalWatcher {
    /// The events of the next revision that touched the range, waiting for one if needed.
    /// [`Error::Compacted`] ends the watch: re-GET, then watch from the new revision + 1.
    pub async fn next(&mut self) -> Result<WatchBatch> {
        loop {
            self.generation.borrow_and_update();
            if let Some(batch) = self.shared.lock().core.watch_poll(self.id)? {
                return Ok(batch);
            }
            self.generation.changed().await.map_err(|_| Error::Closed)?;
        }
    }
}

impl Drop for LocalWatcher {
    fn drop(&mut self) {
        self.shared.lock().core.watch_cancel(self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::TxnOp;

    #[tokio::test]
    async fn a_failed_journal_write_poisons_the_store_and_loses_nothing_acknowledged() {
        let dir = tempfile::tempdir().unwrap();
        let sim = Arc::new(skiff_storage::sim::SimIo::new(dir.path()).unwrap());
        let options = LocalOptions {
            files: DurableFiles::simulated(Arc::clone(&sim)),
            ..LocalOptions::default()
        };
        let store = LocalStore::open_with(dir.path(), options).await.unwrap();
        store
            .txn(Txn::new().and_then(vec![TxnOp::put("/a", "1")]))
            .await
            .unwrap();
        // Every file operation fails from here, as on a disk gone bad.
        sim.crash_after_ops(0);
        let failed = store
            .txn(Txn::new().and_then(vec![TxnOp::put("/b", "1")]))
            .await;
        assert!(matches!(failed, Err(Error::Io { .. })), "{failed:?}");
        let refused = store
            .txn(Txn::new().and_then(vec![TxnOp::put("/c", "1")]))
            .await;
        assert!(matches!(refused, Err(Error::Poisoned)), "{refused:?}");
        assert!(matches!(store.lease_grant(5).await, Err(Error::Poisoned)));
        drop(store);
        let reopened = LocalStore::open(dir.path()).await.unwrap();
        let all = reopened.get(GetRequest::prefix("/")).await.unwrap();
        assert_eq!(all.kvs.len(), 1, "only the acknowledged write survives");
        assert_eq!(all.revision, 2);
    }
}
