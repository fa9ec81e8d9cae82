//! A typed fake `Runtime` for the agent's wiring tests: every call is recorded with the time it
//! was made; containers start at once and exit as scripted (or when signalled).

#![allow(
    dead_code,
    reason = "each test binary uses a different part of the fake"
)]

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use podvisor_agent::{Agent, Clock, PodHandle, PodUpdate, TokioClock};
use podvisor_lifecycle::{BackoffConfig, MachineConfig};
use podvisor_runtime::{
    ContainerExit, ExecResult, ImageReport, InstanceId, Runtime, RuntimeError, RuntimeEvent,
    SandboxError, SandboxState, StartError, StartRequest, Started,
};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

/// 2026-01-01T00:00:00Z: where the tests' clock starts.
pub const ORIGIN: i64 = 1_767_225_600;

/// One call the agent made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuntimeCall {
    CreateSandbox {
        pod: String,
    },
    Start {
        instance: InstanceId,
        container: String,
        restart_count: i32,
    },
    Signal {
        instance: InstanceId,
        signal: i32,
    },
    Exec {
        instance: InstanceId,
        argv: Vec<String>,
    },
    RemoveSandbox {
        pod: String,
    },
}

/// How a container behaves, every time it is started.
#[derive(Debug, Clone, Default)]
pub struct ContainerScript {
    /// Exit by itself after this long.
    pub exit_after: Option<Duration>,
    /// With this code.
    pub exit_code: i32,
    /// Die before `start_container` returns (a process that fails at once).
    pub exit_before_start: bool,
    /// SIGTERM does nothing (only SIGKILL ends it).
    pub ignore_sigterm: bool,
    /// The start fails.
    pub start_error: Option<StartError>,
    /// What the start reports about the image.
    pub image: Option<ImageReport>,
}

#[derive(Default)]
struct State {
    calls: Vec<(Timestamp, RuntimeCall)>,
    scripts: HashMap<String, ContainerScript>,
    exec_codes: HashMap<String, i32>,
    sandbox_failures: u32,
    sandbox_delay: Duration,
    live: HashMap<InstanceId, (String, mpsc::UnboundedSender<RuntimeEvent>, Timestamp)>,
}

/// The fake runtime.
pub struct FakeRuntime {
    clock: TokioClock,
    state: Mutex<State>,
}

/// The fake's sandbox: where exits are sent.
pub struct FakeSandbox {
    pod: String,
    events: mpsc::UnboundedSender<RuntimeEvent>,
}

impl FakeRuntime {
    pub fn new(clock: TokioClock) -> Arc<FakeRuntime> {
        Arc::new(FakeRuntime {
            clock,
            state: Mutex::new(State::default()),
        })
    }

    pub fn script(&self, container: &str, script: ContainerScript) {
        self.state().scripts.insert(container.to_string(), script);
    }

    /// The exit code of exec'ing `argv` (joined with spaces); 0 when not set.
    pub fn set_exec_code(&self, argv: &str, code: i32) {
        self.state().exec_codes.insert(argv.to_string(), code);
    }

    /// The next `n` sandbox creations fail with `FailedCreatePodSandBox`.
    pub fn fail_sandboxes(&self, n: u32) {
        self.state().sandbox_failures = n;
    }

    /// Sandbox creation takes this long.
    pub fn delay_sandboxes(&self, d: Duration) {
        self.state().sandbox_delay = d;
    }

    pub fn calls(&self) -> Vec<RuntimeCall> {
        self.state().calls.iter().map(|(_, c)| c.clone()).collect()
    }

    pub fn timed_calls(&self) -> Vec<(Timestamp, RuntimeCall)> {
        self.state().calls.clone()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap()
    }

    fn record(&self, call: RuntimeCall) {
        let now = self.clock.now();
        self.state().calls.push((now, call));
    }

