//! Long-lived ServiceAccount tokens in Secrets, as kube-controller-manager's token controller
//! (`pkg/controller/serviceaccount/tokens_controller.go`) writes them and the API server's
//! legacy validator (`pkg/serviceaccount/legacy.go`) accepts them.
//!
//! - A Secret of type `kubernetes.io/service-account-token` whose
//!   `kubernetes.io/service-account.name` annotation names an account of its namespace gets
//!   `data.token` (a JWT signed by the [`TokenIssuer`] with the legacy claims: issuer
//!   `kubernetes/serviceaccount`, `sub` `system:serviceaccount:<ns>:<name>` and the
//!   `kubernetes.io/serviceaccount/{namespace,secret.name,service-account.name,
//!   service-account.uid}` claims, no expiry), `data["ca.crt"]` (the API's CA) and
//!   `data.namespace`, and the account's uid in `kubernetes.io/service-account.uid`.
//! - A Secret naming an account that does not exist (or whose uid differs from the
//!   annotation's) is deleted, and so are an account's token Secrets when it is deleted.
//! - The authenticator accepts such a token while its Secret exists (not being deleted, not
//!   labelled `kubernetes.io/legacy-token-invalid-since`) holding exactly that token, and
//!   its account exists with the claimed uid; a use stamps the Secret's
//!   `kubernetes.io/legacy-token-last-used` label with the day (UTC), as upstream's tracking.

use std::sync::Arc;

use base64::Engine;
use podvisor_store::{EventType, Store, StoreError, WatchEvent};
use serde_json::{Value, json};

use crate::TokenIssuer;
use crate::auth::UserInfo;
use crate::controller::Reconciler;
use crate::db::{self, SECRETS, SERVICEACCOUNTS};
use crate::serviceaccounts::service_account_user;

/// `LegacyIssuer`: the issuer of tokens in Secrets.
pub(crate) const LEGACY_ISSUER: &str = "kubernetes/serviceaccount";
/// `SecretTypeServiceAccountToken`.
const TOKEN_SECRET_TYPE: &str = "kubernetes.io/service-account-token";
/// `ServiceAccountNameKey`.
const NAME_KEY: &str = podvisor_api::config::SERVICE_ACCOUNT_NAME_KEY;
/// `ServiceAccountUIDKey`.
const UID_KEY: &str = "kubernetes.io/service-account.uid";
/// `LastUsedLabelKey`.
const LAST_USED_LABEL: &str = "kubernetes.io/legacy-token-last-used";
/// `InvalidSinceLabelKey` (the legacy token cleaner's mark).
const INVALID_SINCE_LABEL: &str = "kubernetes.io/legacy-token-invalid-since";

const CLAIM_NAMESPACE: &str = "kubernetes.io/serviceaccount/namespace";
const CLAIM_SECRET: &str = "kubernetes.io/serviceaccount/secret.name";
const CLAIM_ACCOUNT: &str = "kubernetes.io/serviceaccount/service-account.name";
const CLAIM_UID: &str = "kubernetes.io/serviceaccount/service-account.uid";

fn text<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn annotation<'a>(obj: &'a Value, key: &str) -> &'a str {
    obj.pointer("/metadata/annotations")
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn is_token_secret(secret: &Value) -> bool {
    text(secret, "/type") == TOKEN_SECRET_TYPE
}

