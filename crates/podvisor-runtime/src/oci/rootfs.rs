//! A container's root filesystem, and `subPath` mount sources no container can swap.
//!
//! [`mount_rootfs`] makes `<dir>/rootfs` an overlay of the image's layer directories (bottom
//! to top, as the image store unpacks them: whiteouts are 0/0 character devices, opaque
//! directories carry `trusted.overlay.opaque=y`) with `<dir>/upper` and `<dir>/work` as the
//! container's writable layer. The mount is made with the new mount API and one `lowerdir+`
//! per layer, so the number of layers is not limited by the size of a mount option string.
//! Where overlayfs is missing or refuses the layers, the layers are copied into
//! `<dir>/rootfs` instead (with a warning): whiteouts and opaque directories applied, owners,
//! modes, symbolic links and file capabilities kept (hard links become copies; timestamps
//! and other extended attributes are not kept), nothing followed (every step goes through
//! directory descriptors with `O_NOFOLLOW`). [`remove_rootfs`] unmounts and removes it all, and works
//! on a directory an earlier process left.
//!
//! Mount targets inside the root (a volume's `mountPath`, `/etc/hosts`) are created by the
//! OCI runtime, which resolves them inside the root. The sources are ours: a `subPath` is
//! resolved beneath its volume with `openat2(RESOLVE_BENEATH)` ([`prepare_sub_path`], the
//! shim's [`safe_path`](crate::shim) functions) and bind-mounted from that descriptor onto
//! a private path under the pod directory, as the kubelet does (CVE-2017-1002101): the
//! runtime then gets a path a container cannot redirect with a symbolic link.

use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::mount::{FsMountFlags, FsOpenFlags, MountAttrFlags, UnmountFlags};

use crate::shim::safe_path;

/// How a root filesystem was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RootfsKind {
    /// An overlay mount.
    Overlay,
    /// A copy of the layers (overlayfs unavailable).
    Copy,
}

/// How to make a root filesystem.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Strategy {
    /// An overlay, else a copy.
    #[default]
    Overlay,
    /// A copy, always (tests of the fallback).
    Copy,
}

/// A mounted (or copied) root filesystem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rootfs {
    /// The container's directory: `rootfs`, `upper`, `work` live in it.
    pub dir: PathBuf,
    /// The root filesystem (`<dir>/rootfs`): the spec's `root.path`.
    pub path: PathBuf,
    /// How it was made.
    pub kind: RootfsKind,
}

/// Makes the root filesystem of a container in `dir` (created if missing; a root filesystem
/// an earlier attempt left there is removed first, `subPath` sources are kept) from
/// `layers`, bottom first.
pub fn mount_rootfs(dir: &Path, layers: &[PathBuf], strategy: Strategy) -> io::Result<Rootfs> {
    if layers.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "an image without layers",
        ));
    }
    unmount_all(&dir.join("rootfs"))?;
    remove_trees(dir, &["rootfs", "upper", "work"])?;
    let path = dir.join("rootfs");
    std::fs::create_dir_all(&path).map_err(ctx("creating", &path))?;
    let kind = match strategy {
        Strategy::Copy => RootfsKind::Copy,
        Strategy::Overlay => match mount_overlay(dir, layers) {
            Ok(()) => RootfsKind::Overlay,
            Err(e) => {
                tracing::warn!(
                    dir = %dir.display(),
                    error = %e,
                    "overlayfs is not available: copying the image's layers into the root \
                     filesystem (slower, uses disk)"
                );
                for sub in ["upper", "work"] {
                    let _ = std::fs::remove_dir_all(dir.join(sub));
                }
                RootfsKind::Copy
            }
        },
    };
    if kind == RootfsKind::Copy {
        copy_layers(&path, layers)?;
    }
    Ok(Rootfs {
        dir: dir.to_owned(),
        path,
        kind,
    })
}

fn ctx<'a>(what: &'static str, path: &'a Path) -> impl Fn(io::Error) -> io::Error + 'a {
    move |e| io::Error::new(e.kind(), format!("{what} {}: {e}", path.display()))
}

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path with a NUL byte"))
}

