//! What a container (or exec) child does between `fork` and `exec`.
//!
//! The shim is multi-threaded, so after `fork` the child may only make async-signal-safe calls:
//! everything (paths as `CString`s, cgroup `cgroup.procs` descriptors, namespace descriptors,
//! uid maps) is prepared in the parent by [`ChildSetup::for_container`] and
//! [`ChildSetup::for_exec`]; [`ChildSetup::run`] only issues raw system calls and never
//! allocates. The child takes the container's user (groups, gid, uid) last, after the
//! mounts that need the shim's privileges. When a step fails, the child writes the step and
//! errno to a report pipe so the parent can say which mount failed rather than just
//! "permission denied".

use super::safe_path::{self, Create, Creations, UNTRUSTED_SYMLINK};
use crate::config::{ContainerConfig, ContainerUser, MountKind};
use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Step codes reported through the pipe (`kind * STEP_STRIDE + index`).
const STEP_STRIDE: u32 = 10_000;
const STEP_CGROUP: u32 = 1;
const STEP_UNSHARE: u32 = 2;
const STEP_USER_MAPS: u32 = 3;
const STEP_PROPAGATION: u32 = 4;
const STEP_SETNS: u32 = 5;
const STEP_MOUNT_TARGET: u32 = 6;
const STEP_MOUNT: u32 = 7;
const STEP_MOUNT_SOURCE: u32 = 8;
const STEP_WORKDIR: u32 = 9;
const STEP_CLOSE_FDS: u32 = 10;
const STEP_USER: u32 = 11;
const STEP_TTY: u32 = 12;

/// How the child gets its view of the filesystem.
enum Namespaces {
    /// A fresh private mount namespace, plus a user namespace (mapping the shim's own uid and
    /// gid) when the shim is not root.
    New { user_maps: Option<UserMaps> },
    /// The namespaces of a running container (exec).
    Join { user: Option<OwnedFd>, mnt: OwnedFd },
}

struct UserMaps {
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
}

/// The credentials the child takes before `exec`.
struct Identity {
    uid: libc::uid_t,
    gid: libc::gid_t,
    /// `None` in a user namespace without a privileged parent: `setgroups` is denied there.
    groups: Option<Vec<libc::gid_t>>,
}

/// The credentials for `user`. As root, all of them. Rootless, the user namespace maps only
/// the shim's own uid and gid: the container's uid and gid are mapped onto them (so the
/// process sees itself as `runAsUser`/`runAsGroup`, while its files belong to the shim's user
/// on the host) and supplementary groups cannot be set; a container without a user keeps the
/// identity mapping it always had.
fn identity(user: &ContainerUser, rootless: bool) -> Option<Identity> {
    if rootless && user.uid == 0 && user.gid == 0 {
        return None;
    }
    Some(Identity {
        uid: user.uid,
        gid: user.gid,
        groups: (!rootless).then(|| user.groups.clone()),
    })
}

/// One mount, ready for the child. The child opens the source (the `subPath` beneath it),
/// then the target in the container's view (created as a directory, or as an empty file when
/// the source is not a directory), and mounts one onto the other through the descriptors.
struct MountStep {
    /// `None`: a new tmpfs.
    source: Option<CString>,
    /// The `subPath` inside `source`.
    sub_path: Option<CString>,
    target: CString,
    read_only: bool,
    /// The tmpfs `size` option.
    size: Option<CString>,
    /// Describes the mount in error messages.
    describe: String,
}

/// Everything the child needs, prepared before `fork`.
pub(super) struct ChildSetup {
    cgroup_procs: Vec<OwnedFd>,
    namespaces: Namespaces,
    mounts: Vec<MountStep>,
    /// The working directory and what to create of it when missing.
    workdir: Option<(CString, Create)>,
    /// Follow every symbolic link in the container's paths (rootless: see
    /// [`safe_path::open_host_path`]).
    trust_symlinks: bool,
    identity: Option<Identity>,
    /// Start a new session with stdin (a terminal) as its controlling terminal.
    controlling_tty: bool,
    report: OwnedFd,
    /// Where the paths created on the host's filesystems go (containers only).
    creations: Option<OwnedFd>,
    /// The IDs of the mounts made so far (capacity reserved before fork: pushing never
    /// allocates).
    mount_ids: Vec<u64>,
}

/// The read ends of a child's report pipes.
pub(super) struct Report(File, Option<File>);

