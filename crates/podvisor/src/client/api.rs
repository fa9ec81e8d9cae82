//! What the client subcommands share: pod URLs, `pods`/`pod/NAME` arguments, and kubectl's
//! `-o json|yaml|name` printing.

use anyhow::{anyhow, bail};
use serde_json::Value;

use super::query_escape;

/// `/api/v1/namespaces/{ns}/pods`, or `/api/v1/pods` for all namespaces.
pub fn pods_path(namespace: Option<&str>) -> String {
    match namespace {
        Some(ns) => format!("/api/v1/namespaces/{}/pods", query_escape(ns)),
        None => "/api/v1/pods".to_owned(),
    }
}

/// `/api/v1/namespaces/{ns}/pods/{name}`.
pub fn pod_path(namespace: &str, name: &str) -> String {
    format!("{}/{}", pods_path(Some(namespace)), query_escape(name))
}

fn is_pod_type(t: &str) -> bool {
    matches!(t, "pod" | "pods" | "po" | "Pod" | "Pods")
}

/// The pod names in `TYPE [NAME...]` or `pod/NAME...` arguments, as kubectl accepts them.
///
/// # Errors
///
/// Any type other than pods (kubectl's `the server doesn't have a resource type`), or a
/// `TYPE/NAME` argument mixed with a separate type.
pub fn pod_names(resource: &str, rest: &[String]) -> anyhow::Result<Vec<String>> {
    let slashed = |arg: &str| -> anyhow::Result<String> {
        let (t, name) = arg
            .split_once('/')
            .ok_or_else(|| anyhow!("there is no need to specify a resource type as a separate argument when passing arguments in resource/name form (e.g. 'kubectl get resource/<resource_name>' instead of 'kubectl get resource resource/<resource_name>'"))?;
        if !is_pod_type(t) {
            bail!("the server doesn't have a resource type {t:?}");
        }
        Ok(name.to_owned())
    };
    if resource.contains('/') {
        return std::iter::once(resource)
            .chain(rest.iter().map(String::as_str))
            .map(slashed)
            .collect();
    }
    if !is_pod_type(resource) {
        bail!("the server doesn't have a resource type {resource:?}");
    }
    if let Some(mixed) = rest.iter().find(|a| a.contains('/')) {
        slashed(mixed)?;
        bail!(
            "there is no need to specify a resource type as a separate argument when passing arguments in resource/name form (e.g. 'kubectl get resource/<resource_name>' instead of 'kubectl get resource resource/<resource_name>'"
        );
    }
    Ok(rest.to_vec())
}

/// Drops `metadata.managedFields` (kubectl hides them unless `--show-managed-fields`).
pub fn strip_managed_fields(v: &mut Value) {
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
}

/// A list answer as kubectl prints it: `kind: List` with each item's `apiVersion`/`kind`
/// filled in.
pub fn as_list(list: &Value, kind: &str) -> Value {
    let items: Vec<Value> = list
        .get("items")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|item| with_kind(item.clone(), kind))
        .collect();
    serde_json::json!({
        "apiVersion": "v1",
        "items": items,
        "kind": "List",
        "metadata": {"resourceVersion": ""},
    })
}

/// The object with `apiVersion: v1` and `kind` set (list items come without them) and
/// without managed fields.
pub fn with_kind(mut item: Value, kind: &str) -> Value {
    if let Some(obj) = item.as_object_mut() {
        obj.entry("apiVersion").or_insert_with(|| Value::from("v1"));
        obj.entry("kind").or_insert_with(|| Value::from(kind));
    }
    strip_managed_fields(&mut item);
    item
}

/// kubectl's `-o json`: four-space indentation, then a newline, with Go's HTML-safe escapes.
pub fn json_text(v: &Value) -> String {
    use serde::Serialize;
    let mut out = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut ser = serde_json::Serializer::with_formatter(&mut out, formatter);
    // Serializing a `Value` into memory cannot fail.
    let _ = v.serialize(&mut ser);
    let mut text = go_escapes(&String::from_utf8(out).unwrap_or_default());
    text.push('\n');
    text
}

/// Compact JSON as Go's `encoding/json` writes it (HTML-safe escapes).
pub fn go_json(v: &Value) -> String {
    go_escapes(&v.to_string())
}

/// Go's `encoding/json` escapes `<`, `>`, `&`, U+2028 and U+2029 in strings; in JSON text
/// they can only occur inside strings, so replacing them everywhere is exact.
fn go_escapes(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// kubectl's `-o yaml` (see [`super::yaml`]).
pub fn yaml_text(v: &Value) -> String {
    super::yaml::to_yaml(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pod_name_arguments() {
        let names = |r: &str, rest: &[&str]| {
            pod_names(r, &rest.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>())
        };
        assert_eq!(names("pods", &[]).unwrap(), Vec::<String>::new());
        assert_eq!(names("po", &["a", "b"]).unwrap(), ["a", "b"]);
        assert_eq!(names("pod/a", &["pods/b"]).unwrap(), ["a", "b"]);
        assert_eq!(
            names("deployments", &[]).unwrap_err().to_string(),
            "the server doesn't have a resource type \"deployments\""
        );
        assert!(names("pod", &["pod/a"]).is_err());
        assert_eq!(
            pod_path("default", "web"),
            "/api/v1/namespaces/default/pods/web"
        );
    }

    #[test]
    fn json_and_yaml_like_kubectl() {
        let list = json!({"kind": "PodList", "metadata": {"resourceVersion": "7"},
                          "items": [{"metadata": {"name": "a", "managedFields": [{}]}}]});
        let v = as_list(&list, "Pod");
        assert_eq!(
            json_text(&v),
            "{\n    \"apiVersion\": \"v1\",\n    \"items\": [\n        {\n            \"apiVersion\": \"v1\",\n            \"kind\": \"Pod\",\n            \"metadata\": {\n                \"name\": \"a\"\n            }\n        }\n    ],\n    \"kind\": \"List\",\n    \"metadata\": {\n        \"resourceVersion\": \"\"\n    }\n}\n"
        );
        assert_eq!(
            yaml_text(&v),
            "apiVersion: v1\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata:\n    name: a\nkind: List\nmetadata:\n  resourceVersion: \"\"\n"
        );
    }
}

#[cfg(test)]
mod escape_tests {
    use super::*;

    #[test]
    fn html_characters_are_escaped_like_go() {
        let v = serde_json::json!({"cmd": "a > b && c < d"});
        assert_eq!(
            go_json(&v),
            r#"{"cmd":"a \u003e b \u0026\u0026 c \u003c d"}"#
        );
    }
}
