//! The second run of the scenarios, under `podvisor serve --runtime oci` (issue 8): real runc
//! containers, each pod with its own network namespace and pod IP on the CNI bridge. How
//! section 0 of `conformance-examples.md` maps onto it:
//!
//! - **Image (0.2).** `image: busybox` is pulled as the kubelet pulls it: no tag means
//!   `imagePullPolicy: Always`, so every start pulls. No public registry is reachable, so the
//!   run starts Debian's `docker-registry` on 127.0.0.1, pushes to it (skopeo) the image of
//!   `scripts/busybox-image --with-python` as `library/busybox:latest` (busybox-static plus this
//!   machine's python3 with its standard library, the GNU coreutils of 0.2 and dash as `sh`),
//!   and gives `serve` a `--registry-config` whose `mirrors` send `docker.io` there, as a
//!   containerd `hosts.toml` mirror would. `podvisor image pull` fetches it once before
//!   `serve` starts ([`pre_pull`]), so every start finds the layers stored and only asks for
//!   the manifest; [`pull_costs`] prints what the pulls took. The
//!   image's python3 ends on SIGTERM also as PID 1, as the agnhost servers it stands in for
//!   do (see the script); without that a deleted or liveness-killed server would wait out its
//!   grace period.
//! - **Network (0.2).** Servers bound 127.0.0.1 and probes and hooks set `host: 127.0.0.1`
//!   only because the process runtime's pod IP is the host's. Here each pod has its own
//!   network namespace, where the kubelet's 127.0.0.1 would be the node's loopback, so
//!   [`adapt`] turns the manifests back into upstream's form: a container's own command binds
//!   `0.0.0.0` (the only 127.0.0.1 in containers' commands is the address their servers bind),
//!   httpGet/tcpSocket probes lose `host` (they dial the pod IP: the pod network is tested),
//!   and hooks that call the observer pod (46–51, 80) dial the observer's pod IP, as upstream's
//!   `targetIP`. Exec probes and hooks that dial 127.0.0.1 inside their own container are
//!   unchanged.
//! - **Scratch directory (0.3).** The emptyDir lives under the pod's directory on the host and
//!   is bind-mounted into the containers, so the harness reads `ev.log` there as in the
//!   process run; `/tmp/kpl` on the host is not this run's (the mount point is inside the
//!   container's root).
//! - **Process model (0.5).** Each container is PID 1 of its own PID namespace; the IDLE and
//!   DEAF scripts behave the same, and the end of a container is the end of its namespace.

use crate::harness::Server;
use podvisor_testkit::registry::Registry;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The script that writes the image (and keys the cached copy).
const IMAGE_SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/busybox-image");

