//! Per-call requests (issue 31, item 2): `Request::max_wait`, `call_with`, `call_async_with`,
//! `acquire_many_timeout`, the blocking `acquire_many_owned` and `call_owned_async`, on a
//! plain, keyed and adaptive bulkhead. Upstream ports say which case they follow: tokio's
//! `tests/sync_semaphore.rs` / `sync_semaphore_owned.rs` (`acquire_many`), dotnet's
//! `ConcurrencyLimiterTests` (per-request permit counts) and async-lock's
//! `tests/semaphore.rs`.

#[path = "../verification/hostile_waker.rs"]
mod hostile_waker;

mod common;

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::task::{Context, Poll, Wake, Waker};
use std::thread;
use std::time::{Duration, Instant};

use bulkhead::adaptive::{AdaptiveLimit, Aimd};
use bulkhead::keyed::KeyedBulkhead;
use bulkhead::{Bulkhead, BulkheadConfig, Criticality, RejectReason, Request};
use common::{limit_wait, poll_once, wait_for_waiters, wait_until, CountingWaker, HANG_GUARD};
use futures::FutureExt;
use hostile_waker::{hostile_waker, reentrant_hook};

const LONG: Duration = Duration::from_secs(30);
const SHORT: Duration = Duration::from_millis(20);

fn conserving(bulkhead: &Bulkhead) {
    if let Err(violation) = bulkhead.check_work_conservation() {
        panic!("work conservation: {violation}");
    }
}

fn quiescent(bulkhead: &Bulkhead, limit: usize) {
    conserving(bulkhead);
    let metrics = bulkhead.metrics();
    assert_eq!(metrics.available_concurrent_calls(), limit, "a permit was lost");
    assert_eq!(metrics.waiting_calls(), 0);
}

fn adaptive(limit: usize, wait: Duration) -> Bulkhead {
    let bulkhead = Bulkhead::new("adaptive", limit_wait(limit, wait));
    bulkhead
        .set_adaptive_limit(
            AdaptiveLimit::new(Aimd::default()).initial_limit(limit).max_limit(limit),
        )
        .expect("valid limit");
    bulkhead
}

// ---- Per-call max wait: shorter, longer, zero; sync and async, on two executors. ----

#[test]
fn per_call_wait_shorter_than_the_bulkheads_ends_at_its_own_deadline_sync() {
    for bulkhead in [Bulkhead::new("db", limit_wait(1, LONG)), adaptive(1, LONG)] {
        let held = bulkhead.try_acquire().unwrap();
        let start = Instant::now();
        let request = Request::default().max_wait(SHORT);
        let err = bulkhead.acquire_many(request).unwrap_err();
        assert_eq!(err.reason(), RejectReason::WaitTimedOut);
        assert!(err.waited() >= SHORT, "waited {:?}", err.waited());
        assert!(start.elapsed() < HANG_GUARD, "waited the bulkhead's 30 s, not the call's");
        let err = bulkhead.call_with(request, || unreachable!("refused")).unwrap_err();
        assert_eq!(err.reason(), RejectReason::WaitTimedOut);
        let err = Arc::new(Bulkhead::new("o", limit_wait(1, LONG)));
        let held_o = err.try_acquire().unwrap();
        assert_eq!(
            err.acquire_many_owned(request).unwrap_err().reason(),
            RejectReason::WaitTimedOut
        );
        drop((held, held_o));
        quiescent(&bulkhead, 1);
    }
}

#[test]
fn per_call_wait_shorter_than_the_bulkheads_ends_at_its_own_deadline_on_futures_block_on() {
    // No tokio here: the bulkhead's own timer wakes the waiter.
    for bulkhead in [Bulkhead::new("db", limit_wait(1, LONG)), adaptive(1, LONG)] {
        let held = bulkhead.try_acquire().unwrap();
        let request = Request::default().max_wait(SHORT);
        let start = Instant::now();
        let err = futures::executor::block_on(bulkhead.acquire_many_async(request)).unwrap_err();
        assert_eq!(err.reason(), RejectReason::WaitTimedOut);
        assert!(err.waited() >= SHORT);
        let err = futures::executor::block_on(
            bulkhead.call_async_with(request, async { unreachable!() }),
        )
        .unwrap_err();
        assert_eq!(err.reason(), RejectReason::WaitTimedOut);
        assert!(start.elapsed() < HANG_GUARD);
        drop(held);
        quiescent(&bulkhead, 1);
    }
}

