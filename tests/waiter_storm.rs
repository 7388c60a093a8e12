//! Waiter storm: 10 000 callers queue on a full bulkhead and all give up; then nobody is
//! waiting, every permit is back, nothing a waiter owned is still alive, and the next
//! acquire takes the fast path (no allocation, no lock).
//!
//! Memory is the process-wide live heap, counted by a global allocator (`stats_alloc`), so
//! the tests in this file take a lock and never run side by side. Nothing here asserts on
//! time; the timings are printed only. Each storm is:
//!
//! * 8 700 tokio tasks `acquire_async_with_sleep`, whose "sleep" completes when the test
//!   says so (after all of them are queued): deterministic `WaitTimedOut`s;
//! * 1 000 tokio tasks `tokio::time::timeout(1 s, acquire_async())`: dropped futures;
//! * 300 std threads `acquire_timeout(1 s)`: real deadlines on the engine's clock.
//!
//! Before any baseline, [`warm_up`] pays the one-time costs of the libraries under the
//! bulkhead: tokio's and std's global initialisation, and parking_lot's global table of
//! parked threads, which grows (and never shrinks) with the most threads that ever parked at
//! once. Under load, the sync threads of a storm contend on the queue lock and park; without
//! the warm-up, the storm that first parks many of them grows that table (by 129 216 bytes
//! from its first 16 buckets to the 1 024 that 171 or more parked threads need), which the
//! whole-process figure then blames on the storm (RELIABILITY.md, R8).

use std::alloc::System;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bulkhead::{Bulkhead, BulkheadConfig, OwnedPermit, RejectReason};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use tokio::runtime::Runtime;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Serializes the tests of this file: each measures the whole process's heap.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

const FIRED_BY_TEST: usize = 8_700;
const TOKIO_TIMEOUTS: usize = 1_000;
const SYNC_THREADS: usize = 300;
/// Worker threads of each storm's tokio runtime.
const WORKER_THREADS: usize = 2;
const TOTAL: usize = FIRED_BY_TEST + TOKIO_TIMEOUTS + SYNC_THREADS;
/// The wait given to the tokio-timeout tasks and the sync threads.
const SHORT_WAIT: Duration = Duration::from_secs(1);
/// Hang guard for the conditions the test waits for.
const HANG_GUARD: Duration = Duration::from_secs(120);
/// Threads the warm-up parks at once on a parking_lot lock: twice what a storm can have
/// alive (its sync threads, its runtime's workers), so parking_lot's table is already as
/// large as any storm can need, with room for the main thread and the test harness's own.
const WARM_UP_PARKERS: usize = 2 * (SYNC_THREADS + WORKER_THREADS);
/// What a queue that kept its slot array after a storm would hold on to: one pointer per
/// slot, `TOTAL` rounded up to the power of two `VecDeque` grows to.
const SLOT_ARRAY: isize = (TOTAL.next_power_of_two() * std::mem::size_of::<usize>()) as isize;

fn live_bytes() -> isize {
    let s = GLOBAL.stats();
    // stats_alloc already adds a realloc's growth to `bytes_allocated` (and its shrinkage to
    // `bytes_deallocated`); `bytes_reallocated` is the same delta again, so it is not added.
    s.bytes_allocated as isize - s.bytes_deallocated as isize
}

/// Threads of this process, from /proc/self/status (Linux); `None` elsewhere.
fn threads_alive() -> Option<usize> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|line| line.strip_prefix("Threads:")?.trim().parse().ok())
}

/// Resident set size from /proc/self/statm (Linux), in KiB; `None` elsewhere.
fn rss_kib() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4)
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < HANG_GUARD, "hang guard: {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn runtime() -> Runtime {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKER_THREADS)
        .enable_all()
        .build()
        .unwrap();
    // Warm up the timer and task machinery, so a baseline is not flattered.
    runtime.block_on(async {
        tokio::spawn(tokio::time::sleep(Duration::from_millis(1))).await.unwrap();
    });
    runtime
}

