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
//! events.
//! - `gcOrphaned`: a pod bound to a Node that does not exist, for the quarantine time
//!   ([`ORPHAN_QUARANTINE`], 40 s, from the pass that first saw it missing), gets
//!   `DisruptionTarget` (reason `DeletionByPodGC`, `PodGC: node no longer exists`) with
//!   `Failed` if not terminal, and is force-deleted.
//!
//! `gcTerminating` (pods on out-of-service tainted nodes) is not done: this node's agent
//! finishes its own pods.
//!
//! [`plan`] chooses what to collect (pure); [`collect`] does it against the store; [`run`] is
//! the controller loop `podvisor serve` starts.

use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use podvisor_store::{Key, Preconditions, Store, StoreError};
use serde_json::Value;

/// kube-controller-manager's default `--terminated-pod-gc-threshold`.
pub const DEFAULT_TERMINATED_POD_GC_THRESHOLD: usize = 12_500;

/// PodGC's `gcCheckPeriod`.
pub const GC_CHECK_PERIOD: Duration = Duration::from_secs(20);

/// PodGC's `quarantineTime`: how long a Node must be missing before its pods are orphans.
pub const ORPHAN_QUARANTINE: Duration = Duration::from_secs(40);

/// The nodes pods are bound to that are missing, and since when (upstream's `nodeQueue`).
#[derive(Debug, Default)]
pub struct Orphans {
    missing_since: HashMap<String, Instant>,
}

impl Orphans {
    /// The node names of `pods` that are not in `nodes` and have been missing for at least
    /// [`ORPHAN_QUARANTINE`] at `now`.
    pub fn missing(
        &mut self,
        pods: &[Pod],
        nodes: &BTreeSet<String>,
        now: Instant,
    ) -> BTreeSet<String> {
        let bound: BTreeSet<&str> = pods
            .iter()
            .filter_map(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()))
            .filter(|n| !n.is_empty() && !nodes.contains(*n))
            .collect();
        self.missing_since.retain(|n, _| bound.contains(n.as_str()));
        bound
            .into_iter()
            .filter(|n| {
                let since = *self.missing_since.entry((*n).to_owned()).or_insert(now);
                now.duration_since(since) >= ORPHAN_QUARANTINE
            })
            .map(str::to_owned)
            .collect()
    }
}

