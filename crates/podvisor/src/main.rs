//! `podvisor`: run Kubernetes Pod manifests on one Linux machine with the kubelet's lifecycle.
//!
//! The binary is glue: argument handling and printing. The work is in the library crates.
//! Exit codes: 0 success, 1 a pod or manifest failed, 2 bad usage or input.

mod client;
mod cmd;
mod youki;

use clap::{Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "podvisor",
    version,
    about = "Kubernetes pod lifecycle on one machine"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// How much the engine logs on stderr (`serve`, `run`): error, warn, info, debug or trace
    /// (default: info for `serve`, warn otherwise; `PODVISOR_DEBUG=1` means debug).
    #[arg(long, global = true, value_enum)]
    log_level: Option<LogLevel>,
}

/// Levels of `--log-level`.
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
enum LogLevel {
    /// Failures only.
    Error,
    /// Failures and warnings.
    Warn,
    /// What the node does (pods recovered, started, the API's address).
    Info,
    /// Every decision of every pod worker.
    Debug,
    /// Debug plus every API request.
    Trace,
}

/// Restores SIGPIPE's default action (terminate), which Rust's runtime sets to ignored.
#[allow(unsafe_code)]
fn default_sigpipe() {
    // SAFETY: `signal` with `SIG_DFL` installs no handler; this runs before any thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Installs the `tracing` subscriber: stderr, the usual `fmt` line (time, level, span, message).
fn init_logging(level: Option<LogLevel>, serving: bool) {
    use tracing_subscriber::filter::LevelFilter;
    let debug_env = std::env::var_os("PODVISOR_DEBUG").is_some_and(|v| !v.is_empty() && v != "0");
    let level = match level {
        Some(LogLevel::Error) => LevelFilter::ERROR,
        Some(LogLevel::Warn) => LevelFilter::WARN,
        Some(LogLevel::Info) => LevelFilter::INFO,
        Some(LogLevel::Debug) => LevelFilter::DEBUG,
        Some(LogLevel::Trace) => LevelFilter::TRACE,
        None if debug_env => LevelFilter::DEBUG,
        None if serving => LevelFilter::INFO,
        None => LevelFilter::WARN,
    };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(level)
        .with_ansi(false)
        .init();
}

/// Output format of `simulate`.
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum OutputFormat {
    /// A readable timeline.
    Text,
    /// One JSON object per line.
    Json,
}

/// CrashLoopBackOff curve.
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum BackoffCurve {
    /// 10 s doubling to 300 s (the kubelet's default).
    Default,
    /// 1 s doubling to 60 s (`ReduceDefaultCrashLoopBackOffDecay`).
    Reduced,
}

#[derive(Subcommand)]
enum Command {
    /// Run pods for real, in the foreground, until they finish or Ctrl-C.
    Run(cmd::run::Args),
    /// Serve the Kubernetes API and run its pods on this machine (the node agent, API and store).
    Serve(cmd::serve::Args),
    /// List pods of the running `serve`, like `kubectl get pods`.
    Get(cmd::get::Args),
    /// Show pods in detail with their events, like `kubectl describe pod`.
    Describe(cmd::describe::Args),
    /// Print a container's log, like `kubectl logs`.
    Logs(cmd::logs::Args),
    /// Create or update pods from manifests, like `kubectl apply -f`.
    Apply(cmd::apply::Args),
    /// Delete pods, like `kubectl delete pod`.
    Delete(cmd::delete::Args),
    /// Serve a web page (loopback, plain HTTP) of the pods and each pod's live timeline.
    Dashboard(cmd::dashboard::Args),
    /// Pull, load, list, remove and inspect container images.
    Image(cmd::image::Args),
    /// Print podvisor's version and the Kubernetes version whose lifecycle it follows.
    Version,
    /// Print a shell completion script (bash, zsh, fish, elvish or powershell) to stdout.
    ///
    /// bash: `podvisor completion bash > /etc/bash_completion.d/podvisor`;
    /// zsh: `podvisor completion zsh > "${fpath[1]}/_podvisor"`;
    /// fish: `podvisor completion fish > ~/.config/fish/completions/podvisor.fish`.
    Completion {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Check manifests like the API server: decoding, defaulting and validation; lists every error.
    Validate {
        /// Manifest files (YAML or JSON; `-` for stdin).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Feature gates, as kube's `--feature-gates`: `A=true,B=false`. Known:
        /// RestartAllContainersOnContainerExits (alpha, default false).
        #[arg(long, value_parser = cmd::parse_feature_gates, default_value = "")]
        feature_gates: podvisor_api::FeatureGates,
    },
    /// Report lifecycle mistakes the API server accepts (probes, hooks, restart policies) in pods
    /// and workloads' pod templates; exit 1 on errors.
    Lint(cmd::lint::Args),
    /// Show what the kubelet would do with a pod, on a virtual clock, without running anything.
    Simulate {
        /// The pod manifest (Pods, or workloads whose pod templates are simulated).
        pod: PathBuf,
        /// Simulate only the pod (or workload) of this name, when the file has several.
        #[arg(long = "pod", value_name = "NAME")]
        only: Option<String>,
        /// A script of what containers, probes and hooks do over time. Without it (and for
        /// what it does not name) this is read from the commands (`sleep 3; exit 1`, `cat
        /// /tmp/ready` probes, ...); the output's first lines say what was inferred and assumed.
        #[arg(long)]
        script: Option<PathBuf>,
        /// How much time to simulate (e.g. 90s, 15m, 2h).
        #[arg(long = "for", default_value = "15m")]
        duration: String,
        /// Output format.
        #[arg(long, short = 'o', value_enum, default_value_t = cmd::simulate::Output::Text)]
        output: cmd::simulate::Output,
        /// CrashLoopBackOff curve.
        #[arg(long, value_enum, default_value_t = BackoffCurve::Default)]
        backoff: BackoffCurve,
        /// `crashLoopBackOff.maxContainerRestartPeriod` (1s..300s).
        #[arg(long)]
        max_restart_period: Option<String>,
        /// Feature gates, as kube's `--feature-gates`: `A=true,B=false`. Known:
        /// RestartAllContainersOnContainerExits (alpha, default false).
        #[arg(long, value_parser = cmd::parse_feature_gates, default_value = "")]
        feature_gates: podvisor_api::FeatureGates,
    },
}

fn main() -> ExitCode {
    // The shim (one per pod, long-lived) is dispatched before argument parsing builds clap's
    // command tree: it keeps the shim's memory small and starts no async runtime.
    let mut raw = std::env::args();
    // The internal commands are not clap's: they stay out of help and shell completions.
    match raw.nth(1).as_deref() {
        // The per-pod shim (started by podvisor itself) must not start an async runtime: it
        // runs before anything else.
        Some("shim") => {
            let args: Vec<String> = raw.collect();
            let code = podvisor_runtime::shim::server::main(&args);
            return ExitCode::from(u8::try_from(code).unwrap_or(1));
        }
        // The embedded OCI runtime (`--oci-executor youki`), run by the shim per operation:
        // single-threaded, so its clones are safe.
        Some("youki") => {
            let code = youki::main(std::env::args_os().skip(2));
            return ExitCode::from(u8::try_from(code).unwrap_or(1));
        }
        _ => {}
    }
    let cli = Cli::parse();
    // Commands that print and end behave as Unix filters: a reader that closes the pipe
    // (`podvisor image ls | head`) ends them quietly. The long-running ones keep Rust's
    // ignored SIGPIPE, so a closed socket is an error they handle, not their death.
    if !matches!(cli.command, Command::Serve(_) | Command::Run(_)) {
        default_sigpipe();
    }
    init_logging(cli.log_level, matches!(cli.command, Command::Serve(_)));
    let result = match cli.command {
        Command::Run(args) => cmd::run::run(&args),
        Command::Serve(args) => cmd::serve::run(&args),
        Command::Get(args) => cmd::get::run(&args),
        Command::Describe(args) => cmd::describe::run(&args),
        Command::Logs(args) => cmd::logs::run(&args),
        Command::Apply(args) => cmd::apply::run(&args),
        Command::Delete(args) => cmd::delete::run(&args),
        Command::Dashboard(args) => cmd::dashboard::run(&args),
        Command::Image(args) => cmd::image::run(&args),
        Command::Validate {
            files,
            feature_gates,
        } => cmd::validate::run(&files, feature_gates),
        Command::Lint(args) => cmd::lint::run(&args),
        Command::Version => {
            println!(
                "podvisor {} (the kubelet's pod lifecycle of Kubernetes; serves {} to clients)",
                env!("CARGO_PKG_VERSION"),
                podvisor_apiserver::GIT_VERSION
            );
            Ok(0)
        }
        Command::Completion { shell } => {
            use clap::CommandFactory;
            use std::io::Write;
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "podvisor", &mut script);
            // A closed pipe (`| head`) is the reader's choice, not an error.
            match std::io::stdout().write_all(&script) {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
                _ => Ok(0),
            }
        }
        Command::Simulate {
            pod,
            only,
            script,
            duration,
            output,
            backoff,
            max_restart_period,
            feature_gates,
        } => cmd::simulate::run(&cmd::simulate::Args {
            pod,
            only,
            script,
            duration,
            output,
            backoff,
            max_restart_period,
            feature_gates,
        }),
    };
    match result {
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
