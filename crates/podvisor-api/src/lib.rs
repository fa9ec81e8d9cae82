//! podvisor-api
