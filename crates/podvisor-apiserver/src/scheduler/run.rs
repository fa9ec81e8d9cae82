//! The scheduler's loop beside the API (started by `ApiServer::run`): it watches pods and
//! Nodes, keeps the pods that did not fit in the [`Queue`], and tries them again when a
//! change may let them fit, each attempt in its own store transaction
//! ([`super::attempt::attempt`]). New pods are not its business: the create (or the update
//! that removes the last scheduling gate) makes their first attempt in its own transaction.

use std::future::Future;
use std::time::Instant;

use k8s_openapi::api::core::v1::Pod;
use podvisor_store::{EventType, Store, StoreError, WatchEvent, WatchFrom};
use serde_json::Value;

use super::attempt::{Outcome, attempt, awaits_retry};
use super::queue::Queue;
use super::wants_binding;
use crate::db::{self, PODS};
use crate::request::now;

fn uid_of(obj: &Value) -> &str {
    obj.pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn str_at<'a>(obj: &'a Value, path: &str) -> &'a str {
    obj.pointer(path).and_then(Value::as_str).unwrap_or("")
}

/// Whether a Node change may let a pod fit: it is new, or its labels, spec (cordon, taints)
/// or allocatable changed (not its heartbeats and conditions).
fn node_may_fit_more(ev: &WatchEvent) -> bool {
    match ev.type_ {
        EventType::Added => true,
        EventType::Deleted => false,
        EventType::Modified => ev.previous().is_none_or(|old| {
            let new = &ev.object;
            old.pointer("/metadata/labels") != new.pointer("/metadata/labels")
                || old.get("spec") != new.get("spec")
                || old.pointer("/status/allocatable") != new.pointer("/status/allocatable")
        }),
    }
}

/// What of a pod counts as "the pod changed" for a retry (`isPodUpdated`: not its status,
/// resourceVersion, generation or managed fields).
fn pod_identity(pod: &Value) -> (Option<&Value>, Option<&Value>, Option<&Value>) {
    (
        pod.get("spec"),
        pod.pointer("/metadata/labels"),
        pod.pointer("/metadata/annotations"),
    )
}

/// Whether a change of a pod bound to `node` may free room: it went away, finished, or its
/// spec changed (a resize, say).
fn frees_room(ev: &WatchEvent, node: &str) -> bool {
    let was = ev.previous();
    let bound_here = |p: &Value| str_at(p, "/spec/nodeName") == node;
    let terminal = |p: &Value| matches!(str_at(p, "/status/phase"), "Succeeded" | "Failed");
    match ev.type_ {
        EventType::Added => false,
        EventType::Deleted => was.as_ref().is_some_and(bound_here),
        EventType::Modified => {
            let Some(old) = was else {
                return false;
            };
            bound_here(&old)
                && ((terminal(&ev.object) && !terminal(&old))
                    || old.get("spec") != ev.object.get("spec"))
        }
    }
}

/// Updates the queue with one pod event.
fn on_pod_event(queue: &mut Queue, ev: &WatchEvent, node: &str, at: Instant) {
    if frees_room(ev, node) {
        queue.move_all();
    }
    let uid = uid_of(&ev.object).to_owned();
    if ev.type_ == EventType::Deleted {
        queue.forget(&uid);
        return;
    }
    // Most events are of bound pods' statuses: those need no decoding.
    let waiting = str_at(&ev.object, "/spec/nodeName").is_empty()
        && serde_json::from_value::<Pod>(ev.object.clone())
            .is_ok_and(|p| wants_binding(&p) && awaits_retry(&p));
    if !waiting {
        queue.forget(&uid);
        return;
    }
    let ns = str_at(&ev.object, "/metadata/namespace");
    let name = str_at(&ev.object, "/metadata/name");
    if !queue.contains(&uid) {
        // Its first attempt failed in the write that created (or ungated) it.
        queue.failed(&uid, ns, name, at);
        return;
    }
    if ev
        .previous()
        .is_some_and(|old| pod_identity(&old) != pod_identity(&ev.object))
    {
        queue.move_one(&uid);
    }
}

