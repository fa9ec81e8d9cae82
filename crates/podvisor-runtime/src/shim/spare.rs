//! A spare shim: `podvisor shim --spare`, started ahead of the pod it will serve, so that a
//! pod's start does not wait for the shim's `exec` (the loader, the binary's pages, the
//! runtime's set-up: about 2 ms of the agent's 3.5 to see a new shim answer).
//!
//! It detaches (its own session, no inherited descriptor) and waits, single-threaded and with
//! nothing else set up, reading its standard input (one end of a socket pair the agent holds
//! the other end of) to the end; with `--youki-ahead` it has started youki's helper ahead
//! meanwhile ([`crate::oci::ahead`]). The agent hands it a pod by sending the pod's directory
//! and socket path (and `--youki-ahead` for a pod whose containers youki runs; each ended by a
//! NUL byte) with the pod's socket, already listening (`SCM_RIGHTS`), and closing its end: the
//! agent's connections then wait in the backlog until the shim accepts them, instead of the
//! agent polling for the socket while the spare wakes up and makes its mount namespace. The
//! spare then takes the pod's shim log as its output, shows the command line a shim started
//! for that pod would have (the agent and people find a pod's shim by it), and goes on exactly
//! as `podvisor shim --pod-dir DIR --socket PATH [--youki-ahead]`, from its own mount
//! namespace on: made now, it copies the node's mounts as they are when the pod starts (the
//! helper joins it when called). An agent that goes away closes its end with nothing sent:
//! the spare kills and reaps its helper and exits.

use super::protocol::layout;
use super::server::{Args, YOUKI_AHEAD};
use crate::oci::ahead::Ahead;
use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};
use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The shim's argument that makes it a spare.
pub const ARG: &str = "--spare";

/// Bytes of padding a spare is started with, for the pod's command line it shows later: two
/// paths in the state directory (`PATH_MAX` is 4096).
const TITLE_ROOM: usize = 8192;

/// The command that starts a spare shim of `shim_exe`, and the agent's end of the socket pair
/// that is its standard input, where it waits for its pod; its output goes nowhere until it
/// has one. `youki_ahead`: it starts youki's helper ahead while it waits
/// ([`crate::oci::ahead`]), for a pod whose containers youki runs (the node's default).
///
/// # Errors
///
/// The socket pair cannot be made.
pub(crate) fn command(shim_exe: &Path, youki_ahead: bool) -> io::Result<(Command, UnixStream)> {
    let (ours, theirs) = UnixStream::pair()?;
    let mut command = Command::new(shim_exe);
    command
        .arg("shim")
        .arg(ARG)
        .args(youki_ahead.then_some(YOUKI_AHEAD))
        // Room for the pod's command line (see `set_command_line`).
        .arg(" ".repeat(TITLE_ROOM))
        .stdin(Stdio::from(OwnedFd::from(theirs)))
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    Ok((command, ours))
}

/// The message that hands a spare its pod: its directory, its socket and, for a pod whose
/// OCI containers youki's helper runs, [`YOUKI_AHEAD`], each ended by a NUL byte.
fn message(pod_dir: &Path, socket: &Path, youki_ahead: bool) -> Vec<u8> {
    let mut out = Vec::new();
    for path in [pod_dir, socket] {
        out.extend_from_slice(path.as_os_str().as_bytes());
        out.push(0);
    }
    if youki_ahead {
        out.extend_from_slice(YOUKI_AHEAD.as_bytes());
        out.push(0);
    }
    out
}

/// What a [`message`] says; `None` for anything else (an empty one: the agent went away).
fn parse(message: &[u8]) -> Option<Args> {
    let mut parts = message.split(|b| *b == 0);
    let pod_dir = parts.next().filter(|p| !p.is_empty())?;
    let socket = parts.next().filter(|p| !p.is_empty())?;
    let mut youki_ahead = false;
    let mut next = parts.next();
    if next == Some(YOUKI_AHEAD.as_bytes()) {
        youki_ahead = true;
        next = parts.next();
    }
    // Each ended by a NUL, and nothing after.
    if next != Some(&[][..]) || parts.next().is_some() {
        return None;
    }
    let path = |bytes: &[u8]| PathBuf::from(OsStr::from_bytes(bytes));
    Some(Args {
        pod_dir: path(pod_dir),
        socket: path(socket),
        youki_ahead,
    })
}

