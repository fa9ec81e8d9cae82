//! A youki helper started beside the bundle: `podvisor youki-spare`, spawned by the shim when a
//! start request for an `oci` container of the embedded youki comes in, so that the helper's
//! `exec` (the loader, the binary's pages, Rust's set-up: 1–2 ms) runs on the other core while
//! the shim mounts the root filesystem and writes the spec, not after.
//!
//! The spare waits, single-threaded and with nothing set up, on its standard input: one end of
//! a `SOCK_SEQPACKET` pair whose other end the shim holds. The shim hands it its job as one
//! message: the arguments `podvisor youki` would get (each ended by a NUL byte), and, attached
//! (`SCM_RIGHTS`), the three descriptors that are to be its standard input, output and error.
//! The spare puts them in place (which closes the socket) and goes on exactly as `podvisor
//! youki <arguments>` started with that standard I/O. A shim that drops the spare unused
//! closes the socket with nothing sent: the spare exits 0, and the shim's reaper reaps it.
//!
//! The spare is the shim's child from its spawn on, in the shim's mount namespace (the same
//! namespace, not a copy: it sees the root filesystem mounted after it started). It is waited
//! for through a pidfd taken while it cannot have been reaped, so a reused pid is never
//! waited for.

use std::ffi::OsString;
use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};

use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, SocketFlags, SocketType,
};

use super::executor::CommandRunner;

/// The podvisor command of a spare helper.
pub const ARG: &str = "youki-spare";

/// The largest job: the arguments of one `podvisor youki` call (paths in the state
/// directory, an ID).
const MAX_JOB: usize = 64 * 1024;

/// A spare helper, spawned and waiting for its job.
#[derive(Debug)]
pub struct SpareHelper {
    pid: u32,
    pidfd: OwnedFd,
    socket: OwnedFd,
}

impl SpareHelper {
    /// Spawns `<binary> youki-spare` through `runner` (which must reap it if it is dropped
    /// unused). `None` when the runner keeps no spares or the spawn failed (the caller then
    /// spawns the helper as usual).
    pub fn spawn<R: CommandRunner + ?Sized>(binary: &Path, runner: &R) -> Option<SpareHelper> {
        let (ours, theirs) = match rustix::net::socketpair(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC,
            None,
        ) {
            Ok(pair) => pair,
            Err(e) => {
                eprintln!("podvisor shim: a spare youki helper: socketpair: {e}");
                return None;
            }
        };
        let mut command = Command::new(binary);
        command
            .arg(ARG)
            .stdin(Stdio::from(theirs))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .env_clear()
            .env("PATH", crate::config::DEFAULT_PATH);
        match runner.spawn_spare(&mut command)? {
            Ok((pid, pidfd)) => Some(SpareHelper {
                pid,
                pidfd,
                socket: ours,
            }),
            Err(e) => {
                eprintln!("podvisor shim: starting a spare youki helper: {e}");
                None
            }
        }
    }

    /// The spare's pid.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Its pidfd, to wait for it ([`wait`]).
    pub fn pidfd(&self) -> BorrowedFd<'_> {
        self.pidfd.as_fd()
    }

    /// Hands the spare its job: `args` (after `podvisor youki`) and its standard input,
    /// output and error. An error means the spare took nothing (it is gone).
    ///
    /// # Errors
    ///
    /// The spare's end is closed (it died), or the job is too large.
    pub fn hand_over(&self, args: &[OsString], stdio: [BorrowedFd<'_>; 3]) -> io::Result<()> {
        let job = encode(args);
        if job.len() > MAX_JOB {
            return Err(io::Error::other("a youki helper's arguments are too long"));
        }
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(3))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        if !control.push(SendAncillaryMessage::ScmRights(&stdio)) {
            return Err(io::Error::other("no room for three descriptors"));
        }
        loop {
            match rustix::net::sendmsg(
                &self.socket,
                &[IoSlice::new(&job)],
                &mut control,
                SendFlags::NOSIGNAL,
            ) {
                Ok(n) if n == job.len() => return Ok(()),
                Ok(_) => return Err(io::Error::other("the job was cut short")),
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// Waits for the process of `pidfd` (a child of the caller) to exit and reaps it.
///
/// # Errors
///
/// It is not the caller's child, or was reaped already (`ECHILD`).
pub fn wait(pidfd: BorrowedFd<'_>) -> io::Result<ExitStatus> {
    use rustix::process::{WaitId, WaitIdOptions};
    loop {
        match rustix::process::waitid(WaitId::PidFd(pidfd), WaitIdOptions::EXITED) {
            Ok(Some(status)) => {
                let raw = if let Some(signal) = status.terminating_signal() {
                    signal
                } else {
                    (status.exit_status().unwrap_or(0) & 0xff) << 8
                };
                return Ok(ExitStatus::from_raw(raw));
            }
            Ok(None) => {}
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

/// In the spare (`podvisor youki-spare`): waits on standard input for the job. `None`: the
/// shim closed the socket with nothing sent (exit quietly). With a job, the three descriptors
/// it carried are in place as standard input, output and error (the socket is closed), and
/// the arguments for `podvisor youki` are returned.
///
/// # Errors
///
/// Standard input is not the socket, or the job came without its three descriptors.
pub fn wait_for_job() -> io::Result<Option<Vec<OsString>>> {
    let socket = rustix::stdio::stdin();
    let mut job = vec![0_u8; MAX_JOB];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(3))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let received = loop {
        match rustix::net::recvmsg(
            socket,
            &mut [IoSliceMut::new(&mut job)],
            &mut control,
            RecvFlags::CMSG_CLOEXEC,
        ) {
            Ok(msg) => break msg,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    };
    let mut fds: Vec<OwnedFd> = Vec::new();
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(passed) = message {
            fds.extend(passed);
        }
    }
    if received.bytes == 0 && fds.is_empty() {
        return Ok(None);
    }
    let [stdin, stdout, stderr]: [OwnedFd; 3] = fds
        .try_into()
        .map_err(|_| io::Error::other("a spare's job came without its three descriptors"))?;
    job.truncate(received.bytes);
    rustix::stdio::dup2_stdin(&stdin)?;
    rustix::stdio::dup2_stdout(&stdout)?;
    rustix::stdio::dup2_stderr(&stderr)?;
    Ok(Some(decode(&job)))
}

/// Each argument followed by a NUL byte.
fn encode(args: &[OsString]) -> Vec<u8> {
    let mut job = Vec::new();
    for arg in args {
        job.extend_from_slice(arg.as_bytes());
        job.push(0);
    }
    job
}

fn decode(job: &[u8]) -> Vec<OsString> {
    job.split(|&b| b == 0)
        .take(job.iter().filter(|&&b| b == 0).count())
        .map(|arg| OsString::from_vec(arg.to_vec()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_carries_its_arguments_unchanged() {
        let args: Vec<OsString> = ["--root", "/s/youki", "", "run", "--bundle", "/p d/b", "id"]
            .iter()
            .map(OsString::from)
            .collect();
        assert_eq!(decode(&encode(&args)), args);
        assert!(decode(&encode(&[])).is_empty());
    }
}
