//! Images (A19's `EnsureImageExists`, B9, 2.2 and 10.6): the `Pulling`/`Pulled` events the
//! runtime's pull reports, the image error reasons with the image manager's events, and the
//! image pull back-off per image.

use crate::common::*;
use podvisor_lifecycle::sim::driver::Input;
use podvisor_lifecycle::{EventType, ImagePull, Phase};
use serde_json::json;
use std::time::Duration;

fn pod_with_image(image: &str) -> Harness {
    Harness::from_spec(json!({
        "restartPolicy": "Always",
        "containers": [{"name": "app", "image": image}],
    }))
}

fn pending(h: &Harness) -> podvisor_lifecycle::InstanceId {
    h.pending_starts()
        .into_iter()
        .find(|(n, _)| n == "app")
        .expect("a pending start of app")
        .1
}

/// A19: the image step comes before `Created`: a pull is `Pulling` then `Pulled` with the
/// kubelet's wording (milliseconds, Go durations, the size); a present image is `Pulled` with
/// the 1.35 wording.
#[test]
fn a19_pulling_and_pulled_events_come_before_created() {
    let mut h = pod_with_image("registry.local/web:1");
    h.sandbox_ready(t(0));
    let id = pending(&h);
    let mark = h.mark();
    h.input(Input::ImagePulling { id }, t(0));
    let pulled = ImagePull::Pulled {
        pull: Duration::from_micros(1_234_567),
        total: Duration::from_millis(2_500),
        size: 4_562_339,
    };
    h.input(
        Input::ImagePulled {
            id,
            pull: pulled,
            image_id: "registry.local/web@sha256:0123".into(),
        },
        t(2),
    );
    h.start("app", t(2));
    assert_eq!(
        h.status_of("app").image_id,
        "registry.local/web@sha256:0123"
    );
    assert_eq!(
        h.events_since(mark),
        [
            (
                "Pulling".to_string(),
                "Pulling image \"registry.local/web:1\"".to_string()
            ),
            (
                "Pulled".to_string(),
                "Successfully pulled image \"registry.local/web:1\" in 1.234s (2.5s including \
                 waiting). Image size: 4562339 bytes."
                    .to_string()
            ),
            ("Created".to_string(), "Created container: app".to_string()),
            ("Started".to_string(), "Started container app".to_string()),
        ]
    );
    assert!(
        h.event_list()
            .iter()
            .filter(|e| e.reason.starts_with("Pull"))
            .all(|e| e.type_ == EventType::Normal)
    );

    let mut h = pod_with_image("busybox:1.36");
    h.sandbox_ready(t(0));
    let id = pending(&h);
    h.input(
        Input::ImagePulled {
            id,
            pull: ImagePull::Present,
            image_id: "sha256:abcd".into(),
        },
        t(0),
    );
    assert_eq!(
        h.events_with_reason("Pulled"),
        [
            "Container image \"busybox:1.36\" already present on machine and can be accessed by the pod"
        ]
    );
}

