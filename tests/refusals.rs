//! Issue 31: a refusal says what happened. Each `RejectReason` has its own sentence (`Full`
//! keeps Resilience4j's), and a sheddable call held back by `sheddable_headroom` while its
//! permits are free is refused with `RejectReason::Reserved`, which the counters and the
//! events carry like any reason.

mod common;

use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::thread;
use std::time::Duration;

use bulkhead::keyed::KeyedBulkhead;
use bulkhead::{
    Bulkhead, BulkheadConfig, BulkheadEventKind, Criticality, QueueOrder, RejectReason, Request,
};
use common::*;

/// Resilience4j's sentence, which only `Full` keeps.
const FULL: &str = "is full and does not permit further calls";

/// `limit` calls, no wait, `headroom` permits kept from sheddable calls.
fn headroom(limit: usize, headroom: usize) -> BulkheadConfig {
    BulkheadConfig::builder()
        .max_concurrent_calls(limit)
        .sheddable_headroom(headroom)
        .build()
        .unwrap()
}

fn shed(n: u32) -> Request {
    Request::permits(n).criticality(Criticality::Sheddable)
}

#[test]
fn full_refusal_keeps_resilience4j_sentence_and_no_other_reason_does() {
    let bulkhead = Bulkhead::new("bank", limit(1));
    let _held = bulkhead.try_acquire().unwrap();
    let full = bulkhead.try_acquire().unwrap_err();
    assert_eq!(full.reason(), RejectReason::Full);
    assert_eq!(
        full.to_string(),
        "Bulkhead 'bank' is full and does not permit further calls (full; max concurrent calls 1)"
    );
    // A bulkhead that is not full does not say it is.
    bulkhead.close();
    let closed = bulkhead.try_acquire().unwrap_err();
    assert_eq!(closed.reason(), RejectReason::Closed);
    assert!(!closed.to_string().contains(FULL), "{closed}");
    let search = Bulkhead::new("search", headroom(2, 1));
    let reserved = search.try_acquire_many(shed(2)).unwrap_err();
    assert!(!reserved.to_string().contains(FULL), "{reserved}");
}

#[test]
fn wait_timed_out_refusal_says_it_stayed_full_for_the_whole_wait() {
    let bulkhead = Bulkhead::new("bank", limit_wait(1, Duration::from_millis(2)));
    let _held = bulkhead.try_acquire().unwrap();
    let err = bulkhead.acquire().unwrap_err();
    assert_eq!(err.reason(), RejectReason::WaitTimedOut);
    let text = err.to_string();
    let head = "Bulkhead 'bank' stayed full for the call's whole max wait \
                (wait timed out; max concurrent calls 1; waited ";
    assert!(text.starts_with(head), "{text}");
    assert!(text.ends_with(&format!("waited {:?})", err.waited())), "{text}");
}

#[test]
fn too_many_waiting_refusal_says_the_queue_is_full_too() {
    let bulkhead = Bulkhead::new("bank", limit_wait_cap(1, LONG_WAIT, 0));
    let _held = bulkhead.try_acquire().unwrap();
    let err = bulkhead.acquire().unwrap_err();
    assert_eq!(err.reason(), RejectReason::TooManyWaiting);
    assert_eq!(
        err.to_string(),
        "Bulkhead 'bank' is full and already has as many callers waiting as it allows \
         (too many waiting; max concurrent calls 1)"
    );
}

#[test]
fn closed_refusal_says_the_bulkhead_is_closed() {
    let bulkhead = Bulkhead::new("bank", limit(4));
    bulkhead.close();
    let err = bulkhead.try_acquire().unwrap_err();
    assert_eq!(err.reason(), RejectReason::Closed);
    assert_eq!(
        err.to_string(),
        "Bulkhead 'bank' is closed and permits no further calls (closed; max concurrent calls 4)"
    );
}

#[test]
fn too_many_keys_refusal_says_there_is_no_room_for_another_key() {
    let keyed = KeyedBulkhead::<u32>::builder("hosts").max_keys(1).build().unwrap();
    let _busy = keyed.try_acquire(&1).unwrap();
    let err = keyed.try_acquire(&2).unwrap_err();
    assert_eq!(err.reason(), RejectReason::TooManyKeys);
    assert_eq!(
        err.to_string(),
        "Bulkhead 'hosts/2' has no room for another key (too many keys; max keys 1)"
    );
}

