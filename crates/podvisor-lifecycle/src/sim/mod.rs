//! `podvisor simulate`: the core against a scripted fake runtime on a virtual clock.
//!
//! Everything here is pure: the clock is a variable, the "runtime" answers from a script through
//! the [`Driver`]'s queue of scheduled answers. The result is the timeline the kubelet would
//! produce. [`driver`] is the one PodMachine driver, which the crate's tests use too.

pub mod driver;
pub mod infer;
mod output;
pub mod script;
mod shell;

pub use infer::{Inference, Note, NoteKind, infer};
pub use output::{end_json, end_text, json_lines, notes_json, notes_text, text_report};
pub use script::Script;

pub use driver::{Answers, Driver, FakeRuntime, Input};

use crate::ExitStatus;
use crate::action::{Action, Event, HookKind, InstanceId, ProbeKind, ProbeOutcome};
use crate::config::MachineConfig;
use crate::kubectl::pod_row;
use crate::machine::PodMachine;
use driver::Control;
use k8s_openapi::api::core::v1::{LifecycleHandler, Pod};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use script::{ContainerScript, Outcome, ResultFrom};
use std::collections::HashMap;
use std::time::Duration;

/// Simulation settings.
#[derive(Debug, Clone)]
pub struct SimOptions {
    /// How much virtual time to simulate (the run stops earlier once the pod has terminated).
    pub duration: Duration,
    /// Machine settings (back-off curve, ...).
    pub config: MachineConfig,
    /// The virtual wall-clock time at t = 0.
    pub start: Timestamp,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            duration: Duration::from_secs(15 * 60),
            config: MachineConfig::default(),
            start: Timestamp::from_second(1_767_225_600).expect("valid"), // 2026-01-01T00:00:00Z
        }
    }
}

/// A container as shown in a status line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerSnapshot {
    /// Container name.
    pub name: String,
    /// From `initContainers`.
    pub init: bool,
    /// From `ephemeralContainers` (A14).
    pub ephemeral: bool,
    /// `waiting`, `running` or `terminated`.
    pub state: &'static str,
    /// Waiting or terminated reason.
    pub reason: Option<String>,
    /// Exit code when terminated.
    pub exit_code: Option<i32>,
    /// Waiting or terminated message (e.g. the termination message).
    pub message: Option<String>,
    /// `lastState.terminated.exitCode`, if any.
    pub last_exit_code: Option<i32>,
    /// `restartCount`.
    pub restart_count: i32,
    /// `ready`.
    pub ready: bool,
    /// `started`.
    pub started: bool,
}

/// The pod as shown in a status line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusSnapshot {
    /// `status.phase`.
    pub phase: String,
    /// kubectl's STATUS column.
    pub status_text: String,
    /// kubectl's READY column (`1/2`).
    pub ready: String,
    /// kubectl's RESTARTS count.
    pub restarts: i64,
    /// `status.reason` (e.g. `DeadlineExceeded`).
    pub reason: Option<String>,
    /// Condition type -> status (`True`/`False`), in status order.
    pub conditions: Vec<(String, String)>,
    /// Init containers then regular containers.
    pub containers: Vec<ContainerSnapshot>,
}

/// One line of the timeline.
#[derive(Debug, Clone, PartialEq)]
pub enum Record {
    /// An event, at `t` seconds.
    Event {
        /// Seconds since the start.
        t: f64,
        /// The event.
        event: Event,
    },
    /// Something the (fake) runtime was asked to do: signals, SIGKILL, hooks. Shown in the text
    /// timeline only.
    Runtime {
        /// Seconds since the start.
        t: f64,
        /// The container.
        container: String,
        /// What happened (`SIGTERM (SIGKILL in 25s)`, `SIGKILL`, `preStop hook`, ...).
        what: String,
    },
    /// A status change, at `t` seconds.
    Status {
        /// Seconds since the start.
        t: f64,
        /// The new status.
        status: StatusSnapshot,
    },
}

/// What went wrong before or during a simulation.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The script names a container the pod does not have.
    #[error("script: containers.{0}: the pod has no container or init container named {0:?}")]
    UnknownContainer(String),
    /// The machine stopped making progress (a bug in the core).
    #[error("simulation stopped making progress at t={0}s")]
    Stuck(f64),
}

