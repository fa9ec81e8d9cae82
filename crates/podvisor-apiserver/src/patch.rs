//! PATCH bodies: JSON patch (RFC 6902), JSON merge patch (RFC 7386), strategic merge patch
//! (`k8s.io/apimachinery/pkg/util/strategicpatch`) and the merge step of server-side apply.
//!
//! The strategic merge knows the Pod's list semantics (containers by `name`, ports by
//! `containerPort`, volume mounts by `mountPath`, conditions by `type`, ...) and the
//! directives kubectl sends: `$patch: replace|delete|merge`, `$retainKeys`,
//! `$deleteFromPrimitiveList/<field>`; `$setElementOrder/<field>` is accepted and ignored
//! (the order of existing elements is kept, new ones are appended).

use serde_json::{Map, Value};

use crate::status::{ApiError, ApiResult};

/// How a list field merges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListMerge {
    /// Elements are objects identified by this key.
    Key(&'static str),
    /// Elements are scalars merged as a set.
    Set,
}

/// The list strategies of one kind, by field path (names only, no indices).
pub(crate) type ListStrategy = fn(&[&str]) -> Option<ListMerge>;

fn metadata_lists(path: &[&str]) -> Option<ListMerge> {
    match path {
        ["metadata", "finalizers"] => Some(ListMerge::Set),
        ["metadata", "ownerReferences"] => Some(ListMerge::Key("uid")),
        _ => None,
    }
}

/// Pod (`pkg/apis/core/v1` patch strategies).
pub(crate) fn pod_lists(path: &[&str]) -> Option<ListMerge> {
    let container_lists = |rest: &[&str]| match rest {
        [] => Some(ListMerge::Key("name")),
        ["env"] => Some(ListMerge::Key("name")),
        ["ports"] => Some(ListMerge::Key("containerPort")),
        ["volumeMounts"] => Some(ListMerge::Key("mountPath")),
        ["volumeDevices"] => Some(ListMerge::Key("devicePath")),
        _ => None,
    };
    match path {
        [
            "spec",
            "containers" | "initContainers" | "ephemeralContainers",
            rest @ ..,
        ] => container_lists(rest),
        [
            "spec",
            "volumes" | "imagePullSecrets" | "schedulingGates" | "resourceClaims",
        ] => Some(ListMerge::Key("name")),
        ["spec", "hostAliases"] => Some(ListMerge::Key("ip")),
        ["spec", "topologySpreadConstraints"] => Some(ListMerge::Key("topologyKey")),
        ["status", "conditions"] => Some(ListMerge::Key("type")),
        ["status", "podIPs" | "hostIPs"] => Some(ListMerge::Key("ip")),
        ["status", "resourceClaimStatuses"] => Some(ListMerge::Key("name")),
        _ => metadata_lists(path),
    }
}

/// Kinds without list strategies beyond object metadata (events, namespaces).
pub(crate) fn plain_lists(path: &[&str]) -> Option<ListMerge> {
    metadata_lists(path)
}

