//! The broker under test: either one already running (an address, and a pid for RSS when it is
//! local) or a `skiff` spawned here with a fresh data directory and killed at the end, so a sweep
//! can start one per setting, with an SSL listener next to the PLAINTEXT one when asked.
//!
//! Must never: listen anywhere but 127.0.0.1, or leave a spawned broker running (dropping a
//! [`SpawnedBroker`] kills it).

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context};

/// How long a spawned broker may take to print its address.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a stopped broker may take to exit after SIGTERM before it is killed.
pub const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(20);

/// The line prefix `skiff serve` prints once it listens.
const LISTENING_PREFIX: &str = "skiff listening on ";

/// The line prefix `skiff serve` prints for each of its listeners:
/// `skiff listener <NAME> (<PROTOCOL>) on <host>:<port>`.
const LISTENER_PREFIX: &str = "skiff listener ";

/// The name the spawned broker gives its TLS listener (mapped to SSL by the default
/// `listener.security.protocol.map`).
const SSL_LISTENER_NAME: &str = "SSL";

/// A broker to measure.
#[derive(Debug, Clone)]
pub struct Target {
    /// host:port of the PLAINTEXT listener.
    pub bootstrap: String,
    /// host:port of an SSL listener, when there is one.
    pub ssl_bootstrap: Option<String>,
    /// Its pid when it runs on this machine (for RSS).
    pub pid: Option<u32>,
}

/// How to start a local `skiff`.
#[derive(Debug, Clone)]
pub struct SpawnSpec {
    /// The `skiff` binary.
    pub binary: PathBuf,
    /// `key=value` settings passed as `--set`, after the data directory and listener.
    pub settings: Vec<String>,
    /// A PEM keystore (certificate chain and PKCS#8 key): the broker then gets an SSL listener
    /// next to the PLAINTEXT one, serving this certificate.
    pub ssl_keystore: Option<PathBuf>,
}

/// One `skiff listener <NAME> (<PROTOCOL>) on <host>:<port>` line, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerLine {
    /// Listener name.
    pub name: String,
    /// Security protocol.
    pub protocol: String,
    /// host:port.
    pub address: String,
}

/// Parses a listener line of the broker's stdout; `None` for any other line.
pub fn parse_listener_line(line: &str) -> Option<ListenerLine> {
    let rest = line.trim().strip_prefix(LISTENER_PREFIX)?;
    let (name, rest) = rest.split_once(" (")?;
    let (protocol, address) = rest.split_once(") on ")?;
    Some(ListenerLine {
        name: name.to_owned(),
        protocol: protocol.to_owned(),
        address: address.trim().to_owned(),
    })
}

/// What the stdout reader thread reports.
enum Announcement {
    /// The first line: where the broker listens (its first listener).
    Listening(String),
    /// One listener line.
    Listener(ListenerLine),
}

/// A `skiff serve` child process with its own temporary data directory.
pub struct SpawnedBroker {
    child: Child,
    target: Target,
    _data: tempfile::TempDir,
}

