//! `call` and `call_async`: run the work on the caller's own thread or task under a permit,
//! released on return, on unwind and when the future is dropped.

mod common;

use std::cell::Cell;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::thread;
use std::time::Duration;

use bulkhead::{Bulkhead, RejectReason};
use common::*;

#[test]
fn call_returns_the_result_and_releases() {
    let bulkhead = Bulkhead::new("call-result", limit(2));
    let (value, inside) = bulkhead.call(|| (42, bulkhead.metrics())).unwrap();
    assert_eq!(value, 42);
    assert_metrics(inside, 1, 2, 1, 0);
    assert_quiescent(&bulkhead, 2);
    let text = bulkhead.call(|| String::from("owned result")).unwrap();
    assert_eq!(text, "owned result");
}

#[test]
fn call_runs_on_the_calling_thread() {
    thread_local! {
        static CONTEXT: Cell<u32> = const { Cell::new(0) };
    }
    let bulkhead = Bulkhead::new("call-thread", limit(1));
    CONTEXT.with(|c| c.set(7));
    let caller = thread::current().id();
    let (id, context) =
        bulkhead.call(|| (thread::current().id(), CONTEXT.with(Cell::get))).unwrap();
    assert_eq!(id, caller);
    assert_eq!(context, 7, "thread-locals stay visible inside the call");
}

#[test]
fn call_when_full_rejects_without_running() {
    let bulkhead = Bulkhead::new("call-full", limit(1));
    let _held = bulkhead.try_acquire().unwrap();
    let ran = Cell::new(false);
    let err = bulkhead.call(|| ran.set(true)).unwrap_err();
    assert!(!ran.get());
    assert_eq!(err.reason(), RejectReason::Full);
    assert_eq!(err.waited(), Duration::ZERO);
    assert_metrics(bulkhead.metrics(), 0, 1, 1, 0);
}

#[test]
fn call_when_full_waits_up_to_max_wait() {
    let wait = Duration::from_millis(5);
    let bulkhead = Bulkhead::new("call-timeout", limit_wait(1, wait));
    let _held = bulkhead.try_acquire().unwrap();
    let err = bulkhead.call(|| unreachable!("not run")).unwrap_err();
    assert_eq!(err.reason(), RejectReason::WaitTimedOut);
    assert!(err.waited() >= wait);
}

#[test]
fn call_when_permit_frees_during_wait_runs() {
    with_hang_guard(|| {
        let bulkhead = shared("call-waits", limit_wait(1, LONG_WAIT));
        let held = bulkhead.try_acquire_owned().unwrap();
        let releaser = {
            let bh = Arc::clone(&bulkhead);
            thread::spawn(move || {
                wait_for_waiters(&bh, 1);
                drop(held);
            })
        };
        let value = bulkhead.call(|| bulkhead.metrics().in_flight_calls()).unwrap();
        assert_eq!(value, 1);
        join_guarded(releaser);
        assert_quiescent(&bulkhead, 1);
    });
}

#[test]
fn call_that_panics_propagates_and_releases() {
    let bulkhead = Bulkhead::new("call-panic", limit(1));
    let payload = catch_unwind(AssertUnwindSafe(|| {
        bulkhead.call(|| -> u32 { std::panic::panic_any("downstream exploded") })
    }))
    .unwrap_err();
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"downstream exploded"));
    assert_quiescent(&bulkhead, 1);
    assert_eq!(bulkhead.call(|| 1).unwrap(), 1, "usable after the panic");
}

