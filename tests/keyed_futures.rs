//! The keyed bulkhead's named futures (issue 30): `AcquireKeyed`, `AcquireKeyedWithSleep` and
//! `KeyedDrained` can be stored in a struct without boxing, lose nothing when dropped at
//! either level, survive wakers that re-enter the keyed bulkhead or panic, and leave every
//! level work-conserving.

mod common;

use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use bulkhead::keyed::{AcquireKeyed, AcquireKeyedWithSleep, KeyedBulkhead, KeyedDrained};
use bulkhead::{RejectReason, Request};
use common::{limit_wait, poll_once, CountingWaker, LONG_WAIT};
use pin_project_lite::pin_project;

fn keyed(key_limit: usize, total_limit: usize) -> KeyedBulkhead<u32> {
    KeyedBulkhead::<u32>::builder("api")
        .default_config(limit_wait(key_limit, LONG_WAIT))
        .total(limit_wait(total_limit, LONG_WAIT))
        .build()
        .unwrap()
}

/// Every level of `keyed` at rest: nothing in flight, nobody waiting.
fn assert_at_rest(keyed: &KeyedBulkhead<u32>, keys: &[u32]) {
    for key in keys {
        let metrics = keyed.key_metrics(key).expect("a live key");
        assert_eq!((metrics.in_flight_calls(), metrics.waiting_calls()), (0, 0), "key {key}");
    }
    let total = keyed.total_metrics().unwrap();
    assert_eq!((total.in_flight_calls(), total.waiting_calls()), (0, 0), "the total");
}

pin_project! {
    /// What a runtime author does with a named future: a field of their own struct, pinned
    /// with it, no `Box<dyn Future>`.
    struct Stored<'a> {
        #[pin]
        acquire: AcquireKeyed<'a>,
        drained: Option<KeyedDrained<'a, u32, std::collections::hash_map::RandomState>>,
    }
}

#[test]
fn a_named_keyed_acquire_is_stored_in_a_struct_and_polled_through_both_levels() {
    let keyed = keyed(1, 1);
    let (counter, waker) = CountingWaker::new();
    let mut cx = Context::from_waker(&waker);
    let held = keyed.try_acquire(&1).unwrap(); // key 1 and the total are full
    let mut stored = pin!(Stored { acquire: keyed.acquire_async(&1), drained: None });
    assert!(stored.as_mut().project().acquire.poll(&mut cx).is_pending(), "queued on the key");
    assert_eq!(keyed.key_metrics(&1).unwrap().waiting_calls(), 1);
    drop(held);
    assert!(counter.wakes() >= 1, "the key's release woke it");
    let permit = match stored.as_mut().project().acquire.poll(&mut cx) {
        Poll::Ready(Ok(permit)) => permit,
        other => panic!("expected both levels granted, got {other:?}"),
    };
    assert_eq!(permit.key_bulkhead().name(), "api/1");
    assert_eq!(keyed.total_metrics().unwrap().in_flight_calls(), 1);
    // The drain future is stored too, and completes once the last call is back.
    keyed.close();
    stored.as_mut().project().drained.replace(keyed.drained());
    let drained = stored.as_mut().project().drained.as_mut().unwrap();
    assert!(Pin::new(&mut *drained).poll(&mut cx).is_pending(), "a call is in flight");
    drop(permit);
    assert!(Pin::new(drained).poll(&mut cx).is_ready());
    assert_at_rest(&keyed, &[1]);
}

