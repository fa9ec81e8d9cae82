//! The bootstrap policy (`bootstrappolicy.ClusterRoles`/`ClusterRoleBindings`, kept as data in
//! `bootstrap_policy.yaml`) and its reconciliation into the store when `serve` starts, as the
//! API server's `ensureRBACPolicy` post-start hook does (`reconciliation.ReconcileRoles`):
//! a missing role or binding is created; an existing one whose
//! `rbac.authorization.kubernetes.io/autoupdate` annotation is not `"false"` gets the
//! labels, annotations, aggregation selectors, rules (each missing permission, one verb and
//! resource at a time, as upstream appends them) and subjects it lacks; a binding whose
//! `roleRef` differs is recreated. Nothing a user added is taken away.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use k8s_openapi::api::rbac::v1::{
    AggregationRule, ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use podvisor_store::Store;
use serde::Deserialize;
use serde_json::Value;

use super::rules::covers;
use crate::db::{self, CLUSTERROLEBINDINGS, CLUSTERROLES};
use crate::request::{now, time_text};

/// The annotation that lets an administrator keep reconciliation away from a default object.
pub(crate) const AUTOUPDATE: &str = "rbac.authorization.kubernetes.io/autoupdate";
/// The label every default object carries.
const BOOTSTRAPPING: (&str, &str) = ("kubernetes.io/bootstrapping", "rbac-defaults");
/// The API group of roles, the `apiGroup` of role references and user and group subjects.
pub(crate) const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PolicyData {
    cluster_roles: Vec<RoleData>,
    cluster_role_bindings: Vec<BindingData>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RoleData {
    name: String,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    rules: Vec<PolicyRule>,
    #[serde(default)]
    aggregate_from: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct BindingData {
    name: String,
    #[serde(default)]
    groups: Vec<String>,
    #[serde(default)]
    users: Vec<String>,
}

fn metadata(name: &str, labels: &BTreeMap<String, String>) -> ObjectMeta {
    let mut labels = labels.clone();
    labels.insert(BOOTSTRAPPING.0.to_owned(), BOOTSTRAPPING.1.to_owned());
    ObjectMeta {
        name: Some(name.to_owned()),
        labels: Some(labels),
        annotations: Some(BTreeMap::from([(AUTOUPDATE.to_owned(), "true".to_owned())])),
        ..ObjectMeta::default()
    }
}

/// The default ClusterRoles and ClusterRoleBindings.
pub(crate) struct Policy {
    /// The roles, in the data's order.
    pub roles: Vec<ClusterRole>,
    /// The bindings, each to the ClusterRole of its name.
    pub bindings: Vec<ClusterRoleBinding>,
}

fn load() -> Policy {
    let data: PolicyData = serde_saphyr::from_str(include_str!("bootstrap_policy.yaml"))
        .expect("bootstrap_policy.yaml is valid (checked by its unit test)");
    let roles = data
        .cluster_roles
        .into_iter()
        .map(|r| ClusterRole {
            metadata: metadata(&r.name, &r.labels),
            rules: (!r.rules.is_empty() || r.aggregate_from.is_empty()).then_some(r.rules),
            aggregation_rule: (!r.aggregate_from.is_empty()).then(|| AggregationRule {
                cluster_role_selectors: Some(
                    r.aggregate_from
                        .iter()
                        .map(|key| LabelSelector {
                            match_labels: Some(BTreeMap::from([(key.clone(), "true".to_owned())])),
                            ..LabelSelector::default()
                        })
                        .collect(),
                ),
            }),
        })
        .collect();
    let bindings = data
        .cluster_role_bindings
        .into_iter()
        .map(|b| {
            let subject = |kind: &str, name: &String| Subject {
                api_group: Some(RBAC_GROUP.to_owned()),
                kind: kind.to_owned(),
                name: name.clone(),
                namespace: None,
            };
            let subjects: Vec<Subject> = b
                .groups
                .iter()
                .map(|g| subject("Group", g))
                .chain(b.users.iter().map(|u| subject("User", u)))
                .collect();
            ClusterRoleBinding {
                metadata: metadata(&b.name, &BTreeMap::new()),
                role_ref: RoleRef {
                    api_group: RBAC_GROUP.to_owned(),
                    kind: "ClusterRole".to_owned(),
                    name: b.name.clone(),
                },
                subjects: (!subjects.is_empty()).then_some(subjects),
            }
        })
        .collect();
    Policy { roles, bindings }
}

/// The bootstrap policy, read once.
pub(crate) fn policy() -> &'static Policy {
    static POLICY: LazyLock<Policy> = LazyLock::new(load);
    &POLICY
}

fn auto_updates(meta: &ObjectMeta) -> bool {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(AUTOUPDATE))
        .is_none_or(|v| v != "false")
}