#[tokio::test(flavor = "current_thread")]
async fn per_call_wait_shorter_than_the_bulkheads_ends_at_its_own_deadline_on_tokio() {
    let bulkhead = Arc::new(Bulkhead::new("db", limit_wait(2, LONG)));
    let held = bulkhead.try_acquire().unwrap();
    let request = Request::permits(2).max_wait(SHORT);
    let err = bulkhead.acquire_many_owned_async(request).await.unwrap_err();
    assert_eq!(err.reason(), RejectReason::WaitTimedOut);
    let err = bulkhead.call_async_with(request, async {}).await.unwrap_err();
    assert_eq!(err.reason(), RejectReason::WaitTimedOut);
    drop(held);
    quiescent(&bulkhead, 2);
}

#[test]
fn per_call_wait_longer_than_the_bulkheads_is_capped_by_it() {
    let bulkhead = Bulkhead::new("db", limit_wait(1, SHORT));
    let held = bulkhead.try_acquire().unwrap();
    let request = Request::default().max_wait(LONG);
    let start = Instant::now();
    let err = bulkhead.acquire_many(request).unwrap_err();
    assert_eq!(err.reason(), RejectReason::WaitTimedOut);
    let err = futures::executor::block_on(bulkhead.call_async_with(request, async {})).unwrap_err();
    assert_eq!(err.reason(), RejectReason::WaitTimedOut);
    // Both ended at the bulkhead's 20 ms, far from the request's 30 s.
    assert!(start.elapsed() < HANG_GUARD, "the operator's bound was not kept");
    // `acquire_many_timeout` takes the smaller of its wait and the request's.
    let err = bulkhead.acquire_many_timeout(Request::default().max_wait(SHORT), LONG).unwrap_err();
    assert_eq!(err.reason(), RejectReason::WaitTimedOut);
    assert!(start.elapsed() < HANG_GUARD);
    drop(held);
    quiescent(&bulkhead, 1);
}

#[test]
fn per_call_zero_wait_never_queues() {
    let bulkhead = Bulkhead::new("db", limit_wait(2, LONG));
    let held = bulkhead.try_acquire_many(2).unwrap();
    let zero = Request::permits(1).max_wait(Duration::ZERO);
    let start = Instant::now();
    assert_eq!(bulkhead.acquire_many(zero).unwrap_err().reason(), RejectReason::Full);
    assert_eq!(bulkhead.call_with(zero, || ()).unwrap_err().reason(), RejectReason::Full);
    assert_eq!(
        bulkhead.acquire_many_timeout(1, Duration::ZERO).unwrap_err().reason(),
        RejectReason::Full
    );
    let (wakes, waker) = CountingWaker::new();
    let mut acquire = pin!(bulkhead.acquire_many_async(zero));
    match acquire.as_mut().poll(&mut Context::from_waker(&waker)) {
        Poll::Ready(Err(err)) => assert_eq!(err.reason(), RejectReason::Full),
        other => panic!("a zero wait queued: {:?}", other.map(|r| r.map(drop))),
    }
    let mut call = pin!(bulkhead.call_async_with(zero, async {}));
    assert!(matches!(
        call.as_mut().poll(&mut Context::from_waker(&waker)),
        Poll::Ready(Err(ref e)) if e.reason() == RejectReason::Full
    ));
    assert_eq!(wakes.wakes(), 0);
    assert_eq!(bulkhead.metrics().waiting_calls(), 0);
    assert!(start.elapsed() < HANG_GUARD);
    // Free: a zero wait is granted at once.
    drop(held);
    assert_eq!(bulkhead.call_with(Request::permits(2).max_wait(Duration::ZERO), || 5), Ok(5));
    quiescent(&bulkhead, 2);
}

#[test]
fn per_call_wait_is_granted_when_a_permit_frees_in_time() {
    let bulkhead = Arc::new(Bulkhead::new("db", limit_wait(1, LONG)));
    let held = bulkhead.try_acquire_owned().unwrap();
    let releaser = thread::spawn({
        let bulkhead = Arc::clone(&bulkhead);
        move || {
            wait_for_waiters(&bulkhead, 1);
            drop(held);
        }
    });
    let request = Request::default().max_wait(Duration::from_secs(10));
    assert_eq!(bulkhead.call_with(request, || 7), Ok(7));
    releaser.join().unwrap();
    quiescent(&bulkhead, 1);
}

// ---- Weighted and critical calls. ----

#[test]
fn call_with_runs_under_the_requested_permits_and_class() {
    let bulkhead = Bulkhead::new("db", limit_wait(4, Duration::ZERO));
    let request = Request::permits(3).criticality(Criticality::Critical);
    let seen = bulkhead.call_with(request, || bulkhead.metrics().in_flight_calls()).unwrap();
    assert_eq!(seen, 3);
    // Above the limit: refused without running, however long it may wait.
    let err =
        bulkhead.call_with(Request::permits(5).max_wait(LONG), || unreachable!()).unwrap_err();
    assert_eq!(err.reason(), RejectReason::ExceedsLimit);
    quiescent(&bulkhead, 4);
}