/// Hands the spare shim at the other end of `channel` its pod: from here on it is the pod's
/// shim. The pod's socket is made here, listening, and sent with the message, so that the
/// pod's shim answers from now on. The pod's shim directory must exist (the spare opens its
/// log there); a stale socket file there is replaced.
///
/// # Errors
///
/// A shim answers at `socket` already, the socket cannot be made, or the spare is gone (its
/// end is closed): then no socket of this hand-over is left at `socket`.
pub(crate) fn hand_over(
    channel: UnixStream,
    pod_dir: &Path,
    socket: &Path,
    youki_ahead: bool,
) -> io::Result<()> {
    let listener = super::server::bind(socket)?;
    let message = message(pod_dir, socket, youki_ahead);
    let fds = [listener.as_fd()];
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut ancillary = SendAncillaryBuffer::new(&mut space);
    let sent = if ancillary.push(SendAncillaryMessage::ScmRights(&fds)) {
        rustix::net::sendmsg(
            &channel,
            &[io::IoSlice::new(&message)],
            &mut ancillary,
            SendFlags::NOSIGNAL,
        )
        .map_err(io::Error::from)
        .and_then(|n| {
            (n == message.len())
                .then_some(())
                .ok_or_else(|| io::Error::other("the hand-over was cut short"))
        })
    } else {
        Err(io::Error::other("no room for the socket"))
    };
    // The spare holds the socket now (or nobody: then a connection is refused, as to a dead
    // shim). The agent's end closed, the spare reads the end of its input and goes on.
    drop((listener, channel));
    if sent.is_err() {
        let _ = std::fs::remove_file(socket);
    }
    sent
}

/// Reads `channel` to its end: the bytes, and the descriptors that came with them.
fn receive(channel: BorrowedFd<'_>) -> io::Result<(Vec<u8>, Vec<OwnedFd>)> {
    let (mut bytes, mut fds) = (Vec::new(), Vec::new());
    let mut buf = [0_u8; 4096];
    loop {
        let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut ancillary = RecvAncillaryBuffer::new(&mut space);
        let received = match rustix::net::recvmsg(
            channel,
            &mut [io::IoSliceMut::new(&mut buf)],
            &mut ancillary,
            RecvFlags::CMSG_CLOEXEC,
        ) {
            Err(rustix::io::Errno::INTR) => continue,
            other => other?,
        };
        for part in ancillary.drain() {
            if let RecvAncillaryMessage::ScmRights(rights) = part {
                fds.extend(rights);
            }
        }
        if received.bytes == 0 {
            return Ok((bytes, fds));
        }
        bytes.extend_from_slice(&buf[..received.bytes]);
    }
}

/// What the agent sent: the pod and its listening socket; `None` for anything else (an empty
/// message: the agent went away).
fn pod_of(bytes: &[u8], fds: Vec<OwnedFd>) -> Option<(Args, UnixListener)> {
    let args = parse(bytes)?;
    let [socket]: [OwnedFd; 1] = fds.try_into().ok()?;
    Some((args, UnixListener::from(socket)))
}

