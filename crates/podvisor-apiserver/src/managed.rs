//! `metadata.managedFields`, recorded minimally: one entry per (manager, operation,
//! subresource) with the `FieldsV1` set of the fields the request carried. Server-side apply
//! reads them back for two things: [`prune`] removes what a manager applied before and no
//! longer applies, unless another manager owns it; [`conflicts`] finds the fields an apply
//! would change that other managers own (a 409 `Apply failed with 1 conflict: ...` unless
//! `force`, and with `force` [`take_over`] moves them to the applier).

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

/// The part of `source` (a request object, patch or applied configuration) that `typed` (the
/// object it decoded to) kept: fields dropped as unknown are not managed by anyone. List
/// elements are paired by their merge key where the list has one, else by position.
pub(crate) fn known_only(source: &Value, typed: &Value, lists: ListStrategy) -> Value {
    known_at(source, typed, &mut Vec::new(), lists)
}

fn known_at(source: &Value, typed: &Value, path: &mut Vec<String>, lists: ListStrategy) -> Value {
    match (source, typed) {
        (Value::Object(s), Value::Object(t)) => Value::Object(
            s.iter()
                .filter_map(|(k, v)| {
                    let tv = t.get(k)?;
                    path.push(k.clone());
                    let kept = known_at(v, tv, path, lists);
                    path.pop();
                    // An object whose every field was unknown sets nothing (but `{}` as
                    // sent, such as `emptyDir: {}`, does).
                    let emptied = v.as_object().is_some_and(|m| !m.is_empty())
                        && kept.as_object().is_some_and(serde_json::Map::is_empty);
                    (!emptied).then(|| (k.clone(), kept))
                })
                .collect(),
        ),
        (Value::Array(s), Value::Array(t)) => {
            let names: Vec<&str> = path.iter().map(String::as_str).collect();
            let key = match lists(&names) {
                Some(ListMerge::Key(key)) => Some(key),
                _ => None,
            };
            let kept = s
                .iter()
                .enumerate()
                .filter_map(|(i, item)| {
                    let pair = match key {
                        Some(key) => t
                            .iter()
                            .find(|x| item.get(key).is_some() && x.get(key) == item.get(key)),
                        None => t.get(i),
                    };
                    pair.map(|tv| known_at(item, tv, path, lists))
                })
                .collect();
            Value::Array(kept)
        }
        _ => source.clone(),
    }
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

/// Server-side apply's removal rule: the fields `manager` applied last time (its `Apply` entry)
/// that `applied` (the `FieldsV1` of the new configuration) no longer holds, and that no other
/// manager's entry holds, are removed from `obj`. A list element goes as a whole (its `.`).
pub(crate) fn prune(obj: &mut Value, manager: &str, applied: &Value) {
    let entries = obj
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let is_previous = |e: &Value| {
        e.get("manager").and_then(Value::as_str) == Some(manager)
            && e.get("operation").and_then(Value::as_str) == Some("Apply")
            && e.get("subresource").is_none_or(Value::is_null)
    };
    let Some(previous) = entries.iter().find(|e| is_previous(e)) else {
        return;
    };
    let others: Vec<&Value> = entries
        .iter()
        .filter(|e| !is_previous(e))
        .filter_map(|e| e.get("fieldsV1"))
        .collect();
    let mut gone = Vec::new();
    dropped_leaves(
        previous.get("fieldsV1").unwrap_or(&Value::Null),
        Some(applied),
        &mut Vec::new(),
        &mut gone,
    );
    // Deepest first, so removing a list element does not shift a path still to come.
    gone.sort_by_key(|path| std::cmp::Reverse(path.len()));
    for path in gone {
        if !others.iter().any(|o| owns(o, &path)) {
            remove_path(obj, &path);
        }
    }
}

/// The leaves of `before` (paths of `f:`/`k:`/`v:` keys, a list element ending in `.`) that
/// `after` does not hold.
fn dropped_leaves(
    before: &Value,
    after: Option<&Value>,
    path: &mut Vec<String>,
    out: &mut Vec<Vec<String>>,
) {
    let Value::Object(children) = before else {
        return;
    };
    // A leaf, or a list element no longer applied at all: it goes as a whole.
    if children.is_empty() || (after.is_none() && children.contains_key(".")) {
        if after.is_none() {
            out.push(path.clone());
        }
        return;
    }
    for (key, child) in children {
        let next = after.and_then(|a| a.get(key));
        if key == "." {
            if next.is_none() {
                out.push(path.clone());
            }
            continue;
        }
        path.push(key.clone());
        dropped_leaves(child, next, path, out);
        path.pop();
    }
}

/// Whether a `FieldsV1` set holds `path` or anything below it.
fn owns(set: &Value, path: &[String]) -> bool {
    path.iter()
        .try_fold(set, |node, key| node.get(key))
        .is_some()
}

/// Removes the field or list element a `FieldsV1` path names, if the object has it.
fn remove_path(obj: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut node = obj;
    for key in parents {
        let Some(next) = step(node, key) else { return };
        node = next;
    }
    match (node, last.split_at(2)) {
        (Value::Object(m), ("f:", name)) => {
            m.remove(name);
        }
        (Value::Array(items), (_, _)) => {
            if let Some(i) = items.iter().position(|item| matches(item, last)) {
                items.remove(i);
            }
        }
        _ => {}
    }
}

/// The child a path key names: a field (`f:`) or a list element (`k:` by key fields, `v:` by
/// value).
fn step<'a>(node: &'a mut Value, key: &str) -> Option<&'a mut Value> {
    match node {
        Value::Object(m) => m.get_mut(key.strip_prefix("f:")?),
        Value::Array(items) => items.iter_mut().find(|item| matches(item, key)),
        _ => None,
    }
}