#[test]
fn dropped_at_the_key_or_at_the_total_it_leaves_nothing_behind() {
    let keyed = keyed(1, 1);
    let (_counter, waker) = CountingWaker::new();
    // At the key: key 1 is full.
    let held = keyed.try_acquire(&1).unwrap();
    let mut at_key = Box::pin(keyed.acquire_many_async(&1, Request::permits(1)));
    assert!(poll_once(&mut at_key, &waker).is_pending());
    assert_eq!(keyed.key_metrics(&1).unwrap().waiting_calls(), 1);
    drop(at_key);
    assert_eq!(keyed.key_metrics(&1).unwrap().waiting_calls(), 0, "left the key's queue");
    // At the total: key 2 is free, the total is held by key 1's call.
    let mut at_total = Box::pin(keyed.acquire_async(&2));
    assert!(poll_once(&mut at_total, &waker).is_pending());
    assert_eq!(keyed.key_metrics(&2).unwrap().in_flight_calls(), 1, "holds key 2's slot");
    assert_eq!(keyed.total_metrics().unwrap().waiting_calls(), 1);
    drop(at_total);
    assert_eq!(keyed.key_metrics(&2).unwrap().in_flight_calls(), 0, "key slot released");
    assert_eq!(keyed.total_metrics().unwrap().waiting_calls(), 0, "left the total's queue");
    drop(held);
    assert_at_rest(&keyed, &[1, 2]);
    // Granted at the key, then dropped before the total answers: the next caller gets both.
    let held = keyed.try_acquire(&1).unwrap();
    let mut granted_then_dropped = Box::pin(keyed.acquire_async(&2));
    assert!(poll_once(&mut granted_then_dropped, &waker).is_pending());
    drop(held); // the total's slot goes to the waiter at the total
    drop(granted_then_dropped); // ... which passes it on
    let permit = keyed.try_acquire(&3).expect("the total's slot was passed on, not lost");
    drop(permit);
    assert_at_rest(&keyed, &[1, 2, 3]);
}

#[test]
fn a_refused_look_up_or_request_is_the_first_polls_answer() {
    let keyed = KeyedBulkhead::<u32>::builder("api")
        .max_keys(1)
        .total(limit_wait(2, LONG_WAIT))
        .build()
        .unwrap();
    let (_counter, waker) = CountingWaker::new();
    let _busy = keyed.try_acquire(&1).unwrap();
    match poll_once(&mut Box::pin(keyed.acquire_async(&2)), &waker) {
        Poll::Ready(Err(err)) => assert_eq!(err.reason(), RejectReason::TooManyKeys),
        other => panic!("expected TooManyKeys, got {other:?}"),
    }
    match poll_once(&mut Box::pin(keyed.acquire_many_async(&1, 3)), &waker) {
        Poll::Ready(Err(err)) => {
            assert_eq!(err.reason(), RejectReason::ExceedsLimit);
            assert_eq!(err.bulkhead_name(), "api", "the total refuses, before any key");
        }
        other => panic!("expected ExceedsLimit, got {other:?}"),
    };
}

#[test]
fn the_sleep_hook_takes_any_future_and_bounds_each_level() {
    let keyed = keyed(1, 1);
    let (_counter, waker) = CountingWaker::new();
    let held = keyed.try_acquire(&1).unwrap();
    let made = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&made);
    // A sleep whose output is not `()` (as smol's `Timer::after` yields an `Instant`).
    let sleep = move |_wait: Duration| {
        counted.fetch_add(1, Ordering::SeqCst);
        std::future::ready(Instant::now())
    };
    let mut at_key: Pin<Box<AcquireKeyedWithSleep<'_, _, _>>> =
        Box::pin(keyed.acquire_async_with_sleep(&1, sleep.clone()));
    match poll_once(&mut at_key, &waker) {
        Poll::Ready(Err(err)) => {
            assert_eq!(err.reason(), RejectReason::WaitTimedOut);
            assert_eq!(err.bulkhead_name(), "api/1");
        }
        other => panic!("expected the key's wait to time out, got {other:?}"),
    }
    let mut at_total = Box::pin(keyed.acquire_async_with_sleep(&2, sleep));
    match poll_once(&mut at_total, &waker) {
        Poll::Ready(Err(err)) => {
            assert_eq!(err.reason(), RejectReason::WaitTimedOut);
            assert_eq!(err.bulkhead_name(), "api", "the total's wait");
        }
        other => panic!("expected the total's wait to time out, got {other:?}"),
    }
    assert_eq!(made.load(Ordering::SeqCst), 2, "one sleep per level that had to wait");
    drop(held);
    assert_at_rest(&keyed, &[1, 2]);
}

