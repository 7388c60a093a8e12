//! `call_fallible`, `call_async_fallible` and `call_owned_async_fallible`: work that returns
//! `Result<T, E>` gives `Result<T, E>`, a refusal mapped into `E` by `From<BulkheadFull>`.

mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use bulkhead::{Bulkhead, BulkheadFull, RejectReason};
use common::*;

/// The guide's adapter error: one variant for "temporarily unavailable", whoever refused.
#[derive(Debug, PartialEq)]
enum PortError {
    TemporarilyUnavailable { bulkhead: String, reason: RejectReason },
    Declined(&'static str),
}

impl From<BulkheadFull> for PortError {
    fn from(full: BulkheadFull) -> Self {
        PortError::TemporarilyUnavailable {
            bulkhead: full.bulkhead_name().to_owned(),
            reason: full.reason(),
        }
    }
}

fn unavailable(name: &str, reason: RejectReason) -> PortError {
    PortError::TemporarilyUnavailable { bulkhead: name.to_owned(), reason }
}

#[test]
fn call_fallible_passes_ok_and_err_through_and_releases() {
    let bulkhead = Bulkhead::new("fallible-pass", limit(2));
    let inside = bulkhead.call_fallible(|| Ok::<_, PortError>(bulkhead.metrics())).unwrap();
    assert_metrics(inside, 1, 2, 1, 0);
    assert_eq!(
        bulkhead.call_fallible(|| Err::<u32, _>(PortError::Declined("no"))),
        Err(PortError::Declined("no"))
    );
    assert_quiescent(&bulkhead, 2);
}

#[test]
fn call_fallible_when_full_maps_refusal_and_does_not_run() {
    let bulkhead = Bulkhead::new("fallible-full", limit(1));
    let held = bulkhead.try_acquire().unwrap();
    let ran = AtomicBool::new(false);
    let result = bulkhead.call_fallible(|| {
        ran.store(true, Ordering::SeqCst);
        Ok::<_, PortError>(1)
    });
    assert_eq!(result, Err(unavailable("fallible-full", RejectReason::Full)));
    assert!(!ran.load(Ordering::SeqCst), "refused work must not run");
    drop(held);
    assert_quiescent(&bulkhead, 1);
}

#[test]
fn call_fallible_waits_then_reports_timeout() {
    let bulkhead = Bulkhead::new("fallible-wait", limit_wait(1, Duration::from_millis(20)));
    let _held = bulkhead.try_acquire().unwrap();
    let result = bulkhead.call_fallible(|| Ok::<_, PortError>(()));
    assert_eq!(result, Err(unavailable("fallible-wait", RejectReason::WaitTimedOut)));
}

#[test]
fn call_fallible_question_mark_maps_into_the_adapter_error() {
    fn adapter(bulkhead: &Bulkhead) -> Result<u32, PortError> {
        let a = bulkhead.call_fallible(|| Ok::<_, PortError>(20))?;
        Ok(a + 1)
    }
    let bulkhead = Bulkhead::new("fallible-question", limit(1));
    assert_eq!(adapter(&bulkhead), Ok(21));
    let _held = bulkhead.try_acquire().unwrap();
    assert_eq!(adapter(&bulkhead), Err(unavailable("fallible-question", RejectReason::Full)));
}

#[test]
fn call_fallible_unwind_releases() {
    let bulkhead = Bulkhead::new("fallible-unwind", limit(1));
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        bulkhead.call_fallible(|| -> Result<(), PortError> { panic!("work panicked") })
    }));
    assert!(outcome.is_err());
    assert_quiescent(&bulkhead, 1);
}

#[test]
fn call_fallible_closed_maps_closed() {
    let bulkhead = Bulkhead::new("fallible-closed", limit(1));
    bulkhead.close();
    assert_eq!(
        bulkhead.call_fallible(|| Ok::<_, PortError>(())),
        Err(unavailable("fallible-closed", RejectReason::Closed))
    );
}

