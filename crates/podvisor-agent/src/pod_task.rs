//! The pod worker: one tokio task owning one [`PodMachine`].
//!
//! The loop is the sans-IO driver of `podvisor_lifecycle::sim`, with real IO: drain the
//! machine's actions and perform each (runtime calls run as tasks in a [`JoinSet`] the worker
//! owns), then wait for the next input — a task's result, a container exit pushed by the
//! runtime, a command from the [`crate::PodHandle`], or the machine's timer — and feed it to
//! the machine with `now` from the agent's [`Clock`]. The worker never decides anything itself:
//! it only translates between the core and the runtime.

use crate::clock::{Clock, instant_for};
use crate::log::{debug, warning};
use crate::objects::ObjectSource;
use crate::{PodUpdate, TimedEvent, executors};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Container, Pod, PodCondition, ResourceRequirements};
use podvisor_lifecycle::{
    Action, ContainerKind, Event, EventType, ExitStatus, HookKind, ImagePull, InstanceId,
    MachineConfig, PastInstance, PodMachine, ProbeKind, ProbeOutcome, RecoveredInstance,
    StartFailure,
};
use podvisor_runtime::hooks::HookOutcome;
use podvisor_runtime::{
    ContainerExit, ExecError, ExecRequest, ExecSession, ImageReport, Runtime, RuntimeError,
    RuntimeEvent, SandboxError, StartError, StartRequest, Started, signal_number,
};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::task::{AbortHandle, Id, JoinError, JoinSet};
use tokio::time::Instant;

/// What a [`crate::PodHandle`] asks of its pod worker.
#[derive(Debug)]
pub(crate) enum Command {
    /// Delete the pod with this grace period (None: the pod's own).
    Delete { grace: Option<i64> },
    /// Evict the pod (the eviction manager's message, its grace-period override).
    Evict { message: String, grace: i64 },
    /// The API accepted a spec update (images, `activeDeadlineSeconds`, labels, annotations).
    UpdateSpec(Box<Pod>),
    /// Conditions written by others (readiness gates).
    UpdateConditions(Vec<PodCondition>),
    /// What the node's other pods have allocated (in-place resize `Deferred`).
    NodeRequested(podvisor_lifecycle::NodeResources),
    /// A streaming exec (`kubectl exec`) in the running instance of `container`.
    Exec {
        container: String,
        request: ExecRequest,
        reply: oneshot::Sender<Result<ExecSession, ExecError>>,
    },
    /// A connection to `port` on the pod's loopback (`kubectl port-forward`).
    PortForward {
        port: u16,
        reply: oneshot::Sender<Result<tokio::net::TcpStream, String>>,
    },
}

/// A sandbox re-adopted after an agent restart, for [`PodTask::recovered`].
pub(crate) struct Adopted<S> {
    pub(crate) sandbox: S,
    pub(crate) events_tx: mpsc::UnboundedSender<RuntimeEvent>,
    pub(crate) events_rx: mpsc::UnboundedReceiver<RuntimeEvent>,
    pub(crate) running: Vec<RecoveredInstance>,
    pub(crate) history: Vec<PastInstance>,
    pub(crate) highest_instance: u64,
    pub(crate) lost: Option<Vec<(u64, ContainerExit)>>,
}

/// The result of one runtime task, fed back to the machine.
enum Input<S> {
    SandboxCreated(Result<S, SandboxError>),
    Started {
        instance: u64,
        result: Result<Started, StartError>,
    },
    Hook {
        instance: u64,
        hook: HookKind,
        outcome: HookOutcome,
    },
    Probe {
        name: String,
        instance: u64,
        kind: ProbeKind,
        outcome: ProbeOutcome,
    },
    /// An in-place resize was applied (the resources now in effect) or refused.
    Resized {
        instance: u64,
        result: Result<ResourceRequirements, RuntimeError>,
    },
    /// A stop signal or SIGKILL was delivered (or not); nothing to tell the machine.
    Signalled {
        instance: u64,
        signal: i32,
        result: Result<(), RuntimeError>,
    },
}

/// What woke the worker.
enum Wake<S> {
    Command(Option<Command>),
    Runtime(Option<RuntimeEvent>),
    Task(Result<(Id, Input<S>), JoinError>),
    Timer(Timestamp),
}

/// A task in flight: how to abort it, and what to report if it panics so the machine is never
/// left waiting for an answer.
struct InFlight<S> {
    abort: AbortHandle,
    on_panic: Option<Input<S>>,
}

