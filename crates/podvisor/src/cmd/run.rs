//! `podvisor run FILE... [--output text|json] [--state-dir DIR] [--backoff default|reduced]
//! [--max-restart-period DUR]`: run pods for real, in the foreground.
//!
//! Every pod of every file is decoded, defaulted and validated first; any bad input is reported
//! (kubectl's messages) and nothing runs (exit 2). Then each pod gets a pod worker on the
//! process runtime, and `run` prints what happens until every pod has terminated:
//! - text: a `kubectl get pods -w` table (NAME READY STATUS RESTARTS AGE), redrawn in place on a
//!   terminal and appended row by row otherwise, with one line per event:
//!   `<age> <Type> <Reason> pod/<name> [<container>] <message>` (age as in the AGE column);
//! - json: the line format of `podvisor simulate --output json` (`t` is seconds since `run`
//!   started); with several pods every line also has `"pod"`.
//!
//! Ctrl-C, SIGTERM or SIGHUP deletes every pod with its grace period (the hidden
//! `--delete-grace SECONDS` overrides it, for a scripted `DELETE(pod, gracePeriodSeconds)`); a
//! second one forces (grace 0).
//! Exit status: 0 when every pod Succeeded or was still healthy when interrupted, 1 when any
//! failed, 2 on bad input.

use super::run_print::Printer;
use crate::{BackoffCurve, OutputFormat};
use anyhow::{Context, bail};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use podvisor_agent::objects::StaticObjects;
use podvisor_agent::{Agent, PodUpdate};
use podvisor_api::{FeatureGates, apply_defaults, drop_disabled_fields, validate_pod_with_gates};
use podvisor_lifecycle::sim::script::parse_duration;
use podvisor_lifecycle::{BackoffConfig, MachineConfig};
use podvisor_runtime::Runtime;
use std::collections::HashSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

/// Arguments of `podvisor run`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Pod manifests (YAML or JSON; `-` for stdin).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
    /// Where pods keep their files and logs (default: a temporary directory, removed at the end).
    #[arg(long)]
    pub state_dir: Option<PathBuf>,
    /// CrashLoopBackOff curve.
    #[arg(long, value_enum, default_value_t = BackoffCurve::Default)]
    pub backoff: BackoffCurve,
    /// `crashLoopBackOff.maxContainerRestartPeriod` (1s..300s).
    #[arg(long)]
    pub max_restart_period: Option<String>,
    /// Feature gates, as kube's `--feature-gates`: `A=true,B=false`. Known:
    /// RestartAllContainersOnContainerExits (alpha, default false; KEP-5532: restart rules
    /// with the action `RestartAllContainers`).
    #[arg(long, value_parser = super::parse_feature_gates, default_value = "")]
    pub feature_gates: podvisor_api::FeatureGates,
    /// Hidden, for tests: the grace period (seconds) of the delete the first interrupt makes,
    /// i.e. `DELETE(pod, gracePeriodSeconds)` at the moment the signal is sent (default: each
    /// pod's `terminationGracePeriodSeconds`).
    #[arg(long, hide = true, value_parser = clap::value_parser!(i64).range(0..))]
    pub delete_grace: Option<i64>,
    /// Do not show the containers' output (text output shows each line, prefixed with its
    /// container's name).
    #[arg(long)]
    pub no_logs: bool,
    /// The runtime (images come from `<state-dir>/images`, or `serve`'s default state
    /// directory's when the state directory is temporary).
    #[command(flatten)]
    pub runtime: super::runtime_args::RuntimeArgs,
    /// Container log rotation.
    #[command(flatten)]
    pub container_logs: super::container_log_args::ContainerLogArgs,
}

/// Runs the pods in the foreground until every one has terminated; returns the exit code.
///
/// # Errors
///
/// The engine's own failures (state directory, runtime start-up).
pub fn run(args: &Args) -> anyhow::Result<i32> {
    let config = machine_config(args)?;
    args.container_logs.config()?;
    let Some((pods, objects)) = load_pods(&args.files, args.feature_gates) else {
        return Ok(2);
    };
    let (state_dir, temporary) = match &args.state_dir {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("creating state directory {}", dir.display()))?;
            (dir.clone(), false)
        }
        None => (temp_state_dir()?, true),
    };
    let images = if temporary {
        super::serve::default_state_dir()?.join("images")
    } else {
        state_dir.join("images")
    };
    let result = run_in(&state_dir, &images, pods, objects, config, args);
    if temporary && let Err(e) = std::fs::remove_dir_all(&state_dir) {
        eprintln!("warning: removing {}: {e}", state_dir.display());
    }
    result
}

