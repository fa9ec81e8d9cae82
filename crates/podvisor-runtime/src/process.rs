//! The process backend: containers are host processes supervised by one `podvisor shim` per
//! pod.
//!
//! State layout: `<state>/pods/<uid>/` (emptyDir volumes under `volumes/`, per-instance
//! termination-message files, the shim's socket, journal and log under `shim/`) and
//! `<state>/logs/<ns>_<name>_<uid>/<container>/<restartCount>.log`.
//!
//! The agent process becomes a child subreaper in [`ProcessRuntime::new`] so that shims (and,
//! should a shim die, its containers) are re-parented to it rather than to a PID 1 that reaps
//! slowly; a background thread reaps those, and only those: processes of another session than
//! the agent's, so children the agent spawns itself are left to their owners.
//!
//! Re-adoption: [`ProcessRuntime::sandbox_view`] reads what a restarted agent finds of a pod
//! (no shim, a live shim's instances, or a shim that died meanwhile, settled as a lost
//! sandbox); [`Runtime::create_sandbox`] for a pod whose shim still answers reuses that shim
//! (volumes are kept), and the new subscription replays exits not yet acknowledged.
//!
//! A shim that dies on its own (kill -9, OOM) is a lost sandbox (`exits`): what it left
//! running is killed, every instance gets its exit, and the agent hears
//! [`RuntimeEvent::SandboxLost`].
//!
//! Ephemeral containers (`kubectl debug`) start as any other container. The `process` class
//! has no PID namespaces: every container, a debugger included, sees every process of the
//! host, so an ephemeral container's `targetContainerName` needs nothing here (in the `oci`
//! class it joins the target's PID namespace: `oci::launch::PidNamespace::for_container`).

mod atomic_writer;
mod class_record;
mod container_logs;
mod disk_usage;
mod exec_stream;
mod exits;
mod oci_class;
mod recover;
mod resize;

pub use oci_class::OciOptions;
pub use recover::SandboxView;

use crate::config::{self, PodVolumeKind};
use crate::shim::client::ShimClient;
use crate::shim::protocol::{ExitRecord, InstanceState, Request, Response, layout};
use crate::shim::safe_path::{self, Create};
use crate::{
    ContainerExit, ExecRequest, ExecResult, ExecSession, InstanceId, PodPaths, Runtime,
    RuntimeError, RuntimeEvent, SandboxError, SandboxState, StartError, StartRequest, Started,
};
use exits::{Live, Watch, forward_exits};
use k8s_openapi::api::core::v1::Pod;
use std::io;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Once, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// How long a new shim may take to answer on its socket.
const SHIM_START_TIMEOUT: Duration = Duration::from_secs(10);
/// How long `remove_sandbox` waits for the shim to exit after `Shutdown` before it kills the
/// containers still running (exits in flight are recorded well within it).
const SHIM_STOP_GRACE: Duration = Duration::from_secs(1);
/// How long `remove_sandbox` waits for the shim to exit in all.
const SHIM_STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// `termination_message`: the last bytes of the file.
const TERMINATION_MESSAGE_LIMIT: u64 = 4096;

/// The process runtime (cheap to clone).
#[derive(Debug, Clone)]
pub struct ProcessRuntime {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    state_dir: PathBuf,
    shim_exe: PathBuf,
    /// The `oci` class, when images can be run.
    oci: Option<oci_class::OciClass>,
    /// The class of pods without `runtimeClassName`.
    default_class: RuntimeClass,
    /// A shim started ahead of the next pod ([`crate::shim::spare`]), kept while sandboxes
    /// are made ahead (the `oci` class's pool) on a node whose pods are `oci` by default.
    spare: Mutex<Option<SpareShim>>,
    /// Whether spares are kept (cleared when the warm sandboxes are released).
    spares: std::sync::atomic::AtomicBool,
}

/// A spare shim: its pid and the pipe it waits on.
#[derive(Debug)]
struct SpareShim {
    pid: u32,
    /// The agent's end of the spare's standard input, where it is handed its pod.
    channel: std::os::unix::net::UnixStream,
}

/// How a pod's containers run (its `runtimeClassName`, the RuntimeClass's handler).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeClass {
    /// Host processes sharing the host's network (`image` is a label).
    Process,
    /// OCI containers from images, run by runc, in a pod sandbox with its own network.
    Oci,
}

impl RuntimeClass {
    /// Every class, as the RuntimeClass objects of this node.
    pub const ALL: [RuntimeClass; 2] = [RuntimeClass::Oci, RuntimeClass::Process];

    /// The RuntimeClass name (and handler): `process` or `oci`.
    pub fn name(self) -> &'static str {
        match self {
            RuntimeClass::Process => "process",
            RuntimeClass::Oci => "oci",
        }
    }

    /// The class of that name.
    pub fn from_name(name: &str) -> Option<RuntimeClass> {
        match name {
            "process" => Some(RuntimeClass::Process),
            "oci" => Some(RuntimeClass::Oci),
            _ => None,
        }
    }
}

/// One pod's sandbox: its directories and its shim.
#[derive(Debug)]
pub struct ProcessSandbox {
    paths: PodPaths,
    /// An `oci` pod's network (its namespaces, address and `/etc` files).
    network: Option<oci_class::PodNetwork>,
    client: ShimClient,
    shim_pid: u32,
    watch: Arc<Watch>,
    forwarder: tokio::task::JoinHandle<()>,
}

impl Drop for ProcessSandbox {
    fn drop(&mut self) {
        self.forwarder.abort();
    }
}

impl ProcessSandbox {
    /// The pod's directories.
    pub fn paths(&self) -> &PodPaths {
        &self.paths
    }

    /// The shim's pid.
    pub fn shim_pid(&self) -> u32 {
        self.shim_pid
    }

    /// The shim client.
    pub fn client(&self) -> &ShimClient {
        &self.client
    }

    /// Every instance the shim knows (for re-adoption after an agent restart).
    pub async fn state(&self) -> Result<Vec<InstanceState>, RuntimeError> {
        Ok(self.client.state().await?.1)
    }
}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> RuntimeError {
    let what = what.into();
    move |source| RuntimeError::Io { what, source }
}

impl ProcessRuntime {
    /// A runtime keeping its files under `state_dir`, starting `shim_exe shim ...` per pod.
    /// Makes this process a child subreaper and starts its reaper (once per process).
    pub fn new(state_dir: PathBuf, shim_exe: PathBuf) -> Result<Self, RuntimeError> {
        ProcessRuntime::with_classes(state_dir, shim_exe, None, RuntimeClass::Process)
    }

