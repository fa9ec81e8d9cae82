//! RBAC's four kinds (`ValidateRole`, `ValidateClusterRole`, `ValidateRoleBinding`,
//! `ValidateClusterRoleBinding` and their updates, `pkg/apis/rbac/validation`), and the
//! `rbac.authorization.k8s.io/v1` defaulting of bindings (`pkg/apis/rbac/v1/defaults.go`).
//! Names are any valid path segment (`system:basic-user`), not DNS names.

use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::field::{BadValue, FieldError, Path, ValidationErrors, go_quote};
use super::meta::{
    result, validate_labels, validate_object_meta_update, validate_object_meta_with,
};
use super::names::name_is_dns_subdomain;

/// The RBAC API group, the only one a binding's `roleRef` may name.
pub const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// `path.IsValidPathSegmentName`: RBAC's name rule (`minimalNameRequirements`).
#[must_use]
pub fn is_valid_path_segment_name(name: &str, _prefix: bool) -> Vec<String> {
    if let Some(bad) = [".", ".."].into_iter().find(|b| name == *b) {
        return vec![format!("may not be '{bad}'")];
    }
    ["/", "%"]
        .into_iter()
        .filter(|c| name.contains(c))
        .map(|c| format!("may not contain '{c}'"))
        .collect()
}

/// Go's `%#v` of a `[]string`.
fn go_strings(list: &[String]) -> BadValue {
    let items: Vec<String> = list.iter().map(|s| go_quote(s)).collect();
    BadValue::Raw(format!("[]string{{{}}}", items.join(", ")))
}

/// Go's `%#v` of an internal `rbac.RoleRef`.
fn go_role_ref(r: &RoleRef) -> BadValue {
    BadValue::Raw(format!(
        "rbac.RoleRef{{APIGroup:{}, Kind:{}, Name:{}}}",
        go_quote(&r.api_group),
        go_quote(&r.kind),
        go_quote(&r.name)
    ))
}

fn policy_rule_errors(rule: &PolicyRule, namespaced: bool, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let len = |v: &Option<Vec<String>>| v.as_ref().map_or(0, Vec::len);
    if rule.verbs.is_empty() {
        errs.push(FieldError::required(
            &path.child("verbs"),
            "verbs must contain at least one value",
        ));
    }
    if let Some(urls) = rule.non_resource_urls.as_ref().filter(|u| !u.is_empty()) {
        if namespaced {
            errs.push(FieldError::invalid(
                &path.child("nonResourceURLs"),
                go_strings(urls),
                "namespaced rules cannot apply to non-resource URLs",
            ));
        }
        if len(&rule.api_groups) > 0 || len(&rule.resources) > 0 || len(&rule.resource_names) > 0 {
            errs.push(FieldError::invalid(
                &path.child("nonResourceURLs"),
                go_strings(urls),
                "rules cannot apply to both regular resources and non-resource URLs",
            ));
        }
        return errs;
    }
    if len(&rule.api_groups) == 0 {
        errs.push(FieldError::required(
            &path.child("apiGroups"),
            "resource rules must supply at least one api group",
        ));
    }
    if len(&rule.resources) == 0 {
        errs.push(FieldError::required(
            &path.child("resources"),
            "resource rules must supply at least one resource",
        ));
    }
    if len(&rule.resource_names) > 0 && len(&rule.resources) > 1 {
        errs.push(FieldError::required(
            &path.child("resourceNames"),
            "resource names cannot apply to multiple resources",
        ));
    }
    errs
}

fn rules_errors(rules: Option<&Vec<PolicyRule>>, namespaced: bool) -> Vec<FieldError> {
    let path = Path::new("rules");
    rules
        .into_iter()
        .flatten()
        .enumerate()
        .flat_map(|(i, r)| policy_rule_errors(r, namespaced, &path.index(i)))
        .collect()
}

fn meta_errors(meta: &ObjectMeta, namespaced: bool) -> Vec<FieldError> {
    validate_object_meta_with(
        meta,
        &Path::new("metadata"),
        namespaced,
        is_valid_path_segment_name,
    )
}