/// A waker that panics when woken (foreign code): the release that wakes it goes on.
struct Panicking;

impl Wake for Panicking {
    fn wake(self: Arc<Self>) {
        panic!("a waker that panics");
    }
}

/// A waker that re-enters the keyed bulkhead when woken: takes and drops a slot of key 9.
struct Reentrant(Arc<OnceLock<Arc<KeyedBulkhead<u32>>>>, AtomicUsize);

impl Wake for Reentrant {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.1.fetch_add(1, Ordering::SeqCst);
        if let Some(keyed) = self.0.get() {
            drop(keyed.try_acquire(&9));
            let _ = keyed.key_metrics(&1);
        }
    }
}

#[test]
fn wakers_that_panic_or_reenter_take_nobody_down_at_either_level() {
    let keyed = Arc::new(keyed(1, 1));
    let cell = Arc::new(OnceLock::new());
    let _ = cell.set(Arc::clone(&keyed));
    let reentrant = Arc::new(Reentrant(Arc::clone(&cell), AtomicUsize::new(0)));
    let panicking = Waker::from(Arc::new(Panicking));
    let reentering = Waker::from(Arc::clone(&reentrant));
    let quiet = CountingWaker::new().1;

    // Key level: a panicking waiter first, a re-entrant one behind it (key 1 held).
    let held = keyed.try_acquire(&1).unwrap();
    let mut first = Box::pin(keyed.acquire_async(&1));
    let mut second = Box::pin(keyed.acquire_async(&1));
    assert!(poll_once(&mut first, &panicking).is_pending());
    assert!(poll_once(&mut second, &reentering).is_pending());
    drop(held); // wakes `first` (panics, contained)
    let first_permit = match poll_once(&mut first, &quiet) {
        Poll::Ready(Ok(permit)) => permit,
        other => panic!("the panicking waiter is still granted, got {other:?}"),
    };
    drop(first_permit); // wakes `second`, which re-enters
    assert!(reentrant.1.load(Ordering::SeqCst) >= 1, "the re-entrant waker ran");
    let second_permit = match poll_once(&mut second, &quiet) {
        Poll::Ready(Ok(permit)) => permit,
        other => panic!("the re-entrant waiter is granted, got {other:?}"),
    };

    // Total level: key 2's caller waits for the total with a panicking waker.
    let mut at_total = Box::pin(keyed.acquire_async(&2));
    assert!(poll_once(&mut at_total, &panicking).is_pending());
    drop(second_permit); // frees the total: wakes `at_total` (panics, contained)
    match poll_once(&mut at_total, &quiet) {
        Poll::Ready(Ok(permit)) => drop(permit),
        other => panic!("the waiter at the total is granted, got {other:?}"),
    }
    assert_at_rest(&keyed, &[1, 2]);
    // Nothing lost: both levels take a call again.
    drop(keyed.try_acquire(&1).expect("all slots back"));
}

#[test]
fn keyed_drained_dropped_mid_wait_then_a_new_one_completes() {
    let keyed = keyed(2, 4);
    let (_counter, waker) = CountingWaker::new();
    let a = keyed.try_acquire(&1).unwrap();
    let b = keyed.try_acquire(&2).unwrap();
    keyed.close();
    {
        let mut drained = Box::pin(keyed.drained());
        assert!(poll_once(&mut drained, &waker).is_pending(), "two calls in flight");
        drop(a);
        assert!(poll_once(&mut drained, &waker).is_pending(), "one call in flight");
    } // dropped while waiting on key 2
    drop(b);
    let mut again: Pin<Box<KeyedDrained<'_, u32, _>>> = Box::pin(keyed.drained());
    assert!(poll_once(&mut again, &waker).is_ready(), "everything drained");
    assert!(poll_once(&mut again, &waker).is_ready(), "and stays ready");
}
