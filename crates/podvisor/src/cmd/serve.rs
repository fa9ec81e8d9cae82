//! `podvisor serve [--state-dir DIR] [--listen ADDR:PORT] [--manifests DIR] [--drain-on-exit]
//! [--backoff default|reduced] [--max-restart-period DUR] [--reset-empty-store]`: this machine
//! as a Kubernetes node with its own API, in one process.
//!
//! The store (`<state>/store.redb`), the API server (HTTPS with a self-generated CA and a bearer
//! token; `<state>/kubeconfig` is written once it answers) and the node agent (recovery of the
//! pods that ran before, then list + watch of every pod; static pods from `--manifests`).
//! SIGTERM or SIGINT stops the agent and the API and leaves the containers running, like the
//! kubelet: the next `serve` on the same state directory re-adopts them. With
//! `--drain-on-exit` every pod is deleted gracefully first (a second signal stops at once).
//! The state directory is root's only (0700; the store, token and keys 0600, also when an
//! older version left them readable). A damaged `store.redb` stops the start with exit 2 and
//! what to do (restore it, or move it aside); an empty one is refused unless
//! `--reset-empty-store`. A `--listen` address other than loopback is warned about. The API
//! also listens on the host's address on the `oci` pods' network (the CNI bridge's gateway,
//! same port; `podvisor_apiserver::ServeConfig::pod_network`), which those pods get as
//! `KUBERNETES_SERVICE_HOST`: the runtime is made before the API for that.
//! Exit status: 0 after a clean stop, 2 when the engine could not start.

use crate::BackoffCurve;
use anyhow::{Context, bail};
use podvisor_agent::Agent;
use podvisor_agent::node::{Node, NodeConfig};
use podvisor_apiserver::{ApiServer, ServeConfig, ServeError};
use podvisor_lifecycle::sim::script::parse_duration;
use podvisor_lifecycle::{BackoffConfig, MachineConfig};
use podvisor_runtime::{ExecError, ExecRequest, ExecSession};
use podvisor_store::{Store, StoreError, StoreOptions};
use std::future::Future;
use std::net::SocketAddr;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::signal::unix::{Signal, SignalKind, signal};

/// Arguments of `podvisor serve`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Where the store, credentials, kubeconfig, pods and logs live (default:
    /// /var/lib/podvisor as root, $XDG_STATE_HOME/podvisor or ~/.local/state/podvisor
    /// otherwise).
    #[arg(long)]
    pub state_dir: Option<PathBuf>,
    /// Where the API listens (port 0 picks a free port; the kubeconfig says which). Pods on
    /// the pod network reach it on this port at the network's gateway, where it listens too
    /// (a wildcard address covers it).
    #[arg(long, default_value = "127.0.0.1:6443")]
    pub listen: SocketAddr,
    /// Run every manifest in this directory as a static pod (re-read every second).
    #[arg(long)]
    pub manifests: Option<PathBuf>,
    /// On SIGTERM/SIGINT, delete every pod gracefully before exiting (default: leave the
    /// containers running for the next `serve`).
    #[arg(long)]
    pub drain_on_exit: bool,
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
    /// Take an existing empty (0-byte) store.redb for a new, empty store: every pod it may
    /// have held is forgotten. Without this flag an empty store file is refused.
    #[arg(long)]
    pub reset_empty_store: bool,
    /// PodGC (kube-controller-manager's): terminated pods beyond this number are deleted,
    /// oldest first (0: never).
    #[arg(long, default_value_t = podvisor_apiserver::podgc::DEFAULT_TERMINATED_POD_GC_THRESHOLD)]
    pub terminated_pod_gc_threshold: usize,
    /// The runtime.
    #[command(flatten)]
    pub runtime: super::runtime_args::RuntimeArgs,
    /// Container log rotation.
    #[command(flatten)]
    pub container_logs: super::container_log_args::ContainerLogArgs,
    /// Image garbage collection starts when the image file system is this full (percent;
    /// 100 turns it off), as the kubelet's `--image-gc-high-threshold`.
    #[arg(long, default_value_t = 85, value_parser = clap::value_parser!(u8).range(0..=100))]
    pub image_gc_high_threshold: u8,
    /// ... and frees down to this (percent, below the high threshold), as the kubelet's
    /// `--image-gc-low-threshold`.
    #[arg(long, default_value_t = 80, value_parser = clap::value_parser!(u8).range(0..=100))]
    pub image_gc_low_threshold: u8,
    /// Unused images younger than this are never collected (the kubelet's
    /// `--minimum-image-ttl-duration`).
    #[arg(long, default_value = "2m")]
    pub minimum_image_ttl_duration: String,
    /// How often image garbage collection runs (the kubelet's fixed 5m).
    #[arg(long, default_value = "5m")]
    pub image_gc_period: String,
    /// How often `configMap` and `secret` volumes are re-synced from their objects (the
    /// kubelet's `--sync-frequency`).
    #[arg(long, default_value = "1m")]
    pub sync_frequency: String,
    /// The hard eviction threshold, as the kubelet's `--eviction-hard`; podvisor's node
    /// evicts for the state directory's filesystem only: `nodefs.available<10%` (a
    /// percentage of its size, or a quantity such as `1Gi`); empty: none (no eviction, no
    /// `DiskPressure`).
    #[arg(long, default_value = podvisor_agent::eviction::DEFAULT_EVICTION_HARD)]
    pub eviction_hard: String,
    /// How long `DiskPressure` stays True after the threshold was last met (the kubelet's
    /// `--eviction-pressure-transition-period`).
    #[arg(long, default_value = "5m")]
    pub eviction_pressure_transition_period: String,
    /// How often the eviction manager measures and decides (the kubelet's fixed 10s).
    #[arg(long, default_value = "10s")]
    pub eviction_monitoring_interval: String,
}

