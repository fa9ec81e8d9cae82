//! Part 5 and 6 of the API benchmark (issue 30): how fast `serve` stops with a full node, and
//! what a large object costs in memory.
//!
//! 5. stop: `serve` (without `--drain-on-exit`) with [`STOP_PODS`] pods running and
//!    [`STOP_WATCHES`] watches open gets SIGTERM: the time from the signal to its exit (its
//!    `serve.lock` is held until then). Then it is started again on the same state: every pod
//!    must be recovered as it was (nothing lost: a status not yet written is recomputed).
//! 6. memory: `serve`'s `VmRSS` before, with and after a pod of [`BIG_CONTAINERS`] containers
//!    (created, then deleted with grace 0 once admitted and bound), and after
//!    [`CHURN_WATCHERS`] watchers opened and closed.

use super::{
    Conn, Method, PODS, Results, World, count, memory_kib, pod_facts, pod_manifest, progress,
    spawn_watch, wait_pod_count, wait_serving, wait_started,
};
use crate::src::client::{Client, Kubeconfig};
use anyhow::{Context, Result};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Pods running when `serve` is stopped: the kubelet's default `maxPods`.
pub(super) const STOP_PODS: usize = 110;
/// Watches open when `serve` is stopped.
pub(super) const STOP_WATCHES: usize = 100;
/// Containers of the large pod (part 6).
pub(super) const BIG_CONTAINERS: usize = 1000;
/// Watchers opened and closed at once (part 6).
pub(super) const CHURN_WATCHERS: usize = 100;

/// What parts 5 and 6 measured.
#[derive(Default)]
pub(super) struct StopResults {
    /// SIGTERM → exit, with the pods and watches (n = 1 per run).
    pub(super) stop: Option<Duration>,
    pub(super) pods: usize,
    pub(super) watches: usize,
    /// What was wrong with the pods after the restart (empty: nothing).
    pub(super) problems: Vec<String>,
    /// VmRSS in KiB: before the large pod, with it, after its deletion, after the watchers.
    pub(super) rss: Option<[u64; 4]>,
    /// `serve`'s peak VmRSS (VmHWM) in KiB by the end of the large pod's deletion.
    pub(super) peak: u64,
    /// From the large pod's directory gone to its memory given back (or a minute).
    pub(super) settled: Option<Duration>,
    /// The large pod's JSON size.
    pub(super) big_bytes: usize,
}

/// Part 5: SIGTERM with a full node.
pub(super) async fn stop(
    world: &mut World,
    config: &Kubeconfig,
    pods: usize,
    results: &mut Results,
) -> Result<()> {
    progress(&format!(
        "stop: {pods} pods running, {STOP_WATCHES} watches open, SIGTERM (no drain) → exit"
    ));
    // A serve that leaves its pods running when it stops, as the kubelet does.
    world.kill9();
    std::fs::remove_file(world.kubeconfig()).ok();
    world.drain = false;
    let client = Client::new(config.clone())?;
    let spawned = world.spawn()?;
    wait_serving(world, &client, spawned).await?;
    let mut conn = Conn::new(config.clone())?;
    let have = count(&mut conn, PODS).await?;
    let list = client.get(PODS).await?;
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .context("the list has no resourceVersion")?
        .to_owned();
    let mut watch = spawn_watch(
        Client::new(config.clone())?,
        format!("{PODS}?watch=true&resourceVersion={rv}"),
    );
    let mut names = Vec::new();
    for i in have..pods {
        let name = format!("stop-{i:03}");
        super::create(&mut conn, &name, &pod_manifest(&name)).await?;
        names.push(name);
    }
    let mut early = BTreeMap::new();
    for name in &names {
        wait_started(&mut watch, name, &mut early).await?;
    }
    drop(watch);
    // The watches a busy node has open (kubectl get -w, controllers, dashboards).
    let mut watches = Vec::new();
    for _ in 0..STOP_WATCHES {
        watches.push(spawn_watch(
            Client::new(config.clone())?,
            format!("{PODS}?watch=true"),
        ));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    world.check_alive()?;
    let before = pod_facts(&client.get(PODS).await?);
    let took = world.stop_timed(Duration::from_secs(30))?;
    drop(watches);
    progress(&format!(
        "  SIGTERM → exit: {:.1} ms",
        took.as_secs_f64() * 1e3
    ));
    results.stop.stop = Some(took);
    results.stop.pods = before.len();
    results.stop.watches = STOP_WATCHES;

    // Nothing lost: the next serve recovers every pod as it was.
    world.drain = true;
    let spawned = world.spawn()?;
    wait_serving(world, &client, spawned).await?;
    let line = world.wait_serving_line().await?;
    if !line.contains(&format!("pods: {} recovered, 0 started", before.len())) {
        results
            .stop
            .problems
            .push(format!("after the stop: {line}"));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = pod_facts(&client.get(PODS).await?);
    for (name, facts) in &before {
        match after.get(name) {
            Some(now) if now == facts => {}
            Some(now) => results
                .stop
                .problems
                .push(format!("{name} was {facts:?}, now {now:?}")),
            None => results.stop.problems.push(format!("{name} is gone")),
        }
    }
    Ok(())
}

/// A pod of `n` containers, each a `sleep` (no shell looping: a thousand of those would load
/// the machine).
fn big_pod(name: &str, n: usize) -> Value {
    let containers: Vec<Value> = (0..n)
        .map(|i| {
            json!({
                "name": format!("c{i:04}"),
                "image": "busybox",
                "imagePullPolicy": "IfNotPresent",
                "command": ["sleep", "3600"],
            })
        })
        .collect();
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"terminationGracePeriodSeconds": 5, "containers": containers},
    })
}

