//! `kubectl kruise`: the kubectl plugin OpenKruise users drive rollouts with
//! (openkruise/kruise-tools), for the workloads of this project. Commands, flags and
//! messages follow kruise-tools' where it has the same command; docs/kubectl-kruise.md
//! lists every difference.
//!
//! The decisions (what a rollout's state is, which patch a command sends) are pure
//! functions in [`status`], [`revisions`] and [`edits`]; [`run`] reads the objects, sends
//! the patches and prints.

pub mod broadcastjob;
pub mod duration;
pub mod edits;
pub mod error;
pub mod expose;
pub mod kruise_rollout;
pub mod migrate;
pub mod restart;
pub mod revisions;
pub mod status;
pub mod target;

use std::io::Write;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand, ValueEnum};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, Config};
use serde_json::Value;

pub use error::{Error, Result};
use target::{Kind, Target, parse_targets};

/// The field manager of every write, as kubectl names its own (`kubectl-rollout`, …).
const FIELD_MANAGER: &str = "kubectl-kruise";

#[derive(Debug, Parser)]
#[command(
    name = "kubectl-kruise",
    bin_name = "kubectl kruise",
    version,
    about = "Manage OpenKruise workloads: rollouts, images, scaling, container restarts",
    long_about = "kubectl kruise drives the rollouts of CloneSet, Advanced StatefulSet, Advanced \
DaemonSet and UnitedDeployment, which `kubectl rollout` does not know, with the commands and \
flags of OpenKruise's kruise-tools.\n\nInstalled as `kubectl-kruise` on the PATH, kubectl runs it \
as `kubectl kruise`."
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

/// kubectl's connection flags.
#[derive(Debug, Args, Clone, Default)]
pub struct Global {
    /// Path to the kubeconfig file to use (default: $KUBECONFIG, then ~/.kube/config, then
    /// the in-cluster service account).
    #[arg(long, global = true, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// The name of the kubeconfig context to use.
    #[arg(long, global = true)]
    pub context: Option<String>,
    /// The namespace of the request (default: the context's).
    #[arg(short = 'n', long, global = true)]
    pub namespace: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Manage the rollout of a workload.
    #[command(subcommand)]
    Rollout(RolloutCommand),
    /// Update fields of a workload's Pod template.
    #[command(subcommand)]
    Set(SetCommand),
    /// Set a new size for a CloneSet, Advanced StatefulSet, UnitedDeployment or Deployment.
    #[command(after_help = "Examples:\n  # Scale the CloneSet sample to 3 Pods\n  \
kubectl kruise scale --replicas=3 cloneset/sample\n\n  # Scale it to 2, removing the Pods \
sample-abcde and sample-fghij first\n  kubectl kruise scale --replicas=2 cloneset/sample \
--pods=sample-abcde,sample-fghij")]
    Scale(ScaleArgs),
    /// Scale a CloneSet down by removing the Pods named (kruise-tools' `scaledown`).
    #[command(
        after_help = "Examples:\n  # Remove two chosen Pods of cloneset-demo (replicas \
goes down by 2)\n  kubectl kruise scaledown cloneset/cloneset-demo --pods=pod-1,pod-2 -n default"
    )]
    Scaledown(ScaledownArgs),
    /// Create a resource.
    #[command(subcommand)]
    Create(CreateCommand),
    /// Move a Deployment's Pods to a CloneSet, a few at a time, keeping them available.
    #[command(
        override_usage = "kubectl kruise migrate CloneSet --from Deployment --src-name NAME [--dst-name NAME] [--create [--copy]] [--replicas N] [--max-surge N] [--timeout-seconds S]",
        long_about = "Migrate from K8s original workloads to Kruise workloads: with --create, \
create a CloneSet from a Deployment (same selector, template and update limits; 0 replicas, \
or the Deployment's with --copy); without, move the Deployment's replicas to that CloneSet.",
        after_help = migrate::HELP
    )]
    Migrate(MigrateArgs),
    /// Expose a workload, Pod or Service as a new Service selecting its Pods.
    #[command(
        after_help = "Takes the Pod selector of a CloneSet, Advanced StatefulSet, \
Advanced DaemonSet, UnitedDeployment, Deployment, ReplicaSet or ReplicationController (only \
matchLabels: a Service selector holds no expressions), a Pod's labels or a Service's selector. \
Without --port, every container port is reused (named port-1, port-2… when several); without \
--labels, the object's labels.\n\nExamples:\n  # A Service on port 80 for the Pods of the \
CloneSet nginx, to their port 8000\n  kubectl kruise expose cloneset nginx --port=80 \
--target-port=8000\n\n  # A NodePort Service named web-np for an Advanced StatefulSet\n  \
kubectl kruise expose asts/web --port=443 --type=NodePort --name=web-np\n\n  # Print the \
Service, create nothing\n  kubectl kruise expose deployment api --port=8080 --dry-run=client -o yaml"
    )]
    Expose(ExposeArgs),
    /// Show details of a resource.
    #[command(subcommand)]
    Describe(DescribeCommand),
    /// Restart containers in place.
    #[command(subcommand)]
    Restart(RestartCommand),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    #[command(
        after_help = "Examples:\n  # bash, for the current shell\n  source <(kubectl-kruise completion bash)"
    )]
    Completion { shell: clap_complete::Shell },
}

#[derive(Debug, Subcommand)]
pub enum RolloutCommand {
    /// Watch a rollout until it completes.
    #[command(after_help = "Examples:\n  # Watch the rollout of a CloneSet\n  \
kubectl kruise rollout status cloneset/sample\n\n  # Look once, without waiting\n  \
kubectl kruise rollout status asts/web --watch=false\n\n  # Give up (exit 1) after 5 minutes\n  \
kubectl kruise rollout status cloneset/sample --timeout=5m")]
    Status(StatusArgs),
    /// List a workload's revisions, or show one.
    #[command(after_help = "Examples:\n  # The revisions of a CloneSet\n  \
kubectl kruise rollout history cloneset/sample\n\n  # The Pod template of revision 3\n  \
kubectl kruise rollout history cloneset/sample --revision=3")]
    History(HistoryArgs),
    /// Roll a workload back to an earlier revision.
    #[command(after_help = "Examples:\n  # Back to the previous revision\n  \
kubectl kruise rollout undo cloneset/sample\n\n  # Back to revision 3, showing what would change\n  \
kubectl kruise rollout undo asts/web --to-revision=3 --dry-run=server -o yaml")]
    Undo(UndoArgs),
    /// Pause a rollout: no more Pods are updated until it is resumed.
    #[command(after_help = "Examples:\n  kubectl kruise rollout pause cloneset/sample")]
    Pause(MutateArgs),
    /// Resume a paused rollout.
    #[command(after_help = "Examples:\n  kubectl kruise rollout resume cloneset/sample")]
    Resume(MutateArgs),
    /// Restart a workload's Pods (a new template annotation: a new revision, rolled out
    /// as the update strategy says).
    #[command(after_help = "Examples:\n  kubectl kruise rollout restart cloneset/sample")]
    Restart(MutateArgs),
    /// Approve a Kruise Rollout paused at a step: the rollout goes on to the next batch.
    #[command(
        long_about = "Approve a Kruise Rollout (rollouts.rollouts.kruise.io) whose current \
canary or blue-green step waits for an approval (currentStepState StepPaused): its status \
subresource gets currentStepState StepReady and Kruise Rollout goes on to the next step. \
Only Rollouts can be approved.",
        after_help = "Examples:\n  # Approve the Rollout rollout-demo in the namespace ns-demo\n  \
kubectl kruise rollout approve rollout/rollout-demo -n ns-demo"
    )]
    Approve(MutateArgs),
}