/// The OCI layout of `scripts/busybox-image --with-python`, built once per target directory
/// (again when the script changes).
fn busybox_layout() -> PathBuf {
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("conformance-busybox");
    let layout = cache.join("layout");
    let stamp = cache.join("script");
    let script = std::fs::read(IMAGE_SCRIPT).expect("scripts/busybox-image");
    if std::fs::read(&stamp).ok().as_ref() == Some(&script) && layout.join("index.json").exists() {
        return layout;
    }
    let _ = std::fs::remove_dir_all(&cache);
    std::fs::create_dir_all(&cache).unwrap();
    let started = Instant::now();
    let out = Command::new(IMAGE_SCRIPT)
        .arg("--with-python")
        .arg(&layout)
        .output()
        .expect("scripts/busybox-image runs");
    assert!(
        out.status.success(),
        "scripts/busybox-image --with-python: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(&stamp, script).unwrap();
    eprintln!(
        "built the conformance busybox image in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    layout
}

/// A registry under `dir` holding the image as `library/busybox:latest` (and `:1.36`), and the
/// `--registry-config` that makes it `docker.io`'s mirror.
pub(crate) fn busybox_mirror(dir: &Path) -> (Registry, PathBuf) {
    for tool in [
        "/usr/sbin/runc",
        "/usr/lib/cni/bridge",
        "/bin/busybox",
        "/bin/dash",
    ] {
        assert!(
            Path::new(tool).exists(),
            "{tool} is missing: run scripts/install-test-deps as root"
        );
    }
    let layout = busybox_layout();
    let registry = Registry::start(&dir.join("registry"), None);
    // `busybox`, and the tag the image-update scenarios (8c, 17b) patch in: the same image.
    let new_tag = crate::init_sidecar::NEW_IMAGE.rsplit(':').next().unwrap();
    for tag in ["latest", new_tag] {
        registry.push(&layout, &format!("library/busybox:{tag}"), &[], None);
    }
    let config = dir.join("registry-config.json");
    std::fs::write(
        &config,
        format!(
            r#"{{"mirrors": {{"docker.io": ["http://{}"]}}}}"#,
            registry.host()
        ),
    )
    .unwrap();
    (registry, config)
}

/// `podvisor image pull busybox` through the mirror into the state directory's store, before
/// `serve` starts: the node has the image, as a node that ran busybox before has, and each
/// start's pull (`Always`) then only checks the manifest. The first pull unpacks the layer,
/// which would otherwise hold every scenario's first start behind it (pulls are serial).
pub(crate) fn pre_pull(state: &Path, registry_config: &Path) {
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_podvisor"))
        .args(["image", "pull", "busybox", "--quiet", "--registry-config"])
        .arg(registry_config)
        .arg("--state-dir")
        .arg(state)
        .output()
        .expect("podvisor image pull runs");
    assert!(
        out.status.success(),
        "podvisor image pull busybox: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!(
        "pulled busybox through the mirror in {:.1} s: {}",
        started.elapsed().as_secs_f64(),
        String::from_utf8_lossy(&out.stdout).trim()
    );
}

/// The manifest (YAML) in upstream's network form, as JSON (see the module docs); `peer` is
/// the observer's pod IP for a pod whose hooks call it.
pub(crate) fn adapt(manifest: &str, peer: Option<&str>) -> String {
    let mut pod: Value = serde_saphyr::from_str(manifest).expect("a manifest");
    for list in ["initContainers", "containers"] {
        let Some(containers) = pod["spec"][list].as_array_mut() else {
            continue;
        };
        for c in containers {
            for key in ["command", "args"] {
                replace_in_strings(&mut c[key], "127.0.0.1", "0.0.0.0");
            }
            for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
                for handler in ["httpGet", "tcpSocket"] {
                    remove_loopback_host(&mut c[probe][handler]);
                }
            }
            for hook in ["postStart", "preStop"] {
                let h = &mut c["lifecycle"][hook];
                if h.is_null() {
                    continue;
                }
                match peer {
                    Some(ip) => {
                        if h["httpGet"]["host"] == "127.0.0.1" {
                            h["httpGet"]["host"] = Value::from(ip);
                        }
                        replace_in_strings(&mut h["exec"]["command"], "127.0.0.1", ip);
                    }
                    None => remove_loopback_host(&mut h["httpGet"]),
                }
            }
            // Indexing an object with a missing key made it Null: drop what was not there.
            prune_nulls(c);
        }
    }
    serde_json::to_string(&pod).unwrap()
}

fn replace_in_strings(v: &mut Value, from: &str, to: &str) {
    if let Some(items) = v.as_array_mut() {
        for item in items {
            if let Some(s) = item.as_str() {
                *item = Value::from(s.replace(from, to));
            }
        }
    }
}

fn remove_loopback_host(handler: &mut Value) {
    if let Some(h) = handler.as_object_mut()
        && h.get("host").is_some_and(|v| v == "127.0.0.1")
    {
        h.remove("host");
    }
}

/// Removes the `null`s (and the objects left empty by them) that indexing added.
fn prune_nulls(v: &mut Value) {
    if let Some(map) = v.as_object_mut() {
        for child in map.values_mut() {
            prune_nulls(child);
        }
        map.retain(|_, child| {
            !(child.is_null() || child.as_object().is_some_and(serde_json::Map::is_empty))
        });
    }
}

/// What the image pulls of the run took, from the `Pulled` events (Go durations): how many,
/// the median and the slowest, with and without the wait for the node's one-at-a-time pulls.
pub(crate) fn pull_costs(srv: &Server) -> String {
    let out = srv.kubectl(
        &[
            "get",
            "events",
            "--field-selector",
            "reason=Pulled",
            "-o",
            "json",
        ],
        None,
    );
    let events: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let mut pull = Vec::new();
    let mut total = Vec::new();
    for e in events["items"].as_array().into_iter().flatten() {
        let count = e["count"].as_u64().unwrap_or(1);
        let msg = e["message"].as_str().unwrap_or_default();
        // `Successfully pulled image "busybox" in 12.3ms (15.1ms including waiting). ...`
        let Some(rest) = msg.split("\" in ").nth(1) else {
            continue;
        };
        let mut words = rest.split(' ');
        let p = words.next().and_then(go_duration);
        let t = words
            .next()
            .and_then(|w| go_duration(w.trim_start_matches('(')));
        if let (Some(p), Some(t)) = (p, t) {
            // An event seen `count` times stands for that many pulls of the same timing.
            for _ in 0..count {
                pull.push(p);
                total.push(t);
            }
        }
    }
    if pull.is_empty() {
        return "no Pulled events".to_string();
    }
    let stats = |v: &mut Vec<Duration>| {
        v.sort();
        format!(
            "p50 {:.1} ms, max {:.1} ms",
            v[v.len() / 2].as_secs_f64() * 1000.0,
            v[v.len() - 1].as_secs_f64() * 1000.0
        )
    };
    format!(
        "{} pulls of busybox: {}; including waiting {}",
        pull.len(),
        stats(&mut pull),
        stats(&mut total)
    )
}

fn go_duration(text: &str) -> Option<Duration> {
    podvisor_api::gotext::parse_duration(text)
}
