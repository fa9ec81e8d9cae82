//! `--feature-gates` (kube's syntax) and what `RestartAllContainersOnContainerExits`
//! (KEP-5532, alpha in 1.35) changes in validation: the `RestartAllContainers` action, and
//! restart rules on sidecars. Messages are the API server's.

use crate::common;

use common::{pod, with_spec};
use podvisor_api::{
    Feature, FeatureGateError, FeatureGates, validate_pod, validate_pod_update,
    validate_pod_with_gates,
};

fn on() -> FeatureGates {
    FeatureGates::parse("RestartAllContainersOnContainerExits=true").expect("a known gate")
}

fn errors_with(yaml: &str, gates: FeatureGates) -> Vec<String> {
    match validate_pod_with_gates(&pod(yaml), gates) {
        Ok(()) => Vec::new(),
        Err(e) => e.errors.iter().map(ToString::to_string).collect(),
    }
}

/// A pod with a plain init container, a sidecar and an app, each with the given extra fields.
fn manifest(init: &str, sidecar: &str, app: &str) -> String {
    with_spec(&format!(
        "  restartPolicy: Never\n  initContainers:\n  - name: setup\n    image: busybox\n{init}  - name: watcher\n    image: busybox\n    restartPolicy: Always\n{sidecar}  containers:\n  - name: app\n    image: busybox\n{app}"
    ))
}

const RESTART_ALL_88: &str = "    restartPolicyRules:\n    - {action: RestartAllContainers, exitCodes: {operator: In, values: [88]}}\n";

#[test]
fn kep5532_gates_parse_kube_syntax() {
    assert_eq!(FeatureGates::parse(""), Ok(FeatureGates::default()));
    assert!(!FeatureGates::default().restart_all_containers());
    assert!(on().restart_all_containers());
    // Spaces, empty pairs, Go's bool spellings, and the last pair wins.
    let g = FeatureGates::parse(
        " RestartAllContainersOnContainerExits = T ,, RestartAllContainersOnContainerExits=0",
    )
    .unwrap();
    assert!(!g.restart_all_containers());
    let g = FeatureGates::parse("RestartAllContainersOnContainerExits=TRUE,").unwrap();
    assert!(g.enabled(Feature::RestartAllContainersOnContainerExits));
    assert_eq!(g.to_flag(), "RestartAllContainersOnContainerExits=true");
}

#[test]
fn kep5532_bad_gates_are_clear_errors() {
    let err = FeatureGates::parse("RestartAllContainers=true").unwrap_err();
    assert_eq!(
        err.to_string(),
        "unrecognized feature gate: RestartAllContainers (known gates: RestartAllContainersOnContainerExits)"
    );
    assert!(matches!(
        FeatureGates::parse("RestartAllContainersOnContainerExits"),
        Err(FeatureGateError::MissingValue(_))
    ));
    assert_eq!(
        FeatureGates::parse("RestartAllContainersOnContainerExits=yes")
            .unwrap_err()
            .to_string(),
        "invalid value of RestartAllContainersOnContainerExits=yes, err: strconv.ParseBool: parsing \"yes\": invalid syntax (use true or false)"
    );
}

#[test]
fn kep5532_gate_off_refuses_the_action_and_sidecar_rules() {
    let m = manifest(
        RESTART_ALL_88
            .replace(
                "    restartPolicyRules",
                "    restartPolicy: Never\n    restartPolicyRules",
            )
            .as_str(),
        RESTART_ALL_88,
        "",
    );
    assert_eq!(
        errors_with(&m, FeatureGates::default()),
        [
            "spec.initContainers[0].restartPolicyRules[0].action: Unsupported value: \"RestartAllContainers\": supported values: \"Restart\"",
            "spec.initContainers[1].restartPolicyRules: Forbidden: restartPolicyRules are not allowed for init containers with restart policy Always",
        ]
    );
    // `validate_pod` is the default gates.
    assert!(validate_pod(&pod(&m)).is_err());
}

#[test]
fn kep5532_gate_on_allows_the_action_on_every_container_kind() {
    let with_policy = format!("    restartPolicy: Never\n{RESTART_ALL_88}");
    let m = manifest(&with_policy, RESTART_ALL_88, &with_policy);
    assert_eq!(errors_with(&m, on()), Vec::<String>::new());
    // A sidecar may also carry a `Restart` rule with the gate on.
    let m = manifest(
        "",
        "    restartPolicyRules:\n    - {action: Restart, exitCodes: {operator: In, values: [1]}}\n",
        "",
    );
    assert_eq!(errors_with(&m, on()), Vec::<String>::new());
}

#[test]
fn kep5532_gate_on_still_checks_the_rules() {
    let m = manifest(
        "",
        "    restartPolicyRules:\n    - {action: Reboot, exitCodes: {operator: In, values: [1]}}\n    - {action: RestartAllContainers}\n",
        RESTART_ALL_88,
    );
    assert_eq!(
        errors_with(&m, on()),
        [
            "spec.containers[0].restartPolicy: Required value: must specify restartPolicy when restart rules are used",
            "spec.initContainers[1].restartPolicyRules[0].action: Unsupported value: \"Reboot\": supported values: \"Restart\", \"RestartAllContainers\"",
            "spec.initContainers[1].restartPolicyRules[1].exitCodes: Required value: must be specified",
        ]
    );
}

#[test]
fn kep5532_an_update_keeps_what_the_stored_pod_uses() {
    // Created with the gate on; an update (here an image change) is validated with the
    // gates off, as `restartAllContainersActionInUse` allows.
    let m = manifest("", RESTART_ALL_88, "");
    let old = pod(&m);
    assert!(validate_pod_with_gates(&old, on()).is_ok());
    let mut new = old.clone();
    new.spec.as_mut().unwrap().containers[0].image = Some("busybox:1.36".into());
    assert!(
        validate_pod_update(&old, &new).is_ok(),
        "{:?}",
        validate_pod_update(&old, &new)
    );
}
