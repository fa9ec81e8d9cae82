//! `podvisor apply -f FILE... [-n NS]`: `kubectl apply -f` for pods against the running
//! `podvisor serve`.
//!
//! Every manifest is first decoded (strictly), defaulted and validated here with
//! `podvisor-api`, so mistakes are reported with field paths before anything is sent. A pod
//! that does not exist is created; one that does is patched (strategic merge) with the
//! manifest, and labels or annotations dropped since the last apply are removed, using the
//! `kubectl.kubernetes.io/last-applied-configuration` annotation kubectl keeps (so kubectl
//! and podvisor can take turns). Prints `pod/NAME created|configured|unchanged`. Exit status
//! 0, or 1 if any manifest or request failed.

use std::io::Read;
use std::path::{Path, PathBuf};

use hyper::Method;
use k8s_openapi::api::core::v1::Pod;
use podvisor_api::{
    FeatureGates, apply_defaults, decode_pods, drop_disabled_fields, validate_pod_with_gates,
};
use serde_json::{Map, Value};

use crate::client::api::{go_json, pod_path, pods_path};
use crate::client::{ApiError, Body, Client, ConnArgs, block_on, report};

/// The annotation `kubectl apply` keeps the applied manifest in.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Arguments of `podvisor apply`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Manifest files (YAML, multi-document, or JSON; `-` for stdin).
    #[arg(short = 'f', long = "filename", required = true)]
    pub files: Vec<PathBuf>,
    /// The namespace for manifests without one (default: the kubeconfig context's).
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// The feature gates the local check follows (as `serve --feature-gates`; the server
    /// checks again with its own).
    #[arg(long, value_parser = super::parse_feature_gates, default_value = "")]
    pub feature_gates: FeatureGates,
    #[command(flatten)]
    pub conn: ConnArgs,
}

/// Runs `apply`; returns the exit code.
///
/// # Errors
///
/// None: failures are printed and give exit code 1.
pub fn run(args: &Args) -> anyhow::Result<i32> {
    // Everything is checked before anything is sent.
    let mut pods = Vec::new();
    let mut failed = false;
    for file in &args.files {
        match load(file, args.feature_gates) {
            Some(p) => pods.extend(p),
            None => failed = true,
        }
    }
    if failed {
        return Ok(1);
    }
    let client = match args.conn.client() {
        Ok(c) => c,
        Err(e) => return Ok(report(&e)),
    };
    let namespace = args
        .namespace
        .clone()
        .unwrap_or_else(|| client.default_namespace().to_owned());
    let result = block_on(async {
        let mut code = 0;
        for pod in &pods {
            if let Err(e) = apply_one(&client, pod, &namespace, args.namespace.is_some()).await {
                code = report(&e);
            }
        }
        code
    });
    Ok(result.unwrap_or_else(|e| report(&e)))
}

/// Decodes, defaults and validates one file; `None` after printing its problems.
fn load(file: &Path, gates: FeatureGates) -> Option<Vec<Pod>> {
    let source = file.display().to_string();
    let text = if file.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).map(|_| text)
    } else {
        std::fs::read_to_string(file)
    };
    let text = match text {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: reading {source}: {e}");
            return None;
        }
    };
    let pods = match decode_pods(&text, &source) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return None;
        }
    };
    let mut ok = true;
    for pod in &pods {
        if pod.metadata.name.as_deref().unwrap_or_default().is_empty() {
            eprintln!("error: from {source}: cannot use generate name with apply");
            ok = false;
            continue;
        }
        let mut defaulted = pod.clone();
        apply_defaults(&mut defaulted);
        drop_disabled_fields(&mut defaulted, None);
        if let Err(e) = validate_pod_with_gates(&defaulted, gates) {
            ok = false;
            eprintln!("{e}");
            for err in &e.errors {
                eprintln!("  * {}", err.to_string().replace('\n', "\n    "));
            }
        }
    }
    ok.then_some(pods)
}

async fn apply_one(
    client: &Client,
    pod: &Pod,
    default_namespace: &str,
    namespace_flag: bool,
) -> anyhow::Result<()> {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let namespace = match pod.metadata.namespace.as_deref() {
        Some(ns) if namespace_flag && ns != default_namespace => anyhow::bail!(
            "the namespace from the provided object {ns:?} does not match the namespace {default_namespace:?}. You must pass '--namespace={ns}' to perform this operation."
        ),
        Some(ns) => ns.to_owned(),
        None => default_namespace.to_owned(),
    };
    let manifest = manifest_of(pod, &namespace)?;
    let existing = match client.get(&pod_path(&namespace, &name)).await {
        Ok(v) => Some(v),
        Err(e)
            if e.downcast_ref::<ApiError>()
                .is_some_and(ApiError::is_not_found) =>
        {
            None
        }
        Err(e) => return Err(e),
    };
    let Some(existing) = existing else {
        client
            .call(
                Method::POST,
                &pods_path(Some(&namespace)),
                crate::client::JSON,
                Some(Body::json(&manifest)),
            )
            .await?;
        println!("pod/{name} created");
        return Ok(());
    };
    let patch = patch_for(&manifest, &existing);
    if is_subset(&patch, &existing) {
        println!("pod/{name} unchanged");
        return Ok(());
    }
    let path = pod_path(&namespace, &name);
    let body = serde_json::to_vec(&patch)?;
    let strategic = Body {
        content_type: "application/strategic-merge-patch+json",
        bytes: body.clone(),
    };
    match client
        .call(Method::PATCH, &path, crate::client::JSON, Some(strategic))
        .await
    {
        Ok(_) => {}
        // A server without strategic merge: a JSON merge patch does the same for pods'
        // mutable fields (labels, annotations, images, tolerations, deadlines).
        Err(e) if e.downcast_ref::<ApiError>().is_some_and(|a| a.code == 415) => {
            let merge = Body {
                content_type: "application/merge-patch+json",
                bytes: body,
            };
            client
                .call(Method::PATCH, &path, crate::client::JSON, Some(merge))
                .await?;
        }
        Err(e) => return Err(e),
    }
    println!("pod/{name} configured");
    Ok(())
}

