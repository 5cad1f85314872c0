//! Node-scoped reads for the node agent: the authorization webhook the apiserver asks
//! about the agent's reads (docs/imagepulljob.md, "Node-scoped reads for the node agent").
//!
//! One ServiceAccount serves every node's agent, and RBAC cannot tie a request to the
//! node its Pod runs on, so RBAC grants the agent no reads of NodeImages,
//! ContainerRecreateRequests or Pods; the apiserver's authorization chain (Node, RBAC,
//! then this webhook, for the agent's reads only) asks here instead. The agent's token is
//! bound to its Pod, so the apiserver names the Pod's node in the user's extra
//! (`authentication.kubernetes.io/node-name`), and passes a list's or watch's selectors
//! (AuthorizeWithSelectors): a read is allowed when it can only return its node's
//! objects.
//!
//! | resource | allowed |
//! |---|---|
//! | nodeimages | get of the node's name; list/watch with `metadata.name=<node>` |
//! | nodepodprobes | likewise (PodProbeMarker probes) |
//! | containerrecreaterequests | list/watch with the label `crr.apps.kruise.io/node-name=<node>` |
//! | pods | list/watch with `spec.nodeName=<node>`; get of a Pod the cache shows on the node |
//!
//! Any other read of those by the agent is denied (with the reason in the 403); anything
//! else, or anyone else, gets no opinion (RBAC decided before us).

use std::sync::Arc;

use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReviewSpec};
use k8s_openapi::api::core::v1::Pod;
use kruise_api::keys;
use kruise_runtime::Cache;
use kruise_runtime::webhook::Route;
use kruise_runtime::webhook::authorization::{Authorizer, Verdict};
use kube::runtime::reflector::ObjectRef;

/// Where the apiserver's authorization config points (`<webhook URL>` + this path).
pub const PATH: &str = "/authorize-daemon-agent";
/// The `webhook` label of the route's metrics.
pub const NAME: &str = "authorize-daemon-agent";
/// The node agent's ServiceAccount (kustomize/controllers/daemon-agent), in the config
/// namespace.
pub const AGENT_SERVICE_ACCOUNT: &str = "daemon-agent";
/// The user's extra a Pod-bound ServiceAccount token carries: the Pod's node.
pub const NODE_NAME_EXTRA: &str = "authentication.kubernetes.io/node-name";

/// The user name of the agent's ServiceAccount in `config_namespace`.
pub fn agent_user(config_namespace: &str) -> String {
    format!("system:serviceaccount:{config_namespace}:{AGENT_SERVICE_ACCOUNT}")
}

/// The agent's reads this webhook judges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    NodeImages,
    NodePodProbes,
    Requests,
    Pods,
}

fn kind_of(attributes: &ResourceAttributes) -> Option<Kind> {
    if attributes
        .subresource
        .as_deref()
        .is_some_and(|s| !s.is_empty())
    {
        return None;
    }
    match (
        attributes.group.as_deref().unwrap_or_default(),
        attributes.resource.as_deref().unwrap_or_default(),
    ) {
        ("apps.kruise.io", "nodeimages") => Some(Kind::NodeImages),
        ("apps.kruise.io", "nodepodprobes") => Some(Kind::NodePodProbes),
        ("apps.kruise.io", "containerrecreaterequests") => Some(Kind::Requests),
        ("", "pods") => Some(Kind::Pods),
        _ => None,
    }
}

/// Whether one of the requirements (ANDed by the apiserver) pins `key` to `node` alone:
/// operator `In` (what `=` and `==` parse to) with the single value `node`.
fn pins<'a>(
    requirements: impl IntoIterator<Item = (&'a str, &'a str, &'a [String])>,
    key: &str,
    node: &str,
) -> bool {
    requirements
        .into_iter()
        .any(|(k, op, values)| k == key && op == "In" && values == [node])
}

