//! The OCI runtime behind a narrow trait, and its implementation over Debian's `runc`.
//!
//! The caller (the pod's shim) is the child subreaper (`PR_SET_CHILD_SUBREAPER`) and stays
//! the container monitor: `runc create` runs detached, its `runc init` becomes the container's
//! init process with `runc create` as its parent (runc clones it with `CLONE_PARENT`), and when
//! `runc create` exits the init process is re-parented to the nearest subreaper, the caller.
//! So the caller's existing `waitid` loop reaps the container's init process (exit code,
//! signal), its cgroup tells an OOM kill, and no runc process stays around (no `runc run`
//! foreground, no containerd-shim). The init process inherits the descriptors given as its
//! standard I/O, so its output goes to the caller's pipes and from there to the CRI log files
//! as today. `runc exec --detach` works the same way for exec processes.
//!
//! The order for a container: `create` (returns the init pid), register the pid with the
//! reaper, then `start`: until `start`, the init process waits on runc's exec FIFO and cannot
//! exit on its own, so no exit is missed. Three things the caller must arrange:
//! - a concurrent `waitpid(-1)` must not reap the `runc` processes themselves: every command
//!   runs through a [`CommandRunner`], which the shim is to implement with its fork lock and
//!   reaper (spawn with `Waiter::Exec`; the [`DirectRunner`] waits for the child directly,
//!   which is right for a process with no other reaper);
//! - runc writes its own fatal error to its standard error as well as to its log, so when
//!   [`OciExecutor::create`] fails, what the container's stderr descriptor received is runc's
//!   message, not the container's output: drain and drop it (start copying to the log file
//!   only after `create` succeeded);
//! - `create` takes the container's cgroups from `linux.cgroupsPath` (runc's cgroupfs
//!   driver), so the OOM counter and kill-all are read from there
//!   ([`ContainerCgroup::open`](crate::cgroup::ContainerCgroup::open) finds them); `delete`
//!   removes them, but not the parents runc made.
//!
//! Errors carry runc's own message, read from its JSON log (`--log-format json`), and
//! [`ExecutorError::kubelet_message`] words it as containerd does, for the container's
//! `RunContainerError` message.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read, Seek, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Deserialize;

/// Debian's runc.
pub const RUNC: &str = "/usr/sbin/runc";

/// The shim's own executable, whose `podvisor youki` mode is the embedded OCI runtime
/// ([`RuncMode::Youki`]): always the binary the running shim was started from, even if the
/// file was replaced since.
pub const SELF_EXE: &str = "/proc/self/exe";

/// How a container process (init or exec) is wired to the caller.
#[derive(Debug)]
pub enum ProcessIo {
    /// Standard input, output and error; `None` is `/dev/null`.
    Fds {
        /// Standard input.
        stdin: Option<OwnedFd>,
        /// Standard output.
        stdout: Option<OwnedFd>,
        /// Standard error.
        stderr: Option<OwnedFd>,
    },
    /// A pseudo-terminal (`process.terminal` must be true): runc sends its master over the
    /// unix socket at this path (see [`ConsoleSocket`]).
    Terminal {
        /// The listening socket's path.
        console_socket: PathBuf,
    },
}

impl ProcessIo {
    /// Nothing in, nothing out.
    pub fn null() -> ProcessIo {
        ProcessIo::Fds {
            stdin: None,
            stdout: None,
            stderr: None,
        }
    }
}

/// A container's status as the runtime reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Being created.
    Creating,
    /// Created, its process waiting to be started.
    Created,
    /// Running.
    Running,
    /// Frozen.
    Paused,
    /// Its init process has exited.
    Stopped,
}

/// What [`OciExecutor::state`] returns.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ContainerState {
    /// The container's ID.
    pub id: String,
    /// The init process's pid (0 once stopped).
    #[serde(default)]
    pub pid: u32,
    /// The status.
    pub status: Status,
    /// The bundle directory.
    #[serde(default)]
    pub bundle: PathBuf,
}

/// Why an executor operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ExecutorError {
    /// The runtime ran and refused: `message` is its own error text.
    #[error("{op} failed: {message}")]
    Runtime {
        /// `create`, `start`, `kill`, `delete`, `exec`, `state`.
        op: &'static str,
        /// The runtime's message.
        message: String,
    },
    /// The runtime could not be run or its answer not read.
    #[error("{op}: {source}")]
    Io {
        /// The operation.
        op: &'static str,
        /// The cause.
        #[source]
        source: io::Error,
    },
}

impl ExecutorError {
    /// The message the kubelet shows for the failure, worded as containerd wraps runc's
    /// errors (`RunContainerError` for `create`/`start`, the exec error for `exec`).
    pub fn kubelet_message(&self, exec_id: &str) -> String {
        let (op, message) = match self {
            ExecutorError::Runtime { op, message } => (*op, message.clone()),
            ExecutorError::Io { op, source } => (*op, source.to_string()),
        };
        // `runc run` is `create` + `start` in one process; containerd always runs them apart,
        // and what fails in a `run` fails in its create part (the start is one FIFO write),
        // so the kubelet's text is the create's, runc's own prefix included.
        let message = match op {
            "run" => match message.strip_prefix("runc run failed: ") {
                Some(rest) => format!("runc create failed: {rest}"),
                None => message,
            },
            _ => message,
        };
        match op {
            "create" | "run" => format!(
                "failed to create containerd task: failed to create shim task: OCI runtime \
                 create failed: {message}: unknown"
            ),
            "start" => format!(
                "failed to start containerd task: OCI runtime start failed: {message}: unknown"
            ),
            "exec" => format!(
                "failed to exec in container: failed to start exec {exec_id:?}: OCI runtime \
                 exec failed: {message}: unknown"
            ),
            _ => format!("OCI runtime {op} failed: {message}: unknown"),
        }
    }
}

/// The operations the `oci` backend needs from an OCI runtime. Blocking; each returns when
/// the runtime has done it.
pub trait OciExecutor: Send + Sync {
    /// Creates container `id` from the bundle (`config.json` + root filesystem): its init
    /// process exists, in its namespaces and cgroup, waiting to be started. Returns its pid
    /// (also written to `pid_file`).
    fn create(
        &self,
        bundle: &Path,
        id: &str,
        pid_file: &Path,
        io: ProcessIo,
    ) -> Result<u32, ExecutorError>;

