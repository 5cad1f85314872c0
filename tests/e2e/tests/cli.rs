//! `kubectl kruise` (crates/kubectl-kruise) against the local cluster: a CloneSet rolled out
//! in place step by step on kwok (partition, pause, resume), its history and undo, scaling
//! with chosen Pods, restart, and the errors a user sees. Each command runs through the
//! binary's own entry point (`kubectl_kruise::run`) in this process.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps_v1alpha1::CloneSet;
use kruise_e2e::{RunningController, TestNamespace, kubectl_kruise, wait_for};
use kube::ResourceExt;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;

const MINUTE: Duration = Duration::from_secs(60);

pub(crate) async fn cloneset_controller(ns: &TestNamespace) -> RunningController {
    let ctl =
        RunningController::start(cloneset_ctl::IDENTITY, &ns.name, "", cloneset_ctl::run).await;
    let probe: CloneSet = serde_saphyr::from_str(&cloneset_yaml("probe", 0)).expect("probe");
    kruise_e2e::wait_webhook_effective(&ns.api(), &probe, |cs: &CloneSet| {
        cs.spec.revision_history_limit.is_some()
    })
    .await;
    ctl
}

pub(crate) fn cloneset_yaml(name: &str, replicas: i32) -> String {
    format!(
        r#"apiVersion: apps.kruise.io/v1alpha1
kind: CloneSet
metadata:
  name: {name}
spec:
  replicas: {replicas}
  selector:
    matchLabels:
      app: {name}
  updateStrategy:
    type: InPlaceIfPossible
  template:
    metadata:
      labels:
        app: {name}
    spec:
      containers:
      - name: nginx
        image: nginx:alpine
"#
    )
}

/// The CloneSet's active Pods: name -> (UID, image).
async fn pods(ns: &TestNamespace, app: &str) -> BTreeMap<String, (String, String)> {
    ns.api::<Pod>()
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .expect("list pods")
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| {
            let image = p
                .spec
                .as_ref()
                .and_then(|s| s.containers[0].image.clone())
                .unwrap_or_default();
            (p.name_any(), (p.uid().unwrap_or_default(), image))
        })
        .collect()
}

pub(crate) async fn run(ns: &TestNamespace, args: &[&str]) -> String {
    kubectl_kruise(&ns.name, args)
        .await
        .unwrap_or_else(|e| panic!("kubectl kruise {}: {e}", args.join(" ")))
}

pub(crate) async fn refused(ns: &TestNamespace, args: &[&str]) -> String {
    match kubectl_kruise(&ns.name, args).await {
        Ok(out) => panic!(
            "kubectl kruise {} should fail, printed {out}",
            args.join(" ")
        ),
        Err(e) => e,
    }
}

async fn set_partition(ns: &TestNamespace, name: &str, partition: i32) {
    ns.api::<CloneSet>()
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"updateStrategy": {"partition": partition}}})),
        )
        .await
        .expect("set partition");
}

