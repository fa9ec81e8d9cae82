//! Registry credentials: a Docker `config.json` (`--registry-config`, and the
//! `.dockerconfigjson` of `imagePullSecrets` has the same `auths` shape), and registry mirrors.
//!
//! Mirrors are podvisor's own key in the same file (Docker ignores keys it does not know), with
//! containerd's `hosts.toml` semantics: `"mirrors": {"docker.io": ["http://127.0.0.1:5000"]}`
//! sends pulls of `docker.io/...` images to each mirror in turn, then to the registry itself
//! (containerd's `server`). The image keeps its own name (`docker.io/library/busybox:latest`);
//! the mirror is asked for the same repository with `?ns=docker.io`, as containerd asks. A URL's
//! scheme picks HTTP or HTTPS (no scheme: HTTPS, but plain HTTP on this machine's loopback, as
//! for registries); a mirror's credentials are its own `auths` entry.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use base64::Engine as _;

use crate::error::{Error, Result};
use crate::reference::Reference;

/// How to authenticate to one registry.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub enum Credentials {
    /// No credentials (a registry's anonymous token flow still works).
    #[default]
    Anonymous,
    /// A user name and password: sent as HTTP Basic auth, or to the token service of a
    /// registry that answers with a Bearer challenge.
    Basic {
        /// The user name.
        username: String,
        /// The password.
        password: String,
    },
    /// A registry token, sent as is.
    Bearer(String),
}

impl Credentials {
    /// A hash of what these credentials are (their kind and every field, each
    /// length-prefixed): two Secrets that give the same credentials hash alike, as the
    /// kubelet's `AuthConfigHash` lets a pod use an image pulled with another Secret of the
    /// same content. Hex SHA-256; the secret itself cannot be read back from it.
    #[must_use]
    pub fn content_hash(&self) -> String {
        let fields: &[&str] = match self {
            Credentials::Anonymous => &["anonymous"],
            Credentials::Basic { username, password } => &["basic", username, password],
            Credentials::Bearer(token) => &["bearer", token],
        };
        let mut text = Vec::new();
        for f in fields {
            text.extend_from_slice(&(f.len() as u64).to_le_bytes());
            text.extend_from_slice(f.as_bytes());
        }
        crate::digest::Digest::of(&text).hex().to_owned()
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print a secret.
        match self {
            Credentials::Anonymous => f.write_str("Anonymous"),
            Credentials::Basic { username, .. } => write!(f, "Basic({username:?}, ****)"),
            Credentials::Bearer(_) => f.write_str("Bearer(****)"),
        }
    }
}

/// The `auths` of a Docker `config.json`, matched against image references, and the
/// registries' mirrors.
#[derive(Clone, Debug, Default)]
pub struct RegistryConfig {
    /// `host[/path]` (normalised) → credentials.
    auths: BTreeMap<String, Credentials>,
    /// Registry host (normalised) → its mirrors' `host[:port]` and scheme, in order.
    mirrors: BTreeMap<String, Vec<(String, Option<bool>)>>,
}

/// A mirror of an image's registry: a pull tries it before the registry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mirror {
    /// `host[:port]`.
    pub host: String,
    /// Plain HTTP (`http://`), HTTPS (`https://`), or by the loopback rule (no scheme).
    pub plain_http: Option<bool>,
    /// The mirror's own credentials.
    pub credentials: Credentials,
}

#[derive(serde::Deserialize)]
struct ConfigFile {
    #[serde(default)]
    auths: BTreeMap<String, AuthEntry>,
    #[serde(default)]
    mirrors: BTreeMap<String, Vec<String>>,
}

#[derive(serde::Deserialize)]
struct AuthEntry {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default)]
    registrytoken: Option<String>,
}

