//! kube-controller-manager's taint-eviction controller (`pkg/controller/tainteviction`):
//! pods bound to a node with `NoExecute` taints they do not tolerate are deleted — at once,
//! or once the shortest `tolerationSeconds` of the tolerations they use has passed since the
//! controller saw the taint; a taint removed (or a pod that came to tolerate it for ever)
//! cancels a deletion not yet done, with a Normal `TaintManagerEviction` event `Cancelling
//! deletion of Pod <ns>/<name>`. A deletion is the Normal event `Marking for deletion Pod
//! <ns>/<name>`, the condition `DisruptionTarget` (reason `DeletionByTaintManager`, message
//! `Taint manager: deleting due to NoExecute taint`), then a graceful delete with the pod's
//! own grace period, as `kubectl delete` makes it.
//!
//! [`Tracker`] is upstream's timed work queue, pure; [`run`] is the loop `ApiServer::run`
//! starts.

use std::collections::HashMap;
use std::future::Future;
use std::time::Instant;

use k8s_openapi::api::core::v1::{Pod, PodCondition, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use podvisor_api::scheduling::taints::{Eviction, NO_EXECUTE, no_execute_eviction};
use podvisor_lifecycle::EventType as Kind;
use podvisor_store::{EventType, Store, StoreError, WatchEvent, WatchFrom};
use serde_json::Value;

use crate::db::{self, NODES, PODS};
use crate::request::now;
use crate::scheduler::events::record;

/// The controller's event source.
const COMPONENT: &str = "taint-eviction-controller";
/// Its events' reason.
const EVENT_REASON: &str = "TaintManagerEviction";
/// The `DisruptionTarget` condition's reason and message.
const CONDITION_REASON: &str = "DeletionByTaintManager";
const CONDITION_MESSAGE: &str = "Taint manager: deleting due to NoExecute taint";

/// A pod's deletion: waiting for its time, or done (kept so that it is not done twice,
/// as upstream's queue keeps a fired key until it is cancelled).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Work {
    Waiting { created: Instant, fire: Instant },
    Fired,
}

#[derive(Debug, Clone)]
struct Entry {
    namespace: String,
    name: String,
    work: Work,
}

/// The deletions the controller has scheduled, by pod uid (`TimedWorkerQueue`).
#[derive(Debug, Default)]
pub(crate) struct Tracker {
    entries: HashMap<String, Entry>,
}

impl Tracker {
    /// `processPodOnNode` for pod `uid` (`ns/name`) at `now`, given what its tolerations make
    /// of its node's taints (`None`: the node has no `NoExecute` taint). Returns whether a
    /// waiting deletion was cancelled (the controller says so in an event).
    pub(crate) fn process(
        &mut self,
        uid: &str,
        ns: &str,
        name: &str,
        eviction: Option<Eviction>,
        now: Instant,
    ) -> bool {
        let fire = match eviction {
            None | Some(Eviction::Never) => return self.cancel(uid),
            Some(Eviction::Now) => {
                let cancelled = self.cancel(uid);
                self.add(uid, ns, name, now, now);
                return cancelled;
            }
            Some(Eviction::After(d)) => now + d,
        };
        // Work already there (waiting or done) stays as it is: upstream's trigger time only
        // moves when the work is new.
        if !self.entries.contains_key(uid) {
            self.add(uid, ns, name, now, fire);
        }
        false
    }

    fn add(&mut self, uid: &str, ns: &str, name: &str, created: Instant, fire: Instant) {
        self.entries.entry(uid.to_owned()).or_insert_with(|| Entry {
            namespace: ns.to_owned(),
            name: name.to_owned(),
            work: Work::Waiting { created, fire },
        });
    }

    /// `CancelWork`: drops the pod's work; true when a deletion was still waiting.
    pub(crate) fn cancel(&mut self, uid: &str) -> bool {
        self.entries
            .remove(uid)
            .is_some_and(|e| matches!(e.work, Work::Waiting { .. }))
    }

