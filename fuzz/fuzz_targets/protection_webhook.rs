//! Deletion protection: the route's decision (`protection_ctl::judgment`) on a DELETE
//! review, with the dependants the route would count taken from the object itself
//! (replicas) or from the object's `x-fuzz-count` field (Pods, CRs: an API list).
#![no_main]
use libfuzzer_sys::fuzz_target;
use protection_ctl::judgment::{self, Dependants, Guarded, Protection};

fuzz_target!(|data: &[u8]| {
    let Some(req) = kruise_fuzz::request(data) else {
        return;
    };
    let Some(guarded) = Guarded::of(&req.kind.group, &req.kind.kind) else {
        return;
    };
    let Some(old) = req.old_object.as_ref().or(req.object.as_ref()) else {
        return;
    };
    let old = serde_json::to_value(old).expect("a decoded object encodes");
    let (labels, terminating) = judgment::labels_and_terminating(&old);
    let counted = old
        .get("x-fuzz-count")
        .and_then(|v| v.as_u64())
        .unwrap_or(1);
    let dependants = match guarded {
        Guarded::Workload(workload) => Dependants::Replicas(judgment::replicas_of(workload, &old)),
        Guarded::Namespace => Dependants::ActivePods(counted),
        Guarded::CustomResourceDefinition => {
            let _ = judgment::crd_target(&old);
            Dependants::ActiveCrs(counted)
        }
        Guarded::AlwaysOnly => Dependants::Replicas(0),
    };
    if let Some(protection) = Protection::of(&labels, terminating) {
        let counts = guarded.counts(protection);
        let _ = judgment::denial(protection, counts.then_some(dependants));
        if let Guarded::Workload(w) = guarded {
            let _ = judgment::workload_denial(&labels, terminating, judgment::replicas_of(w, &old));
        }
    }
});
