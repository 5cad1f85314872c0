//! What one cached workload Pod costs in memory, measured with a counting allocator (its
//! own test binary, so the allocator counts nothing else). A CloneSet of 10 000 Pods is
//! mostly these: the figure here is what `make bench-compare` reports as bytes per cached
//! Pod, less the store's own bookkeeping.

use std::alloc::System;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// A CloneSet's Pod on a kwok node, as the apiserver sends it (managed fields, the
/// service-account token volume, default tolerations).
const POD: &str = include_str!("fixtures/cloneset-pod.json");

/// Live heap bytes per Pod for `COUNT` Pods decoded from the fixture (`decode`) and passed
/// through `prune`, held as the cache's store holds them: kube's reflector `Writer`
/// stores `Arc::new(obj.clone())` and the decoded object is dropped.
fn bytes_per_pod<P: Clone>(decode: impl Fn() -> P, prune: fn(&mut P)) -> isize {
    const COUNT: isize = 1000;
    let region = Region::new(GLOBAL);
    let held: Vec<Arc<P>> = (0..COUNT)
        .map(|_| {
            let mut pod = decode();
            prune(&mut pod);
            Arc::new(pod.clone())
        })
        .collect();
    let change = region.change();
    drop(held);
    let live = change.bytes_allocated as isize - change.bytes_deallocated as isize
        + change.bytes_reallocated;
    live / COUNT
}

#[test]
fn a_cached_workload_pod_stays_small() {
    fn decode<P: DeserializeOwned>() -> P {
        serde_json::from_str(POD).unwrap()
    }
    type Typed = k8s_openapi::api::core::v1::Pod;
    let typed = bytes_per_pod(decode::<Typed>, kruise_runtime::cache::prune);
    let view = bytes_per_pod(decode::<kruise_api::pod::Pod>, kruise_workload::prune_pod);
    eprintln!("bytes per Pod: k8s-openapi's Pod {typed}; the workload caches' view {view}");
    assert!(view < typed / 2, "{view} < {typed} / 2");
    // Measured 2026-11-26 with k8s-openapi 0.29; the bound leaves room for small changes
    // of the types, not for a field added to the view without need.
    assert!(
        view <= BOUND,
        "{view} bytes per cached Pod, more than {BOUND}"
    );
}

/// 5 318 bytes measured (k8s-openapi's `Pod`: 15 301; 10 576 without its volumes and
/// volume mounts, as the workload caches pruned it before the view; 5 007 before the view
/// kept container resources, in compact lists, for a resize in place).
const BOUND: isize = 6_000;
