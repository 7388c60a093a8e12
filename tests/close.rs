//! `close`, `wait_drained` and `drained`: graceful shutdown. Also the refusal to block a
//! thread that drives async tasks, and the order of `CallFinished` against the freed permit.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::thread;
use std::time::Duration;

use bulkhead::{Bulkhead, BulkheadEventKind, RejectReason};
use common::*;

#[test]
fn close_refuses_every_new_call_with_closed() {
    let bulkhead = shared("close-new", limit_wait(4, LONG_WAIT));
    assert!(bulkhead.close());
    let reason = |r: Result<_, bulkhead::BulkheadFull>| r.map(drop).unwrap_err().reason();
    assert_eq!(reason(bulkhead.try_acquire().map(drop)), RejectReason::Closed);
    assert_eq!(reason(bulkhead.acquire().map(drop)), RejectReason::Closed);
    assert_eq!(reason(bulkhead.acquire_timeout(LONG_WAIT).map(drop)), RejectReason::Closed);
    assert_eq!(reason(bulkhead.try_acquire_owned().map(drop)), RejectReason::Closed);
    assert_eq!(reason(bulkhead.call(|| ())), RejectReason::Closed);
    let async_reason = futures::executor::block_on(bulkhead.acquire_async()).map(drop);
    assert_eq!(reason(async_reason), RejectReason::Closed);
    let owned = futures::executor::block_on(bulkhead.acquire_owned_async()).map(drop);
    assert_eq!(reason(owned), RejectReason::Closed);
    let ran = AtomicUsize::new(0);
    let called =
        futures::executor::block_on(bulkhead.call_async(async { ran.fetch_add(1, SeqCst) }));
    assert_eq!(reason(called.map(drop)), RejectReason::Closed);
    assert_eq!(ran.load(SeqCst), 0, "a refused call never runs");
    let err = bulkhead.try_acquire().unwrap_err();
    assert!(err.to_string().contains("closed"), "{err}");
    assert!(err.waited().is_zero());
    let m = bulkhead.metrics();
    assert!(m.is_closed());
    assert_eq!((m.available_concurrent_calls(), m.in_flight_calls(), m.waiting_calls()), (4, 0, 0));
}

#[test]
fn close_wakes_and_refuses_every_queued_waiter_sync_and_async() {
    let bulkhead = shared("close-queued", limit_wait(1, LONG_WAIT));
    let held = bulkhead.try_acquire_owned().unwrap();
    let threads: Vec<_> = (0..3)
        .map(|_| {
            let b = Arc::clone(&bulkhead);
            thread::spawn(move || b.acquire().map(drop).unwrap_err())
        })
        .collect();
    wait_for_waiters(&bulkhead, 3);
    let mut futures: Vec<_> = (0..3).map(|_| Box::pin(bulkhead.acquire_async())).collect();
    let wakers: Vec<_> = (0..3).map(|_| CountingWaker::new()).collect();
    for (fut, (_, waker)) in futures.iter_mut().zip(&wakers) {
        assert!(poll_once(fut, waker).is_pending());
    }
    assert_eq!(bulkhead.metrics().waiting_calls(), 6);

    assert!(bulkhead.close());
    assert_eq!(bulkhead.metrics().waiting_calls(), 0);
    for t in threads {
        let err = join_guarded(t);
        assert_eq!(err.reason(), RejectReason::Closed);
    }
    for (fut, (counter, waker)) in futures.iter_mut().zip(&wakers) {
        assert_eq!(counter.wakes(), 1, "close wakes each queued task once");
        match poll_once(fut, waker) {
            Poll::Ready(Err(err)) => assert_eq!(err.reason(), RejectReason::Closed),
            other => panic!("expected a Closed refusal, got {other:?}"),
        }
    }
    // The call in flight is untouched and finishes normally.
    assert_eq!(bulkhead.metrics().in_flight_calls(), 1);
    drop(held);
    assert_eq!(bulkhead.metrics().in_flight_calls(), 0);
    assert!(bulkhead.wait_drained(Duration::ZERO));
}