/// Why a pod is collected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// Beyond the terminated-pod threshold (`gcTerminated`).
    Terminated,
    /// Being deleted and never bound to a node (`gcUnscheduledTerminating`).
    TerminatingUnscheduled,
    /// Bound to a Node that no longer exists (`gcOrphaned`).
    Orphaned,
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
/// `threshold` (0: none), the pods bound to the `missing_nodes`, then the unscheduled
/// terminating ones. A pod appears once.
#[must_use]
pub fn plan(pods: &[Pod], threshold: usize, missing_nodes: &BTreeSet<String>) -> Vec<Collection> {
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
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .unwrap_or("");
        let uid = pod.metadata.uid.as_deref().unwrap_or("");
        if missing_nodes.contains(node) && !out.iter().any(|c| c.uid == uid) {
            out.push(collection(pod, Reason::Orphaned));
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

/// One PodGC pass over the store's pods and nodes at `now`; returns what was collected (a
/// pod that changed or went meanwhile is skipped).
///
/// # Errors
///
/// The pods or nodes could not be listed.
pub fn collect(
    store: &Store,
    threshold: usize,
    orphans: &mut Orphans,
    now: Instant,
) -> Result<Vec<Collection>, StoreError> {
    let (objects, _) = store.list("pods", None)?;
    let pods: Vec<Pod> = objects
        .into_iter()
        .filter_map(|o| serde_json::from_value(o).ok())
        .collect();
    let (nodes, _) = store.list("nodes", None)?;
    let nodes: BTreeSet<String> = nodes
        .iter()
        .filter_map(|n| n.pointer("/metadata/name").and_then(Value::as_str))
        .map(str::to_owned)
        .collect();
    let missing = orphans.missing(&pods, &nodes, now);
    let mut done = Vec::new();
    for c in plan(&pods, threshold, &missing) {
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
                if c.reason == Reason::Orphaned {
                    disruption_target(s);
                }
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

/// `UpdatePodCondition` with PodGC's `DisruptionTarget` condition for an orphaned pod.
fn disruption_target(status: &mut serde_json::Map<String, Value>) {
    let now = crate::request::time_text(crate::request::now());
    let condition = serde_json::json!({
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "DeletionByPodGC",
        "message": "PodGC: node no longer exists",
        "lastTransitionTime": now,
    });
    let conditions = status
        .entry("conditions")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Some(list) = conditions.as_array_mut() {
        match list.iter_mut().find(|c| c["type"] == "DisruptionTarget") {
            Some(existing) => *existing = condition,
            None => list.push(condition),
        }
    }
}

/// The PodGC controller: a pass every [`GC_CHECK_PERIOD`] (the first at once) until `stop`
/// completes.
pub async fn run(store: Store, threshold: usize, stop: impl std::future::Future<Output = ()>) {
    let mut tick = tokio::time::interval(GC_CHECK_PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(stop);
    let mut orphans = Orphans::default();
    loop {
        tokio::select! {
            () = &mut stop => return,
            _ = tick.tick() => {
                let store = store.clone();
                let mut o = std::mem::take(&mut orphans);
                let pass = tokio::task::spawn_blocking(move || {
                    let r = collect(&store, threshold, &mut o, Instant::now());
                    (o, r)
                })
                .await;
                match pass {
                    Ok((o, r)) => {
                        orphans = o;
                        if let Err(e) = r {
                            tracing::warn!("PodGC: listing pods: {e}");
                        }
                    }
                    Err(e) => tracing::warn!("PodGC: the pass failed: {e}"),
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

    fn none() -> BTreeSet<String> {
        BTreeSet::new()
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
        let got = plan(&pods, 2, &none());
        assert_eq!(names(&got), ["a", "b"]);
        assert!(
            got.iter()
                .all(|c| c.reason == Reason::Terminated && !c.mark_failed)
        );
        assert!(plan(&pods, 4, &none()).is_empty());
        assert!(plan(&pods, 5, &none()).is_empty());
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
        assert_eq!(names(&plan(&pods, 1, &none())), ["z-evicted", "x", "y"]);
    }

    /// M14: a threshold of 0 turns the terminated-pod collection off (`terminatedPodThreshold
    /// > 0`).
    #[test]
    fn m14_threshold_zero_collects_no_terminated_pod() {
        let pods = [pod("a", 1, "Succeeded"), pod("b", 2, "Failed")];
        assert!(plan(&pods, 0, &none()).is_empty());
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
            &none(),
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
        let got = plan(&[p, pod("b", 2, "Failed")], 1, &none());
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
        let node =
            serde_json::json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"}});
        store
            .create(&Key::cluster("nodes", "node-1"), node)
            .unwrap();
        let done = collect(&store, 1, &mut Orphans::default(), Instant::now()).unwrap();
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

    /// M14 (`gcOrphaned`): a pod bound to a Node missing for the quarantine time gets
    /// `DisruptionTarget` (`DeletionByPodGC`) and `Failed`, and is force-deleted; a pod on an
    /// existing Node, or on one missing for less than 40 s, stays.
    #[test]
    fn m14_pods_of_a_missing_node_are_orphans_after_the_quarantine() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("store.redb")).unwrap();
        let node =
            serde_json::json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "here"}});
        store.create(&Key::cluster("nodes", "here"), node).unwrap();
        let mut on_here = pod("on-here", 1, "Running");
        on_here.spec.as_mut().unwrap().node_name = Some("here".to_owned());
        let mut gone = pod("on-gone", 2, "Running");
        gone.spec.as_mut().unwrap().node_name = Some("gone".to_owned());
        for p in [on_here, gone] {
            let key = Key::new("pods", "default", p.metadata.name.as_deref().unwrap());
            store
                .create(&key, serde_json::to_value(&p).unwrap())
                .unwrap();
        }
        let mut orphans = Orphans::default();
        let t0 = Instant::now();
        assert!(collect(&store, 0, &mut orphans, t0).unwrap().is_empty());
        assert!(
            collect(&store, 0, &mut orphans, t0 + Duration::from_secs(20))
                .unwrap()
                .is_empty()
        );
        let mut watch = store
            .watch(
                "pods",
                None,
                podvisor_store::WatchFrom::After(store.resource_version()),
            )
            .unwrap();
        let done = collect(&store, 0, &mut orphans, t0 + ORPHAN_QUARANTINE).unwrap();
        assert_eq!(names(&done), ["on-gone"]);
        assert_eq!(done[0].reason, Reason::Orphaned);
        let marked = watch.try_next().expect("the status write");
        let status = &marked.object["status"];
        assert_eq!(status["phase"], "Failed");
        let c = &status["conditions"][0];
        assert_eq!(
            (
                c["type"].as_str(),
                c["status"].as_str(),
                c["reason"].as_str(),
                c["message"].as_str()
            ),
            (
                Some("DisruptionTarget"),
                Some("True"),
                Some("DeletionByPodGC"),
                Some("PodGC: node no longer exists")
            )
        );
        let (left, _) = store.list("pods", None).unwrap();
        assert_eq!(left.len(), 1);
        assert_eq!(left[0]["metadata"]["name"], "on-here");
    }
}
