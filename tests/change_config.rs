//! `change_config`: never blocks; growth serves queued waiters first (FIFO); a shrink is a
//! debt that in-flight calls pay back; new wait settings apply to waits that start later.

mod common;

use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::Duration;

use bulkhead::{Bulkhead, BulkheadConfig, RejectReason};
use common::*;

#[test]
fn change_config_makes_config_return_the_new_one() {
    let bulkhead = Bulkhead::new("cc-config", limit(3));
    assert_eq!(bulkhead.config(), limit(3));
    let new = limit_wait_cap(9, Duration::from_millis(100), 4);
    bulkhead.change_config(new.clone());
    assert_eq!(bulkhead.config(), new);
    bulkhead.change_config(BulkheadConfig::for_pool(20));
    assert_eq!(bulkhead.config(), BulkheadConfig::for_pool(20));
    assert_eq!(bulkhead.metrics().max_allowed_concurrent_calls(), 16);
}

#[test]
fn change_config_growth_admits_newcomers_at_once() {
    let bulkhead = Bulkhead::new("cc-grow", limit(1));
    let a = bulkhead.try_acquire().unwrap();
    assert!(bulkhead.try_acquire().is_err());
    bulkhead.change_config(limit(3));
    assert_metrics(bulkhead.metrics(), 2, 3, 1, 0);
    let b = bulkhead.try_acquire().unwrap();
    let c = bulkhead.try_acquire().unwrap();
    assert!(bulkhead.try_acquire().is_err());
    drop((a, b, c));
    assert_quiescent(&bulkhead, 3);
}

/// Growth hands the new permits to the oldest waiters, in queue order, at once.
#[test]
fn change_config_growth_serves_queued_waiters_in_fifo_order() {
    with_hang_guard(|| {
        let bulkhead = shared("cc-grow-fifo", limit_wait(1, LONG_WAIT));
        let held = bulkhead.try_acquire().unwrap();
        let granted = Arc::new(Mutex::new(Vec::new()));
        let mut releases = Vec::new();
        let mut waiters = Vec::new();
        for id in 0..4 {
            let (release_tx, release_rx) = mpsc::channel::<()>();
            releases.push(release_tx);
            let bh = Arc::clone(&bulkhead);
            let granted = Arc::clone(&granted);
            waiters.push(thread::spawn(move || {
                let permit = bh.acquire().expect("granted");
                granted.lock().unwrap().push(id);
                release_rx.recv().unwrap();
                drop(permit);
            }));
            wait_for_waiters(&bulkhead, id + 1);
        }
        // The config must be applied without waiting on anyone.
        bulkhead.change_config(limit_wait(3, LONG_WAIT));
        // Two new permits: the two oldest waiters are served, the others still wait.
        assert_metrics(bulkhead.metrics(), 0, 3, 3, 2);
        wait_until("two grants", || granted.lock().unwrap().len() == 2);
        let mut first_two = granted.lock().unwrap().clone();
        first_two.sort_unstable();
        assert_eq!(first_two, [0, 1]);
        assert!(bulkhead.try_acquire().is_err(), "a newcomer must not overtake waiters 2 and 3");
        bulkhead.change_config(limit_wait(4, LONG_WAIT));
        wait_until("three grants", || granted.lock().unwrap().len() == 3);
        assert_eq!(granted.lock().unwrap()[2], 2);
        assert_metrics(bulkhead.metrics(), 0, 4, 4, 1);
        drop(held);
        wait_until("four grants", || granted.lock().unwrap().len() == 4);
        assert_eq!(granted.lock().unwrap()[3], 3);
        for release in releases {
            release.send(()).unwrap();
        }
        for waiter in waiters {
            join_guarded(waiter);
        }
        assert_quiescent(&bulkhead, 4);
    });
}

