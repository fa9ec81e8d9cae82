//! The node agent: runs the pods of the store on this machine, as the kubelet runs the pods
//! the API server binds to its node.
//!
//! One task (the *node loop*) lists and watches the pods of every namespace and reconciles
//! those bound to this node (`spec.nodeName`, as the kubelet's `spec.nodeName=<node>` field
//! selector; whoever binds them — a scheduler's binding or a create with `nodeName` — is not
//! its concern, and an unbound or scheduling-gated pod is never run):
//! a pod not running yet gets a pod worker ([`Agent::spawn_admitted`], keeping the API's UID);
//! a pod gaining a `deletionTimestamp` is deleted with its `deletionGracePeriodSeconds`; a pod
//! removed from the store while it runs (a forced delete) is deleted with grace 0 (T10: each
//! container still gets its 2 s); spec updates (images, `activeDeadlineSeconds`) and
//! conditions written by others (readiness gates) are passed on. Each pod worker has a status
//! writer (`node/writer.rs`) that writes its status and events to the store and, once a
//! deleted pod has terminated, removes its object (T9). A Succeeded or Failed pod keeps its
//! object until it is deleted; deleting it then removes it at once, since nothing runs.
//!
//! On start the node recovers (`node/recovery.rs`): every pod of the store gets its sandbox back
//! with the instances it still runs, and its machine is rebuilt from the last persisted status
//! ([`Agent::recover_pod`]): no container restarts, readiness does not flap, restart counts and
//! back-off go on, deleted pods go on terminating, pods created meanwhile start. Shims of pods
//! that are no longer in the store are torn down.
//!
//! With a manifests directory the node also runs file-sourced (static) pods
//! (`node/static_pods.rs`) and keeps their mirror pods in the store.
//!
//! Stopping the node stops its pod workers without touching their containers (like the
//! kubelet): a restarted node re-adopts them. Draining deletes every pod gracefully first.

mod allocation;
mod eviction;
mod objects;
mod pending;
mod recorder;
mod recovery;
mod static_pods;
mod writer;

pub use objects::StoreObjects;
pub use recorder::{
    AGGREGATE_INTERVAL, AGGREGATE_MAX_EVENTS, AGGREGATE_PREFIX, EventCorrelator, Recorder,
    SPAM_BURST, SPAM_REFILL,
};
pub use writer::{merge_status, write_pod_status};

use crate::log::{debug, warning};
use crate::{Agent, PodControl, PodHandle};
use allocation::{allocated_requests, resize_deferred};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Pod, PodCondition};
use podvisor_runtime::{ExecError, ExecRequest, ExecSession, ImageGcPolicy, Runtime, SandboxState};
use podvisor_store::{EventType, Key, Store, StoreError, Value, Watch, WatchEvent, WatchFrom};
use static_pods::{StaticPod, StaticSource, is_mirror, pod_key};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::{JoinHandle, JoinSet};
use writer::{Writer, foreign_conditions, uid_of};

/// How long a shutdown waits for the status writers to write what the pod workers published.
const SHUTDOWN_FLUSH: Duration = Duration::from_secs(5);

/// Settings of a [`Node`].
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// The node's name (`spec.nodeName`, static pod names).
    pub node_name: String,
    /// The static pod manifests directory, if any.
    pub manifests: Option<PathBuf>,
    /// How often the manifests directory is read.
    pub manifest_poll: Duration,
    /// Image garbage collection: the policy, and how often it runs (the kubelet's
    /// `ImageGCPeriod`, 5 minutes; `None`: never).
    pub image_gc: Option<(ImageGcPolicy, Duration)>,
    /// The eviction manager for the state directory's filesystem (`None`: none runs).
    pub eviction: Option<EvictionConfig>,
}

pub use eviction::EvictionConfig;

/// The kubelet's `ImageGCPeriod`.
pub const IMAGE_GC_PERIOD: Duration = Duration::from_secs(300);

/// What the start-up recovery found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Pods whose worker was rebuilt on their re-adopted sandbox.
    pub recovered: usize,
    /// Pods started afresh (created while the agent was down, or new static pods).
    pub started: usize,
    /// Sandboxes of pods no longer in the store, being torn down.
    pub orphans: usize,
    /// From the node's start until every pod had its worker.
    pub elapsed: Duration,
}