/// Adds the labels and annotations of `expected` that `existing` lacks; whether any was.
fn merge_metadata(existing: &mut ObjectMeta, expected: &ObjectMeta) -> bool {
    let mut changed = false;
    for (have, want) in [
        (&mut existing.labels, &expected.labels),
        (&mut existing.annotations, &expected.annotations),
    ] {
        for (k, v) in want.iter().flatten() {
            let map = have.get_or_insert_with(BTreeMap::new);
            if !map.contains_key(k) {
                map.insert(k.clone(), v.clone());
                changed = true;
            }
        }
    }
    changed
}

/// `computeReconciledRole`: `existing` with what `expected` has and it lacks; `None` when
/// nothing is missing.
pub(crate) fn reconcile_role(
    existing: &ClusterRole,
    expected: &ClusterRole,
) -> Option<ClusterRole> {
    let mut role = existing.clone();
    let mut changed = merge_metadata(&mut role.metadata, &expected.metadata);
    if let Some(want) = &expected.aggregation_rule {
        let have = role
            .aggregation_rule
            .get_or_insert_with(AggregationRule::default);
        let selectors = have.cluster_role_selectors.get_or_insert_with(Vec::new);
        for s in want.cluster_role_selectors.iter().flatten() {
            if !selectors.contains(s) {
                selectors.push(s.clone());
                changed = true;
            }
        }
    }
    let have_rules = role.rules.clone().unwrap_or_default();
    let (_, missing) = covers(&have_rules, expected.rules.as_deref().unwrap_or_default());
    if !missing.is_empty() {
        role.rules = Some(have_rules.into_iter().chain(missing).collect());
        changed = true;
    }
    changed.then_some(role)
}

/// What reconciling a binding needs.
pub(crate) enum BindingChange {
    /// Nothing.
    None,
    /// Update to this.
    Update(ClusterRoleBinding),
    /// The role reference differs (it cannot change): delete and create this.
    Recreate(ClusterRoleBinding),
}

/// `computeReconciledRoleBinding`.
pub(crate) fn reconcile_binding(
    existing: &ClusterRoleBinding,
    expected: &ClusterRoleBinding,
) -> BindingChange {
    let mut binding = existing.clone();
    let mut changed = merge_metadata(&mut binding.metadata, &expected.metadata);
    let subjects = binding.subjects.get_or_insert_with(Vec::new);
    for s in expected.subjects.iter().flatten() {
        if !subjects.contains(s) {
            subjects.push(s.clone());
            changed = true;
        }
    }
    if binding.role_ref != expected.role_ref {
        binding.role_ref = expected.role_ref.clone();
        return BindingChange::Recreate(binding);
    }
    if changed {
        BindingChange::Update(binding)
    } else {
        BindingChange::None
    }
}

fn to_value<T: serde::Serialize>(obj: &T) -> Result<Value, String> {
    serde_json::to_value(obj).map_err(|e| format!("encoding a bootstrap object: {e}"))
}

fn new_object<T: serde::Serialize>(obj: &T) -> Result<Value, String> {
    let mut value = to_value(obj)?;
    value["metadata"]["uid"] = Value::String(podvisor_api::meta::new_uid());
    value["metadata"]["creationTimestamp"] = Value::String(time_text(now()));
    if let Some(m) = value["metadata"].as_object_mut() {
        m.remove("resourceVersion");
    }
    Ok(value)
}