#[test]
fn a_critical_call_with_is_served_before_a_default_waiter() {
    let bulkhead = Arc::new(Bulkhead::new("db", limit_wait(1, LONG)));
    let held = bulkhead.try_acquire().unwrap();
    let (count, waker) = CountingWaker::new();
    let mut plain = Box::pin(bulkhead.call_async_with(1, async { "plain" }));
    assert!(poll_once(&mut plain, &waker).is_pending());
    let mut critical =
        Box::pin(bulkhead.call_async_with(Criticality::Critical, async { "critical" }));
    assert!(poll_once(&mut critical, &waker).is_pending());
    drop(held);
    assert!(count.wakes() >= 1);
    assert_eq!(poll_once(&mut critical, &waker), Poll::Ready(Ok("critical")));
    drop(critical);
    assert_eq!(poll_once(&mut plain, &waker), Poll::Ready(Ok("plain")));
    drop(plain);
    quiescent(&bulkhead, 1);
}

// ---- tokio's `acquire_many` (tests/sync_semaphore.rs, sync_semaphore_owned.rs). ----

/// Port of tokio's `acquire_many`: 42 permits, 32 held; a waiter for 10 gets them, then one
/// for 32 waits until the first 32 come back. Through the blocking owned form.
#[test]
fn tokio_acquire_many_through_acquire_many_owned() {
    let bulkhead = Arc::new(Bulkhead::new("db", limit_wait(42, LONG)));
    let permit_32 = bulkhead.acquire_many_owned(32).unwrap();
    let (sender, receiver) = mpsc::channel();
    let worker = thread::spawn({
        let bulkhead = Arc::clone(&bulkhead);
        move || {
            let permit_10 = bulkhead.acquire_many_owned(10).unwrap();
            sender.send(()).unwrap();
            let permit_32 = bulkhead.acquire_many_owned(32).unwrap();
            (permit_10.num_permits(), permit_32.num_permits())
        }
    });
    receiver.recv_timeout(HANG_GUARD).unwrap();
    wait_for_waiters(&bulkhead, 1);
    drop(permit_32);
    assert_eq!(common::join_guarded(worker), (10, 32));
    quiescent(&bulkhead, 42);
}

/// Port of tokio's `acquire_many`, through `acquire_many_timeout` and `call_with`.
#[test]
fn tokio_acquire_many_through_acquire_many_timeout_and_call_with() {
    let bulkhead = Arc::new(Bulkhead::new("db", limit_wait(42, Duration::ZERO)));
    let permit_32 = bulkhead.acquire_many_timeout(32, LONG).unwrap();
    let (sender, receiver) = mpsc::channel();
    let worker = thread::spawn({
        let bulkhead = Arc::clone(&bulkhead);
        move || {
            let _permit_10 = bulkhead.acquire_many_timeout(10, LONG).unwrap();
            sender.send(()).unwrap();
            bulkhead.call_with(Request::permits(32), || ()).map_err(|e| e.reason())
        }
    });
    receiver.recv_timeout(HANG_GUARD).unwrap();
    // The bulkhead's max wait is zero: `call_with` (bounded by it) refuses at once, as a
    // zero wait must; `acquire_many_timeout` was given its own.
    assert_eq!(common::join_guarded(worker), Err(RejectReason::Full));
    drop(permit_32);
    quiescent(&bulkhead, 42);
}

/// Port of tokio's `try_acquire_many` / `acquire_many` limits: asking for more than the
/// semaphore has fails at once (tokio: `TryAcquireError::NoPermits` for `try_`, and a closed
/// error for a `u32` above `MAX_PERMITS`); here `ExceedsLimit`, never a wait.
#[test]
fn tokio_acquire_many_above_the_limit_is_refused_at_once() {
    let bulkhead = Arc::new(Bulkhead::new("db", limit_wait(4, LONG)));
    let start = Instant::now();
    assert_eq!(
        bulkhead.acquire_many_timeout(5, LONG).unwrap_err().reason(),
        RejectReason::ExceedsLimit
    );
    assert_eq!(
        bulkhead.acquire_many_owned(u32::MAX).unwrap_err().reason(),
        RejectReason::ExceedsLimit
    );
    assert!(start.elapsed() < HANG_GUARD);
    quiescent(&bulkhead, 4);
}

// ---- dotnet ConcurrencyLimiter (per-request permit counts). ----