fn run_in(
    state_dir: &Path,
    images: &Path,
    pods: Vec<Pod>,
    objects: StaticObjects,
    config: MachineConfig,
    args: &Args,
) -> anyhow::Result<i32> {
    let (output, delete_grace) = (args.output, args.delete_grace);
    let shim = std::env::current_exe().context("finding the podvisor executable for the shim")?;
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    tokio.block_on(async {
        let runtime = Arc::new(args.runtime.runtime(state_dir, images, &shim)?);
        let log_manager = args.container_logs.spawn(Arc::clone(&runtime))?;
        let agent = Agent::new(Arc::clone(&runtime), config).with_objects(Arc::new(objects));
        let logs = (output == OutputFormat::Text && !args.no_logs)
            .then(|| super::run_logs::LogTail::new(state_dir, pods.len() > 1));
        let code = supervise(&agent, pods, output, delete_grace, logs).await;
        if let Some(manager) = log_manager {
            manager.abort();
        }
        runtime.release_warm_sandboxes().await;
        code
    })
}

/// The back-off curve and node identity from the flags.
fn machine_config(args: &Args) -> anyhow::Result<MachineConfig> {
    let mut backoff = match args.backoff {
        BackoffCurve::Default => BackoffConfig::default(),
        BackoffCurve::Reduced => BackoffConfig::reduced(),
    };
    if let Some(max) = &args.max_restart_period {
        let max = parse_duration(max).map_err(|e| anyhow::anyhow!("--max-restart-period: {e}"))?;
        if max < Duration::from_secs(1) || max > Duration::from_secs(300) {
            bail!("--max-restart-period: must be between 1s and 300s");
        }
        backoff = backoff.with_max_period(max);
    }
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_lowercase())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_string());
    Ok(MachineConfig {
        backoff,
        node_name: hostname,
        // The process runtime shares the host's network.
        host_ip: Some("127.0.0.1".to_string()),
        // None until the pod's sandbox exists, as the kubelet reports it: the runtime gives
        // its address then (`PodMachine::set_pod_ip`: 127.0.0.1 for a process pod, the CNI
        // address for an oci pod, which must never show the host's loopback first).
        pod_ip: None,
        allocatable: super::serve::node_allocatable(),
        gates: args.feature_gates,
        ..MachineConfig::default()
    })
}

/// Decodes, defaults and validates every pod, ConfigMap and Secret of every file; prints every
/// problem and returns None when there was any.
fn load_pods(files: &[PathBuf], gates: FeatureGates) -> Option<(Vec<Pod>, StaticObjects)> {
    let mut pods = Vec::new();
    let mut objects = StaticObjects::default();
    let mut ok = true;
    let mut names = HashSet::new();
    for file in files {
        let source = file.display().to_string();
        let text = if file.as_os_str() == "-" {
            let mut t = String::new();
            std::io::stdin().read_to_string(&mut t).map(|_| t)
        } else {
            std::fs::read_to_string(file)
        };
        let text = match text {
            Ok(t) => t,
            Err(e) => {
                eprintln!("{source}: reading the file: {e}");
                ok = false;
                continue;
            }
        };
        let decoded = match podvisor_api::decode_manifest(&text, &source) {
            Ok(m) => m,
            Err(e) => {
                // The decoder's message begins with `source`.
                eprintln!("{e}");
                ok = false;
                continue;
            }
        };
        for note in &decoded.expanded {
            eprintln!("{note}");
        }
        for mut cm in decoded.config_maps {
            default_namespace(&mut cm.metadata);
            match podvisor_api::validation::validate_config_map(&cm) {
                Ok(()) => objects.add_config_map(cm),
                Err(e) => {
                    eprintln!("{source}: {e}");
                    ok = false;
                }
            }
        }
        for mut secret in decoded.secrets {
            default_namespace(&mut secret.metadata);
            match podvisor_api::validation::validate_secret(&secret) {
                Ok(()) => objects.add_secret(secret),
                Err(e) => {
                    eprintln!("{source}: {e}");
                    ok = false;
                }
            }
        }
        for mut pod in decoded.pods {
            apply_defaults(&mut pod);
            drop_disabled_fields(&mut pod, None);
            if let Err(e) = validate_pod_with_gates(&pod, gates) {
                eprintln!("{source}: {e}");
                if let Some(hint) = pod
                    .spec
                    .as_ref()
                    .and_then(|spec| podvisor_api::missing_gate_hint(spec, gates))
                {
                    eprintln!("{hint}");
                }
                ok = false;
                continue;
            }
            let meta = &pod.metadata;
            if let Some(name) = meta.name.as_deref().filter(|n| !n.is_empty()) {
                let namespace = meta.namespace.as_deref().unwrap_or("default");
                if !names.insert((namespace.to_string(), name.to_string())) {
                    eprintln!(
                        "Error from server (AlreadyExists): error when creating \"{source}\": \
                         pods \"{name}\" already exists"
                    );
                    ok = false;
                    continue;
                }
            }
            pods.push(pod);
        }
    }
    ok.then_some((pods, objects))
}

