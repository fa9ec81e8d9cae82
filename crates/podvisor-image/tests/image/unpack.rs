//! Safe unpacking, through `load` of layouts built here: escapes are refused with a clear
//! error and leave nothing (in the store or outside it); whiteouts and opaque directories
//! become overlay's, checked through a real overlay mount; metadata is kept.

use std::os::unix::fs::{FileTypeExt, MetadataExt};

use podvisor_image::{Error, ImageStore, NoProgress};

use crate::support::{Layer, Layout, TempDir, busybox_layer, require_root};

/// Loads a one-image layout with these layers into a fresh store under `tmp`.
fn load_layers(
    tmp: &TempDir,
    layers: &[Vec<u8>],
) -> (ImageStore, Result<Vec<podvisor_image::Image>, Error>) {
    let store = ImageStore::open(tmp.path().join("store/images")).unwrap();
    let dir = tmp.path().join("layout");
    let _ = std::fs::remove_dir_all(&dir);
    Layout::single(&dir, layers, Some("example.com/t/unpack:1"));
    let r = store.load(&dir, &NoProgress);
    (store, r)
}

/// Nothing half-unpacked: no layer directory, nothing in tmp/.
fn assert_nothing_left(store: &ImageStore) {
    let layers: Vec<_> = std::fs::read_dir(store.dir().join("layers/sha256"))
        .unwrap()
        .collect();
    assert!(layers.is_empty(), "layer directories left: {layers:?}");
    let tmp: Vec<_> = std::fs::read_dir(store.dir().join("tmp"))
        .unwrap()
        .collect();
    assert!(tmp.is_empty(), "temporary files left: {tmp:?}");
    assert!(store.list().unwrap().is_empty());
}

fn refused(result: Result<Vec<podvisor_image::Image>, Error>, entry: &str, reason: &str) {
    match result {
        Err(Error::UnsafeLayer {
            entry: e,
            reason: r,
            ..
        }) => {
            assert!(e.contains(entry), "entry {e:?}, wanted {entry:?}");
            assert!(r.contains(reason), "reason {r:?}, wanted {reason:?}");
        }
        other => panic!("wanted a refused layer ({reason}), got {other:?}"),
    }
}

/// `../` to climb from anywhere in the store to `/`.
fn climb() -> String {
    "../".repeat(12)
}

#[test]
fn tar_slip_is_refused() {
    let tmp = TempDir::new("slip");
    let outside = TempDir::new("slip-target");
    let target = outside.path().join("slipped");
    let name = format!(
        "{}{}",
        climb(),
        target.display().to_string().trim_start_matches('/')
    );
    let layer = Layer::new()
        .file("ok", b"fine", 0o644)
        .file(&name, b"pwned", 0o644)
        .finish();
    let (store, r) = load_layers(&tmp, &[layer]);
    refused(r, "slipped", "`..` in the path would escape the layer");
    assert!(!target.exists(), "written outside the store");
    assert_nothing_left(&store);
    let e = Layer::new().file("a/../../b", b"x", 0o644).finish();
    let t2 = TempDir::new("slip2");
    let (_, r) = load_layers(&t2, &[e]);
    refused(r, "a/../../b", "`..`");
}

#[test]
fn symlink_escape_is_refused() {
    let tmp = TempDir::new("symlink");
    let outside = TempDir::new("symlink-target");
    let target = format!(
        "{}{}",
        climb(),
        outside.path().display().to_string().trim_start_matches('/')
    );
    let layer = Layer::new()
        .symlink("evil", &target)
        .file("evil/pwned", b"pwned", 0o644)
        .finish();
    let (store, r) = load_layers(&tmp, &[layer]);
    refused(r, "evil/pwned", "leads out of the layer");
    assert!(
        !outside.path().join("pwned").exists(),
        "written outside the store"
    );
    assert_nothing_left(&store);
    // A chain of symlinks that climbs out is the same.
    let layer = Layer::new()
        .dir("d/", 0o755)
        .symlink("d/up", "..")
        .symlink("d/up2", "up/d/up/..")
        .file("d/up2/up/x", b"x", 0o644)
        .finish();
    let t2 = TempDir::new("symlink2");
    let (_, r) = load_layers(&t2, &[layer]);
    refused(r, "d/up2/up/x", "leads out of the layer");
}

