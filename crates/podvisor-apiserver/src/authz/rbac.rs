//! The RBAC rule resolver over the store (`pkg/registry/rbac/validation/rule.go`'s
//! `DefaultRuleResolver`): the rules a user holds in a namespace are those of every
//! ClusterRoleBinding naming the user, then of every RoleBinding of the namespace naming it,
//! each through the Role or ClusterRole it refers to.

use std::fmt;

use k8s_openapi::api::rbac::v1::{PolicyRule, RoleRef, Subject};

use super::UserInfo;
use super::cache::Snapshot;
use super::rules::{applies_to_user, describe_subject, go_quote};

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

/// `GetRoleReferenceRules`: the rules of the role a binding in `namespace` refers to.
pub(crate) fn role_reference_rules(
    snapshot: &Snapshot,
    role_ref: &RoleRef,
    namespace: &str,
) -> Result<Vec<PolicyRule>, String> {
    let rules = match role_ref.kind.as_str() {
        "Role" => snapshot
            .roles
            .get(&(namespace.to_owned(), role_ref.name.clone()))
            .map(|r| &r.rules)
            .ok_or_else(|| {
                format!(
                    "role.rbac.authorization.k8s.io {} not found",
                    go_quote(&role_ref.name)
                )
            })?,
        "ClusterRole" => snapshot
            .cluster_roles
            .get(&role_ref.name)
            .map(|r| &r.rules)
            .ok_or_else(|| {
                format!(
                    "clusterrole.rbac.authorization.k8s.io {} not found",
                    go_quote(&role_ref.name)
                )
            })?,
        other => {
            return Err(format!(
                "unsupported role reference kind: {}",
                go_quote(other)
            ));
        }
    };
    Ok(rules.clone().unwrap_or_default())
}

/// `VisitRulesFor`: calls `visit` with every rule `user` holds in `namespace` (`""`: the
/// cluster-scoped bindings only) and where it came from, until `visit` returns false;
/// what could not be read goes to `errors`.
pub(crate) fn visit_rules_for(
    snapshot: &Snapshot,
    user: &UserInfo,
    namespace: &str,
    errors: &mut Vec<String>,
    mut visit: impl FnMut(&Source<'_>, &PolicyRule) -> bool,
) {
    errors.extend(snapshot.errors.iter().cloned());
    {
        {
            for binding in &snapshot.cluster_role_bindings {
                let subjects = binding.subjects.as_deref().unwrap_or_default();
                let Some(subject) = subjects.iter().find(|s| applies_to_user(user, s, "")) else {
                    continue;
                };
                let rules = match role_reference_rules(snapshot, &binding.role_ref, "") {
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
    if let Some(bindings) = snapshot.role_bindings.get(namespace) {
        {
            for binding in bindings {
                let subjects = binding.subjects.as_deref().unwrap_or_default();
                let Some(subject) = subjects
                    .iter()
                    .find(|s| applies_to_user(user, s, namespace))
                else {
                    continue;
                };
                let rules = match role_reference_rules(snapshot, &binding.role_ref, namespace) {
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
    snapshot: &Snapshot,
    user: &UserInfo,
    namespace: &str,
) -> (Vec<PolicyRule>, Vec<String>) {
    let mut rules = Vec::new();
    let mut errors = Vec::new();
    visit_rules_for(snapshot, user, namespace, &mut errors, |_, rule| {
        rules.push(rule.clone());
        true
    });
    (rules, errors)
}
