//! Runtime benchmarks: real pods on the process runtime (a real `podvisor shim` per pod), with
//! numbers for the machine it runs on, printed in one table at the end. Never assertions: it
//! reports, next to each number, the target it is meant to meet.
//!
//! Run `scripts/bench [--quick]` (builds the release `podvisor`, the shim, then runs this), or
//! `cargo bench -p podvisor-agent --bench runtime -- [--quick] [--shim PATH] [--only LIST]
//! [--no-podman] [--probe-seconds N]` after `cargo build --release -p podvisor`.
//! Needs root (cgroups, mount namespaces), like the process runtime.
//!
//! What it measures (issue 3):
//! 1. pod start latency, 1 container and 2 init + 1 app: from `Agent::spawn_pod` to the first
//!    status on the pod's update stream that shows `app` running; one pod at a time;
//!    The `idle` phase starts 1-container pods one at a time, each after 500 ms of quiet, as
//!    one `kubectl apply` on a quiet machine.
//! 2. container exit → status: each container writes the wall-clock time to a file and exits at
//!    once; measured from that instant to the status update showing it terminated (also from the
//!    shim's recorded `finishedAt`);
//! 3. 110 pods submitted at once, until all run; the agent's RSS and each shim's RSS then;
//! 4. 600 HTTP and TCP probes per second (60 pods × 5 containers × one httpGet liveness and
//!    one tcpSocket readiness probe, period 1 s) against a local server process: `Unhealthy`
//!    events (every one is false: the server stays up) and the CPU of this process, which hosts
//!    the agent (shims and the server excluded);
//! 5. 110 pods with an exec liveness probe (`true`, period 10 s): CPU of the agent and shims;
//! 6. the agent's RSS with no pod;
//! 7. where podman is installed: the same two pod shapes with `podman kube play` (host network,
//!    runc, a busybox-static image imported locally), in a child process run first.
//!
//! Everything it starts is removed at the end, also on error or Ctrl-C: pods deleted (grace 0),
//! leftover processes of its shims' sessions killed, podman pods removed, temporary directories
//! deleted.
//!
//! Internal sub-commands (the bench runs itself): `serve` (the probe target: 5 HTTP and 5 TCP
//! listeners on 127.0.0.1), `stamp-exit FILE MS` (a container: sleeps, writes the time, exits),
//! `podman RUNS` (the podman comparison).

use anyhow::{Context, Result, anyhow, bail};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use podvisor_agent::{Agent, PodControl, PodHandle, PodUpdate};
use podvisor_lifecycle::{BackoffConfig, MachineConfig};
use podvisor_runtime::process::ProcessRuntime;
use podvisor_testkit::numbers::{Stats, load_average, machine_context, ms, stats};
use podvisor_testkit::{Signal, all_processes, signal};
use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Pods in the start-latency runs (each shape).
const START_PODS: usize = 100;
/// Pods in the exit runs; each has [`EXIT_CONTAINERS`] containers exiting 100 ms apart.
const EXIT_PODS: usize = 20;
const EXIT_CONTAINERS: usize = 5;
/// Pods in the burst and exec-probe runs.
const BURST_PODS: usize = 110;
/// The HTTP/TCP probe load: pods × containers, each with one HTTP and one TCP probe per second.
const PROBE_PODS: usize = 60;
const PROBE_CONTAINERS: usize = 5;
/// How long a single pod may take to do what is expected of it before the bench gives up.
const POD_DEADLINE: Duration = Duration::from_secs(30);

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("serve") => serve(),
        Some("stamp-exit") => stamp_exit(&args[1..]),
        Some("podman") => podman::child(&args[1..]),
        // `cargo test --all-targets` runs bench targets without `--bench`: nothing to do then.
        _ if !args.iter().any(|a| a == "--bench") => {
            println!("the runtime benchmark runs with `scripts/bench` (or `cargo bench`)");
            Ok(())
        }
        _ => bench(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("runtime bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Options

struct Options {
    quick: bool,
    /// The `oci` runtime class: busybox from a local image store, each pod on the CNI bridge.
    oci: bool,
    shim: PathBuf,
    only: Option<HashSet<String>>,
    podman: bool,
    start_pods: usize,
    exit_pods: usize,
    probe_window: Duration,
    exec_window: Duration,
    podman_runs: usize,
}

const PHASES: [&str; 7] = ["podman", "start", "idle", "exit", "burst", "exec", "http"];

fn usage() -> String {
    format!(
        "usage: cargo bench -p podvisor-agent --bench runtime -- [--quick] [--oci] [--oci-executor runc|runc-run|youki] [--warm-sandboxes N] [--shim PATH] [--only {}] [--no-podman] \
         [--probe-seconds N]",
        PHASES.join(",")
    )
}

/// Set by `--oci`: the pods run from the busybox image on the CNI bridge.
static OCI: AtomicBool = AtomicBool::new(false);

/// `--oci-executor`: `youki` (the shim's embedded libcontainer, the default as `serve`'s),
/// `runc-run` (`runc run --detach`) or `runc` (`runc create` + `runc start`).
static EXECUTOR: std::sync::Mutex<podvisor_runtime::oci::executor::RuncMode> =
    std::sync::Mutex::new(podvisor_runtime::oci::executor::RuncMode::Youki);

/// `--warm-sandboxes N`: oci sandboxes kept ready ahead of their pods.
static WARM: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The spec lines that differ between the classes: the process runtime's pods share the host
/// network (as podman's do); the `oci` ones get their own on the bridge.
fn class_lines() -> (&'static str, &'static str) {
    if OCI.load(Ordering::Relaxed) {
        ("", "busybox:latest, imagePullPolicy: IfNotPresent")
    } else {
        ("hostNetwork: true\n  ", "busybox")
    }
}

fn parse_options(args: &[String]) -> Result<Options> {
    let mut quick = false;
    let mut oci = false;
    let mut shim = None;
    let mut only = None;
    let mut podman = true;
    let mut probe_seconds = None;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--bench" => {}
            "--quick" => quick = true,
            "--oci" => {
                oci = true;
                OCI.store(true, Ordering::Relaxed);
            }
            "--no-podman" => podman = false,
            "--warm-sandboxes" => {
                let n: usize = it.next().context("--warm-sandboxes needs N")?.parse()?;
                WARM.store(n, Ordering::Relaxed);
            }
            "--oci-executor" => {
                use podvisor_runtime::oci::executor::RuncMode;
                let mode = match it.next().map(String::as_str) {
                    Some("runc") => RuncMode::CreateStart,
                    Some("runc-run") => RuncMode::Run,
                    Some("youki") => RuncMode::Youki,
                    other => bail!("--oci-executor takes runc, runc-run or youki, not {other:?}"),
                };
                *EXECUTOR
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = mode;
            }
            "--shim" => shim = Some(PathBuf::from(it.next().context("--shim needs a path")?)),
            "--probe-seconds" => {
                let n: u64 = it.next().context("--probe-seconds needs N")?.parse()?;
                probe_seconds = Some(n);
            }
            "--only" => {
                let list: HashSet<String> = it
                    .next()
                    .context("--only needs a list")?
                    .split(',')
                    .map(str::to_string)
                    .collect();
                if let Some(bad) = list.iter().find(|p| !PHASES.contains(&p.as_str())) {
                    bail!("unknown phase {bad:?}; {}", usage());
                }
                only = Some(list);
            }
            "-h" | "--help" => {
                println!("{}", usage());
                std::process::exit(0);
            }
            other => bail!("unknown argument {other:?}; {}", usage()),
        }
    }
    let shim = match shim {
        Some(s) => s,
        // target/release/deps/runtime-<hash> → target/release/podvisor
        None => std::env::current_exe()?
            .parent()
            .and_then(Path::parent)
            .map(|d| d.join("podvisor"))
            .context("locating the podvisor binary")?,
    };
    if !shim.exists() {
        bail!(
            "{} is missing: build it (cargo build --release -p podvisor) or pass --shim",
            shim.display()
        );
    }
    let probe_window = Duration::from_secs(probe_seconds.unwrap_or(if quick { 10 } else { 60 }));
    Ok(Options {
        quick,
        oci,
        shim,
        only,
        podman,
        start_pods: if quick { 30 } else { START_PODS },
        exit_pods: if quick { 6 } else { EXIT_PODS },
        probe_window,
        exec_window: Duration::from_secs(if quick { 10 } else { 30 }),
        podman_runs: if quick { 8 } else { 20 },
    })
}

impl Options {
    fn runs(&self, phase: &str) -> bool {
        self.only.as_ref().is_none_or(|o| o.contains(phase))
    }
}

// ---------------------------------------------------------------------------------------------
// Measurements of this process and of others

/// CPU time (user + system) this process used so far.
fn self_cpu() -> Duration {
    // SAFETY: getrusage only fills the zeroed struct it is given.
    #[allow(unsafe_code)]
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &raw mut usage);
        usage
    };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.unsigned_abs())
            + Duration::from_micros(t.tv_usec.unsigned_abs())
    };
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

fn clock_ticks() -> u64 {
    // SAFETY: sysconf has no preconditions.
    #[allow(unsafe_code)]
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(ticks).ok().filter(|&t| t > 0).unwrap_or(100)
}

