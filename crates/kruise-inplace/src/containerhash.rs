//! The kubelet's hash of a container spec, as it labels every container it creates
//! (`io.kubernetes.container.hash`, hexadecimal) and as OpenKruise's node agent records it
//! in `apps.kruise.io/runtime-containers-meta` (`hashes.plainHash`).
//!
//! Since Kubernetes 1.31 the hash covers only the fields the kubelet lets change in place,
//! the name and the image (`HashContainer` and `pickFieldsToHash` in kubernetes v1.37.2
//! pkg/kubelet/container/helpers.go): FNV-1a (32 bits) of the Go `%v` rendering of
//! `dump.ForHash` (k8s.io/utils/dump) applied to the JSON bytes of
//! `{"image": …, "name": …}`. That rendering prints a byte slice as
//! `([]uint8)[123 34 …]`, so this is what is hashed here too.
//!
//! OpenKruise's in-place update counts a Pod as updated once every container the kubelet
//! runs carries the hash of its current spec (openkruise/kruise v1.9.0
//! pkg/util/inplaceupdate/inplace_update_defaults.go, `checkAllContainersHashConsistent`):
//! this holds even when the new image resolves to the image ID the container already ran,
//! where comparing image IDs cannot tell.

/// The hash the kubelet gives a container named `name` running `image`.
pub fn kubelet_container_hash(name: &str, image: &str) -> u64 {
    let mut json = String::from("{\"image\":");
    push_go_json_string(&mut json, image);
    json.push_str(",\"name\":");
    push_go_json_string(&mut json, name);
    json.push('}');
    let rendered = json
        .bytes()
        .map(|b| b.to_string())
        .collect::<Vec<_>>()
        .join(" ");
    u64::from(fnv1a_32(format!("([]uint8)[{rendered}]").as_bytes()))
}

/// The kubelet's annotation value (`strconv.FormatUint(hash, 16)`) as a number.
pub fn parse_kubelet_hash(annotation: &str) -> Option<u64> {
    u64::from_str_radix(annotation, 16).ok()
}

/// A string as Go's `encoding/json` writes it: `"`, `\` and control characters escaped,
/// and `<`, `>`, `&`, U+2028, U+2029 as `\u` escapes (its HTML-safe default).
fn push_go_json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", u32::from(c)));
            }
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}

fn fnv1a_32(bytes: &[u8]) -> u32 {
    const OFFSET: u32 = 0x811c_9dc5;
    const PRIME: u32 = 0x0100_0193;
    bytes
        .iter()
        .fold(OFFSET, |h, b| (h ^ u32::from(*b)).wrapping_mul(PRIME))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values printed by Go (`HashContainer`'s steps with k8s.io/utils/dump, as
    /// kubernetes v1.37.2 pkg/kubelet/container/helpers.go computes them).
    #[test]
    fn matches_the_kubelet() {
        assert_eq!(kubelet_container_hash("main", "nginx:1"), 0x6cf1_8e95);
        assert_eq!(
            kubelet_container_hash("nginx", "127.0.0.1:5000/kruise-e2e/nginx:alpine"),
            0xa6e6_c8e4
        );
        assert_eq!(kubelet_container_hash("a\"b", "x<y>&"), 0xf115_c462);
    }

    #[test]
    fn reads_the_kubelets_annotation() {
        assert_eq!(parse_kubelet_hash("6cf18e95"), Some(0x6cf1_8e95));
        assert_eq!(parse_kubelet_hash("zz"), None);
    }
}
