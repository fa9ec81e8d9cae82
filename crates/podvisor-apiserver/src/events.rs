//! Events: their expiry (`--event-ttl`) and the scheduler's `Scheduled` event at binding;
//! writes through the API are the registry's (`registry/event.rs`). The kubelet's recorder
//! (correlation, spam filter, count aggregation) is the node agent's (`podvisor_agent::node::
//! Recorder`), as upstream's lives in the kubelet.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use podvisor_lifecycle::Event;
use podvisor_lifecycle::event_object::event_object;
use podvisor_store::{Store, StoreError, Txn};
use serde_json::{Value, json};

use crate::db::{self, EVENTS};
use crate::request::new_uid;

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
