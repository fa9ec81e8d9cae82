//! The ConfigMaps and Secrets a pod refers to (`VisitPodConfigmapNames`,
//! `VisitPodSecretNames` of `pkg/api/v1/pod/util.go`), split the way the kubelet reads
//! them: a container's environment when it starts, the pod's volumes when they are set up,
//! its pull secrets when an image is pulled.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Container, Pod};

/// Object names, by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjectNames {
    /// ConfigMap names.
    pub config_maps: BTreeSet<String>,
    /// Secret names.
    pub secrets: BTreeSet<String>,
}

impl ObjectNames {
    /// Whether no object is named.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.config_maps.is_empty() && self.secrets.is_empty()
    }

    /// Adds `other`'s names.
    pub fn extend(&mut self, other: ObjectNames) {
        self.config_maps.extend(other.config_maps);
        self.secrets.extend(other.secrets);
    }
}

/// What `env[].valueFrom` and `envFrom` of `container` read.
#[must_use]
pub fn container_env_references(container: &Container) -> ObjectNames {
    let mut names = ObjectNames::default();
    for from in container.env_from.iter().flatten() {
        if let Some(cm) = &from.config_map_ref {
            names.config_maps.insert(cm.name.clone());
        }
        if let Some(s) = &from.secret_ref {
            names.secrets.insert(s.name.clone());
        }
    }
    for var in container.env.iter().flatten() {
        let Some(from) = &var.value_from else {
            continue;
        };
        if let Some(cm) = &from.config_map_key_ref {
            names.config_maps.insert(cm.name.clone());
        }
        if let Some(s) = &from.secret_key_ref {
            names.secrets.insert(s.name.clone());
        }
    }
    names
}

/// What the pod's `configMap`, `secret` and `projected` volumes read.
#[must_use]
pub fn pod_volume_references(pod: &Pod) -> ObjectNames {
    let mut names = ObjectNames::default();
    let volumes = pod.spec.iter().flat_map(|s| s.volumes.iter().flatten());
    for v in volumes {
        if let Some(cm) = &v.config_map {
            names.config_maps.insert(cm.name.clone());
        }
        if let Some(s) = &v.secret {
            names
                .secrets
                .insert(s.secret_name.clone().unwrap_or_default());
        }
        for source in v.projected.iter().flat_map(|p| p.sources.iter().flatten()) {
            if let Some(cm) = &source.config_map {
                names.config_maps.insert(cm.name.clone());
            }
            if let Some(s) = &source.secret {
                names.secrets.insert(s.name.clone());
            }
        }
    }
    names
}

/// `spec.imagePullSecrets`, in order, without empty names.
#[must_use]
pub fn pull_secret_names(pod: &Pod) -> Vec<String> {
    pod.spec
        .iter()
        .flat_map(|s| s.image_pull_secrets.iter().flatten())
        .map(|r| r.name.clone())
        .filter(|n| !n.is_empty())
        .collect()
}
