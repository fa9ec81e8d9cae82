//! The container log manager over a real shim: a fast writer's log rotates (CRI
//! `ReopenContainerLog` through the shim), at most `max_files` files remain, older rotated
//! files are gzip-compressed, and no line is lost or repeated across the files kept.

use super::{Harness, c, eventually, require_root};
use flate2::read::GzDecoder;
use podvisor_runtime::Runtime;
use podvisor_runtime::logs::manager::{ContainerLogManager, LogManagerConfig};
use podvisor_runtime::logs::rotation::{self, LogRotatePolicy};
use serde_json::json;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// The numbers of the `line N` records of CRI log text.
fn numbers(text: &str) -> Vec<u64> {
    text.lines()
        .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
        .collect()
}

fn read_any(path: &Path) -> String {
    let mut text = String::new();
    if path.extension().is_some_and(|e| e == "gz") {
        GzDecoder::new(std::fs::File::open(path).unwrap())
            .read_to_string(&mut text)
            .unwrap();
    } else {
        text = std::fs::read_to_string(path).unwrap();
    }
    text
}

#[tokio::test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
async fn a_fast_writers_log_rotates_compressed_and_bounded() {
    require_root();
    // About 2 MB a second, a line at a time.
    let writer = "i=0; while :; do echo \"line $i\"; i=$((i+1)); \
                  [ $((i % 500)) = 0 ] && sleep 0.01; done";
    let mut h = Harness::new(json!([c("fast", &["sh", "-c", writer])]), json!([])).await;
    h.start("fast", 1).await;
    let runtime = Arc::new(h.runtime.clone());
    let log = h.sandbox().paths().log_dir.join("fast").join("0.log");
    let running = runtime.running_container_logs().await;
    assert_eq!(running.len(), 1, "{running:?}");
    assert_eq!(running[0].path, log);
    assert_eq!(running[0].instance, 1);

    let policy = LogRotatePolicy::new(4 * 1024, 3).unwrap();
    let manager = ContainerLogManager::new(
        Arc::clone(&runtime),
        LogManagerConfig {
            policy,
            ..LogManagerConfig::default()
        },
    );
    // Rounds until three rotations were made (one a second at most: the rotated file's name
    // has the time to the second).
    let mut rotated = Vec::new();
    for _ in 0..100 {
        let round = manager.rotate_logs().await;
        assert!(round.errors.is_empty(), "{:?}", round.errors);
        rotated.extend(round.rotated);
        if rotated.len() >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(rotated.len() >= 3, "{rotated:?}");

    // At most 3 files: the current one, the newest rotated one, an older one compressed.
    let files = rotation::all_logs(&log).unwrap();
    assert_eq!(files.len(), 3, "{files:?}");
    let newest = rotated.last().unwrap();
    assert_eq!(&files[1], newest);
    let gz = files[0].to_str().unwrap();
    assert!(gz.ends_with(".gz"), "{files:?}");
    assert_eq!(
        std::fs::read_dir(log.parent().unwrap()).unwrap().count(),
        3,
        "no leftovers"
    );

    // The container keeps writing to the new file: once it has grown, the lines of the three
    // files run on without a gap or a repeat.
    let size = std::fs::metadata(&log).unwrap().len();
    eventually("the new file grows", || {
        std::fs::metadata(&log).unwrap().len() > size + 1024
    })
    .await;
    let mut all = Vec::new();
    for file in &files {
        let n = numbers(&read_any(file));
        assert!(!n.is_empty(), "{} is empty", file.display());
        all.extend(n);
    }
    let first = all[0];
    assert!(
        first > 0,
        "the oldest lines were removed with the oldest file"
    );
    let expected: Vec<u64> = (first..first + all.len() as u64).collect();
    assert!(all == expected, "lines lost or repeated across a rotation");

    // Once the container stopped, its log is no longer rotated, nor reopened.
    h.runtime.signal(h.sandbox(), 1, 9).await.expect("kill");
    let _ = h.next_exit().await;
    assert!(runtime.running_container_logs().await.is_empty());
    let gone = podvisor_runtime::ContainerLog {
        pod_uid: h.pod.metadata.uid.clone().unwrap(),
        instance: 1,
        path: log.clone(),
    };
    let err = runtime.reopen_container_log(&gone).await.unwrap_err();
    assert!(err.to_string().contains("is not running"), "{err}");
    h.remove().await;
}

/// The kubelet's manager asks the runtime to reopen a running container's log that is gone
/// (lost to an interrupted rotation): the container's output reaches the path again.
#[tokio::test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
async fn a_missing_log_of_a_running_container_is_reopened() {
    require_root();
    let writer = "i=0; while :; do echo \"line $i\"; i=$((i+1)); sleep 0.02; done";
    let mut h = Harness::new(json!([c("slow", &["sh", "-c", writer])]), json!([])).await;
    h.start("slow", 1).await;
    let log = h.sandbox().paths().log_dir.join("slow").join("0.log");
    eventually("the first line", || log.exists()).await;
    std::fs::remove_file(&log).unwrap();
    let manager =
        ContainerLogManager::new(Arc::new(h.runtime.clone()), LogManagerConfig::default());
    let round = manager.rotate_logs().await;
    assert!(
        round.errors.is_empty() && round.rotated.is_empty(),
        "{round:?}"
    );
    assert!(log.exists(), "reopened");
    eventually("lines in the reopened log", || {
        numbers(&std::fs::read_to_string(&log).unwrap()).len() >= 2
    })
    .await;
    h.runtime.signal(h.sandbox(), 1, 9).await.expect("kill");
    let _ = h.next_exit().await;
    h.remove().await;
}
