//! `--feature-gates` on the commands that validate without a server (`validate`, `simulate`):
//! kube's syntax, a clear error for an unknown gate, and KEP-5532's `RestartAllContainers`
//! refused without `RestartAllContainersOnContainerExits` and simulated with it.

use std::process::{Command, Output};

const EXAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../examples/restart-all.yaml"
);
const SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../examples/scripts/restart-all.yaml"
);
const GATE: &str = "RestartAllContainersOnContainerExits=true";

fn podvisor(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_podvisor"))
        .args(args)
        .output()
        .expect("podvisor runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn kep5532_validate_follows_the_gate() {
    let off = podvisor(&["validate", EXAMPLE]);
    assert_eq!(off.status.code(), Some(1));
    assert_eq!(
        text(&off.stderr).trim(),
        "The Pod \"restart-all\" is invalid: spec.containers[0].restartPolicyRules[0].action: Unsupported value: \"RestartAllContainers\": supported values: \"Restart\"\n\
         hint: the restart rule action RestartAllContainers needs the alpha feature gate \
         RestartAllContainersOnContainerExits: pass \
         --feature-gates=RestartAllContainersOnContainerExits=true to podvisor run, serve, \
         simulate, validate, lint or apply (as the same flag of kube-apiserver and the kubelet)"
    );
    let on = podvisor(&["validate", "--feature-gates", GATE, EXAMPLE]);
    assert_eq!(on.status.code(), Some(0), "{}", text(&on.stderr));
    assert!(!text(&on.stderr).contains("hint:"), "{}", text(&on.stderr));
    assert!(text(&on.stdout).starts_with("pod/restart-all valid ("));
}

#[test]
fn kep5532_an_unknown_gate_is_a_usage_error_naming_the_known_ones() {
    let out = podvisor(&["validate", "--feature-gates", "RestartAll=true", EXAMPLE]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains(
            "invalid value 'RestartAll=true' for '--feature-gates <FEATURE_GATES>': unrecognized feature gate: RestartAll (known gates: RestartAllContainersOnContainerExits)"
        ),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn kep5532_simulate_restarts_the_pod_in_place_with_the_gate() {
    let out = podvisor(&[
        "simulate",
        EXAMPLE,
        "--script",
        SCRIPT,
        "--feature-gates",
        GATE,
        "--for",
        "60s",
        "-o",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let records: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let restarting = records
        .iter()
        .filter(|r| r["conditions"]["AllContainersRestarting"] == "True")
        .count();
    assert!(restarting >= 2, "{records:?}");
    let last = records
        .iter()
        .rev()
        .find(|r| r["phase"].is_string())
        .unwrap();
    assert_eq!(last["phase"], "Succeeded", "{last}");
    let off = podvisor(&["simulate", EXAMPLE, "--script", SCRIPT, "--for", "60s"]);
    assert_eq!(off.status.code(), Some(2), "refused without the gate");
}
