//! ConfigMaps and Secrets (`ValidateConfigMap`, `ValidateConfigMapUpdate`, `ValidateSecret`,
//! `ValidateSecretUpdate` of `pkg/apis/core/validation/validation.go`).
//!
//! Keys are checked in sorted order (Go walks its maps in random order; a sorted report is
//! one of the orders it can produce).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};

use super::field::{FieldError, Path, ValidationErrors};
use super::meta::{result, validate_object_meta, validate_object_meta_update};
use super::names::is_config_map_key;
use crate::config::{
    BASIC_AUTH_PASSWORD_KEY, BASIC_AUTH_USERNAME_KEY, DOCKER_CONFIG_JSON_KEY, DOCKER_CONFIG_KEY,
    MAX_SECRET_SIZE, SERVICE_ACCOUNT_NAME_KEY, SSH_AUTH_PRIVATE_KEY, SecretType, TLS_CERT_KEY,
    TLS_PRIVATE_KEY_KEY,
};

/// What validation shows instead of a secret's bytes.
const REDACTED: &str = "<secret contents redacted>";
const IMMUTABLE: &str = "field is immutable when `immutable` is set";

fn config_map_errors(cm: &ConfigMap) -> Vec<FieldError> {
    let mut errs = validate_object_meta(&cm.metadata, &Path::new("metadata"));
    let data_path = Path::new("data");
    let mut total = 0usize;
    let binary = cm.binary_data.as_ref();
    for (key, value) in cm.data.iter().flatten() {
        for msg in is_config_map_key(key) {
            errs.push(FieldError::invalid(&data_path.key(key), key, msg));
        }
        if binary.is_some_and(|b| b.contains_key(key)) {
            errs.push(FieldError::invalid(
                &data_path.key(key),
                key,
                "duplicate of key present in binaryData",
            ));
        }
        total += value.len();
    }
    let binary_path = Path::new("binaryData");
    for (key, value) in binary.into_iter().flatten() {
        for msg in is_config_map_key(key) {
            errs.push(FieldError::invalid(&binary_path.key(key), key, msg));
        }
        total += value.0.len();
    }
    if total > MAX_SECRET_SIZE {
        errs.push(FieldError::too_long(&Path::new(""), MAX_SECRET_SIZE));
    }
    errs
}

/// `ValidateConfigMap`: metadata, keys, the 1 MiB total.
///
/// # Errors
///
/// Every problem found.
pub fn validate_config_map(cm: &ConfigMap) -> Result<(), ValidationErrors> {
    result("ConfigMap", &cm.metadata, config_map_errors(cm))
}

/// `ValidateConfigMapUpdate`: as on create, the identity fields unchanged, and nothing of an
/// immutable ConfigMap's contents (nor `immutable` itself) changed.
///
/// # Errors
///
/// Every problem found.
pub fn validate_config_map_update(
    new: &ConfigMap,
    old: &ConfigMap,
) -> Result<(), ValidationErrors> {
    let mut errs =
        validate_object_meta_update(&new.metadata, &old.metadata, &Path::new("metadata"));
    if old.immutable == Some(true) {
        if new.immutable != Some(true) {
            errs.push(FieldError::forbidden(&Path::new("immutable"), IMMUTABLE));
        }
        if new.data != old.data {
            errs.push(FieldError::forbidden(&Path::new("data"), IMMUTABLE));
        }
        if new.binary_data != old.binary_data {
            errs.push(FieldError::forbidden(&Path::new("binaryData"), IMMUTABLE));
        }
    }
    errs.extend(config_map_errors(new));
    result("ConfigMap", &new.metadata, errs)
}

/// Go's `json.Unmarshal` into a `map[string]interface{}`: the error text it gives, if any.
fn json_object_error(bytes: &[u8]) -> Option<String> {
    match serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(bytes) {
        Ok(_) => None,
        Err(e) if e.is_syntax() || e.is_eof() => Some(match e.classify() {
            serde_json::error::Category::Eof => "unexpected end of JSON input".to_owned(),
            _ => format!(
                "invalid character at line {} column {}",
                e.line(),
                e.column()
            ),
        }),
        Err(_) => Some(
            "json: cannot unmarshal non-object into Go value of type map[string]interface {}"
                .to_owned(),
        ),
    }
}

