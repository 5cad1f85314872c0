//! Which workload a command acts on: `TYPE/NAME` or `TYPE NAME…`, with the resource names,
//! short names and `<resource>.<group>` forms kubectl and kruise-tools accept.

use kube::core::ApiResource;

use crate::error::{Error, Result};

/// The kinds `kubectl kruise` knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    CloneSet,
    AdvancedStatefulSet,
    AdvancedDaemonSet,
    UnitedDeployment,
    AdvancedCronJob,
    BroadcastJob,
    Deployment,
    /// Kruise Rollout's `Rollout` (rollouts.kruise.io, openkruise/rollouts): not a workload
    /// of this project, but run beside it; read and written as JSON, at the version the
    /// server serves (see [`Kind::api_resource`]).
    Rollout,
}

impl Kind {
    /// Every kind, for the usage message.
    pub const ALL: [Kind; 8] = [
        Kind::CloneSet,
        Kind::AdvancedStatefulSet,
        Kind::AdvancedDaemonSet,
        Kind::UnitedDeployment,
        Kind::AdvancedCronJob,
        Kind::BroadcastJob,
        Kind::Deployment,
        Kind::Rollout,
    ];

    /// A resource type as typed on the command line (case-insensitive). Kruise's
    /// StatefulSet and DaemonSet need their group or kruise-tools' `asts`/`ads`: a bare
    /// `statefulset` or `daemonset` is Kubernetes' own, which this plugin leaves to kubectl.
    pub fn parse(s: &str) -> Option<Kind> {
        let s = s.to_ascii_lowercase();
        let kind = match s.as_str() {
            "cloneset"
            | "clonesets"
            | "clone"
            | "cloneset.apps.kruise.io"
            | "clonesets.apps.kruise.io" => Kind::CloneSet,
            "asts"
            | "advancedstatefulset"
            | "advancedstatefulsets"
            | "statefulset.apps.kruise.io"
            | "statefulsets.apps.kruise.io"
            | "sts.apps.kruise.io" => Kind::AdvancedStatefulSet,
            "ads"
            | "advanceddaemonset"
            | "advanceddaemonsets"
            | "daemonset.apps.kruise.io"
            | "daemonsets.apps.kruise.io"
            | "daemon" => Kind::AdvancedDaemonSet,
            "ud"
            | "uniteddeployment"
            | "uniteddeployments"
            | "uniteddeployment.apps.kruise.io"
            | "uniteddeployments.apps.kruise.io" => Kind::UnitedDeployment,
            "acj"
            | "advancedcronjob"
            | "advancedcronjobs"
            | "advancedcronjob.apps.kruise.io"
            | "advancedcronjobs.apps.kruise.io" => Kind::AdvancedCronJob,
            "bcj"
            | "broadcastjob"
            | "broadcastjobs"
            | "broadcastjob.apps.kruise.io"
            | "broadcastjobs.apps.kruise.io" => Kind::BroadcastJob,
            "deployment" | "deployments" | "deploy" | "deployment.apps" | "deployments.apps" => {
                Kind::Deployment
            }
            "rollout"
            | "rollouts"
            | "ro"
            | "rollout.rollouts.kruise.io"
            | "rollouts.rollouts.kruise.io" => Kind::Rollout,
            _ => return None,
        };
        Some(kind)
    }

    /// The group, version, kind and plural. A Rollout's is v1beta1, the version Kruise
    /// Rollout stores since v0.6; a server that serves only v1alpha1 gets
    /// [`rollout_resource`]`("v1alpha1")` instead (the session decides from discovery).
    pub fn api_resource(self) -> ApiResource {
        let (group, version, kind, plural) = match self {
            Kind::CloneSet => ("apps.kruise.io", "v1alpha1", "CloneSet", "clonesets"),
            Kind::AdvancedStatefulSet => {
                ("apps.kruise.io", "v1beta1", "StatefulSet", "statefulsets")
            }
            Kind::AdvancedDaemonSet => ("apps.kruise.io", "v1alpha1", "DaemonSet", "daemonsets"),
            Kind::UnitedDeployment => (
                "apps.kruise.io",
                "v1alpha1",
                "UnitedDeployment",
                "uniteddeployments",
            ),
            Kind::AdvancedCronJob => (
                "apps.kruise.io",
                "v1alpha1",
                "AdvancedCronJob",
                "advancedcronjobs",
            ),
            Kind::BroadcastJob => (
                "apps.kruise.io",
                "v1alpha1",
                "BroadcastJob",
                "broadcastjobs",
            ),
            Kind::Deployment => ("apps", "v1", "Deployment", "deployments"),
            Kind::Rollout => return rollout_resource("v1beta1"),
        };
        ApiResource {
            group: group.into(),
            version: version.into(),
            api_version: format!("{group}/{version}"),
            kind: kind.into(),
            plural: plural.into(),
        }
    }

    /// `<kind>.<group>` in lower case, as kubectl names an object (`-o name`, messages).
    pub fn qualified(self) -> String {
        let ar = self.api_resource();
        format!("{}.{}", ar.kind.to_ascii_lowercase(), ar.group)
    }

    /// `<resource>.<group>`, as kubectl names the kind in errors.
    pub fn resource(self) -> String {
        let ar = self.api_resource();
        format!("{}.{}", ar.plural, ar.group)
    }
}

/// Kruise Rollout's group.
pub const ROLLOUTS_GROUP: &str = "rollouts.kruise.io";

