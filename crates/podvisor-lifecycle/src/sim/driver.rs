//! The one driver of a [`PodMachine`] on a virtual clock: `podvisor simulate` and the crate's
//! tests both drive the machine through it.
//!
//! A [`Driver`] owns a machine and a clock and plays the agent's part as ARCHITECTURE's
//! "Driving a PodMachine" has it: every input is followed by draining every action the machine
//! queued, and timers fire, each at its own instant, when the clock is advanced
//! ([`Driver::advance_to`], [`Driver::step`]). What the runtime around the machine answers comes
//! from a [`FakeRuntime`]: it sees each action as it is drained and schedules answers, at the
//! same instant or later; an answer and a timer due at the same instant give the answer first,
//! and answers due at the same instant come in the order they were scheduled. [`Answers`] is
//! the fake runtime of the rule tests (fixed answers at once, each kind switched on or off);
//! the simulator's is its script.
//!
//! The driver keeps what a runtime would know, for a test to read and answer: the actions with
//! the time each was produced, every instance with its container and whether it runs, and the
//! sandbox, start, probe and hook requests not answered yet. Inputs given with
//! [`Driver::input`] (and the helpers named after them, in `give.rs`) reach the machine as they
//! are; a scheduled answer that reports the exit of an instance that is not running is
//! dropped, as a process exits once.

mod answers;
mod give;
mod read;

pub use answers::{Answers, resize_answer};

use crate::action::{
    Action, ExitStatus, HookKind, InstanceId, ProbeKind, ProbeOutcome, StartFailure,
};
use crate::machine::PodMachine;
use k8s_openapi::api::core::v1::{Pod, PodCondition};
use k8s_openapi::jiff::Timestamp;
use std::collections::{BTreeMap, BTreeSet};

/// More inputs than this at one instant while advancing the clock is a livelock (a timer that
/// stays due, answers that never stop coming).
const SAME_INSTANT_LIMIT: u32 = 10_000;

/// More inputs than this in one [`Driver::advance_to`] is a timer that never stops coming back.
const ADVANCE_LIMIT: u32 = 100_000;

/// One input to the machine, as a runtime, a probe or hook executor, or the API reports it.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// `handle_timeout`: a timer came due.
    Timeout,
    /// The sandbox is ready.
    SandboxReady,
    /// The sandbox could not be created.
    SandboxFailed {
        /// Event reason (`FailedMount`, ...).
        reason: &'static str,
        /// Event message.
        message: String,
    },
    /// The sandbox stopped being ready; each instance that ran in it exited as given.
    SandboxLost {
        /// The instances that ran in it.
        exits: Vec<(InstanceId, ExitStatus)>,
    },
    /// A `StartContainer` succeeded.
    Started {
        /// The instance.
        id: InstanceId,
        /// `<runtime>://<id>`.
        container_id: String,
        /// When the process started.
        started_at: Timestamp,
    },
    /// The runtime began pulling a starting instance's image.
    ImagePulling {
        /// The instance.
        id: InstanceId,
    },
    /// A starting instance's image is ready.
    ImagePulled {
        /// The instance.
        id: InstanceId,
        /// Present, or pulled.
        pull: crate::ImagePull,
        /// The runtime's reference of the image (`imageID`).
        image_id: String,
    },
    /// Who a starting instance's process runs as (given before `Started`).
    ContainerUser {
        /// The instance.
        id: InstanceId,
        /// uid.
        uid: i64,
        /// gid.
        gid: i64,
        /// Supplementary groups.
        groups: Vec<i64>,
    },
    /// A `StartContainer` failed.
    StartFailed {
        /// The instance.
        id: InstanceId,
        /// Why.
        failure: StartFailure,
    },
    /// An instance exited.
    Exited {
        /// The instance.
        id: InstanceId,
        /// How.
        exit: ExitStatus,
    },
    /// A probe's result.
    Probe {
        /// The container.
        name: String,
        /// The instance probed.
        id: InstanceId,
        /// Which probe.
        kind: ProbeKind,
        /// Its outcome.
        outcome: ProbeOutcome,
    },
    /// A hook's result.
    Hook {
        /// The instance.
        id: InstanceId,
        /// Which hook.
        hook: HookKind,
        /// `Err(message)` when the hook failed.
        result: Result<(), String>,
    },
    /// An `UpdateContainerResources` succeeded: the instance runs with these resources.
    ResourcesUpdated {
        /// The instance.
        id: InstanceId,
        /// What the runtime applied.
        resources: k8s_openapi::api::core::v1::ResourceRequirements,
    },
    /// An `UpdateContainerResources` failed.
    ResourcesUpdateFailed {
        /// The instance.
        id: InstanceId,
        /// The runtime's message.
        message: String,
    },
    /// The node's other pods' allocated requests (in-place resize `Deferred`).
    NodeRequested(crate::config::NodeResources),
    /// A delete request (`None`: the pod's own grace period).
    Delete {
        /// `gracePeriodSeconds`.
        grace: Option<i64>,
    },
    /// The node evicts the pod (`handle_evict`).
    Evict {
        /// The eviction manager's message.
        message: String,
        /// The grace-period override.
        grace: i64,
    },
    /// A new pod object (spec update).
    SpecUpdate(Box<Pod>),
    /// Conditions written by another client (readiness gates).
    Conditions(Vec<PodCondition>),
}

