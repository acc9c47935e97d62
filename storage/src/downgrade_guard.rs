//! The data directory's guard against a downgrade past transactions: a hook the embedder sets
//! ([`crate::LogDir::set_transactional_guard`]) that runs once, before the first transactional
//! batch (a transactional producer's batch or an end-transaction marker) is written to any log
//! of the directory, to record durably, where the previous release checks it, that this
//! directory now holds data the previous release would misread (it would serve aborted records
//! as committed). The broker's hook rewrites its topics file at a version the previous release
//! refuses (docs/operating/upgrades.md). Owns the once-only order; must never let a
//! transactional batch be written before the hook returned success.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};

/// What the embedder's hook is: it makes its mark durable, or fails (and the append with it).
pub type TransactionalHook = Arc<dyn Fn() -> Result<()> + Send + Sync>;

/// Shared by every log of a directory.
#[derive(Default)]
pub(crate) struct DowngradeGuard {
    /// The hook ran (or the embedder said its mark is on disk already).
    done: AtomicBool,
    /// The hook; held while it runs, so a second log's first transactional append waits for it.
    hook: Mutex<Option<TransactionalHook>>,
}

impl std::fmt::Debug for DowngradeGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DowngradeGuard")
            .field("done", &self.done.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl DowngradeGuard {
    /// Sets the hook; `already_marked` says the directory holds the mark already (the hook
    /// then never runs).
    pub(crate) fn set(&self, hook: TransactionalHook, already_marked: bool) -> Result<()> {
        *self.hook.lock().map_err(|_| Error::Poisoned)? = Some(hook);
        if already_marked {
            self.done.store(true, Ordering::Release);
        }
        Ok(())
    }

    /// Runs the hook if it has not run yet (one atomic load otherwise). Without a hook (an
    /// embedder that keeps no mark) there is nothing to do.
    pub(crate) fn before_transactional_write(&self) -> Result<()> {
        if self.done.load(Ordering::Acquire) {
            return Ok(());
        }
        let hook = self.hook.lock().map_err(|_| Error::Poisoned)?;
        if self.done.load(Ordering::Acquire) {
            return Ok(());
        }
        if let Some(hook) = hook.as_ref() {
            hook()?;
        }
        self.done.store(true, Ordering::Release);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn the_hook_runs_once_and_a_failure_is_retried() {
        let guard = DowngradeGuard::default();
        guard.before_transactional_write().unwrap();
        let guard = DowngradeGuard::default();
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&calls);
        guard
            .set(
                Arc::new(move || {
                    if counted.fetch_add(1, Ordering::SeqCst) == 0 {
                        return Err(Error::Closed);
                    }
                    Ok(())
                }),
                false,
            )
            .unwrap();
        assert!(guard.before_transactional_write().is_err());
        guard.before_transactional_write().unwrap();
        guard.before_transactional_write().unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        let marked = DowngradeGuard::default();
        marked.set(Arc::new(|| Err(Error::Closed)), true).unwrap();
        marked.before_transactional_write().unwrap();
    }
}
