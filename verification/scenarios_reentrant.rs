//! Foreign code under the model checkers: wakers (`hostile_waker.rs`) and listeners that
//! re-enter the bulkhead from `clone`, `wake` and `drop`, on every queue path (re-poll with
//! a new waker, withdraw on drop, deadline, grant, close, drain), racing the event that
//! ends the wait. A hook run under one of the bulkhead's locks re-takes it: the checker
//! reports the deadlock. Also the engine's own deadline timer (`bulkhead::timer`): under a
//! model the model clock is the timer, so an advance runs the same expiry the timer thread
//! runs.
//!
//! Shared by `verification/loom.rs` and `verification/shuttle.rs` (the `rt` adapter).

use core::future::Future;
use core::pin::Pin;
use core::sync::atomic::Ordering::SeqCst;
use core::task::Context;
use core::time::Duration;
use std::sync::Arc;

use bulkhead::{Bulkhead, BulkheadConfig, RejectReason};

use crate::hostile_waker::{hostile_waker, reenter, reentrant_hook, Op};
use crate::rt::{self, AtomicUsize};
use crate::scenarios::{assert_quiescent, Occupancy};

fn bulkhead(name: &str, limit: usize, wait: Duration) -> Arc<Bulkhead> {
    let config = BulkheadConfig::builder()
        .max_concurrent_calls(limit)
        .max_wait_duration(wait)
        .build()
        .expect("valid config");
    Arc::new(Bulkhead::new(name, config))
}

