//! Async acquires: `acquire_async`, `acquire_owned_async`, `acquire_async_with_sleep`; the
//! tokio timer bound and cancel safety.

mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::thread;
use std::time::{Duration, Instant};

use bulkhead::{Bulkhead, RejectReason};
use common::*;

/// A sleep future the test completes by hand.
#[derive(Clone, Default)]
struct Gate(Arc<GateInner>);

#[derive(Default)]
struct GateInner {
    open: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

impl Gate {
    fn open(&self) {
        self.0.open.store(true, Ordering::SeqCst);
        if let Some(waker) = self.0.waker.lock().unwrap().take() {
            waker.wake();
        }
    }

    fn sleep(&self) -> GateSleep {
        GateSleep(Arc::clone(&self.0))
    }

    /// Sleep futures built from this gate that are still alive.
    fn live_sleeps(&self) -> usize {
        Arc::strong_count(&self.0) - 1
    }
}

struct GateSleep(Arc<GateInner>);

impl Future for GateSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        *self.0.waker.lock().unwrap() = Some(cx.waker().clone());
        if self.0.open.load(Ordering::SeqCst) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

#[test]
fn acquire_async_when_free_is_ready_on_first_poll() {
    let bulkhead = Bulkhead::new("async-free", limit(2));
    let (counter, waker) = CountingWaker::new();
    let mut fut = Box::pin(bulkhead.acquire_async());
    let permit = match poll_once(&mut fut, &waker) {
        Poll::Ready(result) => result.expect("granted"),
        Poll::Pending => panic!("a free permit must be granted on the first poll"),
    };
    assert_metrics(bulkhead.metrics(), 1, 2, 1, 0);
    drop(permit);
    drop(fut);
    assert_eq!(counter.wakes(), 0);
    assert_quiescent(&bulkhead, 2);
}

#[test]
fn acquire_async_when_full_with_zero_wait_rejects_full() {
    let bulkhead = Bulkhead::new("async-zero-wait", limit(1));
    let _held = bulkhead.try_acquire().unwrap();
    let (_counter, waker) = CountingWaker::new();
    let mut fut = Box::pin(bulkhead.acquire_async());
    match poll_once(&mut fut, &waker) {
        Poll::Ready(Err(err)) => {
            assert_eq!(err.reason(), RejectReason::Full);
            assert_eq!(err.waited(), Duration::ZERO);
            assert_eq!(err.bulkhead_name(), "async-zero-wait");
        }
        Poll::Ready(Ok(_)) => panic!("granted a permit on a full bulkhead"),
        Poll::Pending => panic!("a zero max wait must not queue"),
    }
    assert_metrics(bulkhead.metrics(), 0, 1, 1, 0);
}

#[test]
fn acquire_async_queued_is_woken_and_granted_on_release() {
    let bulkhead = Bulkhead::new("async-woken", limit_wait(1, LONG_WAIT));
    let held = bulkhead.try_acquire().unwrap();
    let (counter, waker) = CountingWaker::new();
    let mut fut = Box::pin(bulkhead.acquire_async());
    assert!(poll_once(&mut fut, &waker).is_pending());
    assert_metrics(bulkhead.metrics(), 0, 1, 1, 1);
    // A poll before the grant stays pending.
    assert!(poll_once(&mut fut, &waker).is_pending());
    assert_eq!(counter.wakes(), 0);
    drop(held);
    assert!(counter.wakes() >= 1, "the release must wake the queued future");
    assert_metrics(bulkhead.metrics(), 0, 1, 1, 0); // granted: in flight, not waiting
    let permit = match poll_once(&mut fut, &waker) {
        Poll::Ready(result) => result.expect("granted"),
        Poll::Pending => panic!("woken but not ready"),
    };
    drop(permit);
    drop(fut);
    assert_quiescent(&bulkhead, 1);
}

#[test]
fn acquire_async_repolled_with_new_waker_wakes_the_new_one() {
    let bulkhead = Bulkhead::new("async-new-waker", limit_wait(1, LONG_WAIT));
    let held = bulkhead.try_acquire().unwrap();
    let (first, first_waker) = CountingWaker::new();
    let (second, second_waker) = CountingWaker::new();
    let mut fut = Box::pin(bulkhead.acquire_async());
    assert!(poll_once(&mut fut, &first_waker).is_pending());
    assert!(poll_once(&mut fut, &second_waker).is_pending());
    drop(held);
    assert!(second.wakes() >= 1, "the latest waker must be woken");
    assert_eq!(first.wakes(), 0);
    assert!(matches!(poll_once(&mut fut, &second_waker), Poll::Ready(Ok(_))));
}

// The bulkhead's own timer bounds the wait, with or without the `tokio` feature.
#[tokio::test]
async fn acquire_async_in_tokio_times_out_after_max_wait() {
    let wait = Duration::from_millis(30);
    let bulkhead = Bulkhead::new("async-tokio-timeout", limit_wait(1, wait));
    let _held = bulkhead.try_acquire().unwrap();
    let start = Instant::now();
    // Nothing but the timer can wake this future: without it the guard fires.
    let err = tokio::time::timeout(HANG_GUARD, bulkhead.acquire_async())
        .await
        .expect("hang guard: the tokio timer did not bound the wait")
        .unwrap_err();
    let elapsed = start.elapsed();
    assert_eq!(err.reason(), RejectReason::WaitTimedOut);
    assert!(err.waited() >= wait, "waited {:?}", err.waited());
    assert!(elapsed >= wait, "returned after {elapsed:?}");
    assert_metrics(bulkhead.metrics(), 0, 1, 1, 0);
}

// The bulkhead's own timer bounds the wait, with or without the `tokio` feature.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_owned_async_in_tokio_times_out_after_max_wait() {
    let wait = Duration::from_millis(10);
    let bulkhead = shared("async-owned-timeout", limit_wait(1, wait));
    let _held = bulkhead.try_acquire_owned().unwrap();
    let task = tokio::spawn(bulkhead.acquire_owned_async());
    let err = tokio::time::timeout(HANG_GUARD, task)
        .await
        .expect("hang guard")
        .expect("task did not panic")
        .unwrap_err();
    assert_eq!(err.reason(), RejectReason::WaitTimedOut);
    assert!(err.waited() >= wait);
    assert_metrics(bulkhead.metrics(), 0, 1, 1, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_owned_async_spawned_task_is_granted_on_release() {
    let bulkhead = shared("async-owned-spawn", limit_wait(1, LONG_WAIT));
    let held = bulkhead.try_acquire_owned().unwrap();
    let task = tokio::spawn(bulkhead.acquire_owned_async());
    let start = Instant::now();
    while bulkhead.metrics().waiting_calls() == 0 {
        assert!(start.elapsed() < HANG_GUARD, "hang guard: task never queued");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    // Released from another thread.
    thread::spawn(move || drop(held)).join().unwrap();
    let permit = tokio::time::timeout(HANG_GUARD, task)
        .await
        .expect("hang guard")
        .expect("task did not panic")
        .expect("granted");
    assert!(Arc::ptr_eq(permit.bulkhead(), &bulkhead));
    assert_metrics(bulkhead.metrics(), 0, 1, 1, 0);
    drop(permit);
    assert_quiescent(&bulkhead, 1);
}

#[tokio::test]
async fn acquire_async_cancelled_by_tokio_timeout_leaves_queue() {
    let bulkhead = Bulkhead::new("async-tokio-cancel", limit_wait(1, LONG_WAIT));
    let held = bulkhead.try_acquire().unwrap();
    let outcome = tokio::time::timeout(Duration::from_millis(5), bulkhead.acquire_async()).await;
    assert!(outcome.is_err(), "the outer timeout must fire first");
    assert_metrics(bulkhead.metrics(), 0, 1, 1, 0);
    drop(held);
    assert_quiescent(&bulkhead, 1);
}

#[test]
fn acquire_async_outside_tokio_is_granted_by_release_on_another_thread() {
    with_hang_guard(|| {
        let bulkhead = shared("async-executor", limit_wait(1, LONG_WAIT));
        let held = bulkhead.try_acquire_owned().unwrap();
        let releaser = {
            let bulkhead = Arc::clone(&bulkhead);
            thread::spawn(move || {
                wait_for_waiters(&bulkhead, 1);
                drop(held);
            })
        };
        let permit = futures::executor::block_on(bulkhead.acquire_async()).expect("granted");
        assert_eq!(bulkhead.metrics().in_flight_calls(), 1);
        drop(permit);
        join_guarded(releaser);
        assert_quiescent(&bulkhead, 1);
    });
}

#[test]
fn acquire_async_dropped_after_first_poll_leaves_queue() {
    let bulkhead = Bulkhead::new("async-drop-queued", limit_wait(2, LONG_WAIT));
    let held: Vec<_> = (0..2).map(|_| bulkhead.try_acquire().unwrap()).collect();
    let (_counter, waker) = CountingWaker::new();
    let mut fut = Box::pin(bulkhead.acquire_async());
    assert!(poll_once(&mut fut, &waker).is_pending());
    assert_metrics(bulkhead.metrics(), 0, 2, 2, 1);
    drop(fut);
    assert_metrics(bulkhead.metrics(), 0, 2, 2, 0);
    // Nothing lingers: the released permits are free for newcomers, not held for a ghost.
    drop(held);
    assert_quiescent(&bulkhead, 2);
    let again: Vec<_> = (0..2).map(|_| bulkhead.try_acquire().unwrap()).collect();
    drop(again);
    assert_quiescent(&bulkhead, 2);
}

#[test]
fn acquire_owned_async_dropped_after_first_poll_leaves_queue() {
    let bulkhead = shared("async-owned-drop-queued", limit_wait(1, LONG_WAIT));
    let held = bulkhead.try_acquire().unwrap();
    let (_counter, waker) = CountingWaker::new();
    let mut fut = Box::pin(bulkhead.acquire_owned_async());
    assert!(poll_once(&mut fut, &waker).is_pending());
    assert_eq!(bulkhead.metrics().waiting_calls(), 1);
    drop(fut);
    assert_metrics(bulkhead.metrics(), 0, 1, 1, 0);
    drop(held);
    assert_quiescent(&bulkhead, 1);
}

#[test]
fn acquire_async_dropped_before_first_poll_changes_nothing() {
    let bulkhead = Bulkhead::new("async-drop-unpolled", limit_wait(1, LONG_WAIT));
    drop(bulkhead.acquire_async());
    assert_quiescent(&bulkhead, 1);
    let _held = bulkhead.try_acquire().unwrap();
    drop(bulkhead.acquire_async());
    assert_metrics(bulkhead.metrics(), 0, 1, 1, 0);
}

/// A permit granted to future A, which is then dropped without being polled again, goes
/// to the next waiter B.
#[test]
fn acquire_async_granted_then_dropped_passes_permit_to_next_waiter() {
    let bulkhead = Bulkhead::new("async-drop-granted", limit_wait(1, LONG_WAIT));
    let held = bulkhead.try_acquire().unwrap();
    let (a_counter, a_waker) = CountingWaker::new();
    let (b_counter, b_waker) = CountingWaker::new();
    let mut a = Box::pin(bulkhead.acquire_async());
    assert!(poll_once(&mut a, &a_waker).is_pending());
    let mut b = Box::pin(bulkhead.acquire_async());
    assert!(poll_once(&mut b, &b_waker).is_pending());
    assert_metrics(bulkhead.metrics(), 0, 1, 1, 2);

    drop(held); // granted to A, the oldest
    assert!(a_counter.wakes() >= 1);
    assert_eq!(b_counter.wakes(), 0, "B must not be woken while A holds the grant");
    assert_metrics(bulkhead.metrics(), 0, 1, 1, 1);

    drop(a); // never polled again: its permit must go to B
    assert!(b_counter.wakes() >= 1, "B must be woken by the hand-over");
    assert_metrics(bulkhead.metrics(), 0, 1, 1, 0);
    let permit = match poll_once(&mut b, &b_waker) {
        Poll::Ready(result) => result.expect("B is granted"),
        Poll::Pending => panic!("B did not get the permit A dropped"),
    };
    drop(permit);
    drop(b);
    assert_quiescent(&bulkhead, 1);
}

#[test]
fn acquire_owned_async_granted_then_dropped_passes_permit_to_next_waiter() {
    let bulkhead = shared("async-owned-drop-granted", limit_wait(1, LONG_WAIT));
    let held = bulkhead.try_acquire().unwrap();
    let (_a_counter, a_waker) = CountingWaker::new();
    let (b_counter, b_waker) = CountingWaker::new();
    let mut a = Box::pin(bulkhead.acquire_owned_async());
    assert!(poll_once(&mut a, &a_waker).is_pending());
    let mut b = Box::pin(bulkhead.acquire_owned_async());
    assert!(poll_once(&mut b, &b_waker).is_pending());
    drop(held);
    drop(a);
    assert!(b_counter.wakes() >= 1);
    let permit = match poll_once(&mut b, &b_waker) {
        Poll::Ready(result) => result.expect("B is granted"),
        Poll::Pending => panic!("B did not get the permit A dropped"),
    };
    assert_metrics(bulkhead.metrics(), 0, 1, 1, 0);
    drop(permit);
    assert_quiescent(&bulkhead, 1);
}

/// A permit granted to a dropped future passes to a sync waiter queued behind it.
#[test]
fn acquire_async_granted_then_dropped_passes_permit_to_sync_waiter() {
    with_hang_guard(|| {
        let bulkhead = shared("async-drop-to-sync", limit_wait(1, LONG_WAIT));
        let held = bulkhead.try_acquire().unwrap();
        let (_counter, waker) = CountingWaker::new();
        let mut a = Box::pin(bulkhead.acquire_async());
        assert!(poll_once(&mut a, &waker).is_pending());
        let sync_waiter = {
            let bulkhead = Arc::clone(&bulkhead);
            thread::spawn(move || bulkhead.acquire().map(drop))
        };
        wait_for_waiters(&bulkhead, 2);
        drop(held);
        assert!(!sync_waiter.is_finished());
        drop(a);
        join_guarded(sync_waiter).expect("the sync waiter gets the permit");
        assert_quiescent(&bulkhead, 1);
    });
}

#[test]
fn acquire_async_unbounded_wait_is_granted_on_release() {
    let bulkhead = Bulkhead::new("async-unbounded", limit_wait(1, Duration::MAX));
    let held = bulkhead.try_acquire().unwrap();
    let (counter, waker) = CountingWaker::new();
    let mut fut = Box::pin(bulkhead.acquire_async());
    assert!(poll_once(&mut fut, &waker).is_pending());
    drop(held);
    assert!(counter.wakes() >= 1);
    assert!(matches!(poll_once(&mut fut, &waker), Poll::Ready(Ok(_))));
}

#[test]
fn acquire_async_with_sleep_when_free_never_makes_a_sleep() {
    let bulkhead = Bulkhead::new("async-sleep-free", limit_wait(1, LONG_WAIT));
    let made = Arc::new(Mutex::new(Vec::new()));
    let gate = Gate::default();
    let fut = bulkhead.acquire_async_with_sleep({
        let made = Arc::clone(&made);
        let gate = gate.clone();
        move |wait| {
            made.lock().unwrap().push(wait);
            gate.sleep()
        }
    });
    let permit = futures::executor::block_on(fut).expect("granted");
    assert!(made.lock().unwrap().is_empty(), "make_sleep called without a wait");
    drop(permit);
    assert_quiescent(&bulkhead, 1);
}

#[test]
fn acquire_async_with_sleep_with_zero_wait_rejects_full_without_a_sleep() {
    let bulkhead = Bulkhead::new("async-sleep-zero", limit(1));
    let _held = bulkhead.try_acquire().unwrap();
    let made = Arc::new(Mutex::new(0));
    let err = futures::executor::block_on(bulkhead.acquire_async_with_sleep({
        let made = Arc::clone(&made);
        move |_| {
            *made.lock().unwrap() += 1;
            std::future::pending::<()>()
        }
    }))
    .unwrap_err();
    assert_eq!(err.reason(), RejectReason::Full);
    assert_eq!(err.waited(), Duration::ZERO);
    assert_eq!(*made.lock().unwrap(), 0);
}

#[test]
fn acquire_async_with_sleep_when_sleep_fires_times_out() {
    let max_wait = Duration::from_secs(30);
    let bulkhead = Bulkhead::new("async-sleep-fires", limit_wait(1, max_wait));
    let _held = bulkhead.try_acquire().unwrap();
    let made = Arc::new(Mutex::new(Vec::new()));
    let gate = Gate::default();
    let mut fut = Box::pin(bulkhead.acquire_async_with_sleep({
        let made = Arc::clone(&made);
        let gate = gate.clone();
        move |wait| {
            made.lock().unwrap().push(wait);
            gate.sleep()
        }
    }));
    let (counter, waker) = CountingWaker::new();
    assert!(poll_once(&mut fut, &waker).is_pending());
    assert_eq!(*made.lock().unwrap(), [max_wait], "make_sleep gets the configured max wait");
    assert_eq!(bulkhead.metrics().waiting_calls(), 1);
    assert!(poll_once(&mut fut, &waker).is_pending());
    gate.open();
    assert!(counter.wakes() >= 1, "the sleep's wake-up reaches the task");
    let err = match poll_once(&mut fut, &waker) {
        Poll::Ready(result) => result.unwrap_err(),
        Poll::Pending => panic!("the sleep fired but the acquire did not time out"),
    };
    assert_eq!(err.reason(), RejectReason::WaitTimedOut);
    assert!(err.waited() >= max_wait, "waited {:?}", err.waited());
    assert_eq!(made.lock().unwrap().len(), 1, "make_sleep is called once");
    assert_metrics(bulkhead.metrics(), 0, 1, 1, 0);
    drop(fut);
    assert_eq!(gate.live_sleeps(), 0);
}

#[test]
fn acquire_async_with_sleep_granted_before_sleep_fires_drops_the_sleep() {
    let bulkhead = Bulkhead::new("async-sleep-granted", limit_wait(1, LONG_WAIT));
    let held = bulkhead.try_acquire().unwrap();
    let gate = Gate::default();
    let mut fut = Box::pin(bulkhead.acquire_async_with_sleep({
        let gate = gate.clone();
        move |_| gate.sleep()
    }));
    let (counter, waker) = CountingWaker::new();
    assert!(poll_once(&mut fut, &waker).is_pending());
    assert_eq!(gate.live_sleeps(), 1);
    drop(held);
    assert!(counter.wakes() >= 1);
    let permit = match poll_once(&mut fut, &waker) {
        Poll::Ready(result) => result.expect("granted"),
        Poll::Pending => panic!("granted but pending"),
    };
    assert_eq!(gate.live_sleeps(), 0, "the sleep is dropped once the future completes");
    gate.open(); // too late to matter
    assert_metrics(bulkhead.metrics(), 0, 1, 1, 0);
    drop(permit);
    drop(fut);
    assert_quiescent(&bulkhead, 1);
}

#[test]
fn acquire_async_with_sleep_unbounded_wait_never_makes_a_sleep() {
    let bulkhead = Bulkhead::new("async-sleep-unbounded", limit_wait(1, Duration::MAX));
    let held = bulkhead.try_acquire().unwrap();
    let made = Arc::new(Mutex::new(0));
    let mut fut = Box::pin(bulkhead.acquire_async_with_sleep({
        let made = Arc::clone(&made);
        move |_| {
            *made.lock().unwrap() += 1;
            std::future::ready(())
        }
    }));
    let (_counter, waker) = CountingWaker::new();
    assert!(poll_once(&mut fut, &waker).is_pending());
    assert_eq!(*made.lock().unwrap(), 0);
    drop(held);
    assert!(matches!(poll_once(&mut fut, &waker), Poll::Ready(Ok(_))));
}

#[test]
fn acquire_async_with_sleep_dropped_while_queued_leaves_queue() {
    let bulkhead = Bulkhead::new("async-sleep-drop", limit_wait(1, LONG_WAIT));
    let held = bulkhead.try_acquire().unwrap();
    let gate = Gate::default();
    let mut fut = Box::pin(bulkhead.acquire_async_with_sleep({
        let gate = gate.clone();
        move |_| gate.sleep()
    }));
    let (_counter, waker) = CountingWaker::new();
    assert!(poll_once(&mut fut, &waker).is_pending());
    assert_eq!(bulkhead.metrics().waiting_calls(), 1);
    drop(fut);
    assert_eq!(gate.live_sleeps(), 0);
    assert_metrics(bulkhead.metrics(), 0, 1, 1, 0);
    drop(held);
    assert_quiescent(&bulkhead, 1);
}

/// The tokio-free bound: a real sleep on a plain thread executor bounds the wait.
#[test]
fn acquire_async_with_sleep_thread_timer_bounds_wait() {
    with_hang_guard(|| {
        let bulkhead = Bulkhead::new("async-sleep-thread", limit_wait(1, Duration::from_millis(5)));
        let _held = bulkhead.try_acquire().unwrap();
        let err = futures::executor::block_on(bulkhead.acquire_async_with_sleep(thread_sleep))
            .unwrap_err();
        assert_eq!(err.reason(), RejectReason::WaitTimedOut);
        assert!(err.waited() >= Duration::from_millis(5));
        assert_eq!(bulkhead.metrics().waiting_calls(), 0);
    });
}

/// A runtime-free sleep: a thread that wakes the task after `wait`.
fn thread_sleep(wait: Duration) -> GateSleep {
    let gate = Gate::default();
    let opener = gate.clone();
    thread::spawn(move || {
        thread::sleep(wait);
        opener.open();
    });
    gate.sleep()
}