/// What a pod worker reads besides its runtime: the clock, and the ConfigMaps and Secrets
/// with how often its volumes are re-synced.
pub(crate) struct Services {
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) objects: Arc<dyn ObjectSource>,
    pub(crate) tokens: Arc<crate::tokens::TokenManager>,
    pub(crate) sync_period: Duration,
}

/// One pod's worker. See the module docs.
pub(crate) struct PodTask<R: Runtime> {
    rt: Arc<R>,
    clock: Arc<dyn Clock>,
    /// Where the pod's ConfigMaps and Secrets are read.
    objects: Arc<dyn ObjectSource>,
    /// The node's service account tokens.
    tokens: Arc<crate::tokens::TokenManager>,
    /// The pod as the volume syncer reads it (updated with the spec and metadata).
    pod_view: tokio::sync::watch::Sender<Pod>,
    /// How often the pod's `configMap` and `secret` volumes are re-synced.
    sync_period: Duration,
    /// The periodic volume re-sync, once the sandbox exists.
    volume_sync: Option<AbortHandle>,
    /// Set when the pod is deleted: a start waiting for its volumes gives up.
    deleting: tokio::sync::watch::Sender<bool>,
    machine: PodMachine,
    /// `<name>_<namespace>(<uid>)`, as hook messages name the pod.
    full_name: String,
    sandbox: Option<Arc<R::Sandbox>>,
    /// The `CreateSandbox` task, while it runs.
    sandbox_task: Option<Id>,
    tasks: JoinSet<Input<R::Sandbox>>,
    in_flight: HashMap<Id, InFlight<R::Sandbox>>,
    /// Inputs produced while executing actions, fed after the drain.
    ready: VecDeque<Input<R::Sandbox>>,
    events_tx: mpsc::UnboundedSender<RuntimeEvent>,
    events_rx: mpsc::UnboundedReceiver<RuntimeEvent>,
    commands: mpsc::UnboundedReceiver<Command>,
    commands_open: bool,
    updates: mpsc::UnboundedSender<PodUpdate>,
    /// Instances whose `start_container` has not answered yet.
    starting: HashSet<u64>,
    /// The container name of each instance being started.
    starting_names: HashMap<u64, String>,
    /// The instance of each container whose process runs, as the runtime reported it
    /// (started, no exit yet): where an exec goes, as the kubelet's `findContainer` looks.
    running: HashMap<String, u64>,
    /// Exits that arrived before their instance's start was answered.
    early_exits: HashMap<u64, ContainerExit>,
    /// Hooks running against an instance, told when it exits.
    exit_watchers: HashMap<u64, Vec<oneshot::Sender<()>>>,
    now: Timestamp,
    /// The timer deadline handled last, to never spin on a deadline the machine keeps due.
    last_timer: Option<Timestamp>,
    terminated: bool,
}

impl<R: Runtime> PodTask<R> {
    pub(crate) fn new(
        rt: Arc<R>,
        services: Services,
        config: MachineConfig,
        pod: Pod,
        commands: mpsc::UnboundedReceiver<Command>,
        updates: mpsc::UnboundedSender<PodUpdate>,
    ) -> PodTask<R> {
        let Services {
            clock,
            objects,
            tokens,
            sync_period,
        } = services;
        let pod_view = tokio::sync::watch::Sender::new(pod.clone());
        let now = clock.now();
        let full_name = full_name_of(&pod);
        let machine = PodMachine::new(pod, config, now);
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        PodTask {
            rt,
            clock,
            objects,
            tokens,
            pod_view,
            sync_period,
            volume_sync: None,
            deleting: tokio::sync::watch::Sender::new(false),
            machine,
            full_name,
            sandbox: None,
            sandbox_task: None,
            tasks: JoinSet::new(),
            in_flight: HashMap::new(),
            ready: VecDeque::new(),
            events_tx,
            events_rx,
            commands,
            commands_open: true,
            updates,
            starting: HashSet::new(),
            starting_names: HashMap::new(),
            running: HashMap::new(),
            early_exits: HashMap::new(),
            exit_watchers: HashMap::new(),
            now,
            last_timer: None,
            terminated: false,
        }
    }

