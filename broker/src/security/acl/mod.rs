//! Authorization: Kafka's ACL model ([`model`]), the bindings and filters of Kafka's ACL APIs
//! ([`binding`]), the decision over an indexed ACL set ([`authorizer`]), the ACL file format
//! ([`file`], documented there), the task that rereads the file and hands its ACLs to the
//! security store, which imports them while the store follows this broker's file ([`reload`]),
//! the live set, and [`Access`], the one helper every handler asks.
//!
//! Authorization is on with `authorizer.class.name` or `skiff.acl.file`; otherwise [`Access`]
//! holds no authorizer and every check is one branch that says yes. The ACLs live in the metadata
//! store (the broker's `cluster::security_store` mirrors them and calls
//! [`AclState::replace_acls`]); the file is only a bootstrap, imported by the first broker that
//! finds none there. The principal and address of the connection's [`Session`] are checked;
//! `super.users` bypass every ACL, and a resource no ACL names is refused unless
//! `allow.everyone.if.no.acl.found`.
//!
//! Must never: read the store on a request's path (checks answer from the in-memory index), or
//! keep serving a half-built set (a new set replaces the old one whole, or not at all).

pub mod authorizer;
pub mod binding;
pub mod file;
pub mod model;
pub(crate) mod reload;

use std::path::Path;
use std::sync::{Arc, RwLock};

use tokio::sync::watch;

pub use authorizer::Authorizer;
pub use model::{Acl, AclPrincipal, Operation, PatternType, Permission, ResourceType};

use crate::metrics::Metrics;
use crate::security::session::{Principal, Session};

/// The live ACL set and what is needed to rebuild it.
#[derive(Debug)]
pub(crate) struct AclState {
    current: RwLock<Arc<Authorizer>>,
    settings: AclSettings,
    /// The file text loaded at start-up, so the reload task's first look does not reload it.
    loaded_text: String,
    /// The file's ACLs as loaded at start-up (empty without a file): the bootstrap.
    file_acls: Vec<Acl>,
}

/// What authorization is configured with (`skiff.acl.file`, `super.users`,
/// `allow.everyone.if.no.acl.found`, `skiff.acl.reload.interval.ms`): whoever reads the config
/// builds it, so this module never reads the config itself. The settings do not reload.
#[derive(Debug, Clone)]
pub(crate) struct AclSettings {
    /// The ACL file to bootstrap the store from, if any.
    pub(crate) path: Option<std::path::PathBuf>,
    /// Principal names (after `User:`) that bypass every ACL.
    pub(crate) super_users: Vec<String>,
    /// Whether a resource no ACL names is allowed to everyone.
    pub(crate) allow_everyone_if_no_acl_found: bool,
    /// How often the reload task looks at the file; raised to [`RELOAD_INTERVAL_MS_MIN`].
    pub(crate) reload_interval_ms: u64,
}

/// Why the ACL file could not be loaded at start-up.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AclLoadError {
    /// The file could not be read.
    #[error("{}: {source}", path.display())]
    Read {
        /// The file.
        path: std::path::PathBuf,
        /// What reading it said.
        source: std::io::Error,
    },
    /// The file is too large or does not parse.
    #[error("{}: {source}", path.display())]
    File {
        /// The file.
        path: std::path::PathBuf,
        /// What is wrong with it.
        source: file::AclFileError,
    },
}

/// Why a read of the ACL file failed.
#[derive(Debug, thiserror::Error)]
enum ReadError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    File(#[from] file::AclFileError),
}

impl ReadError {
    fn at(self, path: &Path) -> AclLoadError {
        let path = path.to_owned();
        match self {
            Self::Io(source) => AclLoadError::Read { path, source },
            Self::File(source) => AclLoadError::File { path, source },
        }
    }
}