#[test]
fn a_waiter_granted_before_close_keeps_its_permit() {
    let bulkhead = Bulkhead::new("close-granted", limit_wait(1, LONG_WAIT));
    let held = bulkhead.try_acquire().unwrap();
    let (_, waker) = CountingWaker::new();
    let mut fut = Box::pin(bulkhead.acquire_async());
    assert!(poll_once(&mut fut, &waker).is_pending());
    drop(held); // granted to the queued future, which has not polled yet
    bulkhead.close();
    let permit = match poll_once(&mut fut, &waker) {
        Poll::Ready(result) => result.expect("granted before the close"),
        Poll::Pending => panic!("granted but pending"),
    };
    assert_eq!(bulkhead.metrics().in_flight_calls(), 1);
    assert!(!bulkhead.wait_drained(Duration::from_millis(1)));
    drop(permit);
    assert!(bulkhead.wait_drained(Duration::ZERO));
}

#[test]
fn a_granted_future_dropped_after_close_completes_the_drain() {
    let bulkhead = shared("close-granted-dropped", limit_wait(1, LONG_WAIT));
    let held = bulkhead.try_acquire().unwrap();
    let (_, waker) = CountingWaker::new();
    let mut fut = Box::pin(bulkhead.acquire_async());
    assert!(poll_once(&mut fut, &waker).is_pending());
    drop(held);
    bulkhead.close();
    let drainer = {
        let b = Arc::clone(&bulkhead);
        thread::spawn(move || b.wait_drained(HANG_GUARD))
    };
    thread::sleep(Duration::from_millis(5));
    drop(fut); // owned a permit it never used: releasing it leaves nothing in flight
    assert!(join_guarded(drainer));
    assert_quiescent(&bulkhead, 1);
}

#[test]
fn close_twice_is_harmless_and_emits_one_event() {
    let bulkhead = Bulkhead::new("close-twice", limit(2));
    let closed = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&closed);
    bulkhead.on_event(move |event| {
        if event.kind() == BulkheadEventKind::Closed {
            seen.fetch_add(1, SeqCst);
        }
    });
    assert!(bulkhead.close());
    assert!(!bulkhead.close());
    assert!(bulkhead.is_closed());
    assert_eq!(closed.load(SeqCst), 1);
    assert!(bulkhead.wait_drained(Duration::ZERO));
}

#[test]
fn a_closed_bulkhead_never_reopens() {
    let bulkhead = Bulkhead::new("close-final", limit_wait(1, LONG_WAIT));
    let held = bulkhead.try_acquire().unwrap();
    bulkhead.close();
    drop(held);
    bulkhead.change_config(limit_wait(8, LONG_WAIT));
    assert_eq!(bulkhead.metrics().max_allowed_concurrent_calls(), 8);
    assert_eq!(bulkhead.metrics().available_concurrent_calls(), 8);
    assert_eq!(bulkhead.try_acquire().unwrap_err().reason(), RejectReason::Closed);
    bulkhead.change_config(limit(0));
    assert_eq!(bulkhead.try_acquire().unwrap_err().reason(), RejectReason::Closed);
    assert!(bulkhead.is_closed());
    assert!(bulkhead.wait_drained(Duration::ZERO));
}

#[test]
fn wait_drained_times_out_while_a_call_is_in_flight() {
    let bulkhead = Bulkhead::new("close-timeout", limit(1));
    let _held = bulkhead.try_acquire().unwrap();
    bulkhead.close();
    assert!(!bulkhead.wait_drained(Duration::from_millis(20)));
    assert!(!bulkhead.wait_drained(Duration::ZERO));
}

#[test]
fn wait_drained_before_close_waits_for_the_close_and_the_last_call() {
    let bulkhead = shared("close-before", limit(2));
    let held = bulkhead.try_acquire_owned().unwrap();
    let drainer = {
        let b = Arc::clone(&bulkhead);
        thread::spawn(move || b.wait_drained(HANG_GUARD))
    };
    thread::sleep(Duration::from_millis(5));
    drop(held); // nothing in flight, but not closed yet
    thread::sleep(Duration::from_millis(5));
    assert!(!drainer.is_finished(), "an open bulkhead is not drained");
    bulkhead.close();
    assert!(join_guarded(drainer));
}

#[test]
fn drained_completes_after_the_last_release_and_is_cancel_safe() {
    let bulkhead = Bulkhead::new("close-drained-async", limit(2));
    let a = bulkhead.try_acquire().unwrap();
    let b = bulkhead.try_acquire().unwrap();
    bulkhead.close();
    let (counter, waker) = CountingWaker::new();
    let mut drained = bulkhead.drained();
    assert!(poll_once(&mut drained, &waker).is_pending());
    // A second drain wait, dropped while pending: it leaves nothing behind.
    let mut cancelled = bulkhead.drained();
    assert!(poll_once(&mut cancelled, &waker).is_pending());
    drop(cancelled);
    drop(a);
    assert_eq!(counter.wakes(), 0, "one call is still in flight");
    assert!(poll_once(&mut drained, &waker).is_pending());
    drop(b);
    assert_eq!(counter.wakes(), 1);
    assert_eq!(poll_once(&mut drained, &waker), Poll::Ready(()));
    // Already drained: ready on the first poll.
    assert_eq!(poll_once(&mut bulkhead.drained(), &waker), Poll::Ready(()));
}

