//! Work conservation where features meet (issue 29): weights x the deadline timer, headroom x
//! shrink, drain x close, and wakers that panic on every wake path. Each test failed on
//! main before the fix it names (b6206ee), and `verification/mutants.sh` seeds each bug back.

mod common;

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::task::{Context, Poll, Wake, Waker};
use std::thread;
use std::time::{Duration, Instant};

use bulkhead::{Bulkhead, BulkheadConfig, Criticality, QueueOrder, RejectReason, Request};
use common::{limit_wait, poll_once, wait_for_waiters, wait_until, CountingWaker, HANG_GUARD};

fn config(limit: usize, wait: Duration, headroom: usize) -> BulkheadConfig {
    BulkheadConfig::builder()
        .max_concurrent_calls(limit)
        .max_wait_duration(wait)
        .sheddable_headroom(headroom)
        .build()
        .expect("valid config")
}

fn sheddable(n: u32) -> Request {
    Request::permits(n).criticality(Criticality::Sheddable)
}

#[track_caller]
fn assert_conserving(bulkhead: &Bulkhead) {
    if let Err(violation) = bulkhead.check_work_conservation() {
        panic!("work conservation: {violation}");
    }
}

/// A waker whose `wake` (and `wake_by_ref`) panics: foreign code the bulkhead calls.
struct PanickingWaker {
    calls: AtomicUsize,
}

impl PanickingWaker {
    fn new() -> (Arc<PanickingWaker>, Waker) {
        let inner = Arc::new(PanickingWaker { calls: AtomicUsize::new(0) });
        (Arc::clone(&inner), Waker::from(inner))
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

impl Wake for PanickingWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.calls.fetch_add(1, Ordering::SeqCst);
        panic!("a waker that panics in wake()");
    }
}

// (1) A timed-out weighted head: the timer's withdrawal serves the queue behind it.

#[test]
fn a_timed_out_weighted_head_left_unpolled_strands_no_slot() {
    let bulkhead = Arc::new(Bulkhead::new("db", limit_wait(3, Duration::from_millis(50))));
    let held = bulkhead.try_acquire().unwrap();
    // The head asks for 3 with 2 free, is polled once, then kept alive and never polled
    // again (a future parked in a `select!` loop).
    let (_, waker) = CountingWaker::new();
    let mut head = bulkhead.acquire_many_async(3);
    assert!(poll_once(&mut head, &waker).is_pending());
    // Behind it, a thread waits for 1 with a bound of its own far beyond the head's.
    let behind = {
        let bulkhead = Arc::clone(&bulkhead);
        thread::spawn(move || {
            bulkhead
                .acquire_timeout(HANG_GUARD / 2)
                .map(|permit| permit.ignore())
                .map_err(|e| e.reason())
        })
    };
    wait_until("the waiter behind to finish", || behind.is_finished());
    // Granted once the timer withdrew the head, not refused at its own deadline.
    assert_eq!(behind.join().unwrap(), Ok(()));
    // `ignore` forgot nothing: the permit went back when dropped.
    drop(held);
    // Nobody waits now (the head's future is still alive): every slot is free to newcomers.
    assert_eq!(bulkhead.metrics().waiting_calls(), 0);
    assert_conserving(&bulkhead);
    let three: Vec<_> = (0..3).map(|_| bulkhead.try_acquire().expect("a free slot")).collect();
    drop(three);
    assert!(matches!(
        poll_once(&mut head, &waker),
        Poll::Ready(Err(e)) if e.reason() == RejectReason::WaitTimedOut
    ));
}

#[test]
fn a_timed_out_head_with_nobody_behind_clears_the_waiters_flag() {
    let bulkhead = Bulkhead::new("db", limit_wait(3, Duration::from_millis(20)));
    let held = bulkhead.try_acquire().unwrap();
    let (_, waker) = CountingWaker::new();
    let mut head = bulkhead.acquire_many_async(3);
    assert!(poll_once(&mut head, &waker).is_pending());
    wait_for_waiters(&bulkhead, 0);
    // The stale future is never touched before these: the timer's withdrawal left no flag.
    assert_conserving(&bulkhead);
    let two = bulkhead.try_acquire_many(2).expect("2 of 3 free, nobody waiting");
    drop((two, held));
    drop(head);
    common::assert_quiescent(&bulkhead, 3);
}

