//! Paths a container can influence are never followed through its symlinks as root: one
//! regression test per CVE class (CVE-2017-1002101, CVE-2021-25741, CVE-2021-30465).
//!
//! The attacker is a container running as uid 65534 that plants symbolic links in an
//! `emptyDir` it shares with the victim; the prize is `ROOT/secret`, a directory only root
//! may enter (0700). The shim must neither bind it into a container nor create anything in it.

use super::{Harness, require_root};
use podvisor_runtime::{Runtime, StartError, StartRequest, Started};
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

const NOBODY: i64 = 65534;

impl Harness {
    async fn try_start(&self, name: &str, instance: u64) -> Result<Started, StartError> {
        let request = StartRequest {
            pod: self.pod.clone(),
            instance,
            container: self.container(name),
            restart_count: 0,
            objects: Default::default(),
        };
        self.runtime.start_container(self.sandbox(), request).await
    }

    /// `ROOT/secret`: root's, mode 0700, with one file in it.
    fn make_secret(&self) -> std::path::PathBuf {
        let secret = self.root.join("secret");
        std::fs::create_dir_all(&secret).unwrap();
        std::fs::write(secret.join("key"), "root only").unwrap();
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o700)).unwrap();
        secret
    }

    /// Runs the planter (an already-declared container) to its end.
    async fn plant(&mut self, instance: u64) {
        self.start("planter", instance).await;
        let (i, exit) = self.next_exit().await;
        assert_eq!(
            (i, exit.exit_code),
            (instance, 0),
            "{}",
            self.log("planter")
        );
    }
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn as_nobody(mut container: serde_json::Value) -> serde_json::Value {
    container["securityContext"] = json!({"runAsUser": NOBODY, "runAsGroup": NOBODY});
    container
}

/// CVE-2017-1002101: a `subPath` that a container turned into a symbolic link out of the
/// volume is refused (the kubelet: `subpath ... not within volume path`); one that stays
/// inside the volume still works.
#[tokio::test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
async fn cve_2017_1002101_sub_path_never_leaves_its_volume() {
    require_root();
    let shared = json!([{"name": "shared", "mountPath": "ROOT/plant"}]);
    let mut h = Harness::new(
        json!([
            as_nobody(json!({"name": "planter", "image": "none", "volumeMounts": shared,
                "command": ["sh", "-c",
                    "ln -s ROOT/secret ROOT/plant/absolute && \
                     ln -s ../../../../../../../../../../ROOT/secret ROOT/plant/relative && \
                     mkdir ROOT/plant/real && echo inside > ROOT/plant/real/f && \
                     ln -s real ROOT/plant/inner"]})),
            as_nobody(json!({"name": "absolute", "image": "none", "command": ["ls", "ROOT/in"],
                "volumeMounts": [{"name": "shared", "mountPath": "ROOT/in", "subPath": "absolute"}]})),
            as_nobody(json!({"name": "relative", "image": "none", "command": ["ls", "ROOT/in"],
                "volumeMounts": [{"name": "shared", "mountPath": "ROOT/in", "subPathExpr": "$(SUB)"}],
                "env": [{"name": "SUB", "value": "relative"}]})),
            as_nobody(json!({"name": "inner", "image": "none", "command": ["cat", "ROOT/in/f"],
                "volumeMounts": [{"name": "shared", "mountPath": "ROOT/in", "subPath": "inner"}]})),
        ]),
        json!([{"name": "shared", "emptyDir": {}}]),
    )
    .await;
    let secret = h.make_secret();
    h.plant(1).await;
    for (instance, name) in [(2, "absolute"), (3, "relative")] {
        match h.try_start(name, instance).await {
            Ok(_) => {
                let (_, exit) = h.next_exit().await;
                panic!(
                    "{name}: the subPath symlink was followed out of the volume (exit {}): {}",
                    exit.exit_code,
                    h.log(name)
                );
            }
            Err(err) => {
                assert_eq!(err.reason, "RunContainerError", "{err:?}");
                assert!(
                    err.message.contains("the subPath leads out of its volume"),
                    "{}",
                    err.message
                );
            }
        }
    }
    h.start("inner", 4).await;
    let (_, exit) = h.next_exit().await;
    assert_eq!(exit.exit_code, 0, "{}", h.log("inner"));
    assert!(
        h.log("inner").contains("stdout F inside"),
        "{}",
        h.log("inner")
    );
    assert_eq!(entries(&secret), ["key"]);
    h.remove().await;
}