/// Port of dotnet's `ThrowsWhenAcquiringMoreThanLimit` / `ThrowsWhenWaitingForMoreThanLimit`:
/// a request for more than the permit limit fails (here `ExceedsLimit`), sync and async.
#[test]
fn dotnet_acquiring_more_than_the_limit_fails_sync_and_async() {
    let bulkhead = Bulkhead::new("db", limit_wait(1, LONG));
    assert_eq!(bulkhead.call_with(2, || ()).unwrap_err().reason(), RejectReason::ExceedsLimit);
    let err = futures::executor::block_on(bulkhead.call_async_with(2, async {})).unwrap_err();
    assert_eq!(err.reason(), RejectReason::ExceedsLimit);
    quiescent(&bulkhead, 1);
}

/// Port of dotnet's `CanAcquireResourceAsync_QueuesAndGrabsOldest` with per-request counts:
/// a queued request for 2 is served before a later one for 1 (no barging), each with the
/// count it asked.
#[test]
fn dotnet_queued_requests_are_served_oldest_first_with_their_counts() {
    let bulkhead = Bulkhead::new("db", limit_wait(2, LONG));
    let held = bulkhead.try_acquire_many(2).unwrap();
    let (_, waker) = CountingWaker::new();
    let mut two = Box::pin(bulkhead.call_async_with(2, async {}));
    assert!(poll_once(&mut two, &waker).is_pending());
    let mut one = Box::pin(bulkhead.call_async_with(1, async {}));
    assert!(poll_once(&mut one, &waker).is_pending());
    let mut held = held;
    let first = held.split(1).unwrap();
    drop(first);
    // One free: the later request for 1 does not barge past the head asking 2.
    assert!(poll_once(&mut one, &waker).is_pending());
    drop(held);
    assert_eq!(poll_once(&mut two, &waker), Poll::Ready(Ok(())));
    drop(two);
    assert_eq!(poll_once(&mut one, &waker), Poll::Ready(Ok(())));
    drop(one);
    quiescent(&bulkhead, 2);
}

/// Port of dotnet's `LargeAcquiresAndQueuesDoNotIntegerOverflow`: requests of
/// `int.MaxValue`-like counts neither overflow nor lose permits.
#[test]
fn dotnet_large_requests_do_not_overflow() {
    let bulkhead = Arc::new(Bulkhead::new("db", limit_wait(1 << 20, SHORT)));
    let big = bulkhead.acquire_many_owned(1 << 20).unwrap();
    let err = bulkhead.acquire_many_timeout(1 << 20, SHORT).unwrap_err();
    assert_eq!(err.reason(), RejectReason::WaitTimedOut);
    assert_eq!(
        bulkhead.call_with(u32::MAX, || ()).unwrap_err().reason(),
        RejectReason::ExceedsLimit
    );
    drop(big);
    quiescent(&bulkhead, 1 << 20);
}

/// Port of dotnet's `AcquireZero_WithAvailability`: a request for none is granted empty.
#[test]
fn dotnet_acquire_zero_with_availability() {
    let bulkhead = Arc::new(Bulkhead::new("db", limit_wait(1, LONG)));
    assert_eq!(bulkhead.acquire_many_owned(0).unwrap().num_permits(), 0);
    assert_eq!(bulkhead.acquire_many_timeout(0, SHORT).unwrap().num_permits(), 0);
    assert_eq!(bulkhead.call_with(0, || 1), Ok(1));
    quiescent(&bulkhead, 1);
}

// ---- async-lock (tests/semaphore.rs). ----

/// Port of async-lock's `lifetime`: the owned form keeps the semaphore alive after the
/// caller drops its handle.
#[test]
fn async_lock_lifetime_through_call_owned_async() {
    let bulkhead = Arc::new(Bulkhead::new("db", limit_wait(1, LONG)));
    let weak = Arc::downgrade(&bulkhead);
    let call = bulkhead.call_owned_async(async { 3 });
    drop(bulkhead);
    assert!(weak.upgrade().is_some(), "the future holds the bulkhead");
    assert_eq!(futures::executor::block_on(call), Ok(3));
    assert!(weak.upgrade().is_none(), "and lets it go when done");
}

/// Port of async-lock's `stress`, shortened: many tasks through `call_async_with` and
/// `call_owned_async` on a multi-thread runtime; never more than the limit inside.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_lock_stress_through_the_call_verbs() {
    let bulkhead = Arc::new(Bulkhead::new("db", limit_wait(5, LONG)));
    let inside = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for i in 0..50u32 {
        let (bulkhead, inside) = (Arc::clone(&bulkhead), Arc::clone(&inside));
        // Even tasks ask 1 to 3 permits through `call_async_with`, odd ones 1 through
        // `call_owned_async`.
        let n = if i % 2 == 0 { 1 + i % 3 } else { 1 };
        let work = async move {
            let was = inside.fetch_add(n as usize, Ordering::SeqCst);
            assert!(was + n as usize <= 5, "more than the limit inside");
            tokio::task::yield_now().await;
            inside.fetch_sub(n as usize, Ordering::SeqCst);
        };
        if i % 2 == 0 {
            tasks.push(tokio::spawn(async move { bulkhead.call_async_with(n, work).await }));
        } else {
            tasks.push(tokio::spawn(bulkhead.call_owned_async(work)));
        }
    }
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    quiescent(&bulkhead, 5);
}

