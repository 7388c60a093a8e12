//! `enable_counters` and the counts in `metrics()`: every outcome counted once, exact under
//! concurrency, across thread exits (slot reuse) and thread-local destructors.

mod common;

use std::cell::RefCell;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use bulkhead::{Bulkhead, BulkheadEventKind, OwnedPermit, RejectReason};
use common::*;

#[test]
fn counters_before_enable_read_zero_and_count_nothing() {
    let bulkhead = Bulkhead::new("c-off", limit(1));
    let held = bulkhead.try_acquire().unwrap();
    assert!(bulkhead.try_acquire().is_err());
    drop(held);
    let m = bulkhead.metrics();
    assert!(!m.is_counting());
    assert_eq!((m.calls_permitted(), m.calls_rejected_total(), m.calls_finished()), (0, 0, 0));
    // Counting starts at enable, not retroactively.
    bulkhead.enable_counters();
    bulkhead.enable_counters(); // idempotent
    assert!(bulkhead.metrics().is_counting());
    assert_eq!(bulkhead.metrics().calls_permitted(), 0);
    bulkhead.call(|| ()).unwrap();
    assert_eq!(bulkhead.metrics().calls_permitted(), 1);
}

#[test]
fn counters_count_every_outcome_once() {
    with_hang_guard(|| {
        let bulkhead = shared("c-outcomes", limit_wait_cap(1, Duration::from_millis(2), 1));
        bulkhead.enable_counters();
        bulkhead.call(|| ()).unwrap(); // permitted + finished
        let held = bulkhead.try_acquire().unwrap(); // permitted
        assert_eq!(bulkhead.try_acquire().unwrap_err().reason(), RejectReason::Full);
        assert_eq!(bulkhead.acquire().unwrap_err().reason(), RejectReason::WaitTimedOut);
        // One caller queues (the cap is 1); the next is refused at once.
        bulkhead.change_config(limit_wait_cap(1, LONG_WAIT, 1));
        let queued = {
            let bulkhead = Arc::clone(&bulkhead);
            thread::spawn(move || bulkhead.acquire().map(drop).is_ok())
        };
        wait_for_waiters(&bulkhead, 1);
        assert_eq!(bulkhead.acquire().unwrap_err().reason(), RejectReason::TooManyWaiting);
        drop(held); // finished; hands the permit to the queued caller
        assert!(join_guarded(queued)); // permitted after a wait + finished
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            bulkhead.call(|| std::panic::resume_unwind(Box::new("the call fails")))
        }));
        assert!(panicked.is_err()); // permitted + finished while unwinding

        let m = bulkhead.metrics();
        assert_eq!(m.calls_permitted(), 4);
        assert_eq!(m.calls_finished(), 4);
        assert_eq!(m.calls_rejected(RejectReason::Full), 1);
        assert_eq!(m.calls_rejected(RejectReason::WaitTimedOut), 1);
        assert_eq!(m.calls_rejected(RejectReason::TooManyWaiting), 1);
        assert_eq!(m.calls_rejected_total(), 3);
    });
}

#[test]
fn counters_count_async_hand_offs_and_cancellations_as_callers_saw_them() {
    let bulkhead = shared("c-async", limit_wait(1, LONG_WAIT));
    bulkhead.enable_counters();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let held = bulkhead.try_acquire_owned().unwrap();
        let waiting = tokio::spawn(bulkhead.acquire_owned_async());
        let cancelled = tokio::spawn(bulkhead.acquire_owned_async());
        while bulkhead.metrics().waiting_calls() < 2 {
            tokio::task::yield_now().await;
        }
        cancelled.abort(); // a queued future dropped: neither permitted nor rejected
        assert!(cancelled.await.unwrap_err().is_cancelled());
        drop(held);
        drop(waiting.await.unwrap().unwrap());
    });
    let m = bulkhead.metrics();
    assert_eq!((m.calls_permitted(), m.calls_finished(), m.calls_rejected_total()), (2, 2, 0));
    assert_quiescent(&bulkhead, 1);
}

/// More threads than the counters keep inline (8), each with its own cells: the sums are
/// exactly what the callers saw.
#[test]
fn counters_are_exact_across_many_threads() {
    const THREADS: usize = 24;
    const CALLS: u64 = 2_000;
    let bulkhead = shared("c-many", limit(3));
    bulkhead.enable_counters();
    let start = Arc::new(Barrier::new(THREADS));
    let workers: Vec<_> = (0..THREADS)
        .map(|_| {
            let (bulkhead, start) = (Arc::clone(&bulkhead), Arc::clone(&start));
            thread::spawn(move || {
                start.wait();
                let mut permitted = 0u64;
                for _ in 0..CALLS {
                    if bulkhead.call(thread::yield_now).is_ok() {
                        permitted += 1;
                    }
                }
                permitted
            })
        })
        .collect();
    let permitted: u64 = workers.into_iter().map(join_guarded).sum();
    let m = bulkhead.metrics();
    assert_eq!(m.calls_permitted(), permitted);
    assert_eq!(m.calls_finished(), permitted);
    assert_eq!(m.calls_rejected(RejectReason::Full), THREADS as u64 * CALLS - permitted);
}

