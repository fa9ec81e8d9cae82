//! `podvisor youki`: the embedded OCI runtime of `--oci-executor youki`, youki's
//! `libcontainer` behind runc's command line (the subset [`Runc`] drives: `create`, `start`,
//! `run --detach`, `exec`, `kill`, `delete`, `state`, with `--root`, `--log` and
//! `--log-format json`).
//!
//! The shim runs it as a child process, one per operation, exactly as it runs runc: a fresh,
//! single-threaded process, so libcontainer's clones run no code that could wait on a lock
//! another thread held (the shim is multi-threaded). The container's init process is this
//! helper's child (libcontainer's intermediate process clones it with `CLONE_PARENT`); when
//! the helper exits it is re-parented to the shim, the subreaper, which reaps it, reads its
//! cgroup's OOM counter and pumps its output, as with runc. The helper inherits only the
//! standard I/O the shim gives it, and libcontainer's init closes every other descriptor
//! (`close_range`) before the container's process runs.
//!
//! A failure is written to the `--log` file as one JSON line (`level`, `msg`), runc's format,
//! and the exit status is 1; a foreground `exec` exits with its process's status (128 + n for
//! signal n), as `runc exec` does.
//!
//! [`Runc`]: podvisor_runtime::oci::executor::Runc

use std::ffi::CString;
use std::io::Write;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

mod events;

use clap::{Parser, Subcommand};
use libcontainer::container::builder::ContainerBuilder;
use libcontainer::container::{Container, ContainerStatus};
use libcontainer::oci_spec::runtime::Spec;
use libcontainer::syscall::syscall::SyscallType;
use libcontainer::workload::default::DefaultExecutor;
use libcontainer::workload::{Executor, ExecutorError, ExecutorValidationError};

/// runc's global flags and the commands the executor uses.
#[derive(Parser, Debug)]
#[command(name = "podvisor youki", about = "Internal: the embedded OCI runtime")]
struct Cli {
    /// The state directory (one subdirectory per container, made 0700).
    #[arg(long)]
    root: PathBuf,
    /// Where a failure is written (one JSON line).
    #[arg(long)]
    log: Option<PathBuf>,
    /// Only `json` (runc's flag, accepted for the same command line).
    #[arg(long, default_value = "json")]
    log_format: String,
    #[command(subcommand)]
    op: Op,
}

#[derive(Subcommand, Debug)]
enum Op {
    /// Creates the container; its process waits for `start`.
    Create(CreateArgs),
    /// Creates and starts the container (`--detach` only).
    Run {
        /// Return once the container runs (the only mode).
        #[arg(long, short = 'd')]
        detach: bool,
        /// Wait for a byte on this FIFO before reading the bundle (the shim starts the helper
        /// while it finishes the bundle; the FIFO's end without a byte: exit, doing nothing).
        #[arg(long)]
        after: Option<PathBuf>,
        #[command(flatten)]
        create: CreateArgs,
    },
    /// Starts a created container.
    Start {
        /// The container's ID.
        id: String,
    },
    /// Runs a process in the container.
    Exec {
        /// Return once the process runs (it becomes the caller's subreaper's child); without
        /// it, wait for the process and exit with its status.
        #[arg(long, short = 'd')]
        detach: bool,
        /// The process's pid goes here.
        #[arg(long)]
        pid_file: Option<PathBuf>,
        /// The process spec (JSON).
        #[arg(long)]
        process: PathBuf,
        /// A terminal's master goes to this unix socket.
        #[arg(long)]
        console_socket: Option<PathBuf>,
        /// The container's ID.
        id: String,
    },
    /// Signals the container's init process, or with `--all` every process of it.
    Kill {
        /// Every process of the container.
        #[arg(long, short = 'a')]
        all: bool,
        /// The container's ID.
        id: String,
        /// The signal's number or name (`15`, `SIGTERM`).
        signal: String,
    },
    /// Removes the container's state and cgroup.
    Delete {
        /// Kill it first if it runs.
        #[arg(long, short = 'f')]
        force: bool,
        /// The container's ID.
        id: String,
    },
    /// Prints the container's state as runc does (JSON).
    State {
        /// The container's ID.
        id: String,
    },
}

