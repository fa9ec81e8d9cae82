//! podvisor's agent: the wiring between the lifecycle core and a container runtime.
//!
//! [`Agent::spawn_pod`] admits a pod (uid, namespace, creation timestamp, as the API server
//! would) and starts its *pod worker*: one tokio task that owns the pod's
//! [`podvisor_lifecycle::PodMachine`], performs the machine's actions on a
//! [`podvisor_runtime::Runtime`] (sandbox, starts, signals, probes, hooks), feeds every result,
//! container exit, deletion and timer back to it with `now`, and publishes the pod's status and
//! events as [`PodUpdate`]s on its [`PodHandle`]. [`Agent::spawn_admitted`] starts the worker
//! of a pod the API server already admitted, and [`Agent::recover_pod`] rebuilds the worker of
//! a pod that ran before the agent restarted, on its re-adopted sandbox.
//!
//! [`node`] is the node agent of `podvisor serve`: it runs the pods of the store (list + watch),
//! writes their status and events back, runs static pods, and recovers after a restart.
//!
//! What it does not do: decide anything about the lifecycle (when to start, restart, probe or
//! kill is the core's job) or run processes itself (the runtime does). One owner per pod: no
//! state is shared between pod workers; only [`node`]'s status writers touch the store.

mod clock;
pub mod eviction;
mod executors;
pub mod history;
mod identity;
mod log;
pub mod memory;
pub mod node;
pub mod node_status;
pub mod objects;
mod pod_task;
pub mod tokens;
pub mod volumes;

pub use clock::{Clock, SystemClock, TokioClock, instant_for, wait_until};
pub use identity::new_uid;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::core::v1::PodCondition;
use pod_task::{Command, PodTask};
use podvisor_lifecycle::{Event, MachineConfig, PastInstance, RecoveredInstance};
use podvisor_runtime::{ContainerExit, ExecError, ExecRequest, ExecSession, Runtime, RuntimeEvent};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

/// Errors of the agent itself (never of the workload: a crashing container is an event).
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The pod worker panicked or was cancelled before the pod terminated.
    #[error("pod {pod}: pod worker ended abnormally: {source}")]
    Worker {
        /// `<namespace>/<name>`.
        pod: String,
        /// Why.
        #[source]
        source: tokio::task::JoinError,
    },
}

/// An event the core emitted, with the time it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimedEvent {
    /// When it was emitted.
    pub time: Timestamp,
    /// The event (type, reason, message, container).
    pub event: Event,
}

/// What a pod worker publishes, in order.
#[derive(Debug, Clone)]
pub enum PodUpdate {
    /// The pod object changed (status, or the deletion timestamp): its new state.
    Status(Box<Pod>),
    /// An event was recorded.
    Event(TimedEvent),
    /// The pod is terminated and its sandbox released; the last update of the pod. The pod
    /// object has its final status.
    Terminated(Box<Pod>),
}

/// Runs pods on a runtime, one pod worker task each.
pub struct Agent<R: Runtime> {
    runtime: Arc<R>,
    config: MachineConfig,
    clock: Arc<dyn Clock>,
    objects: Arc<dyn objects::ObjectSource>,
    tokens: Arc<tokens::TokenManager>,
    volume_sync_period: std::time::Duration,
    /// Where the node records each pod's status transitions (none: not recorded).
    history: Option<Arc<history::HistoryStore>>,
}

impl<R: Runtime> Agent<R> {
    /// The feature gates its pods run with (`MachineConfig::gates`).
    pub fn gates(&self) -> podvisor_api::FeatureGates {
        self.config.gates
    }

    /// An agent using `runtime`, machine settings `config` (back-off curve, node name) and the
    /// system clock.
    pub fn new(runtime: Arc<R>, config: MachineConfig) -> Agent<R> {
        Agent::with_clock(runtime, config, Arc::new(SystemClock))
    }

    /// An agent reading `now` from `clock` (a [`TokioClock`] in paused-time tests).
    pub fn with_clock(runtime: Arc<R>, config: MachineConfig, clock: Arc<dyn Clock>) -> Agent<R> {
        Agent {
            runtime,
            config,
            clock,
            objects: Arc::new(objects::NoObjects),
            tokens: Arc::new(tokens::TokenManager::default()),
            volume_sync_period: volumes::SYNC_PERIOD,
            history: None,
        }
    }