/// The eviction manager of `args` for `state_dir`, publishing `DiskPressure` to `pressure`.
fn eviction(
    args: &Args,
    state_dir: &Path,
    pressure: tokio::sync::watch::Sender<bool>,
) -> anyhow::Result<Option<podvisor_agent::node::EvictionConfig>> {
    // `--eviction-hard=`: no hard threshold, as the kubelet's empty map (no DiskPressure).
    if args.eviction_hard.trim().is_empty() {
        return Ok(None);
    }
    let mut config = podvisor_agent::node::EvictionConfig::new(state_dir.to_path_buf(), pressure);
    config.threshold = podvisor_agent::eviction::parse_eviction_hard(&args.eviction_hard)
        .map_err(|e| anyhow::anyhow!("--eviction-hard: {e}"))?;
    config.pressure_transition_period =
        parse_duration(&args.eviction_pressure_transition_period)
            .map_err(|e| anyhow::anyhow!("--eviction-pressure-transition-period: {e}"))?;
    config.monitoring_interval = parse_duration(&args.eviction_monitoring_interval)
        .map_err(|e| anyhow::anyhow!("--eviction-monitoring-interval: {e}"))?;
    if config.monitoring_interval.is_zero() {
        bail!("--eviction-monitoring-interval must be positive");
    }
    Ok(Some(config))
}

/// The image garbage collection of `args`, checked as the kubelet checks its configuration
/// (`None`: turned off with a high threshold of 100).
fn image_gc(args: &Args) -> anyhow::Result<Option<(podvisor_runtime::ImageGcPolicy, Duration)>> {
    let (high, low) = (args.image_gc_high_threshold, args.image_gc_low_threshold);
    if low >= high && high != 100 {
        bail!(
            "--image-gc-low-threshold ({low}) must be less than --image-gc-high-threshold \
             ({high})"
        );
    }
    let min_age = parse_duration(&args.minimum_image_ttl_duration)
        .map_err(|e| anyhow::anyhow!("--minimum-image-ttl-duration: {e}"))?;
    let period = parse_duration(&args.image_gc_period)
        .map_err(|e| anyhow::anyhow!("--image-gc-period: {e}"))?;
    if period.is_zero() {
        bail!("--image-gc-period must be positive");
    }
    Ok((high != 100).then_some((
        podvisor_runtime::ImageGcPolicy {
            high_threshold_percent: high,
            low_threshold_percent: low,
            min_age,
        },
        period,
    )))
}

