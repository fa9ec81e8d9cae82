//! Nodes (core `v1`, cluster-scoped, with `nodes/status`) and `coordination.k8s.io/v1` Leases
//! (`pkg/registry/core/node`, `pkg/registry/coordination/lease`): a write of a Node keeps the
//! stored status, a write of `nodes/status` only the status; a delete answers with the
//! object. The node agent registers its Node and renews its Lease through the store; these
//! are what kubectl (`cordon`, `label`, `taint`) and other clients write.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use podvisor_api::ValidationErrors;
use podvisor_api::validation::{
    validate_lease, validate_lease_update, validate_node, validate_node_update,
};

use super::{Rules, Strategy};
use crate::db::{LEASES, NODES};

pub(super) static NODE: Strategy = Strategy {
    short_names: &["no"],
    status: true,
    delete_returns_object: true,
    ..Strategy::typed::<Node>(NODES, "node")
};

pub(super) static LEASE: Strategy = Strategy {
    delete_returns_object: true,
    ..Strategy::typed::<Lease>(LEASES, "lease")
};

impl Rules for Node {
    fn validate(&self) -> Result<(), ValidationErrors> {
        validate_node(self)
    }
    fn validate_update(&self, old: &Self) -> Result<(), ValidationErrors> {
        validate_node_update(self, old)
    }
}

impl Rules for Lease {
    fn validate(&self) -> Result<(), ValidationErrors> {
        validate_lease(self)
    }
    fn validate_update(&self, old: &Self) -> Result<(), ValidationErrors> {
        validate_lease_update(self, old)
    }
}
