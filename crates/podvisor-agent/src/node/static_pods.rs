//! File-sourced (static) pods (M10): every manifest in the `--manifests` directory is a pod of
//! this node, named and identified as the kubelet's file source does, and shown in the API as
//! a *mirror pod*.
//!
//! The directory is read again every poll interval; a file added, changed or removed yields
//! a new desired set, and the node starts, replaces or stops pods to match it. A changed
//! manifest has a new UID, so it is a new pod: the old one terminates first (two static pods
//! with the same full name never run at the same time).

use super::writer::{self, uid_of};
use super::{NodeLoop, uid};
use crate::log::{debug, warning};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Pod, PodStatus, Toleration};
use podvisor_api::{
    apply_defaults, decode_pods, drop_disabled_fields, validate_pod_with_gates,
    validate_static_pod_references,
};
use podvisor_store::{EventType, Key, StoreError};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// `kubernetes.io/config.hash`: the static pod's UID.
pub(crate) const CONFIG_HASH: &str = "kubernetes.io/config.hash";
/// `kubernetes.io/config.mirror`: set on mirror pods, the static pod's UID.
pub(crate) const CONFIG_MIRROR: &str = "kubernetes.io/config.mirror";
/// `kubernetes.io/config.source`: `file`.
const CONFIG_SOURCE: &str = "kubernetes.io/config.source";
/// `kubernetes.io/config.seen`: when the kubelet first saw the pod.
const CONFIG_SEEN: &str = "kubernetes.io/config.seen";

/// One pod of the manifests directory, ready to run.
#[derive(Debug, Clone)]
pub(crate) struct StaticPod {
    /// The file it came from.
    pub(crate) path: PathBuf,
    /// Where its mirror pod lives in the store.
    pub(crate) key: Key,
    /// The pod, defaulted and validated, with its static identity (M10).
    pub(crate) pod: Pod,
}

/// Reads the manifests directory.
pub(crate) struct StaticSource {
    dir: PathBuf,
    node_name: String,
    /// The feature gates static pods are validated with (the node's `--feature-gates`).
    gates: podvisor_api::FeatureGates,
    /// `config.seen` per UID, so that a pod keeps the time it was first seen.
    seen: HashMap<String, Timestamp>,
    /// The last problem reported per file, so that each is printed once.
    reported: HashMap<PathBuf, String>,
}

impl StaticSource {
    pub(crate) fn new(
        dir: PathBuf,
        node_name: String,
        gates: podvisor_api::FeatureGates,
    ) -> StaticSource {
        StaticSource {
            dir,
            node_name,
            gates,
            seen: HashMap::new(),
            reported: HashMap::new(),
        }
    }

    /// The desired static pods, by UID. A directory that cannot be read yields none (the
    /// kubelet does the same: its pods are stopped until it can be read again).
    pub(crate) fn scan(&mut self, now: Timestamp) -> BTreeMap<String, StaticPod> {
        let mut desired = BTreeMap::new();
        let mut files: Vec<PathBuf> = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries
                .flatten()
                .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
                .map(|e| e.path())
                .filter(|p| p.is_file())
                .collect(),
            Err(e) => {
                self.report(
                    &self.dir.clone(),
                    format!("reading {}: {e}", self.dir.display()),
                );
                return desired;
            }
        };
        files.sort();
        let mut names: HashMap<Key, PathBuf> = HashMap::new();
        for path in files {
            let pods = match self.load(&path) {
                Ok(pods) => {
                    self.reported.remove(&path);
                    pods
                }
                Err(message) => {
                    self.report(&path, message);
                    continue;
                }
            };
            for mut sp in pods {
                if let Some(first) = names.get(&sp.key) {
                    self.report(
                        &path,
                        format!(
                            "static pod {}/{} of {} is already defined in {}; ignored",
                            sp.key.namespace,
                            sp.key.name,
                            path.display(),
                            first.display()
                        ),
                    );
                    continue;
                }
                names.insert(sp.key.clone(), path.clone());
                let uid = sp.pod.metadata.uid.clone().unwrap_or_default();
                let seen = *self.seen.entry(uid.clone()).or_insert(now);
                sp.pod
                    .metadata
                    .annotations
                    .get_or_insert_with(Default::default)
                    .insert(CONFIG_SEEN.to_string(), seen.to_string());
                desired.insert(uid, sp);
            }
        }
        self.seen.retain(|uid, _| desired.contains_key(uid));
        desired
    }

    fn report(&mut self, path: &Path, message: String) {
        if self.reported.get(path) != Some(&message) {
            warning!("static pods: {message}");
            self.reported.insert(path.to_path_buf(), message);
        }
    }

    /// Decodes one manifest file into static pods.
    fn load(&self, path: &Path) -> Result<Vec<StaticPod>, String> {
        let source = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| format!("reading {source}: {e}"))?;
        // Decoding errors name the file already.
        let decoded = decode_pods(&text, &source).map_err(|e| e.to_string())?;
        decoded
            .into_iter()
            .map(|pod| {
                let pod = static_pod(pod, &self.node_name, &source, self.gates)?;
                let key = pod_key(&pod);
                Ok(StaticPod {
                    path: path.to_path_buf(),
                    key,
                    pod,
                })
            })
            .collect()
    }
}

