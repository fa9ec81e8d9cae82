//! The container's user from `securityContext`: the kubelet's
//! `DetermineEffectiveSecurityContext` (container fields override the pod's), `fsGroup` and
//! `supplementalGroups` as supplementary groups, `verifyRunAsNonRoot` (its messages verbatim)
//! and the `HOME` a runtime gives the user. Real processes running as that user are in
//! `process_runtime.rs`.

use std::path::PathBuf;

use k8s_openapi::api::core::v1::Pod;
use podvisor_runtime::PodPaths;
use podvisor_runtime::config::security::home_dir;
use podvisor_runtime::config::{self, ContainerConfig, ContainerUser};
use serde_json::{Value, json};

fn paths() -> PodPaths {
    PodPaths {
        pod_dir: PathBuf::from("/state/pods/uid-1"),
        log_dir: PathBuf::from("/state/logs/shop_web_uid-1"),
    }
}

/// A pod `web` in `shop` whose container `app` has `container_sc`, the pod `pod_sc`.
fn pod(pod_sc: Value, container_sc: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "shop", "uid": "uid-1"},
        "spec": {
            "securityContext": pod_sc,
            "containers": [{"name": "app", "image": "none", "command": ["true"],
                            "securityContext": container_sc}],
        }
    }))
    .expect("pod json")
}

fn build(pod: &Pod) -> Result<ContainerConfig, String> {
    let container = pod.spec.as_ref().unwrap().containers[0].clone();
    config::build(pod, &container, 1, 0, &paths())
}

fn user(uid: u32, gid: u32, groups: &[u32]) -> ContainerUser {
    ContainerUser {
        uid,
        gid,
        groups: groups.to_vec(),
    }
}

#[test]
fn effective_user_table() {
    let cases = [
        // No securityContext: root, as an image without USER.
        (json!(null), json!(null), user(0, 0, &[0])),
        // The pod's values.
        (
            json!({"runAsUser": 1000, "runAsGroup": 3000, "supplementalGroups": [4000]}),
            json!(null),
            user(1000, 3000, &[3000, 4000]),
        ),
        // The container's runAsUser overrides the pod's; runAsGroup still comes from the pod.
        (
            json!({"runAsUser": 1000, "runAsGroup": 3000}),
            json!({"runAsUser": 2000}),
            user(2000, 3000, &[3000]),
        ),
        // ... and its runAsGroup too.
        (
            json!({"runAsUser": 1000, "runAsGroup": 3000}),
            json!({"runAsGroup": 5000}),
            user(1000, 5000, &[5000]),
        ),
        // runAsGroup without runAsUser: the gid is set, the uid stays 0.
        (
            json!(null),
            json!({"runAsGroup": 3000}),
            user(0, 3000, &[3000]),
        ),
        // fsGroup before supplementalGroups (kubelet order), each group once.
        (
            json!({"runAsUser": 1000, "runAsGroup": 3000, "fsGroup": 2000,
                   "supplementalGroups": [4000, 2000, 3000]}),
            json!(null),
            user(1000, 3000, &[3000, 2000, 4000]),
        ),
        // runAsNonRoot with a non-zero uid passes, from either level.
        (
            json!({"runAsNonRoot": true}),
            json!({"runAsUser": 1000}),
            user(1000, 0, &[0]),
        ),
        // The container's runAsNonRoot: false overrides the pod's true.
        (
            json!({"runAsNonRoot": true}),
            json!({"runAsNonRoot": false}),
            user(0, 0, &[0]),
        ),
    ];
    for (pod_sc, container_sc, want) in cases {
        let p = pod(pod_sc.clone(), container_sc.clone());
        let got = build(&p).map(|c| c.user);
        assert_eq!(got, Ok(want), "pod {pod_sc} container {container_sc}");
    }
}

#[test]
fn run_as_non_root_refusals_use_the_kubelet_messages() {
    // verifyRunAsNonRoot: no runAsUser, and the image (none: root) would run as root.
    let p = pod(json!({"runAsNonRoot": true}), json!(null));
    assert_eq!(
        build(&p).unwrap_err(),
        r#"container has runAsNonRoot and image will run as root (pod: "web_shop(uid-1)", container: app)"#
    );
    // runAsGroup alone does not make the user non-root.
    let p = pod(
        json!(null),
        json!({"runAsNonRoot": true, "runAsGroup": 3000}),
    );
    assert_eq!(
        build(&p).unwrap_err(),
        r#"container has runAsNonRoot and image will run as root (pod: "web_shop(uid-1)", container: app)"#
    );
    // An explicit runAsUser 0, the container's overriding the pod's 1000.
    let p = pod(
        json!({"runAsNonRoot": true, "runAsUser": 1000}),
        json!({"runAsUser": 0}),
    );
    assert_eq!(
        build(&p).unwrap_err(),
        r#"container's runAsUser breaks non-root policy (pod: "web_shop(uid-1)", container: app)"#
    );
}

#[test]
fn home_comes_from_passwd_else_root_or_slash() {
    let passwd = "root:x:0:0:root:/root:/bin/sh\n\
                  # comment\n\
                  app:x:1000:1000:App:/home/app:/bin/sh\n\
                  nohome:x:1001:1001:::/bin/sh\n";
    assert_eq!(home_dir(1000, Some(passwd)), "/home/app");
    assert_eq!(home_dir(0, Some(passwd)), "/root");
    assert_eq!(home_dir(1001, Some(passwd)), "/");
    assert_eq!(home_dir(4242, Some(passwd)), "/");
    assert_eq!(home_dir(0, None), "/root");
    assert_eq!(home_dir(1000, None), "/");

    // The container's own HOME wins; otherwise HOME is appended last.
    let p = pod(json!({"runAsUser": 1000}), json!(null));
    let mut cfg = build(&p).unwrap();
    assert!(cfg.env.iter().all(|(k, _)| k != "HOME"), "not set by build");
    cfg.set_default_home(Some(passwd));
    assert_eq!(
        cfg.env.last(),
        Some(&("HOME".to_owned(), "/home/app".to_owned()))
    );
    cfg.env.last_mut().unwrap().1 = "/mine".to_owned();
    cfg.set_default_home(Some(passwd));
    assert_eq!(cfg.env.iter().filter(|(k, _)| k == "HOME").count(), 1);
    assert_eq!(cfg.env.last().unwrap().1, "/mine");
}
