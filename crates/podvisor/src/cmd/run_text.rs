//! `podvisor run`'s text output beyond the table: repeated `BackOff` events folded as kubectl
//! folds them ([`EventFold`]), the graceful delete's countdown ([`Countdown`]) and the closing
//! summary per pod ([`summary`]).

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use podvisor_lifecycle::duration::human_duration;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The reasons folded: the kubelet repeats them at every sync of a crash loop.
const FOLDED: [&str; 2] = ["BackOff", "Unhealthy"];

/// What to do with one event line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fold {
    /// Print it; with `Some(n)`, as its `n`th occurrence (`… (xN)`).
    Print(Option<u32>),
    /// Live on a terminal: a repeat, shown as one line under the table with its count (see
    /// [`EventFold::set_live`]), updated in place.
    Live(u32),
    /// Appended output: counted, not printed (printed again at the next power of two).
    Skip,
}

/// Counts repeats of an event (same pod, reason, container and message), as kubectl's
/// `(x5)`: live output prints the first and keeps the repeats on one line under the table,
/// updated in place; appended output prints the first and then the 2nd, 4th, 8th…
#[derive(Debug, Default)]
pub struct EventFold {
    counts: HashMap<String, u32>,
    /// Live: the latest line of each repeated event, in order of first repeat.
    live: Vec<(String, String)>,
}

impl EventFold {
    /// The fold of an event of pod `pod` (`key` names its reason, container and message).
    pub fn event(&mut self, pod: usize, reason: &str, key: &str, live: bool) -> Fold {
        if !FOLDED.contains(&reason) {
            return Fold::Print(None);
        }
        let count = self.counts.entry(Self::key(pod, key)).or_insert(0);
        *count += 1;
        match *count {
            1 => Fold::Print(None),
            n if live => Fold::Live(n),
            n if n.is_power_of_two() => Fold::Print(Some(n)),
            _ => Fold::Skip,
        }
    }

    fn key(pod: usize, key: &str) -> String {
        format!("{pod}\u{0}{key}")
    }

    /// Live: `line` is now the line of the repeated event `key` of pod `pod`.
    pub fn set_live(&mut self, pod: usize, key: &str, line: String) {
        let key = Self::key(pod, key);
        match self.live.iter_mut().find(|(k, _)| *k == key) {
            Some((_, l)) => *l = line,
            None => self.live.push((key, line)),
        }
    }

    /// Live: the repeated events' lines, shown under the table.
    pub fn live_lines(&self) -> impl Iterator<Item = &str> {
        self.live.iter().map(|(_, l)| l.as_str())
    }
}

/// `line` cut to `width` characters (`…` last) so it takes one screen line; 0: unknown width.
pub fn fit(line: &str, width: usize) -> String {
    if width == 0 || line.chars().count() < width {
        return line.to_owned();
    }
    let mut out: String = line.chars().take(width.saturating_sub(2)).collect();
    out.push('…');
    out
}

/// The graceful deletes under way, one per pod: since when and with which grace period.
#[derive(Debug, Default)]
pub struct Countdown {
    deleting: Vec<(usize, Instant, i64)>,
}

impl Countdown {
    /// Pod `pod` is being deleted with `grace` seconds; the line that says so.
    pub fn start(&mut self, pod: usize, name: &str, grace: i64) -> String {
        self.deleting.retain(|(p, _, _)| *p != pod);
        self.deleting.push((pod, Instant::now(), grace));
        format!("deleting pod/{name}: grace period {grace}s")
    }

    /// The live lines: `deleting pod/web: grace period 30s, 27s left…` per pod.
    pub fn lines(&self, names: &[String]) -> Vec<String> {
        self.deleting
            .iter()
            .map(|(pod, since, grace)| {
                let elapsed = since.elapsed().as_secs();
                let left = u64::try_from(*grace).unwrap_or(0).saturating_sub(elapsed);
                format!(
                    "deleting pod/{}: grace period {grace}s, {left}s left…",
                    names[*pod]
                )
            })
            .collect()
    }

    /// Pod `pod` has terminated: the line that ends its countdown (None: it was not deleted).
    pub fn end(&mut self, pod: usize, name: &str) -> Option<String> {
        let at = self.deleting.iter().position(|(p, _, _)| *p == pod)?;
        let (_, since, grace) = self.deleting.remove(at);
        Some(format!(
            "deleted pod/{name} after {} (grace period {grace}s)",
            human_duration(Duration::from_secs(since.elapsed().as_secs()))
        ))
    }
}

/// The container instances whose start a status row has said (running or terminated at
/// their `restartCount`), per pod and container: their output is shown from then on.
#[derive(Debug, Default)]
pub struct Started {
    attempts: HashMap<(String, String), u64>,
}