// ---- Cancel safety. ----

#[test]
fn a_queued_call_async_with_dropped_leaves_the_queue() {
    let bulkhead = Bulkhead::new("db", limit_wait(2, LONG));
    let held = bulkhead.try_acquire_many(2).unwrap();
    let (_, waker) = CountingWaker::new();
    let mut call = Box::pin(bulkhead.call_async_with(Request::permits(2).max_wait(LONG), async {}));
    assert!(poll_once(&mut call, &waker).is_pending());
    assert_eq!(bulkhead.metrics().waiting_calls(), 1);
    drop(call);
    assert_eq!(bulkhead.metrics().waiting_calls(), 0);
    drop(held);
    quiescent(&bulkhead, 2);
}

#[test]
fn a_granted_but_unpolled_call_passes_its_permits_on() {
    let bulkhead = Arc::new(Bulkhead::new("db", limit_wait(2, LONG)));
    let held = bulkhead.try_acquire_many(2).unwrap();
    let (_, waker) = CountingWaker::new();
    let mut first = Box::pin(bulkhead.call_async_with(2, async {}));
    assert!(poll_once(&mut first, &waker).is_pending());
    let mut second = Box::pin(bulkhead.call_owned_async(async { 9 }));
    assert!(poll_once(&mut second, &waker).is_pending());
    drop(held); // grants `first` its 2
    drop(first); // never polled again: its 2 go to `second`
    assert_eq!(poll_once(&mut second, &waker), Poll::Ready(Ok(9)));
    drop(second);
    quiescent(&bulkhead, 2);
}

#[test]
fn dropping_a_running_call_owned_async_releases_its_permit() {
    let bulkhead = Arc::new(Bulkhead::new("db", limit_wait(1, LONG)));
    let (_, waker) = CountingWaker::new();
    let mut call = Box::pin(bulkhead.call_owned_async(futures::future::pending::<()>()));
    assert!(poll_once(&mut call, &waker).is_pending());
    assert_eq!(bulkhead.metrics().in_flight_calls(), 1);
    drop(call);
    quiescent(&bulkhead, 1);
}

#[test]
fn a_call_owned_async_dropped_before_its_first_poll_holds_nothing() {
    let bulkhead = Arc::new(Bulkhead::new("db", limit_wait(1, LONG)));
    let call = bulkhead.call_owned_async(async {});
    drop(call);
    quiescent(&bulkhead, 1);
}

#[test]
fn call_owned_async_is_send_and_static() {
    fn assert_send_static<T: Send + 'static>(_: &T) {}
    let bulkhead = Arc::new(Bulkhead::new("db", limit_wait(1, LONG)));
    let call = bulkhead.call_owned_async(async { 1 });
    assert_send_static(&call);
    let keyed = KeyedBulkhead::<u64>::builder("api").build().unwrap();
    let keyed_call = keyed.call_owned_async(&1, async { 1 });
    assert_send_static(&keyed_call);
}

#[test]
fn the_plain_acquire_future_stays_small() {
    assert!(std::mem::size_of::<bulkhead::Acquire<'static>>() <= 64);
    assert!(std::mem::size_of::<bulkhead::AcquireOwned>() <= 64);
}

// ---- Hostile wakers on the new waiting paths: the per-call deadline's timer wake. ----

/// A waker that re-enters the bulkhead from every operation, on a wait ended by its per-call
/// deadline (the timer thread wakes it) and on one ended by a grant.
#[test]
fn a_reentrant_waker_on_a_per_call_deadline() {
    let bulkhead = Arc::new(Bulkhead::new("db", limit_wait(1, LONG)));
    let ops = Arc::new(AtomicUsize::new(0));
    let (woken_tx, woken_rx) = mpsc::channel::<()>();
    let woken = Arc::new(Notify(std::sync::Mutex::new(Some(woken_tx))));
    let waker =
        hostile_waker(reentrant_hook(&bulkhead, None, Some(&ops)), Some(Waker::from(woken)));
    let held = bulkhead.try_acquire().unwrap();
    let mut call = Box::pin(bulkhead.call_async_with(Request::default().max_wait(SHORT), async {}));
    assert!(call.as_mut().poll(&mut Context::from_waker(&waker)).is_pending());
    woken_rx.recv_timeout(HANG_GUARD).expect("the timer woke the waiter");
    match call.as_mut().poll(&mut Context::from_waker(&waker)) {
        Poll::Ready(Err(err)) => assert_eq!(err.reason(), RejectReason::WaitTimedOut),
        other => panic!("expected a timeout, got {other:?}"),
    }
    drop(call);
    // Granted: the release wakes the hostile waker, which re-enters.
    let mut call = Box::pin(bulkhead.acquire_many_async(Request::default().max_wait(LONG)));
    assert!(call.as_mut().poll(&mut Context::from_waker(&waker)).is_pending());
    drop(held);
    assert!(matches!(call.as_mut().poll(&mut Context::from_waker(&waker)), Poll::Ready(Ok(_))));
    drop(call);
    drop(waker);
    assert!(ops.load(Ordering::SeqCst) > 0, "the hook ran");
    quiescent(&bulkhead, 1);
}

struct Notify(std::sync::Mutex<Option<mpsc::Sender<()>>>);

impl Wake for Notify {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        if let Some(tx) = self.0.lock().unwrap().as_ref() {
            let _ = tx.send(());
        }
    }
}

