//! Events: create, update, patch and delete through the API, and [`record_event`], which
//! the node agent calls to write the kubelet's events as the kubelet's recorder does: through
//! its [`EventCorrelator`] (similar events combined, spam dropped), then with count
//! aggregation. Events created by clients are stored as sent.

mod correlator;

use axum::http::StatusCode;
use axum::response::Response;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Event as ApiEvent, Pod};
use podvisor_lifecycle::Event;
use podvisor_store::{Store, StoreError};
use serde_json::{Value, json};

use crate::db::{self, EVENTS, NAMESPACES};
use crate::objects::respond;
use crate::patch::{PatchType, apply_patch, plain_lists};
use crate::pods::{check_name, check_namespace, pinned_rv, type_meta};
use crate::request::{content_type, name_suffix, new_uid, now, parse_body, time_text};
use crate::routes::Req;
use crate::status::{ApiError, ApiResult, json_response};
pub use correlator::{
    AGGREGATE_INTERVAL, AGGREGATE_MAX_EVENTS, AGGREGATE_PREFIX, EventCorrelator, SPAM_BURST,
    SPAM_REFILL,
};
use correlator::{AGGREGATE_KEY, EVENT_KEY, Occurrences, key};

/// FNV-1a, 64 bits: a stable name for the aggregation key.
fn fnv64(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in p.bytes().chain(std::iter::once(0)) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// Whether the stored Event `a` is the one `b` is counted in: the same event (`getEventKey`:
/// source, involved object, type, reason, message), or for an aggregate the aggregate of the
/// same similar events (the aggregate key; its message is the latest combined one).
fn same_event(a: &Value, b: &Value, aggregate: bool) -> bool {
    if !aggregate {
        return key(a, &EVENT_KEY) == key(b, &EVENT_KEY);
    }
    key(a, &AGGREGATE_KEY) == key(b, &AGGREGATE_KEY)
        && a["message"]
            .as_str()
            .is_some_and(|m| m.starts_with(AGGREGATE_PREFIX))
}

/// Records an event the kubelet would emit about `pod` on node `host`, as the kubelet's
/// recorder does: `source {component: kubelet, host}`, `reportingComponent: kubelet`,
/// `involvedObject` with the pod's uid and resourceVersion and, for container events, a
/// `fieldPath` like `spec.containers{app}`. First through `correlator` (the pod's
/// `EventCorrelator`): the 10th distinct message of similar events (same reason and type)
/// within 10 minutes and the ones after it become one `(combined from similar events): <message>`
/// Event, and past a burst of 25 events about the pod one is let through every 5 minutes.
/// Then a repeat of the same event (same involved object, type, reason and message, or the
/// same aggregate) increments `count` (by the dropped repeats too) and moves `lastTimestamp`
/// on the existing Event instead of creating another.
///
/// Returns the stored Event, or `None` when the spam filter dropped it.
///
/// # Errors
///
/// The store's errors.
pub fn record_event(
    store: &Store,
    correlator: &mut EventCorrelator,
    host: &str,
    pod: &Pod,
    event: &Event,
    now: Timestamp,
) -> Result<Option<Value>, StoreError> {
    let mut fresh = new_event("kubelet", host, pod, event, now);
    let Some(seen) = correlator.correlate(&mut fresh, now) else {
        return Ok(None);
    };
    write_event(store, fresh, now, seen).map(Some)
}

/// Records the scheduler's `Scheduled` event for a pod bound to `node` at admission
/// (`Successfully assigned <ns>/<name> to <node>`, source `default-scheduler`).
pub fn record_scheduled(
    store: &Store,
    node: &str,
    pod: &Pod,
    now: Timestamp,
) -> Result<Value, StoreError> {
    let meta = &pod.metadata;
    let event = Event {
        type_: podvisor_lifecycle::EventType::Normal,
        reason: "Scheduled",
        message: format!(
            "Successfully assigned {}/{} to {node}",
            meta.namespace.as_deref().unwrap_or("default"),
            meta.name.as_deref().unwrap_or("")
        ),
        container: None,
    };
    let fresh = new_event("default-scheduler", "", pod, &event, now);
    write_event(store, fresh, now, Occurrences::once(now))
}

/// The Event a reporting `component` (`kubelet`, `default-scheduler`) on `host` makes of
/// `event` about `pod`, unnamed.
fn new_event(component: &str, host: &str, pod: &Pod, event: &Event, now: Timestamp) -> Value {
    let meta = &pod.metadata;
    let ns = meta
        .namespace
        .clone()
        .unwrap_or_else(|| "default".to_owned());
    let mut involved = json!({
        "kind": "Pod",
        "namespace": ns,
        "name": meta.name.clone().unwrap_or_default(),
        "uid": meta.uid.clone().unwrap_or_default(),
        "apiVersion": "v1",
    });
    if let Some(rv) = &meta.resource_version {
        involved["resourceVersion"] = json!(rv);
    }
    if let Some((kind, name)) = &event.container {
        involved["fieldPath"] = json!(kind.field_path(name));
    }
    let stamp = time_text(now);
    json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"namespace": ns, "creationTimestamp": stamp, "uid": new_uid()},
        "involvedObject": involved,
        "reason": event.reason,
        "message": event.message,
        "source": {"component": component, "host": host},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
        "type": event.type_.as_str(),
        "eventTime": null,
        "reportingComponent": component,
        "reportingInstance": host,
    })
}

