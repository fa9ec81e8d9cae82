//! Summaries of bench samples, printed next to their targets.

use std::time::Duration;

/// The nearest-rank percentile `p` (0–100) of `sorted` samples; zero for none.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Count, median, 99th percentile and maximum of a set of samples.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// How many samples.
    pub n: usize,
    /// The median.
    pub p50: Duration,
    /// The 99th percentile.
    pub p99: Duration,
    /// The largest.
    pub max: Duration,
}

/// The [`Stats`] of `samples` (in any order).
pub fn stats(mut samples: Vec<Duration>) -> Stats {
    samples.sort();
    Stats {
        n: samples.len(),
        p50: percentile(&samples, 50.0),
        p99: percentile(&samples, 99.0),
        max: samples.last().copied().unwrap_or_default(),
    }
}

/// Milliseconds with three significant digits or so: `1.23 ms`, `12.3 ms`, `123 ms`.
pub fn ms(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    if ms < 10.0 {
        format!("{ms:.2} ms")
    } else if ms < 100.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{ms:.0} ms")
    }
}

/// The 1, 5 and 15 minute load averages, as `/proc/loadavg` gives them (empty if unreadable).
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// What makes start latencies on this machine differ from run to run, read before a bench:
/// the memory cgroups that exist, live and dying (cgroup v1 keeps a removed container's
/// memory cgroup while page cache is charged to it, and every cgroup operation gets slower
/// as they pile up; `echo 3 > /proc/sys/vm/drop_caches` frees them), and the median time to
/// spawn and reap `/bin/true` (fork, exec, exit: the machine's speed at what a container
/// start does most).
pub fn machine_context() -> String {
    let memcgs = std::fs::read_to_string("/proc/cgroups")
        .ok()
        .and_then(|t| memory_cgroups(&t))
        .map_or_else(|| "?".into(), |n| n.to_string());
    let mut spawns: Vec<Duration> = (0..21)
        .filter_map(|_| {
            let begun = std::time::Instant::now();
            std::process::Command::new("/bin/true")
                .status()
                .ok()
                .map(|_| begun.elapsed())
        })
        .collect();
    spawns.sort();
    let spawn = spawns
        .get(spawns.len() / 2)
        .map_or_else(|| "?".into(), |d| format!("{} µs", d.as_micros()));
    format!("memory cgroups {memcgs}, /bin/true spawned and reaped in {spawn}")
}

/// The memory controller's `num_cgroups` in `/proc/cgroups`.
fn memory_cgroups(proc_cgroups: &str) -> Option<u64> {
    proc_cgroups
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.first() == Some(&"memory"))
        .and_then(|f| f.get(2)?.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_cgroups_are_read_from_proc_cgroups() {
        let text = "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpuset\t3\t2\t1\n\
                    memory\t4\t449\t1\npids\t8\t3\t1\n";
        assert_eq!(memory_cgroups(text), Some(449));
        assert_eq!(memory_cgroups("#subsys_name\thierarchy\n"), None);
    }

    #[test]
    fn nearest_rank() {
        let samples: Vec<Duration> = (1..=100).rev().map(Duration::from_millis).collect();
        let s = stats(samples);
        assert_eq!(
            (s.n, s.p50, s.p99, s.max),
            (
                100,
                Duration::from_millis(50),
                Duration::from_millis(99),
                Duration::from_millis(100)
            )
        );
        assert_eq!(percentile(&[], 50.0), Duration::ZERO);
    }

    #[test]
    fn milliseconds() {
        assert_eq!(ms(Duration::from_micros(1234)), "1.23 ms");
        assert_eq!(ms(Duration::from_micros(12345)), "12.3 ms");
        assert_eq!(ms(Duration::from_micros(123456)), "123 ms");
    }
}
