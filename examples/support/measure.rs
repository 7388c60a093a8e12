//! What the timer probes measure, shared by `examples/own_runtime.rs`,
//! `benches/smol_timer` and `tests/own_timer.rs` (included with `#[path]`).

#![allow(dead_code)] // each includer uses what it needs

use std::time::Duration;

/// How many threads of this process are named `bulkhead-timer` (Linux: `/proc`).
pub fn timer_threads() -> usize {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.trim() == "bulkhead-timer")
        .count()
}

/// The `p`-th quantile (0 to 1) of `sorted`, nearest rank; zero for no samples.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}
