//! What a `configMap` or `secret` volume holds (`MakePayload` of `pkg/volume/configmap` and
//! `pkg/volume/secret`): every key as a file, or only the `items` at their paths, each file
//! with its `mode` or the volume's `defaultMode` (0644 unless given). Pure: the files are
//! written by [`crate::process`]'s atomic writer.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{KeyToPath, Pod, Volume};

use super::objects::{PodObjects, not_found};

/// The kubelet's `defaultMode` (the API server defaults it to 0644 too).
pub const DEFAULT_MODE: u32 = 0o644;

/// One file of a payload.
#[derive(Clone, PartialEq, Eq)]
pub struct FileProjection {
    /// Its content.
    pub data: Vec<u8>,
    /// Its permission bits.
    pub mode: u32,
}

/// Sizes only: a secret's bytes never reach a log through `{:?}`.
impl std::fmt::Debug for FileProjection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "FileProjection({} bytes, {:o})",
            self.data.len(),
            self.mode
        )
    }
}

/// A volume's files by relative path.
pub type Payload = BTreeMap<String, FileProjection>;

/// A `configMap` or `secret` volume of the pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectedVolume {
    /// `spec.volumes[].name`.
    pub name: String,
    /// A `secret` volume (kept in memory).
    pub secret: bool,
    /// Its files, or the `MountVolume.SetUp` error (`configmap "x" not found`).
    pub payload: Result<Payload, String>,
}

fn mode_of(mode: Option<i32>, default: u32) -> u32 {
    mode.and_then(|m| u32::try_from(m).ok()).unwrap_or(default)
}

fn make_payload(
    items: Option<&Vec<KeyToPath>>,
    data: &BTreeMap<String, Vec<u8>>,
    default_mode: u32,
    optional: bool,
    what: &str,
) -> Result<Payload, String> {
    let mut payload = Payload::new();
    match items.filter(|i| !i.is_empty()) {
        None => {
            for (k, v) in data {
                payload.insert(
                    k.clone(),
                    FileProjection {
                        data: v.clone(),
                        mode: default_mode,
                    },
                );
            }
        }
        Some(items) => {
            for item in items {
                let Some(v) = data.get(&item.key) else {
                    if optional {
                        continue;
                    }
                    return Err(format!(
                        "{what} references non-existent {} key: {}",
                        what_key(what),
                        item.key
                    ));
                };
                payload.insert(
                    item.path.clone(),
                    FileProjection {
                        data: v.clone(),
                        mode: mode_of(item.mode, default_mode),
                    },
                );
            }
        }
    }
    Ok(payload)
}

fn what_key(what: &str) -> &'static str {
    if what == "secret" { "secret" } else { "config" }
}

fn volume_payload(volume: &Volume, objects: &PodObjects) -> Option<ProjectedVolume> {
    if let Some(cm) = &volume.config_map {
        let optional = cm.optional.unwrap_or(false);
        let default_mode = mode_of(cm.default_mode, DEFAULT_MODE);
        let payload = match objects.config_maps.get(&cm.name) {
            Some(obj) => {
                let mut data: BTreeMap<String, Vec<u8>> = obj
                    .data
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone().into_bytes()))
                    .collect();
                data.extend(obj.binary_data.clone());
                make_payload(
                    cm.items.as_ref(),
                    &data,
                    default_mode,
                    optional,
                    "configmap",
                )
            }
            None if optional => Ok(Payload::new()),
            None => Err(not_found("configmap", &cm.name)),
        };
        return Some(ProjectedVolume {
            name: volume.name.clone(),
            secret: false,
            payload,
        });
    }
    let secret = volume.secret.as_ref()?;
    let name = secret.secret_name.clone().unwrap_or_default();
    let optional = secret.optional.unwrap_or(false);
    let default_mode = mode_of(secret.default_mode, DEFAULT_MODE);
    let payload = match objects.secrets.get(&name) {
        Some(obj) => make_payload(
            secret.items.as_ref(),
            &obj.data,
            default_mode,
            optional,
            "secret",
        ),
        None if optional => Ok(Payload::new()),
        None => Err(not_found("secret", &name)),
    };
    Some(ProjectedVolume {
        name: volume.name.clone(),
        secret: true,
        payload,
    })
}

/// The pod's `configMap` and `secret` volumes with what each must hold now, in
/// `spec.volumes` order.
#[must_use]
pub fn projected_volumes(pod: &Pod, objects: &PodObjects) -> Vec<ProjectedVolume> {
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter_map(|v| volume_payload(v, objects))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::objects::{ConfigMapData, SecretData};

    fn pod(volumes: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({"spec": {"containers": [], "volumes": volumes}}))
            .unwrap()
    }

    #[test]
    fn keys_become_files_with_modes() {
        let mut objects = PodObjects::default();
        let mut cm = ConfigMapData::default();
        cm.data.insert("a".into(), "1".into());
        cm.data.insert("b".into(), "2".into());
        objects.config_maps.insert("cm".into(), cm);
        let mut s = SecretData::default();
        s.data.insert("k".into(), b"v".to_vec());
        objects.secrets.insert("s".into(), s);
        let p = pod(serde_json::json!([
            {"name": "all", "configMap": {"name": "cm"}},
            {"name": "some", "configMap": {"name": "cm", "defaultMode": 0o600, "items": [{"key": "b", "path": "dir/b.txt", "mode": 0o400}, {"key": "a", "path": "a"}]}},
            {"name": "sec", "secret": {"secretName": "s"}},
            {"name": "gone", "configMap": {"name": "nope"}},
            {"name": "maybe", "secret": {"secretName": "nope", "optional": true}},
            {"name": "badkey", "configMap": {"name": "cm", "items": [{"key": "z", "path": "z"}]}}
        ]));
        let v = projected_volumes(&p, &objects);
        let files = |i: usize| v[i].payload.clone().unwrap();
        assert_eq!(files(0)["a"].mode, 0o644);
        assert_eq!(files(1)["dir/b.txt"].mode, 0o400);
        assert_eq!(files(1)["a"].mode, 0o600);
        assert!(v[2].secret);
        assert_eq!(files(2)["k"].data, b"v");
        assert_eq!(v[3].payload, Err("configmap \"nope\" not found".to_owned()));
        assert!(files(4).is_empty());
        assert_eq!(
            v[5].payload,
            Err("configmap references non-existent config key: z".to_owned())
        );
    }
}
