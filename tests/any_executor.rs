//! A bounded async wait ends at its deadline on any executor, without tokio: plain, owned,
//! keyed and adaptive bulkheads, polled by `futures::executor::block_on` (no runtime, no
//! timer of its own). And the timer thread is started only by a bounded async wait that
//! queues (checked through /proc on Linux, in a test binary of its own so no other test
//! starts the thread first).
//!
//! Time bounds here only catch hangs; the precision is measured by `benches/probe.rs`.

use std::time::{Duration, Instant};

use bulkhead::adaptive::{AdaptiveLimit, Gradient2};
use bulkhead::keyed::KeyedBulkhead;
use bulkhead::{Bulkhead, BulkheadConfig, RejectReason};
use futures::executor::block_on;

const WAIT: Duration = Duration::from_millis(20);

fn config(limit: usize, wait: Duration) -> BulkheadConfig {
    BulkheadConfig::builder()
        .max_concurrent_calls(limit)
        .max_wait_duration(wait)
        .build()
        .expect("valid config")
}

/// Threads of this process named `bulkhead-timer` (Linux: /proc/self/task/*/comm).
#[cfg(target_os = "linux")]
fn timer_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.trim() == "bulkhead-timer")
        .count()
}

#[test]
fn bounded_waits_end_on_any_executor_and_the_timer_starts_only_when_needed() {
    #[cfg(target_os = "linux")]
    assert_eq!(timer_threads(), 0, "no bounded wait yet: no timer thread");

    // Waits that need no timer start none: a free permit, a zero wait, an unbounded wait.
    let unbounded = Bulkhead::new("unbounded", config(1, Duration::MAX));
    drop(block_on(unbounded.acquire_async()).expect("free"));
    let fail_fast = Bulkhead::new("fail-fast", config(1, Duration::ZERO));
    let held = fail_fast.try_acquire().expect("free");
    assert_eq!(block_on(fail_fast.acquire_async()).unwrap_err().reason(), RejectReason::Full);
    drop(held);
    #[cfg(target_os = "linux")]
    assert_eq!(timer_threads(), 0, "no bounded wait queued yet");

    // A plain bulkhead under block_on: nothing but the bulkhead's timer can end this wait.
    let plain = Bulkhead::new("plain", config(1, WAIT));
    let held = plain.try_acquire().expect("free");
    let started = Instant::now();
    let err = block_on(plain.acquire_async()).expect_err("nobody releases");
    assert_eq!(err.reason(), RejectReason::WaitTimedOut);
    assert!(started.elapsed() >= WAIT && err.waited() >= WAIT, "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(30), "hang guard");
    drop(held);
    #[cfg(target_os = "linux")]
    assert_eq!(timer_threads(), 1, "the first bounded wait that queued started one thread");

    // Owned.
    let owned = std::sync::Arc::new(Bulkhead::new("owned", config(1, WAIT)));
    let held = owned.try_acquire_owned().expect("free");
    let err = block_on(owned.acquire_owned_async()).expect_err("nobody releases");
    assert_eq!(err.reason(), RejectReason::WaitTimedOut);
    drop(held);

    // Keyed: the key's wait is the engine's.
    let hosts =
        KeyedBulkhead::<&str>::builder("hosts").default_config(config(1, WAIT)).build().unwrap();
    let held = hosts.try_acquire(&"a.example").expect("free");
    match block_on(hosts.acquire_async(&"a.example")) {
        Err(err) => assert_eq!(err.reason(), RejectReason::WaitTimedOut),
        other => panic!("expected the key to time out, got {other:?}"),
    }
    drop(held);

    // Adaptive.
    let bank = Bulkhead::new("bank", config(1, WAIT));
    bank.set_adaptive_limit(AdaptiveLimit::new(Gradient2::default())).expect("valid");
    let held = bank.try_acquire().expect("free");
    let err = block_on(bank.acquire_async()).expect_err("nobody releases");
    assert_eq!(err.reason(), RejectReason::WaitTimedOut);
    drop(held);

    // A bounded wait granted before its deadline: the release wakes it, not the timer.
    let long = std::sync::Arc::new(Bulkhead::new("long", config(1, Duration::from_secs(60))));
    let held = long.try_acquire_owned().expect("free");
    let releaser = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(2));
        drop(held);
    });
    drop(block_on(long.acquire_async()).expect("granted by the release"));
    releaser.join().unwrap();
    #[cfg(target_os = "linux")]
    assert_eq!(timer_threads(), 1, "still one thread for every bulkhead");
}
