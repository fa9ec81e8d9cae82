//! API-server defaulting of Pods (`pkg/apis/core/v1/defaults.go`), plus the
//! namespace the request context would supply.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, ContainerPort, EnvVar, EphemeralContainer, HTTPGetAction, Lifecycle,
    LifecycleHandler, Pod, PodSecurityContext, PodSpec, Probe, ResourceRequirements, Volume,
};
use k8s_openapi::api::core::v1::{EmptyDirVolumeSource, ObjectFieldSelector};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as WireQuantity;

use crate::resources::{
    aggregate_container_limits, aggregate_container_requests, is_supported_pod_level_resource,
};

/// `DefaultTerminationGracePeriodSeconds` (T1, V9).
pub const DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS: i64 = 30;
/// `TerminationMessagePathDefault` (M2).
pub const DEFAULT_TERMINATION_MESSAGE_PATH: &str = "/dev/termination-log";
/// Mode given to secret, configMap, downwardAPI and projected files (0644).
pub const DEFAULT_VOLUME_FILE_MODE: i32 = 0o644;

/// Applies the defaults the API server applies on create. Idempotent: set
/// fields are never changed.
///
/// Pod: `metadata.namespace` `default`; spec: `restartPolicy` `Always`,
/// `terminationGracePeriodSeconds` 30, `dnsPolicy` `ClusterFirst`,
/// `schedulerName` `default-scheduler`, `securityContext` `{}`,
/// `enableServiceLinks` true; with `hostNetwork`, each `hostPort` = its
/// `containerPort`. Containers (init, regular, ephemeral):
/// `terminationMessagePath`/`Policy` (M2), `imagePullPolicy` (A22), port
/// `protocol` TCP, probe timings (R1), `httpGet` `path` `/` and `scheme`
/// `HTTP` (probes and hooks), env `fieldRef.apiVersion` `v1` and
/// `fileKeyRef.optional` false (V11); for init and
/// regular containers, each limit without a request becomes the request;
/// gRPC probe `service` `""` (R1). Pod-level `resources` (V15): huge-page
/// limits from the containers', then, with limits set, missing cpu/memory
/// requests from the containers' aggregate, else from the limits.
/// Volumes: `emptyDir` when no source, `hostPath.type` `""`, file modes
/// 0644, projected token expiry 3600 s, image volume `pullPolicy` as a
/// container's `imagePullPolicy` (V17).
pub fn apply_defaults(pod: &mut Pod) {
    if pod.metadata.namespace.as_deref().unwrap_or("").is_empty() {
        pod.metadata.namespace = Some("default".to_owned());
    }
    let spec = pod.spec.get_or_insert_with(PodSpec::default);
    default_pod_spec(spec);
}

fn set_if_empty(field: &mut Option<String>, value: &str) {
    if field.as_deref().unwrap_or("").is_empty() {
        *field = Some(value.to_owned());
    }
}

fn default_pod_spec(spec: &mut PodSpec) {
    set_if_empty(&mut spec.dns_policy, "ClusterFirst");
    set_if_empty(&mut spec.restart_policy, "Always");
    set_if_empty(&mut spec.scheduler_name, "default-scheduler");
    if spec.security_context.is_none() {
        spec.security_context = Some(PodSecurityContext::default());
    }
    match spec.termination_grace_period_seconds {
        None => {
            spec.termination_grace_period_seconds = Some(DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS);
        }
        // Negative values are invalid and treated as 1 (kubernetes/kubernetes#115606, 1.27;
        // e2e "pod with negative grace period" reads back 1).
        Some(g) if g < 0 => spec.termination_grace_period_seconds = Some(1),
        Some(_) => {}
    }
    if spec.enable_service_links.is_none() {
        spec.enable_service_links = Some(true);
    }
    let host_network = spec.host_network.unwrap_or(false);

    for c in spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten())
    {
        default_container(c);
        default_requests_from_limits(c.resources.as_mut());
        if host_network {
            for p in c.ports.iter_mut().flatten() {
                if p.host_port.unwrap_or(0) == 0 {
                    p.host_port = Some(p.container_port);
                }
            }
        }
    }
    for e in spec.ephemeral_containers.iter_mut().flatten() {
        default_ephemeral_container(e);
    }
    for v in spec.volumes.iter_mut().flatten() {
        default_volume(v);
    }
    // PodLevelResources (beta, on): after the containers' own defaults.
    default_pod_hugepage_limits(spec);
    default_pod_requests(spec);
}

