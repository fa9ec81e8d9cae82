//! The status writer of one pod: the kubelet's status manager for it. It owns the pod's
//! [`PodHandle`] and writes what the pod worker publishes to the store: the `status` field by
//! read-modify-write (conditions owned by others are kept, a deleted or replaced object is
//! never written again), events through the pod's [`Recorder`] (the kubelet's recorder sits
//! beside its status manager), and at the end the removal of a deleted pod's object (T9).

use super::Finished;
use super::pending::Pending;
use super::recorder::Recorder;
use crate::Clock;
use crate::history::{HistoryStore, Transition};
use crate::log::{debug, warning};
use crate::{PodHandle, TimedEvent};
use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};
use podvisor_store::{Key, Preconditions, Store, StoreError, Value};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, watch};

/// Condition types the kubelet owns (D1); the others belong to whoever wrote them.
pub(crate) use podvisor_api::pod::KUBELET_CONDITIONS;
/// Written by the kubelet only together with a terminal phase, kept otherwise (D8).
const DISRUPTION_TARGET: &str = "DisruptionTarget";

/// What a writer needs besides the pod's handle.
pub(crate) struct Writer {
    pub(crate) store: Store,
    /// The node's name: the events' `source.host`.
    pub(crate) host: String,
    /// The pod's event recorder, made on first use (and again if one was lost to a panic);
    /// out while a blocking thread records with it. It goes with the writer, so what it
    /// remembers of the pod goes when the pod goes.
    pub(crate) recorder: Option<Recorder>,
    pub(crate) key: Key,
    pub(crate) uid: String,
    /// The pod as last published, for the node (mirror pods are re-created from it).
    pub(crate) latest: watch::Sender<Option<Box<Pod>>>,
    pub(crate) finished: mpsc::UnboundedSender<Finished>,
    /// The node's record of status transitions, and the clock that stamps them.
    pub(crate) history: Option<(Arc<HistoryStore>, Arc<dyn Clock>)>,
    /// The newest status, when writing it failed in the store (a full disk): written again
    /// every [`STATUS_RETRY`] until it is, as the kubelet's status manager re-syncs a pod
    /// whose status the API server does not have.
    pub(crate) unwritten: Option<Box<Pod>>,
}

/// How often a status the store could not take is written again.
pub(crate) const STATUS_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

impl Writer {
    /// Runs until the pod worker has finished, or until `stop` fires (agent shutdown: the
    /// worker is stopped without touching its containers and the last status is written).
    ///
    /// While a write is in flight the worker's updates are still taken, coalesced into a
    /// [`Pending`] (the newest status, every event): a burst of statuses is a few writes of
    /// the newest, never a queue of full copies of the pod.
    pub(crate) async fn run(mut self, mut handle: PodHandle, mut stop: oneshot::Receiver<()>) {
        let mut pending = Pending::default();
        // The worker's channel has ended (its last update was taken).
        let mut ended = false;
        loop {
            if pending.is_empty() && !ended {
                tokio::select! {
                    update = handle.next_update() => match update {
                        Some(update) => pending.add(update, self.stamp()),
                        None => ended = true,
                    },
                    _ = &mut stop => return self.stop(handle, pending).await,
                    () = tokio::time::sleep(STATUS_RETRY), if self.behind() => {
                        self.retry().await;
                        continue;
                    }
                }
            } else if !matches!(stop.try_recv(), Err(oneshot::error::TryRecvError::Empty)) {
                // Updates keep coming (a burst): the stop is not kept waiting for a pause.
                return self.stop(handle, pending).await;
            }
            while let Some(update) = handle.try_next_update() {
                pending.add(update, self.stamp());
            }
            if pending.is_empty() {
                if ended {
                    // The worker ended without `Terminated`: it panicked.
                    let error = handle.join().await.err();
                    warning!(
                        "pod {}/{}: the pod worker ended abnormally: {error:?}",
                        self.key.namespace,
                        self.key.name
                    );
                    self.finish(false);
                    return;
                }
                continue;
            }
            let batch = std::mem::take(&mut pending);
            let clock = self.history.as_ref().map(|(_, clock)| Arc::clone(clock));
            let terminated = {
                let apply = self.apply(batch);
                tokio::pin!(apply);
                loop {
                    tokio::select! {
                        terminated = &mut apply => break terminated,
                        update = handle.next_update(), if !ended => match update {
                            Some(update) => pending.add(update, clock.as_ref().map(|c| c.now())),
                            None => ended = true,
                        },
                    }
                }
            };
            if let Some(last) = terminated {
                // The final status must reach the store before the pod's end is reported.
                while self.behind() {
                    tokio::select! {
                        () = tokio::time::sleep(STATUS_RETRY) => self.retry().await,
                        _ = &mut stop => return,
                    }
                }
                let removed = self.remove_if_deleted(&last).await;
                self.finish(removed);
                return;
            }
        }
    }