fn matches(item: &Value, key: &str) -> bool {
    if let Some(fields) = key.strip_prefix("k:") {
        let Ok(Value::Object(want)) = serde_json::from_str::<Value>(fields) else {
            return false;
        };
        return want.iter().all(|(k, v)| item.get(k) == Some(v));
    }
    key.strip_prefix("v:")
        .and_then(|v| serde_json::from_str::<Value>(v).ok())
        .is_some_and(|v| &v == item)
}

/// The value a `FieldsV1` path names in an object, if it has one.
fn lookup<'a>(obj: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(obj, |node, key| match node {
        Value::Object(m) => m.get(key.strip_prefix("f:")?),
        Value::Array(items) => items.iter().find(|item| matches(item, key)),
        _ => None,
    })
}

/// The leaf paths of a `FieldsV1` set (a list element's own `.` is not a leaf value).
fn leaves(set: &Value, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    let Value::Object(children) = set else { return };
    if children.is_empty() {
        out.push(path.clone());
        return;
    }
    for (key, child) in children {
        if key == "." {
            continue;
        }
        path.push(key.clone());
        leaves(child, path, out);
        path.pop();
    }
}

/// A `FieldsV1` path as structured-merge-diff prints it: `.spec.containers[name="app"].image`.
fn path_text(path: &[String]) -> String {
    let mut out = String::new();
    for key in path {
        if let Some(field) = key.strip_prefix("f:") {
            out.push('.');
            out.push_str(field);
        } else if let Some(fields) = key.strip_prefix("k:") {
            let Ok(Value::Object(keys)) = serde_json::from_str::<Value>(fields) else {
                continue;
            };
            let parts: Vec<String> = keys.iter().map(|(k, v)| format!("{k}={v}")).collect();
            out.push('[');
            out.push_str(&parts.join(","));
            out.push(']');
        } else if let Some(value) = key.strip_prefix("v:") {
            out.push_str(&format!("[={value}]"));
        }
    }
    out
}

/// How the API server names a manager in a conflict (`printManager`).
fn manager_text(entry: &Value) -> String {
    let s = |k: &str| entry.get(k).and_then(Value::as_str).unwrap_or("");
    let mut text = format!("{:?}", s("manager"));
    if !s("subresource").is_empty() {
        text.push_str(&format!(" with subresource {:?}", s("subresource")));
    }
    if s("operation") == "Update" {
        text.push_str(&format!(" using {}", s("apiVersion")));
        if !s("time").is_empty() {
            text.push_str(&format!(" at {}", s("time")));
        }
    }
    text
}

fn is_applier(entry: &Value, manager: &str) -> bool {
    entry.get("manager").and_then(Value::as_str) == Some(manager)
        && entry.get("operation").and_then(Value::as_str) == Some("Apply")
        && entry.get("subresource").is_none_or(Value::is_null)
}

