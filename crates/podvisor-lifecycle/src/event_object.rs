//! The core/v1 Event object a reporting component makes of one of the core's [`Event`]s about a
//! pod: what the kubelet's recorder (and the scheduler's, for `Scheduled`) sends to the API.
//! Pure: the caller adds `metadata.name` and `metadata.uid` and writes it.

use crate::Event;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

/// `metav1.Time` text: RFC 3339 in UTC with whole seconds.
#[must_use]
pub fn time_text(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The Event `component` (`kubelet`, `default-scheduler`) on `host` makes of `event` about
/// `pod` at `now`: `source {component, host}`, `reportingComponent`/`reportingInstance`,
/// `involvedObject` with the pod's uid and resourceVersion and, for container events, a
/// `fieldPath` like `spec.containers{app}`; `count` 1, first and last timestamps `now`.
#[must_use]
pub fn event_object(
    component: &str,
    host: &str,
    pod: &Pod,
    event: &Event,
    now: Timestamp,
) -> Value {
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
        "metadata": {"namespace": ns, "creationTimestamp": stamp},
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
