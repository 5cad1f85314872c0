//! Prometheus metrics every binary exports on `/metrics`.
//!
//! One registry per process (not the global default), so several controllers can run in
//! one test process without clashing. Names follow Prometheus conventions with a
//! `kruise_` prefix. docs/metrics.md lists every family with example queries.
//!
//! A binary's registry ([`Metrics::for_binary`], what [`crate::Runtime`] uses) also holds
//! what every Prometheus exporter has: the `process_*` collector (CPU, resident memory,
//! open file descriptors, threads, start time; read from `/proc`) and
//! `kruise_build_info{binary,version} 1`.

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry, TextEncoder,
};

/// All metrics of one process.
#[derive(Clone)]
pub struct Metrics {
    pub registry: Registry,
    /// `kruise_reconcile_total{controller,result}`.
    pub reconciles: IntCounterVec,
    /// `kruise_reconcile_duration_seconds{controller,result}`.
    pub reconcile_duration: HistogramVec,
    /// `kruise_workqueue_depth{controller}`: objects triggered and waiting for a reconcile.
    pub queue_depth: IntGaugeVec,
    /// `kruise_api_requests_total{verb,resource,code}`: every request to the apiserver.
    pub api_requests: IntCounterVec,
    /// `kruise_api_request_duration_seconds{verb}`: time to response headers.
    pub api_request_duration: HistogramVec,
    /// `kruise_pod_operations_total{controller,operation}`: created, deleted, updated_in_place, ...
    pub pod_operations: IntCounterVec,
    /// `kruise_leader{controller}`: 1 while this replica holds the controller's lease.
    pub leader: IntGaugeVec,
    /// `kruise_foreign_leader_active{lease}`: 1 while another manager holds the Lease
    /// `namespace/name` named in `KRUISE_FOREIGN_LEADER_LEASES`, so this replica does not
    /// lead (`leader::foreign_leader_active`).
    pub foreign_leader_active: IntGaugeVec,
    /// `kruise_webhook_request_duration_seconds{webhook,operation,decision}`.
    pub webhook_duration: HistogramVec,
    /// `kruise_webhook_errors_total{webhook,kind}`.
    pub webhook_errors: IntCounterVec,
    /// `kruise_malformed_objects_total{kind}`: object versions (uid, resourceVersion) a
    /// cache could not decode and left out.
    pub malformed_objects: IntCounterVec,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    #[allow(
        clippy::expect_used,
        reason = "constant metric names, help texts and labels, registered once into a fresh registry: a failure is a programming error the unit tests catch"
    )]
    pub fn new() -> Self {
        let registry = Registry::new();
        let reconciles = IntCounterVec::new(
            Opts::new(
                "kruise_reconcile_total",
                "Reconciles by controller and result.",
            ),
            &["controller", "result"],
        )
        .expect("valid metric");
        let reconcile_duration = HistogramVec::new(
            HistogramOpts::new(
                "kruise_reconcile_duration_seconds",
                "Reconcile duration by controller and result.",
            )
            .buckets(vec![
                0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
            ]),
            &["controller", "result"],
        )
        .expect("valid metric");
        let queue_depth = IntGaugeVec::new(
            Opts::new(
                "kruise_workqueue_depth",
                "Objects triggered and waiting for a reconcile.",
            ),
            &["controller"],
        )
        .expect("valid metric");
        let api_requests = IntCounterVec::new(
            Opts::new(
                "kruise_api_requests_total",
                "Requests to the Kubernetes API by verb, resource and HTTP code.",
            ),
            &["verb", "resource", "code"],
        )
        .expect("valid metric");
        let api_request_duration = HistogramVec::new(
            HistogramOpts::new(
                "kruise_api_request_duration_seconds",
                "Kubernetes API request latency to response headers.",
            )
            .buckets(vec![
                0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
            ]),
            &["verb"],
        )
        .expect("valid metric");
        let pod_operations = IntCounterVec::new(
            Opts::new(
                "kruise_pod_operations_total",
                "Pod operations by controller: created, deleted, updated_in_place, ...",
            ),
            &["controller", "operation"],
        )
        .expect("valid metric");
        let leader = IntGaugeVec::new(
            Opts::new(
                "kruise_leader",
                "1 while this replica holds the controller's lease.",
            ),
            &["controller"],
        )
        .expect("valid metric");
        let foreign_leader_active = IntGaugeVec::new(
            Opts::new(
                "kruise_foreign_leader_active",
                "1 while another manager (e.g. OpenKruise's kruise-manager) holds this Lease, so no controller of this process leads.",
            ),
            &["lease"],
        )
        .expect("valid metric");
        let webhook_duration = HistogramVec::new(
            HistogramOpts::new(
                "kruise_webhook_request_duration_seconds",
                "Admission request handling time.",
            )
            .buckets(vec![
                0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
            ]),
            &["webhook", "operation", "decision"],
        )
        .expect("valid metric");
        let webhook_errors = IntCounterVec::new(
            Opts::new(
                "kruise_webhook_errors_total",
                "Admission requests that could not be handled, by kind.",
            ),
            &["webhook", "kind"],
        )
        .expect("valid metric");
        let malformed_objects = IntCounterVec::new(
            Opts::new(
                "kruise_malformed_objects_total",
                "Object versions that did not decode and were left out of the cache, by kind.",
            ),
            &["kind"],
        )
        .expect("valid metric");
        for c in [
            Box::new(reconciles.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(reconcile_duration.clone()),
            Box::new(queue_depth.clone()),
            Box::new(api_requests.clone()),
            Box::new(api_request_duration.clone()),
            Box::new(pod_operations.clone()),
            Box::new(leader.clone()),
            Box::new(foreign_leader_active.clone()),
            Box::new(webhook_duration.clone()),
            Box::new(webhook_errors.clone()),
            Box::new(malformed_objects.clone()),
        ] {
            registry.register(c).expect("metric registered once");
        }
        Metrics {
            registry,
            reconciles,
            reconcile_duration,
            queue_depth,
            api_requests,
            api_request_duration,
            pod_operations,
            leader,
            foreign_leader_active,
            webhook_duration,
            webhook_errors,
            malformed_objects,
        }
    }

    /// The registry of a binary: [`Metrics::new`] plus the `process_*` collector and
    /// `kruise_build_info{binary,version} 1`.
    #[allow(
        clippy::expect_used,
        reason = "constant metric names and labels, registered once into a fresh registry: a failure is a programming error the unit tests catch"
    )]
    pub fn for_binary(binary: &str, version: &str) -> Self {
        let metrics = Self::new();
        let build_info = IntGaugeVec::new(
            Opts::new(
                "kruise_build_info",
                "1, labelled with the binary's name and version.",
            ),
            &["binary", "version"],
        )
        .expect("valid metric");
        build_info.with_label_values(&[binary, version]).set(1);
        metrics
            .registry
            .register(Box::new(build_info))
            .expect("metric registered once");
        metrics
            .registry
            .register(Box::new(
                prometheus::process_collector::ProcessCollector::for_self(),
            ))
            .expect("metric registered once");
        metrics
    }

    /// The text exposition format served on `/metrics`.
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        if let Err(err) = TextEncoder::new().encode(&self.registry.gather(), &mut buf) {
            return format!("# metrics could not be encoded: {err}\n");
        }
        String::from_utf8_lossy(&buf).into_owned()
    }

    /// Counts one pod operation of a controller.
    pub fn pod_operation(&self, controller: &str, operation: &str) {
        self.pod_operations
            .with_label_values(&[controller, operation])
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rendered_text_names_every_family_once_used() {
        let m = Metrics::new();
        m.reconciles
            .with_label_values(&["cloneset-controller", "ok"])
            .inc();
        m.api_requests
            .with_label_values(&["create", "pods", "201"])
            .inc_by(3);
        m.pod_operation("cloneset-controller", "created");
        let text = m.render();
        assert!(
            text.contains(
                "kruise_reconcile_total{controller=\"cloneset-controller\",result=\"ok\"} 1"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "kruise_api_requests_total{code=\"201\",resource=\"pods\",verb=\"create\"} 3"
            ),
            "{text}"
        );
        assert!(text.contains("kruise_pod_operations_total{controller=\"cloneset-controller\",operation=\"created\"} 1"));
    }

    #[test]
    fn a_binary_exports_process_metrics_and_build_info() {
        let m = Metrics::for_binary("cloneset-ctl", "0.1.0");
        let families: Vec<String> = m
            .registry
            .gather()
            .iter()
            .map(|f| f.name().to_string())
            .collect();
        for name in [
            "process_cpu_seconds_total",
            "process_resident_memory_bytes",
            "process_open_fds",
            "process_start_time_seconds",
            "kruise_build_info",
        ] {
            assert!(families.iter().any(|f| f == name), "{name}: {families:?}");
        }
        let text = m.render();
        assert!(
            text.contains("kruise_build_info{binary=\"cloneset-ctl\",version=\"0.1.0\"} 1"),
            "{text}"
        );
        let rss = text
            .lines()
            .find_map(|l| l.strip_prefix("process_resident_memory_bytes "))
            .and_then(|v| v.trim().parse::<f64>().ok());
        assert!(rss.is_some_and(|v| v > 0.0), "{text}");
    }

    #[test]
    fn two_processes_worth_of_metrics_do_not_clash() {
        let a = Metrics::new();
        let b = Metrics::new();
        a.leader.with_label_values(&["x"]).set(1);
        assert!(!b.render().contains("kruise_leader{"));
    }
}