/// The container id a fake runtime gives `id`: `containerd://` and 16 hex digits.
pub fn container_id(id: InstanceId) -> String {
    format!("containerd://{:016x}", id.0)
}

/// The world around the machine: answers its actions, and may look at it after every input.
pub trait FakeRuntime {
    /// What the runtime schedules: turned into an [`Input`] when it comes due.
    type Answer: std::fmt::Debug;

    /// Once, before the machine's first actions are drained (a script schedules what it will do
    /// at given times).
    fn begin(&mut self, _ctl: &mut Control<'_, Self::Answer>) {}

    /// Each action the machine queued, in order, as it is drained.
    fn on_action(&mut self, action: &Action, ctl: &mut Control<'_, Self::Answer>);

    /// A scheduled answer comes due at `ctl.now()`: the input it makes, if any.
    fn on_due(
        &mut self,
        answer: Self::Answer,
        ctl: &mut Control<'_, Self::Answer>,
    ) -> Option<Input>;

    /// Sees the machine once it is created and after every input it handled (before its
    /// actions are drained): a test's invariant checks.
    fn observe(&mut self, _machine: &PodMachine) {}
}

/// A container instance as the driver knows it from the machine's `StartContainer` actions and
/// the inputs given since.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    /// The instance id.
    pub id: InstanceId,
    /// Its container.
    pub name: String,
    /// `restartCount` of its `StartContainer`.
    pub restart_count: i32,
    /// Its start was answered (started or failed).
    pub answered: bool,
    /// When its process started (`None`: not started, or the start failed).
    pub started_at: Option<Timestamp>,
    /// It was reported exited (alone or with its sandbox).
    pub exited: bool,
}

impl Instance {
    /// Started and not exited.
    pub fn is_running(&self) -> bool {
        self.started_at.is_some() && !self.exited
    }
}

/// A `RunProbe` not answered yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeRequest {
    /// The container.
    pub name: String,
    /// The instance to probe.
    pub instance: InstanceId,
    /// Which probe.
    pub kind: ProbeKind,
}

/// A `RunHook` not answered yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookRequest {
    /// The container.
    pub name: String,
    /// The instance.
    pub instance: InstanceId,
    /// Which hook.
    pub hook: HookKind,
}

/// Scheduled answers by due time, then by the order they were scheduled in.
#[derive(Debug)]
struct Queue<A> {
    entries: BTreeMap<(Timestamp, u64), A>,
    seq: u64,
}

impl<A> Queue<A> {
    fn next_at(&self) -> Option<Timestamp> {
        self.entries.first_key_value().map(|((at, _), _)| *at)
    }
}

