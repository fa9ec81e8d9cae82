//! `load`: OCI layouts (directory and tar) and `docker save` archives; `remove`.

use podvisor_image::{ImageStore, NoProgress, Reference};

use crate::support::{Layer, Layout, TempDir, busybox_layer, gzip, sha256, tar_dir};

#[test]
fn loads_an_oci_layout_archive() {
    let tmp = TempDir::new("load-oci");
    let store = ImageStore::open(tmp.path().join("images")).unwrap();
    let (layout, built) = Layout::single(
        &tmp.path().join("layout"),
        &[busybox_layer()],
        Some("example.com/t/busybox:1.0"),
    );
    let archive = tmp.path().join("busybox.tar");
    tar_dir(&layout.dir, &archive);
    let images = store.load(&archive, &NoProgress).unwrap();
    assert_eq!(images.len(), 1);
    let image = &images[0];
    assert_eq!(image.id.as_str(), built.config_digest);
    assert_eq!(image.repo_tags, ["example.com/t/busybox:1.0"]);
    assert_eq!(image.repo_digest, None, "an archive is not a registry");
    let out = std::process::Command::new(image.layers[0].join("bin/busybox"))
        .args(["echo", "ok"])
        .output()
        .unwrap();
    assert_eq!(out.stdout, b"ok\n");
    let got = store
        .get(&Reference::parse("example.com/t/busybox:1.0").unwrap())
        .unwrap()
        .unwrap();
    assert_eq!(got.id, image.id);
    assert_eq!(got.config.architecture().to_string(), "amd64");
    assert_eq!(
        got.config.config().as_ref().unwrap().cmd().as_deref(),
        Some(&["sh".to_owned()][..])
    );
    // Loading again changes nothing; a short id finds it.
    assert_eq!(store.load(&archive, &NoProgress).unwrap()[0].id, image.id);
    assert_eq!(store.find(&image.id.hex()[..8]).unwrap().id, image.id);
    assert!(
        std::fs::read_dir(store.dir().join("tmp"))
            .unwrap()
            .next()
            .is_none(),
        "tmp/ is cleaned"
    );
}

#[test]
fn loads_a_docker_save_archive_and_removes_it() {
    let tmp = TempDir::new("load-docker");
    let store = ImageStore::open(tmp.path().join("images")).unwrap();
    let layer1 = busybox_layer();
    let layer2 = Layer::new()
        .file("hello", b"from docker save", 0o644)
        .finish();
    let diff_ids = [sha256(&layer1), sha256(&layer2)];
    let config = serde_json::to_vec(&serde_json::json!({
        "architecture": "amd64", "os": "linux",
        "config": {"Cmd": ["sh"]},
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    }))
    .unwrap();
    let config_name = format!("{}.json", &sha256(&config)[7..]);
    let dir = tmp.path().join("save");
    std::fs::create_dir_all(dir.join("l1")).unwrap();
    std::fs::create_dir_all(dir.join("l2")).unwrap();
    std::fs::write(dir.join("l1/layer.tar"), &layer1).unwrap();
    // Newer docker may compress: the store reads the bytes, not the name.
    std::fs::write(dir.join("l2/layer.tar"), gzip(&layer2)).unwrap();
    std::fs::write(dir.join(&config_name), &config).unwrap();
    let manifest = serde_json::json!([{
        "Config": config_name, "RepoTags": ["busybox:saved", "example.com/x:2"], "Layers": ["l1/layer.tar", "l2/layer.tar"],
    }]);
    std::fs::write(
        dir.join("manifest.json"),
        serde_json::to_vec(&manifest).unwrap(),
    )
    .unwrap();
    let archive = tmp.path().join("saved.tar");
    tar_dir(&dir, &archive);
    let image = store.load(&archive, &NoProgress).unwrap().remove(0);
    assert_eq!(
        image.repo_tags,
        ["docker.io/library/busybox:saved", "example.com/x:2"]
    );
    assert_eq!(image.layers.len(), 2);
    assert_eq!(
        std::fs::read(image.layers[1].join("hello")).unwrap(),
        b"from docker save"
    );
    assert_eq!(store.list().unwrap().len(), 1);
    // rm by tag: the image, its blobs and its layers go.
    let removed = store.remove("busybox:saved").unwrap();
    assert_eq!(removed.id, image.id);
    assert!(removed.freed > 0);
    assert!(store.list().unwrap().is_empty());
    assert!(
        std::fs::read_dir(store.dir().join("layers/sha256"))
            .unwrap()
            .next()
            .is_none()
    );
    assert!(
        std::fs::read_dir(store.dir().join("blobs/sha256"))
            .unwrap()
            .next()
            .is_none()
    );
    assert!(matches!(
        store.remove("busybox:saved"),
        Err(podvisor_image::Error::NotFound(_))
    ));
}

#[test]
fn refuses_what_is_no_image_archive() {
    let tmp = TempDir::new("load-bad");
    let store = ImageStore::open(tmp.path().join("images")).unwrap();
    let dir = tmp.path().join("empty");
    std::fs::create_dir(&dir).unwrap();
    let e = store.load(&dir, &NoProgress).unwrap_err().to_string();
    assert!(e.contains("neither an OCI layout"), "{e}");
    // A layout whose blob was altered.
    let (layout, built) = Layout::single(
        &tmp.path().join("layout"),
        &[Layer::new().file("a", b"a", 0o644).finish()],
        None,
    );
    let blob = layout
        .dir
        .join("blobs/sha256")
        .join(&built.layer_digests[0][7..]);
    let mut data = std::fs::read(&blob).unwrap();
    let n = data.len();
    data[n - 5] ^= 0xff;
    std::fs::write(&blob, data).unwrap();
    let e = store
        .load(&layout.dir, &NoProgress)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&built.layer_digests[0]) && e.contains("digest mismatch"),
        "{e}"
    );
    assert!(
        std::fs::read_dir(store.dir().join("layers/sha256"))
            .unwrap()
            .next()
            .is_none()
    );
}