    /// Starts the created container's process.
    fn start(&self, id: &str) -> Result<(), ExecutorError>;

    /// Creates and starts container `id`; returns its init pid. `registered` gets the pid as
    /// soon as the process exists and before the caller's reaper can take its exit: between
    /// [`OciExecutor::create`] and [`OciExecutor::start`] by default. When it was called and
    /// the start then fails, the process exists (waiting to be started): the caller kills it.
    fn run(
        &self,
        bundle: &Path,
        id: &str,
        pid_file: &Path,
        io: ProcessIo,
        registered: &mut dyn FnMut(u32),
    ) -> Result<u32, ExecutorError> {
        create_then_start(self, bundle, id, pid_file, io, registered)
    }

    /// Sends `signal` to the init process, or with `all` to every process of the container.
    fn kill(&self, id: &str, signal: i32, all: bool) -> Result<(), ExecutorError>;

    /// Removes the container (its state and cgroup); `force` kills it first if it runs. A
    /// container that does not exist is no error.
    fn delete(&self, id: &str, force: bool) -> Result<(), ExecutorError>;

    /// Removes container `id` whose init process exited and was reaped, and whose other
    /// processes are gone (the caller killed its cgroup): as [`OciExecutor::delete`], with
    /// `cgroups_path` the `linux.cgroupsPath` it was created with.
    fn delete_exited(&self, id: &str, cgroups_path: &str) -> Result<(), ExecutorError> {
        let _ = cgroups_path;
        self.delete(id, true)
    }

    /// Starts `process` in the running container, detached (a child of the caller's
    /// subreaper, like the init process). Returns its pid.
    fn exec(
        &self,
        id: &str,
        process: &oci_spec::runtime::Process,
        pid_file: &Path,
        io: ProcessIo,
    ) -> Result<u32, ExecutorError>;

    /// The container's state; `None` if it does not exist.
    fn state(&self, id: &str) -> Result<Option<ContainerState>, ExecutorError>;
}

/// [`OciExecutor::run`] as `create`, `registered`, `start`.
fn create_then_start<E: OciExecutor + ?Sized>(
    executor: &E,
    bundle: &Path,
    id: &str,
    pid_file: &Path,
    io: ProcessIo,
    registered: &mut dyn FnMut(u32),
) -> Result<u32, ExecutorError> {
    let pid = executor.create(bundle, id, pid_file, io)?;
    registered(pid);
    executor.start(id)?;
    Ok(pid)
}

/// Runs a prepared command to its end.
pub trait CommandRunner: Send + Sync {
    /// Spawns `command` and waits for it (and only it) to exit.
    fn run(&self, command: &mut Command) -> io::Result<ExitStatus>;

    /// [`CommandRunner::run`], then `then` with its status before any other child of the
    /// caller is reaped: for a command that leaves a process behind (`runc run --detach`), so
    /// that the caller knows its pid before its exit can be seen. `gate` runs once the
    /// command is spawned, before it is waited for; when it says `false` the command is
    /// killed (it waits for the gate: [`Runc::run_after`]).
    fn run_then(
        &self,
        command: &mut Command,
        gate: &mut dyn FnMut() -> bool,
        then: &mut dyn FnMut(&ExitStatus),
    ) -> io::Result<ExitStatus> {
        let mut child = command.spawn()?;
        if !gate() {
            let _ = child.kill();
        }
        let status = child.wait()?;
        then(&status);
        Ok(status)
    }

    /// [`CommandRunner::run_then`] through youki's helper started ahead
    /// ([`super::ahead`]), called with `args` (what follows `podvisor youki`) and `stdio`
    /// instead of spawned. `Err` gives `stdio` back: the runner has no helper ahead (the
    /// default), or the one it had is gone; the caller spawns one.
    fn run_ahead_then(
        &self,
        args: &[OsString],
        stdio: [OwnedFd; 3],
        gate: &mut dyn FnMut() -> bool,
        then: &mut dyn FnMut(&ExitStatus),
    ) -> Result<io::Result<ExitStatus>, [OwnedFd; 3]> {
        let _ = (args, gate, then);
        Err(stdio)
    }
}

/// Spawns and waits with `std::process`: for callers whose other children are not reaped
/// behind their back.
#[derive(Debug, Clone, Copy, Default)]
pub struct DirectRunner;

impl CommandRunner for DirectRunner {
    fn run(&self, command: &mut Command) -> io::Result<ExitStatus> {
        command.status()
    }
}

/// [`OciExecutor`] over the `runc` binary: `--root <root>`, cgroupfs (no `--systemd-cgroup`),
/// a JSON log per call under `<log_dir>` (read for the error, then removed). The same
/// command line drives `podvisor youki`, youki's `libcontainer` embedded in podvisor's own
/// binary ([`Runc::youki`]).
pub struct Runc<R: CommandRunner = DirectRunner> {
    binary: PathBuf,
    /// Arguments before runc's global flags (`youki` for the embedded runtime).
    prefix: Vec<std::ffi::OsString>,
    root: PathBuf,
    log_dir: PathBuf,
    runner: R,
    seq: AtomicU64,
    mode: RuncMode,
}

/// How [`OciExecutor::run`] drives runc.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RuncMode {
    /// `runc create`, then `runc start` (two runc processes; the pid is registered while
    /// the init process waits on runc's exec FIFO, so no exit can come before it).
    #[default]
    CreateStart,
    /// `runc run --detach` (one runc process); the caller's reaper is held off from the
    /// moment runc is spawned until the pid is registered ([`CommandRunner::run_then`]).
    Run,
    /// youki's `libcontainer`, embedded: `podvisor youki run --detach` (one single-threaded
    /// helper process of podvisor's own binary, no Go runtime and no re-exec), registered as
    /// [`RuncMode::Run`]; every other operation (`exec`, `kill`, `delete`, `state`) goes
    /// through the helper too, over its own state directory (`<state>/youki`).
    Youki,
}

