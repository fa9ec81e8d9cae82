//! Container-level rules of the behaviour reference, section 11 (V1-V8).
//! Messages are Kubernetes' own.

use crate::common;

use common::{assert_errors, assert_has_error, errors, pod_with_all_fields, with_spec};
use podvisor_api::validate_pod;

const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

/// A pod whose single container has the given extra YAML (indented 4).
fn container(extra: &str) -> String {
    with_spec(&format!(
        "  containers:\n  - name: app\n    image: busybox\n    command: [sh]\n{extra}"
    ))
}

// ---- V1: container names -------------------------------------------------

#[test]
fn v1_container_name_required() {
    assert_errors(
        &with_spec("  containers:\n  - name: \"\"\n    image: busybox\n"),
        &["spec.containers[0].name: Required value"],
    );
}

#[test]
fn v1_container_name_must_be_dns_label() {
    let long = "a".repeat(64);
    let cases: [(&str, &[String]); 4] = [
        (
            "App",
            &[format!(
                "spec.containers[0].name: Invalid value: \"App\": {LABEL_MSG}"
            )],
        ),
        (
            "my_app",
            &[format!(
                "spec.containers[0].name: Invalid value: \"my_app\": {LABEL_MSG}"
            )],
        ),
        (
            "-app",
            &[format!(
                "spec.containers[0].name: Invalid value: \"-app\": {LABEL_MSG}"
            )],
        ),
        (
            &long,
            &[format!(
                "spec.containers[0].name: Invalid value: \"{long}\": must be no more than 63 characters"
            )],
        ),
    ];
    for (name, want) in cases {
        let got = errors(&with_spec(&format!(
            "  containers:\n  - name: \"{name}\"\n    image: busybox\n"
        )));
        assert_eq!(got, want, "name {name:?}");
    }
    assert!(
        errors(&with_spec(
            "  containers:\n  - name: a-1\n    image: busybox\n"
        ))
        .is_empty()
    );
}

// ---- V2: uniqueness, containers required -----------------------------------

#[test]
fn v2_containers_required() {
    assert_errors(
        &with_spec("  containers: []\n"),
        &["spec.containers: Required value"],
    );
}

#[test]
fn v2_container_names_unique_across_regular_and_init() {
    assert_errors(
        &with_spec(
            "  initContainers:\n  - {name: app, image: busybox}\n  containers:\n  - {name: app, image: busybox}\n  - {name: app, image: busybox}\n",
        ),
        &[
            "spec.containers[1].name: Duplicate value: \"app\"",
            "spec.initContainers[0].name: Duplicate value: \"app\"",
        ],
    );
}

#[test]
fn v2_ephemeral_container_names_unique_across_all() {
    assert_has_error(
        &with_spec(
            "  containers:\n  - {name: app, image: busybox}\n  ephemeralContainers:\n  - {name: app, image: busybox}\n",
        ),
        "spec.ephemeralContainers[0].name: Duplicate value: \"app\"",
    );
}

// ---- V3: image, pull policy, termination message policy --------------------

#[test]
fn v3_image_required() {
    assert_errors(
        &with_spec("  containers:\n  - name: app\n"),
        &["spec.containers[0].image: Required value"],
    );
}

#[test]
fn v3_image_without_surrounding_whitespace() {
    assert_errors(
        &with_spec("  containers:\n  - name: app\n    image: \" busybox\"\n"),
        &[
            "spec.containers[0].image: Invalid value: \" busybox\": must not have leading or trailing whitespace",
        ],
    );
}

#[test]
fn v3_image_pull_policy_and_termination_message_policy_supported() {
    assert_errors(
        &container("    imagePullPolicy: Sometimes\n    terminationMessagePolicy: Stdout\n"),
        &[
            "spec.containers[0].terminationMessagePolicy: Unsupported value: \"Stdout\": supported values: \"File\", \"FallbackToLogsOnError\"",
            "spec.containers[0].imagePullPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"IfNotPresent\", \"Never\"",
        ],
    );
}

