//! How a Kubernetes container becomes a host process: expansion, environment, downward API,
//! mounts, termination-message file, memory limit and file locations.

use std::collections::HashMap;
use std::path::PathBuf;

use k8s_openapi::api::core::v1::{Container, Pod};
use podvisor_runtime::PodPaths;
use podvisor_runtime::config::quantity::Quantity;
use podvisor_runtime::config::{
    self, BuildOptions, ContainerConfig, DEFAULT_PATH, Mount, MountKind, NodeAllocatable,
    PodVolumeKind,
};
use serde_json::{Value, json};

fn paths() -> PodPaths {
    PodPaths {
        pod_dir: PathBuf::from("/state/pods/uid-1"),
        log_dir: PathBuf::from("/state/logs/default_web_uid-1"),
    }
}

/// A pod whose first container is `app`, built from `spec` (JSON) plus standard metadata.
fn pod(spec: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {
            "name": "web",
            "namespace": "shop",
            "uid": "uid-1",
            "labels": {"app": "web", "tier": "front"},
            "annotations": {"note": "say \"hi\"\n", "team": "core"}
        },
        "spec": spec
    }))
    .expect("pod json")
}

fn container(pod: &Pod, name: &str) -> Container {
    let spec = pod.spec.as_ref().expect("spec");
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .find(|c| c.name == name)
        .expect("container")
        .clone()
}

fn build(pod: &Pod) -> Result<ContainerConfig, String> {
    config::build(pod, &container(pod, "app"), 7, 3, &paths())
}

fn build_with(pod: &Pod, opts: &BuildOptions) -> Result<ContainerConfig, String> {
    config::build_with(pod, &container(pod, "app"), 7, 3, &paths(), opts)
}

fn env_of(cfg: &ContainerConfig) -> HashMap<String, String> {
    cfg.env.iter().cloned().collect()
}

/// A pod with one container `app` running `sh` with the given env entries.
fn env_pod(env: Value) -> Pod {
    pod(json!({"containers": [{"name": "app", "command": ["sh"], "env": env}]}))
}

fn env_value(env: Value, name: &str) -> Result<String, String> {
    let cfg = build(&env_pod(env))?;
    Ok(env_of(&cfg)
        .get(name)
        .cloned()
        .unwrap_or_else(|| "<unset>".into()))
}

#[test]
fn expansion_table() {
    let vars: HashMap<&str, &str> = [
        ("A", "a"),
        ("B", "b"),
        ("EMPTY", ""),
        ("REF", "$(A)"),
        ("MONEY", "$1"),
    ]
    .into();
    let lookup = |name: &str| vars.get(name).map(|v| (*v).to_owned());
    let cases = [
        ("plain", "plain"),
        ("$(A)", "a"),
        ("$(A)-$(B)", "a-b"),
        ("x$(A)y", "xay"),
        ("$(A)$(B)", "ab"),
        ("$(EMPTY)", ""),
        // Escapes: `$$` is one `$`.
        ("$$", "$"),
        ("$$(A)", "$(A)"),
        ("$$$(A)", "$a"),
        ("$$$$(A)", "$$(A)"),
        ("$$$$$$$(MONEY)", "$$$$1"),
        // Undefined references stay as written.
        ("$(UNDEFINED)", "$(UNDEFINED)"),
        ("$(A)$(UNDEFINED)", "a$(UNDEFINED)"),
        ("$()", "$()"),
        // Unterminated references are copied.
        ("$(A", "$(A"),
        ("$(", "$("),
        ("$(A)$(", "a$("),
        ("$(A$(B)", "$(A$(B)"),
        // No nesting: the name runs to the first `)`.
        ("$(A$(B))", "$(A$(B))"),
        ("$(REF)", "$(A)"),
        // A lone `$` and `$x` are copied.
        ("$", "$"),
        ("a$", "a$"),
        ("$(A)$", "a$"),
        ("$A", "$A"),
        ("$ $", "$ $"),
        ("$é$(A)", "$éa"),
        ("é$(A)é", "éaé"),
    ];
    for (input, want) in cases {
        assert_eq!(config::expand(input, lookup), want, "expand({input:?})");
    }
}