#[derive(clap::Args, Debug)]
struct CreateArgs {
    /// The bundle (`config.json`, the root filesystem).
    #[arg(long, short = 'b')]
    bundle: PathBuf,
    /// The init process's pid goes here.
    #[arg(long)]
    pid_file: Option<PathBuf>,
    /// A terminal's master goes to this unix socket.
    #[arg(long)]
    console_socket: Option<PathBuf>,
    /// The container's ID.
    id: String,
}

/// A failure: what goes to the log.
struct Failure(String);

impl<E: std::error::Error> From<E> for Failure {
    fn from(e: E) -> Failure {
        Failure(chain(&e))
    }
}

/// `e` and its sources, `: `-separated (libcontainer's own texts are terse).
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let part = s.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    text
}

/// Runs the helper with `args` (what follows `podvisor youki`); returns the exit status.
pub fn main(args: impl Iterator<Item = std::ffi::OsString>) -> i32 {
    let mut args = args.peekable();
    if args
        .peek()
        .is_some_and(|a| a == podvisor_runtime::oci::ahead::ARG)
    {
        return ahead();
    }
    let cli = match Cli::try_parse_from(std::iter::once("podvisor youki".into()).chain(args)) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return 2;
        }
    };
    if let Some(log) = &cli.log {
        events::log_errors_to(log);
    }
    let (op, result) = run(&cli);
    // After a failure, what libcontainer's processes left (an init that failed, which holds
    // its PID namespace until reaped, and the intermediate process) is reaped here, as runc
    // reaps its own. After a success nothing is: the container's process may have exited
    // already, and its status is the shim's to take.
    if result.is_err() {
        reap_leftovers(std::time::Duration::from_millis(500));
    }
    match result {
        Ok(code) => code,
        Err(Failure(message)) => {
            let mut message = worded(op, &message);
            let logged = cli
                .log
                .as_ref()
                .and_then(|log| std::fs::read_to_string(log).ok())
                .unwrap_or_default();
            if let Some(cause) = events::cause(&logged, &message) {
                message = format!("{message}: {cause}");
            }
            if let Some(log) = &cli.log {
                let line = serde_json::json!({"level": "error", "msg": message});
                if let Ok(mut file) = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(log)
                {
                    let _ = writeln!(file, "{line}");
                }
            }
            eprintln!("podvisor youki {op}: {message}");
            // `runc exec` in the foreground exits 255 when the process could not be started.
            if op == "exec" { 255 } else { 1 }
        }
    }
}

/// `podvisor youki ahead` ([`podvisor_runtime::oci::ahead`]): rehearses, then waits on its
/// standard input for the call, makes the call's descriptors its standard I/O and runs it as
/// `podvisor youki <arguments>`; exits 0 at the socket's end with no call.
fn ahead() -> i32 {
    use podvisor_runtime::oci::ahead;
    use std::os::fd::AsFd;
    // Out of its starter's session (a spare shim's is the agent's until it has a pod): a
    // terminal's signals to the agent are not for it.
    let _ = rustix::process::setsid();
    rehearse();
    let call = ahead::receive(std::io::stdin().as_fd());
    match call {
        Ok(Some(ahead::Call {
            args,
            stdio: [stdin, stdout, stderr],
            mount_ns,
        })) => {
            if args.first().is_some_and(|a| a == ahead::ARG) {
                eprintln!("podvisor youki ahead: a call cannot wait for another");
                return 2;
            }
            // The socket (0) closes here: from now on this is the call's process.
            let dup = rustix::stdio::dup2_stdin(&stdin)
                .and_then(|()| rustix::stdio::dup2_stdout(&stdout))
                .and_then(|()| rustix::stdio::dup2_stderr(&stderr));
            if let Err(e) = dup {
                eprintln!("podvisor youki ahead: taking the call's standard I/O: {e}");
                return 1;
            }
            drop((stdin, stdout, stderr));
            if let Err(e) = ahead::join_mount_namespace(mount_ns.as_fd()) {
                eprintln!("podvisor youki ahead: joining the caller's mount namespace: {e}");
                return 1;
            }
            drop(mount_ns);
            main(args.into_iter())
        }
        Ok(None) => 0,
        Err(e) => {
            eprintln!("podvisor youki ahead: {e}");
            2
        }
    }
}

