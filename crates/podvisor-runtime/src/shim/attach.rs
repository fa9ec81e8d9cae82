//! A container's own stdio and `kubectl attach`.
//!
//! The shim makes each container's standard streams ([`ContainerIo::create`]): `/dev/null` or
//! a pipe it holds open for stdin (`stdin: true`), pipes for stdout and stderr, or one
//! pseudo-terminal for all three (`tty: true`). Its log pumps copy the output into the CRI
//! log and to every attached session ([`ContainerIo::broadcast`]).
//!
//! An attach ([`serve`]) gets fresh pipes: the agent's ends (stdin's write end, stdout's and
//! stderr's read ends, and with a terminal a descriptor of it for resizes) travel with the
//! `ExecStarted` answer, as a streaming exec's do. The session sees the output from then on.
//! Its input is copied into the container's stdin by a thread of its own. It ends, as
//! containerd's CRI attach does, when:
//! - the container's output ends (it exited);
//! - the agent hangs up;
//! - its input ends: with `stdinOnce` (and no terminal) that closes the container's stdin for
//!   good and the output keeps flowing until the container ends; otherwise the session
//!   detaches.
//!
//! The answer to its end is `AttachEnded`.

use super::exec_stream::{open_pty, send_with_fds, write_line};
use super::protocol::Response;
use super::supervisor::{Shim, THREAD_STACK};
use crate::config::ContainerStdio;
use crate::logs::Stream;
use rustix::event::{PollFd, PollFlags};
use rustix::pipe::{PipeFlags, pipe_with};
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::process::Stdio;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

/// How long a pump waits for a slow attached reader before that session loses the stream.
const SINK_STALL: Duration = Duration::from_secs(1);

/// What an attach asks for.
pub(super) struct AttachRequest {
    pub(super) instance: u64,
    pub(super) stdin: bool,
    pub(super) stdout: bool,
    pub(super) stderr: bool,
    pub(super) tty: bool,
}

/// The shim's side of one container's standard streams.
pub(super) struct ContainerIo {
    stdio: ContainerStdio,
    /// The container's stdin: the write end of its pipe, or the terminal. `None` without
    /// `stdin`, or once closed (`stdinOnce`).
    stdin: Mutex<Option<File>>,
    /// The terminal (with `tty`), for resizes.
    terminal: Option<OwnedFd>,
    outputs: Mutex<Outputs>,
}

#[derive(Default)]
struct Outputs {
    /// Output streams still being pumped.
    open: usize,
    /// Where each stream also goes: `(session, stream, pipe)`.
    sinks: Vec<(u64, Stream, File)>,
    /// Each session's wake-up pipe.
    sessions: HashMap<u64, OwnedFd>,
    next_session: u64,
}

/// What the container itself gets: its stdin, stdout and stderr (`None`: `/dev/null`).
pub(super) type ChildStdio = [Option<OwnedFd>; 3];

/// The container's side as `std::process` standard I/O.
pub(super) fn as_stdio(fds: ChildStdio) -> [Stdio; 3] {
    fds.map(|fd| fd.map_or_else(Stdio::null, Stdio::from))
}

/// The output descriptors to pump, each with the stream it is logged as.
pub(super) type Pumped = Vec<(OwnedFd, Stream)>;

impl ContainerIo {
    /// The container's streams, the shim's side of them, and the output descriptors to pump
    /// (each with the stream it is logged as).
    pub(super) fn create(
        stdio: ContainerStdio,
    ) -> io::Result<(Arc<ContainerIo>, ChildStdio, Pumped)> {
        if stdio.tty {
            let (master, slave) = open_pty()?;
            let child = [
                Some(slave.try_clone()?),
                Some(slave.try_clone()?),
                Some(slave),
            ];
            let stdin = if stdio.stdin {
                Some(File::from(master.try_clone()?))
            } else {
                None
            };
            let outputs = vec![(master.try_clone()?, Stream::Stdout)];
            let io = ContainerIo {
                stdio,
                stdin: Mutex::new(stdin),
                terminal: Some(master),
                outputs: Mutex::new(Outputs {
                    open: 1,
                    ..Outputs::default()
                }),
            };
            return Ok((Arc::new(io), child, outputs));
        }
        let (stdin_child, stdin) = if stdio.stdin {
            let (read, write) = pipe_with(PipeFlags::CLOEXEC)?;
            (Some(read), Some(File::from(write)))
        } else {
            (None, None)
        };
        let (out_read, out_write) = pipe_with(PipeFlags::CLOEXEC)?;
        let (err_read, err_write) = pipe_with(PipeFlags::CLOEXEC)?;
        let child = [stdin_child, Some(out_write), Some(err_write)];
        let outputs = vec![(out_read, Stream::Stdout), (err_read, Stream::Stderr)];
        let io = ContainerIo {
            stdio,
            stdin: Mutex::new(stdin),
            terminal: None,
            outputs: Mutex::new(Outputs {
                open: 2,
                ..Outputs::default()
            }),
        };
        Ok((Arc::new(io), child, outputs))
    }

