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
    let pull = secret.map_or(String::new(), |s| {
        format!("  imagePullSecrets: [{{name: {s}}}]\n")
    });
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n{pull}  restartPolicy: Never\n  containers:\n  - name: app\n    image: {image}\n    imagePullPolicy: Always\n    command: [sh, -c, 'echo pulled; : {marker}']\n"
    )
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn image_pull_secrets_authenticate_pulls() {
    let mut ctx = ServeCtx::new("ps");
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
    // A registry that wants user `puller`, password `let-me-in`.
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
    let _registry = Registry(
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
        &format!("--docker-server=127.0.0.1:{port}"),
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