#[test]
fn close_racing_waiters_and_releases_loses_no_permit() {
    for round in 0..20 {
        let bulkhead = shared("close-race", limit_wait(2, Duration::from_millis(50)));
        let outcomes = Arc::new(Mutex::new(Vec::new()));
        let threads: Vec<_> = (0..6)
            .map(|_| {
                let (b, out) = (Arc::clone(&bulkhead), Arc::clone(&outcomes));
                thread::spawn(move || {
                    // Call until the close refuses us (the bound only guards against a hang).
                    for _ in 0..1_000_000 {
                        let r = b.call(thread::yield_now).map_err(|e| e.reason());
                        out.lock().unwrap().push(r);
                        if r == Err(RejectReason::Closed) {
                            return;
                        }
                    }
                    panic!("never refused with Closed");
                })
            })
            .collect();
        thread::sleep(Duration::from_micros(200 * round));
        bulkhead.close();
        assert!(bulkhead.wait_drained(HANG_GUARD), "round {round}: never drained");
        for t in threads {
            join_guarded(t);
        }
        let outcomes = outcomes.lock().unwrap();
        assert!(outcomes
            .iter()
            .all(|r| matches!(r, Ok(()) | Err(RejectReason::Closed | RejectReason::WaitTimedOut))));
        assert!(outcomes.contains(&Err(RejectReason::Closed)));
        let m = bulkhead.metrics();
        assert_eq!(
            (m.in_flight_calls(), m.waiting_calls(), m.available_concurrent_calls()),
            (0, 0, 2)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_refuses_async_waiters_in_tokio() {
    let bulkhead = shared("close-tokio", limit_wait(1, LONG_WAIT));
    let held = bulkhead.try_acquire_owned().unwrap();
    let waiters: Vec<_> = (0..4).map(|_| tokio::spawn(bulkhead.acquire_owned_async())).collect();
    while bulkhead.metrics().waiting_calls() < 4 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    bulkhead.close();
    for w in waiters {
        let err = w.await.unwrap().map(drop).unwrap_err();
        assert_eq!(err.reason(), RejectReason::Closed);
    }
    let drained = tokio::spawn({
        let b = Arc::clone(&bulkhead);
        async move { b.drained().await }
    });
    drop(held);
    tokio::time::timeout(HANG_GUARD, drained).await.expect("drained in time").unwrap();
}

// --- Blocking inside an async runtime -------------------------------------------------

fn full(name: &str) -> (Arc<Bulkhead>, bulkhead::OwnedPermit) {
    let b = shared(name, limit_wait(1, Duration::from_millis(20)));
    let held = b.try_acquire_owned().unwrap();
    (b, held)
}

#[cfg(feature = "tokio")]
fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_default()
}

/// Needs the `tokio` feature: the check against blocking a runtime thread uses
/// `tokio::task::coop`; without it a blocking acquire on a worker waits like anywhere else.
#[cfg(feature = "tokio")]
#[test]
fn blocking_acquire_on_a_tokio_worker_panics_naming_acquire_async() {
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let (bulkhead, _held) = full("block-worker");
    for which in ["acquire", "call", "acquire_timeout"] {
        let b = Arc::clone(&bulkhead);
        let task = runtime.spawn(async move {
            match which {
                "acquire" => drop(b.acquire()),
                "call" => drop(b.call(|| ())),
                _ => drop(b.acquire_timeout(Duration::from_millis(20))),
            }
        });
        let err = runtime.block_on(task).expect_err("blocking on a worker must panic");
        let message = panic_message(err.into_panic());
        assert!(message.contains("acquire_async"), "{which}: {message}");
        assert!(message.contains("block-worker"), "{which}: {message}");
    }
    assert_eq!(bulkhead.metrics().waiting_calls(), 0, "refused before queueing");
}

/// Needs the `tokio` feature, as above.
#[cfg(feature = "tokio")]
#[test]
fn blocking_acquire_inside_block_on_panics() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (bulkhead, _held) = full("block-on");
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        runtime.block_on(async { drop(bulkhead.acquire()) })
    }));
    assert!(panic_message(result.unwrap_err()).contains("acquire_async"));
}

