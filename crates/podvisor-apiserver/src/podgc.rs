//! Pod garbage collection, as kube-controller-manager's PodGC controller does it for this
//! node (M14, `pkg/controller/podgc/gc_controller.go`), every 20 s:
//!
//! - `gcTerminated`: when more than `--terminated-pod-gc-threshold` pods are `Succeeded` or
//!   `Failed` (any phase but Pending, Running and Unknown), the excess is force-deleted,
//!   evicted pods first, then oldest first (`creationTimestamp`, then name);
//!   a threshold of 0 turns this off;
//! - `gcUnscheduledTerminating`: a pod being deleted that was never bound (no
//!   `spec.nodeName`) is marked `Failed` and force-deleted (no kubelet will ever finish it).
//!
//! Force-deleting is upstream's `markFailedAndDeletePodWithCondition`: a pod not yet
//! terminal first gets `status.phase: Failed` (a status write a watch sees as MODIFIED), then
//! a delete with grace 0 (DELETED, or only marked while finalizers remain). PodGC records no
//! events. `DisruptionTarget` (reason `DeletionByPodGC`, `PodGC: node no longer exists`) is
//! upstream's for `gcOrphaned` only: pods bound to a Node object that no longer exists. That
//! part, and `gcTerminating` (out-of-service nodes), need Node objects, which podvisor does
//! not serve yet; they are not done.
//!
//! [`plan`] chooses what to collect (pure); [`collect`] does it against the store; [`run`] is
//! the controller loop `podvisor serve` starts.

use std::cmp::Ordering;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use podvisor_store::{Key, Preconditions, Store, StoreError};
use serde_json::Value;

/// kube-controller-manager's default `--terminated-pod-gc-threshold`.
pub const DEFAULT_TERMINATED_POD_GC_THRESHOLD: usize = 12_500;

/// PodGC's `gcCheckPeriod`.
pub const GC_CHECK_PERIOD: Duration = Duration::from_secs(20);

/// Why a pod is collected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// Beyond the terminated-pod threshold (`gcTerminated`).
    Terminated,
    /// Being deleted and never bound to a node (`gcUnscheduledTerminating`).
    TerminatingUnscheduled,
}

/// One pod to force-delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Collection {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub name: String,
    /// The pod's UID (the writes are UID-checked: a new pod of the same name is left alone).
    pub uid: String,
    /// The pod is not terminal: its phase is set to `Failed` before the delete.
    pub mark_failed: bool,
    /// Why.
    pub reason: Reason,
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

/// `isPodTerminated`: any phase but Pending, Running and Unknown (an empty phase counts as
/// terminated too, as upstream's test does).
fn is_terminated(pod: &Pod) -> bool {
    !matches!(phase(pod), "Pending" | "Running" | "Unknown")
}

/// `eviction.PodIsEvicted`: Failed with reason `Evicted`.
fn is_evicted(pod: &Pod) -> bool {
    pod.status.as_ref().is_some_and(|s| {
        s.phase.as_deref() == Some("Failed") && s.reason.as_deref() == Some("Evicted")
    })
}

/// `byEvictionAndCreationTimestamp`: evicted pods first, then by creation time, then name.
fn by_eviction_and_creation(a: &Pod, b: &Pod) -> Ordering {
    is_evicted(b)
        .cmp(&is_evicted(a))
        .then_with(|| {
            let created = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
            created(a).cmp(&created(b))
        })
        .then_with(|| a.metadata.name.cmp(&b.metadata.name))
}

fn collection(pod: &Pod, reason: Reason) -> Collection {
    Collection {
        namespace: pod.metadata.namespace.clone().unwrap_or_default(),
        name: pod.metadata.name.clone().unwrap_or_default(),
        uid: pod.metadata.uid.clone().unwrap_or_default(),
        mark_failed: !matches!(phase(pod), "Succeeded" | "Failed"),
        reason,
    }
}

/// What one PodGC pass collects from `pods`, in upstream's order: the terminated pods beyond
/// `threshold` (0: none), then the unscheduled terminating ones. A pod appears once.
#[must_use]
pub fn plan(pods: &[Pod], threshold: usize) -> Vec<Collection> {
    let mut out = Vec::new();
    if threshold > 0 {
        let mut terminated: Vec<&Pod> = pods.iter().filter(|p| is_terminated(p)).collect();
        if terminated.len() > threshold {
            let excess = terminated.len() - threshold;
            terminated.sort_by(|a, b| by_eviction_and_creation(a, b));
            out.extend(
                terminated[..excess]
                    .iter()
                    .map(|p| collection(p, Reason::Terminated)),
            );
        }
    }
    for pod in pods {
        let unbound = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .unwrap_or("")
            .is_empty();
        let uid = pod.metadata.uid.as_deref().unwrap_or("");
        if pod.metadata.deletion_timestamp.is_some() && unbound && !out.iter().any(|c| c.uid == uid)
        {
            out.push(collection(pod, Reason::TerminatingUnscheduled));
        }
    }
    out
}