    /// Ends `instance` with `code` unless it already ended.
    fn exit(&self, instance: InstanceId, code: i32, signal: Option<i32>) {
        let Some((_, events, started_at)) = self.state().live.remove(&instance) else {
            return;
        };
        let exit = ContainerExit {
            exit_code: code,
            signal,
            oom_killed: false,
            started_at,
            finished_at: self.clock.now(),
            termination_message: None,
            log_tail: None,
        };
        let _ = events.send(RuntimeEvent::Exited { instance, exit });
    }
}

impl Runtime for FakeRuntime {
    type Sandbox = FakeSandbox;

    async fn create_sandbox(
        &self,
        pod: &Pod,
        events: mpsc::UnboundedSender<RuntimeEvent>,
    ) -> Result<FakeSandbox, SandboxError> {
        let name = pod.metadata.name.clone().unwrap_or_default();
        self.record(RuntimeCall::CreateSandbox { pod: name.clone() });
        let delay = self.state().sandbox_delay;
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        {
            let mut st = self.state();
            if st.sandbox_failures > 0 {
                st.sandbox_failures -= 1;
                return Err(SandboxError {
                    reason: "FailedCreatePodSandBox",
                    message: "fake sandbox failure".to_string(),
                });
            }
        }
        Ok(FakeSandbox { pod: name, events })
    }

    async fn start_container(
        &self,
        sandbox: &FakeSandbox,
        request: StartRequest,
    ) -> Result<Started, StartError> {
        let name = request.container.name.clone();
        let instance = request.instance;
        self.record(RuntimeCall::Start {
            instance,
            container: name.clone(),
            restart_count: request.restart_count,
        });
        let script = self.state().scripts.get(&name).cloned().unwrap_or_default();
        if let Some(e) = script.start_error {
            return Err(e);
        }
        let started_at = self.clock.now();
        self.state()
            .live
            .insert(instance, (name, sandbox.events.clone(), started_at));
        if script.exit_before_start {
            self.exit(instance, script.exit_code, None);
        } else if let Some(after) = script.exit_after {
            // A detached timer standing in for the process; it only reports through the channel.
            let events = sandbox.events.clone();
            let clock = self.clock;
            let code = script.exit_code;
            tokio::spawn(async move {
                tokio::time::sleep(after).await;
                let exit = ContainerExit {
                    exit_code: code,
                    signal: None,
                    oom_killed: false,
                    started_at,
                    finished_at: clock.now(),
                    termination_message: None,
                    log_tail: None,
                };
                let _ = events.send(RuntimeEvent::Exited { instance, exit });
            });
        }
        Ok(Started {
            container_id: format!("fake://{instance:08x}"),
            pid: 1000 + u32::try_from(instance).unwrap_or(0),
            started_at,
            image: script.image,
            image_id: String::new(),
            user: None,
        })
    }

    async fn signal(
        &self,
        _sandbox: &FakeSandbox,
        instance: InstanceId,
        signal: i32,
    ) -> Result<(), RuntimeError> {
        self.record(RuntimeCall::Signal { instance, signal });
        let name = match self.state().live.get(&instance) {
            Some((name, _, _)) => name.clone(),
            None => return Err(RuntimeError::NotFound(instance)),
        };
        let ignore = self
            .state()
            .scripts
            .get(&name)
            .is_some_and(|s| s.ignore_sigterm);
        if signal == 9 || !ignore {
            self.exit(instance, 128 + signal, Some(signal));
        }
        Ok(())
    }

    async fn exec(
        &self,
        _sandbox: &FakeSandbox,
        instance: InstanceId,
        argv: Vec<String>,
        _timeout: Option<Duration>,
    ) -> Result<ExecResult, RuntimeError> {
        let key = argv.join(" ");
        self.record(RuntimeCall::Exec { instance, argv });
        let code = self.state().exec_codes.get(&key).copied().unwrap_or(0);
        Ok(ExecResult {
            exit_code: code,
            output: format!("{key}: exit {code}").into_bytes(),
            stderr: Vec::new(),
            timed_out: false,
        })
    }