// ---- V4: ports -------------------------------------------------------------

#[test]
fn v4_port_fields() {
    let table: [(&str, &str); 7] = [
        (
            "- {containerPort: 80, name: Http}",
            "spec.containers[0].ports[0].name: Invalid value: \"Http\": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
        ),
        (
            "- {containerPort: 80, name: a-very-long-port-name}",
            "spec.containers[0].ports[0].name: Invalid value: \"a-very-long-port-name\": must be no more than 15 characters",
        ),
        (
            "- {containerPort: 80, name: \"8080\"}",
            "spec.containers[0].ports[0].name: Invalid value: \"8080\": must contain at least one letter (a-z)",
        ),
        (
            "- {containerPort: 0}",
            "spec.containers[0].ports[0].containerPort: Required value",
        ),
        (
            "- {containerPort: 65536}",
            "spec.containers[0].ports[0].containerPort: Invalid value: 65536: must be between 1 and 65535, inclusive",
        ),
        (
            "- {containerPort: 80, hostPort: -1}",
            "spec.containers[0].ports[0].hostPort: Invalid value: -1: must be between 1 and 65535, inclusive",
        ),
        (
            "- {containerPort: 80, protocol: HTTP}",
            "spec.containers[0].ports[0].protocol: Unsupported value: \"HTTP\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
        ),
    ];
    for (ports, want) in table {
        assert_errors(&container(&format!("    ports:\n    {ports}\n")), &[want]);
    }
}

#[test]
fn v4_port_names_unique_within_container() {
    assert_errors(
        &container(
            "    ports:\n    - {containerPort: 80, name: web}\n    - {containerPort: 81, name: web}\n",
        ),
        &["spec.containers[0].ports[1].name: Duplicate value: \"web\""],
    );
}

#[test]
fn v4_host_ports_collide_across_regular_containers() {
    assert_errors(
        &with_spec(
            "  containers:\n  - name: a\n    image: busybox\n    ports: [{containerPort: 80, hostPort: 8080}]\n  - name: b\n    image: busybox\n    ports: [{containerPort: 81, hostPort: 8080}, {containerPort: 82, hostPort: 8080, protocol: UDP}]\n",
        ),
        &["spec.containers[1].ports[0].hostPort: Duplicate value: \"TCP//8080\""],
    );
}

#[test]
fn v4_init_container_host_ports_checked_one_at_a_time() {
    // The same host port in an init container and a regular container (or
    // two init containers) is fine: they never run together.
    assert!(errors(&with_spec(
        "  initContainers:\n  - name: i\n    image: busybox\n    ports: [{containerPort: 80, hostPort: 8080}]\n  - name: j\n    image: busybox\n    ports: [{containerPort: 80, hostPort: 8080}]\n  containers:\n  - name: a\n    image: busybox\n    ports: [{containerPort: 80, hostPort: 8080}]\n",
    ))
    .is_empty());
    // Within one init container it collides; Kubernetes reports index 0.
    assert_errors(
        &with_spec(
            "  initContainers:\n  - {name: i, image: busybox}\n  - name: j\n    image: busybox\n    ports: [{containerPort: 80, hostPort: 9000}, {containerPort: 81, hostPort: 9000}]\n  containers:\n  - {name: a, image: busybox}\n",
        ),
        &["spec.initContainers[0].ports[1].hostPort: Duplicate value: \"TCP//9000\""],
    );
}

#[test]
fn v4_host_network_host_port_must_match_container_port() {
    assert_errors(
        &with_spec(
            "  hostNetwork: true\n  containers:\n  - name: a\n    image: busybox\n    ports: [{containerPort: 80}, {containerPort: 81, hostPort: 9090}]\n",
        ),
        &[
            "spec.containers[0].ports[1].hostPort: Invalid value: 9090: must match `containerPort` when `hostNetwork` is true",
        ],
    );
}