impl RuncMode {
    /// The executor this mode drives: Debian's runc, or the `youki` mode of `helper` (the
    /// podvisor binary: [`SELF_EXE`] in the shim), over `state`.
    pub fn executor<R: CommandRunner>(self, helper: &Path, state: &Path, runner: R) -> Runc<R> {
        match self {
            RuncMode::Youki => Runc::youki(helper, state, runner),
            mode => Runc::with_runner(Path::new(RUNC), state, runner).with_mode(mode),
        }
    }
}

impl Runc<DirectRunner> {
    /// Debian's runc with its state under `<state>/runc` and logs under `<state>/runc-log`.
    pub fn new(state: &Path) -> Runc<DirectRunner> {
        Runc::with_runner(Path::new(RUNC), state, DirectRunner)
    }
}

impl<R: CommandRunner> Runc<R> {
    /// `binary`, with its state under `<state>/runc`, commands run by `runner`.
    pub fn with_runner(binary: &Path, state: &Path, runner: R) -> Runc<R> {
        Runc {
            binary: binary.to_owned(),
            prefix: Vec::new(),
            root: state.join("runc"),
            log_dir: state.join("runc-log"),
            runner,
            seq: AtomicU64::new(0),
            mode: RuncMode::default(),
        }
    }

    /// The embedded youki runtime: `<helper> youki`, with its state under `<state>/youki`
    /// (made 0700 by the helper) and logs under `<state>/youki-log`; `run` is one `run
    /// --detach`.
    pub fn youki(helper: &Path, state: &Path, runner: R) -> Runc<R> {
        Runc {
            binary: helper.to_owned(),
            prefix: vec!["youki".into()],
            root: state.join("youki"),
            log_dir: state.join("youki-log"),
            runner,
            seq: AtomicU64::new(0),
            mode: RuncMode::Youki,
        }
    }

    /// The same runc driven in `mode` by [`OciExecutor::run`].
    #[must_use]
    pub fn with_mode(mut self, mode: RuncMode) -> Runc<R> {
        self.mode = mode;
        self
    }

    /// [`OciExecutor::run`] of a bundle `finish` completes (`config.json` written, ...): the
    /// embedded youki's helper is spawned first and waits (`run --after <fifo>`) while
    /// `finish` runs, so its start-up (the exec, the loader) overlaps the bundle's last
    /// steps; runc gets a finished bundle. A helper told nothing (`finish` failed, or the
    /// caller died) is killed or sees the FIFO's end and exits, having done nothing.
    ///
    /// # Errors
    ///
    /// `finish`'s error (nothing was created), or the executor's.
    pub fn run_after<E>(
        &self,
        bundle: &Path,
        id: &str,
        pid_file: &Path,
        io: ProcessIo,
        finish: impl FnOnce() -> Result<(), E>,
        registered: &mut dyn FnMut(u32),
    ) -> Result<u32, RunAfterError<E>> {
        if self.mode != RuncMode::Youki {
            finish().map_err(RunAfterError::Finish)?;
            return self
                .run(bundle, id, pid_file, io, registered)
                .map_err(RunAfterError::Run);
        }
        let gate = Gate::make(&self.log_dir, id)
            .map_err(|source| RunAfterError::Run(ExecutorError::Io { op: "run", source }))?;
        let mut finish = Some(finish);
        let mut failed = None;
        let mut open = || {
            let Some(finish) = finish.take() else {
                return false;
            };
            match finish() {
                Ok(()) => gate.open(),
                Err(e) => {
                    failed = Some(e);
                    false
                }
            }
        };
        let ran = self.run_detached(
            bundle,
            id,
            pid_file,
            io,
            Some((&gate, &mut open)),
            registered,
        );
        match failed {
            Some(e) => Err(RunAfterError::Finish(e)),
            None => ran.map_err(RunAfterError::Run),
        }
    }

    /// `run --detach` (`--after` the gate's FIFO, opened by `open`, with one).
    fn run_detached(
        &self,
        bundle: &Path,
        id: &str,
        pid_file: &Path,
        io: ProcessIo,
        gate: Option<(&Gate, &mut dyn FnMut() -> bool)>,
        registered: &mut dyn FnMut(u32),
    ) -> Result<u32, ExecutorError> {
        let mut verb: Vec<std::ffi::OsString> = vec!["run".into(), "--detach".into()];
        let mut open: &mut dyn FnMut() -> bool = &mut || true;
        if let Some((gate, opener)) = gate {
            verb.extend(["--after".into(), gate.path.clone().into()]);
            open = opener;
        }
        let args = container_args(&verb, bundle, pid_file, &io, id);
        let args: Vec<&OsStr> = args.iter().map(|a| a.as_os_str()).collect();
        let mut pid = None;
        self.invoke_then("run", &args, io, open, &mut |status| {
            if status.success() {
                pid = Some(read_pid("run", pid_file));
                if let Some(Ok(pid)) = &pid {
                    registered(*pid);
                }
            }
        })?;
        pid.unwrap_or_else(|| {
            Err(ExecutorError::Io {
                op: "run",
                source: io::Error::other("runc run succeeded without a pid"),
            })
        })
    }

    /// runc's state directory (`--root`).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where each call's JSON log is written (and removed after it was read).
    pub fn log_dir(&self) -> &Path {
        &self.log_dir
    }

    /// `runc exec --process <process> <id>` in the foreground, for the caller to spawn and
    /// wait for (exec probes, hooks, `kubectl exec`): runc's exit status is the process's
    /// (128 + n when a signal n ended it), its standard I/O is the process's, and a process
    /// group started with it holds the process too. With `console_socket`, the process gets a
    /// terminal whose master runc sends there. With `pid_file`, the process's pid is written
    /// there (to find it if runc is killed first: it then outlives runc).
    pub fn exec_command(
        &self,
        id: &str,
        process: &Path,
        console_socket: Option<&Path>,
        pid_file: Option<&Path>,
    ) -> Command {
        let mut command = Command::new(&self.binary);
        command
            .args(&self.prefix)
            .arg("--root")
            .arg(&self.root)
            .arg("exec")
            .arg("--process")
            .arg(process);
        if let Some(socket) = console_socket {
            command.arg("--console-socket").arg(socket);
        }
        if let Some(pid_file) = pid_file {
            command.arg("--pid-file").arg(pid_file);
        }
        command
            .arg(id)
            .env_clear()
            .env("PATH", crate::config::DEFAULT_PATH);
        command
    }

