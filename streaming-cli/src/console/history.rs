//! What the topics page draws its sparklines from: each topic's entries and lag, sampled
//! by a background task every refresh interval while the console runs (the last
//! [`KEPT`] samples).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use maud::{html, Markup};
use streaming::mq::Mq;

/// Samples kept per topic.
pub(super) const KEPT: usize = 60;

/// One sample of a topic: when, its entries (all partitions) and its lag (all groups).
#[derive(Clone, Copy, Debug)]
struct Sample {
    at: Instant,
    entries: u64,
    lag: u64,
}

/// Each topic's recent samples.
#[derive(Default)]
pub(super) struct History(Mutex<BTreeMap<String, VecDeque<Sample>>>);

impl History {
    /// Samples every topic once.
    async fn sample(&self, mq: &Mq) {
        let Ok(topics) = mq.list_topics().await else {
            return;
        };
        for topic in topics {
            let Ok(info) = mq.describe_topic(&topic).await else {
                continue;
            };
            let parts = &info.partition_info;
            let sample = Sample {
                at: Instant::now(),
                entries: parts.iter().map(|p| p.length).sum(),
                lag: (parts.iter().flat_map(|p| &p.groups))
                    .filter_map(|g| g.lag)
                    .sum(),
            };
            let mut all = self.0.lock().unwrap_or_else(|e| e.into_inner());
            let kept = all.entry(topic).or_default();
            if kept.len() == KEPT {
                kept.pop_front();
            }
            kept.push_back(sample);
        }
    }

    /// Samples every `every` until the process ends.
    pub(super) async fn run(&self, mq: Mq, every: Duration) {
        loop {
            self.sample(&mq).await;
            tokio::time::sleep(every).await;
        }
    }

    /// The topic's entries per second between samples, and its lag at each sample.
    fn series(&self, topic: &str) -> (Vec<f64>, Vec<f64>) {
        let all = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let Some(kept) = all.get(topic) else {
            return (Vec::new(), Vec::new());
        };
        let rate = (kept.iter().zip(kept.iter().skip(1)))
            .map(|(a, b)| {
                let secs = b.at.duration_since(a.at).as_secs_f64().max(1e-3);
                b.entries.saturating_sub(a.entries) as f64 / secs
            })
            .collect();
        (rate, kept.iter().map(|s| s.lag as f64).collect())
    }

    /// The topic's sparklines: entries per second and lag, with their last values.
    pub(super) fn sparklines(&self, topic: &str) -> Markup {
        let (rate, lag) = self.series(topic);
        html! {
            (sparkline("rate", &rate)) " " (format!("{:.1}/s", rate.last().copied().unwrap_or(0.0)))
            " · lag " (sparkline("lag", &lag)) " " (lag.last().copied().unwrap_or(0.0))
        }
    }
}

/// An inline SVG polyline of `values` (120×20, scaled to their maximum); empty with fewer
/// than two values.
fn sparkline(kind: &str, values: &[f64]) -> Markup {
    let (w, h) = (120.0, 20.0);
    let max = values.iter().copied().fold(0.0f64, f64::max).max(1e-9);
    let step = w / (KEPT.saturating_sub(1)) as f64;
    let points: Vec<String> = (values.iter().enumerate())
        .map(|(i, v)| {
            format!(
                "{:.1},{:.1}",
                i as f64 * step,
                h - v / max * (h - 2.0) - 1.0
            )
        })
        .collect();
    html! {
        svg class={ "sparkline " (kind) } width="120" height="20" viewBox="0 0 120 20" {
            @if values.len() >= 2 {
                polyline fill="none" stroke="#2f6fdd" stroke-width="1.5" points=(points.join(" ")) {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sparkline_scales_to_its_maximum_and_needs_two_values() {
        let one = sparkline("rate", &[3.0]).into_string();
        assert!(!one.contains("polyline"), "{one}");
        let two = sparkline("rate", &[0.0, 4.0]).into_string();
        assert!(two.contains(r#"points="0.0,19.0 2.0,1.0""#), "{two}");
    }
}
