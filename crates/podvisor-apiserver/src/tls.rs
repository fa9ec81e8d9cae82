//! Identity on disk: a CA and a server certificate (rcgen), the bearer token, and the
//! kubeconfig that ties them together, all under the state directory and private (0600).

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::server::ServeError;

/// The certificate material the server uses.
pub(crate) struct Pki {
    /// The CA certificate (PEM), for the kubeconfig.
    pub ca_pem: String,
    /// The server certificate (PEM).
    pub cert_pem: String,
    /// The server key (PEM, PKCS#8).
    pub key_pem: String,
}

fn io_err(what: String) -> impl FnOnce(std::io::Error) -> ServeError {
    move |source| ServeError::Io { what, source }
}

/// Writes `contents` to `path` atomically (temp file, fsync, rename), with `mode`.
pub(crate) fn write_private(path: &Path, contents: &[u8], mode: u32) -> Result<(), ServeError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io_err(format!("creating {}", dir.display())))?;
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{file_name}.tmp"));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&tmp)
        .map_err(io_err(format!("creating {}", tmp.display())))?;
    // The mode of an existing temp file is not changed by open.
    f.set_permissions(std::fs::Permissions::from_mode(mode))
        .map_err(io_err(format!("setting the mode of {}", tmp.display())))?;
    f.write_all(contents)
        .and_then(|()| f.sync_all())
        .map_err(io_err(format!("writing {}", tmp.display())))?;
    std::fs::rename(&tmp, path).map_err(io_err(format!("renaming to {}", path.display())))
}

/// Reads a secret (a key, the token), making it 0600 first if an older podvisor left it
/// readable by others.
pub(crate) fn read_private(path: &Path) -> Result<Option<String>, ServeError> {
    match std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(ServeError::Io {
                what: format!("setting the mode of {}", path.display()),
                source: e,
            });
        }
        Ok(()) => {}
    }
    read(path)
}

fn read(path: &Path) -> Result<Option<String>, ServeError> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(ServeError::Io {
            what: format!("reading {}", path.display()),
            source: e,
        }),
    }
}

/// The CA's parameters; deterministic, so a stored CA key can sign again without parsing
/// the stored certificate.
fn ca_params() -> Result<CertificateParams, ServeError> {
    let mut p = CertificateParams::new(Vec::<String>::new())?;
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, "podvisor-ca");
    dn.push(DnType::OrganizationName, "podvisor");
    p.distinguished_name = dn;
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    p.not_before = rcgen::date_time_ymd(2025, 1, 1);
    p.not_after = rcgen::date_time_ymd(2125, 1, 1);
    Ok(p)
}

/// The names of the `kubernetes` Service in the `default` namespace, which in-cluster
/// clients may use for the API (the API server's certificate holds them all).
const KUBERNETES_SERVICE_NAMES: [&str; 4] = [
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
];

/// The server certificate's subject alternative names, one per line (stored next to it so
/// a changed node name or pod network address re-issues the certificate): loopback, the
/// node name, the host's address on the pod network, the `kubernetes` Service's names.
fn san_list(node_name: &str, pod_network: Option<IpAddr>) -> Vec<String> {
    let mut sans = vec![
        "127.0.0.1".to_owned(),
        "::1".to_owned(),
        "localhost".to_owned(),
    ];
    let extra = [node_name.to_owned()]
        .into_iter()
        .chain(pod_network.map(|ip| ip.to_string()))
        .chain(KUBERNETES_SERVICE_NAMES.map(str::to_owned));
    for san in extra {
        if !san.is_empty() && !sans.contains(&san) {
            sans.push(san);
        }
    }
    sans
}

fn server_cert(sans: &[String], ca_key: &KeyPair) -> Result<(String, String), ServeError> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    for san in sans {
        match san.parse::<IpAddr>() {
            Ok(ip) => params.subject_alt_names.push(SanType::IpAddress(ip)),
            Err(_) => params
                .subject_alt_names
                .push(SanType::DnsName(san.clone().try_into()?)),
        }
    }
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, "podvisor-apiserver");
    params.distinguished_name = dn;
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.not_before = rcgen::date_time_ymd(2025, 1, 1);
    params.not_after = rcgen::date_time_ymd(2125, 1, 1);
    let key = KeyPair::generate()?;
    let issuer = Issuer::new(ca_params()?, ca_key);
    let cert = params.signed_by(&key, &issuer)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// Creates `dir` (0700), or makes an existing one 0700.
fn private_dir(dir: &Path) -> Result<(), ServeError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io_err(format!("creating {}", dir.display())))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .map_err(io_err(format!("setting the mode of {}", dir.display())))
}