/// Errors of the node itself.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The pods could not be listed or watched.
    #[error("listing and watching pods: {0}")]
    Store(#[source] StoreError),
    /// The node loop panicked.
    #[error("the node loop ended abnormally: {0}")]
    Task(#[source] tokio::task::JoinError),
}

/// A running node agent (see the module docs).
pub struct Node {
    control: NodeControl,
    recovered: Option<oneshot::Receiver<Recovery>>,
    task: JoinHandle<Result<(), NodeError>>,
}

/// A cloneable way to drain or stop a [`Node`].
#[derive(Debug, Clone)]
pub struct NodeControl {
    commands: mpsc::UnboundedSender<NodeCommand>,
}

impl NodeControl {
    /// Deletes every pod gracefully (each with its grace period); the node ends once all have
    /// terminated. A later [`NodeControl::stop`] cuts it short.
    pub fn drain(&self) {
        let _ = self.commands.send(NodeCommand::Drain);
    }

    /// Stops the node: pod workers stop, containers keep running.
    pub fn stop(&self) {
        let _ = self.commands.send(NodeCommand::Stop);
    }

    /// Starts a streaming exec (`kubectl exec`) in the running instance of `container` of the
    /// pod with this UID ([`PodControl::exec`]).
    ///
    /// # Errors
    ///
    /// [`ExecError::ContainerNotFound`] when the pod has no worker or the container does not
    /// run; the runtime's error when the command cannot start.
    pub async fn exec(
        &self,
        uid: &str,
        container: &str,
        request: ExecRequest,
    ) -> Result<ExecSession, ExecError> {
        let not_found = || ExecError::ContainerNotFound(container.to_owned());
        let (reply, answer) = oneshot::channel();
        let command = NodeCommand::Exec {
            uid: uid.to_owned(),
            reply,
        };
        if self.commands.send(command).is_err() {
            return Err(not_found());
        }
        match answer.await {
            Ok(Some(control)) => control.exec(container, request).await,
            _ => Err(not_found()),
        }
    }

    /// A TCP connection to `port` in the network of the pod with this UID (`kubectl
    /// port-forward`).
    ///
    /// # Errors
    /// The pod is not on this node, has no sandbox, or nothing answers on the port.
    pub async fn port_forward(
        &self,
        uid: &str,
        port: u16,
    ) -> Result<tokio::net::TcpStream, String> {
        let (reply, answer) = oneshot::channel();
        let command = NodeCommand::Exec {
            uid: uid.to_owned(),
            reply,
        };
        let not_here = || format!("pod {uid} is not running on this node");
        if self.commands.send(command).is_err() {
            return Err(not_here());
        }
        match answer.await {
            Ok(Some(control)) => control.port_forward(port).await,
            _ => Err(not_here()),
        }
    }
}

#[derive(Debug)]
enum NodeCommand {
    Drain,
    Stop,
    /// The pod worker's control of the pod with this UID, if it has one.
    Exec {
        uid: String,
        reply: oneshot::Sender<Option<PodControl>>,
    },
}

impl Node {
    /// Starts the node loop: recovery first, then list + watch. Must be called within a tokio
    /// runtime.
    pub fn start<R: Runtime>(agent: Arc<Agent<R>>, store: Store, config: NodeConfig) -> Node {
        let (commands_tx, commands_rx) = mpsc::unbounded_channel();
        let (recovered_tx, recovered_rx) = oneshot::channel();
        let (finished_tx, finished_rx) = mpsc::unbounded_channel();
        let statics = config
            .manifests
            .clone()
            .map(|dir| StaticSource::new(dir, config.node_name.clone(), agent.gates()));
        let node = NodeLoop {
            agent,
            store,
            config,
            workers: HashMap::new(),
            done: HashSet::new(),
            statics,
            desired: BTreeMap::new(),
            static_done: HashSet::new(),
            writers: JoinSet::new(),
            trimmer: crate::memory::Trimmer::default(),
            finished_tx,
            background: JoinSet::new(),
            draining: false,
            eviction: None,
        };
        let task = tokio::spawn(node.run(commands_rx, finished_rx, recovered_tx));
        Node {
            control: NodeControl {
                commands: commands_tx,
            },
            recovered: Some(recovered_rx),
            task,
        }
    }

    /// Waits for the start-up recovery to finish (every pod of the store has its worker);
    /// `None` if the node failed before (see [`Node::join`]) or this was already asked.
    pub async fn recovered(&mut self) -> Option<Recovery> {
        self.recovered.take()?.await.ok()
    }

    /// A cloneable handle to drain or stop the node.
    pub fn control(&self) -> NodeControl {
        self.control.clone()
    }

    /// See [`NodeControl::drain`].
    pub fn drain(&self) {
        self.control.drain();
    }

    /// See [`NodeControl::stop`].
    pub fn stop(&self) {
        self.control.stop();
    }

    /// Waits for the node to end.
    ///
    /// # Errors
    ///
    /// When the pods could not be listed or watched, or the node loop panicked.
    pub async fn join(self) -> Result<(), NodeError> {
        self.task.await.map_err(NodeError::Task)?
    }

    /// [`Node::join`] without giving the node up (for `select!`); once it has returned, it
    /// must not be awaited again.
    ///
    /// # Errors
    ///
    /// As [`Node::join`].
    pub async fn join_mut(&mut self) -> Result<(), NodeError> {
        (&mut self.task).await.map_err(NodeError::Task)?
    }
}

/// A pod worker's end, reported by its status writer.
pub(crate) struct Finished {
    pub(crate) uid: String,
    pub(crate) key: Key,
    /// The pod's object is gone (it was deleted).
    pub(crate) removed: bool,
}

/// The node's view of one pod worker.
struct Worker {
    key: Key,
    control: PodControl,
    is_static: bool,
    /// Stops the status writer (and its pod worker) at shutdown.
    stop: Option<oneshot::Sender<()>>,
    /// The pod as its worker last published it.
    latest: watch::Receiver<Option<Box<Pod>>>,
    /// The spec, labels and annotations the worker was last given.
    spec: Value,
    /// The conditions owned by others the worker was last given.
    foreign: Vec<PodCondition>,
    /// The worker was told to delete the pod, with this grace (None: the pod's own).
    deleted: Option<Option<i64>>,
    /// The eviction manager evicted the pod: no longer a candidate.
    evicted: bool,
    /// The highest resourceVersion applied.
    rv: u64,
    /// The pod's object was removed from the store: its files go when the worker ends.
    gone: bool,
}

impl Worker {
    /// Passes on what changed in the pod's object: deletion, spec, foreign conditions.
    fn sync(&mut self, pod: &Pod) {
        if pod.metadata.deletion_timestamp.is_some() {
            let grace = pod.metadata.deletion_grace_period_seconds;
            let shorter = match (self.deleted, grace) {
                (None, _) => true,
                (Some(Some(old)), Some(new)) => new < old,
                (Some(None), Some(_)) => true,
                (Some(_), None) => false,
            };
            if shorter {
                debug!("node: {} deleted (grace {grace:?})", self.key);
                self.control.delete(grace);
                self.deleted = Some(grace);
            }
        }
        let spec = spec_view(pod);
        if spec != self.spec {
            debug!("node: {} spec updated", self.key);
            self.spec = spec;
            self.control.update_spec(pod.clone());
        }
        let foreign = foreign_conditions(pod);
        if foreign != self.foreign {
            debug!("node: {} conditions updated", self.key);
            self.foreign.clone_from(&foreign);
            self.control.update_conditions(foreign);
        }
    }

    fn force_delete(&mut self) {
        if self.deleted != Some(Some(0)) {
            self.control.delete(Some(0));
            self.deleted = Some(Some(0));
        }
    }
}

/// What a pod worker is told about updates: the spec and the metadata it may react to,
/// `generation` included (D10: its status observes it; a graceful delete increments it).
fn spec_view(pod: &Pod) -> Value {
    serde_json::json!({
        "spec": pod.spec,
        "labels": pod.metadata.labels,
        "annotations": pod.metadata.annotations,
        "generation": pod.metadata.generation,
    })
}

fn is_terminal(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

fn uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}

/// The pod is bound to the node `node` (the kubelet's pod source lists and watches only
/// `spec.nodeName=<node>`).
fn bound_to(pod: &Pod, node: &str) -> bool {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node)
}