fn secret_errors(secret: &Secret) -> Vec<FieldError> {
    let mut errs = validate_object_meta(&secret.metadata, &Path::new("metadata"));
    let data_path = Path::new("data");
    let empty = BTreeMap::new();
    let data = secret.data.as_ref().unwrap_or(&empty);
    let mut total = 0usize;
    for (key, value) in data {
        for msg in is_config_map_key(key) {
            errs.push(FieldError::invalid(&data_path.key(key), key, msg));
        }
        total += value.0.len();
    }
    if total > MAX_SECRET_SIZE {
        errs.push(FieldError::too_long(&data_path, MAX_SECRET_SIZE));
    }
    let required = |key: &str| FieldError::required(&data_path.key(key), "");
    match SecretType::of(secret) {
        SecretType::ServiceAccountToken => {
            let name = secret
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(SERVICE_ACCOUNT_NAME_KEY))
                .map_or("", String::as_str);
            if name.is_empty() {
                errs.push(FieldError::required(
                    &Path::new("metadata")
                        .child("annotations")
                        .key(SERVICE_ACCOUNT_NAME_KEY),
                    "",
                ));
            }
        }
        SecretType::Dockercfg | SecretType::DockerConfigJson => {
            let key = if SecretType::of(secret) == SecretType::Dockercfg {
                DOCKER_CONFIG_KEY
            } else {
                DOCKER_CONFIG_JSON_KEY
            };
            match data.get(key) {
                None => errs.push(required(key)),
                Some(bytes) => {
                    if let Some(e) = json_object_error(&bytes.0) {
                        errs.push(FieldError::invalid(&data_path.key(key), REDACTED, e));
                    }
                }
            }
        }
        SecretType::BasicAuth => {
            if !data.contains_key(BASIC_AUTH_USERNAME_KEY)
                && !data.contains_key(BASIC_AUTH_PASSWORD_KEY)
            {
                errs.push(required(BASIC_AUTH_USERNAME_KEY));
                errs.push(required(BASIC_AUTH_PASSWORD_KEY));
            }
        }
        SecretType::SshAuth => {
            if data
                .get(SSH_AUTH_PRIVATE_KEY)
                .is_none_or(|v| v.0.is_empty())
            {
                errs.push(required(SSH_AUTH_PRIVATE_KEY));
            }
        }
        SecretType::Tls => {
            for key in [TLS_CERT_KEY, TLS_PRIVATE_KEY_KEY] {
                if !data.contains_key(key) {
                    errs.push(required(key));
                }
            }
        }
        SecretType::Opaque | SecretType::Other => {}
    }
    errs
}

/// `ValidateSecret`: metadata, keys, the 1 MiB total, and the keys its type requires. Run
/// after [`crate::config::prepare_secret`] (`stringData` merged, the type defaulted).
///
/// # Errors
///
/// Every problem found.
pub fn validate_secret(secret: &Secret) -> Result<(), ValidationErrors> {
    result("Secret", &secret.metadata, secret_errors(secret))
}

/// `ValidateSecretUpdate`: the type is immutable, and so are an immutable Secret's data and
/// `immutable` itself.
///
/// # Errors
///
/// Every problem found.
pub fn validate_secret_update(new: &Secret, old: &Secret) -> Result<(), ValidationErrors> {
    let mut errs =
        validate_object_meta_update(&new.metadata, &old.metadata, &Path::new("metadata"));
    let (new_type, old_type) = (
        new.type_.as_deref().unwrap_or(""),
        old.type_.as_deref().unwrap_or(""),
    );
    if new_type != old_type {
        errs.push(FieldError::invalid(
            &Path::new("type"),
            new_type,
            "field is immutable",
        ));
    }
    if old.immutable == Some(true) {
        if new.immutable != Some(true) {
            errs.push(FieldError::forbidden(&Path::new("immutable"), IMMUTABLE));
        }
        if new.data != old.data {
            errs.push(FieldError::forbidden(&Path::new("data"), IMMUTABLE));
        }
    }
    errs.extend(secret_errors(new));
    result("Secret", &new.metadata, errs)
}

/// `ValidateServiceAccount`: its metadata (the name a DNS subdomain).
///
/// # Errors
///
/// Every problem found.
pub fn validate_service_account(
    sa: &k8s_openapi::api::core::v1::ServiceAccount,
) -> Result<(), ValidationErrors> {
    result(
        "ServiceAccount",
        &sa.metadata,
        validate_object_meta(&sa.metadata, &Path::new("metadata")),
    )
}

/// `ValidateServiceAccountUpdate`: the identity fields unchanged, and as on create.
///
/// # Errors
///
/// Every problem found.
pub fn validate_service_account_update(
    new: &k8s_openapi::api::core::v1::ServiceAccount,
    old: &k8s_openapi::api::core::v1::ServiceAccount,
) -> Result<(), ValidationErrors> {
    let mut errs =
        validate_object_meta_update(&new.metadata, &old.metadata, &Path::new("metadata"));
    errs.extend(validate_object_meta(&new.metadata, &Path::new("metadata")));
    result("ServiceAccount", &new.metadata, errs)
}
