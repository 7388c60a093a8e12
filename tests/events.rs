//! `on_event`: `CallPermitted`, `CallRejected(reason)` and `CallFinished`, in order; a
//! panicking listener loses and duplicates no permit.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::thread;
use std::time::Duration;

use bulkhead::{Bulkhead, BulkheadEventKind as Kind, RejectReason};
use common::*;

type Log = Arc<Mutex<Vec<Kind>>>;

/// Registers a listener recording every event's kind, and checks every event names the
/// bulkhead.
fn record(bulkhead: &Bulkhead) -> Log {
    let log: Log = Arc::default();
    let sink = Arc::clone(&log);
    let name = bulkhead.name().to_owned();
    bulkhead.on_event(move |event| {
        assert_eq!(event.bulkhead_name(), name);
        sink.lock().unwrap().push(event.kind());
    });
    log
}

fn take(log: &Log) -> Vec<Kind> {
    std::mem::take(&mut *log.lock().unwrap())
}

#[test]
fn events_for_try_acquire_and_drop_come_in_order() {
    let bulkhead = Bulkhead::new("ev-try", limit(1));
    let log = record(&bulkhead);
    let permit = bulkhead.try_acquire().unwrap();
    assert_eq!(take(&log), [Kind::CallPermitted]);
    assert!(bulkhead.try_acquire().is_err());
    assert_eq!(take(&log), [Kind::CallRejected(RejectReason::Full)]);
    drop(permit);
    assert_eq!(take(&log), [Kind::CallFinished]);
}

#[test]
fn events_for_owned_permit_come_in_order() {
    let bulkhead = shared("ev-owned", limit(1));
    let log = record(&bulkhead);
    let permit = bulkhead.try_acquire_owned().unwrap();
    assert!(bulkhead.try_acquire_owned().is_err());
    thread::spawn(move || drop(permit)).join().unwrap();
    let permit = bulkhead.acquire_owned().unwrap();
    drop(permit);
    assert_eq!(
        take(&log),
        [
            Kind::CallPermitted,
            Kind::CallRejected(RejectReason::Full),
            Kind::CallFinished,
            Kind::CallPermitted,
            Kind::CallFinished,
        ]
    );
}

#[test]
fn events_for_timeout_report_wait_timed_out() {
    let bulkhead = Bulkhead::new("ev-timeout", limit_wait(1, Duration::from_millis(2)));
    let log = record(&bulkhead);
    let _held = bulkhead.try_acquire().unwrap();
    assert!(bulkhead.acquire().is_err());
    assert_eq!(take(&log), [Kind::CallPermitted, Kind::CallRejected(RejectReason::WaitTimedOut)]);
}

#[test]
fn events_for_waiter_cap_report_too_many_waiting() {
    let bulkhead = Bulkhead::new("ev-cap", limit_wait_cap(1, LONG_WAIT, 0));
    let log = record(&bulkhead);
    let _held = bulkhead.try_acquire().unwrap();
    assert!(bulkhead.acquire().is_err());
    assert_eq!(take(&log), [Kind::CallPermitted, Kind::CallRejected(RejectReason::TooManyWaiting)]);
}

#[test]
fn events_for_call_are_permitted_then_finished() {
    let bulkhead = Bulkhead::new("ev-call", limit(1));
    let log = record(&bulkhead);
    let inside = bulkhead.call(|| take(&log)).unwrap();
    assert_eq!(inside, [Kind::CallPermitted], "permitted before the call runs");
    assert_eq!(take(&log), [Kind::CallFinished]);
    let _held = bulkhead.try_acquire().unwrap();
    take(&log);
    assert!(bulkhead.call(|| unreachable!("not run when rejected")).is_err());
    assert_eq!(take(&log), [Kind::CallRejected(RejectReason::Full)]);
}

#[test]
fn events_for_panicking_call_are_permitted_then_finished() {
    let bulkhead = Bulkhead::new("ev-call-panic", limit(1));
    let log = record(&bulkhead);
    let result =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| bulkhead.call(|| panic!("boom"))));
    assert!(result.is_err());
    assert_eq!(take(&log), [Kind::CallPermitted, Kind::CallFinished]);
}