#[derive(Debug, Subcommand)]
pub enum DescribeCommand {
    /// Show a Kruise Rollout: its status, steps (the current one marked), workload,
    /// revisions and the Pods of the current batch.
    #[command(
        visible_aliases = ["rollouts", "ro"],
        after_help = "Examples:\n  # Describe the Rollout rollout-demo in the namespace default\n  \
kubectl kruise describe rollout rollout-demo -n default\n\n  # With every Pod of the new \
revision, not only the current batch's\n  kubectl kruise describe rollout rollout-demo --all\n\n  \
# Print it again at each change of the Rollout, for 10 minutes\n  \
kubectl kruise describe rollout rollout-demo -w --timeout=600"
    )]
    Rollout(DescribeRolloutArgs),
}

#[derive(Debug, Args)]
pub struct DescribeRolloutArgs {
    /// The Rollout's name (or rollout/NAME).
    pub name: String,
    /// List every Pod of the new revision (default: the current batch's).
    #[arg(long)]
    pub all: bool,
    /// Print without colors (the current step and the status marks are colored).
    #[arg(long)]
    pub no_color: bool,
    /// Print the page again each time the Rollout changes.
    #[arg(short = 'w', long)]
    pub watch: bool,
    /// With --watch: stop after this many seconds (0: never).
    #[arg(long, default_value_t = 0)]
    pub timeout: u64,
}

#[derive(Debug, Subcommand)]
pub enum SetCommand {
    /// Update container images of a workload's Pod template.
    #[command(
        after_help = "Examples:\n  # Set the nginx container's image of the CloneSet sample\n  \
kubectl kruise set image cloneset/sample nginx=nginx:1.25\n\n  # Every container of an Advanced \
DaemonSet\n  kubectl kruise set image ads/agent '*=busybox:1.36'"
    )]
    Image(SetImageArgs),
    /// Set or remove environment variables of a workload's containers.
    #[command(
        after_help = "Examples:\n  # Set LOG_LEVEL and remove DEBUG in every container of the CloneSet sample\n  \
kubectl kruise set env cloneset/sample LOG_LEVEL=info DEBUG-\n\n  # Only the nginx container\n  \
kubectl kruise set env cloneset/sample -c nginx LOG_LEVEL=debug"
    )]
    Env(SetEnvArgs),
    /// Set resource limits and requests of a workload's containers.
    #[command(
        after_help = "Examples:\n  kubectl kruise set resources cloneset/sample -c nginx \
--limits=cpu=200m,memory=512Mi --requests=cpu=100m,memory=256Mi"
    )]
    Resources(SetResourcesArgs),
    /// Set the service account of a workload's Pods.
    #[command(
        visible_alias = "sa",
        after_help = "Examples:\n  kubectl kruise set serviceaccount cloneset/sample builder"
    )]
    Serviceaccount(SetServiceAccountArgs),
}

#[derive(Debug, Subcommand)]
pub enum CreateCommand {
    /// Create a ContainerRecreateRequest: restart containers of a running Pod in place.
    #[command(
        name = "ContainerRecreateRequest",
        visible_aliases = ["containerrecreaterequest", "crr"],
        after_help = "Defaults (kruise-tools'): strategy.failurePolicy Fail, orderedRecreate false, \
unreadyGracePeriodSeconds 3, activeDeadlineSeconds 300, ttlSecondsAfterFinished 1800.\n\n\
Examples:\n  # Restart every container of pod-1\n  kubectl kruise create ContainerRecreateRequest \
my-crr --pod=pod-1\n\n  # Restart container-1 and wait until it is running again\n  \
kubectl kruise create crr my-crr --pod=pod-1 --containers=container-1 --wait"
    )]
    ContainerRecreateRequest(CrrArgs),
    /// Create a Job (or a BroadcastJob) from an AdvancedCronJob's template, now.
    #[command(
        after_help = "Examples:\n  # Run the AdvancedCronJob nightly once, now\n  \
kubectl kruise create job nightly-manual --from=advancedcronjob/nightly"
    )]
    Job(CreateJobArgs),
    /// Create a BroadcastJob: an image run once on every node, or an AdvancedCronJob's
    /// BroadcastJob template, now.
    #[command(
        name = "broadcastJob",
        visible_aliases = ["broadcastjob", "bcj"],
        after_help = "Examples:\n  # Run busybox's date once on every node\n  \
kubectl kruise create broadcastJob my-bcj --image=busybox -- date\n\n  # Run the BroadcastJob \
template of the AdvancedCronJob nightly once, now\n  \
kubectl kruise create broadcastJob nightly-now --from=advancedcronjob/nightly"
    )]
    BroadcastJob(CreateBroadcastJobArgs),
}

#[derive(Debug, Subcommand)]
pub enum RestartCommand {
    /// Restart containers of a running Pod in place (a ContainerRecreateRequest named
    /// `POD-restart-<unix time in hex>`, owned by the Pod), and wait until they run again.
    #[command(
        after_help = "Examples:\n  # Restart every container of web-0 and wait (2 minutes at most)\n  \
kubectl kruise restart container web-0\n\n  # Only app and sidecar, without waiting\n  \
kubectl kruise restart container web-0 app sidecar --wait=false\n\n  # Keep the Pod not ready \
10s before the stop, count a container as recreated once it ran 5s\n  \
kubectl kruise restart container web-0 app -u 10 -m 5"
    )]
    Container(RestartContainerArgs),
}