    /// Re-syncs `configMap` and `secret` volumes every `period` (the kubelet's
    /// `--sync-frequency`, [`volumes::SYNC_PERIOD`] by default).
    #[must_use]
    pub fn with_volume_sync_period(mut self, period: std::time::Duration) -> Agent<R> {
        self.volume_sync_period = period;
        self
    }

    /// Reads the ConfigMaps and Secrets pods refer to from `source` (by default none exist).
    #[must_use]
    pub fn with_objects(mut self, source: Arc<dyn objects::ObjectSource>) -> Agent<R> {
        self.objects = source;
        self
    }

    /// Records each pod's status transitions in `history` (the node's status writers do, as
    /// they see each status the pod workers publish).
    #[must_use]
    pub fn with_history(mut self, history: Arc<history::HistoryStore>) -> Agent<R> {
        self.history = Some(history);
        self
    }

    /// The store of status transitions, if the agent keeps one.
    pub fn history(&self) -> Option<&Arc<history::HistoryStore>> {
        self.history.as_ref()
    }

    /// The agent's `now` (its [`Clock`]): the node reads time only through it.
    pub fn now(&self) -> jiff::Timestamp {
        self.clock.now()
    }

    /// The runtime.
    pub fn runtime(&self) -> &Arc<R> {
        &self.runtime
    }

    /// Admits `pod` (already defaulted and validated) and starts its pod worker. Must be called
    /// within a tokio runtime.
    ///
    /// Admission does what the API server does on create: `metadata.name` from `generateName`
    /// when empty, namespace `default` when empty, a random `uid`, `creationTimestamp` now.
    pub fn spawn_pod(&self, mut pod: Pod) -> PodHandle {
        identity::admit(&mut pod, self.clock.now());
        self.spawn_admitted(pod, false)
    }

    /// Starts the pod worker of a pod the API server already admitted (it has its name,
    /// namespace and `uid`, which are kept). `is_static`: a file-sourced pod (P15). Must be
    /// called within a tokio runtime.
    pub fn spawn_admitted(&self, pod: Pod, is_static: bool) -> PodHandle {
        let (commands_tx, commands_rx) = mpsc::unbounded_channel();
        let (updates_tx, updates_rx) = mpsc::unbounded_channel();
        let task = PodTask::new(
            Arc::clone(&self.runtime),
            pod_task::Services {
                clock: Arc::clone(&self.clock),
                objects: Arc::clone(&self.objects),
                tokens: Arc::clone(&self.tokens),
                sync_period: self.volume_sync_period,
            },
            self.config_for(is_static),
            pod.clone(),
            commands_rx,
            updates_tx,
        );
        PodHandle::start(&pod, commands_tx, updates_rx, task)
    }

    /// Starts the pod worker of a pod that ran before the agent restarted, on its re-adopted
    /// sandbox: `pod` carries the last persisted status, `adopted` the sandbox and the instances
    /// it still runs. No container is restarted; restart counts, readiness and back-off go on
    /// (`PodMachine::recover`), and exits the runtime replays are handled as they arrive. Must
    /// be called within a tokio runtime.
    pub fn recover_pod(
        &self,
        pod: Pod,
        adopted: Adopted<R::Sandbox>,
        is_static: bool,
    ) -> PodHandle {
        let (commands_tx, commands_rx) = mpsc::unbounded_channel();
        let (updates_tx, updates_rx) = mpsc::unbounded_channel();
        let task = PodTask::recovered(
            Arc::clone(&self.runtime),
            pod_task::Services {
                clock: Arc::clone(&self.clock),
                objects: Arc::clone(&self.objects),
                tokens: Arc::clone(&self.tokens),
                sync_period: self.volume_sync_period,
            },
            self.config_for(is_static),
            pod.clone(),
            pod_task::Adopted {
                sandbox: adopted.sandbox,
                events_tx: adopted.events_tx,
                events_rx: adopted.events_rx,
                running: adopted.running,
                history: adopted.history,
                highest_instance: adopted.highest_instance,
                lost: adopted.lost,
            },
            commands_rx,
            updates_tx,
        );
        PodHandle::start(&pod, commands_tx, updates_rx, task)
    }