/// `(own, children's)` CPU time of a process, from `/proc/<pid>/stat`.
fn proc_cpu(pid: u32) -> Option<(Duration, Duration)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<u64> = stat[stat.rfind(')')? + 2..]
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    // After the command: state(0) ppid pgrp session tty tpgid flags minflt cminflt majflt
    // cmajflt utime(11) stime(12) cutime(13) cstime(14).
    let ticks = clock_ticks();
    let d = |t: u64| Duration::from_micros(t * 1_000_000 / ticks);
    Some((
        d(fields.get(11)? + fields.get(12)?),
        d(fields.get(13)? + fields.get(14)?),
    ))
}

/// CPU time a process used so far, exact (every thread, exited ones included): its CPU-time
/// clock. `/proc/<pid>/stat` rounds to clock ticks (10 ms), too coarse for a shim that works
/// a millisecond per probe.
fn proc_cpu_exact(pid: u32) -> Option<Duration> {
    let pid = libc::pid_t::try_from(pid).ok()?;
    // SAFETY: both calls only write to the out-parameters they are given.
    #[allow(unsafe_code)]
    unsafe {
        let mut clock: libc::clockid_t = 0;
        if libc::clock_getcpuclockid(pid, &raw mut clock) != 0 {
            return None;
        }
        let mut ts: libc::timespec = std::mem::zeroed();
        if libc::clock_gettime(clock, &raw mut ts) != 0 {
            return None;
        }
        Some(Duration::new(
            ts.tv_sec.unsigned_abs(),
            u32::try_from(ts.tv_nsec).unwrap_or(0),
        ))
    }
}

