//! loom: every interleaving of the scenarios in `scenarios.rs`, within a preemption bound.
//!
//! ```text
//! RUSTFLAGS="--cfg bulkhead_loom" cargo test --release --test loom
//! ```
#![cfg(bulkhead_loom)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bulkhead::model::loom;

/// What `scenarios.rs` needs from the checker.
mod rt {
    pub use bulkhead::model::loom::future::block_on;
    pub use bulkhead::model::loom::thread::{spawn, yield_now, JoinHandle};
}

#[path = "scenarios.rs"]
mod scenarios;

/// Explores `scenario` within `LOOM_MAX_PREEMPTIONS` (default 3) and prints how many
/// executions that took.
fn check(name: &str, scenario: fn()) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(builder.preemption_bound.unwrap_or(3));
    let executions = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&executions);
    let start = Instant::now();
    builder.check(move || {
        // Ordering: Relaxed — a plain counter outside the model.
        counter.fetch_add(1, Ordering::Relaxed);
        scenario();
    });
    println!(
        "{name}: preemptions={} executions={} seconds={:.1}",
        builder.preemption_bound.unwrap_or(3),
        // Ordering: Relaxed — read after the model finished.
        executions.load(Ordering::Relaxed),
        start.elapsed().as_secs_f64()
    );
}

#[test]
fn pooled_client_never_runs_dry() {
    check("pooled_client_never_runs_dry", scenarios::pooled_client_never_runs_dry);
}

#[test]
fn timeout_serves_fallback_then_recovers() {
    check(
        "timeout_serves_fallback_then_recovers",
        scenarios::timeout_serves_fallback_then_recovers,
    );
}

#[test]
fn shutdown_drains_calls_in_flight() {
    check("shutdown_drains_calls_in_flight", scenarios::shutdown_drains_calls_in_flight);
}

#[test]
fn pipeline_caps_downstream_calls() {
    check("pipeline_caps_downstream_calls", scenarios::pipeline_caps_downstream_calls);
}

#[test]
fn async_get_and_refresh_both_finish() {
    check("async_get_and_refresh_both_finish", scenarios::async_get_and_refresh_both_finish);
}

#[test]
fn async_get_falls_back_at_the_deadline() {
    check("async_get_falls_back_at_the_deadline", scenarios::async_get_falls_back_at_the_deadline);
}