/// Something the scripted runtime reports back to the machine. Every answer goes through the
/// driver's queue, even an immediate one, so the machine's actions are drained after each input
/// as a real agent would.
#[derive(Debug, Clone)]
enum Happening {
    /// The sandbox is ready.
    SandboxReady,
    /// A container started.
    Started {
        /// The container.
        name: String,
        /// Its instance.
        id: InstanceId,
    },
    /// A probe ran; its outcome is read from the script when it comes due.
    Probe {
        /// The container.
        name: String,
        /// The instance probed.
        id: InstanceId,
        /// Which probe.
        kind: ProbeKind,
    },
    /// An instance exits (if it still runs).
    Exit {
        /// The instance.
        id: InstanceId,
        /// Its exit code.
        code: i32,
        /// Killed by the OOM killer.
        oom: bool,
    },
    /// A hook ended.
    Hook {
        /// The instance.
        id: InstanceId,
        /// Which hook.
        hook: HookKind,
        /// It succeeded.
        ok: bool,
    },
    /// The script's delete.
    Delete {
        /// `gracePeriodSeconds`.
        grace: Option<i64>,
    },
    /// The script's sandbox loss: everything running dies with it (SIGKILL).
    SandboxLost,
    /// The script's resize number `n`.
    Resize(usize),
    /// The answer to an `UpdateContainerResources`.
    Resized(Input),
    /// The script adds an ephemeral container (`kubectl debug`).
    AddEphemeral(Box<k8s_openapi::api::core::v1::EphemeralContainer>),
}

/// The fake runtime of `podvisor simulate`: answers as the script says, and writes the timeline.
#[derive(Debug)]
struct Scripted<'a> {
    script: &'a Script,
    /// The pod as the API holds it (resizes change it; the script's ephemeral containers are
    /// added to it).
    pod: Pod,
    /// How many times each container started.
    runs: HashMap<String, usize>,
    records: Vec<Record>,
    last: Option<StatusSnapshot>,
}

impl<'a> Scripted<'a> {
    /// A runtime following `script`.
    fn new(script: &'a Script, pod: Pod) -> Scripted<'a> {
        Scripted {
            script,
            pod,
            runs: HashMap::new(),
            records: Vec::new(),
            last: None,
        }
    }

    /// The timeline.
    fn into_records(self) -> Vec<Record> {
        self.records
    }

    fn container_script(&self, name: &str) -> Option<&ContainerScript> {
        self.script.containers.get(name)
    }

    fn runtime(&mut self, t: f64, container: &str, what: String) {
        self.records.push(Record::Runtime {
            t,
            container: container.to_string(),
            what,
        });
    }

    fn hook_answer(
        &self,
        name: &str,
        hook: HookKind,
        handler: &LifecycleHandler,
    ) -> (Duration, bool) {
        let scripted = self.container_script(name).and_then(|c| match hook {
            HookKind::PostStart => c.hooks.post_start.clone(),
            HookKind::PreStop => c.hooks.pre_stop.clone(),
        });
        match scripted {
            Some(h) => (h.duration, h.result == Outcome::Success),
            None => {
                let sleep = handler.sleep.as_ref().map_or(0, |s| s.seconds.max(0));
                (Duration::from_secs(sleep.unsigned_abs()), true)
            }
        }
    }

    /// A start: the script's exits of this run are scheduled.
    fn start(&mut self, name: &str, id: InstanceId, ctl: &mut Control<'_, Happening>) {
        let now = ctl.now();
        let run = *self
            .runs
            .entry(name.to_string())
            .and_modify(|r| *r += 1)
            .or_insert(0);
        let cs = self.container_script(name).cloned().unwrap_or_default();
        if let Some(r) = cs.runs.get(run.min(cs.runs.len().saturating_sub(1)))
            && let Some(after) = r.exit_after
        {
            ctl.schedule(
                now + dur(after),
                Happening::Exit {
                    id,
                    code: r.exit_code,
                    oom: false,
                },
            );
        }
        if let Some(after) = cs.oom_after {
            ctl.schedule(
                now + dur(after),
                Happening::Exit {
                    id,
                    code: 137,
                    oom: true,
                },
            );
        }
    }

    fn probe_outcome(
        &self,
        name: &str,
        id: InstanceId,
        kind: ProbeKind,
        ctl: &Control<'_, Happening>,
    ) -> ProbeOutcome {
        let Some(started) = ctl
            .instance(id)
            .filter(|i| i.is_running())
            .and_then(|i| i.started_at)
        else {
            return ProbeOutcome::Failure("container is not running".to_string());
        };
        let elapsed = ctl.now().duration_since(started);
        let schedule: &[ResultFrom] = match self.container_script(name) {
            Some(c) => match kind {
                ProbeKind::Startup => &c.probes.startup,
                ProbeKind::Liveness => &c.probes.liveness,
                ProbeKind::Readiness => &c.probes.readiness,
            },
            None => &[],
        };
        let current = schedule
            .iter()
            .filter(|r| dur(r.from) <= elapsed)
            .max_by_key(|r| r.from)
            .map_or(Outcome::Success, |r| r.result);
        match current {
            Outcome::Success => ProbeOutcome::Success,
            Outcome::Failure => ProbeOutcome::Failure("simulated failure".to_string()),
        }
    }
}

impl FakeRuntime for Scripted<'_> {
    type Answer = Happening;

