//! The image pull records on disk: written whole and private, read back by a store opened
//! again (a restart), intents cleared, and pruning that keeps what it cannot read.

use std::collections::HashSet;
use std::os::unix::fs::PermissionsExt;

use podvisor_image::{ImageStore, PullCredentials, PullSecret};

use crate::support::TempDir;

const REPO: &str = "127.0.0.1:5000/private/app";

fn secret(name: &str, hash: &str) -> PullCredentials {
    PullCredentials {
        node_pods_accessible: false,
        kubernetes_secrets: vec![PullSecret {
            namespace: "default".into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            credential_hash: hash.into(),
        }],
    }
}

fn mode(p: &std::path::Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn records_survive_a_reopened_store_and_are_private() {
    let tmp = TempDir::new("records-reopen");
    let store = ImageStore::open(tmp.path().join("images")).unwrap();
    let records = store.pull_records().unwrap();
    records
        .record_pulled(REPO, "sha256:aa", &secret("a", "h1"))
        .unwrap();
    records
        .record_pulled(REPO, "sha256:aa", &secret("b", "h2"))
        .unwrap();
    let again = ImageStore::open(tmp.path().join("images"))
        .unwrap()
        .pull_records()
        .unwrap();
    let record = again.pulled("sha256:aa").unwrap().unwrap();
    let names: Vec<_> = record.credential_mapping[REPO]
        .kubernetes_secrets
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(names, ["a", "b"]);
    assert!(record.last_updated > 0);
    assert_eq!(again.pulled("sha256:bb").unwrap(), None);
    for dir in ["", "pulled", "pulling"] {
        assert_eq!(mode(&again.dir().join(dir)), 0o700, "{dir}");
    }
    for file in std::fs::read_dir(again.dir().join("pulled")).unwrap() {
        assert_eq!(mode(&file.unwrap().path()), 0o600);
    }
}

#[test]
fn an_intent_stays_until_cleared() {
    let tmp = TempDir::new("records-intent");
    let store = ImageStore::open(tmp.path().join("images")).unwrap();
    let records = store.pull_records().unwrap();
    let image = "127.0.0.1:5000/private/app:1";
    assert!(!records.intent_exists(image));
    records.record_intent(image).unwrap();
    assert!(
        store.pull_records().unwrap().intent_exists(image),
        "a crash leaves it"
    );
    records.clear_intent(image).unwrap();
    assert!(!records.intent_exists(image));
    records.clear_intent(image).unwrap();
}

#[test]
fn prune_drops_records_of_images_gone_but_not_recent_or_unreadable_ones() {
    let tmp = TempDir::new("records-prune");
    let store = ImageStore::open(tmp.path().join("images")).unwrap();
    let records = store.pull_records().unwrap();
    for id in ["sha256:kept", "sha256:gone"] {
        records.record_pulled(REPO, id, &secret("a", "h")).unwrap();
    }
    let unreadable = records.dir().join("pulled").join("garbage");
    std::fs::write(&unreadable, b"{not json").unwrap();
    let present: HashSet<String> = ["sha256:kept".to_owned()].into();
    // Everything was written at or after `until = 0`: nothing goes.
    assert_eq!(records.prune(&present, 0), 0);
    assert_eq!(records.prune(&present, u64::MAX), 1);
    assert!(records.pulled("sha256:kept").unwrap().is_some());
    assert_eq!(records.pulled("sha256:gone").unwrap(), None);
    assert!(
        unreadable.exists(),
        "kept: without it the image would pass as preloaded"
    );
}