fn mount_overlay(dir: &Path, layers: &[PathBuf]) -> io::Result<()> {
    let (upper, work, target) = (dir.join("upper"), dir.join("work"), dir.join("rootfs"));
    for d in [&upper, &work] {
        std::fs::create_dir_all(d).map_err(ctx("creating", d))?;
    }
    let fs = rustix::mount::fsopen("overlay", FsOpenFlags::FSOPEN_CLOEXEC)
        .map_err(|e| io::Error::new(io::Error::from(e).kind(), format!("fsopen overlay: {e}")))?;
    let set = |key: &str, value: &Path| -> io::Result<()> {
        rustix::mount::fsconfig_set_string(&fs, key, c_path(value)?.as_c_str()).map_err(|e| {
            io::Error::new(
                io::Error::from(e).kind(),
                format!("overlay {key}={}: {e}", value.display()),
            )
        })
    };
    // `lowerdir+` appends below the layers given so far: the top layer first.
    for layer in layers.iter().rev() {
        set("lowerdir+", layer)?;
    }
    set("upperdir", &upper)?;
    set("workdir", &work)?;
    rustix::mount::fsconfig_create(&fs)
        .map_err(|e| io::Error::new(io::Error::from(e).kind(), format!("creating overlay: {e}")))?;
    // No mount attributes, as containerd's overlay snapshots.
    let mount =
        rustix::mount::fsmount(&fs, FsMountFlags::FSMOUNT_CLOEXEC, MountAttrFlags::empty())?;
    let target_fd = rustix::fs::open(
        &target,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    safe_path::attach(&mount, &target_fd).map_err(ctx("mounting the overlay on", &target))
}

/// Unmounts and removes the root filesystem in `dir` (`rootfs`, `upper`, `work`) and the
/// `subPath` sources prepared there, then `dir` itself if it is left empty. Nothing there is
/// not an error.
pub fn remove_rootfs(dir: &Path) -> io::Result<()> {
    let path = dir.join("rootfs");
    unmount_all(&path)?;
    let sub_paths = dir.join("subpaths");
    if let Ok(entries) = std::fs::read_dir(&sub_paths) {
        for entry in entries.flatten() {
            unmount_all(&entry.path())?;
        }
    }
    remove_trees(dir, &["rootfs", "upper", "work", "subpaths"])?;
    // The container's `/sys/fs/cgroup` (`spec::cgroup_mount::rewrite_prepared`): never
    // recursively, as its binds are of the node's cgroups.
    let view = super::spec::cgroup_mount::view_dir(dir);
    super::spec::cgroup_mount::remove_view(&view);
    let _ = std::fs::remove_dir(view);
    // The directory goes only if nothing else (a termination-message file) lives there.
    let _ = std::fs::remove_dir(dir);
    Ok(())
}

/// Removes each of `names` in `dir` (`remove_dir_all` follows no symbolic link).
fn remove_trees(dir: &Path, names: &[&str]) -> io::Result<()> {
    for name in names {
        let p = dir.join(name);
        match std::fs::remove_dir_all(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(ctx("removing", &p)(e)),
        }
    }
    Ok(())
}

/// Unmounts whatever is mounted at `path`, stacked mounts included; lazily if it is busy.
fn unmount_all(path: &Path) -> io::Result<()> {
    for _ in 0..16 {
        match rustix::mount::unmount(path, UnmountFlags::NOFOLLOW) {
            Ok(()) => {}
            Err(rustix::io::Errno::BUSY) => {
                rustix::mount::unmount(path, UnmountFlags::NOFOLLOW | UnmountFlags::DETACH)
                    .map_err(|e| io::Error::other(format!("unmounting {}: {e}", path.display())))?;
            }
            // Not a mount point (any more), or not there.
            Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOENT) => return Ok(()),
            Err(e) => {
                return Err(io::Error::other(format!(
                    "unmounting {}: {e}",
                    path.display()
                )));
            }
        }
    }
    Ok(())
}