/// One PodGC pass over the store's pods; returns what was collected (a pod that changed or
/// went meanwhile is skipped).
///
/// # Errors
///
/// The pods could not be listed.
pub fn collect(store: &Store, threshold: usize) -> Result<Vec<Collection>, StoreError> {
    let (objects, _) = store.list("pods", None)?;
    let pods: Vec<Pod> = objects
        .into_iter()
        .filter_map(|o| serde_json::from_value(o).ok())
        .collect();
    let mut done = Vec::new();
    for c in plan(&pods, threshold) {
        match force_delete(store, &c) {
            Ok(()) => done.push(c),
            Err(StoreError::NotFound(_) | StoreError::Conflict { .. }) => {}
            Err(e) => tracing::warn!("PodGC: deleting {}/{}: {e}", c.namespace, c.name),
        }
    }
    Ok(done)
}

/// `markFailedAndDeletePod`: `phase: Failed` first if the pod is not terminal, then a delete
/// with grace 0, both UID-checked.
fn force_delete(store: &Store, c: &Collection) -> Result<(), StoreError> {
    let key = Key::new("pods", &c.namespace, &c.name);
    if c.mark_failed {
        store.update_with(&key, |mut current| {
            if current.pointer("/metadata/uid").and_then(Value::as_str) != Some(c.uid.as_str()) {
                return Err(StoreError::NotFound(key.clone()));
            }
            let status = current
                .as_object_mut()
                .ok_or_else(|| StoreError::Invalid("a pod is not an object".to_owned()))?
                .entry("status")
                .or_insert_with(|| Value::Object(serde_json::Map::new()));
            if let Some(s) = status.as_object_mut() {
                s.insert("phase".to_owned(), Value::from("Failed"));
            }
            Ok(current)
        })?;
    }
    store.delete(
        &key,
        Preconditions {
            uid: Some(c.uid.clone()),
            resource_version: None,
        },
    )?;
    tracing::info!(
        "PodGC is force deleting Pod {}/{} ({:?})",
        c.namespace,
        c.name,
        c.reason
    );
    Ok(())
}

