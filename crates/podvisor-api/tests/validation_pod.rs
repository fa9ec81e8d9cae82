//! Pod-level rules of the behaviour reference, section 11 (V9-V12), plus
//! metadata, resources and the full error summary. Messages are
//! Kubernetes' own.

use crate::common;

use common::{assert_errors, errors, pod, with_spec};
use podvisor_api::k8s_openapi::api::core::v1::Pod;
use podvisor_api::{decode_pods, validate_pod};

const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

/// A pod whose single container has the given extra YAML (indented 4).
fn container(extra: &str) -> String {
    with_spec(&format!(
        "  containers:\n  - name: app\n    image: busybox\n    command: [sh]\n{extra}"
    ))
}

// ---- V9: pod-level fields --------------------------------------------------

#[test]
fn v9_restart_policy_supported() {
    assert_errors(
        &with_spec("  restartPolicy: Sometimes\n  containers:\n  - {name: app, image: busybox}\n"),
        &[
            "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"",
        ],
    );
}

#[test]
fn v9_grace_period_and_policies_required_without_defaults() {
    let text = with_spec(
        "  containers:\n  - {name: app, image: busybox, imagePullPolicy: Always, terminationMessagePolicy: File}\n",
    );
    let mut pods = decode_pods(&text, "raw.yaml").unwrap();
    pods[0].metadata.namespace = Some("default".into());
    let got: Vec<String> = validate_pod(&pods[0])
        .unwrap_err()
        .errors
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        got,
        [
            "spec.terminationGracePeriodSeconds: Required value",
            "spec.restartPolicy: Required value",
            "spec.dnsPolicy: Required value",
        ]
    );
}

#[test]
fn v9_active_deadline_seconds_range() {
    for (v, ok) in [
        (0i64, false),
        (1, true),
        (2_147_483_647, true),
        (2_147_483_648, false),
        (-5, false),
    ] {
        let got = errors(&with_spec(&format!(
            "  activeDeadlineSeconds: {v}\n  containers:\n  - {{name: app, image: busybox}}\n"
        )));
        if ok {
            assert!(got.is_empty(), "{v}: {got:?}");
        } else {
            assert_eq!(
                got,
                [format!(
                    "spec.activeDeadlineSeconds: Invalid value: {v}: must be between 1 and 2147483647, inclusive"
                )]
            );
        }
    }
}

#[test]
fn v9_dns_policy_supported() {
    assert_errors(
        &with_spec("  dnsPolicy: Custom\n  containers:\n  - {name: app, image: busybox}\n"),
        &[
            "spec.dnsPolicy: Unsupported value: \"Custom\": supported values: \"ClusterFirstWithHostNet\", \"ClusterFirst\", \"Default\", \"None\"",
        ],
    );
}

#[test]
fn v9_readiness_gates_are_qualified_names() {
    assert_errors(
        &with_spec(
            "  readinessGates:\n  - conditionType: example.com/ready\n  - conditionType: \"not ok\"\n  containers:\n  - {name: app, image: busybox}\n",
        ),
        &[
            "spec.readinessGates[1].conditionType: Invalid value: \"not ok\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
        ],
    );
}

#[test]
fn v9_resize_policy_must_be_not_required_when_pod_never_restarts() {
    assert_errors(
        &with_spec(
            "  restartPolicy: Never\n  containers:\n  - name: app\n    image: busybox\n    resizePolicy:\n    - {resourceName: cpu, restartPolicy: RestartContainer}\n",
        ),
        &[
            "spec.containers[0].resizePolicy: Invalid value: \"RestartContainer\": must be 'NotRequired' when `restartPolicy` is 'Never'",
        ],
    );
}

// ---- V10: volumes and mounts -----------------------------------------------

#[test]
fn v10_mount_must_name_an_existing_volume() {
    assert_errors(
        &container("    volumeMounts:\n    - {name: vol, mountPath: /data}\n"),
        &["spec.containers[0].volumeMounts[0].name: Not found: \"vol\""],
    );
}

#[test]
fn v10_mount_paths_required_and_unique() {
    let m = with_spec(
        "  volumes:\n  - name: v\n  containers:\n  - name: app\n    image: busybox\n    volumeMounts:\n    - {name: v, mountPath: /data}\n    - {name: v, mountPath: /data}\n    - {name: v, mountPath: \"\"}\n",
    );
    assert_errors(
        &m,
        &[
            "spec.containers[0].volumeMounts[1].mountPath: Invalid value: \"/data\": must be unique",
            "spec.containers[0].volumeMounts[2].mountPath: Required value",
        ],
    );
}

