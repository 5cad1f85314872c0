//! The Helm chart's pre-delete guard (deploy/helm/kruise-rs, templates/uninstall-guard.yaml).
//!
//! `helm uninstall` removes the controllers but keeps the CRDs (`helm.sh/resource-policy:
//! keep`), so every CloneSet, SidecarSet, ... would stay behind unmanaged: its Pods no
//! longer scaled, updated or cleaned up, its finalizers never removed. The guard lists
//! each of our CRDs' objects and fails the hook (so Helm stops before deleting anything)
//! while one exists, naming a few of each kind and how to proceed. OpenKruise's chart
//! does the same with its kruise-helm-hook image (openkruise/charts, pre_delete_hook_job.yaml),
//! for CloneSets, Advanced DaemonSets and Advanced StatefulSets.

use std::fmt::Write as _;

/// How many objects of a kind the message names.
pub const NAMED_PER_KIND: usize = 5;

/// The objects of one kind found in the cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    /// The CRD, e.g. `clonesets.apps.kruise.io`.
    pub crd: String,
    pub kind: String,
    /// At least `names.len()`; more when the list was cut short.
    pub count: usize,
    /// `namespace/name` (or `name` for a cluster-scoped kind), at most [`NAMED_PER_KIND`].
    pub names: Vec<String>,
}

/// CRDs whose objects never hold an uninstall back: NodeImages (imagepulljob-ctl) and
/// NodePodProbes (podprobemarker-ctl) are made by the controllers, one per node, and mean
/// nothing without them.
pub const NOT_BLOCKING: &[&str] = &["nodeimages.apps.kruise.io", "nodepodprobes.apps.kruise.io"];

/// The CRD names to check: the arguments, less [`NOT_BLOCKING`], without duplicates, in
/// order.
pub fn to_check<I: IntoIterator<Item = String>>(args: I) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for arg in args {
        let arg = arg.trim().to_string();
        if arg.is_empty() || NOT_BLOCKING.contains(&arg.as_str()) || out.contains(&arg) {
            continue;
        }
        out.push(arg);
    }
    out
}

/// The message for the hook's log (and its termination message): `None` when nothing
/// holds the uninstall back.
pub fn refusal(found: &[Found], release: &str, namespace: &str) -> Option<String> {
    let found: Vec<&Found> = found.iter().filter(|f| f.count > 0).collect();
    if found.is_empty() {
        return None;
    }
    let mut msg = String::from(
        "kruise-rs: refusing to uninstall while custom resources of kruise-rs exist \
         (their controllers would be removed and they would stay behind, unmanaged):\n",
    );
    for f in &found {
        let _ = write!(msg, "  {} {} ({})", f.count, f.kind, f.crd);
        if !f.names.is_empty() {
            let more = f.count.saturating_sub(f.names.len());
            let _ = write!(msg, ": {}", f.names.join(", "));
            if more > 0 {
                let _ = write!(msg, " and {more} more");
            }
        }
        msg.push('\n');
    }
    let _ = write!(
        msg,
        "Delete them first (e.g. kubectl delete {} --all-namespaces --all), then run \
         helm uninstall {release} -n {namespace} again; or, to leave them unmanaged, \
         helm uninstall {release} -n {namespace} --no-hooks (the CRDs are kept either way).",
        found
            .iter()
            .map(|f| f.crd.as_str())
            .collect::<Vec<_>>()
            .join(",")
    );
    Some(msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(crd: &str, kind: &str, count: usize, names: &[&str]) -> Found {
        Found {
            crd: crd.into(),
            kind: kind.into(),
            count,
            names: names.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn nothing_found_lets_the_uninstall_go_on() {
        assert_eq!(refusal(&[], "kruise", "default"), None);
        let empty = found("clonesets.apps.kruise.io", "CloneSet", 0, &[]);
        assert_eq!(refusal(&[empty], "kruise", "default"), None);
    }

    #[test]
    fn the_refusal_names_kinds_objects_and_the_ways_out() {
        let msg = refusal(
            &[
                found("clonesets.apps.kruise.io", "CloneSet", 7, &["a/x", "b/y"]),
                found("sidecarsets.apps.kruise.io", "SidecarSet", 1, &["s"]),
            ],
            "kruise",
            "default",
        )
        .unwrap_or_default();
        assert!(msg.contains("refusing to uninstall"), "{msg}");
        assert!(
            msg.contains("7 CloneSet (clonesets.apps.kruise.io): a/x, b/y and 5 more"),
            "{msg}"
        );
        assert!(
            msg.contains("1 SidecarSet (sidecarsets.apps.kruise.io): s\n"),
            "{msg}"
        );
        assert!(
            msg.contains("kubectl delete clonesets.apps.kruise.io,sidecarsets.apps.kruise.io"),
            "{msg}"
        );
        assert!(
            msg.contains("helm uninstall kruise -n default --no-hooks"),
            "{msg}"
        );
    }

    #[test]
    fn node_images_and_duplicates_are_not_checked() {
        let args = [
            "clonesets.apps.kruise.io",
            "nodeimages.apps.kruise.io",
            "nodepodprobes.apps.kruise.io",
            " clonesets.apps.kruise.io",
            "",
            "sidecarsets.apps.kruise.io",
        ]
        .map(String::from);
        assert_eq!(
            to_check(args),
            vec![
                "clonesets.apps.kruise.io".to_string(),
                "sidecarsets.apps.kruise.io".to_string()
            ]
        );
    }
}
