//! ServiceAccounts beyond their REST strategy (which is `configs.rs`'): what the controllers
//! and admission plugin of a real control plane add.
//!
//! - Every namespace has a `default` ServiceAccount (the service account controller) and a
//!   `kube-root-ca.crt` ConfigMap holding podvisor's API CA (the root CA publisher), written
//!   when the namespace is created and, for those that exist, when the server starts, and
//!   put back when deleted or edited (`namespace_defaults.rs`).
//! - Pod admission (`plugin/pkg/admission/serviceaccount/admission.go`): `serviceAccountName`
//!   defaults to `default`, a pod naming an account that does not exist is forbidden, and
//!   unless `automountServiceAccountToken: false` (pod first, then account) every container
//!   and init container mounts a `kube-api-access-<5 random>` projected volume (token with
//!   `expirationSeconds: 3607`, `kube-root-ca.crt`'s `ca.crt`, the namespace) at
//!   `/var/run/secrets/kubernetes.io/serviceaccount`. Empty `imagePullSecrets` take the
//!   account's. Mirror pods are left alone.
//! - Tokens ([`TokenIssuer`]): JWTs signed with HMAC-SHA256 under a key in the state
//!   directory, claims shaped as the API server's (`sub`
//!   `system:serviceaccount:<ns>:<name>`, the `kubernetes.io` claim with the namespace, the
//!   account and the bound pod). `serviceaccounts/<name>/token` (TokenRequest, what
//!   `kubectl create token` calls) issues them; the authenticator accepts one while it has
//!   not expired and its account (and bound pod) still exist with the same uid. podvisor has
//!   no authorization: such a token may do what the node's token may.

use std::path::Path;

use axum::http::StatusCode;
use axum::response::Response;
use base64::Engine;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec, TokenRequestStatus};
use k8s_openapi::api::core::v1::{
    ConfigMapProjection, DownwardAPIProjection, DownwardAPIVolumeFile, KeyToPath,
    ObjectFieldSelector, Pod, ProjectedVolumeSource, ServiceAccount, ServiceAccountTokenProjection,
    Volume, VolumeMount, VolumeProjection,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use podvisor_store::Store;
use serde_json::{Value, json};

use crate::auth::UserInfo;
use crate::db::{self, CONFIGMAPS, NAMESPACES, PODS, SERVICEACCOUNTS};
use crate::req::Req;
use crate::request::{new_uid, now, parse_body, time_text};
use crate::server::ServeError;
use crate::status::{ApiError, ApiResult, json_response};

/// `DefaultServiceAccountName`.
pub const DEFAULT_SERVICE_ACCOUNT: &str = "default";
/// `DefaultAPITokenMountPath`.
pub const TOKEN_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// `ServiceAccountVolumeName`: the projected volume's name before its random suffix.
const VOLUME_PREFIX: &str = "kube-api-access";
/// `WarnOnlyBoundTokenExpirationSeconds`: the admission plugin's token lifetime.
pub const ADMISSION_TOKEN_EXPIRATION_SECONDS: i64 = 3607;
/// The root CA publisher's ConfigMap.
pub const ROOT_CA_CONFIG_MAP: &str = "kube-root-ca.crt";
const ROOT_CA_DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";
/// The issuer and default audience of tokens (the API server's `--service-account-issuer`
/// and `--api-audiences` defaults on most clusters).
pub const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
/// A TokenRequest's `expirationSeconds` when it sets none.
const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
/// The shortest lifetime a TokenRequest may ask for.
const MIN_EXPIRATION_SECONDS: i64 = 600;
const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

fn object_meta(ns: &str, name: &str) -> Value {
    json!({
        "name": name,
        "namespace": ns,
        "uid": new_uid(),
        "creationTimestamp": time_text(now()),
    })
}

/// Writes the `default` ServiceAccount and the `kube-root-ca.crt` ConfigMap of `ns` if they
/// are missing (the ConfigMap is corrected if it holds another CA).
///
/// # Errors
///
/// The store's.
pub(crate) fn ensure_namespace_objects(store: &Store, ns: &str, ca_pem: &str) -> ApiResult<()> {
    if db::try_get(store, SERVICEACCOUNTS, ns, DEFAULT_SERVICE_ACCOUNT)?.is_none() {
        let sa = json!({
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": object_meta(ns, DEFAULT_SERVICE_ACCOUNT),
        });
        match db::create(store, SERVICEACCOUNTS, ns, DEFAULT_SERVICE_ACCOUNT, sa) {
            Err(e) if e.code != 409 => return Err(e),
            _ => {}
        }
    }
    let data = json!({"ca.crt": ca_pem});
    let described = |cm: &Value| {
        cm.pointer("/metadata/annotations/kubernetes.io~1description")
            .and_then(Value::as_str)
            .is_some_and(|d| !d.is_empty())
    };
    match db::try_get(store, CONFIGMAPS, ns, ROOT_CA_CONFIG_MAP)? {
        None => {
            let mut meta = object_meta(ns, ROOT_CA_CONFIG_MAP);
            meta["annotations"] = json!({"kubernetes.io/description": ROOT_CA_DESCRIPTION});
            let cm =
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data});
            match db::create(store, CONFIGMAPS, ns, ROOT_CA_CONFIG_MAP, cm) {
                Err(e) if e.code != 409 => return Err(e),
                _ => {}
            }
        }
        // The publisher's check: the data and its one annotation as published.
        Some(mut cm) if cm["data"] != data || !described(&cm) => {
            let rv = db::object_rv(&cm);
            cm["data"] = data;
            if !cm["metadata"]["annotations"].is_object() {
                cm["metadata"]["annotations"] = json!({});
            }
            cm["metadata"]["annotations"]["kubernetes.io/description"] = json!(ROOT_CA_DESCRIPTION);
            db::update(store, CONFIGMAPS, ns, ROOT_CA_CONFIG_MAP, cm, rv)?;
        }
        Some(_) => {}
    }
    Ok(())
}