#[test]
fn v10_sub_paths() {
    let m = |fields: &str| {
        with_spec(&format!(
            "  volumes:\n  - name: v\n  containers:\n  - name: app\n    image: busybox\n    volumeMounts:\n    - {{name: v, mountPath: /data, {fields}}}\n"
        ))
    };
    assert_errors(
        &m("subPath: /abs"),
        &[
            "spec.containers[0].volumeMounts.subPath: Invalid value: \"/abs\": must be a relative path",
        ],
    );
    assert_errors(
        &m("subPath: a/../b"),
        &[
            "spec.containers[0].volumeMounts.subPath: Invalid value: \"a/../b\": must not contain '..'",
        ],
    );
    assert_errors(
        &m("subPath: a, subPathExpr: $(POD)"),
        &[
            "spec.containers[0].volumeMounts[0].subPathExpr: Invalid value: \"$(POD)\": subPathExpr and subPath are mutually exclusive",
        ],
    );
}

#[test]
fn v10_volume_names_and_sources() {
    let m = with_spec(
        "  volumes:\n  - name: Data\n  - name: a\n  - name: a\n  - name: two\n    emptyDir: {}\n    hostPath: {path: /tmp}\n  - name: hp\n    hostPath: {path: /tmp, type: Folder}\n  - name: cm\n    configMap: {name: \"\"}\n  containers:\n  - name: app\n    image: busybox\n    volumeMounts:\n    - {name: two, mountPath: /two}\n",
    );
    assert_errors(
        &m,
        &[
            &format!("spec.volumes[0].name: Invalid value: \"Data\": {LABEL_MSG}"),
            "spec.volumes[2].name: Duplicate value: \"a\"",
            "spec.volumes[3].hostPath: Forbidden: may not specify more than 1 volume type",
            "spec.volumes[4].hostPath.type: Unsupported value: \"Folder\": supported values: \"\", \"BlockDevice\", \"CharDevice\", \"Directory\", \"DirectoryOrCreate\", \"File\", \"FileOrCreate\", \"Socket\"",
            "spec.volumes[5].configMap.name: Required value",
            "spec.containers[0].volumeMounts[0].name: Not found: \"two\"",
        ],
    );
}

#[test]
fn v10_volume_sources_checked() {
    let m = with_spec(
        "  volumes:\n  - name: s\n    secret: {defaultMode: 1000, items: [{key: k, path: ../x}]}\n  - name: d\n    downwardAPI:\n      items:\n      - {path: f, fieldRef: {fieldPath: spec.nodeName}}\n  - name: p\n    projected:\n      sources:\n      - configMap: {name: c}\n        secret: {name: s}\n  - name: h\n    hostPath: {path: /a/../b}\n  containers:\n  - {name: app, image: busybox}\n",
    );
    assert_errors(
        &m,
        &[
            "spec.volumes[0].secret.secretName: Required value",
            "spec.volumes[0].secret.defaultMode: Invalid value: 1000: must be a number between 0 and 0777 (octal), both inclusive",
            "spec.volumes[0].secret.items[0].path: Invalid value: \"../x\": must not contain '..'",
            "spec.volumes[1].downwardAPI.fieldRef.fieldPath: Unsupported value: \"spec.nodeName\": supported values: \"metadata.annotations\", \"metadata.labels\", \"metadata.name\", \"metadata.namespace\", \"metadata.uid\"",
            "spec.volumes[2].projected.sources[0]: Forbidden: may not specify more than 1 volume type per source",
            "spec.volumes[3].hostPath.path: Invalid value: \"/a/../b\": must not contain '..'",
        ],
    );
}

// ---- V11: env --------------------------------------------------------------

const ENV_NAME_MSG: &str = "a valid environment variable name must consist only of printable ASCII characters other than '='";

#[test]
fn v11_env_names_any_printable_ascii_but_equals() {
    for name in [
        "MY_VAR", "my.var-1", "1VAR", "MY VAR", "..X", "a:b/c~{}", ".",
    ] {
        assert_eq!(
            errors(&container(&format!(
                "    env:\n    - {{name: \"{name}\", value: x}}\n"
            ))),
            Vec::<String>::new(),
            "{name}"
        );
    }
    for name in ["A=B", "tab\\there", "caf\\u00e9"] {
        let got = errors(&container(&format!(
            "    env:\n    - {{name: \"{name}\", value: x}}\n"
        )));
        assert_eq!(got.len(), 1, "{name}: {got:?}");
        assert!(
            got[0].starts_with("spec.containers[0].env[0].name: Invalid value: ")
                && got[0].ends_with(ENV_NAME_MSG),
            "{got:?}"
        );
    }
    assert_errors(
        &container("    env:\n    - {name: \"A=B\", value: x}\n"),
        &[&format!(
            "spec.containers[0].env[0].name: Invalid value: \"A=B\": {ENV_NAME_MSG}"
        )],
    );
    assert_errors(
        &container("    env:\n    - {name: \"\", value: x}\n"),
        &["spec.containers[0].env[0].name: Required value"],
    );
}

