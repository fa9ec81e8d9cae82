//! Container runtimes for podvisor.
//!
//! [`Runtime`] is what the agent drives: create a pod sandbox, start container instances,
//! signal them, exec into them, and learn about their exits. The embedded default backend is
//! [`process::ProcessRuntime`]: containers are host processes supervised by one `podvisor shim`
//! per pod (their parent and subreaper), each in its own process group, cgroup and mount
//! namespace. Probe and hook executors ([`probe`], [`hooks`]) run on top of any `Runtime`.
//! [`oci`] holds the building blocks of the OCI backend (runtime spec, root filesystem, the
//! runc executor), not yet assembled into a `Runtime`.
//!
//! This crate makes no lifecycle decisions (when to start, restart or kill is the
//! `podvisor-lifecycle` core's job); it only does what it is told and reports what happened.

pub mod cgroup;
pub mod config;
pub mod hooks;
pub mod host_paths;
pub mod logs;
pub mod oci;
pub mod portforward;
pub mod probe;
pub mod process;
pub mod sandbox;
pub mod shim;
mod types;

pub use types::*;