    /// The worker of a pod that ran before the agent restarted: its machine is rebuilt from
    /// the last persisted status (`pod`) and the instances the re-adopted sandbox still runs;
    /// exits the runtime replays arrive on `adopted.events_rx` as usual.
    pub(crate) fn recovered(
        rt: Arc<R>,
        services: Services,
        config: MachineConfig,
        pod: Pod,
        adopted: Adopted<R::Sandbox>,
        commands: mpsc::UnboundedReceiver<Command>,
        updates: mpsc::UnboundedSender<PodUpdate>,
    ) -> PodTask<R> {
        let Services {
            clock,
            objects,
            tokens,
            sync_period,
        } = services;
        let pod_view = tokio::sync::watch::Sender::new(pod.clone());
        let now = clock.now();
        let full_name = full_name_of(&pod);
        let running = adopted
            .running
            .iter()
            .map(|r| (r.name.clone(), r.instance.0))
            .collect();
        // The sandbox's address is known before the machine is rebuilt: the status the
        // recovery publishes carries it (set after, the pod showed no IP until its next
        // change of status).
        let config = MachineConfig {
            pod_ip: Some(rt.pod_ip(&adopted.sandbox)),
            ..config
        };
        let mut machine = PodMachine::recover_with_history(
            pod,
            &adopted.running,
            &adopted.history,
            adopted.highest_instance,
            config,
            now,
        );
        let mut running = running;
        if let Some(lost) = adopted.lost {
            // The sandbox died while no agent ran: as if its death were seen now.
            warning!(
                "{full_name}: the pod sandbox was lost while the agent was down, with {} \
                 container(s) running",
                lost.len()
            );
            running = HashMap::new();
            let exits = lost
                .into_iter()
                .map(|(instance, exit)| (InstanceId(instance), exit_status(exit)))
                .collect();
            machine.handle_sandbox_lost(exits, now);
        }
        PodTask {
            rt,
            clock,
            objects,
            tokens,
            pod_view,
            sync_period,
            volume_sync: None,
            deleting: tokio::sync::watch::Sender::new(false),
            machine,
            full_name,
            sandbox: Some(Arc::new(adopted.sandbox)),
            sandbox_task: None,
            tasks: JoinSet::new(),
            in_flight: HashMap::new(),
            ready: VecDeque::new(),
            events_tx: adopted.events_tx,
            events_rx: adopted.events_rx,
            commands,
            commands_open: true,
            updates,
            starting: HashSet::new(),
            starting_names: HashMap::new(),
            running,
            early_exits: HashMap::new(),
            exit_watchers: HashMap::new(),
            now,
            last_timer: None,
            terminated: false,
        }
    }

    /// Runs the pod until it is terminated; returns the final pod object.
    pub(crate) async fn run(mut self) -> Pod {
        debug!("{}: worker started", self.full_name);
        // A re-adopted sandbox keeps its volumes in sync too.
        self.start_volume_sync();
        loop {
            self.drain();
            if self.terminated {
                break;
            }
            if let Some(input) = self.ready.pop_front() {
                self.now = self.clock.now();
                self.feed(input);
                continue;
            }
            let wake = self.next_wake().await;
            self.now = self.clock.now();
            self.on_wake(wake);
        }
        self.finish().await
    }

    /// Performs every queued action.
    fn drain(&mut self) {
        while let Some(action) = self.machine.poll_action() {
            self.execute(action);
        }
    }

    async fn next_wake(&mut self) -> Wake<R::Sandbox> {
        let timer = self
            .machine
            .poll_timeout()
            .map(|at| (at, self.timer_instant(at)));
        let far = Instant::now() + Duration::from_secs(86_400);
        let timer_at = timer.map_or(far, |(_, i)| i);
        tokio::select! {
            cmd = self.commands.recv(), if self.commands_open => Wake::Command(cmd),
            ev = self.events_rx.recv() => Wake::Runtime(ev),
            Some(res) = self.tasks.join_next_with_id(), if !self.tasks.is_empty() => Wake::Task(res),
            () = tokio::time::sleep_until(timer_at), if timer.is_some() => {
                Wake::Timer(timer.map_or(self.now, |(at, _)| at))
            }
        }
    }

    /// The tokio instant for the machine's deadline `at`. A deadline that stays due after it
    /// was handled (which the core should never produce) is retried after 10 ms, not in a spin.
    fn timer_instant(&self, at: Timestamp) -> Instant {
        let instant = instant_for(&*self.clock, at);
        if self.last_timer == Some(at) {
            debug!("{}: timer {at} still due after handling it", self.full_name);
            return instant.max(Instant::now() + Duration::from_millis(10));
        }
        instant
    }