fn decode(obj: Value) -> Option<Pod> {
    match serde_json::from_value::<Pod>(obj) {
        Ok(pod) if pod.metadata.uid.as_deref().is_some_and(|u| !u.is_empty()) => Some(pod),
        Ok(_) => None,
        Err(e) => {
            warning!("node: a stored pod does not decode: {e}");
            None
        }
    }
}

/// How a pod found at start-up continues.
enum Plan<S> {
    Adopted(Box<crate::Adopted<S>>),
    /// No sandbox to re-adopt: start afresh (or nothing, for a terminal pod).
    NoSandbox,
}

struct NodeLoop<R: Runtime> {
    agent: Arc<Agent<R>>,
    store: Store,
    config: NodeConfig,
    /// Running pod workers, by UID.
    workers: HashMap<String, Worker>,
    /// Pods whose worker has finished (or that were terminal when found) and whose object
    /// still exists: never started again.
    done: HashSet<String>,
    statics: Option<StaticSource>,
    /// The static pods of the manifests directory, by UID.
    desired: BTreeMap<String, StaticPod>,
    /// Static pods whose worker has finished while their manifest stayed.
    static_done: HashSet<String>,
    writers: JoinSet<()>,
    /// Gives back what finished pods leave free (`memory.rs`).
    trimmer: crate::memory::Trimmer,
    finished_tx: mpsc::UnboundedSender<Finished>,
    /// Store removals and orphan tear-downs.
    background: JoinSet<()>,
    draining: bool,
    /// The eviction manager's state (`node/eviction.rs`).
    eviction: Option<eviction::Eviction>,
}

