//! Container log rotation under `podvisor serve` (the kubelet's container log manager, with
//! its flags), through the real kubectl: a fast writer's log rotates while `kubectl logs -f`
//! follows it, losing and repeating no line; at most `--container-log-max-files` files remain,
//! the older rotated ones gzip-compressed; after a restart, `--previous` shows the previous
//! instance's current file, as the kubelet reads it.

use crate::serve_common::ServeCtx;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

fn wait_for<T>(what: &str, timeout: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The numbers of `line N` lines.
fn numbers(text: &str) -> Vec<u64> {
    text.lines()
        .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
        .collect()
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn assert_contiguous(what: &str, n: &[u64]) {
    let first = *n.first().unwrap_or_else(|| panic!("{what}: no lines"));
    let expected: Vec<u64> = (first..first + n.len() as u64).collect();
    assert!(n == expected, "{what}: lines lost or repeated");
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn serve_rotates_a_fast_writers_log_and_kubectl_logs_follows_it() {
    let mut ctx = ServeCtx::new("logrot");
    ctx.start(&[
        "--container-log-max-size",
        "4Ki",
        "--container-log-max-files",
        "3",
        "--container-log-monitor-interval",
        "3s",
        "--backoff",
        "reduced",
    ]);
    let (m, stop, stopped) = (ctx.marker.clone(), ctx.path("stop"), ctx.path("stopped"));
    let (stop, stopped) = (stop.display(), stopped.display());
    // The first instance writes fast until told to stop, then exits 1; the next one idles.
    let script = format!(
        "if [ -e {stopped} ]; then while :; do sleep 1; done; fi; i=0; \
         while [ ! -e {stop} ]; do echo \"line $i\"; i=$((i+1)); \
         [ $((i % 50)) = 0 ] && sleep 0.02; done; echo \"line $i\"; touch {stopped}; exit 1; : {m}"
    );
    let manifest = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: chatty\nspec:\n  containers:\n  - name: app\n    image: busybox\n    command: [sh, -c, {script:?}]\n"
    );
    let path = ctx.manifest("chatty.yaml", &manifest);
    ctx.kubectl_ok(&["apply", "-f", path.to_str().unwrap()]);
    wait_for("the writer running", Duration::from_secs(60), || {
        let state = ctx.kubectl_ok(&[
            "get",
            "pod",
            "chatty",
            "-o",
            "jsonpath={.status.containerStatuses[0].state.running.startedAt}",
        ]);
        (!state.is_empty()).then_some(())
    });
    let uid = ctx.kubectl_ok(&["get", "pod", "chatty", "-o", "jsonpath={.metadata.uid}"]);
    let dir: PathBuf = ctx
        .state()
        .join("logs")
        .join(format!("default_chatty_{uid}"))
        .join("app");
    let follower = ctx
        .kubectl_command(&["logs", "-f", "chatty"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();

    // Two rotations at least: a compressed file and an uncompressed newest one.
    wait_for("two rotations", Duration::from_secs(60), || {
        let n = names(&dir);
        (n.iter()
            .any(|f| f.starts_with("0.log.") && f.ends_with(".gz"))
            && n.iter()
                .any(|f| f.starts_with("0.log.") && !f.ends_with(".gz")))
        .then_some(())
    });
    std::fs::write(ctx.path("stop"), b"").unwrap();
    let out = follower.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let followed = numbers(&String::from_utf8_lossy(&out.stdout));
    assert_contiguous("kubectl logs -f", &followed);

    // The previous instance's files stay as they were when it stopped: at most 3.
    let kept = names(&dir)
        .into_iter()
        .filter(|f| f == "0.log" || f.starts_with("0.log."))
        .collect::<Vec<_>>();
    assert_eq!(kept.len(), 3, "{kept:?}");
    assert!(
        kept[1].ends_with(".gz") && !kept[2].ends_with(".gz"),
        "{kept:?}"
    );
    let current = numbers(&std::fs::read_to_string(dir.join("0.log")).unwrap());
    assert_eq!(current.last(), followed.last(), "the follow ran to the end");
    assert!(
        followed.first() < current.first(),
        "the follow crossed a rotation: {:?} vs {:?}",
        followed.first(),
        current.first()
    );

    // Restarted: --previous is the previous instance's current file.
    wait_for("the restart", Duration::from_secs(60), || {
        let s = ctx.kubectl_ok(&[
            "get",
            "pod",
            "chatty",
            "-o",
            "jsonpath={.status.containerStatuses[0].restartCount} {.status.containerStatuses[0].state.running.startedAt}",
        ]);
        (s.starts_with("1 ") && s.len() > 2).then_some(())
    });
    let previous = ctx.kubectl_ok(&["logs", "chatty", "--previous"]);
    assert_eq!(numbers(&previous), current);
    assert_contiguous("kubectl logs --previous", &current);
    assert!(ctx.kubectl_ok(&["logs", "chatty"]).is_empty());
    ctx.kubectl_ok(&["delete", "pod", "chatty", "--grace-period=1"]);
}