    /// Runs `runc <global flags> <args>` with `io` as its standard I/O (`stdout` captured
    /// when `capture` is set and `io` gives none); `Err` carries runc's logged error.
    fn invoke(
        &self,
        op: &'static str,
        args: &[&std::ffi::OsStr],
        io: ProcessIo,
        capture: bool,
    ) -> Result<Vec<u8>, ExecutorError> {
        self.invoke_with(op, args, io, capture, None)
    }

    /// [`Runc::invoke`], with `gate` and `then` called as [`CommandRunner::run_then`] does.
    fn invoke_then(
        &self,
        op: &'static str,
        args: &[&std::ffi::OsStr],
        io: ProcessIo,
        gate: &mut dyn FnMut() -> bool,
        then: &mut dyn FnMut(&ExitStatus),
    ) -> Result<Vec<u8>, ExecutorError> {
        self.invoke_with(op, args, io, false, Some((gate, then)))
    }

    /// Runs the command through [`CommandRunner::run_then`] only when there is a `then`: a
    /// runner may hold other work off for as long as that takes (the shim's reaper and every
    /// fork of it), which only a command that leaves a process behind needs.
    fn invoke_with(
        &self,
        op: &'static str,
        args: &[&std::ffi::OsStr],
        io: ProcessIo,
        capture: bool,
        mut then: Option<GateThen<'_>>,
    ) -> Result<Vec<u8>, ExecutorError> {
        let ioerr = |source: io::Error| ExecutorError::Io { op, source };
        std::fs::create_dir_all(&self.log_dir).map_err(ioerr)?;
        let log = self.log_dir.join(format!(
            "{}-{}-{op}.json",
            std::process::id(),
            self.seq.fetch_add(1, Ordering::Relaxed)
        ));
        let mut global: Vec<OsString> = vec![
            "--root".into(),
            self.root.clone().into(),
            "--log".into(),
            log.clone().into(),
            "--log-format".into(),
            "json".into(),
        ];
        global.extend(args.iter().map(|a| a.to_os_string()));
        // A command that leaves a process behind goes to youki's helper started ahead, if the
        // runner keeps one.
        let mut ran = None;
        let io = match (io, &mut then) {
            (
                ProcessIo::Fds {
                    stdin,
                    stdout,
                    stderr,
                },
                Some((gate, after)),
            ) if self.mode == RuncMode::Youki && !capture => {
                let stdio = or_null([stdin, stdout, stderr]).map_err(ioerr)?;
                match self
                    .runner
                    .run_ahead_then(&global, stdio, &mut **gate, &mut **after)
                {
                    Ok(status) => {
                        ran = Some(status);
                        ProcessIo::null()
                    }
                    Err([stdin, stdout, stderr]) => ProcessIo::Fds {
                        stdin: Some(stdin),
                        stdout: Some(stdout),
                        stderr: Some(stderr),
                    },
                }
            }
            (io, _) => io,
        };
        let mut captured = None;
        let status = match ran {
            Some(status) => status,
            None => {
                let mut command = Command::new(&self.binary);
                command
                    .args(&self.prefix)
                    .args(&global)
                    .env_clear()
                    .env("PATH", crate::config::DEFAULT_PATH);
                match io {
                    ProcessIo::Fds {
                        stdin,
                        stdout,
                        stderr,
                    } => {
                        command.stdin(stdin.map_or_else(Stdio::null, Stdio::from));
                        match stdout {
                            Some(fd) => {
                                command.stdout(Stdio::from(fd));
                            }
                            None if capture => {
                                // A file, not a pipe: nobody reads while the runner waits.
                                let file = tempfile_in(&self.log_dir).map_err(ioerr)?;
                                command.stdout(Stdio::from(file.try_clone().map_err(ioerr)?));
                                captured = Some(file);
                            }
                            None => {
                                command.stdout(Stdio::null());
                            }
                        }
                        command.stderr(stderr.map_or_else(Stdio::null, Stdio::from));
                    }
                    ProcessIo::Terminal { .. } => {
                        command
                            .stdin(Stdio::null())
                            .stdout(Stdio::null())
                            .stderr(Stdio::null());
                    }
                }
                let status = match then {
                    Some((gate, then)) => self.runner.run_then(&mut command, gate, then),
                    None => self.runner.run(&mut command),
                };
                // The descriptors given to the child must close here, not when the caller
                // drops the executor's return value: the container holds its own copies.
                drop(command);
                status
            }
        }
        .map_err(ioerr);
        let logged = std::fs::read(&log).unwrap_or_default();
        let _ = std::fs::remove_file(&log);
        let status = status?;
        if !status.success() {
            let message = last_error(&logged).unwrap_or_else(|| format!("runc {op}: {status}"));
            return Err(ExecutorError::Runtime { op, message });
        }
        let mut out = Vec::new();
        if let Some(mut file) = captured {
            file.rewind().map_err(ioerr)?;
            file.read_to_end(&mut out).map_err(ioerr)?;
        }
        Ok(out)
    }
}

/// Three standard descriptors, `/dev/null` (read-write) for each one not given.
fn or_null(stdio: [Option<OwnedFd>; 3]) -> io::Result<[OwnedFd; 3]> {
    let take = |fd: Option<OwnedFd>| match fd {
        Some(fd) => Ok(fd),
        None => std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/null")
            .map(OwnedFd::from),
    };
    let [stdin, stdout, stderr] = stdio;
    Ok([take(stdin)?, take(stdout)?, take(stderr)?])
}

/// An anonymous file in `dir` (`O_TMPFILE`).
fn tempfile_in(dir: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_TMPFILE)
        .open(dir)
}

/// The last `error`-level message of runc's JSON log.
fn last_error(log: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct Line {
        level: String,
        msg: String,
    }
    String::from_utf8_lossy(log)
        .lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<Line>(l).ok())
        .find(|l| l.level == "error" || l.level == "fatal")
        .map(|l| l.msg)
}

/// [`CommandRunner::run_then`]'s `gate` and `then`.
type GateThen<'a> = (&'a mut dyn FnMut() -> bool, &'a mut dyn FnMut(&ExitStatus));

