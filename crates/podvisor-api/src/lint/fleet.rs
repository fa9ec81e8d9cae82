//! Rules over every pod given at once: the node-wide rate of exec probes.

use super::{Draft, Level, Options, Rule, Target, probes_of};

/// `PL009`: exec probes, across the pods, start more processes per second than a node
/// comfortably runs.
pub const EXEC_PROBE_RATE: Rule = Rule {
    id: "PL009",
    name: "exec-probe-rate",
    level: Level::Warning,
};

/// Exec probes per second across the node above which PL009 speaks. Each exec probe is a
/// process started in the container through the runtime (an exec session, a fork, a cgroup
/// join and a reap): tens of milliseconds of CPU each, on the node's own cores.
pub const EXEC_RATE_LIMIT: f64 = 10.0;

/// PL009: every exec probe of every valid target, with its pods (`--pods`, else the target's
/// `replicas`) and period; when their sum passes [`EXEC_RATE_LIMIT`], one finding per exec probe
/// that makes a tenth of it or more (returned with the index of its target).
pub(crate) fn exec_probe_rate(targets: &[Target], options: &Options) -> Vec<(usize, Draft)> {
    struct ExecProbe {
        target: usize,
        path: String,
        container: String,
        pods: u32,
        period: i32,
    }
    let mut probes = Vec::new();
    for (i, t) in targets.iter().enumerate() {
        if !t.problems.is_empty() {
            continue;
        }
        let Some(spec) = &t.pod.spec else { continue };
        let pods = options.pods.unwrap_or(t.replicas);
        let sidecars = spec
            .init_containers
            .iter()
            .flatten()
            .enumerate()
            .filter(|(_, c)| crate::pod::is_sidecar(c))
            .map(|(j, c)| (format!("spec.initContainers[{j}]"), c));
        let regular = spec
            .containers
            .iter()
            .enumerate()
            .map(|(j, c)| (format!("spec.containers[{j}]"), c));
        for (path, c) in sidecars.chain(regular) {
            // A startup probe stops once it has passed: only liveness and readiness run for
            // the pod's whole life.
            for (field, p) in probes_of(c) {
                if p.exec.is_some() && field != "startupProbe" {
                    probes.push(ExecProbe {
                        target: i,
                        path: format!("{path}.{field}"),
                        container: c.name.clone(),
                        pods,
                        period: p.period_seconds.filter(|p| *p > 0).unwrap_or(10),
                    });
                }
            }
        }
    }
    let rate = |p: &ExecProbe| f64::from(p.pods) / f64::from(p.period);
    let total: f64 = probes.iter().map(rate).sum();
    let all_pods: u64 = {
        let mut seen = std::collections::BTreeMap::new();
        for p in &probes {
            seen.insert(p.target, u64::from(p.pods));
        }
        seen.values().sum()
    };
    if total <= EXEC_RATE_LIMIT {
        return Vec::new();
    }
    // The probes that make a tenth of the rate or more: the ones worth changing.
    probes
        .iter()
        .filter(|p| rate(p) >= total / 10.0)
        .map(|p| {
            let this = rate(p);
            (
                p.target,
                Draft {
                    rule: EXEC_PROBE_RATE,
                    path: p.path.clone(),
                    message: format!(
                        "container {:?}: this exec probe runs every {}s in {} pod{}: {this:.1} \
                         processes/s; the exec probes of the {all_pods} pods given start \
                         {total:.1}/s on the node (more than {EXEC_RATE_LIMIT})",
                        p.container,
                        p.period,
                        p.pods,
                        if p.pods == 1 { "" } else { "s" },
                    ),
                    why: "every exec probe starts a process inside the container through the \
                          runtime (an exec session, a fork, a cgroup join, a reap): across many \
                          pods that is CPU the node and the containers spend on probing, and \
                          probes that queue up time out"
                        .to_owned(),
                    fix: format!(
                        "use an httpGet, tcpSocket or grpc probe (no process), or a longer \
                         periodSeconds (at {:.0}s the exec probes stay under {EXEC_RATE_LIMIT}/s)",
                        (f64::from(p.period) * total / EXEC_RATE_LIMIT).ceil()
                    ),
                    simulation: None,
                },
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lint::{Entry, decode_targets};

    fn targets(yaml: &str) -> Vec<Target> {
        decode_targets(yaml, "t.yaml")
            .unwrap()
            .into_iter()
            .filter_map(|e| match e {
                Entry::Target(t) => Some(*t),
                Entry::Skipped(_) => None,
            })
            .collect()
    }

    fn deployment(replicas: u32, period: u32) -> String {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: api}}\nspec:\n  replicas: {replicas}\n  selector: {{matchLabels: {{app: api}}}}\n  template:\n    metadata: {{labels: {{app: api}}}}\n    spec:\n      containers:\n      - name: api\n        image: api\n        command: [api]\n        readinessProbe:\n          exec: {{command: [cat, /tmp/ready]}}\n          periodSeconds: {period}\n"
        )
    }

    #[test]
    fn pl009_fires_when_replicas_push_the_rate_over_the_limit() {
        let t = targets(&deployment(30, 2));
        let d = exec_probe_rate(&t, &Options::default());
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].1.path, "spec.containers[0].readinessProbe");
        assert!(
            d[0].1.message.contains("15.0 processes/s"),
            "{}",
            d[0].1.message
        );
    }

    #[test]
    fn pl009_is_quiet_under_the_limit_and_counts_pods_from_the_option() {
        let t = targets(&deployment(3, 2));
        assert!(exec_probe_rate(&t, &Options::default()).is_empty());
        let many = Options {
            pods: Some(40),
            start_time: None,
        };
        assert_eq!(exec_probe_rate(&t, &many).len(), 1);
    }
}