/// `ValidateRole`.
///
/// # Errors
///
/// Every problem found.
pub fn validate_role(role: &Role) -> Result<(), ValidationErrors> {
    let mut errs = meta_errors(&role.metadata, true);
    errs.extend(rules_errors(role.rules.as_ref(), true));
    result("Role", &role.metadata, errs)
}

/// `ValidateRoleUpdate`.
///
/// # Errors
///
/// Every problem found.
pub fn validate_role_update(new: &Role, old: &Role) -> Result<(), ValidationErrors> {
    let mut errs = meta_errors(&new.metadata, true);
    errs.extend(rules_errors(new.rules.as_ref(), true));
    errs.extend(validate_object_meta_update(
        &new.metadata,
        &old.metadata,
        &Path::new("metadata"),
    ));
    result("Role", &new.metadata, errs)
}

fn cluster_role_errors(role: &ClusterRole) -> Vec<FieldError> {
    let mut errs = meta_errors(&role.metadata, false);
    errs.extend(rules_errors(role.rules.as_ref(), false));
    if let Some(rule) = &role.aggregation_rule {
        let path = Path::new("aggregationRule").child("clusterRoleSelectors");
        let selectors = rule.cluster_role_selectors.as_deref().unwrap_or_default();
        if selectors.is_empty() {
            errs.push(FieldError::required(
                &path,
                "at least one clusterRoleSelector required if aggregationRule is non-nil",
            ));
        }
        for (i, s) in selectors.iter().enumerate() {
            if let Some(labels) = &s.match_labels {
                errs.extend(validate_labels(labels, &path.index(i).child("matchLabels")));
            }
        }
    }
    errs
}

/// `ValidateClusterRole`, with its `aggregationRule` (at least one selector, valid labels).
///
/// # Errors
///
/// Every problem found.
pub fn validate_cluster_role(role: &ClusterRole) -> Result<(), ValidationErrors> {
    result("ClusterRole", &role.metadata, cluster_role_errors(role))
}

/// `ValidateClusterRoleUpdate`.
///
/// # Errors
///
/// Every problem found.
pub fn validate_cluster_role_update(
    new: &ClusterRole,
    old: &ClusterRole,
) -> Result<(), ValidationErrors> {
    let mut errs = cluster_role_errors(new);
    errs.extend(validate_object_meta_update(
        &new.metadata,
        &old.metadata,
        &Path::new("metadata"),
    ));
    result("ClusterRole", &new.metadata, errs)
}

fn subject_errors(subject: &Subject, namespaced: bool, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let group = subject.api_group.as_deref().unwrap_or("");
    if subject.name.is_empty() {
        errs.push(FieldError::required(&path.child("name"), ""));
    }
    match subject.kind.as_str() {
        "ServiceAccount" => {
            if !subject.name.is_empty() {
                for msg in name_is_dns_subdomain(&subject.name, false) {
                    errs.push(FieldError::invalid(&path.child("name"), &subject.name, msg));
                }
            }
            if !group.is_empty() {
                errs.push(FieldError::not_supported(
                    &path.child("apiGroup"),
                    group,
                    &[""],
                ));
            }
            if !namespaced && subject.namespace.as_deref().unwrap_or("").is_empty() {
                errs.push(FieldError::required(&path.child("namespace"), ""));
            }
        }
        "User" | "Group" => {
            if subject.name.is_empty() {
                let what = if subject.kind == "User" {
                    "user"
                } else {
                    "group"
                };
                errs.push(FieldError::invalid(
                    &path.child("name"),
                    "",
                    format!("{what} name cannot be empty"),
                ));
            }
            if group != RBAC_GROUP {
                errs.push(FieldError::not_supported(
                    &path.child("apiGroup"),
                    group,
                    &[RBAC_GROUP],
                ));
            }
        }
        other => errs.push(FieldError::not_supported(
            &path.child("kind"),
            other,
            &["ServiceAccount", "User", "Group"],
        )),
    }
    errs
}