/// A start's command line, as the shim calls the helper.
const REHEARSAL_ARGS: [&str; 16] = [
    "podvisor youki",
    "--root",
    "/var/lib/podvisor/youki",
    "--log",
    "/var/lib/podvisor/youki-log/1-0-run.json",
    "--log-format",
    "json",
    "run",
    "--detach",
    "--after",
    "/var/lib/podvisor/youki-log/c.after",
    "--bundle",
    "/var/lib/podvisor/pods/00000000-0000-0000-0000-000000000000/oci/1",
    "--pid-file",
    "/var/lib/podvisor/pods/00000000-0000-0000-0000-000000000000/oci/1/init.pid",
    "c",
];

/// A typical container's `config.json`, as the shim writes it.
const REHEARSAL_SPEC: &str = include_str!("youki/rehearsal.json");

/// What a call does first, done once while the helper waits, so that the decoders' code is
/// mapped in before it is called: the command line parsed, a spec read from a file as
/// libcontainer reads `config.json` (through a memory file: the same reader's code).
fn rehearse() {
    use std::os::fd::AsRawFd;
    let _ = Cli::try_parse_from(REHEARSAL_ARGS);
    let Ok(fd) = rustix::fs::memfd_create("rehearsal", rustix::fs::MemfdFlags::CLOEXEC) else {
        return;
    };
    let mut file = std::fs::File::from(fd);
    if file.write_all(REHEARSAL_SPEC.as_bytes()).is_ok() {
        let _ = Spec::load(format!("/proc/self/fd/{}", file.as_raw_fd()));
    }
}

/// The failure's text as the kubelet shows runc's: a process that could not be started is
/// worded as runc words it ("runc create failed: unable to start container process: exec:
/// ..."), which is what users and tests of the reference runtime read; anything else is
/// youki's own, marked as such.
fn worded(op: &str, message: &str) -> String {
    const EXEC: &str = "error in executing process : ";
    match message.find(EXEC) {
        Some(at) => {
            let detail = &message[at + EXEC.len()..];
            let op = if op == "run" { "create" } else { op };
            if op == "exec" {
                format!("exec failed: unable to start container process: {detail}")
            } else {
                format!("runc {op} failed: unable to start container process: {detail}")
            }
        }
        None => format!("youki {op} failed: {message}"),
    }
}

fn run(cli: &Cli) -> (&'static str, Result<i32, Failure>) {
    let root = cli.root.as_path();
    match &cli.op {
        Op::Create(args) => ("create", create(root, args).map(|_| 0)),
        Op::Run {
            detach,
            after,
            create: args,
        } => {
            let result = if *detach {
                after
                    .as_deref()
                    .map_or(Ok(()), wait_for)
                    .and_then(|()| create(root, args))
                    .and_then(|mut c| c.start().map_err(Failure::from).map(|()| 0))
            } else {
                Err(Failure("only `run --detach` is supported".into()))
            };
            ("run", result)
        }
        Op::Start { id } => (
            "start",
            load(root, id).and_then(|mut c| c.start().map_err(Failure::from).map(|()| 0)),
        ),
        Op::Exec {
            detach,
            pid_file,
            process,
            console_socket,
            id,
        } => (
            "exec",
            exec(
                root,
                id,
                process,
                pid_file.as_deref(),
                console_socket.as_deref(),
                *detach,
            ),
        ),
        Op::Kill { all, id, signal } => ("kill", kill(root, id, signal, *all)),
        Op::Delete { force, id } => ("delete", delete(root, id, *force)),
        Op::State { id } => ("state", state(root, id)),
    }
}

