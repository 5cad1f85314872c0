//! Settings from the environment (`KRUISE_*`), parsed once at start.
//!
//! A bad value stops the process at start with a message naming the variable and the
//! form it expects, e.g. `KRUISE_KUBE_QPS="fast": expected a number (queries per second)`.

use std::net::SocketAddr;

use serde::Deserialize;

use crate::Error;
use crate::gates::FeatureGates;
use crate::leader::LeaseRef;

/// The environment variable prefix every setting shares.
pub const PREFIX: &str = "KRUISE_";

/// OpenKruise's kruise-manager Lease: `--leader-election-namespace` and
/// `--leader-election-id` defaults (openkruise/kruise v1.9.0 main.go).
pub const DEFAULT_FOREIGN_LEADER_LEASES: &str = "kruise-system/kruise-manager";

/// Settings every binary understands.
#[derive(Clone, Debug, Deserialize)]
#[serde(default)]
pub struct Settings {
    /// `KRUISE_ADMIN_ADDR`: `/metrics`, `/healthz`, `/readyz`.
    pub admin_addr: SocketAddr,
    /// `KRUISE_WORKERS`: concurrent reconciles per controller.
    pub workers: u16,
    /// `KRUISE_KUBE_QPS`: client-side request rate to the apiserver (0 = unlimited).
    pub kube_qps: f64,
    /// `KRUISE_KUBE_BURST`: requests allowed above the rate in a burst.
    pub kube_burst: u32,
    /// `KRUISE_LEADER_ELECT`: hold a Lease before reconciling.
    pub leader_elect: bool,
    /// `KRUISE_LEASE_DURATION_SECONDS`: how long a lease stays valid without renewal.
    pub lease_duration_seconds: u64,
    /// `KRUISE_NAMESPACE`: where the Lease lives (the controller's own namespace).
    pub namespace: String,
    /// `KRUISE_FOREIGN_LEADER_LEASES`: `namespace/name,...` of other managers' Leases
    /// (default OpenKruise's `kruise-system/kruise-manager`); while one is held, no
    /// controller runs (`leader`). Empty: no such guard.
    pub foreign_leader_leases: String,
    /// `KRUISE_WATCH_NAMESPACE`: only watch and act in this namespace (unset = all).
    pub watch_namespace: Option<String>,
    /// `KRUISE_FEATURE_GATES`: `Name=true,Other=false`.
    pub feature_gates: String,
    /// `KRUISE_LOG_FORMAT`: `text` or `json`.
    pub log_format: LogFormat,
    /// `KRUISE_WEBHOOK_ADDR`: where the admission webhook listens (controllers that have one).
    pub webhook_addr: SocketAddr,
    /// `KRUISE_WEBHOOK_URL`: base URL the apiserver calls (e.g. `https://127.0.0.1:9443`);
    /// unset = in-cluster, through the Service named by `KRUISE_WEBHOOK_SERVICE`.
    pub webhook_url: Option<String>,
    /// `KRUISE_WEBHOOK_SERVICE`: `<namespace>/<name>` of the webhook Service in-cluster.
    pub webhook_service: Option<String>,
    /// `KRUISE_WEBHOOK_CERT_DIR`: load `tls.crt`/`tls.key`/`ca.crt` from here instead of
    /// generating a self-signed CA.
    pub webhook_cert_dir: Option<String>,
    /// `KRUISE_WEBHOOK_CA_SECRET`: the name of a Secret in `KRUISE_NAMESPACE` holding the
    /// generated CA and serving certificate, shared by every replica (the first one
    /// writes it, the others load it; rotations are written there). Unset: the CA lives
    /// in this process only, fine for one replica.
    pub webhook_ca_secret: Option<String>,
    /// `KRUISE_WEBHOOK_TIMEOUT_SECONDS`: the `timeoutSeconds` (1 to 30, the range the
    /// apiserver accepts) of every webhook this controller registers with the house
    /// default (10 s, [`crate::webhook::config::DEFAULT_TIMEOUT_SECONDS`]); webhooks
    /// whose code sets another timeout (the 5 s Pod webhooks) keep it. Unset: the house
    /// defaults. The Helm chart sets it from `webhookConfiguration.timeoutSeconds`, so
    /// that value survives the re-registration at every start.
    pub webhook_timeout_seconds: Option<i32>,
    /// `KRUISE_WEBHOOK_CLIENT_CA`: a PEM file of the CA(s) that sign the client
    /// certificate the apiserver presents to admission webhooks (its
    /// `--admission-control-config-file` names a kubeconfig with that certificate). When
    /// set, an admission request on a connection without a certificate of these CAs gets
    /// HTTP 401 and is never handled: nobody else who reaches the port can spend a
    /// PodUnavailableBudget or write a WorkloadSpread's status with a forged review.
    /// Conversion and authorization routes are not affected (the apiserver presents no
    /// certificate there, and they change no state). Unset: any TLS client is served.
    pub webhook_client_ca: Option<String>,
    /// `KRUISE_RESYNC_PERIOD_SECONDS`: how long after a reconcile that asked to wait for
    /// the next change an object is reconciled anyway, so one whose event was missed still
    /// converges (controller-runtime's `SyncPeriod`, 10 h by default, jittered; here each
    /// object is late by up to 10 % more, spread by its name). 0: never.
    pub resync_period_seconds: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            admin_addr: ([0, 0, 0, 0], 8080).into(),
            workers: 3,
            kube_qps: 30.0,
            kube_burst: 50,
            leader_elect: true,
            lease_duration_seconds: 15,
            namespace: "kruise-system".into(),
            foreign_leader_leases: DEFAULT_FOREIGN_LEADER_LEASES.into(),
            watch_namespace: None,
            feature_gates: String::new(),
            log_format: LogFormat::Text,
            webhook_addr: ([0, 0, 0, 0], 9443).into(),
            webhook_url: None,
            webhook_service: None,
            webhook_cert_dir: None,
            webhook_ca_secret: None,
            webhook_timeout_seconds: None,
            webhook_client_ca: None,
            resync_period_seconds: 10 * 3600,
        }
    }
}

