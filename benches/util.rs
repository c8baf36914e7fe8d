//! Timing helpers shared by the bench binaries: medians of repeated runs, printed as tables.
#![allow(dead_code)]

use std::time::Instant;

/// Median seconds per call of `f`, over `reps` timed batches of `inner` calls after warm-up.
pub fn median_secs(reps: usize, inner: usize, mut f: impl FnMut()) -> f64 {
    for _ in 0..inner.max(1) {
        f();
    }
    let mut samples: Vec<f64> = (0..reps)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..inner {
                f();
            }
            t.elapsed().as_secs_f64() / inner as f64
        })
        .collect();
    samples.sort_by(|a, b| a.partial_cmp(b).unwrap());
    samples[samples.len() / 2]
}

/// A markdown table printed row by row.
pub struct Table {
    widths: Vec<usize>,
}

impl Table {
    pub fn new(title: &str, headers: &[&str]) -> Table {
        println!("\n### {title}\n");
        let widths: Vec<usize> = headers.iter().map(|h| h.len().max(12)).collect();
        let t = Table { widths };
        t.row(&headers.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        println!(
            "|{}|",
            t.widths.iter().map(|w| format!("{}:", "-".repeat(w + 1))).collect::<Vec<_>>().join("|")
        );
        t
    }

    pub fn row(&self, cells: &[String]) {
        let cells: Vec<String> = cells.iter().zip(&self.widths).map(|(c, w)| format!(" {c:>w$} ")).collect();
        println!("|{}|", cells.join("|"));
    }
}