#[test]
fn blocking_calls_that_need_not_wait_are_allowed_in_async_code() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let bulkhead = shared("block-fast", limit_wait(1, LONG_WAIT));
    runtime.block_on(async {
        assert!(bulkhead.call(|| ()).is_ok(), "a free permit never blocks");
        let _held = bulkhead.try_acquire().unwrap();
        let zero = bulkhead.acquire_timeout(Duration::ZERO).map(drop).unwrap_err();
        assert_eq!(zero.reason(), RejectReason::Full, "a zero wait never blocks");
    });
}

#[test]
fn blocking_acquire_in_spawn_blocking_waits_normally() {
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let (bulkhead, _held) = full("block-spawn-blocking");
    let b = Arc::clone(&bulkhead);
    let err = runtime
        .block_on(runtime.spawn_blocking(move || b.acquire().map(drop).unwrap_err()))
        .expect("spawn_blocking may block");
    assert_eq!(err.reason(), RejectReason::WaitTimedOut);
    // A thread that merely entered the runtime is not driving tasks either.
    let _guard = runtime.enter();
    let err = bulkhead.acquire().map(drop).unwrap_err();
    assert_eq!(err.reason(), RejectReason::WaitTimedOut);
}

// --- Events against state -------------------------------------------------------------

#[test]
fn a_call_finished_listener_can_take_the_freed_permit_at_once() {
    let bulkhead = Arc::new(Bulkhead::new("order-finished", limit(1)));
    let taken = Arc::new(Mutex::new(Vec::new()));
    let (b, t) = (Arc::downgrade(&bulkhead), Arc::clone(&taken));
    bulkhead.on_event(move |event| {
        // The lock is not held across `try_acquire_owned`: it emits `CallPermitted`, which
        // calls this listener again on this thread.
        if event.kind() == BulkheadEventKind::CallFinished && t.lock().unwrap().is_empty() {
            let b = b.upgrade().unwrap();
            let permit = b.try_acquire_owned().map_err(|e| e.reason());
            t.lock().unwrap().push(permit);
        }
    });
    drop(bulkhead.try_acquire().unwrap());
    let taken = std::mem::take(&mut *taken.lock().unwrap());
    assert_eq!(taken.len(), 1);
    assert!(taken[0].is_ok(), "the permit was back when CallFinished ran: {:?}", taken[0]);
    assert_eq!(bulkhead.metrics().in_flight_calls(), 1, "the listener holds it");
}

#[test]
fn with_a_waiter_queued_call_finished_follows_the_hand_off() {
    let bulkhead = Arc::new(Bulkhead::new("order-handoff", limit_wait(1, LONG_WAIT)));
    let seen = Arc::new(Mutex::new(None));
    let (b, s) = (Arc::downgrade(&bulkhead), Arc::clone(&seen));
    bulkhead.on_event(move |event| {
        if event.kind() == BulkheadEventKind::CallFinished {
            let b = b.upgrade().unwrap();
            let mut seen = s.lock().unwrap();
            if seen.is_none() {
                *seen = Some((
                    b.metrics().in_flight_calls(),
                    b.try_acquire().map(drop).map_err(|e| e.reason()),
                ));
            }
        }
    });
    // Taken after the listener is registered: a call is observed whole (its CallFinished is
    // emitted only if its CallPermitted was).
    let held = bulkhead.try_acquire().unwrap();
    let (_, waker) = CountingWaker::new();
    let mut queued = Box::pin(bulkhead.acquire_async());
    assert!(poll_once(&mut queued, &waker).is_pending());
    drop(held);
    // The permit went to the oldest waiter before CallFinished ran: still 1 in flight.
    assert_eq!(*seen.lock().unwrap(), Some((1, Err(RejectReason::Full))));
    assert!(matches!(poll_once(&mut queued, &waker), Poll::Ready(Ok(_))));
}

// --- A queued future outside any runtime ---------------------------------------------