    fn config_for(&self, is_static: bool) -> MachineConfig {
        MachineConfig {
            is_static,
            ..self.config.clone()
        }
    }
}

/// A sandbox re-adopted after an agent restart, for [`Agent::recover_pod`].
pub struct Adopted<S> {
    /// The sandbox, created with `events_tx` (its runtime replays unacknowledged exits there).
    pub sandbox: S,
    /// Where the sandbox sends container exits.
    pub events_tx: mpsc::UnboundedSender<RuntimeEvent>,
    /// The other end, read by the pod worker.
    pub events_rx: mpsc::UnboundedReceiver<RuntimeEvent>,
    /// The instances the runtime still runs (or whose exit it has not reported yet).
    pub running: Vec<RecoveredInstance>,
    /// The instances that exited, with the runtime's exact times (restart back-off goes on
    /// from them).
    pub history: Vec<PastInstance>,
    /// The highest instance id the runtime knows for this pod, running or not: new instances
    /// are numbered past it.
    pub highest_instance: u64,
    /// The pod's sandbox died while no agent ran (`sandbox` is a new one): the instances of
    /// `running` ended with it, with these exits, and the pod worker takes that as a lost
    /// sandbox (`SandboxChanged`, the pod's containers started again in the new one).
    pub lost: Option<Vec<(u64, ContainerExit)>>,
}

/// A cloneable way to delete or update a pod, separate from its [`PodHandle`].
#[derive(Debug, Clone)]
pub struct PodControl {
    commands: mpsc::UnboundedSender<Command>,
}

impl PodControl {
    /// Deletes the pod gracefully: `grace` seconds (None: the pod's
    /// `terminationGracePeriodSeconds`; `Some(0)`: forced, still at least 2 s per container
    /// before SIGKILL). A later delete may only shorten the grace period. Does nothing once the
    /// pod worker has finished.
    pub fn delete(&self, grace: Option<i64>) {
        let _ = self.commands.send(Command::Delete { grace });
    }

    /// A spec update the API accepted (M11: images, `activeDeadlineSeconds`, labels and
    /// annotations); the pod worker reacts as the kubelet does (M12). Does nothing once the
    /// pod worker has finished.
    pub fn update_spec(&self, pod: Pod) {
        let _ = self.commands.send(Command::UpdateSpec(Box::new(pod)));
    }

    /// Evicts the pod (the eviction manager): killed within `grace` seconds, then Failed
    /// with reason `Evicted` and `message` (see `PodMachine::handle_evict`). Does nothing
    /// once the pod worker has finished.
    pub fn evict(&self, message: String, grace: i64) {
        let _ = self.commands.send(Command::Evict { message, grace });
    }

    /// Conditions written by others through the status subresource (readiness gates, D5);
    /// kubelet-owned types are ignored. Does nothing once the pod worker has finished.
    pub fn update_conditions(&self, conditions: Vec<PodCondition>) {
        let _ = self.commands.send(Command::UpdateConditions(conditions));
    }

    /// The cpu and memory the node's other pods have allocated, against which an in-place
    /// resize is `Deferred` (the kubelet's resize admission sees every admitted pod).
    pub fn node_requested(&self, requested: podvisor_lifecycle::NodeResources) {
        let _ = self.commands.send(Command::NodeRequested(requested));
    }

    /// Starts a streaming exec (`kubectl exec`) in the running instance of `container`.
    ///
    /// # Errors
    ///
    /// [`ExecError::ContainerNotFound`] when no instance of it runs (or the pod worker has
    /// finished); the runtime's error when the command cannot start.
    pub async fn exec(
        &self,
        container: &str,
        request: ExecRequest,
    ) -> Result<ExecSession, ExecError> {
        let not_found = || ExecError::ContainerNotFound(container.to_owned());
        let (reply, answer) = oneshot::channel();
        let command = Command::Exec {
            container: container.to_owned(),
            request,
            reply,
        };
        if self.commands.send(command).is_err() {
            return Err(not_found());
        }
        answer.await.unwrap_or_else(|_| Err(not_found()))
    }

