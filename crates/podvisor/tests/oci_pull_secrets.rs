//! `imagePullSecrets` under `podvisor serve --runtime oci`: an image on a local
//! `docker-registry` behind basic auth is pulled only with the pod's
//! `kubernetes.io/dockerconfigjson` Secret (made by `kubectl create secret docker-registry`).
//!
//! Needs root, runc, the CNI plugins, busybox-static, docker-registry and skopeo
//! (`scripts/install-test-deps`).

use crate::serve_common::ServeCtx;
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Registry(Child);

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_for(ctx: &ServeCtx, what: &str, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "timed out waiting for {what}:\n{}",
            ctx.last_logs(1)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn pod(name: &str, image: &str, secret: Option<&str>, marker: &str) -> String {
    pod_in("default", name, image, secret, "Always", marker)
}

fn pod_in(
    namespace: &str,
    name: &str,
    image: &str,
    secret: Option<&str>,
    policy: &str,
    marker: &str,
) -> String {
    let pull = secret.map_or(String::new(), |s| {
        format!("  imagePullSecrets: [{{name: {s}}}]\n")
    });
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: {namespace}}}\nspec:\n{pull}  restartPolicy: Never\n  containers:\n  - name: app\n    image: {image}\n    imagePullPolicy: {policy}\n    command: [sh, -c, 'echo pulled; : {marker}']\n"
    )
}

