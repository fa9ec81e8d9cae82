//! The pod timeline: `podvisor simulate --output html|svg` (one self-contained file) and
//! `podvisor dashboard` loaded by a real browser (Debian's headless Chromium) against a real
//! `podvisor serve` running scripted pods: a crash loop, a container killed by its liveness
//! probe, and a sidecar pod terminating. The drawing's structure is read from the DOM the
//! browser built (lane, span and marker ids, classes and order), the screenshot must be a
//! real PNG, the live stream must send new drawings, and after `serve` is killed and started
//! again the timeline still shows the pod's history from its creation.

#![allow(missing_docs)]

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{Ctx, MARKER_ENV};

/// The longest any single state may take to be reached (a loaded 2-core machine).
const WAIT: Duration = Duration::from_secs(60);

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

fn simulate(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_podvisor"))
        .arg("simulate")
        .args(args)
        .current_dir(examples())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Nothing outside the file: no URL but the SVG namespace, no `src`, no `href`.
fn assert_self_contained(text: &str) {
    let without_ns = text.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
    for bad in ["http://", "https://", "src=", "href=", "url(", "@import"] {
        assert!(!without_ns.contains(bad), "{bad:?} in the output");
    }
}

/// The `id`s of the lanes in document order.
fn lane_ids(text: &str) -> Vec<String> {
    text.match_indices("class=\"lane\" id=\"")
        .map(|(i, m)| {
            let rest = &text[i + m.len()..];
            rest[..rest.find('"').unwrap()].to_string()
        })
        .collect()
}

/// The values of attribute `attr` of the elements inside the lane `id`, in document order.
fn in_lane(text: &str, id: &str, class_prefix: &str, attr: &str) -> Vec<String> {
    let start = text
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no {id}"));
    let end = text[start..]
        .find("class=\"lane\" id=")
        .map_or(text.len(), |e| start + e);
    let lane = &text[start..end];
    let key = format!("{attr}=\"");
    lane.match_indices(&format!("class=\"{class_prefix}"))
        .filter_map(|(i, _)| {
            let tag_end = lane[i..].find('>')? + i;
            let tag = &lane[i..tag_end];
            let v = tag.find(&key)? + key.len();
            Some(tag[v..v + tag[v..].find('"')?].to_string())
        })
        .collect()
}

#[test]
fn simulate_html_is_one_self_contained_page_with_the_timeline_and_a_legend() {
    let html = simulate(&[
        "sidecar.yaml",
        "--script",
        "scripts/sidecar-delete.yaml",
        "--for",
        "2m",
        "--output",
        "html",
    ]);
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert_self_contained(&html);
    assert!(html.contains("id=\"legend\""));
    assert!(!html.contains("<script"), "the file needs no script");
    // T4: the sidecar's lane comes before the app's; the deletion at 60 s with its 30 s grace.
    assert_eq!(lane_ids(&html), ["lane-logger", "lane-app"]);
    assert!(html.contains("id=\"deletion\" data-t=\"60.000\" data-grace=\"30\""));
    let states = in_lane(&html, "lane-logger", "span ", "data-state");
    assert!(states.iter().any(|s| s == "ready"), "{states:?}");
    assert_eq!(states.last().map(String::as_str), Some("terminated"));
}

#[test]
fn simulate_svg_is_the_drawing_alone() {
    let svg = simulate(&[
        "crashloop.yaml",
        "--script",
        "scripts/crashloop.yaml",
        "--for",
        "5m",
        "-o",
        "svg",
    ]);
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert!(svg.trim_end().ends_with("</svg>"));
    assert_self_contained(&svg);
    // B1: restarts at 0, 0, 10, 30, 70, 150 s: the back-off waits grow.
    let reasons = in_lane(&svg, "lane-app", "span ", "data-reason");
    assert!(reasons.iter().filter(|r| *r == "CrashLoopBackOff").count() >= 4);
    let starts: Vec<f64> = in_lane(&svg, "lane-app", "span ", "data-start")
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
    assert!(starts.windows(2).all(|w| w[0] <= w[1]), "{starts:?}");
    assert_eq!(in_lane(&svg, "lane-app", "restart", "data-count").len(), 5);
}

// ----- the dashboard in a browser -----

/// Debian's Chromium (`scripts/install-test-deps` installs it), or `$PODVISOR_CHROMIUM`.
fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PODVISOR_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

fn browser(chromium: &Path, profile: &Path, args: &[&str], url: &str) -> Output {
    // Its own profile directory, no sandbox (root), no GPU; a hang is a failure, not a wait.
    let mut child = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--window-size=1200,700",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("chromium starts");
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

/// `serve`, and the dashboard reading its kubeconfig.
struct Session {
    serve: Option<Child>,
    dashboard: Option<Child>,
    url: String,
    /// Dropped last: kills what is left and removes the directory.
    ctx: Ctx,
}

impl Session {
    fn start_serve(ctx: &Ctx, drain: bool) -> Child {
        let kubeconfig = ctx.path("state/kubeconfig");
        let _ = std::fs::remove_file(&kubeconfig);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(ctx.path("serve.log"))
            .unwrap();
        let mut serve = Command::new(env!("CARGO_BIN_EXE_podvisor"));
        serve
            .arg("serve")
            .arg("--state-dir")
            .arg(ctx.path("state"))
            .args(["--listen", "127.0.0.1:0"])
            // The host's own disk level must not evict this test's pods.
            .arg("--eviction-hard=");
        if drain {
            serve.arg("--drain-on-exit");
        }
        let mut serve = serve
            .env(MARKER_ENV, &ctx.marker)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("podvisor serve starts");
        let started = Instant::now();
        while !kubeconfig.exists() {
            if let Some(status) = serve.try_wait().unwrap() {
                panic!("serve exited with {status}");
            }
            assert!(started.elapsed() < WAIT, "no kubeconfig");
            std::thread::sleep(Duration::from_millis(20));
        }
        serve
    }

    fn start_dashboard(ctx: &Ctx) -> (Child, String) {
        let mut dashboard = Command::new(env!("CARGO_BIN_EXE_podvisor"))
            .args(["dashboard", "--listen", "127.0.0.1:0", "--kubeconfig"])
            .arg(ctx.path("state/kubeconfig"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("podvisor dashboard starts");
        let mut line = String::new();
        BufReader::new(dashboard.stderr.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .trim()
            .strip_prefix("podvisor: dashboard at ")
            .unwrap_or_else(|| panic!("the dashboard's first line: {line:?}"))
            .trim_end_matches('/')
            .to_string();
        (dashboard, url)
    }

    fn start() -> Session {
        let ctx = Ctx::new("timeline");
        let serve = Self::start_serve(&ctx, true);
        let (dashboard, url) = Self::start_dashboard(&ctx);
        Session {
            serve: Some(serve),
            dashboard: Some(dashboard),
            url,
            ctx,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.ctx.path("serve.log")).unwrap_or_default()
    }

    fn podvisor(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_podvisor"))
            .args(args)
            .arg("--kubeconfig")
            .arg(self.ctx.path("state/kubeconfig"))
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    fn apply(&self, name: &str, manifest: &str) {
        let path = self.ctx.path(&format!("{name}.yaml"));
        std::fs::write(&path, manifest.replace("MARKER", &self.ctx.marker)).unwrap();
        let out = self.podvisor(&["apply", "-f", path.to_str().unwrap()]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Polls `podvisor get pod NAME -o json` until `check` holds.
    fn wait_for(&self, what: &str, name: &str, check: impl Fn(&serde_json::Value) -> bool) {
        let start = Instant::now();
        loop {
            let out = self.podvisor(&["get", "pod", name, "-o", "json"]);
            if let Ok(pod) = serde_json::from_slice::<serde_json::Value>(&out.stdout)
                && check(&pod)
            {
                return;
            }
            assert!(
                start.elapsed() < WAIT,
                "{what}: not after {WAIT:?}\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn stop_dashboard(&mut self) {
        if let Some(mut d) = self.dashboard.take() {
            podvisor_testkit::signal(d.id(), podvisor_testkit::Signal::TERM);
            let _ = d.wait();
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.stop_dashboard();
        if let Some(mut serve) = self.serve.take() {
            // SIGTERM: serve deletes its pods gracefully (--drain-on-exit), then exits.
            podvisor_testkit::terminate(&mut serve, WAIT);
        }
        if std::thread::panicking() {
            eprintln!("--- serve log ---\n{}", self.log());
        }
    }
}

fn restart_count(pod: &serde_json::Value, container: &str) -> i64 {
    pod["status"]["containerStatuses"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["name"] == container)
        .and_then(|c| c["restartCount"].as_i64())
        .unwrap_or(0)
}

/// A plain HTTP/1.1 GET of the dashboard (loopback, no TLS); returns the body read within
/// `limit`, or until `until` appears in it.
fn http_get(base: &str, path: &str, until: Option<&str>, limit: Duration) -> String {
    let addr = base.strip_prefix("http://").unwrap();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut got = Vec::new();
    let start = Instant::now();
    let mut buf = [0u8; 65536];
    while start.elapsed() < limit {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => panic!("reading {path}: {e}"),
        }
        if until.is_some_and(|u| String::from_utf8_lossy(&got).contains(u)) {
            break;
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

const CRASHY: &str = "apiVersion: v1
kind: Pod
metadata: {name: crashy}
spec:
  containers:
  - name: app
    image: busybox
    command: [sh, -c, 'echo starting; exit 1']
    env: [{name: PODVISOR_E2E_MARKER, value: MARKER}]
";

const PROBED: &str = "apiVersion: v1
kind: Pod
metadata: {name: probed}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: app
    image: busybox
    command: [sleep, '3600']
    env: [{name: PODVISOR_E2E_MARKER, value: MARKER}]
    livenessProbe:
      exec: {command: [sh, -c, 'echo not alive; exit 1']}
      periodSeconds: 1
      failureThreshold: 2
";

/// A job-like pod: the app finishes, the kubelet stops the sidecar (exit 143), the pod succeeds.
const JOB: &str = "apiVersion: v1
kind: Pod
metadata: {name: job}
spec:
  restartPolicy: Never
  initContainers:
  - name: proxy
    image: busybox
    restartPolicy: Always
    command: [sleep, '3600']
    env: [{name: PODVISOR_E2E_MARKER, value: MARKER}]
  containers:
  - name: app
    image: busybox
    command: [sh, -c, 'echo job done; sleep 2']
    env: [{name: PODVISOR_E2E_MARKER, value: MARKER}]
";

const SIDECAR: &str = "apiVersion: v1
kind: Pod
metadata: {name: side}
spec:
  terminationGracePeriodSeconds: 30
  initContainers:
  - name: proxy
    image: busybox
    restartPolicy: Always
    command: [sleep, '3600']
    env: [{name: PODVISOR_E2E_MARKER, value: MARKER}]
  containers:
  - name: app
    image: busybox
    command: [sh, -c, 'trap \"sleep 20; exit 0\" TERM; while true; do sleep 1; done']
    env: [{name: PODVISOR_E2E_MARKER, value: MARKER}]
";

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn dashboard_in_headless_chromium_draws_lanes_spans_and_markers() {
    let Some(chromium) = chromium() else {
        eprintln!(
            "SKIPPED dashboard_in_headless_chromium_draws_lanes_spans_and_markers: no Chromium \
             (/usr/bin/chromium); install Debian's `chromium` (scripts/install-test-deps does) \
             or set PODVISOR_CHROMIUM"
        );
        return;
    };
    let mut s = Session::start();
    let profile = s.ctx.path("chromium");
    s.apply("crashy", CRASHY);
    s.apply("probed", PROBED);
    s.apply("side", SIDECAR);
    s.apply("job", JOB);
    // B1: two restarts take 10 s of back-off; R8: two failed probes a second apart kill it.
    s.wait_for("crashy restarted twice", "crashy", |p| {
        restart_count(p, "app") >= 2
    });
    s.wait_for("probed restarted", "probed", |p| {
        restart_count(p, "app") >= 1
    });
    s.wait_for("side running", "side", |p| {
        p["status"]["phase"] == "Running"
    });

    // The pods page: kubectl's columns, one row per pod, each a link to its timeline.
    let out = browser(&chromium, &profile, &["--dump-dom"], &format!("{}/", s.url));
    let dom = String::from_utf8_lossy(&out.stdout);
    for h in ["NAME", "READY", "STATUS", "RESTARTS", "AGE"] {
        assert!(dom.contains(&format!("<th>{h}</th>")), "{dom}");
    }
    for name in ["crashy", "probed", "side"] {
        assert!(
            dom.contains(&format!("href=\"/pods/default/{name}\"")),
            "{name}: {dom}"
        );
    }

    // The crash loop: back-off spans in time order, restarts, BackOff warnings.
    let out = browser(
        &chromium,
        &profile,
        &["--dump-dom"],
        &format!("{}/pods/default/crashy", s.url),
    );
    let dom = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(lane_ids(&dom), ["lane-app"], "{dom}");
    let reasons = in_lane(&dom, "lane-app", "span ", "data-reason");
    assert!(
        reasons.iter().any(|r| r == "CrashLoopBackOff"),
        "{reasons:?}"
    );
    let starts: Vec<f64> = in_lane(&dom, "lane-app", "span ", "data-start")
        .iter()
        .map(|v| v.parse().unwrap())
        .collect();
    assert!(starts.windows(2).all(|w| w[0] <= w[1]), "{starts:?}");
    assert!(
        in_lane(&dom, "lane-app", "restart", "data-count").len() >= 2,
        "{dom}"
    );
    // Repeated events are folded: one BackOff mark, however many times it happened.
    let marks = in_lane(&dom, "lane-app", "marker", "data-reason");
    assert_eq!(
        marks.iter().filter(|r| *r == "BackOff").count(),
        1,
        "{marks:?}"
    );
    assert!(dom.contains("id=\"phase\"") && dom.contains("id=\"condition-Ready\""));
    assert!(
        dom.contains("id=\"legend-phase\""),
        "the phase colours in the legend"
    );
    // Under the drawing: kubectl describe's Events table and the container's log.
    let events = &dom[dom.find("id=\"events\"").expect("an events table")..];
    assert!(
        events.contains("<th>Type</th><th>Reason</th><th>Age</th><th>From</th><th>Message</th>"),
        "{events}"
    );
    assert!(
        events.contains("data-reason=\"BackOff\"")
            && events.contains("Back-off restarting failed container app"),
        "{events}"
    );
    let log = &dom[dom.find("id=\"log-app\"").expect("the app's log")..];
    assert!(
        log[..log.find("</pre>").unwrap()].contains("starting"),
        "{log}"
    );

    // The screenshot is a real picture.
    let png = s.ctx.path("crashy.png");
    let out = browser(
        &chromium,
        &profile,
        &[&format!("--screenshot={}", png.display())],
        &format!("{}/pods/default/crashy", s.url),
    );
    let bytes = std::fs::read(&png).unwrap_or_else(|e| {
        panic!(
            "no screenshot ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert!(
        bytes.starts_with(b"\x89PNG\r\n\x1a\n") && bytes.len() > 10_000,
        "{} bytes",
        bytes.len()
    );

    // The probe-killed container: failures named on hover, then Killing, then the restart.
    let out = browser(
        &chromium,
        &profile,
        &["--dump-dom"],
        &format!("{}/pods/default/probed", s.url),
    );
    let dom = String::from_utf8_lossy(&out.stdout).into_owned();
    let kinds = in_lane(&dom, "lane-app", "marker", "data-kind");
    let reasons = in_lane(&dom, "lane-app", "marker", "data-reason");
    let failure = kinds
        .iter()
        .position(|k| k == "probe-failure")
        .expect("a probe failure");
    assert_eq!(reasons[failure], "Unhealthy");
    let killing = reasons
        .iter()
        .position(|r| r == "Killing")
        .expect("Killing");
    assert!(failure < killing, "{reasons:?}");
    assert!(
        dom.contains("Liveness probe failed"),
        "the failure's message on hover"
    );
    assert!(!in_lane(&dom, "lane-app", "restart", "data-count").is_empty());

    // The sidecar pod terminating: lanes sidecar then regular; the grace period as a band.
    let out = s.podvisor(&["delete", "pod", "side", "--wait=false"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = browser(
        &chromium,
        &profile,
        &["--dump-dom"],
        &format!("{}/pods/default/side", s.url),
    );
    let dom = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(lane_ids(&dom), ["lane-proxy", "lane-app"], "{dom}");
    assert!(dom.contains("data-kind=\"sidecar\"") && dom.contains("data-kind=\"regular\""));
    assert!(dom.contains("id=\"deletion\""), "{dom}");
    assert!(dom.contains("data-grace=\"30\""), "{dom}");
    assert!(in_lane(&dom, "lane-app", "marker", "data-reason").contains(&"Killing".to_string()));

    // The job-like pod succeeded: its sidecar, stopped by the kubelet (143, reported as Error),
    // is drawn as a neutral "stopped" span, not a red error.
    s.wait_for("job succeeded", "job", |p| {
        p["status"]["phase"] == "Succeeded"
    });
    let svg = dom_of(&s.url, "job");
    let states = in_lane(&svg, "lane-proxy", "span ", "data-state");
    assert_eq!(states.last().map(String::as_str), Some("stopped"), "{svg}");
    assert!(!states.iter().any(|s| s == "terminated"), "{states:?}");

    // Live: the stream sends a new drawing as the crash loop goes on.
    let stream = http_get(
        &s.url,
        "/pods/default/crashy/stream",
        Some("event: events"),
        WAIT,
    );
    assert!(stream.contains("text/event-stream"), "{stream}");
    assert!(stream.contains("event: timeline\ndata: <svg"), "{stream}");
    assert!(
        stream.contains("event: events\ndata: <table id=\"events-table\">"),
        "{stream}"
    );
    // The logs follow, fetched again as they change.
    let stream = http_get(
        &s.url,
        "/pods/default/crashy/stream",
        Some("event: logs"),
        WAIT,
    );
    assert!(stream.contains("id=\"log-app\">starting"), "{stream}");

    // History survives serve: kill it (the pods keep running), start it again, and the crash
    // loop's lane still begins with the pod's first status (ContainerCreating: the object
    // alone would give only its current state) and has every restart.
    let before = in_lane(
        &dom_of(&s.url, "crashy"),
        "lane-app",
        "restart",
        "data-count",
    )
    .len();
    s.stop_dashboard();
    let mut serve = s.serve.take().unwrap();
    let _ = serve.kill();
    let _ = serve.wait();
    s.serve = Some(Session::start_serve(&s.ctx, true));
    let (dashboard, url) = Session::start_dashboard(&s.ctx);
    s.dashboard = Some(dashboard);
    s.url = url;
    let svg = dom_of(&s.url, "crashy");
    let reasons = in_lane(&svg, "lane-app", "span ", "data-reason");
    assert_eq!(
        reasons.first().map(String::as_str),
        Some("ContainerCreating"),
        "{svg}"
    );
    let after = in_lane(&svg, "lane-app", "restart", "data-count").len();
    assert!(
        after >= before && before >= 2,
        "restarts drawn before {before}, after {after}"
    );
}

/// The drawing of pod `name` from the dashboard.
fn dom_of(base: &str, name: &str) -> String {
    let text = http_get(
        base,
        &format!("/pods/default/{name}/timeline.svg"),
        Some("</svg>"),
        WAIT,
    );
    assert!(text.contains("200 OK"), "{text}");
    text
}

#[test]
fn simulate_html_refuses_a_file_of_several_pods() {
    let dir = std::env::temp_dir().join(format!("podvisor-timeline-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("two.yaml");
    std::fs::write(
        &file,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  containers: [{name: c, image: busybox}]\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata: {name: b}\nspec:\n  containers: [{name: c, image: busybox}]\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_podvisor"))
        .args(["simulate", file.to_str().unwrap(), "--output", "html"])
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--output html: draws one pod") && err.contains("holds 2"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
}
