//! Benchmark: simulate one hour of a crash-looping pod with startup, liveness and readiness
//! probes (period 10 s) on the virtual clock, and print wall time per simulated hour and machine
//! steps per second. Target (issue 2): <= 10 ms per simulated hour.
//!
//! Run: `cargo bench -p podvisor-lifecycle --bench crashloop`.

use k8s_openapi::api::core::v1::Pod;
use podvisor_lifecycle::sim::{Script, SimOptions, simulate_counting};
use std::time::{Duration, Instant};

fn pod() -> Pod {
    let probe = |cmd: &str| {
        serde_json::json!({"exec": {"command": ["sh", "-c", cmd]}, "periodSeconds": 10,
            "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3})
    };
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "crashy", "namespace": "default", "uid": "8d7c6a3e-0000-4000-8000-000000000001"},
        "spec": {"restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
            "containers": [{"name": "app", "image": "busybox", "command": ["sh", "-c", "sleep 45; exit 1"],
                "startupProbe": probe("true"), "livenessProbe": probe("true"), "readinessProbe": probe("true")}]}
    }))
    .expect("valid pod")
}

fn main() {
    let script =
        Script::parse("containers:\n  app:\n    runs:\n    - {exitAfter: 45s, exitCode: 1}\n")
            .expect("script");
    let opts = SimOptions {
        duration: Duration::from_secs(3600),
        ..SimOptions::default()
    };
    // Warm up once, then measure.
    let (records, steps) = simulate_counting(pod(), &script, &opts).expect("simulate");
    let iterations = 50u32;
    let begin = Instant::now();
    for _ in 0..iterations {
        let out = simulate_counting(pod(), &script, &opts).expect("simulate");
        std::hint::black_box(out);
    }
    let per_run = begin.elapsed() / iterations;
    let steps_per_sec = steps as f64 / per_run.as_secs_f64();
    println!("crash-looping pod, 3 probes, 1 h simulated:");
    println!("  machine steps per simulated hour: {steps}");
    println!("  timeline records: {}", records.len());
    println!(
        "  wall time per simulated hour: {:.3} ms (target <= 10 ms)",
        per_run.as_secs_f64() * 1e3
    );
    println!("  steps per second: {steps_per_sec:.0}");
}