fn binding_errors(
    meta: &ObjectMeta,
    role_ref: &RoleRef,
    subjects: Option<&Vec<Subject>>,
    namespaced: bool,
) -> Vec<FieldError> {
    let mut errs = meta_errors(meta, namespaced);
    let path = Path::new("roleRef");
    if role_ref.api_group != RBAC_GROUP {
        errs.push(FieldError::not_supported(
            &path.child("apiGroup"),
            &role_ref.api_group,
            &[RBAC_GROUP],
        ));
    }
    let kinds: &[&str] = if namespaced {
        &["Role", "ClusterRole"]
    } else {
        &["ClusterRole"]
    };
    if !kinds.contains(&role_ref.kind.as_str()) {
        errs.push(FieldError::not_supported(
            &path.child("kind"),
            &role_ref.kind,
            kinds,
        ));
    }
    if role_ref.name.is_empty() {
        errs.push(FieldError::required(&path.child("name"), ""));
    } else {
        for msg in is_valid_path_segment_name(&role_ref.name, false) {
            errs.push(FieldError::invalid(
                &path.child("name"),
                &role_ref.name,
                msg,
            ));
        }
    }
    let path = Path::new("subjects");
    for (i, s) in subjects.into_iter().flatten().enumerate() {
        errs.extend(subject_errors(s, namespaced, &path.index(i)));
    }
    errs
}

fn role_ref_changed(new: &RoleRef, old: &RoleRef) -> Option<FieldError> {
    (new != old).then(|| {
        FieldError::invalid(
            &Path::new("roleRef"),
            go_role_ref(new),
            "cannot change roleRef",
        )
    })
}

/// `ValidateRoleBinding`.
///
/// # Errors
///
/// Every problem found.
pub fn validate_role_binding(b: &RoleBinding) -> Result<(), ValidationErrors> {
    let errs = binding_errors(&b.metadata, &b.role_ref, b.subjects.as_ref(), true);
    result("RoleBinding", &b.metadata, errs)
}

/// `ValidateRoleBindingUpdate`: as on create, and the `roleRef` unchanged.
///
/// # Errors
///
/// Every problem found.
pub fn validate_role_binding_update(
    new: &RoleBinding,
    old: &RoleBinding,
) -> Result<(), ValidationErrors> {
    let mut errs = binding_errors(&new.metadata, &new.role_ref, new.subjects.as_ref(), true);
    errs.extend(validate_object_meta_update(
        &new.metadata,
        &old.metadata,
        &Path::new("metadata"),
    ));
    errs.extend(role_ref_changed(&new.role_ref, &old.role_ref));
    result("RoleBinding", &new.metadata, errs)
}

/// `ValidateClusterRoleBinding`.
///
/// # Errors
///
/// Every problem found.
pub fn validate_cluster_role_binding(b: &ClusterRoleBinding) -> Result<(), ValidationErrors> {
    let errs = binding_errors(&b.metadata, &b.role_ref, b.subjects.as_ref(), false);
    result("ClusterRoleBinding", &b.metadata, errs)
}

/// `ValidateClusterRoleBindingUpdate`: as on create, and the `roleRef` unchanged.
///
/// # Errors
///
/// Every problem found.
pub fn validate_cluster_role_binding_update(
    new: &ClusterRoleBinding,
    old: &ClusterRoleBinding,
) -> Result<(), ValidationErrors> {
    let mut errs = binding_errors(&new.metadata, &new.role_ref, new.subjects.as_ref(), false);
    errs.extend(validate_object_meta_update(
        &new.metadata,
        &old.metadata,
        &Path::new("metadata"),
    ));
    errs.extend(role_ref_changed(&new.role_ref, &old.role_ref));
    result("ClusterRoleBinding", &new.metadata, errs)
}