#[test]
fn env_in_spec_order_with_earlier_references_only() {
    let cfg = build(&env_pod(json!([
        {"name": "A", "value": "a"},
        {"name": "B", "value": "$(A)-b"},
        {"name": "C", "value": "$(D)"},
        {"name": "D", "value": "d"},
        {"name": "SELF", "value": "$(SELF)x"},
        {"name": "ESC", "value": "$$(A)"},
        {"name": "EMPTY"},
        {"name": "A", "value": "z"},
        {"name": "E", "value": "$(A)"},
        {"name": "G", "value": "$(PATH)"}
    ])))
    .unwrap();
    let names: Vec<&str> = cfg.env.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        names,
        ["PATH", "A", "B", "C", "D", "SELF", "ESC", "EMPTY", "E", "G"]
    );
    let env = env_of(&cfg);
    assert_eq!(
        env["A"], "z",
        "a later definition replaces the value in place"
    );
    assert_eq!(env["B"], "a-b");
    assert_eq!(env["C"], "$(D)", "only earlier variables are visible");
    assert_eq!(env["SELF"], "$(SELF)x");
    assert_eq!(env["ESC"], "$(A)");
    assert_eq!(env["EMPTY"], "");
    assert_eq!(env["E"], "z");
    assert_eq!(
        env["G"], "$(PATH)",
        "the runtime's default PATH is not a Kubernetes variable"
    );
    assert_eq!(env["PATH"], DEFAULT_PATH);
}

#[test]
fn argv_expands_against_the_final_environment() {
    let p = pod(json!({"containers": [{
        "name": "app",
        "command": ["/bin/echo", "$(GREETING)"],
        "args": ["$(NAME)", "$$(NAME)", "$(NOPE)", "$(LATE)", "$(PATH)"],
        "env": [
            {"name": "NAME", "value": "world"},
            {"name": "GREETING", "value": "hello $(NAME) $(LATE)"},
            {"name": "LATE", "value": "late"}
        ]
    }]}));
    let cfg = build(&p).unwrap();
    assert_eq!(
        cfg.argv,
        [
            "/bin/echo",
            "hello world $(LATE)",
            "world",
            "$(NAME)",
            "$(NOPE)",
            "late",
            "$(PATH)"
        ]
    );
}

#[test]
fn path_and_hostname_defaults_yield_to_the_container() {
    let p = pod(json!({"nodeName": "node-1", "containers": [{
        "name": "app", "command": ["sh"],
        "env": [{"name": "PATH", "value": "/opt/bin"}]
    }]}));
    let cfg = build(&p).unwrap();
    assert_eq!(
        cfg.env,
        [
            ("HOSTNAME".to_owned(), "node-1".to_owned()),
            ("PATH".to_owned(), "/opt/bin".to_owned())
        ]
    );
}

fn field_env(path: &str) -> Value {
    json!([{"name": "V", "valueFrom": {"fieldRef": {"fieldPath": path}}}])
}