/// In the spare: waits for its pod, then makes the process what `podvisor shim --pod-dir DIR
/// --socket PATH` would be (stdio, command line), and returns the pod's listening socket
/// with it. `None`: the agent went away without one.
/// With `youki_ahead`, youki's helper is started ahead meanwhile, and returned with the pod
/// when the pod's containers are youki's (else let go).
///
/// # Errors
///
/// Its input cannot be read, or the pod's shim log cannot be opened.
pub(super) fn wait(youki_ahead: bool) -> io::Result<Option<(Args, Option<Ahead>, UnixListener)>> {
    rehearse();
    // If it cannot be started, the shim starts one when it has its pod.
    let ahead = youki_ahead
        .then(|| {
            Ahead::spawn(
                Path::new(crate::oci::executor::SELF_EXE),
                crate::config::DEFAULT_PATH,
            )
            .ok()
        })
        .flatten();
    let received = receive(io::stdin().as_fd()).map(|(bytes, fds)| pod_of(&bytes, fds));
    let Ok(Some((args, listener))) = received else {
        // No pod: the helper goes first (orphaned, it would be a zombie of the node's init).
        if let Some(mut helper) = ahead {
            helper.kill();
            let _ = helper.wait();
        }
        return received.map(|_| None);
    };
    let ahead = ahead.filter(|_| args.youki_ahead);
    let pod_dir = &args.pod_dir;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(layout::shim_log(pod_dir))?;
    let null = std::fs::File::open("/dev/null")?;
    rustix::stdio::dup2_stdin(&null)?;
    rustix::stdio::dup2_stdout(&log)?;
    rustix::stdio::dup2_stderr(&log)?;
    eprintln!("podvisor shim: started ahead of its pod (a spare), now the shim of {pod_dir:?}");
    let mut title = vec![
        OsStr::new("shim"),
        OsStr::new("--pod-dir"),
        pod_dir.as_os_str(),
        OsStr::new("--socket"),
        args.socket.as_os_str(),
    ];
    if args.youki_ahead {
        title.push(OsStr::new(YOUKI_AHEAD));
    }
    if let Err(e) = set_command_line(&title) {
        eprintln!(
            "podvisor shim: showing the pod's command line ({e}): this shim is listed as a spare"
        );
    }
    Ok(Some((args, ahead, listener)))
}

/// A typical pod's first start request, as the agent sends it.
const REHEARSAL: &str = include_str!("spare/rehearsal.json");

/// Reads [`REHEARSAL`] and drops it: a process's first decoding of a start request maps
/// the decoders' code in (a pod's, a container's, the launch's), which took 0.2 to 0.45 ms
/// of a pod's start against 0.06 to 0.1 ms for a second decoding of the same line. A spare
/// does it while it waits; the pages stay until the shim trims its start-up pages.
fn rehearse() {
    let _ = serde_json::from_str::<super::protocol::Request>(REHEARSAL);
}