/// The PATCH flavours, by Content-Type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PatchType {
    /// `application/json-patch+json`.
    Json,
    /// `application/merge-patch+json`.
    Merge,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/apply-patch+yaml` (server-side apply).
    Apply,
}

impl PatchType {
    /// From the request's Content-Type; 415 for anything else.
    pub(crate) fn from_content_type(ct: &str) -> ApiResult<Self> {
        match ct {
            "application/json-patch+json" => Ok(PatchType::Json),
            "application/merge-patch+json" => Ok(PatchType::Merge),
            "application/strategic-merge-patch+json" => Ok(PatchType::Strategic),
            "application/apply-patch+yaml"
            | "application/apply-patch+json"
            | "application/apply-patch+cbor" => Ok(PatchType::Apply),
            other => Err(ApiError::unsupported_media_type(other)),
        }
    }
}

fn patch_error(e: impl std::fmt::Display) -> ApiError {
    let mut err = ApiError::bad_request(e.to_string());
    err.code = 422;
    err.reason = "Invalid";
    err
}

/// Applies a JSON, merge or strategic patch (`Apply` is a strategic merge of the applied
/// configuration) to `current`.
pub(crate) fn apply_patch(
    current: &Value,
    patch_type: PatchType,
    body: &[u8],
    lists: ListStrategy,
) -> ApiResult<Value> {
    let mut doc = current.clone();
    match patch_type {
        PatchType::Json => {
            let ops: json_patch::Patch = serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
            json_patch::patch(&mut doc, &ops).map_err(patch_error)?;
        }
        PatchType::Merge => {
            let p: Value = serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
            json_patch::merge(&mut doc, &p);
        }
        PatchType::Strategic | PatchType::Apply => {
            let p = crate::request::parse_body(body)?;
            strategic_merge(&mut doc, &p, lists)?;
        }
    }
    Ok(doc)
}

/// Merges a strategic merge patch into `doc`.
pub(crate) fn strategic_merge(
    doc: &mut Value,
    patch: &Value,
    lists: ListStrategy,
) -> ApiResult<()> {
    let Value::Object(p) = patch else {
        return Err(patch_error("a strategic merge patch must be a JSON object"));
    };
    if !doc.is_object() {
        *doc = Value::Object(Map::new());
    }
    let mut path = Vec::new();
    if let Value::Object(d) = doc
        && merge_map(d, p, &mut path, lists)? == Outcome::Delete
    {
        *doc = Value::Object(Map::new());
    }
    Ok(())
}

#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Keep,
    Delete,
}

/// Removes directives (`$...` keys, `$patch` list markers) from a value added as is.
fn strip(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .map(|(k, v)| (k.clone(), strip(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(
            a.iter()
                .filter(|e| e.get("$patch").is_none())
                .map(strip)
                .collect(),
        ),
        other => other.clone(),
    }
}

fn merge_map(
    orig: &mut Map<String, Value>,
    patch: &Map<String, Value>,
    path: &mut Vec<String>,
    lists: ListStrategy,
) -> ApiResult<Outcome> {
    match patch.get("$patch").and_then(Value::as_str) {
        Some("delete") => return Ok(Outcome::Delete),
        Some("replace") => {
            if let Value::Object(m) = strip(&Value::Object(patch.clone())) {
                *orig = m;
            }
            return Ok(Outcome::Keep);
        }
        Some("merge") | None => {}
        Some(other) => {
            return Err(patch_error(format!("unknown patch type: {other}")));
        }
    }
    for (k, v) in patch {
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(list)), Value::Array(remove)) = (orig.get_mut(field), v) {
                list.retain(|e| !remove.contains(e));
            }
            continue;
        }
        if k.starts_with('$') {
            continue;
        }
        if v.is_null() {
            orig.remove(k);
            continue;
        }
        path.push(k.clone());
        match (orig.get_mut(k), v) {
            (Some(Value::Object(o)), Value::Object(p)) => {
                if merge_map(o, p, path, lists)? == Outcome::Delete {
                    orig.remove(k);
                }
            }
            (Some(Value::Array(o)), Value::Array(p)) => {
                let names: Vec<&str> = path.iter().map(String::as_str).collect();
                match lists(&names) {
                    Some(ListMerge::Key(key)) => merge_keyed(o, p, key, path, lists)?,
                    Some(ListMerge::Set) => merge_set(o, p),
                    None => *o = p.iter().map(strip).collect(),
                }
            }
            (_, Value::Object(p)) if p.get("$patch").and_then(Value::as_str) == Some("delete") => {
                orig.remove(k);
            }
            _ => {
                orig.insert(k.clone(), strip(v));
            }
        }
        path.pop();
    }
    if let Some(Value::Array(retain)) = patch.get("$retainKeys") {
        let keep: Vec<&str> = retain.iter().filter_map(Value::as_str).collect();
        orig.retain(|k, _| keep.contains(&k.as_str()));
    }
    Ok(Outcome::Keep)
}

fn merge_set(orig: &mut Vec<Value>, patch: &[Value]) {
    for p in patch {
        if p.get("$patch").is_some() {
            continue;
        }
        if !orig.contains(p) {
            orig.push(p.clone());
        }
    }
}

fn merge_keyed(
    orig: &mut Vec<Value>,
    patch: &[Value],
    key: &str,
    path: &mut Vec<String>,
    lists: ListStrategy,
) -> ApiResult<()> {
    if patch
        .iter()
        .any(|p| p.get("$patch").and_then(Value::as_str) == Some("replace"))
    {
        *orig = strip(&Value::Array(patch.to_vec()))
            .as_array()
            .cloned()
            .unwrap_or_default();
        return Ok(());
    }
    for p in patch {
        let Value::Object(pm) = p else {
            if !orig.contains(p) {
                orig.push(p.clone());
            }
            continue;
        };
        let Some(kv) = pm.get(key) else {
            return Err(patch_error(format!(
                "map: {p} does not contain declared merge key: {key}"
            )));
        };
        let found = orig.iter().position(|o| o.get(key) == Some(kv));
        if pm.get("$patch").and_then(Value::as_str) == Some("delete") {
            orig.retain(|o| o.get(key) != Some(kv));
            continue;
        }
        match found {
            Some(i) => {
                if let Value::Object(om) = &mut orig[i]
                    && merge_map(om, pm, path, lists)? == Outcome::Delete
                {
                    orig.remove(i);
                }
            }
            None => orig.push(strip(p)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn smp(doc: Value, patch: Value) -> Value {
        let mut d = doc;
        strategic_merge(&mut d, &patch, pod_lists).unwrap();
        d
    }

    #[test]
    fn containers_merge_by_name_and_env_by_name() {
        let doc = json!({"spec": {"containers": [
            {"name": "a", "image": "x", "env": [{"name": "A", "value": "1"}]},
            {"name": "b", "image": "y"}
        ]}});
        let out = smp(
            doc,
            json!({"spec": {
                "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
                "containers": [{"name": "b", "image": "z"},
                               {"name": "a", "env": [{"name": "B", "value": "2"}]}]
            }}),
        );
        assert_eq!(
            out,
            json!({"spec": {"containers": [
                {"name": "a", "image": "x", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
                {"name": "b", "image": "z"}
            ]}})
        );
    }

    #[test]
    fn directives() {
        let doc = json!({"metadata": {"labels": {"a": "1", "b": "2"}, "finalizers": ["x", "y"]},
                         "spec": {"containers": [{"name": "a"}, {"name": "b"}], "tolerations": [{"key": "k"}]}});
        let out = smp(
            doc,
            json!({
                "metadata": {"labels": {"a": null, "c": "3"}, "$deleteFromPrimitiveList/finalizers": ["x"]},
                "spec": {"containers": [{"name": "b", "$patch": "delete"}], "tolerations": [{"key": "z"}]}
            }),
        );
        assert_eq!(
            out,
            json!({"metadata": {"labels": {"b": "2", "c": "3"}, "finalizers": ["y"]},
                   "spec": {"containers": [{"name": "a"}], "tolerations": [{"key": "z"}]}})
        );
        let out = smp(
            json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}]}}),
            json!({"spec": {"containers": [{"name": "c"}, {"$patch": "replace"}]}}),
        );
        assert_eq!(out, json!({"spec": {"containers": [{"name": "c"}]}}));
        let out = smp(
            json!({"spec": {"volumes": [{"name": "v", "emptyDir": {}}]}}),
            json!({"spec": {"volumes": [{"name": "v", "$retainKeys": ["name", "hostPath"], "hostPath": {"path": "/x"}}]}}),
        );
        assert_eq!(
            out,
            json!({"spec": {"volumes": [{"name": "v", "hostPath": {"path": "/x"}}]}})
        );
    }

    #[test]
    fn status_conditions_merge_by_type() {
        let out = smp(
            json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
            json!({"status": {"conditions": [{"type": "example.com/gate", "status": "True"}]}}),
        );
        assert_eq!(
            out["status"]["conditions"],
            json!([{"type": "Ready", "status": "False"}, {"type": "example.com/gate", "status": "True"}])
        );
    }

    #[test]
    fn json_and_merge_patches() {
        let doc = json!({"spec": {"activeDeadlineSeconds": 30, "containers": [{"name": "a"}]}});
        let out = apply_patch(
            &doc,
            PatchType::Json,
            br#"[{"op":"replace","path":"/spec/activeDeadlineSeconds","value":10}]"#,
            pod_lists,
        )
        .unwrap();
        assert_eq!(out["spec"]["activeDeadlineSeconds"], 10);
        let out = apply_patch(
            &doc,
            PatchType::Merge,
            br#"{"spec":{"containers":[{"name":"b"}]}}"#,
            pod_lists,
        )
        .unwrap();
        assert_eq!(out["spec"]["containers"], json!([{"name": "b"}]));
        let err = apply_patch(
            &doc,
            PatchType::Json,
            br#"[{"op":"remove","path":"/spec/nope"}]"#,
            pod_lists,
        )
        .unwrap_err();
        assert_eq!(err.code, 422);
    }
}
