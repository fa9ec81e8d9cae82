//! Namespaces (`ValidateNamespace`, `ValidateNamespaceUpdate`): cluster-scoped metadata whose
//! name is a DNS label.

use k8s_openapi::api::core::v1::Namespace;

use super::field::{Path, ValidationErrors};
use super::meta::{result, validate_object_meta_update, validate_object_meta_with};
use super::names::is_dns1123_label;

/// `ValidateNamespaceName` (`NameIsDNSLabel`): a `generateName` prefix may end in a dash.
fn namespace_name(value: &str, prefix: bool) -> Vec<String> {
    match value.strip_suffix('-') {
        Some(head) if prefix && !head.is_empty() => is_dns1123_label(&format!("{head}a")),
        _ => is_dns1123_label(value),
    }
}

/// `ValidateNamespace`.
///
/// # Errors
///
/// Every problem found.
pub fn validate_namespace(ns: &Namespace) -> Result<(), ValidationErrors> {
    let errs =
        validate_object_meta_with(&ns.metadata, &Path::new("metadata"), false, namespace_name);
    result("Namespace", &ns.metadata, errs)
}

/// `ValidateNamespaceUpdate`: as on create, and the identity fields unchanged.
///
/// # Errors
///
/// Every problem found.
pub fn validate_namespace_update(new: &Namespace, old: &Namespace) -> Result<(), ValidationErrors> {
    let mut errs =
        validate_object_meta_with(&new.metadata, &Path::new("metadata"), false, namespace_name);
    errs.extend(validate_object_meta_update(
        &new.metadata,
        &old.metadata,
        &Path::new("metadata"),
    ));
    result("Namespace", &new.metadata, errs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_are_dns_labels() {
        let ns = |name: &str| -> Namespace {
            serde_json::from_value(json!({"metadata": {"name": name}})).unwrap()
        };
        assert!(validate_namespace(&ns("team-a")).is_ok());
        let err = validate_namespace(&ns("Team.a")).unwrap_err().aggregate();
        assert!(
            err.contains("metadata.name: Invalid value: \"Team.a\": a lowercase RFC 1123 label"),
            "{err}"
        );
        let generated: Namespace =
            serde_json::from_value(json!({"metadata": {"generateName": "team-"}})).unwrap();
        assert!(validate_namespace(&generated).is_ok());
    }
}
