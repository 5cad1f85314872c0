//! `kubectl kruise expose TYPE NAME`: a Service selecting a workload's Pods, as
//! `kubectl expose` builds it and kruise-tools' expose (pkg/cmd/expose/expose.go) extends
//! it to CloneSet: the workload's selector, its containers' ports unless `--port` says,
//! its labels unless `--labels` says.

use std::io::Write;

use kube::core::ApiResource;
use serde_json::{Map, Value, json};

use crate::edits::parse_pairs;
use crate::target::{Kind, parse_typed};
use crate::{Error, ExposeArgs, Result, Session, create_object};

/// What `expose` can take a selector from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// A workload `kubectl kruise` knows (CloneSet, Advanced StatefulSet, …, Deployment).
    Workload(Kind),
    Pod,
    Service,
    ReplicaSet,
    ReplicationController,
}

impl Source {
    /// Every kind `expose` accepts, for the messages.
    const EXPOSABLE: &str = "cloneset, asts (statefulset.apps.kruise.io), ads \
(daemonset.apps.kruise.io), uniteddeployment, deployment, replicaset, replicationcontroller, \
pod, service";

    pub fn parse(s: &str) -> Option<Source> {
        if let Some(kind) = Kind::parse(s) {
            return Some(Source::Workload(kind));
        }
        let source = match s.to_ascii_lowercase().as_str() {
            "pod" | "pods" | "po" => Source::Pod,
            "service" | "services" | "svc" => Source::Service,
            "replicaset" | "replicasets" | "rs" | "replicaset.apps" | "replicasets.apps" => {
                Source::ReplicaSet
            }
            "replicationcontroller" | "replicationcontrollers" | "rc" => {
                Source::ReplicationController
            }
            _ => return None,
        };
        Some(source)
    }

    pub fn api_resource(self) -> ApiResource {
        let core = |kind: &str, plural: &str| ApiResource {
            group: String::new(),
            version: "v1".into(),
            api_version: "v1".into(),
            kind: kind.into(),
            plural: plural.into(),
        };
        match self {
            Source::Workload(kind) => kind.api_resource(),
            Source::Pod => core("Pod", "pods"),
            Source::Service => core("Service", "services"),
            Source::ReplicationController => {
                core("ReplicationController", "replicationcontrollers")
            }
            Source::ReplicaSet => ApiResource {
                group: "apps".into(),
                version: "v1".into(),
                api_version: "apps/v1".into(),
                kind: "ReplicaSet".into(),
                plural: "replicasets".into(),
            },
        }
    }

    /// `Kind.group` as kubectl names a kind it cannot expose.
    fn group_kind(self) -> String {
        let ar = self.api_resource();
        if ar.group.is_empty() {
            ar.kind
        } else {
            format!("{}.{}", ar.kind, ar.group)
        }
    }
}

/// The flags that shape the Service.
#[derive(Clone, Debug, Default)]
pub struct ServiceOptions<'a> {
    pub name: Option<&'a str>,
    pub port: Option<i32>,
    pub target_port: Option<&'a str>,
    pub service_type: Option<&'a str>,
    pub protocol: Option<&'a str>,
    pub selector: Option<&'a str>,
    pub labels: Option<&'a str>,
}

fn no_selector(reason: String) -> Error {
    Error::Usage(format!(
        "couldn't retrieve selectors via --selector flag or introspection: {reason}"
    ))
}

/// The Pod selector of `obj` as a Service can hold it: equality only.
fn selector_of(source: Source, obj: &Value) -> Result<Map<String, Value>> {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let kind = source.group_kind();
    let labels = |pointer: &str| {
        obj.pointer(pointer)
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default()
    };
    let selector = match source {
        Source::Pod => labels("/metadata/labels"),
        Source::Service | Source::ReplicationController => labels("/spec/selector"),
        Source::Workload(Kind::AdvancedCronJob | Kind::BroadcastJob) => {
            return Err(Error::Usage(format!(
                "cannot expose a {kind}: its Pods are run to completion and share no \
                 selector a Service could use (expose takes: {})",
                Source::EXPOSABLE
            )));
        }
        Source::Workload(_) | Source::ReplicaSet => {
            if let Some(expressions) = obj
                .pointer("/spec/selector/matchExpressions")
                .and_then(Value::as_array)
                .filter(|e| !e.is_empty())
            {
                return Err(no_selector(format!(
                    "the selector of {kind} {name:?} has matchExpressions ({}), which a \
                     Service selector cannot hold: pass --selector",
                    Value::Array(expressions.clone())
                )));
            }
            labels("/spec/selector/matchLabels")
        }
    };
    if selector.is_empty() {
        let what = if source == Source::Pod {
            "has no labels"
        } else {
            "has no selector"
        };
        return Err(no_selector(format!(
            "{kind} {name:?} {what}, so a Service cannot select its Pods: pass --selector"
        )));
    }
    Ok(selector)
}

