//! Pod-spec level rules (V4 host network, V9) and volumes (V10 sources).

use std::collections::{HashMap, HashSet};

use k8s_openapi::api::core::v1::{
    DownwardAPIVolumeFile, KeyToPath, PodSpec, Toleration, Volume, VolumeProjection,
};

use super::Ctx;
use super::containers::{validate_containers, validate_image_whitespace, validate_init_containers};
use super::env::validate_object_field_selector;
use super::ephemeral::validate_ephemeral_containers;
use super::field::{FieldError, Path};
use super::meta::validate_labels;
use super::names::{
    inclusive_range_error, is_dns1123_label, is_qualified_name, is_valid_label_value,
    name_is_dns_subdomain,
};
use super::network::{validate_dns_config, validate_hostname_override};
use super::paths::{validate_local_non_reserved_path, validate_no_backsteps};
use super::resources::validate_pod_resources;
use super::security::{host_users, validate_host_users, validate_pod_security_context};
use crate::quantity::{QUANTITY_SYNTAX_MSG, Quantity};

const FILE_MODE_MSG: &str = "must be a number between 0 and 0777 (octal), both inclusive";

/// Kubernetes' `ValidatePodSpec`.
pub(crate) fn validate_pod_spec(
    spec: &PodSpec,
    gates: crate::feature_gates::FeatureGates,
) -> Vec<FieldError> {
    let path = Path::new("spec");
    let mut errs = Vec::new();
    if spec.termination_grace_period_seconds.is_none() {
        errs.push(FieldError::required(
            &path.child("terminationGracePeriodSeconds"),
            "",
        ));
    }
    let (volumes, vol_errs) = validate_volumes(
        spec.volumes.as_deref().unwrap_or_default(),
        &path.child("volumes"),
    );
    errs.extend(vol_errs);

    let ctx = Ctx {
        grace_period: spec.termination_grace_period_seconds,
        volumes,
        pod_restart_policy: spec.restart_policy.as_deref().unwrap_or(""),
        os: spec.os.as_ref().map(|o| o.name.as_str()),
        host_users: host_users(spec),
        gates,
    };
    let containers = spec.containers.as_slice();
    let inits = spec.init_containers.as_deref().unwrap_or_default();
    errs.extend(validate_containers(
        containers,
        &path.child("containers"),
        &ctx,
    ));
    errs.extend(validate_init_containers(
        inits,
        containers,
        &path.child("initContainers"),
        &ctx,
    ));
    errs.extend(validate_ephemeral_containers(
        spec.ephemeral_containers.as_deref().unwrap_or_default(),
        containers,
        inits,
        &path.child("ephemeralContainers"),
        &ctx,
    ));

    errs.extend(validate_pod_resources(spec, &path.child("resources")));

    // V4: with hostNetwork, a pod's hostPort must equal its containerPort.
    if spec.host_network.unwrap_or(false) {
        for (i, c) in containers.iter().enumerate() {
            for (j, port) in c.ports.iter().flatten().enumerate() {
                let hp = port.host_port.unwrap_or(0);
                if hp != port.container_port {
                    errs.push(FieldError::invalid(
                        &path
                            .child("containers")
                            .index(i)
                            .child("ports")
                            .index(j)
                            .child("hostPort"),
                        hp,
                        "must match `containerPort` when `hostNetwork` is true",
                    ));
                }
            }
        }
    }

    match spec.restart_policy.as_deref().unwrap_or("") {
        "Always" | "OnFailure" | "Never" => {}
        "" => errs.push(FieldError::required(&path.child("restartPolicy"), "")),
        other => errs.push(FieldError::not_supported(
            &path.child("restartPolicy"),
            other,
            &["Always", "OnFailure", "Never"],
        )),
    }
    match spec.dns_policy.as_deref().unwrap_or("") {
        "ClusterFirstWithHostNet" | "ClusterFirst" | "Default" | "None" => {}
        "" => errs.push(FieldError::required(&path.child("dnsPolicy"), "")),
        other => errs.push(FieldError::not_supported(
            &path.child("dnsPolicy"),
            other,
            &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"],
        )),
    }
    if let Some(ns) = &spec.node_selector {
        errs.extend(validate_labels(ns, &path.child("nodeSelector")));
    }
    errs.extend(validate_pod_security_context(
        spec.security_context.as_ref(),
        &path.child("securityContext"),
    ));
    errs.extend(validate_dns_config(spec, &path.child("dnsConfig")));
    for (i, gate) in spec.readiness_gates.iter().flatten().enumerate() {
        let p = path.child("readinessGates").index(i).child("conditionType");
        for msg in is_qualified_name(&gate.condition_type) {
            errs.push(FieldError::invalid(&p, &gate.condition_type, msg));
        }
    }
    let mut gates = HashSet::new();
    for (i, gate) in spec.scheduling_gates.iter().flatten().enumerate() {
        let p = path.child("schedulingGates").index(i);
        for msg in is_qualified_name(&gate.name) {
            errs.push(FieldError::invalid(&p, &gate.name, msg));
        }
        if !gates.insert(gate.name.as_str()) {
            errs.push(FieldError::duplicate(&p, &gate.name));
        }
    }
    errs.extend(validate_host_users(spec, &path));
    for (field, value) in [
        ("serviceAccountName", &spec.service_account_name),
        ("nodeName", &spec.node_name),
        ("priorityClassName", &spec.priority_class_name),
    ] {
        if let Some(v) = value.as_deref().filter(|v| !v.is_empty()) {
            // serviceAccountName, nodeName and priorityClassName are all
            // DNS-1123 subdomains.
            for msg in name_is_dns_subdomain(v, false) {
                errs.push(FieldError::invalid(&path.child(field), v, msg));
            }
        }
    }
    if let Some(v) = spec.active_deadline_seconds
        && !(1..=i64::from(i32::MAX)).contains(&v)
    {
        errs.push(FieldError::invalid(
            &path.child("activeDeadlineSeconds"),
            v,
            inclusive_range_error(1, i64::from(i32::MAX)),
        ));
    }
    for (field, value) in [("hostname", &spec.hostname), ("subdomain", &spec.subdomain)] {
        if let Some(v) = value.as_deref().filter(|v| !v.is_empty()) {
            for msg in is_dns1123_label(v) {
                errs.push(FieldError::invalid(&path.child(field), v, msg));
            }
        }
    }
    errs.extend(validate_hostname_override(spec, &path));
    errs.extend(validate_tolerations(
        spec.tolerations.as_deref().unwrap_or_default(),
        &path.child("tolerations"),
    ));
    if let Some(os) = &spec.os
        && os.name != "linux"
        && os.name != "windows"
    {
        errs.push(FieldError::not_supported(
            &path.child("os").child("name"),
            &os.name,
            &["linux", "windows"],
        ));
    }
    errs
}