    /// The deletions due at `now`, `(uid, namespace, name)`; they are marked done.
    pub(crate) fn due(&mut self, now: Instant) -> Vec<(String, String, String)> {
        let mut out = Vec::new();
        for (uid, e) in &mut self.entries {
            if let Work::Waiting { fire, .. } = e.work
                && fire <= now
            {
                e.work = Work::Fired;
                out.push((uid.clone(), e.namespace.clone(), e.name.clone()));
            }
        }
        out.sort_by(|a, b| (&a.1, &a.2).cmp(&(&b.1, &b.2)));
        out
    }

    /// When the next deletion is due.
    pub(crate) fn next_due(&self) -> Option<Instant> {
        self.entries
            .values()
            .filter_map(|e| match e.work {
                Work::Waiting { fire, .. } => Some(fire),
                Work::Fired => None,
            })
            .min()
    }

    /// When the pod's waiting deletion was scheduled, if one waits.
    #[cfg(test)]
    fn created(&self, uid: &str) -> Option<Instant> {
        match self.entries.get(uid)?.work {
            Work::Waiting { created, .. } => Some(created),
            Work::Fired => None,
        }
    }
}

/// A Node's `NoExecute` taints.
fn no_execute_taints(node: &Value) -> Vec<Taint> {
    let taints: Vec<Taint> = node
        .pointer("/spec/taints")
        .and_then(|t| serde_json::from_value(t.clone()).ok())
        .unwrap_or_default();
    taints
        .into_iter()
        .filter(|t| t.effect == NO_EXECUTE)
        .collect()
}

fn str_at<'a>(obj: &'a Value, path: &str) -> &'a str {
    obj.pointer(path).and_then(Value::as_str).unwrap_or("")
}

/// The controller's view: each node's `NoExecute` taints and the deletions scheduled.
struct Controller {
    store: Store,
    taints: HashMap<String, Vec<Taint>>,
    tracker: Tracker,
}

impl Controller {
    /// Processes one pod (as stored) against its node's taints.
    fn process_pod(&mut self, pod_value: &Value, at: Instant) {
        let node = str_at(pod_value, "/spec/nodeName");
        if node.is_empty() {
            return;
        }
        let Ok(pod) = serde_json::from_value::<Pod>(pod_value.clone()) else {
            return;
        };
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let taints = self.taints.get(node).map_or(&[][..], Vec::as_slice);
        let tolerations = pod
            .spec
            .as_ref()
            .and_then(|s| s.tolerations.as_deref())
            .unwrap_or(&[]);
        if self.tracker.process(
            &uid,
            &ns,
            &name,
            no_execute_eviction(taints, tolerations),
            at,
        ) {
            self.cancelled(&pod);
        }
    }

    /// The Normal event of a cancelled deletion.
    fn cancelled(&self, pod: &Pod) {
        let ns = pod.metadata.namespace.as_deref().unwrap_or("");
        let name = pod.metadata.name.as_deref().unwrap_or("");
        let message = format!("Cancelling deletion of Pod {ns}/{name}");
        let written = self.store.transaction(|t| {
            record(
                t,
                COMPONENT,
                pod,
                Kind::Normal,
                EVENT_REASON,
                &message,
                now(),
            )
        });
        if let Err(e) = written {
            tracing::warn!(
                "taint-eviction controller: recording the cancellation for {ns}/{name}: {e}"
            );
        }
    }

    fn on_node(&mut self, ev: &WatchEvent, at: Instant) -> Result<(), StoreError> {
        let name = str_at(&ev.object, "/metadata/name").to_owned();
        let fresh = if ev.type_ == EventType::Deleted {
            Vec::new()
        } else {
            no_execute_taints(&ev.object)
        };
        let old = self.taints.get(&name).cloned().unwrap_or_default();
        if fresh.is_empty() {
            self.taints.remove(&name);
        } else {
            self.taints.insert(name.clone(), fresh.clone());
        }
        if old == fresh {
            return Ok(());
        }
        let (pods, _) = self
            .store
            .list_filtered(PODS.plural, None, |p| str_at(p, "/spec/nodeName") == name)?;
        for p in &pods {
            self.process_pod(p, at);
        }
        Ok(())
    }

