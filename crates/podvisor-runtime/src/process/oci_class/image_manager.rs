//! The kubelet's image manager (`EnsureImageExists`) for the `oci` class: the pull policy,
//! the verification of a present image's credentials (1.35's `KubeletEnsureSecretPulledImages`,
//! beta and on, with its default policy `NeverVerifyPreloadedImages`: the decision is
//! [`verify::must_attempt_pull`], over the store's [`podvisor_image::PullRecords`]), one pull
//! at a time with the pod's keyring, and what each pull records.
//!
//! A present image is used as it is when no pull of the node recorded it (loaded with
//! `podvisor image load`, pulled with `podvisor image pull`, or there before the records), when
//! it was pulled with credentials every pod has (the node's `--registry-config`, or none), or
//! when one of the pod's pull secrets is one it was pulled with (the same Secret object, or
//! the same credentials). Otherwise the pod pulls it again with its own credentials, even
//! under `IfNotPresent` (and without access gets `ErrImagePull`, as the kubelet's pod does);
//! under `Never` it gets `ErrImageNeverPull`.

use super::{OciClass, record_image_use};
use crate::{ImageReport, StartError, StartRequest};
use k8s_openapi::api::core::v1::Pod;
use podvisor_image::pull_records::verify::{self, Verdict};
use podvisor_image::{
    Credentials, Image, ImageStore, NoProgress, PullCredentials, PullOptions, PullRecords,
    PullSecret, Reference, RegistryConfig,
};
use std::path::Path;
use std::time::Instant;

/// One credential of a pod's keyring and the Secret it came from (`None`: the node's own
/// credentials, or anonymous), as the kubelet's `TrackedAuthConfig`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Keyed {
    pub(super) credentials: Credentials,
    pub(super) secret: Option<PullSecret>,
}

impl Keyed {
    /// What a pull that succeeded with it is recorded as: the Secret, or node-wide access.
    fn pulled_with(&self) -> PullCredentials {
        match &self.secret {
            Some(secret) => PullCredentials {
                node_pods_accessible: false,
                kubernetes_secrets: vec![secret.clone()],
            },
            None => PullCredentials {
                node_pods_accessible: true,
                kubernetes_secrets: Vec::new(),
            },
        }
    }
}

/// The credentials to try for `reference`, in the kubelet's order (its credential-provider
/// keyring): those of the pod's `imagePullSecrets` (`kubernetes.io/dockerconfigjson`, or the
/// legacy `kubernetes.io/dockercfg`) that match the image, in the pod's order, each with its
/// Secret's coordinates and credential hash, then the node's `--registry-config`; anonymous
/// when none matches. Secrets that are missing, of another type, or unparsable are skipped,
/// as the kubelet skips them.
pub(super) fn pull_keyring(
    pod: &Pod,
    objects: &crate::config::objects::PodObjects,
    node: Option<&RegistryConfig>,
    reference: &Reference,
) -> Vec<Keyed> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let mut keyring = Vec::new();
    for name in podvisor_api::references::pull_secret_names(pod) {
        let Some(secret) = objects.secrets.get(&name) else {
            continue;
        };
        let parsed = match secret.type_.as_str() {
            "kubernetes.io/dockerconfigjson" => secret
                .data
                .get(podvisor_api::config::DOCKER_CONFIG_JSON_KEY)
                .map(|d| RegistryConfig::parse(d)),
            "kubernetes.io/dockercfg" => secret
                .data
                .get(podvisor_api::config::DOCKER_CONFIG_KEY)
                .map(|d| RegistryConfig::parse_dockercfg(d)),
            _ => None,
        };
        if let Some(Ok(config)) = parsed
            && let Some(credentials) = config.lookup(reference)
        {
            keyring.push(Keyed {
                secret: Some(PullSecret {
                    namespace: namespace.to_owned(),
                    name: name.clone(),
                    uid: secret.uid.clone(),
                    credential_hash: credentials.content_hash(),
                }),
                credentials,
            });
        }
    }
    if let Some(credentials) = node.and_then(|r| r.lookup(reference)) {
        keyring.push(Keyed {
            credentials,
            secret: None,
        });
    }
    if keyring.is_empty() {
        keyring.push(Keyed {
            credentials: Credentials::Anonymous,
            secret: None,
        });
    }
    keyring
}

