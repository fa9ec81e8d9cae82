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

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::bootstrap::RBAC_GROUP;
use super::rbac::role_reference_rules;
use super::rules::{compact, compact_string, covers, go_quote};
use super::{Attributes, Authorizer, UserInfo, is_master};
use crate::req::Req;
use crate::status::{ApiError, ApiResult};
use k8s_openapi::api::rbac::v1::{PolicyRule, RoleRef};

/// `ConfirmNoEscalation`: whether `user` holds every rule of `rules` in `namespace`
/// (`""`: cluster-wide), else the API server's message listing what it lacks.
pub(crate) fn confirm_no_escalation(
    authz: &Authorizer,
    user: &UserInfo,
    namespace: &str,
    rules: &[PolicyRule],
) -> Result<(), String> {
    let (owned, errors) = authz.rules_for(user, namespace);
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
    authz: &Authorizer,
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
    authz.authorize(&attrs).allowed
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
    authz: &Authorizer,
    user: &UserInfo,
    plural: &str,
    namespace: &str,
    name: &str,
    rules: &[PolicyRule],
    aggregates: bool,
) -> ApiResult<()> {
    if is_master(user) || verb_allowed(authz, user, "escalate", plural, namespace, name) {
        return Ok(());
    }
    confirm_no_escalation(authz, user, namespace, rules)
        .map_err(|m| ApiError::forbidden_in_group(RBAC_GROUP, plural, name, &m))?;
    if aggregates && confirm_no_escalation(authz, user, "", &full_authority()).is_err() {
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
    authz: &Authorizer,
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
            authz,
            user,
            "bind",
            role_resource,
            namespace,
            &role_ref.name,
        )
    {
        return Ok(());
    }
    let rules = role_reference_rules(&authz.snapshot(), role_ref, namespace)
        .map_err(|e| ApiError::forbidden_in_group(RBAC_GROUP, plural, name, &e))?;
    confirm_no_escalation(authz, user, namespace, &rules)
        .map_err(|m| ApiError::forbidden_in_group(RBAC_GROUP, plural, name, &m))
}

/// The four RBAC kinds' `Strategy::before_write` when the object is `new` (`old`: the
/// stored one on an update).
fn writer(req: &Req) -> ApiResult<&UserInfo> {
    req.user
        .as_ref()
        .ok_or_else(|| ApiError::internal("no user in the request to check RBAC escalation for"))
}

fn field<T: DeserializeOwned + Default>(obj: &Value, name: &str) -> T {
    obj.get(name)
        .filter(|v| !v.is_null())
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default()
}

fn meta<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj.pointer(&format!("/metadata/{field}"))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The escalation check of a Role or ClusterRole write (`policybased` storage): on an update
/// only when its rules or aggregation rule change (other fields grant nothing).
pub(crate) fn role_before_write(req: &Req, new: &Value, old: Option<&Value>) -> ApiResult<()> {
    let unchanged = |o: &Value| {
        o.get("rules") == new.get("rules") && o.get("aggregationRule") == new.get("aggregationRule")
    };
    if old.is_some_and(unchanged) {
        return Ok(());
    }
    let (plural, namespace) = match new.get("kind").and_then(Value::as_str) {
        Some("ClusterRole") => ("clusterroles", ""),
        _ => ("roles", meta(new, "namespace")),
    };
    let rules: Vec<PolicyRule> = field(new, "rules");
    let aggregates = new.get("aggregationRule").is_some_and(|v| !v.is_null());
    check_role(
        req.state.authorizer(),
        writer(req)?,
        plural,
        namespace,
        meta(new, "name"),
        &rules,
        aggregates,
    )
}

