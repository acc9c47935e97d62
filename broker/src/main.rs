//! The `skiff` command: parses arguments and config, sets up logging, and runs the broker until
//! SIGINT or SIGTERM. Everything else lives in the library.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};

/// Skiff: a Kafka-compatible broker that serves legacy (0.9/0.10-era) and modern clients from one
/// log.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the broker. With no options: one node, data in ./skiff-data, listening on
    /// 127.0.0.1:9092.
    Serve {
        /// A TOML config file with Kafka-named keys (see `skiff config-keys`).
        #[arg(long, short)]
        config: Option<PathBuf>,
        /// Override one key, e.g. `--set log.dirs=/var/lib/skiff`; may be repeated; applied after
        /// the file.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        overrides: Vec<String>,
    },
    /// List every config key with its default, its bound and its meaning, then the rules between
    /// keys.
    ConfigKeys,
    /// Cluster placement, read from a broker's metrics listener (skiff.metrics.listener).
    Placement {
        #[command(subcommand)]
        command: PlacementCommand,
    },
    /// Print the credentials-file lines of a SASL user (salted SCRAM-SHA-256 and SCRAM-SHA-512
    /// keys; PLAIN is checked against the SHA-512 one). The password is read from standard input
    /// (one line), so it never appears in the process list or shell history.
    SaslCredential {
        /// The user name.
        user: String,
        /// PBKDF2 iterations.
        #[arg(long, default_value_t = skiff_broker::security::sasl::credentials::SCRAM_ITERATIONS_DEFAULT)]
        iterations: u32,
    },
    /// Show the principal that `ssl.principal.mapping.rules` give each client certificate's
    /// subject: one JSON line per certificate of the PEM files, then per `--name`, with the
    /// subject's RFC 2253 name and the principal (`null` when no rule applies: such a client is
    /// refused).
    SslPrincipal {
        /// The rules, as `ssl.principal.mapping.rules` takes them.
        #[arg(long, default_value = skiff_broker::config::SSL_PRINCIPAL_MAPPING_RULES_DEFAULT)]
        rules: String,
        /// An RFC 2253 name to map as it is (may be repeated).
        #[arg(long = "name", value_name = "RFC2253_NAME")]
        names: Vec<String>,
        /// PEM files of client certificates.
        certificates: Vec<PathBuf>,
    },
}

#[derive(Subcommand)]
enum PlacementCommand {
    /// Print every bundle (owner, state, load, last move) and, from the controller, the brokers'
    /// scores and the last shedding plan, as tables.
    Status {
        /// The broker's metrics listener (its skiff.metrics.listener), host:port.
        #[arg(long)]
        metrics: std::net::SocketAddr,
    },
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::ConfigKeys => {
            for (key, default, doc) in skiff_broker::config::keys() {
                match skiff_broker::config::bound(key) {
                    Some(bound) => {
                        println!("{key} (default {default}; must be {bound})\n    {doc}")
                    }
                    None => println!("{key} (default {default})\n    {doc}"),
                }
            }
            println!("\nRules between keys:");
            for (rule, keys) in skiff_broker::config::cross_key_rules() {
                println!("{rule} ({})", keys.join(", "));
            }
            Ok(())
        }
        Command::Placement {
            command: PlacementCommand::Status { metrics },
        } => {
            print!(
                "{}",
                skiff_broker::ops::placement_status::fetch_and_render(metrics)?
            );
            Ok(())
        }
        Command::SaslCredential { user, iterations } => {
            print!("{}", sasl_credential_lines(&user, iterations)?);
            Ok(())
        }
        Command::SslPrincipal {
            rules,
            names,
            certificates,
        } => {
            print!("{}", ssl_principal_lines(&rules, &names, &certificates)?);
            Ok(())
        }
        Command::Serve { config, overrides } => {
            tracing_subscriber::fmt()
                .with_env_filter(
                    tracing_subscriber::EnvFilter::try_from_env("SKIFF_LOG")
                        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
                )
                .with_writer(std::io::stderr)
                .init();
            let config = skiff_broker::config::Config::load(config.as_deref(), &overrides)?;
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .context("starting the tokio runtime")?;
            runtime.block_on(async move {
                let broker = skiff_broker::Broker::start(config).await?;
                broker.serve_until(shutdown_signal()).await?;
                anyhow::Ok(())
            })
        }
    }
}

/// The credentials-file lines for `user`, with the password read from standard input.
fn sasl_credential_lines(user: &str, iterations: u32) -> anyhow::Result<String> {
    use skiff_broker::security::sasl::credentials::{
        credential_from_password, credential_line, SCRAM_ITERATIONS_MAX, SCRAM_ITERATIONS_MIN,
        SCRAM_SALT_BYTES,
    };
    use skiff_broker::security::sasl::ScramMechanism;
    anyhow::ensure!(
        (SCRAM_ITERATIONS_MIN..=SCRAM_ITERATIONS_MAX).contains(&iterations),
        "iterations must be between {SCRAM_ITERATIONS_MIN} and {SCRAM_ITERATIONS_MAX}"
    );
    anyhow::ensure!(
        !user.is_empty() && !user.contains([' ', ',', '=']),
        "a user name must not be empty or contain spaces, commas or '='"
    );
    let mut password = String::new();
    std::io::stdin()
        .read_line(&mut password)
        .context("reading the password from standard input")?;
    let password = password.trim_end_matches(['\r', '\n']);
    anyhow::ensure!(!password.is_empty(), "empty password on standard input");
    let mut lines = String::new();
    for mechanism in [ScramMechanism::Sha256, ScramMechanism::Sha512] {
        let mut salt = [0u8; SCRAM_SALT_BYTES];
        rand::RngCore::fill_bytes(&mut rand::rngs::OsRng, &mut salt);
        let credential = credential_from_password(mechanism, password, &salt, iterations);
        lines.push_str(&credential_line(mechanism, user, &credential));
        lines.push('\n');
    }
    Ok(lines)
}

/// The JSON lines of `skiff ssl-principal`.
fn ssl_principal_lines(
    rules: &str,
    names: &[String],
    certificates: &[PathBuf],
) -> anyhow::Result<String> {
    let key = "ssl.principal.mapping.rules";
    let rules = skiff_broker::config::SslPrincipalMappingRules::parse(key, rules)?;
    let mut subjects = Vec::new();
    for path in certificates {
        for subject in skiff_broker::tls::pem_subject_names(path)
            .with_context(|| format!("reading {}", path.display()))?
        {
            subjects.push(subject.with_context(|| {
                format!(
                    "{}: a certificate without a readable subject",
                    path.display()
                )
            })?);
        }
    }
    subjects.extend(names.iter().cloned());
    let mut lines = String::new();
    for subject in subjects {
        let principal = rules
            .mapper
            .map(&subject)
            .map(|user| format!("User:{user}"));
        lines.push_str(
            &serde_json::json!({ "subject": subject, "principal": principal }).to_string(),
        );
        lines.push('\n');
    }
    Ok(lines)
}

/// Resolves on SIGINT or SIGTERM.
async fn shutdown_signal() {
    let mut terminate = match tokio::signal::unix::signal(
        tokio::signal::unix::SignalKind::terminate(),
    ) {
        Ok(signal) => signal,
        Err(error) => {
            tracing::error!(%error, "cannot listen for SIGTERM; only SIGINT will stop the broker");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT: shutting down"),
        _ = terminate.recv() => tracing::info!("SIGTERM: shutting down"),
    }
}
