//! A simulation's records as a [`Timeline`].

use super::{Deletion, Marker, MarkerKind, Timeline, lanes_of, marker_kind};
use crate::action::EventType;
use crate::sim::Record;
use k8s_openapi::api::core::v1::Pod;

impl Timeline {
    /// The timeline of `pod` from `podvisor simulate`'s `records` (seconds since `origin`,
    /// RFC 3339), deleted at `delete_at` seconds with its grace period if the script deletes
    /// it; `end` is the simulated duration in seconds (the picture stops at the last record
    /// when that comes sooner).
    pub fn from_sim(
        pod: &Pod,
        records: &[Record],
        origin: &str,
        delete_at: Option<(f64, Option<i64>)>,
        end: f64,
    ) -> Timeline {
        let mut snapshots = Vec::new();
        let mut markers = Vec::new();
        for r in records {
            match r {
                Record::Status { t, status } => snapshots.push((*t, status.clone())),
                Record::Event { t, event } => markers.push(Marker {
                    t: *t,
                    container: event.container.as_ref().map(|(_, n)| n.clone()),
                    kind: marker_kind(event.reason),
                    warning: event.type_ == EventType::Warning,
                    reason: event.reason.to_string(),
                    message: event.message.clone(),
                    count: 1,
                    last: *t,
                }),
                Record::Runtime { t, container, what } => {
                    let (kind, reason) = if what.contains("hook") {
                        let name = what.split_whitespace().next().unwrap_or("hook");
                        (MarkerKind::Hook, name.to_string())
                    } else if what.starts_with("SIG") {
                        let name = what.split_whitespace().next().unwrap_or("signal");
                        (MarkerKind::Signal, name.to_string())
                    } else {
                        (MarkerKind::Event, "Runtime".to_string())
                    };
                    markers.push(Marker {
                        t: *t,
                        container: Some(container.clone()),
                        kind,
                        warning: false,
                        reason,
                        message: what.clone(),
                        count: 1,
                        last: *t,
                    });
                }
            }
        }
        let spec_grace = pod
            .spec
            .as_ref()
            .and_then(|s| s.termination_grace_period_seconds)
            .unwrap_or(30);
        let deletion = delete_at.map(|(t, grace)| Deletion {
            t,
            grace: grace.unwrap_or(spec_grace).max(0) as f64,
        });
        // The run stops once the pod has terminated: the picture ends a little after the last
        // record, or at the simulated duration.
        let last = records
            .iter()
            .map(|r| match r {
                Record::Event { t, .. } | Record::Runtime { t, .. } | Record::Status { t, .. } => {
                    *t
                }
            })
            .fold(0.0_f64, f64::max);
        let end = end.min((last * 1.05).max(last + 5.0));
        let meta = &pod.metadata;
        Timeline {
            pod: format!(
                "{}/{}",
                meta.namespace.as_deref().unwrap_or("default"),
                meta.name.as_deref().unwrap_or("")
            ),
            origin: origin.to_string(),
            lanes: lanes_of(pod),
            snapshots,
            markers,
            deletion,
            end,
        }
        .finish()
    }
}