    fn begin(&mut self, ctl: &mut Control<'_, Happening>) {
        let start = ctl.now();
        if let Some(d) = &self.script.delete {
            ctl.schedule(
                start + dur(d.at),
                Happening::Delete {
                    grace: d.grace_period_seconds,
                },
            );
        }
        for at in &self.script.sandbox_lost {
            ctl.schedule(start + dur(*at), Happening::SandboxLost);
        }
        for (n, r) in self.script.resize.iter().enumerate() {
            ctl.schedule(start + dur(r.at), Happening::Resize(n));
        }
        for e in &self.script.ephemeral_containers {
            ctl.schedule(
                start + dur(e.at),
                Happening::AddEphemeral(Box::new(e.container.clone())),
            );
        }
    }

    fn on_action(&mut self, action: &Action, ctl: &mut Control<'_, Happening>) {
        let now = ctl.now();
        let t = ctl.secs();
        match action {
            Action::CreateSandbox => ctl.answer(Happening::SandboxReady),
            Action::StartContainer { name, instance, .. } => ctl.answer(Happening::Started {
                name: name.clone(),
                id: *instance,
            }),
            Action::RunHook {
                instance,
                hook,
                handler,
                name,
            } => {
                let what = match hook {
                    HookKind::PostStart => "postStart hook started",
                    HookKind::PreStop => "preStop hook started",
                };
                self.runtime(t, name, what.to_string());
                let (duration, ok) = self.hook_answer(name, *hook, handler);
                ctl.schedule(
                    now + dur(duration),
                    Happening::Hook {
                        id: *instance,
                        hook: *hook,
                        ok,
                    },
                );
            }
            Action::RunProbe {
                name,
                instance,
                kind,
                ..
            } => ctl.answer(Happening::Probe {
                name: name.clone(),
                id: *instance,
                kind: *kind,
            }),
            Action::StopContainer {
                name,
                instance,
                signal,
                grace,
            } => {
                self.runtime(
                    t,
                    name,
                    format!("{signal} (SIGKILL in {}s)", grace.as_secs()),
                );
                let cs = self.container_script(name);
                let after = cs
                    .and_then(|c| c.stop_after_signal)
                    .unwrap_or(Some(Duration::ZERO));
                let code = cs
                    .and_then(|c| c.signal_exit_code)
                    .unwrap_or(128 + signal_number(signal));
                if let Some(after) = after {
                    ctl.schedule(
                        now + dur(after),
                        Happening::Exit {
                            id: *instance,
                            code,
                            oom: false,
                        },
                    );
                }
            }
            Action::KillContainer { instance, name } => {
                self.runtime(t, name, "SIGKILL".to_string());
                ctl.answer(Happening::Exit {
                    id: *instance,
                    code: 137,
                    oom: false,
                });
            }
            Action::EmitEvent(event) => self.records.push(Record::Event {
                t,
                event: event.clone(),
            }),
            Action::PublishStatus(pod) => {
                let snap = snapshot(pod, now);
                if self.last.as_ref() != Some(&snap) {
                    self.last = Some(snap.clone());
                    self.records.push(Record::Status { t, status: snap });
                }
            }
            Action::UpdateContainerResources {
                name,
                instance,
                resources,
            } => {
                self.runtime(t, name, "UpdateContainerResources (in place)".to_string());
                let usage = self
                    .container_script(name)
                    .and_then(|c| c.memory_usage.as_deref())
                    .and_then(podvisor_api::quantity::Quantity::parse)
                    .and_then(|q| u64::try_from(q.value()).ok());
                ctl.answer(Happening::Resized(driver::resize_answer(
                    name, *instance, resources, usage,
                )));
            }
            Action::PodTerminated => {}
        }
    }