/// `ensureRBACPolicy`: reconciles the bootstrap policy into the store; returns the names of
/// the objects created or changed.
///
/// # Errors
///
/// A store error or an undecodable stored object, worded with the object's name.
pub(crate) fn ensure(store: &Store) -> Result<Vec<String>, String> {
    let mut touched = Vec::new();
    let fail = |what: &str, name: &str, e: crate::ApiError| format!("{what} {name}: {}", e.message);
    for expected in &policy().roles {
        let name = expected.metadata.name.as_deref().unwrap_or_default();
        match db::try_get(store, CLUSTERROLES, "", name)
            .map_err(|e| fail("reading clusterrole", name, e))?
        {
            None => {
                db::create(store, CLUSTERROLES, "", name, new_object(expected)?)
                    .map_err(|e| fail("creating clusterrole", name, e))?;
                touched.push(format!("clusterrole {name}"));
            }
            Some(value) => {
                let rv = db::object_rv(&value);
                let existing: ClusterRole = serde_json::from_value(value)
                    .map_err(|e| format!("decoding clusterrole {name}: {e}"))?;
                if !auto_updates(&existing.metadata) {
                    continue;
                }
                if let Some(role) = reconcile_role(&existing, expected) {
                    db::update(store, CLUSTERROLES, "", name, to_value(&role)?, rv)
                        .map_err(|e| fail("updating clusterrole", name, e))?;
                    touched.push(format!("clusterrole {name}"));
                }
            }
        }
    }
    for expected in &policy().bindings {
        let name = expected.metadata.name.as_deref().unwrap_or_default();
        let found = db::try_get(store, CLUSTERROLEBINDINGS, "", name)
            .map_err(|e| fail("reading clusterrolebinding", name, e))?;
        let Some(value) = found else {
            db::create(store, CLUSTERROLEBINDINGS, "", name, new_object(expected)?)
                .map_err(|e| fail("creating clusterrolebinding", name, e))?;
            touched.push(format!("clusterrolebinding {name}"));
            continue;
        };
        let rv = db::object_rv(&value);
        let existing: ClusterRoleBinding = serde_json::from_value(value)
            .map_err(|e| format!("decoding clusterrolebinding {name}: {e}"))?;
        if !auto_updates(&existing.metadata) {
            continue;
        }
        match reconcile_binding(&existing, expected) {
            BindingChange::None => {}
            BindingChange::Update(b) => {
                db::update(store, CLUSTERROLEBINDINGS, "", name, to_value(&b)?, rv)
                    .map_err(|e| fail("updating clusterrolebinding", name, e))?;
                touched.push(format!("clusterrolebinding {name}"));
            }
            BindingChange::Recreate(b) => {
                db::delete(store, CLUSTERROLEBINDINGS, "", name, None, rv)
                    .map_err(|e| fail("deleting clusterrolebinding", name, e))?;
                db::create(store, CLUSTERROLEBINDINGS, "", name, new_object(&b)?)
                    .map_err(|e| fail("recreating clusterrolebinding", name, e))?;
                touched.push(format!("clusterrolebinding {name}"));
            }
        }
    }
    Ok(touched)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn role(name: &str) -> &'static ClusterRole {
        policy()
            .roles
            .iter()
            .find(|r| r.metadata.name.as_deref() == Some(name))
            .unwrap()
    }

    #[test]
    fn the_data_loads_with_labels_and_annotations() {
        let p = policy();
        assert!(p.roles.len() >= 15, "{}", p.roles.len());
        for r in &p.roles {
            let labels = r.metadata.labels.as_ref().unwrap();
            assert_eq!(labels["kubernetes.io/bootstrapping"], "rbac-defaults");
            assert_eq!(r.metadata.annotations.as_ref().unwrap()[AUTOUPDATE], "true");
        }
        // Every binding refers to a role of the policy.
        for b in &p.bindings {
            role(&b.role_ref.name);
        }
        let admin = role("cluster-admin").rules.as_ref().unwrap();
        assert_eq!(admin.len(), 2);
        assert!(role("view").rules.is_none());
        assert_eq!(
            role("edit").metadata.labels.as_ref().unwrap()["rbac.authorization.k8s.io/aggregate-to-admin"],
            "true"
        );
        let masters = p
            .bindings
            .iter()
            .find(|b| b.metadata.name.as_deref() == Some("cluster-admin"))
            .unwrap();
        assert_eq!(masters.subjects.as_ref().unwrap()[0].name, "system:masters");
    }

    #[test]
    fn reconciliation_adds_what_is_missing_and_keeps_the_rest() {
        let expected = role("system:basic-user");
        assert!(reconcile_role(expected, expected).is_none());
        let mut edited = expected.clone();
        // A user's extra rule stays; a removed default permission comes back, alone.
        let extra = PolicyRule {
            verbs: vec!["get".into()],
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["pods".into()]),
            ..PolicyRule::default()
        };
        let mut rules = edited.rules.clone().unwrap();
        rules[0].resources = Some(vec!["selfsubjectaccessreviews".into()]);
        rules.push(extra.clone());
        edited.rules = Some(rules);
        edited.metadata.labels = None;
        let fixed = reconcile_role(&edited, expected).unwrap();
        let fixed_rules = fixed.rules.unwrap();
        assert!(fixed_rules.contains(&extra));
        assert_eq!(
            fixed_rules.last().unwrap().resources.as_deref().unwrap(),
            ["selfsubjectrulesreviews"]
        );
        assert_eq!(
            fixed.metadata.labels.unwrap()["kubernetes.io/bootstrapping"],
            "rbac-defaults"
        );
    }
}