/// The PodGC controller: a pass every [`GC_CHECK_PERIOD`] (the first at once) until `stop`
/// completes.
pub async fn run(store: Store, threshold: usize, stop: impl std::future::Future<Output = ()>) {
    let mut tick = tokio::time::interval(GC_CHECK_PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(stop);
    loop {
        tokio::select! {
            () = &mut stop => return,
            _ = tick.tick() => {
                let store = store.clone();
                let pass = tokio::task::spawn_blocking(move || collect(&store, threshold)).await;
                if let Ok(Err(e)) = pass {
                    tracing::warn!("PodGC: listing pods: {e}");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::Timestamp;
    use k8s_openapi::api::core::v1::{PodSpec, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn pod(name: &str, created: i64, phase: &str) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.namespace = Some("default".to_owned());
        pod.metadata.name = Some(name.to_owned());
        pod.metadata.uid = Some(format!("uid-{name}"));
        pod.metadata.creation_timestamp = Some(Time(Timestamp::from_second(created).unwrap()));
        pod.spec = Some(PodSpec {
            node_name: Some("node-1".to_owned()),
            ..PodSpec::default()
        });
        pod.status = Some(PodStatus {
            phase: Some(phase.to_owned()),
            ..PodStatus::default()
        });
        pod
    }

    fn names(plan: &[Collection]) -> Vec<&str> {
        plan.iter().map(|c| c.name.as_str()).collect()
    }

    /// M14: terminated pods beyond the threshold go, oldest first; running ones never count.
    #[test]
    fn m14_terminated_pods_beyond_the_threshold_go_oldest_first() {
        let pods = [
            pod("c", 30, "Succeeded"),
            pod("a", 10, "Failed"),
            pod("run", 5, "Running"),
            pod("pending", 1, "Pending"),
            pod("b", 20, "Succeeded"),
            pod("d", 40, "Failed"),
        ];
        let got = plan(&pods, 2);
        assert_eq!(names(&got), ["a", "b"]);
        assert!(
            got.iter()
                .all(|c| c.reason == Reason::Terminated && !c.mark_failed)
        );
        assert!(plan(&pods, 4).is_empty());
        assert!(plan(&pods, 5).is_empty());
    }

    /// M14 (`byEvictionAndCreationTimestamp`): evicted pods go first, equal creation times
    /// are ordered by name.
    #[test]
    fn m14_evicted_pods_go_first_and_names_break_ties() {
        let mut evicted = pod("z-evicted", 50, "Failed");
        evicted.status.as_mut().unwrap().reason = Some("Evicted".to_owned());
        let pods = [
            pod("y", 10, "Succeeded"),
            pod("x", 10, "Succeeded"),
            evicted,
            pod("w", 60, "Failed"),
        ];
        assert_eq!(names(&plan(&pods, 1)), ["z-evicted", "x", "y"]);
    }

    /// M14: a threshold of 0 turns the terminated-pod collection off (`terminatedPodThreshold
    /// > 0`).
    #[test]
    fn m14_threshold_zero_collects_no_terminated_pod() {
        let pods = [pod("a", 1, "Succeeded"), pod("b", 2, "Failed")];
        assert!(plan(&pods, 0).is_empty());
    }

    /// M14 (`gcUnscheduledTerminating`): a deleted pod that was never bound is marked Failed
    /// and deleted; a bound one is the kubelet's to finish.
    #[test]
    fn m14_unscheduled_terminating_pods_are_marked_failed_and_deleted() {
        let mut gated = pod("gated", 1, "Pending");
        gated.spec.as_mut().unwrap().node_name = None;
        gated.metadata.deletion_timestamp = Some(Time(Timestamp::from_second(100).unwrap()));
        let mut bound = pod("bound", 2, "Running");
        bound.metadata.deletion_timestamp = Some(Time(Timestamp::from_second(100).unwrap()));
        let mut unbound_alive = pod("waiting", 3, "Pending");
        unbound_alive.spec.as_mut().unwrap().node_name = None;
        let got = plan(
            &[gated, bound, unbound_alive],
            DEFAULT_TERMINATED_POD_GC_THRESHOLD,
        );
        assert_eq!(
            got,
            [Collection {
                namespace: "default".to_owned(),
                name: "gated".to_owned(),
                uid: "uid-gated".to_owned(),
                mark_failed: true,
                reason: Reason::TerminatingUnscheduled,
            }]
        );
    }

    /// A pod both beyond the threshold and unscheduled-terminating is collected once.
    #[test]
    fn m14_a_pod_is_collected_once() {
        let mut p = pod("a", 1, "Failed");
        p.spec.as_mut().unwrap().node_name = None;
        p.metadata.deletion_timestamp = Some(Time(Timestamp::from_second(5).unwrap()));
        let got = plan(&[p, pod("b", 2, "Failed")], 1);
        assert_eq!(names(&got), ["a"]);
    }

    /// The store side: the collected pods are gone (a watch sees them deleted), a
    /// non-terminal one was written `Failed` first.
    #[test]
    fn m14_collect_deletes_from_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("store.redb")).unwrap();
        let mut gated = pod("gated", 1, "Pending");
        gated.spec.as_mut().unwrap().node_name = None;
        gated.metadata.deletion_timestamp = Some(Time(Timestamp::from_second(100).unwrap()));
        // Still within a grace period (a zero one would let the status write remove it).
        gated.metadata.deletion_grace_period_seconds = Some(30);
        for p in [
            pod("old", 1, "Succeeded"),
            pod("new", 2, "Succeeded"),
            gated,
        ] {
            let key = Key::new("pods", "default", p.metadata.name.as_deref().unwrap());
            store
                .create(&key, serde_json::to_value(&p).unwrap())
                .unwrap();
        }
        let mut watch = store
            .watch(
                "pods",
                None,
                podvisor_store::WatchFrom::After(store.resource_version()),
            )
            .unwrap();
        let done = collect(&store, 1).unwrap();
        assert_eq!(names(&done), ["old", "gated"]);
        let (left, _) = store.list("pods", None).unwrap();
        assert_eq!(left.len(), 1);
        let mut seen = Vec::new();
        for _ in 0..3 {
            let e = watch.try_next().expect("a watch event");
            seen.push(format!(
                "{:?} {} {}",
                e.type_,
                e.object["metadata"]["name"].as_str().unwrap(),
                e.object["status"]["phase"].as_str().unwrap()
            ));
        }
        assert_eq!(
            seen,
            [
                "Deleted old Succeeded",
                "Modified gated Failed",
                "Deleted gated Failed"
            ]
        );
    }
}