/// What a [`FakeRuntime`] may see and do while it answers: the clock, the instances, and the
/// queue of scheduled answers.
#[derive(Debug)]
pub struct Control<'a, A> {
    now: Timestamp,
    origin: Timestamp,
    instances: &'a BTreeMap<InstanceId, Instance>,
    queue: &'a mut Queue<A>,
}

impl<A> Control<'_, A> {
    /// The current instant.
    pub fn now(&self) -> Timestamp {
        self.now
    }

    /// Seconds from the driver's origin to now.
    pub fn secs(&self) -> f64 {
        self.now.duration_since(self.origin).as_secs_f64()
    }

    /// The instance `id`, if a `StartContainer` created it.
    pub fn instance(&self, id: InstanceId) -> Option<&Instance> {
        self.instances.get(&id)
    }

    /// The running instances, by id.
    pub fn running(&self) -> impl Iterator<Item = &Instance> {
        self.instances.values().filter(|i| i.is_running())
    }

    /// Schedules `answer` for `at` (not before now).
    pub fn schedule(&mut self, at: Timestamp, answer: A) {
        let q = &mut *self.queue;
        q.seq += 1;
        q.entries.insert((at.max(self.now), q.seq), answer);
    }

    /// Schedules `answer` for now: delivered once the current actions are drained.
    pub fn answer(&mut self, answer: A) {
        self.schedule(self.now, answer);
    }
}

/// A [`PodMachine`], its clock and the fake runtime around it. See the module docs.
#[derive(Debug)]
pub struct Driver<R: FakeRuntime = Answers> {
    machine: PodMachine,
    runtime: R,
    origin: Timestamp,
    now: Timestamp,
    keep_log: bool,
    /// Every action, in order, and the instant each was produced at.
    log: Vec<Action>,
    log_at: Vec<Timestamp>,
    instances: BTreeMap<InstanceId, Instance>,
    /// Every instance reported exited, known or not (a recovered one).
    exited: BTreeSet<InstanceId>,
    /// Running instances in the order they started.
    running: Vec<InstanceId>,
    /// Unanswered `StartContainer`s, in order.
    pending_starts: Vec<InstanceId>,
    sandbox_requested: bool,
    probe_requests: Vec<ProbeRequest>,
    hook_requests: Vec<HookRequest>,
    queue: Queue<R::Answer>,
    terminated_at: Option<Timestamp>,
    inputs: u64,
}

impl<R: FakeRuntime> Driver<R> {
    /// Drives `machine` (new or recovered) from `now`, the clock's origin, with `runtime`
    /// answering: the machine's first actions are drained and what is due at once answered.
    pub fn new(machine: PodMachine, now: Timestamp, runtime: R) -> Driver<R> {
        Driver::build(machine, now, runtime, true)
    }

    /// [`Driver::new`] keeping no log of the actions (the simulator's long runs).
    pub fn unlogged(machine: PodMachine, now: Timestamp, runtime: R) -> Driver<R> {
        Driver::build(machine, now, runtime, false)
    }

    fn build(machine: PodMachine, now: Timestamp, runtime: R, keep_log: bool) -> Driver<R> {
        let mut d = Driver {
            machine,
            runtime,
            origin: now,
            now,
            keep_log,
            log: Vec::new(),
            log_at: Vec::new(),
            instances: BTreeMap::new(),
            exited: BTreeSet::new(),
            running: Vec::new(),
            pending_starts: Vec::new(),
            sandbox_requested: false,
            probe_requests: Vec::new(),
            hook_requests: Vec::new(),
            queue: Queue {
                entries: BTreeMap::new(),
                seq: 0,
            },
            terminated_at: None,
            inputs: 0,
        };
        d.runtime.observe(&d.machine);
        let mut ctl = Control {
            now: d.now,
            origin: d.origin,
            instances: &d.instances,
            queue: &mut d.queue,
        };
        d.runtime.begin(&mut ctl);
        d.drain();
        d.settle();
        d
    }