/// The checks Kubernetes applies to pods but not to pod templates.
pub(crate) fn pod_only_checks(spec: &PodSpec) -> Vec<FieldError> {
    let path = Path::new("spec");
    let mut errs = Vec::new();
    if spec
        .service_account_name
        .as_deref()
        .unwrap_or("")
        .is_empty()
    {
        for (vi, v) in spec.volumes.iter().flatten().enumerate() {
            for (si, src) in v
                .projected
                .iter()
                .flat_map(|p| p.sources.iter().flatten())
                .enumerate()
            {
                if src.service_account_token.is_some() {
                    errs.push(FieldError::forbidden(
                        &path
                            .child("volumes")
                            .index(vi)
                            .child("projected")
                            .child("sources")
                            .index(si)
                            .child("serviceAccountToken"),
                        "must not be specified when serviceAccountName is not set",
                    ));
                }
            }
        }
    }
    for (i, c) in spec.containers.iter().enumerate() {
        errs.extend(validate_image_whitespace(
            c,
            &path.child("containers").index(i),
        ));
    }
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        errs.extend(validate_image_whitespace(
            c,
            &path.child("initContainers").index(i),
        ));
    }
    errs
}

/// Kubernetes' `ValidateTolerations`.
pub(crate) fn validate_tolerations(tolerations: &[Toleration], path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, t) in tolerations.iter().enumerate() {
        let p = path.index(i);
        let key = t.key.as_deref().unwrap_or("");
        let op = t.operator.as_deref().unwrap_or("");
        let effect = t.effect.as_deref().unwrap_or("");
        let value = t.value.as_deref().unwrap_or("");
        if !key.is_empty() {
            for msg in is_qualified_name(key) {
                errs.push(FieldError::invalid(&p.child("key"), key, msg));
            }
        }
        if key.is_empty() && op != "Exists" {
            errs.push(FieldError::invalid(
                &p.child("operator"),
                op,
                "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
            ));
        }
        if t.toleration_seconds.is_some() && effect != "NoExecute" {
            errs.push(FieldError::invalid(
                &p.child("effect"),
                effect,
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            ));
        }
        match op {
            "Equal" | "" => {
                let msgs = is_valid_label_value(value);
                if !msgs.is_empty() {
                    errs.push(FieldError::invalid(
                        &p.child("operator"),
                        value,
                        msgs.join(";"),
                    ));
                }
            }
            "Exists" => {
                if !value.is_empty() {
                    errs.push(FieldError::invalid(
                        &p.child("operator"),
                        value,
                        "value must be empty when `operator` is 'Exists'",
                    ));
                }
            }
            other => errs.push(FieldError::not_supported(
                &p.child("operator"),
                other,
                &["Equal", "Exists"],
            )),
        }
        if !effect.is_empty() && !matches!(effect, "NoSchedule" | "PreferNoSchedule" | "NoExecute")
        {
            errs.push(FieldError::not_supported(
                &p.child("effect"),
                effect,
                &["NoSchedule", "PreferNoSchedule", "NoExecute"],
            ));
        }
    }
    errs
}

