//! The CRI v1 client: the generated protos, socket discovery, and the few RPCs the agent uses (as
//! upstream's pkg/daemon/criruntime: `ImageFsInfo` to probe v1, `ListImages`, `PullImage`,
//! `Version`; for ContainerRecreateRequests `ListContainers`, `ContainerStatus`, `ExecSync` and
//! `StopContainer`). The agent never creates or starts containers.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tonic::transport::{Channel, Endpoint, Uri};

use crate::auth::Credentials;
use crate::error::Error;

/// The generated CRI v1 messages and clients (`k8s.io/cri-api/pkg/apis/runtime/v1`).
#[allow(clippy::all, clippy::pedantic, missing_docs, rustdoc::all)]
pub mod v1 {
    tonic::include_proto!("runtime.v1");
}

use v1::image_service_client::ImageServiceClient;
use v1::runtime_service_client::RuntimeServiceClient;

/// Where the host's `/var/run` is mounted in the agent's Pod (upstream's layout).
pub const HOST_VAR_RUN: &str = "/hostvarrun";

/// The sockets looked for under the host's `/var/run`, in upstream's order.
pub const KNOWN_SOCKETS: &[&str] = &[
    "containerd.sock",
    "containerd/containerd.sock",
    "crio.sock",
    "crio/crio.sock",
    "cri-dockerd.sock",
    "cri-dockerd/cri-dockerd.sock",
];

/// The CRI socket: `explicit` (flag or env) when given, else the first known socket that
/// exists under `var_run`.
pub fn discover_socket(explicit: Option<&str>, var_run: &Path) -> Result<PathBuf, Error> {
    if let Some(path) = explicit.filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(path.strip_prefix("unix://").unwrap_or(path)));
    }
    KNOWN_SOCKETS
        .iter()
        .map(|s| var_run.join(s))
        .find(|p| p.exists())
        .ok_or_else(|| Error::NoSocket(var_run.display().to_string()))
}

/// An image as the runtime knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeImage {
    /// The image ID (`sha256:…`, the config digest for containerd).
    pub id: String,
    pub repo_tags: Vec<String>,
    pub repo_digests: Vec<String>,
}

/// A connected CRI client (image and runtime service on the same socket).
#[derive(Clone)]
pub struct Cri {
    images: ImageServiceClient<Channel>,
    runtime: RuntimeServiceClient<Channel>,
    pub socket: PathBuf,
}

impl Cri {
    /// Connects lazily to the unix socket `socket` (the first RPC dials it).
    pub fn connect(socket: &Path) -> Result<Self, Error> {
        let path = socket.to_path_buf();
        // The URI is a placeholder: the connector always dials the unix socket.
        let channel = Endpoint::try_from("http://cri.local")
            .map_err(|e| Error::Cri(e.to_string()))?
            .connect_timeout(Duration::from_secs(5))
            .connect_with_connector_lazy(tower::service_fn(move |_: Uri| {
                let path = path.clone();
                async move {
                    let stream = tokio::net::UnixStream::connect(path).await?;
                    Ok::<_, std::io::Error>(TokioIo::new(stream))
                }
            }));
        Ok(Cri {
            images: ImageServiceClient::new(channel.clone()),
            runtime: RuntimeServiceClient::new(channel),
            socket: socket.to_path_buf(),
        })
    }

    /// `Version`: the runtime's name and version (`containerd`, `v1.6.20`).
    pub async fn version(&self) -> Result<(String, String), Error> {
        let v = self
            .runtime
            .clone()
            .version(v1::VersionRequest::default())
            .await?
            .into_inner();
        Ok((v.runtime_name, v.runtime_version))
    }

    /// `ImageFsInfo`: succeeds only when the runtime speaks CRI v1.
    pub async fn probe(&self) -> Result<(), Error> {
        self.images
            .clone()
            .image_fs_info(v1::ImageFsInfoRequest::default())
            .await?;
        Ok(())
    }

    /// `ListImages` filtered by `image` (`name:tag`): the runtime's image of that
    /// reference, if present.
    pub async fn find_image(&self, image: &str) -> Result<Option<RuntimeImage>, Error> {
        let request = v1::ListImagesRequest {
            filter: Some(v1::ImageFilter {
                image: Some(image_spec(image)),
            }),
        };
        let list = self.images.clone().list_images(request).await?.into_inner();
        Ok(list
            .images
            .into_iter()
            .map(|i| RuntimeImage {
                id: i.id,
                repo_tags: i.repo_tags,
                repo_digests: i.repo_digests,
            })
            .find(|i| {
                i.repo_tags
                    .iter()
                    .any(|t| same_reference(t, image) || t == image)
            }))
    }