    /// The agent stops: the worker is stopped without touching its containers, and what it
    /// published is written.
    async fn stop(mut self, mut handle: PodHandle, mut pending: Pending) {
        handle.abort();
        while let Some(update) = handle.next_update().await {
            pending.add(update, self.stamp());
        }
        self.apply(pending).await;
    }

    /// The time a history transition taken now is stamped with (none without a history).
    fn stamp(&self) -> Option<jiff::Timestamp> {
        self.history.as_ref().map(|(_, clock)| clock.now())
    }

    /// Records the events and writes the newest status of a batch; returns the final pod if
    /// the batch ended with `Terminated`.
    async fn apply(&mut self, batch: Pending) -> Option<Box<Pod>> {
        let Pending {
            status,
            terminated,
            events,
            transitions,
            replaced,
        } = batch;
        if replaced > 0 {
            debug!(
                "pod {}/{}: {replaced} statuses replaced by a newer one before they were written",
                self.key.namespace, self.key.name
            );
        }
        let history = self.history_job(transitions);
        let newest = terminated.clone().or(status);
        if let Some(pod) = &newest {
            self.latest.send_replace(Some(pod.clone()));
        }
        // The history, then the status, on one blocking thread (a second hop would be a
        // start's wait); the status before the events: a watcher waiting for the pod to run
        // should not wait for the batch's events too (a start's Pulled, Created and Started
        // are three store writes, each fsynced). The kubelet's status manager and event
        // recorder do not order them either; the events follow at once.
        // (A batch has history to record exactly when it has a status.)
        if let Some(pod) = newest {
            self.write_status(*pod, history).await;
        }
        if !events.is_empty() {
            let pod = self.latest.borrow().clone();
            if let Some(pod) = pod {
                self.record(*pod, events).await;
            }
        }
        terminated
    }