/// B9 and 2.2: a failed pull is `ErrImagePull` with the runtime's text, the image manager's
/// `Failed to pull image` event and the sync's `Error: ErrImagePull`; the next attempt inside
/// the back-off is `ImagePullBackOff` (`BackOff` Normal, `Error: ImagePullBackOff`) without a
/// pull; the waits double per failure (10, 20, 40 s) and the reasons alternate; the pod stays
/// Pending (P6).
#[test]
fn b9_failed_pulls_back_off_per_image_and_the_reasons_alternate() {
    let mut h = pod_with_image("registry.local/missing:1");
    h.sandbox_ready(t(0));
    let detail = "failed to pull and unpack image \"registry.local/missing:1\": not found";
    let mut failures = Vec::new();
    let mut now = t(0);
    for round in 0..4 {
        let mark = h.mark();
        h.fail_start("app", "ErrImagePull", detail, false, now);
        failures.push(now);
        assert_eq!(
            h.waiting("app"),
            Some(("ErrImagePull".to_string(), Some(detail.to_string()))),
            "round {round}"
        );
        assert_eq!(
            h.events_since(mark),
            [
                (
                    "Failed".to_string(),
                    format!("Failed to pull image \"registry.local/missing:1\": {detail}")
                ),
                ("Failed".to_string(), "Error: ErrImagePull".to_string()),
            ],
            "round {round}"
        );
        // The next sync (10 s later) finds the pull backing off until the delay has passed.
        let delay = 10 << round;
        let mut blocked = false;
        while !h.pending_starts().iter().any(|(n, _)| n == "app") {
            let next = h.next_timer().expect("a retry is scheduled");
            assert!(
                secs_of(next) <= secs_of(now) + delay,
                "round {round}: retried after the back-off"
            );
            let mark = h.mark();
            h.advance_to(next);
            if !h.pending_starts().iter().any(|(n, _)| n == "app") {
                blocked = true;
                assert_eq!(
                    h.waiting("app"),
                    Some((
                        "ImagePullBackOff".to_string(),
                        Some("Back-off pulling image \"registry.local/missing:1\"".to_string())
                    ))
                );
                let events = h.event_list();
                let new: Vec<_> = events[events.len() - h.events_since(mark).len()..].to_vec();
                assert_eq!(
                    new.iter()
                        .map(|e| (e.type_, e.reason, e.message.as_str()))
                        .collect::<Vec<_>>(),
                    [
                        (
                            EventType::Normal,
                            "BackOff",
                            "Back-off pulling image \"registry.local/missing:1\""
                        ),
                        (EventType::Warning, "Failed", "Error: ImagePullBackOff"),
                    ]
                );
            }
        }
        now = h.now();
        assert_eq!(
            secs_of(now) - secs_of(*failures.last().unwrap()),
            delay,
            "round {round}: the pull is tried again when its back-off ends"
        );
        assert_eq!(blocked, round > 0, "round {round}");
        assert_eq!(h.phase(), Phase::Pending);
    }
    // A pull that works ends it.
    h.start("app", now);
    assert_eq!(h.state_kind("app"), "running");
}

/// 2.2 and 10.6: `imagePullPolicy: Never` with the image absent, and an image name that does
/// not parse: the image manager's own event, then `Error: <reason>`; no pull back-off (the
/// start is retried at the next sync, 10 s).
#[test]
fn never_pull_and_invalid_names_are_reported_without_a_pull_back_off() {
    for (reason, event, message) in [
        (
            "ErrImageNeverPull",
            "ErrImageNeverPull",
            "Container image \"web:1\" is not present with pull policy of Never",
        ),
        (
            "InvalidImageName",
            "InspectFailed",
            "Failed to apply default image tag \"Web:1\": couldn't parse image name \"Web:1\": \
             invalid reference format: repository name must be lowercase",
        ),
    ] {
        let mut h = pod_with_image("web:1");
        h.sandbox_ready(t(0));
        let mark = h.mark();
        h.fail_start("app", reason, message, false, t(0));
        assert_eq!(
            h.events_since(mark),
            [
                (event.to_string(), message.to_string()),
                ("Failed".to_string(), format!("Error: {reason}")),
            ]
        );
        assert_eq!(
            h.waiting("app"),
            Some((reason.to_string(), Some(message.to_string())))
        );
        assert!(h.event_list().iter().all(|e| e.reason != "BackOff"));
        h.advance_to(t(10));
        assert!(
            h.pending_starts().iter().any(|(n, _)| n == "app"),
            "{reason}"
        );
    }
}

/// S15: the container status' `user.linux` is who the runtime says the instance runs as
/// (`SupplementalGroupsPolicy`, on by default), none before an instance exists.
#[test]
fn s15_the_status_shows_the_user_the_runtime_reports() {
    let mut h = pod_with_image("web:1");
    h.sandbox_ready(t(0));
    assert_eq!(h.status_of("app").user, None);
    let id = pending(&h);
    h.input(
        Input::ContainerUser {
            id,
            uid: 1000,
            gid: 3000,
            groups: vec![3000, 4000],
        },
        t(0),
    );
    h.start("app", t(0));
    let user = h
        .status_of("app")
        .user
        .and_then(|u| u.linux)
        .expect("user.linux");
    assert_eq!(
        (user.uid, user.gid, user.supplemental_groups),
        (1000, 3000, Some(vec![3000, 4000]))
    );
}
