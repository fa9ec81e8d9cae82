//! The ClusterRole aggregation controller (kube-controller-manager's
//! `clusterroleaggregation`): a ClusterRole with an `aggregationRule` holds the rules of every
//! other ClusterRole its selectors match, each selector in turn, the matches by name, a
//! rule once. [`sync`] makes one pass over the store; [`run`] is the loop `serve` starts,
//! a pass whenever a ClusterRole changes.

use std::collections::BTreeMap;

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use podvisor_store::{Store, WatchFrom};

use crate::db::{self, CLUSTERROLES};

/// Whether `labels` match `selector` (`metav1.LabelSelectorAsSelector`): every `matchLabels`
/// pair and every `matchExpressions` requirement; an unknown operator matches nothing.
pub(crate) fn selector_matches(
    selector: &LabelSelector,
    labels: Option<&BTreeMap<String, String>>,
) -> bool {
    let empty = BTreeMap::new();
    let labels = labels.unwrap_or(&empty);
    let pairs = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let expressions = selector.match_expressions.iter().flatten().all(|e| {
        let value = labels.get(&e.key);
        let values = e.values.as_deref().unwrap_or_default();
        match e.operator.as_str() {
            "In" => value.is_some_and(|v| values.contains(v)),
            "NotIn" => value.is_none_or(|v| !values.contains(v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            _ => false,
        }
    });
    pairs && expressions
}

/// The rules `role` aggregates from `all` (`syncClusterRole`); `None` when it has no
/// `aggregationRule`.
pub(crate) fn aggregated_rules(role: &ClusterRole, all: &[ClusterRole]) -> Option<Vec<PolicyRule>> {
    let rule = role.aggregation_rule.as_ref()?;
    let mut sorted: Vec<&ClusterRole> = all.iter().collect();
    sorted.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut rules: Vec<PolicyRule> = Vec::new();
    for selector in rule.cluster_role_selectors.iter().flatten() {
        for other in &sorted {
            if other.metadata.name == role.metadata.name
                || !selector_matches(selector, other.metadata.labels.as_ref())
            {
                continue;
            }
            for r in other.rules.iter().flatten() {
                if !rules.contains(r) {
                    rules.push(r.clone());
                }
            }
        }
    }
    Some(rules)
}

/// Aggregates in memory until nothing changes (an aggregated role may be aggregated into
/// another: `view` into `edit` into `admin`), at most once per role and once more.
fn settle(roles: &mut [ClusterRole]) -> Vec<usize> {
    let mut changed = Vec::new();
    for _ in 0..=roles.len() {
        let mut any = false;
        for i in 0..roles.len() {
            let Some(rules) = aggregated_rules(&roles[i], roles) else {
                continue;
            };
            if rules != roles[i].rules.clone().unwrap_or_default() {
                roles[i].rules = Some(rules);
                any = true;
                if !changed.contains(&i) {
                    changed.push(i);
                }
            }
        }
        if !any {
            break;
        }
    }
    changed
}

/// One pass: every aggregated ClusterRole whose rules differ from its aggregation is
/// updated; returns the names updated.
///
/// # Errors
///
/// A store error or an undecodable ClusterRole.
pub(crate) fn sync(store: &Store) -> Result<Vec<String>, String> {
    let (values, _) = db::list(store, CLUSTERROLES, None).map_err(|e| e.message)?;
    let mut rvs = Vec::with_capacity(values.len());
    let mut roles = Vec::with_capacity(values.len());
    for v in values {
        rvs.push(db::object_rv(&v));
        roles.push(
            serde_json::from_value::<ClusterRole>(v)
                .map_err(|e| format!("decoding a stored ClusterRole: {e}"))?,
        );
    }
    let mut updated = Vec::new();
    for i in settle(&mut roles) {
        let name = roles[i].metadata.name.clone().unwrap_or_default();
        let value = serde_json::to_value(&roles[i]).map_err(|e| e.to_string())?;
        match db::update(store, CLUSTERROLES, "", &name, value, rvs[i]) {
            Ok(_) => updated.push(name),
            // Changed meanwhile: the change's event brings another pass.
            Err(e) if e.code == 409 || e.code == 404 => {}
            Err(e) => return Err(format!("updating clusterrole {name}: {}", e.message)),
        }
    }
    Ok(updated)
}

/// The controller: a pass at start and whenever a ClusterRole is added, changed or removed.
pub async fn run(store: Store, stop: impl std::future::Future<Output = ()>) {
    tokio::pin!(stop);
    let watch = || db::watch(&store, CLUSTERROLES, None, WatchFrom::Now);
    let mut events = match watch() {
        Ok(w) => w,
        Err(e) => {
            tracing::error!("clusterrole aggregation controller: watching clusterroles: {e}");
            return;
        }
    };
    loop {
        let s = store.clone();
        match tokio::task::spawn_blocking(move || sync(&s)).await {
            Ok(Ok(updated)) if !updated.is_empty() => {
                tracing::debug!("clusterrole aggregation: updated {updated:?}");
            }
            Ok(Err(e)) => tracing::warn!("clusterrole aggregation: {e}"),
            _ => {}
        }
        tokio::select! {
            () = &mut stop => return,
            event = events.next() => {
                if event.is_none() {
                    // The store dropped a slow watcher: watch again.
                    match watch() {
                        Ok(w) => events = w,
                        Err(_) => return,
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::rbac::v1::AggregationRule;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelectorRequirement, ObjectMeta};

    fn role(name: &str, labels: &[(&str, &str)], verbs: &[&str]) -> ClusterRole {
        ClusterRole {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect(),
                ),
                ..ObjectMeta::default()
            },
            rules: Some(
                verbs
                    .iter()
                    .map(|v| PolicyRule {
                        verbs: vec![(*v).to_owned()],
                        api_groups: Some(vec![String::new()]),
                        resources: Some(vec!["pods".into()]),
                        ..PolicyRule::default()
                    })
                    .collect(),
            ),
            aggregation_rule: None,
        }
    }

    fn selector(key: &str) -> LabelSelector {
        LabelSelector {
            match_labels: Some(BTreeMap::from([(key.to_owned(), "true".to_owned())])),
            ..LabelSelector::default()
        }
    }

    #[test]
    fn aggregation_unions_matching_roles_by_name_once_each() {
        let mut parent = role("parent", &[], &["stale"]);
        parent.aggregation_rule = Some(AggregationRule {
            cluster_role_selectors: Some(vec![selector("a"), selector("b")]),
        });
        let all = vec![
            parent.clone(),
            role("z-a", &[("a", "true")], &["list"]),
            role("b-a", &[("a", "true")], &["get", "list"]),
            role("c-b", &[("b", "true")], &["get", "watch"]),
            role("no", &[("a", "false")], &["delete"]),
        ];
        let verbs: Vec<String> = aggregated_rules(&parent, &all)
            .unwrap()
            .into_iter()
            .map(|r| r.verbs[0].clone())
            .collect();
        assert_eq!(verbs, ["get", "list", "watch"]);
        assert!(aggregated_rules(&all[1], &all).is_none());
        // Nested aggregation settles in one pass: `top` gathers `parent`'s gathered rules.
        let mut top = role("top", &[], &[]);
        top.aggregation_rule = Some(AggregationRule {
            cluster_role_selectors: Some(vec![selector("p")]),
        });
        let mut nested = vec![top];
        let mut labelled = parent;
        labelled.metadata.labels = Some(BTreeMap::from([("p".to_owned(), "true".to_owned())]));
        nested.push(labelled);
        nested.extend(all[1..].iter().cloned());
        assert_eq!(settle(&mut nested), [0, 1]);
        assert_eq!(nested[0].rules.as_ref().unwrap().len(), 3);
    }

    #[test]
    fn selectors_with_expressions() {
        let labels = BTreeMap::from([("tier".to_owned(), "web".to_owned())]);
        let expr = |op: &str, values: &[&str]| LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "tier".into(),
                operator: op.into(),
                values: Some(values.iter().map(|v| (*v).to_owned()).collect()),
            }]),
            ..LabelSelector::default()
        };
        assert!(selector_matches(&expr("In", &["web", "db"]), Some(&labels)));
        assert!(!selector_matches(&expr("NotIn", &["web"]), Some(&labels)));
        assert!(selector_matches(&expr("Exists", &[]), Some(&labels)));
        assert!(!selector_matches(&expr("DoesNotExist", &[]), Some(&labels)));
        assert!(!selector_matches(&selector("a"), Some(&labels)));
        assert!(selector_matches(&LabelSelector::default(), None));
    }
}