struct PanickingWaker(AtomicUsize);

impl Wake for PanickingWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
        panic!("a waker that panics in wake()");
    }
}

/// A waker that panics when the timer fires a per-call deadline: the timer thread survives
/// and keeps the next per-call deadline; a release that wakes one panicking waker still
/// serves the waiter behind it.
#[test]
fn a_panicking_waker_on_a_per_call_deadline_and_grant() {
    let bulkhead = Arc::new(Bulkhead::new("db", limit_wait(1, LONG)));
    let held = bulkhead.try_acquire().unwrap();
    let bad = Arc::new(PanickingWaker(AtomicUsize::new(0)));
    let bad_waker = Waker::from(Arc::clone(&bad));
    let mut call = Box::pin(bulkhead.call_async_with(Request::default().max_wait(SHORT), async {}));
    assert!(call.as_mut().poll(&mut Context::from_waker(&bad_waker)).is_pending());
    wait_until("the timer to fire the panicking waker", || bad.0.load(Ordering::SeqCst) == 1);
    let noop = Waker::noop().clone();
    assert!(matches!(
        call.as_mut().poll(&mut Context::from_waker(&noop)),
        Poll::Ready(Err(ref e)) if e.reason() == RejectReason::WaitTimedOut
    ));
    drop(call);
    // The timer still fires a later per-call deadline, on another executor.
    let err = futures::executor::block_on(
        bulkhead.acquire_many_async(Request::default().max_wait(SHORT)),
    )
    .unwrap_err();
    assert_eq!(err.reason(), RejectReason::WaitTimedOut);
    // A grant: the first wake panics, contained; the waiter behind is served too.
    let mut first = Box::pin(bulkhead.call_owned_async(async {}));
    assert!(first.as_mut().poll(&mut Context::from_waker(&bad_waker)).is_pending());
    let (good_count, good_waker) = CountingWaker::new();
    let mut second =
        Box::pin(bulkhead.call_async_with(Request::default().max_wait(LONG), async {}));
    assert!(poll_once(&mut second, &good_waker).is_pending());
    let released = catch_unwind(AssertUnwindSafe(|| drop(held)));
    assert!(released.is_ok(), "the panic is contained");
    assert_eq!(poll_once(&mut first, &good_waker), Poll::Ready(Ok(())));
    drop(first);
    assert!(good_count.wakes() >= 1);
    assert_eq!(poll_once(&mut second, &good_waker), Poll::Ready(Ok(())));
    drop(second);
    quiescent(&bulkhead, 1);
}

// ---- The keyed bulkhead: the same verbs, key first. ----