#[test]
fn exceeds_limit_refusal_says_the_request_cannot_be_granted() {
    let bulkhead = Bulkhead::new("bank", limit(4));
    let err = bulkhead.try_acquire_many(5).unwrap_err();
    assert_eq!(err.reason(), RejectReason::ExceedsLimit);
    assert_eq!(
        err.to_string(),
        "Bulkhead 'bank' cannot grant this request under its current limit \
         (request exceeds the limit; max concurrent calls 4)"
    );
}

#[test]
fn evicted_refusal_says_it_was_evicted_and_how_long_it_waited() {
    let config = BulkheadConfig::builder()
        .max_concurrent_calls(1)
        .max_wait_duration(LONG_WAIT)
        .max_waiting_calls(1)
        .queue_order(QueueOrder::Lifo)
        .build()
        .unwrap();
    let bulkhead = Bulkhead::new("bank", config);
    let held = bulkhead.try_acquire().unwrap();
    let (_, waker) = CountingWaker::new();
    let mut oldest = bulkhead.acquire_async();
    assert!(poll_once(&mut oldest, &waker).is_pending());
    thread::sleep(Duration::from_millis(1));
    // LIFO with a full queue: the newcomer evicts the oldest waiter.
    let mut newest = bulkhead.acquire_async();
    assert!(poll_once(&mut newest, &waker).is_pending());
    let err = match poll_once(&mut oldest, &waker) {
        Poll::Ready(Err(err)) => err,
        other => panic!("evicted, got {:?}", other.map(|r| r.map(drop))),
    };
    assert_eq!(err.reason(), RejectReason::Evicted);
    assert!(err.waited() >= Duration::from_millis(1), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "Bulkhead 'bank' evicted the call from its queue to serve another first \
             (evicted from the queue; max concurrent calls 1; waited {:?})",
            err.waited()
        )
    );
    drop(held);
    drop(newest);
    assert_quiescent(&bulkhead, 1);
}

#[test]
fn reserved_refusal_says_the_free_permits_are_kept_from_sheddable_calls() {
    let search = Bulkhead::new("search", headroom(4, 2));
    let _prefetch = search.try_acquire_many(shed(2)).unwrap();
    let err = search.try_acquire_many(shed(1)).unwrap_err();
    assert_eq!(err.reason(), RejectReason::Reserved);
    assert_eq!(
        err.to_string(),
        "Bulkhead 'search' keeps its remaining free permits for calls that are not sheddable \
         (held back by the sheddable headroom; max concurrent calls 4)"
    );
}

#[test]
fn a_sheddable_call_refused_with_free_slots_is_reserved_not_full() {
    let search = Bulkhead::new("search", headroom(4, 2));
    let a = search.try_acquire_many(shed(1)).unwrap();
    let b = search.try_acquire_many(shed(1)).unwrap();
    // 2 free: enough for 1 but not for 1 + the headroom of 2.
    assert_eq!(search.metrics().available_concurrent_calls(), 2);
    for err in [
        search.try_acquire_many(shed(1)).unwrap_err(),
        search.try_acquire_many(shed(2)).unwrap_err(),
        // The waiting weighted acquire with a zero max wait refuses as the try does.
        search.acquire_many(shed(1)).unwrap_err(),
    ] {
        assert_eq!(err.reason(), RejectReason::Reserved, "{err}");
        assert_eq!(err.max_concurrent_calls(), 4);
        assert_eq!(err.waited(), Duration::ZERO);
    }
    let (_, waker) = CountingWaker::new();
    match poll_once(&mut search.acquire_many_async(shed(1)), &waker) {
        Poll::Ready(Err(err)) => assert_eq!(err.reason(), RejectReason::Reserved, "{err}"),
        other => panic!("refused at once, got {:?}", other.map(|r| r.map(drop))),
    }
    let arc = Arc::new(Bulkhead::new("owned", headroom(2, 1)));
    let _one = arc.try_acquire().unwrap();
    let err = arc.try_acquire_many_owned(shed(1)).unwrap_err();
    assert_eq!(err.reason(), RejectReason::Reserved, "{err}");
    // The headroom is for default and critical calls, which take it.
    let user = search.try_acquire().unwrap();
    // Then fewer are free than a sheddable request's own permits: full, as for any call.
    let err = search.try_acquire_many(shed(2)).unwrap_err();
    assert_eq!(err.reason(), RejectReason::Full, "{err}");
    drop((a, b, user));
    assert_quiescent(&search, 4);

    // Permits free but held back for a queued waiter: a sheddable newcomer never overtakes
    // anyone, so it is refused for the queue (`Full`), not for the headroom.
    let config = BulkheadConfig::builder()
        .max_concurrent_calls(3)
        .max_wait_duration(LONG_WAIT)
        .sheddable_headroom(1)
        .build()
        .unwrap();
    let queued = Bulkhead::new("queued", config);
    let held = queued.try_acquire_many(2).unwrap();
    let mut weighted = queued.acquire_many_async(2);
    assert!(poll_once(&mut weighted, &waker).is_pending());
    let err = queued.try_acquire_many(shed(1)).unwrap_err();
    assert_eq!(err.reason(), RejectReason::Full, "{err}");
    drop(held);
    drop(weighted);
    assert_quiescent(&queued, 3);
}

