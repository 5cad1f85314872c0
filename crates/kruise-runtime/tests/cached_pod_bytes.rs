//! What one cached workload Pod costs in memory, measured with a counting allocator (its
//! own test binary, so the allocator counts nothing else). A CloneSet of 10 000 Pods is
//! mostly these: the figure here is what `make bench-compare` reports as bytes per cached
//! Pod, less the store's own bookkeeping.

use std::alloc::System;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const POD: &str = include_str!("fixtures/cloneset-pod.json");

/// Live heap bytes per Pod for `count` Pods decoded from the fixture and passed
/// through `prune`, held as the cache's store holds them: kube's reflector `Writer`
/// stores `Arc::new(obj.clone())` and the decoded Pod is dropped.
fn bytes_per_pod(decode: impl Fn() -> Pod, prune: fn(&mut Pod)) -> isize {
    const COUNT: isize = 1000;
    let region = Region::new(GLOBAL);
    let held: Vec<Arc<Pod>> = (0..COUNT)
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
    let decode = || serde_json::from_str::<Pod>(POD).unwrap();
    let whole = bytes_per_pod(decode, |_| {});
    let pruned = bytes_per_pod(decode, kruise_runtime::cache::prune_workload_pod);
    eprintln!("bytes per Pod: whole {whole}, pruned for a workload cache {pruned}");
    assert!(pruned < whole, "{pruned} < {whole}");
    // Measured 2026-11-26 with k8s-openapi 0.29; the bound leaves room for small changes
    // of the types, not for a field the pruning stopped removing or a list left with
    // spare capacity.
    assert!(
        pruned <= BOUND,
        "{pruned} bytes per cached Pod, more than {BOUND}"
    );
}

/// 6 432 bytes measured (20 861 unpruned; 14 720 before `compact_pod`).
const BOUND: isize = 8_000;
