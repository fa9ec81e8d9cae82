//! podvisor-agent (in progress)