/// A `kB` field of `/proc/<pid>/status` (`VmRSS`, `VmHWM`, `RssAnon`, ...), in KiB.
fn proc_status_kib(pid: &str, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// `(PSS, USS)` of a process in KiB, from `/proc/<pid>/smaps_rollup`: its proportional share
/// of the pages it maps, and the pages only it maps (what one more such process costs).
fn proc_pss_uss_kib(pid: u32) -> Option<(u64, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    let field = |name: &str| -> Option<u64> {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
    };
    Some((
        field("Pss")?,
        field("Private_Clean")? + field("Private_Dirty")?,
    ))
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn progress(message: &str) {
    eprintln!("[bench] {message}");
}

// ---------------------------------------------------------------------------------------------
// Pods

fn yaml_pod(text: &str) -> Result<Pod> {
    let mut pods = podvisor_api::decode_pods(text, "bench").map_err(|e| anyhow!("{e}"))?;
    let mut pod = pods.pop().context("no pod")?;
    podvisor_api::apply_defaults(&mut pod);
    podvisor_api::validate_pod(&pod).map_err(|e| anyhow!("{e}"))?;
    Ok(pod)
}

fn one_container_pod(name: &str) -> Result<Pod> {
    let (net, image) = class_lines();
    yaml_pod(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  {net}\
         containers:\n  - {{name: app, image: {image}, command: [sleep, infinity]}}\n"
    ))
}

/// podman needs `OnFailure`/`Never` for init containers; the same manifest runs here.
fn init_pod(name: &str) -> Result<Pod> {
    let (net, image) = class_lines();
    yaml_pod(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  {net}\
         restartPolicy: OnFailure\n  initContainers:\n  \
         - {{name: init1, image: {image}, command: [\"true\"]}}\n  \
         - {{name: init2, image: {image}, command: [\"true\"]}}\n  \
         containers:\n  - {{name: app, image: {image}, command: [sleep, infinity]}}\n"
    ))
}

fn exiting_pod(name: &str, exe: &Path, stamps: &Path) -> Result<Pod> {
    let mut text = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  restartPolicy: Never\n  \
         containers:\n"
    );
    for k in 0..EXIT_CONTAINERS {
        let stamp = stamps.join(format!("{name}-c{k}"));
        let delay = 200 + 100 * k;
        text.push_str(&format!(
            "  - {{name: c{k}, image: bench, command: [\"{}\", stamp-exit, \"{}\", \"{delay}\"]}}\n",
            exe.display(),
            stamp.display()
        ));
    }
    yaml_pod(&text)
}

fn exec_probe_pod(name: &str) -> Result<Pod> {
    yaml_pod(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  containers:\n  \
         - name: app\n    image: busybox\n    command: [sleep, infinity]\n    \
         livenessProbe: {{exec: {{command: [\"true\"]}}, periodSeconds: 10}}\n"
    ))
}

fn network_probe_pod(name: &str, http: &[u16], tcp: &[u16]) -> Result<Pod> {
    let mut text =
        format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  containers:\n");
    for k in 0..PROBE_CONTAINERS {
        let (h, t) = (http[k % http.len()], tcp[k % tcp.len()]);
        text.push_str(&format!(
            "  - name: c{k}\n    image: busybox\n    command: [sleep, infinity]\n    \
             livenessProbe: {{httpGet: {{path: /healthz, port: {h}}}, periodSeconds: 1}}\n    \
             readinessProbe: {{tcpSocket: {{port: {t}}}, periodSeconds: 1}}\n"
        ));
    }
    yaml_pod(&text)
}

fn status_of<'a>(pod: &'a Pod, container: &str) -> Option<&'a ContainerStatus> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == container)
}

fn is_running(pod: &Pod, container: &str) -> bool {
    status_of(pod, container)
        .and_then(|c| c.state.as_ref())
        .is_some_and(|s| s.running.is_some())
}

fn is_terminated(pod: &Pod, container: &str) -> bool {
    status_of(pod, container)
        .and_then(|c| c.state.as_ref())
        .is_some_and(|s| s.terminated.is_some())
}

/// The shim's `finishedAt` of `container` (full precision: the status has whole seconds),
/// from its exit journal, while the pod directory is still there.
fn journaled_finish(state_dir: &Path, uid: &str, container: &str) -> Option<Timestamp> {
    let journal = state_dir
        .join("pods")
        .join(uid)
        .join("shim")
        .join("exits.jsonl");
    let text = std::fs::read_to_string(journal).ok()?;
    text.lines().find_map(|line| {
        let v: serde_json::Value = serde_json::from_str(line).ok()?;
        if v["kind"] == "exit" && v["name"] == container {
            v["finished_at"].as_str()?.parse().ok()
        } else {
            None
        }
    })
}

// ---------------------------------------------------------------------------------------------
// The bench context: the agent, and what must be cleaned up

struct Ctx {
    agent: Agent<ProcessRuntime>,
    runtime: Arc<ProcessRuntime>,
    state_dir: PathBuf,
    exe: PathBuf,
    /// Every pod ever spawned (deleting a finished one does nothing).
    controls: Mutex<Vec<PodControl>>,
    /// Every shim pid seen (their sessions are swept at the end).
    shims: Mutex<HashSet<u32>>,
    /// The probe server, while it runs.
    server: Mutex<Option<std::process::Child>>,
    seq: AtomicU64,
}

impl Ctx {
    fn spawn(&self, pod: Pod) -> PodHandle {
        let handle = self.agent.spawn_pod(pod);
        self.controls
            .lock()
            .expect("controls")
            .push(handle.control());
        handle
    }

    fn name(&self, prefix: &str) -> String {
        format!("{prefix}-{}", self.seq.fetch_add(1, Ordering::Relaxed))
    }

    /// The pids of the shims of the pods now present (from their pid files).
    fn shim_pids(&self) -> Vec<u32> {
        let mut pids = Vec::new();
        if let Ok(dir) = std::fs::read_dir(self.state_dir.join("pods")) {
            for entry in dir.flatten().filter(is_pod_dir) {
                let file = entry.path().join("shim").join("shim.pid");
                if let Some(pid) = std::fs::read_to_string(file)
                    .ok()
                    .and_then(|s| s.trim().parse().ok())
                {
                    pids.push(pid);
                }
            }
        }
        self.shims.lock().expect("shims").extend(&pids);
        pids
    }

    /// CPU time used so far by the processes in the pods' cgroups (containers and the
    /// processes exec'd into them: probes), exact: the v2 `cpu.stat` of each pod's cgroup
    /// (`podvisor/<uid>`), which cgroup2 keeps even without the cpu controller.
    fn pods_cgroup_cpu(&self) -> Option<Duration> {
        let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
        let root = mounts.lines().find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.get(2) == Some(&"cgroup2")).then(|| PathBuf::from(f[1]))
        })?;
        let mut total = Duration::ZERO;
        for entry in std::fs::read_dir(self.state_dir.join("pods"))
            .ok()?
            .flatten()
            .filter(is_pod_dir)
        {
            let stat = root
                .join("podvisor")
                .join(entry.file_name())
                .join("cpu.stat");
            let text = std::fs::read_to_string(stat).ok()?;
            let usec: u64 = text
                .lines()
                .find_map(|l| l.strip_prefix("usage_usec "))?
                .trim()
                .parse()
                .ok()?;
            total += Duration::from_micros(usec);
        }
        Some(total)
    }

    fn pod_dirs(&self) -> usize {
        std::fs::read_dir(self.state_dir.join("pods"))
            .map_or(0, |d| d.flatten().filter(is_pod_dir).count())
    }
}

/// A pod's directory under `<state>/pods`, not the warm pool's.
fn is_pod_dir(entry: &std::fs::DirEntry) -> bool {
    entry.file_name() != podvisor_runtime::sandbox::pool::POOL_DIR
}

/// A group of pods whose updates arrive on one channel.
struct Fleet {
    rx: mpsc::UnboundedReceiver<(usize, PodUpdate)>,
    controls: Vec<PodControl>,
    terminated: Vec<bool>,
}

impl Fleet {
    fn spawn(ctx: &Ctx, pods: Vec<Pod>) -> Fleet {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut controls = Vec::new();
        for (i, pod) in pods.into_iter().enumerate() {
            let mut handle = ctx.spawn(pod);
            controls.push(handle.control());
            let tx = tx.clone();
            tokio::spawn(async move {
                while let Some(update) = handle.next_update().await {
                    if tx.send((i, update)).is_err() {
                        return;
                    }
                }
            });
        }
        let n = controls.len();
        Fleet {
            rx,
            controls,
            terminated: vec![false; n],
        }
    }

    /// The next update, or None at `deadline`.
    async fn next(&mut self, deadline: tokio::time::Instant) -> Option<(usize, PodUpdate)> {
        let (i, update) = tokio::time::timeout_at(deadline, self.rx.recv())
            .await
            .ok()??;
        if let PodUpdate::Terminated(_) = update {
            self.terminated[i] = true;
        }
        Some((i, update))
    }

    /// Deletes every pod (grace 0) and waits until all have terminated; returns how long it
    /// took.
    async fn delete_all(&mut self) -> Result<Duration> {
        let t0 = Instant::now();
        for c in &self.controls {
            c.delete(Some(0));
        }
        let deadline = tokio::time::Instant::now() + POD_DEADLINE;
        while self.terminated.iter().any(|t| !t) {
            if self.next(deadline).await.is_none() {
                let left = self.terminated.iter().filter(|t| !**t).count();
                bail!("{left} pods did not terminate within {POD_DEADLINE:?} of their deletion");
            }
        }
        Ok(t0.elapsed())
    }
}

/// Waits for the pod's end after its deletion.
async fn wait_terminated(h: &mut PodHandle) -> Result<()> {
    let deadline = tokio::time::Instant::now() + POD_DEADLINE;
    loop {
        match tokio::time::timeout_at(deadline, h.next_update()).await {
            Ok(Some(PodUpdate::Terminated(_)) | None) => return Ok(()),
            Ok(Some(_)) => {}
            Err(_) => bail!("pod {} did not terminate in time", h.name()),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Results

#[derive(Default)]
struct Results {
    agent_idle_kib: Option<u64>,
    start_one: Option<Stats>,
    /// 1-container starts each after [`IDLE_PAUSE`] of quiet (the `idle` phase).
    start_idle: Option<Stats>,
    start_init: Option<Stats>,
    teardown_one: Option<Stats>,
    /// The runtime's own part of a start: `create_sandbox` (shim up, subscribed) and
    /// `start_container`.
    sandbox: Option<Stats>,
    container_start: Option<Stats>,
    exit_stamp: Option<Stats>,
    exit_shim: Option<Stats>,
    reap_lag: Option<Stats>,
    burst: Option<Burst>,
    exec: Option<ExecProbes>,
    http: Option<NetProbes>,
    podman: Option<podman::Outcome>,
}

struct Burst {
    wall: Duration,
    per_pod: Stats,
    agent_kib: Option<u64>,
    agent_hwm_kib: Option<u64>,
    shim_kib: Vec<u64>,
    shim_pss_kib: Vec<u64>,
    shim_uss_kib: Vec<u64>,
    idle_cpu_pct: f64,
    teardown: Duration,
}

struct ExecProbes {
    window: Duration,
    agent_pct: f64,
    shims_pct: f64,
    children_pct: f64,
    unhealthy: usize,
}

struct NetProbes {
    window: Duration,
    http: u64,
    tcp: u64,
    unhealthy: usize,
    other_warnings: usize,
    agent_pct: f64,
    server_pct: f64,
    agent_kib: Option<u64>,
    first_unhealthy: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// The bench

fn bench(args: &[String]) -> Result<()> {
    let opts = parse_options(args)?;
    // SAFETY: geteuid has no preconditions.
    #[allow(unsafe_code)]
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        bail!("the process runtime needs root (cgroups, mount namespaces)");
    }
    let exe = std::env::current_exe()?;
    let base = std::env::temp_dir().join(format!("podvisor-bench-{}", std::process::id()));
    std::fs::create_dir_all(&base)?;
    let started = Timestamp::now();
    // As `serve` and `run` do at start (unless `--protect-kernel-defaults`).
    let dynmods = podvisor_runtime::cgroup::dynmods::favor_dynamic_modifications(false);
    progress(&dynmods.to_string());
    // cgroup2's `favordynmods` (podvisor sets it unless `--protect-kernel-defaults`): without
    // it a container's move into its cgroup may wait out an RCU grace period.
    let load = format!(
        "{}; {}, favordynmods {}",
        load_average(),
        machine_context(),
        podvisor_runtime::cgroup::dynmods::state_word()
    );
    progress(&format!(
        "shim {}, {} mode, {} runtime class, load average {load}",
        opts.shim.display(),
        if opts.quick { "quick" } else { "full" },
        if !opts.oci {
            "process"
        } else {
            match *EXECUTOR
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
            {
                podvisor_runtime::oci::executor::RuncMode::Run => "oci (runc run -d, CNI bridge)",
                podvisor_runtime::oci::executor::RuncMode::CreateStart => {
                    "oci (runc create + start, CNI bridge)"
                }
                podvisor_runtime::oci::executor::RuncMode::Youki => {
                    "oci (embedded youki, CNI bridge)"
                }
            }
        }
    ));
    let mut results = Results::default();

    // podman first, in a child process, before this process becomes a child subreaper (its
    // conmons must not be re-parented here).
    if opts.runs("podman") {
        results.podman = Some(if opts.podman {
            podman::run_child(&exe, opts.podman_runs)
        } else {
            podman::Outcome::Skipped("--no-podman".into())
        });
    }

    let outcome = run_agent_phases(&opts, &exe, &base, &mut results);
    std::fs::remove_dir_all(&base).ok();
    print_summary(&opts, &results, started, &load);
    outcome
}

/// The runtime with the `oci` class as default, its store holding the busybox image that
/// `scripts/busybox-image` writes.
fn oci_runtime(state_dir: &Path, shim: &Path) -> Result<ProcessRuntime> {
    use podvisor_runtime::process::{OciOptions, RuntimeClass};
    let layout = state_dir.with_file_name("busybox-layout");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/busybox-image");
    let made = std::process::Command::new(script).arg(&layout).output()?;
    if !made.status.success() {
        bail!("{script}: {}", String::from_utf8_lossy(&made.stderr));
    }
    let images = podvisor_image::ImageStore::open(state_dir.join("images"))?;
    images.load(&layout, &podvisor_image::NoProgress)?;
    ProcessRuntime::with_classes(
        state_dir.to_path_buf(),
        shim.to_path_buf(),
        Some(OciOptions {
            images,
            registry: None,
            warm_sandboxes: WARM.load(Ordering::Relaxed),
            executor: *EXECUTOR
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
            // podvisor's own network, whatever the host has in /etc/cni/net.d.
            network: podvisor_runtime::sandbox::cni::NetworkChoice::Own,
        }),
        RuntimeClass::Oci,
    )
    .context("starting the runtime with the oci class")
}

fn machine_config() -> MachineConfig {
    MachineConfig {
        backoff: BackoffConfig::default(),
        node_name: "bench".into(),
        host_ip: Some("127.0.0.1".into()),
        pod_ip: Some("127.0.0.1".into()),
        ..MachineConfig::default()
    }
}

fn run_agent_phases(opts: &Options, exe: &Path, base: &Path, results: &mut Results) -> Result<()> {
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let state_dir = base.join("state");
    let ctx = tokio.block_on(async {
        let runtime = if opts.oci {
            oci_runtime(&state_dir, &opts.shim)?
        } else {
            ProcessRuntime::new(state_dir.clone(), opts.shim.clone())
                .context("starting the process runtime")?
        };
        let runtime = Arc::new(runtime);
        anyhow::Ok(Arc::new(Ctx {
            agent: Agent::new(Arc::clone(&runtime), machine_config()),
            runtime,
            state_dir,
            exe: exe.to_path_buf(),
            controls: Mutex::new(Vec::new()),
            shims: Mutex::new(HashSet::new()),
            server: Mutex::new(None),
            seq: AtomicU64::new(0),
        }))
    })?;
    // Idle: the agent and its runtime exist, no pod yet.
    std::thread::sleep(Duration::from_millis(300));
    results.agent_idle_kib = proc_status_kib("self", "VmRSS");
    progress(&format!(
        "agent RSS idle: {:.1} MiB",
        mib(results.agent_idle_kib.unwrap_or(0))
    ));

    let shared = Arc::new(Mutex::new(Results::default()));
    // The exit phase's containers run this bench's own binary (`stamp-exit`), which no image
    // of the oci class holds.
    let exit = opts.runs("exit") && !opts.oci;
    if opts.oci && opts.runs("exit") {
        progress("exit phase: not with --oci (its containers run this bench's binary); skipped");
    }
    let phases = {
        let (ctx, shared) = (Arc::clone(&ctx), Arc::clone(&shared));
        let opts = PhaseOptions {
            start: opts.runs("start"),
            idle: opts.runs("idle"),
            exit,
            burst: opts.runs("burst"),
            exec: opts.runs("exec"),
            http: opts.runs("http"),
            start_pods: opts.start_pods,
            exit_pods: opts.exit_pods,
            probe_window: opts.probe_window,
            exec_window: opts.exec_window,
            stamps: base.join("stamps"),
        };
        async move {
            let task = tokio::spawn(phases(ctx, opts, shared));
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
            tokio::select! {
                joined = task => joined.map_err(|e| anyhow!("bench task failed: {e}"))?,
                _ = tokio::signal::ctrl_c() => Err(anyhow!("interrupted")),
                _ = term.recv() => Err(anyhow!("terminated")),
            }
        }
    };
    let outcome = tokio.block_on(phases);
    let cleanup = tokio.block_on(cleanup(&ctx));
    tokio.block_on(ctx.runtime.release_warm_sandboxes());
    {
        let mut shared = shared.lock().expect("results");
        let r = std::mem::take(&mut *shared);
        results.start_one = r.start_one;
        results.start_idle = r.start_idle;
        results.start_init = r.start_init;
        results.teardown_one = r.teardown_one;
        results.sandbox = r.sandbox;
        results.container_start = r.container_start;
        results.exit_stamp = r.exit_stamp;
        results.exit_shim = r.exit_shim;
        results.reap_lag = r.reap_lag;
        results.burst = r.burst;
        results.exec = r.exec;
        results.http = r.http;
    }
    drop(tokio);
    outcome.and(cleanup)
}

struct PhaseOptions {
    start: bool,
    idle: bool,
    exit: bool,
    burst: bool,
    exec: bool,
    http: bool,
    start_pods: usize,
    exit_pods: usize,
    probe_window: Duration,
    exec_window: Duration,
    stamps: PathBuf,
}

async fn phases(ctx: Arc<Ctx>, opts: PhaseOptions, out: Arc<Mutex<Results>>) -> Result<()> {
    // Warm up: the shim binary and the runtime's paths in the page cache.
    for _ in 0..3 {
        start_latency(&ctx, one_container_pod(&ctx.name("warm"))?).await?;
    }
    if opts.start {
        progress(&format!("start latency, 1 container × {}", opts.start_pods));
        let mut starts = Vec::new();
        let mut teardowns = Vec::new();
        for _ in 0..opts.start_pods {
            let (start, teardown) =
                start_latency(&ctx, one_container_pod(&ctx.name("one"))?).await?;
            starts.push(start);
            teardowns.push(teardown);
        }
        let s = stats(starts);
        progress(&format!("  p50 {} p99 {}", ms(s.p50), ms(s.p99)));
        let mut r = out.lock().expect("results");
        r.start_one = Some(s);
        r.teardown_one = Some(stats(teardowns));
    }
    if opts.idle {
        // As one `kubectl apply` on a quiet machine: nothing ran for a while before the start
        // (the back-to-back starts above follow a teardown's cgroup work by microseconds).
        let n = opts.start_pods / 3;
        progress(&format!(
            "start latency after {} ms of quiet, 1 container × {n}",
            IDLE_PAUSE.as_millis()
        ));
        let mut starts = Vec::new();
        for _ in 0..n {
            tokio::time::sleep(IDLE_PAUSE).await;
            starts.push(
                start_latency(&ctx, one_container_pod(&ctx.name("idle"))?)
                    .await?
                    .0,
            );
        }
        let s = stats(starts);
        progress(&format!("  p50 {} p99 {}", ms(s.p50), ms(s.p99)));
        out.lock().expect("results").start_idle = Some(s);
    }
    if opts.start {
        let n = opts.start_pods / 3;
        progress(&format!("the runtime's part of a start (no agent) × {n}"));
        let (mut sandboxes, mut starts) = (Vec::new(), Vec::new());
        for _ in 0..n {
            let (a, b) = runtime_start(&ctx).await?;
            sandboxes.push(a);
            starts.push(b);
        }
        let mut r = out.lock().expect("results");
        r.sandbox = Some(stats(sandboxes));
        r.container_start = Some(stats(starts));
    }
    if opts.start {
        progress(&format!(
            "start latency, 2 init + 1 app × {}",
            opts.start_pods
        ));
        let mut starts = Vec::new();
        for _ in 0..opts.start_pods {
            starts.push(start_latency(&ctx, init_pod(&ctx.name("init"))?).await?.0);
        }
        let s = stats(starts);
        progress(&format!("  p50 {} p99 {}", ms(s.p50), ms(s.p99)));
        out.lock().expect("results").start_init = Some(s);
    }
    if opts.exit {
        progress(&format!(
            "container exit → status, {} pods × {EXIT_CONTAINERS} containers",
            opts.exit_pods
        ));
        std::fs::create_dir_all(&opts.stamps)?;
        let (mut from_stamp, mut from_shim, mut lag) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..opts.exit_pods {
            let (a, b, c) = exit_latency(&ctx, &opts.stamps).await?;
            from_stamp.extend(a);
            from_shim.extend(b);
            lag.extend(c);
        }
        let s = stats(from_stamp);
        progress(&format!("  p50 {} p99 {}", ms(s.p50), ms(s.p99)));
        let mut r = out.lock().expect("results");
        r.exit_stamp = Some(s);
        r.exit_shim = (!from_shim.is_empty()).then(|| stats(from_shim));
        r.reap_lag = (!lag.is_empty()).then(|| stats(lag));
    }
    if opts.burst {
        progress(&format!("burst of {BURST_PODS} pods"));
        let b = burst(&ctx).await?;
        progress(&format!("  all running after {}", ms(b.wall)));
        out.lock().expect("results").burst = Some(b);
    }
    if opts.exec {
        progress(&format!(
            "{BURST_PODS} exec probes every 10 s for {}s",
            opts.exec_window.as_secs()
        ));
        let e = exec_probes(&ctx, opts.exec_window).await?;
        out.lock().expect("results").exec = Some(e);
    }
    if opts.http {
        progress(&format!(
            "{} HTTP + TCP probes per second for {}s",
            PROBE_PODS * PROBE_CONTAINERS * 2,
            opts.probe_window.as_secs()
        ));
        let n = net_probes(&ctx, opts.probe_window).await?;
        out.lock().expect("results").http = Some(n);
    }
    Ok(())
}

/// The quiet before each start of the `idle` phase.
const IDLE_PAUSE: Duration = Duration::from_millis(500);

/// Spawns `pod`, waits for `app` running (the latency), deletes it and waits for its end
/// (the teardown time).
async fn start_latency(ctx: &Ctx, pod: Pod) -> Result<(Duration, Duration)> {
    let t0 = Instant::now();
    let mut h = ctx.spawn(pod);
    let deadline = tokio::time::Instant::now() + POD_DEADLINE;
    let latency = loop {
        match tokio::time::timeout_at(deadline, h.next_update()).await {
            Ok(Some(PodUpdate::Status(p))) if is_running(&p, "app") => break t0.elapsed(),
            Ok(Some(PodUpdate::Event(e))) if e.event.type_.as_str() == "Warning" => {
                h.delete(Some(0));
                bail!("pod {}: {} {}", h.name(), e.event.reason, e.event.message);
            }
            Ok(Some(PodUpdate::Terminated(_)) | None) => {
                bail!("pod {} ended before app ran", h.name())
            }
            Ok(Some(_)) => {}
            Err(_) => {
                h.delete(Some(0));
                bail!("pod {}: app not running within {POD_DEADLINE:?}", h.name());
            }
        }
    };
    let t1 = Instant::now();
    h.delete(Some(0));
    wait_terminated(&mut h).await?;
    Ok((latency, t1.elapsed()))
}

/// The process runtime alone, as the pod worker drives it: `create_sandbox` (spawn the shim,
/// wait for its socket, `State`, `Subscribe`), then `start_container`; then kill and remove.
async fn runtime_start(ctx: &Ctx) -> Result<(Duration, Duration)> {
    use podvisor_runtime::{Runtime, RuntimeEvent, StartRequest};
    let mut pod = one_container_pod(&ctx.name("rt"))?;
    pod.metadata.uid = Some(podvisor_agent::new_uid());
    pod.metadata.namespace = Some("default".into());
    let container = pod
        .spec
        .as_ref()
        .and_then(|s| s.containers.first().cloned())
        .context("container")?;
    let rt = &ctx.runtime;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let t0 = Instant::now();
    let sandbox = rt
        .create_sandbox(&pod, tx)
        .await
        .map_err(|e| anyhow!("{}: {}", e.reason, e.message))?;
    ctx.shims.lock().expect("shims").insert(sandbox.shim_pid());
    let t1 = Instant::now();
    let started = rt
        .start_container(
            &sandbox,
            StartRequest {
                pod: pod.clone(),
                instance: 1,
                container,
                restart_count: 0,
                objects: Default::default(),
            },
        )
        .await;
    let t2 = Instant::now();
    if started.is_ok() {
        rt.signal(&sandbox, 1, 9).await?;
        let deadline = tokio::time::Instant::now() + POD_DEADLINE;
        while let Ok(Some(ev)) = tokio::time::timeout_at(deadline, rx.recv()).await {
            if matches!(ev, RuntimeEvent::Exited { .. }) {
                break;
            }
        }
    }
    rt.remove_sandbox(&sandbox).await?;
    started.map_err(|e| anyhow!("{}: {}", e.reason, e.message))?;
    Ok((t1 - t0, t2 - t1))
}

/// One pod whose containers exit 200, 300, ... ms after they start: per container, the time
/// from its own exit stamp and from the shim's `finishedAt` to the status showing it
/// terminated, and the shim's lag (stamp → finishedAt).
async fn exit_latency(
    ctx: &Ctx,
    stamps: &Path,
) -> Result<(Vec<Duration>, Vec<Duration>, Vec<Duration>)> {
    let name = ctx.name("exit");
    let mut h = ctx.spawn(exiting_pod(&name, &ctx.exe, stamps)?);
    let deadline = tokio::time::Instant::now() + POD_DEADLINE;
    let mut seen: HashMap<String, (Timestamp, Option<Timestamp>)> = HashMap::new();
    loop {
        let update = match tokio::time::timeout_at(deadline, h.next_update()).await {
            Ok(Some(u)) => u,
            Ok(None) => break,
            Err(_) => {
                h.delete(Some(0));
                bail!("pod {name} did not finish within {POD_DEADLINE:?}");
            }
        };
        let now = Timestamp::now();
        let (pod, last) = match update {
            PodUpdate::Status(p) => (p, false),
            PodUpdate::Terminated(p) => (p, true),
            PodUpdate::Event(_) => continue,
        };
        for k in 0..EXIT_CONTAINERS {
            let c = format!("c{k}");
            if !seen.contains_key(&c) && is_terminated(&pod, &c) {
                let finished = journaled_finish(&ctx.state_dir, h.uid(), &c);
                seen.insert(c, (now, finished));
            }
        }
        if last {
            break;
        }
    }
    let (mut from_stamp, mut from_shim, mut lag) = (Vec::new(), Vec::new(), Vec::new());
    for k in 0..EXIT_CONTAINERS {
        let c = format!("c{k}");
        let (observed, finished) = seen
            .get(&c)
            .with_context(|| format!("{name}: no terminated status for {c}"))?;
        let file = stamps.join(format!("{name}-{c}"));
        let stamp: i128 = std::fs::read_to_string(&file)
            .with_context(|| format!("reading {}", file.display()))?
            .trim()
            .parse()?;
        let stamp = Timestamp::from_nanosecond(stamp)?;
        let to_duration = |from: Timestamp| {
            Duration::try_from(observed.duration_since(from)).unwrap_or(Duration::ZERO)
        };
        from_stamp.push(to_duration(stamp));
        if let Some(f) = *finished {
            from_shim.push(to_duration(f));
            lag.push(Duration::try_from(f.duration_since(stamp)).unwrap_or(Duration::ZERO));
        }
    }
    Ok((from_stamp, from_shim, lag))
}

async fn burst(ctx: &Ctx) -> Result<Burst> {
    let pods = (0..BURST_PODS)
        .map(|_| one_container_pod(&ctx.name("burst")))
        .collect::<Result<Vec<_>>>()?;
    let t0 = Instant::now();
    let mut fleet = Fleet::spawn(ctx, pods);
    let mut running: Vec<Option<Duration>> = vec![None; BURST_PODS];
    let deadline = tokio::time::Instant::now() + POD_DEADLINE;
    while running.iter().any(Option::is_none) {
        let Some((i, update)) = fleet.next(deadline).await else {
            fleet.delete_all().await.ok();
            bail!("not every pod of the burst ran within {POD_DEADLINE:?}");
        };
        match update {
            PodUpdate::Status(p) if running[i].is_none() && is_running(&p, "app") => {
                running[i] = Some(t0.elapsed());
            }
            PodUpdate::Terminated(_) => {
                fleet.delete_all().await.ok();
                bail!("a burst pod terminated");
            }
            _ => {}
        }
    }
    let wall = t0.elapsed();
    let per_pod = stats(running.into_iter().flatten().collect());
    // Let the start-up settle, then look at memory and idle CPU with every pod running.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let agent_kib = proc_status_kib("self", "VmRSS");
    let agent_hwm_kib = proc_status_kib("self", "VmHWM");
    let shims = ctx.shim_pids();
    let mut shim_kib: Vec<u64> = shims
        .iter()
        .filter_map(|p| proc_status_kib(&p.to_string(), "VmRSS"))
        .collect();
    let (mut shim_pss_kib, mut shim_uss_kib): (Vec<u64>, Vec<u64>) =
        shims.iter().filter_map(|&p| proc_pss_uss_kib(p)).unzip();
    shim_kib.sort_unstable();
    shim_pss_kib.sort_unstable();
    shim_uss_kib.sort_unstable();
    let cpu0 = self_cpu();
    let t1 = Instant::now();
    let idle = tokio::time::Instant::now() + Duration::from_secs(5);
    while fleet.next(idle).await.is_some() {}
    let idle_cpu_pct = pct(self_cpu() - cpu0, t1.elapsed());
    let teardown = fleet.delete_all().await?;
    Ok(Burst {
        wall,
        per_pod,
        agent_kib,
        agent_hwm_kib,
        shim_kib,
        shim_pss_kib,
        shim_uss_kib,
        idle_cpu_pct,
        teardown,
    })
}

fn pct(cpu: Duration, wall: Duration) -> f64 {
    100.0 * cpu.as_secs_f64() / wall.as_secs_f64().max(1e-9)
}

/// Waits until every pod of the fleet runs all of `containers`; counts `Unhealthy` events.
async fn wait_all_running(fleet: &mut Fleet, containers: &[String]) -> Result<usize> {
    let n = fleet.controls.len();
    let mut running = vec![false; n];
    let mut unhealthy = 0;
    let deadline = tokio::time::Instant::now() + POD_DEADLINE;
    while running.iter().any(|r| !r) {
        let Some((i, update)) = fleet.next(deadline).await else {
            bail!("not every pod ran within {POD_DEADLINE:?}");
        };
        match update {
            PodUpdate::Status(p) => running[i] = containers.iter().all(|c| is_running(&p, c)),
            PodUpdate::Event(e) if e.event.reason == "Unhealthy" => unhealthy += 1,
            PodUpdate::Event(_) => {}
            PodUpdate::Terminated(_) => bail!("a pod terminated"),
        }
    }
    Ok(unhealthy)
}

/// `(own, children's)` CPU time of every shim in `pids`: its own exactly, that of the
/// processes it reaped (exec probes) in clock ticks.
fn shims_cpu(pids: &[u32]) -> (Duration, Duration) {
    pids.iter()
        .filter_map(|&p| Some((proc_cpu_exact(p)?, proc_cpu(p)?.1)))
        .fold((Duration::ZERO, Duration::ZERO), |(a, b), (c, d)| {
            (a + c, b + d)
        })
}

async fn exec_probes(ctx: &Ctx, window: Duration) -> Result<ExecProbes> {
    let pods = (0..BURST_PODS)
        .map(|_| exec_probe_pod(&ctx.name("exec")))
        .collect::<Result<Vec<_>>>()?;
    let mut fleet = Fleet::spawn(ctx, pods);
    let result = async {
        let mut unhealthy = wait_all_running(&mut fleet, &["app".to_string()]).await?;
        tokio::time::sleep(Duration::from_secs(1)).await;
        let shims = ctx.shim_pids();
        let (s0, c0) = shims_cpu(&shims);
        let g0 = ctx.pods_cgroup_cpu();
        let a0 = self_cpu();
        let t0 = Instant::now();
        let end = tokio::time::Instant::now() + window;
        while let Some((_, update)) = fleet.next(end).await {
            match update {
                PodUpdate::Event(e) if e.event.reason == "Unhealthy" => unhealthy += 1,
                PodUpdate::Terminated(_) => bail!("a pod terminated"),
                _ => {}
            }
        }
        let wall = t0.elapsed();
        let agent = self_cpu() - a0;
        let (s1, c1) = shims_cpu(&shims);
        // Exact from the pods' cgroups where there are some; else what the shims reaped, in
        // clock ticks.
        let children = match (g0, ctx.pods_cgroup_cpu()) {
            (Some(g0), Some(g1)) => g1.saturating_sub(g0),
            _ => c1.saturating_sub(c0),
        };
        anyhow::Ok(ExecProbes {
            window: wall,
            agent_pct: pct(agent, wall),
            shims_pct: pct(s1.saturating_sub(s0), wall),
            children_pct: pct(children, wall),
            unhealthy,
        })
    }
    .await;
    let teardown = fleet.delete_all().await;
    let r = result?;
    teardown?;
    Ok(r)
}

/// The probe server's request counts so far.
fn server_counts(
    server: &mut std::process::Child,
    out: &mut BufReader<std::process::ChildStdout>,
) -> Result<(u64, u64)> {
    let stdin = server.stdin.as_mut().context("server stdin")?;
    stdin.write_all(b"counts\n")?;
    stdin.flush()?;
    let mut line = String::new();
    out.read_line(&mut line)?;
    let mut it = line.split_whitespace().skip(1).map(str::parse::<u64>);
    match (it.next(), it.next()) {
        (Some(Ok(h)), Some(Ok(t))) => Ok((h, t)),
        _ => bail!("probe server said {line:?}"),
    }
}

async fn net_probes(ctx: &Ctx, window: Duration) -> Result<NetProbes> {
    let mut child = std::process::Command::new(&ctx.exe)
        .arg("serve")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .context("starting the probe server")?;
    let server_pid = child.id();
    let mut out = BufReader::new(child.stdout.take().context("server stdout")?);
    *ctx.server.lock().expect("server") = Some(child);
    let mut line = String::new();
    out.read_line(&mut line)?;
    // "ports H1,H2,... T1,T2,..."
    let parse = |s: Option<&str>| -> Result<Vec<u16>> {
        s.context("probe server ports")?
            .split(',')
            .map(|p| p.parse().context("port"))
            .collect()
    };
    let mut words = line.split_whitespace().skip(1);
    let http = parse(words.next())?;
    let tcp = parse(words.next())?;

    let pods = (0..PROBE_PODS)
        .map(|_| network_probe_pod(&ctx.name("probe"), &http, &tcp))
        .collect::<Result<Vec<_>>>()?;
    let containers: Vec<String> = (0..PROBE_CONTAINERS).map(|k| format!("c{k}")).collect();
    let mut fleet = Fleet::spawn(ctx, pods);
    let result = async {
        let mut unhealthy = wait_all_running(&mut fleet, &containers).await?;
        let mut other_warnings = 0;
        let mut first_unhealthy = None;
        // Every probe worker has started and settled.
        let settle = tokio::time::Instant::now() + Duration::from_secs(3);
        while fleet.next(settle).await.is_some() {}
        let (h0, t0c) = {
            let mut guard = ctx.server.lock().expect("server");
            server_counts(guard.as_mut().context("server")?, &mut out)?
        };
        let server0 = proc_cpu(server_pid).map(|c| c.0).unwrap_or_default();
        let a0 = self_cpu();
        let t0 = Instant::now();
        let end = tokio::time::Instant::now() + window;
        while let Some((_, update)) = fleet.next(end).await {
            match update {
                PodUpdate::Event(e) if e.event.reason == "Unhealthy" => {
                    unhealthy += 1;
                    first_unhealthy.get_or_insert(e.event.message.clone());
                }
                PodUpdate::Event(e) if e.event.type_.as_str() == "Warning" => {
                    other_warnings += 1;
                    first_unhealthy
                        .get_or_insert(format!("{}: {}", e.event.reason, e.event.message));
                }
                PodUpdate::Terminated(_) => bail!("a pod terminated"),
                _ => {}
            }
        }
        let wall = t0.elapsed();
        let agent_pct = pct(self_cpu() - a0, wall);
        let agent_kib = proc_status_kib("self", "VmRSS");
        let server_pct = pct(
            proc_cpu(server_pid)
                .map(|c| c.0)
                .unwrap_or_default()
                .saturating_sub(server0),
            wall,
        );
        let (h1, t1c) = {
            let mut guard = ctx.server.lock().expect("server");
            server_counts(guard.as_mut().context("server")?, &mut out)?
        };
        anyhow::Ok(NetProbes {
            window: wall,
            http: h1 - h0,
            tcp: t1c - t0c,
            unhealthy,
            other_warnings,
            agent_pct,
            server_pct,
            agent_kib,
            first_unhealthy,
        })
    }
    .await;
    let teardown = fleet.delete_all().await;
    stop_server(ctx);
    let r = result?;
    teardown?;
    Ok(r)
}

fn stop_server(ctx: &Ctx) {
    if let Some(mut child) = ctx.server.lock().expect("server").take() {
        drop(child.stdin.take());
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// Deletes every pod still there (grace 0), waits for their sandboxes to go, then kills
/// whatever is left in the shims' sessions.
async fn cleanup(ctx: &Ctx) -> Result<()> {
    stop_server(ctx);
    ctx.shim_pids();
    let controls = ctx.controls.lock().expect("controls").clone();
    for c in &controls {
        c.delete(Some(0));
    }
    let deadline = Instant::now() + POD_DEADLINE;
    while ctx.pod_dirs() > 0 && Instant::now() < deadline {
        ctx.shim_pids();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let left = ctx.pod_dirs();
    // Last resort: nothing of ours may keep running.
    let sessions: HashSet<i32> = ctx
        .shims
        .lock()
        .expect("shims")
        .iter()
        .filter_map(|&p| i32::try_from(p).ok())
        .collect();
    let mut killed = 0;
    for p in all_processes() {
        if sessions.contains(&p.session) {
            signal(p.pid, Signal::KILL);
            killed += 1;
        }
    }
    if killed > 0 {
        progress(&format!("cleanup: killed {killed} leftover processes"));
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    if left > 0 {
        bail!("{left} pod directories were still there after deleting every pod");
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The summary

fn verdict(ok: bool) -> &'static str {
    if ok { "ok" } else { "MISSED" }
}

fn print_summary(opts: &Options, r: &Results, started: Timestamp, load: &str) {
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let mut rows: Vec<[String; 4]> = Vec::new();
    let mut row = |a: String, b: String, c: &str, d: &str| {
        rows.push([a, b, c.to_string(), d.to_string()]);
    };
    if let Some(kib) = r.agent_idle_kib {
        row(
            "agent RSS, idle (no pod)".into(),
            format!("{:.1} MiB", mib(kib)),
            "≤ 30 MiB",
            verdict(mib(kib) <= 30.0),
        );
    }
    if let Some(s) = &r.start_one {
        row(
            format!("pod start, 1 container (n={})", s.n),
            format!("p50 {}  p99 {}  max {}", ms(s.p50), ms(s.p99), ms(s.max)),
            "p99 ≤ 50 ms",
            verdict(s.p99 <= Duration::from_millis(50)),
        );
    }
    if let Some(s) = &r.start_idle {
        row(
            format!(
                "pod start, 1 container, after {} ms of quiet (n={})",
                IDLE_PAUSE.as_millis(),
                s.n
            ),
            format!("p50 {}  p99 {}  max {}", ms(s.p50), ms(s.p99), ms(s.max)),
            "-",
            "",
        );
    }
    if let Some(s) = &r.start_init {
        row(
            format!("pod start, 2 init + 1 app (n={})", s.n),
            format!("p50 {}  p99 {}  max {}", ms(s.p50), ms(s.p99), ms(s.max)),
            "p99 ≤ 100 ms",
            verdict(s.p99 <= Duration::from_millis(100)),
        );
    }
    if let (Some(a), Some(b)) = (&r.sandbox, &r.container_start) {
        row(
            format!(
                "  (runtime alone: create_sandbox; start_container, n={})",
                a.n
            ),
            format!(
                "p50 {}  p99 {};  p50 {}  p99 {}",
                ms(a.p50),
                ms(a.p99),
                ms(b.p50),
                ms(b.p99)
            ),
            "-",
            "",
        );
    }
    if let Some(s) = &r.teardown_one {
        row(
            "  (delete → pod terminated, 1 container)".into(),
            format!("p50 {}  p99 {}", ms(s.p50), ms(s.p99)),
            "-",
            "",
        );
    }
    if let Some(s) = &r.exit_stamp {
        row(
            format!("container exit → status (n={})", s.n),
            format!("p50 {}  p99 {}  max {}", ms(s.p50), ms(s.p99), ms(s.max)),
            "p99 ≤ 20 ms",
            verdict(s.p99 <= Duration::from_millis(20)),
        );
    }
    if let Some(s) = &r.exit_shim {
        row(
            "  (from the shim's finishedAt)".into(),
            format!("p50 {}  p99 {}", ms(s.p50), ms(s.p99)),
            "-",
            "",
        );
    }
    if let Some(s) = &r.reap_lag {
        row(
            "  (exit → shim's finishedAt)".into(),
            format!("p50 {}  p99 {}", ms(s.p50), ms(s.p99)),
            "-",
            "",
        );
    }
    if let Some(b) = &r.burst {
        row(
            format!("{BURST_PODS} pods at once until all running"),
            format!(
                "{:.2} s (per pod p50 {}  p99 {})",
                b.wall.as_secs_f64(),
                ms(b.per_pod.p50),
                ms(b.per_pod.p99)
            ),
            "≤ 2 s",
            verdict(b.wall <= Duration::from_secs(2)),
        );
        if let Some(kib) = b.agent_kib {
            row(
                format!("agent RSS, {BURST_PODS} running pods"),
                format!(
                    "{:.1} MiB (peak {:.1} MiB)",
                    mib(kib),
                    mib(b.agent_hwm_kib.unwrap_or(0))
                ),
                "≤ 60 MiB",
                verdict(mib(kib) <= 60.0),
            );
        }
        if !b.shim_kib.is_empty() {
            let median = |v: &[u64]| v.get(v.len() / 2).copied().unwrap_or(0);
            row(
                format!("shim RSS (VmRSS, median of {})", b.shim_kib.len()),
                format!(
                    "{:.2} MiB (max {:.2} MiB)",
                    mib(median(&b.shim_kib)),
                    mib(*b.shim_kib.last().unwrap_or(&0))
                ),
                "≤ 1.5 MiB",
                verdict(mib(median(&b.shim_kib)) <= 1.5),
            );
            row(
                "  (shim PSS; USS = private pages only)".into(),
                format!(
                    "PSS {:.2} MiB, USS {:.2} MiB",
                    mib(median(&b.shim_pss_kib)),
                    mib(median(&b.shim_uss_kib))
                ),
                "-",
                "",
            );
        }
        row(
            format!("  (agent CPU, {BURST_PODS} idle pods)"),
            format!("{:.2} % of a core", b.idle_cpu_pct),
            "-",
            "",
        );
        row(
            format!("  (delete {BURST_PODS} pods → all terminated)"),
            format!("{:.2} s", b.teardown.as_secs_f64()),
            "-",
            "",
        );
    }
    if let Some(n) = &r.http {
        let secs = n.window.as_secs_f64();
        row(
            format!(
                "HTTP+TCP probes, {} pods × {PROBE_CONTAINERS} × 2, period 1 s, {:.0} s",
                PROBE_PODS, secs
            ),
            format!(
                "{} false failures, {:.0} probes/s ({:.0} http + {:.0} tcp); agent CPU {:.1} % \
                 of a core",
                n.unhealthy,
                (n.http + n.tcp) as f64 / secs,
                n.http as f64 / secs,
                n.tcp as f64 / secs,
                n.agent_pct
            ),
            "0 at ≤ 15 %",
            verdict(n.unhealthy == 0 && n.other_warnings == 0 && n.agent_pct <= 15.0),
        );
        row(
            "  (probe server CPU; agent RSS then)".into(),
            format!(
                "{:.1} % of a core; {:.1} MiB{}",
                n.server_pct,
                mib(n.agent_kib.unwrap_or(0)),
                if n.other_warnings > 0 {
                    format!("; {} other warnings", n.other_warnings)
                } else {
                    String::new()
                }
            ),
            "-",
            "",
        );
        if let Some(first) = &n.first_unhealthy {
            row("  (first failure)".into(), first.clone(), "-", "");
        }
    }
    if let Some(e) = &r.exec {
        row(
            format!(
                "exec probes, {BURST_PODS} pods, period 10 s, {:.0} s",
                e.window.as_secs_f64()
            ),
            format!(
                "agent {:.2} % + shims {:.2} % + probe processes {:.2} % = {:.2} % of a core; \
                 {} failures",
                e.agent_pct,
                e.shims_pct,
                e.children_pct,
                e.agent_pct + e.shims_pct + e.children_pct,
                e.unhealthy
            ),
            "-",
            "",
        );
    }
    match &r.podman {
        Some(podman::Outcome::Measured { one, init }) => {
            for (label, samples, ours) in [
                ("1 container", one, &r.start_one),
                ("2 init + 1 app", init, &r.start_init),
            ] {
                let s = stats(samples.clone());
                let ratio = ours
                    .as_ref()
                    .map(|o| {
                        format!(
                            "; podman/podvisor p50 = {:.0}×",
                            s.p50.as_secs_f64() / o.p50.as_secs_f64().max(1e-9)
                        )
                    })
                    .unwrap_or_default();
                row(
                    format!("podman kube play, {label} (n={})", s.n),
                    format!("p50 {}  p99 {}{ratio}", ms(s.p50), ms(s.p99)),
                    "-",
                    "",
                );
            }
        }
        Some(podman::Outcome::Skipped(why)) => {
            row(
                "podman kube play".into(),
                format!("skipped: {why}"),
                "-",
                "",
            );
        }
        None => {}
    }
    let widths = rows.iter().fold([0usize; 4], |mut w, r| {
        for (w, c) in w.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
        w
    });
    let pad = |s: &str, w: usize| format!("{s}{}", " ".repeat(w.saturating_sub(s.chars().count())));
    let mut out = String::new();
    out.push_str(&format!(
        "\npodvisor runtime benchmarks, {} ({} mode, {} runtime class), {cores} cores, load \
         average at start {load}\n\n",
        started.strftime("%Y-%m-%d %H:%M UTC"),
        if opts.quick { "quick" } else { "full" },
        if opts.oci { "oci" } else { "process" }
    ));
    let header = ["measure", "measured", "target", ""];
    for r in std::iter::once(header.map(String::from)).chain(rows) {
        out.push_str(&format!(
            "{}  {}  {}  {}\n",
            pad(&r[0], widths[0]),
            pad(&r[1], widths[1]),
            pad(&r[2], widths[2]),
            r[3]
        ));
    }
    print!("{out}");
    let _ = std::io::stdout().flush();
}

// ---------------------------------------------------------------------------------------------
// Helper processes

/// `stamp-exit FILE MS`: sleeps MS milliseconds, writes the wall-clock time (ns since the
/// epoch) to FILE and exits at once.
fn stamp_exit(args: &[String]) -> Result<()> {
    let [file, delay] = args else {
        bail!("usage: stamp-exit FILE MS");
    };
    std::thread::sleep(Duration::from_millis(delay.parse()?));
    let now = Timestamp::now().as_nanosecond();
    std::fs::write(file, format!("{now}\n"))?;
    std::process::exit(0);
}

/// `serve`: the probe target. 5 HTTP listeners (any GET → 200 `ok`, then close) and 5 TCP
/// listeners (accept, close) on 127.0.0.1; prints `ports H,.. T,..`; each line on stdin is
/// answered with `counts HTTP TCP`; exits at EOF.
fn serve() -> Result<()> {
    let http_count = Arc::new(AtomicU64::new(0));
    let tcp_count = Arc::new(AtomicU64::new(0));
    let mut http_ports = Vec::new();
    let mut tcp_ports = Vec::new();
    for _ in 0..5 {
        let l = std::net::TcpListener::bind("127.0.0.1:0")?;
        http_ports.push(l.local_addr()?.port().to_string());
        let count = Arc::clone(&http_count);
        std::thread::spawn(move || {
            for conn in l.incoming().flatten() {
                if answer_http(conn).is_ok() {
                    count.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        let l = std::net::TcpListener::bind("127.0.0.1:0")?;
        tcp_ports.push(l.local_addr()?.port().to_string());
        let count = Arc::clone(&tcp_count);
        std::thread::spawn(move || {
            for conn in l.incoming().flatten() {
                drop(conn);
                count.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
    let mut stdout = std::io::stdout();
    writeln!(
        stdout,
        "ports {} {}",
        http_ports.join(","),
        tcp_ports.join(",")
    )?;
    stdout.flush()?;
    for line in std::io::stdin().lock().lines() {
        line?;
        writeln!(
            stdout,
            "counts {} {}",
            http_count.load(Ordering::Relaxed),
            tcp_count.load(Ordering::Relaxed)
        )?;
        stdout.flush()?;
    }
    Ok(())
}

fn answer_http(mut conn: std::net::TcpStream) -> std::io::Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(2)))?;
    let mut buf = [0_u8; 4096];
    let mut got = Vec::new();
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = conn.read(&mut buf)?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        got.extend_from_slice(&buf[..n]);
    }
    conn.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
    )?;
    conn.shutdown(std::net::Shutdown::Write)
}

// ---------------------------------------------------------------------------------------------
// podman

mod podman {
    //! The same pods with `podman kube play`: host network, runc, a busybox-static rootfs
    //! imported as a local image, private `CONTAINERS_CONF` (see
    //! `shared/design/machine-and-peers.md`). Runs in a child process of the bench.

    use anyhow::{Context, Result, bail};
    use std::path::{Path, PathBuf};
    use std::process::{Command, Stdio};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};

    const IMAGE: &str = "localhost/podvisor-bench-busybox:latest";
    const PAUSE_PREFIX: &str = "localhost/podman-pause";

    /// What the comparison gave.
    pub enum Outcome {
        Measured {
            one: Vec<Duration>,
            init: Vec<Duration>,
        },
        Skipped(String),
    }

    /// Runs `EXE podman RUNS` and reads its answer (one line of milliseconds per shape, or
    /// `skipped REASON`).
    pub fn run_child(exe: &Path, runs: usize) -> Outcome {
        super::progress(&format!("podman kube play, {runs} runs per shape"));
        let out = Command::new(exe)
            .arg("podman")
            .arg(runs.to_string())
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output();
        let out = match out {
            Ok(o) => o,
            Err(e) => return Outcome::Skipped(format!("could not run the podman child: {e}")),
        };
        let text = String::from_utf8_lossy(&out.stdout);
        let mut lines = text.lines();
        let parse = |l: Option<&str>, tag: &str| -> Option<Vec<Duration>> {
            l?.strip_prefix(tag)?
                .split_whitespace()
                .map(|v| {
                    v.parse::<f64>()
                        .ok()
                        .map(|ms| Duration::from_secs_f64(ms / 1000.0))
                })
                .collect()
        };
        match lines.next() {
            Some(l) if l.starts_with("skipped ") => Outcome::Skipped(l[8..].to_string()),
            first => match (parse(first, "one "), parse(lines.next(), "init ")) {
                (Some(one), Some(init)) if out.status.success() => Outcome::Measured { one, init },
                _ => Outcome::Skipped(format!(
                    "the podman run failed ({}): {}",
                    out.status,
                    text.trim()
                )),
            },
        }
    }

    fn on_path(program: &str) -> Option<PathBuf> {
        std::env::var_os("PATH")?
            .to_str()?
            .split(':')
            .map(|d| Path::new(d).join(program))
            .find(|p| p.is_file())
    }

    /// The child: prints `one MS...` and `init MS...` (or `skipped REASON`).
    pub fn child(args: &[String]) -> Result<()> {
        let runs: usize = args.first().map_or(Ok(20), |s| s.parse())?;
        if on_path("podman").is_none() {
            println!("skipped podman not installed (scripts/bench --install-peers installs it)");
            return Ok(());
        }
        if on_path("runc").is_none() {
            println!("skipped runc not installed");
            return Ok(());
        }
        let Some(busybox) = on_path("busybox") else {
            println!("skipped busybox-static not installed");
            return Ok(());
        };
        let head = std::fs::read(&busybox)?;
        if head.windows(8).take(8192).any(|w| w == b"ld-linux") {
            println!(
                "skipped {} is not static (install busybox-static)",
                busybox.display()
            );
            return Ok(());
        }
        let interrupted = Arc::new(AtomicBool::new(false));
        for signal in [libc::SIGINT, libc::SIGTERM] {
            signal_flag(signal, &interrupted);
        }
        let dir =
            std::env::temp_dir().join(format!("podvisor-bench-podman-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let mut session = Session {
            dir: dir.clone(),
            pods: Vec::new(),
            imported: false,
            pause_existed: images().iter().any(|i| i.starts_with(PAUSE_PREFIX)),
        };
        let result = session.measure(runs, &busybox, &interrupted);
        session.clean();
        let (one, init) = result?;
        let line = |v: &[Duration]| {
            v.iter()
                .map(|d| format!("{:.3}", d.as_secs_f64() * 1000.0))
                .collect::<Vec<_>>()
                .join(" ")
        };
        println!("one {}", line(&one));
        println!("init {}", line(&init));
        Ok(())
    }

    /// Sets `flag` when `signal` arrives (instead of dying mid-way with pods left behind).
    fn signal_flag(signal: i32, flag: &Arc<AtomicBool>) {
        static FLAG: AtomicBool = AtomicBool::new(false);
        extern "C" fn handler(_: i32) {
            FLAG.store(true, Ordering::SeqCst);
        }
        // SAFETY: the handler only stores to an atomic (async-signal-safe).
        #[allow(unsafe_code)]
        unsafe {
            libc::signal(signal, handler as *const () as libc::sighandler_t);
        }
        let flag = Arc::clone(flag);
        std::thread::spawn(move || {
            loop {
                if FLAG.load(Ordering::SeqCst) {
                    flag.store(true, Ordering::SeqCst);
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
    }

    fn images() -> Vec<String> {
        Command::new("podman")
            .args(["images", "--format", "{{.Repository}}:{{.Tag}}"])
            .stderr(Stdio::null())
            .output()
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    }

    struct Session {
        dir: PathBuf,
        /// Pods created and not yet removed.
        pods: Vec<String>,
        imported: bool,
        pause_existed: bool,
    }

    impl Session {
        fn podman(&self) -> Command {
            let mut c = Command::new("podman");
            c.env("CONTAINERS_CONF", self.dir.join("containers.conf"));
            c.stdin(Stdio::null());
            c
        }

        fn run(&self, args: &[&str]) -> Result<String> {
            let out = self
                .podman()
                .args(args)
                .output()
                .with_context(|| format!("podman {}", args.join(" ")))?;
            if !out.status.success() {
                bail!(
                    "podman {} failed: {}",
                    args.join(" "),
                    String::from_utf8_lossy(&out.stderr).trim()
                );
            }
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        }

        fn setup(&mut self, busybox: &Path) -> Result<()> {
            std::fs::write(
                self.dir.join("containers.conf"),
                "[containers]\ndefault_ulimits = [\"nofile=20000:20000\", \
                 \"nproc=32768:32768\"]\n[engine]\nruntime = \"runc\"\n",
            )?;
            let rootfs = self.dir.join("rootfs");
            std::fs::create_dir_all(rootfs.join("bin"))?;
            std::fs::copy(busybox, rootfs.join("bin/busybox"))?;
            for applet in ["sh", "sleep", "true"] {
                std::os::unix::fs::symlink("busybox", rootfs.join("bin").join(applet))?;
            }
            let tar = self.dir.join("rootfs.tar");
            let status = Command::new("tar")
                .arg("-C")
                .arg(&rootfs)
                .arg("-cf")
                .arg(&tar)
                .arg(".")
                .status()?;
            if !status.success() {
                bail!("tar failed");
            }
            self.imported = true;
            self.run(&[
                "import",
                "--quiet",
                "--change",
                "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                &tar.to_string_lossy(),
                IMAGE,
            ])?;
            Ok(())
        }

        fn measure(
            &mut self,
            runs: usize,
            busybox: &Path,
            interrupted: &AtomicBool,
        ) -> Result<(Vec<Duration>, Vec<Duration>)> {
            self.setup(busybox)?;
            let mut one = Vec::new();
            let mut init = Vec::new();
            for (shape, out) in [("one", &mut one), ("init", &mut init)] {
                // Two warm-up runs (the first builds podman's pause image).
                for i in 0..runs + 2 {
                    if interrupted.load(Ordering::SeqCst) {
                        bail!("interrupted");
                    }
                    let d = self.play_once(shape, i)?;
                    if i >= 2 {
                        out.push(d);
                    }
                }
                super::progress(&format!(
                    "  podman {shape}: p50 {}",
                    super::ms(super::stats(out.clone()).p50)
                ));
            }
            Ok((one, init))
        }

        /// One `kube play` until the app container runs; then the pod is removed.
        fn play_once(&mut self, shape: &str, i: usize) -> Result<Duration> {
            let name = format!("pvbench-{}-{shape}-{i}", std::process::id());
            let init = if shape == "init" {
                format!(
                    "  restartPolicy: OnFailure\n  initContainers:\n  \
                     - {{name: init1, image: {IMAGE}, imagePullPolicy: IfNotPresent, command: [\"true\"]}}\n  \
                     - {{name: init2, image: {IMAGE}, imagePullPolicy: IfNotPresent, command: [\"true\"]}}\n"
                )
            } else {
                String::new()
            };
            let yaml = format!(
                "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  hostNetwork: true\n{init}  \
                 containers:\n  - {{name: app, image: {IMAGE}, imagePullPolicy: IfNotPresent, command: [sleep, \"3600\"]}}\n"
            );
            let file = self.dir.join(format!("{name}.yaml"));
            std::fs::write(&file, yaml)?;
            self.pods.push(name.clone());
            let t0 = Instant::now();
            self.run(&["kube", "play", "--quiet", &file.to_string_lossy()])?;
            let mut elapsed = t0.elapsed();
            let container = format!("{name}-app");
            let deadline = t0 + Duration::from_secs(30);
            loop {
                let state = self.run(&[
                    "container",
                    "inspect",
                    "-f",
                    "{{.State.Status}}",
                    &container,
                ])?;
                if state.trim() == "running" {
                    break;
                }
                if Instant::now() > deadline {
                    bail!("{container} is {} after 30 s", state.trim());
                }
                std::thread::sleep(Duration::from_millis(5));
                // Not running when `kube play` returned: count until it is.
                elapsed = t0.elapsed();
            }
            self.remove(&name)?;
            Ok(elapsed)
        }

        fn remove(&mut self, name: &str) -> Result<()> {
            self.run(&["pod", "stop", "-t", "0", name])?;
            self.run(&["pod", "rm", name])?;
            self.pods.retain(|p| p != name);
            Ok(())
        }

        /// Removes every pod left, the image, podman's pause image if it was built here, and
        /// the directory.
        fn clean(&mut self) {
            for name in std::mem::take(&mut self.pods) {
                let _ = self.run(&["pod", "stop", "-t", "0", &name]);
                let _ = self.run(&["pod", "rm", "-f", &name]);
            }
            if self.imported {
                let _ = self.run(&["rmi", IMAGE]);
            }
            if !self.pause_existed {
                for image in images().iter().filter(|i| i.starts_with(PAUSE_PREFIX)) {
                    let _ = self.run(&["rmi", image]);
                }
            }
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