    // ----- the clock -----

    /// The current instant (the latest input's, or where the clock was advanced to).
    pub fn now(&self) -> Timestamp {
        self.now
    }

    /// The clock's origin (when the driver was made).
    pub fn origin(&self) -> Timestamp {
        self.origin
    }

    /// Seconds from the origin to `at`.
    pub fn secs(&self, at: Timestamp) -> f64 {
        at.duration_since(self.origin).as_secs_f64()
    }

    /// When the machine wants to be called back next (`poll_timeout`).
    pub fn next_timer(&self) -> Option<Timestamp> {
        self.machine.poll_timeout()
    }

    /// When the next scheduled answer is due.
    pub fn next_answer(&self) -> Option<Timestamp> {
        self.queue.next_at()
    }

    /// Gives the machine its next input by `until`: the earliest scheduled answer or timer (an
    /// answer first at the same instant), at its own instant. False, and nothing done, when
    /// neither is due by `until`.
    pub fn step(&mut self, until: Timestamp) -> bool {
        let timer = self.machine.poll_timeout();
        let answer = self.queue.next_at();
        let Some(at) = timer.into_iter().chain(answer).min() else {
            return false;
        };
        if at > until {
            return false;
        }
        self.now = self.now.max(at);
        if answer.is_some_and(|a| a <= self.now) {
            self.deliver_next();
        } else {
            self.feed(Input::Timeout, self.now);
        }
        true
    }

    /// Fires every timer and delivers every answer due by `target`, each at its own instant,
    /// then moves the clock to `target` (never backwards). Panics on a livelock: 10,000 inputs at
    /// one instant, or 100,000 in one call.
    pub fn advance_to(&mut self, target: Timestamp) {
        let mut same = 0;
        let mut rounds = 0;
        let mut last = self.now;
        while self.step(target) {
            rounds += 1;
            assert!(
                rounds < ADVANCE_LIMIT,
                "advancing to {target}: inputs never stop coming (at {})",
                self.now
            );
            if self.now == last {
                same += 1;
                assert!(
                    same < SAME_INSTANT_LIMIT,
                    "livelock at {}: inputs never stop being due",
                    self.now
                );
            } else {
                same = 0;
                last = self.now;
            }
        }
        self.now = self.now.max(target);
    }

    /// A timer's input at `now` (`handle_timeout`), then what is due by then.
    pub fn timeout(&mut self, now: Timestamp) {
        self.input(Input::Timeout, now);
    }

    // ----- inputs -----

    /// Gives the machine `input` at `now` (the clock moves to `now` when it is later), drains
    /// its actions and delivers every answer due by the clock.
    pub fn input(&mut self, input: Input, now: Timestamp) {
        self.feed(input, now);
        self.settle();
    }

    /// Delivers every scheduled answer due by the clock, in order.
    pub fn settle(&mut self) {
        while self.queue.next_at().is_some_and(|at| at <= self.now) {
            self.deliver_next();
        }
    }

    /// How many inputs the machine was given (timers included).
    pub fn inputs(&self) -> u64 {
        self.inputs
    }

    fn deliver_next(&mut self) {
        let Some((_, answer)) = self.queue.entries.pop_first() else {
            return;
        };
        let mut ctl = Control {
            now: self.now,
            origin: self.origin,
            instances: &self.instances,
            queue: &mut self.queue,
        };
        match self.runtime.on_due(answer, &mut ctl) {
            // A process exits once.
            Some(Input::Exited { id, .. }) if !self.is_running(id) => {}
            Some(input) => self.feed(input, self.now),
            None => {}
        }
    }

