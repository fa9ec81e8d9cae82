//! Reference parsing and normalisation as distribution's `ParseNormalizedNamed` plus the
//! kubelet's default tag; digests; credentials; the `Pulled` event's words.

use std::time::Duration;

use podvisor_image::{Credentials, Digest, Reference, RegistryConfig};

const D: &str = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

#[test]
fn normalises_like_kubernetes() {
    let cases = [
        ("busybox", "docker.io/library/busybox:latest"),
        ("busybox:1.36", "docker.io/library/busybox:1.36"),
        ("library/busybox", "docker.io/library/busybox:latest"),
        ("docker.io/busybox", "docker.io/library/busybox:latest"),
        (
            "index.docker.io/library/busybox:1",
            "docker.io/library/busybox:1",
        ),
        ("user/app", "docker.io/user/app:latest"),
        ("localhost/app", "localhost/app:latest"),
        ("localhost:5000/a/b:tag", "localhost:5000/a/b:tag"),
        ("host:5000/a/b:tag", "host:5000/a/b:tag"),
        ("127.0.0.1:5000/app", "127.0.0.1:5000/app:latest"),
        ("[::1]:5000/app:v1", "[::1]:5000/app:v1"),
        ("gcr.io/a/b/c/d:1.0-rc_1", "gcr.io/a/b/c/d:1.0-rc_1"),
        ("Registry.Example.com/x", "Registry.Example.com/x:latest"),
        ("a__b/c-d--e/f.g", "docker.io/a__b/c-d--e/f.g:latest"),
    ];
    for (input, want) in cases {
        let r = Reference::parse(input).unwrap_or_else(|e| panic!("{input}: {e}"));
        assert_eq!(r.to_string(), want, "{input}");
    }
    let r = Reference::parse(&format!("quay.io/org/app@{D}")).unwrap();
    assert_eq!(
        (r.domain(), r.path(), r.tag()),
        ("quay.io", "org/app", None)
    );
    assert_eq!(r.digest().map(Digest::as_str), Some(D));
    assert_eq!(r.to_string(), format!("quay.io/org/app@{D}"));
    let r = Reference::parse(&format!("app:v1@{D}")).unwrap();
    assert_eq!(r.to_string(), format!("docker.io/library/app:v1@{D}"));
    assert_eq!(
        r.with_digest(r.digest().unwrap()),
        format!("docker.io/library/app@{D}")
    );
    assert!(
        Reference::parse("127.0.0.1:5000/app")
            .unwrap()
            .is_loopback_registry()
    );
    assert!(
        Reference::parse("localhost/app")
            .unwrap()
            .is_loopback_registry()
    );
    assert!(!Reference::parse("busybox").unwrap().is_loopback_registry());
    assert_eq!(
        Reference::parse("busybox").unwrap().registry_host(),
        "registry-1.docker.io"
    );
}

#[test]
fn invalid_image_names_say_what_is_wrong() {
    let hex64 = &D[7..];
    let cases = [
        ("", "invalid reference format"),
        ("Busybox", "repository name must be lowercase"),
        (
            "docker.io/Library/busybox",
            "repository name must be lowercase",
        ),
        ("busybox:", "invalid tag format"),
        ("busybox:-x", "invalid tag format"),
        ("busybox:a/b", "invalid reference format"),
        ("busybox@sha256:abc", "invalid digest format"),
        (
            "busybox@md5:d41d8cd98f00b204e9800998ecf8427e",
            "invalid digest format",
        ),
        (":tag", "invalid reference format"),
        ("a//b", "invalid reference format"),
        ("-a/b", "invalid reference format"),
        ("host:port/app", "invalid reference format"),
        ("app_/x", "invalid reference format"),
        (hex64, "cannot specify 64-byte hexadecimal strings"),
    ];
    for (input, want) in cases {
        let e = Reference::parse(input).expect_err(input);
        let text = e.to_string();
        assert!(text.contains(want), "{input:?}: {text}");
        assert!(
            text.starts_with(&format!("couldn't parse image name {input:?}")),
            "{text}"
        );
    }
    let long = format!("{}/x", "a".repeat(260));
    assert!(
        Reference::parse(&long)
            .unwrap_err()
            .to_string()
            .contains("not be more than 255")
    );
}

