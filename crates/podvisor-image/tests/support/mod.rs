//! Test (and bench) support: images built here as OCI layouts, a local `docker-registry`,
//! `skopeo` pushes, temporary directories, the root guard.
#![allow(dead_code, missing_docs)]

use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};

pub fn sha256(data: &[u8]) -> String {
    let h = Sha256::digest(data);
    let mut s = String::from("sha256:");
    for b in h {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// Panics unless root: tests that need it are `#[ignore]`d and must not pass by skipping.
pub fn require_root(what: &str) {
    assert!(rustix::process::geteuid().is_root(), "needs root: {what}");
}

/// A directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(prefix: &str) -> TempDir {
        let mut bytes = [0u8; 6];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes))
            .unwrap();
        let name: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let p = std::env::temp_dir().join(format!("podvisor-image-{prefix}-{name}"));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A layer's tar stream, built entry by entry (raw names allowed: the escapes are tests).
pub struct Layer {
    b: tar::Builder<Vec<u8>>,
    pub mtime: u64,
}

impl Default for Layer {
    fn default() -> Self {
        Layer::new()
    }
}

impl Layer {
    pub fn new() -> Layer {
        let mut b = tar::Builder::new(Vec::new());
        b.mode(tar::HeaderMode::Complete);
        Layer {
            b,
            mtime: 1_700_000_000,
        }
    }

    fn header(&self, name: &[u8], kind: tar::EntryType, mode: u32, size: u64) -> tar::Header {
        let mut h = tar::Header::new_gnu();
        // Written raw: tar-rs refuses `..`, and the point is to send it.
        let n = &mut h.as_old_mut().name;
        assert!(name.len() < n.len(), "name too long for the test header");
        n[..name.len()].copy_from_slice(name);
        h.set_entry_type(kind);
        h.set_mode(mode);
        h.set_size(size);
        h.set_mtime(self.mtime);
        h.set_uid(0);
        h.set_gid(0);
        h
    }

    fn append(&mut self, mut h: tar::Header, data: &[u8]) {
        h.set_cksum();
        self.b.append(&h, data).unwrap();
    }

    pub fn dir(mut self, name: &str, mode: u32) -> Layer {
        let h = self.header(name.as_bytes(), tar::EntryType::Directory, mode, 0);
        self.append(h, &[]);
        self
    }

    pub fn file(mut self, name: &str, data: &[u8], mode: u32) -> Layer {
        let h = self.header(
            name.as_bytes(),
            tar::EntryType::Regular,
            mode,
            data.len() as u64,
        );
        self.append(h, data);
        self
    }

    pub fn file_owned(
        mut self,
        name: &str,
        data: &[u8],
        mode: u32,
        uid: u64,
        gid: u64,
        mtime: u64,
    ) -> Layer {
        let mut h = self.header(
            name.as_bytes(),
            tar::EntryType::Regular,
            mode,
            data.len() as u64,
        );
        h.set_uid(uid);
        h.set_gid(gid);
        h.set_mtime(mtime);
        self.append(h, data);
        self
    }

    pub fn symlink(mut self, name: &str, target: &str) -> Layer {
        let mut h = self.header(name.as_bytes(), tar::EntryType::Symlink, 0o777, 0);
        let l = &mut h.as_old_mut().linkname;
        l[..target.len()].copy_from_slice(target.as_bytes());
        self.append(h, &[]);
        self
    }

    pub fn hardlink(mut self, name: &str, target: &str) -> Layer {
        let mut h = self.header(name.as_bytes(), tar::EntryType::Link, 0o644, 0);
        let l = &mut h.as_old_mut().linkname;
        l[..target.len()].copy_from_slice(target.as_bytes());
        self.append(h, &[]);
        self
    }