/// The `timeoutSeconds` the apiserver accepts on an admission webhook (Kubernetes API
/// reference, admissionregistration.k8s.io/v1 ValidatingWebhook: "between 1 and 30
/// seconds").
pub const WEBHOOK_TIMEOUT_RANGE: std::ops::RangeInclusive<i32> = 1..=30;

/// The form each variable expects, for error messages.
const EXPECTED: &[(&str, &str)] = &[
    ("admin_addr", "an address like 0.0.0.0:8080"),
    ("webhook_addr", "an address like 0.0.0.0:9443"),
    ("workers", "a whole number from 1 to 65535"),
    ("kube_qps", "a number (queries per second, 0 = unlimited)"),
    ("kube_burst", "a whole number of requests"),
    ("leader_elect", "true or false"),
    ("lease_duration_seconds", "a whole number of seconds"),
    (
        "resync_period_seconds",
        "a whole number of seconds (0 = no periodic resync)",
    ),
    ("log_format", "text or json"),
    (
        "webhook_timeout_seconds",
        "a whole number of seconds from 1 to 30 (the apiserver's range for timeoutSeconds)",
    ),
];

impl Settings {
    /// Reads the settings from the process environment.
    pub fn from_env() -> Result<Self, Error> {
        Self::from_vars(std::env::vars())
    }

    /// Reads the settings from the given variables (tests pass their own).
    pub fn from_vars(vars: impl IntoIterator<Item = (String, String)>) -> Result<Self, Error> {
        let vars: Vec<(String, String)> = vars.into_iter().collect();
        let settings: Settings = load(vars.iter().cloned())?;
        if settings.workers == 0 {
            return Err(Error::Settings(format!(
                "{PREFIX}WORKERS=0: expected {}",
                expected("workers")
            )));
        }
        if settings.kube_qps < 0.0 || !settings.kube_qps.is_finite() {
            return Err(Error::Settings(format!(
                "{PREFIX}KUBE_QPS={}: expected {}",
                settings.kube_qps,
                expected("kube_qps")
            )));
        }
        if let Some(timeout) = settings.webhook_timeout_seconds
            && !WEBHOOK_TIMEOUT_RANGE.contains(&timeout)
        {
            return Err(Error::Settings(format!(
                "{PREFIX}WEBHOOK_TIMEOUT_SECONDS={timeout}: expected {}",
                expected("webhook_timeout_seconds")
            )));
        }
        FeatureGates::parse(&settings.feature_gates)?;
        LeaseRef::parse_list(&settings.foreign_leader_leases).map_err(|e| {
            Error::Settings(format!(
                "{PREFIX}FOREIGN_LEADER_LEASES={:?}: expected namespace/name[,namespace/name...] or empty ({e})",
                settings.foreign_leader_leases
            ))
        })?;
        Ok(settings)
    }

