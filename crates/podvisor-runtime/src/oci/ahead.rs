//! youki's helper started ahead: `podvisor youki ahead`, spawned by a pod's shim before the
//! container it will run is known, so that a start does not wait for the helper's `exec`
//! (the loader, the binary's first pages, the argument and spec decoders' code: about 1 ms
//! of the 1.4 ms from spawn to `main` measured here, with the bundle finished ~2.5 ms after
//! the request and the spawned helper past its FIFO only ~0.5 ms later).
//!
//! The helper waits on its standard input, one end of a `SOCK_SEQPACKET` socket pair, for one
//! *call*: a single message holding the arguments a spawned helper would have been given
//! (what follows `podvisor youki`, each ended by a NUL byte), with four descriptors
//! (`SCM_RIGHTS`): the call's standard input, output and error, and the caller's mount
//! namespace. It joins that namespace unless it is in it already (a spare shim starts its
//! helper before it has a pod, and makes its own mount namespace only then), makes the three
//! its own 0, 1 and 2 (which closes the socket) and goes on as `podvisor youki <arguments>`
//! would, in the same process: the caller waits for it and reads its exit status as for a
//! spawned one. The end of the socket with no call (the shim dropped it, or died) makes it
//! exit, doing nothing.
//!
//! A call is sent only to a helper whose end is still open (a helper that died has closed
//! it: the send fails, and the caller spawns one instead), so a helper called has not been
//! reaped, and its caller, holding its reaper off, can wait for it.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, SocketFlags, SocketType,
};

/// The helper's argument (after `youki`) that makes it wait for a call.
pub const ARG: &str = "ahead";

/// The longest call: the arguments are a few paths in the state directory.
const MAX_CALL: usize = 64 * 1024;

/// A helper waiting for its call, and the caller's end of its socket.
#[derive(Debug)]
pub struct Ahead {
    child: Child,
    call: OwnedFd,
    /// Opened at the spawn, while the pid is surely the helper's: a kill through it never
    /// reaches another process that got the pid after a reaper took the helper.
    pidfd: Option<OwnedFd>,
}

impl Ahead {
    /// Spawns `<helper> youki ahead` with `path` as its only environment variable (`PATH`,
    /// as every helper call gets). The caller must spawn it as it spawns any child (under its
    /// fork lock) and not register it with its reaper: a helper that exits uncalled is
    /// reaped as any re-parented descendant.
    ///
    /// # Errors
    ///
    /// The socket pair cannot be made, or the spawn failed.
    pub fn spawn(helper: &Path, path: &str) -> io::Result<Ahead> {
        let (call, theirs) = rustix::net::socketpair(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC,
            None,
        )?;
        let child = Command::new(helper)
            .arg("youki")
            .arg(ARG)
            .env_clear()
            .env("PATH", path)
            .stdin(Stdio::from(theirs))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let pid = rustix::process::Pid::from_child(&child);
        let pidfd = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok();
        Ok(Ahead { child, call, pidfd })
    }

    /// The helper's pid.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Sends the call: `args` (what follows `podvisor youki`) with `stdio` as the helper's
    /// standard input, output and error, run in the mount namespace `mount_ns` (the caller's
    /// `/proc/self/ns/mnt`). The helper then holds its own copies of the descriptors.
    ///
    /// # Errors
    ///
    /// The helper is gone (its end is closed): it was not called, and it has exited.
    pub fn call(
        &self,
        args: &[OsString],
        stdio: [BorrowedFd<'_>; 3],
        mount_ns: BorrowedFd<'_>,
    ) -> io::Result<()> {
        let message = encode(args)?;
        let fds = [stdio[0], stdio[1], stdio[2], mount_ns];
        let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(4))];
        let mut ancillary = SendAncillaryBuffer::new(&mut space);
        if !ancillary.push(SendAncillaryMessage::ScmRights(&fds)) {
            return Err(io::Error::other("no room for four descriptors"));
        }
        let sent = rustix::net::sendmsg(
            &self.call,
            &[io::IoSlice::new(&message)],
            &mut ancillary,
            SendFlags::NOSIGNAL,
        )?;
        if sent == message.len() {
            Ok(())
        } else {
            Err(io::Error::other("the call was cut short"))
        }
    }

    /// Waits for the called helper's exit.
    ///
    /// # Errors
    ///
    /// `waitpid` failed.
    pub fn wait(mut self) -> io::Result<std::process::ExitStatus> {
        self.child.wait()
    }

    /// Kills the helper.
    pub fn kill(&mut self) {
        match &self.pidfd {
            Some(pidfd) => {
                let _ = rustix::process::pidfd_send_signal(pidfd, rustix::process::Signal::KILL);
            }
            None => {
                let _ = self.child.kill();
            }
        }
    }

    /// Lets the helper go uncalled: the end of its socket makes it exit. Its process, for a
    /// caller that waits for it itself (dropping an [`Ahead`] leaves that to a reaper).
    pub fn let_go(self) -> Child {
        drop(self.call);
        self.child
    }
}

/// The arguments, each ended by a NUL byte.
fn encode(args: &[OsString]) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    for arg in args {
        if arg.as_bytes().contains(&0) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "an argument holds a NUL byte",
            ));
        }
        out.extend_from_slice(arg.as_bytes());
        out.push(0);
    }
    if out.is_empty() || out.len() > MAX_CALL {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a call has one to 64 KiB of arguments",
        ));
    }
    Ok(out)
}

/// [`encode`]'s arguments back; `None` unless every one is ended by a NUL byte.
fn decode(message: &[u8]) -> Option<Vec<OsString>> {
    let body = message.strip_suffix(&[0])?;
    Some(
        body.split(|b| *b == 0)
            .map(|a| OsStr::from_bytes(a).to_owned())
            .collect(),
    )
}