/// Tries pod `ns/name` (of `uid`) again, in one transaction.
fn retry(
    store: &Store,
    node: &str,
    ns: &str,
    name: &str,
    uid: &str,
) -> Result<Outcome, StoreError> {
    store.transaction(|t| {
        let Some(value) = t.get(&db::key(PODS, ns, name))? else {
            return Ok(Outcome::Skipped);
        };
        let Ok(pod) = serde_json::from_value::<Pod>(value) else {
            return Ok(Outcome::Skipped);
        };
        if pod.metadata.uid.as_deref() != Some(uid) {
            return Ok(Outcome::Skipped);
        }
        attempt(t, node, &pod, now())
    })
}

fn watch_both(store: &Store) -> Result<(podvisor_store::Watch, podvisor_store::Watch), StoreError> {
    Ok((
        store.watch(PODS.plural, None, WatchFrom::Now)?,
        store.watch("nodes", None, WatchFrom::Now)?,
    ))
}

/// Pods that failed before (a restart): every pod waiting for a retry.
fn waiting_pods(store: &Store) -> Result<Vec<(String, String, String)>, StoreError> {
    let (pods, _) = store.list(PODS.plural, None)?;
    Ok(pods
        .iter()
        .filter(|v| {
            serde_json::from_value::<Pod>((*v).clone())
                .is_ok_and(|p| wants_binding(&p) && awaits_retry(&p))
        })
        .map(|v| {
            (
                uid_of(v).to_owned(),
                str_at(v, "/metadata/namespace").to_owned(),
                str_at(v, "/metadata/name").to_owned(),
            )
        })
        .collect())
}