fn join<T>(handle: rt::JoinHandle<T>) -> T {
    match handle.join() {
        Ok(value) => value,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// Drives `fut` to completion on this model thread, polling it each time with a *new*
/// hostile waker (so every re-poll replaces the queued waker, and the old one is dropped by
/// the queue); the hostile waker's `wake` also wakes `block_on`.
pub fn block_on_hostile<F: Future + Unpin>(
    bulkhead: &Arc<Bulkhead>,
    close_on: Option<Op>,
    mut fut: F,
) -> F::Output {
    rt::block_on(core::future::poll_fn(move |cx| {
        let waker =
            hostile_waker(reentrant_hook(bulkhead, close_on, None), Some(cx.waker().clone()));
        Pin::new(&mut fut).poll(&mut Context::from_waker(&waker))
    }))
}

/// tokio's `release_permits_at_drop`, ported and raced: the waker a queued future was
/// first polled with is the last owner of a permit of the same bulkhead; `block_on` re-polls
/// with its own waker, so the queue drops the old one, which releases the permit, which must
/// reach the future. Meanwhile another thread re-enters the bulkhead.
pub fn release_permits_at_drop_racing_reentry() {
    let bulkhead = bulkhead("release_permits_at_drop", 1, Duration::MAX);
    let held = bulkhead.try_acquire_owned().expect("free");
    let mut acquire = Box::pin(bulkhead.acquire_async());
    {
        let waker = hostile_waker(
            move |_| {
                let _ = &held;
            },
            None,
        );
        assert!(acquire.as_mut().poll(&mut Context::from_waker(&waker)).is_pending());
    }
    let other = {
        let bulkhead = Arc::clone(&bulkhead);
        rt::spawn(move || reenter(&bulkhead, false))
    };
    let permit = rt::block_on(acquire).expect("the permit the dropped waker released");
    drop(permit);
    join(other);
    assert_quiescent(&bulkhead, 1);
}

/// Which event ends the hostile-waked wait.
#[derive(Clone, Copy, Debug)]
pub enum Path {
    /// A release grants the permit (the releaser wakes the hostile waker).
    Grant,
    /// The future is dropped while a release may grant it (withdraw, or pass the permit on).
    Withdraw,
    /// The engine's timer (the model clock) withdraws it at its deadline, racing a release.
    Deadline,
    /// `close` refuses it, racing the release.
    Close,
}

/// A queued `acquire_async`, polled only with hostile wakers that re-enter the bulkhead,
/// ended by `path` while another thread also releases the held permit. Exactly one outcome,
/// nothing lost, no deadlock.
pub fn hostile_waker_on_queue_path(path: Path) {
    const WAIT: u64 = 10;
    let bulkhead = bulkhead("hostile_queue_path", 1, Duration::from_nanos(WAIT));
    let occupancy = Occupancy::new(1);
    let held = bulkhead.try_acquire_owned().expect("free");
    occupancy.work();
    let close_on = matches!(path, Path::Close).then_some(Op::Wake);
    let mut acquire = Box::pin(bulkhead.acquire_async());
    {
        let waker = hostile_waker(reentrant_hook(&bulkhead, close_on, None), None);
        assert!(acquire.as_mut().poll(&mut Context::from_waker(&waker)).is_pending(), "queued");
    }
    let releaser = rt::spawn(move || drop(held));
    let event = {
        let bulkhead = Arc::clone(&bulkhead);
        rt::spawn(move || match path {
            Path::Deadline => bulkhead::model::advance_to(Duration::from_nanos(WAIT)),
            Path::Close => {
                bulkhead.close();
            }
            Path::Grant | Path::Withdraw => reenter(&bulkhead, false),
        })
    };
    let granted = match path {
        Path::Withdraw => {
            drop(acquire);
            false
        }
        _ => match block_on_hostile(&bulkhead, close_on, acquire) {
            Ok(permit) => {
                occupancy.work();
                drop(permit);
                true
            }
            Err(err) => {
                let expected = match path {
                    Path::Deadline => RejectReason::WaitTimedOut,
                    Path::Close => RejectReason::Closed,
                    _ => panic!("{path:?}: refused: {err}"),
                };
                assert_eq!(err.reason(), expected, "{err}");
                false
            }
        },
    };
    join(releaser);
    join(event);
    occupancy.check(1 + usize::from(granted));
    if matches!(path, Path::Close) {
        assert!(bulkhead.is_closed());
        assert_eq!(bulkhead.metrics().in_flight_calls(), 0);
        assert_eq!(bulkhead.metrics().waiting_calls(), 0);
    } else {
        assert_quiescent(&bulkhead, 1);
    }
}

/// A `drained()` future polled with hostile wakers (whose hooks re-enter, and close on
/// clone), completed by the last release racing `close`.
pub fn hostile_waker_on_drain() {
    let bulkhead = bulkhead("hostile_drain", 2, Duration::MAX);
    let held = bulkhead.try_acquire_owned().expect("free");
    let releaser = rt::spawn(move || drop(held));
    let closer = {
        let bulkhead = Arc::clone(&bulkhead);
        rt::spawn(move || {
            bulkhead.close();
        })
    };
    block_on_hostile(&bulkhead, Some(Op::Clone), Box::pin(bulkhead.drained()));
    join(releaser);
    join(closer);
    assert!(bulkhead.is_closed());
    assert_eq!(bulkhead.metrics().in_flight_calls(), 0);
}

/// The engine's deadline timer under the model: `waiters` async waiters with the
/// bulkhead's max wait queue behind a held permit; the clock passes their deadline while
/// the permit is released. Each ends granted or timed out (never both, never neither), and
/// nothing is lost.
pub fn engine_deadline_racing_release(waiters: usize) {
    const WAIT: u64 = 10;
    let bulkhead = bulkhead("engine_deadline", 1, Duration::from_nanos(WAIT));
    let occupancy = Occupancy::new(1);
    let held = bulkhead.try_acquire_owned().expect("free");
    occupancy.work();
    let granted = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..waiters)
        .map(|_| queued_waiter(&bulkhead, &occupancy, &granted, RejectReason::WaitTimedOut))
        .collect();
    let clock = rt::spawn(|| bulkhead::model::advance_to(Duration::from_nanos(WAIT)));
    drop(held);
    let timed_out = tasks.into_iter().map(join).filter(|&granted| !granted).count();
    join(clock);
    let granted = granted.load(SeqCst);
    assert_eq!(granted + timed_out, waiters);
    occupancy.check(1 + granted);
    assert_quiescent(&bulkhead, 1);
}

/// A timer the runtime owns (`bulkhead::timer::Timer`): `waiters` async waiters of a
/// bulkhead bound to it queue behind a held permit, each arming its deadline there (not on
/// the model clock's timer); the callback re-enters the timer (`fire_expired`, as a runtime
/// that fires at once would) and the bulkhead on the arming thread. The "runtime" thread
/// moves the clock past the deadline and fires the handle while the permit is released.
/// Each waiter ends granted or timed out, nothing is lost, nothing is left armed, and a
/// callback called under a lock of ours deadlocks here.
pub fn own_timer_fire_racing_release(waiters: usize) {
    const WAIT: u64 = 10;
    let told = Arc::new(AtomicUsize::new(0));
    let timer = bulkhead::timer::Timer::new({
        let told = Arc::clone(&told);
        move |at| {
            assert_eq!(at, WAIT, "the callback is given the deadline");
            told.fetch_add(1, SeqCst);
        }
    });
    let config = BulkheadConfig::builder()
        .max_concurrent_calls(1)
        .max_wait_duration(Duration::from_nanos(WAIT))
        .build()
        .expect("valid config");
    let bulkhead = Arc::new(Bulkhead::with_timer("own_timer", config, &timer));
    let occupancy = Occupancy::new(1);
    let held = bulkhead.try_acquire_owned().expect("free");
    occupancy.work();
    let granted = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..waiters)
        .map(|_| queued_waiter(&bulkhead, &occupancy, &granted, RejectReason::WaitTimedOut))
        .collect();
    assert_eq!(timer.next_deadline(), Some(WAIT), "armed on the runtime's timer");
    assert_eq!(told.load(SeqCst), 1, "told once: the later waiters' deadline is not earlier");
    let runtime = {
        let timer = timer.clone();
        rt::spawn(move || {
            bulkhead::model::advance_to(Duration::from_nanos(WAIT));
            timer.fire_expired()
        })
    };
    drop(held);
    let timed_out = tasks.into_iter().map(join).filter(|&granted| !granted).count();
    assert_eq!(join(runtime), None, "nothing is armed after the fire");
    let granted = granted.load(SeqCst);
    assert_eq!(granted + timed_out, waiters);
    occupancy.check(1 + granted);
    assert_quiescent(&bulkhead, 1);
}

