//! What a new user meets first (issue 11 §3): `version`, shell completions, and a clear
//! refusal with exit 2 when `run` or `serve` cannot make cgroups (not root, nothing
//! delegated) instead of retrying a `Permission denied` forever.

use std::process::{Command, Output, Stdio};

fn podvisor(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_podvisor"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn version_names_the_kubernetes_release() {
    let out = podvisor(&["version"]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with(&format!("podvisor {}", env!("CARGO_PKG_VERSION")))
            && text.contains("v1.35"),
        "{text}"
    );
    let flag = podvisor(&["--version"]);
    assert!(String::from_utf8_lossy(&flag.stdout).starts_with("podvisor "));
}

#[test]
fn completions_are_valid_shell() {
    let out = podvisor(&["completion", "bash"]);
    assert!(out.status.success(), "{out:?}");
    let script = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        script.contains("serve") && script.contains("simulate"),
        "{script}"
    );
    // The internal shim is no command a user types (issue 33).
    assert!(!script.contains("shim"), "{script}");
    let mut bash = Command::new("bash")
        .arg("-n")
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    bash.stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    assert!(bash.wait().unwrap().success(), "bash -n refused the script");
    for shell in ["zsh", "fish"] {
        let out = podvisor(&["completion", shell]);
        assert!(
            out.status.success() && !out.stdout.is_empty(),
            "{shell}: {out:?}"
        );
    }
    let bad = podvisor(&["completion", "cmd"]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
#[ignore = "needs root (to switch to nobody): run as root with --include-ignored (scripts/test does)"]
fn without_root_run_and_serve_say_what_they_need_and_exit_2() {
    assert!(
        rustix::process::geteuid().is_root(),
        "needs root: this test is #[ignore]d unless run as root with --include-ignored"
    );
    let dir = std::env::temp_dir().join(format!("pv-first-hour-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let manifest = dir.join("pod.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - {name: c, image: x, command: [\"true\"]}\n",
    )
    .unwrap();
    let state = dir.join("state");
    std::fs::create_dir(&state).unwrap();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    rustix::fs::chown(&state, Some(rustix::fs::Uid::from_raw(65534)), None).unwrap();
    for args in [
        vec![
            "run",
            manifest.to_str().unwrap(),
            "--state-dir",
            state.to_str().unwrap(),
        ],
        vec![
            "serve",
            "--state-dir",
            state.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
        ],
    ] {
        let out = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_podvisor"))
            .args(&args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("runs pods as root") && stderr.contains("sudo"),
            "{args:?}: {stderr}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_shipped_systemd_unit_verifies() {
    let unit = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../packaging/podvisor.service"
    ))
    .unwrap();
    assert!(
        unit.contains("KillMode=process"),
        "serve's stop must leave the pods running"
    );
    let dir = std::env::temp_dir().join(format!("pv-unit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("podvisor.service");
    std::fs::write(
        &path,
        unit.replace("/usr/local/bin/podvisor", env!("CARGO_BIN_EXE_podvisor")),
    )
    .unwrap();
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&path)
        .output()
        .expect("systemd-analyze (Debian's systemd) is installed");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_client_without_a_server_says_how_to_start_one() {
    let out = podvisor(&[
        "get",
        "pods",
        "--kubeconfig",
        "/nonexistent/podvisor/kubeconfig",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("/nonexistent/podvisor/kubeconfig") && stderr.contains("podvisor serve"),
        "{stderr}"
    );
}

#[test]
fn validate_prints_each_error_once() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/invalid.yaml");
    let out = podvisor(&["validate", example]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("The Pod \"Invalid_Pod\" is invalid:\n"),
        "{stderr}"
    );
    for error in [
        "spec.containers[0].volumeMounts[0].name: Not found: \"data\"",
        "spec.containers[1].name: Duplicate value: \"app\"",
    ] {
        assert_eq!(stderr.matches(error).count(), 1, "{error}: {stderr}");
    }
}

#[test]
fn a_printing_command_whose_reader_went_away_ends_quietly() {
    // `podvisor image ls | head -0`: the reader closes the pipe first.
    let state = std::env::temp_dir().join(format!("pv-pipe-{}", std::process::id()));
    let mut child = Command::new(env!("CARGO_BIN_EXE_podvisor"))
        .args(["image", "ls", "--state-dir"])
        .arg(&state)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let _ = std::fs::remove_dir_all(&state);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
        "{stderr}"
    );
}

/// `podvisor image load FILE` takes the path as an argument (as `podman load` and `ctr image
/// import` do) or with `-i`; a missing file is named, not a usage error.
#[test]
fn image_load_takes_the_file_as_an_argument_or_with_dash_i() {
    let state = std::env::temp_dir().join(format!("pv-load-{}", std::process::id()));
    let load = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_podvisor"))
            .args(["image", "load", "--state-dir"])
            .arg(&state)
            .args(args)
            .output()
            .unwrap()
    };
    for args in [
        &["/nonexistent/busybox.tar"][..],
        &["-i", "/nonexistent/busybox.tar"],
    ] {
        let out = load(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains("loading /nonexistent/busybox.tar"),
            "{args:?}: {stderr}"
        );
    }
    let both = load(&["/a.tar", "-i", "/b.tar"]);
    assert_eq!(both.status.code(), Some(2), "two inputs are a usage error");
    let none = load(&[]);
    assert_eq!(none.status.code(), Some(2), "no input is a usage error");
    let _ = std::fs::remove_dir_all(&state);
}