    fn on_due(&mut self, answer: Happening, ctl: &mut Control<'_, Happening>) -> Option<Input> {
        let now = ctl.now();
        let exit = |code: i32, oom_killed: bool| ExitStatus {
            exit_code: code,
            oom_killed,
            finished_at: Some(now),
            ..ExitStatus::default()
        };
        Some(match answer {
            Happening::SandboxReady => Input::SandboxReady,
            Happening::Started { name, id } => {
                self.start(&name, id, ctl);
                Input::Started {
                    id,
                    container_id: format!("sim://{:016x}", id.0),
                    started_at: now,
                }
            }
            Happening::Probe { name, id, kind } => {
                let outcome = self.probe_outcome(&name, id, kind, ctl);
                Input::Probe {
                    name,
                    id,
                    kind,
                    outcome,
                }
            }
            // The driver drops the exit of an instance that no longer runs.
            Happening::Exit { id, code, oom } => Input::Exited {
                id,
                exit: exit(code, oom),
            },
            Happening::Hook { id, hook, ok } => Input::Hook {
                id,
                hook,
                result: if ok {
                    Ok(())
                } else {
                    Err("hook failed (simulated)".to_string())
                },
            },
            Happening::Delete { grace } => Input::Delete { grace },
            Happening::SandboxLost => Input::SandboxLost {
                exits: ctl.running().map(|i| (i.id, exit(137, false))).collect(),
            },
            Happening::Resized(input) => input,
            Happening::Resize(n) => {
                let r = &self.script.resize[n];
                let mut pod = self.pod.clone();
                pod.metadata.generation = Some(pod.metadata.generation.unwrap_or(1) + 1);
                if let Some(spec) = pod.spec.as_mut() {
                    let inits = spec.init_containers.iter_mut().flatten();
                    for c in spec.containers.iter_mut().chain(inits) {
                        if let Some(res) = r.containers.get(&c.name) {
                            c.resources = Some(res.clone());
                        }
                    }
                }
                self.pod = pod.clone();
                Input::SpecUpdate(Box::new(pod))
            }
            Happening::AddEphemeral(container) => {
                // What the `ephemeralcontainers` subresource stores: the pod with one more
                // ephemeral container (defaulted) and the next generation.
                let mut container = *container;
                podvisor_api::defaults::default_ephemeral_container(&mut container);
                let pod = &mut self.pod;
                let spec = pod.spec.get_or_insert_with(Default::default);
                spec.ephemeral_containers
                    .get_or_insert_with(Vec::new)
                    .push(container);
                pod.metadata.generation = Some(pod.metadata.generation.unwrap_or(1) + 1);
                Input::SpecUpdate(Box::new(pod.clone()))
            }
        })
    }
}

/// Runs `pod` (defaulted and valid) under `script` and returns the timeline.
pub fn simulate(pod: Pod, script: &Script, opts: &SimOptions) -> Result<Vec<Record>, SimError> {
    simulate_counting(pod, script, opts).map(|(records, _)| records)
}