/// Writes `fresh` (made by [`new_event`] at `now`) with its correlated occurrences: adds them
/// to the `count` of the stored Event it is counted in, or creates it.
fn write_event(
    store: &Store,
    mut fresh: Value,
    now: Timestamp,
    seen: Occurrences,
) -> Result<Value, StoreError> {
    let s = |p: &str| {
        fresh
            .pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let (ns, pod_name, host) = (
        s("/metadata/namespace"),
        s("/involvedObject/name"),
        s("/source/host"),
    );
    let hash = if seen.aggregate {
        // One aggregate per similar events, whatever its container and latest message.
        fnv64(&[
            &s("/involvedObject/uid"),
            "",
            &s("/type"),
            &s("/reason"),
            AGGREGATE_PREFIX,
            &host,
        ])
    } else {
        fnv64(&[
            &s("/involvedObject/uid"),
            &s("/involvedObject/fieldPath"),
            &s("/type"),
            &s("/reason"),
            &s("/message"),
            &host,
        ])
    };
    let stamp = time_text(now);
    fresh["count"] = json!(seen.count);
    fresh["firstTimestamp"] = json!(time_text(seen.first));
    let mut name = format!("{pod_name}.{hash:016x}");
    for _ in 0..3 {
        let key = db::key(EVENTS, &ns, &name);
        match store.get(&key)? {
            Some(existing) if same_event(&existing, &fresh, seen.aggregate) => {
                let bumped = store.update_with(&key, |mut current| {
                    let count = current.get("count").and_then(Value::as_i64).unwrap_or(1);
                    current["count"] = json!(count + seen.count);
                    current["lastTimestamp"] = json!(stamp);
                    // An aggregate shows the latest message combined.
                    current["message"] = fresh["message"].clone();
                    if let Some(rv) = fresh.pointer("/involvedObject/resourceVersion") {
                        current["involvedObject"]["resourceVersion"] = rv.clone();
                    }
                    Ok(current)
                });
                match bumped {
                    Err(StoreError::NotFound(_)) => continue,
                    other => return other,
                }
            }
            Some(_) => {
                // A different event under the same name (a hash collision): use the
                // kubelet's own naming, `<pod>.<unix nanos in hex>`.
                name = format!("{pod_name}.{:x}", now.as_nanosecond());
            }
            None => {
                fresh["metadata"]["name"] = json!(name);
                match store.create(&key, fresh.clone()) {
                    Err(StoreError::AlreadyExists(_)) => continue,
                    other => return other,
                }
            }
        }
    }
    Err(StoreError::Conflict {
        key: db::key(EVENTS, &ns, &name),
        message: "the event kept changing; please try again".to_owned(),
    })
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
    if db::try_get(store, NAMESPACES, "", ns)?.is_none() {
        return Err(ApiError::not_found("namespaces", ns));
    }
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
