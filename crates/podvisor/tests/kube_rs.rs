//! kube-rs, the Rust client (`kube` 5 on `k8s-openapi` 0.29 / `v1_35`, rustls with ring),
//! against a real `podvisor serve`: its `runtime::watcher` in both initial-list modes (a paged
//! list then a watch, and streaming lists: `sendInitialEvents=true` ended by the
//! `k8s.io/initial-events-end` bookmark) with a `reflector` store, across watches the server
//! ends (`timeoutSeconds`) and kube-rs resumes from the last resourceVersion; the
//! `events::Recorder` (events.k8s.io/v1, a series on repeat) as kubectl shows it;
//! `Config::incluster()` from inside a process-runtime pod; `Api::logs`, `Api::exec` (the
//! `ws` feature: WebSocket `v5.channel.k8s.io`) and server-side apply; `Discovery` (the legacy
//! documents: podvisor serves no aggregated discovery) with `DynamicObject`s.
//!
//! Each test starts its own `serve` (`serve_common::ServeCtx`) and talks to it through the
//! kubeconfig serve writes, as a user's program would. Needs root (`#[ignore]`d otherwise) and,
//! for the Recorder test, a kubectl.

#![allow(missing_docs)]

mod serve_common;

use futures_util::{Stream, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::events::v1::Event as EventV1;
use kube::api::DynamicObject;
use kube::api::{
    Api, AttachParams, DeleteParams, ListParams, LogParams, Patch, PatchParams, PostParams,
    WatchEvent, WatchParams,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::GroupVersionKind;
use kube::discovery::Scope;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::{reflector, wait::await_condition, watcher};
use kube::{Client, Config, Resource, ResourceExt};
use serde_json::{Value, json};
use serve_common::ServeCtx;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What a test waits for one state at most (a loaded machine starts pods slowly).
const WAIT: Duration = Duration::from_secs(60);

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// A client of `ctx`'s serve from the kubeconfig serve wrote, as `kube::Client::try_default`
/// builds one from `$KUBECONFIG`.
async fn client(ctx: &ServeCtx) -> Client {
    let kubeconfig = Kubeconfig::read_from(ctx.kubeconfig()).expect("serve's kubeconfig reads");
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("kube-rs takes serve's kubeconfig");
    Client::try_from(config).expect("kube-rs builds a client")
}

/// A pod running `script` under `sh -c` (the marker is its `$0`, so the clean-up finds it),
/// with `spec` merged over the pod's spec.
fn pod(name: &str, marker: &str, script: &str, spec: Value) -> Pod {
    let mut obj = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "terminationGracePeriodSeconds": 5,
            "containers": [{
                "name": "app",
                "image": "busybox",
                "command": ["sh", "-c", script, marker],
            }],
        },
    });
    if let (Some(base), Value::Object(extra)) = (obj["spec"].as_object_mut(), spec) {
        base.extend(extra);
    }
    serde_json::from_value(obj).expect("a valid Pod")
}

fn phase(p: &Pod) -> String {
    p.status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_default()
}