    pub fn char_dev(mut self, name: &str, major: u32, minor: u32) -> Layer {
        let mut h = self.header(name.as_bytes(), tar::EntryType::Char, 0o666, 0);
        h.set_device_major(major).unwrap();
        h.set_device_minor(minor).unwrap();
        self.append(h, &[]);
        self
    }

    /// A regular file with extended attributes (PAX `SCHILY.xattr.*` records, as docker and
    /// containerd write them).
    pub fn file_xattrs(mut self, name: &str, data: &[u8], xattrs: &[(&str, &[u8])]) -> Layer {
        let pax: Vec<(String, &[u8])> = xattrs
            .iter()
            .map(|(k, v)| (format!("SCHILY.xattr.{k}"), *v))
            .collect();
        self.b
            .append_pax_extensions(pax.iter().map(|(k, v)| (k.as_str(), *v)))
            .unwrap();
        self.file(name, data, 0o644)
    }

    /// An empty regular file named `name` (whiteouts, opaque markers are such).
    pub fn marker(self, name: &str) -> Layer {
        self.file(name, b"", 0o644)
    }

    pub fn finish(self) -> Vec<u8> {
        self.b.into_inner().unwrap()
    }
}

pub fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// The busybox-static rootfs layer: `/bin/busybox` and a few applet links.
pub fn busybox_layer() -> Vec<u8> {
    let busybox =
        std::fs::read("/bin/busybox").expect("Debian's busybox-static (/bin/busybox) is required");
    let mut l = Layer::new()
        .dir("bin/", 0o755)
        .file("bin/busybox", &busybox, 0o755);
    for applet in ["sh", "ls", "cat", "echo", "true"] {
        l = l.symlink(&format!("bin/{applet}"), "busybox");
    }
    l.dir("etc/", 0o755)
        .file("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n", 0o644)
        .dir("tmp/", 0o1777)
        .finish()
}

/// A descriptor as JSON.
pub fn desc(media_type: &str, data: &[u8]) -> serde_json::Value {
    serde_json::json!({"mediaType": media_type, "digest": sha256(data), "size": data.len()})
}

pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";

/// An OCI image layout directory being written.
pub struct Layout {
    pub dir: PathBuf,
}

/// One image written into a layout.
#[derive(Clone, Debug)]
pub struct Built {
    pub manifest: Vec<u8>,
    pub manifest_digest: String,
    pub config_digest: String,
    pub layer_digests: Vec<String>,
    pub diff_ids: Vec<String>,
}

impl Layout {
    pub fn new(dir: &Path) -> Layout {
        std::fs::create_dir_all(dir.join("blobs/sha256")).unwrap();
        std::fs::write(dir.join("oci-layout"), br#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
        Layout {
            dir: dir.to_owned(),
        }
    }

    pub fn blob(&self, data: &[u8]) -> String {
        let d = sha256(data);
        std::fs::write(self.dir.join("blobs/sha256").join(&d[7..]), data).unwrap();
        d
    }

    /// Writes config, layers (gzip-compressed when `gzip`) and manifest; not the index.
    pub fn image(&self, layers: &[Vec<u8>], gzip_layers: bool, arch: &str, cmd: &[&str]) -> Built {
        let compress = |l: &[u8]| {
            if gzip_layers {
                (gzip(l), "application/vnd.oci.image.layer.v1.tar+gzip")
            } else {
                (l.to_vec(), "application/vnd.oci.image.layer.v1.tar")
            }
        };
        self.image_with(layers, compress, arch, cmd)
    }

    /// As [`Layout::image`], each layer compressed by `compress` (blob, media type).
    pub fn image_with(
        &self,
        layers: &[Vec<u8>],
        compress: impl Fn(&[u8]) -> (Vec<u8>, &'static str),
        arch: &str,
        cmd: &[&str],
    ) -> Built {
        let diff_ids: Vec<String> = layers.iter().map(|l| sha256(l)).collect();
        let config = serde_json::json!({
            "architecture": arch,
            "os": "linux",
            "config": {
                "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
                "Cmd": cmd,
                "WorkingDir": "/",
            },
            "rootfs": {"type": "layers", "diff_ids": diff_ids},
            "history": [{"created_by": "podvisor-image tests"}],
        });
        let config = serde_json::to_vec(&config).unwrap();
        let config_digest = self.blob(&config);
        let mut layer_descs = Vec::new();
        let mut layer_digests = Vec::new();
        for l in layers {
            let (data, mt) = compress(l);
            layer_digests.push(self.blob(&data));
            layer_descs.push(desc(mt, &data));
        }
        let manifest = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": desc("application/vnd.oci.image.config.v1+json", &config),
            "layers": layer_descs,
        });
        let manifest = serde_json::to_vec(&manifest).unwrap();
        let manifest_digest = self.blob(&manifest);
        Built {
            manifest,
            manifest_digest,
            config_digest,
            layer_digests,
            diff_ids,
        }
    }