// ---- V5: probes ------------------------------------------------------------

#[test]
fn v5_liveness_success_threshold_must_be_1() {
    assert_errors(
        &container(
            "    livenessProbe:\n      exec: {command: [\"true\"]}\n      successThreshold: 2\n",
        ),
        &["spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1"],
    );
}

#[test]
fn v5_startup_success_threshold_must_be_1() {
    assert_errors(
        &container(
            "    startupProbe:\n      exec: {command: [\"true\"]}\n      successThreshold: 3\n",
        ),
        &["spec.containers[0].startupProbe.successThreshold: Invalid value: 3: must be 1"],
    );
}

#[test]
fn v5_readiness_success_threshold_may_exceed_1() {
    assert!(
        errors(&container(
            "    readinessProbe:\n      exec: {command: [\"true\"]}\n      successThreshold: 3\n"
        ))
        .is_empty()
    );
}

#[test]
fn v5_probe_needs_exactly_one_handler() {
    assert_errors(
        &container("    readinessProbe:\n      periodSeconds: 5\n"),
        &["spec.containers[0].readinessProbe: Required value: must specify a handler type"],
    );
    assert_errors(
        &container(
            "    readinessProbe:\n      exec: {command: [\"true\"]}\n      tcpSocket: {port: 80}\n      grpc: {port: 90}\n",
        ),
        &[
            "spec.containers[0].readinessProbe.tcpSocket: Forbidden: may not specify more than 1 handler type",
            "spec.containers[0].readinessProbe.grpc: Forbidden: may not specify more than 1 handler type",
        ],
    );
}

#[test]
fn v5_probe_numbers_non_negative() {
    assert_errors(
        &container(
            "    readinessProbe:\n      exec: {command: [\"true\"]}\n      initialDelaySeconds: -1\n      timeoutSeconds: -2\n      failureThreshold: -3\n",
        ),
        &[
            "spec.containers[0].readinessProbe.initialDelaySeconds: Invalid value: -1: must be greater than or equal to 0",
            "spec.containers[0].readinessProbe.timeoutSeconds: Invalid value: -2: must be greater than or equal to 0",
            "spec.containers[0].readinessProbe.failureThreshold: Invalid value: -3: must be greater than or equal to 0",
        ],
    );
}

#[test]
fn v5_probe_termination_grace_period() {
    assert_errors(
        &container(
            "    livenessProbe:\n      exec: {command: [\"true\"]}\n      terminationGracePeriodSeconds: 0\n",
        ),
        &[
            "spec.containers[0].livenessProbe.terminationGracePeriodSeconds: Invalid value: 0: must be greater than 0",
        ],
    );
    assert_errors(
        &container(
            "    readinessProbe:\n      exec: {command: [\"true\"]}\n      terminationGracePeriodSeconds: 5\n",
        ),
        &[
            "spec.containers[0].readinessProbe.terminationGracePeriodSeconds: Invalid value: 5: must not be set for readinessProbes",
        ],
    );
}

#[test]
fn v5_handler_contents() {
    let table: [(&str, &str); 5] = [
        (
            "exec: {command: []}",
            "spec.containers[0].livenessProbe.exec.command: Required value",
        ),
        (
            "httpGet: {port: 80, scheme: FTP}",
            "spec.containers[0].livenessProbe.httpGet.scheme: Unsupported value: \"FTP\": supported values: \"HTTP\", \"HTTPS\"",
        ),
        (
            "httpGet: {port: Web}",
            "spec.containers[0].livenessProbe.httpGet.port: Invalid value: \"Web\": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
        ),
        (
            "httpGet: {port: 80, httpHeaders: [{name: \"X Bad\", value: v}]}",
            "spec.containers[0].livenessProbe.httpGet.httpHeaders: Invalid value: \"X Bad\": a valid HTTP header must consist of alphanumeric characters or '-' (e.g. 'X-Header-Name', regex used for validation is '[-A-Za-z0-9]+')",
        ),
        (
            "grpc: {port: 0}",
            "spec.containers[0].livenessProbe.grpc.port: Invalid value: 0: must be between 1 and 65535, inclusive",
        ),
    ];
    for (handler, want) in table {
        assert_errors(
            &container(&format!("    livenessProbe:\n      {handler}\n")),
            &[want],
        );
    }
    // A named port is fine for HTTP and TCP probes.
    assert!(
        errors(&container(
            "    livenessProbe:\n      tcpSocket: {port: web}\n"
        ))
        .is_empty()
    );
}

