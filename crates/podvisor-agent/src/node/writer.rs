//! The status writer of one pod: the kubelet's status manager for it. It owns the pod's
//! [`PodHandle`] and writes what the pod worker publishes to the store: the `status` field by
//! read-modify-write (conditions owned by others are kept, a deleted or replaced object is
//! never written again), events through the pod's recorder from the node's [`EventSink`], and
//! at the end the removal of a deleted pod's object (T9).

use super::{EventSink, Finished, PodEventRecorder};
use crate::log::{debug, warning};
use crate::{PodHandle, PodUpdate, TimedEvent};
use k8s_openapi::api::core::v1::{Pod, PodCondition};
use podvisor_store::{Key, Preconditions, Store, StoreError, Value};
use tokio::sync::{mpsc, oneshot, watch};

/// Condition types the kubelet owns (D1); the others belong to whoever wrote them.
pub(crate) use podvisor_api::pod::KUBELET_CONDITIONS;
/// Written by the kubelet only together with a terminal phase, kept otherwise (D8).
const DISRUPTION_TARGET: &str = "DisruptionTarget";

/// What a writer needs besides the pod's handle.
pub(crate) struct Writer {
    pub(crate) store: Store,
    pub(crate) sink: EventSink,
    /// The pod's event recorder, made by `sink` on first use (and again if one was lost to a
    /// panic); out while a blocking thread records with it.
    pub(crate) recorder: Option<PodEventRecorder>,
    pub(crate) key: Key,
    pub(crate) uid: String,
    /// The pod as last published, for the node (mirror pods are re-created from it).
    pub(crate) latest: watch::Sender<Option<Box<Pod>>>,
    pub(crate) finished: mpsc::UnboundedSender<Finished>,
}

impl Writer {
    /// Runs until the pod worker has finished, or until `stop` fires (agent shutdown: the
    /// worker is stopped without touching its containers and the last status is written).
    pub(crate) async fn run(mut self, mut handle: PodHandle, mut stop: oneshot::Receiver<()>) {
        loop {
            let first = tokio::select! {
                update = handle.next_update() => update,
                _ = &mut stop => {
                    handle.abort();
                    let mut rest = Vec::new();
                    while let Some(update) = handle.next_update().await {
                        rest.push(update);
                    }
                    self.apply(rest).await;
                    return;
                }
            };
            let Some(first) = first else {
                // The worker ended without `Terminated`: it panicked.
                let error = handle.join().await.err();
                warning!(
                    "pod {}/{}: the pod worker ended abnormally: {error:?}",
                    self.key.namespace,
                    self.key.name
                );
                self.finish(false);
                return;
            };
            let mut batch = vec![first];
            while let Some(update) = handle.try_next_update() {
                batch.push(update);
            }
            if let Some(last) = self.apply(batch).await {
                let removed = self.remove_if_deleted(&last).await;
                self.finish(removed);
                return;
            }
        }
    }

    /// Records the events and writes the newest status of a batch; returns the final pod if
    /// the batch ended with `Terminated`.
    async fn apply(&mut self, batch: Vec<PodUpdate>) -> Option<Box<Pod>> {
        let mut newest = None;
        let mut events = Vec::new();
        let mut terminated = None;
        for update in batch {
            match update {
                PodUpdate::Status(pod) => newest = Some(pod),
                PodUpdate::Event(event) => events.push(event),
                PodUpdate::Terminated(pod) => terminated = Some(pod),
            }
        }
        let newest = terminated.clone().or(newest);
        if let Some(pod) = &newest {
            self.latest.send_replace(Some(pod.clone()));
        }
        if !events.is_empty() {
            let pod = self.latest.borrow().clone();
            if let Some(pod) = pod {
                self.record(*pod, events).await;
            }
        }
        if let Some(pod) = newest {
            self.write_status(*pod).await;
        }
        terminated
    }

    async fn record(&mut self, pod: Pod, events: Vec<TimedEvent>) {
        let store = self.store.clone();
        let mut recorder = self.recorder.take().unwrap_or_else(|| (self.sink)());
        let recorded = tokio::task::spawn_blocking(move || {
            for e in events {
                recorder(&store, &pod, &e.event, e.time);
            }
            recorder
        })
        .await;
        self.recorder = recorded.ok();
    }

    /// Writes `pod.status` into the stored object of the same UID, if there still is one.
    async fn write_status(&self, pod: Pod) {
        let store = self.store.clone();
        let key = self.key.clone();
        let uid = self.uid.clone();
        let result = tokio::task::spawn_blocking(move || {
            let status = serde_json::to_value(pod.status.unwrap_or_default())
                .map_err(|e| StoreError::Invalid(format!("encoding the status: {e}")))?;
            store.update_with(&key, |mut current| {
                check_uid(&key, &current, &uid)?;
                let merged = merge_status(current.get("status"), status);
                current["status"] = merged;
                Ok(current)
            })
        })
        .await;
        match result {
            Ok(Ok(_)) => {}
            // Deleted (forced) or replaced by another pod of the same name: never resurrect.
            Ok(Err(StoreError::NotFound(_) | StoreError::Conflict { .. })) => debug!(
                "pod {}/{} ({}): status not written, the object is gone",
                self.key.namespace, self.key.name, self.uid
            ),
            Ok(Err(e)) => warning!(
                "pod {}/{}: writing the status: {e}",
                self.key.namespace,
                self.key.name
            ),
            Err(e) => warning!(
                "pod {}/{}: status writer: {e}",
                self.key.namespace,
                self.key.name
            ),
        }
    }