/// Whether `path` is a mount point (its mount differs from its parent's).
pub fn is_mount_point(path: &Path) -> io::Result<bool> {
    let open = |p: &Path| {
        rustix::fs::open(
            p,
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
    };
    let parent = path.parent().unwrap_or(Path::new("/"));
    let (fd, parent_fd) = (open(path)?, open(parent)?);
    Ok(safe_path::mount_id(&fd)? != safe_path::mount_id(&parent_fd)?)
}

/// Copies the layers, bottom first, into `root` (the container-side rules of overlayfs:
/// a whiteout removes what is below, an opaque directory hides what is below).
fn copy_layers(root: &Path, layers: &[PathBuf]) -> io::Result<()> {
    let dest = open_dir(rustix::fs::CWD, root)?;
    for layer in layers {
        let src = open_dir(rustix::fs::CWD, layer)?;
        copy_dir(&src, &dest).map_err(ctx("copying layer", layer))?;
    }
    Ok(())
}

fn open_dir<Fd: AsFd>(dir: Fd, path: impl rustix::path::Arg) -> io::Result<OwnedFd> {
    Ok(rustix::fs::openat(
        dir,
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

fn is_opaque(dir: &OwnedFd) -> bool {
    let mut buf = [0_u8; 4];
    matches!(
        rustix::fs::fgetxattr(dir, "trusted.overlay.opaque", &mut buf),
        Ok(1) if buf[0] == b'y'
    )
}

fn copy_dir(src: &OwnedFd, dest: &OwnedFd) -> io::Result<()> {
    for entry in rustix::fs::Dir::read_from(src)? {
        let entry = entry?;
        let name = entry.file_name();
        if name == c"." || name == c".." {
            continue;
        }
        let stat = rustix::fs::statat(src, name, AtFlags::SYMLINK_NOFOLLOW)?;
        let kind = FileType::from_raw_mode(stat.st_mode);
        let existing = rustix::fs::statat(dest, name, AtFlags::SYMLINK_NOFOLLOW).ok();
        let owner = (
            Some(rustix::fs::Uid::from_raw(stat.st_uid)),
            Some(rustix::fs::Gid::from_raw(stat.st_gid)),
        );
        let mode = Mode::from_raw_mode(stat.st_mode & 0o7777);
        if kind == FileType::CharacterDevice && stat.st_rdev == 0 {
            // A whiteout: what is below goes, nothing takes its place.
            if existing.is_some() {
                remove_at(dest, name)?;
            }
            continue;
        }
        let existing_dir = existing
            .as_ref()
            .is_some_and(|s| FileType::from_raw_mode(s.st_mode) == FileType::Directory);
        if kind == FileType::Directory {
            let sub_src = open_dir(src, name)?;
            if existing.is_some() && (!existing_dir || is_opaque(&sub_src)) {
                remove_at(dest, name)?;
            }
            if !existing_dir || is_opaque(&sub_src) {
                rustix::fs::mkdirat(dest, name, Mode::from_raw_mode(0o700))?;
            }
            let sub_dest = open_dir(dest, name)?;
            rustix::fs::fchown(&sub_dest, owner.0, owner.1)?;
            rustix::fs::fchmod(&sub_dest, mode)?;
            copy_dir(&sub_src, &sub_dest)?;
            continue;
        }
        if existing.is_some() {
            remove_at(dest, name)?;
        }
        match kind {
            FileType::RegularFile => {
                let from = rustix::fs::openat(
                    src,
                    name,
                    OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                )?;
                let to = rustix::fs::openat(
                    dest,
                    name,
                    OFlags::WRONLY
                        | OFlags::CREATE
                        | OFlags::EXCL
                        | OFlags::NOFOLLOW
                        | OFlags::CLOEXEC,
                    Mode::from_raw_mode(0o600),
                )?;
                let (mut from, mut to) = (std::fs::File::from(from), std::fs::File::from(to));
                io::copy(&mut from, &mut to)?;
                rustix::fs::fchown(&to, owner.0, owner.1)?;
                // After the owner: chown clears set-id bits and file capabilities.
                rustix::fs::fchmod(&to, mode)?;
                copy_file_capabilities(&from, &to)?;
            }
            FileType::Symlink => {
                let target = rustix::fs::readlinkat(src, name, Vec::new())?;
                rustix::fs::symlinkat(target.as_c_str(), dest, name)?;
                rustix::fs::chownat(dest, name, owner.0, owner.1, AtFlags::SYMLINK_NOFOLLOW)?;
            }
            other => {
                rustix::fs::mknodat(dest, name, other, mode, stat.st_rdev)?;
                rustix::fs::chownat(dest, name, owner.0, owner.1, AtFlags::SYMLINK_NOFOLLOW)?;
                rustix::fs::chmodat(dest, name, mode, AtFlags::empty())?;
            }
        }
    }
    Ok(())
}

/// Copies `security.capability` (a binary's file capabilities, such as `ping`'s).
fn copy_file_capabilities(from: &std::fs::File, to: &std::fs::File) -> io::Result<()> {
    let mut value = [0_u8; 64];
    match rustix::fs::fgetxattr(from, "security.capability", &mut value) {
        Ok(len) => {
            rustix::fs::fsetxattr(
                to,
                "security.capability",
                &value[..len],
                rustix::fs::XattrFlags::empty(),
            )?;
            Ok(())
        }
        Err(rustix::io::Errno::NODATA | rustix::io::Errno::NOTSUP) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Removes `name` in `dir`, a whole tree if it is a directory, following no link.
fn remove_at(dir: &OwnedFd, name: &std::ffi::CStr) -> io::Result<()> {
    let stat = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
    if FileType::from_raw_mode(stat.st_mode) == FileType::Directory {
        let sub = open_dir(dir, name)?;
        for entry in rustix::fs::Dir::read_from(&sub)? {
            let entry = entry?;
            let child = entry.file_name();
            if child != c"." && child != c".." {
                remove_at(&sub, child)?;
            }
        }
        rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR)?;
    } else {
        rustix::fs::unlinkat(dir, name, AtFlags::empty())?;
    }
    Ok(())
}

/// Prepares the source of a `subPath` mount: resolves `sub_path` beneath the volume
/// directory `volume` (no symbolic link or `..` leads out of it; missing directories are
/// created beneath it, as the kubelet's `SafeMakeDir`), then bind-mounts what it names onto
/// `<dir>/subpaths/<index>` (a directory or an empty file, as the source). Returns that path:
/// the [`ContainerMount`](super::spec::ContainerMount)'s `host_path`. [`remove_rootfs`]
/// unmounts and removes it.
pub fn prepare_sub_path(
    dir: &Path,
    index: usize,
    volume: &Path,
    sub_path: &Path,
) -> io::Result<PathBuf> {
    let base = safe_path::open_trusted(&c_path(volume)?).map_err(ctx("opening volume", volume))?;
    let source = open_or_make_beneath(&base, sub_path).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "resolving subPath {} in {}: {e}",
                sub_path.display(),
                volume.display()
            ),
        )
    })?;
    let holder = dir.join("subpaths");
    std::fs::create_dir_all(&holder).map_err(ctx("creating", &holder))?;
    let target = holder.join(index.to_string());
    unmount_all(&target)?;
    let _ = std::fs::remove_dir(&target);
    let _ = std::fs::remove_file(&target);
    if safe_path::is_dir(&source)? {
        std::fs::create_dir(&target).map_err(ctx("creating", &target))?;
    } else {
        std::fs::File::create(&target).map_err(ctx("creating", &target))?;
    }
    let target_fd = rustix::fs::open(
        &target,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    safe_path::bind(&source, &target_fd, false).map_err(ctx("bind-mounting onto", &target))?;
    Ok(target)
}

/// Opens `sub_path` beneath `base`, making missing directories one component at a time, each
/// in a directory itself opened beneath `base`.
fn open_or_make_beneath(base: &OwnedFd, sub_path: &Path) -> io::Result<OwnedFd> {
    let relative = |p: &Path| -> io::Result<CString> { c_path(p) };
    match safe_path::open_beneath(base, &relative(sub_path)?) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        other => return other,
    }
    let mut prefix = PathBuf::new();
    for component in sub_path.components() {
        let Component::Normal(name) = component else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a subPath must be relative and must not contain '..'",
            ));
        };
        let parent = if prefix.as_os_str().is_empty() {
            rustix::fs::openat(base, c".", OFlags::PATH | OFlags::CLOEXEC, Mode::empty())?
        } else {
            safe_path::open_beneath(base, &relative(&prefix)?)?
        };
        prefix.push(name);
        match rustix::fs::mkdirat(&parent, cname(name)?.as_c_str(), Mode::from_raw_mode(0o755)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(e) => return Err(e.into()),
        }
    }
    safe_path::open_beneath(base, &relative(sub_path)?)
}

fn cname(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a name with a NUL byte"))
}