/// The bytes of `data[key]` (base64 in the stored JSON).
fn data(secret: &Value, key: &str) -> Vec<u8> {
    secret
        .pointer("/data")
        .and_then(|d| d.get(key))
        .and_then(Value::as_str)
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
        .unwrap_or_default()
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// `LegacyClaims`: the claims of the token of Secret `secret` for account `ns/name` (`uid`).
fn legacy_claims(ns: &str, name: &str, uid: &str, secret: &str) -> Value {
    json!({
        "iss": LEGACY_ISSUER,
        CLAIM_NAMESPACE: ns,
        CLAIM_SECRET: secret,
        CLAIM_ACCOUNT: name,
        CLAIM_UID: uid,
        "sub": format!("system:serviceaccount:{ns}:{name}"),
    })
}

/// `IsServiceAccountToken`: whether `secret` is a token of the account `name` with `uid`
/// (a Secret without the uid annotation matches any uid).
fn is_token_of(secret: &Value, name: &str, uid: &str) -> bool {
    let secret_uid = annotation(secret, UID_KEY);
    is_token_secret(secret)
        && annotation(secret, NAME_KEY) == name
        && (secret_uid.is_empty() || secret_uid == uid)
}

/// The legacy validator: the user of a token whose claims `claims` (signature already
/// checked) came from a Secret that still holds it and an account that still exists.
pub(crate) fn validate(store: &Store, token: &str, claims: &Value) -> Option<UserInfo> {
    let ns = claims[CLAIM_NAMESPACE].as_str().filter(|s| !s.is_empty())?;
    let secret_name = claims[CLAIM_SECRET].as_str().filter(|s| !s.is_empty())?;
    let name = claims[CLAIM_ACCOUNT].as_str().filter(|s| !s.is_empty())?;
    let uid = claims[CLAIM_UID].as_str().filter(|s| !s.is_empty())?;
    if claims["sub"].as_str()? != format!("system:serviceaccount:{ns}:{name}") {
        return None;
    }
    let secret = db::try_get(store, SECRETS, ns, secret_name).ok()??;
    let deleting = |o: &Value| {
        o.pointer("/metadata/deletionTimestamp")
            .is_some_and(|t| !t.is_null())
    };
    if deleting(&secret) || data(&secret, "token") != token.as_bytes() {
        return None;
    }
    let labels = secret.pointer("/metadata/labels");
    if labels
        .and_then(|l| l.get(INVALID_SINCE_LABEL))
        .and_then(Value::as_str)
        .is_some_and(|s| !s.is_empty())
    {
        return None;
    }
    let account = db::try_get(store, SERVICEACCOUNTS, ns, name).ok()??;
    if deleting(&account) || text(&account, "/metadata/uid") != uid {
        return None;
    }
    let today = crate::request::now().strftime("%Y-%m-%d").to_string();
    let stamped = labels
        .and_then(|l| l.get(LAST_USED_LABEL))
        .and_then(Value::as_str)
        == Some(today.as_str());
    if !stamped {
        // Tracking only: a failed stamp does not refuse the token.
        let _ = store.update_with(&db::key(SECRETS, ns, secret_name), |mut s| {
            if !s["metadata"]["labels"].is_object() {
                s["metadata"]["labels"] = json!({});
            }
            s["metadata"]["labels"][LAST_USED_LABEL] = json!(today);
            Ok(s)
        });
    }
    Some(service_account_user(ns, name))
}

/// What the token controller syncs.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum TokenKey {
    /// A token Secret (namespace, name).
    Secret(String, String),
    /// A deleted account (namespace, name, uid): its token Secrets go.
    DeletedAccount(String, String, String),
}

/// The token controller.
pub(crate) struct LegacyTokens {
    /// Signs the tokens.
    pub issuer: Arc<TokenIssuer>,
    /// `ca.crt` of every token Secret (PEM).
    pub ca_pem: String,
}

