//! A pod's use of the node's filesystem for the eviction manager (what cAdvisor's and CRI's
//! stats give the kubelet): the bytes allocated under each container's log directory and
//! under the pod's directory (its volumes, `/etc/hosts`, the shim's files).
//!
//! The walk never follows a symbolic link and stays on the filesystem it starts on: the
//! directories are written by containers, and a mount inside (a tmpfs volume) uses no space
//! of the node's filesystem.

use crate::PodDiskUsage;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The usage of a pod whose logs are under `logs` (`<container>/<n>.log`) and whose files
/// are under `pod_dir`; `None` when neither exists.
pub(super) fn pod_disk_usage(logs: Option<&Path>, pod_dir: &Path) -> Option<PodDiskUsage> {
    let mut usage = PodDiskUsage::default();
    let mut found = false;
    if let Some(logs) = logs
        && let Ok(entries) = std::fs::read_dir(logs)
    {
        found = true;
        for entry in entries.flatten() {
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            usage.containers.insert(name, allocated(&entry.path()));
        }
    }
    if pod_dir.is_dir() {
        found = true;
        usage.volumes = allocated(pod_dir);
    }
    found.then_some(usage)
}

/// Bytes allocated to `root` and everything under it on `root`'s filesystem (`du -sx`),
/// without following symbolic links; what cannot be read counts as nothing.
fn allocated(root: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(root) else {
        return 0;
    };
    let device = meta.dev();
    let mut total = meta.blocks() * 512;
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            // `DirEntry::metadata` does not follow a symbolic link.
            let Ok(meta) = entry.metadata() else {
                continue;
            };
            if meta.dev() != device {
                continue;
            }
            total += meta.blocks() * 512;
            if meta.is_dir() {
                dirs.push(entry.path());
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_counts_each_containers_logs_and_the_pod_directory_without_following_links() {
        let root = std::env::temp_dir().join(format!("podvisor-du-{}", std::process::id()));
        let logs = root.join("logs");
        let pod = root.join("pod");
        std::fs::create_dir_all(logs.join("app")).unwrap();
        std::fs::create_dir_all(pod.join("volumes")).unwrap();
        std::fs::write(logs.join("app").join("0.log"), vec![b'x'; 64 << 10]).unwrap();
        std::fs::write(pod.join("volumes").join("data"), vec![b'y'; 32 << 10]).unwrap();
        // A link to something big outside is not followed.
        std::os::unix::fs::symlink("/usr", pod.join("volumes").join("link")).unwrap();
        let usage = pod_disk_usage(Some(&logs), &pod).unwrap();
        let app = usage.containers["app"];
        assert!((64 << 10..(64 << 10) + (64 << 10)).contains(&app), "{app}");
        assert!(
            (32 << 10..(32 << 10) + (64 << 10)).contains(&usage.volumes),
            "{}",
            usage.volumes
        );
        assert_eq!(pod_disk_usage(None, &root.join("none")), None);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
