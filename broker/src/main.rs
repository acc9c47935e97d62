//! The `skiff` command: parses arguments and config, sets up logging, and runs the broker until
//! SIGINT or SIGTERM. Everything else lives in the library.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};

/// Skiff: a Kafka-compatible broker that serves legacy (0.9/0.10-era) and modern clients from one log.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the broker. With no options: one node, data in ./skiff-data, listening on 127.0.0.1:9092.
    Serve {
        /// A TOML config file with Kafka-named keys (see `skiff config-keys`).
        #[arg(long, short)]
        config: Option<PathBuf>,
        /// Override one key, e.g. `--set log.dirs=/var/lib/skiff`; may be repeated; applied after the file.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        overrides: Vec<String>,
    },
    /// List every config key with its default and meaning.
    ConfigKeys,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::ConfigKeys => {
            for (key, default, doc) in skiff_broker::config::keys() {
                println!("{key} (default {default})\n    {doc}");
            }
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
