//! kube-scheduler's filters over one node, in the default profile's order, and the
//! `FitError` text a pod that fits no node is given (`pkg/scheduler/framework/types.go`, with
//! the PostFilter messages of the default plugins: DynamicResources' and DefaultPreemption's).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod};

use super::{affinity, fit, ports, taints};

/// `NodeUnschedulable`'s reason.
pub const ERR_UNSCHEDULABLE: &str = "node(s) were unschedulable";
/// `NodeName`'s reason.
pub const ERR_NODE_NAME: &str = "node(s) didn't match the requested node name";
/// `TaintToleration`'s reason. Since 1.35 (kubernetes#134740, also in 1.34.2) the status
/// names no taint: keys and values may be sensitive.
pub const ERR_UNTOLERATED_TAINT: &str = "node(s) had untolerated taint(s)";
/// `NodeAffinity`'s reason.
pub const ERR_NODE_AFFINITY: &str = "node(s) didn't match Pod's node affinity/selector";
/// `NodePorts`' reason.
pub const ERR_NODE_PORTS: &str = "node(s) didn't have free ports for the requested pod ports";
/// The reason of a pod when there is no node at all (`ErrNoNodesAvailable`, reason
/// `SchedulerError`).
pub const ERR_NO_NODES: &str = "no nodes available to schedule pods";

/// A node as the filters see it: the Node and the pods bound to it that still hold
/// resources ([`fit::holds_resources`]).
#[derive(Debug, Clone, Copy)]
pub struct NodeInfo<'a> {
    /// The Node object.
    pub node: &'a Node,
    /// Its pods (may be left empty for a pod with no host ports and no requests: only
    /// their count matters then, [`NodeInfo::needs_pods`]).
    pub pods: &'a [&'a Pod],
    /// How many pods it has.
    pub pod_count: usize,
}

impl NodeInfo<'_> {
    /// Whether the filters need the node's pods themselves for `pod`, not only their
    /// number: it has host ports or requests.
    #[must_use]
    pub fn needs_pods(pod: &Pod) -> bool {
        !ports::host_ports(pod).is_empty() || fit::pod_requests(pod).values().any(|q| !q.is_zero())
    }
}

/// A filter's status code for a node it rejects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// Preemption could make room (`Unschedulable`).
    Unschedulable,
    /// Preemption cannot help (`UnschedulableAndUnresolvable`).
    UnschedulableAndUnresolvable,
}

/// Why a node was rejected: the first filter that failed, its code and its reasons.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// The plugin's name.
    pub plugin: &'static str,
    /// Its code.
    pub code: Code,
    /// Its reasons (NodeResourcesFit may give several).
    pub reasons: Vec<String>,
}

fn reject(plugin: &'static str, code: Code, reason: &str) -> Option<Rejection> {
    Some(Rejection {
        plugin,
        code,
        reasons: vec![reason.to_owned()],
    })
}

/// Runs NodeUnschedulable, NodeName, TaintToleration, NodeAffinity, NodePorts and
/// NodeResourcesFit in that order (the default profile's); the first that rejects the node
/// decides (`RunFilterPlugins` stops there). `None`: the pod fits.
#[must_use]
pub fn run_filters(pod: &Pod, info: NodeInfo<'_>) -> Option<Rejection> {
    use Code::{Unschedulable, UnschedulableAndUnresolvable as Unresolvable};
    let spec = pod.spec.clone().unwrap_or_default();
    let tolerations = spec.tolerations.as_deref().unwrap_or(&[]);
    let node_spec = info.node.spec.clone().unwrap_or_default();
    let node_taints = node_spec.taints.as_deref().unwrap_or(&[]);
    // NodeUnschedulable: a pod that tolerates the unschedulable taint tolerates a cordon.
    let cordon = k8s_openapi::api::core::v1::Taint {
        key: taints::TAINT_NODE_UNSCHEDULABLE.to_owned(),
        effect: taints::NO_SCHEDULE.to_owned(),
        value: None,
        time_added: None,
    };
    if node_spec.unschedulable == Some(true) && !taints::tolerations_tolerate(tolerations, &cordon)
    {
        return reject("NodeUnschedulable", Unresolvable, ERR_UNSCHEDULABLE);
    }
    let wanted_node = spec.node_name.as_deref().unwrap_or("");
    if !wanted_node.is_empty() && Some(wanted_node) != info.node.metadata.name.as_deref() {
        return reject("NodeName", Unresolvable, ERR_NODE_NAME);
    }
    if taints::find_untolerated_taint(node_taints, tolerations, taints::is_do_not_schedule)
        .is_some()
    {
        return reject("TaintToleration", Unresolvable, ERR_UNTOLERATED_TAINT);
    }
    if !affinity::matches_node(pod, info.node) {
        return reject("NodeAffinity", Unresolvable, ERR_NODE_AFFINITY);
    }
    if ports::ports_conflict(pod, info.pods) {
        return reject("NodePorts", Unschedulable, ERR_NODE_PORTS);
    }
    let lacking = fit::insufficient_resources(
        &fit::pod_requests(pod),
        info.node,
        info.pods,
        info.pod_count,
    );
    if !lacking.is_empty() {
        let code = if lacking.iter().any(|i| i.unresolvable) {
            Unresolvable
        } else {
            Unschedulable
        };
        return Some(Rejection {
            plugin: "NodeResourcesFit",
            code,
            reasons: lacking.into_iter().map(|i| i.reason).collect(),
        });
    }
    None
}