    /// [`ProcessRuntime::new`] that can also run pods of the `oci` class (with `oci`), and
    /// runs pods without `runtimeClassName` as `default_class`.
    pub fn with_classes(
        state_dir: PathBuf,
        shim_exe: PathBuf,
        oci: Option<OciOptions>,
        default_class: RuntimeClass,
    ) -> Result<Self, RuntimeError> {
        for dir in ["pods", "logs"] {
            let path = state_dir.join(dir);
            std::fs::create_dir_all(&path)
                .map_err(io_err(format!("creating {}", path.display())))?;
        }
        rustix::process::set_child_subreaper(Some(rustix::process::getpid())).map_err(|e| {
            RuntimeError::Io {
                what: "becoming a child subreaper".into(),
                source: e.into(),
            }
        })?;
        static REAPER: Once = Once::new();
        REAPER.call_once(|| {
            let started = std::thread::Builder::new()
                .name("podvisor-reaper".into())
                .stack_size(128 * 1024)
                .spawn(reap_foreign_sessions);
            if let Err(e) = started {
                tracing::error!("cannot start the shim reaper: {e}");
            }
        });
        let oci = match oci {
            Some(options) => Some(oci_class::OciClass::new(&state_dir, options)?),
            None if default_class == RuntimeClass::Oci => {
                return Err(RuntimeError::Other(
                    "the oci runtime class needs an image store".into(),
                ));
            }
            None => None,
        };
        // Pods run as `oci` by default: their sandboxes are made ahead from the start (else
        // from the first `oci` pod on).
        if let (Some(oci), RuntimeClass::Oci) = (&oci, default_class) {
            oci.warm();
        }
        // As the pool warms from the start only for an `oci` node: an agent whose pods are
        // host processes by default (`podvisor run` among them) keeps no spare shim.
        let spares = default_class == RuntimeClass::Oci
            && oci.as_ref().is_some_and(oci_class::OciClass::makes_ahead);
        let runtime = ProcessRuntime {
            inner: Arc::new(Inner {
                state_dir,
                shim_exe,
                oci,
                default_class,
                spare: Mutex::new(None),
                spares: std::sync::atomic::AtomicBool::new(spares),
            }),
        };
        runtime.refill_spare();
        Ok(runtime)
    }

    /// [`Runtime::start_container`] but for what is made again afterwards.
    async fn start_one(
        &self,
        sandbox: &ProcessSandbox,
        mut request: StartRequest,
    ) -> Result<Started, StartError> {
        let config_error = |message| StartError {
            reason: "CreateContainerConfigError".into(),
            message,
            created: false,
            pulling: false,
        };
        if sandbox.network.as_ref().is_some_and(|n| !n.host_network) {
            // A pod on the pod network reaches the API at the host's address there (the
            // host's loopback is out of its reach); none, no `KUBERNETES_SERVICE_*` variables.
            // Set in the request: the oci launch builds the environment from it too.
            request.objects.api_service = request.objects.api_service_pod_network.take();
        }
        let opts = config::BuildOptions {
            objects: request.objects.clone(),
            ..config::BuildOptions::default()
        };
        let begun = Instant::now();
        let oci = match (&sandbox.network, &self.inner.oci) {
            (Some(network), Some(oci)) => Some((network, oci)),
            _ => None,
        };
        // Host processes: `image` is a label, nothing is pulled.
        let build = if oci.is_some() {
            config::build_for_image
        } else {
            config::build_with
        };
        let mut config = build(
            &request.pod,
            &request.container,
            request.instance,
            request.restart_count,
            &sandbox.paths,
            &opts,
        )
        .map_err(config_error)?;
        let image = match oci {
            Some((network, oci)) => {
                let (launch, image) = oci
                    .launch(
                        &request,
                        &sandbox.paths,
                        network,
                        &container_id(&sandbox.paths, request.instance),
                    )
                    .await?;
                config.oci = Some(Box::new(launch));
                Some(image)
            }
            None => None,
        };
        if sandbox.watch.is_lost() {
            // The pod's next shim may already listen on the socket path.
            return Err(StartError {
                reason: "CreateContainerError".into(),
                message: "the pod sandbox is gone (its shim died)".into(),
                created: false,
                pulling: false,
            });
        }
        sandbox.watch.starting(
            request.instance,
            Live {
                name: config.name.clone(),
                pid: 0,
                started_at: String::new(),
                termination_message_host_path: config.termination_message_host_path.clone(),
                log_path: config.log_path.clone(),
            },
        );
        let start = Request::Start {
            instance: request.instance,
            config: Box::new(config),
        };
        let failed = |message: String| StartError {
            reason: "CreateContainerError".into(),
            message,
            created: false,
            pulling: false,
        };
        let prepared = begun.elapsed();
        let answer = sandbox.client.request(&start).await;
        tracing::debug!(
            container = %request.container.name,
            instance = request.instance,
            prepare_ms = prepared.as_secs_f64() * 1000.0,
            total_ms = begun.elapsed().as_secs_f64() * 1000.0,
            "start answered"
        );
        let running = match &answer {
            Ok(Response::Started {
                pid, started_at, ..
            }) => Some((*pid, started_at.as_str())),
            _ => None,
        };
        sandbox.watch.started(request.instance, running);
        if running.is_some() {
            let (paths, name) = (sandbox.paths.clone(), request.container.name.clone());
            let restart_count = request.restart_count;
            tokio::task::spawn_blocking(move || {
                prune_dead_instances(&paths, &name, restart_count);
            });
        }
        match answer {
            Ok(Response::Started {
                pid,
                started_at,
                user,
            }) => Ok(Started {
                user,
                container_id: container_id(&sandbox.paths, request.instance),
                pid,
                started_at: timestamp(&started_at),
                image: image.as_ref().map(|(report, _)| *report),
                image_id: image.map(|(_, id)| id).unwrap_or_default(),
            }),
            Ok(Response::StartFailed {
                reason,
                message,
                created,
            }) => Err(StartError {
                reason,
                message,
                created,
                pulling: false,
            }),
            Ok(Response::Error { message }) => Err(failed(message)),
            Ok(other) => Err(failed(format!(
                "unexpected answer from the shim: {other:?}"
            ))),
            Err(e) => Err(failed(e.to_string())),
        }
    }

