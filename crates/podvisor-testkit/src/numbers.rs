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

#[cfg(test)]
mod tests {
    use super::*;

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