/// Objects of a file without a namespace live in `default`, as `kubectl create` puts them.
fn default_namespace(meta: &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) {
    if meta.namespace.as_deref().unwrap_or("").is_empty() {
        meta.namespace = Some("default".to_owned());
    }
}

/// A fresh directory under the system's temporary directory.
fn temp_state_dir() -> anyhow::Result<PathBuf> {
    let uid = podvisor_agent::new_uid();
    let dir = std::env::temp_dir().join(format!("podvisor-run-{}", &uid[..8]));
    std::fs::create_dir(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

/// What is known about one pod.
pub(super) struct Tracked {
    /// The latest pod object (None until its first status).
    pub(super) pod: Option<Pod>,
    terminated: bool,
    /// Whether it was healthy when the run was interrupted (None: not interrupted while it
    /// ran).
    healthy_at_interrupt: Option<bool>,
}

/// Runs every pod, prints their progress, handles Ctrl-C; returns the exit code.
async fn supervise<R: Runtime>(
    agent: &Agent<R>,
    pods: Vec<Pod>,
    output: OutputFormat,
    delete_grace: Option<i64>,
    mut logs: Option<super::run_logs::LogTail>,
) -> anyhow::Result<i32> {
    let mut interrupt = signal(SignalKind::interrupt()).context("handling SIGINT")?;
    let mut terminate = signal(SignalKind::terminate()).context("handling SIGTERM")?;
    // A closed terminal must not leave the pods running either.
    let mut hangup = signal(SignalKind::hangup()).context("handling SIGHUP")?;
    let start = Timestamp::now();
    let (tx, mut rx) = mpsc::unbounded_channel::<(usize, PodUpdate)>();
    let mut controls = Vec::new();
    let mut workers = JoinSet::new();
    let mut tracked = Vec::new();
    let mut names = Vec::new();
    for (i, pod) in pods.into_iter().enumerate() {
        let mut handle = agent.spawn_pod(pod);
        names.push(handle.name().to_string());
        controls.push(handle.control());
        tracked.push(Tracked {
            pod: None,
            terminated: false,
            healthy_at_interrupt: None,
        });
        let tx = tx.clone();
        workers.spawn(async move {
            while let Some(update) = handle.next_update().await {
                let _ = tx.send((i, update));
            }
            handle.join().await
        });
    }
    drop(tx);
    let mut printer = Printer::new(output, start, names.clone());
    let mut started = super::run_text::Started::default();
    let mut interrupts = 0u32;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut log_poll = tokio::time::interval(LOG_POLL);
    loop {
        let wake = tokio::select! {
            update = rx.recv() => match update {
                Some(update) => Wake::Update(update),
                // Every pod worker has finished.
                None => break,
            },
            _ = interrupt.recv() => Wake::Interrupt,
            _ = terminate.recv() => Wake::Interrupt,
            _ = hangup.recv() => Wake::Interrupt,
            _ = tick.tick() => Wake::Tick,
            _ = log_poll.tick(), if logs.is_some() => Wake::Logs,
        };
        // Lines in time order: an instance's output only once its start was said (its
        // events arrive after it may have written), and before the row saying it exited.
        if let Wake::Update((i, PodUpdate::Status(p) | PodUpdate::Terminated(p))) = &wake {
            started.note(&names[*i], p);
            if let Some(tail) = logs.as_mut()
                && reports_exit(p)
            {
                printer.output_lines(&tail.poll_shown(|p, c, n| started.shown(p, c, n)));
            }
        }
        match wake {
            Wake::Update((i, PodUpdate::Status(pod))) => {
                printer.status(i, &pod);
                tracked[i].pod = Some(*pod);
            }
            Wake::Update((i, PodUpdate::Event(event))) => printer.event(i, &event),
            Wake::Update((i, PodUpdate::Terminated(pod))) => {
                printer.status(i, &pod);
                printer.deleted(i);
                tracked[i].pod = Some(*pod);
                tracked[i].terminated = true;
            }
            Wake::Interrupt => on_interrupt(
                &mut interrupts,
                &mut tracked,
                &controls,
                &mut printer,
                delete_grace,
            ),
            Wake::Tick => printer.tick(),
            Wake::Logs => {
                if let Some(tail) = logs.as_mut() {
                    printer.output_lines(&tail.poll_shown(|p, c, n| started.shown(p, c, n)));
                }
            }
        }
    }
    while let Some(joined) = workers.join_next().await {
        joined.context("a pod forwarder task failed")??;
    }
    // What the last containers wrote before they ended.
    if let Some(tail) = logs.as_mut() {
        printer.output_lines(&tail.poll());
    }
    printer.finish();
    printer.summary(&tracked);
    Ok(exit_code(&tracked))
}

/// Whether a container of `pod` has terminated (its output must be shown before the row).
fn reports_exit(pod: &Pod) -> bool {
    let status = pod.status.as_ref();
    [
        status.and_then(|s| s.init_container_statuses.as_ref()),
        status.and_then(|s| s.container_statuses.as_ref()),
    ]
    .into_iter()
    .flatten()
    .flatten()
    .any(|c| c.state.as_ref().is_some_and(|s| s.terminated.is_some()))
}

/// How often `run` shows what the containers wrote.
const LOG_POLL: Duration = Duration::from_millis(100);

/// What woke `supervise`.
enum Wake {
    Update((usize, PodUpdate)),
    Interrupt,
    Tick,
    Logs,
}

/// First interrupt: delete every pod gracefully (with `grace`, or each pod's own grace period);
/// later ones: force (grace 0).
fn on_interrupt(
    interrupts: &mut u32,
    tracked: &mut [Tracked],
    controls: &[podvisor_agent::PodControl],
    printer: &mut Printer,
    grace: Option<i64>,
) {
    *interrupts += 1;
    if *interrupts == 1 {
        for t in tracked.iter_mut().filter(|t| !t.terminated) {
            t.healthy_at_interrupt = Some(t.pod.as_ref().is_none_or(healthy));
        }
        printer.note("Deleting every pod (interrupt again to force)");
        for (i, c) in controls.iter().enumerate() {
            c.delete(grace);
            if !tracked[i].terminated {
                // The grace period the agent uses: the delete's, else the pod's own.
                let own = tracked[i]
                    .pod
                    .as_ref()
                    .and_then(|p| p.spec.as_ref())
                    .and_then(|s| s.termination_grace_period_seconds);
                printer.deleting(i, grace.or(own).unwrap_or(30));
            }
        }
    } else {
        printer.note("Forcing deletion (grace period 0)");
        for c in controls {
            c.delete(Some(0));
        }
    }
}

/// A pod is healthy when it succeeded, or runs (or is still starting) without a failure
/// showing in kubectl's STATUS column.
fn healthy(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    match phase {
        Some("Succeeded") => true,
        Some("Failed") => false,
        _ => {
            let status = podvisor_lifecycle::kubectl::pod_status_text(pod);
            let init_progress = status
                .strip_prefix("Init:")
                .is_some_and(|s| s.starts_with(|c: char| c.is_ascii_digit()));
            init_progress
                || matches!(
                    status.as_str(),
                    "Running" | "Completed" | "Pending" | "ContainerCreating" | "PodInitializing"
                )
        }
    }
}

/// 0 when every pod succeeded or was healthy when interrupted, 1 otherwise.
fn exit_code(tracked: &[Tracked]) -> i32 {
    let failed = tracked.iter().any(|t| match t.healthy_at_interrupt {
        Some(h) => !h,
        None => {
            let phase = t
                .pod
                .as_ref()
                .and_then(|p| p.status.as_ref())
                .and_then(|s| s.phase.as_deref());
            phase != Some("Succeeded")
        }
    });
    i32::from(failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod_with(phase: &str, waiting: Option<&str>) -> Pod {
        let state = match waiting {
            Some(reason) => serde_json::json!({"waiting": {"reason": reason}}),
            None => serde_json::json!({"running": {}}),
        };
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "a", "image": "x"}]},
            "status": {
                "phase": phase,
                "containerStatuses": [{
                    "name": "a", "image": "x", "imageID": "", "ready": false,
                    "restartCount": 0, "state": state,
                }],
            },
        }))
        .unwrap()
    }

    #[test]
    fn health_at_interrupt() {
        assert!(healthy(&pod_with("Running", None)));
        assert!(healthy(&pod_with("Pending", Some("ContainerCreating"))));
        assert!(!healthy(&pod_with("Running", Some("CrashLoopBackOff"))));
        assert!(healthy(&pod_with("Succeeded", None)));
        assert!(!healthy(&pod_with("Failed", None)));
    }
}