    /// Gives the machine one input and drains its actions.
    fn feed(&mut self, input: Input, now: Timestamp) {
        self.now = self.now.max(now);
        self.inputs += 1;
        self.track_input(&input);
        let m = &mut self.machine;
        match input {
            Input::Timeout => m.handle_timeout(now),
            Input::SandboxReady => m.handle_sandbox_ready(now),
            Input::SandboxFailed { reason, message } => {
                m.handle_sandbox_failed(reason, message, now);
            }
            Input::SandboxLost { exits } => m.handle_sandbox_lost(exits, now),
            Input::Started {
                id,
                container_id,
                started_at,
            } => m.handle_container_started(id, container_id, started_at, now),
            Input::ImagePulling { id } => m.handle_image_pulling(id, now),
            Input::ContainerUser {
                id,
                uid,
                gid,
                groups,
            } => m.set_container_user(id, uid, gid, groups),
            Input::ImagePulled { id, pull, image_id } => {
                m.handle_image_pulled(id, pull, &image_id, now);
            }
            Input::StartFailed { id, failure } => m.handle_container_start_failed(id, failure, now),
            Input::Exited { id, exit } => m.handle_container_exited(id, exit, now),
            Input::Probe {
                name,
                id,
                kind,
                outcome,
            } => m.handle_probe_result(&name, id, kind, outcome, now),
            Input::Hook { id, hook, result } => m.handle_hook_result(id, hook, result, now),
            Input::Delete { grace } => m.handle_delete(grace, now),
            Input::Evict { message, grace } => m.handle_evict(message, grace, now),
            Input::SpecUpdate(pod) => m.handle_spec_update(*pod, now),
            Input::Conditions(conditions) => m.handle_conditions_update(conditions, now),
            Input::ResourcesUpdated { id, resources } => {
                m.handle_resources_updated(id, resources, now);
            }
            Input::ResourcesUpdateFailed { id, message } => {
                m.handle_resources_update_failed(id, message, now);
            }
            Input::NodeRequested(r) => m.set_node_requested(r, now),
        }
        self.runtime.observe(&self.machine);
        self.drain();
    }

    /// What an input tells the driver about the runtime's side.
    fn track_input(&mut self, input: &Input) {
        match input {
            Input::SandboxReady | Input::SandboxFailed { .. } => self.sandbox_requested = false,
            Input::Started { id, started_at, .. } => {
                self.pending_starts.retain(|p| p != id);
                if let Some(i) = self.instances.get_mut(id) {
                    i.answered = true;
                    i.started_at = Some(*started_at);
                }
                if !self.running.contains(id) {
                    self.running.push(*id);
                }
            }
            Input::StartFailed { id, .. } => {
                self.pending_starts.retain(|p| p != id);
                if let Some(i) = self.instances.get_mut(id) {
                    i.answered = true;
                }
            }
            Input::Exited { id, .. } => self.mark_exited(*id),
            Input::SandboxLost { exits } => {
                for (id, _) in exits {
                    self.mark_exited(*id);
                }
            }
            Input::Probe { id, kind, .. } => {
                if let Some(i) = self
                    .probe_requests
                    .iter()
                    .position(|r| r.instance == *id && r.kind == *kind)
                {
                    self.probe_requests.remove(i);
                }
            }
            Input::Hook { id, hook, .. } => {
                if let Some(i) = self
                    .hook_requests
                    .iter()
                    .position(|r| r.instance == *id && r.hook == *hook)
                {
                    self.hook_requests.remove(i);
                }
            }
            Input::Timeout
            | Input::Delete { .. }
            | Input::Evict { .. }
            | Input::SpecUpdate(_)
            | Input::Conditions(_)
            | Input::ResourcesUpdated { .. }
            | Input::ResourcesUpdateFailed { .. }
            | Input::NodeRequested(_)
            | Input::ImagePulling { .. }
            | Input::ContainerUser { .. }
            | Input::ImagePulled { .. } => {}
        }
    }

    fn mark_exited(&mut self, id: InstanceId) {
        self.exited.insert(id);
        self.running.retain(|r| *r != id);
        if let Some(i) = self.instances.get_mut(&id) {
            i.exited = true;
        }
    }