/// Threads that exit give their slot to the next thread, which goes on counting in the same
/// cells: nothing is lost or counted twice.
#[test]
fn counters_survive_threads_exiting_and_slots_being_reused() {
    let bulkhead = shared("c-reuse", limit(1));
    bulkhead.enable_counters();
    let mut permitted = 0u64;
    for _ in 0..50 {
        let worker = {
            let bulkhead = Arc::clone(&bulkhead);
            thread::spawn(move || {
                let held = bulkhead.try_acquire().expect("nobody else holds it");
                assert!(bulkhead.try_acquire().is_err());
                drop(held);
            })
        };
        join_guarded(worker);
        permitted += 1;
        let m = bulkhead.metrics();
        assert_eq!((m.calls_permitted(), m.calls_finished()), (permitted, permitted));
        assert_eq!(m.calls_rejected(RejectReason::Full), permitted);
    }
}

thread_local! {
    static HELD: RefCell<Option<OwnedPermit>> = const { RefCell::new(None) };
}

/// A permit kept in a thread-local is dropped while the thread's thread-locals are torn
/// down, possibly after its counter slot was given back: it is still counted, once.
#[test]
fn counters_count_a_permit_dropped_by_a_thread_local_destructor() {
    let bulkhead = shared("c-tls", limit(2));
    bulkhead.enable_counters();
    let worker = {
        let bulkhead = Arc::clone(&bulkhead);
        thread::spawn(move || {
            let permit = bulkhead.try_acquire_owned().unwrap();
            HELD.with(|held| *held.borrow_mut() = Some(permit));
        })
    };
    join_guarded(worker);
    let m = bulkhead.metrics();
    assert_eq!((m.calls_permitted(), m.calls_finished()), (1, 1));
    assert_quiescent(&bulkhead, 2);
}

/// `close` meets the counters: refusals of newcomers and of queued callers (sync and async)
/// are counted under `Closed`; listeners hear `Closed` once, and each refusal.
#[test]
fn counters_count_closed_refusals_and_listeners_hear_close() {
    with_hang_guard(|| {
        let bulkhead = shared("c-closed", limit_wait(1, Duration::MAX));
        bulkhead.enable_counters();
        let heard = Arc::new(std::sync::Mutex::new(Vec::new()));
        {
            let heard = Arc::clone(&heard);
            bulkhead.on_event(move |event| heard.lock().unwrap().push(event.kind()));
        }
        let held = bulkhead.try_acquire_owned().unwrap();
        let sync_waiter = {
            let bulkhead = Arc::clone(&bulkhead);
            thread::spawn(move || bulkhead.acquire().map(drop).unwrap_err().reason())
        };
        wait_for_waiters(&bulkhead, 1);
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let reason = runtime.block_on(async {
            let async_waiter = tokio::spawn({
                let bulkhead = Arc::clone(&bulkhead);
                async move { bulkhead.acquire_async().await.map(drop).unwrap_err().reason() }
            });
            while bulkhead.metrics().waiting_calls() < 2 {
                tokio::task::yield_now().await;
            }
            assert!(bulkhead.close());
            async_waiter.await.unwrap()
        });
        assert_eq!(reason, RejectReason::Closed);
        assert_eq!(join_guarded(sync_waiter), RejectReason::Closed);
        assert_eq!(bulkhead.try_acquire().unwrap_err().reason(), RejectReason::Closed);
        assert!(!bulkhead.close(), "closed once");
        drop(held);

        let m = bulkhead.metrics();
        assert!(m.is_closed());
        assert_eq!(m.calls_rejected(RejectReason::Closed), 3);
        assert_eq!(m.calls_rejected_total(), 3);
        assert_eq!((m.calls_permitted(), m.calls_finished()), (1, 1));
        let heard = heard.lock().unwrap();
        let closes = heard.iter().filter(|k| matches!(k, BulkheadEventKind::Closed));
        assert_eq!(closes.count(), 1, "{heard:?}");
        let refusals = heard
            .iter()
            .filter(|k| matches!(k, BulkheadEventKind::CallRejected(RejectReason::Closed)));
        assert_eq!(refusals.count(), 3, "{heard:?}");
    });
}