#[test]
fn downward_api_fields() {
    let p = |status: Value| -> Pod {
        let mut p = pod(json!({
            "nodeName": "node-1",
            "serviceAccountName": "robot",
            "terminationGracePeriodSeconds": 45,
            "containers": [{"name": "app", "command": ["sh"], "env": [
                {"name": "NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "NS", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}},
                {"name": "UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
                {"name": "LABEL", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['tier']"}}},
                {"name": "NOLABEL", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['missing']"}}},
                {"name": "ANN", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['team']"}}},
                {"name": "LABELS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels"}}},
                {"name": "ANNS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations"}}},
                {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                {"name": "SA", "valueFrom": {"fieldRef": {"fieldPath": "spec.serviceAccountName"}}},
                {"name": "GRACE", "valueFrom": {"fieldRef": {"fieldPath": "spec.terminationGracePeriodSeconds"}}},
                {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                {"name": "POD_IPS", "valueFrom": {"fieldRef": {"fieldPath": "status.podIPs"}}},
                {"name": "HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}},
                {"name": "HOST_IPS", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIPs"}}},
                {"name": "REF", "value": "$(NAME).$(NS)"}
            ]}]
        }));
        p.status = serde_json::from_value(status).unwrap();
        p
    };
    let env = env_of(&build(&p(json!(null))).unwrap());
    let want = [
        ("NAME", "web"),
        ("NS", "shop"),
        ("UID", "uid-1"),
        ("LABEL", "front"),
        ("NOLABEL", ""),
        ("ANN", "core"),
        ("LABELS", "app=\"web\"\ntier=\"front\""),
        ("ANNS", "note=\"say \\\"hi\\\"\\n\"\nteam=\"core\""),
        ("NODE", "node-1"),
        ("SA", "robot"),
        ("GRACE", "45"),
        ("POD_IP", "127.0.0.1"),
        ("POD_IPS", "127.0.0.1"),
        ("HOST_IP", "127.0.0.1"),
        ("HOST_IPS", "127.0.0.1"),
        ("REF", "web.shop"),
        ("HOSTNAME", "node-1"),
    ];
    for (k, v) in want {
        assert_eq!(env[k], v, "{k}");
    }

    let env = env_of(
        &build(&p(json!({
            "podIP": "10.0.0.5",
            "podIPs": [{"ip": "10.0.0.5"}, {"ip": "fd00::5"}],
            "hostIP": "192.168.1.2",
            "hostIPs": [{"ip": "192.168.1.2"}, {"ip": "fd00::2"}]
        })))
        .unwrap(),
    );
    assert_eq!(env["POD_IP"], "10.0.0.5");
    assert_eq!(env["POD_IPS"], "10.0.0.5,fd00::5");
    assert_eq!(env["HOST_IP"], "192.168.1.2");
    assert_eq!(env["HOST_IPS"], "192.168.1.2,fd00::2");

    let env = env_of(&build(&p(json!({"podIP": "10.1.1.1", "hostIP": "10.2.2.2"}))).unwrap());
    assert_eq!(env["POD_IPS"], "10.1.1.1");
    assert_eq!(env["HOST_IPS"], "10.2.2.2");
}

#[test]
fn downward_api_errors() {
    assert_eq!(
        env_value(field_env("status.phase"), "V").unwrap_err(),
        "unsupported fieldPath: status.phase"
    );
    assert_eq!(
        env_value(field_env("spec.containers"), "V").unwrap_err(),
        "field label not supported: spec.containers"
    );
    assert_eq!(
        env_value(field_env("spec.nodeName['x']"), "V").unwrap_err(),
        "field label does not support subscript: spec.nodeName['x']"
    );
    assert_eq!(
        env_value(
            json!([{"name": "V", "valueFrom": {"fieldRef": {"apiVersion": "v2", "fieldPath": "metadata.name"}}}]),
            "V"
        )
        .unwrap_err(),
        "unsupported pod version: v2"
    );
}

#[test]
fn resource_field_refs() {
    let p = |node: NodeAllocatable| -> HashMap<String, String> {
        let p = pod(json!({"containers": [
            {"name": "app", "command": ["sh"],
             "resources": {"limits": {"cpu": "250m", "memory": "64Mi"},
                           "requests": {"cpu": "100m", "memory": "1G", "ephemeral-storage": "1Gi"}},
             "env": [
                {"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
                {"name": "CPU_M", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu", "divisor": "1m"}}},
                {"name": "REQ_CPU_M", "valueFrom": {"resourceFieldRef": {"resource": "requests.cpu", "divisor": "1m"}}},
                {"name": "MEM", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory"}}},
                {"name": "MEM_MI", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}}},
                {"name": "REQ_MEM_MI", "valueFrom": {"resourceFieldRef": {"resource": "requests.memory", "divisor": "1Mi"}}},
                {"name": "REQ_EPH", "valueFrom": {"resourceFieldRef": {"resource": "requests.ephemeral-storage", "divisor": "1Mi"}}},
                {"name": "LIM_EPH", "valueFrom": {"resourceFieldRef": {"resource": "limits.ephemeral-storage"}}},
                {"name": "OTHER_MEM", "valueFrom": {"resourceFieldRef": {"containerName": "side", "resource": "limits.memory", "divisor": "1Mi"}}},
                {"name": "OTHER_CPU", "valueFrom": {"resourceFieldRef": {"containerName": "side", "resource": "limits.cpu", "divisor": "1m"}}},
                {"name": "INIT_CPU", "valueFrom": {"resourceFieldRef": {"containerName": "setup", "resource": "limits.cpu", "divisor": "1m"}}}
             ]},
            {"name": "side", "command": ["sh"], "resources": {"limits": {"memory": "3Mi"}}}
        ],
        "initContainers": [{"name": "setup", "command": ["true"]}]}));
        env_of(
            &build_with(
                &p,
                &BuildOptions {
                    node_allocatable: node,
                    ..BuildOptions::default()
                },
            )
            .unwrap(),
        )
    };
    let env = p(NodeAllocatable::default());
    let want = [
        ("CPU", "1"),
        ("CPU_M", "250"),
        ("REQ_CPU_M", "100"),
        ("MEM", "67108864"),
        ("MEM_MI", "64"),
        ("REQ_MEM_MI", "954"),
        ("REQ_EPH", "1024"),
        ("LIM_EPH", "0"),
        ("OTHER_MEM", "3"),
        ("OTHER_CPU", "0"),
        ("INIT_CPU", "0"),
    ];
    for (k, v) in want {
        assert_eq!(env[k], v, "{k}");
    }
    // Unset limits read as the node's allocatable, for the pod's regular containers only.
    let env = p(NodeAllocatable {
        cpu_millis: Some(2000),
        memory_bytes: Some(8 << 30),
        ephemeral_storage_bytes: Some(10_000_000_000),
    });
    assert_eq!(env["LIM_EPH"], "10000000000");
    assert_eq!(env["OTHER_CPU"], "2000");
    assert_eq!(env["INIT_CPU"], "0");
    assert_eq!(env["CPU_M"], "250", "a set limit wins");

    let err = env_value(
        json!([{"name": "V", "valueFrom": {"resourceFieldRef": {"containerName": "ghost", "resource": "limits.cpu"}}}]),
        "V",
    )
    .unwrap_err();
    assert_eq!(err, "container ghost not found");
    let err = env_value(
        json!([{"name": "V", "valueFrom": {"resourceFieldRef": {"resource": "limits.gpu"}}}]),
        "V",
    )
    .unwrap_err();
    assert_eq!(err, "unsupported container resource : limits.gpu");
}

#[test]
fn secrets_and_config_maps_are_not_found_unless_optional() {
    let cases = [
        (
            json!([{"name": "V", "valueFrom": {"secretKeyRef": {"name": "db", "key": "pw"}}}]),
            Err("secret \"db\" not found"),
        ),
        (
            json!([{"name": "V", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "k"}}}]),
            Err("configmap \"cfg\" not found"),
        ),
        (
            json!([{"name": "V", "valueFrom": {"secretKeyRef": {"name": "db", "key": "pw", "optional": true}}}]),
            Ok("<unset>"),
        ),
        (
            json!([{"name": "V", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "k", "optional": true}}}]),
            Ok("<unset>"),
        ),
    ];
    for (env, want) in cases {
        assert_eq!(
            env_value(env.clone(), "V").as_deref(),
            want.map_err(str::to_owned).as_deref(),
            "{env}"
        );
    }

    let with_env_from = |env_from: Value| {
        build(&pod(json!({"containers": [{
            "name": "app", "command": ["sh"], "envFrom": env_from,
            "env": [{"name": "X", "value": "x"}]
        }]})))
    };
    assert_eq!(
        with_env_from(json!([{"configMapRef": {"name": "cfg"}}])).unwrap_err(),
        "configmap \"cfg\" not found"
    );
    assert_eq!(
        with_env_from(json!([{"secretRef": {"name": "s"}, "prefix": "S_"}])).unwrap_err(),
        "secret \"s\" not found"
    );
    let cfg = with_env_from(json!([
        {"configMapRef": {"name": "cfg", "optional": true}},
        {"secretRef": {"name": "s", "optional": true}}
    ]))
    .unwrap();
    assert_eq!(env_of(&cfg)["X"], "x");
}

#[test]
fn a_container_without_command_cannot_run() {
    let p = pod(json!({
        "initContainers": [{"name": "setup", "command": ["true"]}, {"name": "init2", "image": "busybox"}],
        "containers": [{"name": "app", "image": "nginx", "args": ["-g", "daemon off;"]}]
    }));
    assert_eq!(
        build(&p).unwrap_err(),
        "container \"app\" has no command: the process runtime runs host processes and cannot \
         run an image's entrypoint; set spec.containers[0].command, or run the image with the \
         oci runtime (runtimeClassName: oci in the pod, or serve/run --runtime oci)"
    );
    let err = config::build(&p, &container(&p, "init2"), 1, 0, &paths()).unwrap_err();
    assert!(
        err.contains("set spec.initContainers[1].command, or"),
        "{err}"
    );
    let p = pod(json!({"containers": [{"name": "app", "command": []}]}));
    assert!(build(&p).unwrap_err().contains("has no command"));
}

fn mounts_pod(volumes: Value, mounts: Value) -> Pod {
    pod(json!({
        "volumes": volumes,
        "containers": [{"name": "app", "command": ["sh"], "volumeMounts": mounts,
                        "env": [{"name": "SUB", "value": "from-env"}, {"name": "NONE", "value": ""}]}]
    }))
}

#[test]
fn mounts_for_empty_dir_memory_host_path_sub_path_and_read_only() {
    let p = mounts_pod(
        json!([
            {"name": "cache", "emptyDir": {}},
            {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}},
            {"name": "ram", "emptyDir": {"medium": "Memory"}},
            {"name": "host", "hostPath": {"path": "/var/data", "type": "DirectoryOrCreate"}},
            {"name": "bare"}
        ]),
        json!([
            {"name": "cache", "mountPath": "/cache"},
            {"name": "shm", "mountPath": "/dev/shm"},
            {"name": "ram", "mountPath": "/ram", "readOnly": false},
            {"name": "host", "mountPath": "/data", "readOnly": true},
            {"name": "host", "mountPath": "/logs", "subPath": "logs/app"},
            {"name": "cache", "mountPath": "/expr", "subPathExpr": "pods/$(SUB)"},
            {"name": "bare", "mountPath": "/bare"}
        ]),
    );
    let cfg = build(&p).unwrap();
    let bind = |source: &str, target: &str, read_only: bool| Mount {
        source: PathBuf::from(source),
        sub_path: PathBuf::new(),
        target: PathBuf::from(target),
        read_only,
        kind: MountKind::Bind,
    };
    assert_eq!(
        cfg.mounts,
        [
            bind("/state/pods/uid-1/volumes/cache", "/cache", false),
            Mount {
                source: PathBuf::from("/state/pods/uid-1/volumes/shm"),
                sub_path: PathBuf::new(),
                target: PathBuf::from("/dev/shm"),
                read_only: false,
                kind: MountKind::Tmpfs {
                    size: Some(64 << 20)
                },
            },
            Mount {
                source: PathBuf::from("/state/pods/uid-1/volumes/ram"),
                sub_path: PathBuf::new(),
                target: PathBuf::from("/ram"),
                read_only: false,
                kind: MountKind::Tmpfs { size: None },
            },
            bind("/var/data", "/data", true),
            Mount {
                sub_path: PathBuf::from("logs/app"),
                ..bind("/var/data", "/logs", false)
            },
            Mount {
                sub_path: PathBuf::from("pods/from-env"),
                ..bind("/state/pods/uid-1/volumes/cache", "/expr", false)
            },
            bind("/state/pods/uid-1/volumes/bare", "/bare", false),
            bind(
                "/state/pods/uid-1/containers/app/7/termination-log",
                "/dev/termination-log",
                false
            ),
        ]
    );
}

#[test]
fn mount_errors() {
    let err = |volumes: Value, mounts: Value| build(&mounts_pod(volumes, mounts)).unwrap_err();
    assert_eq!(
        err(json!([]), json!([{"name": "nope", "mountPath": "/x"}])),
        "cannot find volume \"nope\" to mount into container \"app\""
    );
    assert_eq!(
        err(
            json!([{"name": "share", "nfs": {"server": "s", "path": "/"}}]),
            json!([{"name": "share", "mountPath": "/share"}])
        ),
        "volume \"share\" (nfs) cannot be mounted into container \"app\": the process \
         runtime does not support nfs volumes yet (only emptyDir, hostPath, configMap, secret, \
         downwardAPI and projected)"
    );
    for (kind, source) in [
        ("persistentVolumeClaim", json!({"claimName": "c"})),
        ("csi", json!({"driver": "d"})),
    ] {
        let e = err(
            json!([{"name": "v", kind: source}]),
            json!([{"name": "v", "mountPath": "/v"}]),
        );
        assert!(
            e.contains(&format!("does not support {kind} volumes yet")),
            "{e}"
        );
    }
    let e = err(
        json!([{"name": "v", "emptyDir": {}}]),
        json!([{"name": "v", "mountPath": "/v", "subPath": "/abs"}]),
    );
    assert_eq!(e, "error SubPath `/abs` must not be an absolute path");
    let e = err(
        json!([{"name": "v", "emptyDir": {}}]),
        json!([{"name": "v", "mountPath": "/v", "subPath": "a/../../b"}]),
    );
    assert_eq!(
        e,
        "unable to provision SubPath `a/../../b`: must not contain '..'"
    );
    let e = err(
        json!([{"name": "v", "emptyDir": {}}]),
        json!([{"name": "v", "mountPath": "/v", "subPathExpr": "$(NONE)/$(MISSING)/$(SUB)"}]),
    );
    assert_eq!(e, "missing value for MISSING, NONE");
}

#[test]
fn memory_backed_empty_dir_size_follows_the_kubelet() {
    let volumes = |size_limit: Value| json!([{"name": "ram", "emptyDir": {"medium": "Memory", "sizeLimit": size_limit}}]);
    let p = |size_limit: Value, limits: [Option<&str>; 2]| {
        let resources = |l: Option<&str>| match l {
            Some(l) => json!({"limits": {"memory": l}}),
            None => json!({}),
        };
        pod(json!({
            "volumes": volumes(size_limit),
            "containers": [
                {"name": "app", "command": ["sh"], "resources": resources(limits[0])},
                {"name": "side", "command": ["sh"], "resources": resources(limits[1])}
            ]
        }))
    };
    let size = |p: &Pod, node: Option<u64>| {
        let opts = BuildOptions {
            node_allocatable: NodeAllocatable {
                memory_bytes: node,
                ..NodeAllocatable::default()
            },
            ..BuildOptions::default()
        };
        match &config::pod_volumes(p, &paths(), &opts)[0].kind {
            PodVolumeKind::MemoryEmptyDir { size } => *size,
            other => panic!("{other:?}"),
        }
    };
    const MI: u64 = 1 << 20;
    // sizeLimit below everything wins.
    assert_eq!(
        size(
            &p(json!("16Mi"), [Some("64Mi"), Some("64Mi")]),
            Some(1 << 30)
        ),
        Some(16 * MI)
    );
    // The pod limit (sum of containers) caps a larger sizeLimit.
    assert_eq!(
        size(
            &p(json!("1Gi"), [Some("64Mi"), Some("32Mi")]),
            Some(1 << 30)
        ),
        Some(96 * MI)
    );
    // No pod limit when a container has none: the node's allocatable memory.
    assert_eq!(
        size(&p(json!(null), [Some("64Mi"), None]), Some(1 << 30)),
        Some(1 << 30)
    );
    // Nothing known: the kernel default.
    assert_eq!(size(&p(json!(null), [None, None]), None), None);
    assert_eq!(size(&p(json!("8Mi"), [None, None]), None), Some(8 * MI));
}

/// V15: with pod-level `resources.limits` (PodLevelResources, on), the pod's memory limit is
/// the pod-level one, whatever the containers declare (`PodLimits`).
#[test]
fn v15_memory_empty_dir_size_uses_the_pod_level_limit() {
    let p = |pod_limits: Value| {
        pod(json!({
            "resources": {"limits": pod_limits},
            "volumes": [{"name": "ram", "emptyDir": {"medium": "Memory"}}],
            "containers": [
                {"name": "app", "command": ["sh"]},
                {"name": "side", "command": ["sh"], "resources": {"limits": {"memory": "64Mi"}}}
            ]
        }))
    };
    let size = |p: &Pod| {
        let opts = BuildOptions {
            node_allocatable: NodeAllocatable {
                memory_bytes: Some(1 << 30),
                ..NodeAllocatable::default()
            },
            ..BuildOptions::default()
        };
        match &config::pod_volumes(p, &paths(), &opts)[0].kind {
            PodVolumeKind::MemoryEmptyDir { size } => *size,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(size(&p(json!({"memory": "256Mi"}))), Some(256 << 20));
    // Pod-level limits without memory: the pod has no memory limit.
    assert_eq!(size(&p(json!({"cpu": "1"}))), Some(1 << 30));
}

#[test]
fn termination_message_path_and_file_locations() {
    let p = pod(json!({"containers": [{
        "name": "app", "command": ["sh"], "workingDir": "/work",
        "terminationMessagePath": "/tmp/done"
    }]}));
    let cfg = build(&p).unwrap();
    assert_eq!(cfg.name, "app");
    assert_eq!(cfg.instance, 7);
    assert_eq!(cfg.termination_message_path, "/tmp/done");
    assert_eq!(
        cfg.termination_message_host_path,
        PathBuf::from("/state/pods/uid-1/containers/app/7/termination-log")
    );
    assert_eq!(
        cfg.mounts.last().unwrap().target,
        PathBuf::from("/tmp/done")
    );
    assert_eq!(cfg.working_dir.as_deref(), Some("/work"));
    assert_eq!(
        cfg.log_path,
        PathBuf::from("/state/logs/default_web_uid-1/app/3.log")
    );
    assert_eq!(cfg.cgroup_parent, "podvisor/uid-1");

    let cfg = build(&env_pod(json!([]))).unwrap();
    assert_eq!(cfg.termination_message_path, "/dev/termination-log");
    assert_eq!(cfg.working_dir, None);
    assert_eq!(cfg.memory_limit, None);

    let round_trip: ContainerConfig =
        serde_json::from_str(&serde_json::to_string(&cfg).unwrap()).unwrap();
    assert_eq!(round_trip, cfg);
}

#[test]
fn memory_quantities() {
    let cases: [(&str, Option<i64>); 24] = [
        ("32Mi", Some(32 << 20)),
        ("1Ki", Some(1024)),
        ("1Gi", Some(1 << 30)),
        ("1.5Gi", Some(1536 << 20)),
        ("0.5Ki", Some(512)),
        ("1Ti", Some(1 << 40)),
        ("1k", Some(1000)),
        ("1M", Some(1_000_000)),
        ("1G", Some(1_000_000_000)),
        ("2T", Some(2_000_000_000_000)),
        ("1E", Some(1_000_000_000_000_000_000)),
        ("128974848", Some(128_974_848)),
        ("129e6", Some(129_000_000)),
        ("1e3", Some(1000)),
        ("1E3", Some(1000)),
        ("12e-1", Some(2)),
        ("100m", Some(1)),
        ("1500m", Some(2)),
        ("+1Ki", Some(1024)),
        ("1K", None),
        ("abc", None),
        ("1.2.3", None),
        ("1Zi", None),
        ("e3", None),
    ];
    for (text, want) in cases {
        assert_eq!(Quantity::parse(text).map(|q| q.value()), want, "{text}");
    }
    assert_eq!(Quantity::parse("250m").unwrap().milli_value(), 250);
    assert_eq!(Quantity::parse("0.1").unwrap().milli_value(), 100);
    assert_eq!(Quantity::parse("1n").unwrap().milli_value(), 1);
    assert_eq!(Quantity::parse("2").unwrap().milli_value(), 2000);

    let limit = |l: &str| {
        build(&pod(json!({"containers": [{
            "name": "app", "command": ["sh"], "resources": {"limits": {"memory": l}}
        }]})))
        .map(|c| c.memory_limit)
    };
    assert_eq!(limit("32Mi"), Ok(Some(33_554_432)));
    assert_eq!(limit("1G"), Ok(Some(1_000_000_000)));
    assert_eq!(limit("0"), Ok(None));
    assert_eq!(
        limit("lots"),
        Err("invalid quantity \"lots\" in resources.limits.memory".to_owned())
    );
}

/// The kubelet's variables for the master `kubernetes` Service (`FromServices`), given to
/// every container whatever `enableServiceLinks` says; a name the container defines keeps its
/// own value.
#[test]
fn kubernetes_service_variables_yield_to_the_container() {
    let mut opts = BuildOptions::default();
    opts.objects.api_service = Some(("127.0.0.1".to_owned(), 6443));
    let p = pod(
        json!({"enableServiceLinks": false, "containers": [{"name": "app", "command": ["sh"],
        "env": [{"name": "KUBERNETES_SERVICE_PORT", "value": "mine"}]}]}),
    );
    let env = env_of(&build_with(&p, &opts).unwrap());
    for (name, value) in [
        ("KUBERNETES_SERVICE_HOST", "127.0.0.1"),
        ("KUBERNETES_SERVICE_PORT", "mine"),
        ("KUBERNETES_SERVICE_PORT_HTTPS", "6443"),
        ("KUBERNETES_PORT", "tcp://127.0.0.1:6443"),
        ("KUBERNETES_PORT_6443_TCP", "tcp://127.0.0.1:6443"),
        ("KUBERNETES_PORT_6443_TCP_PROTO", "tcp"),
        ("KUBERNETES_PORT_6443_TCP_PORT", "6443"),
        ("KUBERNETES_PORT_6443_TCP_ADDR", "127.0.0.1"),
    ] {
        assert_eq!(env.get(name).map(String::as_str), Some(value), "{name}");
    }
    // Without an API to point at, nothing is added.
    let env = env_of(&build(&p).unwrap());
    assert!(!env.contains_key("KUBERNETES_SERVICE_HOST"));
}

/// `$(VAR)` in `env` values and in the command may name the `kubernetes` Service's variables,
/// as the kubelet's `MappingFuncFor(tmpEnv, serviceEnv)` and `ExpandContainerCommandAndArgs`
/// allow.
#[test]
fn kubernetes_service_variables_expand_in_env_and_command() {
    let mut opts = BuildOptions::default();
    opts.objects.api_service = Some(("127.0.0.1".to_owned(), 6443));
    let p = pod(json!({"containers": [{"name": "app",
        "command": ["echo", "$(KUBERNETES_SERVICE_HOST)"],
        "env": [{"name": "API", "value": "https://$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT)"}]}]}));
    let built = build_with(&p, &opts).unwrap();
    let env = env_of(&built);
    assert_eq!(
        env.get("API").map(String::as_str),
        Some("https://127.0.0.1:6443")
    );
    assert_eq!(built.argv, ["echo", "127.0.0.1"]);
}