/// [`ensure_namespace_objects`] for every namespace (at start).
///
/// # Errors
///
/// The store's.
pub(crate) fn ensure_all(store: &Store, ca_pem: &str) -> ApiResult<()> {
    let (namespaces, _) = db::list(store, NAMESPACES, None)?;
    for ns in namespaces {
        if crate::namespace_controller::is_terminating(&ns) {
            continue;
        }
        if let Some(name) = ns.pointer("/metadata/name").and_then(Value::as_str) {
            ensure_namespace_objects(store, name, ca_pem)?;
        }
    }
    Ok(())
}

/// `TokenVolumeSource`.
fn token_volume_source() -> ProjectedVolumeSource {
    ProjectedVolumeSource {
        default_mode: Some(0o644),
        sources: Some(vec![
            VolumeProjection {
                service_account_token: Some(ServiceAccountTokenProjection {
                    path: "token".to_owned(),
                    expiration_seconds: Some(ADMISSION_TOKEN_EXPIRATION_SECONDS),
                    audience: None,
                }),
                ..VolumeProjection::default()
            },
            VolumeProjection {
                config_map: Some(ConfigMapProjection {
                    name: ROOT_CA_CONFIG_MAP.to_owned(),
                    items: Some(vec![KeyToPath {
                        key: "ca.crt".to_owned(),
                        path: "ca.crt".to_owned(),
                        mode: None,
                    }]),
                    optional: None,
                }),
                ..VolumeProjection::default()
            },
            VolumeProjection {
                downward_api: Some(DownwardAPIProjection {
                    items: Some(vec![DownwardAPIVolumeFile {
                        path: "namespace".to_owned(),
                        field_ref: Some(ObjectFieldSelector {
                            api_version: Some("v1".to_owned()),
                            field_path: "metadata.namespace".to_owned(),
                        }),
                        ..DownwardAPIVolumeFile::default()
                    }]),
                }),
                ..VolumeProjection::default()
            },
        ]),
    }
}

