//! Fields of feature gates that are off by default in Kubernetes 1.35, and
//! their removal as the API server's `dropDisabledFields`
//! (`pkg/api/pod/util.go`) performs it before validation: a create with such
//! a field succeeds and the field is gone, with no error.
//!
//! Gates handled (all off by default in 1.35, behaviour reference §0):
//! - `ContainerStopSignals`: `lifecycle.stopSignal` of every container (T3);
//! - `ClusterTrustBundleProjection`: `projected.sources[].clusterTrustBundle`;
//! - `PodCertificateRequest`: `projected.sources[].podCertificate` (V17).
//!
//! As upstream, a field that the old object (on update) already uses is
//! kept, so an update never removes what a create let through.

use k8s_openapi::api::core::v1::{Container, EphemeralContainer, Lifecycle, Pod, PodSpec};

/// Removes the fields of disabled feature gates from `pod`, unless `old`
/// (the stored object, on update) already uses them. Call after
/// [`crate::apply_defaults`] and before [`crate::validate_pod`], as the API
/// server's create and update strategies do.
pub fn drop_disabled_fields(pod: &mut Pod, old: Option<&Pod>) {
    let old_spec = old.and_then(|p| p.spec.as_ref());
    let Some(spec) = pod.spec.as_mut() else {
        return;
    };
    if !old_spec.is_some_and(uses_stop_signal) {
        for l in lifecycles_mut(spec) {
            l.stop_signal = None;
        }
    }
    let old_uses = |f: fn(&PodSpec) -> bool| old_spec.is_some_and(f);
    let keep_bundles = old_uses(uses_cluster_trust_bundle);
    let keep_certificates = old_uses(uses_pod_certificate);
    for v in spec.volumes.iter_mut().flatten() {
        let Some(projected) = v.projected.as_mut() else {
            continue;
        };
        for src in projected.sources.iter_mut().flatten() {
            if !keep_bundles {
                src.cluster_trust_bundle = None;
            }
            if !keep_certificates {
                src.pod_certificate = None;
            }
        }
    }
}

fn lifecycles_mut(spec: &mut PodSpec) -> impl Iterator<Item = &mut Lifecycle> {
    let regular = spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten())
        .filter_map(|c: &mut Container| c.lifecycle.as_mut());
    let ephemeral = spec
        .ephemeral_containers
        .iter_mut()
        .flatten()
        .filter_map(|c: &mut EphemeralContainer| c.lifecycle.as_mut());
    regular.chain(ephemeral)
}

fn lifecycles(spec: &PodSpec) -> impl Iterator<Item = &Lifecycle> {
    let regular = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .filter_map(|c| c.lifecycle.as_ref());
    let ephemeral = spec
        .ephemeral_containers
        .iter()
        .flatten()
        .filter_map(|c| c.lifecycle.as_ref());
    regular.chain(ephemeral)
}

fn uses_stop_signal(spec: &PodSpec) -> bool {
    lifecycles(spec).any(|l| l.stop_signal.is_some())
}

fn projected_sources(
    spec: &PodSpec,
) -> impl Iterator<Item = &k8s_openapi::api::core::v1::VolumeProjection> {
    spec.volumes
        .iter()
        .flatten()
        .filter_map(|v| v.projected.as_ref())
        .flat_map(|p| p.sources.iter().flatten())
}

fn uses_cluster_trust_bundle(spec: &PodSpec) -> bool {
    projected_sources(spec).any(|s| s.cluster_trust_bundle.is_some())
}

fn uses_pod_certificate(spec: &PodSpec) -> bool {
    projected_sources(spec).any(|s| s.pod_certificate.is_some())
}