fn field_pins(attributes: &ResourceAttributes, key: &str, node: &str) -> bool {
    let requirements = attributes
        .field_selector
        .as_ref()
        .and_then(|s| s.requirements.as_deref())
        .unwrap_or_default();
    pins(
        requirements.iter().map(|r| {
            (
                r.key.as_str(),
                r.operator.as_str(),
                r.values.as_deref().unwrap_or_default(),
            )
        }),
        key,
        node,
    )
}

fn label_pins(attributes: &ResourceAttributes, key: &str, node: &str) -> bool {
    let requirements = attributes
        .label_selector
        .as_ref()
        .and_then(|s| s.requirements.as_deref())
        .unwrap_or_default();
    pins(
        requirements.iter().map(|r| {
            (
                r.key.as_str(),
                r.operator.as_str(),
                r.values.as_deref().unwrap_or_default(),
            )
        }),
        key,
        node,
    )
}

/// The decision for one review. `agent` is the agent's user name ([`agent_user`]);
/// `pod_node(namespace, name)` the node of a Pod, from a cache (`None`: unknown or not
/// scheduled).
pub fn decide(
    agent: &str,
    spec: &SubjectAccessReviewSpec,
    pod_node: impl Fn(&str, &str) -> Option<String>,
) -> Verdict {
    if spec.user.as_deref() != Some(agent) {
        return Verdict::NoOpinion;
    }
    let Some(attributes) = spec.resource_attributes.as_ref() else {
        return Verdict::NoOpinion;
    };
    let Some(kind) = kind_of(attributes) else {
        return Verdict::NoOpinion;
    };
    let verb = attributes.verb.as_deref().unwrap_or_default();
    if !matches!(verb, "get" | "list" | "watch") {
        return Verdict::NoOpinion;
    }
    let node = spec
        .extra
        .as_ref()
        .and_then(|extra| extra.get(NODE_NAME_EXTRA))
        .and_then(|values| match values.as_slice() {
            [node] if !node.is_empty() => Some(node.as_str()),
            _ => None,
        });
    let Some(node) = node else {
        return Verdict::Deny(
            "the node agent reads only with a token bound to its Pod (no node in the token)".into(),
        );
    };
    let name = attributes.name.as_deref().unwrap_or_default();
    let allowed = match (kind, verb) {
        // A list or watch of one name also carries it as the name (the apiserver takes it
        // from the field selector metadata.name), so both forms are the same read.
        (Kind::NodeImages | Kind::NodePodProbes, _) => {
            name == node || field_pins(attributes, "metadata.name", node)
        }
        (Kind::Requests, "list" | "watch") => label_pins(attributes, keys::CRR_NODE_NAME, node),
        (Kind::Pods, "list" | "watch") => field_pins(attributes, "spec.nodeName", node),
        (Kind::Pods, _) => {
            let namespace = attributes.namespace.as_deref().unwrap_or_default();
            !name.is_empty() && pod_node(namespace, name).as_deref() == Some(node)
        }
        // A request's label is not known here without its object: the agent only lists.
        (Kind::Requests, _) => false,
    };
    let what = match kind {
        Kind::NodeImages => "its node's NodeImage (metadata.name=<node>)",
        Kind::NodePodProbes => "its node's NodePodProbe (metadata.name=<node>)",
        Kind::Requests => {
            "its node's ContainerRecreateRequests (label crr.apps.kruise.io/node-name=<node>)"
        }
        Kind::Pods => "its node's Pods (spec.nodeName=<node>, or a get of one of them)",
    };
    if allowed {
        Verdict::Allow(format!("the node agent of {node} reads {what}"))
    } else {
        Verdict::Deny(format!("the node agent of {node} may {verb} only {what}"))
    }
}