    /// Makes again, in the background, what pods take from what is made ahead: the spare
    /// shim and the `oci` class's warm sandboxes.
    fn refill_ahead(&self) {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return self.refill_now();
        };
        let runtime = self.clone();
        handle.spawn(async move {
            // Not before the agent has reported the start (its status write and the
            // watches' events take a millisecond or two).
            tokio::time::sleep(REFILL_DELAY).await;
            runtime.refill_now();
        });
    }

    fn refill_now(&self) {
        self.refill_spare();
        if let Some(oci) = &self.inner.oci {
            oci.refill();
        }
    }

    /// Starts a spare shim in the background if spares are kept and there is none.
    fn refill_spare(&self) {
        use std::sync::atomic::Ordering;
        if !self.inner.spares.load(Ordering::SeqCst) {
            return;
        }
        let inner = Arc::clone(&self.inner);
        let started = std::thread::Builder::new()
            .name("spare-shim".into())
            .stack_size(128 * 1024)
            .spawn(move || {
                let mut slot = inner.spare.lock().unwrap_or_else(PoisonError::into_inner);
                if slot.is_some() || !inner.spares.load(Ordering::SeqCst) {
                    return;
                }
                let youki_ahead = inner
                    .oci
                    .as_ref()
                    .is_some_and(|oci| oci.keeps_helper_ahead());
                let (mut command, channel) =
                    match crate::shim::spare::command(&inner.shim_exe, youki_ahead) {
                        Ok(made) => made,
                        Err(e) => return tracing::warn!("starting a spare shim: {e}"),
                    };
                let mut shims = spawned_shims();
                match command.spawn() {
                    Ok(child) => {
                        // The reaper collects it when it exits (never `wait` here).
                        shims.insert(child.id().cast_signed());
                        *slot = Some(SpareShim {
                            pid: child.id(),
                            channel,
                        });
                    }
                    Err(e) => tracing::warn!("starting a spare shim: {e}"),
                }
            });
        if let Err(e) = started {
            tracing::warn!("starting a spare shim: {e}");
        }
    }

    /// Releases the pod sandboxes made ahead of their pods (`OciOptions::warm_sandboxes`):
    /// for an agent that stops. The next one would release them too.
    pub async fn release_warm_sandboxes(&self) {
        self.inner
            .spares
            .store(false, std::sync::atomic::Ordering::SeqCst);
        // Its pipe closed, the spare exits.
        drop(
            self.inner
                .spare
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
        if let Some(oci) = &self.inner.oci {
            oci.release_warm().await;
        }
    }

    /// The host's address on the network of `oci` pods (the CNI bridge's gateway), where
    /// they reach the node: `None` without the `oci` class, or when the network's
    /// configuration does not tell it ([`crate::sandbox::cni::host_address`]).
    #[must_use]
    pub fn pod_network_host_address(&self) -> Option<std::net::IpAddr> {
        self.inner
            .oci
            .as_ref()
            .and_then(oci_class::OciClass::host_address)
    }

    /// The class `pod` runs as: its `runtimeClassName`, else the default.
    ///
    /// # Errors
    ///
    /// A class this runtime does not have, worded as containerd words an unknown handler.
    pub fn class_of(&self, pod: &Pod) -> Result<RuntimeClass, SandboxError> {
        let name = pod
            .spec
            .as_ref()
            .and_then(|s| s.runtime_class_name.as_deref())
            .filter(|n| !n.is_empty());
        let class = match name {
            None => self.inner.default_class,
            Some(name) => RuntimeClass::from_name(name).ok_or_else(|| {
                sandbox_failed(format!(
                    "rpc error: code = Unknown desc = failed to get sandbox runtime: no runtime \
                     for \"{name}\" is configured"
                ))
            })?,
        };
        self.available(class)
    }

    /// `class`, if this runtime has it.
    fn available(&self, class: RuntimeClass) -> Result<RuntimeClass, SandboxError> {
        if class == RuntimeClass::Oci && self.inner.oci.is_none() {
            return Err(sandbox_failed(
                "rpc error: code = Unknown desc = failed to get sandbox runtime: no runtime for \
                 \"oci\" is configured (start podvisor with --runtime oci)",
            ));
        }
        Ok(class)
    }

    /// Where a pod's files live.
    pub fn pod_paths(&self, pod: &Pod) -> Option<PodPaths> {
        let meta = &pod.metadata;
        let uid = meta.uid.as_deref().filter(|u| !u.is_empty())?;
        let ns = meta.namespace.as_deref().unwrap_or("default");
        let name = meta.name.as_deref().unwrap_or_default();
        Some(PodPaths {
            pod_dir: self.inner.state_dir.join("pods").join(uid),
            log_dir: self
                .inner
                .state_dir
                .join("logs")
                .join(format!("{ns}_{name}_{uid}")),
        })
    }

    /// Makes the pod's directories and volumes and starts its shim, waiting until it answers
    /// (a shim that does not is killed).
    async fn start_shim(
        &self,
        pod: &Pod,
        paths: &PodPaths,
        socket: &Path,
        youki_ahead: bool,
    ) -> Result<(ShimClient, u32), SandboxError> {
        for dir in [&paths.pod_dir, &paths.log_dir] {
            std::fs::create_dir_all(dir)
                .map_err(|e| sandbox_failed(format!("mkdir {}: {e}", dir.display())))?;
        }
        prepare_volumes(pod, paths)?;
        let (pid, spare) = self
            .spawn_shim(&paths.pod_dir, socket, youki_ahead)
            .map_err(|e| sandbox_failed(format!("starting the shim: {e}")))?;
        if spare {
            // Handed its socket listening: it answers (from the backlog, once it accepts).
            return Ok((ShimClient::answering(socket), pid));
        }
        let answered = wait_for_shim(socket, &paths.pod_dir, pid).await;
        if answered.is_err()
            && let Some(pgid) = i32::try_from(pid)
                .ok()
                .and_then(rustix::process::Pid::from_raw)
        {
            // Its own session and process group (setsid): it and whatever it started.
            let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
        }
        answered.map(|client| (client, pid))
    }

    /// Removes the log directory of pod `uid` (`<ns>_<name>_<uid>`), once its object is gone
    /// (the kubelet's container GC removes the logs of pods that no longer exist).
    pub fn remove_pod_logs(&self, uid: &str) {
        for (owner, dir) in self.log_dirs() {
            if owner == uid
                && let Err(e) = std::fs::remove_dir_all(&dir)
                && e.kind() != io::ErrorKind::NotFound
            {
                tracing::warn!("removing {}: {e}", dir.display());
            }
        }
    }

    /// The pod UIDs that have a log directory, each with it.
    pub fn log_dirs(&self) -> Vec<(String, PathBuf)> {
        std::fs::read_dir(self.inner.state_dir.join("logs"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                // `<ns>_<name>_<uid>`: neither a namespace nor a name holds `_`.
                let uid = name.rsplit('_').next()?.to_owned();
                Some((uid, e.path()))
            })
            .collect()
    }

    /// Hands the spare shim the pod (`true`: the shim's socket listens already), or starts a
    /// shim for it (`false`: it makes its socket as it starts); `youki_ahead`: its OCI
    /// containers are youki's helper's, which the shim keeps started ahead.
    fn spawn_shim(
        &self,
        pod_dir: &Path,
        socket: &Path,
        youki_ahead: bool,
    ) -> io::Result<(u32, bool)> {
        let shim_dir = layout::shim_dir(pod_dir);
        std::fs::create_dir_all(&shim_dir)?;
        let spare = self
            .inner
            .spare
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(SpareShim { pid, channel }) = spare {
            // The next spare comes once this pod's first container is started (see
            // `start_container`), not beside its start on the node's few cores.
            match crate::shim::spare::hand_over(channel, pod_dir, socket, youki_ahead) {
                Ok(()) => return Ok((pid, true)),
                Err(e) => tracing::debug!("the spare shim {pid} is gone ({e}): starting one"),
            }
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(layout::shim_log(pod_dir))?;
        let mut command = std::process::Command::new(&self.inner.shim_exe);
        command
            .arg("shim")
            .arg("--pod-dir")
            .arg(pod_dir)
            .arg("--socket")
            .arg(socket)
            .args(youki_ahead.then_some(crate::shim::server::YOUKI_AHEAD))
            .stdin(std::process::Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        // No `pre_exec`: std then spawns with `posix_spawn` (a vfork), so the child holds
        // copies of this process's descriptors (the store's, the state lock's: all
        // close-on-exec) only for the moment until its exec, and no copy of its memory. A
        // fork would leave them to a child that outlives a SIGKILLed agent for as long as its
        // exec takes, and the next `serve` would find the state locked. The shim detaches
        // itself (`setsid`) and closes what it inherited (see `shim::server`).
        let mut shims = spawned_shims();
        let child = command.spawn()?;
        // The reaper collects it when it exits (never `wait` here), even before its `setsid`.
        shims.insert(child.id().cast_signed());
        Ok((child.id(), false))
    }
}

/// Reaps zombie children of another session than ours: shims (which call `setsid`) and
/// whatever they leave re-parented to us. Children in our own session belong to whoever
/// spawned them (tokio, std) and are left alone.
/// The shims this process spawned, by pid, until reaped: one that dies before its `setsid` is
/// still in this process's session and reaped all the same. Held across the spawn, so the
/// reaper cannot look at a new shim before it is listed.
fn spawned_shims() -> std::sync::MutexGuard<'static, std::collections::HashSet<i32>> {
    static SHIMS: std::sync::OnceLock<Mutex<std::collections::HashSet<i32>>> =
        std::sync::OnceLock::new();
    SHIMS
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Whether `pid` is ours to reap: a process of another session than `own_sid` (a shim, or
/// what one left re-parented to us) or a shim we spawned. Forgets a shim it says yes to.
fn ours_to_reap(pid: i32, sid: Option<i32>, own_sid: i32) -> bool {
    let mut shims = spawned_shims();
    shims.remove(&pid) || sid.is_some_and(|sid| sid != own_sid)
}

fn reap_foreign_sessions() {
    // Inside a PID namespace whose session leader lives outside it, the session id reads
    // as 0 (rustix's typed `getsid` asserts it is positive), so ask libc for the raw value.
    // SAFETY: getsid(0) only reads this process's session id.
    #[allow(unsafe_code)]
    let own_sid = unsafe { libc::getsid(0) }.max(0);
    loop {
        // SAFETY: a zeroed siginfo_t is a valid out-parameter for waitid.
        #[allow(unsafe_code)]
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid with WNOWAIT only inspects; `info` is a valid out-parameter.
        #[allow(unsafe_code)]
        let rc =
            unsafe { libc::waitid(libc::P_ALL, 0, &raw mut info, libc::WEXITED | libc::WNOWAIT) };
        if rc < 0 {
            let err = io::Error::last_os_error();
            let pause = if err.raw_os_error() == Some(libc::EINTR) {
                0
            } else {
                200
            };
            std::thread::sleep(Duration::from_millis(pause));
            continue;
        }
        // SAFETY: waitid filled `info` for an exited child.
        #[allow(unsafe_code)]
        let pid = unsafe { info.si_pid() };
        if ours_to_reap(pid, session_of(pid), own_sid) {
            let _ = rustix::process::waitpid(
                rustix::process::Pid::from_raw(pid),
                rustix::process::WaitOptions::NOHANG,
            );
        } else {
            // Someone else's child: give its owner time, and collect ours behind it.
            reap_scan(own_sid);
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The session of a process (zombies included), from `/proc/<pid>/stat`.
fn session_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    // state ppid pgrp session
    rest.split_whitespace().nth(3)?.parse().ok()
}

fn reap_scan(own_sid: i32) {
    let me = std::process::id().cast_signed();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        let (Some(&"Z"), Some(ppid), Some(sid)) = (fields.first(), fields.get(1), fields.get(3))
        else {
            continue;
        };
        if ppid.parse() == Ok(me) && ours_to_reap(pid, sid.parse::<i32>().ok(), own_sid) {
            let _ = rustix::process::waitpid(
                rustix::process::Pid::from_raw(pid),
                rustix::process::WaitOptions::NOHANG,
            );
        }
    }
}

/// `MountVolume.SetUp failed`, the kubelet's words.
fn failed_mount(volume: &str, message: impl std::fmt::Display) -> SandboxError {
    SandboxError {
        reason: "FailedMount",
        message: format!("MountVolume.SetUp failed for volume \"{volume}\" : {message}"),
    }
}

fn sandbox_failed(message: impl std::fmt::Display) -> SandboxError {
    SandboxError {
        reason: "FailedCreatePodSandBox",
        message: format!("Failed to create pod sandbox: {message}"),
    }
}

/// The kubelet's `hostPath.type` checks (`checkTypeInternal`).
fn check_host_path(path: &Path, type_: &str) -> Result<(), String> {
    let shown = path.display();
    let meta = std::fs::metadata(path);
    let exists = meta.is_ok();
    let is = |f: fn(&std::fs::Metadata) -> bool| meta.as_ref().is_ok_and(f);
    let fail = |what: &str| Err(format!("hostPath type check failed: {shown} is not {what}"));
    match type_ {
        "" => Ok(()),
        // Created as a container's mount target is: never through a symbolic link a
        // container could have planted on the way (CVE-2021-25741's pattern).
        "DirectoryOrCreate" if !exists => create_host_path(path, Create::Dirs)
            .map_err(|e| format!("mkdir {shown}: {}", safe_path::describe(&e))),
        "DirectoryOrCreate" | "Directory" if is(std::fs::Metadata::is_dir) => Ok(()),
        "DirectoryOrCreate" | "Directory" => fail("a directory"),
        "FileOrCreate" if !exists => create_host_path(path, Create::File)
            .map_err(|e| format!("open {shown}: {}", safe_path::describe(&e))),
        "FileOrCreate" | "File" if is(std::fs::Metadata::is_file) => Ok(()),
        "FileOrCreate" | "File" => fail("a file"),
        "Socket" if is(|m| m.file_type().is_socket()) => Ok(()),
        "Socket" => fail("a socket file"),
        "CharDevice" if is(|m| m.file_type().is_char_device()) => Ok(()),
        "CharDevice" => fail("a character device"),
        "BlockDevice" if is(|m| m.file_type().is_block_device()) => Ok(()),
        "BlockDevice" => fail("a block device"),
        other => Err(format!("{other} is an invalid volume type")),
    }
}

/// Creates a `hostPath` (0755 directories, or a 0644 file last) as the shim creates mount
/// targets ([`safe_path::open_host_path`]).
fn create_host_path(path: &Path, create: Create) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let rootless = !rustix::process::geteuid().is_root();
    safe_path::open_host_path(&path, create, rootless, None).map(drop)
}

fn prepare_volumes(pod: &Pod, paths: &PodPaths) -> Result<(), SandboxError> {
    for volume in config::pod_volumes(pod, paths, &config::BuildOptions::default()) {
        match &volume.kind {
            PodVolumeKind::EmptyDir | PodVolumeKind::MemoryEmptyDir { .. } => {
                // emptyDirs are world-writable, as the kubelet makes them.
                std::fs::create_dir_all(&volume.path)
                    .and_then(|()| {
                        std::fs::set_permissions(
                            &volume.path,
                            std::fs::Permissions::from_mode(0o777),
                        )
                    })
                    .map_err(|e| {
                        failed_mount(
                            &volume.name,
                            format!("mkdir {}: {e}", volume.path.display()),
                        )
                    })?;
            }
            PodVolumeKind::HostPath { type_ } => {
                check_host_path(&volume.path, type_).map_err(|m| failed_mount(&volume.name, m))?;
            }
            PodVolumeKind::ConfigMap | PodVolumeKind::Secret | PodVolumeKind::Projected => {
                let secret = volume.kind != PodVolumeKind::ConfigMap;
                make_projected_dir(&volume.path, secret)
                    .map_err(|m| failed_mount(&volume.name, m))?;
            }
            PodVolumeKind::Unsupported { source } => {
                return Err(failed_mount(
                    &volume.name,
                    format!("{source} volumes are not supported by the process runtime"),
                ));
            }
        }
    }
    Ok(())
}

/// The directory of a `configMap` or `secret` volume; a secret's is a tmpfs mounted in the
/// node's mount namespace, which each shim's namespace copies (the kubelet keeps secrets in
/// memory the same way). Idempotent: an adopted sandbox keeps its mount.
fn make_projected_dir(path: &Path, secret: bool) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    std::fs::create_dir_all(path).map_err(|e| format!("mkdir {}: {e}", path.display()))?;
    if !secret {
        return std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| format!("chmod {}: {e}", path.display()));
    }
    let parent_dev = path
        .parent()
        .and_then(|p| std::fs::metadata(p).ok())
        .map(|m| m.dev());
    let dev = std::fs::metadata(path).map(|m| m.dev()).ok();
    if dev.is_some() && dev != parent_dev {
        return Ok(());
    }
    crate::sandbox::pods_mount::mounting(|| {
        rustix::mount::mount(
            "tmpfs",
            path,
            "tmpfs",
            rustix::mount::MountFlags::NOSUID | rustix::mount::MountFlags::NODEV,
            Some(c"mode=0755"),
        )
    })
    .map_err(|e| format!("mount tmpfs at {}: {e}", path.display()))
}

/// Detaches the tmpfs of each `secret` volume of a pod directory before it is removed.
pub(crate) fn unmount_volumes(pod_dir: &Path) {
    let Ok(entries) = std::fs::read_dir(pod_dir.join("volumes")) else {
        return;
    };
    for e in entries.flatten() {
        // Not a mount point: EINVAL, nothing to do.
        let _ = rustix::mount::unmount(e.path(), rustix::mount::UnmountFlags::DETACH);
    }
}

/// The last `limit` bytes of a file, if it has any.
fn read_tail(path: &Path, limit: u64) -> Option<String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    if len == 0 {
        return None;
    }
    file.seek(SeekFrom::Start(len.saturating_sub(limit))).ok()?;
    let mut buf = Vec::new();
    file.read_to_end(&mut buf).ok()?;
    Some(String::from_utf8_lossy(&buf).into_owned())
}

