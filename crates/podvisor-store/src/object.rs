//! The little the store knows about objects: `metadata.name`, `namespace`, `uid` and
//! `resourceVersion`, and what a fresh store's namespaces look like.

use crate::error::{Result, StoreError};
use crate::key::Key;
pub use podvisor_api::meta::new_uid;
use serde_json::{Map, Value, json};

/// `metadata.resourceVersion`, if it is a string.
pub(crate) fn resource_version(obj: &Value) -> Option<&str> {
    obj.get("metadata")?.get("resourceVersion")?.as_str()
}

/// `metadata.uid`, if it is a string.
pub(crate) fn uid(obj: &Value) -> Option<&str> {
    obj.get("metadata")?.get("uid")?.as_str()
}

/// Sets `metadata.resourceVersion`; `obj` has passed [`check`].
/// Whether `metadata.finalizers` holds any finalizer, or, for a Namespace, `spec.finalizers`
/// (the namespace controller's `kubernetes`, which the namespace strategy also waits for).
pub(crate) fn has_finalizers(obj: &Value) -> bool {
    let any = |p: &str| {
        obj.pointer(p)
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty())
    };
    any("/metadata/finalizers") || (obj["kind"] == "Namespace" && any("/spec/finalizers"))
}

/// Whether the object only waits for its finalizers: it has a `deletionTimestamp` and no or a
/// zero `deletionGracePeriodSeconds` (the API server's `shouldDeleteDuringUpdate`).
pub(crate) fn deletion_due(obj: &Value) -> bool {
    let meta = &obj["metadata"];
    !meta["deletionTimestamp"].is_null()
        && meta["deletionGracePeriodSeconds"]
            .as_i64()
            .is_none_or(|g| g == 0)
}

/// Marks an object deleted with no grace left (`deletionGracePeriodSeconds: 0`), as the API
/// server's `BeforeDelete` shortens a pending grace period: the `deletionTimestamp` moves back
/// to when the graceful deletion was asked for (timestamp − old grace), or is now.
pub(crate) fn mark_deleted(obj: &mut Value) {
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let grace = meta
        .get("deletionGracePeriodSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let pending = meta
        .get("deletionTimestamp")
        .and_then(Value::as_str)
        .and_then(|t| t.parse::<jiff::Timestamp>().ok());
    let at = match pending {
        Some(ts) => ts
            .checked_sub(jiff::SignedDuration::from_secs(grace))
            .unwrap_or(ts),
        None => {
            let now = jiff::Timestamp::now();
            jiff::Timestamp::from_second(now.as_second()).unwrap_or(now)
        }
    };
    meta.insert(
        "deletionTimestamp".into(),
        Value::String(at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()),
    );
    meta.insert("deletionGracePeriodSeconds".into(), Value::from(0));
}

pub(crate) fn set_resource_version(obj: &mut Value, rv: &str) {
    if let Some(meta) = obj
        .as_object_mut()
        .map(|o| {
            o.entry("metadata")
                .or_insert_with(|| Value::Object(Map::new()))
        })
        .and_then(Value::as_object_mut)
    {
        meta.insert("resourceVersion".to_string(), Value::String(rv.to_string()));
    }
}

/// Checks that `obj` is a JSON object whose metadata (if any) is an object and names the same
/// object as `key`. An absent or empty `metadata.namespace` is accepted for namespaced keys.
pub(crate) fn check(key: &Key, obj: &Value) -> Result<()> {
    let Some(map) = obj.as_object() else {
        return Err(StoreError::Invalid(format!("{key}: not a JSON object")));
    };
    let Some(meta) = map.get("metadata") else {
        return Ok(());
    };
    let Some(meta) = meta.as_object() else {
        return Err(StoreError::Invalid(format!(
            "{key}: metadata is not a JSON object"
        )));
    };
    if let Some(name) = meta.get("name").and_then(Value::as_str)
        && name != key.name
    {
        return Err(StoreError::Invalid(format!(
            "{key}: metadata.name {name:?} does not match the key"
        )));
    }
    if let Some(ns) = meta.get("namespace").and_then(Value::as_str)
        && !ns.is_empty()
        && ns != key.namespace
    {
        return Err(StoreError::Invalid(format!(
            "{key}: metadata.namespace {ns:?} does not match the key"
        )));
    }
    Ok(())
}

/// The namespaces a fresh store starts with, as the API server creates them.
pub(crate) const INITIAL_NAMESPACES: [&str; 2] = ["default", "kube-system"];

/// A v1 Namespace as the API server would create it (without its resourceVersion).
pub(crate) fn namespace(name: &str) -> Value {
    // The API stores whole seconds.
    let now = jiff::Timestamp::now();
    let created = jiff::Timestamp::from_second(now.as_second()).unwrap_or(now);
    json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": name,
            "uid": new_uid(),
            "creationTimestamp": created.to_string(),
            "labels": { "kubernetes.io/metadata.name": name },
        },
        "spec": { "finalizers": ["kubernetes"] },
        "status": { "phase": "Active" },
    })
}