    /// Whether the container is on a terminal (then it needs it as its controlling terminal).
    pub(super) fn tty(&self) -> bool {
        self.stdio.tty
    }

    fn outputs(&self) -> MutexGuard<'_, Outputs> {
        self.outputs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Copies `data`, just read from the container's `stream`, to every session attached to
    /// it. A session that does not read within [`SINK_STALL`] loses the stream (the
    /// container is never held up by a slow client for longer).
    pub(super) fn broadcast(&self, stream: Stream, data: &[u8]) {
        let mut outputs = self.outputs();
        if outputs.sinks.is_empty() {
            return;
        }
        outputs
            .sinks
            .retain(|(_, s, pipe)| *s != stream || write_with_stall(pipe, data));
    }

    /// One output stream ended; once all have (the container exited), every session ends.
    pub(super) fn output_ended(&self) {
        let mut outputs = self.outputs();
        outputs.open = outputs.open.saturating_sub(1);
        if outputs.open == 0 {
            outputs.sinks.clear();
            for wake in outputs.sessions.values() {
                let _ = rustix::io::write(wake, &[1]);
            }
        }
    }

    /// Registers a session's output pipes and wake-up pipe; `None` if the container's output
    /// already ended.
    fn register(&self, sinks: Vec<(Stream, File)>, wake: OwnedFd) -> Option<u64> {
        let mut outputs = self.outputs();
        if outputs.open == 0 {
            return None;
        }
        outputs.next_session += 1;
        let session = outputs.next_session;
        outputs.sinks.extend(
            sinks
                .into_iter()
                .map(|(stream, pipe)| (session, stream, pipe)),
        );
        outputs.sessions.insert(session, wake);
        Some(session)
    }

    /// Ends a session's output (its readers see end-of-file) and wakes its connection.
    fn detach(&self, session: u64) {
        let mut outputs = self.outputs();
        outputs.sinks.retain(|(s, _, _)| *s != session);
        if let Some(wake) = outputs.sessions.get(&session) {
            let _ = rustix::io::write(wake, &[1]);
        }
    }

    fn forget(&self, session: u64) {
        let mut outputs = self.outputs();
        outputs.sinks.retain(|(s, _, _)| *s != session);
        outputs.sessions.remove(&session);
    }

    /// A descriptor of the container's stdin for one session, if it has one still open.
    fn stdin(&self) -> Option<File> {
        let stdin = self
            .stdin
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        stdin.as_ref().and_then(|f| f.try_clone().ok())
    }

    /// Closes the shim's own descriptor of the container's stdin (`stdinOnce`): once no
    /// session writes any more, the container reads end-of-file.
    fn close_stdin(&self) {
        self.stdin
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
    }
}

/// Writes all of `data` to a non-blocking pipe, waiting at most [`SINK_STALL`] for room;
/// false when the reader is gone or too slow.
fn write_with_stall(pipe: &File, data: &[u8]) -> bool {
    let deadline = Instant::now() + SINK_STALL;
    let mut rest = data;
    while !rest.is_empty() {
        match rustix::io::write(pipe, rest) {
            Ok(n) => rest = &rest[n..],
            Err(rustix::io::Errno::AGAIN) => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return false;
                }
                let mut fds = [PollFd::new(pipe, PollFlags::OUT)];
                let left = left.max(Duration::from_millis(1));
                let timeout = rustix::event::Timespec {
                    tv_sec: i64::try_from(left.as_secs()).unwrap_or(1),
                    tv_nsec: i64::from(left.subsec_nanos()),
                };
                let _ = rustix::event::poll(&mut fds, Some(&timeout));
            }
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => return false,
        }
    }
    true
}

