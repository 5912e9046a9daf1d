//! Log set-up shared by the long-running commands (`webhook`, `reconcile`, `run`).

use std::io::IsTerminal;

/// How log lines are written (the level comes from `RUST_LOG`, default `info`).
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line, the event's fields at the top level.
    Json,
}

/// The `--log-format` flag.
#[derive(Clone, Copy, Debug, clap::Args)]
pub struct LogArgs {
    /// Log format.
    #[arg(long, env = "RAYGATE_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// Installs the global tracing subscriber, writing to standard error.
pub fn init(args: LogArgs) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    match args.log_format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().flatten_event(true).init(),
    }
}
