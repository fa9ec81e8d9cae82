//! ConfigMaps and Secrets as the API server admits them: typed decoding with unknown fields
//! by path, Secret defaulting (`type: Opaque`) and `stringData` merged into `data`
//! (`pkg/registry/core/secret/strategy.go`), the well-known Secret types and their keys
//! (`pkg/apis/core/types.go`). Validation is [`crate::validation::validate_config_map`] and
//! [`crate::validation::validate_secret`].

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// The most bytes a ConfigMap's or Secret's values may hold together (`MaxSecretSize`).
pub const MAX_SECRET_SIZE: usize = 1024 * 1024;
/// The annotation a service-account token Secret must carry.
pub const SERVICE_ACCOUNT_NAME_KEY: &str = "kubernetes.io/service-account.name";
/// The key of a `kubernetes.io/dockercfg` Secret.
pub const DOCKER_CONFIG_KEY: &str = ".dockercfg";
/// The key of a `kubernetes.io/dockerconfigjson` Secret.
pub const DOCKER_CONFIG_JSON_KEY: &str = ".dockerconfigjson";
/// A `kubernetes.io/basic-auth` Secret's user name.
pub const BASIC_AUTH_USERNAME_KEY: &str = "username";
/// A `kubernetes.io/basic-auth` Secret's password.
pub const BASIC_AUTH_PASSWORD_KEY: &str = "password";
/// A `kubernetes.io/ssh-auth` Secret's key.
pub const SSH_AUTH_PRIVATE_KEY: &str = "ssh-privatekey";
/// A `kubernetes.io/tls` Secret's certificate.
pub const TLS_CERT_KEY: &str = "tls.crt";
/// A `kubernetes.io/tls` Secret's private key.
pub const TLS_PRIVATE_KEY_KEY: &str = "tls.key";

/// The Secret types validation knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretType {
    /// `Opaque` (or empty).
    Opaque,
    /// `kubernetes.io/service-account-token`.
    ServiceAccountToken,
    /// `kubernetes.io/dockercfg`.
    Dockercfg,
    /// `kubernetes.io/dockerconfigjson`.
    DockerConfigJson,
    /// `kubernetes.io/basic-auth`.
    BasicAuth,
    /// `kubernetes.io/ssh-auth`.
    SshAuth,
    /// `kubernetes.io/tls`.
    Tls,
    /// Any other type (allowed, unchecked).
    Other,
}

impl SecretType {
    /// The type of `secret`.
    #[must_use]
    pub fn of(secret: &Secret) -> SecretType {
        match secret.type_.as_deref().unwrap_or("") {
            "" | "Opaque" => SecretType::Opaque,
            "kubernetes.io/service-account-token" => SecretType::ServiceAccountToken,
            "kubernetes.io/dockercfg" => SecretType::Dockercfg,
            "kubernetes.io/dockerconfigjson" => SecretType::DockerConfigJson,
            "kubernetes.io/basic-auth" => SecretType::BasicAuth,
            "kubernetes.io/ssh-auth" => SecretType::SshAuth,
            "kubernetes.io/tls" => SecretType::Tls,
            _ => SecretType::Other,
        }
    }
}

/// Decodes `value` as a `T`, returning the paths of the fields `T` does not have
/// (`data.x` style, as kubectl prints them).
///
/// # Errors
///
/// The deserializer's message when a field has the wrong shape (a Secret's `data` value that
/// is not base64, a number where a string belongs).
pub fn decode_object<T: DeserializeOwned>(value: Value) -> Result<(T, Vec<String>), String> {
    let mut unknown = Vec::new();
    let obj: T = crate::decode::deserialize_typed(value, &mut unknown).map_err(|(path, e)| {
        if path.is_empty() {
            e
        } else {
            format!("{}: {e}", crate::decode::path_text(&path))
        }
    })?;
    Ok((obj, unknown))
}

/// The API server's Secret defaulting and `PrepareForCreate`/`PrepareForUpdate`: an empty
/// type is `Opaque`, and `stringData` is written into `data` (its keys win) and dropped, so
/// it is never stored.
pub fn prepare_secret(secret: &mut Secret) {
    if secret.type_.as_deref().unwrap_or("").is_empty() {
        secret.type_ = Some("Opaque".to_owned());
    }
    if let Some(strings) = secret.string_data.take() {
        let data = secret.data.get_or_insert_with(Default::default);
        for (k, v) in strings {
            data.insert(k, ByteString(v.into_bytes()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_data_is_merged_into_data_and_dropped() {
        let mut s: Secret = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "s"},
            "data": {"a": "eA==", "b": "eQ=="},
            "stringData": {"b": "z"}
        }))
        .unwrap();
        prepare_secret(&mut s);
        assert_eq!(s.type_.as_deref(), Some("Opaque"));
        assert!(s.string_data.is_none());
        let data = s.data.unwrap();
        assert_eq!(data["a"].0, b"x");
        assert_eq!(data["b"].0, b"z");
    }

    #[test]
    fn unknown_fields_are_named_and_bad_base64_refused() {
        let (_, unknown) = decode_object::<Secret>(serde_json::json!({
            "metadata": {"name": "s"}, "dataa": {}
        }))
        .unwrap();
        assert_eq!(unknown, ["dataa"]);
        assert!(decode_object::<Secret>(serde_json::json!({"data": {"a": "!!"}})).is_err());
    }
}
