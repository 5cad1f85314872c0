//! The UD's status (upstream's `calculateStatus`, openkruise/kruise v1.9.0
//! pkg/controller/uniteddeployment/uniteddeployment_controller.go), computed from the kept subset
//! workloads and their Pods (reserved Pods apart: `reservedPods`, not `replicas`). Pure.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::apps_v1alpha1::{
    UnitedDeployment, UnitedDeploymentCondition, UnitedDeploymentStatus,
    UnitedDeploymentSubsetStatus, UpdateStatus,
};
use kruise_api::keys;
use kruise_ordering::predicates;

use super::{Decision, Observed};

/// What the status is computed from besides the plan.
pub struct StatusInput<'a> {
    pub ud: &'a UnitedDeployment,
    pub revision: &'a str,
    pub collision_count: Option<i32>,
    /// The kept workload per subset (before this round's writes).
    pub kept: &'a BTreeMap<String, &'a Observed>,
    /// The UD's Pods (matching its selector, labelled with a subset).
    pub pods: &'a [&'a Pod],
    /// Failed writes this round, as messages (empty: all went through).
    pub failures: &'a [String],
    pub now: jiff::Timestamp,
}

/// The new status; conditions keep their lastTransitionTime while their status holds.
pub fn compute_status(input: &StatusInput<'_>, decision: &Decision) -> UnitedDeploymentStatus {
    let ud = input.ud;
    let old = ud.status.clone().unwrap_or_default();
    let subset_replicas = match &decision.allocation {
        Ok(a) => a.clone(),
        Err(_) => old.subset_replicas.clone(),
    };
    let mut label_selector = kruise_ordering::selector::format_selector(&ud.spec.selector);
    if ud
        .spec
        .topology
        .schedule_strategy
        .should_reserve_unschedulable_pods()
    {
        // The scale subresource (an HPA) counts the Pods that do the work.
        let sep = if label_selector.is_empty() { "" } else { "," };
        label_selector.push_str(&format!("{sep}{}=false", keys::UD_RESERVED_POD));
    }
    let mut status = UnitedDeploymentStatus {
        observed_generation: ud.metadata.generation.unwrap_or(0),
        collision_count: input.collision_count.or(old.collision_count),
        label_selector,
        subset_replicas: subset_replicas.clone(),
        ..Default::default()
    };
    for subset in &ud.spec.topology.subsets {
        let name = &subset.name;
        let (replicas, ready) = input
            .kept
            .get(name)
            .map_or((0, 0), |w| (w.replicas, w.ready_replicas));
        let pods = input.pods.iter().filter(|p| {
            predicates::is_active(p) && predicates::label(p, keys::UD_SUBSET_NAME) == Some(name)
        });
        let (mut updated, mut updated_ready) = (0, 0);
        for pod in pods {
            if predicates::label(pod, keys::UD_CONTROLLER_REVISION_HASH) == Some(input.revision) {
                updated += 1;
                updated_ready += i32::from(predicates::is_ready(pod));
            }
        }
        let reserved = decision
            .schedulability
            .reservations
            .get(name)
            .map_or(0, |r| r.reserved);
        // Reserved Pods are counted apart (`reservedPods`), not as replicas.
        status.replicas += replicas - reserved;
        status.reserved_pods += reserved;
        status.ready_replicas += ready;
        status.updated_replicas += updated;
        status.updated_ready_replicas += updated_ready;
        status.subset_statuses.push(UnitedDeploymentSubsetStatus {
            name: name.clone(),
            replicas: subset_replicas.get(name).copied().unwrap_or(replicas),
            ready_replicas: ready,
            partition: decision.partitions.get(name).copied().unwrap_or(0),
            reserved_pods: reserved,
            conditions: decision
                .schedulability
                .conditions
                .get(name)
                .cloned()
                .into_iter()
                .collect(),
        });
    }
    status.update_status = Some(UpdateStatus {
        updated_revision: input.revision.to_string(),
        current_partitions: decision.partitions.clone(),
    });
    status.current_revision =
        if old.current_revision.is_empty() || status.updated_ready_replicas >= status.replicas {
            input.revision.to_string()
        } else {
            old.current_revision.clone()
        };

    let mut conditions = Vec::new();
    let failure = input.failures.join("; ");
    let allocation_error = decision.allocation.as_ref().err().map(ToString::to_string);
    conditions.push(match (&allocation_error, failure.is_empty()) {
        (Some(e), _) => condition(keys::UD_CONDITION_SUBSET_PROVISIONED, "False", "Error", e),
        (None, false) => condition(
            keys::UD_CONDITION_SUBSET_PROVISIONED,
            "False",
            "Error",
            &failure,
        ),
        (None, true) => condition(keys::UD_CONDITION_SUBSET_PROVISIONED, "True", "", ""),
    });
    conditions.push(if failure.is_empty() {
        condition(keys::UD_CONDITION_SUBSET_UPDATED, "True", "", "")
    } else {
        condition(
            keys::UD_CONDITION_SUBSET_UPDATED,
            "False",
            "Error",
            &failure,
        )
    });
    if let Some(problem) = allocation_error.or((!failure.is_empty()).then_some(failure)) {
        conditions.push(condition(
            keys::UD_CONDITION_SUBSET_FAILURE,
            "True",
            "Error",
            &problem,
        ));
    }
    conditions.push(if status.current_revision == input.revision {
        condition(keys::UD_CONDITION_UPDATED, "True", "", "")
    } else {
        condition(keys::UD_CONDITION_UPDATED, "False", "Updating", "")
    });
    status.conditions = conditions
        .into_iter()
        .map(|mut c| {
            let previous = old.conditions.iter().find(|o| o.type_ == c.type_);
            c.last_transition_time = match previous {
                Some(p) if p.status == c.status => p.last_transition_time.clone(),
                _ => Some(Time(input.now)),
            };
            c
        })
        .collect();
    status
}

fn condition(type_: &str, status: &str, reason: &str, message: &str) -> UnitedDeploymentCondition {
    UnitedDeploymentCondition {
        type_: type_.into(),
        status: status.into(),
        last_transition_time: None,
        reason: reason.into(),
        message: message.into(),
    }
}