/// How often the manifests directory is read.
const MANIFEST_POLL: Duration = Duration::from_secs(1);

/// Serves until SIGTERM or SIGINT; returns the exit code.
///
/// # Errors
///
/// The engine's own failures: state directory, store, address in use, runtime start-up.
pub fn run(args: &Args) -> anyhow::Result<i32> {
    let started = Instant::now();
    let mut config = machine_config(args.backoff, args.max_restart_period.as_deref())?;
    config.gates = args.feature_gates;
    image_gc(args)?;
    args.container_logs.config()?;
    let state_dir = match &args.state_dir {
        Some(dir) => dir.clone(),
        None => default_state_dir()?,
    };
    private_state_dir(&state_dir)?;
    if let Some(warning) = exposure_warning(args.listen) {
        eprintln!("podvisor: warning: {warning}");
    }
    // Before anything of the state is opened, and while this process has one thread (nothing
    // can fork it): the one serve of this state directory.
    let _state_lock = super::state_lock::acquire(&state_dir)?;
    let shim = std::env::current_exe().context("finding the podvisor executable for the shim")?;
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    tokio.block_on(serve(args, &state_dir, &shim, config, started))
}

async fn serve(
    args: &Args,
    state_dir: &Path,
    shim: &Path,
    config: MachineConfig,
    started: Instant,
) -> anyhow::Result<i32> {
    // Signals first: from here on a SIGTERM is a clean stop, never the default death.
    let mut term = signal(SignalKind::terminate()).context("handling SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("handling SIGINT")?;
    let node_name = config.node_name.clone();
    let store_path = state_dir.join("store.redb");
    let options = StoreOptions {
        reset_empty: args.reset_empty_store,
        ..StoreOptions::default()
    };
    let store = Store::open_with(&store_path, options).map_err(|e| store_error(e, &store_path))?;
    // The runtime before the API: the API listens on the pod network the runtime uses too.
    let runtime = args
        .runtime
        .runtime(state_dir, &state_dir.join("images"), shim)?;
    let runtime = Arc::new(runtime);
    let bound = ApiServer::bind(ServeConfig {
        listen: args.listen,
        state_dir: state_dir.to_path_buf(),
        store: store.clone(),
        log_root: state_dir.join("logs"),
        node_name: node_name.clone(),
        pod_network: runtime.pod_network_host_address(),
    })
    .await;
    let server = match bound {
        Ok(server) => server,
        Err(e) => {
            runtime.release_warm_sandboxes().await;
            return Err(bind_error(e, args.listen));
        }
    };
    // The kubeconfig appears only once this process answers: a stale one must not pass for it.
    let kubeconfig = server.kubeconfig_path();
    match std::fs::remove_file(&kubeconfig) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            bail!("removing the old {}: {e}", kubeconfig.display())
        }
        _ => {}
    }
    let url = server.url();
    let pod_network_api = server.pod_network_addr();

    // The scheduler's pass over pods a stopped serve created or ungated but did not bind.
    podvisor_apiserver::bind_pending(&store, &node_name).context("binding pending pods")?;
    let sync_frequency = parse_duration(&args.sync_frequency)
        .map_err(|e| anyhow::anyhow!("--sync-frequency: {e}"))?;
    if sync_frequency.is_zero() {
        bail!("--sync-frequency must be positive");
    }
    // Each pod's status transitions, kept by the node for the dashboard's timeline.
    let history = Arc::new(
        podvisor_agent::history::HistoryStore::open(&state_dir.join("history"))
            .context("opening the pods' history")?,
    );
    let agent = Arc::new(
        Agent::new(Arc::clone(&runtime), config)
            .with_objects(Arc::new(super::serve_objects::ServeObjects {
                objects: podvisor_agent::node::StoreObjects::new(store.clone()),
                store: store.clone(),
                issuer: server.token_issuer(),
                api: server.local_addr(),
                pod_network_api: server.pod_network_addr(),
            }))
            .with_volume_sync_period(sync_frequency)
            .with_history(Arc::clone(&history)),
    );
    let (pressure_tx, pressure_rx) = tokio::sync::watch::channel(false);
    let mut node = Node::start(
        agent,
        store.clone(),
        NodeConfig {
            node_name: node_name.clone(),
            manifests: args.manifests.clone(),
            manifest_poll: MANIFEST_POLL,
            image_gc: image_gc(args)?,
            eviction: eviction(args, state_dir, pressure_tx)?,
        },
    );
    // The node's Node object and its Lease in `kube-node-lease`, as the kubelet keeps them;
    // `DiskPressure` is the eviction manager's.
    let mut node_status = podvisor_agent::node_status::NodeStatusConfig::new(
        node_name.clone(),
        state_dir.to_path_buf(),
        i32::from(server.local_addr().port()),
    );
    node_status.disk_pressure = Some(pressure_rx);
    // The kubelet's container log manager: rotation of the running containers' logs.
    let log_manager = args.container_logs.spawn(Arc::clone(&runtime))?;
    let node_objects = tokio::spawn(podvisor_agent::node_status::run(
        Arc::new(store.clone()),
        node_status,
    ));
    // `pods/exec` reaches the pod workers through the node.
    let server = server
        .with_exec(Arc::new(NodeExec(node.control())))
        .with_history(Arc::new(NodeHistory(history)))
        .with_feature_gates(args.feature_gates);
    let (api_stop_tx, api_stop_rx) = tokio::sync::oneshot::channel::<()>();
    let mut api = tokio::spawn(server.run(async {
        let _ = api_stop_rx.await;
    }));

    // Ready: the API answers (kubeconfig written) and every known pod has its worker.
    let api_ready = wait_for_file(&kubeconfig, &mut api);
    let (api_ready, recovery) = tokio::join!(api_ready, node.recovered());
    if let Err(e) = api_ready {
        node.stop();
        let _ = node.join().await;
        return Err(e);
    }
    let serving = started.elapsed();
    match recovery {
        Some(r) => eprintln!(
            "podvisor: serving {url} as node {node_name} in {} ms (pods: {} recovered, {} \
             started, {} orphaned sandboxes removed; recovery {} ms); kubeconfig: {}",
            serving.as_millis(),
            r.recovered,
            r.started,
            r.orphans,
            r.elapsed.as_millis(),
            kubeconfig.display()
        ),
        None => {
            let _ = api_stop_tx.send(());
            let _ = api.await;
            node.join().await.context("starting the node agent")?;
            bail!("the node agent stopped during start-up");
        }
    }
    if let Some(addr) = pod_network_api {
        eprintln!("podvisor: pods on the pod network reach the API at https://{addr}");
    }

    // PodGC, as kube-controller-manager runs it (ends with the runtime).
    tokio::spawn(podvisor_apiserver::podgc::run(
        store.clone(),
        args.terminated_pod_gc_threshold,
        std::future::pending(),
    ));

    let control = node.control();
    let why = tokio::select! {
        () = next_signal(&mut term, &mut int) => Stop::Signal,
        result = &mut api => Stop::Api(result),
        result = node.join_mut() => Stop::Node(result),
    };
    // The node stops reporting: its Lease runs out as a stopped kubelet's does.
    node_objects.abort();
    if let Some(manager) = &log_manager {
        manager.abort();
    }
    match why {
        Stop::Signal if args.drain_on_exit => {
            eprintln!("podvisor: deleting every pod (signal again to stop at once)");
            control.drain();
            let second = tokio::select! {
                result = node.join_mut() => Some(result),
                () = next_signal(&mut term, &mut int) => None,
            };
            let result = match second {
                Some(result) => result,
                None => {
                    control.stop();
                    node.join_mut().await
                }
            };
            result.context("draining")?;
            runtime.release_warm_sandboxes().await;
        }
        Stop::Signal => {
            // The API first: it closes its port and its watches at once, while the node agent
            // stops its pod workers.
            let _ = api_stop_tx.send(());
            control.stop();
            node.join_mut().await.context("stopping the node agent")?;
            runtime.release_warm_sandboxes().await;
            return finish_api(api).await;
        }
        Stop::Api(result) => {
            control.stop();
            let _ = node.join_mut().await;
            return match result {
                Ok(Ok(())) => bail!("the API server stopped"),
                Ok(Err(e)) => Err(e).context("the API server stopped"),
                Err(e) => Err(e).context("the API server task"),
            };
        }
        Stop::Node(result) => {
            let _ = api_stop_tx.send(());
            let _ = api.await;
            result.context("the node agent stopped")?;
            bail!("the node agent stopped");
        }
    }
    let _ = api_stop_tx.send(());
    finish_api(api).await
}