/// Kubernetes' `ValidateVolumes`: returns the names of the volumes that
/// validated cleanly (only those can be mounted) and the errors.
fn validate_volumes<'a>(
    volumes: &'a [Volume],
    path: &Path,
) -> (HashMap<&'a str, &'a Volume>, Vec<FieldError>) {
    let mut names = HashMap::new();
    let mut errs = Vec::new();
    for (i, v) in volumes.iter().enumerate() {
        let p = path.index(i);
        let name_path = p.child("name");
        let mut el = validate_volume_source(v, &p);
        if v.name.is_empty() {
            el.push(FieldError::required(&name_path, ""));
        } else {
            for msg in is_dns1123_label(&v.name) {
                el.push(FieldError::invalid(&name_path, &v.name, msg));
            }
        }
        if names.contains_key(v.name.as_str()) {
            el.push(FieldError::duplicate(&name_path, &v.name));
        }
        if el.is_empty() {
            names.insert(v.name.as_str(), v);
        } else {
            errs.extend(el);
        }
    }
    (names, errs)
}

fn validate_mode(mode: Option<i32>, path: &Path) -> Option<FieldError> {
    mode.filter(|m| !(0..=0o777).contains(m))
        .map(|m| FieldError::invalid(path, m, FILE_MODE_MSG))
}

fn validate_key_to_path(kp: &KeyToPath, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if kp.key.is_empty() {
        errs.push(FieldError::required(&path.child("key"), ""));
    }
    if kp.path.is_empty() {
        errs.push(FieldError::required(&path.child("path"), ""));
    }
    errs.extend(validate_local_non_reserved_path(
        &kp.path,
        &path.child("path"),
    ));
    errs.extend(validate_mode(kp.mode, &path.child("mode")));
    errs
}

const VOLUME_FIELD_PATHS: [&str; 5] = [
    "metadata.annotations",
    "metadata.labels",
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
];

fn validate_downward_api_file(file: &DownwardAPIVolumeFile, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if file.path.is_empty() {
        errs.push(FieldError::required(&path.child("path"), ""));
    }
    errs.extend(validate_local_non_reserved_path(
        &file.path,
        &path.child("path"),
    ));
    match (&file.field_ref, &file.resource_field_ref) {
        (Some(fr), rf) => {
            errs.extend(validate_object_field_selector(
                fr,
                &VOLUME_FIELD_PATHS,
                &path.child("fieldRef"),
            ));
            if rf.is_some() {
                errs.push(FieldError::invalid(
                    path,
                    "resource",
                    "fieldRef and resourceFieldRef can not be specified simultaneously",
                ));
            }
        }
        (None, Some(rf)) => {
            let rp = path.child("resourceFieldRef");
            if rf.container_name.as_deref().unwrap_or("").is_empty() {
                errs.push(FieldError::required(&rp.child("containerName"), ""));
            } else if rf.resource.is_empty() {
                errs.push(FieldError::required(&rp.child("resource"), ""));
            }
        }
        (None, None) => errs.push(FieldError::required(
            path,
            "one of fieldRef and resourceFieldRef is required",
        )),
    }
    errs.extend(validate_mode(file.mode, &path.child("mode")));
    errs
}