    /// A TCP connection to `port` on the pod's loopback, inside its network (`kubectl
    /// port-forward`).
    ///
    /// # Errors
    /// The pod has no sandbox (or its worker has finished), or nothing answers on the port:
    /// the runtime's words.
    pub async fn port_forward(&self, port: u16) -> Result<tokio::net::TcpStream, String> {
        let gone = || "the pod's worker has finished".to_owned();
        let (reply, answer) = oneshot::channel();
        if self
            .commands
            .send(Command::PortForward { port, reply })
            .is_err()
        {
            return Err(gone());
        }
        answer.await.unwrap_or_else(|_| Err(gone()))
    }
}

/// A running pod: its identity, its updates, deletion, and its end.
///
/// Dropping the handle does not stop the pod: its worker runs on until the pod terminates.
#[derive(Debug)]
pub struct PodHandle {
    name: String,
    namespace: String,
    uid: String,
    control: PodControl,
    updates: mpsc::UnboundedReceiver<PodUpdate>,
    task: JoinHandle<Pod>,
}

impl PodHandle {
    fn start<R: Runtime>(
        pod: &Pod,
        commands: mpsc::UnboundedSender<Command>,
        updates: mpsc::UnboundedReceiver<PodUpdate>,
        task: PodTask<R>,
    ) -> PodHandle {
        use tracing::Instrument as _;
        let meta = &pod.metadata;
        let name = meta.name.clone().unwrap_or_default();
        let namespace = meta.namespace.clone().unwrap_or_default();
        // One span per pod worker: every line it logs names its pod.
        let span = tracing::info_span!("pod", pod = %format_args!("{namespace}/{name}"));
        PodHandle {
            name,
            namespace,
            uid: meta.uid.clone().unwrap_or_default(),
            control: PodControl { commands },
            updates,
            task: tokio::spawn(task.run().instrument(span)),
        }
    }

    /// A handle whose updates are whatever the test sends on `updates`; its worker ends at
    /// once, returning `pod`.
    #[cfg(test)]
    pub(crate) fn scripted(pod: &Pod, updates: mpsc::UnboundedReceiver<PodUpdate>) -> PodHandle {
        let meta = &pod.metadata;
        let last = pod.clone();
        PodHandle {
            name: meta.name.clone().unwrap_or_default(),
            namespace: meta.namespace.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
            control: PodControl {
                commands: mpsc::unbounded_channel().0,
            },
            updates,
            task: tokio::spawn(async move { last }),
        }
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `metadata.namespace`.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// `metadata.uid`.
    pub fn uid(&self) -> &str {
        &self.uid
    }

    /// See [`PodControl::delete`].
    pub fn delete(&self, grace: Option<i64>) {
        self.control.delete(grace);
    }

    /// See [`PodControl::update_spec`].
    pub fn update_spec(&self, pod: Pod) {
        self.control.update_spec(pod);
    }

    /// See [`PodControl::update_conditions`].
    pub fn update_conditions(&self, conditions: Vec<PodCondition>) {
        self.control.update_conditions(conditions);
    }

    /// Stops the pod worker at once without touching its containers: what an agent shutdown
    /// does (the runtime keeps them running, and a restarted agent re-adopts them with
    /// [`Agent::recover_pod`]). Updates published before can still be received.
    pub fn abort(&self) {
        self.task.abort();
    }

    /// A cloneable handle for deleting the pod.
    pub fn control(&self) -> PodControl {
        self.control.clone()
    }

    /// The next update; `None` once the worker has finished and every update was received
    /// (the last one is [`PodUpdate::Terminated`]).
    pub async fn next_update(&mut self) -> Option<PodUpdate> {
        self.updates.recv().await
    }

    /// An update if one is waiting, without blocking.
    pub fn try_next_update(&mut self) -> Option<PodUpdate> {
        self.updates.try_recv().ok()
    }

    /// Waits for the pod to terminate and returns its final object. Updates not yet received
    /// are dropped.
    ///
    /// # Errors
    ///
    /// [`AgentError::Worker`] when the pod worker panicked.
    pub async fn join(self) -> Result<Pod, AgentError> {
        let pod = format!("{}/{}", self.namespace, self.name);
        self.task
            .await
            .map_err(|source| AgentError::Worker { pod, source })
    }
}