/// `SetDefaults_RoleBinding`/`SetDefaults_ClusterRoleBinding` and `SetDefaults_Subject`:
/// an empty `roleRef.apiGroup` is RBAC's; an empty subject `apiGroup` is RBAC's for users and
/// groups (service accounts keep the core group, `""`).
pub fn default_binding(role_ref: &mut RoleRef, subjects: Option<&mut Vec<Subject>>) {
    if role_ref.api_group.is_empty() {
        RBAC_GROUP.clone_into(&mut role_ref.api_group);
    }
    for s in subjects.into_iter().flatten() {
        if s.api_group.as_deref().unwrap_or("").is_empty()
            && matches!(s.kind.as_str(), "User" | "Group")
        {
            s.api_group = Some(RBAC_GROUP.to_owned());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn binding(v: serde_json::Value) -> RoleBinding {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn names_are_path_segments() {
        assert!(is_valid_path_segment_name("system:basic-user", false).is_empty());
        assert_eq!(is_valid_path_segment_name("..", false), ["may not be '..'"]);
        assert_eq!(
            is_valid_path_segment_name("a/b%c", false),
            ["may not contain '/'", "may not contain '%'"]
        );
    }

    #[test]
    fn rules_need_verbs_groups_and_resources() {
        let role: Role = serde_json::from_value(json!({
            "metadata": {"name": "r", "namespace": "default"},
            "rules": [{"verbs": []}, {"verbs": ["get"], "nonResourceURLs": ["/healthz"]}]
        }))
        .unwrap();
        let err = validate_role(&role).unwrap_err().aggregate();
        assert!(
            err.contains("rules[0].verbs: Required value: verbs must contain at least one value"),
            "{err}"
        );
        assert!(err.contains("rules[0].apiGroups: Required value"), "{err}");
        assert!(err.contains("rules[0].resources: Required value"), "{err}");
        assert!(
            err.contains(r#"rules[1].nonResourceURLs: Invalid value: []string{"/healthz"}: namespaced rules cannot apply to non-resource URLs"#),
            "{err}"
        );
        let cluster: ClusterRole = serde_json::from_value(json!({
            "metadata": {"name": "system:c", "namespace": "x"},
            "rules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}],
            "aggregationRule": {"clusterRoleSelectors": []}
        }))
        .unwrap();
        let err = validate_cluster_role(&cluster).unwrap_err().aggregate();
        assert!(
            err.contains("metadata.namespace: Forbidden: not allowed on this type"),
            "{err}"
        );
        assert!(
            err.contains("aggregationRule.clusterRoleSelectors: Required value"),
            "{err}"
        );
        assert!(!err.contains("nonResourceURLs"), "{err}");
    }

    #[test]
    fn bindings_check_role_ref_and_subjects_and_keep_role_ref() {
        let mut b = binding(json!({
            "metadata": {"name": "b", "namespace": "default"},
            "roleRef": {"apiGroup": "", "kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "User", "name": "alice"}, {"kind": "ServiceAccount", "name": "Bad"}, {"kind": "Robot", "name": "r"}]
        }));
        let (role_ref, subjects) = (&mut b.role_ref, b.subjects.as_mut());
        default_binding(role_ref, subjects);
        assert_eq!(b.role_ref.api_group, RBAC_GROUP);
        let subjects = b.subjects.as_ref().unwrap();
        assert_eq!(subjects[0].api_group.as_deref(), Some(RBAC_GROUP));
        assert_eq!(subjects[1].api_group, None);
        let err = validate_role_binding(&b).unwrap_err().aggregate();
        assert!(
            err.contains(r#"subjects[1].name: Invalid value: "Bad""#),
            "{err}"
        );
        assert!(
            err.contains(r#"subjects[2].kind: Unsupported value: "Robot""#),
            "{err}"
        );
        let mut changed = b.clone();
        changed.role_ref.name = "edit".into();
        changed.subjects = None;
        let err = validate_role_binding_update(&changed, &b)
            .unwrap_err()
            .aggregate();
        assert!(
            err.contains(r#"roleRef: Invalid value: rbac.RoleRef{APIGroup:"rbac.authorization.k8s.io", Kind:"ClusterRole", Name:"edit"}: cannot change roleRef"#),
            "{err}"
        );
        let crb: ClusterRoleBinding = serde_json::from_value(json!({
            "metadata": {"name": "c"},
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": "r"},
            "subjects": [{"kind": "ServiceAccount", "name": "default"}]
        }))
        .unwrap();
        let err = validate_cluster_role_binding(&crb).unwrap_err().aggregate();
        assert!(
            err.contains(
                r#"roleRef.kind: Unsupported value: "Role": supported values: "ClusterRole""#
            ),
            "{err}"
        );
        assert!(
            err.contains("subjects[0].namespace: Required value"),
            "{err}"
        );
    }
}