fn validate_projection_sources(sources: &[VolumeProjection], path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut all_paths = HashSet::new();
    for (i, src) in sources.iter().enumerate() {
        let sp = path.child("sources").index(i);
        let mut n = 0;
        if let Some(s) = &src.secret {
            n += 1;
            let pp = sp.child("secret");
            if s.name.is_empty() {
                errs.push(FieldError::required(&pp.child("name"), ""));
            }
            for (j, kp) in s.items.iter().flatten().enumerate() {
                errs.extend(validate_key_to_path(kp, &pp.child("items").index(j)));
                if !kp.path.is_empty() && !all_paths.insert(kp.path.clone()) {
                    errs.push(FieldError::invalid(
                        path,
                        &s.name,
                        "conflicting duplicate paths",
                    ));
                }
            }
        }
        if let Some(cm) = &src.config_map {
            n += 1;
            let pp = sp.child("configMap");
            if cm.name.is_empty() {
                errs.push(FieldError::required(&pp.child("name"), ""));
            }
            for (j, kp) in cm.items.iter().flatten().enumerate() {
                errs.extend(validate_key_to_path(kp, &pp.child("items").index(j)));
                if !kp.path.is_empty() && !all_paths.insert(kp.path.clone()) {
                    errs.push(FieldError::invalid(
                        path,
                        &cm.name,
                        "conflicting duplicate paths",
                    ));
                }
            }
        }
        if let Some(d) = &src.downward_api {
            n += 1;
            let pp = sp.child("downwardAPI");
            for file in d.items.iter().flatten() {
                errs.extend(validate_downward_api_file(file, &pp));
                if !file.path.is_empty() && !all_paths.insert(file.path.clone()) {
                    errs.push(FieldError::invalid(
                        path,
                        &file.path,
                        "conflicting duplicate paths",
                    ));
                }
            }
        }
        if let Some(t) = &src.service_account_token {
            n += 1;
            let pp = sp.child("serviceAccountToken");
            let exp = t.expiration_seconds.unwrap_or(0);
            if exp < 600 {
                errs.push(FieldError::invalid(
                    &pp.child("expirationSeconds"),
                    exp,
                    "may not specify a duration less than 10 minutes",
                ));
            }
            if exp > 1 << 32 {
                errs.push(FieldError::invalid(
                    &pp.child("expirationSeconds"),
                    exp,
                    "may not specify a duration larger than 2^32 seconds",
                ));
            }
            // Kubernetes reports the token path under the volume, not the source.
            if t.path.is_empty() {
                errs.push(FieldError::required(&path.child("path"), ""));
            } else {
                errs.extend(validate_local_non_reserved_path(
                    &t.path,
                    &path.child("path"),
                ));
            }
        }
        if src.cluster_trust_bundle.is_some() {
            n += 1;
        }
        if src.pod_certificate.is_some() {
            n += 1;
        }
        if n > 1 {
            errs.push(FieldError::forbidden(
                &sp,
                "may not specify more than 1 volume type per source",
            ));
        }
    }
    errs
}

