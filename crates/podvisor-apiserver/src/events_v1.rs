//! `events.k8s.io/v1` Events: the same stored objects as core/v1 Events, in the newer
//! shape (kube-rs `Recorder`, client-go's `events` recorder, Python `EventsV1Api`). As the
//! API server does, one object is served in both versions, converted field by field
//! (`pkg/apis/events/v1/conversion.go`): `involvedObject`↔`regarding`, `message`↔`note`,
//! `source`↔`deprecatedSource`, `firstTimestamp`/`lastTimestamp`/`count`↔
//! `deprecatedFirstTimestamp`/`deprecatedLastTimestamp`/`deprecatedCount`,
//! `reportingComponent`↔`reportingController`; the rest is the same.
//!
//! The handlers are core's (`events.rs`, `objects.rs`): a request body is converted to
//! core/v1 before them, and what they answer (an object, a list, each watch event) to
//! `events.k8s.io/v1` after. Creates get the stricter validation of the new API
//! (`ValidateEventCreate` for `events.k8s.io/v1`): `eventTime`, `reportingController`,
//! `reportingInstance`, `action` and `reason` required, `note` at most 1 kB.

use axum::body::{Body, Bytes};
use axum::extract::Path as UrlPath;
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt as _;
use podvisor_api::ValidationErrors;
use podvisor_api::validation::{FieldError, Path};
use serde_json::{Map, Value, json};

use crate::db::EVENTS;
use crate::patch::{PatchType, apply_patch, plain_lists};
use crate::registry::delete;
use crate::registry::event::EVENT;
use crate::registry::write::{self, Part};
use crate::req::Req;
use crate::request::{content_type, parse_body};
use crate::status::{ApiError, ApiResult, json_response};
use crate::{db, objects};

/// The group-version.
pub(crate) const GROUP_VERSION: &str = "events.k8s.io/v1";

/// Field renames, core/v1 name first.
const RENAMES: [(&str, &str); 6] = [
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
];

/// `reportingComponent` in core/v1 is `reportingController` here.
const REPORTING: (&str, &str) = ("reportingComponent", "reportingController");

fn rename(obj: &Value, to_v1: bool) -> Value {
    let Some(map) = obj.as_object() else {
        return obj.clone();
    };
    let mut out = Map::new();
    for (k, v) in map {
        let renamed = RENAMES
            .iter()
            .chain(std::iter::once(&REPORTING))
            .find_map(|(core, v1)| {
                if to_v1 && k == core {
                    Some(*v1)
                } else if !to_v1 && k == v1 {
                    Some(*core)
                } else {
                    None
                }
            })
            .unwrap_or(k);
        out.insert(renamed.to_owned(), v.clone());
    }
    out.insert(
        "apiVersion".to_owned(),
        json!(if to_v1 { GROUP_VERSION } else { "v1" }),
    );
    // An empty source is left out, as `omitempty` leaves a zero `EventSource`.
    if to_v1
        && out.get("deprecatedSource").is_some_and(|s| {
            s.as_object()
                .is_some_and(|m| m.values().all(Value::is_null))
        })
    {
        out.remove("deprecatedSource");
    }
    Value::Object(out)
}

/// A stored (core/v1) Event as `events.k8s.io/v1` shows it.
pub(crate) fn to_v1(core: &Value) -> Value {
    rename(core, true)
}

/// An `events.k8s.io/v1` Event as core/v1 stores it.
pub(crate) fn from_v1(v1: &Value) -> Value {
    rename(v1, false)
}

/// Converts an answer's JSON: an Event, an `EventList`, a watch event; anything else
/// (a `Status`, a `Table`) is left as it is.
fn convert_answer(value: &mut Value) {
    match value.get("kind").and_then(Value::as_str) {
        Some("Event") => *value = to_v1(value),
        Some("EventList") => {
            value["apiVersion"] = json!(GROUP_VERSION);
            if let Some(items) = value.get_mut("items").and_then(Value::as_array_mut) {
                for item in items {
                    *item = to_v1(item);
                }
            }
        }
        _ => {
            if value.get("type").is_some()
                && let Some(object) = value.get_mut("object")
            {
                convert_answer(object);
            }
        }
    }
}

/// Converts a core handler's response: a whole JSON body, or a watch stream line by line.
async fn convert_response(resp: Response) -> Response {
    let is_json = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("application/json"));
    if !is_json {
        return resp;
    }
    let (parts, body) = resp.into_parts();
    if parts.headers.get(header::CONTENT_LENGTH).is_none() {
        // A watch: one JSON line per frame.
        let mapped = body.map_frame(|frame| {
            frame.map_data(|data: Bytes| {
                let mut out = Vec::with_capacity(data.len() + 64);
                for line in data.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                    match serde_json::from_slice::<Value>(line) {
                        Ok(mut event) => {
                            convert_answer(&mut event);
                            out.extend_from_slice(event.to_string().as_bytes());
                        }
                        Err(_) => out.extend_from_slice(line),
                    }
                    out.push(b'\n');
                }
                Bytes::from(out)
            })
        });
        return Response::from_parts(parts, Body::new(mapped));
    }
    let Ok(bytes) = body
        .collect()
        .await
        .map(http_body_util::Collected::to_bytes)
    else {
        return ApiError::internal("reading an answer").into_response();
    };
    let Ok(mut value) = serde_json::from_slice::<Value>(&bytes) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    convert_answer(&mut value);
    let mut resp = json_response(parts.status, &value);
    for (name, v) in &parts.headers {
        if name != header::CONTENT_LENGTH && name != header::CONTENT_TYPE {
            resp.headers_mut().append(name, v.clone());
        }
    }
    resp
}