/// The node loop's side of static pods: starting, replacing and stopping them as the
/// directory changes, and keeping their mirror pods.
impl<R: podvisor_runtime::Runtime> NodeLoop<R> {
    /// Mirror pods: a deleted mirror of a running static pod is re-created (the static pod
    /// keeps running, as with the kubelet); a mirror being deleted gracefully goes at once; a
    /// mirror without its static pod goes.
    pub(super) async fn on_mirror(&mut self, type_: EventType, pod: &Pod) {
        let uid = uid(pod);
        let running = self.workers.get(&uid).is_some_and(|w| w.is_static);
        let desired = self.desired.contains_key(&uid);
        let wanted = desired && (running || self.static_done.contains(&uid));
        match type_ {
            EventType::Deleted => {
                if desired && running && !self.draining {
                    debug!("node: re-creating the mirror pod of {uid}");
                    self.create_mirror(&uid).await;
                }
            }
            EventType::Added | EventType::Modified => {
                if pod.metadata.deletion_timestamp.is_some() || !wanted {
                    self.remove_object(pod_key(pod), uid);
                }
            }
        }
    }

    pub(super) async fn sync_static(&mut self) {
        let Some(source) = &mut self.statics else {
            return;
        };
        let desired = source.scan(self.agent.now());
        let mut mirrors = Vec::new();
        for (uid, w) in &mut self.workers {
            if w.is_static && !desired.contains_key(uid) && w.deleted.is_none() {
                debug!("node: static pod {} ({uid}) removed", w.key);
                w.control.delete(None);
                w.deleted = Some(None);
                mirrors.push((w.key.clone(), uid.clone()));
            }
        }
        for (key, uid) in mirrors {
            self.remove_object(key, uid);
        }
        self.static_done.retain(|uid| desired.contains_key(uid));
        self.desired = desired;
        self.start_static().await;
    }

    /// Starts the desired static pods that do not run yet; one whose name is still used by an
    /// older pod waits for it to terminate (M10).
    pub(super) async fn start_static(&mut self) {
        if self.draining {
            return;
        }
        let waiting: Vec<StaticPod> = self
            .desired
            .iter()
            .filter(|(uid, _)| !self.workers.contains_key(*uid) && !self.static_done.contains(*uid))
            .map(|(_, sp)| sp.clone())
            .collect();
        for sp in waiting {
            if self.workers.values().any(|w| w.key == sp.key) {
                continue;
            }
            let uid = uid(&sp.pod);
            debug!(
                "node: starting static pod {} ({uid}) from {}",
                sp.key,
                sp.path.display()
            );
            let handle = self.agent.spawn_admitted(sp.pod.clone(), true);
            self.register(handle, &sp.pod, true, 0);
            self.create_mirror(&uid).await;
        }
    }

    /// Creates the mirror pod of static pod `uid` with its latest status; an old mirror of the
    /// same name (an earlier version of the manifest) is replaced.
    pub(super) async fn create_mirror(&mut self, uid: &str) {
        let Some(sp) = self.desired.get(uid) else {
            return;
        };
        let status = self
            .workers
            .get(uid)
            .and_then(|w| w.latest.borrow().as_ref().and_then(|p| p.status.clone()));
        let object = mirror_object(&sp.pod, status, self.agent.now());
        let store = self.store.clone();
        let key = sp.key.clone();
        let uid = uid.to_string();
        let result = tokio::task::spawn_blocking(move || {
            match store.create(&key, object.clone()) {
                Err(StoreError::AlreadyExists(_)) => {}
                other => return other.map(|_| ()),
            }
            let existing = store.get(&key)?;
            let Some(existing) = existing else {
                return store.create(&key, object).map(|_| ());
            };
            let existing_uid = uid_of(&existing).unwrap_or("").to_string();
            let old_mirror = existing
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(CONFIG_MIRROR))
                .is_some();
            if existing_uid == uid {
                return Ok(());
            }
            if !old_mirror {
                return Err(StoreError::Invalid(format!(
                    "pod {key} exists and is not a mirror pod; the static pod runs without one"
                )));
            }
            writer::remove(&store, &key, &existing_uid);
            store.create(&key, object).map(|_| ())
        })
        .await;
        match result {
            Ok(Ok(())) => {}
            Ok(Err(e)) => warning!("node: creating a mirror pod: {e}"),
            Err(e) => warning!("node: creating a mirror pod: {e}"),
        }
    }
}