#[test]
fn a_sheddable_request_the_headroom_leaves_no_room_for_exceeds_the_limit() {
    // At limit 2 with a headroom of 2 no sheddable call can ever run: refused with
    // `ExceedsLimit` whether it may wait (as before) or not (it said `Full`).
    let bulkhead = Bulkhead::new("no_room", headroom(2, 2));
    let err = bulkhead.try_acquire_many(shed(1)).unwrap_err();
    assert_eq!(err.reason(), RejectReason::ExceedsLimit, "{err}");
    let waits = BulkheadConfig::builder()
        .max_concurrent_calls(2)
        .sheddable_headroom(2)
        .max_wait_duration(LONG_WAIT)
        .build()
        .unwrap();
    let waiting = Bulkhead::new("no_room_waiting", waits);
    assert_eq!(waiting.acquire_many(shed(1)).unwrap_err().reason(), RejectReason::ExceedsLimit);
}

#[test]
fn reserved_is_counted_and_heard_as_its_own_reason() {
    let search = Bulkhead::new("search", headroom(2, 1));
    search.enable_counters();
    let heard = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&heard);
    search.on_event(move |event| sink.lock().unwrap().push(event.kind()));
    let _user = search.try_acquire().unwrap();
    assert_eq!(search.try_acquire_many(shed(1)).unwrap_err().reason(), RejectReason::Reserved);
    let m = search.metrics();
    assert_eq!(m.calls_rejected(RejectReason::Reserved), 1);
    assert_eq!(m.calls_rejected(RejectReason::Full), 0);
    assert_eq!(m.calls_rejected_total(), 1);
    assert_eq!(
        *heard.lock().unwrap(),
        [BulkheadEventKind::CallPermitted, BulkheadEventKind::CallRejected(RejectReason::Reserved)]
    );
}

#[test]
fn a_keyed_sheddable_call_is_reserved_at_the_level_that_held_it_back() {
    let tenants = KeyedBulkhead::<u32>::builder("tenants")
        .default_config(headroom(2, 1))
        .total(headroom(4, 2))
        .build()
        .unwrap();
    let _user = tenants.try_acquire(&1).unwrap();
    // Key 1 has 1 free, kept from sheddable calls.
    let err = tenants.try_acquire_many(&1, shed(1)).unwrap_err();
    assert_eq!((err.reason(), err.bulkhead_name()), (RejectReason::Reserved, "tenants/1"));
    let _other = tenants.try_acquire(&2).unwrap();
    // Key 3 has 2 free; the total 2 (4 - 2), both kept.
    let err = tenants.try_acquire_many(&3, shed(1)).unwrap_err();
    assert_eq!((err.reason(), err.bulkhead_name()), (RejectReason::Reserved, "tenants"));
    assert_eq!(tenants.key_metrics(&3).map_or(0, |m| m.in_flight_calls()), 0);
}