#[tokio::test]
async fn call_async_fallible_passes_through_and_maps_refusal() {
    let bulkhead = Bulkhead::new("fallible-async", limit(1));
    assert_eq!(bulkhead.call_async_fallible(async { Ok::<_, PortError>(5) }).await, Ok(5));
    assert_eq!(
        bulkhead.call_async_fallible(async { Err::<(), _>(PortError::Declined("x")) }).await,
        Err(PortError::Declined("x"))
    );
    let held = bulkhead.try_acquire().unwrap();
    let polled = AtomicBool::new(false);
    let result = bulkhead
        .call_async_fallible(async {
            polled.store(true, Ordering::SeqCst);
            Ok::<_, PortError>(())
        })
        .await;
    assert_eq!(result, Err(unavailable("fallible-async", RejectReason::Full)));
    assert!(!polled.load(Ordering::SeqCst), "refused future must not be polled");
    drop(held);
    assert_quiescent(&bulkhead, 1);
}

#[test]
fn call_async_fallible_dropped_while_running_releases() {
    let bulkhead = Bulkhead::new("fallible-async-drop", limit(1));
    let (_, waker) = CountingWaker::new();
    {
        let mut call =
            pin!(bulkhead.call_async_fallible(std::future::pending::<Result<(), PortError>>()));
        assert!(poll_once(&mut call, &waker).is_pending());
        assert_eq!(bulkhead.metrics().in_flight_calls(), 1);
    }
    assert_quiescent(&bulkhead, 1);
}

#[test]
fn call_async_fallible_dropped_while_queued_leaves_the_queue() {
    let bulkhead = Bulkhead::new("fallible-async-queue", limit_wait(1, LONG_WAIT));
    let held = bulkhead.try_acquire().unwrap();
    let (_, waker) = CountingWaker::new();
    {
        let mut call = pin!(bulkhead.call_async_fallible(async { Ok::<_, PortError>(()) }));
        assert!(poll_once(&mut call, &waker).is_pending());
        assert_eq!(bulkhead.metrics().waiting_calls(), 1);
    }
    assert_eq!(bulkhead.metrics().waiting_calls(), 0);
    drop(held);
    assert_quiescent(&bulkhead, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_owned_async_fallible_is_spawnable_and_maps_refusal() {
    let bulkhead = shared("fallible-owned", limit(1));
    let task = tokio::spawn(bulkhead.call_owned_async_fallible(async { Ok::<_, PortError>(9) }));
    assert_eq!(tokio::time::timeout(HANG_GUARD, task).await.unwrap().unwrap(), Ok(9));

    let held = bulkhead.try_acquire_owned().unwrap();
    let task = tokio::spawn(bulkhead.call_owned_async_fallible(async { Ok::<_, PortError>(9) }));
    assert_eq!(
        tokio::time::timeout(HANG_GUARD, task).await.unwrap().unwrap(),
        Err(unavailable("fallible-owned", RejectReason::Full))
    );
    drop(held);
    assert_quiescent(&bulkhead, 1);
}

#[test]
fn call_owned_async_fallible_takes_the_permit_when_polled() {
    let bulkhead = shared("fallible-owned-lazy", limit(1));
    let (_, waker) = CountingWaker::new();
    let call = bulkhead.call_owned_async_fallible(async { Ok::<_, PortError>(3) });
    assert_eq!(bulkhead.metrics().in_flight_calls(), 0, "nothing taken before the first poll");
    let mut call = Box::pin(call);
    assert_eq!(poll_once(&mut call, &waker), Poll::Ready(Ok(3)));
    drop(call);
    assert_quiescent(&bulkhead, 1);
    // The future does not borrow the caller's Arc.
    let call = bulkhead.call_owned_async_fallible(async { Ok::<_, PortError>(4) });
    let weak = Arc::downgrade(&bulkhead);
    drop(bulkhead);
    assert!(weak.upgrade().is_some(), "the future keeps the bulkhead alive");
    drop(call);
    assert!(weak.upgrade().is_none());
}