    fn on_wake(&mut self, wake: Wake<R::Sandbox>) {
        let now = self.now;
        match wake {
            Wake::Command(Some(Command::Delete { grace })) => {
                debug!("{}: delete (grace {grace:?})", self.full_name);
                // Starts still waiting for their volumes give up.
                self.deleting.send_replace(true);
                self.machine.handle_delete(grace, now);
            }
            Wake::Command(Some(Command::Evict { message, grace })) => {
                debug!("{}: evict (grace {grace}): {message}", self.full_name);
                self.deleting.send_replace(true);
                self.machine.handle_evict(message, grace, now);
            }
            Wake::Command(Some(Command::UpdateSpec(pod))) => {
                debug!("{}: spec update", self.full_name);
                self.machine.handle_spec_update(*pod, now);
                self.pod_view.send_replace(self.machine.pod().clone());
            }
            Wake::Command(Some(Command::NodeRequested(requested))) => {
                self.machine.set_node_requested(requested, now);
            }
            Wake::Command(Some(Command::UpdateConditions(conditions))) => {
                debug!("{}: conditions update", self.full_name);
                self.machine.handle_conditions_update(conditions, now);
            }
            Wake::Command(Some(Command::Exec {
                container,
                request,
                reply,
            })) => self.exec(container, request, reply),
            Wake::Command(Some(Command::PortForward { port, reply })) => {
                self.port_forward(port, reply);
            }
            Wake::Command(None) => self.commands_open = false,
            Wake::Runtime(Some(RuntimeEvent::Exited { instance, exit })) => {
                if self.starting.contains(&instance) {
                    // The process died before `start_container` answered: report the start
                    // first, as the kubelet sees created → started → exited.
                    self.early_exits.insert(instance, exit);
                } else {
                    self.exited(instance, exit);
                }
            }
            Wake::Runtime(Some(RuntimeEvent::SandboxLost { exits })) => {
                warning!(
                    "{}: the pod sandbox was lost with {} container(s) running",
                    self.full_name,
                    exits.len()
                );
                let exits = exits
                    .into_iter()
                    .map(|(instance, exit)| {
                        self.early_exits.remove(&instance);
                        for watcher in self.exit_watchers.remove(&instance).unwrap_or_default() {
                            let _ = watcher.send(());
                        }
                        (InstanceId(instance), exit_status(exit))
                    })
                    .collect();
                self.running.clear();
                // The dead sandbox is kept until a new one replaces it, so that the pod's
                // removal still cleans up after it.
                self.machine.handle_sandbox_lost(exits, now);
            }
            // The worker holds a sender itself, so the channel never closes.
            Wake::Runtime(None) => {}
            Wake::Task(Ok((id, input))) => {
                self.in_flight.remove(&id);
                self.feed(input);
            }
            Wake::Task(Err(e)) => {
                let entry = self.in_flight.remove(&e.id());
                if e.is_panic() {
                    warning!("{}: a runtime task panicked: {e}", self.full_name);
                    if let Some(input) = entry.and_then(|f| f.on_panic) {
                        self.feed(input);
                    }
                }
            }
            Wake::Timer(at) => {
                self.last_timer = Some(at);
                self.machine.handle_timeout(now);
            }
        }
    }

    fn exited(&mut self, instance: u64, exit: ContainerExit) {
        self.running.retain(|_, running| *running != instance);
        for watcher in self.exit_watchers.remove(&instance).unwrap_or_default() {
            let _ = watcher.send(());
        }
        debug!(
            "{}: instance {instance} exited with {}",
            self.full_name, exit.exit_code
        );
        self.machine
            .handle_container_exited(InstanceId(instance), exit_status(exit), self.now);
    }

