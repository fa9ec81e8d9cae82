//! M10: static pods may not reference API objects
//! (`PreventStaticPodAPIReferences`, beta and on since 1.34). A static pod
//! is read from a file by the node agent and must run without the API
//! server, so nothing in it may name a ServiceAccount, Secret, ConfigMap,
//! claim or other object; the kubelet rejects such a pod at admission.

use k8s_openapi::api::core::v1::{Container, EnvFromSource, EnvVar, Pod, PodSpec, Volume};

use super::field::{FieldError, Path};
use super::{ValidationErrors, into_result};

const MSG: &str = "static pods may not reference API objects";

/// Every reference to an API object in a static pod, each as a `Forbidden`
/// error at its field path.
///
/// # Errors
///
/// The references found, in spec order.
pub fn validate_static_pod_references(pod: &Pod) -> Result<(), ValidationErrors> {
    let errs = pod
        .spec
        .as_ref()
        .map(|s| spec_references(s, &Path::new("spec")))
        .unwrap_or_default();
    into_result(pod, errs)
}

fn spec_references(spec: &PodSpec, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if spec
        .service_account_name
        .as_deref()
        .is_some_and(|n| !n.is_empty())
    {
        errs.push(FieldError::forbidden(
            &path.child("serviceAccountName"),
            MSG,
        ));
    }
    for (i, v) in spec.volumes.iter().flatten().enumerate() {
        errs.extend(volume_references(v, &path.child("volumes").index(i)));
    }
    let kinds = [
        (
            "initContainers",
            spec.init_containers.as_deref().unwrap_or_default(),
        ),
        ("containers", spec.containers.as_slice()),
    ];
    for (kind, list) in kinds {
        for (i, c) in list.iter().enumerate() {
            errs.extend(container_references(c, &path.child(kind).index(i)));
        }
    }
    for (i, e) in spec.ephemeral_containers.iter().flatten().enumerate() {
        let p = path.child("ephemeralContainers").index(i);
        errs.extend(env_references(
            e.env.as_deref().unwrap_or_default(),
            e.env_from.as_deref().unwrap_or_default(),
            &p,
        ));
    }
    if spec.resource_claims.as_ref().is_some_and(|c| !c.is_empty()) {
        errs.push(FieldError::forbidden(&path.child("resourceClaims"), MSG));
    }
    errs
}

fn volume_references(v: &Volume, path: &Path) -> Vec<FieldError> {
    let sources = [
        ("secret", v.secret.is_some()),
        ("configMap", v.config_map.is_some()),
        ("persistentVolumeClaim", v.persistent_volume_claim.is_some()),
        ("ephemeral", v.ephemeral.is_some()),
        ("csi", v.csi.is_some()),
        ("glusterfs", v.glusterfs.is_some()),
        ("azureFile", v.azure_file.is_some()),
    ];
    let mut errs: Vec<FieldError> = sources
        .into_iter()
        .filter(|(_, set)| *set)
        .map(|(name, _)| FieldError::forbidden(&path.child(name), MSG))
        .collect();
    let projected = v.projected.iter().flat_map(|p| p.sources.iter().flatten());
    for (i, src) in projected.enumerate() {
        let sp = path.child("projected").child("sources").index(i);
        let kinds = [
            ("secret", src.secret.is_some()),
            ("configMap", src.config_map.is_some()),
            ("serviceAccountToken", src.service_account_token.is_some()),
            ("clusterTrustBundle", src.cluster_trust_bundle.is_some()),
            ("podCertificate", src.pod_certificate.is_some()),
        ];
        errs.extend(
            kinds
                .into_iter()
                .filter(|(_, set)| *set)
                .map(|(name, _)| FieldError::forbidden(&sp.child(name), MSG)),
        );
    }
    errs
}

fn container_references(c: &Container, path: &Path) -> Vec<FieldError> {
    env_references(
        c.env.as_deref().unwrap_or_default(),
        c.env_from.as_deref().unwrap_or_default(),
        path,
    )
}

fn env_references(env: &[EnvVar], env_from: &[EnvFromSource], path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, e) in env.iter().enumerate() {
        let Some(from) = &e.value_from else { continue };
        let p = path.child("env").index(i).child("valueFrom");
        if from.secret_key_ref.is_some() {
            errs.push(FieldError::forbidden(&p.child("secretKeyRef"), MSG));
        }
        if from.config_map_key_ref.is_some() {
            errs.push(FieldError::forbidden(&p.child("configMapKeyRef"), MSG));
        }
    }
    for (i, e) in env_from.iter().enumerate() {
        let p = path.child("envFrom").index(i);
        if e.secret_ref.is_some() {
            errs.push(FieldError::forbidden(&p.child("secretRef"), MSG));
        }
        if e.config_map_ref.is_some() {
            errs.push(FieldError::forbidden(&p.child("configMapRef"), MSG));
        }
    }
    errs
}
