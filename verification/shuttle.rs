//! Randomized checks of the shared scenarios with shuttle: every scenario under the random
//! scheduler and the PCT scheduler, at loom's sizes and at sizes loom cannot reach.
//!
//! Run with `ci/shuttle.sh`, or by hand:
//!
//! ```text
//! RUSTFLAGS="--cfg bulkhead_shuttle" SHUTTLE_ITERATIONS=10000 \
//!     cargo test --release --test shuttle
//! ```
//!
//! Knobs: `SHUTTLE_ITERATIONS` (schedules per scheduler and scenario, default 10 000) and
//! `SHUTTLE_PCT_DEPTH` (default 3).
//!
//! # Replaying a failure
//!
//! A failing schedule is printed by shuttle ("failing schedule: ...") and, by this harness,
//! as a ready-to-run command for the `replay` test below:
//!
//! ```text
//! SHUTTLE_REPLAY_SCENARIO=<scenario> SHUTTLE_REPLAY_SCHEDULE=<schedule> \
//! RUSTFLAGS="--cfg bulkhead_shuttle" cargo test --release --test shuttle replay -- --ignored
//! ```
//!
//! shuttle treats every atomic access as SeqCst, so it does not check orderings (loom does);
//! it is for the larger scenarios: more threads and tasks, timeouts and cancellation.
#![cfg(bulkhead_shuttle)]

use std::io::Write;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use shuttle::scheduler::{PctScheduler, RandomScheduler, ReplayScheduler, Scheduler};
use shuttle::{Config, FailurePersistence, Runner};

/// The checker adapter `scenarios.rs` programs against: shuttle's threads, tasks, atomics
/// and mutex.
mod rt {
    use core::future::Future;

    pub use shuttle::future::block_on;
    pub use shuttle::sync::atomic::{AtomicBool, AtomicUsize};
    pub use shuttle::sync::Mutex;
    pub use shuttle::thread::{spawn, yield_now, JoinHandle};

    /// A real shuttle task (not a thread).
    pub struct TaskHandle<T>(shuttle::future::JoinHandle<T>);

    impl<T> TaskHandle<T> {
        pub fn join(self) -> T {
            block_on(self.0).expect("task completed")
        }
    }

    pub fn spawn_async<F>(future: F) -> TaskHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        TaskHandle(shuttle::future::spawn(future))
    }
}

#[path = "scenarios.rs"]
mod scenarios;

#[path = "hostile_waker.rs"]
mod hostile_waker;

#[path = "scenarios_reentrant.rs"]
mod scenarios_reentrant;

fn env_usize(key: &str, default: usize) -> usize {
    match std::env::var(key) {
        Ok(value) => value.parse().unwrap_or_else(|_| panic!("{key}={value} is not a number")),
        Err(_) => default,
    }
}

fn iterations() -> usize {
    env_usize("SHUTTLE_ITERATIONS", 10_000)
}

fn config() -> Config {
    let mut config = Config::new();
    // Unwinding (the panicking-call scenario) needs more than the 32 KiB default.
    config.stack_size = 0x40000;
    config
}

