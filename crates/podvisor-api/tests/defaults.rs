//! API-server defaulting: R1 (probes), M2 (termination messages), A22
//! (image pull policy), T1/V9 (grace period) and the other pod defaults.

use crate::common;

use common::{pod, with_spec};
use podvisor_api::apply_defaults;
use podvisor_api::k8s_openapi::api::core::v1::Pod;

fn defaulted(spec: &str) -> Pod {
    pod(&with_spec(spec))
}

#[test]
fn r1_probe_timings_default_when_zero_or_unset() {
    let p = defaulted(
        "  containers:\n  - name: c\n    image: busybox\n    livenessProbe:\n      exec: {command: [\"true\"]}\n    readinessProbe:\n      httpGet: {port: 8080}\n      periodSeconds: 0\n      failureThreshold: 7\n    startupProbe:\n      grpc: {port: 9000}\n      initialDelaySeconds: 4\n",
    );
    let c = &p.spec.unwrap().containers[0];
    let live = c.liveness_probe.as_ref().unwrap();
    assert_eq!(
        (
            live.timeout_seconds,
            live.period_seconds,
            live.success_threshold,
            live.failure_threshold,
            live.initial_delay_seconds
        ),
        (Some(1), Some(10), Some(1), Some(3), None)
    );
    let ready = c.readiness_probe.as_ref().unwrap();
    assert_eq!(ready.period_seconds, Some(10));
    assert_eq!(ready.failure_threshold, Some(7), "set values are kept");
    let http = ready.http_get.as_ref().unwrap();
    assert_eq!(http.path.as_deref(), Some("/"));
    assert_eq!(http.scheme.as_deref(), Some("HTTP"));
    let startup = c.startup_probe.as_ref().unwrap();
    assert_eq!(startup.initial_delay_seconds, Some(4));
}

#[test]
fn r1_grpc_service_defaults_to_empty() {
    let p = defaulted(
        "  containers:\n  - name: c\n    image: busybox\n    startupProbe:\n      grpc: {port: 9000}\n    livenessProbe:\n      grpc: {port: 9000, service: health}\n",
    );
    let c = &p.spec.unwrap().containers[0];
    let startup = c.startup_probe.as_ref().unwrap().grpc.as_ref().unwrap();
    assert_eq!(startup.service.as_deref(), Some(""));
    let live = c.liveness_probe.as_ref().unwrap().grpc.as_ref().unwrap();
    assert_eq!(
        live.service.as_deref(),
        Some("health"),
        "a set service is kept"
    );
}

#[test]
fn r1_lifecycle_http_get_gets_path_and_scheme() {
    let p = defaulted(
        "  containers:\n  - name: c\n    image: busybox\n    lifecycle:\n      preStop:\n        httpGet: {port: 80}\n      postStart:\n        httpGet: {port: 80, path: /hook, scheme: HTTPS}\n",
    );
    let l = p.spec.unwrap().containers[0].lifecycle.clone().unwrap();
    let pre = l.pre_stop.unwrap().http_get.unwrap();
    assert_eq!(
        (pre.path.as_deref(), pre.scheme.as_deref()),
        (Some("/"), Some("HTTP"))
    );
    let post = l.post_start.unwrap().http_get.unwrap();
    assert_eq!(
        (post.path.as_deref(), post.scheme.as_deref()),
        (Some("/hook"), Some("HTTPS"))
    );
}

