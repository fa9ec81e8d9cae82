//! In-place resize of a running container's cgroups (the runtime half of CRI
//! `UpdateContainerResources`, as containerd does it with runc's cgroupfs manager): the memory
//! limit (v1 `memory.limit_in_bytes` with swap, or v2 `memory.max`) and, where the container
//! has a cpu cgroup (the `oci` class: runc makes one in every hierarchy), `cpu.shares`,
//! `cpu.cfs_quota_us` and `cpu.cfs_period_us` (v1) or `cpu.weight` and `cpu.max` (v2). The
//! `process` class has no cpu cgroup, so cpu is not enforced for it, before or after a resize.
//!
//! A memory limit at or below what the container uses is refused before anything is written
//! (1.35's kubelet checks the usage first; v1 would refuse the write, v2 would OOM-kill).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::{CgroupMode, relative, set_v1_limit, write_file, write_if_present};

/// What to write: the values the kubelet computes for a container (`calculateLinuxResources`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CgroupResources {
    /// Memory limit in bytes; `None`: unlimited.
    pub memory_limit: Option<u64>,
    /// `cpu.shares` (2..=262144).
    pub cpu_shares: u64,
    /// CFS quota in µs for `cpu_period`; `None`: no limit.
    pub cpu_quota: Option<i64>,
    /// CFS period in µs.
    pub cpu_period: u64,
}

/// Why a resize was not applied.
#[derive(Debug, thiserror::Error)]
pub enum ResizeError {
    /// The new memory limit is at or below the container's usage (bytes).
    #[error("memory limit ({limit}) below current usage ({usage})")]
    BelowUsage {
        /// The new limit.
        limit: u64,
        /// The usage read from the cgroup.
        usage: u64,
    },
    /// A cgroup file could not be read or written.
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// The container's memory usage in bytes (v1 `memory.usage_in_bytes`, v2 `memory.current`),
/// if its memory cgroup exists.
pub fn memory_usage(mode: &CgroupMode, parent: &str, name: &str) -> io::Result<Option<u64>> {
    let rel = relative(parent, name)?;
    let file = match mode {
        CgroupMode::Hybrid { memory_root, .. } => {
            memory_root.join(&rel).join("memory.usage_in_bytes")
        }
        CgroupMode::Unified { root, .. } => root.join(&rel).join("memory.current"),
        CgroupMode::None => return Ok(None),
    };
    match fs::read_to_string(&file) {
        Ok(text) => Ok(text.trim().parse().ok()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io::Error::new(
            e.kind(),
            format!("reading {}: {e}", file.display()),
        )),
    }
}

/// Applies `res` to the running container `<parent>/<name>`.
///
/// # Errors
///
/// [`ResizeError::BelowUsage`] (nothing written), or the failed read or write.
pub fn update(
    mode: &CgroupMode,
    parent: &str,
    name: &str,
    res: &CgroupResources,
) -> Result<(), ResizeError> {
    let rel = relative(parent, name)?;
    if let Some(limit) = res.memory_limit
        && let Some(usage) = memory_usage(mode, parent, name)?
        && usage >= limit
    {
        return Err(ResizeError::BelowUsage { limit, usage });
    }
    match mode {
        CgroupMode::None => {}
        CgroupMode::Hybrid { memory_root, .. } => {
            let memory = memory_root.join(&rel);
            if memory.is_dir() {
                set_v1_limit(&memory, res.memory_limit)?;
            }
            if let Some(cpu) = v1_cpu_dir(memory_root, &rel) {
                // Shares first; the period before a quota that needs it.
                write_file(&cpu.join("cpu.shares"), &res.cpu_shares.to_string())?;
                write_file(&cpu.join("cpu.cfs_period_us"), &res.cpu_period.to_string())?;
                let quota = res
                    .cpu_quota
                    .map_or_else(|| "-1".to_owned(), |q| q.to_string());
                write_file(&cpu.join("cpu.cfs_quota_us"), &quota)?;
            }
        }
        CgroupMode::Unified { root, memory } => {
            let dir = root.join(&rel);
            if *memory {
                let max = res
                    .memory_limit
                    .map_or_else(|| "max".to_owned(), |l| l.to_string());
                write_if_present(&dir.join("memory.max"), &max)?;
            }
            write_if_present(
                &dir.join("cpu.weight"),
                &shares_to_weight(res.cpu_shares).to_string(),
            )?;
            let quota = res
                .cpu_quota
                .map_or_else(|| "max".to_owned(), |q| q.to_string());
            write_if_present(&dir.join("cpu.max"), &format!("{quota} {}", res.cpu_period))?;
        }
    }
    Ok(())
}

/// The container's v1 cpu cgroup, next to the memory hierarchy (`/sys/fs/cgroup/cpu`), if it
/// has one.
fn v1_cpu_dir(memory_root: &Path, rel: &Path) -> Option<PathBuf> {
    let dir = memory_root.parent()?.join("cpu").join(rel);
    dir.join("cpu.shares").exists().then_some(dir)
}

/// runc's `ConvertCPUSharesToCgroupV2Value`: shares 2..=262144 onto weight 1..=10000.
fn shares_to_weight(shares: u64) -> u64 {
    if shares == 0 {
        return 0;
    }
    1 + (shares.saturating_sub(2) * 9999) / 262_142
}

#[cfg(test)]
mod tests {
    use super::shares_to_weight;

    #[test]
    fn shares_map_onto_weights_as_runc_does() {
        assert_eq!(shares_to_weight(2), 1);
        assert_eq!(shares_to_weight(1024), 39);
        assert_eq!(shares_to_weight(262_144), 10_000);
    }
}
