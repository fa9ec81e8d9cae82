//! Streaming exec (`kubectl exec`): start a command in a container's view and hand its streams
//! to the agent.
//!
//! The shim does not relay a byte: it creates the pipes (or a pseudo-terminal), starts the
//! command exactly as an exec probe's (cgroup, namespaces, env, working directory, user) and
//! passes the agent's ends over the connection with `SCM_RIGHTS` in its `ExecStarted` answer.
//! Then its thread sleeps in `poll` on the connection and a wake-up pipe the reaper writes to:
//! the exit goes back as `ExecExited`; a hang-up before it kills the command's process group.

use super::child::ChildSetup;
use super::protocol::{MAX_PASSED_FDS, Response};
use super::supervisor::{ExecProcesses, ExecSpecFile, OciExec, Shim, Waiter, exec_error};
use rustix::event::{PollFd, PollFlags};
use rustix::process::{Pid, Signal};
use std::fs::File;
use std::io::{self, IoSlice, Read, Write};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::{Arc, mpsc};

/// What to run and which streams to hand over.
pub(super) struct StreamRequest {
    pub(super) instance: u64,
    pub(super) argv: Vec<String>,
    pub(super) stdin: bool,
    pub(super) stdout: bool,
    pub(super) stderr: bool,
    pub(super) tty: bool,
    pub(super) size: Option<(u16, u16)>,
}

/// A started command: what the agent gets and what the connection waits on.
struct Running {
    pid: u32,
    fds: Vec<OwnedFd>,
    status: mpsc::Receiver<rustix::process::WaitStatus>,
    wake: OwnedFd,
    /// Dropped (every process of the exec killed) once the command exited or the agent hung
    /// up.
    processes: ExecProcesses,
    /// An OCI exec's process spec file, removed at the end.
    _spec: Option<ExecSpecFile>,
}

/// Serves one `ExecStream` connection to its end.
pub(super) fn serve(
    shim: &Arc<Shim>,
    mut stream: UnixStream,
    request: &StreamRequest,
) -> io::Result<()> {
    shim.busy(true);
    let started = start(shim, request);
    shim.busy(false);
    let running = match started {
        Ok(running) => running,
        Err(response) => return write_line(&mut stream, &response),
    };
    let answer = Response::ExecStarted {
        pid: running.pid,
        fds: running.fds.len(),
    };
    let sent = send_with_fds(&stream, &answer, &running.fds);
    // The agent holds its ends now (or nobody does): ours go, so EOFs reach both sides.
    drop(running.fds);
    if let Err(e) = sent {
        kill_group(running.pid);
        return Err(e);
    }
    let result = wait(&mut stream, running.pid, &running.status, &running.wake);
    drop(running.processes);
    result
}

fn start(shim: &Arc<Shim>, request: &StreamRequest) -> Result<Running, Response> {
    let target = shim.exec_target(request.instance)?;
    if let Some(oci) = &target.oci {
        return start_oci(shim, request, oci);
    }
    let Some(program) = request.argv.first() else {
        return Err(Response::Error {
            message: "exec: empty command".into(),
        });
    };
    let failed = |e: io::Error| shim.exec_failed(request.instance, &e);
    let (processes, procs) = ExecProcesses::create(&target.cgroup).map_err(failed)?;
    let (setup, report) = ChildSetup::for_exec(
        target.pid,
        target.working_dir.as_deref(),
        &target.user,
        procs,
        target.rootless,
    )
    .map_err(failed)?;
    let (child_stdio, agent_fds) = streams(request).map_err(failed)?;
    let mut command = Command::new(program);
    command.args(&request.argv[1..]).env_clear();
    command.envs(target.env.iter().map(|(k, v)| (k, v)));
    // containerd gives a terminal exec `TERM=xterm` unless the container sets one.
    if request.tty && !target.env.iter().any(|(k, _)| k == "TERM") {
        command.env("TERM", "xterm");
    }
    let [stdin, stdout, stderr] = child_stdio;
    command.stdin(stdin).stdout(stdout).stderr(stderr);
    let setup = if request.tty {
        setup.with_controlling_tty()
    } else {
        command.process_group(0);
        setup
    };
    // SAFETY: `ChildSetup::run` only makes async-signal-safe system calls on data prepared
    // before fork; it does not allocate or take locks.
    #[allow(unsafe_code)]
    unsafe {
        let mut setup = setup;
        command.pre_exec(move || setup.run());
    }
    let (wake_rx, wake_tx) = rustix::pipe::pipe_with(
        rustix::pipe::PipeFlags::CLOEXEC | rustix::pipe::PipeFlags::NONBLOCK,
    )
    .map_err(|e| failed(e.into()))?;
    let (tx, rx) = mpsc::channel();
    let spawned = shim.spawn(&mut command, Waiter::Stream { tx, wake: wake_tx });
    // Drops our copies of the command's ends.
    drop(command);
    match spawned {
        Ok(child) => Ok(Running {
            pid: child.id(),
            fds: agent_fds,
            status: rx,
            wake: wake_rx,
            processes,
            _spec: None,
        }),
        Err(e) => {
            let detail = report
                .failed_step(&[])
                .unwrap_or_else(|| exec_error(program, &e));
            Err(Response::Error {
                message: format!(
                    "failed to exec in container: failed to start exec \"{}\": OCI runtime exec \
                     failed: exec failed: unable to start container process: {detail}: unknown",
                    exec_id()
                ),
            })
        }
    }
}

