//! The store on a full disk: a write that fails says why, the store does not stay poisoned
//! (the database library refuses everything after one I/O error until the file is opened
//! again), and it reopens itself once space is freed. Each test mounts a small tmpfs, so
//! they need root.

use podvisor_store::{Key, Store, StoreError, StoreOptions, Value};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A small tmpfs mounted under a fresh temporary directory; unmounted and removed on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(name: &str, size: &str) -> Tmpfs {
        assert!(
            rustix::process::geteuid().is_root(),
            "needs root: this test is #[ignore]d unless run as root with --include-ignored (it mounts a tmpfs)"
        );
        let dir = std::env::temp_dir().join(format!(
            "podvisor-store-{name}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .subsec_nanos()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let data = std::ffi::CString::new(format!("size={size},mode=0700")).unwrap();
        rustix::mount::mount(
            "tmpfs",
            &dir,
            "tmpfs",
            rustix::mount::MountFlags::empty(),
            Some(data.as_c_str()),
        )
        .unwrap();
        Tmpfs(dir)
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = rustix::mount::unmount(&self.0, rustix::mount::UnmountFlags::DETACH);
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A pod of about 16 KiB.
fn pod(name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": name, "namespace": "default", "uid": format!("uid-{name}") },
        "spec": { "containers": [{ "name": "main", "image": "busybox" }] },
        "blob": "x".repeat(16 << 10),
    })
}

/// Fills the filesystem of `dir` with one file, written until `ENOSPC`.
fn fill(dir: &Path) -> PathBuf {
    use std::io::Write;
    let path = dir.join("filler");
    let mut file = std::fs::File::create(&path).unwrap();
    let chunk = vec![0u8; 4096];
    loop {
        match file.write_all(&chunk) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::StorageFull => break,
            Err(e) => panic!("filling {}: {e}", path.display()),
        }
    }
    path
}

fn options() -> StoreOptions {
    StoreOptions {
        // Every operation after a failure tries to reopen: the test waits for nothing.
        reopen_interval: Duration::ZERO,
        ..StoreOptions::default()
    }
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn a_write_on_a_full_disk_fails_with_enospc_and_the_store_reopens_itself_once_space_is_freed() {
    let fs = Tmpfs::mount("full", "4m");
    let path = fs.0.join("store.redb");
    let store = Store::open_with(&path, options()).unwrap();
    let first = Key::new("pods", "default", "first");
    store.create(&first, pod("first")).unwrap();
    let filler = fill(&fs.0);

    // Writes until the file needs a page the filesystem does not have.
    let mut written = vec![first.clone()];
    let err = (0..1000)
        .find_map(|i| {
            let key = Key::new("pods", "default", format!("p{i}"));
            match store.create(&key, pod(&format!("p{i}"))) {
                Ok(_) => {
                    written.push(key);
                    None
                }
                Err(e) => Some(e),
            }
        })
        .expect("a full filesystem refuses a write");
    assert!(
        matches!(err, StoreError::Io { no_space: true, .. }),
        "a clear error naming the cause, got {err:?}"
    );
    let text = err.to_string();
    assert!(text.contains("No space left on device"), "{text}");
    assert!(text.contains(&path.display().to_string()), "{text}");
    let rv = store.resource_version();

    // While the disk is full, writes keep failing with the first failure (never the
    // library's "Previous I/O error occurred"), and the store says it cannot write.
    let again = store
        .create(&Key::new("pods", "default", "again"), pod("again"))
        .unwrap_err();
    assert!(
        matches!(again, StoreError::Io { no_space: true, .. }),
        "{again:?}"
    );
    assert!(!again.to_string().contains("Previous I/O"), "{again}");
    assert!(store.check_writable().is_err());
    assert!(store.failure().is_some());

    // Space is freed: the store reopens by itself and writes again, keeping every object
    // and the resourceVersion.
    std::fs::remove_file(filler).unwrap();
    store.check_writable().unwrap();
    assert!(store.failure().is_none());
    for key in &written {
        assert!(store.get(key).unwrap().is_some(), "{key} kept");
    }
    let after = Key::new("pods", "default", "after");
    let created = store.create(&after, pod("after")).unwrap();
    assert_eq!(created["metadata"]["resourceVersion"], (rv + 1).to_string());

    // And what it wrote is in the file.
    drop(store);
    let store = Store::open(&path).unwrap();
    assert!(store.get(&after).unwrap().is_some());
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn a_read_after_the_failure_reopens_the_store_once_space_is_freed() {
    let fs = Tmpfs::mount("read", "4m");
    let path = fs.0.join("store.redb");
    let store = Store::open_with(&path, options()).unwrap();
    let filler = fill(&fs.0);
    let err = (0..1000)
        .find_map(|i| {
            let key = Key::new("pods", "default", format!("p{i}"));
            store.create(&key, pod(&format!("p{i}"))).err()
        })
        .expect("a full filesystem refuses a write");
    assert!(matches!(err, StoreError::Io { .. }), "{err:?}");
    std::fs::remove_file(filler).unwrap();
    // No write comes: a list is enough to bring the store back.
    let (namespaces, _) = store.list("namespaces", None).unwrap();
    assert_eq!(namespaces.len(), 2);
    assert!(store.failure().is_none());
}