impl<R: Runtime> NodeLoop<R> {
    async fn run(
        mut self,
        mut commands: mpsc::UnboundedReceiver<NodeCommand>,
        mut finished: mpsc::UnboundedReceiver<Finished>,
        recovered: oneshot::Sender<Recovery>,
    ) -> Result<(), NodeError> {
        let started = Instant::now();
        let (mut pods, mut report) = self.recover().await?;
        report.elapsed = started.elapsed();
        debug!("node: recovery done: {report:?}");
        let _ = recovered.send(report);
        let mut tick = tokio::time::interval(self.config.manifest_poll);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let (gc_policy, gc_period) = self.config.image_gc.unwrap_or_default();
        // The kubelet's first collection comes one period after its start.
        let mut image_gc = tokio::time::interval_at(
            tokio::time::Instant::now() + gc_period,
            gc_period.max(Duration::from_millis(1)),
        );
        image_gc.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        self.eviction = self.config.eviction.clone().map(eviction::Eviction::new);
        let mut eviction_tick = tokio::time::interval(
            self.config
                .eviction
                .as_ref()
                .map_or(Duration::from_secs(3600), |e| e.monitoring_interval)
                .max(Duration::from_millis(1)),
        );
        eviction_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            if self.draining && self.workers.is_empty() {
                debug!("node: drained");
                break;
            }
            tokio::select! {
                command = commands.recv() => match command {
                    Some(NodeCommand::Drain) => self.drain().await,
                    Some(NodeCommand::Exec { uid, reply }) => {
                        let _ = reply.send(self.workers.get(&uid).map(|w| w.control.clone()));
                    }
                    Some(NodeCommand::Stop) | None => break,
                },
                event = pods.next() => match event {
                    Some(event) => self.on_event(event).await,
                    None => pods = self.resync().await?,
                },
                Some(f) = finished.recv() => self.on_finished(f).await,
                _ = tick.tick(), if self.statics.is_some() => self.sync_static().await,
                _ = image_gc.tick(), if self.config.image_gc.is_some() => {
                    self.collect_images(gc_policy);
                }
                _ = eviction_tick.tick(), if self.eviction.is_some() => {
                    self.synchronize_eviction().await;
                }
                Some(_) = self.background.join_next(), if !self.background.is_empty() => {}
            }
        }
        self.shutdown().await;
        Ok(())
    }

    /// One image garbage collection, in the background (the kubelet's
    /// `StartGarbageCollection` loop); a shortfall is the kubelet's `FreeDiskSpaceFailed`.
    fn collect_images(&mut self, policy: ImageGcPolicy) {
        let runtime = Arc::clone(self.agent.runtime());
        self.background.spawn(async move {
            match runtime.garbage_collect_images(policy).await {
                Ok(outcome) => {
                    if !outcome.removed.is_empty() {
                        debug!(
                            "image garbage collection: {}% used, freed {} bytes: removed {:?}",
                            outcome.usage_percent, outcome.freed, outcome.removed
                        );
                    }
                    if let Some(message) = outcome.shortfall() {
                        warning!("FreeDiskSpaceFailed: {message}");
                    }
                }
                Err(e) => warning!("ImageGCFailed: Image garbage collection failed: {e}"),
            }
        });
    }

    // ----- start-up -----

    /// Lists the pods, starts watching after the list, and gives every pod its worker:
    /// re-adopted where a sandbox exists, fresh otherwise.
    async fn recover(&mut self) -> Result<(Watch, Recovery), NodeError> {
        let (objects, rv) = self.list().await?;
        let pods = self
            .store
            .watch("pods", None, WatchFrom::After(rv))
            .map_err(NodeError::Store)?;
        let now = self.agent.now();
        if let Some(source) = &mut self.statics {
            self.desired = source.scan(now);
        }
        let mut report = Recovery::default();
        let mut known_uids = HashSet::new();
        let mut mirrored = HashSet::new();
        let mut candidates = Vec::new();
        for obj in objects {
            let rv = resource_version(&obj);
            let Some(pod) = decode(obj) else { continue };
            if !bound_to(&pod, &self.config.node_name) {
                continue;
            }
            let uid = uid(&pod);
            if is_mirror(&pod) {
                if let Some(sp) = self.desired.get(&uid) {
                    known_uids.insert(uid.clone());
                    mirrored.insert(uid);
                    let mut static_pod = sp.pod.clone();
                    static_pod.status.clone_from(&pod.status);
                    candidates.push((static_pod, true, rv));
                } else {
                    // Its manifest went away while the agent was down: the mirror goes, and
                    // its sandbox is torn down as an orphan below.
                    self.remove_object(pod_key(&pod), uid);
                }
                continue;
            }
            known_uids.insert(uid);
            candidates.push((pod, false, rv));
        }
        for (uid, sp) in &self.desired {
            if !mirrored.contains(uid) {
                known_uids.insert(uid.clone());
                candidates.push((sp.pod.clone(), true, 0));
            }
        }
        let runtime = Arc::clone(self.agent.runtime());
        let mut plans = JoinSet::new();
        for (pod, is_static, rv) in candidates {
            let rt = Arc::clone(&runtime);
            plans.spawn(async move {
                let state = recovery::sandbox_state(&*rt, &pod).await;
                let nothing_ran = match &state {
                    SandboxState::Live(_) => false,
                    SandboxState::Absent => true,
                    SandboxState::Lost(instances) => instances.is_empty(),
                };
                let plan = if nothing_ran && (is_terminal(&pod) || !recovery::ran_before(&pod)) {
                    Plan::NoSandbox
                } else {
                    match recovery::adopt(&*rt, &pod, state).await {
                        Ok(adopted) => Plan::Adopted(Box::new(adopted)),
                        Err(e) => {
                            warning!(
                                "node: re-adopting the sandbox of {}: {e}",
                                pod.metadata.name.as_deref().unwrap_or("")
                            );
                            Plan::NoSandbox
                        }
                    }
                };
                (pod, is_static, rv, plan)
            });
        }
        while let Some(result) = plans.join_next().await {
            let Ok((pod, is_static, rv, plan)) = result else {
                continue;
            };
            let uid = uid(&pod);
            let key = pod_key(&pod);
            let deleting = pod.metadata.deletion_timestamp.is_some();
            match plan {
                Plan::Adopted(adopted) => {
                    let handle = self.agent.recover_pod(pod.clone(), *adopted, is_static);
                    self.register(handle, &pod, is_static, rv);
                    report.recovered += 1;
                }
                Plan::NoSandbox if is_terminal(&pod) => {
                    if is_static {
                        self.static_done.insert(uid.clone());
                    } else {
                        self.done.insert(uid.clone());
                        if deleting {
                            self.remove_object(key, uid.clone());
                        }
                    }
                }
                // Deleted before it ever ran here: nothing to stop.
                Plan::NoSandbox if deleting && !is_static => self.remove_object(key, uid.clone()),
                Plan::NoSandbox => {
                    let handle = self.agent.spawn_admitted(pod.clone(), is_static);
                    self.register(handle, &pod, is_static, rv);
                    report.started += 1;
                }
            }
            if is_static && !mirrored.contains(&uid) {
                self.create_mirror(&uid).await;
            }
        }
        for uid in runtime.list_sandboxes().await {
            if !known_uids.contains(&uid) {
                debug!("node: tearing down the sandbox of removed pod {uid}");
                report.orphans += 1;
                self.background
                    .spawn(recovery::tear_down(Arc::clone(&runtime), uid));
            }
        }
        // Histories and logs of pods deleted while the agent was down.
        if let Some(history) = self.agent.history() {
            history.retain(&known_uids);
        }
        for uid in runtime.pods_with_logs() {
            if !known_uids.contains(&uid) {
                self.remove_pod_files(uid);
            }
        }
        Ok((pods, report))
    }

    async fn list(&self) -> Result<(Vec<Value>, u64), NodeError> {
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || store.list("pods", None))
            .await
            .map_err(NodeError::Task)?
            .map_err(NodeError::Store)
    }

    /// The watch ended (it fell too far behind): list again, reconcile, watch again.
    async fn resync(&mut self) -> Result<Watch, NodeError> {
        debug!("node: the pod watch ended; listing again");
        let (objects, rv) = self.list().await?;
        let pods = self
            .store
            .watch("pods", None, WatchFrom::After(rv))
            .map_err(NodeError::Store)?;
        let mut present = HashSet::new();
        for obj in objects {
            let resource_version = resource_version(&obj);
            let Some(pod) = decode(obj) else { continue };
            present.insert(uid(&pod));
            self.on_pod_event(EventType::Modified, pod, resource_version)
                .await;
        }
        let gone: Vec<String> = self
            .workers
            .iter()
            .filter(|(uid, _)| !present.contains(*uid))
            .map(|(uid, _)| uid.clone())
            .collect();
        for uid in gone {
            if self.workers.get(&uid).is_some_and(|w| w.is_static) {
                if self.desired.contains_key(&uid) {
                    self.create_mirror(&uid).await;
                }
            } else if let Some(w) = self.workers.get_mut(&uid) {
                w.force_delete();
            }
        }
        Ok(pods)
    }

    // ----- store events -----

    async fn on_event(&mut self, event: WatchEvent) {
        let Some(pod) = decode(event.object) else {
            return;
        };
        self.on_pod_event(event.type_, pod, event.resource_version)
            .await;
    }

    async fn on_pod_event(&mut self, type_: EventType, pod: Pod, rv: u64) {
        // `spec.nodeName` is immutable once set: a pod not bound here never becomes ours
        // through an update other than its binding, which this sees as the first event.
        if !bound_to(&pod, &self.config.node_name) {
            return;
        }
        if is_mirror(&pod) {
            self.on_mirror(type_, &pod).await;
            return;
        }
        match type_ {
            EventType::Added | EventType::Modified => self.on_pod(pod, rv),
            EventType::Deleted => self.on_deleted(&pod),
        }
    }

    fn on_pod(&mut self, pod: Pod, rv: u64) {
        let uid = uid(&pod);
        if self.workers.contains_key(&uid) {
            // A spec update may be a resize: the worker learns what the other pods have
            // allocated first (its resize is `Deferred` when they leave too little).
            let resized = self.workers.get(&uid).is_some_and(|w| {
                rv > w.rv && w.spec.pointer("/spec") != spec_view(&pod).pointer("/spec")
            });
            if resized {
                let others = self.others_requested(&uid);
                if let Some(w) = self.workers.get(&uid) {
                    w.control.node_requested(others);
                }
            }
            if let Some(w) = self.workers.get_mut(&uid)
                && rv > w.rv
            {
                w.rv = rv;
                w.sync(&pod);
            }
            return;
        }
        let key = pod_key(&pod);
        let deleting = pod.metadata.deletion_timestamp.is_some();
        if self.done.contains(&uid) || is_terminal(&pod) {
            // Nothing runs: a deleted terminal pod goes at once.
            self.done.insert(uid.clone());
            if deleting {
                self.remove_object(key, uid);
            }
            return;
        }
        if deleting {
            self.remove_object(key, uid);
            return;
        }
        if self.draining {
            return;
        }
        if self.reject_under_pressure(&pod, false) {
            self.done.insert(uid);
            return;
        }
        debug!("node: starting {key} ({uid})");
        let handle = self.agent.spawn_admitted(pod.clone(), false);
        self.register(handle, &pod, false, rv);
    }

    /// A pod removed from the store: if it still runs, that was a forced delete (T10).
    fn on_deleted(&mut self, pod: &Pod) {
        let uid = uid(pod);
        match self.workers.get_mut(&uid) {
            Some(w) if !w.is_static => {
                debug!("node: {} removed from the store while running", w.key);
                w.force_delete();
                w.gone = true;
            }
            Some(_) => {}
            None => self.remove_pod_files(uid.clone()),
        }
        self.done.remove(&uid);
    }

    /// The pod's object is gone and nothing of it runs: its log files go too (the kubelet's
    /// container GC removes the logs of pods that no longer exist). Its sandbox went with its
    /// worker.
    fn remove_pod_files(&mut self, uid: String) {
        let runtime = Arc::clone(self.agent.runtime());
        let history = self.agent.history().cloned();
        self.background.spawn_blocking(move || {
            runtime.remove_pod_logs(&uid);
            if let Some(history) = history {
                history.remove(&uid);
            }
        });
    }

    // ----- pod workers -----

    fn register(&mut self, handle: PodHandle, pod: &Pod, is_static: bool, rv: u64) {
        let uid = handle.uid().to_string();
        let key = pod_key(pod);
        let (stop_tx, stop_rx) = oneshot::channel();
        let (latest_tx, latest_rx) = watch::channel(Some(Box::new(pod.clone())));
        let control = handle.control();
        let writer = Writer {
            store: self.store.clone(),
            host: self.config.node_name.clone(),
            recorder: None,
            key: key.clone(),
            uid: uid.clone(),
            latest: latest_tx,
            finished: self.finished_tx.clone(),
            history: self
                .agent
                .history()
                .map(|h| (Arc::clone(h), Arc::clone(&self.agent.clock))),
            unwritten: None,
        };
        // The writers of pods that have gone are done: let their task slots go (a JoinSet keeps
        // a finished task until it is joined, so under churn they would pile up until stop).
        while self.writers.try_join_next().is_some() {}
        self.writers.spawn(writer.run(handle, stop_rx));
        let deleted = pod
            .metadata
            .deletion_timestamp
            .is_some()
            .then_some(pod.metadata.deletion_grace_period_seconds);
        self.workers.insert(
            uid,
            Worker {
                key,
                control,
                is_static,
                stop: Some(stop_tx),
                latest: latest_rx,
                spec: spec_view(pod),
                foreign: foreign_conditions(pod),
                deleted,
                evicted: false,
                rv,
                gone: false,
            },
        );
    }

    async fn on_finished(&mut self, f: Finished) {
        let Some(w) = self.workers.remove(&f.uid) else {
            return;
        };
        // What it had allocated is free: a `Deferred` resize may fit now.
        let deferred: Vec<String> = self
            .workers
            .iter()
            .filter(|(_, w)| resize_deferred(w.latest.borrow().as_deref()))
            .map(|(uid, _)| uid.clone())
            .collect();
        for uid in deferred {
            let others = self.others_requested(&uid);
            if let Some(w) = self.workers.get(&uid) {
                w.control.node_requested(others);
            }
        }
        debug!("node: {} ({}) finished", f.key, f.uid);
        // What its statuses and events took is free now: give it back to the system.
        self.trimmer.request();
        // A static pod whose manifest went is gone like a deleted one.
        if w.gone || (w.is_static && !self.desired.contains_key(&f.uid)) {
            self.remove_pod_files(f.uid.clone());
        }
        if w.is_static {
            if self.desired.contains_key(&f.uid) {
                self.static_done.insert(f.uid);
            }
            // A newer static pod of the same name may have waited for this one.
            self.start_static().await;
        } else if !f.removed && self.draining {
            self.remove_object(f.key, f.uid);
        } else if !f.removed {
            // A terminal pod keeps its object; a delete that came while it was finishing
            // removes it now.
            self.done.insert(f.uid.clone());
            let store = self.store.clone();
            self.background.spawn_blocking(move || {
                writer::remove_if_deleted(&store, &f.key, &f.uid);
            });
        }
    }

    /// The cpu and memory the running pods other than `uid` have allocated (their requests, with
    /// the kubelet's allocation where a resize changed it: `allocatedResources`).
    fn others_requested(&self, uid: &str) -> podvisor_lifecycle::NodeResources {
        let mut total = podvisor_lifecycle::NodeResources::default();
        for (other, w) in &self.workers {
            if other == uid {
                continue;
            }
            if let Some(pod) = w.latest.borrow().as_deref() {
                let (cpu, memory) = allocated_requests(pod);
                total.cpu_millis += cpu;
                total.memory_bytes += memory;
            }
        }
        total
    }

    /// Deletes the object `key` of pod `uid` at once (grace 0, UID precondition), in the
    /// background.
    fn remove_object(&mut self, key: Key, uid: String) {
        let store = self.store.clone();
        self.background.spawn_blocking(move || {
            writer::remove(&store, &key, &uid);
        });
    }

    // ----- drain and shutdown -----

    /// Deletes every pod gracefully, as `kubectl delete` would: the API pods get their
    /// `deletionTimestamp` (and so are removed once terminated), static pods are stopped and
    /// their mirrors removed.
    async fn drain(&mut self) {
        if self.draining {
            return;
        }
        debug!("node: draining");
        self.draining = true;
        let mut mirrors = Vec::new();
        for (uid, w) in &mut self.workers {
            if w.is_static && w.deleted.is_none() {
                w.control.delete(None);
                w.deleted = Some(None);
                mirrors.push((w.key.clone(), uid.clone()));
            }
        }
        for (key, uid) in mirrors {
            self.remove_object(key, uid);
        }
        let Ok((objects, _)) = self.list().await else {
            return;
        };
        let now = self.agent.now();
        for obj in objects {
            let Some(pod) = decode(obj) else { continue };
            if is_mirror(&pod) || !bound_to(&pod, &self.config.node_name) {
                continue;
            }
            let uid = uid(&pod);
            let uid_of_pod = uid.clone();
            let key = pod_key(&pod);
            if !self.workers.contains_key(&uid) {
                // Nothing runs: it goes at once.
                self.remove_object(key, uid);
                continue;
            }
            let grace = pod
                .spec
                .as_ref()
                .and_then(|s| s.termination_grace_period_seconds)
                .unwrap_or(30)
                .max(0);
            // The object is marked first, so that the pod worker's end finds it deleted (T9).
            let store = self.store.clone();
            let _ = tokio::task::spawn_blocking(move || {
                graceful_delete(&store, &key, &uid, grace, now);
            })
            .await;
            if let Some(w) = self.workers.get_mut(&uid_of_pod)
                && w.deleted.is_none()
            {
                w.control.delete(Some(grace));
                w.deleted = Some(Some(grace));
            }
        }
    }

    /// Stops every pod worker without touching its containers and lets the status writers
    /// write what was published.
    async fn shutdown(&mut self) {
        for w in self.workers.values_mut() {
            if let Some(stop) = w.stop.take() {
                let _ = stop.send(());
            }
        }
        let writers = async { while self.writers.join_next().await.is_some() {} };
        if tokio::time::timeout(SHUTDOWN_FLUSH, writers).await.is_err() {
            warning!("node: status writers did not finish within {SHUTDOWN_FLUSH:?}");
            self.writers.abort_all();
        }
        // Store writes in flight finish; orphan tear-downs are retried at the next start.
        let background = async { while self.background.join_next().await.is_some() {} };
        if tokio::time::timeout(Duration::from_secs(1), background)
            .await
            .is_err()
        {
            self.background.abort_all();
        }
    }
}