    /// T9: once a deleted pod has terminated and its final status is written, its object is
    /// removed (grace 0, UID precondition). A pod that was not deleted keeps its object (a
    /// Succeeded or Failed pod stays until someone deletes it). Returns whether the object is
    /// gone.
    async fn remove_if_deleted(&self, _last: &Pod) -> bool {
        let store = self.store.clone();
        let key = self.key.clone();
        let uid = self.uid.clone();
        tokio::task::spawn_blocking(move || remove_if_deleted(&store, &key, &uid))
            .await
            .unwrap_or(false)
    }

    fn finish(&self, removed: bool) {
        let _ = self.finished.send(Finished {
            uid: self.uid.clone(),
            key: self.key.clone(),
            removed,
        });
    }
}

/// Removes the object at `key` if it is pod `uid` and has a deletion timestamp; true when no
/// object of that UID is left.
pub(crate) fn remove_if_deleted(store: &Store, key: &Key, uid: &str) -> bool {
    let current = match store.get(key) {
        Ok(Some(current)) => current,
        Ok(None) => return true,
        Err(e) => {
            warning!("pod {}/{}: reading it: {e}", key.namespace, key.name);
            return false;
        }
    };
    if uid_of(&current) != Some(uid) {
        return true;
    }
    if current
        .pointer("/metadata/deletionTimestamp")
        .is_none_or(Value::is_null)
    {
        return false;
    }
    remove(store, key, uid)
}

/// Deletes pod `uid` at `key` at once (grace 0, UID precondition); true when it is gone.
pub(crate) fn remove(store: &Store, key: &Key, uid: &str) -> bool {
    let precondition = Preconditions {
        uid: Some(uid.to_string()),
        resource_version: None,
    };
    match store.delete(key, precondition) {
        Ok(_) | Err(StoreError::NotFound(_) | StoreError::Conflict { .. }) => true,
        Err(e) => {
            warning!("pod {}/{}: deleting it: {e}", key.namespace, key.name);
            false
        }
    }
}

pub(crate) fn uid_of(obj: &Value) -> Option<&str> {
    obj.pointer("/metadata/uid").and_then(Value::as_str)
}

fn check_uid(key: &Key, current: &Value, uid: &str) -> Result<(), StoreError> {
    if uid_of(current) == Some(uid) {
        return Ok(());
    }
    Err(StoreError::Conflict {
        key: key.clone(),
        message: format!(
            "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
            uid_of(current).unwrap_or("")
        ),
    })
}

/// The kubelet's `mergePodStatus`: conditions it does not own come from the stored status
/// (clients write them through the status subresource), then the kubelet's own; a
/// `DisruptionTarget` is kept unless the new status has one.
pub(crate) fn merge_status(stored: Option<&Value>, mut ours: Value) -> Value {
    let theirs: Vec<Value> = stored
        .and_then(|s| s.get("conditions"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let own: Vec<Value> = ours
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let type_of = |c: &Value| {
        c.get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let ours_has_disruption = own.iter().any(|c| type_of(c) == DISRUPTION_TARGET);
    let mut merged: Vec<Value> = theirs
        .into_iter()
        .filter(|c| {
            let t = type_of(c);
            let replaced = KUBELET_CONDITIONS.contains(&t.as_str())
                || (t == DISRUPTION_TARGET && ours_has_disruption);
            !replaced
        })
        .collect();
    merged.extend(own.into_iter().filter(|c| {
        let t = type_of(c);
        KUBELET_CONDITIONS.contains(&t.as_str()) || t == DISRUPTION_TARGET
    }));
    if let Some(map) = ours.as_object_mut() {
        if merged.is_empty() {
            map.remove("conditions");
        } else {
            map.insert("conditions".to_string(), Value::Array(merged));
        }
    }
    ours
}

/// The conditions of `pod` that others own (readiness gates), as the pod worker is told them.
pub(crate) fn foreign_conditions(pod: &Pod) -> Vec<PodCondition> {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .map(|cs| {
            cs.iter()
                .filter(|c| {
                    !KUBELET_CONDITIONS.contains(&c.type_.as_str()) && c.type_ != DISRUPTION_TARGET
                })
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn d1_conditions_of_others_are_kept_and_the_kubelets_replaced() {
        let stored = json!({"conditions": [
            {"type": "example.com/gate", "status": "True"},
            {"type": "Ready", "status": "False"},
        ]});
        let ours = json!({"phase": "Running", "conditions": [
            {"type": "example.com/gate", "status": "False"},
            {"type": "Ready", "status": "True"},
        ]});
        let merged = merge_status(Some(&stored), ours);
        assert_eq!(
            merged["conditions"],
            json!([
                {"type": "example.com/gate", "status": "True"},
                {"type": "Ready", "status": "True"},
            ])
        );
        assert_eq!(merged["phase"], "Running");
    }

    #[test]
    fn d8_a_disruption_target_is_kept_until_the_kubelet_writes_one() {
        let stored = json!({"conditions": [{"type": "DisruptionTarget", "status": "True"}]});
        let merged = merge_status(Some(&stored), json!({"conditions": []}));
        assert_eq!(merged["conditions"][0]["type"], "DisruptionTarget");
    }
}
