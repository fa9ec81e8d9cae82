//! Streaming lists and the version options of lists and watches (`resourceVersionMatch`,
//! `sendInitialEvents`), as the API server defaults and validates them with the `WatchList`
//! gate on (1.35's default): what kube-rs' watcher (`streaming_lists()`), client-go's
//! reflector with `WatchListClient` and plain clients send.

use crate::common::{TestServer, pod_yaml};
use crate::http::{EVENT_WAIT, watch};
use serde_json::Value;
use std::time::Duration;

const PODS: &str = "/api/v1/namespaces/default/pods";

fn list_rv(s: &TestServer) -> String {
    let (code, list) = s.json("GET", PODS, None);
    assert_eq!(code, 200, "{list}");
    list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn is_initial_events_end(e: &Value) -> bool {
    e["type"] == "BOOKMARK"
        && e["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"] == "true"
}

#[test]
fn streaming_lists_send_the_state_then_the_initial_events_end_bookmark() {
    let s = TestServer::start();
    s.create(&pod_yaml("a"));
    let rv = list_rv(&s);
    // The state at a version the store has not reached: the watch cache's "too large".
    let future = rv.parse::<u64>().unwrap() + 1000;
    let (code, body) = s.json(
        "GET",
        &format!("{PODS}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion={future}&allowWatchBookmarks=true"),
        None,
    );
    assert_eq!(code, 504, "{body}");
    assert_eq!(
        body["details"]["causes"][0]["reason"],
        "ResourceVersionTooLarge"
    );
    s.rt.block_on(async {
        // Asked for (kube-rs' streaming lists), and given by the defaulting to a watch of no
        // version or "0" that allows bookmarks.
        for query in [
            "watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=0&allowWatchBookmarks=true".to_owned(),
            format!("watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion={rv}&allowWatchBookmarks=true"),
            "watch=true&allowWatchBookmarks=true".to_owned(),
            "watch=true&resourceVersion=0&allowWatchBookmarks=true".to_owned(),
        ] {
            let mut w = watch(&s, &format!("{PODS}?{query}"), "application/json").await;
            let added = w.next(EVENT_WAIT).await.unwrap();
            assert_eq!(added["type"], "ADDED", "{query}");
            assert_eq!(added["object"]["metadata"]["name"], "a");
            let end = w.next(EVENT_WAIT).await.unwrap();
            assert!(is_initial_events_end(&end), "{query}: {end}");
            assert_eq!(end["object"]["metadata"]["resourceVersion"], rv.as_str());
        }
        // Without bookmarks the state comes, the bookmark does not.
        let mut w = watch(&s, &format!("{PODS}?watch=true"), "application/json").await;
        assert_eq!(w.next(EVENT_WAIT).await.unwrap()["type"], "ADDED");
        assert!(w.next(Duration::from_millis(500)).await.is_none());
        // A watch from a version is not defaulted: changes after it only.
        let mut w = watch(
            &s,
            &format!("{PODS}?watch=true&resourceVersion={rv}&allowWatchBookmarks=true"),
            "application/json",
        )
        .await;
        assert!(w.next(Duration::from_millis(500)).await.is_none());
    });
}

#[test]
fn send_initial_events_false_starts_at_the_latest_version_without_the_state() {
    let s = TestServer::start();
    s.create(&pod_yaml("a"));
    s.rt.block_on(async {
        let mut w = watch(
            &s,
            &format!("{PODS}?watch=true&sendInitialEvents=false&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"),
            "application/json",
        )
        .await;
        s.create(&pod_yaml("b"));
        let first = w.next(EVENT_WAIT).await.unwrap();
        assert_eq!(first["type"], "ADDED");
        assert_eq!(first["object"]["metadata"]["name"], "b");
    });
}

#[test]
fn invalid_version_options_are_422_list_options_invalid() {
    let s = TestServer::start();
    let cases = [
        (
            "watch=true&sendInitialEvents=true",
            "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ),
        (
            "watch=true&resourceVersion=5&resourceVersionMatch=NotOlderThan",
            "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
        ),
        (
            "sendInitialEvents=true",
            "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list",
        ),
        (
            "resourceVersionMatch=NotOlderThan",
            "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
        ),
        (
            "resourceVersion=0&resourceVersionMatch=Exact",
            "resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
        ),
    ];
    for (query, error) in cases {
        let (code, body) = s.json("GET", &format!("{PODS}?{query}"), None);
        assert_eq!(code, 422, "{query}: {body}");
        assert_eq!(body["reason"], "Invalid");
        assert_eq!(
            body["message"].as_str().unwrap(),
            format!("ListOptions.meta.k8s.io \"\" is invalid: {error}"),
            "{query}"
        );
        assert_eq!(body["details"]["group"], "meta.k8s.io");
        assert_eq!(body["details"]["kind"], "ListOptions");
        assert_eq!(
            body["details"]["causes"][0]["field"],
            if error.starts_with("sendInitialEvents") {
                "sendInitialEvents"
            } else {
                "resourceVersionMatch"
            }
        );
    }
    // Two errors at once: upstream's aggregate.
    let (code, body) = s.json(
        "GET",
        &format!("{PODS}?watch=true&sendInitialEvents=true&resourceVersionMatch=Exact"),
        None,
    );
    assert_eq!(code, 422);
    assert_eq!(
        body["message"],
        "ListOptions.meta.k8s.io \"\" is invalid: [resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan, resourceVersionMatch: Unsupported value: \"Exact\": supported values: \"NotOlderThan\"]"
    );
}

#[test]
fn lists_serve_resource_version_match() {
    let s = TestServer::start();
    s.create(&pod_yaml("a"));
    let rv = list_rv(&s);
    for query in [
        "resourceVersion=0&resourceVersionMatch=NotOlderThan&limit=500".to_owned(),
        format!("resourceVersion={rv}&resourceVersionMatch=NotOlderThan"),
        format!("resourceVersion={rv}&resourceVersionMatch=Exact"),
    ] {
        let (code, list) = s.json("GET", &format!("{PODS}?{query}"), None);
        assert_eq!(code, 200, "{query}: {list}");
        assert_eq!(list["items"][0]["metadata"]["name"], "a", "{query}");
        assert_eq!(list["metadata"]["resourceVersion"], rv.as_str());
    }
    // Once the store moved on, the exact state of an older version is not kept: the answer
    // etcd gives for a compacted revision, which makes clients list again without it.
    s.create(&pod_yaml("b"));
    let (code, body) = s.json(
        "GET",
        &format!("{PODS}?resourceVersion={rv}&resourceVersionMatch=Exact"),
        None,
    );
    assert_eq!(code, 410, "{body}");
    assert_eq!(body["reason"], "Expired");
    assert_eq!(
        body["message"],
        "The resourceVersion for the provided list is too old."
    );
    let (code, _) = s.json(
        "GET",
        &format!("{PODS}?resourceVersion={rv}&resourceVersionMatch=NotOlderThan"),
        None,
    );
    assert_eq!(code, 200);
}
