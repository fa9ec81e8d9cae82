//! The per-pod shim (being built).

pub mod server;
