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

use std::future::Future;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, Client};
use kube_lease_manager::LeaseManagerBuilder;
use tokio_util::sync::CancellationToken;

use crate::Error;
use crate::admin::Readiness;
use crate::metrics::Metrics;

/// How a controller decides whether to run.
#[derive(Clone)]
pub struct Election {
    pub client: Client,
    pub lease_name: String,
    pub namespace: String,
    pub enabled: bool,
    pub duration_seconds: u64,
}

/// Runs `controller()` while this replica holds the lease (always, when election is off),
/// restarting it when the lease is regained, until `shutdown` is cancelled. Each run
/// starts only once `ready` is: a controller must not act on half-listed caches (a
/// CloneSet whose Pods are not listed yet looks like one without Pods, and would get a
/// second set).
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
    if !election.enabled {
        gauge.set(1);
        tokio::select! {
            _ = controller() => {}
            _ = shutdown.cancelled() => {}
        }
        gauge.set(0);
        return Ok(());
    }

    let identity = format!(
        "{}_{}",
        std::env::var("POD_NAME")
            .or_else(|_| std::env::var("HOSTNAME"))
            .unwrap_or_else(|_| "local".into()),
        std::process::id()
    );
    let duration = election.duration_seconds.max(3);
    let manager = LeaseManagerBuilder::new(election.client.clone(), &election.lease_name)
        .with_namespace(&election.namespace)
        .with_identity(&identity)
        .with_duration(duration)
        // Renewed a third into the lease (client-go renews every 2 s of 15): a late
        // renewal leaves room before `holds` turns false and the leader steps down.
        .with_grace((duration * 2 / 3).max(1))
        .with_field_manager(format!("{}-lease", election.lease_name))
        .build()
        .await
        .map_err(|e| Error::Leader(e.to_string()))?;
    let (mut leading, task) = manager.watch().await;
    let leases: Api<Lease> = Api::namespaced(election.client.clone(), &election.namespace);
    let every = check_interval(duration);
    // The lease as read now: held by us, renewed recently enough.
    let confirmed = || async {
        match tokio::time::timeout(every, leases.get_opt(&election.lease_name)).await {
            Ok(Ok(Some(lease))) => holds(&lease, &identity, duration, SystemTime::now()),
            _ => false,
        }
    };
    tracing::info!(lease = %election.lease_name, %identity, "waiting for the lease");
    loop {
        // Wait until we hold the lease, and the Lease says so.
        loop {
            while !*leading.borrow_and_update() {
                tokio::select! {
                    changed = leading.changed() => if changed.is_err() { return Err(Error::Leader("lease manager stopped".into())) },
                    _ = shutdown.cancelled() => { drop(leading); let _ = task.await; return Ok(()); }
                }
            }
            if confirmed().await {
                break;
            }
            tokio::select! {
                _ = tokio::time::sleep(every) => {}
                _ = shutdown.cancelled() => { drop(leading); let _ = task.await; return Ok(()); }
            }
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
            _ = shutdown.cancelled() => {
                gauge.set(0);
                drop(leading);
                // Closing the channel makes the manager release the lease for a fast handover.
                let _ = task.await;
                return Ok(());
            }
        }
        gauge.set(0);
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
