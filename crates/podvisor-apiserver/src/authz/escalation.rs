//! Escalation prevention (`pkg/registry/rbac/escalation_check.go` and
//! `validation.ConfirmNoEscalation`): nobody grants permissions they do not hold.
//!
//! - Creating or changing a Role or ClusterRole is allowed to `system:masters`, to whoever
//!   may `escalate` it, and otherwise only if the writer holds every rule it grants (a
//!   ClusterRole's `aggregationRule`, which can gather anything, needs `*` on everything).
//! - Creating or changing a RoleBinding or ClusterRoleBinding is allowed to
//!   `system:masters`, to whoever may `bind` the role it refers to, and otherwise only if the
//!   writer holds every rule of that role (in the binding's namespace).
//!
//! The registry's strategies for the four RBAC kinds call [`check_role`] and
//! [`check_binding`] before they store an object.

use k8s_openapi::api::rbac::v1::{PolicyRule, RoleRef};
use podvisor_store::Store;

use super::bootstrap::RBAC_GROUP;
use super::rbac::{role_reference_rules, rules_for};
use super::rules::{compact, compact_string, covers, go_quote};
use super::{Attributes, UserInfo, authorize, is_master};
use crate::status::{ApiError, ApiResult};

/// `ConfirmNoEscalation`: whether `user` holds every rule of `rules` in `namespace`
/// (`""`: cluster-wide), else the API server's message listing what it lacks.
pub(crate) fn confirm_no_escalation(
    store: &Store,
    user: &UserInfo,
    namespace: &str,
    rules: &[PolicyRule],
) -> Result<(), String> {
    let (owned, errors) = rules_for(store, user, namespace);
    let (ok, missing) = covers(&owned, rules);
    if ok {
        return Ok(());
    }
    let mut described: Vec<String> = compact(missing).iter().map(compact_string).collect();
    described.sort();
    described.dedup();
    let groups: Vec<String> = user.groups.iter().map(|g| go_quote(g)).collect();
    let mut message = format!(
        "user {} (groups=[{}]) is attempting to grant RBAC permissions not currently held:\n{}",
        go_quote(&user.username),
        groups.join(" "),
        described.join("\n")
    );
    if !errors.is_empty() {
        message.push_str(&format!("; resolution errors: [{}]", errors.join(" ")));
    }
    Err(message)
}

/// Whether `user` may use `verb` (`escalate`, `bind`) on the role `name` of `resource`
/// (`roles`, `clusterroles`) in `namespace`.
fn verb_allowed(
    store: &Store,
    user: &UserInfo,
    verb: &str,
    resource: &str,
    namespace: &str,
    name: &str,
) -> bool {
    let attrs = Attributes::resource(
        user.clone(),
        verb,
        RBAC_GROUP,
        resource,
        "",
        namespace,
        name,
    );
    authorize(store, &attrs).allowed
}

/// Everything: what an `aggregationRule` needs of its writer.
fn full_authority() -> Vec<PolicyRule> {
    let all = || Some(vec!["*".to_owned()]);
    vec![
        PolicyRule {
            verbs: vec!["*".to_owned()],
            api_groups: all(),
            resources: all(),
            ..PolicyRule::default()
        },
        PolicyRule {
            verbs: vec!["*".to_owned()],
            non_resource_urls: all(),
            ..PolicyRule::default()
        },
    ]
}

/// The check of a Role (`plural` `roles`, in `namespace`) or ClusterRole (`clusterroles`,
/// `namespace` `""`) named `name` that `user` writes with `rules` (and an
/// `aggregationRule` when `aggregates`).
///
/// # Errors
///
/// 403 `roles.rbac.authorization.k8s.io "r" is forbidden: user "u" (groups=[...]) is
/// attempting to grant RBAC permissions not currently held: ...`.
pub(crate) fn check_role(
    store: &Store,
    user: &UserInfo,
    plural: &str,
    namespace: &str,
    name: &str,
    rules: &[PolicyRule],
    aggregates: bool,
) -> ApiResult<()> {
    if is_master(user) || verb_allowed(store, user, "escalate", plural, namespace, name) {
        return Ok(());
    }
    confirm_no_escalation(store, user, namespace, rules)
        .map_err(|m| ApiError::forbidden_in_group(RBAC_GROUP, plural, name, &m))?;
    if aggregates && confirm_no_escalation(store, user, "", &full_authority()).is_err() {
        return Err(ApiError::forbidden_in_group(
            RBAC_GROUP,
            plural,
            name,
            "must have cluster-admin privileges to use the aggregationRule",
        ));
    }
    Ok(())
}

/// The check of a RoleBinding (`plural` `rolebindings`, in `namespace`) or
/// ClusterRoleBinding (`clusterrolebindings`, `namespace` `""`) named `name` that `user`
/// writes with `role_ref`.
///
/// # Errors
///
/// 403 worded as [`check_role`]'s, or naming the role that could not be read.
pub(crate) fn check_binding(
    store: &Store,
    user: &UserInfo,
    plural: &str,
    namespace: &str,
    name: &str,
    role_ref: &RoleRef,
) -> ApiResult<()> {
    if is_master(user) {
        return Ok(());
    }
    let role_resource = match role_ref.kind.as_str() {
        "Role" => "roles",
        _ => "clusterroles",
    };
    // `bind` on a ClusterRole is asked in the binding's namespace for a RoleBinding.
    if role_ref.api_group == RBAC_GROUP
        && verb_allowed(
            store,
            user,
            "bind",
            role_resource,
            namespace,
            &role_ref.name,
        )
    {
        return Ok(());
    }
    let rules = role_reference_rules(store, role_ref, namespace)
        .map_err(|e| ApiError::forbidden_in_group(RBAC_GROUP, plural, name, &e))?;
    confirm_no_escalation(store, user, namespace, &rules)
        .map_err(|m| ApiError::forbidden_in_group(RBAC_GROUP, plural, name, &m))
}