/// `sortReasonsHistogram`: `<count> <reason>` per distinct reason, sorted as strings.
fn histogram<'a>(reasons: impl Iterator<Item = &'a str>) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for r in reasons {
        *counts.entry(r).or_default() += 1;
    }
    let mut lines: Vec<String> = counts.iter().map(|(r, n)| format!("{n} {r}")).collect();
    lines.sort();
    lines.join(", ")
}

/// `FitError.Error()` for a pod rejected by every node (`rejections`, one per node), with
/// the PostFilter messages appended as 1.35 prints them: DynamicResources' `no new claims
/// to deallocate` (the pod has no claims) and DefaultPreemption's own fit error, where a node
/// rejected as unresolvable is `Preemption is not helpful for scheduling` and any other
/// `No preemption victims found for incoming pod` (every pod here has the same priority):
///
/// `0/1 nodes are available: 1 node(s) were unschedulable. no new claims to deallocate,
/// preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.`
#[must_use]
pub fn fit_error_message(rejections: &[Rejection]) -> String {
    let n = rejections.len();
    let mut msg = format!("0/{n} nodes are available:");
    let reasons = histogram(
        rejections
            .iter()
            .flat_map(|r| r.reasons.iter().map(String::as_str)),
    );
    if !reasons.is_empty() {
        msg.push_str(&format!(" {reasons}."));
    }
    let preemption = histogram(rejections.iter().map(|r| match r.code {
        Code::UnschedulableAndUnresolvable => "Preemption is not helpful for scheduling",
        Code::Unschedulable => "No preemption victims found for incoming pod",
    }));
    msg.push_str(&format!(
        " no new claims to deallocate, preemption: 0/{n} nodes are available: {preemption}."
    ));
    msg
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(spec: serde_json::Value, labels: serde_json::Value) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": "node-1", "labels": labels},
            "spec": spec,
            "status": {"allocatable": {"cpu": "2", "memory": "2Gi", "pods": "110"}},
        }))
        .unwrap()
    }

    fn pod(spec: serde_json::Value) -> Pod {
        let mut spec = spec;
        if spec.get("containers").is_none() {
            spec["containers"] = json!([{"name": "c"}]);
        }
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).unwrap()
    }

    fn verdict(p: &Pod, n: &Node, others: &[&Pod]) -> Option<(&'static str, Code, Vec<String>)> {
        run_filters(
            p,
            NodeInfo {
                node: n,
                pods: others,
                pod_count: others.len(),
            },
        )
        .map(|r| (r.plugin, r.code, r.reasons))
    }

    #[test]
    fn a_cordon_rejects_unless_the_unschedulable_taint_is_tolerated() {
        let n = node(json!({"unschedulable": true}), json!({}));
        let plain = pod(json!({}));
        assert_eq!(
            verdict(&plain, &n, &[]),
            Some((
                "NodeUnschedulable",
                Code::UnschedulableAndUnresolvable,
                vec![ERR_UNSCHEDULABLE.to_owned()]
            ))
        );
        let tolerant = pod(
            json!({"tolerations": [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]}),
        );
        assert_eq!(verdict(&tolerant, &n, &[]), None);
    }

    #[test]
    fn taints_no_schedule_and_no_execute_reject_prefer_no_schedule_does_not() {
        let soft = node(
            json!({"taints": [{"key": "k", "value": "v", "effect": "PreferNoSchedule"}]}),
            json!({}),
        );
        assert_eq!(verdict(&pod(json!({})), &soft, &[]), None);
        for effect in ["NoSchedule", "NoExecute"] {
            let n = node(
                json!({"taints": [{"key": "k", "value": "v", "effect": effect}]}),
                json!({}),
            );
            assert_eq!(
                verdict(&pod(json!({})), &n, &[]).map(|v| v.0),
                Some("TaintToleration"),
                "{effect}"
            );
            let ok = pod(
                json!({"tolerations": [{"key": "k", "operator": "Equal", "value": "v", "effect": effect}]}),
            );
            assert_eq!(verdict(&ok, &n, &[]), None, "{effect}");
        }
    }

    #[test]
    fn node_name_selector_ports_and_resources_in_order() {
        let n = node(json!({}), json!({"disk": "ssd"}));
        let elsewhere = pod(json!({"nodeName": "node-2"}));
        assert_eq!(verdict(&elsewhere, &n, &[]).map(|v| v.0), Some("NodeName"));
        let here = pod(json!({"nodeName": "node-1"}));
        assert_eq!(verdict(&here, &n, &[]), None);
        let hdd = pod(json!({"nodeSelector": {"disk": "hdd"}}));
        assert_eq!(
            verdict(&hdd, &n, &[]),
            Some((
                "NodeAffinity",
                Code::UnschedulableAndUnresolvable,
                vec![ERR_NODE_AFFINITY.to_owned()]
            ))
        );
        let web = pod(
            json!({"containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 8080}]}]}),
        );
        assert_eq!(
            verdict(&web, &n, &[&web]),
            Some((
                "NodePorts",
                Code::Unschedulable,
                vec![ERR_NODE_PORTS.to_owned()]
            ))
        );
        let big = pod(
            json!({"containers": [{"name": "c", "resources": {"requests": {"cpu": "1500m", "memory": "3Gi"}}}]}),
        );
        assert_eq!(
            verdict(&big, &n, &[]),
            Some((
                "NodeResourcesFit",
                Code::UnschedulableAndUnresolvable,
                vec!["Insufficient memory".to_owned()]
            ))
        );
        let half = pod(
            json!({"containers": [{"name": "c", "resources": {"requests": {"cpu": "1500m"}}}]}),
        );
        assert_eq!(
            verdict(&half, &n, &[&half]),
            Some((
                "NodeResourcesFit",
                Code::Unschedulable,
                vec!["Insufficient cpu".to_owned()]
            ))
        );
        // The first failing filter decides: a cordon before a selector.
        let cordoned = node(json!({"unschedulable": true}), json!({}));
        assert_eq!(
            verdict(&hdd, &cordoned, &[]).map(|v| v.0),
            Some("NodeUnschedulable")
        );
    }

    /// The messages kube-scheduler 1.35 gives (`kubectl describe pod`'s FailedScheduling).
    #[test]
    fn fit_error_messages_as_kube_scheduler_prints_them() {
        let r = |plugin, code, reasons: &[&str]| Rejection {
            plugin,
            code,
            reasons: reasons.iter().map(|s| (*s).to_owned()).collect(),
        };
        assert_eq!(
            fit_error_message(&[r(
                "TaintToleration",
                Code::UnschedulableAndUnresolvable,
                &[ERR_UNTOLERATED_TAINT]
            )]),
            "0/1 nodes are available: 1 node(s) had untolerated taint(s). no new claims to deallocate, preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
        );
        assert_eq!(
            fit_error_message(&[r(
                "NodeResourcesFit",
                Code::Unschedulable,
                &["Insufficient cpu", "Insufficient memory"]
            )]),
            "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory. no new claims to deallocate, preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
        );
        // Sorted as strings over several nodes.
        assert_eq!(
            fit_error_message(&[
                r(
                    "NodeAffinity",
                    Code::UnschedulableAndUnresolvable,
                    &[ERR_NODE_AFFINITY]
                ),
                r(
                    "NodeResourcesFit",
                    Code::Unschedulable,
                    &["Insufficient cpu"]
                ),
                r(
                    "NodeAffinity",
                    Code::UnschedulableAndUnresolvable,
                    &[ERR_NODE_AFFINITY]
                ),
            ]),
            "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't match Pod's node affinity/selector. no new claims to deallocate, preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling."
        );
    }
}