#[test]
fn v11_env_from_prefix_any_printable_ascii_but_equals() {
    let m = |prefix: &str| {
        container(&format!(
            "    envFrom:\n    - {{prefix: \"{prefix}\", configMapRef: {{name: cfg}}}}\n"
        ))
    };
    assert_eq!(errors(&m("1 my-")), Vec::<String>::new());
    assert_errors(
        &m("A="),
        &[&format!(
            "spec.containers[0].envFrom[0].prefix: Invalid value: \"A=\": {ENV_NAME_MSG}"
        )],
    );
}

/// A pod with an emptyDir `env` and a hostPath `host` volume, whose
/// container reads `X` from a file key reference with the given fields.
fn file_key_ref(fields: &str) -> String {
    with_spec(&format!(
        "  volumes:\n  - {{name: env, emptyDir: {{}}}}\n  - {{name: host, hostPath: {{path: /tmp}}}}\n  containers:\n  - name: app\n    image: busybox\n    env:\n    - name: X\n      valueFrom:\n        fileKeyRef: {{{fields}}}\n"
    ))
}

#[test]
fn v11_file_key_ref_is_a_source() {
    assert_eq!(
        errors(&file_key_ref(
            "volumeName: env, path: vars.env, key: \"MY KEY\""
        )),
        Vec::<String>::new()
    );
    let p = common::pod(&file_key_ref("volumeName: env, path: vars.env, key: K"));
    let from = p.spec.unwrap().containers[0].env.as_ref().unwrap()[0]
        .value_from
        .clone()
        .unwrap();
    assert!(
        from.file_key_ref.is_some(),
        "EnvFiles is on: the field stays"
    );
}

#[test]
fn v11_file_key_ref_fields() {
    let base = "spec.containers[0].env[0].valueFrom.fileKeyRef";
    let table: [(&str, Vec<String>); 6] = [
        (
            "volumeName: \"\", path: \"\", key: \"\"",
            vec![
                format!("{base}.key: Required value"),
                format!("{base}.path: Required value"),
                format!("{base}.volumeName: Required value"),
            ],
        ),
        (
            "volumeName: env, path: vars.env, key: \"A=B\"",
            vec![format!(
                "{base}.key: Invalid value: \"A=B\": {ENV_NAME_MSG}"
            )],
        ),
        (
            "volumeName: env, path: ../vars.env, key: K",
            vec![format!(
                "{base}.path: Invalid value: \"../vars.env\": must not contain '..'"
            )],
        ),
        (
            "volumeName: other, path: vars.env, key: K",
            vec![format!("{base}.volumeName: Not found: \"other\"")],
        ),
        (
            "volumeName: host, path: vars.env, key: K",
            vec![format!(
                "{base}.volumeName: Invalid value: \"host\": referenced volume must be of type emptyDir"
            )],
        ),
        (
            "volumeName: Env_1, path: vars.env, key: K",
            vec![format!(
                "{base}.volumeName: Invalid value: \"Env_1\": {LABEL_MSG}"
            )],
        ),
    ];
    for (fields, want) in table {
        assert_eq!(errors(&file_key_ref(fields)), want, "{fields}");
    }
}

#[test]
fn v11_value_from_needs_exactly_one_source_and_no_value() {
    let base = "spec.containers[0].env[0].valueFrom";
    let table: [(&str, String); 4] = [
        (
            "valueFrom: {}",
            format!(
                "{base}: Invalid value: \"\": must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef`, `secretKeyRef` or `fileKeyRef`"
            ),
        ),
        (
            "value: x, valueFrom: {fieldRef: {fieldPath: metadata.name}}",
            format!("{base}: Invalid value: \"\": may not be specified when `value` is not empty"),
        ),
        (
            "valueFrom: {fieldRef: {fieldPath: metadata.name}, secretKeyRef: {name: s, key: k}}",
            format!(
                "{base}: Invalid value: \"\": may not have more than one field specified at a time"
            ),
        ),
        (
            "valueFrom: {fieldRef: {fieldPath: spec.restartPolicy}}",
            format!(
                "{base}.fieldRef.fieldPath: Unsupported value: \"spec.restartPolicy\": supported values: \"metadata.name\", \"metadata.namespace\", \"metadata.uid\", \"spec.nodeName\", \"spec.serviceAccountName\", \"status.hostIP\", \"status.hostIPs\", \"status.podIP\", \"status.podIPs\""
            ),
        ),
    ];
    for (fields, want) in table {
        assert_errors(
            &container(&format!("    env:\n    - {{name: X, {fields}}}\n")),
            &[&want],
        );
    }
    assert!(errors(&container("    env:\n    - {name: X, valueFrom: {fieldRef: {fieldPath: \"metadata.labels['app']\"}}}\n    - {name: YY, valueFrom: {configMapKeyRef: {name: cfg, key: some.key}}}\n")).is_empty());
}