/// An OCI container's streaming exec: a foreground `runc exec` in a process group of its own,
/// with pipes, or with a terminal runc makes and sends over a console socket (its master is
/// the agent's end).
fn start_oci(
    shim: &Arc<Shim>,
    request: &StreamRequest,
    oci: &Arc<OciExec>,
) -> Result<Running, Response> {
    use crate::oci::executor::ConsoleSocket;
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let failed = |e: io::Error| shim.exec_failed(request.instance, &e);
    let console = if request.tty {
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // Short: unix socket paths are limited to 108 bytes.
        let path = std::env::temp_dir().join(format!("pv-console-{}-{n}", std::process::id()));
        Some(ConsoleSocket::bind(&path).map_err(failed)?)
    } else {
        None
    };
    let (mut command, spec) = oci
        .command(
            shim,
            &request.argv,
            console.as_ref().map(ConsoleSocket::path),
        )
        .map_err(failed)?;
    let mut agent_fds = Vec::new();
    if console.is_some() {
        command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
    } else {
        let ([stdin, stdout, stderr], fds) = streams(request).map_err(failed)?;
        command.stdin(stdin).stdout(stdout).stderr(stderr);
        agent_fds = fds;
    }
    command.process_group(0);
    let (wake_rx, wake_tx) = rustix::pipe::pipe_with(
        rustix::pipe::PipeFlags::CLOEXEC | rustix::pipe::PipeFlags::NONBLOCK,
    )
    .map_err(|e| failed(e.into()))?;
    let (tx, rx) = mpsc::channel();
    let spawned = shim.spawn(&mut command, Waiter::Stream { tx, wake: wake_tx });
    drop(command);
    let child = spawned.map_err(failed)?;
    let pid = child.id();
    drop(child);
    if let Some(console) = console {
        let master = match console.receive_within(std::time::Duration::from_secs(10)) {
            Ok(master) => master,
            Err(e) => {
                kill_group(pid);
                return Err(Response::Error {
                    message: format!(
                        "failed to exec in container: failed to start exec \"{}\": OCI runtime \
                         exec failed: {e}: unknown",
                        exec_id()
                    ),
                });
            }
        };
        if let Some((cols, rows)) = request.size {
            let size = rustix::termios::Winsize {
                ws_row: rows,
                ws_col: cols,
                ws_xpixel: 0,
                ws_ypixel: 0,
            };
            let _ = rustix::termios::tcsetwinsize(&master, size);
        }
        agent_fds.push(master);
    }
    Ok(Running {
        pid,
        fds: agent_fds,
        status: rx,
        wake: wake_rx,
        processes: ExecProcesses::none(),
        _spec: Some(spec),
    })
}