#[test]
fn call_that_panics_hands_slot_to_waiter() {
    with_hang_guard(|| {
        let bulkhead = shared("call-panic-waiter", limit_wait(1, LONG_WAIT));
        let (entered_tx, entered_rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let panicker = {
            let bh = Arc::clone(&bulkhead);
            thread::spawn(move || {
                bh.call(|| {
                    entered_tx.send(()).unwrap();
                    go_rx.recv().unwrap();
                    panic!("boom");
                })
            })
        };
        entered_rx.recv_timeout(HANG_GUARD).unwrap();
        let waiter = {
            let bh = Arc::clone(&bulkhead);
            thread::spawn(move || bh.call(|| 5))
        };
        wait_for_waiters(&bulkhead, 1);
        go_tx.send(()).unwrap();
        wait_until("panicking thread done", || panicker.is_finished());
        assert!(panicker.join().is_err(), "the panic propagates out of call");
        assert_eq!(join_guarded(waiter).expect("granted"), 5);
        assert_quiescent(&bulkhead, 1);
    });
}

#[tokio::test]
async fn call_async_returns_the_result_and_releases() {
    let bulkhead = Bulkhead::new("call-async-result", limit(2));
    let inside = bulkhead
        .call_async(async {
            tokio::task::yield_now().await;
            bulkhead.metrics()
        })
        .await
        .unwrap();
    assert_metrics(inside, 1, 2, 1, 0);
    assert_quiescent(&bulkhead, 2);
}

#[tokio::test]
async fn call_async_when_full_rejects_without_polling() {
    let bulkhead = Bulkhead::new("call-async-full", limit(1));
    let _held = bulkhead.try_acquire().unwrap();
    let polled = Arc::new(AtomicBool::new(false));
    let dropped = Arc::new(AtomicBool::new(false));
    let work = Tracked { polled: Arc::clone(&polled), dropped: Arc::clone(&dropped) };
    let err = tokio::time::timeout(HANG_GUARD, bulkhead.call_async(work))
        .await
        .expect("hang guard: the work ran although the bulkhead is full")
        .unwrap_err();
    assert_eq!(err.reason(), RejectReason::Full);
    assert!(!polled.load(Ordering::SeqCst), "the work must not run when rejected");
    assert!(dropped.load(Ordering::SeqCst), "the work is dropped");
    assert_metrics(bulkhead.metrics(), 0, 1, 1, 0);
}

/// On a tokio runtime, with or without the `tokio` feature: the bulkhead's own timer bounds
/// the wait.
#[tokio::test]
async fn call_async_when_full_waits_up_to_max_wait() {
    let wait = Duration::from_millis(10);
    let bulkhead = Bulkhead::new("call-async-timeout", limit_wait(1, wait));
    let _held = bulkhead.try_acquire().unwrap();
    let err = tokio::time::timeout(HANG_GUARD, bulkhead.call_async(async {}))
        .await
        .expect("hang guard")
        .unwrap_err();
    assert_eq!(err.reason(), RejectReason::WaitTimedOut);
    assert!(err.waited() >= wait);
    assert_metrics(bulkhead.metrics(), 0, 1, 1, 0);
}

/// Dropping the `call_async` future while the work is pending drops the work and releases
/// the permit at once.
#[test]
fn call_async_dropped_mid_flight_releases() {
    let bulkhead = Bulkhead::new("call-async-dropped", limit(1));
    let polled = Arc::new(AtomicBool::new(false));
    let dropped = Arc::new(AtomicBool::new(false));
    let work = Tracked { polled: Arc::clone(&polled), dropped: Arc::clone(&dropped) };
    let mut fut = Box::pin(bulkhead.call_async(work));
    let (_counter, waker) = CountingWaker::new();
    assert!(fut.as_mut().poll(&mut Context::from_waker(&waker)).is_pending());
    assert!(polled.load(Ordering::SeqCst), "the work runs under the permit");
    assert_metrics(bulkhead.metrics(), 0, 1, 1, 0);
    drop(fut);
    assert!(dropped.load(Ordering::SeqCst));
    assert_quiescent(&bulkhead, 1);
}

/// The permit is held as long as the work exists: when the `call_async` future is dropped,
/// the work (and any clean-up in its `Drop`) still runs under the permit.
#[test]
fn call_async_dropped_mid_flight_drops_work_before_releasing() {
    let bulkhead = Arc::new(Bulkhead::new("call-async-drop-order", limit(1)));
    let in_flight_at_drop = Arc::new(AtomicUsize::new(usize::MAX));
    let work = RecordsInFlightOnDrop {
        bulkhead: Arc::clone(&bulkhead),
        in_flight_at_drop: Arc::clone(&in_flight_at_drop),
    };
    let mut fut = Box::pin(bulkhead.call_async(work));
    let (_counter, waker) = CountingWaker::new();
    assert!(fut.as_mut().poll(&mut Context::from_waker(&waker)).is_pending());
    drop(fut);
    assert_eq!(
        in_flight_at_drop.load(Ordering::SeqCst),
        1,
        "the permit was released before the work was dropped"
    );
    assert_quiescent(&bulkhead, 1);
}

/// Pending forever; records the calls in flight when dropped.
struct RecordsInFlightOnDrop {
    bulkhead: Arc<Bulkhead>,
    in_flight_at_drop: Arc<AtomicUsize>,
}

impl Future for RecordsInFlightOnDrop {
    type Output = ();

    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        Poll::Pending
    }
}