    /// `PullImage(image)` with `credentials` and a sandbox config carrying `labels` and
    /// `annotations`; the image reference (ID) the runtime answers.
    pub async fn pull_image(
        &self,
        image: &str,
        credentials: Option<&Credentials>,
        labels: std::collections::HashMap<String, String>,
        annotations: std::collections::HashMap<String, String>,
    ) -> Result<String, Error> {
        let request = v1::PullImageRequest {
            image: Some(image_spec(image)),
            auth: credentials.map(|c| v1::AuthConfig {
                username: c.username.clone(),
                password: c.password.clone(),
                ..Default::default()
            }),
            sandbox_config: Some(v1::PodSandboxConfig {
                labels,
                annotations,
                ..Default::default()
            }),
        };
        let pulled = self.images.clone().pull_image(request).await?.into_inner();
        Ok(pulled.image_ref)
    }
}

/// The container label the kubelet sets to the Pod's UID.
pub const POD_UID_LABEL: &str = "io.kubernetes.pod.uid";
/// The container label the kubelet sets to the container's name in the Pod.
pub const CONTAINER_NAME_LABEL: &str = "io.kubernetes.container.name";
/// The container annotation the kubelet sets to the container's restart count.
pub const RESTART_COUNT_ANNOTATION: &str = "io.kubernetes.container.restartCount";
/// The kubelet's hash of the container spec, on every container it creates.
pub const CONTAINER_HASH_ANNOTATION: &str = "io.kubernetes.container.hash";

/// A container's state as the runtime reports it (`ContainerStatus`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeContainer {
    /// The runtime's ID (no `containerd://` prefix).
    pub id: String,
    /// The container's name in the Pod (kubelet label).
    pub name: String,
    pub state: ContainerRunState,
    /// Creation, in nanoseconds since the epoch.
    pub created_at: i64,
    /// Start, in nanoseconds since the epoch (0: never started).
    pub started_at: i64,
    /// The kubelet's restart count for this container (annotation).
    pub restart_count: i32,
}

/// `ContainerState` of the CRI.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContainerRunState {
    Created,
    Running,
    Exited,
    Unknown,
}

impl From<i32> for ContainerRunState {
    fn from(state: i32) -> Self {
        match v1::ContainerState::try_from(state) {
            Ok(v1::ContainerState::ContainerCreated) => Self::Created,
            Ok(v1::ContainerState::ContainerRunning) => Self::Running,
            Ok(v1::ContainerState::ContainerExited) => Self::Exited,
            _ => Self::Unknown,
        }
    }
}