/// The waiter's `CallPermitted` is emitted on its own thread, the holder's `CallFinished` on
/// the releasing one, so across the hand-off their relative order is not fixed; each call's
/// own events come in order.
#[test]
fn events_for_queued_sync_waiter_are_permitted_on_grant() {
    with_hang_guard(|| {
        let bulkhead = shared("ev-sync-waiter", limit_wait(1, LONG_WAIT));
        let by_thread = Arc::new(Mutex::new(Vec::new()));
        {
            let sink = Arc::clone(&by_thread);
            bulkhead.on_event(move |event| {
                sink.lock().unwrap().push((thread::current().id(), event.kind()));
            });
        }
        let held = bulkhead.try_acquire().unwrap();
        let waiter = {
            let bulkhead = Arc::clone(&bulkhead);
            thread::spawn(move || bulkhead.acquire().map(drop))
        };
        let waiter_id = waiter.thread().id();
        wait_for_waiters(&bulkhead, 1);
        drop(held);
        join_guarded(waiter).expect("granted");
        let events = by_thread.lock().unwrap().clone();
        let of = |id| events.iter().filter(|(t, _)| *t == id).map(|(_, k)| *k).collect::<Vec<_>>();
        assert_eq!(of(thread::current().id()), [Kind::CallPermitted, Kind::CallFinished]);
        assert_eq!(of(waiter_id), [Kind::CallPermitted, Kind::CallFinished]);
        assert_eq!(events.len(), 4, "{events:?}");
    });
}

#[test]
fn events_for_async_acquire_come_in_order() {
    let bulkhead = Bulkhead::new("ev-async", limit(1));
    let log = record(&bulkhead);
    let permit = futures::executor::block_on(bulkhead.acquire_async()).unwrap();
    assert!(futures::executor::block_on(bulkhead.acquire_async()).is_err());
    drop(permit);
    assert_eq!(
        take(&log),
        [Kind::CallPermitted, Kind::CallRejected(RejectReason::Full), Kind::CallFinished]
    );
}

/// A future that queued and was later granted must report `CallPermitted` like any other
/// grant: its permit's drop reports `CallFinished`, and the two must pair up.
#[test]
fn events_for_queued_async_waiter_are_permitted_on_grant() {
    let bulkhead = Bulkhead::new("ev-async-waiter", limit_wait(1, LONG_WAIT));
    let log = record(&bulkhead);
    let held = bulkhead.try_acquire().unwrap();
    let (_counter, waker) = CountingWaker::new();
    let mut fut = Box::pin(bulkhead.acquire_async());
    assert!(poll_once(&mut fut, &waker).is_pending());
    drop(held);
    let permit = match poll_once(&mut fut, &waker) {
        Poll::Ready(result) => result.expect("granted"),
        Poll::Pending => panic!("granted future still pending"),
    };
    drop(permit);
    assert_eq!(
        take(&log),
        [Kind::CallPermitted, Kind::CallFinished, Kind::CallPermitted, Kind::CallFinished]
    );
}

#[test]
fn events_for_async_timeout_report_wait_timed_out() {
    let bulkhead = Bulkhead::new("ev-async-timeout", limit_wait(1, LONG_WAIT));
    let log = record(&bulkhead);
    let _held = bulkhead.try_acquire().unwrap();
    let err =
        futures::executor::block_on(bulkhead.acquire_async_with_sleep(|_| async {})).unwrap_err();
    assert_eq!(err.reason(), RejectReason::WaitTimedOut);
    assert_eq!(take(&log), [Kind::CallPermitted, Kind::CallRejected(RejectReason::WaitTimedOut)]);
}

#[test]
fn events_reach_every_listener_in_registration_order() {
    let bulkhead = Bulkhead::new("ev-many", limit(1));
    let order = Arc::new(Mutex::new(Vec::new()));
    for id in 0..3 {
        let order = Arc::clone(&order);
        bulkhead.on_event(move |event| order.lock().unwrap().push((id, event.kind())));
    }
    drop(bulkhead.try_acquire().unwrap());
    assert_eq!(
        *order.lock().unwrap(),
        [
            (0, Kind::CallPermitted),
            (1, Kind::CallPermitted),
            (2, Kind::CallPermitted),
            (0, Kind::CallFinished),
            (1, Kind::CallFinished),
            (2, Kind::CallFinished),
        ]
    );
}

