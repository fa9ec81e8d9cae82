//! End-to-end tests on real processes, linked as one test binary: `podvisor run` for the
//! lifecycle rules (`e2e_*`, helpers in `tests/common`), and `podvisor serve` with the real
//! kubectl and the Python client (`serve`, `exec`, `python_client`, helpers in
//! `tests/serve_common`). Every test has its own state directory and marker, so they run side
//! by side as they did one file at a time. `conformance_kubectl` (one `serve` for a hundred
//! scenarios at once) and `restart_stress` (`scripts/stress-restarts`) are binaries of their
//! own.

mod common;
mod serve_common;

mod e2e_hooks;
mod e2e_lifecycle;
mod e2e_no_leak;
mod e2e_probes;
mod e2e_sandbox;
mod exec;
mod helm;
mod kubectl_matrix;
mod oci;
mod oci_incluster;
mod oci_network;
mod oci_pull_secrets;
mod port_forward;
mod python_client;
mod restart_all;
mod scheduling;
mod serve;
mod serve_configs;
mod serve_controllers;
mod serve_disk_full;
mod serve_log_rotation;
mod serve_node;
mod serve_openapi;
mod serve_pod_security;
mod serve_projected;
mod serve_rbac;
mod serve_service_accounts;
