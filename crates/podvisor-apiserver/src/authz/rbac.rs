//! The RBAC rule resolver over the store (`pkg/registry/rbac/validation/rule.go`'s
//! `DefaultRuleResolver`): the rules a user holds in a namespace are those of every
//! ClusterRoleBinding naming the user, then of every RoleBinding of the namespace naming it,
//! each through the Role or ClusterRole it refers to.

use std::fmt;

use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use podvisor_store::Store;
use serde::de::DeserializeOwned;

use super::UserInfo;
use super::rules::{applies_to_user, describe_subject, go_quote};
use crate::db::{self, CLUSTERROLEBINDINGS, CLUSTERROLES, ROLEBINDINGS, ROLES, Resource};

/// The binding a rule came from, as an allowed decision names it.
pub(crate) struct Source<'a> {
    binding_kind: &'static str,
    binding_name: String,
    role_ref: &'a RoleRef,
    subject: &'a Subject,
    namespace: &'a str,
}

impl fmt::Display for Source<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} of {} {} to {}",
            self.binding_kind,
            go_quote(&self.binding_name),
            self.role_ref.kind,
            go_quote(&self.role_ref.name),
            describe_subject(self.subject, self.namespace)
        )
    }
}

fn typed<T: DeserializeOwned>(res: Resource, value: serde_json::Value) -> Result<T, String> {
    serde_json::from_value(value).map_err(|e| format!("decoding a stored {}: {e}", res.kind))
}

fn list<T: DeserializeOwned>(
    store: &Store,
    res: Resource,
    ns: Option<&str>,
) -> Result<Vec<T>, String> {
    let (items, _) = db::list(store, res, ns).map_err(|e| e.message)?;
    items.into_iter().map(|v| typed(res, v)).collect()
}

/// `GetRoleReferenceRules`: the rules of the role a binding in `namespace` refers to.
pub(crate) fn role_reference_rules(
    store: &Store,
    role_ref: &RoleRef,
    namespace: &str,
) -> Result<Vec<PolicyRule>, String> {
    let (res, ns, qualified) = match role_ref.kind.as_str() {
        "Role" => (ROLES, namespace, "role.rbac.authorization.k8s.io"),
        "ClusterRole" => (CLUSTERROLES, "", "clusterrole.rbac.authorization.k8s.io"),
        other => {
            return Err(format!(
                "unsupported role reference kind: {}",
                go_quote(other)
            ));
        }
    };
    let found = db::try_get(store, res, ns, &role_ref.name).map_err(|e| e.message)?;
    let Some(value) = found else {
        return Err(format!(
            "{qualified} {} not found",
            go_quote(&role_ref.name)
        ));
    };
    let rules = if res == ROLES {
        typed::<Role>(res, value)?.rules
    } else {
        typed::<ClusterRole>(res, value)?.rules
    };
    Ok(rules.unwrap_or_default())
}

/// `VisitRulesFor`: calls `visit` with every rule `user` holds in `namespace` (`""`: the
/// cluster-scoped bindings only) and where it came from, until `visit` returns false;
/// what could not be read goes to `errors`.
pub(crate) fn visit_rules_for(
    store: &Store,
    user: &UserInfo,
    namespace: &str,
    errors: &mut Vec<String>,
    mut visit: impl FnMut(&Source<'_>, &PolicyRule) -> bool,
) {
    match list::<ClusterRoleBinding>(store, CLUSTERROLEBINDINGS, None) {
        Err(e) => errors.push(e),
        Ok(bindings) => {
            for binding in &bindings {
                let subjects = binding.subjects.as_deref().unwrap_or_default();
                let Some(subject) = subjects.iter().find(|s| applies_to_user(user, s, "")) else {
                    continue;
                };
                let rules = match role_reference_rules(store, &binding.role_ref, "") {
                    Ok(rules) => rules,
                    Err(e) => {
                        errors.push(e);
                        continue;
                    }
                };
                let source = Source {
                    binding_kind: "ClusterRoleBinding",
                    binding_name: binding.metadata.name.clone().unwrap_or_default(),
                    role_ref: &binding.role_ref,
                    subject,
                    namespace: "",
                };
                for rule in &rules {
                    if !visit(&source, rule) {
                        return;
                    }
                }
            }
        }
    }
    if namespace.is_empty() {
        return;
    }
    match list::<RoleBinding>(store, ROLEBINDINGS, Some(namespace)) {
        Err(e) => errors.push(e),
        Ok(bindings) => {
            for binding in &bindings {
                let subjects = binding.subjects.as_deref().unwrap_or_default();
                let Some(subject) = subjects
                    .iter()
                    .find(|s| applies_to_user(user, s, namespace))
                else {
                    continue;
                };
                let rules = match role_reference_rules(store, &binding.role_ref, namespace) {
                    Ok(rules) => rules,
                    Err(e) => {
                        errors.push(e);
                        continue;
                    }
                };
                let source = Source {
                    binding_kind: "RoleBinding",
                    binding_name: format!(
                        "{}/{namespace}",
                        binding.metadata.name.as_deref().unwrap_or_default()
                    ),
                    role_ref: &binding.role_ref,
                    subject,
                    namespace,
                };
                for rule in &rules {
                    if !visit(&source, rule) {
                        return;
                    }
                }
            }
        }
    }
}

/// `RulesFor`: every rule `user` holds in `namespace`, and what could not be read.
pub(crate) fn rules_for(
    store: &Store,
    user: &UserInfo,
    namespace: &str,
) -> (Vec<PolicyRule>, Vec<String>) {
    let mut rules = Vec::new();
    let mut errors = Vec::new();
    visit_rules_for(store, user, namespace, &mut errors, |_, rule| {
        rules.push(rule.clone());
        true
    });
    (rules, errors)
}