/// The kubelet's file source (`applyDefaults` in `pkg/kubelet/config/common.go`): UID = hex
/// MD5 over the decoded pod, `host:<node>` and `file:<path>`; name `<name>-<node>`; namespace
/// `default`; `spec.nodeName`; `config.hash`/`config.source` annotations; a NoExecute
/// `Exists` toleration; phase Pending. Then API defaulting, the fields of disabled gates
/// dropped, validation, and the refusal of references to API objects (M10,
/// `PreventStaticPodAPIReferences`): such a pod never runs.
pub(crate) fn static_pod(
    mut pod: Pod,
    node_name: &str,
    source: &str,
    gates: podvisor_api::FeatureGates,
) -> Result<Pod, String> {
    let node = node_name.to_lowercase();
    if pod.metadata.uid.as_deref().unwrap_or("").is_empty() {
        let mut input = serde_json::to_vec(&pod).map_err(|e| format!("{source}: {e}"))?;
        input.extend_from_slice(format!("host:{node_name}").as_bytes());
        input.extend_from_slice(format!("file:{source}").as_bytes());
        pod.metadata.uid = Some(hex(&md5(&input)));
    }
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let meta = &mut pod.metadata;
    meta.name = Some(format!("{}-{node}", meta.name.as_deref().unwrap_or("")));
    if meta.namespace.as_deref().unwrap_or("").is_empty() {
        meta.namespace = Some("default".to_string());
    }
    let annotations = meta.annotations.get_or_insert_with(Default::default);
    annotations.insert(CONFIG_HASH.to_string(), uid);
    annotations.insert(CONFIG_SOURCE.to_string(), "file".to_string());
    let spec = pod.spec.get_or_insert_with(Default::default);
    spec.node_name = Some(node_name.to_string());
    let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
    let toleration = Toleration {
        operator: Some("Exists".to_string()),
        effect: Some("NoExecute".to_string()),
        ..Toleration::default()
    };
    if !tolerations.contains(&toleration) {
        tolerations.push(toleration);
    }
    pod.status = Some(PodStatus {
        phase: Some("Pending".to_string()),
        ..PodStatus::default()
    });
    apply_defaults(&mut pod);
    drop_disabled_fields(&mut pod, None);
    validate_pod_with_gates(&pod, gates).map_err(|e| format!("{source}: {e}"))?;
    validate_static_pod_references(&pod).map_err(|e| format!("{source}: {e}"))?;
    Ok(pod)
}

/// The store key of a pod.
pub(crate) fn pod_key(pod: &Pod) -> Key {
    Key::new(
        "pods",
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or(""),
    )
}

/// Whether `pod` is the mirror of a static pod.
pub(crate) fn is_mirror(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(CONFIG_MIRROR))
}

