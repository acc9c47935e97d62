//! The process's open-file limit and what it leaves for connections: at start the soft
//! RLIMIT_NOFILE is raised to the hard limit (many systems start processes at a soft 1024, which
//! would hold a thousand connections whatever `max.connections` says), then `max.connections` is
//! checked against it with [`FILES_RESERVED`] kept for everything that is not a client socket.
//!
//! Must never: lower a limit, or let an explicitly configured `max.connections` the limit cannot
//! hold start (accepts would then fail with EMFILE, the lockout issue 14 is about).

use crate::config::{Config, ConfigError};

/// Descriptors kept for what is not a client connection nor a segment file (those are
/// `skiff.log.files.max`, reserved apart): listeners, the metadata store's and the replica
/// fetchers' sockets, the offsets log, files being read or written.
pub(crate) const FILES_RESERVED: u64 = 1024;

/// The soft and hard RLIMIT_NOFILE after trying to raise the soft limit to the hard one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileLimit {
    /// What the process may open now.
    pub soft: u64,
    /// The ceiling an unprivileged process can raise it to.
    pub hard: u64,
}

/// Raises the soft RLIMIT_NOFILE to the hard limit if it is lower, and returns the limits then in
/// force. A refused raise (a hard limit above the kernel's `nr_open`) keeps the old soft limit.
pub fn raise_to_hard_limit() -> std::io::Result<FileLimit> {
    let (soft, hard) = rlimit::Resource::NOFILE.get()?;
    if soft < hard {
        match rlimit::Resource::NOFILE.set(hard, hard) {
            Ok(()) => {
                tracing::info!(
                    from = soft,
                    to = hard,
                    hard,
                    "raised the soft open-file limit to the hard limit"
                );
                return Ok(FileLimit { soft: hard, hard });
            }
            Err(error) => tracing::warn!(
                soft,
                hard,
                %error,
                "could not raise the open-file limit to its hard limit"
            ),
        }
    }
    Ok(FileLimit { soft, hard })
}

/// The connections the open-file limit holds besides the logs' files and the broker's own, and
/// the files reserved for those.
pub(crate) fn connections_that_fit(config: &Config, limit: FileLimit) -> (usize, u64) {
    // The storage engine keeps at most this many segment files open (`LogDir` caps the setting
    // at a quarter of the limit the same way).
    let log_files = (config.log_files_max as u64).min(limit.soft / 4);
    // On a small limit, keep at least half of it for connections.
    let reserved = (FILES_RESERVED + log_files).min(limit.soft / 2);
    let fits = usize::try_from(limit.soft - reserved)
        .unwrap_or(usize::MAX)
        .max(1);
    (fits, reserved)
}

/// How many connections the broker serves at once: `max.connections` if `limit` holds it with
/// [`FILES_RESERVED`] and the segment files' share to spare. Otherwise an explicitly set value is
/// an error naming the limit, and the default shrinks to what fits (with a warning), so a broker
/// on a machine with a low hard limit still starts.
pub(crate) fn connection_capacity(config: &Config, limit: FileLimit) -> Result<usize, ConfigError> {
    let (fits, reserved) = connections_that_fit(config, limit);
    if config.max_connections <= fits {
        return Ok(config.max_connections);
    }
    if config.explicitly_set.contains("max.connections") {
        return Err(ConfigError::InvalidValue {
            key: "max.connections".to_owned(),
            reason: format!(
                "{} connections need {} open files with the {reserved} kept for logs and listeners, \
                 but the process may open {} (RLIMIT_NOFILE soft {}, hard {}): raise the hard \
                 limit (`ulimit -Hn`, systemd's LimitNOFILE) or set max.connections to at most {fits}",
                config.max_connections,
                config.max_connections as u64 + reserved,
                limit.soft,
                limit.soft,
                limit.hard,
            ),
        });
    }
    tracing::warn!(
        default = config.max_connections,
        serving = fits,
        soft = limit.soft,
        hard = limit.hard,
        "the open-file limit cannot hold the default max.connections; serving fewer connections (raise the hard limit to serve more)"
    );
    Ok(fits)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(max_connections: Option<&str>) -> Config {
        let mut config = Config::default();
        if let Some(value) = max_connections {
            config
                .apply_override(&format!("max.connections={value}"))
                .expect("valid");
        }
        config
    }

    #[test]
    fn a_limit_that_holds_the_connections_keeps_them() {
        let limit = FileLimit {
            soft: 20_000,
            hard: 20_000,
        };
        assert!(
            connection_capacity(&config(Some("14881")), limit).is_err(),
            "20,000 less 1024 less the 4096 segment files"
        );
        let roomy = FileLimit {
            soft: 524_288,
            hard: 524_288,
        };
        assert_eq!(
            connection_capacity(&config(None), roomy).expect("fits"),
            crate::config::CONNECTIONS_MAX_DEFAULT
        );
        assert_eq!(
            connection_capacity(&config(Some("14880")), limit).expect("exactly fits"),
            14_880
        );
    }

    #[test]
    fn an_explicit_value_the_limit_cannot_hold_is_an_error_and_the_default_shrinks() {
        let limit = FileLimit {
            soft: 4096,
            hard: 4096,
        };
        let error = connection_capacity(&config(Some("10000")), limit)
            .expect_err("too many")
            .to_string();
        assert!(error.contains("max.connections"), "{error}");
        // 4096 less 1024 less a quarter (1024) for segment files.
        assert!(error.contains("at most 2048"), "{error}");
        assert_eq!(
            connection_capacity(&config(None), limit).expect("shrinks"),
            2048
        );
        let tiny = FileLimit {
            soft: 256,
            hard: 256,
        };
        assert_eq!(connection_capacity(&config(None), tiny).expect("half"), 128);
    }

    #[test]
    fn the_soft_limit_is_raised_to_the_hard_one() {
        let limit = raise_to_hard_limit().expect("getrlimit");
        // An unlimited hard limit cannot be a soft one on Linux (above nr_open): the raise is
        // refused and logged then.
        assert!(
            limit.soft == limit.hard || limit.hard == rlimit::INFINITY,
            "{limit:?}"
        );
        let again = raise_to_hard_limit().expect("getrlimit");
        assert_eq!(again, limit, "raising is idempotent");
    }
}
