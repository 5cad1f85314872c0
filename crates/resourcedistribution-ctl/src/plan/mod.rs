//! The pure part of the controller: which namespaces are targets ([`targets`]), what a
//! copy must be ([`copy`]), what to write ([`plan`]) and the status ([`status`]).

pub mod copy;
pub mod status;
pub mod targets;

use std::collections::BTreeSet;

use kruise_api::apps_v1alpha1::ResourceDistributionTargets;
use kruise_api::keys;
use serde_json::Value;

pub use copy::{Existing, Source};
pub use status::{Failures, compute_status};
pub use targets::{InvalidSelector, NamespaceView, Resolution, resolve};

/// What the plan reads.
pub struct World<'a> {
    pub source: &'a Source,
    pub targets: &'a ResourceDistributionTargets,
    /// Every namespace that exists.
    pub namespaces: &'a [NamespaceView],
    /// The objects of the source's kind this RD controls (as JSON), wherever they are.
    pub owned: &'a [Value],
}

/// A write in a matched namespace.
#[derive(Clone, Debug, PartialEq)]
pub enum Write {
    /// No copy seen: create this one (if a same-named object turns out to exist, the
    /// caller reads it and [`Source::judge`]s it).
    Create { namespace: String, object: Value },
    /// Our copy is stale: replace it with this object.
    Update { namespace: String, object: Value },
}

impl Write {
    pub fn namespace(&self) -> &str {
        match self {
            Write::Create { namespace, .. } | Write::Update { namespace, .. } => namespace,
        }
    }
}

/// A copy of ours to delete: its namespace left the targets (upstream's `cleanResource`,
/// openkruise/kruise v1.9.0
/// pkg/controller/resourcedistribution/resourcedistribution_controller.go).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delete {
    pub namespace: String,
    pub name: String,
    /// Precondition: delete only this very object.
    pub uid: Option<String>,
}

/// What to do for one ResourceDistribution.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    pub matched: BTreeSet<String>,
    /// Creations and updates, in namespace order; carried out in slow-start batches.
    pub writes: Vec<Write>,
    pub deletes: Vec<Delete>,
    /// Failures known before writing anything: missing or terminating namespaces.
    pub failures: Failures,
}

/// Plans one round. An invalid selector plans nothing at all: no copy is created,
/// changed or removed because of a spec the controller cannot read.
pub fn plan(world: &World) -> Result<Plan, InvalidSelector> {
    let Resolution { matched, .. } = resolve(world.targets, world.namespaces)?;
    let source = world.source;
    let name = source.name();
    let mut failures = Failures::default();
    let mut writes = Vec::new();
    let existing_namespace = |ns: &str| world.namespaces.iter().find(|n| n.name == ns);
    let copy_in = |ns: &str| {
        world.owned.iter().find(|o| {
            o.pointer("/metadata/namespace").and_then(Value::as_str) == Some(ns)
                && o.pointer("/metadata/name").and_then(Value::as_str) == Some(name)
        })
    };
    for ns in &matched {
        match existing_namespace(ns) {
            None => {
                failures.add(keys::RD_CONDITION_NAMESPACE_NOT_EXISTS, ns.clone());
                continue;
            }
            Some(n) if n.terminating => {
                failures.add(keys::RD_CONDITION_NAMESPACE_NOT_EXISTS, ns.clone());
                continue;
            }
            Some(_) => {}
        }
        match copy_in(ns) {
            None => writes.push(Write::Create {
                namespace: ns.clone(),
                object: source.desired(ns),
            }),
            Some(existing) => match source.judge(existing) {
                Existing::InSync => {}
                Existing::Update(object) => writes.push(Write::Update {
                    namespace: ns.clone(),
                    object,
                }),
                Existing::Conflict => {
                    failures.add(keys::RD_CONDITION_CONFLICT_OCCURRED, ns.clone());
                }
            },
        }
    }
    let deletes = world
        .owned
        .iter()
        .filter(|o| copy::controller_uid(o).as_deref() == Some(source.rd_uid.as_str()))
        .filter_map(|o| {
            let namespace = o.pointer("/metadata/namespace")?.as_str()?;
            let object_name = o.pointer("/metadata/name")?.as_str()?;
            let wanted = matched.contains(namespace) && object_name == name;
            (!wanted).then(|| Delete {
                namespace: namespace.to_string(),
                name: object_name.to_string(),
                uid: o
                    .pointer("/metadata/uid")
                    .and_then(Value::as_str)
                    .map(str::to_string),
            })
        })
        .collect();
    Ok(Plan {
        matched,
        writes,
        deletes,
        failures,
    })
}

/// Slow start (upstream's `syncItSlowly`, openkruise/kruise v1.9.0
/// pkg/controller/resourcedistribution/utils.go): batch sizes 1, 2, 4, … summing to `n`. After a
/// batch with a failure the rest is not attempted this round.
pub fn slow_start_batches(n: usize) -> Vec<usize> {
    let mut sizes = Vec::new();
    let (mut left, mut size) = (n, 1usize);
    while left > 0 {
        let take = size.min(left);
        sizes.push(take);
        left -= take;
        size = size.saturating_mul(2);
    }
    sizes
}

#[cfg(test)]
mod tests;
