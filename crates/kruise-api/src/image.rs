//! Container image references (`[registry/]repository[:tag][@digest]`), split as Docker's
//! reference library does (github.com/distribution/reference `splitDockerDomain` and
//! `ParseNormalizedNamed`): the first path component is a registry when it has a `.` or a
//! `:`, is `localhost`, or has an upper-case letter; otherwise the image is on Docker Hub,
//! where a one-component name lives under `library/`.
//!
//! This only splits; it does not validate the grammar (cronjob-ctl's webhook does, with
//! the library's messages).

/// The registry an image without a registry part comes from.
pub const DOCKER_HUB: &str = "docker.io";

/// Docker Hub's legacy host, read as [`DOCKER_HUB`].
const DOCKER_HUB_LEGACY: &str = "index.docker.io";

/// An image reference as written, split into its parts (borrowed from the string).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageRef<'a> {
    /// The whole reference as written.
    pub full: &'a str,
    /// Everything before the tag and the digest (`quay.io/org/app`, `nginx`).
    pub name: &'a str,
    /// The registry written in the reference, `None` when Docker Hub is implied.
    pub registry: Option<&'a str>,
    /// The repository path after the registry, as written (`nginx`, `org/app`).
    pub repository: &'a str,
    /// The tag after the last `:` of the last path component, if any (may be empty).
    pub tag: Option<&'a str>,
    /// What follows the first `@` (`sha256:…`), if any.
    pub digest: Option<&'a str>,
}

impl<'a> ImageRef<'a> {
    pub fn parse(image: &'a str) -> Self {
        let (rest, digest) = match image.split_once('@') {
            Some((rest, digest)) => (rest, Some(digest)),
            None => (image, None),
        };
        let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
        let (name, tag) = match rest[last_slash..].rfind(':') {
            Some(i) => (&rest[..last_slash + i], Some(&rest[last_slash + i + 1..])),
            None => (rest, None),
        };
        let (registry, repository) = match name.split_once('/') {
            Some((first, path))
                if first.contains(['.', ':'])
                    || first == "localhost"
                    || first.chars().any(|c| c.is_ascii_uppercase()) =>
            {
                (Some(first), path)
            }
            _ => (None, name),
        };
        Self {
            full: image,
            name,
            registry,
            repository,
            tag,
            digest,
        }
    }