fn timestamp(text: &str) -> jiff::Timestamp {
    text.parse().unwrap_or_else(|_| jiff::Timestamp::now())
}

/// The runtime's view of a journaled exit.
fn container_exit(record: &ExitRecord) -> ContainerExit {
    let log_tail = crate::logs::tail(&record.log_path, 80, 2048);
    ContainerExit {
        exit_code: record.exit_code,
        signal: record.signal,
        oom_killed: record.oom_killed,
        started_at: timestamp(&record.started_at),
        finished_at: timestamp(&record.finished_at),
        termination_message: read_tail(
            &record.termination_message_host_path,
            TERMINATION_MESSAGE_LIMIT,
        ),
        log_tail: (!log_tail.is_empty()).then_some(log_tail),
    }
}

/// M13, the kubelet's container GC (`MaxPerPodContainer` 1): once an instance of `container`
/// runs, only it and the newest dead one (what `lastState` and `logs --previous` show) keep their
/// log files (`<restartCount>.log` and its rotated files) and instance directories (termination-message files).
fn prune_dead_instances(paths: &PodPaths, container: &str, restart_count: i32) {
    let numbered = |dir: &Path, suffix: &str| -> Vec<(u64, PathBuf)> {
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let name = e.file_name();
                let n = name.to_str()?.strip_suffix(suffix)?.parse().ok()?;
                Some((n, e.path()))
            })
            .collect()
    };
    let keep_from = u64::try_from(restart_count.saturating_sub(1)).unwrap_or(0);
    // An instance's log with its rotated files (`<n>.log.<time>[.gz]`), as the kubelet's
    // container log manager's `Clean` removes `<logPath>*`.
    let logs = std::fs::read_dir(paths.log_dir.join(container))
        .into_iter()
        .flatten()
        .flatten();
    for log in logs {
        let name = log.file_name();
        let attempt = name.to_str().and_then(|name| {
            let (n, rest) = name.split_once(".log")?;
            (rest.is_empty() || rest.starts_with('.')).then(|| n.parse::<u64>().ok())?
        });
        if attempt.is_some_and(|n| n < keep_from) {
            let _ = std::fs::remove_file(log.path());
        }
    }
    let mut instances = numbered(&paths.pod_dir.join("containers").join(container), "");
    instances.sort_unstable();
    let old = instances.len().saturating_sub(2);
    for (_, dir) in instances.into_iter().take(old) {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// `podvisor://` + 64 hex digits, unique per pod and instance.
fn container_id(paths: &PodPaths, instance: InstanceId) -> String {
    let uid: String = paths
        .pod_dir
        .file_name()
        .and_then(|s| s.to_str())
        .unwrap_or_default()
        .chars()
        .filter(char::is_ascii_hexdigit)
        .collect();
    format!("podvisor://{uid:0>32.32}{instance:032x}")
}

/// How often `wait_for_shim` tries the socket: a new shim answers within a few milliseconds,
/// so every 200 µs for the first 200 ms (a failed connect costs microseconds), then every 5 ms.
/// How long after a start what it took from what is made ahead is made again.
const REFILL_DELAY: Duration = Duration::from_millis(5);
const SHIM_POLL_FINE: Duration = Duration::from_micros(200);
const SHIM_POLL_FINE_FOR: Duration = Duration::from_millis(200);
const SHIM_POLL_SLOW: Duration = Duration::from_millis(5);

/// Waits until a shim answers on `socket` (or the deadline passes).
async fn wait_for_shim(
    socket: &Path,
    pod_dir: &Path,
    shim_pid: u32,
) -> Result<ShimClient, SandboxError> {
    let start = Instant::now();
    let deadline = start + SHIM_START_TIMEOUT;
    // The fine steps on a blocking thread: tokio's timer rounds each sleep up to a whole
    // millisecond, which a pod's start would wait out.
    let fine = {
        let socket = socket.to_owned();
        tokio::task::spawn_blocking(move || {
            while start.elapsed() < SHIM_POLL_FINE_FOR {
                if std::os::unix::net::UnixStream::connect(&socket).is_ok() {
                    return true;
                }
                if !process_alive(shim_pid) {
                    return false;
                }
                std::thread::sleep(SHIM_POLL_FINE);
            }
            false
        })
    };
    if matches!(fine.await, Ok(true)) {
        // It accepted a connection: no second one to check.
        return Ok(ShimClient::answering(socket));
    }
    loop {
        if let Ok(client) = ShimClient::connect(socket).await {
            return Ok(client);
        }
        let exited = !process_alive(shim_pid);
        if exited || Instant::now() > deadline {
            let log = read_tail(&layout::shim_log(pod_dir), 1024).unwrap_or_default();
            let what = if exited {
                "exited".to_owned()
            } else {
                format!(
                    "did not answer on {} within {SHIM_START_TIMEOUT:?}",
                    socket.display()
                )
            };
            return Err(sandbox_failed(format!("the shim {what}: {}", log.trim())));
        }
        tokio::time::sleep(SHIM_POLL_SLOW).await;
    }
}

impl Runtime for ProcessRuntime {
    type Sandbox = ProcessSandbox;

    async fn create_sandbox(
        &self,
        pod: &Pod,
        events: mpsc::UnboundedSender<RuntimeEvent>,
    ) -> Result<ProcessSandbox, SandboxError> {
        let paths = self
            .pod_paths(pod)
            .ok_or_else(|| sandbox_failed("the pod has no metadata.uid"))?;
        // The class the pod's sandbox was made as, else (a new pod) its class now, recorded:
        // `--runtime` applies to new pods only.
        let class = match class_record::recorded(&paths.pod_dir) {
            Some(class) => self.available(class)?,
            None => {
                let class = self.class_of(pod)?;
                class_record::record(&paths.pod_dir, class).map_err(|e| {
                    sandbox_failed(format!("recording the pod's runtime class: {e}"))
                })?;
                class
            }
        };
        let socket = layout::socket(&paths.pod_dir);
        let begun = Instant::now();
        // An `oci` pod's namespaces come first: the shim's mount namespace copies the
        // agent's when it starts (a re-adopted sandbox's network is read back).
        let network = match (class, &self.inner.oci) {
            (RuntimeClass::Oci, Some(oci)) => Some(oci.create_network(pod, &paths).await?),
            _ => {
                warn_host_processes();
                None
            }
        };
        let networked = begun.elapsed();
        // A shim started here on a pod directory no shim ever served has nothing to tell yet:
        // no instances, no exits.
        let mut fresh_shim = None;
        let client = match ShimClient::connect(&socket).await {
            // Re-adoption: the pod's shim survived an agent restart.
            Ok(client) => client,
            Err(_) => {
                // The containers of a shim that died (a lost sandbox) are dead too: what runc
                // still has of them goes, with any process left in them. Never while the
                // shim lives (a socket that did not answer in time).
                let shim_alive = std::fs::read_to_string(layout::pid_file(&paths.pod_dir))
                    .ok()
                    .and_then(|pid| pid.trim().parse::<u32>().ok())
                    .is_some_and(process_alive);
                if let (RuntimeClass::Oci, Some(oci), false) = (class, &self.inner.oci, shim_alive)
                {
                    oci.remove_dead_containers(&paths, &self.inner.shim_exe)
                        .await;
                }
                let created_logs = !paths.log_dir.exists();
                let had_journal = layout::journal(&paths.pod_dir).exists();
                let youki_ahead = class == RuntimeClass::Oci
                    && self
                        .inner
                        .oci
                        .as_ref()
                        .is_some_and(|oci| oci.keeps_helper_ahead());
                let started = self.start_shim(pod, &paths, &socket, youki_ahead).await;
                match started {
                    Ok((client, pid)) => {
                        if !had_journal {
                            fresh_shim = Some(pid);
                        }
                        client
                    }
                    Err(e) => {
                        if let (Some(network), Some(oci)) = (&network, &self.inner.oci) {
                            oci.remove_network(network).await;
                        }
                        // Nothing of a sandbox that never came up stays behind (the agent
                        // retries, and a pod deleted meanwhile never gets a removal).
                        unmount_volumes(&paths.pod_dir);
                        let _ = std::fs::remove_dir_all(&paths.pod_dir);
                        if created_logs {
                            let _ = std::fs::remove_dir_all(&paths.log_dir);
                        }
                        return Err(e);
                    }
                }
            }
        };
        let shim_up = begun.elapsed();
        let (shim_pid, instances, exits) = match fresh_shim {
            // Its subscription is made by the forwarder, beside the pod's first start: an exit
            // that comes before it is sent first when it comes.
            Some(pid) => (pid, Vec::new(), None),
            // Both at once: an exit that comes between them is in the subscription either way
            // (unacknowledged exits are sent first), and may be in the state too, as an exit
            // of an earlier shim always is.
            None => {
                let (state, exits) = tokio::join!(client.state(), client.subscribe());
                let (shim_pid, instances) =
                    state.map_err(|e| sandbox_failed(format!("asking the shim its state: {e}")))?;
                let exits =
                    exits.map_err(|e| sandbox_failed(format!("subscribing to exits: {e}")))?;
                (shim_pid, instances, Some(exits))
            }
        };
        tracing::debug!(
            pod = %paths.pod_dir.display(),
            network_ms = networked.as_secs_f64() * 1000.0,
            shim_up_ms = shim_up.as_secs_f64() * 1000.0,
            total_ms = begun.elapsed().as_secs_f64() * 1000.0,
            "sandbox made"
        );
        let watch = Arc::new(Watch::new(paths.clone(), shim_pid, &instances));
        let forwarder = tokio::spawn(forward_exits(
            client.clone(),
            exits,
            events,
            Arc::clone(&watch),
        ));
        Ok(ProcessSandbox {
            paths,
            network,
            client,
            shim_pid,
            watch,
            forwarder,
        })
    }

    async fn start_container(
        &self,
        sandbox: &ProcessSandbox,
        request: StartRequest,
    ) -> Result<Started, StartError> {
        let started = self.start_one(sandbox, request).await;
        // What a pod's start used up is made again once it is done, not beside it on the
        // node's few cores.
        self.refill_ahead();
        started
    }

    async fn signal(
        &self,
        sandbox: &ProcessSandbox,
        instance: InstanceId,
        signal: i32,
    ) -> Result<(), RuntimeError> {
        let request = if signal == libc::SIGKILL {
            Request::Kill { instance }
        } else {
            Request::Signal { instance, signal }
        };
        sandbox.client.expect_ok(&request).await
    }

    async fn exec(
        &self,
        sandbox: &ProcessSandbox,
        instance: InstanceId,
        argv: Vec<String>,
        timeout: Option<Duration>,
    ) -> Result<ExecResult, RuntimeError> {
        let timeout_ms = timeout.map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX));
        let request = Request::Exec {
            instance,
            argv,
            timeout_ms,
        };
        match sandbox.client.request(&request).await? {
            Response::Exec {
                exit_code,
                mut output,
                stderr,
                timed_out,
            } => {
                output.extend_from_slice(&stderr);
                Ok(ExecResult {
                    exit_code,
                    output,
                    stderr,
                    timed_out,
                })
            }
            Response::NotFound { instance } => Err(RuntimeError::NotFound(instance)),
            Response::Error { message } => Err(RuntimeError::Other(message)),
            other => Err(RuntimeError::Shim(format!("unexpected answer {other:?}"))),
        }
    }

    async fn exec_stream(
        &self,
        sandbox: &ProcessSandbox,
        instance: InstanceId,
        request: ExecRequest,
    ) -> Result<ExecSession, RuntimeError> {
        if request.attach {
            let shim_request = Request::Attach {
                instance,
                stdin: request.stdin,
                stdout: request.stdout,
                stderr: request.stderr,
                tty: request.tty,
            };
            let started = sandbox.client.exec_stream(&shim_request).await?;
            return exec_stream::attach_session(&request, started);
        }
        let shim_request = Request::ExecStream {
            instance,
            argv: request.argv.clone(),
            stdin: request.stdin,
            stdout: request.stdout,
            stderr: request.stderr,
            tty: request.tty,
            size: request.size.map(|s| (s.width, s.height)),
        };
        let started = sandbox.client.exec_stream(&shim_request).await?;
        exec_stream::session(&request, started)
    }

    async fn port_forward(
        &self,
        sandbox: &ProcessSandbox,
        port: u16,
    ) -> Result<tokio::net::TcpStream, RuntimeError> {
        // An oci pod with its own network: inside its namespace (containerd's way); the
        // process runtime's pods and `hostNetwork` ones share the host's.
        let netns = sandbox.network.as_ref().and_then(|n| {
            n.namespace(crate::sandbox::netns::NsKind::Net)
                .map(|path| (path, n.cni_id.clone()))
        });
        match netns {
            Some((path, id)) => crate::portforward::dial_localhost(Some(path), id, port).await,
            None => crate::portforward::dial_localhost(None, String::new(), port).await,
        }
    }

    async fn update_container_resources(
        &self,
        sandbox: &ProcessSandbox,
        instance: InstanceId,
        name: &str,
        resources: k8s_openapi::api::core::v1::ResourceRequirements,
    ) -> Result<k8s_openapi::api::core::v1::ResourceRequirements, RuntimeError> {
        let uid = sandbox
            .paths
            .pod_dir
            .file_name()
            .and_then(|u| u.to_str())
            .unwrap_or_default()
            .to_owned();
        let (name, values) = (name.to_owned(), resize::cgroup_values(&resources));
        tokio::task::spawn_blocking(move || resize::apply(&uid, &name, instance, &values))
            .await
            .map_err(|e| RuntimeError::Other(format!("updating container resources: {e}")))??;
        Ok(resources)
    }

    fn pod_ip(&self, sandbox: &ProcessSandbox) -> String {
        match sandbox.network.as_ref().and_then(|n| n.ip) {
            Some(ip) => ip.to_string(),
            None => config::DEFAULT_IP.to_owned(),
        }
    }

    async fn garbage_collect_images(
        &self,
        policy: crate::ImageGcPolicy,
    ) -> Result<crate::ImageGcOutcome, RuntimeError> {
        match &self.inner.oci {
            Some(oci) => oci.garbage_collect_images(policy).await,
            None => Ok(crate::ImageGcOutcome::default()),
        }
    }

    async fn set_up_volumes(
        &self,
        sandbox: &ProcessSandbox,
        pod: &Pod,
        objects: &config::objects::PodObjects,
    ) -> Result<(), crate::VolumeError> {
        let node = config::NodeAllocatable::of_this_machine();
        let volumes = config::projection::projected_volumes(pod, objects, node);
        if volumes.is_empty() {
            return Ok(());
        }
        let fs_group = config::projection::fs_group_of(pod);
        let root = sandbox.paths.pod_dir.join("volumes");
        tokio::task::spawn_blocking(move || {
            for v in volumes {
                let fail = |message: String| crate::VolumeError {
                    volume: v.name.clone(),
                    message,
                };
                let payload = v.payload.clone().map_err(fail)?;
                let dir = root.join(&v.name);
                make_projected_dir(&dir, v.secret).map_err(fail)?;
                atomic_writer::write(&dir, &payload, fs_group).map_err(fail)?;
            }
            Ok(())
        })
        .await
        .map_err(|e| crate::VolumeError {
            volume: String::new(),
            message: format!("volume task failed: {e}"),
        })?
    }

    async fn remove_sandbox(&self, sandbox: &ProcessSandbox) -> Result<(), RuntimeError> {
        // A pod that took what was made ahead may never have started a container.
        self.refill_ahead();
        sandbox.watch.removing();
        sandbox.forwarder.abort();
        stop_shim(sandbox).await?;
        if let (Some(network), Some(oci)) = (&sandbox.network, &self.inner.oci) {
            oci.remove_network(network).await;
        }
        let pod_dir = sandbox.paths.pod_dir.clone();
        tokio::task::spawn_blocking(move || {
            unmount_volumes(&pod_dir);
            match std::fs::remove_dir_all(&pod_dir) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => Err(RuntimeError::Io {
                    what: format!("removing {}", pod_dir.display()),
                    source: e,
                }),
                _ => Ok(()),
            }
        })
        .await
        .map_err(|e| RuntimeError::Other(format!("removing the pod directory: {e}")))??;
        remove_pod_cgroups(&sandbox.paths);
        self.release_host_paths(&sandbox.paths).await
    }

    async fn list_sandboxes(&self) -> Vec<String> {
        let pods = self.inner.state_dir.join("pods");
        tokio::task::spawn_blocking(move || {
            std::fs::read_dir(pods)
                .into_iter()
                .flatten()
                .flatten()
                .filter(|e| e.path().is_dir())
                .filter_map(|e| e.file_name().into_string().ok())
                // The warm pool's directory is no pod's.
                .filter(|name| name != crate::sandbox::pool::POOL_DIR)
                .collect()
        })
        .await
        .unwrap_or_default()
    }

    async fn sandbox_state(&self, pod: &Pod) -> Result<SandboxState, RuntimeError> {
        let view = self.sandbox_view(pod).await?;
        let Some(paths) = self.pod_paths(pod) else {
            return Ok(SandboxState::Absent);
        };
        Ok(recover::sandbox_state(&paths, view))
    }

    async fn remove_dead_sandbox(&self, pod: &Pod) -> Result<(), RuntimeError> {
        self.remove_sandbox_remains(pod).await
    }

    fn pods_with_logs(&self) -> Vec<String> {
        self.log_dirs().into_iter().map(|(uid, _)| uid).collect()
    }

    async fn running_container_logs(&self) -> Vec<crate::ContainerLog> {
        self.running_logs().await
    }

    async fn reopen_container_log(&self, log: &crate::ContainerLog) -> Result<(), RuntimeError> {
        self.reopen_log(log).await
    }

    fn remove_pod_logs(&self, uid: &str) {
        ProcessRuntime::remove_pod_logs(self, uid);
    }

    fn pod_disk_usage(&self, uid: &str) -> Option<crate::PodDiskUsage> {
        let logs = self
            .log_dirs()
            .into_iter()
            .find_map(|(owner, dir)| (owner == uid).then_some(dir));
        let pod_dir = self.inner.state_dir.join("pods").join(uid);
        disk_usage::pod_disk_usage(logs.as_deref(), &pod_dir)
    }
}