/// Deadlines out of queue order: a `change_config` shortens the max wait between two
/// enqueues, so the second waiter's deadline comes first. The clock reaches only that one:
/// the timer must fire it (the head's later deadline is not due), or the second waiter
/// waits for ever (a deadlock: the held permit is released only after it ends).
pub fn engine_deadline_out_of_queue_order() {
    const WAIT: u64 = 10;
    let bulkhead = bulkhead("engine_deadline_order", 1, Duration::from_nanos(WAIT));
    let occupancy = Occupancy::new(1);
    let held = bulkhead.try_acquire_owned().expect("free");
    occupancy.work();
    let granted = Arc::new(AtomicUsize::new(0));
    let first = queued_waiter(&bulkhead, &occupancy, &granted, RejectReason::WaitTimedOut);
    let shorter = BulkheadConfig::builder()
        .max_concurrent_calls(1)
        .max_wait_duration(Duration::from_nanos(WAIT / 2))
        .build()
        .expect("valid");
    bulkhead.change_config(shorter);
    let second = queued_waiter(&bulkhead, &occupancy, &granted, RejectReason::WaitTimedOut);
    let clock = rt::spawn(|| bulkhead::model::advance_to(Duration::from_nanos(WAIT / 2)));
    assert!(!join(second), "the second waiter's deadline passed while the permit was held");
    drop(held);
    assert!(join(first), "the head's deadline never passed: the release grants it");
    join(clock);
    occupancy.check(2);
    assert_quiescent(&bulkhead, 1);
}

/// An `acquire_owned_async` queued by the calling thread (so queue order is the call
/// order), then completed on a thread of its own: `true` if granted, `false` if refused with
/// `refusal` (any other refusal fails the scenario).
fn queued_waiter(
    bulkhead: &Arc<Bulkhead>,
    occupancy: &Arc<Occupancy>,
    granted: &Arc<AtomicUsize>,
    refusal: RejectReason,
) -> rt::JoinHandle<bool> {
    let mut acquire = Box::pin(bulkhead.acquire_owned_async());
    let noop = futures::task::noop_waker();
    assert!(acquire.as_mut().poll(&mut Context::from_waker(&noop)).is_pending(), "queued");
    let (occupancy, granted) = (Arc::clone(occupancy), Arc::clone(granted));
    rt::spawn(move || match rt::block_on(acquire) {
        Ok(permit) => {
            occupancy.work();
            granted.fetch_add(1, SeqCst);
            drop(permit);
            true
        }
        Err(err) => {
            assert_eq!(err.reason(), refusal, "{err}");
            false
        }
    })
}

