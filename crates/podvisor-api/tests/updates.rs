//! Spec mutability on update (M11) and status transitions (V13).

use crate::common;

use common::{pod, with_spec};
use podvisor_api::k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStatus, Pod,
    PodStatus, Toleration,
};
use podvisor_api::{validate_pod_update, validate_status_update};

fn base() -> Pod {
    pod(&with_spec(
        "  initContainers:\n  - {name: init, image: busybox:1.36}\n  containers:\n  - {name: app, image: busybox:1.36}\n  tolerations:\n  - {key: a, operator: Exists, effect: NoExecute, tolerationSeconds: 10}\n",
    ))
}

fn update_errors(old: &Pod, new: &Pod) -> Vec<String> {
    validate_pod_update(old, new)
        .err()
        .map(|e| e.errors.iter().map(ToString::to_string).collect())
        .unwrap_or_default()
}

fn spec_mut(p: &mut Pod) -> &mut podvisor_api::k8s_openapi::api::core::v1::PodSpec {
    p.spec.as_mut().unwrap()
}

const FORBIDDEN_PREFIX: &str = "spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)\n";

#[test]
fn m11_unchanged_pod_is_a_valid_update() {
    assert!(update_errors(&base(), &base()).is_empty());
}

#[test]
fn m11_image_is_mutable() {
    let old = base();
    let mut new = base();
    spec_mut(&mut new).containers[0].image = Some("busybox:1.37".into());
    spec_mut(&mut new).init_containers.as_mut().unwrap()[0].image = Some("busybox:1.37".into());
    assert!(update_errors(&old, &new).is_empty());
    spec_mut(&mut new).containers[0].image = Some(String::new());
    assert_eq!(
        update_errors(&old, &new)[0],
        "spec.containers[0].image: Required value"
    );
}

#[test]
fn m11_containers_may_not_be_added_or_removed() {
    let old = base();
    let mut new = base();
    let extra = spec_mut(&mut new).containers[0].clone();
    spec_mut(&mut new)
        .containers
        .push(podvisor_api::k8s_openapi::api::core::v1::Container {
            name: "second".into(),
            ..extra
        });
    assert_eq!(
        update_errors(&old, &new),
        ["spec.containers: Forbidden: pod updates may not add or remove containers"]
    );
}

#[test]
fn m11_active_deadline_seconds_rules() {
    let with_ads = |v: Option<i64>| {
        let mut p = base();
        spec_mut(&mut p).active_deadline_seconds = v;
        p
    };
    // nil -> value, and lowering, are allowed.
    assert!(update_errors(&with_ads(None), &with_ads(Some(60))).is_empty());
    assert!(update_errors(&with_ads(Some(60)), &with_ads(Some(30))).is_empty());
    assert_eq!(
        update_errors(&with_ads(Some(30)), &with_ads(Some(60))),
        [
            "spec.activeDeadlineSeconds: Invalid value: 60: must be less than or equal to previous value"
        ]
    );
    assert_eq!(
        update_errors(&with_ads(Some(30)), &with_ads(None)),
        [
            "spec.activeDeadlineSeconds: Invalid value: \"null\": must not update from a positive integer to nil value"
        ]
    );
    assert_eq!(
        update_errors(&with_ads(Some(30)), &with_ads(Some(-1))),
        [
            "spec.activeDeadlineSeconds: Invalid value: -1: must be between 1 and 2147483647, inclusive",
            "spec.activeDeadlineSeconds: Invalid value: -1: must be between 0 and 2147483647, inclusive",
        ]
    );
}

#[test]
fn m11_tolerations_only_additions() {
    let old = base();
    let mut added = base();
    spec_mut(&mut added)
        .tolerations
        .as_mut()
        .unwrap()
        .push(Toleration {
            key: Some("b".into()),
            operator: Some("Exists".into()),
            ..Default::default()
        });
    assert!(update_errors(&old, &added).is_empty());
    // tolerationSeconds of an existing toleration may change.
    let mut seconds = base();
    spec_mut(&mut seconds).tolerations.as_mut().unwrap()[0].toleration_seconds = Some(5);
    assert!(update_errors(&old, &seconds).is_empty());
    let mut removed = base();
    spec_mut(&mut removed).tolerations = None;
    assert_eq!(
        update_errors(&old, &removed),
        [
            "spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds"
        ]
    );
}