/// CVE-2021-25741: root creates nothing through a symbolic link a non-root container planted:
/// not a mount target (nested in a volume), not the termination-message file, not a working
/// directory.
#[tokio::test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
async fn cve_2021_25741_nothing_is_created_through_a_planted_symlink() {
    require_root();
    let shared = json!([{"name": "shared", "mountPath": "ROOT/shared"}]);
    let mut h = Harness::new(
        json!([
            as_nobody(
                json!({"name": "planter", "image": "none", "volumeMounts": shared,
                "command": ["ln", "-s", "ROOT/secret", "ROOT/shared/link"]})
            ),
            as_nobody(
                json!({"name": "target", "image": "none", "command": ["true"],
                "volumeMounts": [{"name": "shared", "mountPath": "ROOT/shared"},
                                 {"name": "other", "mountPath": "ROOT/shared/link/mounted"}]})
            ),
            as_nobody(
                json!({"name": "message", "image": "none", "command": ["true"],
                "volumeMounts": shared, "terminationMessagePath": "ROOT/shared/link/message"})
            ),
            as_nobody(
                json!({"name": "workdir", "image": "none", "command": ["true"],
                "volumeMounts": shared, "workingDir": "ROOT/shared/link/work"})
            ),
        ]),
        json!([{"name": "shared", "emptyDir": {}}, {"name": "other", "emptyDir": {}}]),
    )
    .await;
    let secret = h.make_secret();
    h.plant(1).await;
    for (instance, name) in [(2, "target"), (3, "message"), (4, "workdir")] {
        let result = h.try_start(name, instance).await;
        if result.is_ok() {
            h.next_exit().await;
        }
        assert_eq!(
            entries(&secret),
            ["key"],
            "{name}: root created something in the 0700 directory"
        );
        let err = result.expect_err(name);
        assert!(
            err.message
                .contains("refusing to follow a symbolic link that root does not own"),
            "{name}: {}",
            err.message
        );
    }
    // Root's own symbolic links (`/var/run` on Debian, say) are still followed.
    let mut ok = Harness::new(
        json!([{"name": "ok", "image": "none", "command": ["pwd"], "workingDir": "ROOT/via/work"}]),
        json!([]),
    )
    .await;
    std::os::unix::fs::symlink(ok.root.join("real"), ok.root.join("via")).unwrap();
    std::fs::create_dir_all(ok.root.join("real")).unwrap();
    drop(
        ok.try_start("ok", 1)
            .await
            .expect("root's symlinks are followed"),
    );
    let (_, exit) = ok.next_exit().await;
    assert_eq!(exit.exit_code, 0, "{}", ok.log("ok"));
    assert!(ok.root.join("real/work").is_dir());
    ok.remove().await;
    h.remove().await;
}

