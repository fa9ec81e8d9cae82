//! Pull + unpack benchmark (run by `scripts/bench --only image`): a ~50 MB multi-layer image
//! built here is pushed to a local `docker-registry` with `skopeo`, then pulled into a fresh
//! store several times; where containerd's `ctr` (and `containerd`) are installed, the same
//! pull with `ctr image pull --plain-http` against a private containerd, side by side.
//! Prints numbers, never pass/fail. Usage: pull_bench [--quick] [--runs N]
#![allow(missing_docs)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use podvisor_image::{ImageStore, NoProgress, PullOptions, Reference};
use support::{Layer, Layout, OCI_MANIFEST, Registry, TempDir, busybox_layer, desc};

/// Deterministic filler: `incompressible` bytes of xorshift output, then text.
fn filler(seed: u64, incompressible: usize, text: usize) -> Vec<u8> {
    let mut x = seed | 1;
    let mut v = Vec::with_capacity(incompressible + text);
    while v.len() < incompressible {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(incompressible);
    let mut i = 0u64;
    while v.len() < incompressible + text {
        v.extend_from_slice(
            format!("line {i} of seed {seed}: the quick brown fox jumps over the lazy dog\n")
                .as_bytes(),
        );
        i += 1;
    }
    v
}

/// busybox, then `layers` layers of one 7 MB binary-like file and 1,500 small text files.
fn build(dir: &Path, layers: usize) -> support::Built {
    let layout = Layout::new(dir);
    let mut all = vec![busybox_layer()];
    for n in 0..layers {
        let mut l = Layer::new().dir(&format!("layer{n}/"), 0o755).file(
            &format!("layer{n}/blob.bin"),
            &filler(n as u64 + 1, 9 << 20, 0),
            0o644,
        );
        for f in 0..1500 {
            l = l.file(
                &format!("layer{n}/f{f}.txt"),
                &filler((n * 10_000 + f) as u64 + 7, 256, 2048),
                0o644,
            );
        }
        all.push(l.finish());
    }
    let built = layout.image(&all, true, "amd64", &["sh"]);
    layout.index(&[desc(OCI_MANIFEST, &built.manifest)]);
    built
}

/// This process's user and system CPU time (from /proc/self/stat, in ticks of 10 ms).
fn cpu_time() -> (Duration, Duration) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, a)| a);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        Duration::from_millis(
            10 * fields
                .get(i)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0),
        )
    };
    (ticks(11), ticks(12))
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let runs: usize = args
        .iter()
        .position(|a| a == "--runs")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(if quick { 2 } else { 5 });
    let tmp = TempDir::new("bench");
    let layout_dir = tmp.path().join("layout");
    let built = build(&layout_dir, 5);
    let blobs = layout_dir.join("blobs/sha256");
    let compressed: u64 = built
        .layer_digests
        .iter()
        .map(|d| std::fs::metadata(blobs.join(&d[7..])).unwrap().len())
        .sum();
    let registry = Registry::start(None);
    registry.push(&layout_dir, "bench/image:1", false);
    let image = format!("{}/bench/image:1", registry.host());
    println!(
        "image {image}: {} layers, {:.1} MB compressed",
        built.layer_digests.len(),
        compressed as f64 / 1e6
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let reference = Reference::parse(&image).unwrap();
    let mut times = Vec::new();
    let mut user = Vec::new();
    let mut system = Vec::new();
    let mut unpacked = 0;
    for run in 0..runs {
        let dir = tmp.path().join(format!("store{run}"));
        let store = ImageStore::open(&dir).unwrap();
        // Cold page cache is not ours to set; the registry's files are warm for every run.
        let (t, c) = (Instant::now(), cpu_time());
        let report = rt
            .block_on(store.pull(&reference, &PullOptions::default(), &NoProgress))
            .unwrap();
        times.push(t.elapsed());
        let after = cpu_time();
        user.push(after.0 - c.0);
        system.push(after.1 - c.1);
        unpacked = report.image.unpacked_size;
        drop(store);
    }
    // Removed after all runs: ext4 makes creating files right after deleting thousands
    // slow (its allocator checks recently deleted inodes), which would time the deletion.
    for run in 0..runs {
        let _ = std::fs::remove_dir_all(tmp.path().join(format!("store{run}")));
    }
    let p = median(times.clone());
    println!(
        "podvisor pull+unpack: median {:.0} ms over {runs} runs (min {:.0} ms; CPU user {:.0} ms, system {:.0} ms), {:.0} MB/s compressed, {:.1} MB unpacked",
        p.as_secs_f64() * 1e3,
        times.iter().min().unwrap().as_secs_f64() * 1e3,
        median(user).as_secs_f64() * 1e3,
        median(system).as_secs_f64() * 1e3,
        compressed as f64 / 1e6 / p.as_secs_f64(),
        unpacked as f64 / 1e6
    );
    ctr_side_by_side(&tmp, &image, runs, compressed);
}

/// `ctr image pull --plain-http` (fetch + unpack into overlayfs snapshots) against a
/// containerd of its own (root, state and socket in a temporary directory).
fn ctr_side_by_side(tmp: &TempDir, image: &str, runs: usize, compressed: u64) {
    let have = |bin: &str| {
        Command::new("sh")
            .args(["-c", &format!("command -v {bin}")])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if !have("ctr") || !have("containerd") {
        println!(
            "containerd (ctr): not installed; no side-by-side run (apt-get install containerd for one)"
        );
        return;
    }
    if !rustix::process::geteuid().is_root() {
        println!("containerd (ctr): needs root; no side-by-side run");
        return;
    }
    let mut times = Vec::new();
    for run in 0..runs {
        let dir = tmp.path().join(format!("containerd{run}"));
        std::fs::create_dir_all(&dir).unwrap();
        let sock = dir.join("containerd.sock");
        let config = dir.join("config.toml");
        std::fs::write(
            &config,
            format!(
                "version = 2\nroot = \"{0}/root\"\nstate = \"{0}/state\"\n[grpc]\n  address = \"{1}\"\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  disable_apparmor = true\n",
                dir.display(),
                sock.display()
            ),
        )
        .unwrap();
        let mut daemon = Command::new("containerd")
            .arg("--config")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !sock.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(200));
        let t = Instant::now();
        let out = Command::new("ctr")
            .arg("--address")
            .arg(&sock)
            .args(["-n", "bench", "image", "pull", "--plain-http", image])
            .output()
            .unwrap();
        let took = t.elapsed();
        let _ = daemon.kill();
        let _ = daemon.wait();
        let _ = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "grep -o '{0}[^ ]*' /proc/mounts | xargs -r -n1 umount -l",
                dir.display()
            ))
            .status();
        let _ = std::fs::remove_dir_all(&dir);
        if !out.status.success() {
            println!(
                "containerd (ctr): pull failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
            return;
        }
        times.push(took);
    }
    let p = median(times.clone());
    println!(
        "containerd ctr pull (+unpack): median {:.0} ms over {runs} runs (min {:.0} ms), {:.0} MB/s compressed",
        p.as_secs_f64() * 1e3,
        times.iter().min().unwrap().as_secs_f64() * 1e3,
        compressed as f64 / 1e6 / p.as_secs_f64()
    );
}
