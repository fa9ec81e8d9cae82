//! The control plane's events about pods (the scheduler's `FailedScheduling`, the taint
//! manager's `TaintManagerEviction`), written in the transaction of what they report. A
//! repeat — same pod, component, reason and message — counts on the last one (`count`,
//! `lastTimestamp`), as client-go's recorder aggregates, so a pod retried every ten seconds
//! shows one line `(x12 over 2m)` in `kubectl describe`.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use podvisor_lifecycle::event_object::{event_object, time_text};
use podvisor_lifecycle::{Event, EventType};
use podvisor_store::{StoreError, Txn};
use serde_json::{Value, json};

use crate::db::{self, EVENTS};
use crate::request::new_uid;

/// Records `reason`/`message` of `type_` from `component` about `pod` in transaction `t`.
///
/// # Errors
///
/// The store failed.
pub(crate) fn record(
    t: &mut Txn,
    component: &str,
    pod: &Pod,
    type_: EventType,
    reason: &'static str,
    message: &str,
    now: Timestamp,
) -> Result<(), StoreError> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let name = pod.metadata.name.as_deref().unwrap_or("");
    let uid = pod.metadata.uid.as_deref().unwrap_or("");
    let same = |e: &Value| {
        e.pointer("/involvedObject/uid").and_then(Value::as_str) == Some(uid)
            && e["reason"] == reason
            && e["message"] == message
            && e.pointer("/source/component").and_then(Value::as_str) == Some(component)
    };
    let last = t
        .list(EVENTS.plural, Some(ns))?
        .into_iter()
        .filter(same)
        .max_by_key(|e| e["lastTimestamp"].as_str().unwrap_or("").to_owned());
    if let Some(last) = last {
        let event_name = last["metadata"]["name"].as_str().unwrap_or("").to_owned();
        t.update_with(&db::key(EVENTS, ns, &event_name), |mut e| {
            let count = e["count"].as_i64().unwrap_or(1);
            e["count"] = json!(count + 1);
            e["lastTimestamp"] = json!(time_text(now));
            Ok(e)
        })?;
        return Ok(());
    }
    let event = Event {
        type_,
        reason,
        message: message.to_owned(),
        container: None,
    };
    let mut fresh = event_object(component, "", pod, &event, now);
    let event_name = format!("{name}.{:x}", now.as_nanosecond());
    fresh["metadata"]["uid"] = json!(new_uid());
    fresh["metadata"]["name"] = json!(event_name);
    t.create(&db::key(EVENTS, ns, &event_name), fresh)?;
    Ok(())
}