/// The ServiceAccount admission plugin's `Admit` on a new pod of `ns` (after defaulting,
/// before validation).
///
/// # Errors
///
/// 403 when the pod's service account does not exist.
pub(crate) fn admit(store: &Store, ns: &str, pod: &mut Pod) -> ApiResult<()> {
    if pod
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(MIRROR_ANNOTATION))
    {
        return Ok(());
    }
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    let spec = pod.spec.get_or_insert_with(Default::default);
    let account = match spec.service_account_name.as_deref() {
        Some(n) if !n.is_empty() => n.to_owned(),
        _ => {
            spec.service_account_name = Some(DEFAULT_SERVICE_ACCOUNT.to_owned());
            DEFAULT_SERVICE_ACCOUNT.to_owned()
        }
    };
    let Some(sa) = db::try_get(store, SERVICEACCOUNTS, ns, &account)? else {
        return Err(ApiError::forbidden(
            PODS.plural,
            &pod_name,
            &format!(
                "error looking up service account {ns}/{account}: serviceaccount {} not found",
                podvisor_api::validation::go_quote(&account)
            ),
        ));
    };
    let sa: ServiceAccount = serde_json::from_value(sa)
        .map_err(|e| ApiError::internal(format!("stored ServiceAccount does not decode: {e}")))?;
    let automount = spec
        .automount_service_account_token
        .or(sa.automount_service_account_token)
        .unwrap_or(true);
    if automount {
        mount_token(spec);
    }
    if spec.image_pull_secrets.as_ref().is_none_or(Vec::is_empty)
        && let Some(secrets) = sa.image_pull_secrets.filter(|s| !s.is_empty())
    {
        spec.image_pull_secrets = Some(secrets);
    }
    Ok(())
}

/// `mountServiceAccountToken`.
fn mount_token(spec: &mut k8s_openapi::api::core::v1::PodSpec) {
    let existing = spec
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name.starts_with(&format!("{VOLUME_PREFIX}-")))
        .map(|v| v.name.clone());
    let has_volume = existing.is_some();
    let name = existing
        .unwrap_or_else(|| format!("{VOLUME_PREFIX}-{}", podvisor_api::meta::name_suffix()));
    let mount = VolumeMount {
        name: name.clone(),
        read_only: Some(true),
        mount_path: TOKEN_MOUNT_PATH.to_owned(),
        ..VolumeMount::default()
    };
    let mut needs_volume = false;
    let containers = spec
        .init_containers
        .iter_mut()
        .flatten()
        .chain(spec.containers.iter_mut());
    for c in containers {
        let mounts = c.volume_mounts.get_or_insert_with(Vec::new);
        if !mounts.iter().any(|m| m.mount_path == TOKEN_MOUNT_PATH) {
            mounts.push(mount.clone());
            needs_volume = true;
        }
    }
    if !has_volume && needs_volume {
        spec.volumes.get_or_insert_with(Vec::new).push(Volume {
            name,
            projected: Some(token_volume_source()),
            ..Volume::default()
        });
    }
}

/// Issues and checks service account tokens (see the module docs).
pub struct TokenIssuer {
    key: ring::hmac::Key,
}

impl std::fmt::Debug for TokenIssuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenIssuer")
    }
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

impl TokenIssuer {
    /// Loads `<state>/sa-signing.key`, creating a random one on first start.
    ///
    /// # Errors
    ///
    /// The file's.
    pub fn load_or_create(state_dir: &Path) -> Result<TokenIssuer, ServeError> {
        let path = state_dir.join("sa-signing.key");
        let hex = match crate::tls::read_private(&path)? {
            Some(k) if k.trim().len() == 64 => k.trim().to_owned(),
            _ => {
                let k: String = podvisor_api::meta::random_bytes::<32>()
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect();
                crate::tls::write_private(&path, k.as_bytes(), 0o600)?;
                k
            }
        };
        Ok(TokenIssuer {
            key: ring::hmac::Key::new(ring::hmac::HMAC_SHA256, hex.as_bytes()),
        })
    }

