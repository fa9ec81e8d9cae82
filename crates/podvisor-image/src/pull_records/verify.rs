//! The kubelet's `MustAttemptImagePull` under its 1.35 default policy
//! (`imagePullCredentialsVerificationPolicy: NeverVerifyPreloadedImages`, feature gate
//! `KubeletEnsureSecretPulledImages`, beta and on): may a pod use an image that is present,
//! or must it pull it again with its own credentials? Pure: records in, a verdict out.

use super::{PullCredentials, PullSecret, PulledRecord};

/// Past this many secrets recorded for an image, a match by hash or coordinates alone is
/// not written back (the kubelet's `writeRecordWhileMatchingLimit`: namespace turnover must
/// not grow a record without bound).
pub const REMEMBER_WHILE_MATCHING_LIMIT: usize = 100;

/// What a pod may do with an image that is present on the node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Use it: preloaded (no pull of the node's recorded it), pulled with credentials every
    /// pod of the node has (the node's own or none), or pulled with a secret the pod has.
    Use(Access),
    /// Pull it again with the pod's credentials (which may fail: the pod then sees
    /// `ErrImagePull`, or `ErrImageNeverPull` under `imagePullPolicy: Never`).
    MustPull(Unverified),
}

/// Why a present image may be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Access {
    /// Present, but the node's pulls never recorded it (`image load`, or there before the
    /// records): `NeverVerifyPreloadedImages` trusts it.
    Preloaded,
    /// Pulled with credentials any pod of the node has (`nodePodsAccessible`).
    NodeWide,
    /// A secret of the pod matches one it was pulled with. `remember`: a secret that
    /// matched by only one of hash and coordinates, to add to the record so that it
    /// matches by both from now on.
    Secret {
        /// The pod's secret to merge into the record, if any.
        remember: Option<PullSecret>,
    },
}

/// Why a present image must be pulled again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unverified {
    /// A pull of it was started and never recorded as finished (a crash in between).
    PullInterrupted,
    /// Its record has no entry for this repository.
    OtherRepository,
    /// Its record for this repository names no secret (the kubelet fails safe).
    NoCredentialsRecorded,
    /// None of the pod's secrets is one it was pulled with.
    SecretsDoNotMatch,
}

/// Whether a pod with `pod_secrets` (its pull secrets that apply to the image's registry,
/// each with the hash of the credentials it gives) may use the present image `image_ref`
/// of repository `repository` (`docker.io/library/busybox`: the name, normalised, without
/// tag or digest), given the image's pulled record and whether a pull of the pod's image
/// reference is in flight or was interrupted (`intent`).
#[must_use]
pub fn must_attempt_pull(
    repository: &str,
    record: Option<&PulledRecord>,
    intent: bool,
    pod_secrets: &[PullSecret],
) -> Verdict {
    // NeverVerifyPreloadedImages: verify only images the node's pulls know of.
    let Some(record) = record else {
        return if intent {
            Verdict::MustPull(Unverified::PullInterrupted)
        } else {
            Verdict::Use(Access::Preloaded)
        };
    };
    let Some(cached) = record.credential_mapping.get(repository) else {
        return Verdict::MustPull(Unverified::OtherRepository);
    };
    if cached.node_pods_accessible {
        return Verdict::Use(Access::NodeWide);
    }
    if cached.kubernetes_secrets.is_empty() {
        return Verdict::MustPull(Unverified::NoCredentialsRecorded);
    }
    let room = cached.kubernetes_secrets.len() < REMEMBER_WHILE_MATCHING_LIMIT;
    for pod_secret in pod_secrets {
        for known in &cached.kubernetes_secrets {
            // An empty hash is one that could not be computed: never a match.
            let hash = !known.credential_hash.is_empty()
                && known.credential_hash == pod_secret.credential_hash;
            let coordinates = known.same_object(pod_secret);
            if hash || coordinates {
                let remember = (room && hash != coordinates).then(|| pod_secret.clone());
                return Verdict::Use(Access::Secret { remember });
            }
        }
    }
    Verdict::MustPull(Unverified::SecretsDoNotMatch)
}