/// Kubernetes' `validateVolumeSource`: exactly one source; contents are
/// checked for emptyDir, hostPath, secret, configMap, downwardAPI and
/// projected only.
fn validate_volume_source(v: &Volume, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    // Every source in Kubernetes' checking order, with the name it uses in
    // the "more than 1" error (including its `downwarAPI` typo).
    let present = [
        ("emptyDir", v.empty_dir.is_some()),
        ("hostPath", v.host_path.is_some()),
        ("gitRepo", v.git_repo.is_some()),
        ("gcePersistentDisk", v.gce_persistent_disk.is_some()),
        ("awsElasticBlockStore", v.aws_elastic_block_store.is_some()),
        ("secret", v.secret.is_some()),
        ("nfs", v.nfs.is_some()),
        ("iscsi", v.iscsi.is_some()),
        ("glusterfs", v.glusterfs.is_some()),
        ("flocker", v.flocker.is_some()),
        ("persistentVolumeClaim", v.persistent_volume_claim.is_some()),
        ("rbd", v.rbd.is_some()),
        ("cinder", v.cinder.is_some()),
        ("cephFS", v.cephfs.is_some()),
        ("quobyte", v.quobyte.is_some()),
        ("downwarAPI", v.downward_api.is_some()),
        ("fc", v.fc.is_some()),
        ("flexVolume", v.flex_volume.is_some()),
        ("configMap", v.config_map.is_some()),
        ("azureFile", v.azure_file.is_some()),
        ("vsphereVolume", v.vsphere_volume.is_some()),
        ("photonPersistentDisk", v.photon_persistent_disk.is_some()),
        ("portworxVolume", v.portworx_volume.is_some()),
        ("azureDisk", v.azure_disk.is_some()),
        ("storageos", v.storageos.is_some()),
        ("projected", v.projected.is_some()),
        ("scaleIO", v.scale_io.is_some()),
        ("csi", v.csi.is_some()),
        ("ephemeral", v.ephemeral.is_some()),
        ("image", v.image.is_some()),
    ];
    let mut chosen = None;
    for (name, is_set) in present {
        if !is_set {
            continue;
        }
        if chosen.is_some() {
            errs.push(FieldError::forbidden(
                &path.child(name),
                "may not specify more than 1 volume type",
            ));
        } else {
            chosen = Some(name);
        }
    }
    match chosen {
        None => errs.push(FieldError::required(path, "must specify a volume type")),
        Some("emptyDir") => {
            if let Some(limit) = v.empty_dir.as_ref().and_then(|e| e.size_limit.as_ref()) {
                let p = path.child("emptyDir").child("sizeLimit");
                match Quantity::parse(&limit.0) {
                    Some(q) if q.is_negative() => errs.push(FieldError::forbidden(
                        &p,
                        "SizeLimit field must be a valid resource quantity",
                    )),
                    Some(_) => {}
                    None => errs.push(FieldError::invalid(&p, &limit.0, QUANTITY_SYNTAX_MSG)),
                }
            }
        }
        Some("hostPath") => {
            if let Some(hp) = &v.host_path {
                let p = path.child("hostPath");
                if hp.path.is_empty() {
                    errs.push(FieldError::required(&p.child("path"), ""));
                } else {
                    errs.extend(validate_no_backsteps(&hp.path, &p.child("path")));
                    let types = [
                        "",
                        "BlockDevice",
                        "CharDevice",
                        "Directory",
                        "DirectoryOrCreate",
                        "File",
                        "FileOrCreate",
                        "Socket",
                    ];
                    if let Some(t) = hp.type_.as_deref()
                        && !types.contains(&t)
                    {
                        errs.push(FieldError::not_supported(&p.child("type"), t, &types));
                    }
                }
            }
        }
        Some("secret") => {
            if let Some(s) = &v.secret {
                let p = path.child("secret");
                if s.secret_name.as_deref().unwrap_or("").is_empty() {
                    errs.push(FieldError::required(&p.child("secretName"), ""));
                }
                errs.extend(validate_mode(s.default_mode, &p.child("defaultMode")));
                for (j, kp) in s.items.iter().flatten().enumerate() {
                    errs.extend(validate_key_to_path(kp, &p.child("items").index(j)));
                }
            }
        }
        Some("configMap") => {
            if let Some(cm) = &v.config_map {
                let p = path.child("configMap");
                if cm.name.is_empty() {
                    errs.push(FieldError::required(&p.child("name"), ""));
                }
                errs.extend(validate_mode(cm.default_mode, &p.child("defaultMode")));
                for (j, kp) in cm.items.iter().flatten().enumerate() {
                    errs.extend(validate_key_to_path(kp, &p.child("items").index(j)));
                }
            }
        }
        Some("downwarAPI") => {
            if let Some(d) = &v.downward_api {
                let p = path.child("downwardAPI");
                errs.extend(validate_mode(d.default_mode, &p.child("defaultMode")));
                // Kubernetes reports item errors under the source, not the item.
                for file in d.items.iter().flatten() {
                    errs.extend(validate_downward_api_file(file, &p));
                }
            }
        }
        Some("projected") => {
            if let Some(pr) = &v.projected {
                let p = path.child("projected");
                errs.extend(validate_mode(pr.default_mode, &p.child("defaultMode")));
                errs.extend(validate_projection_sources(
                    pr.sources.as_deref().unwrap_or_default(),
                    &p,
                ));
            }
        }
        Some("image") => {
            if let Some(img) = &v.image {
                let p = path.child("image");
                if img.reference.as_deref().unwrap_or("").is_empty() {
                    errs.push(FieldError::required(&p.child("reference"), ""));
                }
                match img.pull_policy.as_deref().unwrap_or("") {
                    "Always" | "IfNotPresent" | "Never" => {}
                    "" => errs.push(FieldError::required(&p.child("pullPolicy"), "")),
                    other => errs.push(FieldError::not_supported(
                        &p.child("pullPolicy"),
                        other,
                        &["Always", "IfNotPresent", "Never"],
                    )),
                }
            }
        }
        Some(_) => {}
    }
    errs
}
