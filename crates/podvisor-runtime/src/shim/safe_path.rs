//! Paths a container can influence, resolved without following its symlinks, and mounts made
//! through the descriptors they resolve to (runc's CVE-2021-30465 fix, the kubelet's
//! CVE-2017-1002101 and CVE-2021-25741 fixes, done with `openat2` and the new mount API).
//!
//! Containers share the host's root, so a mount target, the termination-message target or a
//! working directory is resolved from `/` one component at a time (`O_PATH | O_NOFOLLOW`): a
//! symbolic link is followed only when root owns it (a non-root container cannot have planted
//! it; a root container is root on the host anyway), and whatever is missing is created with
//! `mkdirat`/`openat(O_CREAT | O_EXCL | O_NOFOLLOW)` in the directory just opened. A `subPath`
//! is resolved beneath its volume with `openat2(RESOLVE_BENEATH)`: no symlink leads out. The
//! mount then goes from descriptor to descriptor (`open_tree` + `move_mount`, `fsmount` for a
//! tmpfs), so nothing can be swapped in between the check and the mount.
//!
//! Everything here runs in the child between `fork` and `exec` (see [`super::child`]): raw
//! system calls on `&CStr`s and stack buffers only, never an allocation.

use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags, StatxFlags};
use rustix::mount::{
    FsMountFlags, FsOpenFlags, MountAttrFlags, MoveMountFlags, OpenTreeFlags, fsconfig_create,
    fsconfig_set_string, fsmount, fsopen, move_mount, open_tree,
};
use std::ffi::CStr;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

/// The pseudo-errno reported when a path goes through a symbolic link that a container could
/// have planted (the report pipe carries errnos; this one is no real errno).
pub(crate) const UNTRUSTED_SYMLINK: i32 = 0x7000_0001;
/// `PATH_MAX`.
const PATH_MAX: usize = 4096;
/// `NAME_MAX` + the terminating NUL.
const NAME_BUF: usize = 256;
/// The kernel's own limit on symbolic links in one resolution.
const MAX_SYMLINKS: u32 = 40;

/// What to create when the last component is missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Create {
    /// Nothing: the path must exist (any type).
    Nothing,
    /// Missing directories, the last one included; the result is a directory.
    Dirs,
    /// Missing parent directories and an empty file (0644) last; the result is not a
    /// directory.
    File,
}

/// Where the child reports what it creates on the host's own filesystems (not inside a mount
/// it made itself: a volume, a tmpfs), so that it can be removed with the pod: one line per
/// path on a pipe.
pub(crate) struct Creations<'a> {
    /// The write end of the pipe.
    pub(crate) pipe: BorrowedFd<'a>,
    /// The mount IDs of the mounts the child made.
    pub(crate) ours: &'a [u64],
}

/// The mount ID of what `fd` names.
pub(crate) fn mount_id(fd: impl AsFd) -> io::Result<u64> {
    Ok(rustix::fs::statx(fd, c"", AtFlags::EMPTY_PATH, StatxFlags::MNT_ID)?.stx_mnt_id)
}

/// Resolves the absolute `path` from `/` as described in the module documentation and
/// returns an `O_PATH` descriptor of what it names. `trust_all` follows every symbolic link
/// (rootless: the shim has no more rights than its containers, and root's files read as the
/// overflow uid there). What it creates on the host's filesystems goes to `report`.
pub(crate) fn open_host_path(
    path: &CStr,
    create: Create,
    trust_all: bool,
    report: Option<&Creations<'_>>,
) -> io::Result<OwnedFd> {
    let bytes = path.to_bytes();
    if bytes.first() != Some(&b'/') {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    let mut buf = [0_u8; PATH_MAX];
    if bytes.len() > buf.len() {
        return Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG));
    }
    buf[..bytes.len()].copy_from_slice(bytes);
    let (mut pos, mut len) = (0, bytes.len());
    let mut link = [0_u8; PATH_MAX];
    let mut name = [0_u8; NAME_BUF];
    let mut links = 0;
    let mut cur = open_root()?;
    loop {
        while pos < len && buf[pos] == b'/' {
            pos += 1;
        }
        if pos == len {
            // Only `/` (or `.`/`..` at the end) was left: `cur` is the result.
            return finish(cur, create);
        }
        let end = buf[pos..len]
            .iter()
            .position(|&b| b == b'/')
            .map_or(len, |i| pos + i);
        let component = &buf[pos..end];
        let last = buf[end..len].iter().all(|&b| b == b'/');
        if component == b"." {
            pos = end;
            continue;
        }
        let name = c_name(component, &mut name)?;
        if component == b".." {
            cur = rustix::fs::openat(&cur, name, path_flags() | OFlags::DIRECTORY, Mode::empty())?;
            pos = end;
            continue;
        }
        let step = match create {
            _ if last => create,
            Create::Nothing => Create::Nothing,
            Create::Dirs | Create::File => Create::Dirs,
        };
        let (fd, created) = open_or_create(&cur, name, step)?;
        if created && let Some(report) = report {
            report_creation(&cur, name, report, &mut link)?;
        }
        let stat = rustix::fs::statat(&fd, c"", AtFlags::EMPTY_PATH)?;
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::Symlink => {
                if !trust_all && stat.st_uid != 0 {
                    return Err(io::Error::from_raw_os_error(UNTRUSTED_SYMLINK));
                }
                links += 1;
                if links > MAX_SYMLINKS {
                    return Err(io::Error::from_raw_os_error(libc::ELOOP));
                }
                let target_len = rustix::fs::readlinkat_raw(&fd, c"", &mut link[..])?;
                // Remaining path = target + "/" + the rest after this component.
                let rest = len - end;
                let new_len = target_len + 1 + rest;
                if target_len == 0 || target_len >= link.len() || new_len > buf.len() {
                    return Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG));
                }
                buf.copy_within(end..len, target_len + 1);
                buf[target_len] = b'/';
                buf[..target_len].copy_from_slice(&link[..target_len]);
                (pos, len) = (0, new_len);
                if buf[0] == b'/' {
                    cur = open_root()?;
                }
            }
            FileType::Directory => {
                cur = fd;
                pos = end;
            }
            _ if last => return finish(fd, create),
            _ => return Err(io::Error::from_raw_os_error(libc::ENOTDIR)),
        }
    }
}

