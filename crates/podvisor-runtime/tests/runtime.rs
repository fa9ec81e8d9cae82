//! podvisor-runtime's tests that need no shim, linked as one test binary: container config,
//! hooks and probes through fake runtimes, CRI logs, security contexts, cgroups. The tests
//! with a real shim are `process_runtime` and `exec_stream`, each a binary of its own: the
//! shim reaper takes re-parented children of another session (the cgroup tests' children
//! would be among them), and `exec_stream` counts this process's descriptors.

mod cgroup;
mod config;
mod hooks;
mod host_exec;
mod log_rotation;
mod logs;
mod probes;
mod security_context;