/// Like [`simulate`], also returning how many inputs (steps) the machine processed.
pub fn simulate_counting(
    pod: Pod,
    script: &Script,
    opts: &SimOptions,
) -> Result<(Vec<Record>, u64), SimError> {
    let pod = prepare(pod, opts.start);
    let spec = pod.spec.as_ref();
    let names: Vec<&str> = spec
        .map(|s| {
            s.init_containers
                .iter()
                .flatten()
                .chain(s.containers.iter())
                .map(|c| c.name.as_str())
                .chain(
                    script
                        .ephemeral_containers
                        .iter()
                        .map(|e| e.container.name.as_str()),
                )
                .collect()
        })
        .unwrap_or_default();
    let resized = script.resize.iter().flat_map(|r| r.containers.keys());
    if let Some(unknown) = script
        .containers
        .keys()
        .chain(resized)
        .find(|k| !names.contains(&k.as_str()))
    {
        return Err(SimError::UnknownContainer(unknown.clone()));
    }
    let (pod, mut records, bound_at) = match schedule(pod, script, opts) {
        Scheduling::Bound { pod, records, at } => (*pod, records, at),
        Scheduling::Gated(records) => return Ok((records, 0)),
    };
    // Script times are the simulation's: those of a pod bound late count from its binding.
    let mut shifted = script.clone();
    if let Some(d) = &mut shifted.delete {
        d.at = d.at.saturating_sub(bound_at);
    }
    for at in &mut shifted.sandbox_lost {
        *at = at.saturating_sub(bound_at);
    }
    for r in &mut shifted.resize {
        r.at = r.at.saturating_sub(bound_at);
    }
    for e in &mut shifted.ephemeral_containers {
        e.at = e.at.saturating_sub(bound_at);
    }
    let script = &shifted;
    let origin = opts.start + dur(bound_at);
    let machine = PodMachine::new(pod.clone(), opts.config.clone(), origin);
    let mut d = Driver::unlogged(machine, origin, Scripted::new(script, pod));
    let end = opts.start + dur(opts.duration);
    let mut idle_rounds = 0u32;
    while d.terminated_at().is_none() {
        let timer = d.next_timer();
        let before = (d.now(), d.runtime().records.len());
        if !d.step(end) {
            break;
        }
        // A timer that stays due without anything happening would spin forever.
        if (d.now(), d.runtime().records.len()) == before && timer.is_some_and(|t| t <= d.now()) {
            idle_rounds += 1;
            if idle_rounds > 1000 {
                return Err(SimError::Stuck(d.secs(d.now())));
            }
        } else {
            idle_rounds = 0;
        }
    }
    let steps = d.inputs();
    let offset = bound_at.as_secs_f64();
    records.extend(d.into_runtime().into_records().into_iter().map(|mut r| {
        match &mut r {
            Record::Event { t, .. } | Record::Runtime { t, .. } | Record::Status { t, .. } => {
                *t += offset;
            }
        }
        r
    }));
    Ok((records, steps))
}

/// The node name of the simulated binding.
pub const SIM_NODE: &str = "sim-node";

/// How the pod reaches the kubelet.
enum Scheduling {
    /// Bound at `at` (0 for a pod without gates: the kubelet gets it at once, as before);
    /// `records` is what happened before.
    Bound {
        pod: Box<Pod>,
        records: Vec<Record>,
        at: Duration,
    },
    /// Gated for the whole run: the API server's view of it, once.
    Gated(Vec<Record>),
}