/// The pod's secrets a present image's record is matched against: those of its keyring.
fn pod_secrets(keyring: &[Keyed]) -> Vec<PullSecret> {
    keyring.iter().filter_map(|k| k.secret.clone()).collect()
}

/// Whether a pod with `secrets` may use `image`, present ([`verify::must_attempt_pull`]); a
/// merge the verdict asks for is written. A record that cannot be read makes the pod pull
/// (the kubelet fails safe).
fn verify_present(
    records: &PullRecords,
    reference: &Reference,
    image: &Image,
    secrets: &[PullSecret],
) -> bool {
    let record = match records.pulled(image.id.as_str()) {
        Ok(record) => record,
        Err(e) => {
            tracing::warn!(error = %e, image = %reference, "image pull record unreadable: pulling");
            return false;
        }
    };
    let intent = records.intent_exists(&reference.to_string());
    let verdict = verify::must_attempt_pull(&reference.name(), record.as_ref(), intent, secrets);
    if let Verdict::Use(verify::Access::Secret {
        remember: Some(secret),
    }) = &verdict
    {
        let merged = PullCredentials {
            node_pods_accessible: false,
            kubernetes_secrets: vec![secret.clone()],
        };
        if let Err(e) = records.record_pulled(&reference.name(), image.id.as_str(), &merged) {
            tracing::warn!(error = %e, image = %reference, "recording a matching pull secret");
        }
    }
    match verdict {
        Verdict::Use(_) => true,
        Verdict::MustPull(why) => {
            tracing::info!(image = %reference, ?why, "present image not verified for the pod: pulling");
            false
        }
    }
}