/// Runs `f` under `scheduler`; on failure, prints the command that replays it. Set
/// `SHUTTLE_STATS_FILE` to collect one line per run (name, schedules, seconds).
///
/// shuttle 0.9 no longer puts the failing schedule in the panic message: it writes it to a
/// file in the directory `FailurePersistence::File` names, and this harness reads it back.
/// A panic's schedule is written by a panic hook that shuttle installs once per process with
/// the `Config` of the first run, so a directory per test would receive another test's
/// schedule, or none. Every run of this process uses one directory, and runs take turns (a
/// lock held for the whole run): the one file there after a failure is this run's.
fn run(name: &str, scheduler: impl Scheduler + 'static, f: fn()) {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    // A failing run poisons the lock; the next run starts afresh all the same.
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    let dir = std::env::temp_dir().join(format!("bulkhead-shuttle-{}", std::process::id()));
    // A leftover file would be taken for this run's schedule.
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create the schedule directory");
    let mut config = config();
    config.failure_persistence = FailurePersistence::File(Some(dir.clone()));
    let start = Instant::now();
    let result = catch_unwind(AssertUnwindSafe(|| Runner::new(scheduler, config).run(f)));
    if let Ok(schedules) = &result {
        let line =
            format!("{name}: schedules={schedules} seconds={:.1}", start.elapsed().as_secs_f64());
        println!("{line}");
        if let Ok(path) = std::env::var("SHUTTLE_STATS_FILE") {
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .expect("open SHUTTLE_STATS_FILE");
            writeln!(file, "{line}").expect("write SHUTTLE_STATS_FILE");
        }
    }
    if let Err(panic) = result {
        // The first file holds the failing schedule (shuttle rewrites it if the unwind makes
        // the schedule longer). Its decoder ignores whitespace, so print it on one line.
        let schedule = std::fs::read_to_string(dir.join("schedule000.txt"))
            .map(|s| s.split_whitespace().collect::<String>());
        match schedule {
            Ok(schedule) => {
                let scenario = name.split("::").next().unwrap_or(name);
                eprintln!(
                    "\nreplay this failure with:\n  SHUTTLE_REPLAY_SCENARIO={scenario} \
                     SHUTTLE_REPLAY_SCHEDULE={schedule} RUSTFLAGS=\"--cfg bulkhead_shuttle\" \
                     cargo test --release --test shuttle replay -- --ignored\n"
                );
            }
            Err(err) => eprintln!("no schedule file in {}: {err}", dir.display()),
        }
        resume_unwind(panic);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

macro_rules! scenarios {
    ($($name:ident => $body:expr;)*) => {
        /// Every scenario by name, for the replay test.
        const SCENARIOS: &[(&str, fn())] = &[$((stringify!($name), || $body)),*];

        $(
            mod $name {
                #[test]
                fn random() {
                    let iterations = super::iterations();
                    let scheduler = super::RandomScheduler::new(iterations);
                    super::run(concat!(stringify!($name), "::random"), scheduler, || $body);
                }

                #[test]
                fn pct() {
                    let depth = super::env_usize("SHUTTLE_PCT_DEPTH", 3);
                    let scheduler = super::PctScheduler::new(depth, super::iterations());
                    super::run(concat!(stringify!($name), "::pct"), scheduler, || $body);
                }
            }
        )*
    };
}

scenarios! {
    // At loom's sizes.
    never_exceeds_limit_three_on_one => crate::scenarios::never_exceeds_limit(3, 1, 1);
    release_racing_enqueue_wakes_waiter => crate::scenarios::release_racing_enqueue_wakes_waiter(1, true);
    deadline_racing_release_grants_or_withdraws_once =>
        crate::scenarios::deadline_racing_release_grants_or_withdraws_once(0);
    async_deadline_racing_release_grants_or_withdraws_once =>
        crate::scenarios::async_deadline_racing_release_grants_or_withdraws_once();
    dropped_async_acquire_passes_permit_on => crate::scenarios::dropped_async_acquire_passes_permit_on(1, 1);
    mixed_waiters_keep_fifo_without_barging => crate::scenarios::mixed_waiters_keep_fifo_without_barging(2, 1);
    change_config_grow_and_shrink_keeps_every_permit =>
        crate::scenarios::change_config_grow_and_shrink_keeps_every_permit(1, &[2, 1], 1);
    grow_serves_queued_waiters => crate::scenarios::grow_serves_queued_waiters(1);
    waiter_cap_holds_under_races => crate::scenarios::waiter_cap_holds_under_races(1, 2);
    panicking_call_releases_permit => crate::scenarios::panicking_call_releases_permit(1, 1);
    close_racing_sync_waiter_and_release => crate::scenarios::close_racing_waiter_release_and_deadline(crate::scenarios::Waits::Sync);
    close_racing_async_waiter_and_release => crate::scenarios::close_racing_waiter_release_and_deadline(crate::scenarios::Waits::Async);
    close_racing_sync_timeout_and_release => crate::scenarios::close_racing_waiter_release_and_deadline(crate::scenarios::Waits::SyncTimed);
    close_racing_async_timeout_and_release => crate::scenarios::close_racing_waiter_release_and_deadline(crate::scenarios::Waits::AsyncTimed);
    close_racing_cancelled_acquire_and_release => crate::scenarios::close_racing_waiter_release_and_deadline(crate::scenarios::Waits::Cancelled);
    drain_wait_racing_close_and_last_release => crate::scenarios::drain_wait_racing_close_and_last_release(false);
    drained_future_racing_close_and_last_release => crate::scenarios::drain_wait_racing_close_and_last_release(true);
    repoll_with_new_waker_racing_grant_is_woken => crate::scenarios::repoll_with_new_waker_racing_grant_is_woken();
    counters_sum_exact_after_concurrent_calls =>
        crate::scenarios::counters_sum_exact_after_concurrent_calls(3, 1);
    listener_registered_while_calls_emit_hears_later_calls =>
        crate::scenarios::listener_registered_while_calls_emit_hears_later_calls(1, 1, 2, false);
    listener_joining_counters_alone_hears_later_calls =>
        crate::scenarios::listener_registered_while_calls_emit_hears_later_calls(1, 1, 2, true);
    close_racing_sync_newcomer_refuses_it => crate::scenarios::close_racing_newcomer_refuses_it(false);
    close_racing_async_newcomer_refuses_it => crate::scenarios::close_racing_newcomer_refuses_it(true);
    adaptive_limit_changes_reach_engine_in_order =>
        crate::scenarios::adaptive_limit_changes_reach_engine_in_order(2, 1);
    keyed_refusal_holds_no_slot => crate::scenarios::keyed_refusal_holds_no_slot(2, 1);
    keyed_waits_never_deadlock => crate::scenarios::keyed_waits_never_deadlock(false);
    keyed_eviction_racing_acquire_keeps_key_limit =>
        crate::scenarios::keyed_eviction_racing_acquire_keeps_key_limit(false);
    keyed_new_key_eviction_racing_acquire_keeps_key_limit =>
        crate::scenarios::keyed_eviction_racing_acquire_keeps_key_limit(true);
    keyed_new_keys_racing_in_two_shards_keep_max_keys =>
        crate::scenarios::keyed_new_keys_racing_in_two_shards_keep_max_keys();

    // Larger than loom can explore: 4 to 8 threads and tasks.
    never_exceeds_limit_six_on_one_three_rounds => crate::scenarios::never_exceeds_limit(6, 1, 3);
    never_exceeds_limit_six_on_two_three_rounds => crate::scenarios::never_exceeds_limit(6, 2, 3);
    adaptive_limit_changes_reach_engine_in_order_four_threads =>
        crate::scenarios::adaptive_limit_changes_reach_engine_in_order(4, 3);
    release_racing_enqueue_wakes_five_waiters =>
        crate::scenarios::release_racing_enqueue_wakes_waiter(5, true);
    deadline_racing_release_with_three_waiters_behind =>
        crate::scenarios::deadline_racing_release_grants_or_withdraws_once(3);
    three_dropped_async_acquires_pass_permit_to_three_tasks =>
        crate::scenarios::dropped_async_acquire_passes_permit_on(3, 3);
    five_mixed_waiters_keep_fifo_against_three_bargers =>
        crate::scenarios::mixed_waiters_keep_fifo_without_barging(5, 3);
    change_config_four_changes_five_waiters =>
        crate::scenarios::change_config_grow_and_shrink_keeps_every_permit(2, &[4, 1, 3, 2], 5);
    grow_serves_three_queued_waiters => crate::scenarios::grow_serves_queued_waiters(3);
    waiter_cap_two_of_five => crate::scenarios::waiter_cap_holds_under_races(2, 5);
    three_panicking_calls_race_three_callers => crate::scenarios::panicking_call_releases_permit(3, 3);
    counters_exact_six_threads_four_rounds =>
        crate::scenarios::counters_sum_exact_after_concurrent_calls(6, 4);
    three_registrars_race_three_callers =>
        crate::scenarios::listener_registered_while_calls_emit_hears_later_calls(3, 3, 3, false);
    three_listeners_join_counters_alone_racing_three_callers =>
        crate::scenarios::listener_registered_while_calls_emit_hears_later_calls(3, 3, 3, true);
    listener_removed_while_three_callers_emit =>
        crate::scenarios::listener_removed_while_calls_emit_hears_nothing_after(3, 3);
    keyed_five_callers_through_a_total_of_two => crate::scenarios::keyed_refusal_holds_no_slot(5, 2);
    keyed_waits_never_deadlock_with_a_second_key => crate::scenarios::keyed_waits_never_deadlock(true);
    // Foreign code under no lock, and the engine's deadline timer.
    release_permits_at_drop_racing_reentry =>
        crate::scenarios_reentrant::release_permits_at_drop_racing_reentry();
    hostile_waker_on_grant =>
        crate::scenarios_reentrant::hostile_waker_on_queue_path(crate::scenarios_reentrant::Path::Grant);
    hostile_waker_on_withdraw =>
        crate::scenarios_reentrant::hostile_waker_on_queue_path(crate::scenarios_reentrant::Path::Withdraw);
    hostile_waker_on_deadline =>
        crate::scenarios_reentrant::hostile_waker_on_queue_path(crate::scenarios_reentrant::Path::Deadline);
    hostile_waker_on_close =>
        crate::scenarios_reentrant::hostile_waker_on_queue_path(crate::scenarios_reentrant::Path::Close);
    hostile_waker_on_drain => crate::scenarios_reentrant::hostile_waker_on_drain();
    engine_deadline_racing_release => crate::scenarios_reentrant::engine_deadline_racing_release(1);
    own_timer_fire_racing_release => crate::scenarios_reentrant::own_timer_fire_racing_release(1);
    own_timer_fire_racing_release_three => crate::scenarios_reentrant::own_timer_fire_racing_release(3);
    engine_deadline_racing_release_three => crate::scenarios_reentrant::engine_deadline_racing_release(3);
    engine_deadline_out_of_queue_order => crate::scenarios_reentrant::engine_deadline_out_of_queue_order();
    listener_reenters_on_every_event => crate::scenarios_reentrant::listener_reenters_on_every_event();
    drained_sees_last_call_writes_sync => crate::scenarios_reentrant::drained_sees_last_call_writes(false);
    drained_sees_last_call_writes_async => crate::scenarios_reentrant::drained_sees_last_call_writes(true);
    close_with_three_queued_waiters_racing_release =>
        crate::scenarios_reentrant::close_with_queued_waiters_racing_release_grants_none_after(3);
}

/// Replays one schedule printed by a failing run. Ignored unless asked for:
/// `SHUTTLE_REPLAY_SCENARIO=<name> SHUTTLE_REPLAY_SCHEDULE=<schedule> cargo test ... replay
/// -- --ignored` (with `RUSTFLAGS="--cfg bulkhead_shuttle"`).
#[test]
#[ignore = "replays a schedule given in SHUTTLE_REPLAY_SCHEDULE"]
fn replay() {
    replay_from_env(SCENARIOS);
}

/// Runs the schedule `SHUTTLE_REPLAY_SCHEDULE` of the scenario `SHUTTLE_REPLAY_SCENARIO`,
/// looked up in `scenarios` (each group of scenarios has its own list and `replay` test).
fn replay_from_env(scenarios: &[(&str, fn())]) {
    let name = std::env::var("SHUTTLE_REPLAY_SCENARIO").expect("set SHUTTLE_REPLAY_SCENARIO");
    let schedule = std::env::var("SHUTTLE_REPLAY_SCHEDULE").expect("set SHUTTLE_REPLAY_SCHEDULE");
    let Some(&(_, body)) = scenarios.iter().find(|(n, _)| *n == name) else {
        let names: Vec<_> = scenarios.iter().map(|(n, _)| *n).collect();
        panic!("unknown scenario {name}; one of {names:?}");
    };
    Runner::new(ReplayScheduler::new_from_encoded(&schedule), config()).run(body);
}

// ---------------------------------------------------------------------------------------
// Issue 17, keyed and adaptive kinds: `scenarios_family.rs`. Filter with `family::`.
// ---------------------------------------------------------------------------------------

#[path = "scenarios_family.rs"]
mod scenarios_family;

mod family {
    use super::*;

    scenarios! {
        keyed_same_new_key_racing_keeps_live_keys_max_one =>
            crate::scenarios_family::keyed_same_new_key_racing_keeps_live_keys(1);
        keyed_same_new_key_racing_keeps_live_keys_max_two =>
            crate::scenarios_family::keyed_same_new_key_racing_keeps_live_keys(2);
        keyed_key_refusal_leaves_total_untouched =>
            crate::scenarios_family::keyed_key_refusal_leaves_total_untouched();
        adaptive_failure_shrinks_limit_before_queued_caller_is_admitted =>
            crate::scenarios_family::adaptive_failure_shrinks_limit_before_queued_caller_is_admitted();
        adaptive_fold_loses_and_repeats_no_sample =>
            crate::scenarios_family::adaptive_fold_loses_and_repeats_no_sample();
        adaptive_reentrant_algorithm_loses_no_sample =>
            crate::scenarios_family::adaptive_reentrant_algorithm_loses_no_sample();
        keyed_close_racing_new_key_at_full_map =>
            crate::scenarios_family::keyed_close_racing_new_key_at_full_map();
        keyed_owned_async_hostile_wakers_keep_total =>
            crate::scenarios_family::keyed_owned_async_hostile_wakers_keep_total();
        keyed_borrowed_async_hostile_wakers_keep_total =>
            crate::scenarios_family::keyed_async_hostile_wakers_keep_total(false);
        keyed_listener_racing_new_key_registered_once =>
            crate::scenarios_family::keyed_listener_racing_new_key_registered_once();
        keyed_weighted_racing_release_keeps_total =>
            crate::scenarios_family::keyed_weighted_racing_release_keeps_total(true, 1);
        keyed_weighted_racing_release_three_owned_keeps_total =>
            crate::scenarios_family::keyed_weighted_racing_release_keeps_total(true, 3);
        keyed_shares_owner_and_borrower_race_for_last_slot =>
            crate::scenarios_family::keyed_shares_owner_and_borrower_race_for_last_slot();
        keyed_shares_release_goes_to_owner =>
            crate::scenarios_family::keyed_shares_release_goes_to_owner(false);
        keyed_shares_release_goes_to_owner_before_critical_borrower =>
            crate::scenarios_family::keyed_shares_release_goes_to_owner(true);
        keyed_shares_key_evicted_while_lending =>
            crate::scenarios_family::keyed_shares_key_evicted_while_lending();
    }

    /// As `replay` above, for these scenarios: `SHUTTLE_REPLAY_SCENARIO=<name>
    /// SHUTTLE_REPLAY_SCHEDULE=<schedule> ... cargo test ... family::replay -- --ignored`.
    #[test]
    #[ignore = "replays a schedule given in SHUTTLE_REPLAY_SCHEDULE"]
    fn replay() {
        replay_from_env(SCENARIOS);
    }
}

// ---------------------------------------------------------------------------------------
// Weighted permits: `scenarios_weighted.rs`. Filter with `weighted::`.
// ---------------------------------------------------------------------------------------

#[path = "scenarios_weighted.rs"]
mod scenarios_weighted;

mod weighted {
    use super::*;

    scenarios! {
        cancel_racing_release_returns_everything =>
            crate::scenarios_weighted::weighted_cancel_returns_everything(true);
        cancelled_head_admits_the_waiter_behind =>
            crate::scenarios_weighted::weighted_cancel_returns_everything(false);
        release_of_k_wakes_exactly_the_satisfiable_waiters =>
            crate::scenarios_weighted::release_of_k_wakes_exactly_the_satisfiable_waiters();
        head_of_line_blocks_smaller_requests =>
            crate::scenarios_weighted::head_of_line_blocks_smaller_requests();
        shrink_below_the_heads_request_refuses_it =>
            crate::scenarios_weighted::shrink_below_the_heads_request_refuses_it(false);
        shrink_racing_release_grants_or_refuses_the_head =>
            crate::scenarios_weighted::shrink_below_the_heads_request_refuses_it(true);
        timed_out_head_serves_waiter_behind =>
            crate::scenarios_weighted::weighted_head_timed_out_serves_waiter_behind(false);
        timed_out_head_serves_hostile_waiter_behind =>
            crate::scenarios_weighted::weighted_head_timed_out_serves_waiter_behind(true);
    }

    /// As `replay` above, for these scenarios (`... cargo test ... weighted::replay -- --ignored`).
    #[test]
    #[ignore = "replays a schedule given in SHUTTLE_REPLAY_SCHEDULE"]
    fn replay() {
        replay_from_env(SCENARIOS);
    }
}

// ---------------------------------------------------------------------------------------
// Queue order and criticality: `scenarios_policy.rs`. Filter with `policy::`.
// ---------------------------------------------------------------------------------------

#[path = "scenarios_policy.rs"]
mod scenarios_policy;

mod policy {
    use super::*;

    scenarios! {
        lifo_eviction_racing_release =>
            crate::scenarios_policy::lifo_eviction_racing_release();
        critical_share_under_sheddable_contention =>
            crate::scenarios_policy::critical_share_under_sheddable_contention();
        critical_waiter_overtakes_earlier_default_one =>
            crate::scenarios_policy::critical_waiter_overtakes_earlier_default_one();
        adaptive_lifo_age_is_strictly_above_target =>
            crate::scenarios_policy::adaptive_lifo_age_is_strictly_above_target();
    }

    /// As `replay` above, for these scenarios (`... cargo test ... policy::replay -- --ignored`).
    #[test]
    #[ignore = "replays a schedule given in SHUTTLE_REPLAY_SCHEDULE"]
    fn replay() {
        replay_from_env(SCENARIOS);
    }
}

// ---------------------------------------------------------------------------------------
// Where features meet (issue 29): `scenarios_junctions.rs`. Filter with `junctions::`.
// ---------------------------------------------------------------------------------------

#[path = "scenarios_junctions.rs"]
mod scenarios_junctions;

mod junctions {
    use super::*;

    scenarios! {
        timed_out_weighted_head_unpolled_serves_the_thread_behind =>
            crate::scenarios_junctions::timed_out_weighted_head_unpolled_serves_the_waiter_behind(false);
        timed_out_weighted_head_unpolled_serves_the_task_behind =>
            crate::scenarios_junctions::timed_out_weighted_head_unpolled_serves_the_waiter_behind(true);
        shrink_racing_sheddable_enqueue_refuses_what_cannot_fit =>
            crate::scenarios_junctions::shrink_racing_sheddable_enqueue_refuses_what_cannot_fit();
        drain_waiter_queued_before_close_sync =>
            crate::scenarios_junctions::drain_waiter_queued_before_close_sees_the_last_calls_writes(false);
        drain_waiter_queued_before_close_async =>
            crate::scenarios_junctions::drain_waiter_queued_before_close_sees_the_last_calls_writes(true);
        panicking_waker_in_a_release_batch_serves_the_rest =>
            crate::scenarios_junctions::panicking_waker_in_a_release_batch_serves_the_rest();
        unfit_refusal_with_panicking_and_reentrant_wakers =>
            crate::scenarios_junctions::unfit_refusal_with_panicking_and_reentrant_wakers();
        newcomer_granted_by_its_own_enqueue_is_not_woken =>
            crate::scenarios_junctions::newcomer_granted_by_its_own_enqueue_is_not_woken();
        keyed_total_waiter_dropped_racing_release =>
            crate::scenarios_junctions::keyed_total_waiter_dropped_racing_release();
        per_call_wait_critical_weighted_head_with_panicking_waker =>
            crate::scenarios_junctions::per_call_wait_critical_weighted_head_with_panicking_waker_serves_the_waiter_behind();
    }

    /// As `replay` above, for these scenarios (`... cargo test ... junctions::replay -- --ignored`).
    #[test]
    #[ignore = "replays a schedule given in SHUTTLE_REPLAY_SCHEDULE"]
    fn replay() {
        replay_from_env(SCENARIOS);
    }
}
