//! Leader election on a `coordination.k8s.io` Lease per controller (kube-lease-manager).
//!
//! Every replica keeps its caches warm; only the lease holder runs the controller. The
//! moment the lease is lost the controller future is dropped, so no further writes are
//! made by this replica.
//!
//! The lease manager only learns that it lost the lease when a renewal comes back, and a
//! renewal can take longer than the lease (a starved process, a slow apiserver): another
//! replica then acquires the expired lease while this one still runs. So the leader also
//! reads the Lease every [`check_interval`] and stops as soon as the Lease no longer
//! shows it as the holder with a renewal recent enough ([`holds`]): it steps down before
//! the lease expires for the others, and starts again only once a renewal has landed.
//! (`make chaos` saw two leaders for ~5 s, and 54 Pods created twice, before this.)
//!
//! No double management: while another manager holds one of the Leases named in
//! `KRUISE_FOREIGN_LEADER_LEASES` (by default OpenKruise's own `kruise-manager` Lease in
//! `kruise-system`, openkruise/kruise v1.9.0 main.go `--leader-election-id`,
//! `--leader-election-namespace`), no controller of this process runs, with leader
//! election on or off: a replica does not try to acquire its Lease, and a leader stops
//! and releases it (`Guard`, [`foreign_holder`]). Each read is a GET every
//! [`check_interval`], so when kruise-manager starts while we lead, both act for up to
//! one interval (3 s with the default 15 s lease): nothing on its side waits for us.

use std::fmt;
use std::future::Future;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use kube_lease_manager::LeaseManagerBuilder;
use prometheus::IntGauge;
use tokio_util::sync::CancellationToken;

use crate::Error;
use crate::admin::Readiness;
use crate::api_error::{is_conflict, is_not_found};
use crate::metrics::Metrics;

/// How a controller decides whether to run.
#[derive(Clone)]
pub struct Election {
    pub client: Client,
    pub lease_name: String,
    pub namespace: String,
    pub enabled: bool,
    pub duration_seconds: u64,
    /// Leases of other managers: while one is held, this controller does not run
    /// (`KRUISE_FOREIGN_LEADER_LEASES`).
    pub foreign_leases: Vec<LeaseRef>,
}

/// A Lease by `namespace/name`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseRef {
    pub namespace: String,
    pub name: String,
}

impl fmt::Display for LeaseRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

impl LeaseRef {
    /// Parses a comma-separated list of `namespace/name` (blanks around items allowed,
    /// empty items skipped, so `""` is no Lease at all). The error names the bad item.
    pub fn parse_list(text: &str) -> Result<Vec<LeaseRef>, String> {
        text.split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
            .map(|item| {
                let (namespace, name) = item
                    .split_once('/')
                    .ok_or_else(|| format!("{item:?} is not namespace/name"))?;
                if !is_dns_label(namespace) {
                    return Err(format!("{item:?}: {namespace:?} is not a namespace name"));
                }
                if !name.split('.').all(is_dns_label) || name.len() > 253 {
                    return Err(format!("{item:?}: {name:?} is not a Lease name"));
                }
                Ok(LeaseRef {
                    namespace: namespace.to_string(),
                    name: name.to_string(),
                })
            })
            .collect()
    }
}

/// An RFC 1123 label: what a namespace name (and each dot-separated part of most object
/// names) must be.
fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// The annotation a blocked candidate writes on its own Lease: which foreign Lease (and
/// holder) keeps it from leading, e.g. `kruise-system/kruise-manager (holder
/// kruise-manager-7d9f_1b2c)`. A Lease has no status or conditions, and an annotation is
/// the one place `kubectl get lease -o yaml` shows that kube-lease-manager's patches
/// (spec only) leave alone. Candidates write it when they become blocked; the leader
/// removes it once it has passed the guard, so a stale one is gone one check after
/// someone leads.
pub const BLOCKED_BY: &str = "kruise.io/blocked-by";