impl Started {
    /// Notes what `pod` (named `name`) says of its containers.
    pub fn note(&mut self, name: &str, pod: &Pod) {
        let status = pod.status.as_ref();
        let all = [
            status.and_then(|s| s.init_container_statuses.as_ref()),
            status.and_then(|s| s.container_statuses.as_ref()),
            status.and_then(|s| s.ephemeral_container_statuses.as_ref()),
        ];
        for c in all.into_iter().flatten().flatten() {
            let begun = c
                .state
                .as_ref()
                .is_some_and(|s| s.running.is_some() || s.terminated.is_some());
            let attempt = u64::try_from(c.restart_count).unwrap_or(0);
            // A waiting container's last instance has begun too (its restart is pending).
            let attempt = if begun {
                Some(attempt)
            } else {
                attempt.checked_sub(1)
            };
            if let Some(attempt) = attempt {
                let seen = self
                    .attempts
                    .entry((name.to_owned(), c.name.clone()))
                    .or_insert(attempt);
                *seen = (*seen).max(attempt);
            }
        }
    }

    /// Whether the output of `container`'s instance `attempt` of pod `pod` may be shown.
    pub fn shown(&self, pod: &str, container: &str, attempt: u64) -> bool {
        self.attempts
            .get(&(pod.to_owned(), container.to_owned()))
            .is_some_and(|seen| attempt <= *seen)
    }
}

/// One container's final word: `terminated Completed (exit 0), restarts 0`.
fn container_line(kind: &str, c: &ContainerStatus) -> String {
    let state = c.state.as_ref();
    let what = if let Some(t) = state.and_then(|s| s.terminated.as_ref()) {
        format!(
            "terminated {} (exit {})",
            t.reason.as_deref().unwrap_or("-"),
            t.exit_code
        )
    } else if let Some(w) = state.and_then(|s| s.waiting.as_ref()) {
        format!("waiting {}", w.reason.as_deref().unwrap_or("-"))
    } else if state.and_then(|s| s.running.as_ref()).is_some() {
        "running".to_owned()
    } else {
        "not started".to_owned()
    };
    format!("  {kind}{}: {what}, restarts {}", c.name, c.restart_count)
}

/// The closing summary of pod `name`: its phase and how long it ran, then each container's
/// final state, exit code and restarts (init containers first, as the kubelet runs them).
pub fn summary(name: &str, pod: &Pod, ran: Duration) -> Vec<String> {
    let status = pod.status.clone().unwrap_or_default();
    let phase = status.phase.as_deref().unwrap_or("Unknown");
    let mut lines = vec![format!(
        "pod/{name} {phase} after {}",
        human_duration(Duration::from_secs(ran.as_secs()))
    )];
    let sidecars: Vec<&str> = pod
        .spec
        .iter()
        .flat_map(|s| s.init_containers.iter().flatten())
        .filter(|c| podvisor_api::pod::is_sidecar(c))
        .map(|c| c.name.as_str())
        .collect();
    for c in status.init_container_statuses.iter().flatten() {
        let kind = if sidecars.contains(&c.name.as_str()) {
            "sidecar "
        } else {
            "init "
        };
        lines.push(container_line(kind, c));
    }
    for c in status.container_statuses.iter().flatten() {
        lines.push(container_line("", c));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn back_off_repeats_fold_live_into_one_line_and_appended_at_powers_of_two() {
        let mut live = EventFold::default();
        assert_eq!(live.event(0, "BackOff", "app", true), Fold::Print(None));
        assert_eq!(live.event(0, "Started", "app", true), Fold::Print(None));
        assert_eq!(live.event(0, "BackOff", "app", true), Fold::Live(2));
        assert_eq!(live.event(0, "BackOff", "app", true), Fold::Live(3));
        live.set_live(0, "app", "BackOff (x2)".to_owned());
        live.set_live(0, "app", "BackOff (x3)".to_owned());
        assert_eq!(live.live_lines().collect::<Vec<_>>(), ["BackOff (x3)"]);

        let mut appended = EventFold::default();
        let folds: Vec<Fold> = (0..5)
            .map(|_| appended.event(0, "BackOff", "app", false))
            .collect();
        assert_eq!(
            folds,
            [
                Fold::Print(None),
                Fold::Print(Some(2)),
                Fold::Skip,
                Fold::Print(Some(4)),
                Fold::Skip
            ]
        );
        // Another pod's events are counted apart.
        assert_eq!(
            appended.event(1, "BackOff", "app", false),
            Fold::Print(None)
        );
    }

    #[test]
    fn live_lines_fit_the_terminal() {
        assert_eq!(fit("abcdef", 0), "abcdef");
        assert_eq!(fit("abcdef", 7), "abcdef");
        assert_eq!(fit("abcdef", 5), "abc…");
    }

    #[test]
    fn a_countdown_says_the_grace_period_and_ends_once() {
        let names = ["web".to_owned()];
        let mut c = Countdown::default();
        assert_eq!(c.start(0, "web", 30), "deleting pod/web: grace period 30s");
        let lines = c.lines(&names);
        assert_eq!(lines.len(), 1);
        assert!(
            lines[0].starts_with("deleting pod/web: grace period 30s, ")
                && lines[0].ends_with("s left…"),
            "{lines:?}"
        );
        assert!(
            c.end(0, "web")
                .unwrap()
                .starts_with("deleted pod/web after ")
        );
        assert!(c.end(0, "web").is_none());
        assert!(c.lines(&names).is_empty());
    }
}
