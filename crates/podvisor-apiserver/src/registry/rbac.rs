//! `rbac.authorization.k8s.io/v1`: Roles, ClusterRoles, RoleBindings, ClusterRoleBindings
//! (`pkg/registry/rbac/*`). Validation and the bindings' defaulting are
//! `podvisor_api::validation`'s (`pkg/apis/rbac/validation`); a binding's `roleRef` cannot
//! change. Stored as the API returns them.
//!
//! Escalation prevention (a user may only grant what it holds, `pkg/registry/rbac/*/policybased`)
//! is the authorizer's: it plugs in as these strategies' [`Strategy::before_write`].

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use podvisor_api::ValidationErrors;
use podvisor_api::validation::{
    default_binding, validate_cluster_role, validate_cluster_role_binding,
    validate_cluster_role_binding_update, validate_cluster_role_update, validate_role,
    validate_role_binding, validate_role_binding_update, validate_role_update,
};

use super::{Rules, Strategy};
use crate::authz::escalation;
use crate::db::{CLUSTERROLEBINDINGS, CLUSTERROLES, ROLEBINDINGS, ROLES};

pub(super) static ROLE: Strategy = Strategy {
    before_write: Some(escalation::role_before_write),
    ..Strategy::typed::<Role>(ROLES, "role")
};

pub(super) static CLUSTERROLE: Strategy = Strategy {
    before_write: Some(escalation::role_before_write),
    ..Strategy::typed::<ClusterRole>(CLUSTERROLES, "clusterrole")
};

pub(super) static ROLEBINDING: Strategy = Strategy {
    before_write: Some(escalation::binding_before_write),
    ..Strategy::typed::<RoleBinding>(ROLEBINDINGS, "rolebinding")
};

pub(super) static CLUSTERROLEBINDING: Strategy = Strategy {
    before_write: Some(escalation::binding_before_write),
    ..Strategy::typed::<ClusterRoleBinding>(CLUSTERROLEBINDINGS, "clusterrolebinding")
};

impl Rules for Role {
    fn validate(&self) -> Result<(), ValidationErrors> {
        validate_role(self)
    }
    fn validate_update(&self, old: &Self) -> Result<(), ValidationErrors> {
        validate_role_update(self, old)
    }
}

impl Rules for ClusterRole {
    fn validate(&self) -> Result<(), ValidationErrors> {
        validate_cluster_role(self)
    }
    fn validate_update(&self, old: &Self) -> Result<(), ValidationErrors> {
        validate_cluster_role_update(self, old)
    }
}

impl Rules for RoleBinding {
    fn prepare(&mut self) {
        default_binding(&mut self.role_ref, self.subjects.as_mut());
    }
    fn validate(&self) -> Result<(), ValidationErrors> {
        validate_role_binding(self)
    }
    fn validate_update(&self, old: &Self) -> Result<(), ValidationErrors> {
        validate_role_binding_update(self, old)
    }
}

impl Rules for ClusterRoleBinding {
    fn prepare(&mut self) {
        default_binding(&mut self.role_ref, self.subjects.as_mut());
    }
    fn validate(&self) -> Result<(), ValidationErrors> {
        validate_cluster_role_binding(self)
    }
    fn validate_update(&self, old: &Self) -> Result<(), ValidationErrors> {
        validate_cluster_role_binding_update(self, old)
    }
}
