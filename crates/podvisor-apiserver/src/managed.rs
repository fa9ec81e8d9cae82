//! `metadata.managedFields`, recorded minimally: one entry per (manager, operation,
//! subresource) with the `FieldsV1` set of the fields the request carried. Nothing reads
//! them back (server-side apply here does not prune or detect conflicts).

use axum::http::HeaderMap;
use axum::http::header::USER_AGENT;
use jiff::Timestamp;
use serde_json::{Map, Value, json};

use crate::patch::{ListMerge, ListStrategy};
use crate::request::{Params, time_text};

/// The manager name: `fieldManager`, else the User-Agent up to its first `/` (as the API
/// server derives it).
pub(crate) fn manager_name(params: &Params, headers: &HeaderMap) -> String {
    if let Some(m) = params.field_manager.as_deref().filter(|m| !m.is_empty()) {
        return m.to_owned();
    }
    headers
        .get(USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .map(|ua| ua.split('/').next().unwrap_or(ua).to_owned())
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

fn fields_of(v: &Value, path: &mut Vec<String>, lists: ListStrategy) -> Map<String, Value> {
    let mut out = Map::new();
    let Value::Object(m) = v else { return out };
    for (k, child) in m {
        path.push(k.clone());
        let entry = match child {
            Value::Object(_) => Value::Object(fields_of(child, path, lists)),
            Value::Array(items) => {
                let names: Vec<&str> = path.iter().map(String::as_str).collect();
                let mut set = Map::new();
                match lists(&names) {
                    Some(ListMerge::Key(key)) => {
                        for item in items {
                            let Some(kv) = item.get(key) else { continue };
                            let mut f = fields_of(item, path, lists);
                            f.insert(".".to_owned(), json!({}));
                            set.insert(format!("k:{}", json!({ key: kv })), Value::Object(f));
                        }
                    }
                    Some(ListMerge::Set) => {
                        for item in items {
                            set.insert(format!("v:{item}"), json!({}));
                        }
                    }
                    None => {}
                }
                Value::Object(set)
            }
            _ => json!({}),
        };
        out.insert(format!("f:{k}"), entry);
        path.pop();
    }
    out
}

/// The `FieldsV1` of a request object: everything but identity and server-set metadata;
/// `status` only for the status subresource, and then nothing else.
pub(crate) fn fields_v1(obj: &Value, status_only: bool, lists: ListStrategy) -> Value {
    let mut trimmed = Map::new();
    if let Value::Object(m) = obj {
        for (k, v) in m {
            match k.as_str() {
                "apiVersion" | "kind" => {}
                "status" if !status_only => {}
                "status" => {
                    trimmed.insert(k.clone(), v.clone());
                }
                _ if status_only => {}
                "metadata" => {
                    let mut meta = Map::new();
                    for key in ["labels", "annotations", "finalizers", "ownerReferences"] {
                        if let Some(x) = v.get(key) {
                            meta.insert(key.to_owned(), x.clone());
                        }
                    }
                    if !meta.is_empty() {
                        trimmed.insert(k.clone(), Value::Object(meta));
                    }
                }
                _ => {
                    trimmed.insert(k.clone(), v.clone());
                }
            }
        }
    }
    Value::Object(fields_of(&Value::Object(trimmed), &mut Vec::new(), lists))
}

/// Records (replaces) the entry of `manager` for `operation` (`Apply` or `Update`) and
/// `subresource` in `obj`.
pub(crate) fn record(
    obj: &mut Value,
    manager: &str,
    operation: &str,
    subresource: Option<&str>,
    fields: Value,
    now: Timestamp,
) {
    let mut entry = json!({
        "manager": manager,
        "operation": operation,
        "apiVersion": "v1",
        "time": time_text(now),
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    });
    if let Some(s) = subresource {
        entry["subresource"] = json!(s);
    }
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let list = meta
        .entry("managedFields")
        .or_insert_with(|| Value::Array(Vec::new()));
    if !list.is_array() {
        *list = Value::Array(Vec::new());
    }
    if let Value::Array(entries) = list {
        let same = |e: &Value| {
            e.get("manager").and_then(Value::as_str) == Some(manager)
                && e.get("operation").and_then(Value::as_str) == Some(operation)
                && e.get("subresource").and_then(Value::as_str) == subresource
        };
        match entries.iter().position(same) {
            Some(i) => entries[i] = entry,
            None => entries.push(entry),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patch::pod_lists;

    #[test]
    fn fields_of_an_applied_pod() {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "app", "image": "busybox", "command": ["sleep", "1"]}]},
            "status": {"phase": "Pending"}
        });
        assert_eq!(
            fields_v1(&pod, false, pod_lists),
            json!({
                "f:metadata": {"f:labels": {"f:app": {}}},
                "f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {
                    ".": {}, "f:command": {}, "f:image": {}, "f:name": {}
                }}}
            })
        );
        let mut obj = pod.clone();
        record(
            &mut obj,
            "kubectl",
            "Apply",
            None,
            json!({}),
            Timestamp::UNIX_EPOCH,
        );
        record(
            &mut obj,
            "kubectl",
            "Apply",
            None,
            json!({"f:x": {}}),
            Timestamp::UNIX_EPOCH,
        );
        assert_eq!(
            obj["metadata"]["managedFields"].as_array().unwrap().len(),
            1
        );
    }
}