/// The counters count inline only while nothing else observes (issue 21): a listener or a
/// limit controller that comes later sends every path back to the full observers, and the
/// counts stay exact across the switch, for `Full` and `Closed` refusals alike.
#[test]
fn counters_stay_exact_when_a_listener_joins_and_listeners_hear_every_later_call() {
    let bulkhead = Bulkhead::new("c-alone", limit(1));
    bulkhead.enable_counters();
    let rounds = |n: u64| {
        for _ in 0..n {
            let held = bulkhead.try_acquire().unwrap();
            assert_eq!(bulkhead.try_acquire().unwrap_err().reason(), RejectReason::Full);
            drop(held);
        }
    };
    rounds(3); // counted alone, inline
               // A permit granted while the counters alone observed, released after a listener came:
               // the listener hears its end (a call is observed whole once anyone observed its grant).
    let straddling = bulkhead.try_acquire().unwrap();
    let heard = Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = Arc::clone(&heard);
    bulkhead.on_event(move |event| sink.lock().unwrap().push(event.kind()));
    drop(straddling);
    assert_eq!(heard.lock().unwrap().clone(), vec![BulkheadEventKind::CallFinished]);
    heard.lock().unwrap().clear();
    rounds(2); // counted by the full path, and told
    let m = bulkhead.metrics();
    assert_eq!((m.calls_permitted(), m.calls_finished()), (6, 6));
    assert_eq!(m.calls_rejected(RejectReason::Full), 5);
    let heard = heard.lock().unwrap().clone();
    let rejected = heard.iter().filter(|k| matches!(k, BulkheadEventKind::CallRejected(_))).count();
    let permitted = heard.iter().filter(|k| matches!(k, BulkheadEventKind::CallPermitted)).count();
    let finished = heard.iter().filter(|k| matches!(k, BulkheadEventKind::CallFinished)).count();
    assert_eq!((permitted, rejected, finished), (2, 2, 2), "{heard:?}");

    // A closed refusal counted alone lands in `Closed`, not `Full`.
    let closed = Bulkhead::new("c-alone-closed", limit(1));
    closed.enable_counters();
    assert!(closed.try_acquire().is_ok());
    closed.close();
    assert_eq!(closed.try_acquire().unwrap_err().reason(), RejectReason::Closed);
    let m = closed.metrics();
    assert_eq!(m.calls_rejected(RejectReason::Closed), 1);
    assert_eq!(m.calls_rejected(RejectReason::Full), 0);
}

/// The zero-wait refusal through the waiting API with the counters alone observing (stop
/// 39: `acquire`, `call`, `acquire_timeout(ZERO)`, `acquire_async` and `call_async` now make
/// the refusal `try_acquire` makes, the counted refusal's inline path): each refusal counted
/// once, under its reason, from several threads at once; and once calls have finished, each
/// refusal carries a Retry-After estimate, as `try_acquire`'s does.
#[test]
fn counters_count_every_zero_wait_refusal_through_the_waiting_api_once() {
    with_hang_guard(|| {
        let bulkhead = shared("c-zero-wait", limit(2));
        bulkhead.enable_counters();
        for _ in 0..4 {
            bulkhead.call(|| ()).unwrap();
        }
        // Past the estimator's first look (1 ms), so that it has an average.
        thread::sleep(Duration::from_millis(3));
        let held = (bulkhead.try_acquire_owned().unwrap(), bulkhead.try_acquire_owned().unwrap());
        // One refusal first, alone: it takes the estimator's first look. (Racing threads
        // that lose that look would see no average yet.)
        let first = bulkhead.acquire().map(drop).unwrap_err();
        assert!(first.retry_after().is_some(), "an estimate once calls finished");
        let (threads, rounds) = (4, 500);
        let barrier = Arc::new(Barrier::new(threads));
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                let (b, barrier) = (Arc::clone(&bulkhead), Arc::clone(&barrier));
                thread::spawn(move || {
                    let (_, waker) = CountingWaker::new();
                    barrier.wait();
                    let mut estimates = 0;
                    for _ in 0..rounds {
                        let errors = [
                            b.acquire().map(drop).unwrap_err(),
                            b.call(|| ()).unwrap_err(),
                            b.acquire_timeout(Duration::ZERO).map(drop).unwrap_err(),
                            match poll_once(&mut Box::pin(b.acquire_async()), &waker) {
                                std::task::Poll::Ready(Err(e)) => e,
                                other => panic!("a zero-wait refusal on the first poll: {other:?}"),
                            },
                            match poll_once(&mut Box::pin(b.call_async(async {})), &waker) {
                                std::task::Poll::Ready(Err(e)) => e,
                                other => panic!("a zero-wait refusal on the first poll: {other:?}"),
                            },
                        ];
                        for e in &errors {
                            assert_eq!(e.reason(), RejectReason::Full);
                            assert_eq!(e.max_concurrent_calls(), 2);
                            estimates += usize::from(e.retry_after().is_some());
                        }
                    }
                    estimates
                })
            })
            .collect();
        let estimates: usize = workers.into_iter().map(|w| w.join().unwrap()).sum();
        let refused = (threads * rounds * 5) as u64;
        assert_eq!(estimates as u64, refused, "every refusal carries an estimate");
        let refused = refused + 1; // and the first one
        let m = bulkhead.metrics();
        assert_eq!(m.calls_rejected(RejectReason::Full), refused);
        assert_eq!(m.calls_rejected_total(), refused);
        assert_eq!((m.calls_permitted(), m.calls_finished()), (6, 4));
        assert!(bulkhead.close());
        assert_eq!(bulkhead.acquire().map(drop).unwrap_err().reason(), RejectReason::Closed);
        assert_eq!(bulkhead.metrics().calls_rejected(RejectReason::Closed), 1);
        drop(held);
        assert_eq!(bulkhead.metrics().calls_finished(), 6);
    });
}