impl LegacyTokens {
    /// `syncSecret` for a Secret that exists.
    fn sync_secret(&self, store: &Store, ns: &str, name: &str) -> Result<(), String> {
        let Some(secret) = db::try_get(store, SECRETS, ns, name).map_err(|e| e.message)? else {
            return Ok(());
        };
        if !is_token_secret(&secret)
            || secret
                .pointer("/metadata/deletionTimestamp")
                .is_some_and(|t| !t.is_null())
        {
            return Ok(());
        }
        let account_name = annotation(&secret, NAME_KEY).to_owned();
        let account = db::try_get(store, SERVICEACCOUNTS, ns, &account_name)
            .map_err(|e| e.message)?
            .filter(|a| {
                let want = annotation(&secret, UID_KEY);
                want.is_empty() || text(a, "/metadata/uid") == want
            });
        let Some(account) = account else {
            tracing::info!(
                "token controller: service account {ns}/{account_name} does not exist, deleting the token secret {ns}/{name}"
            );
            let uid = text(&secret, "/metadata/uid").to_owned();
            return match db::delete(store, SECRETS, ns, name, Some(uid), None) {
                Ok(_) => Ok(()),
                Err(e) if e.code == 404 || e.code == 409 => Ok(()),
                Err(e) => Err(e.message),
            };
        };
        let uid = text(&account, "/metadata/uid").to_owned();
        let ca = self.ca_pem.as_bytes();
        let key = db::key(SECRETS, ns, name);
        let result = store.update_with(&key, |mut s| {
            // Checked again under the writer lock: the Secret may have changed since.
            if !is_token_of(&s, &account_name, &uid) {
                return Ok(s);
            }
            let needs_ca = !ca.is_empty() && data(&s, "ca.crt") != ca;
            let needs_namespace = data(&s, "namespace").is_empty();
            let needs_token = data(&s, "token").is_empty();
            if !(needs_ca || needs_namespace || needs_token) {
                return Ok(s);
            }
            if !s["data"].is_object() {
                s["data"] = json!({});
            }
            if needs_ca {
                s["data"]["ca.crt"] = json!(b64(ca));
            }
            if needs_namespace {
                s["data"]["namespace"] = json!(b64(ns.as_bytes()));
            }
            if needs_token {
                let token = self
                    .issuer
                    .sign(&legacy_claims(ns, &account_name, &uid, name));
                s["data"]["token"] = json!(b64(token.as_bytes()));
            }
            s["metadata"]["annotations"][NAME_KEY] = json!(account_name);
            s["metadata"]["annotations"][UID_KEY] = json!(uid);
            Ok(s)
        });
        match result {
            Ok(_) | Err(StoreError::NotFound(_)) => Ok(()),
            Err(e) => Err(format!("writing the token of secret {ns}/{name}: {e}")),
        }
    }

    /// `deleteTokens`: the token Secrets of a deleted account.
    fn delete_tokens(&self, store: &Store, ns: &str, name: &str, uid: &str) -> Result<(), String> {
        if db::try_get(store, SERVICEACCOUNTS, ns, name)
            .map_err(|e| e.message)?
            .is_some_and(|a| text(&a, "/metadata/uid") == uid)
        {
            return Ok(());
        }
        let (secrets, _) =
            db::list_filtered(store, SECRETS, Some(ns), |s| is_token_of(s, name, uid))
                .map_err(|e| e.message)?;
        for secret in secrets {
            let secret_name = text(&secret, "/metadata/name");
            let secret_uid = text(&secret, "/metadata/uid").to_owned();
            match store.delete(
                &db::key(SECRETS, ns, secret_name),
                podvisor_store::Preconditions {
                    uid: Some(secret_uid),
                    resource_version: None,
                },
            ) {
                Ok(_) | Err(StoreError::NotFound(_) | StoreError::Conflict { .. }) => {}
                Err(e) => return Err(format!("deleting the token secret {ns}/{secret_name}: {e}")),
            }
        }
        Ok(())
    }
}

impl Reconciler for LegacyTokens {
    type Key = TokenKey;