/// Loads `<state>/pki`, creating the CA and the server certificate on first start (and a
/// new server certificate, signed by the same CA, when its names changed).
pub(crate) fn load_or_create_pki(
    state_dir: &Path,
    node_name: &str,
    pod_network: Option<IpAddr>,
) -> Result<Pki, ServeError> {
    let dir = state_dir.join("pki");
    let (ca_crt, ca_key_path) = (dir.join("ca.crt"), dir.join("ca.key"));
    let (crt, key_path, sans_path) = (
        dir.join("apiserver.crt"),
        dir.join("apiserver.key"),
        dir.join("apiserver.sans"),
    );
    private_dir(&dir)?;
    let (ca_pem, ca_key) = match (read(&ca_crt)?, read_private(&ca_key_path)?) {
        (Some(cert), Some(key)) => (cert, KeyPair::from_pem(&key)?),
        _ => {
            let key = KeyPair::generate()?;
            let cert = ca_params()?.self_signed(&key)?;
            write_private(&ca_key_path, key.serialize_pem().as_bytes(), 0o600)?;
            write_private(&ca_crt, cert.pem().as_bytes(), 0o644)?;
            // A new CA invalidates any old server certificate.
            let _ = std::fs::remove_file(&crt);
            (cert.pem(), key)
        }
    };
    let sans = san_list(node_name, pod_network);
    let wanted_sans = sans.join("\n");
    let stored = (read(&crt)?, read_private(&key_path)?, read(&sans_path)?);
    let (cert_pem, key_pem) = match stored {
        (Some(c), Some(k), Some(s)) if s == wanted_sans => (c, k),
        _ => {
            let (c, k) = server_cert(&sans, &ca_key)?;
            write_private(&key_path, k.as_bytes(), 0o600)?;
            write_private(&crt, c.as_bytes(), 0o644)?;
            write_private(&sans_path, wanted_sans.as_bytes(), 0o644)?;
            (c, k)
        }
    };
    Ok(Pki {
        ca_pem,
        cert_pem,
        key_pem,
    })
}

/// Loads `<state>/token`, creating a random one on first start.
pub(crate) fn load_or_create_token(state_dir: &Path) -> Result<String, ServeError> {
    let path = state_dir.join("token");
    if let Some(t) = read_private(&path)? {
        let t = t.trim().to_owned();
        if !t.is_empty() {
            return Ok(t);
        }
    }
    let token: String = podvisor_api::meta::random_bytes::<32>()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    write_private(&path, token.as_bytes(), 0o600)?;
    Ok(token)
}

/// The rustls server configuration (HTTP/1.1 only).
pub(crate) fn server_config(pki: &Pki) -> Result<Arc<rustls::ServerConfig>, ServeError> {
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(pki.cert_pem.as_bytes())
            .collect::<Result<_, _>>()
            .map_err(|e| ServeError::Pem(e.to_string()))?;
    let key = PrivateKeyDer::from_pem_slice(pki.key_pem.as_bytes())
        .map_err(|e| ServeError::Pem(e.to_string()))?;
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_no_client_auth()
    .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// A rustls client configuration trusting only the CA (the server's self-check).
pub(crate) fn client_config(ca_pem: &str) -> Result<Arc<rustls::ClientConfig>, ServeError> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        let cert = cert.map_err(|e| ServeError::Pem(e.to_string()))?;
        roots.add(cert)?;
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(Arc::new(config))
}

/// The URL clients use to reach a listening address (wildcards become loopback).
pub(crate) fn server_url(addr: SocketAddr) -> String {
    let ip = match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    format!("https://{}", SocketAddr::new(ip, addr.port()))
}

/// The kubeconfig text: cluster, user and context all named `podvisor`.
pub(crate) fn kubeconfig(server: &str, ca_pem: &str, token: &str) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    format!(
        "apiVersion: v1\n\
         kind: Config\n\
         clusters:\n\
         - name: podvisor\n  \
           cluster:\n    \
             certificate-authority-data: {ca}\n    \
             server: {server}\n\
         contexts:\n\
         - name: podvisor\n  \
           context:\n    \
             cluster: podvisor\n    \
             namespace: default\n    \
             user: podvisor\n\
         current-context: podvisor\n\
         preferences: {{}}\n\
         users:\n\
         - name: podvisor\n  \
           user:\n    \
             token: {token}\n"
    )
}