#[test]
fn m11_termination_grace_period_only_from_negative_to_1() {
    let with_grace = |g: i64| {
        let mut p = base();
        spec_mut(&mut p).termination_grace_period_seconds = Some(g);
        p
    };
    assert!(update_errors(&with_grace(-1), &with_grace(1)).is_empty());
    let errs = update_errors(&with_grace(30), &with_grace(10));
    assert_eq!(errs.len(), 1);
    assert!(errs[0].starts_with(FORBIDDEN_PREFIX), "{}", errs[0]);
    assert!(
        errs[0].contains("spec.terminationGracePeriodSeconds: 30"),
        "{}",
        errs[0]
    );
    assert!(
        errs[0].contains("spec.terminationGracePeriodSeconds: 10"),
        "{}",
        errs[0]
    );
}

#[test]
fn m11_other_spec_changes_are_forbidden_with_a_diff() {
    let old = base();
    let mut new = base();
    spec_mut(&mut new).restart_policy = Some("Never".into());
    spec_mut(&mut new).containers[0].command = Some(vec!["sleep".into()]);
    let errs = update_errors(&old, &new);
    assert_eq!(
        errs,
        [format!(
            "{FORBIDDEN_PREFIX}+ spec.containers[0].command: [\"sleep\"]\n- spec.restartPolicy: \"Always\"\n+ spec.restartPolicy: \"Never\""
        )]
    );
}

#[test]
fn m11_scheduling_gates_only_removals() {
    let gated = pod(&with_spec(
        "  schedulingGates:\n  - name: example.com/wait\n  containers:\n  - {name: app, image: busybox}\n",
    ));
    let mut released = gated.clone();
    spec_mut(&mut released).scheduling_gates = None;
    assert!(update_errors(&gated, &released).is_empty());
    let mut more = gated.clone();
    spec_mut(&mut more).scheduling_gates.as_mut().unwrap().push(
        podvisor_api::k8s_openapi::api::core::v1::PodSchedulingGate {
            name: "example.com/more".into(),
        },
    );
    assert_eq!(
        update_errors(&gated, &more),
        [
            "spec.schedulingGates[1].name: Forbidden: only deletion is allowed, but found new scheduling gate 'example.com/more'"
        ]
    );
    // While gated, node selectors may be added to but not changed.
    let mut selector = gated.clone();
    spec_mut(&mut selector).node_selector = Some([("disk".to_owned(), "ssd".to_owned())].into());
    assert!(update_errors(&gated, &selector).is_empty());
    let mut changed = selector.clone();
    spec_mut(&mut changed).node_selector = Some([("disk".to_owned(), "hdd".to_owned())].into());
    assert_eq!(
        update_errors(&selector, &changed),
        [
            "spec.nodeSelector: Invalid value: map[string]string{\"disk\":\"hdd\"}: only additions to spec.nodeSelector are allowed (no mutations or deletions)"
        ]
    );
}

fn required_affinity(
    terms: &[&[(&str, &str)]],
) -> podvisor_api::k8s_openapi::api::core::v1::Affinity {
    use podvisor_api::k8s_openapi::api::core::v1::{
        Affinity, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    };
    Affinity {
        node_affinity: Some(NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                node_selector_terms: terms
                    .iter()
                    .map(|reqs| NodeSelectorTerm {
                        match_expressions: Some(
                            reqs.iter()
                                .map(|(k, v)| NodeSelectorRequirement {
                                    key: (*k).to_owned(),
                                    operator: "In".to_owned(),
                                    values: Some(vec![(*v).to_owned()]),
                                })
                                .collect(),
                        ),
                        match_fields: None,
                    })
                    .collect(),
            }),
            ..NodeAffinity::default()
        }),
        ..Affinity::default()
    }
}