/// The command's stdin, stdout and stderr, and the agent's ends (stdin's write end, stdout's
/// and stderr's read ends, those asked for; with a TTY the terminal's master alone).
fn streams(request: &StreamRequest) -> io::Result<([Stdio; 3], Vec<OwnedFd>)> {
    use rustix::pipe::{PipeFlags, pipe_with};
    if request.tty {
        let (master, slave) = open_pty()?;
        if let Some((cols, rows)) = request.size {
            let size = rustix::termios::Winsize {
                ws_row: rows,
                ws_col: cols,
                ws_xpixel: 0,
                ws_ypixel: 0,
            };
            rustix::termios::tcsetwinsize(&master, size)?;
        }
        let stdio = [
            Stdio::from(slave.try_clone()?),
            Stdio::from(slave.try_clone()?),
            Stdio::from(slave),
        ];
        return Ok((stdio, vec![master]));
    }
    let mut agent = Vec::new();
    let stdin = if request.stdin {
        let (read, write) = pipe_with(PipeFlags::CLOEXEC)?;
        agent.push(write);
        Stdio::from(read)
    } else {
        Stdio::null()
    };
    let mut output = |wanted: bool| -> io::Result<Stdio> {
        if !wanted {
            return Ok(Stdio::null());
        }
        let (read, write) = pipe_with(PipeFlags::CLOEXEC)?;
        agent.push(read);
        Ok(Stdio::from(write))
    };
    let stdout = output(request.stdout)?;
    let stderr = output(request.stderr)?;
    Ok(([stdin, stdout, stderr], agent))
}

/// A new pseudo-terminal: (master, slave), neither becoming the shim's controlling terminal.
pub(super) fn open_pty() -> io::Result<(OwnedFd, OwnedFd)> {
    use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
    let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)?;
    grantpt(&master)?;
    unlockpt(&master)?;
    let name = ptsname(&master, Vec::new())?;
    let slave = rustix::fs::open(
        name.as_c_str(),
        rustix::fs::OFlags::RDWR | rustix::fs::OFlags::NOCTTY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?;
    Ok((master, slave))
}

/// containerd names each exec with 32 random bytes in hex.
fn exec_id() -> String {
    let mut bytes = [0_u8; 32];
    if let Ok(mut random) = File::open("/dev/urandom") {
        let _ = random.read_exact(&mut bytes);
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(super) fn write_line(stream: &mut UnixStream, value: &Response) -> io::Result<()> {
    let mut line = serde_json::to_vec(value).map_err(io::Error::other)?;
    line.push(b'\n');
    stream.write_all(&line)
}

/// Sends the answer line with the descriptors attached to its first byte.
pub(super) fn send_with_fds(
    stream: &UnixStream,
    value: &Response,
    fds: &[OwnedFd],
) -> io::Result<()> {
    use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags, sendmsg};
    let mut line = serde_json::to_vec(value).map_err(io::Error::other)?;
    line.push(b'\n');
    let borrowed: Vec<BorrowedFd<'_>> = fds.iter().map(AsFd::as_fd).collect();
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_PASSED_FDS))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !borrowed.is_empty() && !control.push(SendAncillaryMessage::ScmRights(&borrowed)) {
        return Err(io::Error::other("too many descriptors for one answer"));
    }
    let sent = loop {
        match sendmsg(
            stream,
            &[IoSlice::new(&line)],
            &mut control,
            SendFlags::NOSIGNAL,
        ) {
            Ok(n) => break n,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    };
    (&*stream).write_all(&line[sent..])
}

fn kill_group(pid: u32) {
    if let Some(pgid) = i32::try_from(pid).ok().and_then(Pid::from_raw) {
        let _ = rustix::process::kill_process_group(pgid, Signal::KILL);
    }
}

/// Sleeps until the command exits (answers `ExecExited`) or the agent hangs up (kills the
/// command's process group; the reaper reaps it).
fn wait(
    stream: &mut UnixStream,
    pid: u32,
    status: &mpsc::Receiver<rustix::process::WaitStatus>,
    wake: &OwnedFd,
) -> io::Result<()> {
    stream.set_nonblocking(true)?;
    loop {
        if let Ok(status) = status.try_recv() {
            stream.set_nonblocking(false)?;
            let (exit_code, _) = super::supervisor::decode(status);
            return write_line(stream, &Response::ExecExited { exit_code });
        }
        let readable = {
            let mut fds = [
                PollFd::new(&*stream, PollFlags::IN),
                PollFd::new(wake, PollFlags::IN),
            ];
            match rustix::event::poll(&mut fds, None) {
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
            !fds[0].revents().is_empty()
        };
        let mut buf = [0_u8; 64];
        while matches!(rustix::io::read(wake, &mut buf), Ok(n) if n > 0) {}
        if readable {
            // The agent never writes after its request: readable means it hung up.
            let gone = match stream.read(&mut buf) {
                Ok(0) => true,
                Ok(_) => false,
                Err(e) => e.kind() != io::ErrorKind::WouldBlock,
            };
            if gone {
                kill_group(pid);
                return Ok(());
            }
        }
    }
}