impl Report {
    /// The paths the child created on the host's filesystems (mount targets, their parents,
    /// the working directory), outermost first; call once `spawn` returned (the child has
    /// exec'd or died, so the pipe has all it will get).
    pub(super) fn created_paths(&mut self) -> Vec<PathBuf> {
        use std::io::Read;
        use std::os::unix::ffi::OsStringExt;
        let Some(pipe) = &mut self.1 else {
            return Vec::new();
        };
        let mut bytes = Vec::new();
        // Non-blocking: what the child wrote is there; EAGAIN ends it.
        let _ = pipe.read_to_end(&mut bytes);
        bytes
            .split(|b| *b == b'\n')
            .filter(|line| !line.is_empty())
            .map(|line| PathBuf::from(std::ffi::OsString::from_vec(line.to_vec())))
            .collect()
    }

    /// Describes the step that failed, if the child reported one (call after `spawn` failed).
    pub(super) fn failed_step(mut self, setup_mounts: &[String]) -> Option<String> {
        use std::io::Read;
        let mut buf = [0_u8; 8];
        self.0.read_exact(&mut buf).ok()?;
        let step = u32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]);
        let errno = i32::from_ne_bytes([buf[4], buf[5], buf[6], buf[7]]);
        let (kind, index) = (step / STEP_STRIDE, (step % STEP_STRIDE) as usize);
        let err = match errno {
            UNTRUSTED_SYMLINK => safe_path::describe(&io::Error::from_raw_os_error(errno)),
            libc::EXDEV if kind == STEP_MOUNT_SOURCE => {
                "the subPath leads out of its volume (through a symbolic link)".to_owned()
            }
            _ => io::Error::from_raw_os_error(errno).to_string(),
        };
        let mount = || setup_mounts.get(index).cloned().unwrap_or_default();
        Some(match kind {
            STEP_CGROUP => format!("joining the container cgroup: {err}"),
            STEP_UNSHARE => format!("creating the container namespaces: {err}"),
            STEP_USER_MAPS => format!("writing the user namespace maps: {err}"),
            STEP_PROPAGATION => format!("making the root mount a slave: {err}"),
            STEP_SETNS => format!("entering the container namespaces: {err}"),
            STEP_MOUNT_SOURCE => format!("opening the source of {}: {err}", mount()),
            STEP_MOUNT_TARGET => format!("creating mount target for {}: {err}", mount()),
            STEP_MOUNT => format!("error mounting {}: {err}", mount()),
            STEP_WORKDIR => format!("changing to the working directory: {err}"),
            STEP_CLOSE_FDS => format!("closing inherited descriptors: {err}"),
            STEP_USER => format!("setting the container user: {err}"),
            STEP_TTY => format!("setting the controlling terminal: {err}"),
            _ => format!("container setup: {err}"),
        })
    }
}