// (2) A request that can never fit under its class is refused, at enqueue and whenever the
// limit or the headroom moves, wherever it stands in the queue.

#[test]
fn a_sheddable_request_above_the_limit_less_the_headroom_is_refused_not_queued() {
    let bulkhead = Bulkhead::new("db", config(4, Duration::from_secs(30), 2));
    let (_, waker) = CountingWaker::new();
    let mut never = bulkhead.acquire_many_async(sheddable(3));
    match poll_once(&mut never, &waker) {
        Poll::Ready(Err(e)) => assert_eq!(e.reason(), RejectReason::ExceedsLimit),
        other => panic!("3 + headroom 2 > 4 must be refused at once, got {other:?}"),
    }
    let refused = with_guard(|b| b.acquire_many(sheddable(3)).map(drop).unwrap_err(), &bulkhead);
    assert_eq!(refused.reason(), RejectReason::ExceedsLimit);
    // Nobody queued: every default call finds all 4 slots.
    assert_conserving(&bulkhead);
    let four = bulkhead.try_acquire_many(4).expect("all 4 free");
    drop(four);
    // 2 + 2 fits: it is granted.
    assert_eq!(bulkhead.try_acquire_many(sheddable(2)).unwrap().num_permits(), 2);
}

fn with_guard<T>(f: impl FnOnce(&Bulkhead) -> T, bulkhead: &Bulkhead) -> T {
    let start = Instant::now();
    let value = f(bulkhead);
    assert!(start.elapsed() < HANG_GUARD, "hang guard");
    value
}

#[test]
fn a_shrink_refuses_a_queued_sheddable_request_that_no_longer_fits_even_behind_others() {
    let bulkhead = Bulkhead::new("db", config(8, Duration::from_secs(30), 2));
    let held = bulkhead.try_acquire_many(8).unwrap();
    let (_, waker) = CountingWaker::new();
    // A default waiter for 1 at the head, a sheddable one for 3 behind it (3 + 2 <= 8).
    let mut first = bulkhead.acquire_async();
    assert!(poll_once(&mut first, &waker).is_pending());
    let mut unfit = bulkhead.acquire_many_async(sheddable(3));
    assert!(poll_once(&mut unfit, &waker).is_pending());
    assert_eq!(bulkhead.metrics().waiting_calls(), 2);
    // Shrink to 4: 3 + 2 > 4, so the sheddable waiter can never be granted: refused at once.
    bulkhead.change_config(config(4, Duration::from_secs(30), 2));
    assert_eq!(bulkhead.metrics().waiting_calls(), 1, "the unfit waiter left the queue");
    match poll_once(&mut unfit, &waker) {
        Poll::Ready(Err(e)) => assert_eq!(e.reason(), RejectReason::ExceedsLimit),
        other => panic!("refused when the limit moved, got {other:?}"),
    }
    assert!(poll_once(&mut first, &waker).is_pending());
    assert_conserving(&bulkhead);
    drop(held);
    assert!(poll_once(&mut first, &waker).is_ready());
}

#[test]
fn a_larger_headroom_refuses_a_queued_sheddable_request_that_no_longer_fits() {
    let bulkhead = Bulkhead::new("db", config(8, Duration::from_secs(30), 2));
    let held = bulkhead.try_acquire_many(8).unwrap();
    let (_, waker) = CountingWaker::new();
    let mut unfit = bulkhead.acquire_many_async(sheddable(3));
    assert!(poll_once(&mut unfit, &waker).is_pending());
    bulkhead.change_config(config(8, Duration::from_secs(30), 6));
    match poll_once(&mut unfit, &waker) {
        Poll::Ready(Err(e)) => assert_eq!(e.reason(), RejectReason::ExceedsLimit),
        other => panic!("3 + 6 > 8: refused when the headroom moved, got {other:?}"),
    }
    assert_conserving(&bulkhead);
    drop(held);
    common::assert_quiescent(&bulkhead, 8);
}