/// The output flags of a mutating command.
#[derive(Debug, Args, Clone, Default)]
pub struct OutputArgs {
    /// Output format: name, json or yaml (default: a sentence).
    #[arg(short = 'o', long, value_enum)]
    pub output: Option<Output>,
    /// none: send; client: print what would be sent, send nothing; server: the API server
    /// checks and answers without storing.
    #[arg(long, value_enum, default_value_t = DryRun::None, num_args = 0..=1, require_equals = true, default_missing_value = "client")]
    pub dry_run: DryRun,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Name,
    Json,
    Yaml,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum DryRun {
    #[default]
    None,
    Client,
    Server,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// TYPE/NAME or TYPE NAME.
    #[arg(required = true, num_args = 1..)]
    pub resource: Vec<String>,
    /// Watch until the rollout is done (false: look once).
    #[arg(short = 'w', long, default_value_t = true, action = clap::ArgAction::Set)]
    pub watch: bool,
    /// Give up after this long (0: never), e.g. 30s, 5m, 1h.
    #[arg(long, default_value = "0")]
    pub timeout: String,
}

#[derive(Debug, Args)]
pub struct HistoryArgs {
    #[arg(required = true, num_args = 1..)]
    pub resource: Vec<String>,
    /// Show this revision's Pod template.
    #[arg(long, default_value_t = 0)]
    pub revision: i64,
}

#[derive(Debug, Args)]
pub struct UndoArgs {
    #[arg(required = true, num_args = 1..)]
    pub resource: Vec<String>,
    /// The revision to roll back to (0: the previous one).
    #[arg(long, default_value_t = 0)]
    pub to_revision: i64,
    #[command(flatten)]
    pub out: OutputArgs,
}

#[derive(Debug, Args)]
pub struct MutateArgs {
    #[arg(required = true, num_args = 1..)]
    pub resource: Vec<String>,
    #[command(flatten)]
    pub out: OutputArgs,
}

#[derive(Debug, Args)]
pub struct SetImageArgs {
    /// TYPE/NAME (or TYPE NAME), then CONTAINER=IMAGE pairs.
    #[arg(required = true, num_args = 1..)]
    pub args: Vec<String>,
    #[command(flatten)]
    pub out: OutputArgs,
}

#[derive(Debug, Args)]
pub struct SetEnvArgs {
    /// TYPE/NAME (or TYPE NAME), then KEY=VALUE to set and KEY- to remove.
    #[arg(required = true, num_args = 1..)]
    pub args: Vec<String>,
    /// The container to change (`*`: every container).
    #[arg(short = 'c', long, default_value = "*")]
    pub containers: String,
    #[command(flatten)]
    pub out: OutputArgs,
}

#[derive(Debug, Args)]
pub struct SetResourcesArgs {
    #[arg(required = true, num_args = 1..)]
    pub resource: Vec<String>,
    /// Limits, e.g. cpu=200m,memory=512Mi.
    #[arg(long, default_value = "")]
    pub limits: String,
    /// Requests, e.g. cpu=100m,memory=256Mi.
    #[arg(long, default_value = "")]
    pub requests: String,
    /// The container to change (`*`: every container).
    #[arg(short = 'c', long, default_value = "*")]
    pub containers: String,
    #[command(flatten)]
    pub out: OutputArgs,
}

#[derive(Debug, Args)]
pub struct SetServiceAccountArgs {
    /// TYPE/NAME (or TYPE NAME), then the service account.
    #[arg(required = true, num_args = 1..)]
    pub args: Vec<String>,
    #[command(flatten)]
    pub out: OutputArgs,
}

#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// The kind to migrate to: CloneSet.
    pub kind: String,
    /// Type of the source workload: Deployment.
    #[arg(long, required = true)]
    pub from: String,
    /// Name of the source workload.
    #[arg(long, required = true)]
    pub src_name: String,
    /// Name of the destination workload (default: --src-name).
    #[arg(long)]
    pub dst_name: Option<String>,
    /// Create the destination workload from the source, with 0 replicas; migrate nothing.
    #[arg(long)]
    pub create: bool,
    /// With --create: the source's replicas instead of 0.
    #[arg(long, requires = "create")]
    pub copy: bool,
    /// The replicas to migrate; -1: all of the source's.
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub replicas: i64,
    /// At most this many Pods above the start's during the migration.
    #[arg(long, default_value_t = 1)]
    pub max_surge: i64,
    /// Give up after this many seconds; -1: no limit.
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub timeout_seconds: i64,
}

#[derive(Debug, Args)]
pub struct ExposeArgs {
    /// TYPE NAME or TYPE/NAME.
    #[arg(required = true, num_args = 1..=2)]
    pub resource: Vec<String>,
    /// The port the Service serves on (default: the Pods' container ports).
    #[arg(long)]
    pub port: Option<i32>,
    /// The container port (number or name) the Service sends to (default: --port).
    #[arg(long)]
    pub target_port: Option<String>,
    /// The Service's name (default: the object's).
    #[arg(long)]
    pub name: Option<String>,
    /// The Service type (default: ClusterIP).
    #[arg(long = "type", value_enum, ignore_case = true)]
    pub service_type: Option<expose::ServiceType>,
    /// The protocol of the ports (default: the container port's, else TCP).
    #[arg(long, value_enum, ignore_case = true)]
    pub protocol: Option<expose::Protocol>,
    /// The Service's selector, key=value[,key=value] (default: the object's).
    #[arg(long)]
    pub selector: Option<String>,
    /// The Service's labels, key=value[,key=value] (default: the object's).
    #[arg(short = 'l', long)]
    pub labels: Option<String>,
    #[command(flatten)]
    pub out: OutputArgs,
}

#[derive(Debug, Args)]
pub struct CreateJobArgs {
    /// The new Job's name.
    pub name: String,
    /// The AdvancedCronJob to take the template of: advancedcronjob/NAME.
    #[arg(long, required = true)]
    pub from: String,
    #[command(flatten)]
    pub out: OutputArgs,
}

#[derive(Debug, Args)]
pub struct CreateBroadcastJobArgs {
    /// The new BroadcastJob's name (also its container's, with --image).
    pub name: String,
    /// The image to run on every node.
    #[arg(long, required_unless_present = "from", conflicts_with = "from")]
    pub image: Option<String>,
    /// The AdvancedCronJob to take the BroadcastJob template of: advancedcronjob/NAME.
    #[arg(long)]
    pub from: Option<String>,
    /// With --image: the container's command and arguments, after `--`.
    #[arg(last = true, conflicts_with = "from")]
    pub command: Vec<String>,
    #[command(flatten)]
    pub out: OutputArgs,
}

#[derive(Debug, Args)]
pub struct ScaleArgs {
    #[arg(required = true, num_args = 1..)]
    pub resource: Vec<String>,
    /// The new number of replicas.
    #[arg(long, required = true)]
    pub replicas: i64,
    /// CloneSet only: the Pods to remove first (its scaleStrategy.podsToDelete).
    #[arg(long, value_delimiter = ',')]
    pub pods: Vec<String>,
    #[command(flatten)]
    pub out: OutputArgs,
}

#[derive(Debug, Args)]
pub struct ScaledownArgs {
    #[arg(required = true, num_args = 1..)]
    pub resource: Vec<String>,
    /// The Pods to remove, comma separated.
    #[arg(long, required = true, value_delimiter = ',')]
    pub pods: Vec<String>,
    #[command(flatten)]
    pub out: OutputArgs,
}

#[derive(Debug, Args)]
pub struct CrrArgs {
    /// The ContainerRecreateRequest's name.
    pub name: String,
    /// The Pod whose containers to recreate.
    #[arg(short = 'p', long)]
    pub pod: String,
    /// The containers to recreate (default: all of the Pod's).
    #[arg(long, value_delimiter = ',')]
    pub containers: Vec<String>,
    #[command(flatten)]
    pub timing: CrrTiming,
    /// Wait until the request completes; exit 1 if a container was not recreated.
    #[arg(long)]
    pub wait: bool,
    /// With --wait: give up after this long (0: never).
    #[arg(long, default_value = "0")]
    pub timeout: String,
    #[command(flatten)]
    pub out: OutputArgs,
}