// ---- V12: ephemeral containers ---------------------------------------------

#[test]
fn v12_ephemeral_containers_cannot_be_set_on_create() {
    assert_errors(
        &with_spec(
            "  containers:\n  - {name: app, image: busybox}\n  ephemeralContainers:\n  - {name: debug, image: busybox, targetContainerName: app}\n",
        ),
        &["spec.ephemeralContainers: Forbidden: cannot be set on create"],
    );
}

#[test]
fn v12_ephemeral_containers_may_not_have_ports_probes_lifecycle_or_resources() {
    let m = with_spec(
        "  containers:\n  - {name: app, image: busybox}\n  ephemeralContainers:\n  - name: debug\n    image: busybox\n    targetContainerName: missing\n    ports: [{containerPort: 80}]\n    resources: {limits: {cpu: 1}}\n    readinessProbe: {exec: {command: [x]}}\n    lifecycle: {preStop: {exec: {command: [x]}}}\n",
    );
    let e = "cannot be set for an Ephemeral Container";
    assert_errors(
        &m,
        &[
            "spec.ephemeralContainers[0].targetContainerName: Not found: \"missing\"",
            &format!("spec.ephemeralContainers[0].ports: Forbidden: {e}"),
            &format!("spec.ephemeralContainers[0].resources: Forbidden: {e}"),
            &format!("spec.ephemeralContainers[0].readinessProbe: Forbidden: {e}"),
            &format!("spec.ephemeralContainers[0].lifecycle: Forbidden: {e}"),
            "spec.ephemeralContainers: Forbidden: cannot be set on create",
        ],
    );
}

// ---- metadata --------------------------------------------------------------

#[test]
fn metadata_name_required_unless_generate_name() {
    let no_name = "apiVersion: v1\nkind: Pod\nmetadata: {}\nspec:\n  containers:\n  - {name: app, image: busybox}\n";
    assert_errors(
        no_name,
        &["metadata.name: Required value: name or generateName is required"],
    );
    let generated = no_name.replace("metadata: {}", "metadata: {generateName: web-}");
    assert!(errors(&generated).is_empty());
}

#[test]
fn metadata_labels_and_annotations_syntax() {
    let m = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  namespace: Prod\n  labels: {\"a/b/c\": x, ok: \"-bad\"}\n  annotations: {\"example.com/Fine\": any value at all, \"bad key\": x}\nspec:\n  containers:\n  - {name: app, image: busybox}\n";
    assert_errors(
        m,
        &[
            &format!("metadata.namespace: Invalid value: \"Prod\": {LABEL_MSG}"),
            "metadata.labels: Invalid value: \"a/b/c\": a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
            "metadata.labels: Invalid value: \"-bad\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
            "metadata.annotations: Invalid value: \"bad key\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
        ],
    );
}

// ---- resources -------------------------------------------------------------

#[test]
fn resources_requests_must_not_exceed_limits() {
    assert_errors(
        &container(
            "    resources:\n      limits: {cpu: 500m, memory: 1Gi}\n      requests: {cpu: \"1\", memory: 512Mi}\n",
        ),
        &[
            "spec.containers[0].resources.requests: Invalid value: \"1\": must be less than or equal to cpu limit of 500m",
        ],
    );
}

#[test]
fn resources_quantities_must_parse_and_be_non_negative() {
    assert_errors(
        &container("    resources:\n      requests: {cpu: lots, memory: -1Mi}\n"),
        &[
            "spec.containers[0].resources.requests[cpu]: Invalid value: \"lots\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
            "spec.containers[0].resources.requests[memory]: Invalid value: \"-1Mi\": must be greater than or equal to 0",
        ],
    );
}

#[test]
fn resources_names_must_be_standard_or_extended() {
    assert_errors(
        &container("    resources:\n      limits: {gpu: 1, example.com/fpga: 1}\n"),
        &[
            "spec.containers[0].resources.limits[gpu]: Invalid value: \"gpu\": must be a standard resource type or fully qualified",
            "spec.containers[0].resources.limits[gpu]: Invalid value: \"gpu\": must be a standard resource for containers",
            // Defaulting copied the limits into requests, so they fail too.
            "spec.containers[0].resources.requests[gpu]: Invalid value: \"gpu\": must be a standard resource type or fully qualified",
            "spec.containers[0].resources.requests[gpu]: Invalid value: \"gpu\": must be a standard resource for containers",
        ],
    );
}

// ---- the whole list ----------------------------------------------------------

#[test]
fn every_error_is_listed_in_the_summary() {
    let p: Pod = pod(&with_spec(
        "  restartPolicy: Sometimes\n  containers:\n  - name: App\n    image: busybox\n  - name: b\n",
    ));
    let err = validate_pod(&p).unwrap_err();
    assert_eq!(err.errors.len(), 3);
    assert_eq!(
        err.to_string(),
        format!(
            "The Pod \"web\" is invalid: [spec.containers[0].name: Invalid value: \"App\": {LABEL_MSG}, spec.containers[1].image: Required value, spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"]"
        )
    );
}