/// The route: [`decide`] for the agent of `config_namespace`, Pods looked up in `pods`
/// (a cache of this instance's scope holding each Pod's node).
pub fn route(config_namespace: &str, pods: Cache<Pod>) -> Route {
    let agent = agent_user(config_namespace);
    let authorize: Authorizer = Arc::new(move |spec: &SubjectAccessReviewSpec| {
        decide(&agent, spec, |namespace, name| {
            pods.store()
                .get(&ObjectRef::new(name).within(namespace))
                .and_then(|pod| pod.spec.as_ref()?.node_name.clone())
        })
    });
    Route::authorization(PATH, NAME, authorize)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::authorization::v1::{FieldSelectorAttributes, LabelSelectorAttributes};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
        FieldSelectorRequirement, LabelSelectorRequirement,
    };
    use proptest::prelude::*;

    use super::*;

    const AGENT: &str = "system:serviceaccount:kruise-daemon-config:daemon-agent";

    struct Read {
        verb: &'static str,
        group: &'static str,
        resource: &'static str,
        subresource: Option<&'static str>,
        name: Option<String>,
        namespace: Option<String>,
        fields: Vec<(String, String, Vec<String>)>,
        labels: Vec<(String, String, Vec<String>)>,
    }

    fn read(verb: &'static str, group: &'static str, resource: &'static str) -> Read {
        Read {
            verb,
            group,
            resource,
            subresource: None,
            name: None,
            namespace: None,
            fields: vec![],
            labels: vec![],
        }
    }

    impl Read {
        fn field(mut self, key: &str, op: &str, values: &[&str]) -> Self {
            let values = values.iter().map(|v| v.to_string()).collect();
            self.fields.push((key.into(), op.into(), values));
            self
        }
        fn label(mut self, key: &str, op: &str, values: &[&str]) -> Self {
            let values = values.iter().map(|v| v.to_string()).collect();
            self.labels.push((key.into(), op.into(), values));
            self
        }
        fn named(mut self, namespace: Option<&str>, name: &str) -> Self {
            self.namespace = namespace.map(String::from);
            self.name = Some(name.into());
            self
        }
        fn sub(mut self, subresource: &'static str) -> Self {
            self.subresource = Some(subresource);
            self
        }
        fn by(&self, user: &str, node: Option<&str>) -> SubjectAccessReviewSpec {
            SubjectAccessReviewSpec {
                user: Some(user.into()),
                extra: node.map(|n| BTreeMap::from([(NODE_NAME_EXTRA.into(), vec![n.into()])])),
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(self.verb.into()),
                    group: Some(self.group.into()),
                    resource: Some(self.resource.into()),
                    subresource: self.subresource.map(String::from),
                    name: self.name.clone(),
                    namespace: self.namespace.clone(),
                    field_selector: (!self.fields.is_empty()).then(|| FieldSelectorAttributes {
                        requirements: Some(
                            self.fields
                                .iter()
                                .map(|(key, operator, values)| FieldSelectorRequirement {
                                    key: key.clone(),
                                    operator: operator.clone(),
                                    values: Some(values.clone()),
                                })
                                .collect(),
                        ),
                        ..Default::default()
                    }),
                    label_selector: (!self.labels.is_empty()).then(|| LabelSelectorAttributes {
                        requirements: Some(
                            self.labels
                                .iter()
                                .map(|(key, operator, values)| LabelSelectorRequirement {
                                    key: key.clone(),
                                    operator: operator.clone(),
                                    values: Some(values.clone()),
                                })
                                .collect(),
                        ),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }
        }
    }

    /// Pods: `ns/on-a` runs on node a, `ns/on-b` on node b.
    fn pod_node(namespace: &str, name: &str) -> Option<String> {
        match (namespace, name) {
            ("ns", "on-a") => Some("a".into()),
            ("ns", "on-b") => Some("b".into()),
            _ => None,
        }
    }

    fn verdict(read: &Read, node: Option<&str>) -> Verdict {
        decide(AGENT, &read.by(AGENT, node), pod_node)
    }

    fn allowed(read: &Read) -> bool {
        matches!(verdict(read, Some("a")), Verdict::Allow(_))
    }

    fn denied(read: &Read) -> bool {
        matches!(verdict(read, Some("a")), Verdict::Deny(_))
    }

    const NI: (&str, &str) = ("apps.kruise.io", "nodeimages");
    const CRR: (&str, &str) = ("apps.kruise.io", "containerrecreaterequests");
    const PODS: (&str, &str) = ("", "pods");
    const NPP: (&str, &str) = ("apps.kruise.io", "nodepodprobes");

    #[test]
    fn node_pod_probes_are_read_as_node_images_are() {
        for verb in ["list", "watch"] {
            assert!(allowed(&read(verb, NPP.0, NPP.1).field(
                "metadata.name",
                "In",
                &["a"]
            )));
            assert!(denied(&read(verb, NPP.0, NPP.1)));
            assert!(denied(&read(verb, NPP.0, NPP.1).field(
                "metadata.name",
                "In",
                &["b"]
            )));
        }
        assert!(allowed(&read("get", NPP.0, NPP.1).named(None, "a")));
        assert!(denied(&read("get", NPP.0, NPP.1).named(None, "b")));
    }

    #[test]
    fn the_agents_own_reads_are_allowed() {
        for verb in ["list", "watch"] {
            assert!(allowed(&read(verb, NI.0, NI.1).field(
                "metadata.name",
                "In",
                &["a"]
            )));
            // The apiserver names the object of a single-name list too.
            assert!(allowed(&read(verb, NI.0, NI.1).named(None, "a").field(
                "metadata.name",
                "In",
                &["a"]
            )));
            // What the agent asks: its node's active requests.
            assert!(allowed(
                &read(verb, CRR.0, CRR.1)
                    .named(None, "")
                    .label(keys::CRR_NODE_NAME, "In", &["a"])
                    .label(keys::CRR_ACTIVE, "In", &["true"])
            ));
            assert!(allowed(&read(verb, PODS.0, PODS.1).field(
                "spec.nodeName",
                "In",
                &["a"]
            )));
        }
        assert!(allowed(&read("get", NI.0, NI.1).named(None, "a")));
        assert!(allowed(
            &read("get", PODS.0, PODS.1).named(Some("ns"), "on-a")
        ));
    }

    #[test]
    fn reads_beyond_its_node_are_denied() {
        for verb in ["list", "watch"] {
            for r in [
                read(verb, NI.0, NI.1),
                read(verb, NI.0, NI.1).field("metadata.name", "In", &["b"]),
                read(verb, NI.0, NI.1).field("metadata.name", "NotIn", &["a"]),
                read(verb, NI.0, NI.1).field("metadata.name", "In", &["a", "b"]),
                read(verb, CRR.0, CRR.1),
                read(verb, CRR.0, CRR.1).label(keys::CRR_NODE_NAME, "In", &["b"]),
                read(verb, CRR.0, CRR.1).label(keys::CRR_NODE_NAME, "NotIn", &["b"]),
                read(verb, CRR.0, CRR.1).label(keys::CRR_NODE_NAME, "Exists", &[]),
                read(verb, CRR.0, CRR.1).label(keys::CRR_NODE_NAME, "In", &["a", "b"]),
                // A field selector is not the label.
                read(verb, CRR.0, CRR.1).field(keys::CRR_NODE_NAME, "In", &["a"]),
                read(verb, PODS.0, PODS.1),
                read(verb, PODS.0, PODS.1).field("spec.nodeName", "In", &["b"]),
                read(verb, PODS.0, PODS.1).field("spec.nodeName", "NotIn", &["b"]),
                // A label is anyone's to set.
                read(verb, PODS.0, PODS.1).label("spec.nodeName", "In", &["a"]),
            ] {
                assert!(
                    denied(&r),
                    "{verb} {:?} {:?} {:?}",
                    r.resource,
                    r.fields,
                    r.labels
                );
            }
        }
        assert!(denied(&read("get", NI.0, NI.1).named(None, "b")));
        assert!(denied(&read("get", CRR.0, CRR.1).named(Some("ns"), "x")));
        assert!(denied(
            &read("get", PODS.0, PODS.1).named(Some("ns"), "on-b")
        ));
        // A Pod the cache does not know (or not yet scheduled): denied; the agent retries.
        assert!(denied(
            &read("get", PODS.0, PODS.1).named(Some("ns"), "gone")
        ));
        assert!(denied(
            &read("get", PODS.0, PODS.1).named(Some("other"), "on-a")
        ));
    }

    #[test]
    fn without_a_node_in_the_token_every_read_is_denied() {
        let own = read("list", NI.0, NI.1).field("metadata.name", "In", &["a"]);
        let Verdict::Deny(reason) = verdict(&own, None) else {
            panic!("allowed without a node");
        };
        assert!(reason.contains("bound to its Pod"), "{reason}");
        let mut spec = own.by(AGENT, Some("a"));
        spec.extra = Some(BTreeMap::from([(NODE_NAME_EXTRA.into(), vec![])]));
        assert!(matches!(decide(AGENT, &spec, pod_node), Verdict::Deny(_)));
        spec.extra = Some(BTreeMap::from([(
            NODE_NAME_EXTRA.into(),
            vec!["a".into(), "b".into()],
        )]));
        assert!(matches!(decide(AGENT, &spec, pod_node), Verdict::Deny(_)));
    }

    #[test]
    fn anything_else_is_left_to_the_other_authorizers() {
        let own = read("list", NI.0, NI.1);
        // Another user, even with a node.
        let other = own.by("system:serviceaccount:default:daemon-agent", Some("a"));
        assert_eq!(decide(AGENT, &other, pod_node), Verdict::NoOpinion);
        // Writes (RBAC and the admission policies decide), subresources, other kinds.
        for r in [
            read("patch", NI.0, NI.1).named(None, "b").sub("status"),
            read("update", NI.0, NI.1).named(None, "b"),
            read("create", "events.k8s.io", "events"),
            read("get", PODS.0, PODS.1)
                .named(Some("ns"), "on-b")
                .sub("log"),
            read("list", "", "secrets"),
            read("list", "", "nodes"),
            read("get", "apps", "pods").named(Some("ns"), "on-b"),
        ] {
            assert_eq!(
                verdict(&r, Some("a")),
                Verdict::NoOpinion,
                "{} {}",
                r.verb,
                r.resource
            );
        }
        let non_resource = SubjectAccessReviewSpec {
            user: Some(AGENT.into()),
            ..Default::default()
        };
        assert_eq!(decide(AGENT, &non_resource, pod_node), Verdict::NoOpinion);
    }

    proptest! {
        /// Whatever the selectors, an allowed list or watch can only return objects of
        /// the token's node: it pins the node's key to exactly that node.
        #[test]
        fn an_allowed_list_pins_the_tokens_node(
            node in "[a-c]",
            resource in 0usize..3,
            verb in prop::sample::select(vec!["list", "watch"]),
            requirements in prop::collection::vec(
                (
                    prop::sample::select(vec![
                        "metadata.name", "spec.nodeName", keys::CRR_NODE_NAME, "other",
                    ]),
                    prop::sample::select(vec!["In", "NotIn", "Exists", "DoesNotExist"]),
                    prop::collection::vec("[a-c]", 0..3),
                    any::<bool>(),
                ),
                0..4,
            ),
        ) {
            let (group, plural, key, as_label) = [
                (NI.0, NI.1, "metadata.name", false),
                (CRR.0, CRR.1, keys::CRR_NODE_NAME, true),
                (PODS.0, PODS.1, "spec.nodeName", false),
            ][resource];
            let mut r = read(verb, group, plural);
            for (k, op, values, label) in &requirements {
                let values: Vec<&str> = values.iter().map(String::as_str).collect();
                r = if *label { r.label(k, op, &values) } else { r.field(k, op, &values) };
            }
            let verdict = decide(AGENT, &r.by(AGENT, Some(&node)), pod_node);
            let pinned = requirements.iter().any(|(k, op, values, label)| {
                *k == key && *op == "In" && values.as_slice() == std::slice::from_ref(&node) && *label == as_label
            });
            prop_assert_eq!(matches!(verdict, Verdict::Allow(_)), pinned);
            prop_assert!(!matches!(verdict, Verdict::NoOpinion));
        }
    }
}