impl SpawnedBroker {
    /// Starts `spec.binary serve` on 127.0.0.1 with a free port, plus `extra` settings.
    pub fn start(spec: &SpawnSpec, extra: &[String]) -> anyhow::Result<Self> {
        let data = tempfile::Builder::new().prefix("skiff-bench-").tempdir()?;
        let mut command = Command::new(&spec.binary);
        command
            .arg("serve")
            .arg("--set")
            .arg(format!("log.dirs={}", data.path().display()))
            .arg("--set");
        match &spec.ssl_keystore {
            None => command.arg("listeners=PLAINTEXT://127.0.0.1:0"),
            Some(keystore) => command
                .arg(format!(
                    "listeners=PLAINTEXT://127.0.0.1:0,{SSL_LISTENER_NAME}://127.0.0.1:0"
                ))
                .arg("--set")
                .arg(format!("ssl.keystore.location={}", keystore.display())),
        };
        for setting in spec.settings.iter().chain(extra) {
            command.arg("--set").arg(setting);
        }
        let mut child = command
            .env("SKIFF_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("starting {}", spec.binary.display()))?;
        let stdout = child.stdout.take().context("no stdout")?;
        let (sender, receiver) = std::sync::mpsc::channel();
        // The broker keeps writing to stdout (its logs); the pipe is drained until it closes so
        // the broker never blocks on a full pipe.
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let announcement = match line.strip_prefix(LISTENING_PREFIX) {
                    Some(address) => Announcement::Listening(address.trim().to_owned()),
                    None => match parse_listener_line(&line) {
                        Some(listener) => Announcement::Listener(listener),
                        None => continue,
                    },
                };
                // The receiver stops listening once started; the pipe is still drained.
                let _ = sender.send(announcement);
            }
        });
        let pid = child.id();
        let mut broker = Self {
            child,
            target: Target {
                bootstrap: String::new(),
                ssl_bootstrap: None,
                pid: Some(pid),
            },
            _data: data,
        };
        let deadline = std::time::Instant::now() + STARTUP_TIMEOUT;
        let mut plaintext = None;
        loop {
            let want_ssl = spec.ssl_keystore.is_some() && broker.target.ssl_bootstrap.is_none();
            if plaintext.is_some() && !want_ssl {
                break;
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match receiver.recv_timeout(left) {
                Ok(Announcement::Listening(address)) => {
                    plaintext.get_or_insert(address);
                }
                Ok(Announcement::Listener(listener)) => match listener.protocol.as_str() {
                    "PLAINTEXT" => plaintext = Some(listener.address),
                    "SSL" => broker.target.ssl_bootstrap = Some(listener.address),
                    _ => {}
                },
                Err(_) if want_ssl && plaintext.is_some() => bail!(
                    "{} reported no SSL listener (does it support TLS listeners yet?)",
                    spec.binary.display()
                ),
                Err(_) => bail!("{} did not report its address", spec.binary.display()),
            }
        }
        broker.target.bootstrap = plaintext.unwrap_or_default();
        for address in std::iter::once(&broker.target.bootstrap).chain(&broker.target.ssl_bootstrap)
        {
            if !address.starts_with("127.0.0.1:") {
                bail!("broker listens on {address}, not loopback");
            }
        }
        Ok(broker)
    }

    /// Where it listens and its pid.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// Sends SIGTERM and waits for a graceful exit, killing it after [`SHUTDOWN_TIMEOUT`].
    pub fn stop(mut self) -> anyhow::Result<()> {
        self.terminate();
        Ok(())
    }

    fn terminate(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        if let Ok(pid) = libc::pid_t::try_from(self.child.id()) {
            // SAFETY: kill(2) with the pid of our own child, which we have not reaped yet.
            unsafe {
                libc::kill(pid, libc::SIGTERM);
            }
        }
        let deadline = std::time::Instant::now() + SHUTDOWN_TIMEOUT;
        while std::time::Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for SpawnedBroker {
    fn drop(&mut self) {
        self.terminate();
    }
}

/// Checks that `bootstrap` is a loopback address (this tool sends load only to this machine).
pub fn require_loopback(bootstrap: &str) -> anyhow::Result<()> {
    let host = bootstrap
        .rsplit_once(':')
        .map_or(bootstrap, |(host, _)| host);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let loopback = host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|address| address.is_loopback());
    if !loopback {
        bail!("{bootstrap} is not a loopback address; skiff-bench only measures brokers on this machine");
    }
    Ok(())
}

/// The `skiff` next to this binary (cargo puts both in the same target directory).
pub fn default_skiff_binary() -> Option<PathBuf> {
    let me = std::env::current_exe().ok()?;
    let candidate = me.parent()?.join("skiff");
    candidate.exists().then_some(candidate)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listener_lines_parse_and_other_lines_do_not() {
        assert_eq!(
            parse_listener_line("skiff listener SSL (SSL) on 127.0.0.1:40123"),
            Some(ListenerLine {
                name: "SSL".to_owned(),
                protocol: "SSL".to_owned(),
                address: "127.0.0.1:40123".to_owned(),
            })
        );
        assert_eq!(
            parse_listener_line("skiff listener INTERNAL (PLAINTEXT) on 127.0.0.1:9092\n")
                .map(|line| (line.name, line.protocol)),
            Some(("INTERNAL".to_owned(), "PLAINTEXT".to_owned()))
        );
        assert_eq!(
            parse_listener_line("skiff listening on 127.0.0.1:9092"),
            None
        );
        assert_eq!(
            parse_listener_line("skiff listener SSL on 127.0.0.1:1"),
            None
        );
    }

    #[test]
    fn only_loopback_addresses_pass() {
        assert!(require_loopback("127.0.0.1:9092").is_ok());
        assert!(require_loopback("127.3.4.5:1").is_ok());
        assert!(require_loopback("localhost:9092").is_ok());
        assert!(require_loopback("[::1]:9092").is_ok());
        assert!(require_loopback("10.0.0.1:9092").is_err());
        assert!(require_loopback("192.168.1.2:9092").is_err());
    }
}