#[test]
fn resources_extended_requests_must_equal_limits() {
    assert_errors(
        &container(
            "    resources:\n      limits: {example.com/fpga: 2}\n      requests: {example.com/fpga: 1}\n",
        ),
        &[
            "spec.containers[0].resources.requests: Invalid value: \"1\": must be equal to example.com/fpga limit of 2",
        ],
    );
}

// ---- V15: pod-level resources ---------------------------------------------

#[test]
fn v15_pod_level_resources_are_cpu_memory_and_hugepages() {
    assert_eq!(
        errors(&with_spec(
            "  resources:\n    limits: {cpu: \"1\", memory: 1Gi, hugepages-2Mi: 2Mi}\n  containers:\n  - {name: app, image: busybox}\n"
        )),
        Vec::<String>::new()
    );
    assert_errors(
        &with_spec(
            "  resources:\n    requests: {ephemeral-storage: 1Gi, example.com/gpu: \"1\"}\n  containers:\n  - {name: app, image: busybox}\n",
        ),
        &[
            "spec.resources.requests[ephemeral-storage]: Unsupported value: \"ephemeral-storage\": supported values: \"cpu\", \"memory\"",
            "spec.resources.requests[example.com/gpu]: Unsupported value: \"example.com/gpu\": supported values: \"cpu\", \"memory\"",
        ],
    );
    assert_errors(
        &with_spec(
            "  resources:\n    claims: [{name: gpu}]\n  containers:\n  - {name: app, image: busybox}\n",
        ),
        &["spec.resources.claims: Forbidden: claims cannot be set for Resources at pod-level"],
    );
}

#[test]
fn v15_pod_requests_at_most_limits_and_at_least_the_containers() {
    assert_errors(
        &with_spec(
            "  resources:\n    requests: {cpu: \"2\"}\n    limits: {cpu: \"1\"}\n  containers:\n  - {name: app, image: busybox}\n",
        ),
        &[
            "spec.resources.requests: Invalid value: \"2\": must be less than or equal to cpu limit of 1",
        ],
    );
    assert_errors(
        &with_spec(
            "  resources:\n    requests: {cpu: 500m}\n  initContainers:\n  - {name: side, image: busybox, restartPolicy: Always, resources: {requests: {cpu: 200m}}}\n  containers:\n  - {name: app, image: busybox, resources: {requests: {cpu: 400m}}}\n",
        ),
        &[
            "spec.resources.requests[cpu]: Invalid value: \"500m\": must be greater than or equal to aggregate container requests of 600m",
        ],
    );
}

#[test]
fn v15_container_limits_at_most_the_pod_limits() {
    assert_errors(
        &with_spec(
            "  resources:\n    limits: {memory: 1Gi}\n  containers:\n  - {name: a, image: busybox, resources: {limits: {memory: 512Mi}}}\n  - {name: b, image: busybox, resources: {requests: {memory: 100Mi}, limits: {memory: 2Gi}}}\n",
        ),
        &[
            "spec.resources.containers[1][memory].limits: Invalid value: \"2Gi\": must be less than or equal to pod limits of 1Gi",
        ],
    );
}

// ---- V17: gated projected sources, image volumes ----------------------------