#[test]
fn digests_are_checked_sha256() {
    assert_eq!(Digest::of(b"").as_str(), D);
    assert_eq!(Digest::parse(D).unwrap().short(), "e3b0c44298fc");
    for bad in [
        "sha256:abc",
        "e3b0c442",
        &D.to_uppercase(),
        &D.replace("sha256", "sha512"),
    ] {
        assert!(Digest::parse(bad).is_err(), "{bad}");
    }
    let a = Digest::of(b"a");
    let b = Digest::of(b"b");
    assert_eq!(
        podvisor_image::chain_id(std::slice::from_ref(&a)),
        Some(a.clone())
    );
    assert_eq!(
        podvisor_image::chain_id(&[a.clone(), b.clone()]),
        Some(Digest::of(format!("{a} {b}").as_bytes()))
    );
}

#[test]
fn docker_config_credentials() {
    use base64::Engine as _;
    let auth = base64::engine::general_purpose::STANDARD.encode("alice:s3cret:with:colons");
    let json = format!(
        r#"{{"auths": {{
            "127.0.0.1:5000": {{"auth": "{auth}"}},
            "https://index.docker.io/v1/": {{"username": "hub", "password": "pw"}},
            "quay.io/team": {{"username": "team", "password": "t"}},
            "quay.io": {{"username": "any", "password": "a"}},
            "ghcr.io": {{"registrytoken": "tok"}}
        }}}}"#
    );
    let c = RegistryConfig::parse(json.as_bytes()).unwrap();
    let creds = |r: &str| c.credentials_for(&Reference::parse(r).unwrap());
    assert_eq!(
        creds("127.0.0.1:5000/app"),
        Credentials::Basic {
            username: "alice".into(),
            password: "s3cret:with:colons".into()
        }
    );
    assert_eq!(
        creds("busybox"),
        Credentials::Basic {
            username: "hub".into(),
            password: "pw".into()
        }
    );
    assert_eq!(
        creds("quay.io/team/app"),
        Credentials::Basic {
            username: "team".into(),
            password: "t".into()
        }
    );
    assert_eq!(
        creds("quay.io/other/app"),
        Credentials::Basic {
            username: "any".into(),
            password: "a".into()
        }
    );
    assert_eq!(creds("ghcr.io/x/y"), Credentials::Bearer("tok".into()));
    assert_eq!(creds("127.0.0.1:5001/app"), Credentials::Anonymous);
    assert!(
        !format!("{:?}", creds("busybox")).contains("pw"),
        "secrets are not printed"
    );
    let e = RegistryConfig::parse(br#"{"auths": {"x.io": {"auth": "%%%"}}}"#).unwrap_err();
    assert!(e.contains("not base64"), "{e}");
}

#[test]
fn registry_mirrors_from_the_config() {
    let c = RegistryConfig::parse(
        br#"{"auths": {"mirror.example:5000": {"username": "m", "password": "p"}},
             "mirrors": {"https://index.docker.io/v1/": ["http://127.0.0.1:5000/", "mirror.example:5000"],
                         "quay.io": ["https://q.example/v2"]}}"#,
    )
    .unwrap();
    let mirrors = |r: &str| c.mirrors_for(&Reference::parse(r).unwrap());
    let hub = mirrors("busybox");
    assert_eq!(
        hub.iter()
            .map(|m| (m.host.as_str(), m.plain_http))
            .collect::<Vec<_>>(),
        [
            ("127.0.0.1:5000", Some(true)),
            ("mirror.example:5000", None)
        ]
    );
    assert_eq!(hub[0].credentials, Credentials::Anonymous);
    assert_eq!(
        hub[1].credentials,
        Credentials::Basic {
            username: "m".into(),
            password: "p".into()
        }
    );
    assert_eq!(mirrors("quay.io/a/b")[0].host, "q.example");
    assert_eq!(mirrors("quay.io/a/b")[0].plain_http, Some(false));
    assert!(mirrors("ghcr.io/a/b").is_empty());
    for bad in [
        r#"{"mirrors": {"docker.io": ["ftp://x"]}}"#,
        r#"{"mirrors": {"docker.io": ["http://x/some/path"]}}"#,
    ] {
        let e = RegistryConfig::parse(bad.as_bytes()).unwrap_err();
        assert!(e.contains("mirrors[\"docker.io\"]"), "{e}");
    }
}

#[test]
fn pulled_event_message() {
    assert_eq!(
        podvisor_image::pulled_message(
            "busybox",
            Duration::from_micros(1_234_567),
            Duration::from_millis(1500),
            12345
        ),
        "Successfully pulled image \"busybox\" in 1.234s (1.5s including waiting). Image size: 12345 bytes."
    );
    assert_eq!(
        podvisor_image::pulled_message(
            "x",
            Duration::from_micros(15_700),
            Duration::from_secs(61),
            1
        ),
        "Successfully pulled image \"x\" in 15ms (1m1s including waiting). Image size: 1 bytes."
    );
}