/// `ValidateEventCreate` for `events.k8s.io/v1` (on the new shape).
fn validate_create(event: &Value) -> ApiResult<()> {
    let name = event
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let blank = |field: &str| {
        event
            .get(field)
            .is_none_or(|v| v.is_null() || v.as_str() == Some(""))
    };
    let mut errors = Vec::new();
    for field in [
        "eventTime",
        "reportingController",
        "reportingInstance",
        "action",
        "reason",
    ] {
        if blank(field) {
            errors.push(FieldError::required(&Path::new(field), ""));
        }
    }
    for (field, max) in [
        ("reportingController", 253),
        ("reportingInstance", 128),
        ("action", 128),
        ("reason", 128),
    ] {
        if event
            .get(field)
            .and_then(Value::as_str)
            .is_some_and(|s| s.len() > max)
        {
            errors.push(FieldError::too_long(&Path::new(field), max));
        }
    }
    if event
        .get("note")
        .and_then(Value::as_str)
        .is_some_and(|s| s.len() > 1024)
    {
        errors.push(FieldError::too_long(&Path::new("note"), 1024));
    }
    if let Some(t) = event.get("type").and_then(Value::as_str)
        && !matches!(t, "Normal" | "Warning")
    {
        errors.push(FieldError::invalid(
            &Path::new("type"),
            "",
            format!("has invalid value: {t}"),
        ));
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(&ValidationErrors::new(
            "Event", name, errors,
        )))
    }
}

/// Checks the body names this API's kind and version, and converts it to core/v1 JSON.
fn core_body(body: &[u8]) -> ApiResult<(Value, Vec<u8>)> {
    let mut value = parse_body(body)?;
    match value.get("apiVersion").and_then(Value::as_str) {
        None | Some("") | Some(GROUP_VERSION) => {}
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({other}) does not match the expected API version ({GROUP_VERSION})"
            )));
        }
    }
    if value.get("kind").is_none_or(Value::is_null) {
        value["kind"] = json!("Event");
    }
    let core = from_v1(&value);
    let bytes = serde_json::to_vec(&core).map_err(|e| ApiError::internal(e.to_string()))?;
    Ok((value, bytes))
}

