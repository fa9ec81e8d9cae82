//! Kubernetes resource quantities: the one parser lives in `podvisor-api`.

pub use podvisor_api::quantity::Quantity;