/// Pulls `reference` with each credential of `keyring` in turn (the kubelet's `pullImage`:
/// the first pull that succeeds wins, else the last error), between an intent recorded
/// before and the image's pulled record (or the intent's removal) after.
fn pull_recorded(
    store: &ImageStore,
    records: &PullRecords,
    reference: &Reference,
    base: &PullOptions,
    keyring: &[Keyed],
    handle: &tokio::runtime::Handle,
) -> Result<podvisor_image::PullReport, String> {
    let image = reference.to_string();
    records.record_intent(&image).map_err(|e| {
        format!(
            "Failed to record image pull intent for container image {}: {e}",
            podvisor_api::gotext::quote(&image)
        )
    })?;
    let mut last = None;
    let mut tried: Vec<&Credentials> = Vec::new();
    for keyed in keyring {
        if tried.contains(&&keyed.credentials) {
            continue;
        }
        tried.push(&keyed.credentials);
        let options = PullOptions {
            credentials: keyed.credentials.clone(),
            ..base.clone()
        };
        match handle.block_on(store.pull(reference, &options, &NoProgress)) {
            Ok(pulled) => {
                // Without the record the intent stays: the next pod of this image then pulls
                // again rather than take the image as preloaded.
                match records.record_pulled(
                    &reference.name(),
                    pulled.image.id.as_str(),
                    &keyed.pulled_with(),
                ) {
                    Ok(()) => {
                        if let Err(e) = records.clear_intent(&image) {
                            tracing::warn!(error = %e, %image, "removing an image pull intent");
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, %image, "recording an image pull"),
                }
                return Ok(pulled);
            }
            Err(e) => last = Some(e),
        }
    }
    if let Err(e) = records.clear_intent(&image) {
        tracing::warn!(error = %e, %image, "removing an image pull intent");
    }
    Err(last.map_or_else(|| "no credentials to try".to_owned(), |e| e.to_string()))
}

impl OciClass {
    /// Resolves the container's image as the kubelet's image manager does, and records it
    /// as used by the pod (`<pod dir>/images`).
    pub(super) async fn ensure_image(
        &self,
        request: &StartRequest,
        pod_dir: &Path,
    ) -> Result<(Image, ImageReport), StartError> {
        let (pod, container) = (&request.pod, &request.container);
        let fail = |reason: &str, message: String, pulling: bool| StartError {
            reason: reason.to_owned(),
            message,
            created: false,
            pulling,
        };
        let image_name = container.image.clone().unwrap_or_default();
        let reference = Reference::parse(&image_name).map_err(|e| {
            fail(
                "InvalidImageName",
                format!(
                    "Failed to apply default image tag {}: couldn't parse image name {}: {}",
                    podvisor_api::gotext::quote(&image_name),
                    podvisor_api::gotext::quote(&image_name),
                    e.reason
                ),
                false,
            )
        })?;
        let policy = container
            .image_pull_policy
            .as_deref()
            .unwrap_or("IfNotPresent");
        let keyring = pull_keyring(pod, &request.objects, self.registry.as_ref(), &reference);
        // A present image the policy and the pull records let the pod use is recorded as in
        // use on the same blocking thread (one hop less on the start's path).
        let takes_present = matches!(policy, "IfNotPresent" | "Never");
        let (present, verified, recorded) = {
            let store = self.images.clone();
            let records = self.pull_records.clone();
            let reference = reference.clone();
            let secrets = pod_secrets(&keyring);
            let pod_dir = pod_dir.to_owned();
            tokio::task::spawn_blocking(move || -> podvisor_image::Result<_> {
                let present = store.get(&reference)?;
                // Whether this pod may use the present image (its pull records).
                let verified = present
                    .as_ref()
                    .is_some_and(|image| verify_present(&records, &reference, image, &secrets));
                let recorded = present
                    .as_ref()
                    .filter(|_| takes_present && verified)
                    .map(|image| record_image_use(&pod_dir, &image.id));
                Ok((present, verified, recorded))
            })
            .await
            .map_err(|e| fail("ErrImagePull", e.to_string(), false))?
            .map_err(|e| fail("ErrImagePull", e.to_string(), false))?
        };
        let usable = takes_present && verified;
        // An `Always` pull that fails while the image is here for this pod: the user may not
        // know `:latest` (or no tag) means `Always` (issue 33: `busybox` offline).
        let hint = if policy == "Always" && verified {
            "; the image is present on this node, but imagePullPolicy Always (the default for \
             :latest or no tag) pulls it every time: imagePullPolicy: IfNotPresent, or a tag \
             other than :latest, would use it"
        } else {
            ""
        };
        let (image, report) = match (policy, present) {
            ("Never", Some(image)) if usable => (image, ImageReport::Present),
            ("Never", _) => {
                // Absent, or present but not verified for this pod's credentials.
                return Err(fail(
                    "ErrImageNeverPull",
                    format!(
                        "Container image {} is not present with pull policy of Never",
                        podvisor_api::gotext::quote(&image_name)
                    ),
                    false,
                ));
            }
            ("IfNotPresent", Some(image)) if usable => (image, ImageReport::Present),
            _ => {
                let requested = Instant::now();
                let _one_at_a_time = self.pulls.lock().await;
                // The node's options (its mirrors, its credentials), tried with each credential
                // of the keyring in turn.
                let base = PullOptions::for_reference(self.registry.as_ref(), &reference);
                // On a blocking thread of its own: the pull's future is not provably `Send`
                // (its layer stream's closures borrow), which the `Runtime` trait requires.
                let (store, records, wanted) = (
                    self.images.clone(),
                    self.pull_records.clone(),
                    reference.clone(),
                );
                let handle = tokio::runtime::Handle::current();
                let pulled = tokio::task::spawn_blocking(move || {
                    pull_recorded(&store, &records, &wanted, &base, &keyring, &handle)
                })
                .await
                .map_err(|e| fail("ErrImagePull", e.to_string(), true))?
                .map_err(|e| fail("ErrImagePull", format!("{e}{hint}"), true))?;
                let report = ImageReport::Pulled {
                    pull: pulled.duration,
                    total: requested.elapsed(),
                    size: pulled.image.size,
                };
                (pulled.image, report)
            }
        };
        // When it was last used only orders image garbage collection: not worth a start's
        // wait (it rewrites and fsyncs the store's index once a second at most).
        let (store, id) = (self.images.clone(), image.id.clone());
        drop(tokio::task::spawn_blocking(move || store.mark_used(&id)));
        let recorded = match recorded {
            Some(recorded) => recorded,
            None => {
                let id = image.id.clone();
                let pod_dir = pod_dir.to_owned();
                tokio::task::spawn_blocking(move || record_image_use(&pod_dir, &id))
                    .await
                    .unwrap_or(Ok(()))
            }
        };
        if let Err(e) = recorded {
            // Without the record the image could be collected under the pod: no start.
            return Err(fail(
                "CreateContainerError",
                format!("recording the image's use: {e}"),
                false,
            ));
        }
        Ok((image, report))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::objects::{PodObjects, SecretData};

    fn dockerconfig(server: &str, user: &str, password: &str, uid: &str) -> SecretData {
        let auths =
            serde_json::json!({"auths": {server: {"username": user, "password": password}}});
        SecretData {
            data: [(
                podvisor_api::config::DOCKER_CONFIG_JSON_KEY.to_owned(),
                auths.to_string().into_bytes(),
            )]
            .into(),
            type_: "kubernetes.io/dockerconfigjson".into(),
            uid: uid.into(),
        }
    }

    fn pod(secrets: &[&str]) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "team"},
            "spec": {
                "imagePullSecrets": secrets.iter().map(|s| serde_json::json!({"name": s})).collect::<Vec<_>>(),
                "containers": [{"name": "app", "image": "reg.example:5000/private/app:1"}]
            }
        }))
        .unwrap()
    }

    #[test]
    fn keyring_secrets_carry_their_coordinates_and_credential_hash() {
        let reference = Reference::parse("reg.example:5000/private/app:1").unwrap();
        let mut objects = PodObjects::default();
        objects.secrets.insert(
            "a".into(),
            dockerconfig("reg.example:5000", "u", "p", "uid-a"),
        );
        objects.secrets.insert(
            "b".into(),
            dockerconfig("reg.example:5000", "u", "p", "uid-b"),
        );
        objects.secrets.insert(
            "elsewhere".into(),
            dockerconfig("other.example", "u", "p", "uid-c"),
        );
        let keyring = pull_keyring(&pod(&["a", "elsewhere", "b"]), &objects, None, &reference);
        let secrets = pod_secrets(&keyring);
        assert_eq!(
            secrets
                .iter()
                .map(|s| (s.namespace.as_str(), s.name.as_str(), s.uid.as_str()))
                .collect::<Vec<_>>(),
            [("team", "a", "uid-a"), ("team", "b", "uid-b")],
            "only the secrets with credentials for the image's registry, in the pod's order"
        );
        assert_eq!(secrets[0].credential_hash, secrets[1].credential_hash);
        let other = Credentials::Basic {
            username: "u".into(),
            password: "other".into(),
        };
        assert_ne!(secrets[0].credential_hash, other.content_hash());
        assert_eq!(
            keyring[0].pulled_with().kubernetes_secrets,
            [secrets[0].clone()]
        );
    }

    #[test]
    fn a_pull_without_a_secret_is_recorded_as_node_wide() {
        let reference = Reference::parse("reg.example:5000/private/app:1").unwrap();
        let keyring = pull_keyring(&pod(&[]), &PodObjects::default(), None, &reference);
        assert_eq!(
            keyring,
            [Keyed {
                credentials: Credentials::Anonymous,
                secret: None
            }]
        );
        assert!(keyring[0].pulled_with().node_pods_accessible);
        let node = RegistryConfig::parse(
            br#"{"auths": {"reg.example:5000": {"username": "node", "password": "n"}}}"#,
        )
        .unwrap();
        let keyring = pull_keyring(&pod(&[]), &PodObjects::default(), Some(&node), &reference);
        assert!(keyring[0].secret.is_none());
        assert!(keyring[0].pulled_with().node_pods_accessible);
    }
}
