//! Environment variables (V11): names, `valueFrom` sources, `envFrom`, and
//! the downward-API field selectors they share with volumes.

use k8s_openapi::api::core::v1::{EnvFromSource, EnvVar, FileKeySelector, ObjectFieldSelector};

use super::Ctx;
use super::field::{FieldError, Path};
use super::names::{
    is_config_map_key, is_dns1123_label, is_qualified_name, is_relaxed_env_var_name,
    name_is_dns_subdomain,
};
use super::paths::validate_no_backsteps;

pub(crate) fn validate_env(vars: &[EnvVar], path: &Path, ctx: &Ctx<'_>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, ev) in vars.iter().enumerate() {
        let p = path.index(i);
        if ev.name.is_empty() {
            errs.push(FieldError::required(&p.child("name"), ""));
        } else {
            for m in is_relaxed_env_var_name(&ev.name) {
                errs.push(FieldError::invalid(&p.child("name"), &ev.name, m));
            }
        }
        errs.extend(validate_env_value_from(ev, &p.child("valueFrom"), ctx));
    }
    errs
}

const ENV_FIELD_PATHS: [&str; 9] = [
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
];

/// Field paths that the downward API can expose for a v1 Pod.
const DOWNWARD_API_LABELS: [&str; 14] = [
    "metadata.annotations",
    "metadata.labels",
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.serviceAccountName",
    "spec.schedulerName",
    "status.phase",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
];

const CONTAINER_RESOURCE_FIELD_PATHS: [&str; 6] = [
    "limits.cpu",
    "limits.ephemeral-storage",
    "limits.memory",
    "requests.cpu",
    "requests.ephemeral-storage",
    "requests.memory",
];

/// Splits `metadata.labels['key']` into the path and the subscript.
fn split_subscripted(fp: &str) -> Option<(&str, &str)> {
    let open = fp.find("['")?;
    let inner = fp[open + 2..].strip_suffix("']")?;
    Some((&fp[..open], inner))
}

/// Kubernetes' `validateObjectFieldSelector` for a given set of plain paths.
pub(crate) fn validate_object_field_selector(
    fs: &ObjectFieldSelector,
    allowed: &[&str],
    path: &Path,
) -> Vec<FieldError> {
    let api_version = fs.api_version.as_deref().unwrap_or("");
    if api_version.is_empty() {
        return vec![FieldError::required(&path.child("apiVersion"), "")];
    }
    if fs.field_path.is_empty() {
        return vec![FieldError::required(&path.child("fieldPath"), "")];
    }
    let conversion = if api_version == "v1" {
        let base = split_subscripted(&fs.field_path).map_or(fs.field_path.as_str(), |(p, _)| p);
        if DOWNWARD_API_LABELS.contains(&base) {
            Ok(())
        } else {
            Err(format!("field label not supported: {}", fs.field_path))
        }
    } else {
        Err(format!("unsupported pod version: {api_version}"))
    };
    if let Err(e) = conversion {
        return vec![FieldError::invalid(
            &path.child("fieldPath"),
            &fs.field_path,
            format!("error converting fieldPath: {e}"),
        )];
    }
    if let Some((base, subscript)) = split_subscripted(&fs.field_path) {
        return match base {
            "metadata.annotations" => is_qualified_name(&subscript.to_lowercase())
                .into_iter()
                .map(|m| FieldError::invalid(path, subscript.to_lowercase(), m))
                .collect(),
            "metadata.labels" => is_qualified_name(subscript)
                .into_iter()
                .map(|m| FieldError::invalid(path, subscript, m))
                .collect(),
            _ => vec![FieldError::invalid(
                path,
                base,
                "does not support subscript",
            )],
        };
    }
    if allowed.contains(&fs.field_path.as_str()) {
        Vec::new()
    } else {
        let mut sorted = allowed.to_vec();
        sorted.sort_unstable();
        vec![FieldError::not_supported(
            &path.child("fieldPath"),
            &fs.field_path,
            &sorted,
        )]
    }
}

