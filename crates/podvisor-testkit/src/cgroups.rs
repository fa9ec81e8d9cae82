//! Removing the cgroups a killed podvisor left for its pods.

use std::path::{Path, PathBuf};

/// Removes the cgroups of the pods under `pods_dir` (a state directory's `pods/`, one
/// directory per pod uid); see [`remove_pod_cgroup`].
pub fn remove_pod_cgroups(pods_dir: &Path) {
    let Ok(entries) = std::fs::read_dir(pods_dir) else {
        return;
    };
    for uid in entries.flatten() {
        remove_pod_cgroup(&uid.file_name().to_string_lossy());
    }
}

/// Removes `podvisor/<uid>` and its container cgroups under every hierarchy (cgroup v1 and
/// the v2 root): a SIGKILLed agent leaves them behind. Only empty cgroups can go, so the
/// pod's processes must be dead; whatever cannot be removed stays, silently.
pub fn remove_pod_cgroup(uid: &str) {
    let Ok(hierarchies) = std::fs::read_dir("/sys/fs/cgroup") else {
        return;
    };
    let mut roots: Vec<PathBuf> = hierarchies.flatten().map(|e| e.path()).collect();
    roots.push(PathBuf::from("/sys/fs/cgroup"));
    for root in roots {
        let pod = root.join("podvisor").join(uid);
        if let Ok(children) = std::fs::read_dir(&pod) {
            for c in children.flatten() {
                if c.path().is_dir() {
                    let _ = std::fs::remove_dir(c.path());
                }
            }
            let _ = std::fs::remove_dir(&pod);
        }
    }
}