/// Parks `WARM_UP_PARKERS` threads at once on a parking_lot condition variable, then lets
/// them go.
///
/// parking_lot (the bulkhead's queue lock) keeps one process-wide hash table of parked
/// threads: each thread that first parks on any parking_lot primitive gets a thread-local
/// record, and the table is then grown to 3 buckets (64 bytes each) per live record, rounded
/// up to a power of two. A table it outgrows is never freed (parking_lot keeps every table it
/// ever published). How many storm threads park depends on scheduling: on a quiet machine
/// few do, under load many do. Having more threads park here than a storm can have alive
/// sizes the table for any storm before the baselines are taken.
fn grow_parking_table() {
    // (threads parked, may leave)
    let gate = Arc::new((parking_lot::Mutex::new((0, false)), parking_lot::Condvar::new()));
    let threads: Vec<_> = (0..WARM_UP_PARKERS)
        .map(|_| {
            let gate = Arc::clone(&gate);
            std::thread::Builder::new()
                .stack_size(64 * 1024)
                .spawn(move || {
                    let (lock, leave) = &*gate;
                    let mut state = lock.lock();
                    state.0 += 1;
                    while !state.1 {
                        // Parks through parking_lot's table; unlocks only once parked.
                        leave.wait(&mut state);
                    }
                })
                .unwrap()
        })
        .collect();
    // A thread counts itself under the lock and releases the lock only from inside `wait`, so
    // once the count is complete every thread has parked and none has left yet.
    wait_until("the warm-up threads park", || gate.0.lock().0 == WARM_UP_PARKERS);
    gate.0.lock().1 = true;
    gate.1.notify_all();
    for t in threads {
        t.join().expect("warm-up thread panicked");
    }
}

/// Pays the one-time costs of tokio, std and parking_lot before any baseline is taken.
fn warm_up() {
    // tokio's and std's global initialisation.
    drop(runtime());
    let before = live_bytes();
    grow_parking_table();
    // Printed only: what parking_lot kept (its tables), the first time in this process.
    println!(
        "warm-up: {WARM_UP_PARKERS} threads parked at once; the heap kept {} bytes",
        live_bytes() - before
    );
}

fn full_bulkhead() -> (Arc<Bulkhead>, OwnedPermit) {
    let config = BulkheadConfig::builder()
        .max_concurrent_calls(1)
        // Long, so only the test's own sleeps and the explicit short waits end a wait.
        .max_wait_duration(Duration::from_secs(600))
        .build()
        .unwrap();
    let bulkhead = Arc::new(Bulkhead::new("storm", config));
    let held = bulkhead.try_acquire_owned().unwrap();
    (bulkhead, held)
}

/// What one storm measured, heap figures relative to the live heap just before it.
struct Storm {
    peak_waiting: usize,
    /// Threads of the process once all sync threads were spawned.
    threads: Option<usize>,
    peak_heap: isize,
    after_heap: isize,
    rss_kib: (Option<u64>, Option<u64>, Option<u64>),
    queued_first_wave: Duration,
    took: Duration,
}

impl std::fmt::Display for Storm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kib = |b: isize| b as f64 / 1024.0;
        let (base, peak, after) = self.rss_kib;
        write!(
            f,
            "{TOTAL} waiters, peak waiting {}, threads alive {:?}; live heap +{:.1} KiB at the \
             peak, +{:.1} KiB after; RSS KiB {base:?} -> peak {peak:?} -> after {after:?}; first \
             wave ({FIRED_BY_TEST}) queued in {:?}, storm over in {:?}",
            self.peak_waiting,
            self.threads,
            kib(self.peak_heap),
            kib(self.after_heap),
            self.queued_first_wave,
            self.took
        )
    }
}