/// The Pod spec of a workload (a UnitedDeployment's: its subsets' template, whichever kind).
fn pod_spec(source: Source, obj: &Value) -> Option<&Value> {
    match source {
        Source::Pod => obj.get("spec"),
        Source::Workload(Kind::UnitedDeployment) => [
            "cloneSetTemplate",
            "advancedStatefulSetTemplate",
            "statefulSetTemplate",
            "deploymentTemplate",
        ]
        .iter()
        .find_map(|t| obj.pointer(&format!("/spec/template/{t}/spec/template/spec"))),
        _ => obj.pointer("/spec/template/spec"),
    }
}

/// The ports (number, protocol) the object serves: its containers', or a Service's own.
fn ports_of(source: Source, obj: &Value) -> Vec<(i64, String)> {
    let protocol = |p: &Value| {
        p.get("protocol")
            .and_then(Value::as_str)
            .unwrap_or("TCP")
            .to_string()
    };
    if source == Source::Service {
        return obj
            .pointer("/spec/ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|p| Some((p.get("port")?.as_i64()?, protocol(p))))
            .collect();
    }
    pod_spec(source, obj)
        .and_then(|s| s.get("containers"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .flat_map(|c| {
            c.get("ports")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
        })
        .filter_map(|p| Some((p.get("containerPort")?.as_i64()?, protocol(p))))
        .collect()
}

/// The Service `expose` creates for `obj`, a `source`.
pub fn service_for(source: Source, obj: &Value, o: &ServiceOptions<'_>) -> Result<Value> {
    let selector = match o.selector {
        Some(s) => {
            if s.contains("!=") || s.contains(" in ") || s.contains("notin") {
                return Err(Error::Usage(format!(
                    "--selector {s:?}: only equality-based requirements (key=value) are supported"
                )));
            }
            parse_pairs(s, "KEY=VALUE")?
        }
        None => selector_of(source, obj)?,
    };
    let introspected = ports_of(source, obj);
    let ports: Vec<(i64, Option<&str>)> = match o.port {
        Some(port) => vec![(i64::from(port), None)],
        None if introspected.is_empty() => {
            return Err(Error::Usage(
                "couldn't find port via --port flag or introspection: the Pods declare no \
                 container port, pass --port"
                    .into(),
            ));
        }
        None => introspected
            .iter()
            .map(|(port, protocol)| (*port, Some(protocol.as_str())))
            .collect(),
    };
    let several = ports.len() > 1;
    let service_ports: Vec<Value> = ports
        .iter()
        .enumerate()
        .map(|(i, (port, found))| {
            // --protocol wins, then the container's, then TCP, as kubectl expose.
            let protocol = o.protocol.or(*found).unwrap_or("TCP");
            let target = match o.target_port {
                Some(t) => t.parse::<i64>().map_or_else(|_| json!(t), |n| json!(n)),
                None => json!(port),
            };
            let mut p = json!({"port": port, "protocol": protocol, "targetPort": target});
            if several {
                p["name"] = json!(format!("port-{}", i + 1));
            }
            p
        })
        .collect();
    let labels = match o.labels {
        Some(l) => parse_pairs(l, "KEY=VALUE")?,
        None => obj
            .pointer("/metadata/labels")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default(),
    };
    let name = match o.name {
        Some(n) => n.to_string(),
        // A Service name is a DNS-1035 label: at most 63 characters.
        None => obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .chars()
            .take(63)
            .collect(),
    };
    let mut metadata = json!({"name": name});
    if !labels.is_empty() {
        metadata["labels"] = Value::Object(labels);
    }
    let mut spec = json!({"selector": selector, "ports": service_ports});
    if let Some(t) = o.service_type {
        spec["type"] = json!(t);
    }
    Ok(json!({"apiVersion": "v1", "kind": "Service", "metadata": metadata, "spec": spec}))
}

fn unknown(kind: &str) -> Error {
    Error::Usage(format!(
        "the server doesn't have a resource type {kind:?} that kubectl kruise can expose (one of: {})",
        Source::EXPOSABLE
    ))
}

/// `expose TYPE NAME …`.
pub async fn run(session: &Session, args: &ExposeArgs, out: &mut (dyn Write + Send)) -> Result<()> {
    let targets = parse_typed(&args.resource, Source::parse, unknown)?;
    let [(source, name)] = targets.as_slice() else {
        return Err(Error::Usage(
            "expose takes one resource: TYPE NAME or TYPE/NAME".into(),
        ));
    };
    let api = session.api_for(&source.api_resource());
    let obj = serde_json::to_value(api.get(name).await?)?;
    let service_type = args.service_type.map(ServiceType::as_str);
    let protocol = args.protocol.map(Protocol::as_str);
    let service = service_for(
        *source,
        &obj,
        &ServiceOptions {
            name: args.name.as_deref(),
            port: args.port,
            target_port: args.target_port.as_deref(),
            service_type,
            protocol,
            selector: args.selector.as_deref(),
            labels: args.labels.as_deref(),
        },
    )?;
    let reference = format!(
        "service/{}",
        service["metadata"]["name"].as_str().unwrap_or_default()
    );
    let ar = Source::Service.api_resource();
    create_object(session, &ar, service, &reference, "exposed", &args.out, out).await?;
    Ok(())
}

/// `--type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ServiceType {
    #[value(name = "ClusterIP")]
    ClusterIp,
    #[value(name = "NodePort")]
    NodePort,
    #[value(name = "LoadBalancer")]
    LoadBalancer,
}

impl ServiceType {
    fn as_str(self) -> &'static str {
        match self {
            ServiceType::ClusterIp => "ClusterIP",
            ServiceType::NodePort => "NodePort",
            ServiceType::LoadBalancer => "LoadBalancer",
        }
    }
}

/// `--protocol`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Protocol {
    #[value(name = "TCP")]
    Tcp,
    #[value(name = "UDP")]
    Udp,
    #[value(name = "SCTP")]
    Sctp,
}

