//! podvisor-agent's integration tests, linked as one test binary. Each file is a module named
//! after it; `tests/common` is their typed fake runtime.

mod common;

mod pod_worker;
mod probes_hooks;