/// Runs one storm of `TOTAL` waiters on a bulkhead whose only permit is held. The storm gets
/// a runtime of its own, dropped before the "after" heap is read, so the figure holds what
/// the storm left behind and not the tokio runtime's own high-water marks (its task and
/// timer structures keep their capacity, and how far they grow depends on scheduling).
fn storm(bulkhead: &Arc<Bulkhead>) -> Storm {
    let baseline = live_bytes();
    let baseline_rss = rss_kib();
    let runtime = runtime();
    let started = Instant::now();
    let (fire, fired) = tokio::sync::watch::channel(false);

    // 1. Waiters whose deadline the test decides.
    let timed_out = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::with_capacity(TOTAL);
    for _ in 0..FIRED_BY_TEST {
        let (b, t, mut rx) = (Arc::clone(bulkhead), Arc::clone(&timed_out), fired.clone());
        tasks.push(runtime.spawn(async move {
            let sleep = |_wait| async move {
                let _ = rx.wait_for(|fired| *fired).await;
            };
            let err = b.acquire_async_with_sleep(sleep).await.expect_err("no permit is free");
            assert_eq!(err.reason(), RejectReason::WaitTimedOut);
            t.fetch_add(1, SeqCst);
        }));
    }
    drop(fired);
    wait_until("the first wave queues", || bulkhead.metrics().waiting_calls() == FIRED_BY_TEST);
    let queued_first_wave = started.elapsed();

    // 2. Dropped futures (tokio timer) and sync threads (engine deadline).
    let cancelled = Arc::new(AtomicUsize::new(0));
    for _ in 0..TOKIO_TIMEOUTS {
        let (b, c) = (Arc::clone(bulkhead), Arc::clone(&cancelled));
        tasks.push(runtime.spawn(async move {
            let outcome = tokio::time::timeout(SHORT_WAIT, b.acquire_async()).await;
            assert!(outcome.is_err(), "no permit is free, and the max wait is 600 s");
            c.fetch_add(1, SeqCst);
        }));
    }
    let threads: Vec<_> = (0..SYNC_THREADS)
        .map(|_| {
            let (b, t) = (Arc::clone(bulkhead), Arc::clone(&timed_out));
            std::thread::Builder::new()
                .stack_size(64 * 1024)
                .spawn(move || {
                    let err = b.acquire_timeout(SHORT_WAIT).expect_err("no permit is free");
                    assert_eq!(err.reason(), RejectReason::WaitTimedOut);
                    assert!(err.waited() >= SHORT_WAIT);
                    t.fetch_add(1, SeqCst);
                })
                .unwrap()
        })
        .collect();

    // The warm-up's premise: it parked more threads than a storm has. All sync threads are
    // spawned by now (a sync thread that already gave up, under heavy load, only lowers the
    // count).
    let alive = threads_alive();
    if let Some(alive) = alive {
        assert!(
            alive < WARM_UP_PARKERS,
            "{alive} threads alive in a storm: the warm-up must park more than that"
        );
    }

    // The peak: sample until everyone is queued or the short waits start ending.
    let (mut peak_waiting, mut peak_heap, mut peak_rss) = (0, live_bytes(), rss_kib());
    loop {
        let waiting = bulkhead.metrics().waiting_calls();
        peak_waiting = peak_waiting.max(waiting);
        peak_heap = peak_heap.max(live_bytes());
        peak_rss = peak_rss.max(rss_kib());
        if waiting == TOTAL || cancelled.load(SeqCst) + timed_out.load(SeqCst) > 0 {
            break;
        }
        assert!(started.elapsed() < HANG_GUARD, "hang guard: the storm never peaked");
        std::thread::sleep(Duration::from_millis(1));
    }

    // 3. Everyone gives up: the short waits on their own, then the first wave on our word.
    wait_until("the short waits end", || {
        cancelled.load(SeqCst) + timed_out.load(SeqCst) == TOKIO_TIMEOUTS + SYNC_THREADS
    });
    fire.send(true).unwrap();
    for t in threads {
        t.join().expect("sync waiter panicked");
    }
    runtime.block_on(async {
        for t in tasks {
            t.await.expect("async waiter panicked");
        }
    });
    let took = started.elapsed();
    assert_eq!(timed_out.load(SeqCst), FIRED_BY_TEST + SYNC_THREADS);
    assert_eq!(cancelled.load(SeqCst), TOKIO_TIMEOUTS);
    drop((fire, timed_out, cancelled));

    let m = bulkhead.metrics();
    assert_eq!(m.waiting_calls(), 0, "{m:?}");
    assert_eq!(m.in_flight_calls(), 1, "only the test's own permit: {m:?}");
    assert_eq!(m.available_concurrent_calls(), 0, "{m:?}");
    drop(runtime);
    Storm {
        peak_waiting,
        threads: alive,
        peak_heap: peak_heap - baseline,
        after_heap: live_bytes() - baseline,
        rss_kib: (baseline_rss, peak_rss, rss_kib()),
        queued_first_wave,
        took,
    }
}