    fn name(&self) -> &'static str {
        "token controller"
    }

    fn kinds(&self) -> &'static [&'static str] {
        &["secrets", "serviceaccounts"]
    }

    fn keys(&self, kind: &str, event: &WatchEvent) -> Vec<TokenKey> {
        let o = &event.object;
        let (ns, name) = (text(o, "/metadata/namespace"), text(o, "/metadata/name"));
        let key = match (kind, event.type_) {
            ("secrets", EventType::Added | EventType::Modified) if is_token_secret(o) => {
                Some(TokenKey::Secret(ns.to_owned(), name.to_owned()))
            }
            ("serviceaccounts", EventType::Deleted) => Some(TokenKey::DeletedAccount(
                ns.to_owned(),
                name.to_owned(),
                text(o, "/metadata/uid").to_owned(),
            )),
            _ => None,
        };
        key.into_iter().collect()
    }

    fn sync_all(&self, store: &Store) -> Result<(), String> {
        let (secrets, _) =
            db::list_filtered(store, SECRETS, None, is_token_secret).map_err(|e| e.message)?;
        for secret in secrets {
            self.sync_secret(
                store,
                text(&secret, "/metadata/namespace"),
                text(&secret, "/metadata/name"),
            )?;
        }
        Ok(())
    }

    fn sync(&self, store: &Store, key: &TokenKey) -> Result<(), String> {
        match key {
            TokenKey::Secret(ns, name) => self.sync_secret(store, ns, name),
            TokenKey::DeletedAccount(ns, name, uid) => self.delete_tokens(store, ns, name, uid),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, Store, LegacyTokens) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("store.redb")).unwrap();
        let issuer = Arc::new(TokenIssuer::load_or_create(dir.path()).unwrap());
        let controller = LegacyTokens {
            issuer,
            ca_pem: "CA".to_owned(),
        };
        (dir, store, controller)
    }

    fn account(store: &Store, name: &str, uid: &str) {
        db::create(
            store,
            SERVICEACCOUNTS,
            "team",
            name,
            json!({"metadata": {"name": name, "namespace": "team", "uid": uid}}),
        )
        .unwrap();
    }

    fn secret(store: &Store, name: &str, annotations: Value) {
        db::create(
            store,
            SECRETS,
            "team",
            name,
            json!({
                "metadata": {"name": name, "namespace": "team", "uid": format!("s-{name}"), "annotations": annotations},
                "type": TOKEN_SECRET_TYPE,
            }),
        )
        .unwrap();
    }

    /// The controller fills the Secret; the token authenticates the account until the
    /// Secret's token is changed, the Secret goes or the account is recreated.
    #[test]
    fn a_token_secret_is_filled_and_its_token_accepted_while_both_exist() {
        let (_dir, store, c) = setup();
        account(&store, "build", "u1");
        secret(&store, "build-token", json!({NAME_KEY: "build"}));
        c.sync_all(&store).unwrap();
        let s = db::get(&store, SECRETS, "team", "build-token").unwrap();
        assert_eq!(data(&s, "ca.crt"), b"CA");
        assert_eq!(data(&s, "namespace"), b"team");
        assert_eq!(annotation(&s, UID_KEY), "u1");
        let token = String::from_utf8(data(&s, "token")).unwrap();
        let claims = c.issuer.verify(&token).unwrap();
        assert_eq!(claims, legacy_claims("team", "build", "u1", "build-token"));
        let user = c.issuer.authenticate(&store, &token).unwrap();
        assert_eq!(user.username, "system:serviceaccount:team:build");
        let stamped = db::get(&store, SECRETS, "team", "build-token").unwrap();
        assert!(
            !text(
                &stamped,
                "/metadata/labels/kubernetes.io~1legacy-token-last-used"
            )
            .is_empty()
        );
        // A second pass changes nothing (the token is not issued again).
        c.sync_all(&store).unwrap();
        let again = db::get(&store, SECRETS, "team", "build-token").unwrap();
        assert_eq!(data(&again, "token"), token.as_bytes());

        // The account recreated under the same name: another uid, the token is refused.
        db::delete(&store, SERVICEACCOUNTS, "team", "build", None, None).unwrap();
        account(&store, "build", "u2");
        assert!(c.issuer.authenticate(&store, &token).is_none());
    }

    #[test]
    fn secrets_of_missing_or_deleted_accounts_are_deleted() {
        let (_dir, store, c) = setup();
        secret(&store, "orphan", json!({NAME_KEY: "nobody"}));
        account(&store, "build", "u1");
        secret(
            &store,
            "stale-uid",
            json!({NAME_KEY: "build", UID_KEY: "u0"}),
        );
        secret(&store, "kept", json!({NAME_KEY: "build"}));
        c.sync_all(&store).unwrap();
        let exists = |n| db::try_get(&store, SECRETS, "team", n).unwrap().is_some();
        assert!(!exists("orphan"));
        assert!(!exists("stale-uid"));
        assert!(exists("kept"));
        let token = String::from_utf8(data(
            &db::get(&store, SECRETS, "team", "kept").unwrap(),
            "token",
        ))
        .unwrap();
        db::delete(&store, SERVICEACCOUNTS, "team", "build", None, None).unwrap();
        c.sync(
            &store,
            &TokenKey::DeletedAccount("team".into(), "build".into(), "u1".into()),
        )
        .unwrap();
        assert!(!exists("kept"));
        assert!(c.issuer.authenticate(&store, &token).is_none());
    }
}
