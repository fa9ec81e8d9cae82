//! Nodes and Leases as the API server checks them when they are written through the API
//! (`ValidateNode`'s metadata and taints, `ValidateLease`'s metadata and
//! `leaseDurationSeconds`); the node agent's own writes go to the store.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;

use super::field::{FieldError, Path, ValidationErrors};
use super::meta::{result, validate_object_meta_update, validate_object_meta_with};
use super::names::name_is_dns_subdomain;

/// `validateNodeTaints`: every taint has a key and one of the three effects.
fn taint_errors(node: &Node) -> Vec<FieldError> {
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default();
    let mut errs = Vec::new();
    for (i, t) in taints.iter().enumerate() {
        let path = Path::new("spec").child("taints").index(i);
        if t.key.is_empty() {
            errs.push(FieldError::required(&path.child("key"), ""));
        }
        if !matches!(
            t.effect.as_str(),
            "NoSchedule" | "PreferNoSchedule" | "NoExecute"
        ) {
            errs.push(FieldError::not_supported(
                &path.child("effect"),
                &t.effect,
                &["NoExecute", "NoSchedule", "PreferNoSchedule"],
            ));
        }
    }
    errs
}

fn node_errors(node: &Node) -> Vec<FieldError> {
    let mut errs = validate_object_meta_with(
        &node.metadata,
        &Path::new("metadata"),
        false,
        name_is_dns_subdomain,
    );
    errs.extend(taint_errors(node));
    errs
}

/// `ValidateNode` (cluster-scoped metadata with a DNS-subdomain name, the taints).
///
/// # Errors
///
/// Every problem found.
pub fn validate_node(node: &Node) -> Result<(), ValidationErrors> {
    result("Node", &node.metadata, node_errors(node))
}

/// `ValidateNodeUpdate`: as on create, and the identity fields unchanged.
///
/// # Errors
///
/// Every problem found.
pub fn validate_node_update(new: &Node, old: &Node) -> Result<(), ValidationErrors> {
    let mut errs = node_errors(new);
    errs.extend(validate_object_meta_update(
        &new.metadata,
        &old.metadata,
        &Path::new("metadata"),
    ));
    result("Node", &new.metadata, errs)
}

fn lease_errors(lease: &Lease) -> Vec<FieldError> {
    let mut errs = validate_object_meta_with(
        &lease.metadata,
        &Path::new("metadata"),
        true,
        name_is_dns_subdomain,
    );
    if let Some(d) = lease
        .spec
        .as_ref()
        .and_then(|s| s.lease_duration_seconds)
        .filter(|d| *d <= 0)
    {
        errs.push(FieldError::invalid(
            &Path::new("spec").child("leaseDurationSeconds"),
            d,
            "must be greater than 0",
        ));
    }
    errs
}

/// `ValidateLease` (its metadata, a positive `leaseDurationSeconds`).
///
/// # Errors
///
/// Every problem found.
pub fn validate_lease(lease: &Lease) -> Result<(), ValidationErrors> {
    result("Lease", &lease.metadata, lease_errors(lease))
}

/// `ValidateLeaseUpdate`: as on create, and the identity fields unchanged.
///
/// # Errors
///
/// Every problem found.
pub fn validate_lease_update(new: &Lease, old: &Lease) -> Result<(), ValidationErrors> {
    let mut errs = lease_errors(new);
    errs.extend(validate_object_meta_update(
        &new.metadata,
        &old.metadata,
        &Path::new("metadata"),
    ));
    result("Lease", &new.metadata, errs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_taints_and_durations() {
        let node = |name: &str, effect: &str| -> Node {
            serde_json::from_value(json!({"metadata": {"name": name},
                "spec": {"taints": [{"key": "k", "effect": effect}]}}))
            .unwrap()
        };
        assert!(validate_node(&node("node-1.example", "NoSchedule")).is_ok());
        let err = validate_node(&node("Node", "Sometimes"))
            .unwrap_err()
            .aggregate();
        assert!(
            err.contains("metadata.name: Invalid value: \"Node\""),
            "{err}"
        );
        assert!(
            err.contains("spec.taints[0].effect: Unsupported value: \"Sometimes\""),
            "{err}"
        );
        let lease: Lease = serde_json::from_value(json!({
            "metadata": {"name": "x", "namespace": "kube-node-lease"},
            "spec": {"leaseDurationSeconds": 0}
        }))
        .unwrap();
        let err = validate_lease(&lease).unwrap_err().aggregate();
        assert!(
            err.contains("spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0"),
            "{err}"
        );
    }
}
