//! `node.k8s.io/v1` RuntimeClasses, served read-only: one per runtime class of this node
//! (`oci`, `process`, each its own handler), as a cluster administrator would have created
//! them for the node's CRI handlers. Pods pick one with `runtimeClassName`; the admission of
//! a pod naming another is in `pods/`.

use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use jiff::Timestamp;
use podvisor_runtime::process::RuntimeClass;
use serde_json::{Value, json};
use std::sync::OnceLock;

use crate::request::{Representation, representation};
use crate::status::{ApiError, json_response};

/// The group and version.
pub(crate) const GROUP_VERSION: &str = "node.k8s.io/v1";

/// When the objects came to be: this server's first answer about them.
fn created() -> Timestamp {
    static CREATED: OnceLock<Timestamp> = OnceLock::new();
    *CREATED.get_or_init(Timestamp::now)
}

fn object(class: RuntimeClass) -> Value {
    let name = class.name();
    json!({
        "apiVersion": GROUP_VERSION,
        "kind": "RuntimeClass",
        "metadata": {
            "name": name,
            // Stable across restarts: the objects are the node's, not stored.
            "uid": format!("00000000-0000-4000-8000-{:012x}", name.bytes().fold(0_u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b))) & 0xffff_ffff_ffff),
            "resourceVersion": "1",
            "creationTimestamp": created().strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
        },
        "handler": name,
    })
}

/// `GET /apis/node.k8s.io`.
pub(crate) fn group() -> Value {
    json!({
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": "node.k8s.io",
        "versions": [{"groupVersion": GROUP_VERSION, "version": "v1"}],
        "preferredVersion": {"groupVersion": GROUP_VERSION, "version": "v1"},
    })
}

/// `GET /apis/node.k8s.io/v1`.
pub(crate) fn resources() -> Value {
    json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": GROUP_VERSION,
        "resources": [{
            "name": "runtimeclasses",
            "singularName": "runtimeclass",
            "namespaced": false,
            "kind": "RuntimeClass",
            "verbs": ["get", "list"],
        }],
    })
}

/// The age column as kubectl prints it (`HumanDuration`).
fn age(now: Timestamp, then: Timestamp) -> String {
    let secs = now.duration_since(then).as_secs().max(0);
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 600 => format!("{}m{}s", s / 60, s % 60),
        s if s < 3 * 3600 => format!("{}m", s / 60),
        s if s < 8 * 3600 => format!("{}h{}m", s / 3600, (s % 3600) / 60),
        s if s < 48 * 3600 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

fn table(objects: &[Value], beta: bool) -> Value {
    let now = Timestamp::now();
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            json!({
                "cells": [o["metadata"]["name"], o["handler"], age(now, created())],
                "object": {"kind": "PartialObjectMetadata",
                           "apiVersion": "meta.k8s.io/v1",
                           "metadata": o["metadata"]},
            })
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": if beta { "meta.k8s.io/v1beta1" } else { "meta.k8s.io/v1" },
        "metadata": {"resourceVersion": "1"},
        "columnDefinitions": [
            {"name": "Name", "type": "string", "format": "name", "description": "Name must be unique within a namespace.", "priority": 0},
            {"name": "Handler", "type": "string", "format": "", "description": "handler specifies the underlying runtime and configuration that the CRI implementation will use to handle pods of this class.", "priority": 0},
            {"name": "Age", "type": "string", "format": "", "description": "CreationTimestamp is a timestamp representing the server time when this object was created.", "priority": 0},
        ],
        "rows": rows,
    })
}

/// Any request on `/apis/node.k8s.io/v1/runtimeclasses[/{name}]`.
pub(crate) fn serve(method: &Method, headers: &HeaderMap, name: Option<&str>) -> Response {
    if method != Method::GET {
        return ApiError::method_not_supported("runtimeclasses.node.k8s.io", method.as_str())
            .into_response();
    }
    let objects: Vec<Value> = match name {
        None => RuntimeClass::ALL.into_iter().map(object).collect(),
        Some(name) => match RuntimeClass::from_name(name) {
            Some(class) => vec![object(class)],
            None => {
                return ApiError::not_found("runtimeclasses.node.k8s.io", name).into_response();
            }
        },
    };
    let body = match (representation(headers), name) {
        (Representation::Table { beta }, _) => table(&objects, beta),
        (_, Some(_)) => objects.into_iter().next().unwrap_or(Value::Null),
        (_, None) => json!({
            "kind": "RuntimeClassList",
            "apiVersion": GROUP_VERSION,
            "metadata": {"resourceVersion": "1"},
            "items": objects,
        }),
    };
    json_response(StatusCode::OK, &body)
}