/// CVE-2021-30465: a container swaps a mount target for a symbolic link while another
/// container of the pod starts, again and again: the mount lands inside the volume or the
/// start fails, never anywhere else.
#[tokio::test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
async fn cve_2021_30465_a_mount_target_swapped_for_a_symlink() {
    require_root();
    let race = json!([{"name": "race", "mountPath": "ROOT/race"}]);
    let mut h = Harness::new(
        json!([
            as_nobody(
                json!({"name": "swapper", "image": "none", "volumeMounts": race,
                "command": ["sh", "-c",
                    "cd ROOT/race; i=0; while :; do i=$((i+1)); mkdir t; mv t old$i; \
                     ln -s ROOT/secret t; rm t; done 2>/dev/null"]})
            ),
            as_nobody(
                json!({"name": "victim", "image": "none", "command": ["sleep", "100"],
                "volumeMounts": [{"name": "race", "mountPath": "ROOT/race"},
                                 {"name": "other", "mountPath": "ROOT/race/t/m"}]})
            ),
        ]),
        json!([{"name": "race", "emptyDir": {}}, {"name": "other", "emptyDir": {}}]),
    )
    .await;
    let secret = h.make_secret();
    h.start("swapper", 1).await;
    let (mut started, mut refused) = (0, 0);
    for instance in 2..42 {
        match h.try_start("victim", instance).await {
            Ok(s) => {
                started += 1;
                let mountinfo =
                    std::fs::read_to_string(format!("/proc/{}/mountinfo", s.pid)).unwrap();
                let secret_text = secret.to_str().unwrap();
                assert!(
                    !mountinfo.contains(secret_text),
                    "a mount landed in {secret_text}:\n{mountinfo}"
                );
                h.runtime.signal(h.sandbox(), instance, 9).await.unwrap();
                h.next_exit().await;
            }
            Err(_) => refused += 1,
        }
        assert_eq!(entries(&secret), ["key"], "attempt {instance}");
    }
    eprintln!("{started} started, {refused} refused");
    h.runtime.signal(h.sandbox(), 1, 9).await.unwrap();
    h.next_exit().await;
    h.remove().await;
}

/// Mount targets, their parents, the termination-message target and the working directory
/// that a container needed on the host go with the pod; what existed before stays.
#[tokio::test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
async fn paths_made_on_the_host_go_with_the_pod() {
    require_root();
    let mut h = Harness::new(
        json!([{"name": "main", "image": "none", "command": ["sh", "-c", "pwd; sleep 100"],
                "workingDir": "ROOT/wd/w",
                "terminationMessagePath": "ROOT/tm/x/termination-log",
                "volumeMounts": [{"name": "data", "mountPath": "ROOT/made/a/b"},
                                 {"name": "data", "mountPath": "ROOT/made/a/b/nested/c"},
                                 {"name": "data", "mountPath": "ROOT/pre/m"}]}]),
        json!([{"name": "data", "emptyDir": {}}]),
    )
    .await;
    std::fs::create_dir_all(h.root.join("pre")).unwrap();
    h.start("main", 1).await;
    let volume = h.sandbox().paths().pod_dir.join("volumes/data");
    // Made on the host while the pod runs; the nested target inside the volume.
    for path in ["made/a/b", "pre/m", "tm/x/termination-log", "wd/w"] {
        assert!(h.root.join(path).exists(), "{path}");
    }
    assert!(volume.join("nested/c").is_dir());
    h.runtime.signal(h.sandbox(), 1, 9).await.unwrap();
    h.next_exit().await;
    h.remove().await;
    for path in ["made", "pre/m", "tm", "wd"] {
        assert!(!h.root.join(path).exists(), "{path} is left");
    }
    assert!(h.root.join("pre").is_dir(), "what existed before stays");
}