/// M11/K1: a pod with scheduling gates is `Pending` with `PodScheduled=False`
/// `SchedulingGated` (STATUS `SchedulingGated`) until the script's `ungate`; then the
/// scheduler binds it to [`SIM_NODE`] (its `Scheduled` event) and the kubelet starts it.
fn schedule(mut pod: Pod, script: &Script, opts: &SimOptions) -> Scheduling {
    use podvisor_api::pod::{
        apply_scheduling_gated_condition, is_scheduling_gated, scheduled_message,
    };
    if !pod.spec.as_ref().is_some_and(is_scheduling_gated) {
        return Scheduling::Bound {
            pod: Box::new(pod),
            records: Vec::new(),
            at: Duration::ZERO,
        };
    }
    let mut view = pod.clone();
    view.status = Some(k8s_openapi::api::core::v1::PodStatus {
        phase: Some("Pending".to_owned()),
        ..Default::default()
    });
    apply_scheduling_gated_condition(&mut view, opts.start);
    let mut records = vec![Record::Status {
        t: 0.0,
        status: snapshot(&view, opts.start),
    }];
    let Some(at) = script.ungate.filter(|at| *at <= opts.duration) else {
        return Scheduling::Gated(records);
    };
    if let Some(spec) = pod.spec.as_mut() {
        spec.scheduling_gates = None;
        spec.node_name = Some(SIM_NODE.to_owned());
    }
    let meta = &pod.metadata;
    records.push(Record::Event {
        t: at.as_secs_f64(),
        event: Event {
            type_: crate::action::EventType::Normal,
            reason: "Scheduled",
            message: scheduled_message(
                meta.namespace.as_deref().unwrap_or("default"),
                meta.name.as_deref().unwrap_or(""),
                SIM_NODE,
            ),
            container: None,
        },
    });
    Scheduling::Bound {
        pod: Box::new(pod),
        records,
        at,
    }
}

/// Gives the pod what the API server would (uid, namespace, creationTimestamp).
fn prepare(mut pod: Pod, start: Timestamp) -> Pod {
    let meta = &mut pod.metadata;
    if meta.namespace.is_none() {
        meta.namespace = Some("default".to_string());
    }
    if meta.uid.is_none() {
        let name = meta.name.clone().unwrap_or_default();
        meta.uid = Some(fake_uid(&name));
    }
    if meta.creation_timestamp.is_none() {
        meta.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(start));
    }
    pod
}

/// A deterministic UUID-shaped uid, so simulations are reproducible.
fn fake_uid(name: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let h2 = h.rotate_left(29) ^ 0x9e37_79b9_7f4a_7c15;
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        h >> 32,
        (h >> 16) & 0xffff,
        h & 0xfff,
        (h2 >> 52) & 0xfff,
        h2 & 0xffff_ffff_ffff
    )
}

fn dur(d: Duration) -> SignedDuration {
    SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX)
}

/// Signal numbers for exit codes (128 + n).
fn signal_number(name: &str) -> i32 {
    match name.trim_start_matches("SIG") {
        "HUP" => 1,
        "INT" => 2,
        "QUIT" => 3,
        "KILL" => 9,
        "USR1" => 10,
        "USR2" => 12,
        "WINCH" => 28,
        _ => 15,
    }
}

/// The status line for a pod object.
pub fn snapshot(pod: &Pod, now: Timestamp) -> StatusSnapshot {
    let row = pod_row(pod, now);
    let status = pod.status.clone().unwrap_or_default();
    let restarts = row
        .restarts
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let mut containers = Vec::new();
    let lists = [
        (
            true,
            false,
            status.init_container_statuses.unwrap_or_default(),
        ),
        (false, false, status.container_statuses.unwrap_or_default()),
        (
            false,
            true,
            status.ephemeral_container_statuses.unwrap_or_default(),
        ),
    ];
    for (init, ephemeral, list) in lists {
        for s in list {
            let st = s.state.unwrap_or_default();
            let (state, reason, exit_code, message) = if st.running.is_some() {
                ("running", None, None, None)
            } else if let Some(t) = st.terminated {
                ("terminated", t.reason, Some(t.exit_code), t.message)
            } else {
                let w = st.waiting.unwrap_or_default();
                ("waiting", w.reason, None, w.message)
            };
            let last_exit_code = s.last_state.and_then(|l| l.terminated).map(|t| t.exit_code);
            containers.push(ContainerSnapshot {
                name: s.name,
                init,
                ephemeral,
                state,
                reason,
                exit_code,
                message,
                last_exit_code,
                restart_count: s.restart_count,
                ready: s.ready,
                started: s.started.unwrap_or(false),
            });
        }
    }
    let conditions = status
        .conditions
        .unwrap_or_default()
        .into_iter()
        .map(|c| (c.type_, c.status))
        .collect();
    StatusSnapshot {
        reason: status.reason,
        conditions,
        phase: status.phase.unwrap_or_default(),
        status_text: row.status,
        ready: row.ready,
        restarts,
        containers,
    }
}