/// A listener that re-enters the bulkhead on every event, while two threads make calls
/// that emit (a permitted call, a queued-then-refused one). A listener run under a lock of
/// ours deadlocks; the re-entry depth is bounded by a flag, not by a lock.
pub fn listener_reenters_on_every_event() {
    let bulkhead = bulkhead("listener_reenters", 1, Duration::ZERO);
    let busy = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let heard = Arc::new(AtomicUsize::new(0));
    let _handle = {
        let (weak, busy, heard) =
            (Arc::downgrade(&bulkhead), Arc::clone(&busy), Arc::clone(&heard));
        bulkhead.on_event(move |_event| {
            heard.fetch_add(1, SeqCst);
            // Model bookkeeping, not under test: stops the listener's own events recursing.
            if busy.swap(true, SeqCst) {
                return;
            }
            if let Some(bulkhead) = weak.upgrade() {
                reenter(&bulkhead, false);
            }
            busy.store(false, SeqCst);
        })
    };
    let other = {
        let bulkhead = Arc::clone(&bulkhead);
        rt::spawn(move || drop(bulkhead.try_acquire()))
    };
    drop(bulkhead.try_acquire());
    join(other);
    assert!(heard.load(SeqCst) >= 2);
    assert_quiescent(&bulkhead, 1);
}

/// `wait_drained` / `drained` answer "drained": the caller must then see every write of the
/// calls that finished (happens-before with the last release). The last holder writes with
/// a Relaxed store (no synchronization of its own, like a plain write under loom), releases,
/// and the main thread reads after the drain wait returns. A drain check that reads the
/// state word Relaxed lets loom return a word that already counts the release, with no
/// edge to it: the read sees 0.
pub fn drained_sees_last_call_writes(async_drain: bool) {
    let bulkhead = bulkhead("drained_sees_writes", 1, Duration::MAX);
    let data = Arc::new(AtomicUsize::new(0));
    let held = bulkhead.try_acquire_owned().expect("free");
    let worker = {
        let data = Arc::clone(&data);
        rt::spawn(move || {
            data.store(1, core::sync::atomic::Ordering::Relaxed);
            drop(held);
        })
    };
    bulkhead.close();
    if async_drain {
        rt::block_on(bulkhead.drained());
    } else {
        assert!(bulkhead.wait_drained(Duration::MAX));
    }
    assert_eq!(
        data.load(core::sync::atomic::Ordering::Relaxed),
        1,
        "drained, but the last call's write is not visible"
    );
    join(worker);
}

/// `close` with `waiters` queued (it refuses them in batches, unlocking to wake between
/// batches) races the release of the held permit. A release that comes before the close
/// grants the oldest waiter (whose own release may grant the next); one that comes during
/// or after it grants nobody. So once a waiter is refused with `Closed`, no waiter queued
/// behind it may be granted.
pub fn close_with_queued_waiters_racing_release_grants_none_after(waiters: usize) {
    let bulkhead = bulkhead("close_batches", 1, Duration::MAX);
    let held = bulkhead.try_acquire_owned().expect("free");
    let granted = Arc::new(AtomicUsize::new(0));
    let occupancy = Occupancy::new(1);
    occupancy.work();
    let tasks: Vec<_> = (0..waiters)
        .map(|_| queued_waiter(&bulkhead, &occupancy, &granted, RejectReason::Closed))
        .collect();
    let releaser = rt::spawn(move || drop(held));
    bulkhead.close();
    let results: Vec<bool> = tasks.into_iter().map(join).collect();
    join(releaser);
    if let Some(refused) = results.iter().position(|granted| !granted) {
        assert!(
            results[refused..].iter().all(|granted| !granted),
            "a waiter queued behind one refused by close was granted: {results:?}"
        );
    }
    // Both may be granted: the release before the close grants the first, whose release
    // (also before the close) grants the second.
    occupancy.check(1 + granted.load(SeqCst));
    assert!(bulkhead.wait_drained(Duration::ZERO) || bulkhead.metrics().in_flight_calls() == 0);
}
