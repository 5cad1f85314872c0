//! Image references as OpenKruise's webhook checks them (`NormalizeImageRef` in openkruise/kruise
//! v1.9.0 pkg/daemon/util/util.go, that is `reference.ParseNormalizedNamed` of
//! github.com/distribution/reference): the Docker Hub domain filled in, then the reference
//! grammar. Only whether it parses, and the parser's message when not.

use std::sync::LazyLock;

use kruise_api::image::ImageRef;
use regex::Regex;

/// distribution/reference's `ReferenceRegexp` (anchored), with Go's ASCII `\w`.
#[allow(
    clippy::expect_used,
    reason = "a constant regex, covered by the unit tests"
)]
static REFERENCE: LazyLock<Regex> = LazyLock::new(|| {
    let domain_component = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])";
    let domain_name = format!(r"{domain_component}(?:\.{domain_component})*");
    let host = format!(r"(?:{domain_name}|\[(?:[a-fA-F0-9:]+)\])");
    let domain = format!(r"{host}(?::[0-9]+)?");
    let path_component = r"[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*";
    let name = format!(r"(?:{domain}/)?{path_component}(?:/{path_component})*");
    let tag = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}";
    let digest = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}";
    Regex::new(&format!(r"^({name})(?::{tag})?(?:@{digest})?$")).expect("a valid regex")
});

/// Maximum length of the repository name.
const NAME_TOTAL_LENGTH_MAX: usize = 255;

/// `None` when `image` is a reference OpenKruise accepts, else the parser's error.
pub fn reference_error(image: &str) -> Option<String> {
    if image.len() == 64
        && image
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    {
        return Some(format!(
            "invalid repository name ({image}), cannot specify 64-byte hexadecimal strings"
        ));
    }
    // `splitDockerDomain`'s domain and remainder (Docker Hub and `library/` filled in);
    // `:latest` added to a floating reference changes nothing the grammar decides.
    let full = ImageRef::parse(image).normalized();
    let remainder = full.split_once('/').map_or("", |(_, rest)| rest);
    let remote_name = remainder.split(':').next().unwrap_or_default();
    if remote_name.to_lowercase() != remote_name {
        return Some(format!(
            "invalid reference format: repository name ({remote_name}) must be lowercase"
        ));
    }
    let Some(captures) = REFERENCE.captures(&full) else {
        return Some("invalid reference format".into());
    };
    let name = captures.get(1).map_or("", |m| m.as_str());
    (name.len() > NAME_TOTAL_LENGTH_MAX).then(|| {
        format!("repository name must not be more than {NAME_TOTAL_LENGTH_MAX} characters")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn references_docker_accepts() {
        for ok in [
            "nginx",
            "nginx:1.25",
            "busybox:1.36",
            "library/nginx:latest",
            "docker.io/library/nginx:1.25",
            "registry.k8s.io/pause:3.9",
            "localhost:5000/team/app:v1.2.3-rc_1",
            "localhost/app",
            "my-registry.example.com:443/a/b/c:tag",
            "[::1]:5000/app:1",
            "nginx@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "nginx:1.25@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "a__b/c-d/e.f:g",
        ] {
            assert_eq!(reference_error(ok), None, "{ok}");
        }
    }

    #[test]
    fn references_docker_refuses_with_its_message() {
        for (bad, message) in [
            ("", "invalid reference format"),
            ("nginx:", "invalid reference format"),
            ("nginx::1", "invalid reference format"),
            ("-nginx", "invalid reference format"),
            ("nginx/", "invalid reference format"),
            ("registry.example.com/", "invalid reference format"),
            ("nginx latest", "invalid reference format"),
            ("nginx@sha256:abc", "invalid reference format"),
            (
                "Nginx:1.25",
                "invalid reference format: repository name (library/Nginx) must be lowercase",
            ),
            (
                "registry.example.com/Team/app",
                "invalid reference format: repository name (Team/app) must be lowercase",
            ),
            (
                "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                "invalid repository name (0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef), cannot specify 64-byte hexadecimal strings",
            ),
        ] {
            assert_eq!(reference_error(bad).as_deref(), Some(message), "{bad:?}");
        }
        let long = format!("{}:1", "a".repeat(250));
        assert_eq!(
            reference_error(&long).as_deref(),
            Some("repository name must not be more than 255 characters")
        );
    }

    proptest! {
        /// Any lowercase `name[:tag]` built from the grammar's parts is accepted; a space
        /// anywhere is not.
        #[test]
        fn grammar_built_references_parse(
            parts in proptest::collection::vec("[a-z0-9]{1,8}([._-][a-z0-9]{1,8})?", 1..4),
            tag in proptest::option::of("[A-Za-z0-9_][A-Za-z0-9_.-]{0,20}"),
            cut in 0usize..40,
        ) {
            let mut image = parts.join("/");
            if let Some(tag) = &tag {
                image = format!("{image}:{tag}");
            }
            prop_assert_eq!(reference_error(&image), None, "{}", image);
            let at = cut.min(image.len());
            let spaced = format!("{} {}", &image[..at], &image[at..]);
            prop_assert!(reference_error(&spaced).is_some(), "{}", spaced);
        }
    }
}