impl ChildSetup {
    /// Prepares a container's child: join its cgroups, a private mount namespace with its
    /// mounts, its working directory. `shared_tmpfs` tells whether the shim mounted each tmpfs
    /// volume at its source already (then it is bind-mounted like a directory, so containers
    /// share it).
    pub(super) fn for_container(
        config: &ContainerConfig,
        cgroup_procs: Vec<OwnedFd>,
        rootless: bool,
        shared_tmpfs: bool,
    ) -> io::Result<(Self, Report, Vec<String>)> {
        let mut specs: Vec<Spec> = config
            .mounts
            .iter()
            .map(|m| Spec {
                source: match m.kind {
                    // A shared tmpfs is already mounted at its source: bind it like a
                    // directory.
                    MountKind::Tmpfs { .. } if !shared_tmpfs => None,
                    MountKind::Bind | MountKind::Tmpfs { .. } => Some(&m.source),
                },
                sub_path: &m.sub_path,
                target: m.target.clone(),
                read_only: m.read_only,
                size: match m.kind {
                    MountKind::Tmpfs { size } if !shared_tmpfs => size,
                    _ => None,
                },
            })
            .collect();
        let tm_target = PathBuf::from(&config.termination_message_path);
        if !config.termination_message_path.is_empty()
            && !specs.iter().any(|s| s.target == tm_target)
        {
            specs.push(Spec {
                source: Some(&config.termination_message_host_path),
                sub_path: Path::new(""),
                target: tm_target,
                read_only: false,
                size: None,
            });
        }
        // Parents before children, like containerd: `/data` before `/data/sub`.
        specs.sort_by_key(|s| s.target.components().count());
        let mounts = specs
            .iter()
            .map(mount_step)
            .collect::<io::Result<Vec<_>>>()?;
        let describe = mounts.iter().map(|m| m.describe.clone()).collect();
        let workdir = match &config.working_dir {
            Some(dir) if !dir.is_empty() => Some((absolute(Path::new(dir))?, Create::Dirs)),
            _ => None,
        };
        let identity = identity(&config.user, rootless);
        let user_maps = rootless.then(|| {
            let uid = rustix::process::getuid().as_raw();
            let gid = rustix::process::getgid().as_raw();
            let (inner_uid, inner_gid) = identity.as_ref().map_or((uid, gid), |i| (i.uid, i.gid));
            UserMaps {
                uid_map: format!("{inner_uid} {uid} 1\n").into_bytes(),
                gid_map: format!("{inner_gid} {gid} 1\n").into_bytes(),
            }
        });
        let (read, write) = report_pipe()?;
        let (Report(created_read, _), created_write) = report_pipe()?;
        rustix::fs::fcntl_setfl(&created_write, rustix::fs::OFlags::NONBLOCK)?;
        let read = Report(read.0, Some(created_read));
        let mount_ids = Vec::with_capacity(mounts.len());
        let setup = ChildSetup {
            cgroup_procs,
            namespaces: Namespaces::New { user_maps },
            mounts,
            workdir,
            trust_symlinks: rootless,
            identity,
            controlling_tty: false,
            report: write,
            creations: Some(created_write),
            mount_ids,
        };
        Ok((setup, read, describe))
    }

    /// Prepares an exec child: join the container's cgroups and namespaces (those of its main
    /// process `pid`), change to its working directory and take its user.
    pub(super) fn for_exec(
        pid: u32,
        working_dir: Option<&str>,
        user: &ContainerUser,
        cgroup_procs: Vec<OwnedFd>,
        rootless: bool,
    ) -> io::Result<(Self, Report)> {
        let open_ns = |ns: &str| -> io::Result<OwnedFd> {
            Ok(File::open(format!("/proc/{pid}/ns/{ns}"))?.into())
        };
        let user_ns = if rootless {
            Some(open_ns("user")?)
        } else {
            None
        };
        let mnt = open_ns("mnt")?;
        let workdir = match working_dir {
            Some(dir) if !dir.is_empty() => Some((absolute(Path::new(dir))?, Create::Nothing)),
            _ => None,
        };
        let (read, write) = report_pipe()?;
        let setup = ChildSetup {
            cgroup_procs,
            namespaces: Namespaces::Join { user: user_ns, mnt },
            mounts: Vec::new(),
            workdir,
            trust_symlinks: rootless,
            identity: identity(user, rootless),
            controlling_tty: false,
            report: write,
            creations: None,
            mount_ids: Vec::new(),
        };
        Ok((setup, read))
    }

    /// The child also starts a new session (so it leads its own process group, as with
    /// `process_group(0)`, which must then not be asked for) and takes its stdin, a terminal,
    /// as its controlling terminal.
    pub(super) fn with_controlling_tty(mut self) -> Self {
        self.controlling_tty = true;
        self
    }

    /// Runs in the child after `fork`: async-signal-safe system calls only, no allocation.
    pub(super) fn run(&mut self) -> io::Result<()> {
        let mut step = 0;
        let result = self.run_steps(&mut step);
        if let Err(err) = &result {
            let errno = err.raw_os_error().unwrap_or(libc::EINVAL);
            let mut buf = [0_u8; 8];
            buf[..4].copy_from_slice(&step.to_ne_bytes());
            buf[4..].copy_from_slice(&errno.to_ne_bytes());
            // SAFETY: writing a stack buffer to a descriptor we own.
            #[allow(unsafe_code)]
            unsafe {
                libc::write(self.report.as_raw_fd(), buf.as_ptr().cast(), buf.len());
            }
        }
        result
    }