impl Drop for RecordsInFlightOnDrop {
    fn drop(&mut self) {
        self.in_flight_at_drop.store(self.bulkhead.metrics().in_flight_calls(), Ordering::SeqCst);
    }
}

#[tokio::test]
async fn call_async_cancelled_by_timeout_releases() {
    let bulkhead = Bulkhead::new("call-async-timeout-cancel", limit(1));
    let outcome = tokio::time::timeout(
        Duration::from_millis(5),
        bulkhead.call_async(std::future::pending::<()>()),
    )
    .await;
    assert!(outcome.is_err());
    assert_quiescent(&bulkhead, 1);
}

#[test]
fn call_async_dropped_while_queued_leaves_queue() {
    let bulkhead = Bulkhead::new("call-async-queued-drop", limit_wait(1, LONG_WAIT));
    let held = bulkhead.try_acquire().unwrap();
    let polled = Arc::new(AtomicBool::new(false));
    let dropped = Arc::new(AtomicBool::new(false));
    let work = Tracked { polled: Arc::clone(&polled), dropped: Arc::clone(&dropped) };
    let mut fut = Box::pin(bulkhead.call_async(work));
    let (_counter, waker) = CountingWaker::new();
    assert!(fut.as_mut().poll(&mut Context::from_waker(&waker)).is_pending());
    assert_metrics(bulkhead.metrics(), 0, 1, 1, 1);
    drop(fut);
    assert!(!polled.load(Ordering::SeqCst));
    assert!(dropped.load(Ordering::SeqCst));
    assert_metrics(bulkhead.metrics(), 0, 1, 1, 0);
    drop(held);
    assert_quiescent(&bulkhead, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_async_that_panics_propagates_and_releases() {
    let bulkhead = shared("call-async-panic", limit(1));
    let task = {
        let bh = Arc::clone(&bulkhead);
        tokio::spawn(async move {
            bh.call_async(async {
                tokio::task::yield_now().await;
                panic!("async downstream exploded");
            })
            .await
        })
    };
    let err = task.await.unwrap_err();
    assert!(err.is_panic(), "the panic propagates");
    assert_quiescent(&bulkhead, 1);
}

#[test]
fn call_async_that_panics_under_catch_unwind_releases() {
    let bulkhead = Bulkhead::new("call-async-panic-sync", limit(1));
    let result = catch_unwind(AssertUnwindSafe(|| {
        futures::executor::block_on(bulkhead.call_async(async { panic!("boom") }))
    }));
    assert!(result.is_err());
    assert_quiescent(&bulkhead, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_async_queued_is_served_on_release() {
    let bulkhead = shared("call-async-queued", limit_wait(1, LONG_WAIT));
    let held = bulkhead.try_acquire_owned().unwrap();
    let task = {
        let bh = Arc::clone(&bulkhead);
        tokio::spawn(async move { bh.call_async(async { 9 }).await })
    };
    let start = std::time::Instant::now();
    while bulkhead.metrics().waiting_calls() == 0 {
        assert!(start.elapsed() < HANG_GUARD, "hang guard: never queued");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    drop(held);
    let value = tokio::time::timeout(HANG_GUARD, task).await.expect("hang guard").unwrap();
    assert_eq!(value.expect("granted"), 9);
    assert_quiescent(&bulkhead, 1);
}

/// Work that stays pending forever and records whether it was polled and dropped.
struct Tracked {
    polled: Arc<AtomicBool>,
    dropped: Arc<AtomicBool>,
}

impl Future for Tracked {
    type Output = ();

    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        self.polled.store(true, Ordering::SeqCst);
        Poll::Pending
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.dropped.store(true, Ordering::SeqCst);
    }
}