/// Clock skew allowed for a foreign Lease: it counts as held this long past its
/// renewTime + leaseDurationSeconds, by our clock (client-go's retry period; client-go
/// itself measures from when it observed the renewal, immune to skew, so erring towards
/// "still held" matches it).
pub const FOREIGN_CLOCK_SKEW: Duration = Duration::from_secs(2);

/// The lease duration of a Lease that does not say (OpenKruise's default, main.go).
const FOREIGN_DEFAULT_SECONDS: u64 = 15;

/// The holder of a foreign `lease` if it is held at `now`: a non-empty holderIdentity
/// and a renewal (or acquisition) whose leaseDurationSeconds, plus
/// [`FOREIGN_CLOCK_SKEW`], have not run out. A Lease without any time never expires by
/// itself, so it counts as released (a manager that holds a Lease always stamps it).
pub fn foreign_holder(lease: &Lease, now: SystemTime) -> Option<&str> {
    let spec = lease.spec.as_ref()?;
    let holder = spec.holder_identity.as_deref().filter(|h| !h.is_empty())?;
    let renewed = spec
        .renew_time
        .as_ref()
        .or(spec.acquire_time.as_ref())
        .map(|t| SystemTime::from(t.0))?;
    let seconds = spec
        .lease_duration_seconds
        .and_then(|s| u64::try_from(s).ok())
        .unwrap_or(FOREIGN_DEFAULT_SECONDS);
    match renewed.checked_add(Duration::from_secs(seconds) + FOREIGN_CLOCK_SKEW) {
        Some(until) => (now < until).then_some(holder),
        // Beyond what the clock holds: held for as long as we can tell.
        None => Some(holder),
    }
}

/// Whether another manager holds `lease` at `now` ([`foreign_holder`]).
pub fn foreign_leader_active(lease: &Lease, now: SystemTime) -> bool {
    foreign_holder(lease, now).is_some()
}

/// Why a read foreign Lease keeps us from leading, if it does: `holder <id>`, or, when
/// it cannot be read (other than not found), `cannot be read: ...`. An unreadable Lease
/// blocks, as an unreadable own Lease stops the leader: leading without knowing is what
/// this guard is there to prevent, and the reason is logged and on the metric.
fn blocking_reason(read: Result<Option<Lease>, String>, now: SystemTime) -> Option<String> {
    match read {
        Ok(Some(lease)) => foreign_holder(&lease, now).map(|h| format!("holder {h}")),
        Ok(None) => None,
        Err(e) => Some(format!("cannot be read: {e}")),
    }
}

/// Reads the foreign Leases, keeps their metric, and logs each transition once.
struct Guard {
    controller: String,
    leases: Vec<(LeaseRef, Api<Lease>, IntGauge, Option<String>)>,
    every: Duration,
}

impl Guard {
    fn new(election: &Election, metrics: &Metrics, every: Duration) -> Self {
        let leases = election
            .foreign_leases
            .iter()
            .map(|r| {
                let gauge = metrics
                    .foreign_leader_active
                    .with_label_values(&[&r.to_string()]);
                let api = Api::namespaced(election.client.clone(), &r.namespace);
                (r.clone(), api, gauge, None)
            })
            .collect();
        Guard {
            controller: election.lease_name.clone(),
            leases,
            every,
        }
    }