/// Waits for the stopped API server; a clean stop's exit code.
async fn finish_api(api: tokio::task::JoinHandle<Result<(), ServeError>>) -> anyhow::Result<i32> {
    match api.await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => eprintln!("podvisor: the API server: {e}"),
        Err(e) => eprintln!("podvisor: the API server task: {e}"),
    }
    eprintln!("podvisor: stopped");
    Ok(0)
}

/// `kubectl exec` sessions go to the pod's worker, then the runtime.
struct NodeExec(podvisor_agent::node::NodeControl);

impl podvisor_apiserver::PodExec for NodeExec {
    fn exec(
        &self,
        pod_uid: &str,
        container: &str,
        request: ExecRequest,
    ) -> Pin<Box<dyn Future<Output = Result<ExecSession, ExecError>> + Send + 'static>> {
        let node = self.0.clone();
        let (uid, container) = (pod_uid.to_owned(), container.to_owned());
        Box::pin(async move { node.exec(&uid, &container, request).await })
    }

    fn port_forward(
        &self,
        pod_uid: &str,
        port: u16,
    ) -> Pin<Box<dyn Future<Output = Result<tokio::net::TcpStream, String>> + Send + 'static>> {
        let node = self.0.clone();
        let uid = pod_uid.to_owned();
        Box::pin(async move { node.port_forward(&uid, port).await })
    }
}