#[test]
fn a_default_call_finds_the_headroom_while_a_sheddable_waiter_waits() {
    let bulkhead = Bulkhead::new("db", config(4, Duration::from_secs(30), 2));
    let held = bulkhead.try_acquire_many(2).unwrap();
    let (_, waker) = CountingWaker::new();
    // 2 free, but a sheddable caller must leave 2: it waits.
    let mut shed = bulkhead.acquire_async_request(sheddable(1));
    assert!(poll_once(&mut shed, &waker).is_pending());
    assert_conserving(&bulkhead);
    // A default call is served before it: the headroom is for default calls.
    let one = bulkhead.try_acquire().expect("a default call finds the headroom");
    let two = bulkhead.try_acquire_many(1).expect("the weighted verb too");
    assert!(bulkhead.try_acquire().is_err(), "now full");
    drop((one, two));
    assert!(poll_once(&mut shed, &waker).is_pending(), "2 free: still inside the headroom");
    drop(held);
    assert!(matches!(poll_once(&mut shed, &waker), Poll::Ready(Ok(_))));
}

trait RequestAsync {
    fn acquire_async_request(&self, request: Request) -> bulkhead::Acquire<'_>;
}

impl RequestAsync for Bulkhead {
    fn acquire_async_request(&self, request: Request) -> bulkhead::Acquire<'_> {
        self.acquire_many_async(request)
    }
}

#[test]
fn an_adaptive_style_limit_below_headroom_plus_one_refuses_every_queued_sheddable_waiter() {
    let bulkhead = Bulkhead::new("db", config(6, Duration::from_secs(30), 2));
    let held = bulkhead.try_acquire_many(6).unwrap();
    let (_, waker) = CountingWaker::new();
    let mut waiters: Vec<_> = (0..3).map(|_| bulkhead.acquire_many_async(sheddable(1))).collect();
    for w in &mut waiters {
        assert!(poll_once(w, &waker).is_pending());
    }
    // A limit of 2 leaves no room for a sheddable call (1 + 2 > 2): all three refused.
    bulkhead.change_config(config(2, Duration::from_secs(30), 2));
    for w in &mut waiters {
        assert!(matches!(
            poll_once(w, &waker),
            Poll::Ready(Err(e)) if e.reason() == RejectReason::ExceedsLimit
        ));
    }
    assert_eq!(bulkhead.metrics().waiting_calls(), 0);
    assert_conserving(&bulkhead);
    drop(held);
    common::assert_quiescent(&bulkhead, 2);
}

// (4) `wait_drained(ZERO)` never blocks, so it never panics in an async context.

#[cfg(feature = "tokio")]
#[tokio::test(flavor = "current_thread")]
async fn wait_drained_zero_on_a_runtime_thread_neither_panics_nor_leaks() {
    let bulkhead = Bulkhead::new("db", limit_wait(1, Duration::ZERO));
    let held = bulkhead.try_acquire().unwrap();
    bulkhead.close();
    for _ in 0..3 {
        assert!(!bulkhead.wait_drained(Duration::ZERO), "a call is still in flight");
    }
    drop(held);
    assert!(bulkhead.wait_drained(Duration::ZERO), "drained");
    assert_conserving(&bulkhead);
}

#[cfg(feature = "tokio")]
#[tokio::test(flavor = "current_thread")]
async fn a_blocking_wait_drained_refused_on_a_runtime_thread_leaves_no_drain_wait() {
    let bulkhead = Bulkhead::new("db", limit_wait(1, Duration::ZERO));
    let held = bulkhead.try_acquire().unwrap();
    let refused = catch_unwind(AssertUnwindSafe(|| bulkhead.wait_drained(Duration::from_secs(1))));
    assert!(refused.is_err(), "a wait that would block a runtime thread panics");
    // Its drain wait left the queue as it panicked (cargo-mutants: the unwind guard's
    // withdrawal dropped went unseen while only the end state was checked).
    assert_eq!(bulkhead.queue_slots_in_use(), 0, "the refused drain wait holds no slot");
    bulkhead.close();
    drop(held);
    bulkhead.drained().await;
    assert!(bulkhead.wait_drained(Duration::ZERO));
    assert_eq!(bulkhead.queue_slots_in_use(), 0);
}

// (5) A waker that panics takes nobody else down: every wake path.