/// M11 (`validateNodeAffinityMutation`): while gated, required node affinity may be set
/// where there was none and its terms may gain requirements; terms may not be added,
/// removed or changed. Once ungated, node affinity is immutable like the rest of the spec.
#[test]
fn m11_gated_pods_may_only_extend_required_node_affinity() {
    let mut gated = base();
    spec_mut(&mut gated).scheduling_gates = Some(vec![
        podvisor_api::k8s_openapi::api::core::v1::PodSchedulingGate {
            name: "example.com/wait".into(),
        },
    ]);
    let mut one = gated.clone();
    spec_mut(&mut one).affinity = Some(required_affinity(&[&[("zone", "a")]]));
    assert!(
        update_errors(&gated, &one).is_empty(),
        "set where there was none"
    );
    let mut extended = gated.clone();
    spec_mut(&mut extended).affinity =
        Some(required_affinity(&[&[("zone", "a"), ("disk", "ssd")]]));
    assert!(
        update_errors(&one, &extended).is_empty(),
        "a requirement added"
    );

    let mut two_terms = gated.clone();
    spec_mut(&mut two_terms).affinity =
        Some(required_affinity(&[&[("zone", "a")], &[("zone", "b")]]));
    assert_eq!(
        update_errors(&one, &two_terms),
        [
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms: Invalid value: []core.NodeSelectorTerm{core.NodeSelectorTerm{MatchExpressions:[]core.NodeSelectorRequirement{core.NodeSelectorRequirement{Key:\"zone\", Operator:\"In\", Values:[]string{\"a\"}}}, MatchFields:[]core.NodeSelectorRequirement(nil)}, core.NodeSelectorTerm{MatchExpressions:[]core.NodeSelectorRequirement{core.NodeSelectorRequirement{Key:\"zone\", Operator:\"In\", Values:[]string{\"b\"}}}, MatchFields:[]core.NodeSelectorRequirement(nil)}}: no additions/deletions to non-empty NodeSelectorTerms list are allowed"
        ]
    );
    let mut changed = gated.clone();
    spec_mut(&mut changed).affinity = Some(required_affinity(&[&[("zone", "b")]]));
    assert_eq!(
        update_errors(&one, &changed),
        [
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]: Invalid value: core.NodeSelectorTerm{MatchExpressions:[]core.NodeSelectorRequirement{core.NodeSelectorRequirement{Key:\"zone\", Operator:\"In\", Values:[]string{\"b\"}}}, MatchFields:[]core.NodeSelectorRequirement(nil)}: only additions are allowed (no mutations or deletions)"
        ]
    );

    // Not gated: any affinity change is a forbidden spec change.
    let ungated = base();
    let mut with_affinity = ungated.clone();
    spec_mut(&mut with_affinity).affinity = Some(required_affinity(&[&[("zone", "a")]]));
    let errs = update_errors(&ungated, &with_affinity);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].starts_with("spec: Forbidden: pod updates may not change fields other than"),
        "{errs:?}"
    );
}

#[test]
fn m11_labels_mutable_but_not_name_or_mirror_annotation() {
    let old = base();
    let mut new = base();
    new.metadata.labels = Some([("tier".to_owned(), "web".to_owned())].into());
    assert!(update_errors(&old, &new).is_empty());
    new.metadata.name = Some("other".into());
    new.metadata.annotations =
        Some([("kubernetes.io/config.mirror".to_owned(), "x".to_owned())].into());
    assert_eq!(
        update_errors(&old, &new),
        [
            "metadata.name: Invalid value: \"other\": field is immutable",
            "metadata.annotations[kubernetes.io/config.mirror]: Invalid value: \"x\": must set spec.nodeName if mirror pod annotation is set",
            "metadata.annotations[kubernetes.io/config.mirror]: Forbidden: may not add mirror pod annotation",
        ]
    );
}

#[test]
fn m11_new_pod_must_still_be_valid() {
    let old = base();
    let mut new = base();
    spec_mut(&mut new).containers[0].image = Some(" busybox".into());
    let errs = update_errors(&old, &new);
    assert!(errs.contains(&"spec.containers[0].image: Invalid value: \" busybox\": must not have leading or trailing whitespace".to_owned()), "{errs:?}");
}

// ---- V13: status updates -----------------------------------------------------

fn status(name: &str, terminated_exit: Option<i32>) -> ContainerStatus {
    ContainerStatus {
        name: name.into(),
        state: Some(match terminated_exit {
            Some(code) => ContainerState {
                terminated: Some(ContainerStateTerminated {
                    exit_code: code,
                    ..Default::default()
                }),
                ..Default::default()
            },
            None => ContainerState {
                running: Some(ContainerStateRunning::default()),
                ..Default::default()
            },
        }),
        ..Default::default()
    }
}

fn with_statuses(
    restart_policy: &str,
    init: Vec<ContainerStatus>,
    regular: Vec<ContainerStatus>,
) -> Pod {
    let mut p = pod(&with_spec(&format!(
        "  restartPolicy: {restart_policy}\n  initContainers:\n  - {{name: init, image: busybox}}\n  - {{name: side, image: busybox, restartPolicy: Always}}\n  containers:\n  - {{name: app, image: busybox}}\n  - {{name: rules, image: busybox, restartPolicy: Never, restartPolicyRules: [{{action: Restart, exitCodes: {{operator: In, values: [42]}}}}]}}\n"
    )));
    p.status = Some(PodStatus {
        init_container_statuses: Some(init),
        container_statuses: Some(regular),
        ..Default::default()
    });
    p
}

fn status_errors(old: &Pod, new: &Pod) -> Vec<String> {
    validate_status_update(old, new)
        .err()
        .map(|e| e.errors.iter().map(ToString::to_string).collect())
        .unwrap_or_default()
}

#[test]
fn v13_terminated_container_may_not_run_again_under_never() {
    let old = with_statuses("Never", vec![], vec![status("app", Some(0))]);
    let new = with_statuses("Never", vec![], vec![status("app", None)]);
    assert_eq!(
        status_errors(&old, &new),
        [
            "status.containerStatuses[0].state: Forbidden: may not be transitioned to non-terminated state"
        ]
    );
}

#[test]
fn v13_restart_allowed_by_policy() {
    let table = [
        ("Always", Some(0), true),
        ("OnFailure", Some(1), true),
        ("OnFailure", Some(0), false),
        ("Never", Some(1), false),
    ];
    for (policy, exit, allowed) in table {
        let old = with_statuses(policy, vec![], vec![status("app", exit)]);
        let new = with_statuses(policy, vec![], vec![status("app", None)]);
        assert_eq!(
            status_errors(&old, &new).is_empty(),
            allowed,
            "{policy} exit {exit:?}"
        );
    }
}

#[test]
fn v13_sidecars_and_matching_restart_rules_may_restart() {
    let old = with_statuses(
        "Never",
        vec![status("init", Some(0)), status("side", Some(137))],
        vec![status("rules", Some(42))],
    );
    let new = with_statuses(
        "Never",
        vec![status("init", None), status("side", None)],
        vec![status("rules", None)],
    );
    assert_eq!(
        status_errors(&old, &new),
        [
            "status.initContainerStatuses[0].state: Forbidden: may not be transitioned to non-terminated state"
        ]
    );
    // An exit code the rule does not match falls back to the container's Never.
    let old = with_statuses("Never", vec![], vec![status("rules", Some(1))]);
    let new = with_statuses("Never", vec![], vec![status("rules", None)]);
    assert_eq!(status_errors(&old, &new).len(), 1);
}

#[test]
fn v13_node_name_may_not_change_in_a_status_update() {
    let old = with_statuses("Always", vec![], vec![]);
    let mut new = old.clone();
    spec_mut(&mut new).node_name = Some("other".into());
    assert_eq!(
        status_errors(&old, &new),
        ["status.nodeName: Forbidden: may not be changed directly"]
    );
}

#[test]
fn m11_no_new_finalizers_on_a_pod_being_deleted() {
    use podvisor_api::k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    let mut old = base();
    old.metadata.finalizers = Some(vec!["example.com/a".into()]);
    let mut new = old.clone();
    new.metadata.finalizers = Some(vec!["example.com/a".into(), "example.com/b".into()]);
    // Before the deletion, finalizers come and go freely.
    assert!(update_errors(&old, &new).is_empty());
    let at: podvisor_api::k8s_openapi::jiff::Timestamp = "2025-01-01T00:00:00Z".parse().unwrap();
    old.metadata.deletion_timestamp = Some(Time(at));
    new.metadata.deletion_timestamp = Some(Time(at));
    assert_eq!(
        update_errors(&old, &new),
        [
            "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{\"example.com/b\"}"
        ]
    );
    // Removing them is what finishes the deletion.
    new.metadata.finalizers = None;
    assert!(update_errors(&old, &new).is_empty());
}
