//! A pod's network, IPC and UTS namespaces, held without a pause process.
//!
//! The namespaces are created by a short-lived helper thread and kept alive by bind-mounting
//! the thread's `/proc/self/task/<tid>/ns/{net,ipc,uts}` onto files in a directory of the
//! pod's own (`<dir>/net`, `<dir>/ipc`, `<dir>/uts`), as `ip netns add` does. A bind mount of
//! an `nsfs` file is a reference to the namespace, so the namespaces outlive the thread, the
//! agent and a `serve` restart (the mounts live in the host's mount namespace), and containers
//! join them by path (OCI `linux.namespaces[].path`, `setns`, `nsenter --net=<path>`).
//!
//! # Why a helper thread
//!
//! `unshare(2)` of `CLONE_NEWNET`, `CLONE_NEWIPC` and `CLONE_NEWUTS` moves only the *calling
//! thread* into the new namespaces. Done on a tokio worker (or a thread of tokio's blocking
//! pool, which is reused), that worker would stay in the pod's network for every task it runs
//! afterwards: sockets the agent opens later (probes, the API) would land in a pod. A fresh
//! `std::thread` that unshares, sets the host name, brings loopback up, bind-mounts its
//! namespace files and then exits changes no other thread and needs no fork (a forked child
//! of a multi-threaded process may only call async-signal-safe functions before `exec`) and no
//! exec (`unshare(1)` costs a process start, ~2 ms here). These three flags are the ones
//! `unshare(2)` allows in a multi-threaded process; `CLONE_NEWNS` and `CLONE_NEWUSER` are
//! not used. Entering a namespace for a moment ([`in_namespace`]) uses the same pattern with
//! `setns(2)`.
//!
//! # Mount propagation
//!
//! The directory is bind-mounted onto itself and made `MS_UNBINDABLE` (private and
//! unbindable) before any namespace is mounted in it, as `ip netns` does with `/run/netns`:
//! the namespace mounts then do not propagate to peer mounts (a shared `/` under systemd) and
//! are not copied by a recursive bind of a parent (a `hostPath` of `/`), either of which
//! would keep a removed pod's network alive. Removal detaches the namespace mounts, then the
//! directory's own mount, then deletes it.

use std::fs::{self, File};
use std::io;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, CWD, StatxFlags};
use rustix::mount::{MountPropagationFlags, UnmountFlags};
use rustix::thread::{LinkNameSpaceType, UnshareFlags};

/// The longest host name the kernel accepts (`HOST_NAME_MAX`).
const HOST_NAME_MAX: usize = 64;

/// `statfs(2)` type of a namespace file (`NSFS_MAGIC`).
const NSFS_MAGIC: i64 = 0x6e73_6673;

/// One of the namespaces a pod sandbox holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NsKind {
    /// The network namespace (`CLONE_NEWNET`): interfaces, addresses, routes, ports.
    Net,
    /// The IPC namespace (`CLONE_NEWIPC`): System V IPC and POSIX message queues.
    Ipc,
    /// The UTS namespace (`CLONE_NEWUTS`): the host name.
    Uts,
}

/// The name of the directory that holds a sandbox's namespace files, in its pod's (or pooled
/// sandbox's) directory.
pub const NS_DIR: &str = "ns";

impl NsKind {
    /// The three kinds, in the order they are created.
    pub const ALL: [NsKind; 3] = [NsKind::Net, NsKind::Ipc, NsKind::Uts];

