//! Pull credentials from image pull Secrets (`kubernetes.io/dockerconfigjson` and
//! `kubernetes.io/dockercfg`), matched to the registry of the image being pulled, in the order
//! upstream tries them (`AuthInfos` in openkruise/kruise v1.9.0 pkg/util/secret/parse.go and
//! `pullImageV1` in pkg/daemon/criruntime/imageruntime/cri.go): every matching credential of the
//! referenced secrets, then anonymous.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::Deserialize;

/// Credentials for one `PullImage`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Credentials {
    pub username: String,
    pub password: String,
}

pub use kruise_api::image::DOCKER_HUB;

/// A docker config key (`https://index.docker.io/v1/`, `registry:5000`, `http://r/x`) as
/// a bare registry host, the form [`kruise_api::image::ImageRef::registry_or_hub`] gives.
pub fn registry_of_key(key: &str) -> String {
    let bare = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    let host = bare.split('/').next().unwrap_or_default();
    match host {
        "index.docker.io" | "registry-1.docker.io" => DOCKER_HUB.to_string(),
        h => h.to_string(),
    }
}

#[derive(Debug, Default, Deserialize)]
struct DockerConfigJson {
    #[serde(default)]
    auths: BTreeMap<String, DockerConfigEntry>,
}

#[derive(Debug, Default, Deserialize)]
struct DockerConfigEntry {
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default)]
    auth: Option<String>,
}

impl DockerConfigEntry {
    fn credentials(&self) -> Option<Credentials> {
        if let (Some(u), Some(p)) = (&self.username, &self.password) {
            return Some(Credentials {
                username: u.clone(),
                password: p.clone(),
            });
        }
        let decoded = STANDARD.decode(self.auth.as_deref()?.trim()).ok()?;
        let text = String::from_utf8(decoded).ok()?;
        let (u, p) = text.split_once(':')?;
        Some(Credentials {
            username: u.to_string(),
            password: p.to_string(),
        })
    }
}

/// The credentials in one pull Secret's data (`.dockerconfigjson` or `.dockercfg`, raw
/// bytes) for `registry`. Undecodable data gives none (the pull goes on anonymously).
pub fn credentials_for(data: &BTreeMap<String, Vec<u8>>, registry: &str) -> Vec<Credentials> {
    let entries: BTreeMap<String, DockerConfigEntry> =
        if let Some(json) = data.get(".dockerconfigjson") {
            serde_json::from_slice::<DockerConfigJson>(json)
                .map(|c| c.auths)
                .unwrap_or_default()
        } else if let Some(cfg) = data.get(".dockercfg") {
            serde_json::from_slice(cfg).unwrap_or_default()
        } else {
            BTreeMap::new()
        };
    entries
        .iter()
        .filter(|(key, _)| registry_of_key(key) == registry)
        .filter_map(|(_, entry)| entry.credentials())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn data(key: &str, json: &str) -> BTreeMap<String, Vec<u8>> {
        BTreeMap::from([(key.to_string(), json.as_bytes().to_vec())])
    }

    #[test]
    fn dockerconfigjson_with_username_or_auth() {
        let secret = data(
            ".dockerconfigjson",
            r#"{"auths":{"127.0.0.1:15000":{"auth":"dXNlcjpwYXNz"},
                "https://index.docker.io/v1/":{"username":"hub","password":"pw"}}}"#,
        );
        assert_eq!(
            credentials_for(&secret, "127.0.0.1:15000"),
            [Credentials {
                username: "user".into(),
                password: "pass".into()
            }]
        );
        assert_eq!(
            credentials_for(&secret, DOCKER_HUB),
            [Credentials {
                username: "hub".into(),
                password: "pw".into()
            }]
        );
        assert!(credentials_for(&secret, "quay.io").is_empty());
    }

    #[test]
    fn dockercfg_and_garbage() {
        let secret = data(".dockercfg", r#"{"http://r.example/":{"auth":"YTpi"}}"#);
        assert_eq!(
            credentials_for(&secret, "r.example"),
            [Credentials {
                username: "a".into(),
                password: "b".into()
            }]
        );
        assert!(credentials_for(&data(".dockerconfigjson", "not json"), "r.example").is_empty());
        assert!(credentials_for(&BTreeMap::new(), "r.example").is_empty());
    }

    proptest! {
        /// A credential written for a registry is found for an image of that registry.
        #[test]
        fn written_credentials_are_found(host in "[a-z]{1,8}\\.[a-z]{2,3}(:[0-9]{2,5})?",
                                         user in "[a-z]{1,8}", pass in "[a-zA-Z0-9:]{1,12}",
                                         repo in "[a-z]{1,8}(/[a-z]{1,8})?") {
            let auth = STANDARD.encode(format!("{user}:{pass}"));
            let json = format!(r#"{{"auths":{{"https://{host}/v2/":{{"auth":"{auth}"}}}}}}"#);
            let image = format!("{host}/{repo}:1");
            let registry = kruise_api::image::ImageRef::parse(&image).registry_or_hub();
            let found = credentials_for(&data(".dockerconfigjson", &json), registry);
            prop_assert_eq!(found, vec![Credentials { username: user, password: pass }]);
        }
    }
}