    /// Reads every foreign Lease; the first that blocks, as `ns/name (holder ...)`.
    async fn check(&mut self) -> Option<String> {
        let mut first = None;
        for (lease, api, gauge, seen) in &mut self.leases {
            let read = match tokio::time::timeout(self.every, api.get_opt(&lease.name)).await {
                Ok(Ok(found)) => Ok(found),
                Ok(Err(kube::Error::Api(e))) => Err(format!("{} {}", e.code, e.reason)),
                Ok(Err(e)) => Err(e.to_string().chars().take(200).collect()),
                Err(_) => Err("timed out".to_string()),
            };
            let why = blocking_reason(read, SystemTime::now());
            if why != *seen {
                match &why {
                    Some(why) => tracing::warn!(
                        controller = %self.controller, foreign_lease = %lease, %why,
                        "another manager holds this Lease; not reconciling (KRUISE_FOREIGN_LEADER_LEASES)"
                    ),
                    None => tracing::info!(
                        controller = %self.controller, foreign_lease = %lease,
                        "the foreign Lease is released or expired; leading normally"
                    ),
                }
                gauge.set(i64::from(why.is_some()));
                *seen = why.clone();
            }
            if first.is_none() {
                first = why.map(|why| format!("{lease} ({why})"));
            }
        }
        first
    }

    /// Resolves when a foreign Lease blocks (checked now, then every interval); never
    /// when there is none.
    async fn until_blocked(&mut self) -> String {
        if self.leases.is_empty() {
            return std::future::pending().await;
        }
        loop {
            if let Some(why) = self.check().await {
                return why;
            }
            tokio::time::sleep(self.every).await;
        }
    }

    /// Waits until no foreign Lease blocks (true), or shutdown (false). With `own`, each
    /// new reason is written on our Lease ([`BLOCKED_BY`]).
    async fn wait_clear(&mut self, shutdown: &CancellationToken, own: Option<&OwnLease>) -> bool {
        let mut marked: Option<String> = None;
        loop {
            let Some(why) = self.check().await else {
                return true;
            };
            if let Some(own) = own
                && marked.as_ref() != Some(&why)
            {
                own.mark_blocked(&why).await;
                marked = Some(why);
            }
            tokio::select! {
                _ = tokio::time::sleep(self.every) => {}
                _ = shutdown.cancelled() => return false,
            }
        }
    }
}

/// Our own Lease, for the [`BLOCKED_BY`] annotation.
struct OwnLease {
    api: Api<Lease>,
    name: String,
    params: PatchParams,
}

impl OwnLease {
    /// Writes `why` on our Lease, creating it (as kube-lease-manager would, empty) if
    /// no replica has yet. A failure is logged: the log and the metric say it too.
    async fn mark_blocked(&self, why: &str) {
        let patch = serde_json::json!({ "metadata": { "annotations": { BLOCKED_BY: why } } });
        let result = match self
            .api
            .patch(&self.name, &self.params, &Patch::Merge(&patch))
            .await
        {
            Err(e) if is_not_found(&e) => {
                let mut lease = Lease::default();
                lease.metadata.name = Some(self.name.clone());
                lease.metadata.annotations =
                    Some([(BLOCKED_BY.to_string(), why.to_string())].into());
                match self.api.create(&PostParams::default(), &lease).await {
                    // Another candidate created it meanwhile.
                    Err(e) if is_conflict(&e) => self
                        .api
                        .patch(&self.name, &self.params, &Patch::Merge(&patch))
                        .await
                        .map(|_| ()),
                    other => other.map(|_| ()),
                }
            }
            other => other.map(|_| ()),
        };
        if let Err(e) = result {
            tracing::warn!(lease = %self.name, error = %e, "could not write {BLOCKED_BY} on our Lease");
        }
    }

    /// Removes the annotation if `lease` carries it (the leader, once it leads).
    async fn clear_if_marked(&self, lease: &Lease) {
        let marked = lease
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(BLOCKED_BY));
        if !marked {
            return;
        }
        let patch = serde_json::json!({ "metadata": { "annotations": { BLOCKED_BY: null } } });
        if let Err(e) = self
            .api
            .patch(&self.name, &self.params, &Patch::Merge(&patch))
            .await
        {
            tracing::debug!(lease = %self.name, error = %e, "could not remove {BLOCKED_BY}; retried at the next check");
        }
    }
}

/// Why a round of holding the lease ended.
enum Stop {
    Shutdown,
    Blocked,
}