impl Protocol {
    fn as_str(self) -> &'static str {
        match self {
            Protocol::Tcp => "TCP",
            Protocol::Udp => "UDP",
            Protocol::Sctp => "SCTP",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cloneset() -> Value {
        json!({
            "metadata": {"name": "web", "labels": {"team": "a"}},
            "spec": {
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"spec": {"containers": [
                    {"name": "nginx", "ports": [{"containerPort": 80}, {"containerPort": 53, "protocol": "UDP"}]},
                    {"name": "side"}
                ]}}
            }
        })
    }

    #[test]
    fn the_workloads_selector_and_the_given_port() {
        let svc = service_for(
            Source::Workload(Kind::CloneSet),
            &cloneset(),
            &ServiceOptions {
                port: Some(8080),
                target_port: Some("80"),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(
            svc,
            json!({"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "web", "labels": {"team": "a"}},
                "spec": {"selector": {"app": "web"},
                    "ports": [{"port": 8080, "protocol": "TCP", "targetPort": 80}]}})
        );
    }

    #[test]
    fn every_container_port_when_no_port_is_given() {
        let svc = service_for(
            Source::Workload(Kind::CloneSet),
            &cloneset(),
            &ServiceOptions {
                name: Some("front"),
                service_type: Some("NodePort"),
                labels: Some("tier=web,x=y"),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(
            svc["metadata"],
            json!({"name": "front", "labels": {"tier": "web", "x": "y"}})
        );
        assert_eq!(svc["spec"]["type"], "NodePort");
        assert_eq!(
            svc["spec"]["ports"],
            json!([
                {"name": "port-1", "port": 80, "protocol": "TCP", "targetPort": 80},
                {"name": "port-2", "port": 53, "protocol": "UDP", "targetPort": 53}
            ])
        );
        // --protocol overrides the containers' own, a named target port stays a name.
        let svc = service_for(
            Source::Workload(Kind::CloneSet),
            &cloneset(),
            &ServiceOptions {
                protocol: Some("SCTP"),
                target_port: Some("http"),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(svc["spec"]["ports"][1]["protocol"], "SCTP");
        assert_eq!(svc["spec"]["ports"][1]["targetPort"], "http");
    }

    #[test]
    fn pods_services_and_given_selectors() {
        let pod = json!({"metadata": {"name": "p", "labels": {"app": "x"}},
            "spec": {"containers": [{"name": "c", "ports": [{"containerPort": 9000}]}]}});
        let svc = service_for(Source::Pod, &pod, &ServiceOptions::default()).unwrap();
        assert_eq!(svc["spec"]["selector"], json!({"app": "x"}));
        assert_eq!(svc["spec"]["ports"][0]["port"], 9000);
        let service = json!({"metadata": {"name": "s"}, "spec": {"selector": {"app": "y"},
            "ports": [{"port": 443, "targetPort": 8443}]}});
        let svc = service_for(
            Source::Service,
            &service,
            &ServiceOptions {
                name: Some("s2"),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(svc["spec"]["selector"], json!({"app": "y"}));
        assert_eq!(
            svc["spec"]["ports"],
            json!([{"port": 443, "protocol": "TCP", "targetPort": 443}])
        );
        let svc = service_for(
            Source::Workload(Kind::CloneSet),
            &cloneset(),
            &ServiceOptions {
                selector: Some("app=other"),
                port: Some(1),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(svc["spec"]["selector"], json!({"app": "other"}));
        let long = json!({"metadata": {"name": "a".repeat(70)}, "spec": {
            "selector": {"matchLabels": {"a": "b"}}}});
        let svc = service_for(
            Source::Workload(Kind::Deployment),
            &long,
            &ServiceOptions {
                port: Some(80),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(svc["metadata"]["name"].as_str().unwrap().len(), 63);
    }

    #[test]
    fn what_cannot_be_exposed_says_why() {
        let err = |source, obj: &Value, o: &ServiceOptions<'_>| {
            service_for(source, obj, o).unwrap_err().to_string()
        };
        let port = ServiceOptions {
            port: Some(80),
            ..Default::default()
        };
        let bare = json!({"metadata": {"name": "p"}, "spec": {"containers": []}});
        assert_eq!(
            err(Source::Pod, &bare, &port),
            "couldn't retrieve selectors via --selector flag or introspection: Pod \"p\" has \
             no labels, so a Service cannot select its Pods: pass --selector"
        );
        let bcj = json!({"metadata": {"name": "b"}, "spec": {}});
        let e = err(Source::Workload(Kind::BroadcastJob), &bcj, &port);
        assert!(
            e.starts_with("cannot expose a BroadcastJob.apps.kruise.io"),
            "{e}"
        );
        let mut expr = cloneset();
        expr["spec"]["selector"]["matchExpressions"] =
            json!([{"key": "app", "operator": "In", "values": ["web"]}]);
        let e = err(Source::Workload(Kind::CloneSet), &expr, &port);
        assert!(e.contains("has matchExpressions"), "{e}");
        let e = err(
            Source::Workload(Kind::CloneSet),
            &cloneset(),
            &ServiceOptions {
                selector: Some("app!=x"),
                ..Default::default()
            },
        );
        assert!(e.contains("only equality-based"), "{e}");
        let mut portless = cloneset();
        portless["spec"]["template"]["spec"]["containers"] = json!([{"name": "c"}]);
        let e = err(
            Source::Workload(Kind::CloneSet),
            &portless,
            &ServiceOptions::default(),
        );
        assert!(
            e.starts_with("couldn't find port via --port flag or introspection"),
            "{e}"
        );
    }

    #[test]
    fn kinds() {
        assert_eq!(Source::parse("svc"), Some(Source::Service));
        assert_eq!(Source::parse("po"), Some(Source::Pod));
        assert_eq!(
            Source::parse("clone"),
            Some(Source::Workload(Kind::CloneSet))
        );
        assert_eq!(Source::parse("configmap"), None);
        let e = parse_typed(&["configmap/x".to_string()], Source::parse, unknown)
            .unwrap_err()
            .to_string();
        assert!(e.contains("that kubectl kruise can expose"), "{e}");
    }
}