/// A call as the helper receives it.
#[derive(Debug)]
pub struct Call {
    /// What follows `podvisor youki`.
    pub args: Vec<OsString>,
    /// Standard input, output and error.
    pub stdio: [OwnedFd; 3],
    /// The caller's mount namespace.
    pub mount_ns: OwnedFd,
}

/// In the helper: waits on `socket` for the call; `None` when it ends with none.
///
/// # Errors
///
/// The socket cannot be read, or the message is no call (not four descriptors, arguments
/// not NUL-ended).
pub fn receive(socket: BorrowedFd<'_>) -> io::Result<Option<Call>> {
    let mut message = vec![0_u8; MAX_CALL + 1];
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(4))];
    let mut ancillary = RecvAncillaryBuffer::new(&mut space);
    let received = loop {
        match rustix::net::recvmsg(
            socket,
            &mut [io::IoSliceMut::new(&mut message)],
            &mut ancillary,
            RecvFlags::CMSG_CLOEXEC,
        ) {
            Err(rustix::io::Errno::INTR) => {}
            other => break other?,
        }
    };
    let mut fds: Vec<OwnedFd> = Vec::new();
    for part in ancillary.drain() {
        if let RecvAncillaryMessage::ScmRights(rights) = part {
            fds.extend(rights);
        }
    }
    if received.bytes == 0 && fds.is_empty() {
        return Ok(None);
    }
    let invalid = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_owned());
    if received.flags.contains(rustix::net::ReturnFlags::TRUNC)
        || received.flags.contains(rustix::net::ReturnFlags::CTRUNC)
    {
        return Err(invalid("the call was cut short"));
    }
    let args = decode(&message[..received.bytes])
        .ok_or_else(|| invalid("the call's arguments are not NUL-ended"))?;
    let [stdin, stdout, stderr, mount_ns]: [OwnedFd; 4] = fds
        .try_into()
        .map_err(|_| invalid("a call passes exactly four descriptors"))?;
    Ok(Some(Call {
        args,
        stdio: [stdin, stdout, stderr],
        mount_ns,
    }))
}

/// In the helper: joins the mount namespace `ns` unless this process is in it already. The
/// process must be single-threaded; its root and working directory become the namespace's
/// root.
///
/// # Errors
///
/// `ns` is no mount namespace, or `setns` failed.
pub fn join_mount_namespace(ns: BorrowedFd<'_>) -> io::Result<()> {
    let own = rustix::fs::stat("/proc/thread-self/ns/mnt")?;
    let target = rustix::fs::fstat(ns)?;
    if (own.st_dev, own.st_ino) == (target.st_dev, target.st_ino) {
        return Ok(());
    }
    rustix::thread::move_into_link_name_space(ns, Some(rustix::thread::LinkNameSpaceType::Mount))?;
    Ok(())
}

/// Borrows three descriptors for [`Ahead::call`].
pub fn borrowed<F: AsFd>(stdio: &[F; 3]) -> [BorrowedFd<'_>; 3] {
    [stdio[0].as_fd(), stdio[1].as_fd(), stdio[2].as_fd()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn arguments_travel_nul_ended_and_come_back_the_same() {
        let args: Vec<OsString> = ["--root", "/s/youki", "run", "--detach", "", "c1"]
            .iter()
            .map(OsString::from)
            .collect();
        let message = encode(&args).unwrap();
        assert_eq!(decode(&message).unwrap(), args);
        assert!(
            decode(b"run\0--detach").is_none(),
            "the last one must end too"
        );
        assert!(encode(&[OsString::from("a\0b")]).is_err());
        assert!(encode(&[]).is_err());
    }

    /// The call's descriptors arrive as four new ones that reach the same files; the end of
    /// the socket without a call is `None`.
    #[test]
    fn a_call_carries_its_arguments_and_four_descriptors() {
        let (ours, theirs) = rustix::net::socketpair(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC,
            None,
        )
        .unwrap();
        let (mut out_r, out_w) = std::io::pipe().unwrap();
        let null = std::fs::File::open("/dev/null").unwrap();
        let stdio = [
            OwnedFd::from(null.try_clone().unwrap()),
            OwnedFd::from(out_w),
            OwnedFd::from(null),
        ];
        let args = vec![OsString::from("state"), OsString::from("c1")];
        let message = encode(&args).unwrap();
        let ns = std::fs::File::open("/proc/self/ns/mnt").unwrap();
        let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(4))];
        let mut ancillary = SendAncillaryBuffer::new(&mut space);
        let [a, b, c] = borrowed(&stdio);
        let fds = [a, b, c, ns.as_fd()];
        assert!(ancillary.push(SendAncillaryMessage::ScmRights(&fds)));
        rustix::net::sendmsg(
            &ours,
            &[io::IoSlice::new(&message)],
            &mut ancillary,
            SendFlags::NOSIGNAL,
        )
        .unwrap();
        drop(stdio);
        let call = receive(theirs.as_fd()).unwrap().unwrap();
        assert_eq!(call.args, args);
        // Already in it: nothing to do.
        join_mount_namespace(call.mount_ns.as_fd()).unwrap();
        let [_, out, _] = call.stdio;
        let mut out = std::fs::File::from(out);
        out.write_all(b"through the passed descriptor").unwrap();
        drop(out);
        let mut text = String::new();
        out_r.read_to_string(&mut text).unwrap();
        assert_eq!(text, "through the passed descriptor");
        drop(ours);
        assert!(receive(theirs.as_fd()).unwrap().is_none());
    }
}