/// The state directory, private to root (made 0700 if missing).
fn state_root(root: &Path) -> Result<PathBuf, Failure> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(root)
        .map_err(|e| {
            Failure(format!(
                "making the state directory {}: {e}",
                root.display()
            ))
        })?;
    Ok(root.to_owned())
}

fn builder(root: &Path, id: &str) -> Result<ContainerBuilder, Failure> {
    Ok(ContainerBuilder::new(id.to_owned(), SyscallType::Linux)
        .validate_id()?
        .with_root_path(state_root(root)?)?)
}

/// A bundle from elsewhere than the shim (which writes the layout into the spec itself) may
/// still ask for a `cgroup` mount, which libcontainer cannot lay out for every container on
/// a cgroup v1 host ([`podvisor_runtime::oci::spec::cgroup_mount`]): it is rewritten here
/// first. The check is a byte search, so the shim's bundles cost no second parse.
fn lay_out_cgroup_mount(bundle: &Path) -> Result<(), Failure> {
    let config = bundle.join("config.json");
    let asks = std::fs::read(&config).is_ok_and(|text| text.windows(8).any(|w| w == b"\"cgroup\""));
    if !asks {
        return Ok(());
    }
    let mut spec = libcontainer::oci_spec::runtime::Spec::load(&config)
        .map_err(|e| Failure(format!("reading {}: {e}", config.display())))?;
    podvisor_runtime::oci::spec::cgroup_mount::rewrite(&mut spec).map_err(Failure)?;
    let staged = bundle.join(".config.json.cgroup");
    spec.save(&staged)
        .map_err(|e| Failure(format!("writing {}: {e}", staged.display())))?;
    std::fs::rename(&staged, &config)
        .map_err(|e| Failure(format!("replacing {}: {e}", config.display())))
}

/// Reads the byte that says the bundle is finished from the FIFO at `path` (`run --after`).
fn wait_for(path: &Path) -> Result<(), Failure> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut fifo = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| Failure(format!("opening {}: {e}", path.display())))?;
    let mut byte = [0u8; 1];
    match fifo.read(&mut byte) {
        Ok(1) if byte == *b"1" => Ok(()),
        Ok(_) => Err(Failure("the bundle was never finished".into())),
        Err(e) => Err(Failure(format!("reading {}: {e}", path.display()))),
    }
}

fn create(root: &Path, args: &CreateArgs) -> Result<Container, Failure> {
    lay_out_cgroup_mount(&args.bundle)?;
    Ok(builder(root, &args.id)?
        .with_pid_file(args.pid_file.as_ref())?
        .with_console_socket(args.console_socket.as_ref())
        .with_executor(Workload {
            die_with_parent: false,
        })
        .as_init(&args.bundle)
        .with_systemd(false)
        .with_detach(true)
        .build()?)
}

/// The container of `id`; "does not exist" (runc's words, which the executor reads) when it
/// has no state.
fn load(root: &Path, id: &str) -> Result<Container, Failure> {
    let dir = root.join(id);
    if !dir.join("state.json").exists() {
        return Err(Failure(format!("container {id:?} does not exist")));
    }
    Ok(Container::load(dir)?)
}

