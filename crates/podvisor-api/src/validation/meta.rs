//! Object metadata: name, generateName, namespace, labels, annotations.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::field::{FieldError, Path, ValidationErrors};
use super::names::{
    is_dns1123_label, is_qualified_name, is_valid_label_value, name_is_dns_subdomain,
};

/// Largest total size of all annotations (keys plus values), in bytes.
const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

/// The annotation that marks a mirror pod.
pub(crate) const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// Kubernetes' `ValidateObjectMeta` for a namespaced object whose name is a
/// DNS-1123 subdomain. A name is required unless `generateName` is set
/// (here nobody generates names before validation, unlike the API server).
pub(crate) fn validate_object_meta(meta: &ObjectMeta, path: &Path) -> Vec<FieldError> {
    validate_object_meta_with(meta, path, true, name_is_dns_subdomain)
}

/// Kubernetes' `ValidateObjectMeta` with its options: whether the kind is namespaced (a
/// cluster-scoped object may not name a namespace) and the kind's name rule (`name_rule(name,
/// prefix)`: the problems of a name, or of a `generateName` prefix).
pub(crate) fn validate_object_meta_with(
    meta: &ObjectMeta,
    path: &Path,
    namespaced: bool,
    name_rule: fn(&str, bool) -> Vec<String>,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let generate_name = meta.generate_name.as_deref().unwrap_or("");
    if !generate_name.is_empty() {
        for msg in name_rule(generate_name, true) {
            errs.push(FieldError::invalid(
                &path.child("generateName"),
                generate_name,
                msg,
            ));
        }
    }
    let name = meta.name.as_deref().unwrap_or("");
    if name.is_empty() {
        if generate_name.is_empty() {
            errs.push(FieldError::required(
                &path.child("name"),
                "name or generateName is required",
            ));
        }
    } else {
        for msg in name_rule(name, false) {
            errs.push(FieldError::invalid(&path.child("name"), name, msg));
        }
    }
    let namespace = meta.namespace.as_deref().unwrap_or("");
    if !namespaced {
        if !namespace.is_empty() {
            errs.push(FieldError::forbidden(
                &path.child("namespace"),
                "not allowed on this type",
            ));
        }
    } else if namespace.is_empty() {
        errs.push(FieldError::required(&path.child("namespace"), ""));
    } else {
        for msg in is_dns1123_label(namespace) {
            errs.push(FieldError::invalid(
                &path.child("namespace"),
                namespace,
                msg,
            ));
        }
    }
    if let Some(g) = meta.generation
        && g < 0
    {
        errs.push(FieldError::invalid(
            &path.child("generation"),
            g,
            "must be greater than or equal to 0",
        ));
    }
    if let Some(labels) = &meta.labels {
        errs.extend(validate_labels(labels, &path.child("labels")));
    }
    if let Some(annotations) = &meta.annotations {
        errs.extend(validate_annotations(
            annotations,
            &path.child("annotations"),
        ));
    }
    errs
}

/// Label keys are qualified names, values are label values; errors are
/// reported on the map path (as Kubernetes does).
pub(crate) fn validate_labels(labels: &BTreeMap<String, String>, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (k, v) in labels {
        for msg in is_qualified_name(k) {
            errs.push(FieldError::invalid(path, k, msg));
        }
        for msg in is_valid_label_value(v) {
            errs.push(FieldError::invalid(path, v, msg));
        }
    }
    errs
}

fn validate_annotations(annotations: &BTreeMap<String, String>, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut total = 0usize;
    for (k, v) in annotations {
        // Annotation keys are qualified names, case-insensitively.
        for msg in is_qualified_name(&k.to_lowercase()) {
            errs.push(FieldError::invalid(path, k, msg));
        }
        total += k.len() + v.len();
    }
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        errs.push(FieldError::too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT));
    }
    errs
}

/// Kubernetes' `ValidateObjectMetaUpdate`: the identity fields that matter
/// for a standalone engine are immutable.
pub(crate) fn validate_object_meta_update(
    new: &ObjectMeta,
    old: &ObjectMeta,
    path: &Path,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let immutable = |field: &str, n: Option<&str>, o: Option<&str>, errs: &mut Vec<FieldError>| {
        let (n, o) = (n.unwrap_or(""), o.unwrap_or(""));
        if n != o {
            errs.push(FieldError::invalid(
                &path.child(field),
                n,
                "field is immutable",
            ));
        }
    };
    immutable("name", new.name.as_deref(), old.name.as_deref(), &mut errs);
    immutable(
        "namespace",
        new.namespace.as_deref(),
        old.namespace.as_deref(),
        &mut errs,
    );
    immutable("uid", new.uid.as_deref(), old.uid.as_deref(), &mut errs);
    if new.creation_timestamp != old.creation_timestamp {
        errs.push(FieldError::invalid(
            &path.child("creationTimestamp"),
            new.creation_timestamp
                .as_ref()
                .map_or_else(String::new, |t| t.0.to_string()),
            "field is immutable",
        ));
    }
    // `ValidateNoNewFinalizers`: an object being deleted only waits for the finalizers it has.
    if old.deletion_timestamp.is_some() {
        let had = old.finalizers.as_deref().unwrap_or_default();
        let mut extra: Vec<&str> = new
            .finalizers
            .iter()
            .flatten()
            .map(String::as_str)
            .filter(|f| !had.iter().any(|h| h == f))
            .collect();
        extra.sort_unstable();
        extra.dedup();
        if !extra.is_empty() {
            let list: Vec<String> = extra.iter().map(|f| format!("{f:?}")).collect();
            errs.push(FieldError::forbidden(
                &path.child("finalizers"),
                format!(
                    "no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                    list.join(", ")
                ),
            ));
        }
    }
    errs
}

/// `ValidatePodSpecificAnnotationUpdates`: the mirror-pod annotation may be
/// neither added, changed nor removed.
pub(crate) fn validate_mirror_annotation_update(
    new: &ObjectMeta,
    old: &ObjectMeta,
    path: &Path,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let ann_path = path.child("annotations");
    let empty = BTreeMap::new();
    let new_ann = new.annotations.as_ref().unwrap_or(&empty);
    let old_ann = old.annotations.as_ref().unwrap_or(&empty);
    match (
        old_ann.get(MIRROR_POD_ANNOTATION),
        new_ann.get(MIRROR_POD_ANNOTATION),
    ) {
        (Some(o), Some(n)) if o == n => {}
        (Some(_), _) => errs.push(FieldError::forbidden(
            &ann_path.key(MIRROR_POD_ANNOTATION),
            "may not remove or update mirror pod annotation",
        )),
        (None, Some(_)) => errs.push(FieldError::forbidden(
            &ann_path.key(MIRROR_POD_ANNOTATION),
            "may not add mirror pod annotation",
        )),
        (None, None) => {}
    }
    errs
}

/// The name a kind's validation errors give: the name, else the `generateName`.
fn object_name(meta: &ObjectMeta) -> String {
    meta.name
        .clone()
        .filter(|n| !n.is_empty())
        .or_else(|| meta.generate_name.clone())
        .unwrap_or_default()
}

/// A kind's validation result: `Ok` without errors, else all of them for `kind` named by
/// `meta`.
pub(crate) fn result(
    kind: &str,
    meta: &ObjectMeta,
    errors: Vec<FieldError>,
) -> Result<(), ValidationErrors> {
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ValidationErrors::new(kind, object_name(meta), errors))
    }
}