/// Why [`Runc::run_after`] failed.
#[derive(Debug)]
pub enum RunAfterError<E> {
    /// The bundle could not be finished: nothing was created.
    Finish(E),
    /// The executor's.
    Run(ExecutorError),
}

/// The FIFO a helper started ahead of its bundle waits on (`--after`): a byte says the bundle
/// is done. Its writing end is held from before the spawn until the gate is dropped (after
/// the helper exited), so the helper's open never blocks and its read ends with the byte,
/// or at the end of the FIFO once nothing holds it (the shim died).
struct Gate {
    path: PathBuf,
    writer: File,
}

impl Gate {
    /// A fresh FIFO (0600) in `dir` for container `id`, opened read-write (which never
    /// blocks).
    fn make(dir: &Path, id: &str) -> io::Result<Gate> {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::create_dir_all(dir)?;
        let path = dir.join(format!("{id}.after"));
        let _ = std::fs::remove_file(&path);
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            &path,
            rustix::fs::Mode::from_raw_mode(0o600),
        )?;
        let writer = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path);
        match writer {
            Ok(writer) => Ok(Gate { path, writer }),
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                Err(e)
            }
        }
    }

    /// Lets the helper go on.
    fn open(&self) -> bool {
        (&self.writer).write_all(b"1").is_ok()
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// `VERB.. --bundle B --pid-file P [--console-socket S] ID`, as `create` and `run` take them.
fn container_args<V: AsRef<OsStr>>(
    verb: &[V],
    bundle: &Path,
    pid_file: &Path,
    io: &ProcessIo,
    id: &str,
) -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = verb.iter().map(|v| v.as_ref().to_owned()).collect();
    args.extend([
        "--bundle".into(),
        bundle.into(),
        "--pid-file".into(),
        pid_file.into(),
    ]);
    if let ProcessIo::Terminal { console_socket } = io {
        args.extend(["--console-socket".into(), console_socket.into()]);
    }
    args.push(id.into());
    args
}

fn read_pid(op: &'static str, pid_file: &Path) -> Result<u32, ExecutorError> {
    let text = std::fs::read_to_string(pid_file).map_err(|source| ExecutorError::Io {
        op,
        source: io::Error::new(
            source.kind(),
            format!("reading pid file {}: {source}", pid_file.display()),
        ),
    })?;
    text.trim().parse().map_err(|_| ExecutorError::Io {
        op,
        source: io::Error::other(format!("pid file {} holds {text:?}", pid_file.display())),
    })
}

fn not_found(e: &ExecutorError) -> bool {
    matches!(e, ExecutorError::Runtime { message, .. } if message.contains("does not exist"))
}

impl<R: CommandRunner> OciExecutor for Runc<R> {
    fn create(
        &self,
        bundle: &Path,
        id: &str,
        pid_file: &Path,
        io: ProcessIo,
    ) -> Result<u32, ExecutorError> {
        let args = container_args(&["create"], bundle, pid_file, &io, id);
        let args: Vec<&OsStr> = args.iter().map(|a| a.as_os_str()).collect();
        self.invoke("create", &args, io, false)?;
        read_pid("create", pid_file)
    }

    fn start(&self, id: &str) -> Result<(), ExecutorError> {
        self.invoke(
            "start",
            &["start".as_ref(), id.as_ref()],
            ProcessIo::null(),
            false,
        )
        .map(drop)
    }

    fn run(
        &self,
        bundle: &Path,
        id: &str,
        pid_file: &Path,
        io: ProcessIo,
        registered: &mut dyn FnMut(u32),
    ) -> Result<u32, ExecutorError> {
        if self.mode == RuncMode::CreateStart {
            return create_then_start(self, bundle, id, pid_file, io, registered);
        }
        self.run_detached(bundle, id, pid_file, io, None, registered)
    }

    fn kill(&self, id: &str, signal: i32, all: bool) -> Result<(), ExecutorError> {
        let signal = signal.to_string();
        let mut args: Vec<&std::ffi::OsStr> = vec!["kill".as_ref()];
        if all {
            args.push("--all".as_ref());
        }
        args.extend([OsStr::new(id), OsStr::new(&signal)]);
        self.invoke("kill", &args, ProcessIo::null(), false)
            .map(drop)
    }

    fn delete(&self, id: &str, force: bool) -> Result<(), ExecutorError> {
        let mut args: Vec<&std::ffi::OsStr> = vec!["delete".as_ref()];
        if force {
            args.push("--force".as_ref());
        }
        args.push(id.as_ref());
        match self.invoke("delete", &args, ProcessIo::null(), false) {
            Err(e) if not_found(&e) => Ok(()),
            other => other.map(drop),
        }
    }

    /// The embedded youki's is done here, without a helper process: libcontainer's delete of
    /// a stopped container with no poststop hooks (the shim's specs have none) removes its
    /// cgroup in each hierarchy, then its state directory, and so does this. The helper would
    /// cost an exec and a dozen reads of the mount table, competing with the pod's next
    /// container starting. runc's own state stays runc's to remove.
    fn delete_exited(&self, id: &str, cgroups_path: &str) -> Result<(), ExecutorError> {
        // An ID that is not one name below the state directory is the helper's to refuse.
        if self.mode != RuncMode::Youki || Path::new(id).file_name() != Some(OsStr::new(id)) {
            return self.delete(id, true);
        }
        let ioerr = |source: io::Error| ExecutorError::Io {
            op: "delete",
            source,
        };
        crate::cgroup::remove_in_every_hierarchy(cgroups_path).map_err(ioerr)?;
        match std::fs::remove_dir_all(self.root.join(id)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(ioerr(e)),
            _ => Ok(()),
        }
    }

