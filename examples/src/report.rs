//! What the examples print their figures with: latencies to three significant figures or so, their
//! percentiles, and outcomes counted by name, most frequent first.

use std::time::Duration;

/// A latency to three significant figures or so: "13.6ms", "2.02s".
pub fn show(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{:.1}ms", d.as_secs_f64() * 1e3)
    } else {
        format!("{:.2}s", d.as_secs_f64())
    }
}

/// The `p` quantile (0 to 1) of `sorted`, nearest rank; zero for none.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// `latencies` sorted, and summed up as the examples print them: "p50 6.6ms  p90 7.7ms  p99 1.01s
/// max 1.49s".
pub fn latency_summary(mut latencies: Vec<Duration>) -> String {
    latencies.sort();
    format!(
        "p50 {}  p90 {}  p99 {}  max {}",
        show(percentile(&latencies, 0.50)),
        show(percentile(&latencies, 0.90)),
        show(percentile(&latencies, 0.99)),
        show(latencies.last().copied().unwrap_or_default())
    )
}

/// How many times each outcome occurs, the most frequent first (ties in order of first
/// occurrence).
pub fn tally<'a>(outcomes: impl IntoIterator<Item = &'a str>) -> Vec<(&'a str, usize)> {
    let mut by_outcome: Vec<(&str, usize)> = Vec::new();
    for outcome in outcomes {
        match by_outcome.iter_mut().find(|(o, _)| *o == outcome) {
            Some((_, n)) => *n += 1,
            None => by_outcome.push((outcome, 1)),
        }
    }
    by_outcome.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    by_outcome
}