// ---- V6: init containers ---------------------------------------------------

#[test]
fn v6_regular_init_containers_may_not_have_probes_or_lifecycle() {
    let forbidden = "may not be set for init containers without restartPolicy=Always";
    assert_errors(
        &with_spec(
            "  initContainers:\n  - name: init\n    image: busybox\n    lifecycle:\n      preStop: {exec: {command: [x]}}\n    livenessProbe: {exec: {command: [x]}}\n    readinessProbe: {exec: {command: [x]}}\n    startupProbe: {exec: {command: [x]}}\n  containers:\n  - {name: app, image: busybox}\n",
        ),
        &[
            &format!("spec.initContainers[0].lifecycle: Forbidden: {forbidden}"),
            &format!("spec.initContainers[0].livenessProbe: Forbidden: {forbidden}"),
            &format!("spec.initContainers[0].readinessProbe: Forbidden: {forbidden}"),
            &format!("spec.initContainers[0].startupProbe: Forbidden: {forbidden}"),
        ],
    );
}

#[test]
fn v6_sidecars_get_regular_probe_validation() {
    let sidecar = |probe: &str| {
        with_spec(&format!(
            "  initContainers:\n  - name: side\n    image: busybox\n    restartPolicy: Always\n{probe}  containers:\n  - {{name: app, image: busybox}}\n"
        ))
    };
    assert!(errors(&sidecar("    livenessProbe: {exec: {command: [x]}}\n    readinessProbe: {exec: {command: [x]}}\n")).is_empty());
    assert_errors(
        &sidecar("    livenessProbe: {exec: {command: [x]}, successThreshold: 2}\n"),
        &["spec.initContainers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1"],
    );
}

// ---- V7: container restartPolicy and restartPolicyRules -------------------

fn restart(kind: &str, fields: &str) -> String {
    let c = format!("  - name: c\n    image: busybox\n{fields}");
    match kind {
        "init" => with_spec(&format!(
            "  initContainers:\n{c}  containers:\n  - {{name: app, image: busybox}}\n"
        )),
        _ => with_spec(&format!("  containers:\n{c}")),
    }
}

#[test]
fn v7_container_restart_policy_values() {
    for kind in ["init", "regular"] {
        for policy in ["Always", "OnFailure", "Never"] {
            let m = restart(kind, &format!("    restartPolicy: {policy}\n"));
            assert!(errors(&m).is_empty(), "{kind} {policy}: {:?}", errors(&m));
        }
    }
    assert_errors(
        &restart("regular", "    restartPolicy: Sometimes\n"),
        &[
            "spec.containers[0].restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"Never\", \"OnFailure\"",
        ],
    );
    assert_errors(
        &restart("init", "    restartPolicy: Sometimes\n"),
        &[
            "spec.initContainers[0].restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"Never\", \"OnFailure\"",
        ],
    );
}