#[test]
fn v17_gated_projected_sources_are_dropped_and_not_counted() {
    let m = with_spec(
        "  volumes:\n  - name: p\n    projected:\n      sources:\n      - configMap: {name: cfg}\n        clusterTrustBundle: {name: b, path: ca.pem}\n      - podCertificate: {signerName: example.com/s, keyType: ED25519, credentialBundlePath: cred.pem}\n  containers:\n  - {name: app, image: busybox}\n",
    );
    assert_eq!(errors(&m), Vec::<String>::new());
    let v = &pod(&m).spec.unwrap().volumes.unwrap()[0];
    let sources = v.projected.as_ref().unwrap().sources.clone().unwrap();
    assert!(sources[0].config_map.is_some());
    assert!(sources[0].cluster_trust_bundle.is_none());
    assert!(sources[1].pod_certificate.is_none());
}

#[test]
fn v17_image_volume_reference_and_pull_policy() {
    assert_eq!(
        errors(&with_spec(
            "  volumes:\n  - {name: img, image: {reference: \"registry.example/tools:1\"}}\n  containers:\n  - name: app\n    image: busybox\n    volumeMounts:\n    - {name: img, mountPath: /tools, subPath: bin}\n"
        )),
        Vec::<String>::new()
    );
    assert_errors(
        &with_spec(
            "  volumes:\n  - {name: a, image: {reference: \"\"}}\n  - {name: b, image: {reference: x, pullPolicy: Sometimes}}\n  containers:\n  - {name: app, image: busybox}\n",
        ),
        &[
            "spec.volumes[0].image.reference: Required value",
            "spec.volumes[1].image.pullPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"IfNotPresent\", \"Never\"",
        ],
    );
}

// ---- V14: security contexts -------------------------------------------------

const ID_RANGE: &str = "must be between 0 and 2147483647, inclusive";

#[test]
fn v14_user_and_group_ids_in_range() {
    assert_errors(
        &with_spec(
            "  securityContext:\n    runAsUser: -1\n    runAsGroup: 2147483648\n    fsGroup: -5\n    supplementalGroups: [1, -2]\n  containers:\n  - name: app\n    image: busybox\n    securityContext: {runAsUser: 4294967296, runAsGroup: -1}\n",
        ),
        &[
            &format!(
                "spec.containers[0].securityContext.runAsUser: Invalid value: 4294967296: {ID_RANGE}"
            ),
            &format!(
                "spec.containers[0].securityContext.runAsGroup: Invalid value: -1: {ID_RANGE}"
            ),
            &format!("spec.securityContext.fsGroup: Invalid value: -5: {ID_RANGE}"),
            &format!("spec.securityContext.runAsUser: Invalid value: -1: {ID_RANGE}"),
            &format!("spec.securityContext.runAsGroup: Invalid value: 2147483648: {ID_RANGE}"),
            &format!("spec.securityContext.supplementalGroups[1]: Invalid value: -2: {ID_RANGE}"),
        ],
    );
    assert!(errors(&with_spec("  securityContext: {runAsUser: 0, runAsGroup: 2147483647, fsGroup: 0}\n  containers:\n  - {name: app, image: busybox}\n")).is_empty());
}

#[test]
fn v14_supplemental_groups_and_selinux_change_policies() {
    assert!(errors(&with_spec("  securityContext: {supplementalGroupsPolicy: Strict, seLinuxChangePolicy: Recursive}\n  containers:\n  - {name: app, image: busybox}\n")).is_empty());
    assert_errors(
        &with_spec(
            "  securityContext: {supplementalGroupsPolicy: Replace, seLinuxChangePolicy: MountOption}\n  containers:\n  - {name: app, image: busybox}\n",
        ),
        &[
            "spec.securityContext.supplementalGroupsPolicy: Unsupported value: \"Replace\": supported values: \"Merge\", \"Strict\"",
            "spec.securityContext.seLinuxChangePolicy: Unsupported value: \"MountOption\": supported values: \"Recursive\"",
        ],
    );
}

#[test]
fn v14_host_users_false_forbids_host_namespaces_and_block_devices() {
    assert_errors(
        &with_spec(
            "  hostUsers: false\n  hostNetwork: true\n  hostPID: true\n  hostIPC: true\n  initContainers:\n  - name: init\n    image: busybox\n    volumeDevices: [{name: disk, devicePath: /dev/xvda}]\n  containers:\n  - {name: app, image: busybox}\n",
        ),
        &[
            "spec.hostNetwork: Forbidden: when `hostUsers` is false",
            "spec.HostPID: Forbidden: when `hostUsers` is false",
            "spec.HostIPC: Forbidden: when `hostUsers` is false",
            "spec.initContainers[0].volumeDevices: Forbidden: when `hostUsers` is false",
        ],
    );
    assert!(
        errors(&with_spec(
            "  hostUsers: true\n  hostNetwork: true\n  containers:\n  - {name: app, image: busybox}\n"
        ))
        .is_empty()
    );
}