fn validate_env_value_from(ev: &EnvVar, path: &Path, ctx: &Ctx<'_>) -> Vec<FieldError> {
    let Some(from) = &ev.value_from else {
        return Vec::new();
    };
    let mut errs = Vec::new();
    let mut sources = 0;
    if let Some(fr) = &from.field_ref {
        sources += 1;
        errs.extend(validate_object_field_selector(
            fr,
            &ENV_FIELD_PATHS,
            &path.child("fieldRef"),
        ));
    }
    if let Some(rf) = &from.resource_field_ref {
        sources += 1;
        let rp = path.child("resourceFieldRef");
        if rf.resource.is_empty() {
            errs.push(FieldError::required(&rp.child("resource"), ""));
        } else if !CONTAINER_RESOURCE_FIELD_PATHS.contains(&rf.resource.as_str())
            && !rf.resource.starts_with("requests.hugepages-")
            && !rf.resource.starts_with("limits.hugepages-")
        {
            errs.push(FieldError::not_supported(
                &rp.child("resource"),
                &rf.resource,
                &CONTAINER_RESOURCE_FIELD_PATHS,
            ));
        }
    }
    if let Some(cm) = &from.config_map_key_ref {
        sources += 1;
        errs.extend(validate_key_selector(
            &cm.name,
            &cm.key,
            &path.child("configMapKeyRef"),
        ));
    }
    if let Some(s) = &from.secret_key_ref {
        sources += 1;
        errs.extend(validate_key_selector(
            &s.name,
            &s.key,
            &path.child("secretKeyRef"),
        ));
    }
    if let Some(f) = &from.file_key_ref {
        sources += 1;
        errs.extend(validate_file_key_selector(
            f,
            &path.child("fileKeyRef"),
            ctx,
        ));
    }
    let has_value = ev.value.as_deref().is_some_and(|v| !v.is_empty());
    if sources == 0 {
        errs.push(FieldError::invalid(
            path,
            "",
            "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef`, `secretKeyRef` or `fileKeyRef`",
        ));
    } else if has_value {
        errs.push(FieldError::invalid(
            path,
            "",
            "may not be specified when `value` is not empty",
        ));
    } else if sources > 1 {
        errs.push(FieldError::invalid(
            path,
            "",
            "may not have more than one field specified at a time",
        ));
    }
    errs
}

/// `fileKeyRef` (EnvFiles, beta and on in 1.35): a key read from a file
/// that another container wrote into an emptyDir volume.
fn validate_file_key_selector(f: &FileKeySelector, path: &Path, ctx: &Ctx<'_>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let key_path = path.child("key");
    if f.key.is_empty() {
        errs.push(FieldError::required(&key_path, ""));
    } else {
        for m in is_relaxed_env_var_name(&f.key) {
            errs.push(FieldError::invalid(&key_path, &f.key, m));
        }
    }
    let path_path = path.child("path");
    if f.path.is_empty() {
        errs.push(FieldError::required(&path_path, ""));
    } else {
        errs.extend(validate_no_backsteps(&f.path, &path_path));
    }
    let vol_path = path.child("volumeName");
    if f.volume_name.is_empty() {
        errs.push(FieldError::required(&vol_path, ""));
    } else {
        let label_errs = is_dns1123_label(&f.volume_name);
        if label_errs.is_empty() {
            match ctx.volumes.get(f.volume_name.as_str()) {
                None => errs.push(FieldError::not_found(&vol_path, &f.volume_name)),
                Some(v) if v.empty_dir.is_some() => {}
                Some(_) => errs.push(FieldError::invalid(
                    &vol_path,
                    &f.volume_name,
                    "referenced volume must be of type emptyDir",
                )),
            }
        }
        for m in label_errs {
            errs.push(FieldError::invalid(&vol_path, &f.volume_name, m));
        }
    }
    errs
}

fn validate_key_selector(name: &str, key: &str, path: &Path) -> Vec<FieldError> {
    let mut errs: Vec<FieldError> = name_is_dns_subdomain(name, false)
        .into_iter()
        .map(|m| FieldError::invalid(&path.child("name"), name, m))
        .collect();
    if key.is_empty() {
        errs.push(FieldError::required(&path.child("key"), ""));
    } else {
        for m in is_config_map_key(key) {
            errs.push(FieldError::invalid(&path.child("key"), key, m));
        }
    }
    errs
}

pub(crate) fn validate_env_from(vars: &[EnvFromSource], path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, ev) in vars.iter().enumerate() {
        let p = path.index(i);
        if let Some(prefix) = ev.prefix.as_deref().filter(|s| !s.is_empty()) {
            for m in is_relaxed_env_var_name(prefix) {
                errs.push(FieldError::invalid(&p.child("prefix"), prefix, m));
            }
        }
        let mut sources = 0;
        let mut check_name = |name: &str, sp: Path, errs: &mut Vec<FieldError>| {
            sources += 1;
            if name.is_empty() {
                errs.push(FieldError::required(&sp.child("name"), ""));
            } else {
                for m in name_is_dns_subdomain(name, true) {
                    errs.push(FieldError::invalid(&sp.child("name"), name, m));
                }
            }
        };
        if let Some(cm) = &ev.config_map_ref {
            check_name(&cm.name, p.child("configMapRef"), &mut errs);
        }
        if let Some(s) = &ev.secret_ref {
            check_name(&s.name, p.child("secretRef"), &mut errs);
        }
        if sources == 0 {
            errs.push(FieldError::invalid(
                path,
                "",
                "must specify one of: `configMapRef` or `secretRef`",
            ));
        } else if sources > 1 {
            errs.push(FieldError::invalid(
                path,
                "",
                "may not have more than one field specified at a time",
            ));
        }
    }
    errs
}