    /// Reports one task result to the machine.
    fn feed(&mut self, input: Input<R::Sandbox>) {
        let now = self.now;
        match input {
            Input::SandboxCreated(result) => {
                self.sandbox_task = None;
                match result {
                    Ok(sandbox) => {
                        debug!("{}: sandbox ready", self.full_name);
                        self.machine.set_pod_ip(Some(self.rt.pod_ip(&sandbox)));
                        self.sandbox = Some(Arc::new(sandbox));
                        self.start_volume_sync();
                        self.machine.handle_sandbox_ready(now);
                    }
                    Err(e) => {
                        debug!("{}: sandbox failed: {e}", self.full_name);
                        self.machine.handle_sandbox_failed(e.reason, e.message, now);
                    }
                }
            }
            Input::Started { instance, result } => {
                self.starting.remove(&instance);
                let name = self.starting_names.remove(&instance);
                if let (Some(name), Ok(_)) = (name, &result) {
                    self.running.insert(name, instance);
                }
                let early_exit = self.early_exits.remove(&instance);
                match result {
                    Ok(started) => {
                        debug!(
                            "{}: instance {instance} started as {} (pid {})",
                            self.full_name, started.container_id, started.pid
                        );
                        let id = InstanceId(instance);
                        if let Some(user) = &started.user {
                            self.machine.set_container_user(
                                id,
                                i64::from(user.uid),
                                i64::from(user.gid),
                                user.groups.iter().map(|g| i64::from(*g)).collect(),
                            );
                        }
                        let pull = match started.image {
                            Some(ImageReport::Pulled { pull, total, size }) => {
                                self.machine.handle_image_pulling(id, now);
                                Some(ImagePull::Pulled { pull, total, size })
                            }
                            Some(ImageReport::Present) => Some(ImagePull::Present),
                            None => None,
                        };
                        if let Some(pull) = pull {
                            self.machine
                                .handle_image_pulled(id, pull, &started.image_id, now);
                        }
                        self.machine.handle_container_started(
                            InstanceId(instance),
                            started.container_id,
                            started.started_at,
                            now,
                        );
                        if let Some(exit) = early_exit {
                            // Let the machine act on the start before it learns of the exit.
                            self.drain();
                            self.exited(instance, exit);
                        }
                    }
                    Err(e) => {
                        debug!(
                            "{}: instance {instance} failed to start: {e}",
                            self.full_name
                        );
                        if e.pulling {
                            self.machine.handle_image_pulling(InstanceId(instance), now);
                        }
                        let failure = StartFailure {
                            reason: e.reason,
                            message: e.message,
                            created: e.created,
                        };
                        self.machine.handle_container_start_failed(
                            InstanceId(instance),
                            failure,
                            now,
                        );
                    }
                }
            }
            Input::Hook {
                instance,
                hook,
                outcome,
            } => {
                debug!(
                    "{}: {hook:?} hook of instance {instance}: {:?}",
                    self.full_name, outcome.result
                );
                if let Some(message) = outcome.http_fallback {
                    // An observation of the executor's, not a lifecycle decision: the kubelet
                    // records it on the pod as the hook runs.
                    self.publish_event(Event {
                        type_: EventType::Warning,
                        reason: "LifecycleHTTPFallback",
                        message,
                        container: None,
                    });
                }
                self.machine
                    .handle_hook_result(InstanceId(instance), hook, outcome.result, now);
            }
            Input::Probe {
                name,
                instance,
                kind,
                outcome,
            } => {
                debug!(
                    "{}: {kind:?} probe of {name} ({instance}): {outcome:?}",
                    self.full_name
                );
                self.machine
                    .handle_probe_result(&name, InstanceId(instance), kind, outcome, now);
            }
            Input::Resized { instance, result } => match result {
                Ok(resources) => {
                    debug!("{}: instance {instance} resized", self.full_name);
                    self.machine
                        .handle_resources_updated(InstanceId(instance), resources, now);
                }
                Err(e) => {
                    warning!("{}: resizing instance {instance}: {e}", self.full_name);
                    self.machine.handle_resources_update_failed(
                        InstanceId(instance),
                        e.to_string(),
                        now,
                    );
                }
            },
            Input::Signalled {
                instance,
                signal,
                result,
            } => match result {
                Ok(()) => debug!("{}: signal {signal} sent to {instance}", self.full_name),
                // Already gone: its exit is on the way.
                Err(RuntimeError::NotFound(_)) => {}
                Err(e) => warning!(
                    "{}: sending signal {signal} to instance {instance}: {e}",
                    self.full_name
                ),
            },
        }
    }