/// What `ExecSync` answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecResult {
    pub exit_code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Cri {
    /// `ListContainers` filtered by label `io.kubernetes.pod.uid=<uid>`, then
    /// `ContainerStatus` of each: every container (every attempt) of the Pod.
    pub async fn pod_containers(&self, pod_uid: &str) -> Result<Vec<RuntimeContainer>, Error> {
        let listed = self.list_pod_containers(pod_uid).await?;
        let mut out = Vec::with_capacity(listed.len());
        for c in listed {
            let status = self
                .runtime
                .clone()
                .container_status(v1::ContainerStatusRequest {
                    container_id: c.id.clone(),
                    verbose: false,
                })
                .await;
            let status = match status {
                Ok(s) => s.into_inner().status,
                // Removed between the list and the status: not a container any more.
                Err(e) if e.code() == tonic::Code::NotFound => continue,
                Err(e) => return Err(e.into()),
            };
            let Some(status) = status else { continue };
            let name = status
                .labels
                .get(CONTAINER_NAME_LABEL)
                .or_else(|| c.labels.get(CONTAINER_NAME_LABEL))
                .cloned()
                .or_else(|| status.metadata.as_ref().map(|m| m.name.clone()))
                .unwrap_or_default();
            let restart_count = status
                .annotations
                .get(RESTART_COUNT_ANNOTATION)
                .or_else(|| c.annotations.get(RESTART_COUNT_ANNOTATION))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            out.push(RuntimeContainer {
                id: status.id,
                name,
                state: status.state.into(),
                created_at: status.created_at,
                started_at: status.started_at,
                restart_count,
            });
        }
        Ok(out)
    }

    /// `ListContainers` filtered by label `io.kubernetes.pod.uid=<uid>`.
    async fn list_pod_containers(&self, pod_uid: &str) -> Result<Vec<v1::Container>, Error> {
        let request = v1::ListContainersRequest {
            filter: Some(v1::ContainerFilter {
                label_selector: [(POD_UID_LABEL.to_string(), pod_uid.to_string())].into(),
                ..Default::default()
            }),
        };
        Ok(self
            .runtime
            .clone()
            .list_containers(request)
            .await?
            .into_inner()
            .containers)
    }

    /// `ListContainers` of the Pod (label `io.kubernetes.pod.uid=<uid>`): runtime container
    /// ID → the kubelet's hash of the spec it created the container from (annotation
    /// `io.kubernetes.container.hash`, hexadecimal; containers without it are left out).
    pub async fn kubelet_hashes(&self, pod_uid: &str) -> Result<BTreeMap<String, u64>, Error> {
        let listed = self.list_pod_containers(pod_uid).await?;
        Ok(listed
            .into_iter()
            .filter_map(|c| {
                let hash = c
                    .annotations
                    .get(CONTAINER_HASH_ANNOTATION)
                    .and_then(|h| kruise_inplace::containerhash::parse_kubelet_hash(h))?;
                Some((c.id, hash))
            })
            .collect())
    }

    /// `ExecSync(id, cmd)` bounded by `timeout_seconds` (0: the runtime's default).
    pub async fn exec_sync(
        &self,
        container_id: &str,
        cmd: Vec<String>,
        timeout_seconds: i64,
    ) -> Result<ExecResult, Error> {
        let response = self
            .runtime
            .clone()
            .exec_sync(v1::ExecSyncRequest {
                container_id: container_id.to_string(),
                cmd,
                timeout: timeout_seconds,
            })
            .await?
            .into_inner();
        Ok(ExecResult {
            exit_code: response.exit_code,
            stdout: String::from_utf8_lossy(&response.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&response.stderr).into_owned(),
        })
    }

    /// `StopContainer(id, timeout)`: SIGTERM, then SIGKILL after `timeout_seconds`.
    pub async fn stop_container(
        &self,
        container_id: &str,
        timeout_seconds: i64,
    ) -> Result<(), Error> {
        self.runtime
            .clone()
            .stop_container(v1::StopContainerRequest {
                container_id: container_id.to_string(),
                timeout: timeout_seconds,
            })
            .await?;
        Ok(())
    }
}

fn image_spec(image: &str) -> v1::ImageSpec {
    v1::ImageSpec {
        image: image.to_string(),
        ..Default::default()
    }
}

/// Whether `a` and `b` name the same image once Docker Hub's defaults are filled in
/// (`nginx:1` is `docker.io/library/nginx:1`, how containerd lists it).
pub fn same_reference(a: &str, b: &str) -> bool {
    use kruise_api::image::ImageRef;
    ImageRef::parse(a).normalized() == ImageRef::parse(b).normalized()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_socket_wins_and_loses_its_scheme() {
        let dir = Path::new("/nonexistent");
        assert_eq!(
            discover_socket(Some("unix:///run/x.sock"), dir).unwrap(),
            PathBuf::from("/run/x.sock")
        );
        assert!(matches!(
            discover_socket(None, dir),
            Err(Error::NoSocket(_))
        ));
        assert!(matches!(
            discover_socket(Some(""), dir),
            Err(Error::NoSocket(_))
        ));
    }

    #[test]
    fn discovery_follows_upstream_order() {
        let dir = std::env::temp_dir().join(format!("cri-discovery-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("crio")).unwrap();
        std::fs::write(dir.join("crio/crio.sock"), "").unwrap();
        assert_eq!(
            discover_socket(None, &dir).unwrap(),
            dir.join("crio/crio.sock")
        );
        std::fs::create_dir_all(dir.join("containerd")).unwrap();
        std::fs::write(dir.join("containerd/containerd.sock"), "").unwrap();
        assert_eq!(
            discover_socket(None, &dir).unwrap(),
            dir.join("containerd/containerd.sock")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn references_compare_as_containerd_lists_them() {
        assert!(same_reference("nginx", "docker.io/library/nginx:latest"));
        assert!(same_reference(
            "127.0.0.1:15000/kruise-rs/busybox",
            "127.0.0.1:15000/kruise-rs/busybox:latest"
        ));
        assert!(same_reference("docker.io/library/nginx:1", "nginx:1"));
        assert!(!same_reference("nginx:1", "nginx:2"));
    }
}