#[test]
fn keyed_per_call_verbs() {
    let keyed = KeyedBulkhead::<u64>::builder("api")
        .default_config(limit_wait(2, LONG))
        .total(limit_wait(3, LONG))
        .build()
        .unwrap();
    let request = Request::permits(2).criticality(Criticality::Critical);
    assert_eq!(
        keyed.call_with(&1, request, || keyed.key_metrics(&1).unwrap().in_flight_calls()),
        Ok(2)
    );
    let held = keyed.try_acquire_many(&1, 2).unwrap();
    // The key is full: a per-call 20 ms wait ends there, not after 30 s.
    let start = Instant::now();
    let short = Request::permits(1).max_wait(SHORT);
    assert_eq!(keyed.acquire_many(&1, short).unwrap_err().reason(), RejectReason::WaitTimedOut);
    let err = futures::executor::block_on(keyed.call_async_with(&1, short, async {})).unwrap_err();
    assert_eq!(err.reason(), RejectReason::WaitTimedOut);
    assert_eq!(
        keyed.acquire_many_timeout(&1, 1, SHORT).unwrap_err().reason(),
        RejectReason::WaitTimedOut
    );
    // The total has 1 left: key 2 asks 2, waits at the total for what the key left.
    assert_eq!(
        keyed.acquire_many_timeout(&2, 2, SHORT).unwrap_err().reason(),
        RejectReason::WaitTimedOut
    );
    assert_eq!(keyed.key_metrics(&2).unwrap().in_flight_calls(), 0, "key 2's slots came back");
    let zero = Request::permits(1).max_wait(Duration::ZERO);
    assert_eq!(keyed.call_with(&1, zero, || ()).unwrap_err().reason(), RejectReason::Full);
    assert!(start.elapsed() < HANG_GUARD);
    let owned = keyed.acquire_many_owned(&2, 1).unwrap();
    assert_eq!(owned.num_permits(), 1);
    drop((held, owned));
    assert_eq!(futures::executor::block_on(keyed.call_owned_async(&3, async { 4 })), Ok(4));
    for key in [1, 2, 3] {
        if let Some(bulkhead) = keyed.key_bulkhead(&key) {
            quiescent(&bulkhead, 2);
        }
    }
    quiescent(keyed.total().unwrap(), 3);
}

#[test]
fn keyed_acquire_many_owned_waits_and_is_granted() {
    let keyed = Arc::new(
        KeyedBulkhead::<u64>::builder("api").default_config(limit_wait(1, LONG)).build().unwrap(),
    );
    let held = keyed.try_acquire_owned(&1).unwrap();
    let worker = thread::spawn({
        let keyed = Arc::clone(&keyed);
        move || keyed.acquire_many_owned(&1, 1).map(|p| p.num_permits()).map_err(|e| e.reason())
    });
    wait_for_waiters(&keyed.key_bulkhead(&1).unwrap(), 1);
    drop(held);
    assert_eq!(common::join_guarded(worker), Ok(1));
    quiescent(&keyed.key_bulkhead(&1).unwrap(), 1);
}

// ---- The fallible forms. ----

#[derive(Debug, PartialEq)]
enum PortError {
    Unavailable(RejectReason),
    Failed,
}

impl From<bulkhead::BulkheadFull> for PortError {
    fn from(full: bulkhead::BulkheadFull) -> Self {
        PortError::Unavailable(full.reason())
    }
}

#[test]
fn fallible_with_forms_map_the_refusal_and_keep_the_per_call_wait() {
    let bulkhead = Bulkhead::new("db", limit_wait(2, LONG));
    let short = Request::permits(2).max_wait(SHORT);
    assert_eq!(bulkhead.call_fallible_with(short, || Ok::<_, PortError>(1)), Ok(1));
    let held = bulkhead.try_acquire().unwrap();
    let start = Instant::now();
    assert_eq!(
        bulkhead.call_fallible_with(short, || Ok::<(), PortError>(())),
        Err(PortError::Unavailable(RejectReason::WaitTimedOut))
    );
    let refused = futures::executor::block_on(
        bulkhead.call_async_fallible_with(short, async { Ok::<(), PortError>(()) }),
    );
    assert_eq!(refused, Err(PortError::Unavailable(RejectReason::WaitTimedOut)));
    assert!(start.elapsed() < HANG_GUARD);
    assert_eq!(
        bulkhead.call_fallible_with(3, || Ok::<(), PortError>(())),
        Err(PortError::Unavailable(RejectReason::ExceedsLimit))
    );
    drop(held);
    let keyed =
        KeyedBulkhead::<u64>::builder("api").default_config(limit_wait(1, LONG)).build().unwrap();
    let held = keyed.try_acquire(&1).unwrap();
    assert_eq!(
        keyed.call_fallible_with(
            &1,
            Request::default().max_wait(SHORT),
            || Ok::<(), PortError>(())
        ),
        Err(PortError::Unavailable(RejectReason::WaitTimedOut))
    );
    let refused = futures::executor::block_on(keyed.call_async_fallible_with(
        &1,
        Request::default().max_wait(Duration::ZERO),
        async { Ok::<(), PortError>(()) },
    ));
    assert_eq!(refused, Err(PortError::Unavailable(RejectReason::Full)));
    drop(held);
    quiescent(&keyed.key_bulkhead(&1).unwrap(), 1);
    quiescent(&bulkhead, 2);
}