    /// The name of the kind under `/proc/<pid>/ns/` and of its file in the pod's directory.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            NsKind::Net => "net",
            NsKind::Ipc => "ipc",
            NsKind::Uts => "uts",
        }
    }

    /// The OCI runtime spec's name of the kind (`linux.namespaces[].type`).
    #[must_use]
    pub fn oci_type(self) -> &'static str {
        match self {
            NsKind::Net => "network",
            NsKind::Ipc => "ipc",
            NsKind::Uts => "uts",
        }
    }

    /// Which namespaces a pod's sandbox holds, as the kubelet asks containerd's CRI plugin
    /// (`NamespaceOption`): the network and UTS namespaces unless `hostNetwork`, the IPC
    /// namespace unless `hostIPC`.
    #[must_use]
    pub fn for_pod(host_network: bool, host_ipc: bool) -> Vec<NsKind> {
        NsKind::ALL
            .into_iter()
            .filter(|kind| match kind {
                NsKind::Net | NsKind::Uts => !host_network,
                NsKind::Ipc => !host_ipc,
            })
            .collect()
    }

    fn flag(self) -> UnshareFlags {
        match self {
            NsKind::Net => UnshareFlags::NEWNET,
            NsKind::Ipc => UnshareFlags::NEWIPC,
            NsKind::Uts => UnshareFlags::NEWUTS,
        }
    }

    fn link_type(self) -> LinkNameSpaceType {
        match self {
            NsKind::Net => LinkNameSpaceType::Network,
            NsKind::Ipc => LinkNameSpaceType::InterProcessCommunication,
            NsKind::Uts => LinkNameSpaceType::HostNameAndNISDomainName,
        }
    }
}

/// What [`PodNamespaces::create`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Creation {
    /// New namespaces were made (host name set, loopback up).
    Created,
    /// All three were already held in the directory (a second create, or after a restart):
    /// they were kept as they are.
    Adopted,
}

/// Errors of creating, entering or removing a pod's namespaces.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    /// The host name does not fit the kernel's limit or is empty.
    #[error("invalid host name {hostname:?}: must be 1 to {HOST_NAME_MAX} bytes")]
    InvalidHostname {
        /// The name given.
        hostname: String,
    },
    /// A system call failed; `what` says which step.
    #[error("{what} {path}: {source}")]
    Io {
        /// The step that failed (lower case, no full stop).
        what: &'static str,
        /// The path it was working on.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The helper thread could not be started or panicked.
    #[error("namespace helper thread for {path}: {reason}")]
    Thread {
        /// The pod's namespace directory.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
}

fn io_err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> NetnsError + 'a {
    move |source| NetnsError::Io {
        what,
        path: path.to_owned(),
        source,
    }
}

fn errno_err<'a>(
    what: &'static str,
    path: &'a Path,
) -> impl FnOnce(rustix::io::Errno) -> NetnsError + 'a {
    move |e| NetnsError::Io {
        what,
        path: path.to_owned(),
        source: e.into(),
    }
}

/// The namespaces of one pod, held in a directory (`<dir>/net`, `<dir>/ipc`, `<dir>/uts`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodNamespaces {
    dir: PathBuf,
}

impl PodNamespaces {
    /// The namespaces held in `dir` (no IO: see [`PodNamespaces::create`]).
    #[must_use]
    pub fn new(dir: impl Into<PathBuf>) -> PodNamespaces {
        PodNamespaces { dir: dir.into() }
    }

    /// The directory holding the namespace files.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file a container joins the namespace of `kind` by (`CNI_NETNS` for [`NsKind::Net`]).
    #[must_use]
    pub fn path(&self, kind: NsKind) -> PathBuf {
        self.dir.join(kind.name())
    }

    /// The network namespace's file.
    #[must_use]
    pub fn net_path(&self) -> PathBuf {
        self.path(NsKind::Net)
    }

    /// Whether the namespaces of `kinds` are all held (each file is an `nsfs` mount).
    #[must_use]
    pub fn exists(&self, kinds: &[NsKind]) -> bool {
        kinds.iter().all(|&k| is_nsfs(&self.path(k)))
    }