#[tokio::test]
async fn kubectl_kruise_follows_an_in_place_rollout_and_rolls_it_back() {
    let ns = TestNamespace::new("cli-rollout").await;
    let _ctl = cloneset_controller(&ns).await;
    ns.apply(&cloneset_yaml("web", 3)).await.expect("apply");

    let out = run(&ns, &["rollout", "status", "cloneset/web", "--timeout=2m"]).await;
    let last = out.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("CloneSet rolling update complete 3 pods at revision web-"),
        "{out}"
    );
    let before = pods(&ns, "web").await;
    assert_eq!(before.len(), 3);

    // Partition 3: the new image reaches no Pod; partition 1: two of three, in place.
    set_partition(&ns, "web", 3).await;
    let out = run(&ns, &["set", "image", "cloneset/web", "nginx=nginx:1.7.9"]).await;
    assert_eq!(out, "cloneset.apps.kruise.io/web image updated\n");
    let out = run(
        &ns,
        &["rollout", "status", "cloneset", "web", "--timeout=1m"],
    )
    .await;
    assert!(
        out.ends_with("partitioned roll out complete: 0 new pods have been updated...\n"),
        "{out}"
    );
    set_partition(&ns, "web", 1).await;
    let out = run(&ns, &["rollout", "status", "cloneset/web", "--timeout=2m"]).await;
    assert!(
        out.ends_with("partitioned roll out complete: 2 new pods have been updated...\n"),
        "{out}"
    );
    let now = pods(&ns, "web").await;
    assert_eq!(
        now.values()
            .filter(|(_, image)| image == "nginx:1.7.9")
            .count(),
        2,
        "{now:?}"
    );

    // Paused: the last Pod waits, and status says so.
    let out = run(&ns, &["rollout", "pause", "cloneset/web"]).await;
    assert_eq!(out, "cloneset.apps.kruise.io/web paused\n");
    let again = refused(&ns, &["rollout", "pause", "cloneset/web"]).await;
    assert!(
        again.ends_with("clonesets.apps.kruise.io \"web\" is already paused"),
        "{again}"
    );
    set_partition(&ns, "web", 0).await;
    let out = wait_for("status to say the paused rollout", MINUTE, || async {
        let out = run(&ns, &["rollout", "status", "cloneset/web", "--watch=false"]).await;
        if out.contains("2 out of 3 new pods have been updated... (the rollout is paused") {
            Ok(out)
        } else {
            Err(out)
        }
    })
    .await;
    assert!(
        out.starts_with("Waiting for CloneSet rollout to finish"),
        "{out}"
    );
    let err = refused(&ns, &["rollout", "status", "cloneset/web", "--timeout=2s"]).await;
    assert!(
        err.ends_with("error: timed out waiting for the rollout of cloneset.apps.kruise.io/web"),
        "{err}"
    );
    assert_eq!(
        run(&ns, &["rollout", "resume", "cloneset/web"]).await,
        "cloneset.apps.kruise.io/web resumed\n"
    );
    let out = run(&ns, &["rollout", "status", "cloneset/web", "--timeout=2m"]).await;
    assert!(
        out.lines()
            .last()
            .unwrap_or_default()
            .starts_with("CloneSet rolling update complete 3 pods"),
        "{out}"
    );
    let after = pods(&ns, "web").await;
    assert_eq!(
        after
            .iter()
            .map(|(n, (uid, _))| (n.clone(), uid.clone()))
            .collect::<Vec<_>>(),
        before
            .iter()
            .map(|(n, (uid, _))| (n.clone(), uid.clone()))
            .collect::<Vec<_>>(),
        "updated in place: same Pods"
    );
    assert!(
        after.values().all(|(_, image)| image == "nginx:1.7.9"),
        "{after:?}"
    );

    // History: two revisions; undo goes back to the first, in place again.
    let out = run(&ns, &["rollout", "history", "cloneset/web"]).await;
    assert_eq!(
        out,
        "cloneset.apps.kruise.io/web\nREVISION  CHANGE-CAUSE\n1         <none>\n2         <none>\n\n"
    );
    let out = run(&ns, &["rollout", "history", "cloneset/web", "--revision=1"]).await;
    assert!(
        out.starts_with("cloneset.apps.kruise.io/web with revision #1\nPod Template:\n"),
        "{out}"
    );
    assert!(out.contains("image: nginx:alpine"), "{out}");
    let err = refused(&ns, &["rollout", "undo", "cloneset/web", "--to-revision=9"]).await;
    assert!(
        err.ends_with("unable to find specified revision 9 in history"),
        "{err}"
    );
    let out = run(
        &ns,
        &[
            "rollout",
            "undo",
            "cloneset/web",
            "--dry-run=client",
            "-o",
            "json",
        ],
    )
    .await;
    let dry: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(
        dry["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:alpine"
    );
    let cs: CloneSet = ns.api().get("web").await.unwrap();
    assert_eq!(
        cs.spec.template.spec.as_ref().unwrap().containers[0]
            .image
            .as_deref(),
        Some("nginx:1.7.9"),
        "a client dry run sends nothing"
    );
    assert_eq!(
        run(&ns, &["rollout", "undo", "cloneset/web"]).await,
        "cloneset.apps.kruise.io/web rolled back\n"
    );
    run(&ns, &["rollout", "status", "cloneset/web", "--timeout=2m"]).await;
    let back = pods(&ns, "web").await;
    assert!(
        back.values().all(|(_, image)| image == "nginx:alpine"),
        "{back:?}"
    );
    assert_eq!(
        back.keys().collect::<Vec<_>>(),
        before.keys().collect::<Vec<_>>()
    );
    assert_eq!(
        run(&ns, &["rollout", "undo", "cloneset/web", "--to-revision=3"]).await,
        "cloneset.apps.kruise.io/web skipped rollback (current template already matches revision 3)\n"
    );
}