#[test]
fn events_with_listener_registered_later_see_only_later_calls() {
    let bulkhead = Bulkhead::new("ev-late", limit(1));
    let permit = bulkhead.try_acquire().unwrap();
    let log = record(&bulkhead);
    // A call is observed whole: one permitted before the listener ends unreported.
    drop(permit);
    assert_eq!(take(&log), []);
    drop(bulkhead.try_acquire().unwrap());
    assert_eq!(take(&log), [Kind::CallPermitted, Kind::CallFinished]);
}

/// A listener that panics on every event: the callers never see the panic, and every
/// permit is accounted for exactly once.
#[test]
fn events_with_panicking_listener_lose_and_duplicate_no_permit() {
    with_hang_guard(|| {
        let bulkhead = shared("ev-panicking", limit_wait(2, LONG_WAIT));
        let calls = Arc::new(AtomicUsize::new(0));
        {
            let calls = Arc::clone(&calls);
            bulkhead.on_event(move |_| {
                calls.fetch_add(1, Ordering::SeqCst);
                panic!("listener panics");
            });
        }
        let log = record(&bulkhead); // a second listener still runs after the first panics
        let a = bulkhead.try_acquire().unwrap();
        let b = bulkhead.acquire().unwrap();
        assert_metrics(bulkhead.metrics(), 0, 2, 2, 0);
        assert!(bulkhead.try_acquire().is_err());
        let waiter = {
            let bulkhead = Arc::clone(&bulkhead);
            thread::spawn(move || bulkhead.acquire().map(drop))
        };
        wait_for_waiters(&bulkhead, 1);
        drop(a);
        join_guarded(waiter).expect("granted despite the listener");
        assert_metrics(bulkhead.metrics(), 1, 2, 1, 0);
        assert_eq!(bulkhead.call(|| 7).unwrap(), 7);
        drop(b);
        assert_quiescent(&bulkhead, 2);
        let events = take(&log);
        assert_eq!(calls.load(Ordering::SeqCst), events.len());
        let permitted = events.iter().filter(|k| **k == Kind::CallPermitted).count();
        let finished = events.iter().filter(|k| **k == Kind::CallFinished).count();
        assert_eq!((permitted, finished), (4, 4), "{events:?}");
    });
}

/// The registration contract: a listener registered while other threads emit sees every
/// event of every call that starts after its registration returned (here: after the
/// emitting thread saw the flag the registering thread raised once `on_event` returned).
#[test]
fn events_with_listener_registered_while_others_emit_reach_it_from_then_on() {
    const EMITTERS: usize = 3;
    const CALLS: usize = 20_000;
    with_hang_guard(|| {
        let bulkhead = shared("ev-racing", limit(1));
        let registered = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let heard = Arc::new(AtomicUsize::new(0));
        let emitters: Vec<_> = (0..EMITTERS)
            .map(|_| {
                let (bulkhead, registered) = (Arc::clone(&bulkhead), Arc::clone(&registered));
                thread::spawn(move || {
                    // (events of calls made after the registration, all events)
                    let (mut after, mut all) = (0, 0);
                    for _ in 0..CALLS {
                        let late = registered.load(Ordering::Acquire);
                        let events = match bulkhead.try_acquire() {
                            Ok(permit) => {
                                drop(permit);
                                2 // permitted, finished
                            }
                            Err(_) => 1, // rejected
                        };
                        all += events;
                        if late {
                            after += events;
                        }
                    }
                    (after, all)
                })
            })
            .collect();
        thread::sleep(Duration::from_millis(2));
        let sink = Arc::clone(&heard);
        bulkhead.on_event(move |_| {
            sink.fetch_add(1, Ordering::Relaxed);
        });
        registered.store(true, Ordering::Release);
        let (after, all) = emitters
            .into_iter()
            .map(join_guarded)
            .fold((0, 0), |(a, b), (after, all)| (a + after, b + all));
        let heard = heard.load(Ordering::Relaxed);
        assert!(heard >= after, "heard {heard} events, {after} happened after registration");
        assert!(heard <= all, "heard {heard} events, only {all} happened");
    });
}