    /// Creates the pod's namespaces of `kinds` (a set of network, IPC and UTS: see
    /// [`NsKind::for_pod`]) under `dir` (created if missing), sets `hostname` in the UTS
    /// namespace and brings loopback up in the network namespace. Idempotent: when they are
    /// all already held there they are adopted unchanged; a partial set (a crash between
    /// mounts) is released and made again.
    ///
    /// Blocking but short (a thread start, a few system calls); call it from
    /// `spawn_blocking` in async code. One caller per directory at a time (the pod's owner):
    /// two concurrent creates of the same directory could both mount.
    ///
    /// # Errors
    /// An invalid host name, or the failing system call with its path.
    pub fn create(
        dir: &Path,
        hostname: &str,
        kinds: &[NsKind],
    ) -> Result<(PodNamespaces, Creation), NetnsError> {
        if kinds.contains(&NsKind::Uts) && (hostname.is_empty() || hostname.len() > HOST_NAME_MAX) {
            return Err(NetnsError::InvalidHostname {
                hostname: hostname.to_owned(),
            });
        }
        let ns = PodNamespaces::new(dir);
        fs::create_dir_all(dir).map_err(io_err("create namespace directory", dir))?;
        make_unbindable_mount(dir)?;
        if ns.exists(kinds) {
            return Ok((ns, Creation::Adopted));
        }
        ns.release_files()?;
        let (dir_owned, name, kinds) = (dir.to_owned(), hostname.to_owned(), kinds.to_vec());
        let joined = std::thread::Builder::new()
            .name("pv-sandbox-ns".to_owned())
            .spawn(move || unshare_and_hold(&dir_owned, &name, &kinds))
            .map_err(|e| NetnsError::Thread {
                path: dir.to_owned(),
                reason: e.to_string(),
            })?
            .join()
            .map_err(|_| NetnsError::Thread {
                path: dir.to_owned(),
                reason: "panicked".to_owned(),
            })?;
        if let Err(e) = joined {
            // Whatever was mounted before the failure is released (best effort: the error
            // reported is the first one).
            let _ = ns.release_files();
            return Err(e);
        }
        Ok((ns, Creation::Created))
    }

