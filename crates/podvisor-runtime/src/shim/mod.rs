//! The per-pod shim: `podvisor shim`, the subreaper and parent of a pod's container processes.
//!
//! - [`server`]: the shim process (no async runtime: std threads).
//! - [`protocol`]: JSON lines exchanged with the agent.
//! - [`client`]: the agent's tokio client.
//! - `spare`: a shim started ahead of its pod.
//!
//! The shim writes container output to CRI log files, journals every exit (fsync) before it
//! reports it, and outlives the agent, which re-adopts it on restart.

mod attach;
mod child;
pub mod client;
mod exec;
mod exec_stream;
mod pid_holder;
pub mod protocol;
mod resident;
pub(crate) mod safe_path;
pub mod server;
pub(crate) mod spare;
mod supervisor;