/// The escalation check of a RoleBinding or ClusterRoleBinding write: on an update only when
/// its subjects change (the role reference cannot).
pub(crate) fn binding_before_write(req: &Req, new: &Value, old: Option<&Value>) -> ApiResult<()> {
    let unchanged = |o: &Value| {
        o.get("subjects") == new.get("subjects") && o.get("roleRef") == new.get("roleRef")
    };
    if old.is_some_and(unchanged) {
        return Ok(());
    }
    let (plural, namespace) = match new.get("kind").and_then(Value::as_str) {
        Some("ClusterRoleBinding") => ("clusterrolebindings", ""),
        _ => ("rolebindings", meta(new, "namespace")),
    };
    let role_ref: RoleRef = field(new, "roleRef");
    check_binding(
        req.state.authorizer(),
        writer(req)?,
        plural,
        namespace,
        meta(new, "name"),
        &role_ref,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use podvisor_store::{Key, Store};
    use serde_json::json;

    fn rule(verbs: &[&str], resources: &[&str]) -> PolicyRule {
        PolicyRule {
            verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
            api_groups: Some(vec![String::new()]),
            resources: Some(resources.iter().map(|r| (*r).to_owned()).collect()),
            ..PolicyRule::default()
        }
    }

    fn role_ref(kind: &str, name: &str) -> RoleRef {
        RoleRef {
            api_group: RBAC_GROUP.to_owned(),
            kind: kind.to_owned(),
            name: name.to_owned(),
        }
    }

    /// A store with the bootstrap policy and `alice` bound to `edit` in `team`.
    fn store() -> (tempfile::TempDir, Authorizer) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("store.redb")).unwrap();
        super::super::bootstrap::ensure(&store).unwrap();
        super::super::aggregation::sync(&store).unwrap();
        store
            .create(
                &Key::new("rolebindings", "team", "alice-edit"),
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                       "metadata": {"name": "alice-edit", "namespace": "team"},
                       "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": "edit"},
                       "subjects": [{"kind": "User", "name": "alice", "apiGroup": RBAC_GROUP}]}),
            )
            .unwrap();
        (dir, Authorizer::new(store))
    }

    fn alice() -> UserInfo {
        UserInfo {
            username: "alice".into(),
            groups: vec!["system:authenticated".into()],
        }
    }

    #[test]
    fn a_role_may_grant_only_what_its_writer_holds() {
        let (_dir, authz) = store();
        let ok = check_role(
            &authz,
            &alice(),
            "roles",
            "team",
            "r",
            &[rule(&["get", "list"], &["pods"])],
            false,
        );
        assert_eq!(ok, Ok(()));
        let err = check_role(
            &authz,
            &alice(),
            "roles",
            "team",
            "r",
            &[
                rule(&["get"], &["pods", "nodes"]),
                rule(&["delete"], &["nodes"]),
            ],
            false,
        )
        .unwrap_err();
        assert_eq!(err.code, 403);
        assert_eq!(
            err.message,
            "roles.rbac.authorization.k8s.io \"r\" is forbidden: user \"alice\" \
             (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not \
             currently held:\n{APIGroups:[\"\"], Resources:[\"nodes\"], Verbs:[\"get\" \"delete\"]}"
        );
        // Elsewhere alice holds nothing but the defaults.
        assert!(
            check_role(
                &authz,
                &alice(),
                "roles",
                "other",
                "r",
                &[rule(&["get"], &["pods"])],
                false
            )
            .is_err()
        );
        // A ClusterRole is checked against cluster-wide rules, and aggregation needs everything.
        assert!(
            check_role(
                &authz,
                &alice(),
                "clusterroles",
                "",
                "c",
                &[rule(&["get"], &["pods"])],
                false
            )
            .is_err()
        );
        assert!(
            check_role(
                &authz,
                &UserInfo::admin(),
                "clusterroles",
                "",
                "c",
                &[],
                true
            )
            .is_ok()
        );
        let bob = UserInfo {
            username: "bob".into(),
            groups: vec![],
        };
        assert_eq!(
            check_role(&authz, &bob, "clusterroles", "", "c", &[], true)
                .unwrap_err()
                .message,
            "clusterroles.rbac.authorization.k8s.io \"c\" is forbidden: must have cluster-admin privileges to use the aggregationRule"
        );
    }

    #[test]
    fn escalate_and_bind_verbs_allow_what_is_not_held() {
        let (_dir, authz) = store();
        authz
            .store
            .create(
                &Key::new("roles", "team", "granter"),
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                       "metadata": {"name": "granter", "namespace": "team"},
                       "rules": [{"apiGroups": [RBAC_GROUP], "resources": ["roles"], "verbs": ["escalate"]},
                                 {"apiGroups": [RBAC_GROUP], "resources": ["clusterroles"], "verbs": ["bind"], "resourceNames": ["admin"]}]}),
            )
            .unwrap();
        authz
            .store
            .create(
                &Key::new("rolebindings", "team", "alice-granter"),
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                       "metadata": {"name": "alice-granter", "namespace": "team"},
                       "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": "granter"},
                       "subjects": [{"kind": "User", "name": "alice", "apiGroup": RBAC_GROUP}]}),
            )
            .unwrap();
        let nodes = [rule(&["get"], &["nodes"])];
        assert!(check_role(&authz, &alice(), "roles", "team", "r", &nodes, false).is_ok());
        assert!(
            check_binding(
                &authz,
                &alice(),
                "rolebindings",
                "team",
                "b",
                &role_ref("ClusterRole", "admin")
            )
            .is_ok()
        );
    }

    #[test]
    fn a_binding_needs_its_roles_permissions() {
        let (_dir, authz) = store();
        let bind = |name: &str| {
            check_binding(
                &authz,
                &alice(),
                "rolebindings",
                "team",
                "b",
                &role_ref("ClusterRole", name),
            )
        };
        // view's rules are all edit's; admin's are more.
        assert_eq!(bind("view"), Ok(()));
        let err = bind("admin").unwrap_err();
        assert!(
            err.message.starts_with(
                "rolebindings.rbac.authorization.k8s.io \"b\" is forbidden: user \"alice\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n"
            ) && err.message.contains("Resources:[\"rolebindings\"]"),
            "{}",
            err.message
        );
        assert_eq!(
            bind("nope").unwrap_err().message,
            "rolebindings.rbac.authorization.k8s.io \"b\" is forbidden: clusterrole.rbac.authorization.k8s.io \"nope\" not found"
        );
        assert!(
            check_binding(
                &authz,
                &UserInfo::admin(),
                "clusterrolebindings",
                "",
                "b",
                &role_ref("ClusterRole", "cluster-admin")
            )
            .is_ok()
        );
    }
}