/// The core/v1 names of this API's field selectors (`regarding.name` is
/// `involvedObject.name`, `reportingController` is `reportingComponent`).
fn core_field_selector(selector: &str) -> String {
    selector
        .split(',')
        .map(|term| {
            let term = term.trim();
            if let Some(rest) = term.strip_prefix("regarding.") {
                format!("involvedObject.{rest}")
            } else if let Some(rest) = term.strip_prefix("reportingController") {
                format!("reportingComponent{rest}")
            } else {
                term.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn core_req(mut req: Req) -> Req {
    if let Some(s) = req.params.field_selector.take() {
        req.params.field_selector = Some(core_field_selector(&s));
    }
    req
}

fn finish(r: ApiResult<Response>) -> Response {
    r.unwrap_or_else(IntoResponse::into_response)
}

/// `GET /apis/events.k8s.io`.
pub(crate) fn group() -> Value {
    json!({
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": "events.k8s.io",
        "versions": [{"groupVersion": GROUP_VERSION, "version": "v1"}],
        "preferredVersion": {"groupVersion": GROUP_VERSION, "version": "v1"},
    })
}

/// `GET /apis/events.k8s.io[/v1]`.
pub(crate) async fn discovery(uri: axum::http::Uri) -> Response {
    if uri.path().trim_end_matches('/').ends_with("/v1") {
        json_response(
            StatusCode::OK,
            &json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": GROUP_VERSION,
                    "resources": [{"name": "events", "singularName": "event", "namespaced": true,
                                   "kind": "Event", "shortNames": ["ev"],
                                   "verbs": ["create", "delete", "deletecollection", "get", "list",
                                             "patch", "update", "watch"]}]}),
        )
    } else {
        json_response(StatusCode::OK, &group())
    }
}

/// `/apis/events.k8s.io/v1/events` and its watch: every namespace's.
pub(crate) async fn all(req: Req, method: Method) -> Response {
    let req = core_req(req);
    let resp = match method {
        Method::GET => finish(objects::list(&req, EVENTS, None, None)),
        m => ApiError::method_not_supported("events", m.as_str()).into_response(),
    };
    convert_response(resp).await
}

/// `/apis/events.k8s.io/v1/watch/events`.
pub(crate) async fn watch_all(req: Req) -> Response {
    let req = core_req(req);
    convert_response(finish(objects::watch(&req, EVENTS, None, None))).await
}

/// `/apis/events.k8s.io/v1/namespaces/{ns}/events`.
pub(crate) async fn collection(
    req: Req,
    UrlPath(ns): UrlPath<String>,
    method: Method,
    crate::req::Body(body): crate::req::Body,
) -> Response {
    let req = core_req(req);
    let resp = match method {
        Method::GET => finish(objects::list(&req, EVENTS, Some(&ns), None)),
        Method::POST => finish(core_body(&body).and_then(|(v1, core)| {
            validate_create(&v1)?;
            write::create(&req, &EVENT, &ns, &core)
        })),
        Method::DELETE => finish(delete::delete_collection(&req, &EVENT, &ns, &body)),
        m => ApiError::method_not_supported("events", m.as_str()).into_response(),
    };
    convert_response(resp).await
}

/// `/apis/events.k8s.io/v1/watch/namespaces/{ns}/events[/{name}]`.
pub(crate) async fn watch_collection(req: Req, UrlPath(ns): UrlPath<String>) -> Response {
    let req = core_req(req);
    convert_response(finish(objects::watch(&req, EVENTS, Some(&ns), None))).await
}

/// `/apis/events.k8s.io/v1/namespaces/{ns}/events/{name}`.
pub(crate) async fn object(
    req: Req,
    UrlPath((ns, name)): UrlPath<(String, String)>,
    method: Method,
    crate::req::Body(body): crate::req::Body,
) -> Response {
    let resp = match method {
        Method::GET => finish(objects::get(&req, EVENTS, &ns, &name)),
        Method::PUT => finish(
            core_body(&body)
                .and_then(|(_, core)| write::update(&req, &EVENT, (&ns, &name), Part::Main, &core)),
        ),
        Method::PATCH => finish(patch(&req, &ns, &name, &body)),
        Method::DELETE => finish(delete::delete(&req, &EVENT, (&ns, &name), &body)),
        m => ApiError::method_not_supported("events", m.as_str()).into_response(),
    };
    convert_response(resp).await
}

/// A patch is of the `events.k8s.io/v1` shape: applied to the object as this API shows it,
/// then stored as core/v1 (guarded by the resourceVersion it was read at).
fn patch(req: &Req, ns: &str, name: &str, body: &[u8]) -> ApiResult<Response> {
    let patch_type = PatchType::from_content_type(&content_type(&req.headers))?;
    let old = db::get(req.state.store(), EVENTS, ns, name)?;
    let patched = apply_patch(&to_v1(&old), patch_type, body, plain_lists)?;
    let mut core = from_v1(&patched);
    core["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"].clone();
    let bytes = serde_json::to_vec(&core).map_err(|e| ApiError::internal(e.to_string()))?;
    write::update(req, &EVENT, (ns, name), Part::Main, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversion_round_trips_and_renames() {
        let core = json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "p.1", "namespace": "default"},
            "involvedObject": {"kind": "Pod", "name": "p"},
            "message": "Started container app", "reason": "Started", "type": "Normal",
            "source": {"component": "kubelet", "host": "n"},
            "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:01Z",
            "count": 2, "reportingComponent": "kubelet", "reportingInstance": "n",
        });
        let v1 = to_v1(&core);
        assert_eq!(v1["apiVersion"], GROUP_VERSION);
        assert_eq!(v1["regarding"]["name"], "p");
        assert_eq!(v1["note"], "Started container app");
        assert_eq!(v1["deprecatedSource"]["component"], "kubelet");
        assert_eq!(v1["deprecatedCount"], 2);
        assert_eq!(v1["reportingController"], "kubelet");
        assert!(v1.get("involvedObject").is_none() && v1.get("message").is_none());
        assert_eq!(from_v1(&v1), core);
        assert_eq!(
            core_field_selector("regarding.name=p,reportingController=kubelet,type=Normal"),
            "involvedObject.name=p,reportingComponent=kubelet,type=Normal"
        );
    }

    #[test]
    fn creates_need_what_the_new_api_requires() {
        let e = validate_create(
            &json!({"metadata": {"name": "x"}, "note": "n".repeat(1025), "type": "Odd"}),
        )
        .unwrap_err();
        for field in [
            "eventTime",
            "reportingController",
            "reportingInstance",
            "action",
            "reason",
        ] {
            assert!(
                e.message.contains(&format!("{field}: Required value")),
                "{}",
                e.message
            );
        }
        assert!(e.message.contains("note: Too long"), "{}", e.message);
        assert!(
            e.message
                .contains("type: Invalid value: \"\": has invalid value: Odd"),
            "{}",
            e.message
        );
    }
}