/// Shrinking below the calls in flight: the new limit shows at once, available reads 0
/// (never negative), and newcomers are refused until in-flight drops below the new max.
#[test]
fn change_config_shrink_below_in_flight_is_paid_back_before_admitting() {
    let bulkhead = Bulkhead::new("cc-shrink", limit(4));
    let mut held: Vec<_> = (0..4).map(|_| bulkhead.try_acquire().unwrap()).collect();
    bulkhead.change_config(limit(2));
    assert_metrics(bulkhead.metrics(), 0, 2, 4, 0);
    assert_eq!(bulkhead.config().max_concurrent_calls(), 2);
    let err = bulkhead.try_acquire().unwrap_err();
    assert_eq!(err.reason(), RejectReason::Full);
    assert_eq!(err.max_concurrent_calls(), 2, "the error reports the new limit");
    held.pop();
    assert_metrics(bulkhead.metrics(), 0, 2, 3, 0);
    assert!(bulkhead.try_acquire().is_err());
    held.pop();
    assert_metrics(bulkhead.metrics(), 0, 2, 2, 0);
    assert!(bulkhead.try_acquire().is_err(), "in flight == new max: still full");
    held.pop();
    assert_metrics(bulkhead.metrics(), 1, 2, 1, 0);
    let newcomer = bulkhead.try_acquire().expect("in flight < new max: admitted");
    assert!(bulkhead.try_acquire().is_err());
    drop(newcomer);
    drop(held);
    assert_quiescent(&bulkhead, 2);
}

#[test]
fn change_config_shrink_to_zero_then_grow_restores_service() {
    let bulkhead = Bulkhead::new("cc-zero", limit(2));
    let held = bulkhead.try_acquire().unwrap();
    bulkhead.change_config(limit(0));
    assert_metrics(bulkhead.metrics(), 0, 0, 1, 0);
    assert!(bulkhead.try_acquire().is_err());
    drop(held);
    assert_quiescent(&bulkhead, 0);
    assert!(bulkhead.try_acquire().is_err());
    bulkhead.change_config(limit(2));
    assert_quiescent(&bulkhead, 2);
    let _a = bulkhead.try_acquire().unwrap();
    let _b = bulkhead.try_acquire().unwrap();
}

/// Shrinking with waiters queued: releases pay the debt first, then serve the waiter.
#[test]
fn change_config_shrink_with_waiters_pays_debt_before_granting() {
    with_hang_guard(|| {
        let bulkhead = shared("cc-shrink-waiters", limit_wait(3, LONG_WAIT));
        let mut held: Vec<_> = (0..3).map(|_| bulkhead.try_acquire_owned().unwrap()).collect();
        let waiter = {
            let bh = Arc::clone(&bulkhead);
            thread::spawn(move || bh.acquire().map(drop))
        };
        wait_for_waiters(&bulkhead, 1);
        bulkhead.change_config(limit_wait(1, LONG_WAIT));
        assert_metrics(bulkhead.metrics(), 0, 1, 3, 1);
        held.pop();
        held.pop();
        // In flight 1 == new max: the waiter is still queued.
        assert_metrics(bulkhead.metrics(), 0, 1, 1, 1);
        assert!(!waiter.is_finished());
        held.pop();
        join_guarded(waiter).expect("granted once the debt is paid");
        assert_quiescent(&bulkhead, 1);
    });
}

#[test]
fn change_config_never_blocks_with_calls_and_waiters_in_flight() {
    with_hang_guard(|| {
        let bulkhead = shared("cc-never-blocks", limit_wait(1, LONG_WAIT));
        let held = bulkhead.try_acquire().unwrap();
        let waiters: Vec<_> = (0..3)
            .map(|i| {
                let bh = Arc::clone(&bulkhead);
                let waiter = thread::spawn(move || bh.acquire().map(drop));
                wait_for_waiters(&bulkhead, i + 1);
                waiter
            })
            .collect();
        for n in [0, 5, 1, 0, 2, 1] {
            bulkhead.change_config(limit_wait(n, LONG_WAIT));
            assert_eq!(bulkhead.metrics().max_allowed_concurrent_calls(), n);
        }
        drop(held);
        for waiter in waiters {
            join_guarded(waiter).expect("granted");
        }
        assert_quiescent(&bulkhead, 1);
    });
}