    /// Performs one action.
    fn execute(&mut self, action: Action) {
        match action {
            Action::CreateSandbox => self.spawn_create_sandbox(),
            Action::StartContainer {
                name,
                kind,
                instance,
                restart_count,
            } => self.spawn_start(&name, kind, instance.0, restart_count),
            Action::RunHook {
                name,
                instance,
                hook,
                handler,
            } => {
                let failed = |message: &str| Input::Hook {
                    instance: instance.0,
                    hook,
                    outcome: HookOutcome {
                        result: Err(message.to_string()),
                        http_fallback: None,
                    },
                };
                let (Some(sandbox), Some(container)) =
                    (self.sandbox.clone(), self.container(&name))
                else {
                    self.ready
                        .push_back(failed("the container or its sandbox is gone"));
                    return;
                };
                let rt = Arc::clone(&self.rt);
                let full_name = self.full_name.clone();
                let id = instance.0;
                // A sleep handler ends early once the instance has exited.
                let (exited_tx, exited_rx) = oneshot::channel();
                self.exit_watchers.entry(id).or_default().push(exited_tx);
                let terminated = async move {
                    if exited_rx.await.is_err() {
                        std::future::pending::<()>().await;
                    }
                };
                self.spawn(Some(failed("hook executor panicked")), async move {
                    let outcome = executors::run_hook(
                        &*rt, &sandbox, id, &container, &handler, &full_name, terminated,
                    )
                    .await;
                    Input::Hook {
                        instance: id,
                        hook,
                        outcome,
                    }
                });
            }
            Action::RunProbe {
                name,
                instance,
                kind,
                probe,
            } => {
                let id = instance.0;
                let probe_input = |name: &str, outcome| Input::Probe {
                    name: name.to_string(),
                    instance: id,
                    kind,
                    outcome,
                };
                let (Some(sandbox), Some(container)) =
                    (self.sandbox.clone(), self.container(&name))
                else {
                    let outcome = ProbeOutcome::Error("container not found".to_string());
                    self.ready.push_back(probe_input(&name, outcome));
                    return;
                };
                let on_panic = probe_input(&name, ProbeOutcome::Error("prober panicked".into()));
                let rt = Arc::clone(&self.rt);
                self.spawn(Some(on_panic), async move {
                    let outcome =
                        executors::run_probe(&*rt, &sandbox, id, &container, &probe).await;
                    Input::Probe {
                        name,
                        instance: id,
                        kind,
                        outcome,
                    }
                });
            }
            Action::StopContainer {
                name,
                instance,
                signal,
                grace,
            } => {
                debug!(
                    "{}: stopping {name} ({instance}) with {signal}, SIGKILL in {}s",
                    self.full_name,
                    grace.as_secs()
                );
                let number = signal_number(&signal).unwrap_or_else(|| {
                    warning!(
                        "{}: unknown stop signal {signal:?}, using SIGTERM",
                        self.full_name
                    );
                    15
                });
                self.spawn_signal(instance.0, number);
            }
            Action::KillContainer { name, instance } => {
                debug!("{}: killing {name} ({instance})", self.full_name);
                self.spawn_signal(instance.0, 9);
            }
            Action::UpdateContainerResources {
                name,
                instance,
                resources,
            } => {
                let id = instance.0;
                let Some(sandbox) = self.sandbox.clone() else {
                    self.ready.push_back(Input::Resized {
                        instance: id,
                        result: Err(RuntimeError::Other("the pod sandbox is gone".to_owned())),
                    });
                    return;
                };
                let rt = Arc::clone(&self.rt);
                let on_panic = Input::Resized {
                    instance: id,
                    result: Err(RuntimeError::Other(
                        "runtime task panicked while resizing the container".to_owned(),
                    )),
                };
                self.spawn(Some(on_panic), async move {
                    let result = rt
                        .update_container_resources(&sandbox, id, &name, resources)
                        .await;
                    Input::Resized {
                        instance: id,
                        result,
                    }
                });
            }
            Action::EmitEvent(event) => {
                debug!(
                    "{}: event {} {}: {}",
                    self.full_name,
                    event.type_.as_str(),
                    event.reason,
                    event.message
                );
                self.publish_event(event);
            }
            Action::PublishStatus(pod) => {
                let _ = self.updates.send(PodUpdate::Status(pod));
            }
            Action::PodTerminated => self.terminated = true,
        }
    }

    fn publish_event(&self, event: Event) {
        let _ = self.updates.send(PodUpdate::Event(TimedEvent {
            time: self.now,
            event,
        }));
    }

    /// The spec of container `name` (regular, init or sidecar), as the machine has it now.
    fn container(&self, name: &str) -> Option<Container> {
        let spec = self.machine.pod().spec.as_ref()?;
        spec.containers
            .iter()
            .chain(spec.init_containers.iter().flatten())
            .find(|c| c.name == name)
            .cloned()
            .or_else(|| {
                spec.ephemeral_containers
                    .iter()
                    .flatten()
                    .find(|e| e.name == name)
                    .map(podvisor_api::pod::ephemeral_as_container)
            })
    }

    fn spawn<F>(&mut self, on_panic: Option<Input<R::Sandbox>>, task: F) -> Id
    where
        F: Future<Output = Input<R::Sandbox>> + Send + 'static,
    {
        let abort = self.tasks.spawn(task);
        let id = abort.id();
        self.in_flight.insert(id, InFlight { abort, on_panic });
        id
    }

