//! Garbage collection by disk use, as the kubelet's image GC: least recently used first,
//! never an image in use. On a small tmpfs, so the thresholds mean something.

use std::collections::HashSet;
use std::time::Duration;

use podvisor_image::{ImageStore, NoProgress};

use crate::support::{Layer, Layout, TempDir, require_root};

/// An image of `size` incompressible bytes (its own layer), named `name`.
fn load_random(
    store: &ImageStore,
    tmp: &TempDir,
    name: &str,
    size: usize,
) -> podvisor_image::Image {
    let mut data = vec![0u8; size];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut data))
        .unwrap();
    let dir = tmp.path().join(format!("layout-{name}"));
    Layout::single(
        &dir,
        &[Layer::new().file("data", &data, 0o644).finish()],
        Some(&format!("example.com/gc/{name}:1")),
    );
    store.load(&dir, &NoProgress).unwrap().remove(0)
}

#[test]
fn gc_under_the_high_threshold_does_nothing() {
    let tmp = TempDir::new("gc-none");
    let store = ImageStore::open(tmp.path().join("images")).unwrap();
    load_random(&store, &tmp, "a", 1000);
    let report = store.gc(100, 80, &HashSet::new()).unwrap();
    assert!(
        report.removed.is_empty() && report.wanted == 0,
        "{report:?}"
    );
    assert_eq!(store.list().unwrap().len(), 1);
}

#[test]
#[ignore = "needs root: mounts a tmpfs for the store"]
fn gc_removes_least_recently_used_first_never_in_use() {
    require_root("tmpfs mount");
    let tmp = TempDir::new("gc");
    let mnt = tmp.path().join("fs");
    std::fs::create_dir(&mnt).unwrap();
    let status = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=32m", "tmpfs"])
        .arg(&mnt)
        .status()
        .unwrap();
    assert!(status.success());
    let result = std::panic::catch_unwind(|| {
        let store = ImageStore::open(mnt.join("images")).unwrap();
        let mb = 1 << 20;
        let oldest = load_random(&store, &tmp, "oldest", 2 * mb);
        std::thread::sleep(Duration::from_millis(1100));
        let middle = load_random(&store, &tmp, "middle", 2 * mb);
        std::thread::sleep(Duration::from_millis(1100));
        let newest = load_random(&store, &tmp, "newest", 2 * mb);
        // Each image is ~4 MiB on disk (blob + unpacked) of 32: about 12% each.
        let usage = store.gc(100, 100, &HashSet::new()).unwrap().usage_percent;
        assert!((30..=50).contains(&usage), "usage {usage}%");
        let low = u8::try_from(usage - 5).unwrap();
        let high = u8::try_from(usage).unwrap();
        // The oldest is in use: the next oldest goes, and that is enough.
        let in_use: HashSet<_> = [oldest.id.clone()].into_iter().collect();
        let report = store.gc(high, low, &in_use).unwrap();
        let removed: Vec<_> = report.removed.iter().map(|r| r.id.clone()).collect();
        assert_eq!(removed, std::slice::from_ref(&middle.id), "{report:?}");
        assert!(
            report.freed >= report.wanted && report.wanted > 0,
            "{report:?}"
        );
        let left: Vec<_> = store.list().unwrap().into_iter().map(|i| i.id).collect();
        assert_eq!(left, [newest.id.clone(), oldest.id.clone()]);
        // Marking the oldest used makes the newest the least recently used.
        std::thread::sleep(Duration::from_millis(1100));
        store.mark_used(&oldest.id).unwrap();
        let usage = store.gc(100, 100, &HashSet::new()).unwrap().usage_percent;
        let report = store
            .gc(
                u8::try_from(usage).unwrap(),
                u8::try_from(usage - 5).unwrap(),
                &HashSet::new(),
            )
            .unwrap();
        let removed: Vec<_> = report.removed.iter().map(|r| r.id.clone()).collect();
        assert_eq!(removed, std::slice::from_ref(&newest.id), "{report:?}");
    });
    let _ = std::process::Command::new("umount").arg(&mnt).status();
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}