/// Runs `controller()` while this replica holds the lease (always, when election is off)
/// and no foreign Lease is held, restarting it when the lease is regained, until
/// `shutdown` is cancelled. Each run starts only once `ready` is: a controller must not
/// act on half-listed caches (a CloneSet whose Pods are not listed yet looks like one
/// without Pods, and would get a second set).
pub async fn run_while_leader<F, Fut>(
    election: Election,
    metrics: &Metrics,
    shutdown: CancellationToken,
    ready: Readiness,
    mut start: F,
) -> Result<(), Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    let mut controller = move || {
        let ready = ready.clone();
        let run = start();
        async move {
            ready.wait_until_ready().await;
            run.await
        }
    };
    let gauge = metrics.leader.with_label_values(&[&election.lease_name]);
    let duration = election.duration_seconds.max(3);
    let every = check_interval(duration);
    let mut guard = Guard::new(&election, metrics, every);
    if !election.enabled {
        loop {
            if !guard.wait_clear(&shutdown, None).await {
                return Ok(());
            }
            gauge.set(1);
            tokio::select! {
                _ = controller() => { gauge.set(0); return Ok(()); }
                _ = guard.until_blocked() => tracing::warn!(controller = %election.lease_name, "stopped reconciling: another manager is active"),
                _ = shutdown.cancelled() => { gauge.set(0); return Ok(()); }
            }
            gauge.set(0);
        }
    }

    let identity = format!(
        "{}_{}",
        std::env::var("POD_NAME")
            .or_else(|_| std::env::var("HOSTNAME"))
            .unwrap_or_else(|_| "local".into()),
        std::process::id()
    );
    let field_manager = format!("{}-lease", election.lease_name);
    let own = OwnLease {
        api: Api::namespaced(election.client.clone(), &election.namespace),
        name: election.lease_name.clone(),
        params: PatchParams {
            field_manager: Some(field_manager.clone()),
            ..Default::default()
        },
    };
    // The lease as read now: held by us, renewed recently enough. A leader also clears
    // the BLOCKED_BY a candidate left.
    let confirmed = || async {
        match tokio::time::timeout(every, own.api.get_opt(&election.lease_name)).await {
            Ok(Ok(Some(lease))) => {
                let held = holds(&lease, &identity, duration, SystemTime::now());
                if held {
                    own.clear_if_marked(&lease).await;
                }
                held
            }
            _ => false,
        }
    };
    // One round per acquisition: a foreign leader ends it, the lease is released, and
    // the next round starts only once no foreign Lease is held.
    loop {
        if !guard.wait_clear(&shutdown, Some(&own)).await {
            return Ok(());
        }
        let manager = LeaseManagerBuilder::new(election.client.clone(), &election.lease_name)
            .with_namespace(&election.namespace)
            .with_identity(&identity)
            .with_duration(duration)
            // Renewed a third into the lease (client-go renews every 2 s of 15): a late
            // renewal leaves room before `holds` turns false and the leader steps down.
            .with_grace((duration * 2 / 3).max(1))
            .with_field_manager(field_manager.clone())
            .build()
            .await
            .map_err(|e| Error::Leader(e.to_string()))?;
        let (mut leading, task) = manager.watch().await;
        tracing::info!(lease = %election.lease_name, %identity, "waiting for the lease");
        let stop = 'round: loop {
            // Wait until we hold the lease, and the Lease says so.
            loop {
                while !*leading.borrow_and_update() {
                    tokio::select! {
                        changed = leading.changed() => if changed.is_err() { return Err(Error::Leader("lease manager stopped".into())) },
                        _ = guard.until_blocked() => break 'round Stop::Blocked,
                        _ = shutdown.cancelled() => break 'round Stop::Shutdown,
                    }
                }
                if confirmed().await {
                    break;
                }
                tokio::select! {
                    _ = tokio::time::sleep(every) => {}
                    _ = shutdown.cancelled() => break 'round Stop::Shutdown,
                }
            }
            // The foreign Leases once more: the manager may have acquired ours after
            // their last read.
            if guard.check().await.is_some() {
                break 'round Stop::Blocked;
            }
            tracing::info!(lease = %election.lease_name, "acquired the lease; starting");
            gauge.set(1);
            let lost = async {
                loop {
                    if leading.changed().await.is_err() || !*leading.borrow_and_update() {
                        return;
                    }
                }
            };
            let overdue = async {
                loop {
                    tokio::time::sleep(every).await;
                    if !confirmed().await {
                        return;
                    }
                }
            };
            tokio::select! {
                _ = controller() => {}
                _ = lost => tracing::warn!(lease = %election.lease_name, "lost the lease; stopped reconciling"),
                _ = overdue => tracing::warn!(lease = %election.lease_name, "the Lease does not show a recent renewal of ours; stopped reconciling until one lands"),
                _ = guard.until_blocked() => {
                    gauge.set(0);
                    tracing::warn!(lease = %election.lease_name, "stopped reconciling and releasing the lease: another manager is active");
                    break 'round Stop::Blocked;
                }
                _ = shutdown.cancelled() => { gauge.set(0); break 'round Stop::Shutdown; }
            }
            gauge.set(0);
        };
        // Closing the channel makes the manager release the lease (if held), for a fast
        // handover.
        drop(leading);
        let _ = task.await;
        match stop {
            Stop::Shutdown => return Ok(()),
            Stop::Blocked => continue,
        }
    }
}