    /// The Leases named by `KRUISE_FOREIGN_LEADER_LEASES` (validated in [`Settings::from_env`]).
    pub fn foreign_leader_leases(&self) -> Vec<LeaseRef> {
        LeaseRef::parse_list(&self.foreign_leader_leases).unwrap_or_default()
    }

    /// The feature gates named by `KRUISE_FEATURE_GATES` (validated in [`Settings::from_env`]).
    pub fn gates(&self) -> FeatureGates {
        FeatureGates::parse(&self.feature_gates).unwrap_or_default()
    }
}

fn expected(field: &str) -> &'static str {
    EXPECTED
        .iter()
        .find(|(f, _)| *f == field)
        .map(|(_, e)| *e)
        .unwrap_or("a valid value")
}

/// Deserializes any settings struct from `KRUISE_*` variables, turning envy's errors
/// into messages that name the variable, its value and the expected form. Controllers
/// with settings of their own call this with their own struct.
pub fn load<T: serde::de::DeserializeOwned>(
    vars: impl Iterator<Item = (String, String)>,
) -> Result<T, Error> {
    let vars: Vec<(String, String)> = vars.filter(|(k, _)| k.starts_with(PREFIX)).collect();
    envy::prefixed(PREFIX)
        .from_iter::<_, T>(vars.clone())
        .map_err(|e| Error::Settings(describe::<T>(&e, &vars)))
}

