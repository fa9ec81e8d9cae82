//! The parts of OCI and Docker v2 manifests and indexes the store reads (parsed leniently:
//! both media type families share this shape).

use crate::digest::Digest;
use crate::error::{Error, Result};

pub(crate) const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub(crate) const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub(crate) const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
pub(crate) const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
pub(crate) const OCI_LAYER: &str = "application/vnd.oci.image.layer.v1.tar";
pub(crate) const OCI_LAYER_GZIP: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
pub(crate) const OCI_LAYER_ZSTD: &str = "application/vnd.oci.image.layer.v1.tar+zstd";
pub(crate) const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";

/// What a registry is asked for.
pub(crate) const ACCEPTED: &[&str] = &[OCI_MANIFEST, OCI_INDEX, DOCKER_MANIFEST, DOCKER_LIST];

#[derive(Clone, Debug, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Descriptor {
    #[serde(default)]
    pub media_type: String,
    pub digest: String,
    pub size: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<Platform>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<std::collections::BTreeMap<String, String>>,
}

impl Descriptor {
    pub(crate) fn digest(&self, what: &'static str) -> Result<Digest> {
        Digest::parse(&self.digest).map_err(|e| Error::BadContent {
            what,
            digest: self.digest.clone(),
            reason: e.to_string(),
        })
    }

    pub(crate) fn size(&self) -> Result<u64> {
        u64::try_from(self.size).map_err(|_| Error::BadContent {
            what: "descriptor",
            digest: self.digest.clone(),
            reason: format!("negative size {}", self.size),
        })
    }
}

#[derive(Clone, Debug, Default, serde::Deserialize, serde::Serialize)]
pub(crate) struct Platform {
    #[serde(default)]
    pub architecture: String,
    #[serde(default)]
    pub os: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
}

/// A manifest or an index (whichever fields the JSON has).
#[derive(Clone, Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Manifest {
    #[serde(default)]
    pub schema_version: u32,
    #[serde(default)]
    pub media_type: Option<String>,
    #[serde(default)]
    pub config: Option<Descriptor>,
    #[serde(default)]
    pub layers: Option<Vec<Descriptor>>,
    #[serde(default)]
    pub manifests: Option<Vec<Descriptor>>,
}

impl Manifest {
    pub(crate) fn parse(data: &[u8], digest: &Digest) -> Result<Manifest> {
        let m: Manifest = serde_json::from_slice(data).map_err(|e| Error::BadContent {
            what: "manifest",
            digest: digest.to_string(),
            reason: e.to_string(),
        })?;
        if m.schema_version != 2 {
            return Err(Error::BadContent {
                what: "manifest",
                digest: digest.to_string(),
                reason: format!("unsupported schemaVersion {}", m.schema_version),
            });
        }
        Ok(m)
    }

    pub(crate) fn is_index(&self) -> bool {
        self.manifests.is_some()
            || matches!(self.media_type.as_deref(), Some(OCI_INDEX | DOCKER_LIST))
    }
}

/// This machine's platform in OCI words (`linux`, `amd64`, variant).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MachinePlatform {
    /// `linux`.
    pub os: String,
    /// `amd64`, `arm64`, ...
    pub architecture: String,
    /// `v8` for arm64, `v7` for arm, ...
    pub variant: Option<String>,
}

impl MachinePlatform {
    /// The platform this binary runs on.
    #[must_use]
    pub fn current() -> MachinePlatform {
        let (architecture, variant) = match std::env::consts::ARCH {
            "x86_64" => ("amd64", None),
            "aarch64" => ("arm64", Some("v8")),
            "arm" => ("arm", Some("v7")),
            "x86" => ("386", None),
            "powerpc64" => ("ppc64le", None),
            "s390x" => ("s390x", None),
            "riscv64" => ("riscv64", None),
            other => (other, None),
        };
        MachinePlatform {
            os: std::env::consts::OS.to_owned(),
            architecture: architecture.to_owned(),
            variant: variant.map(str::to_owned),
        }
    }

    /// containerd's matcher: same OS and architecture; a variant, when both name one, must
    /// agree (an entry without a variant matches any).
    pub(crate) fn matches(&self, p: &Platform) -> bool {
        p.os == self.os
            && p.architecture == self.architecture
            && match (&p.variant, &self.variant) {
                (Some(a), Some(b)) => a == b,
                _ => true,
            }
    }

    /// Picks this machine's manifest from an index; the entries it had, for the error.
    pub(crate) fn select<'m>(
        &self,
        entries: &'m [Descriptor],
    ) -> std::result::Result<&'m Descriptor, String> {
        let hit = entries
            .iter()
            .filter(|d| d.platform.as_ref().is_some_and(|p| self.matches(p)))
            // An exact variant first.
            .max_by_key(|d| {
                d.platform.as_ref().and_then(|p| p.variant.as_ref()) == self.variant.as_ref()
            });
        hit.ok_or_else(|| {
            let names: Vec<String> = entries
                .iter()
                .filter_map(|d| d.platform.as_ref())
                .map(|p| match &p.variant {
                    Some(v) => format!("{}/{}/{v}", p.os, p.architecture),
                    None => format!("{}/{}", p.os, p.architecture),
                })
                .collect();
            if names.is_empty() {
                "no platforms".to_owned()
            } else {
                names.join(", ")
            }
        })
    }
}

impl std::fmt::Display for MachinePlatform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.os, self.architecture)?;
        if let Some(v) = &self.variant {
            write!(f, "/{v}")?;
        }
        Ok(())
    }
}