/// V15: pod-level huge-page limits default to the containers' aggregate
/// huge-page limits, when `spec.resources` already sets something.
fn default_pod_hugepage_limits(spec: &mut PodSpec) {
    let Some(r) = &spec.resources else { return };
    if r.limits.as_ref().is_none_or(BTreeMap::is_empty)
        && r.requests.as_ref().is_none_or(BTreeMap::is_empty)
    {
        return;
    }
    let aggregate = aggregate_container_limits(spec);
    let Some(r) = spec.resources.as_mut() else {
        return;
    };
    let was_unset = r.limits.is_none();
    let limits = r.limits.get_or_insert_with(BTreeMap::new);
    for (name, q) in aggregate {
        if name.starts_with("hugepages-") {
            limits
                .entry(name)
                .or_insert_with(|| WireQuantity(q.canonical()));
        }
    }
    if was_unset && limits.is_empty() {
        r.limits = None;
    }
}

/// V15: with pod-level limits, a missing pod-level request becomes the
/// containers' aggregate request (cpu, memory) or else the pod limit.
fn default_pod_requests(spec: &mut PodSpec) {
    let Some(r) = &spec.resources else { return };
    let Some(limits) = r.limits.clone().filter(|l| !l.is_empty()) else {
        return;
    };
    let aggregate = aggregate_container_requests(spec);
    let Some(r) = spec.resources.as_mut() else {
        return;
    };
    let was_unset = r.requests.is_none();
    let requests = r.requests.get_or_insert_with(BTreeMap::new);
    for (name, q) in aggregate {
        // Only overcommittable supported resources: cpu and memory.
        if matches!(name.as_str(), "cpu" | "memory") {
            requests
                .entry(name)
                .or_insert_with(|| WireQuantity(q.canonical()));
        }
    }
    for (name, q) in limits {
        if is_supported_pod_level_resource(&name) {
            requests.entry(name).or_insert(q);
        }
    }
    if was_unset && requests.is_empty() {
        r.requests = None;
    }
}

/// `SetDefaults_Container` and the nested per-type defaults.
fn default_container(c: &mut Container) {
    if c.image_pull_policy.as_deref().unwrap_or("").is_empty() {
        c.image_pull_policy =
            Some(default_pull_policy(c.image.as_deref().unwrap_or("")).to_owned());
    }
    set_if_empty(
        &mut c.termination_message_path,
        DEFAULT_TERMINATION_MESSAGE_PATH,
    );
    set_if_empty(&mut c.termination_message_policy, "File");
    default_ports(c.ports.as_deref_mut());
    default_env(c.env.as_deref_mut());
    for p in [
        &mut c.liveness_probe,
        &mut c.readiness_probe,
        &mut c.startup_probe,
    ]
    .into_iter()
    .flatten()
    {
        default_probe(p);
    }
    if let Some(l) = &mut c.lifecycle {
        default_lifecycle(l);
    }
}

/// The API server's defaults for one ephemeral container (pull policy, termination message
/// path and policy), as [`apply_defaults`] applies them to `spec.ephemeralContainers`.
pub fn default_ephemeral_container(e: &mut EphemeralContainer) {
    if e.image_pull_policy.as_deref().unwrap_or("").is_empty() {
        e.image_pull_policy =
            Some(default_pull_policy(e.image.as_deref().unwrap_or("")).to_owned());
    }
    set_if_empty(
        &mut e.termination_message_path,
        DEFAULT_TERMINATION_MESSAGE_PATH,
    );
    set_if_empty(&mut e.termination_message_policy, "File");
    default_ports(e.ports.as_deref_mut());
    default_env(e.env.as_deref_mut());
    for p in [
        &mut e.liveness_probe,
        &mut e.readiness_probe,
        &mut e.startup_probe,
    ]
    .into_iter()
    .flatten()
    {
        default_probe(p);
    }
    if let Some(l) = &mut e.lifecycle {
        default_lifecycle(l);
    }
}

fn default_ports(ports: Option<&mut [ContainerPort]>) {
    for p in ports.into_iter().flatten() {
        set_if_empty(&mut p.protocol, "TCP");
    }
}