#[test]
fn absolute_symlinks_resolve_inside_the_layer() {
    let tmp = TempDir::new("abs");
    let outside = TempDir::new("abs-target");
    let layer = Layer::new()
        .symlink("abs", &outside.path().display().to_string())
        .file("abs/inside", b"kept in the layer", 0o644)
        .symlink("lib", "usr/lib")
        .file("lib/libx.so", b"elf", 0o755)
        .finish();
    let (_, r) = load_layers(&tmp, &[layer]);
    let images = r.unwrap();
    assert!(
        !outside.path().join("inside").exists(),
        "written outside the store"
    );
    let root = &images[0].layers[0];
    let moved = root
        .join(outside.path().strip_prefix("/").unwrap())
        .join("inside");
    assert_eq!(std::fs::read(&moved).unwrap(), b"kept in the layer");
    assert!(
        std::fs::symlink_metadata(root.join("lib"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(std::fs::read(root.join("usr/lib/libx.so")).unwrap(), b"elf");
}

#[test]
fn hard_link_escape_is_refused() {
    let t1 = TempDir::new("hl1");
    let (store, r) = load_layers(
        &t1,
        &[Layer::new()
            .hardlink("ln", &format!("{}etc/passwd", climb()))
            .finish()],
    );
    refused(r, "ln", "`..`");
    assert_nothing_left(&store);
    // Absolute: the layer's /etc/passwd, which this layer does not have.
    let t2 = TempDir::new("hl2");
    let (store, r) = load_layers(&t2, &[Layer::new().hardlink("ln", "/etc/passwd").finish()]);
    refused(r, "ln", "is not a file of this layer");
    assert_nothing_left(&store);
    // Through a symlink that climbs out.
    let layer = Layer::new()
        .symlink("up", &climb())
        .hardlink("ln", "up/etc/passwd")
        .finish();
    let t3 = TempDir::new("hl3");
    let (store, r) = load_layers(&t3, &[layer]);
    refused(r, "ln", "leads out of the layer");
    assert_nothing_left(&store);
    // To a directory.
    let t4 = TempDir::new("hl4");
    let (_, r) = load_layers(
        &t4,
        &[Layer::new().dir("d/", 0o755).hardlink("ln", "d").finish()],
    );
    refused(r, "ln", "hard link to a directory");
    // Inside the layer: fine, one inode.
    let t5 = TempDir::new("hl5");
    let (_, r) = load_layers(
        &t5,
        &[Layer::new()
            .file("a", b"same", 0o644)
            .hardlink("b", "a")
            .finish()],
    );
    let root = r.unwrap()[0].layers[0].clone();
    let (a, b) = (
        std::fs::metadata(root.join("a")).unwrap(),
        std::fs::metadata(root.join("b")).unwrap(),
    );
    assert_eq!((a.ino(), a.nlink()), (b.ino(), 2));
}

#[test]
fn a_diff_id_mismatch_leaves_nothing() {
    let tmp = TempDir::new("diffid");
    let store = ImageStore::open(tmp.path().join("store/images")).unwrap();
    let dir = tmp.path().join("layout");
    let (layout, built) =
        Layout::single(&dir, &[Layer::new().file("a", b"a", 0o644).finish()], None);
    // Rewrite the config with a wrong diff id (and the manifest and index to match).
    let config_path = layout
        .dir
        .join("blobs/sha256")
        .join(&built.config_digest[7..]);
    let mut config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&config_path).unwrap()).unwrap();
    let wrong = crate::support::sha256(b"not the layer");
    config["rootfs"]["diff_ids"][0] = serde_json::json!(wrong);
    let config = serde_json::to_vec(&config).unwrap();
    layout.blob(&config);
    let mut manifest: serde_json::Value = serde_json::from_slice(&built.manifest).unwrap();
    manifest["config"] = crate::support::desc("application/vnd.oci.image.config.v1+json", &config);
    let manifest = serde_json::to_vec(&manifest).unwrap();
    layout.blob(&manifest);
    layout.index(&[crate::support::desc(
        crate::support::OCI_MANIFEST,
        &manifest,
    )]);
    match store.load(&dir, &NoProgress) {
        Err(Error::DigestMismatch {
            what: "layer diff",
            digest,
            ..
        }) => assert_eq!(digest, wrong),
        other => panic!("wanted a diff id mismatch, got {other:?}"),
    }
    assert_nothing_left(&store);
}

#[test]
#[ignore = "needs root: ownership, device nodes"]
fn metadata_is_kept() {
    require_root("chown and mknod in the layer");
    let layer = Layer::new()
        .file_owned("etc/owned", b"x", 0o4751, 1234, 5678, 1_600_000_000)
        .char_dev("dev/null", 1, 3)
        .dir("ro/", 0o555)
        .file("ro/inside", b"written before the mode", 0o600)
        .file_xattrs(
            "xattrs",
            b"x",
            &[("user.podvisor", b"kept"), ("trusted.overlay.opaque", b"y")],
        )
        .finish();
    let t = TempDir::new("meta");
    let (_, r) = load_layers(&t, &[layer]);
    let root = r.unwrap()[0].layers[0].clone();
    let m = std::fs::symlink_metadata(root.join("etc/owned")).unwrap();
    assert_eq!(
        (m.mode() & 0o7777, m.uid(), m.gid(), m.mtime()),
        (0o4751, 1234, 5678, 1_600_000_000)
    );
    let m = std::fs::symlink_metadata(root.join("dev/null")).unwrap();
    assert!(m.file_type().is_char_device());
    assert_eq!(m.rdev(), rustix::fs::makedev(1, 3));
    let m = std::fs::symlink_metadata(root.join("ro")).unwrap();
    assert_eq!(m.mode() & 0o7777, 0o555);
    assert_eq!(
        m.mtime(),
        1_700_000_000,
        "a directory's mtime is set after its content"
    );
}

#[test]
#[ignore = "needs root: overlay whiteouts (mknod 0/0, trusted.* xattrs) and an overlay mount"]
fn whiteouts_and_opaque_directories_through_overlay() {
    require_root("overlay whiteouts and mount");
    let tmp = TempDir::new("whiteout");
    let bottom = Layer::new()
        .file("etc/a", b"deleted above", 0o644)
        .file("etc/b", b"kept", 0o644)
        .file("opq/x", b"hidden by the opaque dir", 0o644)
        .file("opq/y", b"hidden too", 0o644)
        .file("gone/sub/file", b"a whole tree deleted", 0o644)
        .finish();
    let top = Layer::new()
        .marker("etc/.wh.a")
        .marker("opq/.wh..wh..opq")
        .file("opq/z", b"new", 0o644)
        .marker(".wh.gone")
        .finish();
    let (_, r) = load_layers(&tmp, &[busybox_layer(), bottom, top]);
    let image = r.unwrap().remove(0);
    assert_eq!(image.layers.len(), 3);
    let upper = &image.layers[2];
    let wh = std::fs::symlink_metadata(upper.join("etc/a")).unwrap();
    assert!(
        wh.file_type().is_char_device() && wh.rdev() == 0,
        "etc/a is an overlay whiteout"
    );
    assert!(
        !upper.join("etc/.wh.a").exists(),
        "the tar's marker is not kept"
    );
    let mut v = [0u8; 4];
    let n = rustix::fs::getxattr(upper.join("opq"), "trusted.overlay.opaque", &mut v).unwrap();
    assert_eq!(&v[..n], b"y");
    // What a container would see.
    let merged = tmp.path().join("merged");
    std::fs::create_dir(&merged).unwrap();
    let lower: Vec<String> = image
        .layers
        .iter()
        .rev()
        .map(|p| p.display().to_string())
        .collect();
    let status = std::process::Command::new("mount")
        .args([
            "-t",
            "overlay",
            "overlay",
            "-o",
            &format!("ro,lowerdir={}", lower.join(":")),
        ])
        .arg(&merged)
        .status()
        .unwrap();
    assert!(status.success(), "overlay mount failed");
    let result = std::panic::catch_unwind(|| {
        assert!(!merged.join("etc/a").exists());
        assert_eq!(std::fs::read(merged.join("etc/b")).unwrap(), b"kept");
        let mut names: Vec<_> = std::fs::read_dir(merged.join("opq"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        assert_eq!(names, ["z"]);
        assert!(!merged.join("gone").exists());
        let out = std::process::Command::new(merged.join("bin/busybox"))
            .args(["echo", "hi"])
            .output()
            .unwrap();
        assert_eq!(out.stdout, b"hi\n");
    });
    let _ = std::process::Command::new("umount").arg(&merged).status();
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}