#[test]
fn change_config_max_wait_applies_to_later_waits() {
    with_hang_guard(|| {
        let bulkhead = Bulkhead::new("cc-wait", limit(1));
        let _held = bulkhead.try_acquire().unwrap();
        assert_eq!(bulkhead.acquire().unwrap_err().reason(), RejectReason::Full);
        let wait = Duration::from_millis(5);
        bulkhead.change_config(limit_wait(1, wait));
        let err = bulkhead.acquire().unwrap_err();
        assert_eq!(err.reason(), RejectReason::WaitTimedOut);
        assert!(err.waited() >= wait);
        bulkhead.change_config(limit_wait(1, Duration::ZERO));
        let err = bulkhead.acquire().unwrap_err();
        assert_eq!(err.reason(), RejectReason::Full);
        assert_eq!(err.waited(), Duration::ZERO);
    });
}

#[test]
fn change_config_max_wait_applies_to_later_async_waits() {
    let bulkhead = Bulkhead::new("cc-wait-async", limit(1));
    let _held = bulkhead.try_acquire().unwrap();
    let first = futures::executor::block_on(bulkhead.acquire_async()).unwrap_err();
    assert_eq!(first.reason(), RejectReason::Full);
    bulkhead.change_config(limit_wait(1, Duration::from_secs(3)));
    // A "sleep" already over: the wait times out on the first poll, proving it queued.
    let err = futures::executor::block_on(bulkhead.acquire_async_with_sleep(|wait| {
        assert_eq!(wait, Duration::from_secs(3));
        async {}
    }))
    .unwrap_err();
    assert_eq!(err.reason(), RejectReason::WaitTimedOut);
}

#[test]
fn change_config_waiter_cap_applies_to_later_waits() {
    with_hang_guard(|| {
        let bulkhead = shared("cc-cap", limit_wait(1, LONG_WAIT));
        let held = bulkhead.try_acquire().unwrap();
        let waiter = {
            let bh = Arc::clone(&bulkhead);
            thread::spawn(move || bh.acquire().map(drop))
        };
        wait_for_waiters(&bulkhead, 1);
        bulkhead.change_config(limit_wait_cap(1, LONG_WAIT, 1));
        let err = bulkhead.acquire().unwrap_err();
        assert_eq!(err.reason(), RejectReason::TooManyWaiting);
        assert_eq!(err.waited(), Duration::ZERO);
        assert_eq!(bulkhead.metrics().waiting_calls(), 1, "the queued waiter stays");
        drop(held);
        join_guarded(waiter).expect("granted");
        assert_quiescent(&bulkhead, 1);
    });
}

#[test]
fn change_config_concurrent_with_traffic_loses_no_permit() {
    with_hang_guard(|| {
        let bulkhead = shared("cc-traffic", limit_wait(4, Duration::from_micros(200)));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let workers: Vec<_> = (0..3)
            .map(|seed| {
                let bh = Arc::clone(&bulkhead);
                let stop = Arc::clone(&stop);
                thread::spawn(move || {
                    let mut rng = XorShift::new(seed + 11);
                    while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                        let permit = match rng.below(2) {
                            0 => bh.try_acquire(),
                            _ => bh.acquire(),
                        };
                        if let Ok(permit) = permit {
                            if rng.below(4) == 0 {
                                thread::yield_now();
                            }
                            drop(permit);
                        }
                    }
                })
            })
            .collect();
        let mut rng = XorShift::new(5);
        for _ in 0..2_000 {
            let n = rng.below(6) as usize;
            bulkhead.change_config(limit_wait(n, Duration::from_micros(200)));
            assert_eq!(bulkhead.metrics().max_allowed_concurrent_calls(), n);
        }
        bulkhead.change_config(limit_wait(4, Duration::from_micros(200)));
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        for worker in workers {
            join_guarded(worker);
        }
        assert_quiescent(&bulkhead, 4);
    });
}
