//! The sans-IO kubelet pod lifecycle core.
//!
//! A [`PodMachine`] owns one pod's lifecycle: which containers to start, when probes are due,
//! when to restart and with which back-off, how to terminate, and what status and events the
//! kubelet would publish. It never performs IO and never reads the clock: every input carries
//! `now`, every effect is returned as an [`Action`], and [`PodMachine::poll_timeout`] tells the
//! driver when to call back.
//!
//! This crate does not run processes, probes or hooks, and does not persist anything: the agent
//! (or `podvisor simulate`'s fake runtime) does, and reports results back as inputs.

pub mod duration;
pub mod event_object;
pub mod kubectl;
pub mod status;
mod types;

pub use types::Phase;
pub mod action;
pub mod backoff;
pub mod config;
mod machine;
pub mod probe;
mod time;

pub use action::{
    Action, ContainerKind, Event, EventType, ExitStatus, HookKind, ImagePull, InstanceId,
    KillReason, ProbeKind, ProbeOutcome, StartFailure,
};
pub use config::{BackoffConfig, MachineConfig, NodeResources};
pub use machine::{
    POD_RESIZE_IN_PROGRESS, POD_RESIZE_PENDING, PastInstance, PodMachine, RecoveredInstance,
};
pub use status::phase::is_sidecar;
pub mod sim;
pub mod timeline;
