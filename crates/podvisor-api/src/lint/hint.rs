//! "Where it helps, the timeline": the `podvisor simulate` command that shows a finding's
//! failure on the simulator's virtual clock.

use std::time::Duration;

use serde::Serialize;

use super::secs;

/// What to simulate to see a finding's failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Simulation {
    /// The `--script` (one line of flow-style YAML), if the failure needs one.
    pub script: Option<String>,
    /// `--for`.
    pub duration: Duration,
    /// What the timeline shows, e.g. `Killing events and restarts`.
    pub shows: String,
}

/// The command of a finding, and what it shows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SimulateHint {
    /// The shell command, e.g. `echo '{…}' | podvisor simulate web.yaml --script /dev/stdin
    /// --for 3m`.
    pub command: String,
    /// What to look for in its timeline.
    pub shows: String,
}

impl Simulation {
    /// The shell command that simulates the pods of `source` with this script (only the pod
    /// `pod`, when given: `--pod NAME`); `None` for stdin (`-`), which cannot be read twice.
    #[must_use]
    pub fn command(&self, source: &str, pod: Option<&str>) -> Option<SimulateHint> {
        if source == "-" {
            return None;
        }
        let only = pod.map_or_else(String::new, |p| format!(" --pod {}", shell_quote(p)));
        let run = format!(
            "podvisor simulate {}{only} --for {}",
            shell_quote(source),
            secs(self.duration)
        );
        let command = match &self.script {
            Some(script) => format!("echo {} | {run} --script /dev/stdin", shell_quote(script)),
            None => run,
        };
        Some(SimulateHint {
            command,
            shows: self.shows.clone(),
        })
    }
}

/// `text` as one POSIX shell word: bare when it is only safe characters, else single-quoted.
#[must_use]
pub fn shell_quote(text: &str) -> String {
    let safe = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@%+,".contains(c));
    if safe {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

/// A container's name, a probe kind and its `(from, passes)` stretches.
pub(crate) type ProbeStretches<'a> = (&'a str, &'a str, &'a [(Duration, bool)]);

/// A script line for container `name`'s probes: `kind` (`liveness`, `readiness`, `startup`)
/// gives each `(from, result)` stretch, relative to each run's start.
pub(crate) fn probe_script(entries: &[ProbeStretches<'_>]) -> String {
    // {containers: {app: {probes: {liveness: [{from: 0s, result: failure}]}}}}
    let mut containers: Vec<(String, Vec<String>)> = Vec::new();
    for (container, kind, stretches) in entries {
        let list: Vec<String> = stretches
            .iter()
            .map(|(from, ok)| {
                format!(
                    "{{from: {}, result: {}}}",
                    secs(*from),
                    if *ok { "success" } else { "failure" }
                )
            })
            .collect();
        let item = format!("{kind}: [{}]", list.join(", "));
        match containers.iter_mut().find(|(c, _)| c == container) {
            Some((_, items)) => items.push(item),
            None => containers.push(((*container).to_owned(), vec![item])),
        }
    }
    let body: Vec<String> = containers
        .into_iter()
        .map(|(c, items)| format!("{c}: {{probes: {{{}}}}}", items.join(", ")))
        .collect();
    format!("{{containers: {{{}}}}}", body.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_quote_leaves_paths_bare_and_quotes_the_rest() {
        assert_eq!(
            shell_quote("examples/lint/web.yaml"),
            "examples/lint/web.yaml"
        );
        assert_eq!(shell_quote("my pods.yaml"), "'my pods.yaml'");
        assert_eq!(shell_quote("it's.yaml"), r"'it'\''s.yaml'");
        assert_eq!(shell_quote("{a: b}"), "'{a: b}'");
    }

    #[test]
    fn probe_script_groups_by_container() {
        let s = probe_script(&[
            (
                "app",
                "liveness",
                &[(Duration::ZERO, false), (Duration::from_secs(45), true)],
            ),
            ("app", "readiness", &[(Duration::from_secs(60), false)]),
        ]);
        assert_eq!(
            s,
            "{containers: {app: {probes: {liveness: [{from: 0s, result: failure}, {from: 45s, result: success}], readiness: [{from: 60s, result: failure}]}}}}"
        );
        let script: serde_json::Value = serde_saphyr::from_str(&s).unwrap();
        assert!(script["containers"]["app"]["probes"]["liveness"].is_array());
    }

    #[test]
    fn stdin_has_no_command() {
        let sim = Simulation {
            script: None,
            duration: Duration::from_secs(90),
            shows: String::new(),
        };
        assert_eq!(sim.command("-", None), None);
        assert_eq!(
            sim.command("p.yaml", None).unwrap().command,
            "podvisor simulate p.yaml --for 90s"
        );
        assert_eq!(
            sim.command("p.yaml", Some("web")).unwrap().command,
            "podvisor simulate p.yaml --pod web --for 90s"
        );
    }
}
