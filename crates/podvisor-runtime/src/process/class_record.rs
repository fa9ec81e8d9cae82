//! A pod's runtime class, kept with its sandbox (`<pod dir>/runtime-class`): the default class
//! (`--runtime`) applies to new pods only. A pod keeps the class it started with for its
//! life, as the kubelet keeps a pod's RuntimeClass: `serve` restarted with another
//! `--runtime` re-adopts each running pod as what it is (a host-process pod stays one, on
//! 127.0.0.1; an `oci` pod keeps its sandbox).

use super::RuntimeClass;
use crate::shim::protocol::layout;
use std::path::{Path, PathBuf};

/// The record's file in the pod's directory.
const FILE: &str = "runtime-class";

fn file(pod_dir: &Path) -> PathBuf {
    pod_dir.join(FILE)
}

/// The class the pod's sandbox was made as: its record, else, for a sandbox made before
/// records were kept (it has a shim directory), `oci` when it has a network record
/// (`network.json`, which only the `oci` class writes) and `process` when not. `None`: the
/// pod has no sandbox here yet.
pub(super) fn recorded(pod_dir: &Path) -> Option<RuntimeClass> {
    if let Ok(text) = std::fs::read_to_string(file(pod_dir))
        && let Some(class) = RuntimeClass::from_name(text.trim())
    {
        return Some(class);
    }
    if !layout::shim_dir(pod_dir).is_dir() {
        return None;
    }
    Some(if super::oci_class::network_file(pod_dir).is_file() {
        RuntimeClass::Oci
    } else {
        RuntimeClass::Process
    })
}

/// Records `class` as the pod's (its directory is made if missing).
///
/// # Errors
/// The directory or the file cannot be written.
pub(super) fn record(pod_dir: &Path, class: RuntimeClass) -> std::io::Result<()> {
    std::fs::create_dir_all(pod_dir)?;
    std::fs::write(file(pod_dir), class.name())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_class_wins_and_older_sandboxes_are_told_by_their_network_record() {
        let dir = std::env::temp_dir().join(format!("pv-class-record-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let pod = dir.join("uid-1");
        // No sandbox yet: nothing recorded.
        assert_eq!(recorded(&pod), None);
        record(&pod, RuntimeClass::Process).unwrap();
        assert_eq!(recorded(&pod), Some(RuntimeClass::Process));
        record(&pod, RuntimeClass::Oci).unwrap();
        assert_eq!(recorded(&pod), Some(RuntimeClass::Oci));

        // Sandboxes of agents that kept no record.
        let old = dir.join("uid-2");
        std::fs::create_dir_all(layout::shim_dir(&old)).unwrap();
        assert_eq!(recorded(&old), Some(RuntimeClass::Process));
        std::fs::write(super::super::oci_class::network_file(&old), "{}").unwrap();
        assert_eq!(recorded(&old), Some(RuntimeClass::Oci));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
