//! `<state>/pods` as one mount of its own, so that a shim drops every other pod's mounts from
//! its mount namespace in one call.
//!
//! A shim's mount namespace is a copy of the agent's, with every pod's mounts in it: the bind
//! mounts that hold an `oci` pod's namespaces (`netns`) and the tmpfs of each `secret` or
//! projected volume. Those of other pods would keep their networks and volumes alive for as
//! long as the shim lives, so the shim detaches them. One by one, that is a read of the whole
//! mount table and one unmount (one RCU grace period, under the namespace lock every other
//! shim wants too) per pod: with 110 pods started at once, a median of 250 ms per shim, and
//! every later read of the table (the shim's own, the OCI runtime's dozen per create) still
//! long while it went on.
//!
//! So the agent makes `<state>/pods` a private bind mount of itself ([`make`]) before any pod
//! mount is made under it (the `oci` class, at its first sandbox or pool fill: an agent that
//! runs host processes only adds no mount to the host's table), and a shim ([`keep_only`]):
//! 1. clones its own pod directory's mounts (`open_tree`, recursive: its volumes and, as a
//!    namespace's copy loses the unbindable mark, its namespace mounts; any namespace mount
//!    the clone lacks is cloned on its own);
//! 2. detaches `<state>/pods` with everything below it (one lazy unmount);
//! 3. attaches the clones where they were: the pod directory underneath is the same directory.
//!
//! The warm pool lives below it too ([`crate::sandbox::pool::POOL_DIR`]), so a pooled sandbox
//! moves into its pod with one `rename` in the same mount. Where `<state>/pods` is not a mount
//! (a pod of an earlier agent had mounts below it when this agent started), shims fall back to
//! detaching mount by mount.

use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::CWD;
use rustix::mount::{
    MountPropagationFlags, MoveMountFlags, OpenTreeFlags, UnmountFlags, move_mount, open_tree,
};

use super::netns::{NS_DIR, NsKind, is_mount_root, is_mount_root_at, make_unbindable_mount};

/// Held while a mount is made below the pods directory by this process, and while the pods
/// directory itself becomes a mount: one made between [`make`]'s check and its bind would be
/// hidden under the bind.
static MOUNTING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs `f`, which mounts something below the pods directory, never beside [`make`].
pub(crate) fn mounting<T>(f: impl FnOnce() -> T) -> T {
    let _held = MOUNTING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    f()
}

/// Makes `pods` a private mount of its own when nothing is mounted below it; `Ok(false)` when
/// something is (a bind over it would hide those mounts from this namespace, and a recursive
/// one would leave the originals pinned beneath). Idempotent: a mount root stays as it is.
///
/// # Errors
///
/// The directory cannot be made, or the bind mount fails.
pub fn make(pods: &Path) -> io::Result<bool> {
    mounting(|| make_now(pods))
}

fn make_now(pods: &Path) -> io::Result<bool> {
    std::fs::create_dir_all(pods)?;
    if is_mount_root(pods) {
        return Ok(true);
    }
    let table = std::fs::read_to_string("/proc/self/mountinfo")?;
    let below = crate::cgroup::parse_mount_table(&table)
        .iter()
        .any(|m| m.mount_point.starts_with(pods) && m.mount_point != pods);
    if below {
        return Ok(false);
    }
    rustix::mount::mount_bind(pods, pods)?;
    // Private: neither the pods' mounts reach the host's other namespaces (a shared `/` under
    // systemd) nor any shim's copy after it was made.
    rustix::mount::mount_change(pods, MountPropagationFlags::PRIVATE)?;
    Ok(true)
}

/// Detaches `pods` when it is a mount and holds no pod any more (the agent stops, and leaves
/// the host's mount table as it found it).
pub fn release_if_empty(pods: &Path) {
    let empty = std::fs::read_dir(pods).is_ok_and(|mut d| d.next().is_none());
    if empty && is_mount_root(pods) {
        let _ = rustix::mount::unmount(pods, UnmountFlags::DETACH);
    }
}

/// Where a pod's namespaces may be mounted, under its directory: taken from the warm pool
/// (`sandbox/ns`) or made for it (`ns`).
fn namespace_dirs(pod_dir: &Path) -> [PathBuf; 2] {
    [
        pod_dir.join(super::pool::ADOPTED).join(NS_DIR),
        pod_dir.join(NS_DIR),
    ]
}

/// In a shim's own mount namespace: detaches everything below the pods directory (the parent
/// of `pod_dir`) but `pod_dir`'s own mounts, which are attached again where they were.
/// `Ok(false)`: the pods directory is not one mount (nothing was done).
///
/// # Errors
///
/// A clone, the detach or an attach failed. After the detach, the pod's own mounts may be
/// missing from this namespace: the shim must not go on.
pub fn keep_only(pod_dir: &Path) -> io::Result<bool> {
    let Some(pods) = pod_dir.parent() else {
        return Ok(false);
    };
    if !is_mount_root(pods) {
        return Ok(false);
    }
    let tree = open_tree(
        CWD,
        pod_dir,
        OpenTreeFlags::OPEN_TREE_CLONE
            | OpenTreeFlags::OPEN_TREE_CLOEXEC
            | OpenTreeFlags::AT_RECURSIVE,
    )?;
    // The namespace mounts: in the tree already, as a namespace's copy loses the unbindable
    // mark that keeps their directory out of recursive clones; else cloned one by one (an
    // unattached clone costs a grace period when it is dropped, so only then).
    let mut namespaces: Vec<(PathBuf, Vec<(PathBuf, OwnedFd)>)> = Vec::new();
    for dir in namespace_dirs(pod_dir) {
        let mut held = Vec::new();
        for kind in NsKind::ALL {
            let file = dir.join(kind.name());
            let in_tree = file
                .strip_prefix(pod_dir)
                .is_ok_and(|rel| is_mount_root_at(&tree, rel));
            if !in_tree && is_mount_root(&file) {
                let clone = open_tree(
                    CWD,
                    &file,
                    OpenTreeFlags::OPEN_TREE_CLONE | OpenTreeFlags::OPEN_TREE_CLOEXEC,
                )?;
                held.push((file, clone));
            }
        }
        namespaces.push((dir, held));
    }
    rustix::mount::unmount(pods, UnmountFlags::DETACH)?;
    attach(&tree, pod_dir)?;
    for (dir, held) in namespaces {
        // Unbindable again, as in the agent's namespace (made a mount first if the clone
        // lacked it).
        if !held.is_empty() || is_mount_root(&dir) {
            make_unbindable_mount(&dir).map_err(io::Error::other)?;
        }
        for (file, clone) in held {
            attach(&clone, &file)?;
        }
    }
    Ok(true)
}

fn attach(mount: &OwnedFd, target: &Path) -> io::Result<()> {
    Ok(move_mount(
        mount,
        c"",
        CWD,
        target,
        MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
    )?)
}
