//! Leader election on a `coordination.k8s.io` Lease per controller (kube-lease-manager).
//!
//! Every replica keeps its caches warm; only the lease holder runs the controller. The
//! moment the lease is lost the controller future is dropped, so no further writes are
//! made by this replica.

use std::future::Future;

use kube::Client;
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
        .with_grace((duration / 3).max(1))
        .with_field_manager(format!("{}-lease", election.lease_name))
        .build()
        .await
        .map_err(|e| Error::Leader(e.to_string()))?;
    let (mut leading, task) = manager.watch().await;
    tracing::info!(lease = %election.lease_name, %identity, "waiting for the lease");
    loop {
        // Wait until we hold the lease.
        while !*leading.borrow_and_update() {
            tokio::select! {
                changed = leading.changed() => if changed.is_err() { return Err(Error::Leader("lease manager stopped".into())) },
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
        tokio::select! {
            _ = controller() => {}
            _ = lost => tracing::warn!(lease = %election.lease_name, "lost the lease; stopped reconciling"),
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
