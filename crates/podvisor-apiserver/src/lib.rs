//! podvisor-apiserver (being built)
