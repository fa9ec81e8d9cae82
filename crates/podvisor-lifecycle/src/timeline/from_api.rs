//! The API's view of a pod as a [`Timeline`]: the agent's recorded transitions, the pod's
//! core/v1 Events and the pod object as it is now.

use super::{Deletion, Marker, Timeline, Transition, lanes_of, marker_kind};
use crate::sim::snapshot;
use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::jiff::Timestamp;

/// `spec.containers{app}` → `app` (the kubelet's `involvedObject.fieldPath`).
fn container_of(field_path: Option<&str>) -> Option<String> {
    let path = field_path?;
    let (_, rest) = path.split_once('{')?;
    rest.strip_suffix('}').map(str::to_string)
}

fn secs(from: Timestamp, to: Timestamp) -> f64 {
    to.duration_since(from).as_secs_f64()
}

impl Timeline {
    /// The timeline of `pod` (as the API serves it now) from its recorded `history` (oldest
    /// first) and its `events`, up to `now`. The origin is the pod's creation.
    pub fn from_api(
        pod: &Pod,
        history: &[Transition],
        events: &[Event],
        now: Timestamp,
    ) -> Timeline {
        let origin = pod
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0)
            .or_else(|| history.first().map(|h| h.time.0))
            .unwrap_or(now);
        let mut snapshots = Vec::new();
        let at = |time: Timestamp, view: &Pod, snapshots: &mut Vec<(f64, _)>| {
            let snap = snapshot(view, time);
            if snapshots.last().is_none_or(|(_, last)| *last != snap) {
                snapshots.push((secs(origin, time).max(0.0), snap));
            }
        };
        for h in history {
            let mut view = pod.clone();
            view.metadata.deletion_timestamp = h.deletion_timestamp.clone();
            view.metadata.deletion_grace_period_seconds = h.deletion_grace_period_seconds;
            view.status = Some(h.status.clone());
            at(h.time.0, &view, &mut snapshots);
        }
        // The object itself is the newest word: after the last transition, or (a server without
        // history has only it) as the state since the creation.
        let current_time = history.last().map_or(origin, |h| h.time.0.max(origin));
        at(current_time, pod, &mut snapshots);

        let mut markers = Vec::new();
        let uid = pod.metadata.uid.as_deref();
        for e in events {
            if uid.is_some() && e.involved_object.uid.as_deref() != uid {
                continue;
            }
            let first = e
                .first_timestamp
                .as_ref()
                .map(|t| t.0)
                .or_else(|| e.event_time.as_ref().map(|t| t.0))
                .or_else(|| e.last_timestamp.as_ref().map(|t| t.0));
            let Some(first) = first else { continue };
            let last = e.last_timestamp.as_ref().map_or(first, |t| t.0);
            let reason = e.reason.clone().unwrap_or_default();
            let count = e.count.unwrap_or(1).max(1);
            // Repeats (the event's `count`, or several events of one key) are folded by
            // `finish` into one mark from `t` to `last`.
            markers.push(Marker {
                t: secs(origin, first),
                container: container_of(e.involved_object.field_path.as_deref()),
                kind: marker_kind(&reason),
                warning: e.type_.as_deref() == Some("Warning"),
                reason,
                message: e.message.clone().unwrap_or_default(),
                count,
                last: secs(origin, last.max(first)),
            });
        }
        // The deletion timestamp is the end of the grace period (`now + grace` at the delete).
        let deletion = pod
            .metadata
            .deletion_timestamp
            .as_ref()
            .or_else(|| {
                history
                    .iter()
                    .rev()
                    .find_map(|h| h.deletion_timestamp.as_ref())
            })
            .map(|ts| {
                let grace = pod
                    .metadata
                    .deletion_grace_period_seconds
                    .or_else(|| {
                        history
                            .iter()
                            .rev()
                            .find_map(|h| h.deletion_grace_period_seconds)
                    })
                    .unwrap_or(0)
                    .max(0) as f64;
                Deletion {
                    t: secs(origin, ts.0) - grace,
                    grace,
                }
            });
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
            end: secs(origin, now),
        }
        .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::container_of;

    #[test]
    fn field_paths_name_their_container() {
        assert_eq!(
            container_of(Some("spec.containers{app}")).as_deref(),
            Some("app")
        );
        assert_eq!(
            container_of(Some("spec.initContainers{init}")).as_deref(),
            Some("init")
        );
        assert_eq!(container_of(None), None);
        assert_eq!(container_of(Some("spec")), None);
    }
}