impl ProcessRuntime {
    /// What the containers of the pod at `paths` created on the host goes, unless another pod
    /// still uses it.
    async fn release_host_paths(&self, paths: &PodPaths) -> Result<(), RuntimeError> {
        let Some(uid) = paths.pod_dir.file_name().and_then(|u| u.to_str()) else {
            return Ok(());
        };
        let registry = crate::host_paths::HostPaths::new(&self.inner.state_dir);
        let uid = uid.to_owned();
        tokio::task::spawn_blocking(move || registry.release(&uid))
            .await
            .map_err(|e| RuntimeError::Other(format!("removing host paths: {e}")))?
            .map_err(io_err("removing the paths made on the host"))
    }
}

/// Asks the shim to exit; kills what still runs if it takes too long.
async fn stop_shim(sandbox: &ProcessSandbox) -> Result<(), RuntimeError> {
    let client = &sandbox.client;
    if client.expect_ok(&Request::Shutdown).await.is_err() {
        return Ok(()); // Already gone.
    }
    let gone = || !process_alive(sandbox.shim_pid) || !client.socket().exists();
    let start = Instant::now();
    let mut killed = false;
    while !gone() {
        let waited = start.elapsed();
        if !killed && waited > SHIM_STOP_GRACE {
            // Containers still run (the agent should have stopped them): leave no process.
            killed = true;
            if let Ok((_, instances)) = client.state().await {
                for i in instances.iter().filter(|i| i.exit.is_none()) {
                    let _ = client
                        .expect_ok(&Request::Kill {
                            instance: i.instance,
                        })
                        .await;
                }
            }
        }
        if waited > SHIM_STOP_TIMEOUT {
            return Err(RuntimeError::Shim(format!(
                "shim {} did not exit after Shutdown",
                sandbox.shim_pid
            )));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(())
}

fn process_alive(pid: u32) -> bool {
    // A zombie (exited, not yet reaped) counts as gone.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| Some(s[s.rfind(')')? + 1..].split_whitespace().next()? != "Z"))
        .unwrap_or(false)
}

/// Removes the pod's cgroup parent (`podvisor/<uid>`) in every hierarchy, once the shim is
/// gone, with whatever container cgroups are still below it (a shim that died, a lost
/// sandbox's, exec cgroups): a process still in one is killed first. "Every hierarchy" is
/// every v1 hierarchy too (`cpu`, `cpuset`, `pids`, `name=systemd`, ...): an OCI runtime
/// makes the pod's directory in each, and removes only its container's.
fn remove_pod_cgroups(paths: &PodPaths) {
    let Some(uid) = paths.pod_dir.file_name().and_then(|u| u.to_str()) else {
        return;
    };
    let mode = crate::cgroup::detect();
    let parent = format!("podvisor/{uid}");
    let roots = cgroup_roots(&mode);
    let mut names: Vec<String> = roots
        .iter()
        .filter_map(|root| std::fs::read_dir(root.join(&parent)).ok())
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    names.dedup();
    for name in names {
        let Ok(cgroup) = crate::cgroup::ContainerCgroup::open(&mode, &parent, &name) else {
            continue;
        };
        if let Err(e) = cgroup.kill_all().and_then(|()| cgroup.remove()) {
            tracing::warn!("removing cgroup {parent}/{name}: {e}");
        }
    }
    let mut all = roots;
    all.extend(crate::cgroup::hierarchy_roots());
    all.sort();
    all.dedup();
    for root in all {
        let dir = root.join(&parent);
        if let Err(e) = crate::cgroup::remove_tree(&dir) {
            tracing::warn!("removing cgroup {}: {e}", dir.display());
        }
    }
}

/// Why this process cannot run pods, if it cannot: not root, and the cgroups podvisor
/// makes (`<root>/podvisor` of each hierarchy) are not delegated to its user. Said once at
/// start by `run` and `serve` (else every pod's sandbox would fail with `Permission denied`).
#[must_use]
pub fn privileges_problem() -> Option<String> {
    let uid = rustix::process::geteuid();
    if uid.is_root() {
        return None;
    }
    let mode = crate::cgroup::detect();
    let denied: Vec<String> = cgroup_roots(&mode)
        .into_iter()
        .map(|root| {
            let own = root.join("podvisor");
            if own.exists() { own } else { root }
        })
        .filter(|dir| rustix::fs::access(dir, rustix::fs::Access::WRITE_OK).is_err())
        .map(|dir| dir.display().to_string())
        .collect();
    if denied.is_empty() {
        return None;
    }
    Some(format!(
        "podvisor runs pods as root: it makes a cgroup, mount namespace and process group for \
         every container. This process runs as uid {}, and {} {} not writable (a cgroup \
         delegated to this user would do). Run it with sudo, e.g. `sudo \"$(command -v \
         podvisor)\" run FILE`, or from a checkout: `cargo build --release && sudo \
         target/release/podvisor run FILE`.",
        uid.as_raw(),
        denied.join(" and "),
        if denied.len() == 1 { "is" } else { "are" }
    ))
}

/// Says once per process that pods of the process class are host processes (they share the
/// host's filesystem, network and processes), when they run as root.
fn warn_host_processes() {
    static WARNED: Once = Once::new();
    if rustix::process::geteuid().is_root() {
        WARNED.call_once(|| {
            eprintln!(
                "podvisor: warning: pods of the process runtime are host processes running as \
                 root: they share this machine's filesystem, network and processes (the oci \
                 runtime isolates them: --runtime oci or runtimeClassName: oci)"
            );
        });
    }
}

/// The root of every hierarchy the cgroup mode uses.
fn cgroup_roots(mode: &crate::cgroup::CgroupMode) -> Vec<PathBuf> {
    match mode {
        crate::cgroup::CgroupMode::Unified { root, .. } => vec![root.clone()],
        crate::cgroup::CgroupMode::Hybrid {
            memory_root,
            unified,
        } => std::iter::once(memory_root.clone())
            .chain(unified.clone())
            .collect(),
        crate::cgroup::CgroupMode::None => Vec::new(),
    }
}
