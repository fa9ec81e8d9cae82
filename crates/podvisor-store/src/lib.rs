//! podvisor-store (being built)