#[test]
fn v14_unmasked_proc_mount_requires_host_users_false() {
    let m = |host_users: &str, proc_mount: &str| {
        with_spec(&format!(
            "{host_users}  containers:\n  - name: app\n    image: busybox\n    securityContext: {{procMount: {proc_mount}}}\n"
        ))
    };
    assert!(errors(&m("  hostUsers: false\n", "Unmasked")).is_empty());
    assert!(errors(&m("", "Default")).is_empty());
    assert_errors(
        &m("", "Unmasked"),
        &[
            "spec.containers[0].securityContext.procMount: Invalid value: \"Unmasked\": `hostUsers` must be false to use `Unmasked`",
        ],
    );
    assert_errors(
        &m("  hostUsers: false\n", "Masked"),
        &[
            "spec.containers[0].securityContext.procMount: Unsupported value: \"Masked\": supported values: \"Default\", \"Unmasked\"",
        ],
    );
}

// ---- V16: hostnameOverride -------------------------------------------------

#[test]
fn v16_hostname_override() {
    let m = |extra: &str, name: &str| {
        with_spec(&format!(
            "{extra}  hostnameOverride: \"{name}\"\n  containers:\n  - {{name: app, image: busybox}}\n"
        ))
    };
    assert!(errors(&m("", "my.host-1")).is_empty());
    let long = "a".repeat(65);
    assert_errors(
        &m("", &long),
        &["spec.hostnameOverride: Too long: may not be more than 64 bytes"],
    );
    assert!(errors(&m("", &"a".repeat(64))).is_empty());
    let got = errors(&m("", "My_Host"));
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(
        got[0].starts_with(
            "spec.hostnameOverride: Invalid value: \"My_Host\": a lowercase RFC 1123 subdomain"
        ),
        "{got:?}"
    );
    assert_errors(
        &m("  setHostnameAsFQDN: true\n  hostNetwork: true\n", "h"),
        &[
            "spec.hostnameOverride: Forbidden: may not be specified when setHostnameAsFQDN is true",
            "spec.hostnameOverride: Forbidden: may not be specified when hostNetwork is true",
        ],
    );
}

// ---- V18: dnsConfig ---------------------------------------------------------

#[test]
fn v18_dns_policy_none_needs_a_config_with_a_nameserver() {
    assert_errors(
        &with_spec("  dnsPolicy: None\n  containers:\n  - {name: app, image: busybox}\n"),
        &["spec.dnsConfig: Required value: must provide `dnsConfig` when `dnsPolicy` is None"],
    );
    assert_errors(
        &with_spec(
            "  dnsPolicy: None\n  dnsConfig: {searches: [a.b]}\n  containers:\n  - {name: app, image: busybox}\n",
        ),
        &[
            "spec.dnsConfig.nameservers: Required value: must provide at least one DNS nameserver when `dnsPolicy` is None",
        ],
    );
    assert!(errors(&with_spec("  dnsPolicy: None\n  dnsConfig: {nameservers: [10.0.0.10, \"2001:db8::1\"]}\n  containers:\n  - {name: app, image: busybox}\n")).is_empty());
}

#[test]
fn v18_dns_config_limits() {
    assert_errors(
        &with_spec(
            "  dnsConfig:\n    nameservers: [1.1.1.1, 2.2.2.2, 3.3.3.3, dns.example]\n    options: [{name: ndots, value: \"2\"}, {value: x}]\n  containers:\n  - {name: app, image: busybox}\n",
        ),
        &[
            "spec.dnsConfig.nameservers: Invalid value: []string{\"1.1.1.1\", \"2.2.2.2\", \"3.3.3.3\", \"dns.example\"}: must not have more than 3 nameservers",
            "spec.dnsConfig.nameservers[3]: Invalid value: \"dns.example\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
            "spec.dnsConfig.options[1]: Required value: must not be empty",
        ],
    );
    let many: Vec<String> = (0..33).map(|i| format!("s{i}.example")).collect();
    let got = errors(&with_spec(&format!(
        "  dnsConfig:\n    searches: [{}]\n  containers:\n  - {{name: app, image: busybox}}\n",
        many.join(", ")
    )));
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(
        got[0].starts_with("spec.dnsConfig.searches: Invalid value: []string{\"s0.example\", ")
            && got[0].ends_with(": must not have more than 32 search paths"),
        "{got:?}"
    );
    let long: Vec<String> = (0..9).map(|i| format!("{i}{}", "a".repeat(250))).collect();
    let got = errors(&with_spec(&format!(
        "  dnsConfig:\n    searches: [{}]\n  containers:\n  - {{name: app, image: busybox}}\n",
        long.join(", ")
    )));
    // Long labels are fine: the subdomain rule bounds the whole name only.
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(
        got[0].ends_with(
            ": must not have more than 2048 characters (including spaces) in the search list"
        ),
        "{got:?}"
    );
}

