//! What a test's directory has mounted in this process's mount namespace, and its clean-up.

use std::path::{Path, PathBuf};

/// The mount points at or below `dir` (from `/proc/self/mountinfo`; a test's directories have
/// no characters the table escapes).
#[must_use]
pub fn mount_points_under(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(PathBuf::from)
        .filter(|p| p.starts_with(dir))
        .collect()
}

/// Detaches every mount at or below `dir`, deepest first: what a killed `serve` left (the
/// pods directory's own mount, an `oci` pod's namespaces, secret volumes).
pub fn detach_mounts_under(dir: &Path) {
    let mut mounts = mount_points_under(dir);
    mounts.sort_by_key(|p| std::cmp::Reverse(p.as_os_str().len()));
    for m in mounts {
        let _ = rustix::mount::unmount(&m, rustix::mount::UnmountFlags::DETACH);
    }
}