    fn run_steps(&mut self, step: &mut u32) -> io::Result<()> {
        *step = STEP_CGROUP * STEP_STRIDE;
        for fd in &self.cgroup_procs {
            // Writing "0" moves the writing process itself into the cgroup.
            write_all(fd.as_raw_fd(), b"0")?;
        }
        match &self.namespaces {
            Namespaces::New { user_maps } => {
                *step = STEP_UNSHARE * STEP_STRIDE;
                let mut flags = libc::CLONE_NEWNS;
                if user_maps.is_some() {
                    flags |= libc::CLONE_NEWUSER;
                }
                // SAFETY: unshare in the single-threaded child.
                #[allow(unsafe_code)]
                check(unsafe { libc::unshare(flags) })?;
                if let Some(maps) = user_maps {
                    *step = STEP_USER_MAPS * STEP_STRIDE;
                    write_file(c"/proc/self/setgroups", b"deny")?;
                    write_file(c"/proc/self/uid_map", &maps.uid_map)?;
                    write_file(c"/proc/self/gid_map", &maps.gid_map)?;
                }
                *step = STEP_PROPAGATION * STEP_STRIDE;
                // Host mounts still propagate in; nothing the container mounts leaks out.
                sys_mount(None, c"/", None, libc::MS_REC | libc::MS_SLAVE, None)?;
            }
            Namespaces::Join { user, mnt } => {
                *step = STEP_SETNS * STEP_STRIDE;
                if let Some(user) = user {
                    setns(user, libc::CLONE_NEWUSER)?;
                }
                setns(mnt, libc::CLONE_NEWNS)?;
            }
        }
        for (index, m) in (0_u32..).zip(&self.mounts) {
            *step = STEP_MOUNT_SOURCE * STEP_STRIDE + index;
            let source = match &m.source {
                Some(path) => {
                    let base = safe_path::open_trusted(path)?;
                    Some(match &m.sub_path {
                        Some(sub) => safe_path::open_beneath(&base, sub)?,
                        None => base,
                    })
                }
                None => None,
            };
            let create = match &source {
                Some(fd) if !safe_path::is_dir(fd)? => Create::File,
                _ => Create::Dirs,
            };
            *step = STEP_MOUNT_TARGET * STEP_STRIDE + index;
            let report = self.creations.as_ref().map(|pipe| Creations {
                pipe: pipe.as_fd(),
                ours: &self.mount_ids,
            });
            let target =
                safe_path::open_host_path(&m.target, create, self.trust_symlinks, report.as_ref())?;
            *step = STEP_MOUNT * STEP_STRIDE + index;
            let id = match &source {
                Some(source) => safe_path::bind(source, &target, m.read_only)?,
                None => safe_path::tmpfs(&target, m.size.as_deref(), m.read_only)?,
            };
            if self.mount_ids.len() < self.mount_ids.capacity() {
                self.mount_ids.push(id);
            }
        }
        // Opened, created and entered with the shim's rights, before the user is set, as
        // runc first tries: a user that may not enter it still starts there.
        if let Some((dir, create)) = &self.workdir {
            *step = STEP_WORKDIR * STEP_STRIDE;
            let report = self.creations.as_ref().map(|pipe| Creations {
                pipe: pipe.as_fd(),
                ours: &self.mount_ids,
            });
            let dir =
                safe_path::open_host_path(dir, *create, self.trust_symlinks, report.as_ref())?;
            safe_path::change_dir(&dir)?;
        }
        if let Some(identity) = &self.identity {
            *step = STEP_USER * STEP_STRIDE;
            set_identity(identity)?;
        }
        if self.controlling_tty {
            *step = STEP_TTY * STEP_STRIDE;
            // SAFETY: setsid and ioctl take no pointers (TIOCSCTTY's argument is 0: do not
            // steal a terminal that is another session's).
            #[allow(unsafe_code)]
            check(unsafe { libc::setsid() })?;
            #[allow(unsafe_code)]
            check(unsafe { libc::ioctl(0, libc::TIOCSCTTY, 0) })?;
        }
        *step = STEP_CLOSE_FDS * STEP_STRIDE;
        // Belt and braces: whatever descriptor is not close-on-exec yet becomes so; only
        // 0, 1 and 2 reach the program.
        // SAFETY: close_range only changes descriptor flags.
        #[allow(unsafe_code)]
        let rc = unsafe {
            libc::syscall(
                libc::SYS_close_range,
                3_u32,
                u32::MAX,
                libc::CLOSE_RANGE_CLOEXEC,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

/// A mount as [`ChildSetup::for_container`] gathers it.
struct Spec<'a> {
    /// `None`: a new tmpfs.
    source: Option<&'a PathBuf>,
    sub_path: &'a Path,
    target: PathBuf,
    read_only: bool,
    size: Option<u64>,
}

fn mount_step(spec: &Spec<'_>) -> io::Result<MountStep> {
    let target = &spec.target;
    let describe = match spec.source {
        Some(s) => format!(
            "\"{}\" to rootfs at \"{}\"",
            s.join(spec.sub_path).display(),
            target.display()
        ),
        None => format!("\"tmpfs\" to rootfs at \"{}\"", target.display()),
    };
    Ok(MountStep {
        source: spec.source.map(|s| cstring(s)).transpose()?,
        sub_path: (!spec.sub_path.as_os_str().is_empty())
            .then(|| cstring(spec.sub_path))
            .transpose()?,
        target: absolute(target)?,
        read_only: spec.read_only,
        size: spec
            .size
            .map(|s| CString::new(s.to_string()))
            .transpose()
            .map_err(io::Error::other)?,
        describe,
    })
}

/// An absolute path as a `CString`.
fn absolute(path: &Path) -> io::Result<CString> {
    if !path.is_absolute() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("path {} is not absolute", path.display()),
        ));
    }
    cstring(path)
}

