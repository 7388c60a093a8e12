//! `metrics()`: every field after every kind of operation, reflected as soon as it happened.

mod common;

use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::Duration;

use bulkhead::{Bulkhead, RejectReason};
use common::*;

#[test]
fn metrics_of_new_bulkhead_show_all_permits_free() {
    assert_metrics(Bulkhead::new("m-new", limit(7)).metrics(), 7, 7, 0, 0);
    assert_metrics(Bulkhead::new("m-new-closed", limit(0)).metrics(), 0, 0, 0, 0);
    let default = Bulkhead::new("m-new-default", Default::default());
    assert_metrics(default.metrics(), 25, 25, 0, 0);
}

#[test]
fn metrics_after_grant_and_drop_track_in_flight() {
    let bulkhead = Bulkhead::new("m-grant", limit(3));
    let a = bulkhead.try_acquire().unwrap();
    assert_metrics(bulkhead.metrics(), 2, 3, 1, 0);
    let b = bulkhead.acquire().unwrap();
    assert_metrics(bulkhead.metrics(), 1, 3, 2, 0);
    let c = bulkhead.call(|| bulkhead.metrics()).unwrap();
    assert_metrics(c, 0, 3, 3, 0); // inside the call
    assert_metrics(bulkhead.metrics(), 1, 3, 2, 0); // after it
    drop(a);
    assert_metrics(bulkhead.metrics(), 2, 3, 1, 0);
    drop(b);
    assert_metrics(bulkhead.metrics(), 3, 3, 0, 0);
}

#[test]
fn metrics_after_rejection_are_unchanged() {
    let bulkhead = Bulkhead::new("m-reject", limit(1));
    let _held = bulkhead.try_acquire().unwrap();
    let before = bulkhead.metrics();
    assert_eq!(bulkhead.try_acquire().unwrap_err().reason(), RejectReason::Full);
    assert_eq!(bulkhead.acquire().unwrap_err().reason(), RejectReason::Full);
    assert_eq!(bulkhead.metrics(), before);
    assert_metrics(before, 0, 1, 1, 0);
}

#[test]
fn metrics_after_timeout_show_waiter_gone_at_once() {
    let bulkhead = Bulkhead::new("m-timeout", limit(1));
    let _held = bulkhead.try_acquire().unwrap();
    let err = bulkhead.acquire_timeout(Duration::from_millis(2)).unwrap_err();
    assert_eq!(err.reason(), RejectReason::WaitTimedOut);
    // Read right after the call returned: no lag.
    assert_metrics(bulkhead.metrics(), 0, 1, 1, 0);
}

#[test]
fn metrics_while_sync_waiter_queued_count_it_then_grant_moves_it_in_flight() {
    with_hang_guard(|| {
        let bulkhead = shared("m-sync-waiter", limit_wait(2, LONG_WAIT));
        let a = bulkhead.try_acquire().unwrap();
        let b = bulkhead.try_acquire().unwrap();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let release_rx = Arc::new(Mutex::new(release_rx));
        let waiters: Vec<_> = (0..2)
            .map(|i| {
                let bh = Arc::clone(&bulkhead);
                let release_rx = Arc::clone(&release_rx);
                let waiter = thread::spawn(move || {
                    let permit = bh.acquire().expect("granted");
                    release_rx.lock().unwrap().recv().unwrap();
                    drop(permit);
                });
                wait_for_waiters(&bulkhead, i + 1);
                waiter
            })
            .collect();
        assert_metrics(bulkhead.metrics(), 0, 2, 2, 2);
        drop(a);
        // Handed over: still two in flight, one fewer waiting, none available.
        assert_metrics(bulkhead.metrics(), 0, 2, 2, 1);
        drop(b);
        assert_metrics(bulkhead.metrics(), 0, 2, 2, 0);
        release_tx.send(()).unwrap();
        wait_until("one waiter done", || bulkhead.metrics().in_flight_calls() == 1);
        assert_metrics(bulkhead.metrics(), 1, 2, 1, 0);
        release_tx.send(()).unwrap();
        for waiter in waiters {
            join_guarded(waiter);
        }
        assert_quiescent(&bulkhead, 2);
    });
}

#[test]
fn metrics_after_dropped_acquire_future_show_waiter_gone_at_once() {
    let bulkhead = Bulkhead::new("m-future-drop", limit_wait(1, LONG_WAIT));
    let held = bulkhead.try_acquire().unwrap();
    let (_counter, waker) = CountingWaker::new();
    let mut futures: Vec<_> = (0..3).map(|_| Box::pin(bulkhead.acquire_async())).collect();
    for (i, fut) in futures.iter_mut().enumerate() {
        assert!(poll_once(fut, &waker).is_pending());
        assert_metrics(bulkhead.metrics(), 0, 1, 1, i + 1);
    }
    // Drop the middle one, then the others.
    drop(futures.remove(1));
    assert_metrics(bulkhead.metrics(), 0, 1, 1, 2);
    drop(futures);
    assert_metrics(bulkhead.metrics(), 0, 1, 1, 0);
    drop(held);
    assert_quiescent(&bulkhead, 1);
}

#[test]
fn metrics_after_grant_to_future_count_it_in_flight() {
    let bulkhead = Bulkhead::new("m-future-grant", limit_wait(1, LONG_WAIT));
    let held = bulkhead.try_acquire().unwrap();
    let (_counter, waker) = CountingWaker::new();
    let mut fut = Box::pin(bulkhead.acquire_async());
    assert!(poll_once(&mut fut, &waker).is_pending());
    drop(held);
    // Granted but not yet polled: in flight, no longer waiting.
    assert_metrics(bulkhead.metrics(), 0, 1, 1, 0);
    let permit = match poll_once(&mut fut, &waker) {
        std::task::Poll::Ready(result) => result.unwrap(),
        std::task::Poll::Pending => panic!("granted future still pending"),
    };
    assert_metrics(bulkhead.metrics(), 0, 1, 1, 0);
    drop(permit);
    assert_quiescent(&bulkhead, 1);
}

#[test]
fn metrics_after_change_config_report_new_limit_at_once() {
    let bulkhead = Bulkhead::new("m-change", limit(4));
    let held: Vec<_> = (0..3).map(|_| bulkhead.try_acquire().unwrap()).collect();
    assert_metrics(bulkhead.metrics(), 1, 4, 3, 0);
    bulkhead.change_config(limit(10));
    assert_metrics(bulkhead.metrics(), 7, 10, 3, 0);
    bulkhead.change_config(limit(1));
    assert_metrics(bulkhead.metrics(), 0, 1, 3, 0); // available never negative
    bulkhead.change_config(limit(0));
    assert_metrics(bulkhead.metrics(), 0, 0, 3, 0);
    drop(held);
    assert_quiescent(&bulkhead, 0);
    bulkhead.change_config(limit(2));
    assert_quiescent(&bulkhead, 2);
}

#[test]
fn metrics_snapshot_is_a_copy() {
    let bulkhead = Bulkhead::new("m-snapshot", limit(2));
    let before = bulkhead.metrics();
    let _permit = bulkhead.try_acquire().unwrap();
    assert_metrics(before, 2, 2, 0, 0);
    assert_ne!(before, bulkhead.metrics());
}

#[test]
fn bulkhead_debug_shows_name_limit_and_available() {
    let bulkhead = Bulkhead::new("m-debug", limit(5));
    let _permit = bulkhead.try_acquire().unwrap();
    let debug = format!("{bulkhead:?}");
    assert!(debug.contains("m-debug"), "{debug}");
    assert!(debug.contains('5'), "{debug}");
    assert!(debug.contains('4'), "{debug}");
}
