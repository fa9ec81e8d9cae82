//! The `Volumes:` entries of `kubectl describe pod` (`describeVolumes` and its
//! `print*VolumeSource` helpers) for the volume types a pod on one machine uses; any other
//! type prints `<unknown>`, as kubectl does for a type it does not know.

use k8s_openapi::api::core::v1::Volume;

use super::{Writer, canonical, s};

pub(super) fn describe_source(w: &mut Writer<'_>, volume: &Volume) {
    if let Some(host) = &volume.host_path {
        let kind = host.type_.as_deref().unwrap_or("<none>");
        w.w(
            2,
            &format!(
                "Type:\tHostPath (bare host directory volume)\n    Path:\t{}\n    HostPathType:\t{kind}\n",
                host.path
            ),
        );
    } else if let Some(dir) = &volume.empty_dir {
        let size = dir
            .size_limit
            .as_ref()
            .filter(|q| {
                podvisor_api::quantity::Quantity::parse(&q.0)
                    .is_some_and(|p| !p.is_zero() && !p.is_negative())
            })
            .map_or_else(|| "<unset>".to_owned(), canonical);
        w.w(
            2,
            &format!(
                "Type:\tEmptyDir (a temporary directory that shares a pod's lifetime)\n    Medium:\t{}\n    SizeLimit:\t{size}\n",
                s(dir.medium.as_ref())
            ),
        );
    } else if let Some(secret) = &volume.secret {
        w.w(
            2,
            &format!(
                "Type:\tSecret (a volume populated by a Secret)\n    SecretName:\t{}\n    Optional:\t{}\n",
                s(secret.secret_name.as_ref()),
                secret.optional == Some(true)
            ),
        );
    } else if let Some(cm) = &volume.config_map {
        w.w(
            2,
            &format!(
                "Type:\tConfigMap (a volume populated by a ConfigMap)\n    Name:\t{}\n    Optional:\t{}\n",
                cm.name,
                cm.optional == Some(true)
            ),
        );
    } else if let Some(projected) = &volume.projected {
        w.w(
            2,
            "Type:\tProjected (a volume that contains injected data from multiple sources)\n",
        );
        for source in projected.sources.iter().flatten() {
            // kubectl prints the `*bool` itself: `<nil>` when unset (a set one prints as a
            // pointer address there; its value here).
            let optional =
                |o: Option<bool>| o.map_or_else(|| "<nil>".to_owned(), |b| b.to_string());
            if let Some(secret) = &source.secret {
                w.w(
                    2,
                    &format!(
                        "SecretName:\t{}\n    SecretOptionalName:\t{}\n",
                        secret.name,
                        optional(secret.optional)
                    ),
                );
            } else if source.downward_api.is_some() {
                w.w(2, "DownwardAPI:\ttrue\n");
            } else if let Some(cm) = &source.config_map {
                w.w(
                    2,
                    &format!(
                        "ConfigMapName:\t{}\n    ConfigMapOptional:\t{}\n",
                        cm.name,
                        optional(cm.optional)
                    ),
                );
            } else if let Some(token) = &source.service_account_token {
                w.w(
                    2,
                    &format!(
                        "TokenExpirationSeconds:\t{}\n",
                        token.expiration_seconds.unwrap_or(0)
                    ),
                );
            }
        }
    } else if let Some(downward) = &volume.downward_api {
        w.w(
            2,
            "Type:\tDownwardAPI (a volume populated by information about the pod)\n    Items:\n",
        );
        for item in downward.items.iter().flatten() {
            if let Some(field) = &item.field_ref {
                w.w(3, &format!("{} -> {}\n", field.field_path, item.path));
            }
            if let Some(resource) = &item.resource_field_ref {
                w.w(3, &format!("{} -> {}\n", resource.resource, item.path));
            }
        }
    } else if let Some(claim) = &volume.persistent_volume_claim {
        w.w(
            2,
            &format!(
                "Type:\tPersistentVolumeClaim (a reference to a PersistentVolumeClaim in the same namespace)\n    ClaimName:\t{}\n    ReadOnly:\t{}\n",
                claim.claim_name,
                claim.read_only == Some(true)
            ),
        );
    } else if let Some(nfs) = &volume.nfs {
        w.w(
            2,
            &format!(
                "Type:\tNFS (an NFS mount that lasts the lifetime of a pod)\n    Server:\t{}\n    Path:\t{}\n    ReadOnly:\t{}\n",
                nfs.server,
                nfs.path,
                nfs.read_only == Some(true)
            ),
        );
    } else if let Some(image) = &volume.image {
        w.w(
            2,
            &format!(
                "Type:\tImage (a container image or OCI artifact)\n    Reference:\t{}\n    PullPolicy:\t{}\n",
                s(image.reference.as_ref()),
                s(image.pull_policy.as_ref())
            ),
        );
    } else {
        w.w(1, "<unknown>\n");
    }
}