    /// The registry the image is pulled from: the written one, Docker Hub when none (or
    /// when written as `index.docker.io`).
    pub fn registry_or_hub(&self) -> &'a str {
        match self.registry {
            None | Some(DOCKER_HUB_LEGACY) => DOCKER_HUB,
            Some(registry) => registry,
        }
    }

    /// A tag or a digest is written: the reference does not float on `latest`.
    pub fn is_pinned(&self) -> bool {
        self.tag.is_some() || self.digest.is_some()
    }

    /// The reference as written, `:latest` added when it has neither tag nor digest
    /// (`nginx` and `nginx:latest` name the same image).
    pub fn with_default_tag(&self) -> String {
        if self.is_pinned() {
            self.full.to_string()
        } else {
            format!("{}:latest", self.full)
        }
    }

    /// The fully qualified form container runtimes report (`docker.io/library/nginx:latest`
    /// for `nginx`): registry, Docker Hub's `library/` for a one-component name, and
    /// `:latest` when neither tag nor digest is written.
    pub fn normalized(&self) -> String {
        let registry = self.registry_or_hub();
        let library = if registry == DOCKER_HUB && !self.repository.contains('/') {
            "library/"
        } else {
            ""
        };
        let mut out = format!("{registry}/{library}{}", self.repository);
        match (self.tag, self.digest) {
            (None, None) => out.push_str(":latest"),
            (tag, digest) => {
                if let Some(tag) = tag {
                    out.push(':');
                    out.push_str(tag);
                }
                if let Some(digest) = digest {
                    out.push('@');
                    out.push_str(digest);
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parts_as_docker_splits_them() {
        let r = ImageRef::parse("127.0.0.1:15000/kruise-rs/busybox:1@sha256:abc");
        assert_eq!(r.registry, Some("127.0.0.1:15000"));
        assert_eq!(r.repository, "kruise-rs/busybox");
        assert_eq!(r.name, "127.0.0.1:15000/kruise-rs/busybox");
        assert_eq!((r.tag, r.digest), (Some("1"), Some("sha256:abc")));

        let r = ImageRef::parse("nginx");
        assert_eq!(
            (r.registry, r.repository, r.tag, r.digest),
            (None, "nginx", None, None)
        );
        assert_eq!(ImageRef::parse("localhost/x").registry, Some("localhost"));
        assert_eq!(ImageRef::parse("org/app").registry, None);
        assert_eq!(ImageRef::parse("Org/app").registry, Some("Org"));
        assert_eq!(ImageRef::parse("localhost:5000/x").tag, None);
        assert_eq!(ImageRef::parse("nginx:").tag, Some(""));
    }

    #[test]
    fn registries_default_to_docker_hub() {
        assert_eq!(ImageRef::parse("nginx:1").registry_or_hub(), DOCKER_HUB);
        assert_eq!(
            ImageRef::parse("index.docker.io/a/b").registry_or_hub(),
            DOCKER_HUB
        );
        assert_eq!(ImageRef::parse("quay.io/a/b").registry_or_hub(), "quay.io");
    }

    #[test]
    fn normalized_as_containerd_reports() {
        let n = |s| ImageRef::parse(s).normalized();
        assert_eq!(n("nginx"), "docker.io/library/nginx:latest");
        assert_eq!(n("nginx:1.9.1"), "docker.io/library/nginx:1.9.1");
        assert_eq!(n("org/app:2"), "docker.io/org/app:2");
        assert_eq!(n("docker.io/nginx"), "docker.io/library/nginx:latest");
        assert_eq!(
            n("index.docker.io/library/nginx:1"),
            "docker.io/library/nginx:1"
        );
        assert_eq!(n("nginx@sha256:ab"), "docker.io/library/nginx@sha256:ab");
        assert_eq!(
            n("nginx:1@sha256:ab"),
            "docker.io/library/nginx:1@sha256:ab"
        );
        assert_eq!(
            n("127.0.0.1:15000/kruise-rs/busybox"),
            "127.0.0.1:15000/kruise-rs/busybox:latest"
        );
    }

    #[test]
    fn default_tag_only_when_floating() {
        let t = |s| ImageRef::parse(s).with_default_tag();
        assert_eq!(t("nginx"), "nginx:latest");
        assert_eq!(t("host:5000/nginx"), "host:5000/nginx:latest");
        assert_eq!(t("nginx:1"), "nginx:1");
        assert_eq!(t("nginx@sha256:ab"), "nginx@sha256:ab");
    }

    proptest! {
        /// Whatever is written comes back from its parts, and normalizing is idempotent.
        #[test]
        fn parts_rebuild_the_reference(
            registry in proptest::option::of("(quay\\.io|localhost|r:5000)"),
            repository in "[a-z]{1,5}(/[a-z]{1,5}){0,2}",
            tag in proptest::option::of("[a-z0-9.]{1,6}"),
            digest in proptest::option::of("sha256:[0-9a-f]{8}"),
        ) {
            let mut image = registry.clone().map(|r| format!("{r}/")).unwrap_or_default();
            image.push_str(&repository);
            if let Some(t) = &tag { image.push(':'); image.push_str(t); }
            if let Some(d) = &digest { image.push('@'); image.push_str(d); }
            let r = ImageRef::parse(&image);
            prop_assert_eq!(r.registry, registry.as_deref());
            prop_assert_eq!(r.repository, repository.as_str());
            prop_assert_eq!(r.tag, tag.as_deref());
            prop_assert_eq!(r.digest, digest.as_deref());
            let normalized = r.normalized();
            prop_assert_eq!(ImageRef::parse(&normalized).normalized(), normalized.clone());
        }
    }
}