/// `record` with `credentials` merged in for `repository` (the kubelet's
/// `pulledRecordMergeNewCreds`), or `None` when nothing changes. Node-wide access replaces
/// any secrets; a secret with the coordinates of one recorded replaces its hash; secrets
/// stay sorted by namespace, name and uid.
#[must_use]
pub fn merge(
    record: &PulledRecord,
    repository: &str,
    credentials: &PullCredentials,
) -> Option<PulledRecord> {
    if !credentials.node_pods_accessible && credentials.kubernetes_secrets.is_empty() {
        return None;
    }
    let mut merged = record.clone();
    let Some(current) = merged.credential_mapping.get_mut(repository) else {
        merged
            .credential_mapping
            .insert(repository.to_owned(), credentials.clone());
        return Some(merged);
    };
    if current.node_pods_accessible {
        return None;
    }
    if credentials.node_pods_accessible {
        *current = PullCredentials {
            node_pods_accessible: true,
            kubernetes_secrets: Vec::new(),
        };
        return Some(merged);
    }
    let mut changed = false;
    for new in &credentials.kubernetes_secrets {
        match current
            .kubernetes_secrets
            .iter_mut()
            .find(|s| s.same_object(new))
        {
            Some(known) if known.credential_hash == new.credential_hash => {}
            Some(known) => {
                known.credential_hash.clone_from(&new.credential_hash);
                changed = true;
            }
            None => {
                current.kubernetes_secrets.push(new.clone());
                changed = true;
            }
        }
    }
    if !changed {
        return None;
    }
    current
        .kubernetes_secrets
        .sort_by(|a, b| (&a.namespace, &a.name, &a.uid).cmp(&(&b.namespace, &b.name, &b.uid)));
    Some(merged)
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPO: &str = "127.0.0.1:5000/private/app";

    fn secret(ns: &str, name: &str, uid: &str, hash: &str) -> PullSecret {
        PullSecret {
            namespace: ns.into(),
            name: name.into(),
            uid: uid.into(),
            credential_hash: hash.into(),
        }
    }

    fn record(credentials: PullCredentials) -> PulledRecord {
        PulledRecord {
            image_ref: "sha256:1".into(),
            last_updated: 0,
            credential_mapping: [(REPO.to_owned(), credentials)].into(),
        }
    }

    fn with_secrets(secrets: Vec<PullSecret>) -> PulledRecord {
        record(PullCredentials {
            node_pods_accessible: false,
            kubernetes_secrets: secrets,
        })
    }

    #[test]
    fn an_image_no_pull_recorded_is_preloaded_and_used_without_credentials() {
        assert_eq!(
            must_attempt_pull(REPO, None, false, &[]),
            Verdict::Use(Access::Preloaded)
        );
    }

    #[test]
    fn an_interrupted_pull_without_a_record_must_pull_again() {
        assert_eq!(
            must_attempt_pull(REPO, None, true, &[]),
            Verdict::MustPull(Unverified::PullInterrupted)
        );
    }

    #[test]
    fn an_image_pulled_without_secrets_is_used_by_every_pod() {
        let r = record(PullCredentials {
            node_pods_accessible: true,
            kubernetes_secrets: Vec::new(),
        });
        assert_eq!(
            must_attempt_pull(REPO, Some(&r), false, &[]),
            Verdict::Use(Access::NodeWide)
        );
    }

    #[test]
    fn a_pod_without_secrets_must_pull_an_image_pulled_with_a_secret() {
        let r = with_secrets(vec![secret("default", "regcred", "u1", "h1")]);
        assert_eq!(
            must_attempt_pull(REPO, Some(&r), false, &[]),
            Verdict::MustPull(Unverified::SecretsDoNotMatch)
        );
    }

    #[test]
    fn a_pod_with_another_secret_of_other_credentials_must_pull() {
        let r = with_secrets(vec![secret("default", "regcred", "u1", "h1")]);
        let pod = [secret("default", "mine", "u2", "h2")];
        assert_eq!(
            must_attempt_pull(REPO, Some(&r), false, &pod),
            Verdict::MustPull(Unverified::SecretsDoNotMatch)
        );
    }

    #[test]
    fn the_same_secret_uses_the_image_and_changes_no_record() {
        let r = with_secrets(vec![secret("default", "regcred", "u1", "h1")]);
        let pod = [secret("default", "regcred", "u1", "h1")];
        assert_eq!(
            must_attempt_pull(REPO, Some(&r), false, &pod),
            Verdict::Use(Access::Secret { remember: None })
        );
    }

    #[test]
    fn another_secret_with_the_same_credentials_uses_the_image_and_is_remembered() {
        let r = with_secrets(vec![secret("default", "regcred", "u1", "h1")]);
        let pod = [secret("other", "copy", "u9", "h1")];
        assert_eq!(
            must_attempt_pull(REPO, Some(&r), false, &pod),
            Verdict::Use(Access::Secret {
                remember: Some(pod[0].clone())
            })
        );
    }

    #[test]
    fn the_same_secret_with_changed_credentials_uses_the_image_and_updates_its_hash() {
        let r = with_secrets(vec![secret("default", "regcred", "u1", "h1")]);
        let pod = [secret("default", "regcred", "u1", "h2")];
        assert_eq!(
            must_attempt_pull(REPO, Some(&r), false, &pod),
            Verdict::Use(Access::Secret {
                remember: Some(pod[0].clone())
            })
        );
    }

    #[test]
    fn a_recreated_secret_of_the_same_name_and_other_credentials_must_pull() {
        let r = with_secrets(vec![secret("default", "regcred", "u1", "h1")]);
        let pod = [secret("default", "regcred", "u2", "h2")];
        assert_eq!(
            must_attempt_pull(REPO, Some(&r), false, &pod),
            Verdict::MustPull(Unverified::SecretsDoNotMatch)
        );
    }

    #[test]
    fn an_empty_recorded_hash_never_matches_an_empty_pod_hash() {
        let r = with_secrets(vec![secret("default", "regcred", "u1", "")]);
        let pod = [secret("other", "x", "u2", "")];
        assert_eq!(
            must_attempt_pull(REPO, Some(&r), false, &pod),
            Verdict::MustPull(Unverified::SecretsDoNotMatch)
        );
    }

    #[test]
    fn a_full_record_matches_without_remembering() {
        let secrets = (0..REMEMBER_WHILE_MATCHING_LIMIT)
            .map(|i| secret("ns", &format!("s{i}"), &format!("u{i}"), "h"))
            .collect();
        let r = with_secrets(secrets);
        let pod = [secret("other", "copy", "u", "h")];
        assert_eq!(
            must_attempt_pull(REPO, Some(&r), false, &pod),
            Verdict::Use(Access::Secret { remember: None })
        );
    }

    #[test]
    fn a_record_of_another_repository_of_the_same_image_must_pull() {
        let r = record(PullCredentials {
            node_pods_accessible: true,
            kubernetes_secrets: Vec::new(),
        });
        assert_eq!(
            must_attempt_pull("127.0.0.1:5000/other/app", Some(&r), false, &[]),
            Verdict::MustPull(Unverified::OtherRepository)
        );
    }

    #[test]
    fn a_record_without_credentials_must_pull() {
        let r = with_secrets(Vec::new());
        assert_eq!(
            must_attempt_pull(REPO, Some(&r), false, &[]),
            Verdict::MustPull(Unverified::NoCredentialsRecorded)
        );
    }

    #[test]
    fn merge_adds_a_secret_sorted_and_updates_a_hash_by_coordinates() {
        let r = with_secrets(vec![secret("b", "s", "u1", "h1")]);
        let added = merge(
            &r,
            REPO,
            &PullCredentials {
                node_pods_accessible: false,
                kubernetes_secrets: vec![secret("a", "s", "u2", "h2")],
            },
        )
        .unwrap();
        assert_eq!(
            added.credential_mapping[REPO].kubernetes_secrets,
            [secret("a", "s", "u2", "h2"), secret("b", "s", "u1", "h1")]
        );
        let updated = merge(
            &added,
            REPO,
            &PullCredentials {
                node_pods_accessible: false,
                kubernetes_secrets: vec![secret("b", "s", "u1", "h3")],
            },
        )
        .unwrap();
        assert_eq!(
            updated.credential_mapping[REPO].kubernetes_secrets[1],
            secret("b", "s", "u1", "h3")
        );
    }

    #[test]
    fn merge_of_what_is_recorded_changes_nothing() {
        let r = with_secrets(vec![secret("a", "s", "u1", "h1")]);
        let same = PullCredentials {
            node_pods_accessible: false,
            kubernetes_secrets: vec![secret("a", "s", "u1", "h1")],
        };
        assert_eq!(merge(&r, REPO, &same), None);
        assert_eq!(merge(&r, REPO, &PullCredentials::default()), None);
    }

    #[test]
    fn merge_of_node_wide_access_replaces_the_secrets_and_stays() {
        let r = with_secrets(vec![secret("a", "s", "u1", "h1")]);
        let node = PullCredentials {
            node_pods_accessible: true,
            kubernetes_secrets: Vec::new(),
        };
        let merged = merge(&r, REPO, &node).unwrap();
        assert_eq!(merged.credential_mapping[REPO], node);
        let secret_after = PullCredentials {
            node_pods_accessible: false,
            kubernetes_secrets: vec![secret("a", "s", "u1", "h1")],
        };
        assert_eq!(merge(&merged, REPO, &secret_after), None);
    }

    #[test]
    fn merge_adds_a_repository_of_its_own() {
        let r = with_secrets(vec![secret("a", "s", "u1", "h1")]);
        let merged = merge(
            &r,
            "docker.io/library/app",
            &PullCredentials {
                node_pods_accessible: true,
                kubernetes_secrets: Vec::new(),
            },
        )
        .unwrap();
        assert_eq!(merged.credential_mapping.len(), 2);
    }
}