fn cstring(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("path {} contains a NUL byte", path.display()),
        )
    })
}

fn report_pipe() -> io::Result<(Report, OwnedFd)> {
    use rustix::pipe::{PipeFlags, pipe_with};
    let (read, write) = pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)?;
    // Only the read end is non-blocking: the child's single small write never blocks anyway.
    rustix::fs::fcntl_setfl(&write, rustix::fs::OFlags::empty())?;
    Ok((Report(File::from(read), None), write))
}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn write_all(fd: libc::c_int, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        // SAFETY: writing a borrowed buffer to a descriptor we hold.
        #[allow(unsafe_code)]
        let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        bytes = &bytes[n.unsigned_abs()..];
    }
    Ok(())
}

fn write_file(path: &std::ffi::CStr, bytes: &[u8]) -> io::Result<()> {
    // SAFETY: open with a NUL-terminated path; the descriptor is closed below.
    #[allow(unsafe_code)]
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is owned here; OwnedFd closes it (no allocation).
    #[allow(unsafe_code)]
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    write_all(fd.as_raw_fd(), bytes)
}

/// `setgroups`, `setresgid`, `setresuid`: raw system calls, not libc's wrappers, which
/// broadcast the change to every thread of the process through signals and locks (the child
/// has one thread). Changing every uid away from 0 drops all capabilities.
fn set_identity(identity: &Identity) -> io::Result<()> {
    let syscall_result = |rc: libc::c_long| {
        if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    };
    if let Some(groups) = &identity.groups {
        // SAFETY: the pointer and length describe a vector prepared before fork.
        #[allow(unsafe_code)]
        syscall_result(unsafe {
            libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr())
        })?;
    }
    let (uid, gid) = (identity.uid, identity.gid);
    // SAFETY: setresgid and setresuid take plain integers.
    #[allow(unsafe_code)]
    syscall_result(unsafe { libc::syscall(libc::SYS_setresgid, gid, gid, gid) })?;
    // SAFETY: as above.
    #[allow(unsafe_code)]
    syscall_result(unsafe { libc::syscall(libc::SYS_setresuid, uid, uid, uid) })
}

fn setns(fd: &OwnedFd, kind: libc::c_int) -> io::Result<()> {
    // SAFETY: setns with a namespace descriptor opened before fork.
    #[allow(unsafe_code)]
    check(unsafe { libc::setns(fd.as_raw_fd(), kind) })
}

fn sys_mount(
    source: Option<&std::ffi::CStr>,
    target: &std::ffi::CStr,
    fstype: Option<&std::ffi::CStr>,
    flags: libc::c_ulong,
    data: Option<&std::ffi::CStr>,
) -> io::Result<()> {
    let ptr = |s: Option<&std::ffi::CStr>| s.map_or(std::ptr::null(), std::ffi::CStr::as_ptr);
    // SAFETY: every pointer is NUL-terminated or null, prepared before fork.
    #[allow(unsafe_code)]
    check(unsafe {
        libc::mount(
            ptr(source),
            target.as_ptr(),
            ptr(fstype),
            flags,
            ptr(data).cast(),
        )
    })
}
