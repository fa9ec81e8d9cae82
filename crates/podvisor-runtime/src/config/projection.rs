//! What a `configMap`, `secret`, `downwardAPI` or `projected` volume holds (`MakePayload` of
//! `pkg/volume/configmap` and `pkg/volume/secret`, `CollectData` of `pkg/volume/downwardapi`,
//! `collectData` of `pkg/volume/projected`): every key as a file, or only the `items` at their
//! paths, each file with its `mode` or the volume's `defaultMode` (0644 unless given); the
//! downward API's fields and resources as files; a projection of several sources into one
//! directory, later sources overwriting earlier ones' paths. Pure: the files are written by
//! [`crate::process`]'s atomic writer.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{DownwardAPIVolumeFile, KeyToPath, Pod, Volume};

use super::NodeAllocatable;
use super::objects::{PodObjects, TokenKey, not_found};

/// The kubelet's `defaultMode` (the API server defaults it to 0644 too).
pub const DEFAULT_MODE: u32 = 0o644;

/// One file of a payload.
#[derive(Clone, PartialEq, Eq)]
pub struct FileProjection {
    /// Its content.
    pub data: Vec<u8>,
    /// Its permission bits.
    pub mode: u32,
    /// The owner to give it (`FileProjection.FsUser`: a service account token when every
    /// container runs as this one user).
    pub fs_user: Option<u32>,
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
    /// Kept in memory: a `secret`, `downwardAPI` or `projected` volume.
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
                        fs_user: None,
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
                        fs_user: None,
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

fn config_map_payload(
    name: &str,
    items: Option<&Vec<KeyToPath>>,
    optional: bool,
    default_mode: u32,
    objects: &PodObjects,
) -> Result<Payload, String> {
    match objects.config_maps.get(name) {
        Some(obj) => {
            let mut data: BTreeMap<String, Vec<u8>> = obj
                .data
                .iter()
                .map(|(k, v)| (k.clone(), v.clone().into_bytes()))
                .collect();
            data.extend(obj.binary_data.clone());
            make_payload(items, &data, default_mode, optional, "configmap")
        }
        None if optional => Ok(Payload::new()),
        None => Err(not_found("configmap", name)),
    }
}

fn secret_payload(
    name: &str,
    items: Option<&Vec<KeyToPath>>,
    optional: bool,
    default_mode: u32,
    objects: &PodObjects,
) -> Result<Payload, String> {
    match objects.secrets.get(name) {
        Some(obj) => make_payload(items, &obj.data, default_mode, optional, "secret"),
        None if optional => Ok(Payload::new()),
        None => Err(not_found("secret", name)),
    }
}

/// `filepath.Clean` of a relative item path (validation already refused `..` elements).
fn clean(path: &str) -> String {
    let parts: Vec<&str> = path
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    if parts.is_empty() {
        ".".to_owned()
    } else {
        parts.join("/")
    }
}

/// `downwardapi.CollectData`: each item's field or resource as a file; every failed item is
/// reported (an aggregate error).
fn downward_api_payload(
    pod: &Pod,
    items: &[DownwardAPIVolumeFile],
    default_mode: u32,
    node: &NodeAllocatable,
) -> Result<Payload, String> {
    let mut payload = Payload::new();
    let mut errors = Vec::new();
    for item in items {
        let mut file = FileProjection {
            data: Vec::new(),
            mode: mode_of(item.mode, default_mode),
            fs_user: None,
        };
        let value = if let Some(field) = &item.field_ref {
            Some(super::env::field_ref_value(
                pod,
                field.api_version.as_deref(),
                &field.field_path,
            ))
        } else {
            item.resource_field_ref
                .as_ref()
                .map(|resource| resource_value(pod, resource, node))
        };
        match value {
            Some(Ok(v)) => file.data = v.into_bytes(),
            Some(Err(e)) => errors.push(e),
            None => {}
        }
        payload.insert(clean(&item.path), file);
    }
    if errors.is_empty() {
        Ok(payload)
    } else {
        Err(aggregate(errors))
    }
}

/// `ExtractResourceValueByContainerNameAndNodeAllocatable`: the named container (regular,
/// init or ephemeral), its unset limits defaulted to the node's allocatable.
fn resource_value(
    pod: &Pod,
    selector: &k8s_openapi::api::core::v1::ResourceFieldSelector,
    node: &NodeAllocatable,
) -> Result<String, String> {
    let name = selector.container_name.as_deref().unwrap_or_default();
    let spec = pod.spec.as_ref();
    let container = spec.and_then(|s| {
        s.containers
            .iter()
            .chain(s.init_containers.iter().flatten())
            .find(|c| c.name == name)
            .cloned()
    });
    let Some(container) = container else {
        return Err(format!(
            "container {} not found",
            podvisor_api::gotext::quote(name)
        ));
    };
    let mut own = selector.clone();
    own.container_name = None;
    super::env::resource_field_value(pod, &container, &own, node)
}

/// `utilerrors.NewAggregate(...).Error()`: one message as is, several in brackets.
fn aggregate(errors: Vec<String>) -> String {
    let mut unique: Vec<String> = Vec::new();
    for e in errors {
        if !unique.contains(&e) {
            unique.push(e);
        }
    }
    if unique.len() == 1 {
        unique.swap_remove(0)
    } else {
        format!("[{}]", unique.join(", "))
    }
}

/// `FsUserFrom`: the user every container (init and ephemeral ones included) runs as, when
/// each sets one and they agree.
fn fs_user_of(pod: &Pod) -> Option<u32> {
    let spec = pod.spec.as_ref()?;
    let pod_user = spec.security_context.as_ref().and_then(|s| s.run_as_user);
    let mut users = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .map(|c| c.security_context.as_ref().and_then(|s| s.run_as_user))
        .chain(
            spec.ephemeral_containers
                .iter()
                .flatten()
                .map(|c| c.security_context.as_ref().and_then(|s| s.run_as_user)),
        )
        .map(|u| u.or(pod_user));
    let first = users.next()??;
    users
        .all(|u| u == Some(first))
        .then(|| u32::try_from(first).ok())
        .flatten()
}

/// The pod's `fsGroup`, if any.
#[must_use]
pub fn fs_group_of(pod: &Pod) -> Option<u32> {
    pod.spec
        .as_ref()?
        .security_context
        .as_ref()?
        .fs_group
        .and_then(|g| u32::try_from(g).ok())
}

/// `projectedVolumeMounter.collectData`: the sources in order into one payload.
fn projected_payload(
    pod: &Pod,
    projection: &k8s_openapi::api::core::v1::ProjectedVolumeSource,
    objects: &PodObjects,
    node: &NodeAllocatable,
) -> Result<Payload, String> {
    let default_mode = mode_of(projection.default_mode, DEFAULT_MODE);
    let mut payload = Payload::new();
    let mut errors = Vec::new();
    for source in projection.sources.iter().flatten() {
        let part = if let Some(s) = &source.secret {
            secret_payload(
                &s.name,
                s.items.as_ref(),
                s.optional.unwrap_or(false),
                default_mode,
                objects,
            )
        } else if let Some(cm) = &source.config_map {
            config_map_payload(
                &cm.name,
                cm.items.as_ref(),
                cm.optional.unwrap_or(false),
                default_mode,
                objects,
            )
        } else if let Some(d) = &source.downward_api {
            downward_api_payload(
                pod,
                d.items.as_deref().unwrap_or_default(),
                default_mode,
                node,
            )
        } else if let Some(token) = &source.service_account_token {
            // With an owner for the files, SetVolumeOwnership widens 0600 as it needs.
            let fs_user = fs_user_of(pod);
            let mode = if fs_user.is_some() || fs_group_of(pod).is_some() {
                0o600
            } else {
                default_mode
            };
            match objects.tokens.get(&TokenKey::of(token)) {
                Some(Ok(t)) => Ok(Payload::from([(
                    token.path.clone(),
                    FileProjection {
                        data: t.clone().into_bytes(),
                        mode,
                        fs_user,
                    },
                )])),
                Some(Err(e)) => Err(e.clone()),
                None => Err("failed to fetch token: no token was requested".to_owned()),
            }
        } else {
            // clusterTrustBundle and podCertificate sources need objects podvisor does not
            // serve.
            Err(
                "projected volume source not supported by podvisor (only configMap, secret, \
                 downwardAPI and serviceAccountToken)"
                    .to_owned(),
            )
        };
        match part {
            Ok(part) => payload.extend(part),
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() {
        Ok(payload)
    } else {
        Err(aggregate(errors))
    }
}

fn volume_payload(
    pod: &Pod,
    volume: &Volume,
    objects: &PodObjects,
    node: &NodeAllocatable,
) -> Option<ProjectedVolume> {
    let (secret, payload) = if let Some(cm) = &volume.config_map {
        let payload = config_map_payload(
            &cm.name,
            cm.items.as_ref(),
            cm.optional.unwrap_or(false),
            mode_of(cm.default_mode, DEFAULT_MODE),
            objects,
        );
        (false, payload)
    } else if let Some(s) = &volume.secret {
        let payload = secret_payload(
            s.secret_name.as_deref().unwrap_or_default(),
            s.items.as_ref(),
            s.optional.unwrap_or(false),
            mode_of(s.default_mode, DEFAULT_MODE),
            objects,
        );
        (true, payload)
    } else if let Some(d) = &volume.downward_api {
        let payload = downward_api_payload(
            pod,
            d.items.as_deref().unwrap_or_default(),
            mode_of(d.default_mode, DEFAULT_MODE),
            node,
        );
        (true, payload)
    } else if let Some(p) = &volume.projected {
        (true, projected_payload(pod, p, objects, node))
    } else {
        return None;
    };
    Some(ProjectedVolume {
        name: volume.name.clone(),
        secret,
        payload,
    })
}

/// The pod's `configMap`, `secret`, `downwardAPI` and `projected` volumes with what each
/// must hold now, in `spec.volumes` order; `node` is what unset limits read as.
#[must_use]
pub fn projected_volumes(
    pod: &Pod,
    objects: &PodObjects,
    node: &NodeAllocatable,
) -> Vec<ProjectedVolume> {
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter_map(|v| volume_payload(pod, v, objects, node))
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
        let v = projected_volumes(&p, &objects, &NodeAllocatable::default());
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

    /// `downwardapi.CollectData`: fields as `FormatMap` text, resources divided and rounded
    /// up, unset limits read as the node's allocatable, items' modes over `defaultMode`.
    #[test]
    fn downward_api_items_become_files() {
        let mut p = pod(serde_json::json!([
            {"name": "info", "downwardAPI": {"defaultMode": 0o600, "items": [
                {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}},
                {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}, "mode": 0o444},
                {"path": "./dir//tier", "fieldRef": {"fieldPath": "metadata.labels['tier']"}},
                {"path": "mem", "resourceFieldRef": {"containerName": "c", "resource": "limits.memory", "divisor": "1Mi"}},
                {"path": "cpu", "resourceFieldRef": {"containerName": "c", "resource": "requests.cpu", "divisor": "1m"}}
            ]}}
        ]));
        p.metadata.name = Some("web".into());
        p.metadata.labels = Some(
            [
                ("tier".into(), "front".into()),
                ("app".into(), "a\"b".into()),
            ]
            .into(),
        );
        p.spec.as_mut().unwrap().containers = vec![
            serde_json::from_value(serde_json::json!(
                {"name": "c", "resources": {"requests": {"cpu": "250m"}}}
            ))
            .unwrap(),
        ];
        let node = NodeAllocatable {
            memory_bytes: Some(512 << 20),
            ..NodeAllocatable::default()
        };
        let v = projected_volumes(&p, &PodObjects::default(), &node);
        assert!(v[0].secret);
        let files = v[0].payload.clone().unwrap();
        let text = |k: &str| String::from_utf8(files[k].data.clone()).unwrap();
        assert_eq!(text("name"), "web");
        assert_eq!(text("labels"), "app=\"a\\\"b\"\ntier=\"front\"");
        assert_eq!(files["labels"].mode, 0o444);
        assert_eq!(text("dir/tier"), "front");
        assert_eq!(files["dir/tier"].mode, 0o600);
        assert_eq!(text("mem"), "512");
        assert_eq!(text("cpu"), "250");
        let bad = pod(serde_json::json!([{"name": "x", "downwardAPI": {"items": [
            {"path": "a", "resourceFieldRef": {"containerName": "nope", "resource": "limits.cpu"}},
            {"path": "b", "fieldRef": {"fieldPath": "status.phase"}}
        ]}}]));
        assert_eq!(
            projected_volumes(&bad, &PodObjects::default(), &node)[0].payload,
            Err("[container \"nope\" not found, unsupported fieldPath: status.phase]".to_owned())
        );
    }

    /// `projectedVolumeMounter.collectData`: sources in order, later paths win, the token at
    /// 0600 with an `fsGroup` (else `defaultMode`), missing sources aggregated.
    #[test]
    fn projected_sources_merge_into_one_payload() {
        let mut objects = PodObjects::default();
        let mut cm = ConfigMapData::default();
        cm.data.insert("ca.crt".into(), "CA".into());
        objects.config_maps.insert("kube-root-ca.crt".into(), cm);
        let key = TokenKey {
            audience: String::new(),
            expiration_seconds: 3607,
        };
        objects.tokens.insert(key, Ok("TOKEN".into()));
        let mut p = pod(
            serde_json::json!([{"name": "kube-api-access-abcde", "projected": {
            "defaultMode": 0o644,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
                {"secret": {"name": "absent", "optional": true}}
            ]}}]),
        );
        p.metadata.namespace = Some("team".into());
        let node = NodeAllocatable::default();
        let files = projected_volumes(&p, &objects, &node)[0]
            .payload
            .clone()
            .unwrap();
        assert_eq!(
            files.keys().collect::<Vec<_>>(),
            ["ca.crt", "namespace", "token"]
        );
        assert_eq!(files["token"].data, b"TOKEN");
        assert_eq!(files["token"].mode, 0o644);
        assert_eq!(files["namespace"].data, b"team");
        p.spec.as_mut().unwrap().security_context =
            Some(serde_json::from_value(serde_json::json!({"fsGroup": 2000})).unwrap());
        let files = projected_volumes(&p, &objects, &node)[0]
            .payload
            .clone()
            .unwrap();
        assert_eq!(files["token"].mode, 0o600);
        assert_eq!(files["token"].fs_user, None);
        let missing = pod(serde_json::json!([{"name": "p", "projected": {"sources": [
            {"configMap": {"name": "gone"}},
            {"secret": {"name": "gone"}}
        ]}}]));
        assert_eq!(
            projected_volumes(&missing, &objects, &node)[0].payload,
            Err("[configmap \"gone\" not found, secret \"gone\" not found]".to_owned())
        );
    }
}