/// The manifest as sent: the decoded pod with its namespace, carrying itself (without the
/// annotation) as the last-applied configuration, byte for byte as kubectl writes it (so
/// either tool sees the other's apply as its own).
fn manifest_of(pod: &Pod, namespace: &str) -> anyhow::Result<Value> {
    let mut manifest = serde_json::to_value(pod)?;
    let meta = child(as_map(&mut manifest), "metadata");
    meta.insert("namespace".to_owned(), Value::from(namespace));
    // kubectl records the object with its annotations map present (`{}` when empty).
    child(meta, "annotations").remove(LAST_APPLIED);
    let mut applied = go_json(&manifest);
    applied.push('\n');
    child(child(as_map(&mut manifest), "metadata"), "annotations")
        .insert(LAST_APPLIED.to_owned(), Value::from(applied));
    Ok(manifest)
}

/// The patch: the manifest, plus `null` for each label or annotation the previous apply set
/// that this one no longer has (the part of kubectl's three-way merge that matters for pods).
fn patch_for(manifest: &Value, existing: &Value) -> Value {
    let mut patch = manifest.clone();
    let previous: Option<Value> = existing
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(LAST_APPLIED))
        .and_then(Value::as_str)
        .and_then(|s| serde_json::from_str(s).ok());
    let Some(previous) = previous else {
        return patch;
    };
    for field in ["labels", "annotations"] {
        let Some(old) = previous
            .pointer(&format!("/metadata/{field}"))
            .and_then(Value::as_object)
        else {
            continue;
        };
        let new = child(child(as_map(&mut patch), "metadata"), field);
        for key in old.keys() {
            if !new.contains_key(key) {
                new.insert(key.clone(), Value::Null);
            }
        }
    }
    patch
}

/// Whether applying `patch` would change nothing in `existing`: every field it sets already
/// has that value (lists element by element), every field it deletes is absent.
fn is_subset(patch: &Value, existing: &Value) -> bool {
    match (patch, existing) {
        (Value::Object(p), Value::Object(e)) => p.iter().all(|(k, v)| match (v, e.get(k)) {
            (Value::Null, None | Some(Value::Null)) => true,
            (v, Some(ev)) => is_subset(v, ev),
            (_, None) => false,
        }),
        (Value::Array(p), Value::Array(e)) => {
            p.len() == e.len() && p.iter().zip(e).all(|(a, b)| is_subset(a, b))
        }
        (a, b) => a == b,
    }
}

/// `v` as an object (replacing anything else).
fn as_map(v: &mut Value) -> &mut Map<String, Value> {
    if !v.is_object() {
        *v = Value::Object(Map::new());
    }
    match v {
        Value::Object(map) => map,
        _ => unreachable!("made an object above"),
    }
}

/// `map[key]` as an object, created (replacing a non-object) if needed.
fn child<'a>(map: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    as_map(
        map.entry(key.to_owned())
            .or_insert_with(|| Value::Object(Map::new())),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> Pod {
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "a", "image": "busybox", "command": ["sleep", "9"]}]}
        }))
        .unwrap()
    }

    #[test]
    fn manifest_carries_its_own_last_applied_configuration() {
        let m = manifest_of(&pod(), "default").unwrap();
        assert_eq!(m["metadata"]["namespace"], "default");
        let applied = m["metadata"]["annotations"][LAST_APPLIED].as_str().unwrap();
        assert!(applied.ends_with("}\n"), "{applied}");
        let applied: Value = serde_json::from_str(applied).unwrap();
        assert_eq!(applied["metadata"]["labels"]["app"], "web");
        assert_eq!(applied["metadata"]["annotations"], json!({}));
        assert_eq!(applied["kind"], "Pod");
    }

    #[test]
    fn unchanged_when_the_server_already_has_everything() {
        let m = manifest_of(&pod(), "default").unwrap();
        let mut existing = m.clone();
        existing["metadata"]["uid"] = json!("u");
        existing["spec"]["containers"][0]["imagePullPolicy"] = json!("Always");
        existing["status"] = json!({"phase": "Running"});
        assert!(is_subset(&patch_for(&m, &existing), &existing));

        // A removed label is deleted by the patch.
        let mut relabeled = pod();
        relabeled.metadata.labels = None;
        let m2 = manifest_of(&relabeled, "default").unwrap();
        let patch = patch_for(&m2, &existing);
        assert_eq!(patch["metadata"]["labels"]["app"], Value::Null);
        assert!(!is_subset(&patch, &existing));

        // A changed image is a change.
        let mut changed = m.clone();
        changed["spec"]["containers"][0]["image"] = json!("busybox:2");
        assert!(!is_subset(&patch_for(&changed, &existing), &existing));
    }
}