fn exec(
    root: &Path,
    id: &str,
    process: &Path,
    pid_file: Option<&Path>,
    console_socket: Option<&Path>,
    detach: bool,
) -> Result<i32, Failure> {
    load(root, id)?;
    let pid = builder(root, id)?
        .with_pid_file(pid_file)?
        .with_console_socket(console_socket)
        // In the foreground the process dies with this helper: the shim ends a timed-out
        // exec by killing the helper's process group, which libcontainer's `setsid` left.
        .with_executor(Workload {
            die_with_parent: !detach,
        })
        .as_tenant()
        .with_process(Some(process))
        .with_detach(detach)
        .build()?;
    if detach {
        return Ok(0);
    }
    loop {
        match nix_wait(pid.as_raw()) {
            Ok(code) => return Ok(code),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Failure(format!("waiting for the exec's process: {e}"))),
        }
    }
}

/// Reaps the children that exited, for up to `linger` while some are still running; stops
/// at once when none is left.
fn reap_leftovers(linger: std::time::Duration) {
    use rustix::process::{WaitId, WaitIdOptions};
    let until = std::time::Instant::now() + linger;
    loop {
        match rustix::process::waitid(WaitId::All, WaitIdOptions::EXITED | WaitIdOptions::NOHANG) {
            Ok(Some(_)) => {}
            Ok(None) if std::time::Instant::now() < until => {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            Ok(None) | Err(_) => return,
        }
    }
}

/// Waits for child `pid`: its exit code, or 128 + n when signal n ended it.
fn nix_wait(pid: i32) -> std::io::Result<i32> {
    let pid = rustix::process::Pid::from_raw(pid)
        .ok_or_else(|| std::io::Error::other("the exec's pid is 0"))?;
    match rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty())? {
        Some((_, status)) => Ok(status
            .exit_status()
            .or_else(|| status.terminating_signal().map(|s| 128 + s))
            .unwrap_or(255)),
        None => Err(std::io::Error::other("no status for the exec's process")),
    }
}

fn kill(root: &Path, id: &str, signal: &str, all: bool) -> Result<i32, Failure> {
    let signal = match signal.parse::<i32>() {
        Ok(n) => libcontainer::signal::Signal::try_from(n).map_err(|e| e.to_string()),
        Err(_) => libcontainer::signal::Signal::try_from(signal).map_err(|e| e.to_string()),
    }
    .map_err(|e| Failure(format!("signal {signal:?}: {e}")))?;
    load(root, id)?.kill(signal, all)?;
    Ok(0)
}

fn delete(root: &Path, id: &str, force: bool) -> Result<i32, Failure> {
    load(root, id)?.delete(force)?;
    Ok(0)
}

fn state(root: &Path, id: &str) -> Result<i32, Failure> {
    let container = load(root, id)?;
    let status = match container.status() {
        ContainerStatus::Creating => "creating",
        ContainerStatus::Created => "created",
        ContainerStatus::Running => "running",
        ContainerStatus::Stopped => "stopped",
        ContainerStatus::Paused => "paused",
    };
    let pid = match container.status() {
        ContainerStatus::Stopped => 0,
        _ => container.pid().map_or(0, |p| p.as_raw()),
    };
    let state = serde_json::json!({
        "id": container.id(),
        "pid": pid,
        "status": status,
        "bundle": container.bundle(),
    });
    println!("{state}");
    Ok(0)
}

/// The container's process: libcontainer's default `execvp`, with runc's words for a program
/// that is not there, and for a foreground exec the parent-death signal.
#[derive(Clone)]
struct Workload {
    /// `PR_SET_PDEATHSIG(SIGKILL)` just before the exec: set after libcontainer changed the
    /// credentials (which clear it), kept across the `execve` of a program that is not
    /// set-id.
    die_with_parent: bool,
}

impl Executor for Workload {
    fn exec(&self, spec: &Spec) -> Result<(), ExecutorError> {
        if self.die_with_parent {
            // SAFETY: prctl with integer arguments only.
            #[allow(unsafe_code)]
            let rc = unsafe {
                libc::prctl(
                    libc::PR_SET_PDEATHSIG,
                    libc::c_ulong::try_from(libc::SIGKILL).unwrap_or(9),
                )
            };
            if rc != 0 {
                return Err(ExecutorError::Other(format!(
                    "setting the parent-death signal: {}",
                    std::io::Error::last_os_error()
                )));
            }
        }
        DefaultExecutor {}.exec(spec)
    }