    fn on_pod(&mut self, ev: &WatchEvent, at: Instant) {
        if ev.type_ == EventType::Deleted {
            let uid = str_at(&ev.object, "/metadata/uid");
            if self.tracker.cancel(uid)
                && let Ok(pod) = serde_json::from_value::<Pod>(ev.object.clone())
            {
                self.cancelled(&pod);
            }
            return;
        }
        // Only a new binding or a change of tolerations changes the decision.
        let before = ev.previous();
        let changed = before.as_ref().is_none_or(|old| {
            old.pointer("/spec/nodeName") != ev.object.pointer("/spec/nodeName")
                || old.pointer("/spec/tolerations") != ev.object.pointer("/spec/tolerations")
        });
        if changed {
            self.process_pod(&ev.object, at);
        }
    }

    /// Everything as it is now (at start, and after the store dropped a watch).
    fn resync(&mut self, at: Instant) -> Result<(), StoreError> {
        let (nodes, _) = self.store.list(NODES.plural, None)?;
        self.taints = nodes
            .iter()
            .map(|n| (str_at(n, "/metadata/name").to_owned(), no_execute_taints(n)))
            .filter(|(_, t)| !t.is_empty())
            .collect();
        let (pods, _) = self.store.list(PODS.plural, None)?;
        for p in &pods {
            self.process_pod(p, at);
        }
        Ok(())
    }
}

/// `addConditionAndDeletePod` with the event before it: pod `ns/name` (still of `uid`) gets
/// the Normal `Marking for deletion` event and `DisruptionTarget`, then a graceful delete.
fn evict(store: &Store, ns: &str, name: &str, uid: &str) -> Result<(), String> {
    let key = db::key(PODS, ns, name);
    let at = now();
    let found = store
        .transaction(|t| {
            let Some(value) = t.get(&key)? else {
                return Ok(false);
            };
            let Ok(pod) = serde_json::from_value::<Pod>(value) else {
                return Ok(false);
            };
            if pod.metadata.uid.as_deref() != Some(uid) {
                return Ok(false);
            }
            let message = format!("Marking for deletion Pod {ns}/{name}");
            record(t, COMPONENT, &pod, Kind::Normal, EVENT_REASON, &message, at)?;
            t.update_with(&key, |current| {
                let mut pod: Pod = serde_json::from_value(current)
                    .map_err(|e| StoreError::Invalid(format!("stored pod does not decode: {e}")))?;
                let status = pod.status.get_or_insert_with(Default::default);
                crate::scheduler::update_pod_condition(
                    status.conditions.get_or_insert_with(Vec::new),
                    PodCondition {
                        type_: "DisruptionTarget".to_owned(),
                        status: "True".to_owned(),
                        reason: Some(CONDITION_REASON.to_owned()),
                        message: Some(CONDITION_MESSAGE.to_owned()),
                        last_transition_time: Some(Time(at)),
                        ..PodCondition::default()
                    },
                );
                serde_json::to_value(&pod).map_err(|e| StoreError::Invalid(e.to_string()))
            })?;
            Ok(true)
        })
        .map_err(|e| e.to_string())?;
    if found {
        match crate::pods::delete_gracefully(store, ns, name) {
            Ok(_) => {}
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e.message),
        }
    }
    Ok(())
}

/// Runs `f`, which reads and writes the store, off the runtime's async threads where the
/// runtime has others (`block_in_place`), else in place.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::current().runtime_flavor() {
        tokio::runtime::RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}

fn watches(store: &Store) -> Result<(podvisor_store::Watch, podvisor_store::Watch), StoreError> {
    Ok((
        store.watch(PODS.plural, None, WatchFrom::Now)?,
        store.watch(NODES.plural, None, WatchFrom::Now)?,
    ))
}

