//! Helpers shared by the integration tests.
#![allow(dead_code)]

use podvisor_api::k8s_openapi::api::core::v1::Pod;
use podvisor_api::{apply_defaults, decode_pods, drop_disabled_fields, validate_pod};

/// Decodes one Pod from YAML (strict), applies the API defaults and drops
/// the fields of disabled gates, as the API server's create does.
pub fn pod(yaml: &str) -> Pod {
    let mut pod = pod_with_all_fields(yaml);
    drop_disabled_fields(&mut pod, None);
    pod
}

/// [`pod`] without dropping the fields of disabled gates.
pub fn pod_with_all_fields(yaml: &str) -> Pod {
    let mut pods = decode_pods(yaml, "test.yaml").expect("test manifest decodes");
    assert_eq!(pods.len(), 1, "one pod per test manifest");
    let mut pod = pods.remove(0);
    apply_defaults(&mut pod);
    pod
}

/// The validation errors of a manifest, each as Kubernetes prints it.
pub fn errors(yaml: &str) -> Vec<String> {
    match validate_pod(&pod(yaml)) {
        Ok(()) => Vec::new(),
        Err(e) => e.errors.iter().map(ToString::to_string).collect(),
    }
}

/// A valid pod named `web` with the given YAML spliced under `spec:`
/// (indented two spaces).
pub fn with_spec(spec: &str) -> String {
    format!("apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n{spec}")
}

/// Asserts that `yaml` yields exactly `expected` errors, in order.
#[track_caller]
pub fn assert_errors(yaml: &str, expected: &[&str]) {
    let got = errors(yaml);
    assert_eq!(got, expected, "manifest:\n{yaml}");
}

/// Asserts that `yaml` yields `expected` among its errors.
#[track_caller]
pub fn assert_has_error(yaml: &str, expected: &str) {
    let got = errors(yaml);
    assert!(
        got.iter().any(|e| e == expected),
        "expected error {expected:?}\ngot: {got:#?}\nmanifest:\n{yaml}"
    );
}
