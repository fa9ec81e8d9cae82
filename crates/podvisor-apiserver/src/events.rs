//! Events: create, update, patch and delete through the API (stored as sent), their expiry
//! (`--event-ttl`), and the scheduler's `Scheduled` event at binding. The kubelet's recorder
//! (correlation, spam filter, count aggregation) is the node agent's (`podvisor_agent::node::
//! Recorder`), as upstream's lives in the kubelet.

use axum::http::StatusCode;
use axum::response::Response;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Event as ApiEvent, Pod};
use podvisor_lifecycle::Event;
use podvisor_store::{Store, StoreError, Txn};
use serde_json::{Value, json};

use crate::db::{self, EVENTS};
use crate::meta::{check_name, check_namespace, pinned_rv, type_meta};
use crate::objects::respond;
use crate::patch::{PatchType, apply_patch, plain_lists};
use crate::req::Req;
use crate::request::{content_type, name_suffix, new_uid, now, parse_body, time_text};
use crate::status::{ApiError, ApiResult, json_response};
use podvisor_lifecycle::event_object::event_object;

/// Records, in transaction `t`, the scheduler's `Scheduled` event for a pod bound to `node`
/// (`Successfully assigned <ns>/<name> to <node>`, source `default-scheduler`), named as the
/// recorders name events, `<pod>.<unix nanoseconds in hex>`.
pub fn record_scheduled(
    t: &mut Txn,
    node: &str,
    pod: &Pod,
    now: Timestamp,
) -> Result<Value, StoreError> {
    let meta = &pod.metadata;
    let ns = meta.namespace.as_deref().unwrap_or("default");
    let name = meta.name.as_deref().unwrap_or("");
    let event = Event {
        type_: podvisor_lifecycle::EventType::Normal,
        reason: "Scheduled",
        message: podvisor_api::pod::scheduled_message(ns, name, node),
        container: None,
    };
    let mut fresh = event_object("default-scheduler", "", pod, &event, now);
    let event_name = format!("{name}.{:x}", now.as_nanosecond());
    fresh["metadata"]["uid"] = json!(new_uid());
    fresh["metadata"]["name"] = json!(event_name);
    t.create(&db::key(EVENTS, ns, &event_name), fresh)
}

/// Checks an Event's shape by decoding it with the typed API; returns the canonical value.
fn typed(value: &Value) -> ApiResult<Value> {
    let ev: ApiEvent = serde_json::from_value(value.clone()).map_err(|e| {
        ApiError::bad_request(format!(
            "Event in version \"v1\" cannot be handled as a Event: {e}"
        ))
    })?;
    serde_json::to_value(&ev).map_err(|e| ApiError::internal(e.to_string()))
}

fn invalid(name: &str, field: &str, detail: &str) -> ApiError {
    use podvisor_api::validation::{FieldError, Path};
    let mut p = Path::new(field.split('.').next().unwrap_or(field));
    for part in field.split('.').skip(1) {
        p = p.child(part);
    }
    ApiError::invalid(&podvisor_api::ValidationErrors::new(
        "Event",
        name,
        vec![FieldError::required(&p, detail)],
    ))
}

/// `POST /api/v1/namespaces/{ns}/events`.
pub(crate) fn create(req: &Req, ns: &str, body: &[u8]) -> ApiResult<Response> {
    let dry_run = req.params.dry_run()?;
    let mut value = parse_body(body)?;
    type_meta(&mut value, "Event")?;
    check_namespace(&value, ns)?;
    let store = req.state.store();
    let name = value
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    crate::namespace_controller::admit_create(store, "events", name, ns)?;
    let mut obj = typed(&value)?;
    let meta = &mut obj["metadata"];
    let mut name = meta["name"].as_str().unwrap_or("").to_owned();
    if name.is_empty()
        && let Some(g) = meta["generateName"].as_str().filter(|g| !g.is_empty())
    {
        name = format!("{g}{}", name_suffix());
    }
    if name.is_empty() {
        return Err(invalid(
            "",
            "metadata.name",
            "name or generateName is required",
        ));
    }
    meta["name"] = json!(name);
    meta["namespace"] = json!(ns);
    meta["uid"] = json!(new_uid());
    meta["creationTimestamp"] = json!(time_text(now()));
    if let Some(m) = meta.as_object_mut() {
        m.remove("resourceVersion");
    }
    if obj.get("involvedObject").is_none_or(Value::is_null) {
        return Err(invalid(&name, "involvedObject", ""));
    }
    let stored = if dry_run {
        obj
    } else {
        db::create(store, EVENTS, ns, &name, obj)?
    };
    Ok(respond(req, EVENTS, StatusCode::CREATED, &stored, &[]))
}