    fn exec(
        &self,
        id: &str,
        process: &oci_spec::runtime::Process,
        pid_file: &Path,
        io: ProcessIo,
    ) -> Result<u32, ExecutorError> {
        let ioerr = |source: io::Error| ExecutorError::Io { op: "exec", source };
        // The process spec goes in a file next to the pid file.
        let spec_path = pid_file.with_extension("process.json");
        let json = serde_json::to_vec(process).map_err(|e| ioerr(io::Error::other(e)))?;
        std::fs::write(&spec_path, json).map_err(ioerr)?;
        let mut args: Vec<&std::ffi::OsStr> = vec![
            "exec".as_ref(),
            "--detach".as_ref(),
            "--pid-file".as_ref(),
            pid_file.as_os_str(),
            "--process".as_ref(),
            spec_path.as_os_str(),
        ];
        let console = match &io {
            ProcessIo::Terminal { console_socket } => Some(console_socket.clone()),
            ProcessIo::Fds { .. } => None,
        };
        if let Some(socket) = &console {
            args.extend([OsStr::new("--console-socket"), socket.as_os_str()]);
        }
        args.push(id.as_ref());
        let result = self.invoke("exec", &args, io, false);
        let _ = std::fs::remove_file(&spec_path);
        result?;
        read_pid("exec", pid_file)
    }

    fn state(&self, id: &str) -> Result<Option<ContainerState>, ExecutorError> {
        match self.invoke(
            "state",
            &["state".as_ref(), id.as_ref()],
            ProcessIo::null(),
            true,
        ) {
            Ok(out) => serde_json::from_slice(&out)
                .map(Some)
                .map_err(|e| ExecutorError::Io {
                    op: "state",
                    source: io::Error::other(format!("decoding runc state: {e}")),
                }),
            Err(e) if not_found(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// A listening unix socket for `--console-socket`: runc connects and sends the pseudo-
/// terminal's master descriptor (`SCM_RIGHTS`). The connection is buffered by the kernel, so
/// [`ConsoleSocket::receive`] can be called after the runc command returned.
pub struct ConsoleSocket {
    listener: std::os::unix::net::UnixListener,
    path: PathBuf,
}

impl ConsoleSocket {
    /// Binds a socket at `path` (removing a stale one).
    pub fn bind(path: &Path) -> io::Result<ConsoleSocket> {
        let _ = std::fs::remove_file(path);
        Ok(ConsoleSocket {
            listener: std::os::unix::net::UnixListener::bind(path)?,
            path: path.to_owned(),
        })
    }

    /// The socket's path, for [`ProcessIo::Terminal`].
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// [`ConsoleSocket::receive`], giving up after `timeout` (runc failed before it
    /// connected).
    pub fn receive_within(&self, timeout: std::time::Duration) -> io::Result<OwnedFd> {
        use rustix::event::{PollFd, PollFlags, Timespec};
        let mut fds = [PollFd::new(&self.listener, PollFlags::IN)];
        let limit = Timespec {
            tv_sec: i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(timeout.subsec_nanos()),
        };
        if rustix::event::poll(&mut fds, Some(&limit))? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "runc sent no terminal",
            ));
        }
        self.receive()
    }

    /// Accepts runc's connection and returns the terminal master it sent.
    pub fn receive(&self) -> io::Result<OwnedFd> {
        use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
        let (stream, _) = self.listener.accept()?;
        let mut name = [0_u8; 4096];
        let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut ancillary = RecvAncillaryBuffer::new(&mut space);
        rustix::net::recvmsg(
            &stream,
            &mut [io::IoSliceMut::new(&mut name)],
            &mut ancillary,
            RecvFlags::CMSG_CLOEXEC,
        )?;
        for message in ancillary.drain() {
            if let RecvAncillaryMessage::ScmRights(mut fds) = message
                && let Some(fd) = fds.next()
            {
                return Ok(fd);
            }
        }
        Err(io::Error::other(
            "runc sent no terminal over the console socket",
        ))
    }
}

impl Drop for ConsoleSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runc_errors_from_its_json_log() {
        let log = br#"{"level":"warning","msg":"something","time":"2026-11-25T00:00:00Z"}
{"level":"error","msg":"runc create failed: unable to start container process: exec: \"nope\": executable file not found in $PATH","time":"2026-11-25T00:00:00Z"}
"#;
        let msg = last_error(log).unwrap();
        assert_eq!(
            msg,
            "runc create failed: unable to start container process: exec: \"nope\": executable \
             file not found in $PATH"
        );
        let e = ExecutorError::Runtime {
            op: "create",
            message: msg,
        };
        assert_eq!(
            e.kubelet_message(""),
            "failed to create containerd task: failed to create shim task: OCI runtime create \
             failed: runc create failed: unable to start container process: exec: \"nope\": \
             executable file not found in $PATH: unknown"
        );
        let e = ExecutorError::Runtime {
            op: "exec",
            message: "x".into(),
        };
        assert_eq!(
            e.kubelet_message("e1"),
            "failed to exec in container: failed to start exec \"e1\": OCI runtime exec \
             failed: x: unknown"
        );
        assert_eq!(last_error(b"not json\n"), None);
        // `runc run` fails in its create part: the kubelet sees containerd's create text.
        let e = ExecutorError::Runtime {
            op: "run",
            message: "runc run failed: unable to start container process: exec: \"nope\"".into(),
        };
        assert_eq!(
            e.kubelet_message(""),
            "failed to create containerd task: failed to create shim task: OCI runtime create \
             failed: runc create failed: unable to start container process: exec: \"nope\": \
             unknown"
        );
    }

    #[test]
    fn state_decodes_runc_output() {
        let out = br#"{"ociVersion":"1.0.2-dev","id":"c1","pid":4242,"status":"running","bundle":"/b","rootfs":"/b/rootfs","created":"2026-11-25T00:00:00Z","owner":""}"#;
        let s: ContainerState = serde_json::from_slice(out).unwrap();
        assert_eq!(
            s,
            ContainerState {
                id: "c1".into(),
                pid: 4242,
                status: Status::Running,
                bundle: "/b".into(),
            }
        );
    }

    /// A fake runtime: `name`, a shell script in a fresh directory of its own (removed when
    /// dropped) that appends its arguments to `calls`, then runs `body`.
    struct Fake {
        dir: PathBuf,
        script: PathBuf,
        calls: PathBuf,
    }