    /// Drains the machine's actions: each is tracked, shown to the runtime, and logged.
    fn drain(&mut self) {
        while let Some(action) = self.machine.poll_action() {
            self.track_action(&action);
            let mut ctl = Control {
                now: self.now,
                origin: self.origin,
                instances: &self.instances,
                queue: &mut self.queue,
            };
            self.runtime.on_action(&action, &mut ctl);
            if self.keep_log {
                self.log.push(action);
                self.log_at.push(self.now);
            }
        }
    }

    fn track_action(&mut self, action: &Action) {
        match action {
            Action::CreateSandbox => self.sandbox_requested = true,
            Action::StartContainer {
                name,
                instance,
                restart_count,
                ..
            } => {
                self.instances.insert(
                    *instance,
                    Instance {
                        id: *instance,
                        name: name.clone(),
                        restart_count: *restart_count,
                        answered: false,
                        started_at: None,
                        exited: false,
                    },
                );
                self.pending_starts.push(*instance);
            }
            Action::RunProbe {
                name,
                instance,
                kind,
                ..
            } => self.probe_requests.push(ProbeRequest {
                name: name.clone(),
                instance: *instance,
                kind: *kind,
            }),
            Action::RunHook {
                name,
                instance,
                hook,
                ..
            } => self.hook_requests.push(HookRequest {
                name: name.clone(),
                instance: *instance,
                hook: *hook,
            }),
            Action::PodTerminated => self.terminated_at = Some(self.now),
            Action::StopContainer { .. }
            | Action::KillContainer { .. }
            | Action::UpdateContainerResources { .. }
            | Action::EmitEvent(_)
            | Action::PublishStatus(_) => {}
        }
    }

    // ----- what the runtime knows -----

    /// The machine (to read: inputs go through the driver).
    pub fn machine(&self) -> &PodMachine {
        &self.machine
    }

    /// The fake runtime.
    pub fn runtime(&self) -> &R {
        &self.runtime
    }

    /// The fake runtime, to change how it answers from now on.
    pub fn runtime_mut(&mut self) -> &mut R {
        &mut self.runtime
    }

    /// The fake runtime, once driving is over.
    pub fn into_runtime(self) -> R {
        self.runtime
    }

    /// The instance `id`, if a `StartContainer` created it.
    pub fn instance_info(&self, id: InstanceId) -> Option<&Instance> {
        self.instances.get(&id)
    }

    /// Whether `id` was reported exited.
    pub fn has_exited(&self, id: InstanceId) -> bool {
        self.exited.contains(&id)
    }

    /// Whether `id` started and has not exited.
    pub fn is_running(&self, id: InstanceId) -> bool {
        self.running.contains(&id)
    }

    /// The running instances, in the order they started.
    pub fn running(&self) -> &[InstanceId] {
        &self.running
    }

    /// Whether a `CreateSandbox` waits for its answer.
    pub fn sandbox_requested(&self) -> bool {
        self.sandbox_requested
    }

    /// `StartContainer`s not answered yet, in order.
    pub fn pending_start_ids(&self) -> &[InstanceId] {
        &self.pending_starts
    }

    /// `RunProbe`s not answered yet, in order (a probe result retires the oldest request for
    /// its instance and kind).
    pub fn probe_requests(&self) -> &[ProbeRequest] {
        &self.probe_requests
    }

    /// `RunHook`s not answered yet, in order (a hook result retires the oldest request for its
    /// instance and hook).
    pub fn hook_requests(&self) -> &[HookRequest] {
        &self.hook_requests
    }

    /// When `PodTerminated` was produced.
    pub fn terminated_at(&self) -> Option<Timestamp> {
        self.terminated_at
    }

    /// Every action, in order (none for [`Driver::unlogged`]).
    pub fn actions(&self) -> &[Action] {
        &self.log
    }

    /// Every action with the instant it was produced at.
    pub fn logged(&self) -> impl Iterator<Item = (Timestamp, &Action)> {
        self.log_at.iter().copied().zip(&self.log)
    }
}
