//! Multi-thread stress, bounded in time: concurrent holders never exceed the limit, and
//! every permit comes back.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use bulkhead::{BulkheadFull, RejectReason};
use common::*;

const THREADS: usize = 8;
const RUN_FOR: Duration = Duration::from_millis(1200);

/// Holds a permit for a random short while (the counting itself is `common::Holders`).
trait HoldSync {
    fn hold(&self, limit: usize, rng: &mut XorShift);
}

impl HoldSync for Holders {
    fn hold(&self, limit: usize, rng: &mut XorShift) {
        self.enter(limit);
        match rng.below(4) {
            0 => thread::yield_now(),
            1 => {
                for _ in 0..rng.below(200) {
                    std::hint::spin_loop();
                }
            }
            2 => thread::sleep(Duration::from_micros(rng.below(50))),
            _ => {}
        }
        self.leave();
    }
}

#[derive(Default)]
struct Tally {
    granted: AtomicUsize,
    full: AtomicUsize,
    timed_out: AtomicUsize,
}

impl Tally {
    /// Records one acquire: holds a granted permit for a moment, checks a rejection.
    fn outcome<P>(
        &self,
        result: Result<P, BulkheadFull>,
        allowed: Duration,
        holders: &Holders,
        limit: usize,
        rng: &mut XorShift,
    ) {
        match result {
            Ok(permit) => {
                holders.hold(limit, rng);
                drop(permit);
                self.granted.fetch_add(1, Ordering::Relaxed);
            }
            Err(err) => self.rejected(&err, allowed),
        }
    }

    fn rejected(&self, err: &BulkheadFull, allowed: Duration) {
        match err.reason() {
            RejectReason::Full => {
                assert_eq!(err.waited(), Duration::ZERO);
                self.full.fetch_add(1, Ordering::Relaxed);
            }
            RejectReason::WaitTimedOut => {
                assert!(err.waited() >= allowed, "waited {:?} < {allowed:?}", err.waited());
                self.timed_out.fetch_add(1, Ordering::Relaxed);
            }
            other => panic!("unexpected rejection {other:?} without a waiter cap"),
        }
    }
}

#[test]
fn stress_mixed_sync_operations_never_exceed_limit() {
    const LIMIT: usize = 3;
    let max_wait = Duration::from_micros(200);
    let bulkhead = shared("stress-mixed", limit_wait(LIMIT, max_wait));
    let holders = Arc::new(Holders::default());
    let tally = Arc::new(Tally::default());
    let deadline = Instant::now() + RUN_FOR;
    with_hang_guard({
        let bulkhead = Arc::clone(&bulkhead);
        let holders = Arc::clone(&holders);
        let tally = Arc::clone(&tally);
        move || {
            let workers: Vec<_> = (0..THREADS)
                .map(|t| {
                    let bh = Arc::clone(&bulkhead);
                    let holders = Arc::clone(&holders);
                    let tally = Arc::clone(&tally);
                    thread::spawn(move || {
                        let mut rng = XorShift::new(0x5157_0000 + t as u64);
                        while Instant::now() < deadline {
                            let wait = Duration::from_micros(rng.below(300));
                            match rng.below(5) {
                                0 => tally.outcome(
                                    bh.try_acquire(),
                                    Duration::ZERO,
                                    &holders,
                                    LIMIT,
                                    &mut rng,
                                ),
                                1 => tally.outcome(
                                    bh.acquire_timeout(wait),
                                    wait,
                                    &holders,
                                    LIMIT,
                                    &mut rng,
                                ),
                                2 => {
                                    tally.outcome(bh.acquire(), max_wait, &holders, LIMIT, &mut rng)
                                }
                                3 => tally.outcome(
                                    bh.try_acquire_owned(),
                                    Duration::ZERO,
                                    &holders,
                                    LIMIT,
                                    &mut rng,
                                ),
                                _ => match bh.call(|| holders.hold(LIMIT, &mut rng)) {
                                    Ok(()) => {
                                        tally.granted.fetch_add(1, Ordering::Relaxed);
                                    }
                                    Err(err) => tally.rejected(&err, max_wait),
                                },
                            }
                        }
                    })
                })
                .collect();
            for worker in workers {
                join_guarded(worker);
            }
        }
    });
    assert_quiescent(&bulkhead, LIMIT);
    let peak = holders.peak.load(Ordering::SeqCst);
    assert!(peak <= LIMIT);
    let granted = tally.granted.load(Ordering::Relaxed);
    let full = tally.full.load(Ordering::Relaxed);
    let timed_out = tally.timed_out.load(Ordering::Relaxed);
    println!("granted {granted}, full {full}, timed out {timed_out}, peak holders {peak}");
    assert!(granted > 0, "the stress admitted nothing");
    assert!(full + timed_out > 0, "the stress never filled the bulkhead");
}