#[test]
fn m2_termination_message_defaults_for_every_container_kind() {
    let mut p = defaulted(
        "  initContainers:\n  - name: i\n    image: busybox\n  containers:\n  - name: c\n    image: busybox\n    terminationMessagePolicy: FallbackToLogsOnError\n  ephemeralContainers:\n  - name: e\n    image: busybox\n",
    );
    let spec = p.spec.take().unwrap();
    let init = &spec.init_containers.as_ref().unwrap()[0];
    assert_eq!(
        init.termination_message_path.as_deref(),
        Some("/dev/termination-log")
    );
    assert_eq!(init.termination_message_policy.as_deref(), Some("File"));
    let c = &spec.containers[0];
    assert_eq!(
        c.termination_message_path.as_deref(),
        Some("/dev/termination-log")
    );
    assert_eq!(
        c.termination_message_policy.as_deref(),
        Some("FallbackToLogsOnError")
    );
    let e = &spec.ephemeral_containers.as_ref().unwrap()[0];
    assert_eq!(e.termination_message_policy.as_deref(), Some("File"));
    assert_eq!(e.image_pull_policy.as_deref(), Some("Always"));
}

#[test]
fn a22_image_pull_policy_follows_the_tag() {
    let digest = format!("busybox@sha256:{}", "0".repeat(64));
    let cases = [
        ("busybox", "Always"),
        ("busybox:latest", "Always"),
        ("docker.io/library/busybox", "Always"),
        ("busybox:1.36", "IfNotPresent"),
        ("registry.local:5000/team/app:v1", "IfNotPresent"),
        (digest.as_str(), "IfNotPresent"),
    ];
    for (image, want) in cases {
        let p = defaulted(&format!("  containers:\n  - name: c\n    image: {image}\n"));
        assert_eq!(
            p.spec.unwrap().containers[0].image_pull_policy.as_deref(),
            Some(want),
            "image {image}"
        );
    }
    let kept =
        defaulted("  containers:\n  - name: c\n    image: busybox\n    imagePullPolicy: Never\n");
    assert_eq!(
        kept.spec.unwrap().containers[0]
            .image_pull_policy
            .as_deref(),
        Some("Never")
    );
}

#[test]
fn t1_termination_grace_period_defaults_to_30() {
    let p = defaulted("  containers:\n  - {name: c, image: busybox}\n");
    assert_eq!(p.spec.unwrap().termination_grace_period_seconds, Some(30));
    let kept = defaulted(
        "  terminationGracePeriodSeconds: 0\n  containers:\n  - {name: c, image: busybox}\n",
    );
    assert_eq!(kept.spec.unwrap().termination_grace_period_seconds, Some(0));
}

/// T1 (floor at 1): a negative grace period is stored as 1, as the API server defaults it
/// since 1.27 (test/e2e/node/pods.go "pod with negative grace period").
#[test]
fn t1_negative_termination_grace_period_becomes_1() {
    let p = defaulted(
        "  terminationGracePeriodSeconds: -1\n  containers:\n  - {name: c, image: busybox}\n",
    );
    assert_eq!(p.spec.unwrap().termination_grace_period_seconds, Some(1));
}

#[test]
fn v9_pod_spec_defaults() {
    let p = defaulted(
        "  containers:\n  - name: c\n    image: busybox\n    ports:\n    - containerPort: 80\n",
    );
    assert_eq!(p.metadata.namespace.as_deref(), Some("default"));
    let spec = p.spec.unwrap();
    assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
    assert_eq!(spec.dns_policy.as_deref(), Some("ClusterFirst"));
    assert_eq!(spec.scheduler_name.as_deref(), Some("default-scheduler"));
    assert_eq!(spec.enable_service_links, Some(true));
    assert!(spec.security_context.is_some());
    let port = &spec.containers[0].ports.as_ref().unwrap()[0];
    assert_eq!(port.protocol.as_deref(), Some("TCP"));
    assert_eq!(port.host_port, None, "no host port without hostNetwork");
}

#[test]
fn v4_host_network_defaults_host_port_to_container_port() {
    let p = defaulted(
        "  hostNetwork: true\n  initContainers:\n  - name: i\n    image: busybox\n    ports: [{containerPort: 81}]\n  containers:\n  - name: c\n    image: busybox\n    ports: [{containerPort: 80}]\n",
    );
    let spec = p.spec.unwrap();
    assert_eq!(
        spec.containers[0].ports.as_ref().unwrap()[0].host_port,
        Some(80)
    );
    assert_eq!(
        spec.init_containers.unwrap()[0].ports.as_ref().unwrap()[0].host_port,
        Some(81)
    );
}