/// The timing of a ContainerRecreateRequest's strategy, with kruise-tools' flag names and
/// defaults (`create containerrecreaterequest`, `restart container`).
#[derive(Debug, Args, Clone, PartialEq, Eq)]
pub struct CrrTiming {
    /// Seconds the Pod is kept not ready before its containers are stopped.
    #[arg(short = 'u', long = "unreadyGracePeriodSeconds", default_value_t = 3)]
    pub unready_grace_period_seconds: i64,
    /// Overrides the Pod's terminationGracePeriodSeconds for the stop.
    #[arg(long = "terminationGracePeriodSeconds")]
    pub termination_grace_period_seconds: Option<i64>,
    /// Seconds a new container must run to count as recreated.
    #[arg(short = 'm', long = "minStartedSeconds", default_value_t = 0)]
    pub min_started_seconds: i64,
}

#[derive(Debug, Args)]
pub struct RestartContainerArgs {
    /// The Pod whose containers to restart.
    pub pod: String,
    /// The containers to restart (none: all of the Pod's).
    pub containers: Vec<String>,
    #[command(flatten)]
    pub timing: CrrTiming,
    /// Wait until the request completes (--wait=false: create it and return).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1,
          require_equals = true, default_missing_value = "true")]
    pub wait: bool,
    /// Give up waiting after this long (0: never), e.g. 30s, 5m.
    #[arg(long, default_value = "2m")]
    pub timeout: String,
    #[command(flatten)]
    pub out: OutputArgs,
}

/// A connection to the cluster and the namespace of the request.
pub struct Session {
    pub client: Client,
    pub namespace: String,
    /// The Rollout version the server serves, once discovered.
    rollout: OnceLock<ApiResource>,
}

impl Session {
    pub async fn connect(global: &Global) -> Result<Session> {
        let options = KubeConfigOptions {
            context: global.context.clone(),
            ..Default::default()
        };
        let config = match &global.kubeconfig {
            Some(path) => {
                let kubeconfig = Kubeconfig::read_from(path)
                    .map_err(|e| Error::Config(format!("{}: {e}", path.display())))?;
                Config::from_custom_kubeconfig(kubeconfig, &options)
                    .await
                    .map_err(|e| Error::Config(e.to_string()))?
            }
            None => match Config::from_kubeconfig(&options).await {
                Ok(config) => config,
                Err(kubeconfig) => Config::incluster().map_err(|incluster| {
                    Error::Config(format!(
                        "no kubeconfig ({kubeconfig}) and not in a cluster ({incluster})"
                    ))
                })?,
            },
        };
        let namespace = global
            .namespace
            .clone()
            .unwrap_or_else(|| config.default_namespace.clone());
        let client = Client::try_from(config)?;
        Ok(Session {
            client,
            namespace,
            rollout: OnceLock::new(),
        })
    }

    /// The kind's resource. Kruise Rollout's version is read from discovery (v1beta1, or
    /// v1alpha1 on a server with an older Kruise Rollout), as kubectl resolves `rollout`.
    async fn resource(&self, kind: Kind) -> Result<ApiResource> {
        if kind != Kind::Rollout {
            return Ok(kind.api_resource());
        }
        if let Some(ar) = self.rollout.get() {
            return Ok(ar.clone());
        }
        let groups = self.client.list_api_groups().await?;
        let served = groups
            .groups
            .iter()
            .filter(|g| g.name == target::ROLLOUTS_GROUP)
            .flat_map(|g| g.versions.iter().map(|v| v.version.as_str()));
        let version = target::rollout_version(served).ok_or_else(|| {
            Error::Usage(
                "the server doesn't have a resource type \"rollouts\" (Kruise Rollout, \
rollouts.kruise.io, is not installed)"
                    .into(),
            )
        })?;
        Ok(self
            .rollout
            .get_or_init(|| target::rollout_resource(version))
            .clone())
    }

    async fn api(&self, kind: Kind) -> Result<Api<DynamicObject>> {
        Ok(self.api_for(&self.resource(kind).await?))
    }

    /// The session's namespace of any resource, by its `ApiResource`.
    pub fn api_for(&self, ar: &ApiResource) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), &self.namespace, ar)
    }

    /// The session's namespace of a typed resource.
    pub fn typed<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    async fn get(&self, target: &Target) -> Result<Value> {
        let obj = self.api(target.kind).await?.get(&target.name).await?;
        Ok(serde_json::to_value(obj)?)
    }
}