/// An error of [`open_host_path`] in words.
pub(crate) fn describe(err: &io::Error) -> String {
    if err.raw_os_error() == Some(UNTRUSTED_SYMLINK) {
        "refusing to follow a symbolic link that root does not own (a container could have \
         planted it)"
            .to_owned()
    } else {
        err.to_string()
    }
}

/// Opens `sub_path` beneath the directory `base` (`RESOLVE_BENEATH`: a symbolic link or `..`
/// that leads out of it fails with `EXDEV`).
pub(crate) fn open_beneath(base: &OwnedFd, sub_path: &CStr) -> io::Result<OwnedFd> {
    Ok(rustix::fs::openat2(
        base,
        sub_path,
        OFlags::PATH | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
    )?)
}

/// Opens a trusted host path (a volume's directory, the termination-message file the shim
/// made): symbolic links are followed, as the kubelet follows them in a `hostPath`.
pub(crate) fn open_trusted(path: &CStr) -> io::Result<OwnedFd> {
    Ok(rustix::fs::open(
        path,
        OFlags::PATH | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// Whether the descriptor names a directory.
pub(crate) fn is_dir(fd: &OwnedFd) -> io::Result<bool> {
    let stat = rustix::fs::statat(fd, c"", AtFlags::EMPTY_PATH)?;
    Ok(FileType::from_raw_mode(stat.st_mode) == FileType::Directory)
}

/// Bind-mounts the tree at `source` (recursively) onto `target`, read-only when asked (the
/// top mount only, as a read-only `volumeMount`), attaching it through the descriptors.
/// Returns the new mount's ID.
pub(crate) fn bind(source: &OwnedFd, target: &OwnedFd, read_only: bool) -> io::Result<u64> {
    let tree = open_tree(
        source,
        c"",
        OpenTreeFlags::OPEN_TREE_CLONE
            | OpenTreeFlags::OPEN_TREE_CLOEXEC
            | OpenTreeFlags::AT_EMPTY_PATH
            | OpenTreeFlags::AT_RECURSIVE,
    )?;
    if read_only {
        set_read_only(&tree)?;
    }
    attach(&tree, target)?;
    mount_id(&tree)
}

/// Mounts a new tmpfs (`nosuid,nodev`, `size` when given) onto `target`; returns its mount ID.
pub(super) fn tmpfs(target: &OwnedFd, size: Option<&CStr>, read_only: bool) -> io::Result<u64> {
    let fs = fsopen(c"tmpfs", FsOpenFlags::FSOPEN_CLOEXEC)?;
    if let Some(size) = size {
        fsconfig_set_string(&fs, c"size", size)?;
    }
    fsconfig_create(&fs)?;
    let mut attrs = MountAttrFlags::MOUNT_ATTR_NOSUID | MountAttrFlags::MOUNT_ATTR_NODEV;
    if read_only {
        attrs |= MountAttrFlags::MOUNT_ATTR_RDONLY;
    }
    let mount = fsmount(&fs, FsMountFlags::FSMOUNT_CLOEXEC, attrs)?;
    attach(&mount, target)?;
    mount_id(&mount)
}

/// Changes the working directory to `dir`.
pub(super) fn change_dir(dir: &OwnedFd) -> io::Result<()> {
    Ok(rustix::process::fchdir(dir)?)
}

/// Attaches the detached mount `mount` (from `open_tree` or `fsmount`) onto `target`.
pub(crate) fn attach(mount: &OwnedFd, target: &OwnedFd) -> io::Result<()> {
    Ok(move_mount(
        mount,
        c"",
        target,
        c"",
        MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH | MoveMountFlags::MOVE_MOUNT_T_EMPTY_PATH,
    )?)
}

/// `struct mount_attr` of `mount_setattr(2)` (rustix does not wrap the call).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

fn set_read_only(tree: &OwnedFd) -> io::Result<()> {
    let attr = MountAttr {
        attr_set: u64::from(MountAttrFlags::MOUNT_ATTR_RDONLY.bits()),
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: the path is a NUL-terminated empty string, `attr` lives across the call and its
    // size is passed with it.
    #[allow(unsafe_code)]
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            tree.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            &raw const attr,
            size_of::<MountAttr>(),
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn path_flags() -> OFlags {
    OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

fn open_root() -> io::Result<OwnedFd> {
    Ok(rustix::fs::open(
        c"/",
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// `component` with a NUL, in `buf`.
fn c_name<'a>(component: &[u8], buf: &'a mut [u8; NAME_BUF]) -> io::Result<&'a CStr> {
    if component.len() >= NAME_BUF {
        return Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG));
    }
    buf[..component.len()].copy_from_slice(component);
    buf[component.len()] = 0;
    CStr::from_bytes_with_nul(&buf[..=component.len()])
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// Writes `<path of dir>/<name>` to the report pipe, unless `dir` lies in a mount of ours.
/// `buf` is scratch space.
fn report_creation(
    dir: &OwnedFd,
    name: &CStr,
    report: &Creations<'_>,
    buf: &mut [u8; PATH_MAX],
) -> io::Result<()> {
    if report.ours.contains(&mount_id(dir)?) {
        return Ok(());
    }
    // "/proc/self/fd/<n>", NUL-terminated, without allocating.
    let mut proc_path = *b"/proc/self/fd/\0\0\0\0\0\0\0\0\0\0\0\0";
    let mut digits = [0_u8; 10];
    let mut n = dir.as_raw_fd().unsigned_abs();
    let mut len = 0;
    loop {
        digits[len] = b'0' + u8::try_from(n % 10).unwrap_or(0);
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for (i, d) in digits[..len].iter().rev().enumerate() {
        proc_path[14 + i] = *d;
    }
    let proc_path = CStr::from_bytes_until_nul(&proc_path)
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let mut used = rustix::fs::readlinkat_raw(rustix::fs::CWD, proc_path, &mut buf[..])?;
    let name = name.to_bytes();
    if used == 0 || used + name.len() + 2 > buf.len() {
        return Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG));
    }
    // A line per path: a path with a newline cannot be told apart, so it is not recorded
    // (it stays behind rather than have a fragment of it taken for another path).
    if name.contains(&b'\n') || buf[..used].contains(&b'\n') {
        return Ok(());
    }
    if buf[used - 1] != b'/' {
        buf[used] = b'/';
        used += 1;
    }
    buf[used..used + name.len()].copy_from_slice(name);
    used += name.len();
    buf[used] = b'\n';
    used += 1;
    // One write of at most PATH_MAX bytes: atomic on a pipe. A full pipe drops the line (the
    // path then stays behind), it never blocks the child.
    let _ = rustix::io::write(report.pipe, &buf[..used]);
    Ok(())
}

/// Opens `name` in `dir` without following it, creating it (as `create` says) when missing;
/// tells whether it created it. A creation race (someone else made it first) ends in opening
/// what is there, still without following it.
fn open_or_create(dir: &OwnedFd, name: &CStr, create: Create) -> io::Result<(OwnedFd, bool)> {
    let mut created = false;
    for _ in 0..8 {
        match rustix::fs::openat(dir, name, path_flags(), Mode::empty()) {
            Ok(fd) => return Ok((fd, created)),
            Err(rustix::io::Errno::NOENT) => {}
            Err(e) => return Err(e.into()),
        }
        let made = match create {
            Create::Nothing => return Err(io::Error::from_raw_os_error(libc::ENOENT)),
            Create::Dirs => rustix::fs::mkdirat(dir, name, Mode::from_raw_mode(0o755)),
            Create::File => rustix::fs::openat(
                dir,
                name,
                OFlags::WRONLY
                    | OFlags::CREATE
                    | OFlags::EXCL
                    | OFlags::NOFOLLOW
                    | OFlags::NOCTTY
                    | OFlags::CLOEXEC,
                Mode::from_raw_mode(0o644),
            )
            .map(drop),
        };
        match made {
            Ok(()) => created = true,
            Err(rustix::io::Errno::EXIST) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Err(io::Error::from_raw_os_error(libc::EAGAIN))
}

fn finish(fd: OwnedFd, create: Create) -> io::Result<OwnedFd> {
    let dir = is_dir(&fd)?;
    match create {
        Create::Dirs if !dir => Err(io::Error::from_raw_os_error(libc::ENOTDIR)),
        Create::File if dir => Err(io::Error::from_raw_os_error(libc::EISDIR)),
        _ => Ok(fd),
    }
}