    fn spawn_create_sandbox(&mut self) {
        let rt = Arc::clone(&self.rt);
        let pod = self.machine.pod().clone();
        let events = self.events_tx.clone();
        let on_panic = Input::SandboxCreated(Err(SandboxError {
            reason: "FailedCreatePodSandBox",
            message: "runtime task panicked while creating the sandbox".to_string(),
        }));
        let id = self.spawn(Some(on_panic), async move {
            Input::SandboxCreated(rt.create_sandbox(&pod, events).await)
        });
        self.sandbox_task = Some(id);
    }

    fn spawn_start(&mut self, name: &str, kind: ContainerKind, instance: u64, restart_count: i32) {
        let failed = |message: String| Input::Started {
            instance,
            result: Err(StartError {
                reason: "RunContainerError".to_string(),
                message,
                created: false,
                pulling: false,
            }),
        };
        let Some(container) = self.container(name) else {
            let message = format!("no {kind:?} container named {name:?} in the pod spec");
            self.ready.push_back(failed(message));
            return;
        };
        let Some(sandbox) = self.sandbox.clone() else {
            self.ready
                .push_back(failed("the pod sandbox is not ready".to_string()));
            return;
        };
        debug!(
            "{}: starting {name} as instance {instance} (restart {restart_count})",
            self.full_name
        );
        self.starting.insert(instance);
        self.starting_names.insert(instance, name.to_owned());
        let rt = Arc::clone(&self.rt);
        // The kubelet starts a container with its allocated resources (a resize still
        // pending does not apply yet).
        let pod = self.machine.allocated_pod();
        let container = pod
            .spec
            .iter()
            .flat_map(|s| {
                s.containers
                    .iter()
                    .chain(s.init_containers.iter().flatten())
            })
            .find(|c| c.name == container.name)
            .cloned()
            .unwrap_or(container);
        let volumes = self.volume_syncer(&sandbox);
        let source = Arc::clone(&self.objects);
        let deleting = self.deleting.subscribe();
        let on_panic = failed("runtime task panicked while starting the container".to_string());
        self.spawn(Some(on_panic), async move {
            // The kubelet's `WaitForAttachAndMount`: no container starts before the pod's
            // volumes are set up; until then the start is pending (`ContainerCreating`).
            let mut deleting = deleting;
            tokio::select! {
                () = volumes.wait_until_set_up() => {}
                _ = deleting.wait_for(|d| *d) => {
                    return Input::Started {
                        instance,
                        result: Err(StartError {
                            reason: "CreateContainerError".to_string(),
                            message: "the pod is being deleted before its volumes were set up"
                                .to_string(),
                            created: false,
                            pulling: false,
                        }),
                    };
                }
            }
            let mut names = podvisor_api::references::container_env_references(&container);
            names.extend(podvisor_api::references::pod_volume_references(&pod));
            names
                .secrets
                .extend(podvisor_api::references::pull_secret_names(&pod));
            let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
            let objects = match crate::objects::fetch(source.as_ref(), namespace, &names) {
                Ok(objects) => objects,
                Err(message) => {
                    return Input::Started {
                        instance,
                        result: Err(StartError {
                            reason: "CreateContainerConfigError".to_string(),
                            message,
                            created: false,
                            pulling: false,
                        }),
                    };
                }
            };
            let request = StartRequest {
                pod,
                instance,
                container,
                restart_count,
                objects,
            };
            Input::Started {
                instance,
                result: rt.start_container(&sandbox, request).await,
            }
        });
    }

    /// What sets up the pod's `configMap` and `secret` volumes on `sandbox`.
    fn volume_syncer(&self, sandbox: &Arc<R::Sandbox>) -> crate::volumes::VolumeSyncer<R> {
        crate::volumes::VolumeSyncer {
            rt: Arc::clone(&self.rt),
            sandbox: Arc::clone(sandbox),
            pod: self.pod_view.subscribe(),
            objects: Arc::clone(&self.objects),
            tokens: Arc::clone(&self.tokens),
            clock: Arc::clone(&self.clock),
            updates: self.updates.clone(),
        }
    }

    /// Starts the periodic re-sync of the pod's volumes on its sandbox (once).
    fn start_volume_sync(&mut self) {
        if self.volume_sync.is_some() || self.terminated {
            return;
        }
        let Some(sandbox) = self.sandbox.clone() else {
            return;
        };
        let syncer = self.volume_syncer(&sandbox);
        if !syncer.has_volumes() {
            return;
        }
        let period = self.sync_period;
        self.volume_sync = Some(tokio::spawn(syncer.run(period)).abort_handle());
    }