/// Runs one command; what it prints goes to `out`.
pub async fn run(cli: Cli, out: &mut (dyn Write + Send)) -> Result<()> {
    if let Command::Completion { shell } = cli.command {
        let mut command = <Cli as clap::CommandFactory>::command();
        clap_complete::generate(shell, &mut command, "kubectl-kruise", out);
        return Ok(());
    }
    let session = Session::connect(&cli.global).await?;
    match cli.command {
        Command::Rollout(RolloutCommand::Status(args)) => {
            rollout_status(&session, &args, out).await
        }
        Command::Rollout(RolloutCommand::History(args)) => {
            for target in parse_targets(&args.resource)? {
                rollout_history(&session, &target, args.revision, out).await?;
            }
            Ok(())
        }
        Command::Rollout(RolloutCommand::Undo(args)) => {
            for target in parse_targets(&args.resource)? {
                rollout_undo(&session, &target, args.to_revision, &args.out, out).await?;
            }
            Ok(())
        }
        Command::Rollout(RolloutCommand::Pause(args)) => {
            patch_each(
                &session,
                &args.resource,
                &args.out,
                "paused",
                out,
                |t, obj| Ok(Change::Merge(edits::pause_patch(t, obj, true)?)),
            )
            .await
        }
        Command::Rollout(RolloutCommand::Resume(args)) => {
            patch_each(
                &session,
                &args.resource,
                &args.out,
                "resumed",
                out,
                |t, obj| Ok(Change::Merge(edits::pause_patch(t, obj, false)?)),
            )
            .await
        }
        Command::Rollout(RolloutCommand::Approve(args)) => {
            patch_each(
                &session,
                &args.resource,
                &args.out,
                "approved",
                out,
                |t, obj| Ok(Change::MergeStatus(kruise_rollout::approve_patch(t, obj)?)),
            )
            .await
        }
        Command::Describe(DescribeCommand::Rollout(args)) => {
            describe_rollout(&session, &args, out).await
        }
        Command::Rollout(RolloutCommand::Restart(args)) => {
            let now = jiff::Timestamp::now()
                .strftime("%Y-%m-%dT%H:%M:%SZ")
                .to_string();
            patch_each(
                &session,
                &args.resource,
                &args.out,
                "restarted",
                out,
                |t, _| Ok(Change::Merge(edits::restart_patch(t, &now)?)),
            )
            .await
        }
        Command::Set(SetCommand::Image(args)) => {
            let split = args
                .args
                .iter()
                .position(|a| a.contains('='))
                .ok_or_else(|| {
                    Error::Usage("at least one image update is required: CONTAINER=IMAGE".into())
                })?;
            let images = edits::parse_images(&args.args[split..])?;
            patch_each(
                &session,
                &args.args[..split],
                &args.out,
                "image updated",
                out,
                |t, obj| Ok(Change::Json(edits::set_image_patch(t, obj, &images)?)),
            )
            .await
        }
        Command::Set(SetCommand::Env(args)) => {
            let split = args
                .args
                .iter()
                .position(|a| a.contains('=') || (a.ends_with('-') && !a.contains('/')))
                .ok_or_else(|| Error::Usage("at least one KEY=VALUE or KEY- is required".into()))?;
            let changes = edits::parse_env(&args.args[split..])?;
            patch_each(
                &session,
                &args.args[..split],
                &args.out,
                "env updated",
                out,
                |t, obj| {
                    Ok(Change::Json(edits::set_env_patch(
                        t,
                        obj,
                        &changes,
                        &args.containers,
                    )?))
                },
            )
            .await
        }
        Command::Set(SetCommand::Resources(args)) => {
            let limits = edits::parse_resource_list(&args.limits)?;
            let requests = edits::parse_resource_list(&args.requests)?;
            patch_each(
                &session,
                &args.resource,
                &args.out,
                "resource requirements updated",
                out,
                |t, obj| {
                    Ok(Change::Json(edits::set_resources_patch(
                        t,
                        obj,
                        &limits,
                        &requests,
                        &args.containers,
                    )?))
                },
            )
            .await
        }
        Command::Set(SetCommand::Serviceaccount(args)) => {
            let (account, resources) = match args.args.split_last() {
                Some((account, resources)) if !resources.is_empty() => (account, resources),
                _ => {
                    return Err(Error::Usage(
                        "TYPE/NAME and a service account name are required".into(),
                    ));
                }
            };
            patch_each(
                &session,
                resources,
                &args.out,
                "serviceaccount updated",
                out,
                |t, obj| {
                    Ok(Change::Merge(edits::set_service_account_patch(
                        t, obj, account,
                    )?))
                },
            )
            .await
        }
        Command::Create(CreateCommand::Job(args)) => create_job(&session, &args, out).await,
        Command::Scale(args) => {
            for target in parse_targets(&args.resource)? {
                let obj = session.get(&target).await?;
                if !args.pods.is_empty() {
                    check_pods(&session, &target, &obj, &args.pods).await?;
                }
                let patch = edits::scale_patch(&target, &obj, args.replicas, &args.pods)?;
                send(
                    &session,
                    &target,
                    &obj,
                    Change::Merge(patch),
                    "scaled",
                    &args.out,
                    out,
                )
                .await?;
            }
            Ok(())
        }
        Command::Scaledown(args) => {
            for target in parse_targets(&args.resource)? {
                if target.kind != Kind::CloneSet {
                    return Err(Error::Unsupported {
                        kind: target.kind.resource(),
                        name: target.name,
                        what: "scaledown is for CloneSet".into(),
                    });
                }
                let obj = session.get(&target).await?;
                check_pods(&session, &target, &obj, &args.pods).await?;
                let replicas = obj
                    .pointer("/spec/replicas")
                    .and_then(Value::as_i64)
                    .unwrap_or(1);
                let already: Vec<&str> = obj
                    .pointer("/spec/scaleStrategy/podsToDelete")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                let new = args
                    .pods
                    .iter()
                    .filter(|p| !already.contains(&p.as_str()))
                    .count();
                let replicas = (replicas - i64::try_from(new).unwrap_or(i64::MAX)).max(0);
                let patch = edits::scale_patch(&target, &obj, replicas, &args.pods)?;
                send(
                    &session,
                    &target,
                    &obj,
                    Change::Merge(patch),
                    "scaled down",
                    &args.out,
                    out,
                )
                .await?;
            }
            Ok(())
        }
        Command::Create(CreateCommand::ContainerRecreateRequest(args)) => {
            create_crr(&session, &args, out).await
        }
        Command::Migrate(args) => migrate::run(&session, &args, out).await,
        Command::Expose(args) => expose::run(&session, &args, out).await,
        Command::Create(CreateCommand::BroadcastJob(args)) => {
            create_broadcast_job(&session, &args, out).await
        }
        Command::Restart(RestartCommand::Container(args)) => {
            restart_container(&session, &args, out).await
        }
        Command::Completion { .. } => Ok(()),
    }
}

async fn check_pods(
    session: &Session,
    target: &Target,
    obj: &Value,
    pods: &[String],
) -> Result<()> {
    let uid = obj
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let list = session.typed::<Pod>().list(&ListParams::default()).await?;
    edits::check_pods_owned(target, uid, &list.items, pods)
}

/// For each resource named: read it, compute its change, send it, print the result.
async fn patch_each(
    session: &Session,
    resources: &[String],
    flags: &OutputArgs,
    done: &str,
    out: &mut (dyn Write + Send),
    change: impl Fn(&Target, &Value) -> Result<Change>,
) -> Result<()> {
    for target in parse_targets(resources)? {
        let obj = session.get(&target).await?;
        let change = change(&target, &obj)?;
        send(session, &target, &obj, change, done, flags, out).await?;
    }
    Ok(())
}

/// A change to send.
enum Change {
    Merge(Value),
    Json(Value),
    /// A merge patch of the status subresource.
    MergeStatus(Value),
}

/// Sends `change` (or, with `--dry-run=client`, applies it here) and prints the result.
async fn send(
    session: &Session,
    target: &Target,
    obj: &Value,
    change: Change,
    done: &str,
    flags: &OutputArgs,
    out: &mut (dyn Write + Send),
) -> Result<()> {
    let empty = matches!(&change, Change::Json(Value::Array(ops)) if ops.is_empty());
    let result = if empty {
        obj.clone()
    } else {
        match flags.dry_run {
            DryRun::Client => {
                let mut local = obj.clone();
                match &change {
                    Change::Merge(p) | Change::MergeStatus(p) => json_patch::merge(&mut local, p),
                    Change::Json(p) => {
                        let p: json_patch::Patch = serde_json::from_value(p.clone())?;
                        json_patch::patch(&mut local, &p)?
                    }
                }
                local
            }
            DryRun::None | DryRun::Server => {
                let mut params = PatchParams {
                    field_manager: Some(FIELD_MANAGER.into()),
                    ..Default::default()
                };
                params.dry_run = flags.dry_run == DryRun::Server;
                let api = session.api(target.kind).await?;
                let sent = match change {
                    Change::Merge(p) => api.patch(&target.name, &params, &Patch::Merge(&p)).await?,
                    Change::MergeStatus(p) => {
                        api.patch_status(&target.name, &params, &Patch::Merge(&p))
                            .await?
                    }
                    Change::Json(p) => {
                        let p: json_patch::Patch = serde_json::from_value(p)?;
                        api.patch(&target.name, &params, &Patch::<()>::Json(p))
                            .await?
                    }
                };
                serde_json::to_value(sent)?
            }
        }
    };
    let suffix = match flags.dry_run {
        DryRun::None => "",
        DryRun::Client => " (dry run)",
        DryRun::Server => " (server dry run)",
    };
    let done = if empty {
        format!("{} (no change)", done.split(' ').next().unwrap_or(done))
    } else {
        done.to_string()
    };
    print_object(
        out,
        target,
        &result,
        flags.output,
        &format!("{done}{suffix}"),
    )
}

