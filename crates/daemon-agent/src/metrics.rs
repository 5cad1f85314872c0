//! The agent's own metrics, registered in the process registry next to the shared ones
//! (`/metrics` of the admin server).

use prometheus::{Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, Opts};

/// `kruise_agent_*` metrics.
#[derive(Clone)]
pub struct AgentMetrics {
    /// `kruise_agent_image_pulls_total{result}`: finished pulls (succeeded / failed).
    pub pulls: IntCounterVec,
    /// `kruise_agent_image_pull_duration_seconds`: time from Pulling to finished.
    pub pull_seconds: Histogram,
    /// `kruise_agent_pull_workers`: running pull workers.
    pub workers: IntGauge,
    /// `kruise_agent_status_writes_total`: NodeImage status writes.
    pub status_writes: IntCounter,
}

impl AgentMetrics {
    #[allow(
        clippy::expect_used,
        reason = "constant metric names, help texts, buckets and labels: a failure is a programming error the unit tests catch"
    )]
    pub fn register(registry: &prometheus::Registry) -> Self {
        let pulls = IntCounterVec::new(
            Opts::new(
                "kruise_agent_image_pulls_total",
                "Finished image pulls by result.",
            ),
            &["result"],
        )
        .expect("valid metric");
        let pull_seconds = Histogram::with_opts(
            HistogramOpts::new(
                "kruise_agent_image_pull_duration_seconds",
                "Time from the start of a pull to its end.",
            )
            .buckets(vec![0.1, 0.5, 1.0, 5.0, 15.0, 60.0, 300.0, 900.0]),
        )
        .expect("valid metric");
        let workers = IntGauge::new("kruise_agent_pull_workers", "Running pull workers.")
            .expect("valid metric");
        let status_writes = IntCounter::new(
            "kruise_agent_status_writes_total",
            "NodeImage status writes.",
        )
        .expect("valid metric");
        // A second agent in the same process (tests) shares the first one's series.
        let _ = registry.register(Box::new(pulls.clone()));
        let _ = registry.register(Box::new(pull_seconds.clone()));
        let _ = registry.register(Box::new(workers.clone()));
        let _ = registry.register(Box::new(status_writes.clone()));
        AgentMetrics {
            pulls,
            pull_seconds,
            workers,
            status_writes,
        }
    }
}