fn default_env(env: Option<&mut [EnvVar]>) {
    for e in env.into_iter().flatten() {
        let Some(from) = e.value_from.as_mut() else {
            continue;
        };
        if let Some(fr) = from.field_ref.as_mut() {
            default_field_selector(fr);
        }
        // V11 (EnvFiles): a file key is required unless it says otherwise.
        if let Some(fk) = from.file_key_ref.as_mut() {
            fk.optional.get_or_insert(false);
        }
    }
}

fn default_field_selector(fr: &mut ObjectFieldSelector) {
    set_if_empty(&mut fr.api_version, "v1");
}

/// R1: zero or unset timings take their defaults; `initialDelaySeconds`
/// stays 0; the gRPC `service` defaults to `""`.
fn default_probe(p: &mut Probe) {
    let default = |v: &mut Option<i32>, d: i32| {
        if v.unwrap_or(0) == 0 {
            *v = Some(d);
        }
    };
    default(&mut p.timeout_seconds, 1);
    default(&mut p.period_seconds, 10);
    default(&mut p.success_threshold, 1);
    default(&mut p.failure_threshold, 3);
    if let Some(h) = &mut p.http_get {
        default_http_get(h);
    }
    if let Some(g) = &mut p.grpc
        && g.service.is_none()
    {
        g.service = Some(String::new());
    }
}

fn default_http_get(h: &mut HTTPGetAction) {
    set_if_empty(&mut h.path, "/");
    set_if_empty(&mut h.scheme, "HTTP");
}

fn default_lifecycle(l: &mut Lifecycle) {
    for h in [&mut l.post_start, &mut l.pre_stop].into_iter().flatten() {
        default_lifecycle_handler(h);
    }
}

fn default_lifecycle_handler(h: &mut LifecycleHandler) {
    if let Some(g) = &mut h.http_get {
        default_http_get(g);
    }
}

/// `SetDefaults_Pod`: a limit without a matching request becomes the request.
fn default_requests_from_limits(r: Option<&mut ResourceRequirements>) {
    let Some(r) = r else { return };
    let Some(limits) = &r.limits else { return };
    let requests = r.requests.get_or_insert_with(Default::default);
    for (k, v) in limits {
        requests.entry(k.clone()).or_insert_with(|| v.clone());
    }
}

fn default_volume(v: &mut Volume) {
    let has_source = v.aws_elastic_block_store.is_some()
        || v.azure_disk.is_some()
        || v.azure_file.is_some()
        || v.cephfs.is_some()
        || v.cinder.is_some()
        || v.config_map.is_some()
        || v.csi.is_some()
        || v.downward_api.is_some()
        || v.empty_dir.is_some()
        || v.ephemeral.is_some()
        || v.fc.is_some()
        || v.flex_volume.is_some()
        || v.flocker.is_some()
        || v.gce_persistent_disk.is_some()
        || v.git_repo.is_some()
        || v.glusterfs.is_some()
        || v.host_path.is_some()
        || v.image.is_some()
        || v.iscsi.is_some()
        || v.nfs.is_some()
        || v.persistent_volume_claim.is_some()
        || v.photon_persistent_disk.is_some()
        || v.portworx_volume.is_some()
        || v.projected.is_some()
        || v.quobyte.is_some()
        || v.rbd.is_some()
        || v.scale_io.is_some()
        || v.secret.is_some()
        || v.storageos.is_some()
        || v.vsphere_volume.is_some();
    if !has_source {
        v.empty_dir = Some(EmptyDirVolumeSource::default());
    }
    if let Some(hp) = &mut v.host_path
        && hp.type_.is_none()
    {
        hp.type_ = Some(String::new());
    }
    // V17: an image volume is pulled as a container image would be.
    if let Some(img) = &mut v.image
        && img.pull_policy.as_deref().unwrap_or("").is_empty()
    {
        img.pull_policy =
            Some(default_pull_policy(img.reference.as_deref().unwrap_or("")).to_owned());
    }
    if let Some(s) = &mut v.secret {
        s.default_mode.get_or_insert(DEFAULT_VOLUME_FILE_MODE);
    }
    if let Some(cm) = &mut v.config_map {
        cm.default_mode.get_or_insert(DEFAULT_VOLUME_FILE_MODE);
    }
    if let Some(d) = &mut v.downward_api {
        d.default_mode.get_or_insert(DEFAULT_VOLUME_FILE_MODE);
        for f in d.items.iter_mut().flatten() {
            if let Some(fr) = &mut f.field_ref {
                default_field_selector(fr);
            }
        }
    }
    if let Some(p) = &mut v.projected {
        p.default_mode.get_or_insert(DEFAULT_VOLUME_FILE_MODE);
        for src in p.sources.iter_mut().flatten() {
            if let Some(t) = &mut src.service_account_token {
                t.expiration_seconds.get_or_insert(3600);
            }
            for f in src
                .downward_api
                .iter_mut()
                .flat_map(|d| d.items.iter_mut().flatten())
            {
                if let Some(fr) = &mut f.field_ref {
                    default_field_selector(fr);
                }
            }
        }
    }
}