/// Writes `new` over `old`, keeping the system metadata.
fn write(
    req: &Req,
    ns: &str,
    name: &str,
    old: &Value,
    mut new: Value,
    rv: Option<u64>,
) -> ApiResult<Response> {
    for k in ["uid", "creationTimestamp", "namespace", "name"] {
        new["metadata"][k] = old["metadata"][k].clone();
    }
    if new == *old || req.params.dry_run()? {
        return Ok(respond(req, EVENTS, StatusCode::OK, &new, &[]));
    }
    let stored = db::update(req.state.store(), EVENTS, ns, name, new, rv)?;
    Ok(respond(req, EVENTS, StatusCode::OK, &stored, &[]))
}

/// `PUT /api/v1/namespaces/{ns}/events/{name}`.
pub(crate) fn update(req: &Req, ns: &str, name: &str, body: &[u8]) -> ApiResult<Response> {
    let mut value = parse_body(body)?;
    type_meta(&mut value, "Event")?;
    check_namespace(&value, ns)?;
    check_name(&value, name)?;
    let old = db::get(req.state.store(), EVENTS, ns, name)?;
    let rv = pinned_rv(&value)?.or_else(|| db::object_rv(&old));
    let new = typed(&value)?;
    write(req, ns, name, &old, new, rv)
}

/// `PATCH /api/v1/namespaces/{ns}/events/{name}` (client-go's recorder patches counts).
pub(crate) fn patch(req: &Req, ns: &str, name: &str, body: &[u8]) -> ApiResult<Response> {
    let patch_type = PatchType::from_content_type(&content_type(&req.headers))?;
    let old = db::get(req.state.store(), EVENTS, ns, name)?;
    let new = typed(&apply_patch(&old, patch_type, body, plain_lists)?)?;
    write(req, ns, name, &old, new, db::object_rv(&old))
}

/// How long an event lives after its last write (the API server's `--event-ttl` default).
pub const EVENT_TTL: std::time::Duration = std::time::Duration::from_secs(3600);

/// When an event was last written: the latest of its timestamps.
fn last_written(event: &Value) -> Option<Timestamp> {
    [
        "/lastTimestamp",
        "/eventTime",
        "/series/lastObservedTime",
        "/metadata/creationTimestamp",
    ]
    .iter()
    .filter_map(|p| event.pointer(p)?.as_str()?.parse::<Timestamp>().ok())
    .max()
}

/// Deletes the events last written more than `ttl` before `now` (the API server stores events
/// with a lease of `--event-ttl`); returns how many went.
pub fn expire_events(store: &Store, now: Timestamp, ttl: std::time::Duration) -> usize {
    let Ok(ttl) = jiff::SignedDuration::try_from(ttl) else {
        return 0;
    };
    // Only the expired ones are kept from the scan: the sweep runs every minute, and holding
    // every stored event each time made the process's memory grow with their number.
    let Ok((items, _)) = db::list_filtered(store, EVENTS, None, |event| {
        last_written(event).is_some_and(|t| t + ttl <= now)
    }) else {
        return 0;
    };
    let mut expired = 0;
    for event in items {
        let meta = &event["metadata"];
        let (ns, name) = (
            meta["namespace"].as_str().unwrap_or(""),
            meta["name"].as_str().unwrap_or(""),
        );
        // Rewritten since it was listed: its own resourceVersion guards the delete.
        if db::delete(store, EVENTS, ns, name, None, db::object_rv(&event)).is_ok() {
            expired += 1;
        }
    }
    expired
}

/// `DELETE /api/v1/namespaces/{ns}/events/{name}`.
pub(crate) fn delete(req: &Req, ns: &str, name: &str) -> ApiResult<Response> {
    let store = req.state.store();
    if req.params.dry_run()? {
        let obj = db::get(store, EVENTS, ns, name)?;
        return Ok(respond(req, EVENTS, StatusCode::OK, &obj, &[]));
    }
    let obj = db::delete(store, EVENTS, ns, name, None, None)?;
    Ok(respond(req, EVENTS, StatusCode::OK, &obj, &[]))
}

/// `DELETE /api/v1/namespaces/{ns}/events` (deletecollection).
pub(crate) fn delete_collection(req: &Req, ns: &str) -> ApiResult<Response> {
    let selection = crate::selectors::Selection::parse(
        EVENTS,
        req.params.label_selector.as_deref(),
        req.params.field_selector.as_deref(),
    )?;
    let store = req.state.store();
    let (items, rv) = db::list(store, EVENTS, Some(ns))?;
    let mut out = Vec::new();
    for obj in items.iter().filter(|o| selection.matches(o)) {
        let name = obj["metadata"]["name"].as_str().unwrap_or("");
        match db::delete(store, EVENTS, ns, name, None, None) {
            Ok(v) => out.push(v),
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(json_response(
        StatusCode::OK,
        &json!({"kind": "EventList", "apiVersion": "v1", "metadata": {"resourceVersion": rv.to_string()}, "items": out}),
    ))
}