fn describe<T: serde::de::DeserializeOwned>(
    err: &envy::Error,
    vars: &[(String, String)],
) -> String {
    let text = err.to_string();
    // envy names the variable without its prefix ("provided by KUBE_QPS") or the field
    // ("missing value for field workers"); find which one.
    let field = vars
        .iter()
        .map(|(k, _)| k.trim_start_matches(PREFIX).to_string())
        .filter(|f| text.contains(f.as_str()) || text.contains(&f.to_ascii_lowercase()))
        .max_by_key(|f| f.len())
        .map(|f| f.to_ascii_lowercase())
        // Some errors (an address that does not parse) name nothing: find the variable
        // that fails on its own.
        .or_else(|| {
            vars.iter()
                .find(
                    |var| match envy::prefixed(PREFIX).from_iter::<_, T>(vec![(*var).clone()]) {
                        Err(e) => !e.to_string().starts_with("missing value"),
                        Ok(_) => false,
                    },
                )
                .map(|(k, _)| k.trim_start_matches(PREFIX).to_ascii_lowercase())
        });
    match field {
        Some(field) => {
            let var = format!("{PREFIX}{}", field.to_ascii_uppercase());
            let value = vars
                .iter()
                .find(|(k, _)| *k == var)
                .map(|(_, v)| v.as_str())
                .unwrap_or("");
            format!("{var}={value:?}: expected {} ({text})", expected(&field))
        }
        None => format!("invalid {PREFIX}* setting: {text}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn defaults_match_openkruise() {
        let s = Settings::from_vars(vars(&[])).unwrap();
        assert_eq!(s.workers, 3);
        assert_eq!(s.kube_qps, 30.0);
        assert_eq!(s.kube_burst, 50);
        assert!(s.leader_elect);
        assert_eq!(s.admin_addr.to_string(), "0.0.0.0:8080");
        assert_eq!(s.log_format, LogFormat::Text);
    }

    #[test]
    fn values_are_read_with_the_prefix() {
        let s = Settings::from_vars(vars(&[
            ("KRUISE_WORKERS", "8"),
            ("KRUISE_KUBE_QPS", "100.5"),
            ("KRUISE_LEADER_ELECT", "false"),
            ("KRUISE_LOG_FORMAT", "json"),
            ("KRUISE_ADMIN_ADDR", "127.0.0.1:9000"),
            ("WORKERS", "1"),
        ]))
        .unwrap();
        assert_eq!(s.workers, 8);
        assert_eq!(s.kube_qps, 100.5);
        assert!(!s.leader_elect);
        assert_eq!(s.log_format, LogFormat::Json);
        assert_eq!(s.admin_addr.port(), 9000);
        let s = Settings::from_vars(vars(&[("KRUISE_WEBHOOK_CA_SECRET", "cloneset-webhook-ca")]))
            .unwrap();
        assert_eq!(s.webhook_ca_secret.as_deref(), Some("cloneset-webhook-ca"));
        assert_eq!(
            Settings::from_vars(vars(&[])).unwrap().webhook_ca_secret,
            None
        );
    }

    #[test]
    fn bad_values_name_the_variable_and_the_expected_form() {
        for (var, value, expect) in [
            ("KRUISE_KUBE_QPS", "fast", "a number"),
            ("KRUISE_WORKERS", "many", "a whole number"),
            ("KRUISE_LEADER_ELECT", "maybe", "true or false"),
            ("KRUISE_ADMIN_ADDR", "localhost", "an address"),
            ("KRUISE_LOG_FORMAT", "xml", "text or json"),
        ] {
            let err = Settings::from_vars(vars(&[(var, value)]))
                .unwrap_err()
                .to_string();
            assert!(err.contains(var), "{err}");
            assert!(err.contains(value), "{err}");
            assert!(err.contains(expect), "{err}");
        }
    }

    #[test]
    fn zero_workers_and_negative_qps_are_rejected() {
        let err = Settings::from_vars(vars(&[("KRUISE_WORKERS", "0")]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("KRUISE_WORKERS"), "{err}");
        let err = Settings::from_vars(vars(&[("KRUISE_KUBE_QPS", "-1")]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("KRUISE_KUBE_QPS"), "{err}");
    }

    #[test]
    fn foreign_leader_leases_default_to_kruise_manager_and_bad_ones_fail_at_start() {
        let s = Settings::from_vars(vars(&[])).unwrap();
        assert_eq!(
            s.foreign_leader_leases()
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            ["kruise-system/kruise-manager"]
        );
        let s = Settings::from_vars(vars(&[("KRUISE_FOREIGN_LEADER_LEASES", "")])).unwrap();
        assert!(s.foreign_leader_leases().is_empty());
        let s = Settings::from_vars(vars(&[("KRUISE_FOREIGN_LEADER_LEASES", "a/b,c/d")])).unwrap();
        assert_eq!(s.foreign_leader_leases().len(), 2);
        for bad in ["kruise-manager", "kruise-system/", "a/b,Upper/x"] {
            let err = Settings::from_vars(vars(&[("KRUISE_FOREIGN_LEADER_LEASES", bad)]))
                .unwrap_err()
                .to_string();
            assert!(err.contains("KRUISE_FOREIGN_LEADER_LEASES"), "{err}");
            assert!(err.contains("namespace/name"), "{err}");
        }
    }

    #[test]
    fn webhook_timeout_is_read_and_must_be_one_to_thirty_seconds() {
        assert_eq!(
            Settings::from_vars(vars(&[]))
                .unwrap()
                .webhook_timeout_seconds,
            None
        );
        for ok in ["1", "10", "30"] {
            let s = Settings::from_vars(vars(&[("KRUISE_WEBHOOK_TIMEOUT_SECONDS", ok)])).unwrap();
            assert_eq!(s.webhook_timeout_seconds, Some(ok.parse().unwrap()));
        }
        for bad in ["0", "31", "-5", "ten", "2.5", ""] {
            let err = Settings::from_vars(vars(&[("KRUISE_WEBHOOK_TIMEOUT_SECONDS", bad)]))
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("KRUISE_WEBHOOK_TIMEOUT_SECONDS"),
                "{bad:?}: {err}"
            );
            assert!(err.contains("from 1 to 30"), "{bad:?}: {err}");
        }
    }

    #[test]
    fn unknown_feature_gate_fails_at_start() {
        let err = Settings::from_vars(vars(&[("KRUISE_FEATURE_GATES", "NoSuchGate=true")]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("NoSuchGate"), "{err}");
    }
}