impl RegistryConfig {
    /// Reads a Docker `config.json` (or a `.dockerconfigjson`).
    ///
    /// # Errors
    ///
    /// [`Error::RegistryConfig`] for an unreadable file, bad JSON or a bad `auth` field.
    pub fn load(path: &Path) -> Result<RegistryConfig> {
        let data = std::fs::read(path).map_err(|e| Error::RegistryConfig {
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
        RegistryConfig::parse(&data).map_err(|reason| Error::RegistryConfig {
            path: path.to_owned(),
            reason,
        })
    }

    /// Parses the JSON text of a Docker `config.json`.
    ///
    /// # Errors
    ///
    /// What is wrong, as text.
    pub fn parse(data: &[u8]) -> std::result::Result<RegistryConfig, String> {
        let file: ConfigFile = serde_json::from_slice(data).map_err(|e| e.to_string())?;
        let mut auths = BTreeMap::new();
        for (key, entry) in file.auths {
            let creds = if let Some(token) = entry.registrytoken.filter(|t| !t.is_empty()) {
                Credentials::Bearer(token)
            } else if let Some(auth) = entry.auth.filter(|a| !a.is_empty()) {
                let decoded = base64::engine::general_purpose::STANDARD
                    .decode(auth.trim())
                    .map_err(|e| format!("auths[{key:?}].auth: not base64: {e}"))?;
                let decoded = String::from_utf8(decoded)
                    .map_err(|_| format!("auths[{key:?}].auth: not UTF-8"))?;
                let (username, password) = decoded
                    .split_once(':')
                    .ok_or_else(|| format!("auths[{key:?}].auth: not \"user:password\""))?;
                Credentials::Basic {
                    username: username.to_owned(),
                    password: password.to_owned(),
                }
            } else if let (Some(username), Some(password)) = (entry.username, entry.password) {
                Credentials::Basic { username, password }
            } else {
                continue;
            };
            auths.insert(normalise_key(&key), creds);
        }
        let mut mirrors = BTreeMap::new();
        for (registry, urls) in file.mirrors {
            let endpoints = urls
                .iter()
                .map(|url| mirror_endpoint(url).map_err(|e| format!("mirrors[{registry:?}]: {e}")))
                .collect::<std::result::Result<Vec<_>, _>>()?;
            mirrors.insert(normalise_key(&registry), endpoints);
        }
        Ok(RegistryConfig { auths, mirrors })
    }

    /// Parses a legacy `.dockercfg` (the `auths` map itself, without the wrapper), as the
    /// `kubernetes.io/dockercfg` Secrets hold it.
    ///
    /// # Errors
    ///
    /// What is wrong, as text.
    pub fn parse_dockercfg(data: &[u8]) -> std::result::Result<RegistryConfig, String> {
        let auths: serde_json::Value = serde_json::from_slice(data).map_err(|e| e.to_string())?;
        let wrapped = serde_json::json!({ "auths": auths });
        RegistryConfig::parse(wrapped.to_string().as_bytes())
    }

    /// The credentials of the entry for `reference`'s registry with the longest path prefix
    /// of its repository, if any entry matches.
    #[must_use]
    pub fn lookup(&self, reference: &Reference) -> Option<Credentials> {
        self.credentials_at(reference.domain(), reference.path())
    }

    /// The credentials for `reference`: the entry of its registry with the longest path
    /// prefix of its repository, else anonymous.
    #[must_use]
    pub fn credentials_for(&self, reference: &Reference) -> Credentials {
        self.lookup(reference).unwrap_or_default()
    }

    /// The mirrors of `reference`'s registry, in the order to try them, each with its
    /// credentials for the image's repository.
    #[must_use]
    pub fn mirrors_for(&self, reference: &Reference) -> Vec<Mirror> {
        self.mirrors
            .get(reference.domain())
            .into_iter()
            .flatten()
            .map(|(host, plain_http)| Mirror {
                host: host.clone(),
                plain_http: *plain_http,
                credentials: self
                    .credentials_at(host, reference.path())
                    .unwrap_or_default(),
            })
            .collect()
    }

    /// The `auths` entry of registry `domain` with the longest path prefix of `repo`.
    fn credentials_at(&self, domain: &str, repo: &str) -> Option<Credentials> {
        let mut best: Option<(usize, &Credentials)> = None;
        for (key, creds) in &self.auths {
            let (host, path) = key.split_once('/').unwrap_or((key.as_str(), ""));
            if host != domain {
                continue;
            }
            let matches = path.is_empty() || repo == path || repo.starts_with(&format!("{path}/"));
            if matches && best.is_none_or(|(len, _)| path.len() > len) {
                best = Some((path.len(), creds));
            }
        }
        best.map(|(_, c)| c.clone())
    }
}

/// A mirror URL: `http://host:port` (plain), `https://host` or `host` → (host, scheme).
fn mirror_endpoint(url: &str) -> std::result::Result<(String, Option<bool>), String> {
    let url = url.trim();
    let (rest, plain) = if let Some(r) = url.strip_prefix("http://") {
        (r, Some(true))
    } else if let Some(r) = url.strip_prefix("https://") {
        (r, Some(false))
    } else if url.contains("://") {
        return Err(format!("{url:?}: only http:// and https:// mirrors"));
    } else {
        (url, None)
    };
    let rest = rest.trim_end_matches('/');
    let host = rest.strip_suffix("/v2").unwrap_or(rest);
    if host.is_empty() || host.contains('/') {
        return Err(format!(
            "{url:?}: a mirror is a host[:port], with no path but /v2"
        ));
    }
    Ok((host.to_owned(), plain))
}

/// `https://index.docker.io/v1/` → `docker.io`; `http://host:5000/x` → `host:5000/x`.
fn normalise_key(key: &str) -> String {
    let key = key.trim();
    let key = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    let key = key.trim_end_matches('/');
    let (host, path) = key.split_once('/').unwrap_or((key, ""));
    let host = match host {
        "index.docker.io" | "registry-1.docker.io" | "registry.hub.docker.com" => "docker.io",
        h => h,
    };
    // Docker Hub's key carries the API version (`/v1`), not a repository.
    let path = if host == "docker.io" && (path == "v1" || path == "v2") {
        ""
    } else {
        path
    };
    if path.is_empty() {
        host.to_owned()
    } else {
        format!("{host}/{path}")
    }
}
