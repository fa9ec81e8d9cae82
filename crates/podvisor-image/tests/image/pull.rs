//! Pulls from a real `docker-registry` on 127.0.0.1 with images pushed by `skopeo`.

use std::collections::HashSet;

use podvisor_image::{
    Credentials, Error, ImageStore, MachinePlatform, NoProgress, PullOptions, Reference,
    RegistryConfig,
};

use crate::support::{
    Layer, Layout, OCI_INDEX, OCI_MANIFEST, Registry, TempDir, busybox_layer, desc,
};

fn busybox_layout(tmp: &TempDir) -> (Layout, crate::support::Built) {
    let extra = Layer::new().file("etc/motd", b"pulled\n", 0o644).finish();
    Layout::single(&tmp.path().join("layout"), &[busybox_layer(), extra], None)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn pulls_from_a_registry() {
    let tmp = TempDir::new("pull");
    let registry = Registry::start(None);
    let (layout, built) = busybox_layout(&tmp);
    registry.push(&layout.dir, "test/busybox:1.0", false);
    let store = ImageStore::open(tmp.path().join("images")).unwrap();
    let reference = Reference::parse(&format!("{}/test/busybox:1.0", registry.host())).unwrap();
    let rt = runtime();
    let report = rt
        .block_on(store.pull(&reference, &PullOptions::default(), &NoProgress))
        .unwrap();
    let image = &report.image;
    assert_eq!(image.id.as_str(), built.config_digest);
    assert_eq!(
        image.repo_digest.as_deref(),
        Some(format!("{}/test/busybox@{}", registry.host(), built.manifest_digest).as_str())
    );
    assert_eq!(
        image.repo_tags,
        [format!("{}/test/busybox:1.0", registry.host())]
    );
    assert_eq!(report.layers_fetched, 2);
    let blob_sizes: u64 = built
        .layer_digests
        .iter()
        .map(|d| {
            std::fs::metadata(layout.dir.join("blobs/sha256").join(&d[7..]))
                .unwrap()
                .len()
        })
        .sum();
    let config_size = std::fs::metadata(
        layout
            .dir
            .join("blobs/sha256")
            .join(&built.config_digest[7..]),
    )
    .unwrap()
    .len();
    assert_eq!(
        image.size,
        built.manifest.len() as u64 + config_size + blob_sizes
    );
    assert_eq!(report.downloaded, config_size + blob_sizes);
    let out = std::process::Command::new(image.layers[0].join("bin/busybox"))
        .args(["cat"])
        .arg(image.layers[1].join("etc/motd"))
        .output()
        .unwrap();
    assert_eq!(out.stdout, b"pulled\n");
    // Private store: 0700 directories, 0600 blobs.
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(store.dir()).unwrap().permissions().mode() & 0o777,
        0o700
    );
    let blob = store
        .dir()
        .join("blobs/sha256")
        .join(&built.config_digest[7..]);
    assert_eq!(
        std::fs::metadata(blob).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // Pulled again: nothing transferred; by digest too.
    let again = rt
        .block_on(store.pull(&reference, &PullOptions::default(), &NoProgress))
        .unwrap();
    assert_eq!(
        (again.downloaded, again.layers_fetched, &again.image.id),
        (0, 0, &image.id)
    );
    let by_digest = Reference::parse(image.repo_digest.as_deref().unwrap()).unwrap();
    assert_eq!(store.get(&by_digest).unwrap().unwrap().id, image.id);
    let pulled = rt
        .block_on(store.pull(&by_digest, &PullOptions::default(), &NoProgress))
        .unwrap();
    assert_eq!(pulled.image.id, image.id);
    // Unknown tag: a registry error naming it.
    let missing = Reference::parse(&format!("{}/test/busybox:nope", registry.host())).unwrap();
    let e = rt
        .block_on(store.pull(&missing, &PullOptions::default(), &NoProgress))
        .unwrap_err();
    assert!(matches!(e, Error::Registry { .. }), "{e}");
    assert!(e.to_string().contains("test/busybox:nope"), "{e}");
}

#[test]
fn pulls_with_basic_auth_from_a_registry_config() {
    let tmp = TempDir::new("pull-auth");
    let registry = Registry::start(Some(("alice", "wonderland")));
    let (layout, built) = busybox_layout(&tmp);
    registry.push(&layout.dir, "private/busybox:1", false);
    let store = ImageStore::open(tmp.path().join("images")).unwrap();
    let reference = Reference::parse(&format!("{}/private/busybox:1", registry.host())).unwrap();
    let rt = runtime();
    let e = rt
        .block_on(store.pull(&reference, &PullOptions::default(), &NoProgress))
        .unwrap_err();
    let text = e.to_string();
    assert!(
        text.to_lowercase().contains("authorized") && text.contains("private/busybox"),
        "{text}"
    );
    let wrong = PullOptions {
        credentials: Credentials::Basic {
            username: "alice".into(),
            password: "nope".into(),
        },
        ..PullOptions::default()
    };
    assert!(
        rt.block_on(store.pull(&reference, &wrong, &NoProgress))
            .is_err()
    );
    assert!(store.list().unwrap().is_empty());
    let config_path = tmp.path().join("config.json");
    use base64::Engine as _;
    let auth = base64::engine::general_purpose::STANDARD.encode("alice:wonderland");
    std::fs::write(
        &config_path,
        format!(
            r#"{{"auths":{{"{}":{{"auth":"{auth}"}}}}}}"#,
            registry.host()
        ),
    )
    .unwrap();
    let config = RegistryConfig::load(&config_path).unwrap();
    let options = PullOptions {
        credentials: config.credentials_for(&reference),
        ..PullOptions::default()
    };
    let report = rt
        .block_on(store.pull(&reference, &options, &NoProgress))
        .unwrap();
    assert_eq!(report.image.id.as_str(), built.config_digest);
}

#[test]
fn a_corrupted_blob_is_refused_and_nothing_is_unpacked() {
    let tmp = TempDir::new("pull-corrupt");
    let registry = Registry::start(None);
    let (layout, built) = busybox_layout(&tmp);
    registry.push(&layout.dir, "test/corrupt:1", false);
    // Same size, other bytes: the registry serves it as the digest's content.
    let bad_digest = &built.layer_digests[0];
    let data_path = registry.blob_data(bad_digest);
    let mut data = std::fs::read(&data_path).unwrap();
    let mid = data.len() / 2;
    data[mid] ^= 0xff;
    std::fs::write(&data_path, data).unwrap();
    let store = ImageStore::open(tmp.path().join("images")).unwrap();
    let reference = Reference::parse(&format!("{}/test/corrupt:1", registry.host())).unwrap();
    let e = runtime()
        .block_on(store.pull(&reference, &PullOptions::default(), &NoProgress))
        .unwrap_err();
    match &e {
        Error::DigestMismatch { digest, .. } => assert_eq!(digest, bad_digest),
        other => panic!("wanted a digest mismatch, got {other}"),
    }
    assert!(e.to_string().contains(bad_digest.as_str()), "{e}");
    let layers: Vec<_> = std::fs::read_dir(store.dir().join("layers/sha256"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(
        !layers
            .iter()
            .any(|l| built.diff_ids[0].ends_with(l.to_str().unwrap())),
        "the bad layer is not unpacked"
    );
    assert!(
        !store
            .dir()
            .join("blobs/sha256")
            .join(&bad_digest[7..])
            .exists(),
        "the bad blob is not stored"
    );
    let ingest: Vec<_> = std::fs::read_dir(store.dir().join("ingest"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    // The corrupt blob's bytes are not kept; another layer still downloading when the pull
    // failed may keep its (verified-on-completion) partial download, to resume.
    assert!(
        !ingest
            .iter()
            .any(|n| n.starts_with(&bad_digest[7..]) && n.ends_with(".partial")),
        "no partial download of the corrupt blob kept: {ingest:?}"
    );
    assert!(
        std::fs::read_dir(store.dir().join("tmp"))
            .unwrap()
            .next()
            .is_none()
    );
    assert!(store.list().unwrap().is_empty());
}

#[test]
fn a_multi_platform_index_resolves_to_this_machine() {
    let tmp = TempDir::new("pull-index");
    let registry = Registry::start(None);
    let layout = Layout::new(&tmp.path().join("layout"));
    let amd64 = layout.image(
        &[
            busybox_layer(),
            Layer::new().file("arch", b"amd64", 0o644).finish(),
        ],
        true,
        "amd64",
        &["sh"],
    );
    let arm64 = layout.image(
        &[Layer::new().file("arch", b"arm64", 0o644).finish()],
        true,
        "arm64",
        &["sh"],
    );
    let mut a = desc(OCI_MANIFEST, &amd64.manifest);
    a["platform"] = serde_json::json!({"os": "linux", "architecture": "amd64"});
    let mut b = desc(OCI_MANIFEST, &arm64.manifest);
    b["platform"] = serde_json::json!({"os": "linux", "architecture": "arm64", "variant": "v8"});
    let index = serde_json::to_vec(
        &serde_json::json!({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [b, a]}),
    )
    .unwrap();
    let index_digest = layout.blob(&index);
    layout.index(&[desc(OCI_INDEX, &index)]);
    registry.push(&layout.dir, "test/multi:1", true);
    let store = ImageStore::open(tmp.path().join("images")).unwrap();
    let reference = Reference::parse(&format!("{}/test/multi:1", registry.host())).unwrap();
    let rt = runtime();
    let here = MachinePlatform::current();
    assert_eq!(
        here.to_string(),
        "linux/amd64",
        "these tests are written for linux/amd64"
    );
    let image = rt
        .block_on(store.pull(&reference, &PullOptions::default(), &NoProgress))
        .unwrap()
        .image;
    assert_eq!(image.id.as_str(), amd64.config_digest);
    assert_eq!(image.manifest_digest.as_str(), amd64.manifest_digest);
    // The repo digest is the index's: what the tag names (containerd's and the kubelet's imageID).
    assert_eq!(
        image.repo_digest.unwrap(),
        format!("{}/test/multi@{index_digest}", registry.host())
    );
    assert_eq!(
        std::fs::read(image.layers[1].join("arch")).unwrap(),
        b"amd64"
    );
    let s390x = PullOptions {
        platform: MachinePlatform {
            os: "linux".into(),
            architecture: "s390x".into(),
            variant: None,
        },
        ..PullOptions::default()
    };
    let e = rt
        .block_on(store.pull(&reference, &s390x, &NoProgress))
        .unwrap_err();
    assert!(matches!(e, Error::NoMatchingPlatform { .. }), "{e}");
    assert!(e.to_string().contains("linux/arm64/v8, linux/amd64"), "{e}");
}

#[test]
fn partial_downloads_resume_or_restart_cleanly() {
    let tmp = TempDir::new("pull-resume");
    let registry = Registry::start(None);
    let (layout, built) = busybox_layout(&tmp);
    registry.push(&layout.dir, "test/resume:1", false);
    let reference = Reference::parse(&format!("{}/test/resume:1", registry.host())).unwrap();
    let big = &built.layer_digests[0];
    let blob = std::fs::read(layout.dir.join("blobs/sha256").join(&big[7..])).unwrap();
    let half = blob.len() / 2;
    let rt = runtime();
    // A good half: continued from where it stopped.
    let store = ImageStore::open(tmp.path().join("images")).unwrap();
    std::fs::write(
        store
            .dir()
            .join("ingest")
            .join(format!("{}.partial", &big[7..])),
        &blob[..half],
    )
    .unwrap();
    let report = rt
        .block_on(store.pull(&reference, &PullOptions::default(), &NoProgress))
        .unwrap();
    let full = rt
        .block_on(ImageStore::open(tmp.path().join("fresh")).unwrap().pull(
            &reference,
            &PullOptions::default(),
            &NoProgress,
        ))
        .unwrap();
    assert_eq!(
        report.downloaded,
        full.downloaded - half as u64,
        "only the missing half was transferred"
    );
    assert_eq!(
        std::fs::read(store.dir().join("blobs/sha256").join(&big[7..])).unwrap(),
        blob
    );
    // A spoiled half: never used; the blob is fetched again from nothing.
    let store = ImageStore::open(tmp.path().join("images2")).unwrap();
    std::fs::write(
        store
            .dir()
            .join("ingest")
            .join(format!("{}.partial", &big[7..])),
        vec![0u8; half],
    )
    .unwrap();
    let report = rt
        .block_on(store.pull(&reference, &PullOptions::default(), &NoProgress))
        .unwrap();
    assert_eq!(report.image.id.as_str(), built.config_digest);
    assert_eq!(
        std::fs::read(store.dir().join("blobs/sha256").join(&big[7..])).unwrap(),
        blob
    );
    assert!(
        std::fs::read_dir(store.dir().join("ingest"))
            .unwrap()
            .all(|e| !e
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".partial"))
    );
}

#[test]
fn concurrent_pulls_of_one_image_share_the_work() {
    let tmp = TempDir::new("pull-concurrent");
    let registry = Registry::start(None);
    let (layout, built) = busybox_layout(&tmp);
    registry.push(&layout.dir, "test/busybox:c", false);
    let store = ImageStore::open(tmp.path().join("images")).unwrap();
    let reference = Reference::parse(&format!("{}/test/busybox:c", registry.host())).unwrap();
    let rt = runtime();
    let options = PullOptions::default();
    let (a, b, c) = rt.block_on(async {
        tokio::join!(
            store.pull(&reference, &options, &NoProgress),
            store.pull(&reference, &options, &NoProgress),
            store.pull(&reference, &options, &NoProgress)
        )
    });
    let (a, b, c) = (a.unwrap(), b.unwrap(), c.unwrap());
    assert_eq!(a.image.id.as_str(), built.config_digest);
    assert_eq!((&b.image.id, &c.image.id), (&a.image.id, &a.image.id));
    assert_eq!(a.image.layers, b.image.layers);
    assert_eq!(store.list().unwrap().len(), 1);
    let ids: HashSet<_> = [a.image.id.clone()].into_iter().collect();
    assert!(
        store.gc(0, 0, &ids).unwrap().removed.is_empty(),
        "an image in use is never collected"
    );
}

#[test]
fn pulls_a_docker_schema2_image() {
    let tmp = TempDir::new("pull-v2s2");
    let registry = Registry::start(None);
    let (layout, _) = busybox_layout(&tmp);
    registry.push_with(&layout.dir, "test/docker:1", &["--format", "v2s2"]);
    let store = ImageStore::open(tmp.path().join("images")).unwrap();
    let reference = Reference::parse(&format!("{}/test/docker:1", registry.host())).unwrap();
    let image = runtime()
        .block_on(store.pull(&reference, &PullOptions::default(), &NoProgress))
        .unwrap()
        .image;
    let manifest = std::fs::read(
        store
            .dir()
            .join("blobs/sha256")
            .join(image.manifest_digest.hex()),
    )
    .unwrap();
    let manifest: serde_json::Value = serde_json::from_slice(&manifest).unwrap();
    assert_eq!(
        manifest["mediaType"],
        "application/vnd.docker.distribution.manifest.v2+json"
    );
    assert_eq!(
        std::fs::read(image.layers[1].join("etc/motd")).unwrap(),
        b"pulled\n"
    );
}

#[test]
fn pulls_through_a_registry_mirror_and_a_second_pull_transfers_nothing() {
    let tmp = TempDir::new("pull-mirror");
    let registry = Registry::start(None);
    let (layout, built) = busybox_layout(&tmp);
    registry.push(&layout.dir, "library/busybox:latest", false);
    // A mirror that does not answer comes first: the pull passes to the next one.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_port = dead.local_addr().unwrap().port();
    drop(dead);
    let config_path = tmp.path().join("config.json");
    std::fs::write(
        &config_path,
        format!(
            r#"{{"mirrors": {{"docker.io": ["http://127.0.0.1:{dead_port}", "http://{}"]}}}}"#,
            registry.host()
        ),
    )
    .unwrap();
    let config = RegistryConfig::load(&config_path).unwrap();
    let store = ImageStore::open(tmp.path().join("images")).unwrap();
    let reference = Reference::parse("busybox").unwrap();
    let options = PullOptions::for_reference(Some(&config), &reference);
    assert_eq!(options.mirrors.len(), 2);
    let rt = runtime();
    let report = rt
        .block_on(store.pull(&reference, &options, &NoProgress))
        .unwrap();
    // The image keeps its own name; it came from the mirror.
    assert_eq!(report.image.id.as_str(), built.config_digest);
    assert_eq!(
        report.image.repo_tags,
        ["docker.io/library/busybox:latest".to_string()]
    );
    assert_eq!(
        report.image.repo_digest.as_deref(),
        Some(format!("docker.io/library/busybox@{}", built.manifest_digest).as_str())
    );
    assert_eq!(report.layers_fetched, 2);
    assert!(report.downloaded > 0);
    // Pulled again (imagePullPolicy Always): the manifest is asked for, nothing else moves.
    let again = rt
        .block_on(store.pull(&reference, &options, &NoProgress))
        .unwrap();
    assert_eq!(again.image.id, report.image.id);
    assert_eq!((again.downloaded, again.layers_fetched), (0, 0));
    // With every mirror gone, the error names each attempt (docker.io is not reachable here).
    drop(registry);
    let e = rt
        .block_on(store.pull(&reference, &options, &NoProgress))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&format!("mirror 127.0.0.1:{dead_port}")) && e.contains("docker.io"),
        "{e}"
    );
}