#[test]
fn v18_relaxed_search_entries() {
    assert!(errors(&with_spec("  dnsConfig:\n    searches: [., example.com., _sip._tcp.example.com, my_zone.local]\n  containers:\n  - {name: app, image: busybox}\n")).is_empty());
    assert_errors(
        &with_spec(
            "  dnsConfig:\n    searches: [Example.com, \"a..b\"]\n  containers:\n  - {name: app, image: busybox}\n",
        ),
        &[
            "spec.dnsConfig.searches[0]: Invalid value: \"Example.com\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '_', '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '_?[a-z0-9]([-_a-z0-9]*[a-z0-9])?(\\._?[a-z0-9]([-_a-z0-9]*[a-z0-9])?)*')",
            "spec.dnsConfig.searches[1]: Invalid value: \"a..b\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '_', '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '_?[a-z0-9]([-_a-z0-9]*[a-z0-9])?(\\._?[a-z0-9]([-_a-z0-9]*[a-z0-9])?)*')",
        ],
    );
}

// ---- V19: pod-deletion-cost ------------------------------------------------

#[test]
fn v19_pod_deletion_cost_must_be_an_int32() {
    let m = |v: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  annotations:\n    controller.kubernetes.io/pod-deletion-cost: \"{v}\"\nspec:\n  containers:\n  - {{name: app, image: busybox}}\n"
        )
    };
    for ok in ["0", "-5", "2147483647", "-2147483648", "100"] {
        assert!(errors(&m(ok)).is_empty(), "{ok}");
    }
    for bad in ["", "+1", "007", "2147483648", "1.5", "ten"] {
        assert_eq!(
            errors(&m(bad)),
            [format!(
                "metadata.annotations[controller.kubernetes.io/pod-deletion-cost]: Invalid value: \"{bad}\": must be a 32bit integer"
            )],
            "{bad:?}"
        );
    }
}

// ---- M10: static pods may not reference API objects -----------------------

#[test]
fn m10_static_pods_may_not_reference_api_objects() {
    let forbidden = |yaml: &str| -> Vec<String> {
        match podvisor_api::validate_static_pod_references(&pod(yaml)) {
            Ok(()) => Vec::new(),
            Err(e) => e.errors.iter().map(ToString::to_string).collect(),
        }
    };
    let msg = "Forbidden: static pods may not reference API objects";
    let m = with_spec(
        "  serviceAccountName: builder\n  volumes:\n  - {name: xa, secret: {secretName: s}}\n  - {name: xb, configMap: {name: xc}}\n  - {name: xc, persistentVolumeClaim: {claimName: pvc}}\n  - {name: xd, emptyDir: {}}\n  - name: xe\n    projected:\n      sources:\n      - downwardAPI: {items: [{path: podname, fieldRef: {fieldPath: metadata.name}}]}\n      - serviceAccountToken: {path: token}\n      - secret: {name: xs}\n  initContainers:\n  - name: init\n    image: busybox\n    envFrom: [{configMapRef: {name: cfg}}]\n  containers:\n  - name: app\n    image: busybox\n    env:\n    - {name: xA, valueFrom: {secretKeyRef: {name: xs, key: k}}}\n    - {name: xB, valueFrom: {fieldRef: {fieldPath: metadata.name}}}\n    envFrom: [{secretRef: {name: xs}}]\n",
    );
    let want: Vec<String> = [
        "spec.serviceAccountName",
        "spec.volumes[0].secret",
        "spec.volumes[1].configMap",
        "spec.volumes[2].persistentVolumeClaim",
        "spec.volumes[4].projected.sources[1].serviceAccountToken",
        "spec.volumes[4].projected.sources[2].secret",
        "spec.initContainers[0].envFrom[0].configMapRef",
        "spec.containers[0].env[0].valueFrom.secretKeyRef",
        "spec.containers[0].envFrom[0].secretRef",
    ]
    .iter()
    .map(|p| format!("{p}: {msg}"))
    .collect();
    assert_eq!(forbidden(&m), want);
    // Host paths, emptyDirs and the downward API are local: allowed.
    assert!(
        forbidden(&with_spec(
            "  volumes:\n  - {name: xd, emptyDir: {}}\n  - {name: xh, hostPath: {path: /etc/app}}\n  containers:\n  - name: app\n    image: busybox\n    env: [{name: xN, valueFrom: {fieldRef: {fieldPath: metadata.name}}}]\n"
        ))
        .is_empty()
    );
}