    fn pod_ip(&self, _sandbox: &FakeSandbox) -> String {
        "127.0.0.1".to_string()
    }

    async fn remove_sandbox(&self, sandbox: &FakeSandbox) -> Result<(), RuntimeError> {
        self.record(RuntimeCall::RemoveSandbox {
            pod: sandbox.pod.clone(),
        });
        Ok(())
    }

    // The agent's wiring tests run no node and no recovery (recovery is tested against the
    // process runtime, in the runtime crate and end to end): the fake keeps nothing across
    // agents, so a restarted agent finds no sandbox and no logs.

    async fn list_sandboxes(&self) -> Vec<String> {
        Vec::new()
    }

    async fn sandbox_state(&self, _pod: &Pod) -> Result<SandboxState, RuntimeError> {
        Ok(SandboxState::Absent)
    }

    async fn remove_dead_sandbox(&self, _pod: &Pod) -> Result<(), RuntimeError> {
        Ok(())
    }

    fn pods_with_logs(&self) -> Vec<String> {
        Vec::new()
    }

    fn remove_pod_logs(&self, _uid: &str) {}
}

/// A defaulted pod from YAML.
pub fn pod(yaml: &str) -> Pod {
    let mut pods = podvisor_api::decode_pods(yaml, "test.yaml").expect("decodes");
    let mut pod = pods.remove(0);
    podvisor_api::apply_defaults(&mut pod);
    podvisor_api::validate_pod(&pod).expect("valid");
    pod
}

/// A fake runtime and an agent on tokio's (paused) clock, with the reduced back-off curve.
pub fn agent() -> (Arc<FakeRuntime>, Agent<FakeRuntime>, TokioClock) {
    let clock = TokioClock::new(Timestamp::from_second(ORIGIN).unwrap());
    let rt = FakeRuntime::new(clock);
    let config = MachineConfig {
        backoff: BackoffConfig::reduced(),
        ..MachineConfig::default()
    };
    let agent = Agent::with_clock(Arc::clone(&rt), config, Arc::new(clock));
    (rt, agent, clock)
}

/// Everything a pod published, kept by the tests.
#[derive(Default, Debug)]
pub struct Seen {
    pub statuses: Vec<Pod>,
    pub events: Vec<podvisor_agent::TimedEvent>,
    pub terminated: Option<Pod>,
}

impl Seen {
    pub fn reasons(&self) -> Vec<&'static str> {
        self.events.iter().map(|e| e.event.reason).collect()
    }

    pub fn last(&self) -> &Pod {
        self.terminated
            .as_ref()
            .or(self.statuses.last())
            .expect("a status was published")
    }
}

/// Receives updates until `done` holds or `limit` of (virtual) time passed; returns whether
/// `done` held.
pub async fn pump(
    handle: &mut PodHandle,
    seen: &mut Seen,
    limit: Duration,
    done: impl Fn(&Seen) -> bool,
) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    while !done(seen) {
        match tokio::time::timeout_at(deadline, handle.next_update()).await {
            Ok(Some(PodUpdate::Status(p))) => seen.statuses.push(*p),
            Ok(Some(PodUpdate::Event(e))) => seen.events.push(e),
            Ok(Some(PodUpdate::Terminated(p))) => seen.terminated = Some(*p),
            Ok(None) | Err(_) => return done(seen),
        }
    }
    true
}

/// `status.phase` of a pod.
pub fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

/// kubectl's STATUS column for a pod.
pub fn status_text(pod: &Pod) -> String {
    podvisor_lifecycle::kubectl::pod_status_text(pod)
}

/// The first regular container's status.
pub fn container_status(pod: &Pod) -> k8s_openapi::api::core::v1::ContainerStatus {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first().cloned())
        .expect("a container status")
}