/// Polls `fut` once with a panicking waker, then returns it (pending).
fn queue_with_panicking_waker<F: Future + Unpin>(mut fut: F) -> (F, Arc<PanickingWaker>) {
    let (count, waker) = PanickingWaker::new();
    assert!(Pin::new(&mut fut).poll(&mut Context::from_waker(&waker)).is_pending());
    (fut, count)
}

#[test]
fn a_release_serves_every_waiter_it_satisfies_though_the_first_waker_panics() {
    let bulkhead = Bulkhead::new("db", limit_wait(2, Duration::from_secs(30)));
    let both = bulkhead.try_acquire_many(2).unwrap();
    let (mut bad, bad_count) = queue_with_panicking_waker(bulkhead.acquire_async());
    let (good_count, good_waker) = CountingWaker::new();
    let mut good = bulkhead.acquire_async();
    assert!(poll_once(&mut good, &good_waker).is_pending());
    // One release of 2 satisfies both; the first wake panics.
    let released = catch_unwind(AssertUnwindSafe(|| drop(both)));
    assert!(released.is_ok(), "the panic is contained, not raised in the releasing call");
    assert_eq!(bad_count.calls(), 1);
    assert_eq!(good_count.wakes(), 1, "the waiter behind was woken too");
    assert!(matches!(poll_once(&mut good, &good_waker), Poll::Ready(Ok(_))));
    assert!(matches!(poll_once(&mut bad, &good_waker), Poll::Ready(Ok(_))));
    assert_eq!(bulkhead.metrics().available_concurrent_calls(), 2);
}

#[test]
fn close_refuses_every_waiter_though_a_waker_panics() {
    let bulkhead = Bulkhead::new("db", limit_wait(1, Duration::from_secs(30)));
    let held = bulkhead.try_acquire().unwrap();
    let (mut bad, bad_count) = queue_with_panicking_waker(bulkhead.acquire_async());
    let (good_count, good_waker) = CountingWaker::new();
    let mut good = bulkhead.acquire_async();
    assert!(poll_once(&mut good, &good_waker).is_pending());
    assert!(catch_unwind(AssertUnwindSafe(|| bulkhead.close())).is_ok());
    assert_eq!((bad_count.calls(), good_count.wakes()), (1, 1));
    for fut in [&mut bad, &mut good] {
        assert!(matches!(
            poll_once(fut, &good_waker),
            Poll::Ready(Err(e)) if e.reason() == RejectReason::Closed
        ));
    }
    drop(held);
    assert!(bulkhead.wait_drained(Duration::ZERO));
}

#[test]
fn growth_by_change_config_serves_every_waiter_though_a_waker_panics() {
    let bulkhead = Bulkhead::new("db", limit_wait(1, Duration::from_secs(30)));
    let held = bulkhead.try_acquire().unwrap();
    let (mut bad, _) = queue_with_panicking_waker(bulkhead.acquire_async());
    let (good_count, good_waker) = CountingWaker::new();
    let mut good = bulkhead.acquire_async();
    assert!(poll_once(&mut good, &good_waker).is_pending());
    let grown = catch_unwind(AssertUnwindSafe(|| {
        bulkhead.change_config(limit_wait(3, Duration::from_secs(30)));
    }));
    assert!(grown.is_ok());
    assert_eq!(good_count.wakes(), 1);
    assert!(matches!(poll_once(&mut good, &good_waker), Poll::Ready(Ok(_))));
    assert!(matches!(poll_once(&mut bad, &good_waker), Poll::Ready(Ok(_))));
    drop(held);
    common::assert_quiescent(&bulkhead, 3);
}

#[test]
fn an_eviction_to_make_room_survives_the_evicted_waiters_panicking_waker() {
    let config = BulkheadConfig::builder()
        .max_concurrent_calls(1)
        .max_wait_duration(Duration::from_secs(30))
        .max_waiting_calls(1)
        .build()
        .unwrap();
    let bulkhead = Bulkhead::new("db", config);
    let held = bulkhead.try_acquire().unwrap();
    let (mut shed, shed_count) =
        queue_with_panicking_waker(bulkhead.acquire_many_async(Criticality::Sheddable));
    let (_, waker) = CountingWaker::new();
    let mut critical = bulkhead.acquire_many_async(Criticality::Critical);
    let polled = catch_unwind(AssertUnwindSafe(|| poll_once(&mut critical, &waker).is_pending()));
    assert_eq!(polled.ok(), Some(true), "the newcomer queued; the panic was contained");
    assert_eq!(shed_count.calls(), 1);
    assert!(matches!(
        poll_once(&mut shed, &waker),
        Poll::Ready(Err(e)) if e.reason() == RejectReason::Evicted
    ));
    drop(held);
    assert!(matches!(poll_once(&mut critical, &waker), Poll::Ready(Ok(_))));
}

