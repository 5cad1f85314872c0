//! Logging: `tracing-subscriber`, text or JSON (`KRUISE_LOG_FORMAT`), filtered by `RUST_LOG`
//! (default `info`).

use tracing_subscriber::EnvFilter;

use crate::settings::LogFormat;

/// Installs the global subscriber. Calling it twice is harmless (tests run several
/// controllers in one process).
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    let _ = match format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Text => builder.try_init(),
    };
}
