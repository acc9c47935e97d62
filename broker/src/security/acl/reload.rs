//! The ACL reload task: every `skiff.acl.reload.interval.ms` it reads the ACL file and, when the
//! text differs from the last one it saw, parses it; a set that parses is sent whole to the
//! security store (which imports it while this broker's file is the one the store follows), one
//! that does not is logged as an error and nothing is sent. Comparing the text
//! (rather than the modification time) catches rewrites within the file system's time
//! granularity; the file is at most [`super::file::ACL_FILE_BYTES_MAX`] bytes.
//!
//! Must never: send a half-parsed set (a missing or broken file sends nothing), or outlive the
//! broker (it stops when `shutdown` turns true).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::{Acl, AclState};

/// Runs until `stop` turns true.
pub(crate) async fn run(
    state: Arc<AclState>,
    path: std::path::PathBuf,
    changed: watch::Sender<Option<Arc<Vec<Acl>>>>,
    mut stop: watch::Receiver<bool>,
) {
    let interval = Duration::from_millis(state.settings.reload_interval_ms);
    // The text the live set was built from, or the last text refused (so a broken file is
    // reported once, not at every tick).
    let mut last_text: Option<String> = Some(state.loaded_text.clone());
    let mut last_read_error: Option<String> = None;
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            _ = tokio::time::sleep(interval) => {}
        }
        if *stop.borrow() {
            return;
        }
        let read_path = path.clone();
        let text = match tokio::task::spawn_blocking(move || super::read_file(&read_path)).await {
            Ok(Ok(text)) => text,
            Ok(Err(error)) => {
                // Compared as text: an io::Error has no equality, and the log says it as text.
                let error = error.to_string();
                if last_read_error.as_ref() != Some(&error) {
                    tracing::error!(path = %path.display(), %error, "cannot read the ACL file; the ACLs in force stay");
                    last_read_error = Some(error);
                }
                continue;
            }
            Err(error) => {
                tracing::error!(%error, "ACL file read task failed");
                continue;
            }
        };
        last_read_error = None;
        if last_text.as_ref() == Some(&text) {
            continue;
        }
        match super::file::parse(&text) {
            Ok(acls) => {
                tracing::info!(path = %path.display(), acls = acls.len(), "ACL file changed");
                changed.send_replace(Some(Arc::new(acls)));
            }
            Err(error) => {
                tracing::error!(path = %path.display(), %error, "the ACL file does not parse; the ACLs in force stay");
            }
        }
        last_text = Some(text);
    }
}