    /// Starts a streaming exec in the running instance of `container`; the answer goes to
    /// `reply` from a task of its own (the session is the caller's, not the worker's).
    fn exec(
        &self,
        container: String,
        request: ExecRequest,
        reply: oneshot::Sender<Result<ExecSession, ExecError>>,
    ) {
        let (Some(&instance), Some(sandbox)) = (self.running.get(&container), self.sandbox.clone())
        else {
            let _ = reply.send(Err(ExecError::ContainerNotFound(container)));
            return;
        };
        debug!("{}: exec in {container} ({instance})", self.full_name);
        let rt = Arc::clone(&self.rt);
        tokio::spawn(async move {
            let result = match rt.exec_stream(&sandbox, instance, request).await {
                // It exited meanwhile.
                Err(RuntimeError::NotFound(_)) => Err(ExecError::ContainerNotFound(container)),
                other => other.map_err(ExecError::from),
            };
            let _ = reply.send(result);
        });
    }

    /// Connects to `port` in the pod's network from a task of its own (the connection is the
    /// caller's). A pod without a sandbox has no network to reach.
    fn port_forward(
        &self,
        port: u16,
        reply: oneshot::Sender<Result<tokio::net::TcpStream, String>>,
    ) {
        let Some(sandbox) = self.sandbox.clone() else {
            let _ = reply.send(Err(format!(
                "pod {} has no running sandbox",
                self.full_name
            )));
            return;
        };
        debug!("{}: port-forward to port {port}", self.full_name);
        let rt = Arc::clone(&self.rt);
        tokio::spawn(async move {
            let result = rt.port_forward(&sandbox, port).await;
            let _ = reply.send(result.map_err(|e| e.to_string()));
        });
    }

    fn spawn_signal(&mut self, instance: u64, signal: i32) {
        let Some(sandbox) = self.sandbox.clone() else {
            return;
        };
        let rt = Arc::clone(&self.rt);
        self.spawn(None, async move {
            Input::Signalled {
                instance,
                signal,
                result: rt.signal(&sandbox, instance, signal).await,
            }
        });
    }

    /// The machine is terminated: stop every task, release the sandbox, publish the end.
    async fn finish(mut self) -> Pod {
        if let Some(sync) = self.volume_sync.take() {
            sync.abort();
        }
        for (id, t) in &self.in_flight {
            // A sandbox being created must be waited for, so that it can be removed.
            if Some(*id) != self.sandbox_task {
                t.abort.abort();
            }
        }
        while let Some(res) = self.tasks.join_next().await {
            if let Ok(Input::SandboxCreated(Ok(sandbox))) = res {
                self.sandbox = Some(Arc::new(sandbox));
            }
        }
        if let Some(sandbox) = self.sandbox.take()
            && let Err(e) = self.rt.remove_sandbox(&sandbox).await
        {
            warning!("{}: removing the sandbox: {e}", self.full_name);
        }
        debug!("{}: worker finished", self.full_name);
        let pod = self.machine.pod().clone();
        self.tokens
            .forget(pod.metadata.uid.as_deref().unwrap_or_default());
        let _ = self
            .updates
            .send(PodUpdate::Terminated(Box::new(pod.clone())));
        pod
    }
}

/// The volume re-sync is a task of its own holding the worker's update channel: it must not
/// outlive the worker, however the worker ends (finished, or aborted at the agent's shutdown),
/// or the pod's status writer would wait for the channel's end that never comes.
impl<R: Runtime> Drop for PodTask<R> {
    fn drop(&mut self) {
        if let Some(sync) = self.volume_sync.take() {
            sync.abort();
        }
    }
}

/// The core's view of a runtime exit.
fn exit_status(exit: ContainerExit) -> ExitStatus {
    ExitStatus {
        exit_code: exit.exit_code,
        oom_killed: exit.oom_killed,
        finished_at: Some(exit.finished_at),
        termination_message: exit.termination_message,
        log_tail: exit.log_tail,
    }
}

/// `<name>_<namespace>(<uid>)`, as hook messages name the pod.
fn full_name_of(pod: &Pod) -> String {
    let meta = &pod.metadata;
    format!(
        "{}_{}({})",
        meta.name.as_deref().unwrap_or(""),
        meta.namespace.as_deref().unwrap_or("default"),
        meta.uid.as_deref().unwrap_or("")
    )
}