    /// Releases the namespaces (detaches each mount, deletes the files) and removes the
    /// directory. A namespace lives on while a process is still in it or holds it open.
    /// Idempotent: a missing directory or file is not an error.
    ///
    /// # Errors
    /// The failing unmount or removal, with its path.
    pub fn remove(&self) -> Result<(), NetnsError> {
        if !self.dir.exists() {
            return Ok(());
        }
        self.release_files()?;
        unmount_all(&self.dir)?;
        match fs::remove_dir(&self.dir) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                Err(io_err("remove namespace directory", &self.dir)(e))
            }
            _ => Ok(()),
        }
    }

    /// Moves the namespaces of `kinds` held here to `dir` (`MS_MOVE` of each mount: the
    /// namespaces and everything in them stay as they are), then removes this directory.
    /// How a sandbox made ahead of its pod (a warm pool) becomes the pod's.
    ///
    /// # Errors
    /// A namespace is not held here, or a mount cannot be moved.
    pub fn move_to(&self, dir: &Path, kinds: &[NsKind]) -> Result<PodNamespaces, NetnsError> {
        let target = PodNamespaces::new(dir);
        fs::create_dir_all(dir).map_err(io_err("create namespace directory", dir))?;
        make_unbindable_mount(dir)?;
        for &kind in kinds {
            let (from, to) = (self.path(kind), target.path(kind));
            if !is_nsfs(&from) {
                return Err(NetnsError::Io {
                    what: "move namespace",
                    path: from,
                    source: io::Error::from(io::ErrorKind::NotFound),
                });
            }
            File::create(&to).map_err(io_err("create namespace file", &to))?;
            rustix::mount::mount_move(&from, &to).map_err(errno_err("move namespace to", &to))?;
        }
        self.remove()?;
        Ok(target)
    }

    /// Runs `f` on a fresh thread that has joined this pod's namespace of `kind`, and returns
    /// its value. Sockets made in `f` stay in that network namespace after it returns (a
    /// listener for a test, a probe's connection).
    ///
    /// # Errors
    /// The namespace file cannot be opened or joined.
    pub fn run_in<T, F>(&self, kind: NsKind, f: F) -> Result<T, NetnsError>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        in_namespace(&self.path(kind), kind, f)
    }

    /// The host name set in the pod's UTS namespace.
    ///
    /// # Errors
    /// The UTS namespace cannot be joined.
    pub fn hostname(&self) -> Result<String, NetnsError> {
        self.run_in(NsKind::Uts, || {
            rustix::system::uname()
                .nodename()
                .to_string_lossy()
                .into_owned()
        })
    }

    /// Sets the host name in the pod's UTS namespace (a sandbox made ahead of its pod, from a
    /// warm pool, gets its pod's name when claimed).
    ///
    /// # Errors
    /// An invalid host name, or the UTS namespace cannot be joined or set.
    pub fn set_hostname(&self, hostname: &str) -> Result<(), NetnsError> {
        if hostname.is_empty() || hostname.len() > HOST_NAME_MAX {
            return Err(NetnsError::InvalidHostname {
                hostname: hostname.to_owned(),
            });
        }
        let name = hostname.to_owned();
        let path = self.path(NsKind::Uts);
        self.run_in(NsKind::Uts, move || {
            rustix::system::sethostname(name.as_bytes())
        })?
        .map_err(errno_err("sethostname", &path))
    }

    /// Detaches every namespace mount in the directory and deletes the files.
    fn release_files(&self) -> Result<(), NetnsError> {
        for kind in NsKind::ALL {
            let path = self.path(kind);
            unmount_all(&path)?;
            match fs::remove_file(&path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => {
                    return Err(io_err("remove namespace file", &path)(e));
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// Runs `f` on a fresh thread that has joined the namespace of `kind` held at `path` (a
/// bind-mounted namespace file or `/proc/<pid>/ns/<kind>`). The thread ends with `f`, so no
/// other thread ever runs in the namespace.
///
/// # Errors
/// The file cannot be opened or is not a namespace of `kind`.
pub fn in_namespace<T, F>(path: &Path, kind: NsKind, f: F) -> Result<T, NetnsError>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let file = File::open(path).map_err(io_err("open namespace", path))?;
    let owned = path.to_owned();
    std::thread::Builder::new()
        .name("pv-sandbox-setns".to_owned())
        .spawn(move || {
            rustix::thread::move_into_link_name_space(file.as_fd(), Some(kind.link_type()))
                .map_err(errno_err("join namespace", &owned))?;
            drop(file);
            Ok(f())
        })
        .map_err(|e| NetnsError::Thread {
            path: path.to_owned(),
            reason: e.to_string(),
        })?
        .join()
        .map_err(|_| NetnsError::Thread {
            path: path.to_owned(),
            reason: "panicked".to_owned(),
        })?
}

/// The helper thread's work: new namespaces of `kinds` for this thread only, host name,
/// loopback up, then one bind mount per namespace. Runs on a thread that ends right after.
fn unshare_and_hold(dir: &Path, hostname: &str, kinds: &[NsKind]) -> Result<(), NetnsError> {
    let flags = kinds
        .iter()
        .fold(UnshareFlags::empty(), |flags, kind| flags | kind.flag());
    // SAFETY: `unshare_unsafe` is unsafe only for `CLONE_FILES` (a private fd table would
    // make other threads' descriptors invalid here); these flags do not include it, and the
    // namespaces they unshare belong to this thread alone, which ends after this function.
    #[allow(unsafe_code)]
    unsafe { rustix::thread::unshare_unsafe(flags) }.map_err(errno_err("unshare", dir))?;
    if kinds.contains(&NsKind::Uts) {
        rustix::system::sethostname(hostname.as_bytes()).map_err(errno_err("sethostname", dir))?;
    }
    if kinds.contains(&NsKind::Net) {
        loopback_up().map_err(io_err("bring loopback up", dir))?;
    }
    let tid = rustix::thread::gettid().as_raw_nonzero();
    for &kind in kinds {
        let target = dir.join(kind.name());
        File::create(&target).map_err(io_err("create namespace file", &target))?;
        let source = format!("/proc/self/task/{tid}/ns/{}", kind.name());
        rustix::mount::mount_bind(source.as_str(), &target)
            .map_err(errno_err("bind-mount namespace onto", &target))?;
    }
    Ok(())
}

/// Sets `IFF_UP` on `lo` of the calling thread's network namespace with one rtnetlink
/// `RTM_NEWLINK` request (what `ip link set lo up` sends), and waits for the kernel's ack.
fn loopback_up() -> io::Result<()> {
    use rustix::net::{AddressFamily, RecvFlags, SendFlags, SocketType, netlink};

    let probe = rustix::net::socket(AddressFamily::INET, SocketType::DGRAM, None)?;
    let index = rustix::net::netdevice::name_to_index(&probe, "lo")?;
    // `None` is protocol 0, `NETLINK_ROUTE`.
    let sock = rustix::net::socket(AddressFamily::NETLINK, SocketType::RAW, None)?;
    const RTM_NEWLINK: u16 = 16;
    const NLM_F_REQUEST: u16 = 1;
    const NLM_F_ACK: u16 = 4;
    const IFF_UP: u32 = 1;
    let mut msg = Vec::with_capacity(32);
    msg.extend_from_slice(&32u32.to_ne_bytes()); // nlmsg_len
    msg.extend_from_slice(&RTM_NEWLINK.to_ne_bytes()); // nlmsg_type
    msg.extend_from_slice(&(NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes()); // nlmsg_flags
    msg.extend_from_slice(&1u32.to_ne_bytes()); // nlmsg_seq
    msg.extend_from_slice(&0u32.to_ne_bytes()); // nlmsg_pid
    msg.extend_from_slice(&[0, 0]); // ifi_family AF_UNSPEC, padding
    msg.extend_from_slice(&0u16.to_ne_bytes()); // ifi_type
    msg.extend_from_slice(&index.cast_signed().to_ne_bytes()); // ifi_index
    msg.extend_from_slice(&IFF_UP.to_ne_bytes()); // ifi_flags
    msg.extend_from_slice(&IFF_UP.to_ne_bytes()); // ifi_change
    let kernel = netlink::SocketAddrNetlink::new(0, 0);
    rustix::net::sendto(&sock, &msg, SendFlags::empty(), &kernel)?;
    let mut buf = [0u8; 1024];
    let (n, _) = rustix::net::recv(&sock, &mut buf, RecvFlags::empty())?;
    // The answer is an NLMSG_ERROR (type 2) whose first field is 0 (an ack) or -errno.
    const NLMSG_ERROR: u16 = 2;
    if n < 20 || u16::from_ne_bytes([buf[4], buf[5]]) != NLMSG_ERROR {
        return Err(io::Error::other("unexpected rtnetlink answer"));
    }
    let code = i32::from_ne_bytes([buf[16], buf[17], buf[18], buf[19]]);
    if code == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(-code))
    }
}

/// Makes `dir` a mount of its own, private and unbindable (once: a directory that is already
/// a mount root is only made unbindable again).
pub(crate) fn make_unbindable_mount(dir: &Path) -> Result<(), NetnsError> {
    if !is_mount_root(dir) {
        rustix::mount::mount_bind(dir, dir)
            .map_err(errno_err("bind-mount namespace directory", dir))?;
    }
    rustix::mount::mount_change(dir, MountPropagationFlags::UNBINDABLE)
        .map_err(errno_err("make namespace directory unbindable", dir))
}

/// Detaches every mount stacked on `path` (none is fine).
fn unmount_all(path: &Path) -> Result<(), NetnsError> {
    // A bound on the loop: a mount that cannot be detached must not spin forever.
    for _ in 0..16 {
        if !is_mount_root(path) {
            return Ok(());
        }
        match rustix::mount::unmount(path, UnmountFlags::DETACH) {
            Ok(()) | Err(rustix::io::Errno::NOENT | rustix::io::Errno::INVAL) => {}
            Err(e) => return Err(errno_err("unmount", path)(e)),
        }
    }
    Err(NetnsError::Io {
        what: "unmount",
        path: path.to_owned(),
        source: io::Error::other("still a mount point after 16 unmounts"),
    })
}

/// Whether `path` is the root of a mount (`STATX_ATTR_MOUNT_ROOT`; false when missing).
pub(crate) fn is_mount_root(path: &Path) -> bool {
    is_mount_root_at(CWD, path)
}

/// [`is_mount_root`] of `path` relative to `dir` (a directory, or a detached mount tree).
pub(crate) fn is_mount_root_at(dir: impl AsFd, path: &Path) -> bool {
    rustix::fs::statx(
        dir,
        path,
        AtFlags::SYMLINK_NOFOLLOW,
        StatxFlags::BASIC_STATS,
    )
    .is_ok_and(|st| {
        let root = rustix::fs::StatxAttributes::MOUNT_ROOT;
        st.stx_attributes_mask.contains(root) && st.stx_attributes.contains(root)
    })
}

/// Whether `path` is a namespace file (a bind mount of one).
#[allow(
    clippy::useless_conversion,
    reason = "f_type is i64 here but 32 bits wide on 32-bit targets"
)]
fn is_nsfs(path: &Path) -> bool {
    rustix::fs::statfs(path).is_ok_and(|st| i64::from(st.f_type) == NSFS_MAGIC)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_have_proc_and_oci_names() {
        let names: Vec<_> = NsKind::ALL
            .iter()
            .map(|k| (k.name(), k.oci_type()))
            .collect();
        assert_eq!(names, [("net", "network"), ("ipc", "ipc"), ("uts", "uts")]);
        let ns = PodNamespaces::new("/s/pods/u/ns");
        assert_eq!(ns.net_path(), Path::new("/s/pods/u/ns/net"));
        assert_eq!(ns.path(NsKind::Uts), Path::new("/s/pods/u/ns/uts"));
    }

    #[test]
    fn a_host_name_longer_than_the_kernel_allows_is_refused_before_any_io() {
        let long = "a".repeat(65);
        let err =
            PodNamespaces::create(Path::new("/nonexistent/ns"), &long, &NsKind::ALL).unwrap_err();
        assert!(matches!(err, NetnsError::InvalidHostname { .. }), "{err}");
        let err =
            PodNamespaces::create(Path::new("/nonexistent/ns"), "", &NsKind::ALL).unwrap_err();
        assert!(matches!(err, NetnsError::InvalidHostname { .. }), "{err}");
    }

    #[test]
    fn the_sandbox_holds_what_the_pod_does_not_share_with_the_host() {
        use NsKind::{Ipc, Net, Uts};
        assert_eq!(NsKind::for_pod(false, false), [Net, Ipc, Uts]);
        assert_eq!(NsKind::for_pod(true, false), [Ipc]);
        assert_eq!(NsKind::for_pod(false, true), [Net, Uts]);
        assert!(NsKind::for_pod(true, true).is_empty());
    }

    #[test]
    fn removing_a_missing_directory_is_ok() {
        PodNamespaces::new("/nonexistent/podvisor/ns")
            .remove()
            .unwrap();
    }

    #[test]
    fn an_ordinary_file_is_not_a_namespace() {
        assert!(!is_nsfs(Path::new("/proc/self/status")));
        assert!(is_nsfs(Path::new("/proc/self/ns/net")));
        assert!(is_mount_root(Path::new("/")));
        assert!(!is_mount_root(Path::new("/nonexistent")));
    }
}