    /// What puts the batch's statuses into the node's history (the store gets the newest),
    /// to run on a blocking thread; `None` without a history or a status.
    fn history_job(&self, transitions: Vec<Transition>) -> Option<impl FnOnce() + Send + 'static> {
        let (history, _) = self.history.clone()?;
        if transitions.is_empty() {
            return None;
        }
        let uid = self.uid.clone();
        let key = self.key.clone();
        Some(move || {
            if let Err(e) = transitions
                .into_iter()
                .try_for_each(|t| history.record_transition(&uid, t))
            {
                warning!(
                    "pod {}/{}: recording its history: {e}",
                    key.namespace,
                    key.name
                );
            }
        })
    }

    async fn record(&mut self, pod: Pod, events: Vec<TimedEvent>) {
        let store = self.store.clone();
        let mut recorder = self
            .recorder
            .take()
            .unwrap_or_else(|| Recorder::new(&self.host));
        let recorded = tokio::task::spawn_blocking(move || {
            for e in events {
                // An event the store cannot take for now (a full disk) is kept by the recorder
                // and written again; any other failure drops it, after logging it.
                if let Err(err) = recorder.record(&store, &pod, &e.event, e.time) {
                    warning!(
                        "recording event {} of pod {}: {err}",
                        e.event.reason,
                        pod.metadata.name.as_deref().unwrap_or("")
                    );
                }
            }
            recorder
        })
        .await;
        self.recorder = recorded.ok();
    }

    /// Whether a status or events wait for the store to take writes again.
    fn behind(&self) -> bool {
        self.unwritten.is_some() || self.recorder.as_ref().is_some_and(Recorder::has_pending)
    }

    /// Writes the status that failed to be written (unless a newer one came meanwhile), then
    /// the events that did.
    async fn retry(&mut self) {
        if let Some(pod) = self.unwritten.take() {
            self.write_status(*pod, None::<fn()>).await;
        }
        if self.unwritten.is_none()
            && let Some(mut recorder) = self.recorder.take()
        {
            let store = self.store.clone();
            let retried = tokio::task::spawn_blocking(move || {
                recorder.retry(&store);
                recorder
            })
            .await;
            self.recorder = retried.ok();
        }
    }

    /// Writes `pod.status` into the stored object of the same UID, if there still is one;
    /// `history` (the batch's history records) runs first, on the same blocking thread. A
    /// status the store could not take ([`StoreError::Io`]) is kept for a retry.
    async fn write_status(&mut self, pod: Pod, history: Option<impl FnOnce() + Send + 'static>) {
        let store = self.store.clone();
        let key = self.key.clone();
        let uid = self.uid.clone();
        let status = pod.status.clone().unwrap_or_default();
        let result = tokio::task::spawn_blocking(move || {
            if let Some(history) = history {
                history();
            }
            write_pod_status(&store, &key, &uid, &status)
        })
        .await;
        self.unwritten = None;
        match result {
            Ok(Ok(_)) => {}
            Ok(Err(e @ StoreError::Io { .. })) => {
                warning!(
                    "pod {}/{}: writing the status: {e}; it is written again every {STATUS_RETRY:?}",
                    self.key.namespace,
                    self.key.name
                );
                self.unwritten = Some(Box::new(pod));
            }
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

/// Writes `ours` into the stored pod at `key` if it is still pod `uid`, as the kubelet's status
/// manager does, through [`merge_status`]; a write that changes nothing writes nothing.
/// Returns the stored object.
///
/// # Errors
///
/// `NotFound` when the object is gone, `Conflict` when it is another pod of the same name (a
/// deleted or replaced pod is never written again), and the store's errors.
pub fn write_pod_status(
    store: &Store,
    key: &Key,
    uid: &str,
    ours: &PodStatus,
) -> Result<Value, StoreError> {
    store.update_with(key, |mut current| {
        check_uid(key, &current, uid)?;
        let stored: Option<PodStatus> = current
            .get("status")
            .filter(|s| !s.is_null())
            .map(|s| serde_json::from_value(s.clone()))
            .transpose()
            .map_err(|e| StoreError::Invalid(format!("decoding the stored status: {e}")))?;
        let merged = merge_status(stored.as_ref(), ours.clone());
        current["status"] = serde_json::to_value(merged)
            .map_err(|e| StoreError::Invalid(format!("encoding the status: {e}")))?;
        Ok(current)
    })
}

/// The kubelet's `mergePodStatus` with the API server's status strategy: the conditions the
/// kubelet does not own come from the stored status (clients write them through the status
/// subresource), then the kubelet's own (D1); a `DisruptionTarget` is kept unless the new
/// status has one (D8); the QoS class stays as the API server set it.
#[must_use]
pub fn merge_status(stored: Option<&PodStatus>, mut ours: PodStatus) -> PodStatus {
    let theirs = stored
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let own = ours.conditions.take().unwrap_or_default();
    let ours_has_disruption = own.iter().any(|c| c.type_ == DISRUPTION_TARGET);
    let kubelets = |t: &str| KUBELET_CONDITIONS.contains(&t);
    let mut merged: Vec<PodCondition> = theirs
        .into_iter()
        .filter(|c| !(kubelets(&c.type_) || (c.type_ == DISRUPTION_TARGET && ours_has_disruption)))
        .collect();
    merged.extend(
        own.into_iter()
            .filter(|c| kubelets(&c.type_) || c.type_ == DISRUPTION_TARGET),
    );
    ours.conditions = (!merged.is_empty()).then_some(merged);
    if let Some(qos) = stored.and_then(|s| s.qos_class.clone()) {
        ours.qos_class = Some(qos);
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
    use crate::PodUpdate;
    use crate::clock::SystemClock;
    use crate::node::pending::HISTORY_PENDING;
    use podvisor_lifecycle::{Event, EventType};
    use serde_json::json;

    /// A pod of `n` containers, `exited` of them terminated.
    fn pod_with(n: usize, exited: usize, phase: &str) -> Pod {
        let statuses: Vec<_> = (0..n)
            .map(|i| {
                let state = if i < exited {
                    json!({"terminated": {"exitCode": 0, "reason": "Completed"}})
                } else {
                    json!({"running": {}})
                };
                json!({"name": format!("c{i}"), "image": "busybox", "imageID": "",
                    "ready": false, "restartCount": 0, "state": state})
            })
            .collect();
        serde_json::from_value(json!({
            "metadata": {"name": "big", "namespace": "default", "uid": "u-1"},
            "spec": {"containers": (0..n).map(|i| json!({"name": format!("c{i}"), "image": "busybox"})).collect::<Vec<_>>()},
            "status": {"phase": phase, "containerStatuses": statuses},
        }))
        .unwrap()
    }

    /// A burst of statuses (a large pod's containers exiting one after another) is coalesced:
    /// the store gets a few writes ending with the final status, every event is recorded, and
    /// the node's history holds a bounded share of the burst, not a full status per exit.
    #[tokio::test]
    async fn a_burst_of_statuses_is_a_few_writes_of_the_newest() {
        let dir = std::env::temp_dir().join(format!("podvisor-writer-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let store = Store::open(&dir.join("store.redb")).unwrap();
        let key = Key::new("pods", "default", "big");
        let n = 40;
        store
            .create(
                &key,
                serde_json::to_value(pod_with(n, 0, "Running")).unwrap(),
            )
            .unwrap();
        let mut watch = store
            .watch("pods", None, podvisor_store::WatchFrom::Now)
            .unwrap();
        let history = Arc::new(HistoryStore::open(&dir.join("history")).unwrap());
        let (tx, rx) = mpsc::unbounded_channel();
        let handle = PodHandle::scripted(&pod_with(n, 0, "Running"), rx);
        // Everything the worker publishes is there before the writer runs.
        for exited in 1..=n {
            tx.send(PodUpdate::Status(Box::new(pod_with(n, exited, "Running"))))
                .unwrap();
            tx.send(PodUpdate::Event(TimedEvent {
                time: jiff::Timestamp::now(),
                event: Event {
                    type_: EventType::Normal,
                    reason: "Killing",
                    message: format!("Stopping container c{exited}"),
                    container: None,
                },
            }))
            .unwrap();
        }
        tx.send(PodUpdate::Terminated(Box::new(pod_with(n, n, "Succeeded"))))
            .unwrap();
        drop(tx);
        let (finished, mut finished_rx) = mpsc::unbounded_channel();
        let writer = Writer {
            store: store.clone(),
            host: "node".into(),
            recorder: None,
            key: key.clone(),
            uid: "u-1".into(),
            latest: watch::channel(None).0,
            finished,
            history: Some((Arc::clone(&history), Arc::new(SystemClock))),
            unwritten: None,
        };
        writer.run(handle, oneshot::channel().1).await;
        assert!(finished_rx.recv().await.is_some());
        let mut writes = Vec::new();
        while let Some(event) = watch.try_next() {
            writes.push(event.object["status"]["phase"].as_str().unwrap().to_owned());
        }
        assert_eq!(writes, ["Succeeded"], "one write, the final status");
        let stored = store.get(&key).unwrap().unwrap();
        assert_eq!(stored["status"]["phase"], "Succeeded");
        let transitions = history.read("u-1").unwrap();
        assert!(
            transitions.len() <= HISTORY_PENDING,
            "{} history lines for {n} statuses",
            transitions.len()
        );
        assert_eq!(
            transitions.last().unwrap().status.phase.as_deref(),
            Some("Succeeded")
        );
        let (events, _) = store.list("events", Some("default")).unwrap();
        let killing: usize = events
            .iter()
            .filter(|e| e["reason"] == "Killing")
            .map(|e| e["count"].as_u64().unwrap_or(1) as usize)
            .sum();
        assert!(killing >= n.min(10), "{killing} Killing events recorded");
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn status(v: Value) -> PodStatus {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn d1_conditions_of_others_are_kept_and_the_kubelets_replaced() {
        let stored = status(json!({"qosClass": "Burstable", "conditions": [
            {"type": "example.com/gate", "status": "True"},
            {"type": "Ready", "status": "False"},
        ]}));
        let ours = status(
            json!({"phase": "Running", "qosClass": "BestEffort", "conditions": [
                {"type": "example.com/gate", "status": "False"},
                {"type": "Ready", "status": "True"},
            ]}),
        );
        let merged = serde_json::to_value(merge_status(Some(&stored), ours)).unwrap();
        assert_eq!(
            merged["conditions"],
            json!([
                {"type": "example.com/gate", "status": "True"},
                {"type": "Ready", "status": "True"},
            ])
        );
        assert_eq!(merged["phase"], "Running");
        assert_eq!(
            merged["qosClass"], "Burstable",
            "the API server's QoS class stays"
        );
    }

    #[test]
    fn d8_a_disruption_target_is_kept_until_the_kubelet_writes_one() {
        let stored =
            status(json!({"conditions": [{"type": "DisruptionTarget", "status": "True"}]}));
        let merged = merge_status(Some(&stored), status(json!({"conditions": []})));
        assert_eq!(merged.conditions.unwrap()[0].type_, "DisruptionTarget");
        let ours = status(json!({"conditions": [{"type": "DisruptionTarget", "status": "False"}]}));
        let merged = merge_status(Some(&stored), ours);
        assert_eq!(merged.conditions.unwrap()[0].status, "False");
    }
}