/// How often the leader reads its Lease: a third of what is left of a lease once a
/// renewal is overdue, at least every second.
pub fn check_interval(duration_seconds: u64) -> Duration {
    Duration::from_millis((duration_seconds * 1000 / 5).clamp(500, 5000))
}

/// Whether `lease` shows `identity` as its holder with a renewal recent enough to keep
/// leading at `now`: the lease runs out at renewTime + duration for the other replicas
/// (by their clocks), so this replica stops one check interval and one second earlier,
/// leaving room for clock skew and the time between two checks.
pub fn holds(lease: &Lease, identity: &str, duration_seconds: u64, now: SystemTime) -> bool {
    let Some(spec) = lease.spec.as_ref() else {
        return false;
    };
    if spec.holder_identity.as_deref() != Some(identity) {
        return false;
    }
    let Some(renewed) = spec
        .renew_time
        .as_ref()
        .or(spec.acquire_time.as_ref())
        .map(|t| SystemTime::from(t.0))
    else {
        return false;
    };
    let lease_seconds = spec
        .lease_duration_seconds
        .and_then(|s| u64::try_from(s).ok())
        .unwrap_or(duration_seconds);
    let margin = check_interval(lease_seconds) + Duration::from_secs(1);
    let valid_for = Duration::from_secs(lease_seconds).saturating_sub(margin);
    now.duration_since(renewed).unwrap_or(Duration::ZERO) < valid_for
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use super::*;

    fn offline_client() -> Client {
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        Client::try_from(config).unwrap()
    }

    fn lease(holder: &str, renewed: SystemTime, seconds: i32) -> Lease {
        use k8s_openapi::api::coordination::v1::LeaseSpec;
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
        Lease {
            spec: Some(LeaseSpec {
                holder_identity: Some(holder.into()),
                renew_time: Some(MicroTime(jiff::Timestamp::try_from(renewed).unwrap())),
                lease_duration_seconds: Some(seconds),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn the_leader_steps_down_before_its_lease_runs_out_for_the_others() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let at = |s: f64| t0 + Duration::from_secs_f64(s);
        // 5 s lease: checked every second, so the leader stops 2 s before the expiry.
        assert_eq!(check_interval(5), Duration::from_secs(1));
        assert!(holds(&lease("me", t0, 5), "me", 5, at(0.0)));
        assert!(holds(&lease("me", t0, 5), "me", 5, at(2.9)));
        assert!(!holds(&lease("me", t0, 5), "me", 5, at(3.0)));
        // 15 s lease (the default): checked every 3 s, stops 4 s before.
        assert!(holds(&lease("me", t0, 15), "me", 15, at(10.9)));
        assert!(!holds(&lease("me", t0, 15), "me", 15, at(11.0)));
        // Someone else's lease, or none.
        assert!(!holds(&lease("other", t0, 15), "me", 15, at(0.0)));
        assert!(!holds(&Lease::default(), "me", 15, at(0.0)));
        // The Lease's own duration wins over ours (another replica's settings).
        assert!(!holds(&lease("me", t0, 5), "me", 60, at(4.0)));
        // A renewal stamped slightly in our future (clock skew) still counts.
        assert!(holds(&lease("me", at(0.5), 5), "me", 5, at(0.0)));
    }

    fn at(s: f64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000) + Duration::from_secs_f64(s)
    }

    #[test]
    fn a_foreign_lease_is_active_while_held_and_renewed() {
        // kruise-manager's defaults: 15 s lease, plus the skew allowance.
        let held = lease("kruise-manager-7d9f_1b2c", at(0.0), 15);
        assert_eq!(
            foreign_holder(&held, at(0.0)),
            Some("kruise-manager-7d9f_1b2c")
        );
        assert!(foreign_leader_active(&held, at(16.9)));
        assert!(!foreign_leader_active(&held, at(17.0)));
        // Released: client-go (ReleaseOnCancel) empties holderIdentity.
        assert!(!foreign_leader_active(&lease("", at(0.0), 15), at(0.0)));
        let mut none = held.clone();
        none.spec.as_mut().unwrap().holder_identity = None;
        assert!(!foreign_leader_active(&none, at(0.0)));
        // No times at all: nothing would ever expire it.
        let mut timeless = held.clone();
        timeless.spec.as_mut().unwrap().renew_time = None;
        assert!(!foreign_leader_active(&timeless, at(0.0)));
        // ... but an acquisition alone counts.
        timeless.spec.as_mut().unwrap().acquire_time =
            held.spec.as_ref().unwrap().renew_time.clone();
        assert!(foreign_leader_active(&timeless, at(1.0)));
        // No duration: OpenKruise's 15 s.
        let mut open = held.clone();
        open.spec.as_mut().unwrap().lease_duration_seconds = None;
        assert!(foreign_leader_active(&open, at(16.0)));
        assert!(!foreign_leader_active(&open, at(17.5)));
        // A renewal stamped in our future (their clock ahead) is held.
        assert!(foreign_leader_active(&lease("x", at(30.0), 15), at(0.0)));
        assert!(!foreign_leader_active(&Lease::default(), at(0.0)));
    }

    #[test]
    fn an_unreadable_foreign_lease_blocks_a_missing_one_does_not() {
        assert_eq!(blocking_reason(Ok(None), at(0.0)), None);
        assert_eq!(
            blocking_reason(Err("403 Forbidden".into()), at(0.0)).as_deref(),
            Some("cannot be read: 403 Forbidden")
        );
        assert_eq!(
            blocking_reason(Ok(Some(lease("km", at(0.0), 15))), at(1.0)).as_deref(),
            Some("holder km")
        );
        assert_eq!(
            blocking_reason(Ok(Some(lease("km", at(0.0), 15))), at(60.0)),
            None
        );
    }

    #[test]
    fn lease_lists_parse_and_bad_items_are_named() {
        assert_eq!(
            LeaseRef::parse_list("kruise-system/kruise-manager").unwrap(),
            vec![LeaseRef {
                namespace: "kruise-system".into(),
                name: "kruise-manager".into()
            }]
        );
        assert_eq!(LeaseRef::parse_list("").unwrap(), vec![]);
        assert_eq!(LeaseRef::parse_list(" a/b , c/d.e ,").unwrap().len(), 2);
        assert_eq!(LeaseRef::parse_list("a/b").unwrap()[0].to_string(), "a/b");
        for bad in [
            "kruise-manager",
            "/x",
            "ns/",
            "Kruise/x",
            "a/b/c",
            "ns/-x",
            "a b/c",
        ] {
            let err = LeaseRef::parse_list(bad).unwrap_err();
            assert!(err.contains(bad.trim()), "{bad}: {err}");
        }
    }

    proptest::proptest! {
        /// Active exactly until renewTime + duration + skew, by any holder; never
        /// without a holder; a later renewal is active at least as long.
        #[test]
        fn foreign_activity_is_the_renewal_window(
            renewed in -1000.0f64..1000.0,
            seconds in 0i32..120,
            now in -1000.0f64..1200.0,
            later in 0.0f64..100.0,
            holder in "[a-z0-9_-]{0,12}",
        ) {
            let l = lease(&holder, at(renewed + 2000.0), seconds);
            let active = foreign_leader_active(&l, at(now + 2000.0));
            let window = at(renewed + 2000.0) + Duration::from_secs(seconds as u64) + FOREIGN_CLOCK_SKEW;
            proptest::prop_assert_eq!(active, !holder.is_empty() && at(now + 2000.0) < window);
            if active {
                let renewed_later = lease(&holder, at(renewed + 2000.0 + later), seconds);
                proptest::prop_assert!(foreign_leader_active(&renewed_later, at(now + 2000.0)));
            }
        }
    }

    #[tokio::test]
    async fn an_unreadable_foreign_lease_keeps_the_controller_from_starting() {
        let metrics = Metrics::new();
        let started = Arc::new(AtomicBool::new(false));
        let shutdown = CancellationToken::new();
        let election = Election {
            client: offline_client(),
            lease_name: "test".into(),
            namespace: "ns".into(),
            enabled: false,
            duration_seconds: 15,
            foreign_leases: LeaseRef::parse_list("kruise-system/kruise-manager").unwrap(),
        };
        let flag = started.clone();
        let run = tokio::spawn({
            let shutdown = shutdown.clone();
            let metrics = metrics.clone();
            async move {
                run_while_leader(election, &metrics, shutdown, Readiness::default(), || {
                    let flag = flag.clone();
                    async move {
                        flag.store(true, Ordering::SeqCst);
                        std::future::pending::<()>().await
                    }
                })
                .await
            }
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!started.load(Ordering::SeqCst));
        let text = metrics.render();
        assert!(
            text.contains("kruise_foreign_leader_active{lease=\"kruise-system/kruise-manager\"} 1"),
            "{text}"
        );
        assert!(
            !text.contains("kruise_leader{controller=\"test\"} 1"),
            "{text}"
        );
        shutdown.cancel();
        run.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn the_controller_starts_only_once_every_cache_is_ready() {
        let ready = Readiness::default();
        let pods = ready.register("cache pods");
        let started = Arc::new(AtomicBool::new(false));
        let shutdown = CancellationToken::new();
        let election = Election {
            client: offline_client(),
            lease_name: "test".into(),
            namespace: "ns".into(),
            enabled: false,
            duration_seconds: 15,
            foreign_leases: vec![],
        };
        let flag = started.clone();
        let run = tokio::spawn({
            let shutdown = shutdown.clone();
            let ready = ready.clone();
            async move {
                run_while_leader(election, &Metrics::new(), shutdown, ready, || {
                    let flag = flag.clone();
                    async move {
                        flag.store(true, Ordering::SeqCst);
                        std::future::pending::<()>().await
                    }
                })
                .await
            }
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(
            !started.load(Ordering::SeqCst),
            "not while the Pod cache lists"
        );
        pods.set_ready();
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(started.load(Ordering::SeqCst));
        shutdown.cancel();
        run.await.unwrap().unwrap();
    }
}