/// Long waits under contention: every waiter is eventually served (no lost wake-up) and
/// the limit holds throughout.
#[test]
fn stress_blocking_waiters_are_all_served() {
    const LIMIT: usize = 2;
    const PER_THREAD: usize = 2_000;
    let bulkhead = shared("stress-waiters", limit_wait(LIMIT, LONG_WAIT));
    let holders = Arc::new(Holders::default());
    with_hang_guard({
        let bulkhead = Arc::clone(&bulkhead);
        let holders = Arc::clone(&holders);
        move || {
            let workers: Vec<_> = (0..THREADS)
                .map(|t| {
                    let bh = Arc::clone(&bulkhead);
                    let holders = Arc::clone(&holders);
                    thread::spawn(move || {
                        let mut rng = XorShift::new(0x0a17_0000 + t as u64);
                        for _ in 0..PER_THREAD {
                            let permit = bh.acquire().expect("a long wait is always served");
                            holders.hold(LIMIT, &mut rng);
                            drop(permit);
                        }
                    })
                })
                .collect();
            for worker in workers {
                join_guarded(worker);
            }
        }
    });
    assert_quiescent(&bulkhead, LIMIT);
}

/// Traffic while the limit moves between 1 and 4 and the waiter cap is 3: holders never
/// exceed the largest limit, waiters never exceed the cap, and at the end every permit is
/// back.
#[test]
fn stress_with_changing_limit_loses_no_permit() {
    const MAX_LIMIT: usize = 4;
    const CAP: usize = 3;
    let max_wait = Duration::from_micros(300);
    let config = move |n| limit_wait_cap(n, max_wait, CAP);
    let bulkhead = shared("stress-changing", config(MAX_LIMIT));
    let holders = Arc::new(Holders::default());
    let stop = Arc::new(AtomicBool::new(false));
    with_hang_guard({
        let bulkhead = Arc::clone(&bulkhead);
        let holders = Arc::clone(&holders);
        let stop = Arc::clone(&stop);
        move || {
            let workers: Vec<_> = (0..THREADS - 1)
                .map(|t| {
                    let bh = Arc::clone(&bulkhead);
                    let holders = Arc::clone(&holders);
                    let stop = Arc::clone(&stop);
                    thread::spawn(move || {
                        let mut rng = XorShift::new(0xc4a6_0000 + t as u64);
                        while !stop.load(Ordering::SeqCst) {
                            let result =
                                if rng.below(3) == 0 { bh.try_acquire() } else { bh.acquire() };
                            match result {
                                Ok(permit) => {
                                    holders.hold(MAX_LIMIT, &mut rng);
                                    drop(permit);
                                }
                                Err(err) => {
                                    if err.reason() != RejectReason::WaitTimedOut {
                                        assert_eq!(err.waited(), Duration::ZERO);
                                    }
                                }
                            }
                        }
                    })
                })
                .collect();
            let mut rng = XorShift::new(0xc4a6);
            let deadline = Instant::now() + RUN_FOR;
            while Instant::now() < deadline {
                bulkhead.change_config(config(1 + rng.below(MAX_LIMIT as u64) as usize));
                let m = bulkhead.metrics();
                assert!(m.waiting_calls() <= CAP, "{m:?}");
                assert!(m.available_concurrent_calls() <= m.max_allowed_concurrent_calls());
                thread::sleep(Duration::from_micros(rng.below(500)));
            }
            bulkhead.change_config(config(MAX_LIMIT));
            stop.store(true, Ordering::SeqCst);
            for worker in workers {
                join_guarded(worker);
            }
        }
    });
    assert_quiescent(&bulkhead, MAX_LIMIT);
}