/// Rewrites this process's arguments after the first (the program) as `args`, in place:
/// what `/proc/<pid>/cmdline` shows, and so `ps`. The spare was started with an argument of
/// padding (see [`command`]) to make room; the rest of the area is zeroed.
fn set_command_line(args: &[&OsStr]) -> io::Result<()> {
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    // Fields 48 and 49 (`arg_start`, `arg_end`), counted from the state (field 3).
    let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<usize>().ok());
    let (Some(start), Some(end)) = (field(48), field(49)) else {
        return Err(io::Error::other("no argument area in /proc/self/stat"));
    };
    if start == 0 || end <= start {
        return Err(io::Error::other("no argument area in /proc/self/stat"));
    }
    let mut title = Vec::new();
    for arg in args {
        title.extend_from_slice(arg.as_bytes());
        title.push(0);
    }
    // SAFETY: [start, end) is this process's argument strings, on its stack, as the kernel
    // reports them; the process is single-threaded and nothing borrows them (std copies the
    // arguments out when asked for them).
    #[allow(unsafe_code)]
    let area = unsafe { std::slice::from_raw_parts_mut(start as *mut u8, end - start) };
    let program = area
        .iter()
        .position(|b| *b == 0)
        .map_or(area.len(), |i| i + 1);
    if program + title.len() > area.len() {
        return Err(io::Error::other(
            "the pod's paths are longer than the room left",
        ));
    }
    area[program..program + title.len()].copy_from_slice(&title);
    area[program + title.len()..].fill(0);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rehearsal is what it stands for: a start request of an OCI container that decodes
    /// whole (a protocol change that breaks it fails here, not silently in every spare).
    #[test]
    fn the_rehearsal_decodes_as_an_oci_start() {
        let request: super::super::protocol::Request =
            serde_json::from_str(REHEARSAL).expect("the rehearsal decodes");
        let super::super::protocol::Request::Start { config, .. } = request else {
            panic!("the rehearsal is not a start: {request:?}");
        };
        let launch = config.oci.expect("an OCI launch");
        let container = &launch.pod.spec.as_ref().expect("a pod spec").containers[0];
        assert!(container.readiness_probe.is_some() && container.resources.is_some());
        assert!(launch.pod.status.is_none() && launch.pod.metadata.managed_fields.is_none());
    }

    /// A pod is handed over with its socket listening: the spare gets the paths and the
    /// listener, a connection made before the spare accepts waits in its backlog, and the
    /// agent keeps no copy (with the spare's gone, a connection is refused).
    #[test]
    fn a_hand_over_sends_the_pods_socket_listening() {
        let dir = std::env::temp_dir().join(format!("pv-spare-{}-a", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let socket = dir.join("shim.sock");
        // A stale socket of an earlier shim is replaced.
        drop(UnixListener::bind(&socket).unwrap());
        let (agent, spare) = UnixStream::pair().unwrap();
        hand_over(agent, &dir, &socket, true).unwrap();
        let waiting = UnixStream::connect(&socket).expect("the socket listens already");
        let (bytes, fds) = receive(spare.as_fd()).unwrap();
        let (args, listener) = pod_of(&bytes, fds).expect("a pod and its socket");
        assert_eq!((args.pod_dir, args.socket), (dir.clone(), socket.clone()));
        assert!(args.youki_ahead);
        let (accepted, _) = listener.accept().unwrap();
        drop((waiting, accepted, listener));
        let refused = UnixStream::connect(&socket).unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::ConnectionRefused);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A spare that is gone is not handed the pod, and no socket is left for its shim to be
    /// looked for at; an end closed with nothing sent (the agent went away) is no pod; a pod
    /// whose shim answers is not handed over.
    #[test]
    fn a_hand_over_to_a_gone_spare_fails_and_leaves_no_socket() {
        let dir = std::env::temp_dir().join(format!("pv-spare-{}-b", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let socket = dir.join("shim.sock");
        let (agent, spare) = UnixStream::pair().unwrap();
        drop(spare);
        assert!(hand_over(agent, &dir, &socket, false).is_err());
        assert!(!socket.exists());
        let (agent, spare) = UnixStream::pair().unwrap();
        drop(agent);
        let (bytes, fds) = receive(spare.as_fd()).unwrap();
        assert!(pod_of(&bytes, fds).is_none());
        // A message without its socket is no pod either.
        assert!(pod_of(&message(&dir, &socket, false), Vec::new()).is_none());
        // Where a shim answers, its socket is neither replaced nor removed.
        let serving = UnixListener::bind(&socket).unwrap();
        let (agent, _spare) = UnixStream::pair().unwrap();
        let refused = hand_over(agent, &dir, &socket, false).unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::AddrInUse);
        UnixStream::connect(&socket).expect("the serving shim still answers");
        drop(serving);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The hand-over message reads back as the same paths and flag; anything else is no pod.
    #[test]
    fn a_spares_message_carries_the_pods_directory_socket_and_flag() {
        let (dir, socket) = (
            Path::new("/s/pods/u 1"),
            Path::new("/s/pods/u 1/shim/shim.sock"),
        );
        for youki_ahead in [false, true] {
            assert_eq!(
                parse(&message(dir, socket, youki_ahead)),
                Some(Args {
                    pod_dir: dir.to_path_buf(),
                    socket: socket.to_path_buf(),
                    youki_ahead,
                })
            );
        }
        assert_eq!(parse(b""), None);
        assert_eq!(parse(b"/s/pods/u\0"), None);
        assert_eq!(parse(b"/s/pods/u\0/sock"), None, "the socket is not ended");
        assert_eq!(parse(b"/s/pods/u\0/sock\0more"), None);
        assert_eq!(
            parse(b"/s/pods/u\0/sock\0--youki-ahead"),
            None,
            "the flag is not ended"
        );
        assert_eq!(parse(b"/s/pods/u\0/sock\0--youki-ahead\0x\0"), None);
        assert_eq!(parse(b"\0/sock\0"), None);
    }
}
