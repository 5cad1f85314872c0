//! Object metadata every controller reads and writes the same way: API groups of an
//! `apiVersion`, controller owners, the ownerReferences a controller puts on what it creates.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Resource;

/// The group of an `apiVersion` (`apps.kruise.io/v1beta1` → `apps.kruise.io`, `v1` → ``),
/// for comparing references: anything before the first `/`.
pub fn group_of(api_version: &str) -> &str {
    api_version.split_once('/').map_or("", |(group, _)| group)
}

/// The group of an `apiVersion` a user wrote, checked as Kubernetes' `ParseGroupVersion`
/// checks it: `None` for empty parts or more than one `/` (`v1` → ``).
pub fn parse_group(api_version: &str) -> Option<&str> {
    match api_version.split_once('/') {
        None if !api_version.is_empty() => Some(""),
        Some((group, version))
            if !group.is_empty() && !version.is_empty() && !version.contains('/') =>
        {
            Some(group)
        }
        _ => None,
    }
}

/// The ownerReference marked `controller`, if any.
pub fn controller_of(owners: Option<&[OwnerReference]>) -> Option<&OwnerReference> {
    owners?.iter().find(|o| o.controller == Some(true))
}

/// A plain ownerReference to `owner` (as the StatefulSet retention policy puts on PVCs).
///
/// Built from the metadata rather than kube's `Resource::controller_owner_ref` (`None`
/// without a uid): an object from the apiserver always has one, and if it ever had not, the
/// write carrying this reference is refused by the apiserver (an error, not a panic).
pub fn owner_reference<K: Resource<DynamicType = ()>>(owner: &K) -> OwnerReference {
    let meta = owner.meta();
    OwnerReference {
        api_version: K::api_version(&()).into_owned(),
        kind: K::kind(&()).into_owned(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        ..Default::default()
    }
}

/// The ownerReference that makes `owner` the controller of what carries it: `controller`
/// and `blockOwnerDeletion` true, as Kubernetes' `NewControllerRef`.
pub fn controller_owner_reference<K: Resource<DynamicType = ()>>(owner: &K) -> OwnerReference {
    OwnerReference {
        controller: Some(true),
        block_owner_deletion: Some(true),
        ..owner_reference(owner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    #[test]
    fn groups_of_api_versions() {
        assert_eq!(group_of("apps.kruise.io/v1beta1"), "apps.kruise.io");
        assert_eq!(group_of("v1"), "");
        assert_eq!(parse_group("apps/v1"), Some("apps"));
        assert_eq!(parse_group("v1"), Some(""));
        for bad in ["", "/v1", "apps/", "a/b/c"] {
            assert_eq!(parse_group(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_controller_reference_names_the_owner_and_blocks_its_deletion() {
        let rs = ReplicaSet {
            metadata: ObjectMeta {
                name: Some("web".into()),
                uid: Some("u-1".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let plain = owner_reference(&rs);
        assert_eq!(
            (plain.api_version.as_str(), plain.kind.as_str()),
            ("apps/v1", "ReplicaSet")
        );
        assert_eq!((plain.name.as_str(), plain.uid.as_str()), ("web", "u-1"));
        assert_eq!((plain.controller, plain.block_owner_deletion), (None, None));
        let owners = [plain, controller_owner_reference(&rs)];
        let controller = controller_of(Some(&owners)).expect("one is the controller");
        assert_eq!(controller.block_owner_deletion, Some(true));
        assert!(controller_of(Some(&owners[..1])).is_none());
        assert!(controller_of(None).is_none());
    }
}