/// `rollouts.rollouts.kruise.io` at `version`.
pub fn rollout_resource(version: &str) -> ApiResource {
    ApiResource {
        group: ROLLOUTS_GROUP.into(),
        version: version.into(),
        api_version: format!("{ROLLOUTS_GROUP}/{version}"),
        kind: "Rollout".into(),
        plural: "rollouts".into(),
    }
}

/// The Rollout version to use of those the server serves for rollouts.kruise.io: v1beta1
/// when served, else v1alpha1 (Kruise Rollout before v0.6); None when neither is (Kruise
/// Rollout is not installed).
pub fn rollout_version<'a>(served: impl IntoIterator<Item = &'a str>) -> Option<&'static str> {
    let served: Vec<&str> = served.into_iter().collect();
    ["v1beta1", "v1alpha1"]
        .into_iter()
        .find(|v| served.contains(v))
}

/// One object a command acts on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub kind: Kind,
    pub name: String,
}

impl Target {
    /// `cloneset.apps.kruise.io/sample`.
    pub fn reference(&self) -> String {
        format!("{}/{}", self.kind.qualified(), self.name)
    }
}

fn unknown(kind: &str) -> Error {
    Error::Usage(format!(
        "the server doesn't have a resource type {kind:?} known to kubectl kruise (one of: {})",
        Kind::ALL
            .iter()
            .map(|k| k.resource())
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

/// `TYPE/NAME [TYPE/NAME…]` or `TYPE NAME [NAME…]`, as kubectl reads them.
pub fn parse_targets(args: &[String]) -> Result<Vec<Target>> {
    Ok(parse_typed(args, Kind::parse, unknown)?
        .into_iter()
        .map(|(kind, name)| Target { kind, name })
        .collect())
}

/// The two forms of [`parse_targets`] for any set of kinds: `resolve` reads a type,
/// `unknown` says why one is not known.
pub fn parse_typed<K: Copy>(
    args: &[String],
    resolve: impl Fn(&str) -> Option<K>,
    unknown: impl Fn(&str) -> Error,
) -> Result<Vec<(K, String)>> {
    let Some(first) = args.first() else {
        return Err(Error::Usage(
            "you must provide one or more resources by argument: TYPE/NAME or TYPE NAME".into(),
        ));
    };
    if first.contains('/') {
        return args
            .iter()
            .map(|arg| {
                let (kind, name) = arg.split_once('/').ok_or_else(|| {
                    Error::Usage(format!(
                        "there is no need to specify a resource type as a separate argument when passing arguments in resource/name form (e.g. 'kubectl kruise rollout status cloneset/sample' instead of 'kubectl kruise rollout status cloneset sample'): {arg:?}"
                    ))
                })?;
                let kind = resolve(kind).ok_or_else(|| unknown(kind))?;
                if name.is_empty() {
                    return Err(Error::Usage(format!("{arg:?}: a name is required")));
                }
                Ok((kind, name.to_string()))
            })
            .collect();
    }
    let kind = resolve(first).ok_or_else(|| unknown(first))?;
    let names = &args[1..];
    if names.is_empty() {
        return Err(Error::Usage(format!(
            "a resource name is required after {first:?} (TYPE NAME or TYPE/NAME)"
        )));
    }
    names
        .iter()
        .map(|name| {
            if name.contains('/') {
                return Err(Error::Usage(format!(
                    "{name:?}: mixing TYPE NAME and TYPE/NAME forms"
                )));
            }
            Ok((kind, name.clone()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn both_forms_and_the_short_names() {
        let t = parse_targets(&args(&[
            "cloneset/a",
            "asts/b",
            "daemonset.apps.kruise.io/c",
        ]))
        .unwrap();
        assert_eq!(
            t.iter()
                .map(|t| (t.kind, t.name.as_str()))
                .collect::<Vec<_>>(),
            [
                (Kind::CloneSet, "a"),
                (Kind::AdvancedStatefulSet, "b"),
                (Kind::AdvancedDaemonSet, "c")
            ]
        );
        let t = parse_targets(&args(&["CloneSet", "x", "y"])).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t[1].reference(), "cloneset.apps.kruise.io/y");
        assert_eq!(
            parse_targets(&args(&["statefulsets.apps.kruise.io/s"])).unwrap()[0].reference(),
            "statefulset.apps.kruise.io/s"
        );
        for form in [
            "rollout/r",
            "ro/r",
            "Rollouts/r",
            "rollouts.rollouts.kruise.io/r",
        ] {
            let t = parse_targets(&args(&[form])).unwrap();
            assert_eq!(t[0].reference(), "rollout.rollouts.kruise.io/r", "{form}");
            assert_eq!(t[0].kind.resource(), "rollouts.rollouts.kruise.io");
        }
    }

    #[test]
    fn a_rollout_is_read_at_v1beta1_when_served_else_v1alpha1() {
        assert_eq!(rollout_version(["v1alpha1", "v1beta1"]), Some("v1beta1"));
        assert_eq!(rollout_version(["v1alpha1"]), Some("v1alpha1"));
        assert_eq!(rollout_version(["v2"]), None);
        assert_eq!(
            rollout_resource("v1alpha1").api_version,
            "rollouts.kruise.io/v1alpha1"
        );
    }

    #[test]
    fn kubernetes_own_kinds_and_bad_forms_are_refused() {
        for bad in [
            &["statefulset/x"][..],
            &["pod/x"],
            &["cloneset"],
            &["cloneset/"],
            &["cloneset", "a/b"],
            &[],
        ] {
            assert!(parse_targets(&args(bad)).is_err(), "{bad:?}");
        }
        let err = parse_targets(&args(&["pod/x"])).unwrap_err().to_string();
        assert!(err.contains("clonesets.apps.kruise.io"), "{err}");
    }
}
