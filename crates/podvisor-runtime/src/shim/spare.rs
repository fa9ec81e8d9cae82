//! A spare shim: `podvisor shim --spare`, started ahead of the pod it will serve, so that a
//! pod's start does not wait for the shim's `exec` (the loader, the binary's pages, the
//! runtime's set-up: about 2 ms of the agent's 3.5 to see a new shim answer).
//!
//! It detaches (its own session, no inherited descriptor) and waits, single-threaded and with
//! nothing else set up, reading its standard input (a pipe the agent holds) to the end; with
//! `--youki-ahead` it has started youki's helper ahead meanwhile ([`crate::oci::ahead`]). The
//! agent hands it a pod by writing the pod's directory and socket (and `--youki-ahead` for a
//! pod whose containers youki runs; each ended by a NUL byte) and closing the pipe; the spare
//! then takes the pod's shim log as its output, shows the command line a shim started for
//! that pod would have (the agent and people find a pod's shim by it), and goes on exactly as
//! `podvisor shim --pod-dir DIR --socket PATH [--youki-ahead]`, from its own mount namespace
//! on: made now, it copies the node's mounts as they are when the pod starts (the helper joins
//! it when called). An agent that goes away closes the pipe with nothing written: the spare
//! kills and reaps its helper and exits.

use super::protocol::layout;
use super::server::{Args, YOUKI_AHEAD};
use crate::oci::ahead::Ahead;
use std::ffi::OsStr;
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, Stdio};

/// The shim's argument that makes it a spare.
pub const ARG: &str = "--spare";

/// Bytes of padding a spare is started with, for the pod's command line it shows later: two
/// paths in the state directory (`PATH_MAX` is 4096).
const TITLE_ROOM: usize = 8192;

/// The command that starts a spare shim of `shim_exe`: its standard input is the pipe it
/// waits on, its output goes nowhere until it has a pod. `youki_ahead`: it starts youki's
/// helper ahead while it waits ([`crate::oci::ahead`]), for a pod whose containers youki
/// runs (the node's default).
pub(crate) fn command(shim_exe: &Path, youki_ahead: bool) -> Command {
    let mut command = Command::new(shim_exe);
    command
        .arg("shim")
        .arg(ARG)
        .args(youki_ahead.then_some(YOUKI_AHEAD))
        // Room for the pod's command line (see `set_command_line`).
        .arg(" ".repeat(TITLE_ROOM))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    command
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

/// Hands the spare shim on `stdin` its pod: from here on it is the pod's shim. The pod's
/// shim directory must exist (the spare opens its log there).
///
/// # Errors
///
/// The spare is gone (the pipe has no reader).
pub(crate) fn hand_over(
    mut stdin: ChildStdin,
    pod_dir: &Path,
    socket: &Path,
    youki_ahead: bool,
) -> io::Result<()> {
    stdin.write_all(&message(pod_dir, socket, youki_ahead))
    // Dropped: the spare reads the end of its input and goes on.
}

/// In the spare: waits for its pod, then makes the process what `podvisor shim --pod-dir DIR
/// --socket PATH` would be (stdio, command line). `None`: the agent went away without one.
/// With `youki_ahead`, youki's helper is started ahead meanwhile, and returned with the pod
/// when the pod's containers are youki's (else let go).
///
/// # Errors
///
/// Its input cannot be read, or the pod's shim log cannot be opened.
pub(super) fn wait(youki_ahead: bool) -> io::Result<Option<(Args, Option<Ahead>)>> {
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
    let mut input = Vec::new();
    let read = io::stdin().lock().read_to_end(&mut input);
    let args = read.map(|_| parse(&input));
    let Ok(Some(args)) = args else {
        // No pod: the helper goes first (orphaned, it would be a zombie of the node's init).
        if let Some(mut helper) = ahead {
            helper.kill();
            let _ = helper.wait();
        }
        return args.map(|_| None);
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
    Ok(Some((args, ahead)))
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