/// Listeners registered by several threads at once, while calls emit: none is lost, and
/// each hears every event of a call made after all registrations returned.
#[test]
fn events_with_concurrent_registrations_keep_every_listener() {
    const REGISTRARS: usize = 4;
    const EACH: usize = 50;
    with_hang_guard(|| {
        let bulkhead = shared("ev-registrars", limit(4));
        let heard = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let emitter = {
            let (bulkhead, stop) = (Arc::clone(&bulkhead), Arc::clone(&stop));
            thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    drop(bulkhead.try_acquire());
                }
            })
        };
        let registrars: Vec<_> = (0..REGISTRARS)
            .map(|_| {
                let (bulkhead, heard) = (Arc::clone(&bulkhead), Arc::clone(&heard));
                thread::spawn(move || {
                    for _ in 0..EACH {
                        let heard = Arc::clone(&heard);
                        bulkhead.on_event(move |_| {
                            heard.fetch_add(1, Ordering::Relaxed);
                        });
                    }
                })
            })
            .collect();
        registrars.into_iter().for_each(join_guarded);
        stop.store(true, Ordering::Relaxed);
        join_guarded(emitter);
        let before = heard.load(Ordering::Relaxed);
        bulkhead.call(|| ()).unwrap(); // two events, to every listener
        let after = heard.load(Ordering::Relaxed);
        assert_eq!(after - before, 2 * REGISTRARS * EACH);
    });
}

#[test]
fn events_stop_at_a_removed_listener_and_reach_the_others() {
    let bulkhead = Bulkhead::new("events-removal", limit(1));
    let heard = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&heard);
    let handle = bulkhead.on_event(move |_| {
        counter.fetch_add(1, Ordering::SeqCst);
    });
    let kept = record(&bulkhead);
    let clone = handle.clone();
    assert!(handle.is_registered() && clone.is_registered());

    drop(bulkhead.try_acquire().unwrap()); // permitted, finished: both hear them
    assert_eq!(heard.load(Ordering::SeqCst), 2);
    assert!(clone.remove(), "it was registered");
    assert!(!handle.is_registered(), "clones share the listener");
    drop(bulkhead.try_acquire().unwrap());
    let _held = bulkhead.try_acquire().unwrap();
    assert!(bulkhead.try_acquire().is_err());
    assert_eq!(heard.load(Ordering::SeqCst), 2, "a removed listener heard an event");
    assert_eq!(kept.lock().unwrap().len(), 2 + 2 + 1 + 1, "the other listener hears all");
    assert!(!handle.remove(), "removing twice is harmless and says so");
    drop(handle); // dropping a handle of a removed listener changes nothing
}

#[test]
fn events_keep_reaching_a_listener_whose_handle_was_dropped() {
    let bulkhead = Bulkhead::new("events-handle-dropped", limit(1));
    let heard = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&heard);
    drop(bulkhead.on_event(move |_| {
        counter.fetch_add(1, Ordering::SeqCst);
    }));
    drop(bulkhead.try_acquire().unwrap());
    assert_eq!(heard.load(Ordering::SeqCst), 2);
}

/// Removed while another thread emits: the calls made after the emitter stopped (and was
/// joined, so they happen after the removal) are not heard. (Events the emitter made while
/// `remove` ran may or may not be: nothing orders them against it.)
#[test]
fn events_stop_at_a_listener_removed_while_another_thread_emits() {
    let bulkhead = Arc::new(Bulkhead::new("events-removal-race", limit(1)));
    let heard = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&heard);
    let handle = bulkhead.on_event(move |_| {
        counter.fetch_add(1, Ordering::SeqCst);
    });
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let emitter = {
        let (bulkhead, stop) = (Arc::clone(&bulkhead), Arc::clone(&stop));
        thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                drop(bulkhead.try_acquire());
            }
        })
    };
    wait_until("the listener hears the emitter", || heard.load(Ordering::SeqCst) > 10);
    assert!(handle.remove());
    stop.store(true, Ordering::SeqCst);
    join_guarded(emitter);
    let after = heard.load(Ordering::SeqCst);
    drop(bulkhead.try_acquire().unwrap());
    assert_eq!(heard.load(Ordering::SeqCst), after);
    assert_quiescent(&bulkhead, 1);
}