#[test]
fn a_queued_future_outside_any_runtime_is_woken_at_its_deadline() {
    // No runtime: the bulkhead's own timer withdraws the waiter at its deadline and wakes it.
    let bulkhead = Bulkhead::new("no-runtime", limit_wait(1, Duration::from_millis(5)));
    let _held = bulkhead.try_acquire().unwrap();
    let (counter, waker) = CountingWaker::new();
    let mut fut = Box::pin(bulkhead.acquire_async());
    assert!(poll_once(&mut fut, &waker).is_pending());
    // Hang guard only: the timer wakes it about 5 ms from now.
    let guard = std::time::Instant::now();
    while counter.wakes() == 0 {
        assert!(guard.elapsed() < Duration::from_secs(30), "the deadline never woke the task");
        thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(bulkhead.metrics().waiting_calls(), 0, "withdrawn by the timer before the wake");
    match poll_once(&mut fut, &waker) {
        Poll::Ready(Err(err)) => {
            assert_eq!(err.reason(), RejectReason::WaitTimedOut);
            assert!(err.waited() >= Duration::from_millis(5));
        }
        other => panic!("expected WaitTimedOut, got {other:?}"),
    }
    assert_eq!(bulkhead.metrics().waiting_calls(), 0);
}

/// `Drained`'s `Debug` says whether it waits and whether it is done (as the acquire
/// futures' does). cargo-mutants (future 9/17): an empty `Debug` went unseen.
#[test]
fn a_drained_future_shows_its_state_in_debug() {
    let bulkhead = Bulkhead::new("debug", limit_wait(1, Duration::ZERO));
    let held = bulkhead.try_acquire().unwrap();
    bulkhead.close();
    let mut drained = Box::pin(bulkhead.drained());
    let fresh = format!("{drained:?}");
    assert_eq!(fresh, "Drained { waiting: false, done: false }");
    let (_, waker) = CountingWaker::new();
    assert!(poll_once(&mut drained, &waker).is_pending(), "a call is in flight");
    assert_eq!(format!("{drained:?}"), "Drained { waiting: true, done: false }");
    drop(held);
    assert!(poll_once(&mut drained, &waker).is_ready(), "drained");
    assert_eq!(format!("{drained:?}"), "Drained { waiting: false, done: true }");
}

/// The zero-wait refusal through the waiting API (`acquire`, `call`, `acquire_async`,
/// `call_async`) on a full bulkhead: `Full` with the limit while open, `Closed` once closed,
/// whether or not anyone observes, and each refusal seen by a listener when one is there.
/// (Stop 39 decides the unobserved case first, on a path of its own; the observed one
/// keeps the old path: both must give the same error.)
#[test]
fn a_full_zero_wait_bulkhead_refuses_through_the_waiting_api_full_then_closed() {
    for observed in [false, true] {
        let bulkhead = shared("zero-wait-full", limit(2));
        let rejected = Arc::new(Mutex::new(Vec::new()));
        if observed {
            let seen = Arc::clone(&rejected);
            bulkhead.on_event(move |event| {
                if let BulkheadEventKind::CallRejected(reason) = event.kind() {
                    seen.lock().unwrap().push(reason);
                }
            });
        }
        let held = (bulkhead.try_acquire().unwrap(), bulkhead.try_acquire().unwrap());
        let (_, waker) = CountingWaker::new();
        for expected in [RejectReason::Full, RejectReason::Closed] {
            if expected == RejectReason::Closed {
                assert!(bulkhead.close());
            }
            let sync = bulkhead.acquire().map(drop).unwrap_err();
            let called = bulkhead.call(|| ()).unwrap_err();
            let mut fut = Box::pin(bulkhead.acquire_async());
            let Poll::Ready(Err(polled)) = poll_once(&mut fut, &waker) else {
                panic!("a full zero-wait bulkhead refuses on the first poll (observed: {observed})")
            };
            let mut call = Box::pin(bulkhead.call_async(async {}));
            let Poll::Ready(Err(call_polled)) = poll_once(&mut call, &waker) else {
                panic!("call_async refuses on the first poll (observed: {observed})")
            };
            for err in [&sync, &called, &polled, &call_polled] {
                assert_eq!(err.reason(), expected, "observed: {observed}");
                assert_eq!(err.max_concurrent_calls(), 2, "observed: {observed}");
                assert!(err.waited().is_zero(), "observed: {observed}");
                assert_eq!(err.retry_after(), None, "no call finished yet, so no estimate");
            }
        }
        let seen = rejected.lock().unwrap().clone();
        if observed {
            let full = [RejectReason::Full; 4];
            let closed = [RejectReason::Closed; 4];
            assert_eq!(seen, [full, closed].concat(), "one CallRejected per refusal");
        } else {
            assert!(seen.is_empty());
        }
        drop(held);
        let m = bulkhead.metrics();
        assert_eq!((m.available_concurrent_calls(), m.in_flight_calls()), (2, 0));
    }
}