#[tokio::test]
async fn kubectl_kruise_scales_with_chosen_pods_and_restarts() {
    let ns = TestNamespace::new("cli-scale").await;
    let _ctl = cloneset_controller(&ns).await;
    ns.apply(&cloneset_yaml("app", 3)).await.expect("apply");
    run(&ns, &["rollout", "status", "cloneset/app", "--timeout=2m"]).await;
    let before = pods(&ns, "app").await;
    let chosen = before.keys().nth(1).unwrap().clone();

    let err = refused(
        &ns,
        &["scale", "cloneset/app", "--replicas=2", "--pods=not-a-pod"],
    )
    .await;
    assert!(
        err.ends_with("pod \"not-a-pod\" is not a Pod of cloneset.apps.kruise.io/app"),
        "{err}"
    );
    let out = run(
        &ns,
        &["scaledown", "cloneset/app", &format!("--pods={chosen}")],
    )
    .await;
    assert_eq!(out, "cloneset.apps.kruise.io/app scaled down\n");
    let left = wait_for("the chosen Pod to go", MINUTE, || async {
        let now = pods(&ns, "app").await;
        if now.len() == 2 && !now.contains_key(&chosen) {
            Ok(now)
        } else {
            Err(format!("{now:?}"))
        }
    })
    .await;
    assert!(
        left.keys().all(|k| before.contains_key(k)),
        "only the chosen Pod went"
    );
    let cs: CloneSet = ns.api().get("app").await.unwrap();
    assert_eq!(cs.spec.replicas, Some(2));

    let out = run(
        &ns,
        &["scale", "cloneset/app", "--replicas=3", "-o", "name"],
    )
    .await;
    assert_eq!(out, "cloneset.apps.kruise.io/app\n");
    let out = run(
        &ns,
        &["scale", "cloneset/app", "--replicas=1", "--dry-run=server"],
    )
    .await;
    assert_eq!(out, "cloneset.apps.kruise.io/app scaled (server dry run)\n");
    let cs: CloneSet = ns.api().get("app").await.unwrap();
    assert_eq!(cs.spec.replicas, Some(3), "a server dry run stores nothing");

    let out = run(&ns, &["rollout", "restart", "cloneset/app"]).await;
    assert_eq!(out, "cloneset.apps.kruise.io/app restarted\n");
    let cs: CloneSet = ns.api().get("app").await.unwrap();
    let annotations = cs
        .spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.annotations.clone())
        .unwrap_or_default();
    assert!(
        annotations.contains_key("kubectl.kubernetes.io/restartedAt"),
        "{annotations:?}"
    );
    // Only metadata changed: the restart goes in place, the Pods stay.
    run(&ns, &["rollout", "status", "cloneset/app", "--timeout=2m"]).await;
    let after = pods(&ns, "app").await;
    assert_eq!(after.len(), 3);

    // set env / resources / serviceaccount: the template, as kubectl set would change it.
    let out = run(
        &ns,
        &["set", "env", "cloneset/app", "-c", "nginx", "LOG=debug"],
    )
    .await;
    assert_eq!(out, "cloneset.apps.kruise.io/app env updated\n");
    let out = run(
        &ns,
        &[
            "set",
            "resources",
            "cloneset/app",
            "--limits=memory=256Mi",
            "--requests=cpu=50m",
        ],
    )
    .await;
    assert_eq!(
        out,
        "cloneset.apps.kruise.io/app resource requirements updated\n"
    );
    let out = run(&ns, &["set", "sa", "cloneset/app", "default"]).await;
    assert_eq!(out, "cloneset.apps.kruise.io/app serviceaccount updated\n");
    let cs: CloneSet = ns.api().get("app").await.unwrap();
    let spec = cs.spec.template.spec.as_ref().unwrap();
    let nginx = &spec.containers[0];
    assert_eq!(
        serde_json::to_value(&nginx.env).unwrap(),
        json!([{"name": "LOG", "value": "debug"}])
    );
    let resources = serde_json::to_value(&nginx.resources).unwrap();
    assert_eq!(
        resources,
        json!({"limits": {"memory": "256Mi"}, "requests": {"cpu": "50m"}})
    );
    assert_eq!(spec.service_account_name.as_deref(), Some("default"));
    run(&ns, &["rollout", "status", "cloneset/app", "--timeout=2m"]).await;

    // create job --from: a Job owned by the AdvancedCronJob, marked as started by hand.
    ns.apply(
        r#"apiVersion: apps.kruise.io/v1alpha1
kind: AdvancedCronJob
metadata:
  name: nightly
spec:
  schedule: "0 3 * * *"
  template:
    jobTemplate:
      metadata:
        labels: {team: cli}
      spec:
        template:
          spec:
            restartPolicy: Never
            containers:
            - name: main
              image: busybox
"#,
    )
    .await
    .expect("apply the AdvancedCronJob");
    let out = run(
        &ns,
        &[
            "create",
            "job",
            "nightly-now",
            "--from=advancedcronjob/nightly",
        ],
    )
    .await;
    assert_eq!(out, "job.batch/nightly-now created\n");
    let job: k8s_openapi::api::batch::v1::Job = ns.api().get("nightly-now").await.unwrap();
    assert_eq!(
        job.annotations()
            .get("cronjob.kubernetes.io/instantiate")
            .map(String::as_str),
        Some("manual")
    );
    assert_eq!(job.labels().get("team").map(String::as_str), Some("cli"));
    let owner = &job.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("AdvancedCronJob", "nightly")
    );
    let err = refused(&ns, &["create", "job", "x", "--from=cloneset/app"]).await;
    assert!(
        err.ends_with("--from must be an advancedcronjob, not clonesets.apps.kruise.io"),
        "{err}"
    );

    // Errors a user sees.
    let err = refused(&ns, &["rollout", "status", "statefulset/x"]).await;
    assert!(
        err.contains("doesn't have a resource type \"statefulset\""),
        "{err}"
    );
    let err = refused(&ns, &["rollout", "history", "cloneset/missing"]).await;
    assert!(
        err.ends_with(
            "Error from server (NotFound): clonesets.apps.kruise.io \"missing\" not found"
        ),
        "{err}"
    );
    let err = refused(&ns, &["set", "image", "cloneset/app", "nope=busybox"]).await;
    assert!(
        err.ends_with("unable to find container named \"nope\""),
        "{err}"
    );
    let crr = run(
        &ns,
        &[
            "create",
            "crr",
            "r1",
            &format!("--pod={}", pods(&ns, "app").await.keys().next().unwrap()),
            "--dry-run=client",
            "-o",
            "yaml",
        ],
    )
    .await;
    assert!(
        crr.contains("kind: ContainerRecreateRequest") && crr.contains("failurePolicy: Fail"),
        "{crr}"
    );
    let help = kubectl_kruise(&ns.name, &["rollout", "status", "--help"])
        .await
        .unwrap_err();
    assert!(
        help.contains("kubectl kruise rollout status cloneset/sample"),
        "{help}"
    );
}