/// A22: `Always` when the image's tag is `latest` or it has neither tag nor
/// digest; otherwise (including unparseable references) `IfNotPresent`.
#[must_use]
pub fn default_pull_policy(image: &str) -> &'static str {
    match image_tag(image) {
        Some(tag) if tag == "latest" => "Always",
        _ => "IfNotPresent",
    }
}

/// The effective tag of an image reference as Kubernetes' `ParseImageName`
/// sees it: the explicit tag, `latest` when there is neither tag nor digest,
/// empty when only a digest is given, `None` when the reference is invalid.
fn image_tag(image: &str) -> Option<String> {
    if image.is_empty() {
        return None;
    }
    let (name, digest) = match image.split_once('@') {
        Some((n, d)) => {
            let (algo, hex) = d.split_once(':')?;
            if algo.is_empty() || hex.len() < 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return None;
            }
            (n, true)
        }
        None => (image, false),
    };
    let last_slash = name.rfind('/').map_or(0, |i| i + 1);
    let (repo, tag) = match name[last_slash..].rfind(':') {
        Some(i) => (&name[..last_slash + i], Some(&name[last_slash + i + 1..])),
        None => (name, None),
    };
    if !valid_repository(repo) {
        return None;
    }
    match tag {
        Some(t) => valid_tag(t).then(|| t.to_owned()),
        None if digest => Some(String::new()),
        None => Some("latest".to_owned()),
    }
}

fn valid_tag(tag: &str) -> bool {
    let b = tag.as_bytes();
    !b.is_empty()
        && b.len() <= 128
        && (b[0].is_ascii_alphanumeric() || b[0] == b'_')
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
}

/// `[domain/]path` with lowercase path components; the first component is
/// a domain when it has a `.` or `:`, is `localhost`, or has capitals.
fn valid_repository(repo: &str) -> bool {
    let mut parts: Vec<&str> = repo.split('/').collect();
    if parts.len() > 1 {
        let first = parts[0];
        let is_domain = first.contains(['.', ':'])
            || first == "localhost"
            || first.bytes().any(|b| b.is_ascii_uppercase());
        if is_domain {
            let ok = !first.is_empty()
                && first
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':'));
            if !ok {
                return false;
            }
            parts.remove(0);
        }
    }
    !parts.is_empty()
        && parts.iter().all(|p| {
            let b = p.as_bytes();
            !b.is_empty()
                && is_lower_alnum(b[0])
                && is_lower_alnum(b[b.len() - 1])
                && b.iter()
                    .all(|&c| is_lower_alnum(c) || matches!(c, b'.' | b'_' | b'-'))
        })
}

fn is_lower_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_policy_from_image() {
        assert_eq!(default_pull_policy("busybox"), "Always");
        assert_eq!(default_pull_policy("busybox:latest"), "Always");
        assert_eq!(default_pull_policy("busybox:1.36"), "IfNotPresent");
        assert_eq!(default_pull_policy("localhost:5000/team/app"), "Always");
        assert_eq!(
            default_pull_policy("localhost:5000/team/app:v2"),
            "IfNotPresent"
        );
        let digest = format!("busybox@sha256:{}", "a".repeat(64));
        assert_eq!(default_pull_policy(&digest), "IfNotPresent");
        let both = format!("busybox:latest@sha256:{}", "a".repeat(64));
        assert_eq!(default_pull_policy(&both), "Always");
        assert_eq!(default_pull_policy("BusyBox"), "IfNotPresent");
        assert_eq!(default_pull_policy(""), "IfNotPresent");
    }
}