/// The loop, until `stop`.
pub async fn run(store: Store, node: String, stop: impl Future<Output = ()>) {
    tokio::pin!(stop);
    let (mut pods, mut nodes) = match watch_both(&store) {
        Ok(w) => w,
        Err(e) => {
            tracing::error!("scheduler: watching pods and nodes: {e}");
            return;
        }
    };
    let mut queue = Queue::default();
    let s = store.clone();
    if let Ok(Ok(waiting)) = tokio::task::spawn_blocking(move || waiting_pods(&s)).await {
        let at = Instant::now();
        for (uid, ns, name) in waiting {
            queue.adopt(&uid, &ns, &name, at);
        }
    }
    loop {
        let due = queue.due(Instant::now());
        if !due.is_empty() {
            let (s, n) = (store.clone(), node.clone());
            let results = tokio::task::spawn_blocking(move || {
                due.into_iter()
                    .map(|(uid, ns, name)| {
                        let outcome = retry(&s, &n, &ns, &name, &uid);
                        (uid, ns, name, outcome)
                    })
                    .collect::<Vec<_>>()
            })
            .await
            .unwrap_or_default();
            let at = Instant::now();
            for (uid, ns, name, outcome) in results {
                match outcome {
                    Ok(Outcome::Unschedulable(_)) => queue.failed(&uid, &ns, &name, at),
                    Ok(Outcome::Bound | Outcome::Skipped) => queue.forget(&uid),
                    Err(e) => {
                        tracing::warn!("scheduler: scheduling {ns}/{name}: {e}");
                        queue.failed(&uid, &ns, &name, at);
                        queue.move_one(&uid);
                    }
                }
            }
        }
        let wake = queue.next_due().map(tokio::time::Instant::from_std);
        let sleep = async {
            match wake {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = &mut stop => return,
            ev = pods.next() => match ev {
                Some(ev) => on_pod_event(&mut queue, &ev, &node, Instant::now()),
                None => match watch_both(&store) {
                    // The store dropped a slow watcher: watch again, and look at everything.
                    Ok(w) => { (pods, nodes) = w; queue.move_all(); }
                    Err(_) => return,
                },
            },
            ev = nodes.next() => match ev {
                Some(ev) => if node_may_fit_more(&ev) { queue.move_all(); },
                None => match watch_both(&store) {
                    Ok(w) => { (pods, nodes) = w; queue.move_all(); }
                    Err(_) => return,
                },
            },
            () = sleep => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;
    use std::time::Duration;

    fn event(type_: EventType, object: Value, previous: Option<&Value>) -> WatchEvent {
        WatchEvent {
            type_,
            object,
            resource_version: 1,
            previous_json: previous.map(|p| Arc::from(serde_json::to_vec(p).unwrap())),
        }
    }

    fn waiting_pod(labels: Value) -> Value {
        json!({"metadata": {"name": "web", "namespace": "default", "uid": "u1", "labels": labels},
               "spec": {"schedulerName": "default-scheduler", "containers": [{"name": "c"}]},
               "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}})
    }

    fn bound_pod(phase: &str) -> Value {
        json!({"metadata": {"name": "other", "namespace": "default", "uid": "u2"},
               "spec": {"nodeName": "node-1", "containers": [{"name": "c"}]},
               "status": {"phase": phase}})
    }

    /// Only changes that may let a pod fit move it: not its own status writes (the
    /// scheduler's own condition), not a bound pod's status; its spec or labels, a bound pod
    /// finishing or going, a Node's labels, taints or cordon.
    #[test]
    fn only_relevant_changes_move_a_waiting_pod() {
        let t0 = Instant::now();
        let later = t0 + Duration::from_secs(1);
        let mut q = Queue::default();
        let pod = waiting_pod(json!({}));
        on_pod_event(
            &mut q,
            &event(EventType::Modified, pod.clone(), None),
            "node-1",
            t0,
        );
        assert!(q.contains("u1"));
        assert!(q.due(later).is_empty());
        let mut restated = pod.clone();
        restated["status"]["conditions"][0]["message"] = json!("again");
        on_pod_event(
            &mut q,
            &event(EventType::Modified, restated, Some(&pod)),
            "node-1",
            t0,
        );
        let running = bound_pod("Running");
        let mut ready = running.clone();
        ready["status"]["podIP"] = json!("10.0.0.1");
        on_pod_event(
            &mut q,
            &event(EventType::Modified, ready, Some(&running)),
            "node-1",
            t0,
        );
        assert!(q.due(later).is_empty(), "status writes move nothing");
        on_pod_event(
            &mut q,
            &event(EventType::Modified, bound_pod("Succeeded"), Some(&running)),
            "node-1",
            t0,
        );
        assert_eq!(q.due(later).len(), 1, "a finished pod frees room");

        let mut q = Queue::default();
        on_pod_event(
            &mut q,
            &event(EventType::Modified, pod.clone(), None),
            "node-1",
            t0,
        );
        let relabelled = waiting_pod(json!({"tier": "web"}));
        on_pod_event(
            &mut q,
            &event(EventType::Modified, relabelled, Some(&pod)),
            "node-1",
            t0,
        );
        assert_eq!(q.due(later).len(), 1, "the pod itself changed");
        on_pod_event(
            &mut q,
            &event(EventType::Deleted, pod.clone(), Some(&pod)),
            "node-1",
            t0,
        );
        assert!(!q.contains("u1"));

        let node = json!({"metadata": {"name": "node-1", "labels": {"a": "b"}}, "spec": {}, "status": {"allocatable": {"pods": "110"}}});
        let mut beat = node.clone();
        beat["status"]["conditions"] = json!([{"type": "Ready", "status": "True"}]);
        assert!(!node_may_fit_more(&event(
            EventType::Modified,
            beat,
            Some(&node)
        )));
        let mut cordoned = node.clone();
        cordoned["spec"]["unschedulable"] = json!(true);
        assert!(node_may_fit_more(&event(
            EventType::Modified,
            cordoned,
            Some(&node)
        )));
        let mut labelled = node.clone();
        labelled["metadata"]["labels"]["disk"] = json!("ssd");
        assert!(node_may_fit_more(&event(
            EventType::Modified,
            labelled,
            Some(&node)
        )));
        assert!(node_may_fit_more(&event(
            EventType::Added,
            node.clone(),
            None
        )));
    }
}