    fn validate(&self, spec: &Spec) -> Result<(), ExecutorValidationError> {
        // Inside the container's root, as runc's `exec:` check: a path must exist, a name
        // must be found on the process's PATH.
        let process = spec.process().as_ref();
        let program = process
            .and_then(|p| p.args().as_ref())
            .and_then(|a| a.first())
            .ok_or_else(|| {
                ExecutorValidationError::ArgValidationError("args must not be empty".into())
            })?;
        if program.contains('/') {
            if let Err(e) = std::fs::metadata(program) {
                let e = e.raw_os_error().map_or_else(|| e.to_string(), errno_text);
                return Err(ExecutorValidationError::ArgValidationError(format!(
                    "exec: \"{program}\": stat {program}: {e}"
                )));
            }
        } else {
            let path = process
                .and_then(|p| p.env().as_ref())
                .and_then(|env| env.iter().find_map(|e| e.strip_prefix("PATH=")))
                .unwrap_or("");
            if !path
                .split(':')
                .any(|dir| is_executable(&Path::new(dir).join(program)))
            {
                return Err(ExecutorValidationError::ArgValidationError(format!(
                    "exec: \"{program}\": executable file not found in $PATH"
                )));
            }
        }
        DefaultExecutor {}.validate(spec)
    }
}

fn is_executable(path: &Path) -> bool {
    let Ok(c) = CString::new(path.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    std::fs::metadata(path).is_ok_and(|m| m.is_file())
        && rustix::fs::access(c.as_c_str(), rustix::fs::Access::EXEC_OK).is_ok()
}

/// The C library's text of `errno`, lower-cased as Go prints it ("no such file or
/// directory").
fn errno_text(errno: i32) -> String {
    podvisor_api::gotext::os_error(&std::io::Error::from_raw_os_error(errno))
}

#[cfg(test)]
mod tests {
    use super::{Cli, Op, REHEARSAL_ARGS, REHEARSAL_SPEC, Spec, worded};
    use clap::Parser;

    /// The rehearsal is what it stands for: a `run` command line the helper parses, and a
    /// container's spec that decodes whole, as the shim writes it (a change that breaks
    /// either fails here, not silently in every helper started ahead).
    #[test]
    fn the_rehearsal_parses_as_a_start() {
        let cli = Cli::try_parse_from(REHEARSAL_ARGS).expect("the command line parses");
        assert!(matches!(
            cli.op,
            Op::Run {
                detach: true,
                after: Some(_),
                ..
            }
        ));
        let spec: Spec = serde_json::from_str(REHEARSAL_SPEC).expect("the spec decodes");
        assert!(spec.mounts().as_ref().is_some_and(|m| m.len() > 8));
        let process = spec.process().as_ref().expect("a process");
        assert!(process.capabilities().is_some() && process.env().is_some());
        assert!(
            spec.linux()
                .as_ref()
                .is_some_and(|l| l.namespaces().is_some())
        );
    }

    /// A process that cannot be started is worded as runc words it; other failures are
    /// youki's own.
    #[test]
    fn failures_are_worded_as_runc_where_the_kubelet_shows_them() {
        assert_eq!(
            worded(
                "run",
                "failed to wait for init ready: error in executing process : exec: \"nope\": \
                 executable file not found in $PATH"
            ),
            "runc create failed: unable to start container process: exec: \"nope\": \
             executable file not found in $PATH"
        );
        assert_eq!(
            worded(
                "exec",
                "x: error in executing process : exec: \"y\": stat y: z"
            ),
            "exec failed: unable to start container process: exec: \"y\": stat y: z"
        );
        assert_eq!(
            worded("delete", "container \"c\" does not exist"),
            "youki delete failed: container \"c\" does not exist"
        );
    }
}