impl AclState {
    /// The set in force now.
    pub(crate) fn current(&self) -> Arc<Authorizer> {
        match self.current.read() {
            Ok(current) => current.clone(),
            // A writer never panics while holding the lock (it only swaps an Arc), but if one
            // did, the set it left is still a whole one.
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Replaces the set in force with `acls` (the store's, as the security store's mirror holds
    /// them), whole.
    pub(crate) fn replace_acls(&self, acls: &[Acl]) {
        let authorizer = Arc::new(build(&self.settings, acls));
        match self.current.write() {
            Ok(mut current) => *current = authorizer,
            Err(poisoned) => *poisoned.into_inner() = authorizer,
        }
    }

    /// The file and its ACLs as loaded at start-up, if a file is configured.
    pub(crate) fn file(&self) -> Option<(&Path, &[Acl])> {
        let path = self.settings.path.as_deref()?;
        Some((path, &self.file_acls))
    }
}

fn build(settings: &AclSettings, acls: &[Acl]) -> Authorizer {
    Authorizer::new(
        acls,
        settings.super_users.iter().cloned(),
        settings.allow_everyone_if_no_acl_found,
    )
}

/// The shortest reload interval, so a tiny setting cannot turn the reload task into a busy loop.
pub const RELOAD_INTERVAL_MS_MIN: u64 = 100;

/// Reads the ACL file, refusing one bigger than [`file::ACL_FILE_BYTES_MAX`] before reading it.
fn read_file(path: &Path) -> Result<String, ReadError> {
    let metadata = std::fs::metadata(path)?;
    let bytes = usize::try_from(metadata.len()).unwrap_or(usize::MAX);
    if bytes > file::ACL_FILE_BYTES_MAX {
        return Err(file::AclFileError::TooLarge {
            bytes,
            max: file::ACL_FILE_BYTES_MAX,
        }
        .into());
    }
    Ok(std::fs::read_to_string(path)?)
}

/// Loads the ACL file, if one is configured, at start-up: `None` when authorization is off. The
/// set in force starts as the file's (or empty) until the store's mirror replaces it.
pub(crate) fn load_at_start(
    settings: Option<AclSettings>,
) -> Result<Option<Arc<AclState>>, AclLoadError> {
    let Some(mut settings) = settings else {
        return Ok(None);
    };
    settings.reload_interval_ms = settings.reload_interval_ms.max(RELOAD_INTERVAL_MS_MIN);
    let (text, file_acls) = match &settings.path {
        None => (String::new(), Vec::new()),
        Some(path) => {
            let text = read_file(path).map_err(|error| error.at(path))?;
            let acls = file::parse(&text).map_err(|error| ReadError::from(error).at(path))?;
            tracing::info!(path = %path.display(), acls = acls.len(), "ACL file loaded");
            (text, acls)
        }
    };
    let authorizer = build(&settings, &file_acls);
    Ok(Some(Arc::new(AclState {
        current: RwLock::new(Arc::new(authorizer)),
        settings,
        loaded_text: text,
        file_acls,
    })))
}

/// The ACLs of the file each time its text changes and parses, as the reload task sends them.
pub(crate) type FileAcls = watch::Receiver<Option<Arc<Vec<Acl>>>>;

/// Starts the reload task when an ACL file is configured; it stops with the broker. The
/// receiver gets the file's ACLs whenever the file changes (the security store decides whether
/// this broker still follows its file).
pub(crate) fn spawn_reload(
    acl: Option<&Arc<AclState>>,
    shutdown: watch::Receiver<bool>,
) -> Option<FileAcls> {
    let state = acl?;
    let path = state.settings.path.clone()?;
    let (sender, receiver) = watch::channel(None);
    tokio::spawn(reload::run(state.clone(), path, sender, shutdown));
    Some(receiver)
}

/// What one request's principal may do: built once per request by its handler (through
/// `Ctx::access`), asked by the handler's checks. Without an ACL file it holds no authorizer and
/// allows everything.
pub(crate) struct Access<'a> {
    authorizer: Option<Arc<Authorizer>>,
    principal: &'a Principal,
    peer: Option<std::net::IpAddr>,
    metrics: &'a Metrics,
    api_key: i16,
}

impl<'a> Access<'a> {
    /// The access of `session` for one request of `api_key`.
    /// `acl` is `None` without an ACL file; refusals are counted in `metrics`.
    pub(crate) fn new(
        acl: Option<&AclState>,
        metrics: &'a Metrics,
        session: &'a Session,
        api_key: i16,
    ) -> Self {
        Self {
            authorizer: acl.map(|state| state.current()),
            principal: &session.principal,
            peer: session.peer_ip,
            metrics,
            api_key,
        }
    }

    /// Whether ACLs apply at all (an ACL file is configured); callers use it only to skip work
    /// that exists for the checks.
    pub(crate) fn enforced(&self) -> bool {
        self.authorizer.is_some()
    }

    /// Whether the principal may perform `operation` on `resource_type`/`name`; a refusal is
    /// counted and logged at debug.
    pub(crate) fn allows(
        &self,
        operation: Operation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        let Some(authorizer) = &self.authorizer else {
            return true;
        };
        let allowed =
            authorizer.authorize_from(self.principal, self.peer, operation, resource_type, name);
        if !allowed {
            self.refused(operation, resource_type, name);
        }
        allowed
    }

    /// Whether the principal may perform `operation` on the cluster.
    pub(crate) fn allows_cluster(&self, operation: Operation) -> bool {
        self.allows(operation, ResourceType::Cluster, model::CLUSTER_NAME)
    }

    /// Like [`Access::allows`], but a refusal is not counted: for filtering what a listing shows
    /// (Kafka does not log those either).
    pub(crate) fn may(
        &self,
        operation: Operation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        self.authorizer.as_ref().is_none_or(|authorizer| {
            authorizer.authorize_from(self.principal, self.peer, operation, resource_type, name)
        })
    }

    /// The principal's Describe access to topics, owned so that it outlives the request (the
    /// group coordinator filters a pattern's topics with it); `None` when ACLs are off. It holds
    /// the ACLs in force now: a later change shows at the next request.
    pub(crate) fn topic_describe(&self) -> Option<TopicDescribe> {
        self.authorizer.as_ref().map(|authorizer| TopicDescribe {
            authorizer: authorizer.clone(),
            principal: self.principal.clone(),
            peer: self.peer,
        })
    }

    /// The operations the principal may perform on `resource_type`/`name`, as Kafka's bit field
    /// (bit `1 << code` per operation of [`ResourceType::supported_operations`]); refusals are not
    /// counted.
    pub(crate) fn authorized_operations(&self, resource_type: ResourceType, name: &str) -> i32 {
        resource_type
            .supported_operations()
            .iter()
            .filter(|operation| self.may(**operation, resource_type, name))
            .fold(0i32, |bits, operation| {
                bits | 1i32
                    .checked_shl(u32::from(operation.code().unsigned_abs()))
                    .unwrap_or(0)
            })
    }

    /// Idempotent production: IdempotentWrite on the cluster, or (Kafka 3.x, KIP-679) Write on
    /// at least one topic.
    pub(crate) fn allows_idempotent_write(&self) -> bool {
        let Some(authorizer) = &self.authorizer else {
            return true;
        };
        let allowed = authorizer.authorize_from(
            self.principal,
            self.peer,
            Operation::IdempotentWrite,
            ResourceType::Cluster,
            model::CLUSTER_NAME,
        ) || authorizer.authorize_any_from(
            self.principal,
            self.peer,
            Operation::Write,
            ResourceType::Topic,
        );
        if !allowed {
            self.refused(
                Operation::IdempotentWrite,
                ResourceType::Cluster,
                model::CLUSTER_NAME,
            );
        }
        allowed
    }

    fn refused(&self, operation: Operation, resource_type: ResourceType, name: &str) {
        self.metrics.authorization_failed(self.api_key);
        tracing::debug!(
            principal = %self.principal,
            operation = operation.name(),
            resource = resource_type.name(),
            name,
            api_key = self.api_key,
            "authorization refused"
        );
    }
}

/// A principal's Describe access to topics, detached from its request ([`Access::topic_describe`]):
/// a filter, so refusals are not counted (Kafka does not log them either).
pub(crate) struct TopicDescribe {
    authorizer: Arc<Authorizer>,
    principal: Principal,
    peer: Option<std::net::IpAddr>,
}

impl TopicDescribe {
    /// Whether the principal may Describe `topic`.
    pub(crate) fn may_describe(&self, topic: &str) -> bool {
        self.authorizer.authorize_from(
            &self.principal,
            self.peer,
            Operation::Describe,
            ResourceType::Topic,
            topic,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_up_refuses_bad_files_with_the_path_and_place_named() {
        let directory = tempfile::tempdir().expect("temp dir");
        assert!(load_at_start(None).expect("no file").is_none());
        let path = directory.path().join("acls.txt");
        let settings = AclSettings {
            path: Some(path.clone()),
            super_users: vec!["admin".to_owned()],
            allow_everyone_if_no_acl_found: false,
            reload_interval_ms: 0,
        };
        let error = load_at_start(Some(settings.clone())).expect_err("missing file");
        assert!(error.to_string().contains("acls.txt"), "{error}");
        std::fs::write(
            &path,
            "allow User:a read topic:t\nallow User:a jump topic:t\n",
        )
        .expect("write");
        let error = load_at_start(Some(settings.clone()))
            .expect_err("bad file")
            .to_string();
        assert!(error.contains("line 2, column 14"), "{error}");
        std::fs::write(&path, "allow User:a read topic:t\n").expect("write");
        let state = load_at_start(Some(settings))
            .expect("loads")
            .expect("a set");
        assert_eq!(state.settings.reload_interval_ms, RELOAD_INTERVAL_MS_MIN);
        let current = state.current();
        assert_eq!(current.acl_count(), 1);
        assert!(current.authorize(
            &Principal::user("admin"),
            Operation::Delete,
            ResourceType::Topic,
            "t"
        ));
    }
}