#[test]
fn requests_default_from_limits_per_resource() {
    let p = defaulted(
        "  containers:\n  - name: c\n    image: busybox\n    resources:\n      limits: {cpu: 500m, memory: 64Mi}\n      requests: {cpu: 100m}\n",
    );
    let r = p.spec.unwrap().containers[0].resources.clone().unwrap();
    let req = r.requests.unwrap();
    assert_eq!(req["cpu"].0, "100m", "existing request kept");
    assert_eq!(
        req["memory"].0, "64Mi",
        "missing request copied from the limit"
    );
}

#[test]
fn env_field_ref_api_version_defaults_to_v1() {
    let p = defaulted(
        "  containers:\n  - name: c\n    image: busybox\n    env:\n    - name: POD\n      valueFrom:\n        fieldRef: {fieldPath: metadata.name}\n",
    );
    let env = p.spec.unwrap().containers[0].env.clone().unwrap();
    let fr = env[0].value_from.clone().unwrap().field_ref.unwrap();
    assert_eq!(fr.api_version.as_deref(), Some("v1"));
}

#[test]
fn volumes_default_to_empty_dir_and_host_path_type() {
    let p = defaulted(
        "  containers:\n  - {name: c, image: busybox}\n  volumes:\n  - name: scratch\n  - name: host\n    hostPath: {path: /tmp}\n  - name: cfg\n    configMap: {name: cfg}\n",
    );
    let vols = p.spec.unwrap().volumes.unwrap();
    assert!(vols[0].empty_dir.is_some());
    assert_eq!(
        vols[1].host_path.as_ref().unwrap().type_.as_deref(),
        Some("")
    );
    assert_eq!(
        vols[2].config_map.as_ref().unwrap().default_mode,
        Some(0o644)
    );
}

#[test]
fn defaulting_is_idempotent() {
    let mut p = defaulted(
        "  containers:\n  - name: c\n    image: busybox\n    readinessProbe:\n      httpGet: {port: 80}\n",
    );
    let once = p.clone();
    apply_defaults(&mut p);
    assert_eq!(p, once);
}

// ---- V11: fileKeyRef ----------------------------------------------------------

#[test]
fn v11_file_key_ref_optional_defaults_to_false() {
    let p = defaulted(
        "  volumes:\n  - {name: env, emptyDir: {}}\n  containers:\n  - name: c\n    image: busybox\n    env:\n    - {name: A, valueFrom: {fileKeyRef: {volumeName: env, path: vars, key: A}}}\n    - {name: B, valueFrom: {fileKeyRef: {volumeName: env, path: vars, key: B, optional: true}}}\n",
    );
    let env = p.spec.unwrap().containers[0].env.clone().unwrap();
    let optional: Vec<Option<bool>> = env
        .iter()
        .map(|e| {
            e.value_from
                .as_ref()
                .unwrap()
                .file_key_ref
                .as_ref()
                .unwrap()
                .optional
        })
        .collect();
    assert_eq!(optional, [Some(false), Some(true)]);
}

// ---- V15: pod-level resources ---------------------------------------------

/// A resource list as (name, quantity text) pairs.
type Pairs = Vec<(String, String)>;

/// The pod-level (requests, limits).
fn pod_resources(p: &Pod) -> (Pairs, Pairs) {
    let r = p
        .spec
        .as_ref()
        .unwrap()
        .resources
        .clone()
        .unwrap_or_default();
    let list = |m: Option<
        std::collections::BTreeMap<
            String,
            podvisor_api::k8s_openapi::apimachinery::pkg::api::resource::Quantity,
        >,
    >| {
        m.unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.0))
            .collect::<Vec<_>>()
    };
    (list(r.requests), list(r.limits))
}

fn pairs(v: &[(&str, &str)]) -> Pairs {
    v.iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect()
}