/// Part 6: `serve`'s memory around a large pod and a burst of watchers.
pub(super) async fn memory(
    world: &mut World,
    config: &Kubeconfig,
    keep: usize,
    results: &mut Results,
) -> Result<()> {
    progress(&format!(
        "memory: a {BIG_CONTAINERS}-container pod created, run, deleted; {CHURN_WATCHERS} \
         watchers opened and closed"
    ));
    let pid = world.serve_pid().context("serve is not running")?;
    let mut conn = Conn::new(config.clone())?;
    wait_pod_count(&mut conn, keep).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = memory_kib(pid)?.0;
    let pod = big_pod("big", BIG_CONTAINERS);
    results.stop.big_bytes = serde_json::to_vec(&pod)?.len();
    super::create(&mut conn, "big", &pod).await?;
    // Until every container has started (or a minute has passed: the machine has 2 cores).
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, body) = conn
            .request(Method::GET, &format!("{PODS}/big"), None)
            .await?;
        let pod: Value = serde_json::from_slice(&body)?;
        let started = pod["status"]["containerStatuses"]
            .as_array()
            .map_or(0, |s| s.iter().filter(|c| c["started"] == true).count());
        if started == BIG_CONTAINERS || Instant::now() > deadline {
            progress(&format!(
                "  {started} of {BIG_CONTAINERS} containers started"
            ));
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let with = memory_kib(pid)?.0;
    let uid = {
        let (_, body) = conn
            .request(Method::GET, &format!("{PODS}/big"), None)
            .await?;
        let pod: Value = serde_json::from_slice(&body)?;
        pod["metadata"]["uid"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    super::delete_now(&mut conn, "big").await?;
    wait_pod_count(&mut conn, keep).await?;
    // The object goes at once (grace 0); the node's worker ends once every container has
    // been killed and the sandbox removed (its directory goes last), then a trim follows.
    let marker = world.state().display().to_string();
    super::wait_no_processes(&marker, &uid).await?;
    super::wait_gone(&world.state().join("pods").join(&uid)).await?;
    // The status writer may still be writing the pod's last statuses (its directory goes
    // first), and the trim follows the worker's end: wait up to a minute for the memory to
    // come back to within 10 % of where it was.
    let gone = Instant::now();
    let (after, peak) = loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let (rss, peak) = memory_kib(pid)?;
        if rss * 10 <= before * 11 || gone.elapsed() > Duration::from_secs(60) {
            break (rss, peak);
        }
    };
    results.stop.peak = peak;
    results.stop.settled = Some(gone.elapsed());
    let mut watchers = Vec::new();
    for _ in 0..CHURN_WATCHERS {
        watchers.push(spawn_watch(
            Client::new(config.clone())?,
            format!("{PODS}?watch=true"),
        ));
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    drop(watchers);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let watched = memory_kib(pid)?.0;
    progress(&format!(
        "  serve VmRSS (MiB): before {:.1}, with the pod {:.1}, after its deletion {:.1}, after \
         {CHURN_WATCHERS} watchers {:.1}",
        mib(before),
        mib(with),
        mib(after),
        mib(watched)
    ));
    results.stop.rss = Some([before, with, after, watched]);
    Ok(())
}

pub(super) fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}