/// Serves one `Attach` connection to its end.
pub(super) fn serve(
    shim: &Arc<Shim>,
    mut stream: UnixStream,
    request: &AttachRequest,
) -> io::Result<()> {
    let (pid, io) = match shim.attach_target(request.instance) {
        Ok(target) => target,
        Err(response) => return write_line(&mut stream, &response),
    };
    let (wake_rx, wake_tx) = pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)?;
    let mut agent_fds = Vec::new();
    let input = match (request.stdin, io.stdin()) {
        (true, Some(target)) => {
            let (read, write) = pipe_with(PipeFlags::CLOEXEC)?;
            agent_fds.push(write);
            Some((File::from(read), target))
        }
        // No stdin to write to (none, or closed by `stdinOnce`): the input goes nowhere, as
        // with containerd.
        (true, None) => {
            agent_fds.push(OwnedFd::from(
                std::fs::OpenOptions::new().write(true).open("/dev/null")?,
            ));
            None
        }
        (false, _) => None,
    };
    let mut sinks = Vec::new();
    // Each stream asked for gets its pipe (a container on a terminal writes no stderr).
    let wanted = [
        (request.stdout, Stream::Stdout),
        (request.stderr && !request.tty, Stream::Stderr),
    ];
    for (wanted, stream) in wanted {
        if wanted {
            let (read, write) = pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)?;
            // Only the shim's end is non-blocking.
            rustix::fs::fcntl_setfl(&read, rustix::fs::OFlags::empty())?;
            agent_fds.push(read);
            sinks.push((stream, File::from(write)));
        }
    }
    if request.tty
        && let Some(terminal) = &io.terminal
    {
        agent_fds.push(terminal.try_clone()?);
    }
    let Some(session) = io.register(sinks, wake_tx) else {
        return write_line(
            &mut stream,
            &Response::Error {
                message: "container is in CONTAINER_EXITED state".into(),
            },
        );
    };
    let answer = Response::ExecStarted {
        pid,
        fds: agent_fds.len(),
    };
    let sent = send_with_fds(&stream, &answer, &agent_fds);
    drop(agent_fds);
    if let Err(e) = sent {
        io.forget(session);
        return Err(e);
    }
    if let Some((from_agent, to_container)) = input {
        let io = Arc::clone(&io);
        let once = io.stdio.stdin_once && !io.stdio.tty;
        thread::Builder::new()
            .name(format!("attach-{}", request.instance))
            .stack_size(THREAD_STACK)
            .spawn(move || {
                copy_input(from_agent, to_container);
                if once {
                    io.close_stdin();
                } else {
                    io.detach(session);
                }
            })?;
    }
    let result = wait(&mut stream, &wake_rx);
    io.forget(session);
    match result {
        Ok(true) => write_line(&mut stream, &Response::AttachEnded),
        Ok(false) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Copies the session's input into the container's stdin until either side ends; the
/// container's descriptor is closed on return.
fn copy_input(mut from_agent: File, mut to_container: File) {
    let mut buf = [0_u8; 8 * 1024];
    loop {
        match from_agent.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                if to_container.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// Sleeps until the session is woken (`true`: the agent is still there) or the agent hangs
/// up (`false`).
fn wait(stream: &mut UnixStream, wake: &OwnedFd) -> io::Result<bool> {
    stream.set_nonblocking(true)?;
    loop {
        let (readable, woken) = {
            let mut fds = [
                PollFd::new(&*stream, PollFlags::IN),
                PollFd::new(wake, PollFlags::IN),
            ];
            match rustix::event::poll(&mut fds, None) {
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
            (!fds[0].revents().is_empty(), !fds[1].revents().is_empty())
        };
        if woken {
            stream.set_nonblocking(false)?;
            return Ok(true);
        }
        if readable {
            // The agent never writes after its request: readable means it hung up.
            let mut buf = [0_u8; 64];
            let gone = match stream.read(&mut buf) {
                Ok(0) => true,
                Ok(_) => false,
                Err(e) => e.kind() != io::ErrorKind::WouldBlock,
            };
            if gone {
                return Ok(false);
            }
        }
    }
}