/// Why `serve` stops.
enum Stop {
    Signal,
    Api(Result<Result<(), ServeError>, tokio::task::JoinError>),
    Node(Result<(), podvisor_agent::node::NodeError>),
}

/// `pods/history` reads the node's record of status transitions.
struct NodeHistory(Arc<podvisor_agent::history::HistoryStore>);

impl podvisor_apiserver::PodHistory for NodeHistory {
    fn history(
        &self,
        pod_uid: &str,
    ) -> Result<Vec<podvisor_lifecycle::timeline::Transition>, String> {
        self.0.read(pod_uid).map_err(|e| e.to_string())
    }
}

async fn next_signal(term: &mut Signal, int: &mut Signal) {
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

/// Waits until the API server has written `path` (it does once it answers), or fails with
/// the server's error.
async fn wait_for_file(
    path: &Path,
    api: &mut tokio::task::JoinHandle<Result<(), ServeError>>,
) -> anyhow::Result<()> {
    loop {
        if path.exists() {
            return Ok(());
        }
        tokio::select! {
            result = &mut *api => {
                return match result {
                    Ok(Ok(())) => bail!("the API server stopped before it answered"),
                    Ok(Err(e)) => Err(e).context("starting the API server"),
                    Err(e) => Err(e).context("the API server task"),
                };
            }
            () = tokio::time::sleep(Duration::from_millis(2)) => {}
        }
    }
}

/// Creates the state directory (mode 0700: it holds the store, the token and the CA key), or
/// makes an existing one 0700 (older podvisors left it 0755).
fn private_state_dir(dir: &Path) -> anyhow::Result<()> {
    // Another user's state is refused before anything of it is narrowed or read: the directory
    // and what podvisor keeps directly in it (and its keys), each this user's own.
    podvisor_store::require_owned(dir)?;
    for sub in [Path::new(""), Path::new("pki")] {
        let Ok(entries) = std::fs::read_dir(dir.join(sub)) else {
            continue;
        };
        for entry in entries.flatten() {
            podvisor_store::require_owned(&entry.path())?;
        }
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("creating state directory {}", dir.display()))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .with_context(|| format!("setting the mode of state directory {}", dir.display()))
}

/// The warning for an address other machines can reach (anything but loopback).
fn exposure_warning(listen: SocketAddr) -> Option<String> {
    if listen.ip().is_loopback() {
        return None;
    }
    Some(format!(
        "--listen {listen}: the API is reachable from other machines (not only from this one); \
         the bearer token and TLS still apply"
    ))
}

/// What to do about a store that cannot be opened.
fn store_error(e: StoreError, path: &Path) -> anyhow::Error {
    match e {
        e @ StoreError::EmptyFile { .. } => anyhow::anyhow!(
            "{e}; or start with an empty store in this file with podvisor serve \
             --reset-empty-store"
        ),
        e @ (StoreError::Damaged { .. } | StoreError::NotOwned(_)) => anyhow::Error::new(e),
        e => {
            let holders = super::state_lock::holders_of(path);
            anyhow::Error::new(e).context(format!(
                "opening the store {}{}",
                path.display(),
                if holders.is_empty() {
                    String::new()
                } else {
                    format!(" (held by {})", holders.join(", "))
                }
            ))
        }
    }
}

/// A clear message for the usual start-up failure: the address is taken.
fn bind_error(e: ServeError, listen: SocketAddr) -> anyhow::Error {
    if let ServeError::Io { source, .. } = &e
        && source.kind() == std::io::ErrorKind::AddrInUse
    {
        return anyhow::anyhow!(
            "cannot listen on {listen}: the address is already in use (another podvisor serve \
             or Kubernetes API server?); choose another with --listen ADDR:PORT, or port 0 for \
             a free one"
        );
    }
    anyhow::Error::new(e).context("starting the API server")
}

/// `/var/lib/podvisor` as root, `$XDG_STATE_HOME/podvisor` or `~/.local/state/podvisor`
/// otherwise.
pub(crate) fn default_state_dir() -> anyhow::Result<PathBuf> {
    let root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
    if root {
        return Ok(PathBuf::from("/var/lib/podvisor"));
    }
    if let Some(dir) = std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir).join("podvisor"));
    }
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .context("no --state-dir, and neither XDG_STATE_HOME nor HOME is set")?;
    Ok(PathBuf::from(home).join(".local/state/podvisor"))
}