/// `<state>/kubeconfig`.
pub(crate) fn kubeconfig_path(state_dir: &Path) -> PathBuf {
    state_dir.join("kubeconfig")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pki_is_created_once_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let a = load_or_create_pki(dir.path(), "node1", None).unwrap();
        let b = load_or_create_pki(dir.path(), "node1", None).unwrap();
        assert_eq!(a.cert_pem, b.cert_pem);
        let c = load_or_create_pki(dir.path(), "node2", None).unwrap();
        assert_eq!(a.ca_pem, c.ca_pem);
        assert_ne!(a.cert_pem, c.cert_pem);
        let mode = std::fs::metadata(dir.path().join("pki/apiserver.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        server_config(&c).unwrap();
        client_config(&c.ca_pem).unwrap();
        let t = load_or_create_token(dir.path()).unwrap();
        assert_eq!(t.len(), 64);
        assert_eq!(load_or_create_token(dir.path()).unwrap(), t);
    }

    #[test]
    fn secrets_left_readable_by_an_older_version_are_made_private() {
        let dir = tempfile::tempdir().unwrap();
        load_or_create_pki(dir.path(), "node1", None).unwrap();
        load_or_create_token(dir.path()).unwrap();
        let set = |p: &str, mode: u32| {
            std::fs::set_permissions(dir.path().join(p), std::fs::Permissions::from_mode(mode))
                .unwrap();
        };
        let mode = |p: &str| {
            std::fs::metadata(dir.path().join(p))
                .unwrap()
                .permissions()
                .mode()
                & 0o777
        };
        for (path, old) in [
            ("pki", 0o755),
            ("pki/ca.key", 0o644),
            ("pki/apiserver.key", 0o644),
            ("token", 0o644),
        ] {
            set(path, old);
        }
        load_or_create_pki(dir.path(), "node1", None).unwrap();
        load_or_create_token(dir.path()).unwrap();
        assert_eq!(mode("pki"), 0o700);
        assert_eq!(mode("pki/ca.key"), 0o600);
        assert_eq!(mode("pki/apiserver.key"), 0o600);
        assert_eq!(mode("token"), 0o600);
    }

    /// A TLS handshake in memory: does a client trusting only `ca_pem` accept the server's
    /// certificate for `name`?
    fn accepted_for(pki: &Pki, name: &str) -> Result<(), rustls::Error> {
        use rustls::pki_types::ServerName;
        let name = ServerName::try_from(name.to_owned()).unwrap();
        let mut client =
            rustls::ClientConnection::new(client_config(&pki.ca_pem).unwrap(), name).unwrap();
        let mut server = rustls::ServerConnection::new(server_config(pki).unwrap()).unwrap();
        for _ in 0..10 {
            let mut buf = Vec::new();
            client.write_tls(&mut buf).unwrap();
            server.read_tls(&mut buf.as_slice()).unwrap();
            server.process_new_packets()?;
            let mut buf = Vec::new();
            server.write_tls(&mut buf).unwrap();
            client.read_tls(&mut buf.as_slice()).unwrap();
            client.process_new_packets()?;
            if !client.is_handshaking() {
                return Ok(());
            }
        }
        panic!("the handshake did not finish");
    }

    #[test]
    fn the_pod_network_address_and_the_kubernetes_service_names_are_served_by_the_same_ca() {
        let dir = tempfile::tempdir().unwrap();
        let before = load_or_create_pki(dir.path(), "node1", None).unwrap();
        assert!(accepted_for(&before, "10.244.0.1").is_err());
        let pki =
            load_or_create_pki(dir.path(), "node1", Some("10.244.0.1".parse().unwrap())).unwrap();
        assert_eq!(pki.ca_pem, before.ca_pem, "the pods' ca.crt stays valid");
        for name in [
            "10.244.0.1",
            "127.0.0.1",
            "node1",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ] {
            accepted_for(&pki, name).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        assert!(accepted_for(&pki, "10.244.0.2").is_err());
        // Another CA's client refuses it.
        let other = tempfile::tempdir().unwrap();
        let stranger = load_or_create_pki(other.path(), "node1", None).unwrap();
        let mixed = Pki {
            ca_pem: stranger.ca_pem,
            cert_pem: pki.cert_pem.clone(),
            key_pem: pki.key_pem.clone(),
        };
        assert!(accepted_for(&mixed, "10.244.0.1").is_err());
    }

    #[test]
    fn urls_for_wildcards() {
        assert_eq!(
            server_url("0.0.0.0:6443".parse().unwrap()),
            "https://127.0.0.1:6443"
        );
        assert_eq!(
            server_url("[::]:6443".parse().unwrap()),
            "https://[::1]:6443"
        );
    }
}
