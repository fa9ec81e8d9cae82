//! Image references as Kubernetes and containerd read them (distribution's
//! `ParseNormalizedNamed`, then the kubelet's default tag): `busybox` is
//! `docker.io/library/busybox:latest`, `host:5000/a/b:tag` keeps its registry, `name@sha256:…`
//! names content, and `name:tag@sha256:…` pulls by the digest.

use std::fmt;

use crate::digest::Digest;

/// The registry of names without one.
pub const DEFAULT_DOMAIN: &str = "docker.io";
/// Docker Hub's official images live in `library/`.
const OFFICIAL_REPO_PREFIX: &str = "library/";
/// The tag of a reference without tag or digest.
pub const DEFAULT_TAG: &str = "latest";
/// distribution's limit on the name (domain and path).
const NAME_TOTAL_LENGTH_MAX: usize = 255;

/// A normalised image reference: registry domain, repository path, tag and/or digest.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Reference {
    domain: String,
    path: String,
    tag: Option<String>,
    digest: Option<Digest>,
}

/// Why an image reference is refused: the kubelet reports these as `InvalidImageName`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("couldn't parse image name {image:?}: {reason}")]
pub struct ReferenceError {
    /// The text as given.
    pub image: String,
    /// What is wrong, in distribution's words (`invalid reference format`, `repository name
    /// must be lowercase`, ...), with the offending part where it helps.
    pub reason: String,
}

impl Reference {
    /// Parses and normalises `image` (adds `docker.io`, `library/` and `:latest` as
    /// Kubernetes does).
    ///
    /// # Errors
    ///
    /// [`ReferenceError`] naming what is wrong.
    pub fn parse(image: &str) -> Result<Reference, ReferenceError> {
        let fail = |reason: String| ReferenceError {
            image: image.to_owned(),
            reason,
        };
        if image.is_empty() {
            return Err(fail("invalid reference format: empty".into()));
        }
        // A bare 64-hex string is an image id, not a name (distribution refuses it too).
        if image.len() == 64 && image.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(fail(format!(
                "invalid repository name ({image}), cannot specify 64-byte hexadecimal strings"
            )));
        }
        let (rest, digest) = match image.split_once('@') {
            Some((rest, d)) => {
                let digest =
                    parse_digest(d).map_err(|r| fail(format!("invalid digest format: {r}")))?;
                (rest, Some(digest))
            }
            None => (image, None),
        };
        // The tag is after the last ':' that follows the last '/' (a ':' before it is a port).
        let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
        let (name, tag) = match rest[last_slash..].rfind(':') {
            Some(i) => (&rest[..last_slash + i], Some(&rest[last_slash + i + 1..])),
            None => (rest, None),
        };
        if let Some(tag) = tag
            && !valid_tag(tag)
        {
            return Err(fail(format!("invalid tag format {tag:?}")));
        }
        if name.is_empty() {
            return Err(fail("invalid reference format: no repository name".into()));
        }
        let (domain, path) = split_domain(name);
        if !valid_domain(&domain) {
            return Err(fail(format!(
                "invalid reference format: registry {domain:?}"
            )));
        }
        if path.is_empty() {
            return Err(fail(
                "repository name must have at least one component".into(),
            ));
        }
        if path.bytes().any(|b| b.is_ascii_uppercase()) {
            return Err(fail("repository name must be lowercase".into()));
        }
        for component in path.split('/') {
            if !valid_path_component(component) {
                return Err(fail(format!(
                    "invalid reference format: repository path component {component:?}"
                )));
            }
        }
        if domain.len() + 1 + path.len() > NAME_TOTAL_LENGTH_MAX {
            return Err(fail(format!(
                "repository name must not be more than {NAME_TOTAL_LENGTH_MAX} characters"
            )));
        }
        let tag = match (tag, &digest) {
            (Some(t), _) => Some(t.to_owned()),
            (None, None) => Some(DEFAULT_TAG.to_owned()),
            (None, Some(_)) => None,
        };
        Ok(Reference {
            domain,
            path,
            tag,
            digest,
        })
    }

    /// The registry (`docker.io`, `host:5000`).
    #[must_use]
    pub fn domain(&self) -> &str {
        &self.domain
    }

    /// The repository path (`library/busybox`).
    #[must_use]
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The tag, if any (`latest` when neither tag nor digest was given).
    #[must_use]
    pub fn tag(&self) -> Option<&str> {
        self.tag.as_deref()
    }

    /// The digest, if any.
    #[must_use]
    pub fn digest(&self) -> Option<&Digest> {
        self.digest.as_ref()
    }

    /// `domain/path` (the repository's full name).
    #[must_use]
    pub fn name(&self) -> String {
        format!("{}/{}", self.domain, self.path)
    }

    /// `domain/path@digest`: a repo digest, as `status.containerStatuses[].imageID` shows.
    #[must_use]
    pub fn with_digest(&self, digest: &Digest) -> String {
        format!("{}/{}@{digest}", self.domain, self.path)
    }

    /// `domain/path:tag`, when there is a tag.
    #[must_use]
    pub fn tagged(&self) -> Option<String> {
        self.tag
            .as_ref()
            .map(|t| format!("{}/{}:{t}", self.domain, self.path))
    }

    /// The registry to contact: Docker Hub's API is at `registry-1.docker.io`.
    #[must_use]
    pub fn registry_host(&self) -> &str {
        if self.domain == DEFAULT_DOMAIN {
            "registry-1.docker.io"
        } else {
            &self.domain
        }
    }

    /// Whether the registry is this machine (`localhost`, `127.0.0.0/8`, `::1`): Docker
    /// treats those as insecure (plain HTTP allowed) by default, and so does the store.
    #[must_use]
    pub fn is_loopback_registry(&self) -> bool {
        is_loopback_host(&self.domain)
    }
}