/// The back-off curve and node identity from the flags.
fn machine_config(
    backoff: BackoffCurve,
    max_restart_period: Option<&str>,
) -> anyhow::Result<MachineConfig> {
    let mut curve = match backoff {
        BackoffCurve::Default => BackoffConfig::default(),
        BackoffCurve::Reduced => BackoffConfig::reduced(),
    };
    if let Some(max) = max_restart_period {
        let max = parse_duration(max).map_err(|e| anyhow::anyhow!("--max-restart-period: {e}"))?;
        if max < Duration::from_secs(1) || max > Duration::from_secs(300) {
            bail!("--max-restart-period: must be between 1s and 300s");
        }
        curve = curve.with_max_period(max);
    }
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_lowercase())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_string());
    Ok(MachineConfig {
        backoff: curve,
        node_name: hostname,
        // The process runtime shares the host's network.
        host_ip: Some("127.0.0.1".to_string()),
        // None until the pod's sandbox exists, as the kubelet reports it: the runtime gives
        // its address then (`PodMachine::set_pod_ip`: 127.0.0.1 for a process pod, the CNI
        // address for an oci pod, which must never show the host's loopback first).
        pod_ip: None,
        allocatable: node_allocatable(),
        ..MachineConfig::default()
    })
}

/// The node's allocatable cpu and memory, against which in-place resizes are checked.
pub(crate) fn node_allocatable() -> Option<podvisor_lifecycle::NodeResources> {
    let node = podvisor_runtime::config::NodeAllocatable::detect();
    Some(podvisor_lifecycle::NodeResources {
        cpu_millis: i64::try_from(node.cpu_millis?).ok()?,
        memory_bytes: i64::try_from(node.memory_bytes?).ok()?,
    })
}