    /// A signed JWT (HS256) of `claims`.
    pub(crate) fn sign(&self, claims: &Value) -> String {
        let signing_input = format!(
            "{}.{}",
            b64(br#"{"alg":"HS256","typ":"JWT"}"#),
            b64(claims.to_string().as_bytes())
        );
        let signature = ring::hmac::sign(&self.key, signing_input.as_bytes());
        format!("{signing_input}.{}", b64(signature.as_ref()))
    }

    /// The claims of `token` if this issuer signed it.
    pub(crate) fn verify(&self, token: &str) -> Option<Value> {
        let (signing_input, signature) = token.rsplit_once('.')?;
        let signature = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(signature)
            .ok()?;
        ring::hmac::verify(&self.key, signing_input.as_bytes(), &signature).ok()?;
        let (_, payload) = signing_input.split_once('.')?;
        serde_json::from_slice(
            &base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(payload)
                .ok()?,
        )
        .ok()
    }

    /// Issues a token of the ServiceAccount `ns/name` for `request` (a TokenRequest: its
    /// audiences, lifetime and bound object); the answer is the request with its spec
    /// defaulted and its status.
    ///
    /// # Errors
    ///
    /// 404 when the account (or the bound pod) does not exist, 409 when the bound pod's uid
    /// differs, 422 for a lifetime under ten minutes or a bound object that is not a pod.
    pub fn issue(
        &self,
        store: &Store,
        ns: &str,
        name: &str,
        request: &TokenRequest,
    ) -> Result<TokenRequest, ApiError> {
        let sa = db::get(store, SERVICEACCOUNTS, ns, name)?;
        let mut spec: TokenRequestSpec = request.spec.clone();
        let seconds = *spec
            .expiration_seconds
            .get_or_insert(DEFAULT_EXPIRATION_SECONDS);
        if seconds < MIN_EXPIRATION_SECONDS {
            return Err(invalid_request(
                name,
                "spec.expirationSeconds",
                &seconds.to_string(),
                "may not specify a duration less than 10 minutes",
            ));
        }
        if spec.audiences.is_empty() {
            spec.audiences = vec![ISSUER.to_owned()];
        }
        let mut claim = json!({
            "namespace": ns,
            "serviceaccount": {"name": name, "uid": sa["metadata"]["uid"]},
        });
        if let Some(bound) = &spec.bound_object_ref {
            let kind = bound.kind.as_deref().unwrap_or_default();
            if kind != "Pod" {
                return Err(invalid_request(
                    name,
                    "spec.boundObjectRef.kind",
                    kind,
                    "supported values: \"Pod\"",
                ));
            }
            let pod_name = bound.name.as_deref().unwrap_or_default();
            let pod = db::get(store, PODS, ns, pod_name)?;
            let uid = pod["metadata"]["uid"].as_str().unwrap_or_default();
            if let Some(want) = bound.uid.as_deref().filter(|u| !u.is_empty())
                && want != uid
            {
                return Err(ApiError::conflict(
                    PODS.plural,
                    pod_name,
                    &format!(
                        "the UID in the bound object reference ({want}) does not match the UID in record. The object might have been deleted and then recreated"
                    ),
                ));
            }
            claim["pod"] = json!({"name": pod_name, "uid": uid});
        }
        let issued = now();
        let iat = issued.as_second();
        let exp = iat + seconds;
        let claims = json!({
            "aud": spec.audiences,
            "exp": exp,
            "iat": iat,
            "nbf": iat,
            "iss": ISSUER,
            "jti": new_uid(),
            "kubernetes.io": claim,
            "sub": format!("system:serviceaccount:{ns}:{name}"),
        });
        let token = self.sign(&claims);
        let expires = jiff::Timestamp::from_second(exp)
            .map_err(|e| ApiError::internal(format!("token expiry: {e}")))?;
        Ok(TokenRequest {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(ns.to_owned()),
                creation_timestamp: Some(Time(jiff::Timestamp::from_second(iat).unwrap_or(issued))),
                ..ObjectMeta::default()
            },
            spec,
            status: Some(TokenRequestStatus {
                token,
                expiration_timestamp: Time(expires),
            }),
        })
    }

    /// The user a bearer token authenticates (`system:serviceaccount:<ns>:<name>` in the
    /// groups `system:serviceaccounts`, `system:serviceaccounts:<ns>` and
    /// `system:authenticated`), if it is one of ours, unexpired, for the API's audience, and
    /// its account and bound pod exist.
    ///
    /// A legacy token (issuer `kubernetes/serviceaccount`, in a `service-account-token`
    /// Secret) is checked by [`crate::legacy_tokens::validate`].
    pub(crate) fn authenticate(&self, store: &Store, token: &str) -> Option<UserInfo> {
        let claims = self.verify(token)?;
        if claims["iss"].as_str() == Some(crate::legacy_tokens::LEGACY_ISSUER) {
            return crate::legacy_tokens::validate(store, token, &claims);
        }
        let now = now().as_second();
        let exp = claims["exp"].as_i64()?;
        let nbf = claims["nbf"].as_i64().unwrap_or(0);
        if now >= exp || now < nbf {
            return None;
        }
        let for_us = claims["aud"]
            .as_array()?
            .iter()
            .any(|a| a.as_str() == Some(ISSUER));
        if !for_us {
            return None;
        }
        let k8s = &claims["kubernetes.io"];
        let ns = k8s["namespace"].as_str()?;
        let account = &k8s["serviceaccount"];
        let name = account["name"].as_str()?;
        let sa = db::try_get(store, SERVICEACCOUNTS, ns, name).ok()??;
        if sa["metadata"]["uid"] != account["uid"] {
            return None;
        }
        if let Some(pod_name) = k8s["pod"]["name"].as_str() {
            let pod = db::try_get(store, PODS, ns, pod_name).ok()??;
            if pod["metadata"]["uid"] != k8s["pod"]["uid"] {
                return None;
            }
        }
        Some(service_account_user(ns, name))
    }
}