#[test]
fn v7_restart_rules_table() {
    let rule = |r: &str| format!("    restartPolicy: Never\n    restartPolicyRules:\n    - {r}\n");
    let table: [(String, &str, Vec<String>); 6] = [
        (rule("{action: Restart, exitCodes: {operator: In, values: [42]}}"), "regular", vec![]),
        (rule("{action: Restart, exitCodes: {operator: NotIn, values: []}}"), "init", vec![]),
        (
            "    restartPolicyRules:\n    - {action: Restart, exitCodes: {operator: In, values: [1]}}\n".into(),
            "regular",
            vec!["spec.containers[0].restartPolicy: Required value: must specify restartPolicy when restart rules are used".into()],
        ),
        (
            rule("{action: RestartAllContainers, exitCodes: {operator: In, values: [1]}}"),
            "regular",
            vec!["spec.containers[0].restartPolicyRules[0].action: Unsupported value: \"RestartAllContainers\": supported values: \"Restart\"".into()],
        ),
        (
            rule("{action: Restart, exitCodes: {operator: Equals, values: [1]}}"),
            "init",
            vec!["spec.initContainers[0].restartPolicyRules[0].exitCodes.operator: Unsupported value: \"Equals\": supported values: \"In\", \"NotIn\"".into()],
        ),
        (
            rule("{action: Restart}"),
            "regular",
            vec!["spec.containers[0].restartPolicyRules[0].exitCodes: Required value: must be specified".into()],
        ),
    ];
    for (fields, kind, want) in table {
        assert_eq!(errors(&restart(kind, &fields)), want, "{kind}:\n{fields}");
    }
}

#[test]
fn v7_duplicate_exit_codes_are_allowed() {
    let m = restart(
        "regular",
        "    restartPolicy: Never\n    restartPolicyRules:\n    - {action: Restart, exitCodes: {operator: In, values: [3, 4, 3]}}\n",
    );
    assert_eq!(errors(&m), Vec::<String>::new());
}

#[test]
fn v7_more_than_20_rules_is_too_long() {
    let rules = |n: usize| {
        format!(
            "    restartPolicy: Never\n    restartPolicyRules:\n{}",
            "    - {action: Restart, exitCodes: {operator: In, values: [1]}}\n".repeat(n)
        )
    };
    assert!(errors(&restart("regular", &rules(20))).is_empty());
    assert_errors(
        &restart("regular", &rules(21)),
        &["spec.containers[0].restartPolicyRules: Too long: may not be more than 20 bytes"],
    );
    assert_errors(
        &restart("init", &rules(21)),
        &["spec.initContainers[0].restartPolicyRules: Too long: may not be more than 20 bytes"],
    );
}

#[test]
fn v7_restart_rule_values_at_most_255() {
    let values: Vec<String> = (0..256).map(|i| i.to_string()).collect();
    let m = restart(
        "regular",
        &format!(
            "    restartPolicy: Never\n    restartPolicyRules:\n    - {{action: Restart, exitCodes: {{operator: In, values: [{}]}}}}\n",
            values.join(", ")
        ),
    );
    assert_errors(
        &m,
        &[
            "spec.containers[0].restartPolicyRules[0].exitCodes.values: Too long: may not be more than 255 bytes",
        ],
    );
}

#[test]
fn v7_sidecars_may_not_have_restart_rules() {
    assert_errors(
        &restart(
            "init",
            "    restartPolicy: Always\n    restartPolicyRules:\n    - {action: Restart, exitCodes: {operator: In, values: [1]}}\n",
        ),
        &[
            "spec.initContainers[0].restartPolicyRules: Forbidden: restartPolicyRules are not allowed for init containers with restart policy Always",
        ],
    );
}

// ---- V8: lifecycle handlers ------------------------------------------------

#[test]
fn v8_lifecycle_handler_needs_one_type() {
    assert_errors(
        &container(
            "    lifecycle:\n      postStart: {}\n      preStop:\n        exec: {command: [x]}\n        sleep: {seconds: 1}\n",
        ),
        &[
            "spec.containers[0].lifecycle.postStart: Required value: must specify a handler type",
            "spec.containers[0].lifecycle.preStop.sleep: Forbidden: may not specify more than 1 handler type",
        ],
    );
}