#[test]
fn v15_pod_requests_default_from_containers_else_limits() {
    let p = defaulted(
        "  resources:\n    limits: {cpu: \"2\", memory: 1Gi}\n  initContainers:\n  - {name: side, image: busybox, restartPolicy: Always, resources: {requests: {cpu: 100m}}}\n  containers:\n  - {name: a, image: busybox, resources: {requests: {cpu: 500m}}}\n  - {name: b, image: busybox, resources: {limits: {cpu: 250m}}}\n",
    );
    let (requests, limits) = pod_resources(&p);
    // cpu: 100m + 500m + 250m (b's request defaulted from its limit);
    // memory: no container asks, so the pod limit.
    assert_eq!(requests, pairs(&[("cpu", "850m"), ("memory", "1Gi")]));
    assert_eq!(limits, pairs(&[("cpu", "2"), ("memory", "1Gi")]));
}

#[test]
fn v15_set_pod_requests_are_kept_and_nothing_without_limits() {
    let p = defaulted(
        "  resources:\n    requests: {cpu: \"1\"}\n    limits: {cpu: \"2\"}\n  containers:\n  - {name: a, image: busybox, resources: {requests: {cpu: 500m, memory: 64Mi}}}\n",
    );
    let (requests, _) = pod_resources(&p);
    // memory is requested by a container but has no pod limit: still
    // defaulted from the aggregate (cpu and memory are overcommittable).
    assert_eq!(requests, pairs(&[("cpu", "1"), ("memory", "64Mi")]));

    let only_requests = defaulted(
        "  resources:\n    requests: {cpu: \"1\"}\n  containers:\n  - {name: a, image: busybox, resources: {requests: {memory: 64Mi}}}\n",
    );
    assert_eq!(
        pod_resources(&only_requests),
        (pairs(&[("cpu", "1")]), vec![]),
        "without pod limits there is no request defaulting"
    );
    let none = defaulted(
        "  containers:\n  - {name: a, image: busybox, resources: {requests: {cpu: \"1\"}}}\n",
    );
    assert!(none.spec.unwrap().resources.is_none());
}

#[test]
fn v15_pod_hugepage_limits_default_from_containers() {
    let p = defaulted(
        "  resources:\n    limits: {memory: 1Gi}\n  containers:\n  - {name: a, image: busybox, resources: {limits: {hugepages-2Mi: 4Mi, memory: 100Mi}}}\n  - {name: b, image: busybox, resources: {limits: {hugepages-2Mi: 2Mi, memory: 100Mi}}}\n",
    );
    let (requests, limits) = pod_resources(&p);
    assert_eq!(
        limits,
        pairs(&[("hugepages-2Mi", "6Mi"), ("memory", "1Gi")])
    );
    // Then requests: memory from the containers, hugepages from the limit.
    assert_eq!(
        requests,
        pairs(&[("hugepages-2Mi", "6Mi"), ("memory", "200Mi")])
    );
}

// ---- V17: image volumes ------------------------------------------------------

#[test]
fn v17_image_volume_pull_policy_defaults_like_a_container() {
    let p = defaulted(
        "  volumes:\n  - {name: a, image: {reference: \"busybox\"}}\n  - {name: b, image: {reference: \"busybox:latest\"}}\n  - {name: c, image: {reference: \"busybox:1.36\"}}\n  - {name: d, image: {reference: \"busybox:1.36\", pullPolicy: Never}}\n  containers:\n  - {name: app, image: busybox}\n",
    );
    let got: Vec<Option<String>> = p
        .spec
        .unwrap()
        .volumes
        .unwrap()
        .into_iter()
        .map(|v| v.image.unwrap().pull_policy)
        .collect();
    assert_eq!(
        got,
        [
            Some("Always".to_owned()),
            Some("Always".to_owned()),
            Some("IfNotPresent".to_owned()),
            Some("Never".to_owned())
        ]
    );
}
