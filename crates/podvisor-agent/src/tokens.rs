//! The kubelet's service account token manager (`pkg/kubelet/token/token_manager.go`): the
//! tokens of pods' `serviceAccountToken` projections, requested through the
//! [`ObjectSource`] (a `TokenRequest` bound to the pod), cached, and requested again once 80%
//! of their lifetime has passed (or 24 hours, whichever comes first). A refresh that fails
//! keeps the cached token while it is still valid; expired tokens leave the cache.

use std::collections::BTreeMap;
use std::sync::Mutex;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::Pod;
use podvisor_runtime::config::objects::TokenKey;

use crate::objects::ObjectSource;

/// `maxTTL`: a token older than this is refreshed whatever its lifetime.
const MAX_TTL: SignedDuration = SignedDuration::from_hours(24);

/// One cached token.
#[derive(Clone)]
struct Cached {
    token: String,
    expires: Timestamp,
    lifetime_seconds: i64,
}

impl Cached {
    /// `requiresRefresh` (without the kubelet's up-to-10 s jitter).
    fn requires_refresh(&self, now: Timestamp) -> bool {
        let issued = self.expires - SignedDuration::from_secs(self.lifetime_seconds);
        now > issued + MAX_TTL
            || now > self.expires - SignedDuration::from_secs(self.lifetime_seconds * 20 / 100)
    }
}

/// `(namespace, service account, pod uid, audience, expirationSeconds)`.
type CacheKey = (String, String, String, TokenKey);

/// The node's token cache (see the module docs).
#[derive(Default)]
pub struct TokenManager {
    cache: Mutex<BTreeMap<CacheKey, Cached>>,
}

impl TokenManager {
    /// The token `key` of `pod`'s service account, from the cache or from `source`.
    ///
    /// # Errors
    ///
    /// The kubelet's words: `failed to fetch token: ...` without a usable cached token.
    pub fn token(
        &self,
        source: &dyn ObjectSource,
        pod: &Pod,
        key: &TokenKey,
        now: Timestamp,
    ) -> Result<String, String> {
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let account = pod
            .spec
            .as_ref()
            .and_then(|s| s.service_account_name.clone())
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "default".to_owned());
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let cache_key = (namespace.clone(), account.clone(), uid.clone(), key.clone());
        let cached = {
            let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            cache.retain(|_, c| c.expires > now);
            cache.get(&cache_key).cloned()
        };
        if let Some(c) = &cached
            && !c.requires_refresh(now)
        {
            return Ok(c.token.clone());
        }
        let request = TokenRequest {
            spec: TokenRequestSpec {
                audiences: if key.audience.is_empty() {
                    Vec::new()
                } else {
                    vec![key.audience.clone()]
                },
                expiration_seconds: Some(key.expiration_seconds),
                bound_object_ref: Some(BoundObjectReference {
                    api_version: Some("v1".to_owned()),
                    kind: Some("Pod".to_owned()),
                    name: pod.metadata.name.clone(),
                    uid: Some(uid),
                }),
            },
            ..TokenRequest::default()
        };
        match source.service_account_token(&namespace, &account, &request) {
            Ok(status) => {
                let fresh = Cached {
                    token: status.token,
                    expires: status.expiration_timestamp.0,
                    lifetime_seconds: key.expiration_seconds,
                };
                let token = fresh.token.clone();
                self.cache
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(cache_key, fresh);
                Ok(token)
            }
            Err(e) => match cached {
                Some(c) => Ok(c.token),
                None => Err(format!("failed to fetch token: {e}")),
            },
        }
    }

    /// Forgets the tokens of the pod `uid` (`DeleteServiceAccountToken`).
    pub fn forget(&self, uid: &str) {
        self.cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(_, _, u, _), _| u != uid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::authentication::v1::TokenRequestStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// Answers `token-<n>` valid for the requested lifetime from `now`, or fails.
    struct Issuer {
        now: Mutex<Timestamp>,
        issued: AtomicU32,
        fail: std::sync::atomic::AtomicBool,
    }

    impl ObjectSource for Issuer {
        fn config_map(
            &self,
            _: &str,
            _: &str,
        ) -> Result<Option<k8s_openapi::api::core::v1::ConfigMap>, String> {
            Ok(None)
        }
        fn secret(
            &self,
            _: &str,
            _: &str,
        ) -> Result<Option<k8s_openapi::api::core::v1::Secret>, String> {
            Ok(None)
        }
        fn service_account_token(
            &self,
            namespace: &str,
            name: &str,
            request: &TokenRequest,
        ) -> Result<TokenRequestStatus, String> {
            assert_eq!((namespace, name), ("ns", "default"));
            let bound = request.spec.bound_object_ref.as_ref().unwrap();
            assert_eq!(bound.uid.as_deref(), Some("u1"));
            if self.fail.load(Ordering::SeqCst) {
                return Err("connection refused".to_owned());
            }
            let n = self.issued.fetch_add(1, Ordering::SeqCst);
            let now = *self.now.lock().unwrap();
            Ok(TokenRequestStatus {
                token: format!("token-{n}"),
                expiration_timestamp: Time(
                    now + SignedDuration::from_secs(request.spec.expiration_seconds.unwrap()),
                ),
            })
        }
    }

    /// The kubelet refreshes after 80% of the lifetime, keeps a valid token when a refresh
    /// fails, and reports `failed to fetch token` with nothing cached.
    #[test]
    fn tokens_are_refreshed_after_eighty_percent_of_their_lifetime() {
        let t0 = Timestamp::from_second(1_000_000).unwrap();
        let issuer = Issuer {
            now: Mutex::new(t0),
            issued: AtomicU32::new(0),
            fail: false.into(),
        };
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
            "spec": {"containers": []}
        }))
        .unwrap();
        let key = TokenKey {
            audience: String::new(),
            expiration_seconds: 3607,
        };
        let m = TokenManager::default();
        let at = |s: i64| {
            let now = t0 + SignedDuration::from_secs(s);
            *issuer.now.lock().unwrap() = now;
            m.token(&issuer, &pod, &key, now)
        };
        assert_eq!(at(0).unwrap(), "token-0");
        // 80% of 3607 s is 2885.6 s: the refresh comes after 3607 - 721 = 2886 s.
        assert_eq!(at(2886).unwrap(), "token-0");
        assert_eq!(at(2887).unwrap(), "token-1");
        issuer.fail.store(true, Ordering::SeqCst);
        assert_eq!(at(2887 + 2887).unwrap(), "token-1");
        assert_eq!(
            at(2887 + 3608).unwrap_err(),
            "failed to fetch token: connection refused"
        );
        m.forget("u1");
        assert!(m.cache.lock().unwrap().is_empty());
    }
}