/// CVE-2021-25741's pattern in a `hostPath` set-up: `DirectoryOrCreate` and `FileOrCreate`
/// create nothing through a symbolic link that a non-root user planted on the way.
#[tokio::test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
async fn host_path_creation_never_follows_a_planted_symlink() {
    use podvisor_runtime::process::ProcessRuntime;
    use tokio::sync::mpsc;
    require_root();
    let root = std::env::temp_dir().join(format!("pv-rt-hpsym-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let secret = root.join("secret");
    std::fs::create_dir_all(&secret).unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o700)).unwrap();
    // A world-writable directory in which uid 65534 planted a link to the secret directory.
    let open = root.join("open");
    std::fs::create_dir_all(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    std::os::unix::fs::symlink(&secret, open.join("link")).unwrap();
    std::os::unix::fs::lchown(open.join("link"), Some(65534), Some(65534)).unwrap();
    let runtime = ProcessRuntime::new(root.join("state"), super::shim_exe()).unwrap();
    for (n, type_) in ["DirectoryOrCreate", "FileOrCreate"]
        .into_iter()
        .enumerate()
    {
        let path = open.join("link").join(format!("made-{n}"));
        let volumes = json!([{"name": "v", "hostPath": {"path": path, "type": type_}}]);
        let pod = super::make_pod(
            &format!("hpsym-{n}"),
            json!([{"name": "x", "image": "none", "command": ["true"]}]),
            volumes,
        );
        let (tx, _rx) = mpsc::unbounded_channel();
        let err = match runtime.create_sandbox(&pod, tx).await {
            Ok(sandbox) => {
                runtime.remove_sandbox(&sandbox).await.unwrap();
                panic!(
                    "{type_}: created through the planted link: {:?}",
                    entries(&secret)
                );
            }
            Err(err) => err,
        };
        assert_eq!(err.reason, "FailedMount", "{type_}");
        assert!(
            err.message
                .contains("refusing to follow a symbolic link that root does not own"),
            "{type_}: {}",
            err.message
        );
        assert!(
            entries(&secret).is_empty(),
            "{type_}: {:?}",
            entries(&secret)
        );
    }
    // Root's own links are followed.
    std::os::unix::fs::symlink(&secret, root.join("rootlink")).unwrap();
    let made = root.join("rootlink").join("ok");
    let pod = super::make_pod(
        "hpsym-ok",
        json!([{"name": "x", "image": "none", "command": ["true"]}]),
        json!([{"name": "v", "hostPath": {"path": made, "type": "DirectoryOrCreate"}}]),
    );
    let (tx, _rx) = mpsc::unbounded_channel();
    let sandbox = runtime.create_sandbox(&pod, tx).await.unwrap();
    assert_eq!(entries(&secret), ["ok"]);
    runtime.remove_sandbox(&sandbox).await.unwrap();
    let _ = std::fs::remove_dir_all(&root);
}

/// Like runc, the working directory is entered before the user is set: a non-root container
/// whose `workingDir` it may not enter (nor its parent) still starts there.
#[tokio::test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
async fn a_working_directory_is_entered_before_the_user_is_set() {
    require_root();
    let mut h = Harness::new(
        json!([as_nobody(
            json!({"name": "main", "image": "none", "command": ["pwd"],
                                "workingDir": "ROOT/private/wd"})
        )]),
        json!([]),
    )
    .await;
    let private = h.root.join("private/wd");
    std::fs::create_dir_all(&private).unwrap();
    for dir in ["private", "private/wd"] {
        let mode = std::fs::Permissions::from_mode(0o700);
        std::fs::set_permissions(h.root.join(dir), mode).unwrap();
    }
    h.start("main", 1).await;
    let (_, exit) = h.next_exit().await;
    assert_eq!(exit.exit_code, 0, "{}", h.log("main"));
    assert!(
        h.log("main")
            .contains(&format!("stdout F {}", private.display())),
        "{}",
        h.log("main")
    );
    h.remove().await;
}

/// A path the registry cannot write as one line (a newline in it) is not recorded: it stays
/// behind, and no fragment of it is taken for another path (here, an empty directory of the
/// host's own).
#[tokio::test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
async fn a_path_with_a_newline_is_never_split_into_others() {
    require_root();
    let mut h = Harness::new(
        json!([{"name": "main", "image": "none", "command": ["true"],
                "volumeMounts": [{"name": "data", "mountPath": "ROOT/nl\nx/m"}]}]),
        json!([{"name": "data", "emptyDir": {}}]),
    )
    .await;
    std::fs::create_dir_all(h.root.join("nl")).unwrap();
    h.start("main", 1).await;
    h.next_exit().await;
    h.remove().await;
    assert!(h.root.join("nl").is_dir(), "the host's own directory went");
}