/// The mirror pod of a static pod, with its latest known status: the static pod itself, with
/// the `config.mirror` annotation. It keeps the static pod's UID, so that its logs and
/// container IDs are found under it.
pub(crate) fn mirror_object(pod: &Pod, status: Option<PodStatus>, now: Timestamp) -> Value {
    let mut mirror = pod.clone();
    let uid = mirror.metadata.uid.clone().unwrap_or_default();
    mirror
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(CONFIG_MIRROR.to_string(), uid);
    mirror.metadata.resource_version = None;
    mirror.metadata.deletion_timestamp = None;
    mirror.metadata.deletion_grace_period_seconds = None;
    // The API stores whole seconds.
    let created = Timestamp::from_second(now.as_second()).unwrap_or(now);
    mirror.metadata.creation_timestamp = Some(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(created),
    );
    if status.is_some() {
        mirror.status = status;
    }
    let mut value = serde_json::to_value(&mirror).unwrap_or(Value::Null);
    value["apiVersion"] = Value::from("v1");
    value["kind"] = Value::from("Pod");
    value
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// MD5 (RFC 1321), for the static pod UID only (not for anything that needs security).
fn md5(input: &[u8]) -> [u8; 16] {
    use md5::Digest;
    md5::Md5::digest(input).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn md5_matches_the_rfc_test_suite() {
        let cases = [
            ("", "d41d8cd98f00b204e9800998ecf8427e"),
            ("a", "0cc175b9c0f1b6a831c399e269772661"),
            ("abc", "900150983cd24fb0d6963f7d28e17f72"),
            ("message digest", "f96b697d7cb7938d525a2f31aaf161d0"),
            (
                "12345678901234567890123456789012345678901234567890123456789012345678901234567890",
                "57edf4a22be3c955ac49da2e2107b67a",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(hex(&md5(input.as_bytes())), want, "{input:?}");
        }
    }

    fn manifest(image: &str) -> Pod {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web"},
            "spec": {"containers": [{"name": "app", "image": image, "command": ["sleep", "1"]}]}
        }))
        .unwrap()
    }

    #[test]
    fn m10_static_pod_identity() {
        let pod = static_pod(
            manifest("busybox"),
            "node-1",
            "/etc/m/web.yaml",
            Default::default(),
        )
        .unwrap();
        let uid = pod.metadata.uid.clone().unwrap();
        assert_eq!(uid.len(), 32);
        assert!(uid.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(pod.metadata.name.as_deref(), Some("web-node-1"));
        assert_eq!(pod.metadata.namespace.as_deref(), Some("default"));
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.node_name.as_deref(), Some("node-1"));
        assert!(spec.tolerations.as_ref().unwrap().iter().any(|t| {
            t.operator.as_deref() == Some("Exists") && t.effect.as_deref() == Some("NoExecute")
        }));
        let annotations = pod.metadata.annotations.as_ref().unwrap();
        assert_eq!(annotations[CONFIG_HASH], uid);
        assert_eq!(annotations[CONFIG_SOURCE], "file");
        assert_eq!(
            pod.status.as_ref().unwrap().phase.as_deref(),
            Some("Pending")
        );

        // The same manifest elsewhere, or edited, is another pod.
        let same = static_pod(
            manifest("busybox"),
            "node-1",
            "/etc/m/web.yaml",
            Default::default(),
        )
        .unwrap();
        assert_eq!(same.metadata.uid.as_deref(), Some(uid.as_str()));
        let moved = static_pod(
            manifest("busybox"),
            "node-1",
            "/etc/m/other.yaml",
            Default::default(),
        )
        .unwrap();
        assert_ne!(moved.metadata.uid.as_deref(), Some(uid.as_str()));
        let edited = static_pod(
            manifest("nginx"),
            "node-1",
            "/etc/m/web.yaml",
            Default::default(),
        )
        .unwrap();
        assert_ne!(edited.metadata.uid.as_deref(), Some(uid.as_str()));
    }

    /// KEP-5532: a static pod is validated with the node's feature gates.
    #[test]
    fn kep5532_static_pods_follow_the_nodes_feature_gates() {
        let mut pod = manifest("busybox");
        let app = &mut pod.spec.as_mut().unwrap().containers[0];
        app.restart_policy = Some("Never".into());
        app.restart_policy_rules =
            Some(vec![serde_json::from_value(serde_json::json!(
            {"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [88]}}
        ))
        .unwrap()]);
        let err = static_pod(pod.clone(), "n", "/m/web.yaml", Default::default()).unwrap_err();
        assert!(
            err.contains("Unsupported value: \"RestartAllContainers\""),
            "{err}"
        );
        let gates =
            podvisor_api::FeatureGates::parse("RestartAllContainersOnContainerExits=true").unwrap();
        static_pod(pod, "n", "/m/web.yaml", gates).unwrap();
    }

    #[test]
    fn m10_static_pods_referencing_api_objects_are_refused() {
        let mut pod = manifest("busybox");
        let spec = pod.spec.as_mut().unwrap();
        spec.service_account_name = Some("builder".to_string());
        let err = static_pod(pod, "node-1", "/etc/m/web.yaml", Default::default()).unwrap_err();
        assert_eq!(
            err,
            "/etc/m/web.yaml: The Pod \"web-node-1\" is invalid: spec.serviceAccountName: Forbidden: static pods may not reference API objects"
        );
    }

    #[test]
    fn mirror_pods_carry_the_mirror_annotation_and_the_uid() {
        let pod = static_pod(manifest("busybox"), "n", "/m/web.yaml", Default::default()).unwrap();
        let mirror = mirror_object(&pod, None, Timestamp::from_second(100).unwrap());
        let back: Pod = serde_json::from_value(mirror).unwrap();
        assert!(is_mirror(&back));
        assert_eq!(back.metadata.uid, pod.metadata.uid);
        assert!(!is_mirror(&pod));
    }
}