    impl Fake {
        fn new(test: &str, name: &str, body: &str) -> Fake {
            let dir =
                std::env::temp_dir().join(format!("podvisor-fake-{test}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            let script = dir.join(name);
            let calls = dir.join("calls");
            podvisor_testkit::write_script(
                &script,
                &format!("#!/bin/sh\necho \"$@\" >> {}\n{body}", calls.display()),
            );
            Fake { dir, script, calls }
        }

        /// Each call's arguments after the first `skip` (the global flags); none if it never
        /// ran.
        fn calls(&self, skip: usize) -> Vec<Vec<String>> {
            std::fs::read_to_string(&self.calls)
                .unwrap_or_default()
                .lines()
                .map(|l| l.split(' ').skip(skip).map(str::to_owned).collect())
                .collect()
        }
    }

    impl Drop for Fake {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    /// A fake runc: a shell script that logs its arguments and fails like runc.
    #[test]
    fn commands_and_failures_through_a_fake_runtime() {
        let fake = Fake::new(
            "runc",
            "runc",
            "log=$4\n\
             case \"$7\" in\n\
             create) echo 4242 > \"${11}\" ;;\n\
             state) echo '{\"level\":\"error\",\"msg\":\"container does not exist\"}' > \"$log\"; exit 1 ;;\n\
             start) echo '{\"level\":\"error\",\"msg\":\"cannot start a container that has stopped\"}' > \"$log\"; exit 1 ;;\n\
             esac\n",
        );
        let dir = &fake.dir;
        let runc = Runc::with_runner(&fake.script, dir, DirectRunner);
        let pid = runc
            .create(
                Path::new("/bundle"),
                "c1",
                &dir.join("pid"),
                ProcessIo::null(),
            )
            .unwrap();
        assert_eq!(pid, 4242);
        assert_eq!(runc.state("c1").unwrap(), None);
        let err = runc.start("c1").unwrap_err();
        assert_eq!(
            err.to_string(),
            "start failed: cannot start a container that has stopped"
        );
        runc.kill("c1", 15, true).unwrap();
        runc.delete("c1", true).unwrap();
        let calls = fake.calls(0);
        let lines: Vec<&[String]> = calls.iter().map(|c| &c[6..]).collect();
        let want: [&[&str]; 5] = [
            &[
                "create",
                "--bundle",
                "/bundle",
                "--pid-file",
                &format!("{}", dir.join("pid").display()),
                "c1",
            ],
            &["state", "c1"],
            &["start", "c1"],
            &["kill", "--all", "c1", "15"],
            &["delete", "--force", "c1"],
        ];
        assert_eq!(lines, want);
        let (root, log_dir) = (dir.join("runc"), dir.join("runc-log"));
        let (root, log_dir) = (root.to_str().unwrap(), log_dir.to_str().unwrap());
        assert!(
            calls
                .iter()
                .all(|c| c[..3] == ["--root", root, "--log"] && c[3].starts_with(log_dir))
        );
        // Every call's log is gone.
        assert_eq!(std::fs::read_dir(log_dir).unwrap().count(), 0);
    }

    /// [`RuncMode`]: `create` + `start` by default, one `run --detach` in run mode; the pid
    /// reaches `registered` once, before `run` returns.
    #[test]
    fn run_modes_through_a_fake_runtime() {
        let fake = Fake::new(
            "runc-run",
            "runc",
            "case \"$7\" in\n\
             create) echo 4242 > \"${11}\" ;;\n\
             run) echo 4343 > \"${12}\" ;;\n\
             esac\n",
        );
        let pid_file = fake.dir.join("pid");
        for (mode, want) in [(RuncMode::CreateStart, 4242), (RuncMode::Run, 4343)] {
            let runc = Runc::with_runner(&fake.script, &fake.dir, DirectRunner).with_mode(mode);
            let mut registered = Vec::new();
            let pid = runc
                .run(
                    Path::new("/bundle"),
                    "c1",
                    &pid_file,
                    ProcessIo::null(),
                    &mut |pid| registered.push(pid),
                )
                .unwrap();
            assert_eq!((pid, registered), (want, vec![want]), "{mode:?}");
        }
        let lines = fake.calls(6);
        let pid_file = pid_file.display().to_string();
        let want: [&[&str]; 3] = [
            &[
                "create",
                "--bundle",
                "/bundle",
                "--pid-file",
                &pid_file,
                "c1",
            ],
            &["start", "c1"],
            &[
                "run",
                "--detach",
                "--bundle",
                "/bundle",
                "--pid-file",
                &pid_file,
                "c1",
            ],
        ];
        assert_eq!(lines, want);
    }

    /// Records which of the runner's two ways each command took.
    #[derive(Default)]
    struct Recording(std::sync::Mutex<Vec<(String, bool)>>);

    impl CommandRunner for &Recording {
        fn run(&self, command: &mut Command) -> io::Result<ExitStatus> {
            let op = command
                .get_args()
                .nth(6)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            self.0.lock().unwrap().push((op, false));
            command.status()
        }

        fn run_then(
            &self,
            command: &mut Command,
            gate: &mut dyn FnMut() -> bool,
            then: &mut dyn FnMut(&ExitStatus),
        ) -> io::Result<ExitStatus> {
            assert!(gate());
            let op = command
                .get_args()
                .nth(6)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            self.0.lock().unwrap().push((op, true));
            let status = command.status()?;
            then(&status);
            Ok(status)
        }
    }

    /// Only `run --detach`, which leaves the container's process behind, goes through
    /// [`CommandRunner::run_then`] (the shim holds its reaper and every other fork off for
    /// as long as that takes); every other command through [`CommandRunner::run`].
    #[test]
    fn only_a_command_that_leaves_a_process_behind_holds_the_runner() {
        let fake = Fake::new(
            "runc-then",
            "runc",
            "case \"$7\" in\n\
             create) echo 4242 > \"${11}\" ;;\n\
             run) echo 4343 > \"${12}\" ;;\n\
             state) echo '{\"id\":\"c1\",\"pid\":0,\"status\":\"stopped\",\"bundle\":\"/b\"}' ;;\n\
             esac\n",
        );
        let recording = Recording::default();
        let (script, dir) = (&fake.script, &fake.dir);
        let pid_file = dir.join("pid");
        for mode in [RuncMode::CreateStart, RuncMode::Run] {
            let runc = Runc::with_runner(script, dir, &recording).with_mode(mode);
            runc.run(
                Path::new("/b"),
                "c1",
                &pid_file,
                ProcessIo::null(),
                &mut |_| {},
            )
            .unwrap();
        }
        let runc = Runc::with_runner(script, dir, &recording);
        runc.kill("c1", 15, false).unwrap();
        assert!(runc.state("c1").unwrap().is_some());
        runc.delete("c1", true).unwrap();
        runc.delete_exited("c1", "/pods/p1/c1-1").unwrap();
        let calls = recording.0.lock().unwrap().clone();
        let calls: Vec<(&str, bool)> = calls.iter().map(|(op, t)| (op.as_str(), *t)).collect();
        assert_eq!(
            calls,
            [
                ("create", false),
                ("start", false),
                ("run", true),
                ("kill", false),
                ("state", false),
                ("delete", false),
                // runc's state is runc's to remove.
                ("delete", false),
            ]
        );
    }

    /// The embedded youki's removal of an exited container runs no helper: its state
    /// directory goes (its cgroup too, in every hierarchy: `tests/oci.rs` checks that as
    /// root). An ID that could leave the state directory goes to the helper's `delete
    /// --force`; a cgroups path that could leave the hierarchies is refused, nothing removed.
    #[test]
    fn youki_removes_an_exited_container_without_its_helper() {
        let fake = Fake::new("youki-del", "podvisor", "");
        let runc = Runc::youki(&fake.script, &fake.dir, DirectRunner);
        let state = runc.root().join("c1");
        std::fs::create_dir_all(&state).unwrap();
        std::fs::write(state.join("state.json"), "{}").unwrap();
        runc.delete_exited("c1", "/podvisor-unit-test-none/c1-1")
            .unwrap();
        assert!(!state.exists());
        assert!(!fake.calls.exists(), "the helper ran");
        // Already gone: no error either.
        runc.delete_exited("c1", "/podvisor-unit-test-none/c1-1")
            .unwrap();
        for path in ["/p/../../c-1", "/", ""] {
            std::fs::create_dir_all(&state).unwrap();
            let err = runc.delete_exited("c1", path).unwrap_err();
            assert!(
                matches!(&err, ExecutorError::Io { source, .. }
                    if source.kind() == io::ErrorKind::InvalidInput),
                "{path:?}: {err}"
            );
            assert!(state.exists(), "{path:?}");
        }
        for id in ["..", ".", "a/b"] {
            runc.delete_exited(id, "/p/c-1").unwrap();
        }
        // `youki --root <r> --log <l> --log-format json <op> ...`
        assert_eq!(
            fake.calls(7),
            [
                ["delete", "--force", ".."],
                ["delete", "--force", "."],
                ["delete", "--force", "a/b"]
            ]
        );
    }

    /// `run_after`: the embedded youki's helper is spawned before the bundle is finished and
    /// waits on its FIFO (`run --after`); it goes on only once `finish` succeeded. When
    /// `finish` fails, the helper is killed having done nothing and the error is `finish`'s.
    /// runc is spawned only after `finish`. No FIFO is left.
    #[test]
    fn youki_starts_before_the_bundle_is_finished_and_waits_for_it() {
        let fake = Fake::new(
            "youki-after",
            "podvisor",
            "case \"$8\" in\n\
             run) [ \"$(head -c1 \"${11}\")\" = 1 ] || exit 1\n\
                  touch \"$(dirname \"$0\")/ran\"; echo 4545 > \"${15}\" ;;\n\
             esac\n",
        );
        let runc = Runc::youki(&fake.script, &fake.dir, DirectRunner);
        let (pid_file, ran) = (fake.dir.join("pid"), fake.dir.join("ran"));
        let spawned = || {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while fake.calls(7).is_empty() && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            !fake.calls(7).is_empty()
        };
        let mut seen = Vec::new();
        let pid = runc
            .run_after(
                Path::new("/b"),
                "c1",
                &pid_file,
                ProcessIo::null(),
                || {
                    assert!(spawned(), "the helper was not started before the bundle");
                    assert!(!ran.exists(), "the helper did not wait");
                    Ok::<(), String>(())
                },
                &mut |p| seen.push(p),
            )
            .unwrap();
        assert_eq!((pid, seen.as_slice()), (4545, [4545].as_slice()));
        assert!(ran.exists());
        let fifo = runc.log_dir().join("c1.after").display().to_string();
        assert_eq!(
            fake.calls(7),
            [[
                "run",
                "--detach",
                "--after",
                &fifo,
                "--bundle",
                "/b",
                "--pid-file",
                &pid_file.display().to_string(),
                "c1"
            ]]
        );
        // This helper is the process that waits (nothing of it outlives its kill).
        let waiting = Fake::new(
            "youki-after-killed",
            "podvisor",
            "[ \"$8\" = run ] && exec head -c1 \"${11}\"\n",
        );
        let runc = Runc::youki(&waiting.script, &waiting.dir, DirectRunner);
        let started = std::time::Instant::now();
        let err = runc
            .run_after(
                Path::new("/b"),
                "c2",
                &pid_file,
                ProcessIo::null(),
                || {
                    let deadline = started + std::time::Duration::from_secs(10);
                    while waiting.calls(7).is_empty() && std::time::Instant::now() < deadline {
                        std::thread::sleep(std::time::Duration::from_millis(5));
                    }
                    Err("no bundle")
                },
                &mut |p| seen.push(p),
            )
            .unwrap_err();
        assert!(matches!(err, RunAfterError::Finish("no bundle")), "{err:?}");
        assert_eq!(waiting.calls(7).len(), 1);
        assert_eq!(seen, [4545]);
        let left: Vec<_> = std::fs::read_dir(runc.log_dir())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(left.is_empty(), "{left:?}");
        // runc reads its bundle once spawned: it gets a finished one.
        let runc =
            Runc::with_runner(&fake.script, &fake.dir, DirectRunner).with_mode(RuncMode::Run);
        std::fs::remove_file(&fake.calls).unwrap();
        let err = runc
            .run_after(
                Path::new("/b"),
                "c3",
                &pid_file,
                ProcessIo::null(),
                || {
                    assert!(
                        fake.calls(0).is_empty(),
                        "runc ran before its bundle was done"
                    );
                    Err("no bundle")
                },
                &mut |p| seen.push(p),
            )
            .unwrap_err();
        assert!(matches!(err, RunAfterError::Finish("no bundle")), "{err:?}");
        assert!(fake.calls(0).is_empty());
    }
}
