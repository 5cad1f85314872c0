use super::*;
use k8s_openapi::api::core::v1::Pod;
use proptest::prelude::*;
use serde_json::json;

fn pod_json(name: &str) -> serde_json::Value {
    json!({
        "metadata": {"name": name, "namespace": "ns", "resourceVersion": "7",
                     "managedFields": [{"manager": "kubectl"}]},
        "spec": {"containers": [{"name": "main", "image": "nginx"}]}
    })
}

fn list_json(names: &[&str], version: &str) -> String {
    let items: Vec<_> = names.iter().map(|n| pod_json(n)).collect();
    json!({
        "kind": "PodList", "apiVersion": "v1",
        "metadata": {"resourceVersion": version},
        "items": items
    })
    .to_string()
}

fn decode(body: impl std::io::Read) -> Result<(Vec<Pod>, Option<String>), serde_json::Error> {
    let mut pods = Vec::new();
    let version = decode_list(body, |pod: Pod| {
        pods.push(pod);
        true
    })?;
    Ok((pods, version))
}

fn names(pods: &[Pod]) -> Vec<String> {
    pods.iter().map(|p| p.name_any()).collect()
}

/// A reader that returns at most `chunk` bytes a read, as a network body does.
struct Chunked<'a> {
    data: &'a [u8],
    chunk: usize,
}

impl std::io::Read for Chunked<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.chunk.min(buf.len()).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

#[test]
fn every_item_is_decoded_in_order_with_the_list_version() {
    let body = list_json(&["a", "b", "c"], "42");
    let (pods, version) = decode(body.as_bytes()).unwrap();
    assert_eq!(names(&pods), ["a", "b", "c"]);
    assert_eq!(version.as_deref(), Some("42"));
    assert_eq!(
        pods[0].spec.as_ref().unwrap().containers[0]
            .image
            .as_deref(),
        Some("nginx")
    );
}

#[test]
fn the_version_is_found_after_the_items_too() {
    let body = r#"{"items": [{"metadata": {"name": "a"}}], "kind": "PodList",
                   "metadata": {"resourceVersion": "9", "continue": ""}}"#;
    let (pods, version) = decode(body.as_bytes()).unwrap();
    assert_eq!(names(&pods), ["a"]);
    assert_eq!(version.as_deref(), Some("9"));
}

#[test]
fn null_or_empty_items_are_an_empty_list() {
    for body in [
        r#"{"metadata": {"resourceVersion": "3"}, "items": null}"#,
        r#"{"metadata": {"resourceVersion": "3"}, "items": []}"#,
        r#"{"metadata": {"resourceVersion": "3"}}"#,
    ] {
        let (pods, version) = decode(body.as_bytes()).unwrap();
        assert!(pods.is_empty(), "{body}");
        assert_eq!(version.as_deref(), Some("3"), "{body}");
    }
}

#[test]
fn a_truncated_body_is_an_error_not_a_shorter_list() {
    let body = list_json(&["a", "b", "c"], "42");
    let cut = &body.as_bytes()[..body.len() - 40];
    assert!(decode(cut).is_err());
    let trailing = format!("{body} {{");
    assert!(decode(trailing.as_bytes()).is_err());
}

#[test]
fn decoding_stops_at_once_when_the_reader_has_gone() {
    let body = list_json(&["a", "b", "c", "d"], "42");
    let mut seen = 0;
    let err = decode_list(body.as_bytes(), |_: Pod| {
        seen += 1;
        seen < 2
    })
    .unwrap_err();
    assert_eq!(seen, 2);
    assert!(err.to_string().contains("has gone"), "{err}");
}

#[test]
fn a_malformed_item_fails_the_list() {
    let body = r#"{"metadata": {"resourceVersion": "3"},
                   "items": [{"metadata": {"name": "a"}}, {"metadata": {"name": 5}}]}"#;
    assert!(decode(body.as_bytes()).is_err());
}

#[test]
fn the_backoff_doubles_to_its_cap_and_resets() {
    let mut backoff = WatchBackoff::default();
    let pauses: Vec<_> = (0..12).map(|_| backoff.next_pause()).collect();
    assert_eq!(pauses[0], Duration::from_millis(50));
    assert_eq!(pauses[1], Duration::from_millis(100));
    assert_eq!(pauses[2], Duration::from_millis(200));
    assert_eq!(*pauses.last().unwrap(), WATCH_BACKOFF_MAX);
    assert!(pauses.windows(2).all(|w| w[0] <= w[1]));
    backoff.reset();
    assert_eq!(backoff.next_pause(), WATCH_BACKOFF_FIRST);
}

proptest! {
    /// However the body is cut into reads, the same items and version come out.
    #[test]
    fn chunking_never_changes_what_is_decoded(count in 0usize..20, chunk in 1usize..300) {
        let names_in: Vec<String> = (0..count).map(|i| format!("pod-{i}")).collect();
        let refs: Vec<&str> = names_in.iter().map(String::as_str).collect();
        let body = list_json(&refs, "1234");
        let (pods, version) = decode(Chunked { data: body.as_bytes(), chunk }).unwrap();
        prop_assert_eq!(names(&pods), names_in);
        prop_assert_eq!(version.as_deref(), Some("1234"));
    }
}