/// Whether `host[:port]` is this machine's loopback (`localhost`, `127.0.0.0/8`, `[::1]`).
pub(crate) fn is_loopback_host(domain: &str) -> bool {
    let host = match domain.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => domain.split(':').next().unwrap_or(""),
    };
    host == "localhost"
        || host == "::1"
        || host
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|ip| ip.is_loopback())
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.domain, self.path)?;
        if let Some(t) = &self.tag {
            write!(f, ":{t}")?;
        }
        if let Some(d) = &self.digest {
            write!(f, "@{d}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for Reference {
    type Err = ReferenceError;
    fn from_str(s: &str) -> Result<Reference, ReferenceError> {
        Reference::parse(s)
    }
}

/// distribution's `splitDockerDomain`: the first component is a registry when it has a `.`
/// or a `:`, or is `localhost`, and is not upper case; `index.docker.io` is `docker.io`;
/// Docker Hub names of one component are in `library/`.
fn split_domain(name: &str) -> (String, String) {
    let (mut domain, mut path) = match name.split_once('/') {
        Some((first, rest))
            if first.contains(['.', ':'])
                || first == "localhost"
                || first.bytes().any(|b| b.is_ascii_uppercase()) =>
        {
            (first.to_owned(), rest.to_owned())
        }
        _ => (DEFAULT_DOMAIN.to_owned(), name.to_owned()),
    };
    if domain == "index.docker.io" {
        DEFAULT_DOMAIN.clone_into(&mut domain);
    }
    if domain == DEFAULT_DOMAIN && !path.contains('/') {
        path = format!("{OFFICIAL_REPO_PREFIX}{path}");
    }
    (domain, path)
}

/// `host[:port]`, host being DNS labels, an IPv4 address or `[IPv6]`.
fn valid_domain(domain: &str) -> bool {
    let (host, port) = if let Some(v6) = domain.strip_prefix('[') {
        let Some((addr, after)) = v6.split_once(']') else {
            return false;
        };
        if addr.parse::<std::net::Ipv6Addr>().is_err() {
            return false;
        }
        match after.strip_prefix(':') {
            Some(p) => ("", Some(p)),
            None if after.is_empty() => ("", None),
            None => return false,
        }
    } else {
        match domain.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (domain, None),
        }
    };
    if let Some(p) = port
        && (p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()))
    {
        return false;
    }
    if domain.starts_with('[') {
        return true;
    }
    !host.is_empty()
        && host.split('.').all(|label| {
            let b = label.as_bytes();
            !b.is_empty()
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
        })
}

/// `[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*`
fn valid_path_component(c: &str) -> bool {
    let b = c.as_bytes();
    if b.is_empty() || !is_alnum(b[0]) || !is_alnum(b[b.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        if is_alnum(b[i]) {
            i += 1;
            continue;
        }
        // A separator run: `.`, `_`, `__`, or any number of `-`.
        let start = i;
        while i < b.len() && !is_alnum(b[i]) {
            i += 1;
        }
        let sep = &c[start..i];
        if !(sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|x| x == b'-')) {
            return false;
        }
    }
    true
}

fn is_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// `[\w][\w.-]{0,127}`
fn valid_tag(tag: &str) -> bool {
    let b = tag.as_bytes();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    !b.is_empty()
        && b.len() <= 128
        && word(b[0])
        && b.iter().all(|&c| word(c) || c == b'.' || c == b'-')
}

fn parse_digest(d: &str) -> Result<Digest, String> {
    Digest::parse(d).map_err(|e| match e {
        crate::Error::InvalidDigest { reason, .. } => format!("{d:?}: {reason}"),
        e => e.to_string(),
    })
}