    /// `index.json` naming these manifests (with an optional ref name each).
    pub fn index(&self, entries: &[serde_json::Value]) {
        let index =
            serde_json::json!({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries});
        std::fs::write(
            self.dir.join("index.json"),
            serde_json::to_vec(&index).unwrap(),
        )
        .unwrap();
    }

    /// One image, the layout's only entry, named `ref_name` (if any).
    pub fn single(dir: &Path, layers: &[Vec<u8>], ref_name: Option<&str>) -> (Layout, Built) {
        let layout = Layout::new(dir);
        let built = layout.image(layers, true, "amd64", &["sh"]);
        let mut d = desc(OCI_MANIFEST, &built.manifest);
        if let Some(n) = ref_name {
            d["annotations"] = serde_json::json!({"org.opencontainers.image.ref.name": n});
        }
        layout.index(&[d]);
        (layout, built)
    }
}

/// `tar -C dir -cf out .` (an OCI layout archive), with the tar crate.
pub fn tar_dir(dir: &Path, out: &Path) {
    let f = std::fs::File::create(out).unwrap();
    let mut b = tar::Builder::new(f);
    b.append_dir_all(".", dir).unwrap();
    b.finish().unwrap();
}

/// A `docker-registry` (distribution v2) on 127.0.0.1 (`podvisor_testkit::registry`), its
/// storage in a temporary directory, stopped on drop.
pub struct Registry {
    inner: podvisor_testkit::registry::Registry,
    pub port: u16,
    pub root: TempDir,
    pub creds: Option<(String, String)>,
}

impl Registry {
    pub fn start(creds: Option<(&str, &str)>) -> Registry {
        let root = TempDir::new("registry");
        let htpasswd =
            creds.map(|(user, pass)| format!("{user}:{}", bcrypt::hash(pass, 5).unwrap()));
        let inner = podvisor_testkit::registry::Registry::start(root.path(), htpasswd.as_deref());
        Registry {
            port: inner.port,
            inner,
            root,
            creds: creds.map(|(u, p)| (u.to_owned(), p.to_owned())),
        }
    }

    pub fn host(&self) -> String {
        self.inner.host()
    }

    /// `skopeo copy [--all] oci:LAYOUT docker://127.0.0.1:PORT/NAME`.
    pub fn push(&self, layout: &Path, name: &str, all: bool) {
        self.push_with(layout, name, if all { &["--all"] } else { &[] });
    }

    /// `skopeo copy EXTRA… oci:LAYOUT docker://127.0.0.1:PORT/NAME`.
    pub fn push_with(&self, layout: &Path, name: &str, extra: &[&str]) {
        let creds = self.creds.as_ref().map(|(u, p)| (u.as_str(), p.as_str()));
        self.inner.push(layout, name, extra, creds);
    }

    /// Where the registry keeps a blob (to corrupt it).
    pub fn blob_data(&self, digest: &str) -> PathBuf {
        self.inner.blob_data(digest)
    }
}