#[test]
fn fallible_with_forms_mark_the_outcome_for_an_adaptive_limit() {
    let bulkhead = adaptive(20, LONG);
    let limit = || bulkhead.adaptive_limit().unwrap().limit();
    let before = limit();
    assert_eq!(
        bulkhead.call_fallible_with(2, || Err::<(), _>(PortError::Failed)),
        Err(PortError::Failed)
    );
    let after_sync = limit();
    assert!(after_sync < before, "a failure backs AIMD off: {before} -> {after_sync}");
    let failed = futures::executor::block_on(
        bulkhead.call_async_fallible_with(2, async { Err::<(), _>(PortError::Failed) }),
    );
    assert_eq!(failed, Err(PortError::Failed));
    assert!(limit() < after_sync, "the async failure is marked too");
    quiescent(&bulkhead, limit());
}

/// Polls a future that must be ready at once (a grant from free permits or a refusal).
fn ready_now<F: Future>(fut: F) -> F::Output {
    fut.now_or_never().expect("the request queued instead of being decided at once")
}

/// The waiting futures pack a request into one word (`Core::pack`). At the engine's maximum
/// limit, every request above the maximum is refused as above the limit whatever its class,
/// and a request for exactly the maximum keeps its class: a sheddable one can never fit
/// beside a headroom, the other classes are granted. cargo-mutants (future 1/17) found the
/// packing's edges unchecked: an off-by-one in its clamp or its range test turned a request
/// above the maximum into a grant, or dropped the class of one at the maximum.
#[test]
fn the_futures_keep_requests_at_and_above_the_engine_maximum_apart() {
    let max = BulkheadConfig::MAX_CONCURRENT_CALLS;
    let config = BulkheadConfig::builder()
        .max_concurrent_calls(max)
        .sheddable_headroom(1)
        .max_wait_duration(Duration::ZERO)
        .build()
        .unwrap();
    let bulkhead = Arc::new(Bulkhead::new("wide", config));
    let classes = [Criticality::Default, Criticality::Critical, Criticality::Sheddable];
    let at_max = u32::try_from(max).unwrap();
    for n in [at_max + 1, at_max + 2, u32::MAX] {
        for class in classes {
            let request = Request::permits(n).criticality(class);
            let refused = ready_now(bulkhead.acquire_many_async(request))
                .expect_err("a request above the engine's maximum");
            assert_eq!(refused.reason(), RejectReason::ExceedsLimit, "{n} permits, {class:?}");
            let refused = ready_now(bulkhead.acquire_many_owned_async(request))
                .expect_err("a request above the engine's maximum");
            assert_eq!(refused.reason(), RejectReason::ExceedsLimit, "{n} permits, {class:?}");
        }
    }
    let request = Request::permits(at_max).criticality(Criticality::Sheddable);
    let refused = ready_now(bulkhead.acquire_many_async(request))
        .expect_err("a sheddable request for the whole limit never fits beside the headroom");
    assert_eq!(refused.reason(), RejectReason::ExceedsLimit);
    for class in [Criticality::Default, Criticality::Critical] {
        let request = Request::permits(at_max).criticality(class);
        let permit = ready_now(bulkhead.acquire_many_async(request))
            .unwrap_or_else(|e| panic!("{class:?} for the whole limit, all free: {e}"));
        assert_eq!(permit.num_permits(), at_max);
        assert_eq!(bulkhead.metrics().available_concurrent_calls(), 0);
    }
    quiescent(&bulkhead, max);
}

/// A request's own zero wait is decided by the first poll with the weighted refusal's
/// reasons: a sheddable request that finds its permits free but the headroom in the way is
/// refused `Reserved`, as `try_acquire_many` refuses it, not `Full`. cargo-mutants (future
/// 5/17): the first poll's zero-wait test could be folded into the limit test (`||` made
/// `&&`), sending such a request to the queue's zero-wait refusal (`Full`) unseen.
#[test]
fn a_sheddable_request_with_its_own_zero_wait_is_refused_reserved() {
    let config = BulkheadConfig::builder()
        .max_concurrent_calls(2)
        .sheddable_headroom(1)
        .max_wait_duration(LONG)
        .build()
        .unwrap();
    let bulkhead = Arc::new(Bulkhead::new("reserved", config));
    let held = bulkhead.try_acquire().unwrap();
    let request = Request::permits(1).criticality(Criticality::Sheddable).max_wait(Duration::ZERO);
    let tried = bulkhead.try_acquire_many(request).expect_err("the headroom is kept");
    assert_eq!(tried.reason(), RejectReason::Reserved);
    let refused = ready_now(bulkhead.acquire_many_async(request)).expect_err("may not wait");
    assert_eq!(refused.reason(), RejectReason::Reserved, "acquire_many_async");
    let refused = ready_now(bulkhead.acquire_many_owned_async(request)).expect_err("may not wait");
    assert_eq!(refused.reason(), RejectReason::Reserved, "acquire_many_owned_async");
    assert_eq!(bulkhead.metrics().waiting_calls(), 0, "nothing queued");
    drop(held);
    quiescent(&bulkhead, 2);
}