#[test]
fn the_withdrawal_of_a_weighted_head_serves_the_next_though_its_waker_panics() {
    let bulkhead = Bulkhead::new("db", limit_wait(3, Duration::from_secs(30)));
    let held = bulkhead.try_acquire().unwrap();
    let (_, waker) = CountingWaker::new();
    let mut head = bulkhead.acquire_many_async(3);
    assert!(poll_once(&mut head, &waker).is_pending());
    let (mut one, one_count) = queue_with_panicking_waker(bulkhead.acquire_async());
    let (mut two, _) = queue_with_panicking_waker(bulkhead.acquire_async());
    // The head leaves: the next two fit the 2 free slots; both wakes panic.
    assert!(catch_unwind(AssertUnwindSafe(|| drop(head))).is_ok());
    assert_eq!(one_count.calls(), 1);
    assert!(matches!(poll_once(&mut one, &waker), Poll::Ready(Ok(_))));
    assert!(matches!(poll_once(&mut two, &waker), Poll::Ready(Ok(_))));
    drop(held);
}

#[test]
fn the_timer_thread_survives_a_panicking_waker_and_keeps_every_other_deadline() {
    let a = Bulkhead::new("a", limit_wait(1, Duration::from_millis(10)));
    let held_a = a.try_acquire().unwrap();
    let (mut bad, bad_count) = queue_with_panicking_waker(a.acquire_async());
    wait_until("the timer to fire the panicking waker", || bad_count.calls() == 1);
    assert!(matches!(
        poll_once(&mut bad, &Waker::noop().clone()),
        Poll::Ready(Err(e)) if e.reason() == RejectReason::WaitTimedOut
    ));
    // Twice more, on another bulkhead, after the panic: the timer thread still fires.
    let b = Arc::new(Bulkhead::new("b", limit_wait(1, Duration::from_millis(20))));
    let held_b = b.try_acquire().unwrap();
    for _ in 0..2 {
        let (tx, rx) = mpsc::channel();
        let b2 = Arc::clone(&b);
        thread::spawn(move || {
            let _ = tx.send(
                futures::executor::block_on(b2.acquire_async()).map(drop).map_err(|e| e.reason()),
            );
        });
        assert_eq!(rx.recv_timeout(HANG_GUARD), Ok(Err(RejectReason::WaitTimedOut)));
    }
    drop((held_a, held_b));
}

#[test]
fn a_queue_order_change_keeps_serving_after_a_panicking_waker() {
    // LIFO: the newest waiter is served first; the panicking one is the newest.
    let bulkhead = Bulkhead::new("db", limit_wait(1, Duration::from_secs(30)));
    let held = bulkhead.try_acquire().unwrap();
    let (good_count, good_waker) = CountingWaker::new();
    let mut good = bulkhead.acquire_async();
    assert!(poll_once(&mut good, &good_waker).is_pending());
    let (mut bad, _) = queue_with_panicking_waker(bulkhead.acquire_async());
    let lifo = BulkheadConfig::builder()
        .max_concurrent_calls(2)
        .max_wait_duration(Duration::from_secs(30))
        .queue_order(QueueOrder::Lifo)
        .build()
        .unwrap();
    assert!(catch_unwind(AssertUnwindSafe(|| bulkhead.change_config(lifo))).is_ok());
    assert_eq!(good_count.wakes(), 0, "one new slot: the newest (panicking) waiter got it");
    assert!(matches!(poll_once(&mut bad, &good_waker), Poll::Ready(Ok(_))));
    assert!(catch_unwind(AssertUnwindSafe(|| drop(held))).is_ok());
    assert!(matches!(poll_once(&mut good, &good_waker), Poll::Ready(Ok(_))));
}
