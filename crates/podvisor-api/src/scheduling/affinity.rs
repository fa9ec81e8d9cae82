//! `nodeSelector` and required node affinity (`component-helpers/scheduling/corev1/
//! nodeaffinity`: `GetRequiredNodeAffinity(pod).Match(node)`), as the NodeAffinity filter
//! uses them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeSelectorRequirement, NodeSelectorTerm, Pod};

/// Whether `pod` may run on `node` by its `nodeSelector` (every label equal) and its
/// `requiredDuringSchedulingIgnoredDuringExecution` node affinity (any term matches).
#[must_use]
pub fn matches_node(pod: &Pod, node: &Node) -> bool {
    let Some(spec) = &pod.spec else {
        return true;
    };
    let empty = BTreeMap::new();
    let labels = node.metadata.labels.as_ref().unwrap_or(&empty);
    let name = node.metadata.name.as_deref().unwrap_or("");
    let selector_ok = spec
        .node_selector
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    if !selector_ok {
        return false;
    }
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| {
            na.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    match required {
        None => true,
        Some(selector) => selector
            .node_selector_terms
            .iter()
            .any(|term| term_matches(term, labels, name)),
    }
}

/// One `NodeSelectorTerm`: every expression and every field requirement; a term with
/// neither matches nothing, and one that does not parse (`NodeSelectorRequirementsAsSelector`
/// errors) matches nothing.
fn term_matches(term: &NodeSelectorTerm, labels: &BTreeMap<String, String>, name: &str) -> bool {
    let expressions = term.match_expressions.as_deref().unwrap_or(&[]);
    let fields = term.match_fields.as_deref().unwrap_or(&[]);
    if expressions.is_empty() && fields.is_empty() {
        return false;
    }
    expressions
        .iter()
        .all(|r| expression_matches(r, labels) == Some(true))
        && fields.iter().all(|r| field_matches(r, name) == Some(true))
}

/// A label requirement; `None` when it is malformed (`In`/`NotIn` without values, `Exists`/
/// `DoesNotExist` with values, `Gt`/`Lt` without exactly one integer, an unknown operator).
fn expression_matches(
    r: &NodeSelectorRequirement,
    labels: &BTreeMap<String, String>,
) -> Option<bool> {
    let values = r.values.as_deref().unwrap_or(&[]);
    let label = labels.get(&r.key);
    match r.operator.as_str() {
        "In" if !values.is_empty() => Some(label.is_some_and(|l| values.contains(l))),
        "NotIn" if !values.is_empty() => Some(label.is_none_or(|l| !values.contains(l))),
        "Exists" if values.is_empty() => Some(label.is_some()),
        "DoesNotExist" if values.is_empty() => Some(label.is_none()),
        op @ ("Gt" | "Lt") if values.len() == 1 => {
            let bound: i64 = values[0].parse().ok()?;
            // A label that is missing or not an integer does not match.
            let Some(have) = label.and_then(|l| l.parse::<i64>().ok()) else {
                return Some(false);
            };
            Some(if op == "Gt" {
                have > bound
            } else {
                have < bound
            })
        }
        _ => None,
    }
}

/// A field requirement (`NodeSelectorRequirementsAsFieldSelector`): only `metadata.name`,
/// with `In` or `NotIn` and exactly one value.
fn field_matches(r: &NodeSelectorRequirement, name: &str) -> Option<bool> {
    let values = r.values.as_deref().unwrap_or(&[]);
    if values.len() != 1 {
        return None;
    }
    let field = if r.key == "metadata.name" { name } else { "" };
    match r.operator.as_str() {
        "In" => Some(field == values[0]),
        "NotIn" => Some(field != values[0]),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(labels: serde_json::Value) -> Node {
        serde_json::from_value(json!({"metadata": {"name": "node-1", "labels": labels}})).unwrap()
    }

    fn pod(spec: serde_json::Value) -> Pod {
        let mut spec = spec;
        spec["containers"] = json!([{"name": "c"}]);
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).unwrap()
    }

    fn required(terms: serde_json::Value) -> Pod {
        pod(
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}}),
        )
    }

    /// `TestNodeAffinity` (nodeaffinity plugin): nodeSelector cases.
    #[test]
    fn node_selector_needs_every_label() {
        let n = node(json!({"foo": "bar", "baz": "blah"}));
        assert!(matches_node(&pod(json!({})), &n));
        assert!(matches_node(
            &pod(json!({"nodeSelector": {"foo": "bar"}})),
            &n
        ));
        assert!(matches_node(
            &pod(json!({"nodeSelector": {"foo": "bar", "baz": "blah"}})),
            &n
        ));
        assert!(!matches_node(
            &pod(json!({"nodeSelector": {"foo": "bar", "baz": "other"}})),
            &n
        ));
        assert!(!matches_node(
            &pod(json!({"nodeSelector": {"missing": "x"}})),
            &node(json!({}))
        ));
    }

    /// `TestNodeAffinity`: the operators, terms ORed, requirements ANDed, matchFields.
    #[test]
    fn required_node_affinity_as_upstream() {
        let n = node(json!({"foo": "bar", "kernel-version": "0206", "GPU": "NVIDIA-GRID-K1"}));
        let expr = |key: &str, op: &str, values: serde_json::Value| json!({"key": key, "operator": op, "values": values});
        let cases = [
            (
                json!([{"matchExpressions": [expr("foo", "In", json!(["value1", "bar"]))]}]),
                true,
            ),
            (
                json!([{"matchExpressions": [expr("foo", "In", json!(["value1"]))]}]),
                false,
            ),
            (
                json!([{"matchExpressions": [expr("foo", "NotIn", json!(["value1"]))]}]),
                true,
            ),
            (
                json!([{"matchExpressions": [expr("foo", "NotIn", json!(["bar"]))]}]),
                false,
            ),
            (
                json!([{"matchExpressions": [expr("missing", "NotIn", json!(["bar"]))]}]),
                true,
            ),
            (
                json!([{"matchExpressions": [{"key": "foo", "operator": "Exists"}]}]),
                true,
            ),
            (
                json!([{"matchExpressions": [{"key": "foo", "operator": "DoesNotExist"}]}]),
                false,
            ),
            (
                json!([{"matchExpressions": [{"key": "nope", "operator": "DoesNotExist"}]}]),
                true,
            ),
            (
                json!([{"matchExpressions": [expr("kernel-version", "Gt", json!(["0204"]))]}]),
                true,
            ),
            (
                json!([{"matchExpressions": [expr("kernel-version", "Lt", json!(["0204"]))]}]),
                false,
            ),
            (
                json!([{"matchExpressions": [expr("foo", "Gt", json!(["1"]))]}]),
                false,
            ),
            // Malformed requirements match nothing.
            (
                json!([{"matchExpressions": [expr("kernel-version", "Gt", json!(["1", "2"]))]}]),
                false,
            ),
            (
                json!([{"matchExpressions": [expr("foo", "Exists", json!(["bar"]))]}]),
                false,
            ),
            (
                json!([{"matchExpressions": [expr("foo", "In", json!([]))]}]),
                false,
            ),
            // Requirements of a term are ANDed.
            (
                json!([{"matchExpressions": [expr("foo", "In", json!(["bar"])), expr("GPU", "In", json!(["AMD"]))]}]),
                false,
            ),
            // Terms are ORed.
            (
                json!([{"matchExpressions": [expr("foo", "In", json!(["no"]))]}, {"matchExpressions": [expr("GPU", "Exists", json!([]))]}]),
                true,
            ),
            // An empty term matches nothing.
            (json!([{}]), false),
            (json!([{"matchExpressions": []}]), false),
            // matchFields: metadata.name only, In/NotIn with one value.
            (
                json!([{"matchFields": [expr("metadata.name", "In", json!(["node-1"]))]}]),
                true,
            ),
            (
                json!([{"matchFields": [expr("metadata.name", "In", json!(["node-2"]))]}]),
                false,
            ),
            (
                json!([{"matchFields": [expr("metadata.name", "NotIn", json!(["node-2"]))]}]),
                true,
            ),
            (
                json!([{"matchFields": [expr("metadata.name", "In", json!(["node-1", "node-2"]))]}]),
                false,
            ),
            (
                json!([{"matchFields": [expr("metadata.name", "In", json!(["node-1"]))], "matchExpressions": [expr("foo", "In", json!(["bar"]))]}]),
                true,
            ),
            (
                json!([{"matchFields": [expr("metadata.name", "In", json!(["node-1"]))], "matchExpressions": [expr("foo", "In", json!(["no"]))]}]),
                false,
            ),
        ];
        for (i, (terms, want)) in cases.into_iter().enumerate() {
            assert_eq!(
                matches_node(&required(terms.clone()), &n),
                want,
                "case {i}: {terms}"
            );
        }
        // nodeSelector and affinity must both match.
        let mut both =
            required(json!([{"matchExpressions": [{"key": "foo", "operator": "Exists"}]}]));
        both.spec.as_mut().unwrap().node_selector =
            Some([("foo".to_owned(), "other".to_owned())].into());
        assert!(!matches_node(&both, &n));
    }
}