/// A `docker-registry` on 127.0.0.1 that wants user `puller`, password `let-me-in`, with
/// busybox pushed to it as `private/busybox:1`; returns it with the image's name.
fn private_registry(ctx: &ServeCtx) -> (Registry, String) {
    for tool in [
        "/usr/sbin/runc",
        "/usr/bin/docker-registry",
        "/usr/bin/skopeo",
        "/bin/busybox",
    ] {
        assert!(
            std::path::Path::new(tool).exists(),
            "{tool} is missing: scripts/install-test-deps"
        );
    }
    let root = ctx.path("registry");
    std::fs::create_dir_all(&root).unwrap();
    let hash = bcrypt::hash("let-me-in", 5).unwrap();
    std::fs::write(root.join("htpasswd"), format!("puller:{hash}\n")).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    std::fs::write(
        root.join("config.yml"),
        format!(
            "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\nauth:\n  htpasswd:\n    realm: podvisor-test\n    path: {}\n",
            root.join("data").display(),
            root.join("htpasswd").display()
        ),
    )
    .unwrap();
    let registry = Registry(
        Command::new("/usr/bin/docker-registry")
            .arg("serve")
            .arg(root.join("config.yml"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let started = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the registry does not listen"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let layout = ctx.path("layout");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/busybox-image");
    let made = Command::new(script).arg(&layout).output().unwrap();
    assert!(made.status.success(), "{made:?}");
    let image = format!("127.0.0.1:{port}/private/busybox:1");
    let pushed = Command::new("/usr/bin/skopeo")
        .args([
            "--insecure-policy",
            "copy",
            "-q",
            "--dest-tls-verify=false",
            "--dest-creds=puller:let-me-in",
        ])
        .arg(format!("oci:{}", layout.display()))
        .arg(format!("docker://{image}"))
        .output()
        .unwrap();
    assert!(pushed.status.success(), "{pushed:?}");

    (registry, image)
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn image_pull_secrets_authenticate_pulls() {
    let mut ctx = ServeCtx::new("ps");
    let (_registry, image) = private_registry(&ctx);
    let server = image.split('/').next().unwrap().to_owned();
    ctx.start(&["--runtime", "oci"]);
    let m = ctx.marker.clone();
    let file = ctx.manifest("anon", &pod("anon", &image, None, &m));
    ctx.kubectl_ok(&["create", "-f", file.to_str().unwrap()]);
    wait_for(&ctx, "the anonymous pull to fail", || {
        let r = ctx.kubectl_ok(&[
            "get",
            "pod",
            "anon",
            "-o",
            "jsonpath={.status.containerStatuses[0].state.waiting.reason}",
        ]);
        r == "ErrImagePull" || r == "ImagePullBackOff"
    });
    ctx.kubectl_ok(&[
        "create",
        "secret",
        "docker-registry",
        "regcred",
        &format!("--docker-server={server}"),
        "--docker-username=puller",
        "--docker-password=let-me-in",
    ]);
    let file = ctx.manifest("authed", &pod("authed", &image, Some("regcred"), &m));
    ctx.kubectl_ok(&["create", "-f", file.to_str().unwrap()]);
    wait_for(&ctx, "the pull with the Secret to succeed", || {
        ctx.kubectl_ok(&["get", "pod", "authed", "-o", "jsonpath={.status.phase}"]) == "Succeeded"
    });
    let logs = ctx.kubectl_ok(&["logs", "authed"]);
    assert_eq!(logs.trim(), "pulled");
    // No password in events or serve's log.
    let events = ctx.kubectl_ok(&["get", "events", "-o", "json"]);
    assert!(!events.contains("let-me-in"));
    assert!(ctx.grep_logs("let-me-in").is_empty());
    ctx.kubectl_ok(&["delete", "pod", "anon", "authed", "--grace-period=1"]);
}

/// The events of pod `name` in `namespace`: (reason, message) in order.
fn pod_events(ctx: &ServeCtx, namespace: &str, name: &str) -> Vec<(String, String)> {
    let out = ctx.kubectl_ok(&[
        "get",
        "events",
        "-n",
        namespace,
        "--field-selector",
        &format!("involvedObject.name={name}"),
        "-o",
        "json",
    ]);
    let list: serde_json::Value = serde_json::from_str(&out).unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["reason"].as_str().unwrap_or_default().to_owned(),
                e["message"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn waiting_reason(ctx: &ServeCtx, namespace: &str, name: &str) -> String {
    ctx.kubectl_ok(&[
        "get",
        "pod",
        "-n",
        namespace,
        name,
        "-o",
        "jsonpath={.status.containerStatuses[0].state.waiting.reason}",
    ])
}

fn phase(ctx: &ServeCtx, namespace: &str, name: &str) -> String {
    ctx.kubectl_ok(&[
        "get",
        "pod",
        "-n",
        namespace,
        name,
        "-o",
        "jsonpath={.status.phase}",
    ])
}

/// 1.35's `KubeletEnsureSecretPulledImages` (beta, on): a private image pod A pulled with its
/// Secret is not run by pod B, which has no credentials, under `IfNotPresent`: B pulls with
/// its own (none) and gets `ErrImagePull`. Pod C with A's Secret, and pod D in another
/// namespace with a Secret of the same credentials, run it without a pull; a pod without
/// credentials under `Never` gets `ErrImageNeverPull`. The records
/// survive a restart of `serve`: pod E, without credentials, is refused after it too.
#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn a_private_image_runs_only_for_pods_with_its_credentials() {
    let mut ctx = ServeCtx::new("pp");
    let (_registry, image) = private_registry(&ctx);
    let server = image.split('/').next().unwrap().to_owned();
    ctx.start(&["--runtime", "oci"]);
    let m = ctx.marker.clone();
    let create = |ctx: &ServeCtx, ns: &str, name: &str, secret: Option<&str>| {
        let file = ctx.manifest(
            &format!("{ns}-{name}"),
            &pod_in(ns, name, &image, secret, "IfNotPresent", &m),
        );
        ctx.kubectl_ok(&["create", "-f", file.to_str().unwrap()]);
    };
    let secret = |ctx: &ServeCtx, ns: &str, name: &str| {
        ctx.kubectl_ok(&[
            "create",
            "secret",
            "docker-registry",
            name,
            "-n",
            ns,
            &format!("--docker-server={server}"),
            "--docker-username=puller",
            "--docker-password=let-me-in",
        ]);
    };
    secret(&ctx, "default", "regcred");
    create(&ctx, "default", "a", Some("regcred"));
    wait_for(&ctx, "pod a to pull with its Secret and run", || {
        phase(&ctx, "default", "a") == "Succeeded"
    });
    let pulled = |events: &[(String, String)]| events.iter().any(|(r, _)| r == "Pulling");
    assert!(pulled(&pod_events(&ctx, "default", "a")));

    create(&ctx, "default", "b", None);
    wait_for(&ctx, "pod b, without credentials, to fail its pull", || {
        matches!(
            waiting_reason(&ctx, "default", "b").as_str(),
            "ErrImagePull" | "ImagePullBackOff"
        )
    });
    assert_eq!(phase(&ctx, "default", "b"), "Pending");
    let events = pod_events(&ctx, "default", "b");
    assert!(pulled(&events), "pod b pulls again: {events:?}");
    assert!(
        events.iter().any(|(r, msg)| r == "Failed"
            && msg.starts_with(&format!("Failed to pull image \"{image}\""))),
        "{events:?}"
    );

    create(&ctx, "default", "c", Some("regcred"));
    wait_for(&ctx, "pod c, with pod a's Secret, to run", || {
        phase(&ctx, "default", "c") == "Succeeded"
    });
    let present = format!(
        "Container image \"{image}\" already present on machine and can be accessed by the pod"
    );
    let events = pod_events(&ctx, "default", "c");
    assert!(!pulled(&events), "pod c pulls nothing: {events:?}");
    assert!(
        events
            .iter()
            .any(|(r, msg)| r == "Pulled" && *msg == present),
        "{events:?}"
    );

    // Under `Never` the image is as good as absent for a pod without the credentials.
    let file = ctx.manifest(
        "never",
        &pod_in("default", "never", &image, None, "Never", &m),
    );
    ctx.kubectl_ok(&["create", "-f", file.to_str().unwrap()]);
    wait_for(&ctx, "pod never to be refused the image", || {
        waiting_reason(&ctx, "default", "never") == "ErrImageNeverPull"
    });

    // Another Secret object with the same credentials matches by their hash.
    ctx.kubectl_ok(&["create", "namespace", "other"]);
    secret(&ctx, "other", "copy");
    create(&ctx, "other", "d", Some("copy"));
    wait_for(&ctx, "pod d, with the same credentials, to run", || {
        phase(&ctx, "other", "d") == "Succeeded"
    });
    let events = pod_events(&ctx, "other", "d");
    assert!(!pulled(&events), "pod d pulls nothing: {events:?}");

    // The records are the state directory's own, private, and outlive serve.
    let records = ctx.state().join("images/pull-records/pulled");
    let files: Vec<_> = std::fs::read_dir(&records)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&files[0]), 0o600);
    assert_eq!(mode(&records), 0o700);
    let record = std::fs::read_to_string(&files[0]).unwrap();
    assert!(!record.contains("let-me-in"), "no password in {record}");
    ctx.stop(Duration::from_secs(30));
    ctx.start(&["--runtime", "oci"]);
    create(&ctx, "default", "e", None);
    wait_for(
        &ctx,
        "pod e, without credentials, to fail after a restart",
        || {
            matches!(
                waiting_reason(&ctx, "default", "e").as_str(),
                "ErrImagePull" | "ImagePullBackOff"
            )
        },
    );
    ctx.kubectl_ok(&[
        "delete",
        "pod",
        "a",
        "b",
        "c",
        "e",
        "never",
        "--grace-period=1",
    ]);
    ctx.kubectl_ok(&["delete", "pod", "-n", "other", "d", "--grace-period=1"]);
}
