//! The fake `Runtime` of the probe and hook executor tests: `exec` runs the command on the
//! host, in a process group of its own killed at the timeout; everything else is out of scope.

use podvisor_runtime::{
    ExecResult, InstanceId, Runtime, RuntimeError, RuntimeEvent, SandboxError, StartError,
    StartRequest, Started,
};
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::mpsc;

#[derive(Default)]
pub struct HostExec {
    /// How many commands were run.
    pub execs: AtomicUsize,
    /// Every exec must come without a timeout (exec hooks, H1).
    pub no_timeout: bool,
}

impl HostExec {
    /// For the hook executor, which runs exec hooks without a timeout (H1).
    pub fn for_hooks() -> HostExec {
        HostExec {
            no_timeout: true,
            ..HostExec::default()
        }
    }
}

impl Runtime for HostExec {
    type Sandbox = ();

    fn create_sandbox(
        &self,
        _pod: &k8s_openapi::api::core::v1::Pod,
        _events: mpsc::UnboundedSender<RuntimeEvent>,
    ) -> impl Future<Output = Result<(), SandboxError>> + Send {
        std::future::ready(Err(SandboxError {
            reason: "FailedCreatePodSandBox",
            message: "fake".into(),
        }))
    }

    fn start_container(
        &self,
        _sandbox: &(),
        _request: StartRequest,
    ) -> impl Future<Output = Result<Started, StartError>> + Send {
        std::future::ready(Err(StartError {
            reason: "RunContainerError".into(),
            message: "fake".into(),
            created: false,
            pulling: false,
        }))
    }

    fn signal(
        &self,
        _sandbox: &(),
        instance: InstanceId,
        _signal: i32,
    ) -> impl Future<Output = Result<(), RuntimeError>> + Send {
        std::future::ready(Err(RuntimeError::NotFound(instance)))
    }

    fn exec(
        &self,
        _sandbox: &(),
        _instance: InstanceId,
        argv: Vec<String>,
        timeout: Option<Duration>,
    ) -> impl Future<Output = Result<ExecResult, RuntimeError>> + Send {
        assert!(
            !self.no_timeout || timeout.is_none(),
            "exec hooks run without a timeout (H1)"
        );
        self.execs.fetch_add(1, Ordering::SeqCst);
        host_exec(argv, timeout)
    }

    // Only exec is real here: the sandbox methods are never called by probes and hooks.
    fn list_sandboxes(&self) -> impl Future<Output = Vec<String>> + Send {
        std::future::ready(Vec::new())
    }

    fn sandbox_state(
        &self,
        _pod: &k8s_openapi::api::core::v1::Pod,
    ) -> impl Future<Output = Result<podvisor_runtime::SandboxState, RuntimeError>> + Send {
        std::future::ready(Ok(podvisor_runtime::SandboxState::Absent))
    }

    fn remove_dead_sandbox(
        &self,
        _pod: &k8s_openapi::api::core::v1::Pod,
    ) -> impl Future<Output = Result<(), RuntimeError>> + Send {
        std::future::ready(Ok(()))
    }

    fn pods_with_logs(&self) -> Vec<String> {
        Vec::new()
    }

    fn remove_pod_logs(&self, _uid: &str) {}

    fn pod_ip(&self, _sandbox: &()) -> String {
        "127.0.0.1".into()
    }

    fn remove_sandbox(
        &self,
        _sandbox: &(),
    ) -> impl Future<Output = Result<(), RuntimeError>> + Send {
        std::future::ready(Ok(()))
    }
}

/// Runs `argv` in its own process group; stdout then stderr, like CRI ExecSync's result.
pub async fn host_exec(
    argv: Vec<String>,
    timeout: Option<Duration>,
) -> Result<ExecResult, RuntimeError> {
    let child = tokio::process::Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|source| RuntimeError::Io {
            what: format!("exec {:?}", argv[0]),
            source,
        })?;
    let pgid = child
        .id()
        .and_then(|id| rustix::process::Pid::from_raw(id as i32));
    let waited = match timeout {
        None => child.wait_with_output().await,
        Some(t) => match tokio::time::timeout(t, child.wait_with_output()).await {
            Ok(out) => out,
            Err(_) => {
                if let Some(pgid) = pgid {
                    let _ =
                        rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
                }
                return Ok(ExecResult {
                    exit_code: 137,
                    output: Vec::new(),
                    stderr: Vec::new(),
                    timed_out: true,
                });
            }
        },
    };
    let out = waited.map_err(|source| RuntimeError::Io {
        what: "wait".into(),
        source,
    })?;
    let exit_code = out.status.code().unwrap_or_else(|| {
        128 + std::os::unix::process::ExitStatusExt::signal(&out.status).unwrap_or(0)
    });
    let mut output = out.stdout;
    output.extend_from_slice(&out.stderr);
    Ok(ExecResult {
        exit_code,
        output,
        stderr: out.stderr,
        timed_out: false,
    })
}