/// Server-side apply's conflicts: the fields `applied_fields` sets to a value other than the
/// one `current` has, that a manager other than `manager`'s apply owns. `Err` is the API
/// server's 409 (`NewApplyConflict`), unless `force`. `Ok(true)`: the apply takes the
/// fields over ([`take_over`]) — forced, or (the API server's `lastAppliedManager`) the
/// manager is `kubectl` and every conflict is a field of the live object's
/// `kubectl.kubernetes.io/last-applied-configuration`, so moving from client-side to
/// server-side apply meets no conflict.
pub(crate) fn conflicts(
    current: &Value,
    manager: &str,
    applied: &Value,
    applied_fields: &Value,
    force: bool,
    lists: ListStrategy,
) -> Result<bool, crate::status::ApiError> {
    if force {
        return Ok(true);
    }
    let entries = current
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut paths = Vec::new();
    leaves(applied_fields, &mut Vec::new(), &mut paths);
    let mut found: Vec<(String, String)> = Vec::new();
    for path in &paths {
        if lookup(applied, path) == lookup(current, path) {
            continue;
        }
        for entry in entries.iter().filter(|e| !is_applier(e, manager)) {
            if entry.get("fieldsV1").is_some_and(|f| owns(f, path)) {
                found.push((manager_text(entry), path_text(path)));
            }
        }
    }
    if found.is_empty() {
        return Ok(false);
    }
    if manager == "kubectl"
        && let Some(last) = current
            .pointer("/metadata/annotations/kubectl.kubernetes.io~1last-applied-configuration")
            .and_then(Value::as_str)
            .and_then(|text| serde_json::from_str::<Value>(text).ok())
    {
        let allowed = fields_v1(&last, false, lists);
        let forgiven = paths
            .iter()
            .filter(|p| lookup(applied, p) != lookup(current, p))
            .all(|p| {
                owns(&allowed, p)
                    || entries
                        .iter()
                        .filter(|e| !is_applier(e, manager))
                        .all(|e| e.get("fieldsV1").is_none_or(|f| !owns(f, p)))
            });
        if forgiven {
            return Ok(true);
        }
        found.retain(|(_, text)| {
            !paths
                .iter()
                .any(|p| path_text(p) == *text && owns(&allowed, p))
        });
    }
    let message = if let [(who, path)] = found.as_slice() {
        format!("Apply failed with 1 conflict: conflict with {who}: {path}")
    } else {
        let mut by_manager: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
        for (who, path) in &found {
            by_manager.entry(who).or_default().push(path);
        }
        let mut lines = Vec::new();
        for (who, paths) in by_manager {
            lines.push(format!("conflicts with {who}:"));
            lines.extend(paths.iter().map(|p| format!("- {p}")));
        }
        format!(
            "Apply failed with {} conflicts: {}",
            found.len(),
            lines.join("\n")
        )
    };
    let causes: Vec<Value> = found
        .iter()
        .map(|(who, path)| {
            json!({"reason": "FieldManagerConflict", "message": format!("conflict with {who}"), "field": path})
        })
        .collect();
    Err(crate::status::ApiError::apply_conflict(message, causes))
}

/// A forced apply takes the applied fields from every other manager: they are removed from
/// the other entries of `obj`'s `managedFields` (entries left empty go).
pub(crate) fn take_over(obj: &mut Value, manager: &str, applied_fields: &Value) {
    let mut paths = Vec::new();
    leaves(applied_fields, &mut Vec::new(), &mut paths);
    let Some(entries) = obj
        .pointer_mut("/metadata/managedFields")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for entry in entries.iter_mut().filter(|e| !is_applier(e, manager)) {
        let Some(fields) = entry.get_mut("fieldsV1") else {
            continue;
        };
        for path in &paths {
            remove_set_path(fields, path);
        }
    }
    entries.retain(|e| {
        is_applier(e, manager)
            || e.get("fieldsV1")
                .and_then(Value::as_object)
                .is_some_and(|m| !m.is_empty())
    });
}

/// Removes `path` from a `FieldsV1` set, and the parents it leaves empty.
fn remove_set_path(set: &mut Value, path: &[String]) -> bool {
    let Some((first, rest)) = path.split_first() else {
        return false;
    };
    let Some(m) = set.as_object_mut() else {
        return false;
    };
    if rest.is_empty() {
        m.remove(first);
    } else if let Some(child) = m.get_mut(first) {
        remove_set_path(child, rest);
        let empty = child
            .as_object()
            .is_some_and(|c| c.is_empty() || (c.len() == 1 && c.contains_key(".")));
        if empty {
            m.remove(first);
        }
    }
    m.is_empty()
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

    #[test]
    fn prune_removes_what_only_this_manager_applied() {
        let first = json!({
            "metadata": {"name": "web", "labels": {"app": "web", "tier": "db", "team": "a"},
                         "finalizers": ["example.com/x"]},
            "spec": {"containers": [{"name": "app", "image": "busybox", "args": ["1"]},
                                    {"name": "side", "image": "busybox"}]}
        });
        let mut obj = first.clone();
        record(
            &mut obj,
            "kubectl",
            "Apply",
            None,
            fields_v1(&first, false, pod_lists),
            Timestamp::UNIX_EPOCH,
        );
        // Another manager set `team` too: it stays.
        record(
            &mut obj,
            "labeler",
            "Update",
            None,
            json!({"f:metadata": {"f:labels": {"f:team": {}}}}),
            Timestamp::UNIX_EPOCH,
        );
        let second = json!({
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "app", "image": "busybox"}]}
        });
        prune(&mut obj, "kubectl", &fields_v1(&second, false, pod_lists));
        assert_eq!(
            obj["metadata"]["labels"],
            json!({"app": "web", "team": "a"})
        );
        assert!(
            obj["metadata"]
                .get("finalizers")
                .is_none_or(|f| f == &json!([]))
        );
        assert_eq!(
            obj["spec"]["containers"],
            json!([{"name": "app", "image": "busybox"}])
        );
        // A manager that never applied prunes nothing.
        let before = obj.clone();
        prune(&mut obj, "other", &json!({}));
        assert_eq!(obj, before);
    }
}