/// The user a service account's token authenticates (`UserInfo` of
/// `ServiceAccountInfo`).
pub(crate) fn service_account_user(ns: &str, name: &str) -> UserInfo {
    UserInfo {
        username: format!("system:serviceaccount:{ns}:{name}"),
        groups: vec![
            "system:serviceaccounts".to_owned(),
            format!("system:serviceaccounts:{ns}"),
            "system:authenticated".to_owned(),
        ],
    }
}

fn invalid_request(name: &str, field: &str, value: &str, detail: &str) -> ApiError {
    use podvisor_api::validation::{FieldError, Path as FieldPath, ValidationErrors};
    let mut path: Option<FieldPath> = None;
    for part in field.split('.') {
        path = Some(match path {
            None => FieldPath::new(part),
            Some(p) => p.child(part),
        });
    }
    let path = path.unwrap_or_else(|| FieldPath::new(field));
    ApiError::invalid(&ValidationErrors::new(
        "TokenRequest",
        name,
        vec![FieldError::invalid(&path, value, detail)],
    ))
}

/// `POST /api/v1/namespaces/{ns}/serviceaccounts/{name}/token`.
pub(crate) fn create_token(req: &Req, ns: &str, name: &str, body: &[u8]) -> ApiResult<Response> {
    let Some(issuer) = req.state.token_issuer() else {
        return Err(ApiError::method_not_supported(
            "serviceaccounts/token",
            "POST",
        ));
    };
    let value = parse_body(body)?;
    let request: TokenRequest = serde_json::from_value(value).map_err(|e| {
        ApiError::bad_request(format!(
            "TokenRequest in version \"v1\" cannot be handled as a TokenRequest: {e}"
        ))
    })?;
    let answer = issuer.issue(req.state.store(), ns, name, &request)?;
    let mut out = serde_json::to_value(&answer)
        .map_err(|e| ApiError::internal(format!("encoding the TokenRequest: {e}")))?;
    out["apiVersion"] = json!("authentication.k8s.io/v1");
    out["kind"] = json!("TokenRequest");
    Ok(json_response(StatusCode::CREATED, &out))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The admission plugin's volume and mounts: every container and init container at the
    /// token path unless one already mounts something there; an existing
    /// `kube-api-access-*` volume is reused.
    #[test]
    fn admission_mounts_the_token_volume_in_every_container() {
        let mut spec: k8s_openapi::api::core::v1::PodSpec = serde_json::from_value(json!({
            "initContainers": [{"name": "i"}],
            "containers": [
                {"name": "a"},
                {"name": "b", "volumeMounts": [{"name": "mine", "mountPath": TOKEN_MOUNT_PATH}]}
            ],
            "volumes": [{"name": "mine", "emptyDir": {}}]
        }))
        .unwrap();
        mount_token(&mut spec);
        let volumes = spec.volumes.as_ref().unwrap();
        assert_eq!(volumes.len(), 2);
        let name = &volumes[1].name;
        assert!(
            name.starts_with("kube-api-access-") && name.len() == 21,
            "{name}"
        );
        let sources = volumes[1]
            .projected
            .as_ref()
            .unwrap()
            .sources
            .as_ref()
            .unwrap();
        assert_eq!(
            sources[0]
                .service_account_token
                .as_ref()
                .unwrap()
                .expiration_seconds,
            Some(3607)
        );
        let mounts = |c: &k8s_openapi::api::core::v1::Container| {
            c.volume_mounts
                .iter()
                .flatten()
                .map(|m| m.name.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            mounts(&spec.init_containers.as_ref().unwrap()[0]),
            std::slice::from_ref(name)
        );
        assert_eq!(mounts(&spec.containers[0]), std::slice::from_ref(name));
        assert_eq!(mounts(&spec.containers[1]), ["mine"]);
        // Admitting again (an update) adds nothing.
        let before = spec.clone();
        mount_token(&mut spec);
        assert_eq!(spec, before);
    }
}