fn ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Waits until `cond` holds for `name` (kube-rs' `await_condition`, itself a watcher).
async fn wait_for<K>(api: &Api<K>, name: &str, what: &str, cond: impl Fn(&K) -> bool) -> K
where
    K: Clone + std::fmt::Debug + serde::de::DeserializeOwned + Resource + Send + 'static,
{
    let found = tokio::time::timeout(
        WAIT,
        await_condition(api.clone(), name, move |o: Option<&K>| o.is_some_and(&cond)),
    )
    .await
    .unwrap_or_else(|_| panic!("{name}: timed out after {WAIT:?} waiting for {what}"))
    .unwrap_or_else(|e| panic!("{name}: the watch for {what} failed: {e}"));
    found.expect("await_condition returns the object that met the condition")
}

/// What one watcher reported, in order.
#[derive(Debug, Clone, PartialEq)]
enum Seen {
    Init,
    InitApply(String),
    InitDone,
    Apply {
        name: String,
        rv: u64,
        phase: String,
        ready: bool,
        deleting: bool,
    },
    Delete {
        name: String,
        rv: u64,
    },
    Error(String),
}

fn rv_of(p: &Pod) -> u64 {
    p.resource_version()
        .and_then(|v| v.parse().ok())
        .expect("podvisor's resourceVersions are numbers")
}

fn seen(event: Result<watcher::Event<Pod>, watcher::Error>) -> Seen {
    match event {
        Ok(watcher::Event::Init) => Seen::Init,
        Ok(watcher::Event::InitApply(p)) => Seen::InitApply(p.name_any()),
        Ok(watcher::Event::InitDone) => Seen::InitDone,
        Ok(watcher::Event::Apply(p)) => Seen::Apply {
            name: p.name_any(),
            rv: rv_of(&p),
            phase: phase(&p),
            ready: ready(&p),
            deleting: p.metadata.deletion_timestamp.is_some(),
        },
        Ok(watcher::Event::Delete(p)) => Seen::Delete {
            name: p.name_any(),
            rv: rv_of(&p),
        },
        Err(e) => Seen::Error(e.to_string()),
    }
}

type Log = Arc<Mutex<Vec<Seen>>>;
type Watch = Pin<Box<dyn Stream<Item = Result<watcher::Event<Pod>, watcher::Error>> + Send>>;

/// Polls `log` until `cond` holds for it.
async fn until(log: &Log, what: &str, cond: impl Fn(&[Seen]) -> bool) {
    let deadline = Instant::now() + WAIT;
    loop {
        if cond(&log.lock().unwrap()) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; the watcher saw {:#?}",
            log.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The changes of `name` a watcher saw after its initial list: (resourceVersion, deleted).
fn changes_of(log: &[Seen], name: &str) -> Vec<(u64, bool)> {
    log.iter()
        .filter_map(|s| match s {
            Seen::Apply { name: n, rv, .. } if n == name => Some((*rv, false)),
            Seen::Delete { name: n, rv } if n == name => Some((*rv, true)),
            _ => None,
        })
        .collect()
}

/// How long each watch of the watchers lasts (`timeoutSeconds`): the server ends it, kube-rs
/// resumes from the last resourceVersion it saw.
const WATCH_SECONDS: u32 = 2;

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn kube_rs_watcher_and_reflector_follow_a_pod_across_resumed_watches_in_both_list_modes() {
    let mut ctx = ServeCtx::new("krwatch");
    ctx.start(&[]);
    let m = ctx.marker.clone();
    runtime().block_on(async {
        let client = client(&ctx).await;
        let pods: Api<Pod> = Api::default_namespaced(client.clone());
        let long = "echo started; exec sleep 3600";
        for name in ["before", "before-2"] {
            pods.create(&PostParams::default(), &pod(name, &m, long, json!({})))
                .await
                .expect("kube-rs creates a pod");
        }

        // Watcher A: a paged list (`limit=1`, then `continue`) then a watch from its version,
        // feeding a reflector store. Watcher B: streaming lists.
        let config = watcher::Config::default().timeout(WATCH_SECONDS);
        let paged = config.clone().page_size(1);
        let (store, writer) = reflector::store::<Pod>();
        let a: Log = Log::default();
        let b: Log = Log::default();
        let stream_a: Watch = Box::pin(reflector::reflector(
            writer,
            watcher(pods.clone(), paged),
        ));
        let stream_b: Watch = Box::pin(watcher(pods.clone(), config.streaming_lists()));
        for (log, mut stream) in [(a.clone(), stream_a), (b.clone(), stream_b)] {
            tokio::spawn(async move {
                while let Some(event) = stream.next().await {
                    log.lock().unwrap().push(seen(event));
                }
            });
        }
        for (mode, log) in [("list-watch", &a), ("streaming lists", &b)] {
            until(log, &format!("{mode}: the initial list"), |l| {
                l.contains(&Seen::InitDone)
            })
            .await;
            let l = log.lock().unwrap();
            let initial = [
                Seen::Init,
                Seen::InitApply("before".into()),
                Seen::InitApply("before-2".into()),
                Seen::InitDone,
            ];
            assert_eq!(l.get(..4), Some(&initial[..]), "{mode}: {l:#?}");
        }
        tokio::time::timeout(WAIT, store.wait_until_ready())
            .await
            .unwrap()
            .unwrap();
        let synced = Instant::now();
        let rv_before = pods
            .list(&ListParams::default())
            .await
            .unwrap()
            .metadata
            .resource_version
            .unwrap();

        // A pod made with `Api::create`, Running, then Ready once its probe passes.
        let probed = json!({"containers": [{
            "name": "app",
            "image": "busybox",
            "command": ["sh", "-c", long, m],
            "readinessProbe": {"exec": {"command": ["true"]}, "initialDelaySeconds": 2, "periodSeconds": 1},
        }]});
        pods.create(&PostParams::default(), &pod("watched", &m, long, probed))
            .await
            .unwrap();
        for (mode, log) in [("list-watch", &a), ("streaming lists", &b)] {
            until(log, &format!("{mode}: watched Running and Ready"), |l| {
                l.iter().any(|s| {
                    matches!(s, Seen::Apply { name, phase, ready: true, .. }
                        if name == "watched" && phase == "Running")
                })
            })
            .await;
        }
        let cached = store
            .state()
            .into_iter()
            .find(|p| p.name_any() == "watched")
            .expect("the reflector holds the pod");
        assert!(ready(&cached), "{cached:#?}");

        // Several watches end and are resumed before the delete.
        let resumes_after = synced + Duration::from_secs(3 * u64::from(WATCH_SECONDS) + 1);
        tokio::time::sleep_until(resumes_after.into()).await;
        pods.delete("watched", &DeleteParams::default())
            .await
            .unwrap();
        for (mode, log) in [("list-watch", &a), ("streaming lists", &b)] {
            until(log, &format!("{mode}: watched deleted"), |l| {
                l.iter()
                    .any(|s| matches!(s, Seen::Delete { name, .. } if name == "watched"))
            })
            .await;
        }
        let mut names: Vec<String> = store.state().iter().map(|p| p.name_any()).collect();
        names.sort();
        assert_eq!(
            names,
            ["before", "before-2"],
            "the reflector dropped the deleted pod"
        );

        let a = a.lock().unwrap().clone();
        let b = b.lock().unwrap().clone();
        for (mode, log) in [("list-watch", &a), ("streaming lists", &b)] {
            // No error and no second initial list: every watch that ended was resumed from
            // the last resourceVersion, none was answered 410 Gone.
            assert!(
                !log.iter().any(|s| matches!(s, Seen::Error(_))),
                "{mode}: {log:#?}"
            );
            assert_eq!(
                log.iter().filter(|s| **s == Seen::Init).count(),
                1,
                "{mode}: {log:#?}"
            );
            // Each change once, in order (a resume from a wrong version would repeat or
            // skip some), and the story of the pod: Pending, Running, Ready, deleting, gone.
            let changes = changes_of(log, "watched");
            assert!(
                changes.windows(2).all(|w| w[0].0 < w[1].0),
                "{mode}: {log:#?}"
            );
            let story: Vec<&Seen> = log
                .iter()
                .filter(|s| matches!(s, Seen::Apply { name, .. } | Seen::Delete { name, .. } if name == "watched"))
                .collect();
            let first = story.first().unwrap();
            assert!(
                matches!(first, Seen::Apply { phase, ready: false, deleting: false, .. } if phase == "Pending"),
                "{mode}: {story:#?}"
            );
            let running = story
                .iter()
                .position(|s| matches!(s, Seen::Apply { phase, ready: false, .. } if phase == "Running"));
            let ready_at = story
                .iter()
                .position(|s| matches!(s, Seen::Apply { ready: true, .. }));
            let deleting = story
                .iter()
                .position(|s| matches!(s, Seen::Apply { deleting: true, .. }));
            assert!(
                running < ready_at && ready_at < deleting && running.is_some(),
                "{mode}: {story:#?}"
            );
            assert!(
                matches!(story.last().unwrap(), Seen::Delete { .. }),
                "{mode}: {story:#?}"
            );
        }
        // Both modes saw the same changes of the pod, and so does a plain `Api::watch`
        // resumed from the version the list had before it was made.
        assert_eq!(changes_of(&a, "watched"), changes_of(&b, "watched"));
        let params = WatchParams::default().timeout(5);
        let mut replay = Box::pin(pods.watch(&params, &rv_before).await.unwrap());
        let mut replayed = Vec::new();
        while let Some(event) = replay.try_next().await.unwrap() {
            match event {
                WatchEvent::Added(p) | WatchEvent::Modified(p) if p.name_any() == "watched" => {
                    replayed.push((rv_of(&p), false));
                }
                WatchEvent::Deleted(p) if p.name_any() == "watched" => {
                    replayed.push((rv_of(&p), true));
                    break;
                }
                WatchEvent::Error(e) => panic!("the resumed watch failed: {e:?}"),
                _ => {}
            }
        }
        assert_eq!(replayed, changes_of(&a, "watched"));

        // What made the watchers resume: the server ends a watch after its timeoutSeconds
        // (so between the watchers' Init and the delete each saw several watches end), with
        // a bookmark 2 s before (the watch cache's pre-timeout bookmark) when bookmarks are
        // allowed (kube-rs asks for them by default), so a client resumes from the latest
        // version.
        let params = WatchParams::default().timeout(4);
        let rv_now = pods
            .list(&ListParams::default())
            .await
            .unwrap()
            .metadata
            .resource_version
            .unwrap();
        let started = Instant::now();
        let mut quiet = Box::pin(pods.watch(&params, &rv_now).await.unwrap());
        let mut bookmarks = Vec::new();
        let ended = tokio::time::timeout(WAIT, async {
            while let Some(event) = quiet.try_next().await.unwrap() {
                match event {
                    WatchEvent::Bookmark(b) => {
                        bookmarks.push((started.elapsed(), b.metadata.resource_version));
                    }
                    other => panic!("nothing changed, yet: {other:?}"),
                }
            }
        })
        .await;
        assert!(ended.is_ok(), "the watch did not end after 4 s");
        assert!(started.elapsed() >= Duration::from_secs(4));
        assert_eq!(bookmarks.len(), 1, "{bookmarks:?}");
        assert!(bookmarks[0].0 >= Duration::from_secs(2), "{bookmarks:?}");
        assert_eq!(bookmarks[0].1, rv_now);
    });
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn kube_rs_recorder_publishes_an_events_v1_series_that_kubectl_shows() {
    let mut ctx = ServeCtx::new("krrec");
    ctx.start(&[]);
    let m = ctx.marker.clone();
    runtime().block_on(async {
        let client = client(&ctx).await;
        let pods: Api<Pod> = Api::default_namespaced(client.clone());
        let created = pods
            .create(
                &PostParams::default(),
                &pod("recorded", &m, "exec sleep 3600", json!({})),
            )
            .await
            .unwrap();
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: "kube-rs-test".into(),
                instance: Some("podvisor-test".into()),
            },
        );
        let event = Event {
            type_: EventType::Warning,
            reason: "Reconciled".into(),
            note: Some("kube-rs says hello".into()),
            action: "Reconcile".into(),
            secondary: None,
        };
        let reference = created.object_ref(&());
        // The first publish creates the event, the second patches in a series (count 2).
        recorder.publish(&event, &reference).await.unwrap();
        recorder.publish(&event, &reference).await.unwrap();

        let events: Api<EventV1> = Api::default_namespaced(client);
        let list = events.list(&ListParams::default()).await.unwrap();
        let ours: Vec<&EventV1> = list
            .items
            .iter()
            .filter(|e| e.reason.as_deref() == Some("Reconciled"))
            .collect();
        assert_eq!(ours.len(), 1, "{list:#?}");
        let e = ours[0];
        assert_eq!(e.series.as_ref().map(|s| s.count), Some(2), "{e:#?}");
        assert_eq!(e.note.as_deref(), Some("kube-rs says hello"));
        assert_eq!(e.action.as_deref(), Some("Reconcile"));
        assert_eq!(e.type_.as_deref(), Some("Warning"));
        assert_eq!(e.reporting_controller.as_deref(), Some("kube-rs-test"));
        assert_eq!(e.reporting_instance.as_deref(), Some("podvisor-test"));
        let regarding = e.regarding.as_ref().unwrap();
        assert_eq!(regarding.uid, created.metadata.uid);
        assert_eq!(regarding.kind.as_deref(), Some("Pod"));
    });

    // kubectl reads the same object as a core/v1 Event: `get events -o wide` (the server's
    // Table: LAST SEEN from the series, SOURCE from reportingController/Instance, COUNT) and
    // `describe pod` (the pod's events, `(x2 over ...)` from the series).
    let wide = ctx.kubectl_ok(&["get", "events", "-o", "wide"]);
    let row = wide
        .lines()
        .find(|l| l.contains("Reconciled"))
        .unwrap_or_else(|| panic!("no Reconciled row:\n{wide}"));
    for cell in [
        "Warning",
        "pod/recorded",
        "kube-rs-test, podvisor-test",
        "kube-rs says hello",
    ] {
        assert!(row.contains(cell), "{cell:?} missing:\n{wide}");
    }
    let count = ctx.kubectl_ok(&[
        "get",
        "events",
        "--field-selector",
        "reason=Reconciled",
        "-o",
        "jsonpath={.items[0].series.count} {.items[0].involvedObject.name} {.items[0].message}",
    ]);
    assert_eq!(count, "2 recorded kube-rs says hello");
    let described = ctx.kubectl_ok(&["describe", "pod", "recorded"]);
    let line = described
        .lines()
        .find(|l| l.contains("Reconciled"))
        .unwrap_or_else(|| panic!("no Reconciled event:\n{described}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(words[..2], ["Warning", "Reconciled"], "{described}");
    let from_and_message: Vec<&str> = words[words.len() - 4..].to_vec();
    assert!(line.contains("(x2 over "), "{described}");
    assert_eq!(
        from_and_message,
        ["kube-rs-test", "kube-rs", "says", "hello"],
        "{described}"
    );
}

/// When set, this test binary is the in-cluster program of a pod
/// (`kube_rs_config_incluster_lists_pods_from_inside_a_pod` runs itself as the pod's command),
/// not a test runner.
const IN_POD: &str = "PODVISOR_KUBE_RS_IN_POD";
const IN_CLUSTER_TEST: &str = "kube_rs_config_incluster_lists_pods_from_inside_a_pod";

/// Inside the pod: kube-rs' `Config::incluster()` (the API address from
/// `KUBERNETES_SERVICE_HOST`/`_PORT`, the token, CA and namespace from the mounted
/// service-account volume, as kube-rs reads them), the pods of the namespace listed, the
/// pod's own object read. One line per finding; a panic (exit 101) on any error.
fn in_cluster_program() {
    runtime().block_on(async {
        let config = match Config::incluster() {
            Ok(c) => c,
            Err(e) => panic!("kube-incluster: error: {e}"),
        };
        println!("kube-incluster: server {}", config.cluster_url);
        println!("kube-incluster: namespace {}", config.default_namespace);
        let namespace = config.default_namespace.clone();
        let client = Client::try_from(config).expect("kube-incluster: a client");
        let pods: Api<Pod> = Api::default_namespaced(client);
        let mut names: Vec<String> = pods
            .list(&ListParams::default())
            .await
            .unwrap_or_else(|e| panic!("kube-incluster: error: list: {e}"))
            .items
            .iter()
            .map(ResourceExt::name_any)
            .collect();
        names.sort();
        println!("kube-incluster: pods in {namespace}: {}", names.join(","));
        let own = std::env::var("POD_NAME").expect("POD_NAME from the downward API");
        let me = pods
            .get(&own)
            .await
            .unwrap_or_else(|e| panic!("kube-incluster: error: get {own}: {e}"));
        println!(
            "kube-incluster: own pod {} with service account {}",
            me.name_any(),
            me.spec
                .and_then(|s| s.service_account_name)
                .unwrap_or_default()
        );
    });
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn kube_rs_config_incluster_lists_pods_from_inside_a_pod() {
    if std::env::var_os(IN_POD).is_some() {
        return in_cluster_program();
    }
    let mut ctx = ServeCtx::new("krincl");
    ctx.start(&[]);
    let m = ctx.marker.clone();
    let exe = std::env::current_exe().unwrap();
    runtime().block_on(async {
        let client = client(&ctx).await;
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "apps"}})).unwrap();
        namespaces.create(&PostParams::default(), &ns).await.unwrap();
        ctx.grant_view("apps", "default");
        let pods: Api<Pod> = Api::namespaced(client.clone(), "apps");
        pods.create(
            &PostParams::default(),
            &pod("neighbour", &m, "exec sleep 3600", json!({})),
        )
        .await
        .unwrap();
        // The program is this test binary, asked to run this test only, which the variable
        // turns into the in-cluster program.
        let program = |name: &str, extra: Value| {
            let mut obj = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {
                "restartPolicy": "Never",
                "containers": [{
                    "name": "app",
                    "image": "busybox",
                    "command": [exe, IN_CLUSTER_TEST, "--exact", "--include-ignored", "--nocapture", "--quiet"],
                    "env": [
                        {"name": IN_POD, "value": m},
                        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    ],
                }],
            }});
            if let (Some(base), Value::Object(extra)) = (obj["spec"].as_object_mut(), extra) {
                base.extend(extra);
            }
            serde_json::from_value::<Pod>(obj).unwrap()
        };
        // Without the service-account volume there is no token: kube-rs says so, the pod fails.
        pods.create(
            &PostParams::default(),
            &program("tokenless", json!({"automountServiceAccountToken": false})),
        )
        .await
        .unwrap();
        pods.create(&PostParams::default(), &program("lister", json!({})))
            .await
            .unwrap();
        let finished = |p: &Pod| matches!(phase(p).as_str(), "Succeeded" | "Failed");
        let exit_code = |p: &Pod| {
            p.status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|c| c[0].state.as_ref())
                .and_then(|s| s.terminated.as_ref())
                .map(|t| t.exit_code)
        };

        let lister = wait_for(&pods, "lister", "the program to finish", finished).await;
        let logs = pods.logs("lister", &LogParams::default()).await.unwrap();
        assert_eq!(
            (phase(&lister).as_str(), exit_code(&lister)),
            ("Succeeded", Some(0)),
            "{logs}"
        );
        let kubeconfig = Kubeconfig::read_from(ctx.kubeconfig()).unwrap();
        let outside = kubeconfig.clusters[0]
            .cluster
            .as_ref()
            .and_then(|c| c.server.clone())
            .unwrap();
        let port = outside.rsplit(':').next().unwrap().trim_end_matches('/');
        for line in [
            format!("kube-incluster: server https://127.0.0.1:{port}/"),
            "kube-incluster: namespace apps".to_owned(),
            "kube-incluster: pods in apps: lister,neighbour,tokenless".to_owned(),
            "kube-incluster: own pod lister with service account default".to_owned(),
        ] {
            assert!(logs.lines().any(|l| l == line), "{line:?} missing:\n{logs}");
        }

        let tokenless = wait_for(&pods, "tokenless", "the program to finish", finished).await;
        let logs = pods.logs("tokenless", &LogParams::default()).await.unwrap();
        assert_eq!(
            (phase(&tokenless).as_str(), exit_code(&tokenless)),
            ("Failed", Some(101)),
            "{logs}"
        );
        // kube-rs reads the namespace file first (its error does not name the path).
        assert!(
            logs.contains("kube-incluster: error: failed to read the default namespace: No such file or directory"),
            "{logs}"
        );
    });
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn kube_rs_server_side_apply_logs_and_exec() {
    let mut ctx = ServeCtx::new("krssa");
    ctx.start(&[]);
    let m = ctx.marker.clone();
    runtime().block_on(async {
        let client = client(&ctx).await;
        let pods: Api<Pod> = Api::default_namespaced(client.clone());
        let applied = |labels: Value| {
            json!({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "applied", "labels": labels},
                "spec": {
                    "terminationGracePeriodSeconds": 5,
                    "containers": [{
                        "name": "app",
                        "image": "busybox",
                        "command": ["sh", "-c", "echo one; echo two; exec sleep 3600", m],
                    }],
                },
            })
        };
        // Server-side apply creates the pod, owned by the field manager "kube-rs".
        let ssa = PatchParams::apply("kube-rs").force();
        let created = pods
            .patch("applied", &ssa, &Patch::Apply(applied(json!({"app": "a"}))))
            .await
            .expect("server-side apply creates the pod");
        let managers: Vec<(String, String)> = created
            .managed_fields()
            .iter()
            .map(|f| {
                (
                    f.manager.clone().unwrap_or_default(),
                    f.operation.clone().unwrap_or_default(),
                )
            })
            .collect();
        assert_eq!(managers, [("kube-rs".to_owned(), "Apply".to_owned())]);

        // Another manager takes `app`; applying it again without force is a conflict naming
        // that manager, with force it is taken back.
        let taken = pods
            .patch(
                "applied",
                &PatchParams {
                    field_manager: Some("someone-else".into()),
                    ..PatchParams::default()
                },
                &Patch::Merge(json!({"metadata": {"labels": {"app": "b"}}})),
            )
            .await
            .unwrap();
        assert_eq!(taken.labels()["app"], "b");
        let unforced = PatchParams::apply("kube-rs");
        let conflict = pods
            .patch(
                "applied",
                &unforced,
                &Patch::Apply(applied(json!({"app": "c"}))),
            )
            .await
            .expect_err("a conflict");
        match conflict {
            kube::Error::Api(status) => {
                assert_eq!(status.code, 409, "{status:?}");
                assert!(status.message.contains("someone-else"), "{status:?}");
            }
            other => panic!("not an API error: {other}"),
        }
        let forced = pods
            .patch(
                "applied",
                &ssa,
                &Patch::Apply(applied(json!({"app": "c", "tier": "web"}))),
            )
            .await
            .unwrap();
        assert_eq!(forced.labels()["app"], "c");
        assert_eq!(forced.labels()["tier"], "web");

        wait_for(&pods, "applied", "Running", |p| phase(p) == "Running").await;
        // `Api::logs`, whole and the last line.
        let deadline = Instant::now() + WAIT;
        let mut logs = String::new();
        while logs != "one\ntwo\n" && Instant::now() < deadline {
            logs = pods.logs("applied", &LogParams::default()).await.unwrap();
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(logs, "one\ntwo\n");
        let tail = LogParams {
            tail_lines: Some(1),
            ..LogParams::default()
        };
        assert_eq!(pods.logs("applied", &tail).await.unwrap(), "two\n");

        // `Api::exec`: stdout and stderr apart, a non-zero exit in the status.
        let mut proc = pods
            .exec(
                "applied",
                ["sh", "-c", "echo out; echo err >&2; exit 3"],
                &AttachParams::default().stderr(true),
            )
            .await
            .expect("kube-rs execs over a WebSocket");
        let mut out = String::new();
        let mut err = String::new();
        let status = proc.take_status().unwrap();
        let mut stdout = proc.stdout().unwrap();
        let mut stderr = proc.stderr().unwrap();
        let (o, e) = tokio::join!(
            stdout.read_to_string(&mut out),
            stderr.read_to_string(&mut err)
        );
        o.unwrap();
        e.unwrap();
        let status = status.await.expect("a status");
        proc.join().await.unwrap();
        assert_eq!((out.as_str(), err.as_str()), ("out\n", "err\n"));
        assert_eq!(status.status.as_deref(), Some("Failure"), "{status:?}");
        assert_eq!(status.reason.as_deref(), Some("NonZeroExitCode"));
        let causes = status.details.and_then(|d| d.causes).unwrap_or_default();
        assert_eq!(causes[0].reason.as_deref(), Some("ExitCode"));
        assert_eq!(causes[0].message.as_deref(), Some("3"));

        // stdin, shut down (kube-rs then sends v5.channel.k8s.io's close signal, `[255, 0]`):
        // `cat` echoes it and ends.
        let mut proc = pods
            .exec(
                "applied",
                ["cat"],
                &AttachParams::default().stdin(true).stderr(false),
            )
            .await
            .unwrap();
        let status = proc.take_status().unwrap();
        let mut stdin = proc.stdin().unwrap();
        let mut stdout = proc.stdout().unwrap();
        stdin.write_all(b"ping from kube-rs\n").await.unwrap();
        stdin.shutdown().await.unwrap();
        let mut echoed = String::new();
        tokio::time::timeout(WAIT, stdout.read_to_string(&mut echoed))
            .await
            .expect("cat ends once stdin is closed")
            .unwrap();
        assert_eq!(echoed, "ping from kube-rs\n");
        let status = status.await.expect("a status");
        assert_eq!(status.status.as_deref(), Some("Success"), "{status:?}");
        proc.join().await.unwrap();

        pods.delete("applied", &DeleteParams::default())
            .await
            .unwrap();
        let uid = forced.uid().unwrap();
        tokio::time::timeout(
            WAIT,
            await_condition(
                pods.clone(),
                "applied",
                kube::runtime::wait::conditions::is_deleted(&uid),
            ),
        )
        .await
        .expect("the pod goes")
        .unwrap();
    });
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn kube_rs_discovery_finds_the_served_kinds_for_dynamic_objects() {
    let mut ctx = ServeCtx::new("krdisc");
    ctx.start(&[]);
    let m = ctx.marker.clone();
    runtime().block_on(async {
        let client = client(&ctx).await;
        let version = client.apiserver_version().await.unwrap();
        assert_eq!(
            (version.major.as_str(), version.minor.as_str()),
            ("1", "35")
        );

        let discovery = kube::Discovery::new(client.clone())
            .run()
            .await
            .expect("kube-rs discovers the served groups");
        for group in ["", "events.k8s.io", "coordination.k8s.io", "node.k8s.io"] {
            assert!(discovery.has_group(group), "{group:?} not discovered");
        }
        let (pods, caps) = discovery
            .resolve_gvk(&GroupVersionKind::gvk("", "v1", "Pod"))
            .expect("Pod resolved");
        assert_eq!(pods.plural, "pods");
        assert_eq!(caps.scope, Scope::Namespaced);
        for verb in ["list", "watch", "create", "patch", "delete"] {
            assert!(caps.supports_operation(verb), "{verb}: {caps:?}");
        }
        let subresources: Vec<&str> = caps
            .subresources
            .iter()
            .map(|(r, _)| r.plural.as_str())
            .collect();
        for sub in ["status", "log", "exec"] {
            assert!(subresources.contains(&sub), "{sub}: {subresources:?}");
        }
        let (events, _) = discovery
            .resolve_gvk(&GroupVersionKind::gvk("events.k8s.io", "v1", "Event"))
            .expect("events.k8s.io/v1 Event resolved");
        let (namespaces, caps) = discovery
            .resolve_gvk(&GroupVersionKind::gvk("", "v1", "Namespace"))
            .expect("Namespace resolved");
        assert_eq!(caps.scope, Scope::Cluster);

        // The resolved resources drive untyped clients.
        let typed: Api<Pod> = Api::default_namespaced(client.clone());
        typed
            .create(
                &PostParams::default(),
                &pod("dynamic", &m, "exec sleep 3600", json!({})),
            )
            .await
            .unwrap();
        let dynamic: Api<DynamicObject> = Api::default_namespaced_with(client.clone(), &pods);
        let listed = dynamic.list(&ListParams::default()).await.unwrap();
        let names: Vec<String> = listed.items.iter().map(ResourceExt::name_any).collect();
        assert_eq!(names, ["dynamic"]);
        let one = dynamic.get("dynamic").await.unwrap();
        assert_eq!(one.types.as_ref().map(|t| t.kind.as_str()), Some("Pod"));
        assert_eq!(one.data["spec"]["containers"][0]["name"], "app");
        let all: Api<DynamicObject> = Api::all_with(client.clone(), &namespaces);
        let mut names: Vec<String> = all
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .map(ResourceExt::name_any)
            .collect();
        names.sort();
        for ns in ["default", "kube-system"] {
            assert!(names.iter().any(|n| n == ns), "{names:?}");
        }
        let event_api: Api<DynamicObject> = Api::default_namespaced_with(client, &events);
        event_api.list(&ListParams::default()).await.unwrap();
    });
}
