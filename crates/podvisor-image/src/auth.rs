//! Registry credentials: a Docker `config.json` (`--registry-config`, and the
//! `.dockerconfigjson` of `imagePullSecrets` has the same `auths` shape).

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use base64::Engine as _;

use crate::error::{Error, Result};
use crate::reference::Reference;

/// How to authenticate to one registry.
#[derive(Clone, Default, PartialEq, Eq)]
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

/// The `auths` of a Docker `config.json`, matched against image references.
#[derive(Clone, Debug, Default)]
pub struct RegistryConfig {
    /// `host[/path]` (normalised) → credentials.
    auths: BTreeMap<String, Credentials>,
}

#[derive(serde::Deserialize)]
struct ConfigFile {
    #[serde(default)]
    auths: BTreeMap<String, AuthEntry>,
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
        Ok(RegistryConfig { auths })
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
        let repo = reference.path();
        let mut best: Option<(usize, &Credentials)> = None;
        for (key, creds) in &self.auths {
            let (host, path) = key.split_once('/').unwrap_or((key.as_str(), ""));
            if host != reference.domain() {
                continue;
            }
            let matches = path.is_empty() || repo == path || repo.starts_with(&format!("{path}/"));
            if matches && best.is_none_or(|(len, _)| path.len() > len) {
                best = Some((path.len(), creds));
            }
        }
        best.map(|(_, c)| c.clone())
    }

    /// The credentials for `reference`: the entry of its registry with the longest path
    /// prefix of its repository, else anonymous.
    #[must_use]
    pub fn credentials_for(&self, reference: &Reference) -> Credentials {
        self.lookup(reference).unwrap_or_default()
    }
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
