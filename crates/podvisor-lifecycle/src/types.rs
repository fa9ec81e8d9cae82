//! Small shared vocabulary types.

use std::fmt;

/// A pod phase as the kubelet computes it (P1–P10). `Unknown` is never produced (P10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Accepted, but not every container has started yet.
    Pending,
    /// Bound and at least one container is running or restarting.
    Running,
    /// Every regular container terminated with exit 0 and will not be restarted.
    Succeeded,
    /// Every regular container terminated and at least one failed.
    Failed,
}

impl Phase {
    /// The API string (`status.phase`).
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Pending => "Pending",
            Phase::Running => "Running",
            Phase::Succeeded => "Succeeded",
            Phase::Failed => "Failed",
        }
    }

    /// Parses an API phase string; `Unknown` and anything else map to `None`.
    pub fn parse(s: &str) -> Option<Phase> {
        Some(match s {
            "Pending" => Phase::Pending,
            "Running" => Phase::Running,
            "Succeeded" => Phase::Succeeded,
            "Failed" => Phase::Failed,
            _ => return None,
        })
    }

    /// Succeeded or Failed: a pod never leaves these (P11).
    pub fn is_terminal(self) -> bool {
        matches!(self, Phase::Succeeded | Phase::Failed)
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