fn print_object(
    out: &mut (dyn Write + Send),
    target: &Target,
    obj: &Value,
    output: Option<Output>,
    sentence: &str,
) -> Result<()> {
    match output {
        None => writeln!(out, "{} {sentence}", target.reference())?,
        Some(Output::Name) => writeln!(out, "{}", target.reference())?,
        Some(Output::Json) => writeln!(out, "{}", serde_json::to_string_pretty(obj)?)?,
        Some(Output::Yaml) => write!(out, "{}", yaml(obj))?,
    }
    Ok(())
}

fn yaml(v: &Value) -> String {
    // A serde_json::Value always serializes to YAML; fall back to JSON (valid YAML) anyway.
    serde_saphyr::to_string(v).unwrap_or_else(|_| v.to_string())
}

async fn rollout_status(
    session: &Session,
    args: &StatusArgs,
    out: &mut (dyn Write + Send),
) -> Result<()> {
    let targets = parse_targets(&args.resource)?;
    let [target] = targets.as_slice() else {
        return Err(Error::Usage("rollout status takes one resource".into()));
    };
    let timeout = duration::parse(&args.timeout).map_err(Error::Usage)?;
    let started = Instant::now();
    let mut last = String::new();
    loop {
        let obj = session.get(target).await?;
        let progress = status::progress(target.kind, &obj)?;
        if progress.message != last {
            writeln!(out, "{}", progress.message)?;
            out.flush()?;
            last = progress.message;
        }
        if progress.done || !args.watch {
            return Ok(());
        }
        if timeout.is_some_and(|t| started.elapsed() >= t) {
            return Err(Error::Timeout(format!(
                "the rollout of {}",
                target.reference()
            )));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn revisions_of(session: &Session, obj: &Value) -> Result<Vec<ControllerRevision>> {
    let uid = obj
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let list = session
        .typed::<ControllerRevision>()
        .list(&ListParams::default())
        .await?;
    Ok(revisions::owned_by(&list.items, uid)
        .into_iter()
        .cloned()
        .collect())
}

fn history_kind(target: &Target) -> Result<()> {
    match target.kind {
        Kind::CloneSet | Kind::AdvancedStatefulSet | Kind::AdvancedDaemonSet => Ok(()),
        _ => Err(Error::Unsupported {
            kind: target.kind.resource(),
            name: target.name.clone(),
            what: "has no revision history here (CloneSet, Advanced StatefulSet and Advanced DaemonSet have)".into(),
        }),
    }
}

async fn rollout_history(
    session: &Session,
    target: &Target,
    revision: i64,
    out: &mut (dyn Write + Send),
) -> Result<()> {
    history_kind(target)?;
    let obj = session.get(target).await?;
    let owned = revisions_of(session, &obj).await?;
    let owned: Vec<&ControllerRevision> = owned.iter().collect();
    if revision > 0 {
        let chosen = owned
            .iter()
            .find(|r| r.revision == revision)
            .ok_or_else(|| Error::Refused("unable to find the specified revision".into()))?;
        let template = revisions::template(chosen)?;
        writeln!(out, "{} with revision #{revision}", target.reference())?;
        writeln!(out, "Pod Template:")?;
        for line in yaml(&template).lines() {
            writeln!(out, "  {line}")?;
        }
        return Ok(());
    }
    writeln!(out, "{}", target.reference())?;
    write!(out, "{}", revisions::history_table(&owned))?;
    writeln!(out)?;
    Ok(())
}

async fn rollout_undo(
    session: &Session,
    target: &Target,
    to_revision: i64,
    flags: &OutputArgs,
    out: &mut (dyn Write + Send),
) -> Result<()> {
    history_kind(target)?;
    let obj = session.get(target).await?;
    let owned = revisions_of(session, &obj).await?;
    let owned: Vec<&ControllerRevision> = owned.iter().collect();
    let current = obj
        .pointer("/spec/template")
        .cloned()
        .unwrap_or(Value::Null);
    match revisions::plan_undo(&owned, &current, to_revision)? {
        revisions::Undo::AlreadyThere { revision } => {
            writeln!(
                out,
                "{} skipped rollback (current template already matches revision {revision})",
                target.reference()
            )?;
            Ok(())
        }
        revisions::Undo::To { template, .. } => {
            let patch =
                serde_json::json!([{"op": "replace", "path": "/spec/template", "value": template}]);
            send(
                session,
                target,
                &obj,
                Change::Json(patch),
                "rolled back",
                flags,
                out,
            )
            .await
        }
    }
}

/// `describe rollout NAME`: the page once, or with `--watch` again at each change of the
/// Rollout (its resourceVersion), the screen cleared first as kruise-tools does.
async fn describe_rollout(
    session: &Session,
    args: &DescribeRolloutArgs,
    out: &mut (dyn Write + Send),
) -> Result<()> {
    let name = if args.name.contains('/') {
        let targets = parse_targets(std::slice::from_ref(&args.name))?;
        match targets.as_slice() {
            [t] if t.kind == Kind::Rollout => t.name.clone(),
            _ => {
                return Err(Error::Usage(format!(
                    "{:?}: describe rollout takes a Rollout's name",
                    args.name
                )));
            }
        }
    } else {
        args.name.clone()
    };
    let target = Target {
        kind: Kind::Rollout,
        name,
    };
    let timeout = (args.timeout > 0).then(|| Duration::from_secs(args.timeout));
    let started = Instant::now();
    let mut shown = None;
    loop {
        let obj = session.get(&target).await?;
        let version = obj
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if shown.as_ref() != Some(&version) {
            let page = rollout_page(session, &obj, args).await;
            if args.watch {
                write!(out, "\x1b[2J\x1b[H")?;
            }
            write!(out, "{page}")?;
            out.flush()?;
            shown = Some(version);
        }
        if !args.watch || timeout.is_some_and(|t| started.elapsed() >= t) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The `describe rollout` page of the Rollout `obj`, with its TrafficRouting and workload.
async fn rollout_page(session: &Session, obj: &Value, args: &DescribeRolloutArgs) -> String {
    let view = kruise_rollout::RolloutView::from_json(obj);
    let routing = match &view.traffic_routing_ref {
        Some(name) => Some(traffic_routing_routes(session, name).await),
        None => None,
    };
    let workload = rollout_workload(session, &view, args.all).await;
    kruise_rollout::describe(&view, routing.as_ref(), &workload, !args.no_color)
}

/// The routes of the TrafficRouting a Rollout names (`spec.objectRef`).
async fn traffic_routing_routes(session: &Session, name: &str) -> Result<Vec<Value>, String> {
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk(
        target::ROLLOUTS_GROUP,
        "v1alpha1",
        "TrafficRouting",
    ));
    let obj = session
        .api_for(&ar)
        .get(name)
        .await
        .map_err(|e| Error::from(e).to_string())?;
    let obj = serde_json::to_value(obj).map_err(|e| e.to_string())?;
    Ok(obj
        .pointer("/spec/objectRef")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default())
}

/// The Rollout's workload: its images and replicas, and the Pods of the revision (and
/// batch) the Rollout is at, among those its selector picks.
async fn rollout_workload(
    session: &Session,
    view: &kruise_rollout::RolloutView,
    all: bool,
) -> Result<kruise_rollout::WorkloadView, String> {
    let r = &view.workload;
    let (group, version) = r
        .api_version
        .rsplit_once('/')
        .unwrap_or(("", r.api_version.as_str()));
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, &r.kind));
    let obj = session
        .api_for(&ar)
        .get(&r.name)
        .await
        .map_err(|e| Error::from(e).to_string())?;
    let obj = serde_json::to_value(obj).map_err(|e| e.to_string())?;
    let mut workload = kruise_rollout::workload_view(r, &obj)?;
    let selector = obj
        .pointer("/spec/selector/matchLabels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect::<Vec<_>>()
        .join(",");
    let pods = session
        .typed::<Pod>()
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|e| Error::from(e).to_string())?;
    let pods = pods
        .items
        .iter()
        .map(serde_json::to_value)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    workload.pods = kruise_rollout::pod_rows(
        &pods,
        view.pods_hash(),
        view.pods_batch(all),
        jiff::Timestamp::now().as_second(),
    );
    Ok(workload)
}

fn crr_resource() -> kube::core::ApiResource {
    kube::core::ApiResource {
        group: "apps.kruise.io".into(),
        version: "v1alpha1".into(),
        api_version: "apps.kruise.io/v1alpha1".into(),
        kind: "ContainerRecreateRequest".into(),
        plural: "containerrecreaterequests".into(),
    }
}

async fn get_pod(session: &Session, name: &str) -> Result<Value> {
    let pod = session.typed::<Pod>().get(name).await?;
    Ok(serde_json::to_value(pod)?)
}

/// Polls the ContainerRecreateRequest `name` until it completes.
async fn wait_crr(
    session: &Session,
    name: &str,
    reference: &str,
    timeout: Option<Duration>,
) -> Result<edits::CrrOutcome> {
    let api = session.api_for(&crr_resource());
    let started = Instant::now();
    loop {
        let now = serde_json::to_value(api.get(name).await?)?;
        if let Some(outcome) = edits::crr_outcome(&now) {
            return Ok(outcome);
        }
        if timeout.is_some_and(|t| started.elapsed() >= t) {
            return Err(Error::Timeout(reference.to_string()));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Creates the ContainerRecreateRequest `crr` and, when asked to wait (and it was really
/// created), polls it until it completes. `None`: nothing to wait for.
async fn create_crr_then_wait(
    session: &Session,
    crr: Value,
    wait: bool,
    timeout: Option<Duration>,
    flags: &OutputArgs,
    out: &mut (dyn Write + Send),
) -> Result<Option<edits::CrrOutcome>> {
    let name = crr["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let reference = format!("containerrecreaterequest.apps.kruise.io/{name}");
    create_object(
        session,
        &crr_resource(),
        crr,
        &reference,
        "created",
        flags,
        out,
    )
    .await?;
    if !wait || flags.dry_run != DryRun::None {
        return Ok(None);
    }
    wait_crr(session, &name, &reference, timeout)
        .await
        .map(Some)
}

async fn create_crr(session: &Session, args: &CrrArgs, out: &mut (dyn Write + Send)) -> Result<()> {
    let timeout = duration::parse(&args.timeout).map_err(Error::Usage)?;
    let pod = get_pod(session, &args.pod).await?;
    let crr = edits::container_recreate_request(&edits::CrrOptions {
        name: &args.name,
        pod: &pod,
        containers: &args.containers,
        timing: &args.timing,
    })?;
    let Some(outcome) =
        create_crr_then_wait(session, crr, args.wait, timeout, &args.out, out).await?
    else {
        return Ok(());
    };
    outcome.check()?;
    writeln!(
        out,
        "containerrecreaterequest.apps.kruise.io/{} completed: recreated {}",
        args.name,
        outcome.recreated.join(", ")
    )?;
    Ok(())
}

async fn restart_container(
    session: &Session,
    args: &RestartContainerArgs,
    out: &mut (dyn Write + Send),
) -> Result<()> {
    let timeout = duration::parse(&args.timeout).map_err(Error::Usage)?;
    let pod = get_pod(session, &args.pod).await?;
    let now = u64::try_from(jiff::Timestamp::now().as_second()).unwrap_or_default();
    let crr = restart::restart_request(&pod, &args.containers, &args.timing, now)?;
    let Some(outcome) =
        create_crr_then_wait(session, crr, args.wait, timeout, &args.out, out).await?
    else {
        return Ok(());
    };
    for line in restart::outcome_lines(&args.pod, &outcome) {
        writeln!(out, "{line}")?;
    }
    outcome.check()
}

/// `--from=advancedcronjob/NAME` of `create job` and `create broadcastJob`: that
/// AdvancedCronJob, read.
async fn from_cron_job(session: &Session, from: &str) -> Result<Value> {
    let from = parse_targets(&[from.to_string()])?;
    let [source] = from.as_slice() else {
        return Err(Error::Usage("--from names one advancedcronjob/NAME".into()));
    };
    if source.kind != Kind::AdvancedCronJob {
        return Err(Error::Usage(format!(
            "--from must be an advancedcronjob, not {}",
            source.kind.resource()
        )));
    }
    session.get(source).await
}

async fn create_job(
    session: &Session,
    args: &CreateJobArgs,
    out: &mut (dyn Write + Send),
) -> Result<()> {
    let acj = from_cron_job(session, &args.from).await?;
    let job = edits::job_from_cron_job(&args.name, &acj)?;
    let ar = if job["kind"] == "BroadcastJob" {
        Kind::BroadcastJob.api_resource()
    } else {
        kube::core::ApiResource {
            group: "batch".into(),
            version: "v1".into(),
            api_version: "batch/v1".into(),
            kind: "Job".into(),
            plural: "jobs".into(),
        }
    };
    let reference = format!(
        "{}.{}/{}",
        ar.kind.to_ascii_lowercase(),
        ar.group,
        args.name
    );
    create_object(session, &ar, job, &reference, "created", &args.out, out).await?;
    Ok(())
}

async fn create_broadcast_job(
    session: &Session,
    args: &CreateBroadcastJobArgs,
    out: &mut (dyn Write + Send),
) -> Result<()> {
    let job = match (&args.image, &args.from) {
        (Some(image), None) => broadcastjob::from_image(&args.name, image, &args.command),
        (None, Some(from)) => {
            broadcastjob::from_cron_job(&args.name, &from_cron_job(session, from).await?)?
        }
        // clap refuses both and neither; kruise-tools' message if it ever gets here.
        _ => {
            return Err(Error::Usage(
                "either --image or --from must be specified".into(),
            ));
        }
    };
    let reference = format!("{}/{}", Kind::BroadcastJob.qualified(), args.name);
    create_object(
        session,
        &Kind::BroadcastJob.api_resource(),
        job,
        &reference,
        "created",
        &args.out,
        out,
    )
    .await?;
    Ok(())
}

/// Creates `object` (or, with `--dry-run=client`, does not) and prints it as kubectl does.
async fn create_object(
    session: &Session,
    ar: &kube::core::ApiResource,
    object: Value,
    reference: &str,
    done: &str,
    flags: &OutputArgs,
    out: &mut (dyn Write + Send),
) -> Result<Value> {
    let api = session.api_for(ar);
    let (created, suffix) = match flags.dry_run {
        DryRun::Client => (object, " (dry run)"),
        DryRun::None | DryRun::Server => {
            let object: DynamicObject = serde_json::from_value(object)?;
            let params = PostParams {
                dry_run: flags.dry_run == DryRun::Server,
                field_manager: Some(FIELD_MANAGER.into()),
            };
            let created = api.create(&params, &object).await?;
            let suffix = if flags.dry_run == DryRun::Server {
                " (server dry run)"
            } else {
                ""
            };
            (serde_json::to_value(created)?, suffix)
        }
    };
    match flags.output {
        None => writeln!(out, "{reference} {done}{suffix}")?,
        Some(Output::Name) => writeln!(out, "{reference}")?,
        Some(Output::Json) => writeln!(out, "{}", serde_json::to_string_pretty(&created)?)?,
        Some(Output::Yaml) => write!(out, "{}", yaml(&created))?,
    }
    Ok(created)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn flags_may_come_between_arguments() {
        let cli = Cli::try_parse_from([
            "kubectl-kruise",
            "set",
            "env",
            "cloneset/a",
            "-c",
            "nginx",
            "K=V",
            "X-",
            "-n",
            "ns",
        ])
        .unwrap();
        assert_eq!(cli.global.namespace.as_deref(), Some("ns"));
        let Command::Set(SetCommand::Env(args)) = cli.command else {
            panic!("set env");
        };
        assert_eq!(args.args, ["cloneset/a", "K=V", "X-"]);
        assert_eq!(args.containers, "nginx");
        let cli = Cli::try_parse_from([
            "kubectl-kruise",
            "rollout",
            "status",
            "cloneset",
            "a",
            "--watch=false",
            "--dry-run",
        ]);
        assert!(cli.is_err(), "status has no --dry-run");
        let cli = Cli::try_parse_from([
            "kubectl-kruise",
            "rollout",
            "pause",
            "cloneset/a",
            "--dry-run",
        ])
        .unwrap();
        let Command::Rollout(RolloutCommand::Pause(args)) = cli.command else {
            panic!("pause");
        };
        assert_eq!(
            args.out.dry_run,
            DryRun::Client,
            "a bare --dry-run is client, as kubectl's"
        );
    }

    fn parse(args: &[&str]) -> std::result::Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("kubectl-kruise").chain(args.iter().copied()))
    }

    #[test]
    fn restart_container_flags() {
        let Command::Restart(RestartCommand::Container(args)) =
            parse(&["restart", "container", "web-0"]).unwrap().command
        else {
            panic!("restart container");
        };
        assert_eq!(args.pod, "web-0");
        assert!(args.containers.is_empty());
        assert!(args.wait, "waits by default");
        assert_eq!(args.timeout, "2m");
        assert_eq!(
            args.timing,
            CrrTiming {
                unready_grace_period_seconds: 3,
                termination_grace_period_seconds: None,
                min_started_seconds: 0,
            },
            "create crr's defaults"
        );
        let Command::Restart(RestartCommand::Container(args)) = parse(&[
            "restart",
            "container",
            "web-0",
            "app",
            "--wait=false",
            "sidecar",
            "-u",
            "10",
            "--terminationGracePeriodSeconds=4",
            "-m",
            "5",
            "--timeout=30s",
            "-o",
            "name",
        ])
        .unwrap()
        .command
        else {
            panic!("restart container");
        };
        assert_eq!(args.containers, ["app", "sidecar"]);
        assert!(!args.wait);
        assert_eq!(args.timeout, "30s");
        assert_eq!(
            args.timing,
            CrrTiming {
                unready_grace_period_seconds: 10,
                termination_grace_period_seconds: Some(4),
                min_started_seconds: 5,
            }
        );
        assert_eq!(args.out.output, Some(Output::Name));
        let Command::Restart(RestartCommand::Container(args)) =
            parse(&["restart", "container", "web-0", "--wait"])
                .unwrap()
                .command
        else {
            panic!("restart container");
        };
        assert!(args.wait, "a bare --wait is true");
        assert!(
            parse(&["restart", "container"]).is_err(),
            "a Pod is required"
        );
    }

    #[test]
    fn create_crr_shares_the_timing_flags() {
        let Command::Create(CreateCommand::ContainerRecreateRequest(args)) = parse(&[
            "create", "crr", "r", "--pod=p", "-u", "7", "-m", "2", "--wait",
        ])
        .unwrap()
        .command
        else {
            panic!("create crr");
        };
        assert_eq!(args.timing.unready_grace_period_seconds, 7);
        assert_eq!(args.timing.min_started_seconds, 2);
        assert!(args.wait);
        assert_eq!(args.timeout, "0", "create crr keeps its own wait defaults");
    }

    #[test]
    fn create_broadcast_job_flags() {
        let Command::Create(CreateCommand::BroadcastJob(args)) = parse(&[
            "create",
            "broadcastJob",
            "my-bcj",
            "--image=busybox",
            "--dry-run=client",
            "--",
            "sh",
            "-c",
            "date",
        ])
        .unwrap()
        .command
        else {
            panic!("create broadcastJob");
        };
        assert_eq!(args.image.as_deref(), Some("busybox"));
        assert_eq!(args.command, ["sh", "-c", "date"]);
        assert_eq!(args.out.dry_run, DryRun::Client);
        let Command::Create(CreateCommand::BroadcastJob(args)) =
            parse(&["create", "bcj", "now", "--from=acj/nightly", "-o", "yaml"])
                .unwrap()
                .command
        else {
            panic!("create bcj");
        };
        assert_eq!(args.from.as_deref(), Some("acj/nightly"));
        assert_eq!(args.out.output, Some(Output::Yaml));
        for bad in [
            &["create", "broadcastJob", "b"][..],
            &["create", "broadcastJob", "b", "--image=x", "--from=acj/y"],
            &["create", "broadcastJob", "b", "--from=acj/y", "--", "date"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}