/// Heap bytes freed by dropping `bulkhead` (its last `Arc`).
fn freed_by_drop(bulkhead: Arc<Bulkhead>) -> isize {
    assert_eq!(Arc::strong_count(&bulkhead), 1);
    let before = live_bytes();
    drop(bulkhead);
    before - live_bytes()
}

#[test]
fn storm_of_10000_timed_out_waiters_leaves_nothing_behind() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    warm_up();
    // A bulkhead that never saw a waiter: what dropping one frees.
    let (control, held) = full_bulkhead();
    drop(held);
    let control_size = freed_by_drop(control);

    let (bulkhead, held) = full_bulkhead();
    let first = storm(&bulkhead);
    println!("storm 1: {first}");
    let second = storm(&bulkhead);
    println!("storm 2: {second}");
    for s in [&first, &second] {
        assert!(s.peak_waiting >= FIRED_BY_TEST, "the storm never queued its first wave: {s}");
    }

    // The next acquire: the fast path, so no allocation (a queued or locked path would
    // allocate a waiter). Timed for the report only.
    drop(held);
    let region = Region::new(GLOBAL);
    let t0 = Instant::now();
    let next = bulkhead.try_acquire();
    let next_took = t0.elapsed();
    let allocs = region.change();
    assert!(next.is_ok(), "the next acquire after the storms");
    assert_eq!(allocs.allocations, 0, "the next acquire allocated: {allocs:?}");
    drop(next);
    let m = bulkhead.metrics();
    assert_eq!((m.available_concurrent_calls(), m.in_flight_calls(), m.waiting_calls()), (1, 0, 0));

    // What the bulkhead itself still holds because of the storms.
    let retained = freed_by_drop(bulkhead) - control_size;
    println!(
        "storm: next try_acquire {next_took:?} with {} allocations; the bulkhead retains {retained} \
         heap bytes after the storms (slot array for {TOTAL} waiters = {SLOT_ARRAY} bytes)",
        allocs.allocations
    );
    // No waiter (an `Arc` with a thread handle or a waker, about 50 bytes each) survives a
    // storm: all the bulkhead may keep is its queue's slot array, one pointer per slot.
    assert!(retained <= SLOT_ARRAY, "{retained} bytes retained: waiters leaked");
    // A second storm reuses what the first left: no growth from storm to storm beyond the
    // slot array the first one may have kept (checked above) and small runtime noise. Whole
    // process: a leaked waiter, task or timer entry shows here too. parking_lot's table, which
    // grows with how many threads a storm happens to park, was sized by the warm-up.
    assert!(
        second.after_heap < 16 * 1024,
        "the second storm left {} more heap bytes than it found",
        second.after_heap
    );
}

/// The stricter property the issue asks for: the queue's memory is returned after a storm
/// (the engine drops a queue array above 64 entries once the queue empties).
#[test]
fn storm_queue_memory_is_returned() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    warm_up();
    let (control, held) = full_bulkhead();
    drop(held);
    let control_size = freed_by_drop(control);
    let (bulkhead, held) = full_bulkhead();
    let report = storm(&bulkhead);
    drop(held);
    let retained = freed_by_drop(bulkhead) - control_size;
    println!("storm: {report}; the bulkhead retains {retained} heap bytes");
    assert!(retained < 1024, "the bulkhead retains {retained} heap bytes after the storm");
}