fn resource_version(obj: &Value) -> u64 {
    obj.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// What the API server does on a graceful delete: `deletionTimestamp` = now + grace and
/// `deletionGracePeriodSeconds` = grace (a pod already being deleted keeps its own).
fn graceful_delete(store: &Store, key: &Key, uid: &str, grace: i64, now: Timestamp) {
    let at = Timestamp::from_second(now.as_second() + grace).unwrap_or(now);
    let result = store.update_with(key, |mut current| {
        if uid_of(&current) != Some(uid) {
            return Err(StoreError::NotFound(key.clone()));
        }
        if current
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|v| !v.is_null())
        {
            return Ok(current);
        }
        current["metadata"]["deletionTimestamp"] = Value::from(at.to_string());
        current["metadata"]["deletionGracePeriodSeconds"] = Value::from(grace);
        Ok(current)
    });
    if let Err(e) = result
        && !matches!(e, StoreError::NotFound(_))
    {
        warning!("node: deleting {key}: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod_task::Command;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    /// D10: the API server counts a graceful delete as a new generation; the worker is told
    /// the new pod so its next status observes it.
    #[test]
    fn d10_a_graceful_delete_passes_the_new_generation_to_the_worker() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let mut pod = Pod::default();
        pod.metadata.generation = Some(1);
        let mut worker = Worker {
            key: Key::new("pods", "default", "web"),
            control: PodControl { commands: tx },
            is_static: false,
            stop: None,
            latest: watch::channel(None).1,
            spec: spec_view(&pod),
            foreign: Vec::new(),
            deleted: None,
            evicted: false,
            rv: 0,
            gone: false,
        };
        pod.metadata.generation = Some(2);
        pod.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        pod.metadata.deletion_grace_period_seconds = Some(30);
        worker.sync(&pod);
        let mut got = Vec::new();
        while let Ok(c) = rx.try_recv() {
            got.push(match c {
                Command::Delete { grace } => format!("delete {grace:?}"),
                Command::UpdateSpec(p) => format!("update generation {:?}", p.metadata.generation),
                other => format!("{other:?}"),
            });
        }
        assert_eq!(got, ["delete Some(30)", "update generation Some(2)"]);
    }
}