#[test]
fn v8_sleep_seconds_within_grace_period_in_1_34_words() {
    let msg = |v: i64, g: i64| {
        format!(
            "spec.containers[0].lifecycle.preStop.sleep: Invalid value: {v}: must be non-negative and less than terminationGracePeriodSeconds ({g})"
        )
    };
    assert_errors(
        &container("    lifecycle:\n      preStop:\n        sleep: {seconds: -1}\n"),
        &[&msg(-1, 30)],
    );
    assert_errors(
        &container("    lifecycle:\n      preStop:\n        sleep: {seconds: 31}\n"),
        &[&msg(31, 30)],
    );
    assert!(
        errors(&container(
            "    lifecycle:\n      preStop:\n        sleep: {seconds: 30}\n"
        ))
        .is_empty()
    );
    let short = with_spec(
        "  terminationGracePeriodSeconds: 5\n  containers:\n  - name: app\n    image: busybox\n    lifecycle:\n      preStop:\n        sleep: {seconds: 10}\n",
    );
    assert_errors(&short, &[&msg(10, 5)]);
}

#[test]
fn v8_sleep_zero_is_valid_by_default() {
    assert_eq!(
        errors(&container(
            "    lifecycle:\n      preStop:\n        sleep: {seconds: 0}\n      postStart:\n        sleep: {seconds: 0}\n",
        )),
        Vec::<String>::new()
    );
}

#[test]
fn v8_tcp_socket_and_http_handlers_accepted() {
    assert!(errors(&container("    lifecycle:\n      postStart:\n        tcpSocket: {port: 80}\n      preStop:\n        httpGet: {port: 80}\n")).is_empty());
}

#[test]
fn t3_stop_signal_is_dropped_on_create_not_rejected() {
    // ContainerStopSignals is off in 1.35: the field goes, the pod is valid.
    let m = with_spec(
        "  initContainers:\n  - name: side\n    image: busybox\n    restartPolicy: Always\n    lifecycle:\n      stopSignal: SIGFOO\n  containers:\n  - name: app\n    image: busybox\n    lifecycle:\n      stopSignal: SIGUSR1\n      preStop:\n        sleep: {seconds: 1}\n",
    );
    assert_eq!(errors(&m), Vec::<String>::new());
    let spec = common::pod(&m).spec.unwrap();
    let app = spec.containers[0].lifecycle.as_ref().unwrap();
    assert_eq!(app.stop_signal, None);
    assert!(app.pre_stop.is_some(), "the rest of the lifecycle stays");
    let side = &spec.init_containers.unwrap()[0];
    assert_eq!(side.lifecycle.as_ref().unwrap().stop_signal, None);
}

/// The stop-signal checks themselves, for a pod that kept the field (an
/// update of a pod stored while the gate was on).
fn stop_signal_errors(yaml: &str) -> Vec<String> {
    match validate_pod(&pod_with_all_fields(yaml)) {
        Ok(()) => Vec::new(),
        Err(e) => e.errors.iter().map(ToString::to_string).collect(),
    }
}

#[test]
fn t3_stop_signal_requires_os_and_a_known_signal_when_kept() {
    assert_eq!(
        stop_signal_errors(&container("    lifecycle:\n      stopSignal: SIGUSR1\n")),
        [
            "spec.containers[0].lifecycle.stopSignal: Forbidden: may not be set for containers with empty `spec.os.name`",
        ],
    );
    let linux = |sig: &str| {
        with_spec(&format!(
            "  os: {{name: linux}}\n  containers:\n  - name: app\n    image: busybox\n    lifecycle:\n      stopSignal: {sig}\n"
        ))
    };
    assert!(stop_signal_errors(&linux("SIGQUIT")).is_empty());
    assert!(stop_signal_errors(&linux("SIGRTMIN+3")).is_empty());
    let got = stop_signal_errors(&linux("SIGFOO"));
    assert_eq!(got.len(), 1);
    assert!(got[0].starts_with("spec.containers[0].lifecycle.stopSignal: Unsupported value: \"SIGFOO\": supported values: \"SIGABRT\", \"SIGALRM\","), "{got:?}");
}