/// The controller, until `stop`.
pub async fn run(store: Store, stop: impl Future<Output = ()>) {
    tokio::pin!(stop);
    let (mut pods, mut nodes) = match watches(&store) {
        Ok(w) => w,
        Err(e) => {
            tracing::error!("taint-eviction controller: watching pods and nodes: {e}");
            return;
        }
    };
    let mut ctl = Controller {
        store: store.clone(),
        taints: HashMap::new(),
        tracker: Tracker::default(),
    };
    if let Err(e) = blocking(|| ctl.resync(Instant::now())) {
        tracing::warn!("taint-eviction controller: {e}");
    }
    loop {
        let due = ctl.tracker.due(Instant::now());
        if !due.is_empty() {
            let s = store.clone();
            let _ = tokio::task::spawn_blocking(move || {
                for (uid, ns, name) in due {
                    tracing::info!("taint-eviction controller: deleting {ns}/{name}");
                    if let Err(e) = evict(&s, &ns, &name, &uid) {
                        tracing::warn!("taint-eviction controller: deleting {ns}/{name}: {e}");
                    }
                }
            })
            .await;
        }
        let wake = ctl.tracker.next_due().map(tokio::time::Instant::from_std);
        let sleep = async {
            match wake {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let lost = tokio::select! {
            () = &mut stop => return,
            ev = pods.next() => match ev {
                Some(ev) => { blocking(|| ctl.on_pod(&ev, Instant::now())); false }
                None => true,
            },
            ev = nodes.next() => match ev {
                Some(ev) => {
                    if let Err(e) = blocking(|| ctl.on_node(&ev, Instant::now())) {
                        tracing::warn!("taint-eviction controller: {e}");
                    }
                    false
                }
                None => true,
            },
            () = sleep => false,
        };
        if lost {
            // The store dropped a slow watcher: watch again and look at everything.
            match watches(&store) {
                Ok(w) => (pods, nodes) = w,
                Err(_) => return,
            }
            if let Err(e) = blocking(|| ctl.resync(Instant::now())) {
                tracing::warn!("taint-eviction controller: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// `TestCreatePod`/`TestUpdateNode`'s shape: untolerated now, tolerated for a while
    /// later, a removed taint cancels, fired work is not redone.
    #[test]
    fn the_tracker_schedules_fires_and_cancels_as_the_timed_queue() {
        let t0 = Instant::now();
        let mut tr = Tracker::default();
        assert!(!tr.process("a", "ns", "a", Some(Eviction::Now), t0));
        assert!(!tr.process(
            "b",
            "ns",
            "b",
            Some(Eviction::After(Duration::from_secs(2))),
            t0
        ));
        assert!(!tr.process("c", "ns", "c", Some(Eviction::Never), t0));
        assert_eq!(tr.due(t0), [("a".into(), "ns".into(), "a".into())]);
        assert_eq!(tr.next_due(), Some(t0 + Duration::from_secs(2)));
        // Seen again later: the trigger time does not move.
        let t1 = t0 + Duration::from_secs(1);
        assert!(!tr.process(
            "b",
            "ns",
            "b",
            Some(Eviction::After(Duration::from_secs(2))),
            t1
        ));
        assert_eq!(tr.created("b"), Some(t0));
        assert!(tr.due(t1).is_empty());
        assert_eq!(tr.due(t0 + Duration::from_secs(2)).len(), 1);
        // Fired work is kept: a later look with a toleration time does not schedule it
        // again, and cancelling it says nothing (nothing waited); an untolerated taint
        // seen again deletes again, as upstream's cancel-then-add does.
        assert!(!tr.process(
            "b",
            "ns",
            "b",
            Some(Eviction::After(Duration::from_secs(2))),
            t1
        ));
        assert!(tr.due(t0 + Duration::from_secs(10)).is_empty());
        assert!(!tr.cancel("b"));
        assert!(!tr.process("a", "ns", "a", Some(Eviction::Now), t1));
        assert_eq!(tr.due(t1).len(), 1);
        // A waiting deletion whose taint went is cancelled, and says so.
        assert!(!tr.process(
            "d",
            "ns",
            "d",
            Some(Eviction::After(Duration::from_secs(60))),
            t1
        ));
        assert!(tr.process("d", "ns", "d", None, t1));
        assert_eq!(tr.next_due(), None);
    }
}