#[test]
fn loads_zstd_and_uncompressed_layers() {
    let tmp = TempDir::new("load-zstd");
    let store = ImageStore::open(tmp.path().join("images")).unwrap();
    let layout = Layout::new(&tmp.path().join("layout"));
    let layers = [
        busybox_layer(),
        Layer::new().file("z", b"zstd layer", 0o644).finish(),
        Layer::new().file("p", b"plain layer", 0o644).finish(),
    ];
    let n = std::cell::Cell::new(0);
    let built = layout.image_with(
        &layers,
        |l| {
            n.set(n.get() + 1);
            match n.get() {
                3 => (l.to_vec(), "application/vnd.oci.image.layer.v1.tar"),
                _ => (
                    ruzstd::encoding::compress_to_vec(
                        l,
                        ruzstd::encoding::CompressionLevel::Fastest,
                    ),
                    "application/vnd.oci.image.layer.v1.tar+zstd",
                ),
            }
        },
        "amd64",
        &["sh"],
    );
    let mut d = crate::support::desc(crate::support::OCI_MANIFEST, &built.manifest);
    d["annotations"] = serde_json::json!({"io.containerd.image.name": "example.com/zstd:1"});
    layout.index(&[d]);
    let image = store.load(&layout.dir, &NoProgress).unwrap().remove(0);
    assert_eq!(image.repo_tags, ["example.com/zstd:1"]);
    assert_eq!(
        std::fs::read(image.layers[1].join("z")).unwrap(),
        b"zstd layer"
    );
    assert_eq!(
        std::fs::read(image.layers[2].join("p")).unwrap(),
        b"plain layer"
    );
    let out = std::process::Command::new(image.layers[0].join("bin/busybox"))
        .arg("true")
        .status()
        .unwrap();
    assert!(out.success());
}

/// Every entry under `dir`, recursively, with its size (what the store holds).
fn contents(dir: &std::path::Path) -> Vec<(std::path::PathBuf, u64)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let meta = e.metadata().unwrap();
            if meta.is_dir() {
                todo.push(e.path());
            }
            out.push((e.path(), if meta.is_dir() { 0 } else { meta.len() }));
        }
    }
    out.sort();
    out
}

/// A manifest whose config descriptor says another size than its config blob has: the
/// error names the manifest, the descriptor and both sizes, and the store is as it was.
#[test]
fn refuses_a_config_descriptor_of_the_wrong_size_and_stores_nothing() {
    let tmp = TempDir::new("load-config-size");
    let store = ImageStore::open(tmp.path().join("images")).unwrap();
    let layout = Layout::new(&tmp.path().join("layout"));
    let built = layout.image(&[busybox_layer()], true, "amd64", &["sh"]);
    let mut manifest: serde_json::Value = serde_json::from_slice(&built.manifest).unwrap();
    let real = manifest["config"]["size"].as_u64().unwrap();
    manifest["config"]["size"] = serde_json::json!(real + 7);
    let manifest = serde_json::to_vec(&manifest).unwrap();
    let manifest_digest = layout.blob(&manifest);
    let mut d = crate::support::desc(crate::support::OCI_MANIFEST, &manifest);
    d["annotations"] =
        serde_json::json!({"org.opencontainers.image.ref.name": "example.com/bad:1"});
    layout.index(&[d]);
    let before = contents(store.dir());
    let e = store
        .load(&layout.dir, &NoProgress)
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        format!(
            "manifest {manifest_digest}: config descriptor {}: size says {} bytes, the blob has {real}",
            built.config_digest,
            real + 7
        )
    );
    assert_eq!(contents(store.dir()), before, "the store is unchanged");
    assert!(store.list().unwrap().is_empty());
    // The same through a tar of the layout.
    let archive = tmp.path().join("bad.tar");
    tar_dir(&layout.dir, &archive);
    let e = store.load(&archive, &NoProgress).unwrap_err().to_string();
    assert!(e.contains("config descriptor"), "{e}");
    assert_eq!(contents(store.dir()), before, "the store is unchanged");
}

/// A config descriptor whose digest names a blob of other content is refused before
/// anything is stored.
#[test]
fn refuses_a_config_blob_that_is_not_its_digest_and_stores_nothing() {
    let tmp = TempDir::new("load-config-digest");
    let store = ImageStore::open(tmp.path().join("images")).unwrap();
    let (layout, built) = Layout::single(&tmp.path().join("layout"), &[busybox_layer()], None);
    let blob = layout
        .dir
        .join("blobs/sha256")
        .join(&built.config_digest[7..]);
    let mut config = std::fs::read(&blob).unwrap();
    config.push(b' ');
    std::fs::write(&blob, &config).unwrap();
    let before = contents(store.dir());
    let e = store
        .load(&layout.dir, &NoProgress)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(&format!("config {}: digest mismatch", built.config_digest)),
        "{e}"
    );
    assert_eq!(contents(store.dir()), before, "the store is unchanged");
}
