//! shuttle: the scenarios in `scenarios.rs` under shuttle's PCT and random schedulers,
//! `SHUTTLE_ITERATIONS` schedules each (default 1000), from a fixed seed (`SHUTTLE_SEED`,
//! default 1) so a run is reproducible. A failure prints the command that replays its
//! schedule.
//!
//! ```text
//! RUSTFLAGS="--cfg bulkhead_shuttle" cargo test --release --test shuttle
//! ```
#![cfg(bulkhead_shuttle)]

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::time::Instant;

use bulkhead::model::shuttle::scheduler::{
    PctScheduler, RandomScheduler, ReplayScheduler, Scheduler,
};
use bulkhead::model::shuttle::{Config, FailurePersistence, Runner};

/// What `scenarios.rs` needs from the checker.
mod rt {
    pub use bulkhead::model::shuttle::future::block_on;
    pub use bulkhead::model::shuttle::thread::{spawn, yield_now, JoinHandle};
}

#[path = "scenarios.rs"]
mod scenarios;

const SCENARIOS: &[(&str, fn())] = &[
    ("pooled_client_never_runs_dry", scenarios::pooled_client_never_runs_dry),
    ("timeout_serves_fallback_then_recovers", scenarios::timeout_serves_fallback_then_recovers),
    ("pipeline_caps_downstream_calls", scenarios::pipeline_caps_downstream_calls),
    ("shutdown_drains_calls_in_flight", scenarios::shutdown_drains_calls_in_flight),
    ("async_get_and_refresh_both_finish", scenarios::async_get_and_refresh_both_finish),
    ("async_get_falls_back_at_the_deadline", scenarios::async_get_falls_back_at_the_deadline),
];

fn env_u64(key: &str, default: u64) -> u64 {
    std::env::var(key).map_or(default, |n| n.parse().unwrap_or_else(|_| panic!("{key}: {n}")))
}

fn iterations() -> usize {
    usize::try_from(env_u64("SHUTTLE_ITERATIONS", 1000)).expect("fits")
}

fn seed() -> u64 {
    env_u64("SHUTTLE_SEED", 1)
}

/// The `--features` this test binary was built with, for the replay command.
fn features() -> String {
    let all = [
        ("bug-release-before-checkin", cfg!(feature = "bug-release-before-checkin")),
        ("bug-gauge-leaks-on-timeout", cfg!(feature = "bug-gauge-leaks-on-timeout")),
        ("bug-permit-dropped-on-receive", cfg!(feature = "bug-permit-dropped-on-receive")),
        ("bug-lock-held-across-await", cfg!(feature = "bug-lock-held-across-await")),
    ];
    let on: Vec<_> = all.iter().filter(|(_, on)| *on).map(|(name, _)| *name).collect();
    if on.is_empty() {
        String::new()
    } else {
        format!(" --features {}", on.join(","))
    }
}

/// Silences shuttle's two warnings: that it runs every atomic as SeqCst (loom checks
/// orderings), and that it drops lazy statics after each execution (the bulkhead's model
/// clock is one, and is meant to be dropped).
fn config(failure_persistence: FailurePersistence) -> Config {
    let mut config = Config::new();
    config.failure_persistence = failure_persistence;
    config.silence_warnings = true;
    config
}

/// Runs `name` under `scheduler`. shuttle writes a failing schedule to a file in the
/// directory given to `FailurePersistence::File`; on failure we print it as a command.
fn run(name: &str, scheduler_name: &str, scheduler: impl Scheduler + 'static) {
    let scenario = SCENARIOS.iter().find(|(n, _)| *n == name).expect("known scenario").1;
    // One directory per test: tests run in parallel, each must find its own schedule.
    let pid = std::process::id();
    let dir =
        std::env::temp_dir().join(format!("downstream-shuttle-{pid}-{name}-{scheduler_name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create the schedule directory");
    let start = Instant::now();
    let runner = Runner::new(scheduler, config(FailurePersistence::File(Some(dir.clone()))));
    match catch_unwind(AssertUnwindSafe(|| runner.run(scenario))) {
        Ok(schedules) => {
            let seconds = start.elapsed().as_secs_f64();
            println!("{name}::{scheduler_name}: schedules={schedules} seconds={seconds:.1}");
            let _ = std::fs::remove_dir_all(&dir);
        }
        Err(panic) => {
            if let Ok(schedule) = std::fs::read_to_string(dir.join("schedule000.txt")) {
                let schedule: String = schedule.split_whitespace().collect();
                eprintln!(
                    "\nreplay this failure with:\n  SHUTTLE_REPLAY_SCENARIO={name} \
                     SHUTTLE_REPLAY_SCHEDULE={schedule} RUSTFLAGS=\"--cfg bulkhead_shuttle\" \
                     cargo test --release{} --test shuttle replay -- --ignored\n",
                    features()
                );
            }
            resume_unwind(panic);
        }
    }
}

macro_rules! tests {
    ($($name:ident),*) => {$(
        mod $name {
            #[test]
            fn pct() {
                let scheduler = super::PctScheduler::new_from_seed(super::seed(), 3, super::iterations());
                super::run(stringify!($name), "pct", scheduler);
            }

            #[test]
            fn random() {
                let scheduler = super::RandomScheduler::new_from_seed(super::seed(), super::iterations());
                super::run(stringify!($name), "random", scheduler);
            }
        }
    )*};
}

tests!(
    pooled_client_never_runs_dry,
    timeout_serves_fallback_then_recovers,
    pipeline_caps_downstream_calls,
    shutdown_drains_calls_in_flight,
    async_get_and_refresh_both_finish,
    async_get_falls_back_at_the_deadline
);

/// Replays one schedule printed by a failing run (see `run`).
#[test]
#[ignore = "replays the schedule in SHUTTLE_REPLAY_SCHEDULE"]
fn replay() {
    let name = std::env::var("SHUTTLE_REPLAY_SCENARIO").expect("set SHUTTLE_REPLAY_SCENARIO");
    let schedule = std::env::var("SHUTTLE_REPLAY_SCHEDULE").expect("set SHUTTLE_REPLAY_SCHEDULE");
    let scenario = SCENARIOS.iter().find(|(n, _)| *n == name).expect("known scenario").1;
    let config = config(FailurePersistence::Print);
    Runner::new(ReplayScheduler::new_from_encoded(&schedule), config).run(scenario);
}
