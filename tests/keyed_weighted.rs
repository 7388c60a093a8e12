//! Weighted permits on the keyed bulkhead (issue 20): `try_acquire_many(&k, n)`,
//! `acquire_many`, `acquire_many_async`, `try_acquire_many_owned`,
//! `acquire_many_owned_async`, and `num_permits` / `split` / `merge` on `KeyedPermit` and
//! `OwnedKeyedPermit`.
//!
//! The plain bulkhead's weighted tests (`tests/weighted.rs`, themselves ported from tokio's
//! multi-permit tests) in keyed form, plus what the second level adds: all or nothing across
//! the key and the total (a refusal, timeout or cancel at the total returns the key's `n`
//! slots), `ExceedsLimit` at each level (the total's checked before the key is looked up),
//! a weighted permit keeping its key live against eviction, and waits whose waker re-enters
//! the keyed bulkhead (as `tests/reentrant_family.rs` does for the unweighted ones).

mod common;

#[path = "../verification/hostile_waker.rs"]
mod hostile_waker;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::thread;
use std::time::Duration;

use bulkhead::keyed::{KeyedBulkhead, KeyedPermit, OwnedKeyedPermit};
use bulkhead::{BulkheadConfig, BulkheadFull, RejectReason};
use common::*;
use hostile_waker::{hostile_waker, reenter, Op};

type Keyed = KeyedBulkhead<u32>;

/// Keys of `key` slots and a total of `total`, both failing fast, one shard.
fn keyed(key: usize, total: usize) -> Keyed {
    keyed_with(limit(key), limit(total))
}

/// Keys of `key` slots and a total of `total`, both waiting up to [`LONG_WAIT`].
fn waiting(key: usize, total: usize) -> Arc<Keyed> {
    Arc::new(keyed_with(limit_wait(key, LONG_WAIT), limit_wait(total, LONG_WAIT)))
}

fn keyed_with(key: BulkheadConfig, total: BulkheadConfig) -> Keyed {
    KeyedBulkhead::builder("api").default_config(key).total(total).shards(1).build().unwrap()
}

fn in_flight(keyed: &Keyed, key: u32) -> usize {
    keyed.key_metrics(&key).map_or(0, |m| m.in_flight_calls())
}

fn total_in_flight(keyed: &Keyed) -> usize {
    keyed.total_metrics().unwrap().in_flight_calls()
}

/// Every slot of every live key and of the total is back, nobody waits.
#[track_caller]
fn assert_all_back(keyed: &Keyed, key_limit: usize, total: usize) {
    for (key, m) in keyed.metrics(usize::MAX).keys {
        assert_eq!(m.in_flight_calls(), 0, "key {key} holds slots: {m:?}");
        assert_eq!(m.waiting_calls(), 0, "key {key} has waiters: {m:?}");
        assert_eq!(m.available_concurrent_calls(), key_limit, "key {key}: {m:?}");
    }
    assert_quiescent(keyed.total().unwrap(), total);
}

#[track_caller]
fn assert_refused(
    result: Result<impl std::fmt::Debug, BulkheadFull>,
    reason: RejectReason,
    by: &str,
) {
    let err = result.expect_err("expected a refusal");
    assert_eq!((err.reason(), err.bulkhead_name()), (reason, by), "{err}");
}

type PendingBorrowed<'a> =
    Pin<Box<dyn Future<Output = Result<KeyedPermit<'a>, BulkheadFull>> + 'a>>;

/// A weighted keyed acquire polled by hand (borrowed or owned), with a counting waker.
struct Waiter<F> {
    fut: Pin<Box<F>>,
    counter: Arc<CountingWaker>,
    waker: Waker,
}

impl<F: Future> Waiter<F> {
    fn new(fut: F) -> Self {
        let (counter, waker) = CountingWaker::new();
        Waiter { fut: Box::pin(fut), counter, waker }
    }

    /// Polls it once; it must be pending (queued).
    #[track_caller]
    fn queued(fut: F) -> Self {
        let mut waiter = Self::new(fut);
        assert!(waiter.poll().is_pending(), "the acquire should have queued");
        waiter
    }

    fn poll(&mut self) -> Poll<F::Output> {
        self.fut.as_mut().poll(&mut Context::from_waker(&self.waker))
    }

    fn woken(&self) -> bool {
        self.counter.wakes() > 0
    }
}

impl<P: std::fmt::Debug, F: Future<Output = Result<P, BulkheadFull>>> Waiter<F> {
    /// Woken and granted: the permit.
    #[track_caller]
    fn granted(mut self) -> P {
        assert!(self.woken(), "a granted waiter must have been woken");
        match self.poll() {
            Poll::Ready(Ok(permit)) => permit,
            other => panic!("expected a grant, got {other:?}"),
        }
    }

    /// Ready with a refusal by `by` for `reason`.
    #[track_caller]
    fn refused(mut self, reason: RejectReason, by: &str) {
        match self.poll() {
            Poll::Ready(result) => assert_refused(result, reason, by),
            Poll::Pending => panic!("expected a {reason:?} refusal, still pending"),
        }
    }
}

// ---- the fast path: n at both levels, all or nothing ---------------------------------------

#[test]
fn try_acquire_many_takes_n_of_the_key_and_of_the_total() {
    let keyed = keyed(10, 12);
    let a = keyed.try_acquire_many(&1, 5).unwrap();
    let b = keyed.try_acquire_many(&2, 4).unwrap();
    assert_eq!((a.num_permits(), b.num_permits()), (5, 4));
    assert_eq!((in_flight(&keyed, 1), in_flight(&keyed, 2), total_in_flight(&keyed)), (5, 4, 9));
    // 3 left of the total: key 2 has 6 free, the total refuses 4 and key 2 keeps nothing.
    assert_refused(keyed.try_acquire_many(&2, 4), RejectReason::Full, "api");
    assert_eq!(in_flight(&keyed, 2), 4, "the refused request's key slots went back");
    let c = keyed.try_acquire_many(&2, 3).unwrap();
    assert_eq!(total_in_flight(&keyed), 12);
    drop((a, b, c));
    assert_all_back(&keyed, 10, 12);
}

#[test]
fn key_refusal_takes_nothing_of_the_total() {
    let keyed = keyed(3, 10);
    let held = keyed.try_acquire_many(&1, 2).unwrap();
    assert_refused(keyed.try_acquire_many(&1, 2), RejectReason::Full, "api/1");
    assert_eq!(total_in_flight(&keyed), 2, "the key refused before the total was asked");
    assert_refused(keyed.try_acquire_many_owned(&1, 2), RejectReason::Full, "api/1");
    drop(held);
    assert_all_back(&keyed, 3, 10);
}

#[test]
fn owned_try_acquire_many_is_all_or_nothing_with_the_total() {
    let keyed = keyed(5, 6);
    let held = keyed.try_acquire_many_owned(&1, 5).unwrap();
    assert_eq!(held.num_permits(), 5);
    assert_eq!(held.total_bulkhead().unwrap().metrics().in_flight_calls(), 5);
    assert_refused(keyed.try_acquire_many_owned(&2, 2), RejectReason::Full, "api");
    assert_eq!(in_flight(&keyed, 2), 0);
    let one = thread::spawn({
        let permit = keyed.try_acquire_many_owned(&2, 1).unwrap();
        move || permit.num_permits()
    });
    assert_eq!(one.join().unwrap(), 1);
    drop(held);
    assert_all_back(&keyed, 5, 6);
}

// ---- above a limit: refused at once, by the level that could never grant it ----------------

#[test]
fn request_above_the_keys_limit_is_refused_at_once_by_every_form() {
    let keyed = waiting(3, 10);
    // Within the total's limit (above it, the total refuses first: see the next test).
    for n in [4, 9, 10] {
        let err = keyed.try_acquire_many(&1, n).unwrap_err();
        assert_eq!((err.reason(), err.bulkhead_name()), (RejectReason::ExceedsLimit, "api/1"));
        assert_eq!((err.max_concurrent_calls(), err.waited()), (3, Duration::ZERO));
        assert_refused(keyed.acquire_many(&1, n), RejectReason::ExceedsLimit, "api/1");
        assert_refused(keyed.try_acquire_many_owned(&1, n), RejectReason::ExceedsLimit, "api/1");
        Waiter::new(keyed.acquire_many_async(&1, n)).refused(RejectReason::ExceedsLimit, "api/1");
        Waiter::new(keyed.acquire_many_owned_async(&1, n))
            .refused(RejectReason::ExceedsLimit, "api/1");
    }
    assert_eq!(total_in_flight(&keyed), 0, "the total was never taken");
    assert_all_back(&keyed, 3, 10);
}

#[test]
fn request_above_the_totals_limit_is_refused_before_the_key_is_created() {
    let keyed = waiting(8, 4);
    for n in [5, 8, 9, u32::MAX] {
        let err = keyed.try_acquire_many(&1, n).unwrap_err();
        assert_eq!((err.reason(), err.bulkhead_name()), (RejectReason::ExceedsLimit, "api"));
        assert_eq!(err.max_concurrent_calls(), 4);
        assert_refused(keyed.acquire_many(&1, n), RejectReason::ExceedsLimit, "api");
        assert_refused(keyed.try_acquire_many_owned(&1, n), RejectReason::ExceedsLimit, "api");
        Waiter::new(keyed.acquire_many_async(&1, n)).refused(RejectReason::ExceedsLimit, "api");
        Waiter::new(keyed.acquire_many_owned_async(&1, n))
            .refused(RejectReason::ExceedsLimit, "api");
    }
    assert_eq!(keyed.live_keys(), 0, "a request no total could grant created a key");
    // Even while the key is full with a waiter queued (the blocking form would otherwise
    // wait at the key first).
    let all = keyed.try_acquire_many(&1, 4).unwrap();
    assert_refused(keyed.acquire_many(&1, 5), RejectReason::ExceedsLimit, "api");
    drop(all);
    assert_all_back(&keyed, 8, 4);
}

/// The total shrinks below a request that waits at its key: once the key grants it, the
/// total refuses it with `ExceedsLimit` at once, and the key's slots go back.
#[test]
fn total_shrunk_below_a_request_waiting_at_its_key_refuses_it_and_returns_the_key_slots() {
    let keyed = waiting(2, 4);
    let held = keyed.try_acquire_many(&1, 2).unwrap();
    let waiter = Waiter::queued(keyed.acquire_many_async(&1, 2));
    keyed.change_total_config(limit_wait(1, LONG_WAIT)).unwrap();
    drop(held);
    waiter.refused(RejectReason::ExceedsLimit, "api");
    assert_eq!(in_flight(&keyed, 1), 0, "the key's 2 slots went back");
    keyed.change_total_config(limit_wait(4, LONG_WAIT)).unwrap();
    assert_all_back(&keyed, 2, 4);
}

// ---- waits: whole grants, FIFO, the second level returns the first ------------------------

#[test]
fn key_waiter_for_three_holds_back_a_later_waiter_for_one() {
    let keyed = waiting(3, 10);
    let one = keyed.try_acquire(&1).unwrap();
    let three = Waiter::queued(keyed.acquire_many_async(&1, 3));
    let small = Waiter::queued(keyed.acquire_many_async(&1, 1));
    assert_eq!(keyed.key_metrics(&1).unwrap().available_concurrent_calls(), 2);
    assert_refused(keyed.try_acquire_many(&1, 1), RejectReason::Full, "api/1");
    assert_eq!(total_in_flight(&keyed), 1, "a queued request holds nothing of the total");
    drop(one);
    let three = three.granted();
    assert_eq!((three.num_permits(), total_in_flight(&keyed)), (3, 3));
    assert!(!small.woken(), "FIFO: the waiter for 1 stays behind the head");
    drop(three);
    drop(small.granted());
    assert_all_back(&keyed, 3, 10);
}

#[test]
fn blocking_wait_at_the_total_times_out_and_returns_the_key_slots() {
    let wait = Duration::from_millis(5);
    let keyed = keyed_with(limit_wait(4, wait), limit_wait(4, wait));
    let held = keyed.try_acquire_many(&1, 2).unwrap();
    let err = keyed.acquire_many(&2, 3).unwrap_err();
    assert_eq!((err.reason(), err.bulkhead_name()), (RejectReason::WaitTimedOut, "api"));
    assert!(err.waited() >= wait);
    assert_eq!(in_flight(&keyed, 2), 0, "the key's 3 slots went back");
    drop(held);
    assert_eq!(keyed.acquire_many(&2, 3).unwrap().num_permits(), 3);
    assert_all_back(&keyed, 4, 4);
}

#[test]
fn blocking_weighted_waiter_is_granted_both_levels_by_a_release() {
    with_hang_guard(|| {
        let keyed = waiting(3, 4);
        let on_key = keyed.try_acquire_many_owned(&1, 2).unwrap();
        let on_total = keyed.try_acquire_many_owned(&2, 2).unwrap();
        let waiter = {
            let keyed = Arc::clone(&keyed);
            thread::spawn(move || keyed.acquire_many(&1, 2).map(|p| p.num_permits()))
        };
        wait_for_waiters(&keyed.key_bulkhead(&1).unwrap(), 1);
        drop(on_key); // key 1 grants 2; the total has 2 free: granted at once
        assert_eq!(join_guarded(waiter).unwrap(), 2);
        drop(on_total);
        assert_all_back(&keyed, 3, 4);
    });
}

/// A request waiting at the total holds its key's `n` slots (never part of them), and no
/// total slot; granted whole by a release of the total.
#[test]
fn async_waiter_at_the_total_holds_its_key_slots_then_is_granted_whole() {
    let keyed = waiting(4, 4);
    let other = keyed.try_acquire_many(&2, 3).unwrap();
    let waiter = Waiter::queued(keyed.acquire_many_async(&1, 3));
    assert_eq!(in_flight(&keyed, 1), 3, "the key granted its 3 at once");
    assert_eq!(total_in_flight(&keyed), 3, "nothing of the total is held piecemeal");
    assert_eq!(keyed.total_metrics().unwrap().waiting_calls(), 1);
    drop(other);
    let permit = waiter.granted();
    assert_eq!((permit.num_permits(), total_in_flight(&keyed)), (3, 3));
    drop(permit);
    assert_all_back(&keyed, 4, 4);
}

// ---- cancellation returns everything --------------------------------------------------------

#[test]
fn owned_async_cancelled_at_the_key_holds_nothing() {
    let keyed = waiting(3, 6);
    let held = keyed.try_acquire_many(&1, 2).unwrap();
    let waiter = Waiter::queued(keyed.acquire_many_owned_async(&1, 3));
    drop(waiter);
    assert_eq!(keyed.key_metrics(&1).unwrap().waiting_calls(), 0);
    assert_eq!((in_flight(&keyed, 1), total_in_flight(&keyed)), (2, 2));
    drop(held);
    assert_all_back(&keyed, 3, 6);
}

#[test]
fn owned_async_cancelled_at_the_total_returns_the_key_slots() {
    let keyed = waiting(4, 4);
    let other = keyed.try_acquire_many(&2, 2).unwrap();
    let waiter = Waiter::queued(keyed.acquire_many_owned_async(&1, 3));
    assert_eq!(in_flight(&keyed, 1), 3);
    drop(waiter);
    assert_eq!(in_flight(&keyed, 1), 0, "the key's 3 slots went back");
    assert_eq!(keyed.total_metrics().unwrap().waiting_calls(), 0, "withdrawn from the total");
    drop(other);
    assert_all_back(&keyed, 4, 4);
}

/// Granted at the total (woken) but dropped before it was polled again: the key's slots
/// and the total's grant both go back, the total's to the waiter behind it.
#[test]
fn owned_async_granted_then_dropped_unpolled_returns_both_levels() {
    let keyed = waiting(4, 4);
    let other = keyed.try_acquire_many(&2, 2).unwrap();
    let first = Waiter::queued(keyed.acquire_many_owned_async(&1, 3));
    let behind = Waiter::queued(keyed.acquire_many_owned_async(&3, 4));
    drop(other);
    assert!(first.woken(), "the total granted the head its 3");
    assert!(!behind.woken(), "4 asked, 1 free");
    drop(first);
    assert_eq!(in_flight(&keyed, 1), 0);
    let behind = behind.granted();
    assert_eq!(behind.num_permits(), 4);
    drop(behind);
    assert_all_back(&keyed, 4, 4);
}

#[test]
fn borrowed_async_cancelled_at_either_level_returns_everything() {
    let keyed = waiting(3, 4);
    let held = keyed.try_acquire_many(&1, 3).unwrap();
    drop(Waiter::queued(keyed.acquire_many_async(&1, 2))); // at the key
    drop(held);
    let other = keyed.try_acquire_many(&2, 3).unwrap();
    let at_total: Waiter<_> = Waiter::queued(keyed.acquire_many_async(&1, 2));
    assert_eq!(in_flight(&keyed, 1), 2);
    drop(at_total);
    assert_eq!(in_flight(&keyed, 1), 0);
    drop(other);
    assert_all_back(&keyed, 3, 4);
}

#[test]
fn close_refuses_weighted_waiters_at_both_levels_and_loses_nothing() {
    let keyed = waiting(2, 3);
    let held = keyed.try_acquire_many(&1, 2).unwrap();
    let at_key = Waiter::queued(keyed.acquire_many_owned_async(&1, 2));
    let at_total = Waiter::queued(keyed.acquire_many_async(&2, 2));
    assert!(keyed.close());
    at_key.refused(RejectReason::Closed, "api/1");
    at_total.refused(RejectReason::Closed, "api");
    assert_eq!(in_flight(&keyed, 2), 0);
    assert_refused(keyed.try_acquire_many(&1, 0), RejectReason::Closed, "api/1");
    drop(held);
    assert!(keyed.wait_drained(Duration::ZERO));
}

// ---- n == 0 ---------------------------------------------------------------------------------

#[test]
fn zero_permits_are_granted_at_once_even_when_both_levels_are_full() {
    let keyed = waiting(1, 1);
    let all = keyed.try_acquire(&1).unwrap();
    let queued = Waiter::queued(keyed.acquire_many_async(&1, 1));
    let empty = keyed.try_acquire_many(&1, 0).unwrap();
    let blocking = keyed.acquire_many(&2, 0).unwrap();
    let owned = keyed.try_acquire_many_owned(&1, 0).unwrap();
    let Poll::Ready(Ok(async_empty)) = Waiter::new(keyed.acquire_many_async(&1, 0)).poll() else {
        panic!("an empty acquire queued")
    };
    assert_eq!((empty.num_permits(), owned.num_permits(), async_empty.num_permits()), (0, 0, 0));
    drop((empty, blocking, owned, async_empty));
    assert!(!queued.woken(), "an empty permit releases nothing");
    drop(all);
    drop(queued.granted());
    assert_all_back(&keyed, 1, 1);
}

// ---- split and merge --------------------------------------------------------------------------

#[test]
fn split_moves_slots_of_both_levels_between_guards() {
    let keyed = keyed(5, 5);
    let mut p1 = keyed.try_acquire_many(&1, 3).unwrap();
    let mut p2 = p1.split(1).unwrap();
    assert_eq!((p1.num_permits(), p2.num_permits()), (2, 1));
    assert_eq!((in_flight(&keyed, 1), total_in_flight(&keyed)), (3, 3), "nothing taken");
    let p3 = p1.split(0).unwrap();
    assert_eq!(p3.num_permits(), 0);
    drop(p1);
    assert_eq!((in_flight(&keyed, 1), total_in_flight(&keyed)), (1, 1));
    let p4 = p2.split(1).unwrap();
    assert!(p2.split(1).is_none());
    assert_eq!(p2.num_permits(), 0, "a failed split changes nothing");
    drop((p2, p3));
    assert_eq!((in_flight(&keyed, 1), total_in_flight(&keyed)), (1, 1));
    drop(p4);
    assert_all_back(&keyed, 5, 5);
}

#[test]
fn merge_keeps_the_slots_until_the_merged_permit_drops() {
    let keyed = keyed(3, 3);
    {
        let mut p1 = keyed.try_acquire(&1).unwrap();
        p1.merge(keyed.try_acquire_many(&1, 2).unwrap());
        assert_eq!(p1.num_permits(), 3);
        assert_eq!((in_flight(&keyed, 1), total_in_flight(&keyed)), (3, 3));
        assert_refused(keyed.try_acquire(&2), RejectReason::Full, "api");
    }
    assert_all_back(&keyed, 3, 3);
}

#[test]
fn owned_split_and_merge_cross_threads() {
    let keyed = keyed(5, 6);
    let mut p1 = keyed.try_acquire_many_owned(&1, 3).unwrap();
    let p2 = p1.split(2).unwrap();
    assert_eq!((p1.num_permits(), p2.num_permits()), (1, 2));
    let p2 = thread::spawn(move || p2).join().unwrap();
    p1.merge(p2);
    assert_eq!(p1.num_permits(), 3);
    assert!(p1.split(4).is_none());
    let all = p1.split(3).unwrap();
    drop(p1);
    assert_eq!((in_flight(&keyed, 1), total_in_flight(&keyed)), (3, 3));
    drop(all);
    assert_all_back(&keyed, 5, 6);
}

#[test]
#[should_panic(expected = "merging permits of two bulkheads ('api/1' and 'api/2')")]
fn merge_permits_of_two_keys_panics() {
    let keyed = keyed(3, 6);
    let mut p1 = keyed.try_acquire(&1).unwrap();
    p1.merge(keyed.try_acquire(&2).unwrap());
}

#[test]
#[should_panic(expected = "merging permits of two bulkheads")]
fn owned_merge_permits_of_two_keys_panics() {
    let keyed = keyed(3, 6);
    let mut p1 = keyed.try_acquire_owned(&1).unwrap();
    p1.merge(keyed.try_acquire_owned(&2).unwrap());
}

/// A refused merge loses nothing: the other permit is dropped while unwinding, its slots
/// going back to its own key and total; the same for permits of two keyed bulkheads with
/// the same key, and for owned permits.
#[test]
fn merge_of_unrelated_permits_panics_and_loses_nothing() {
    let a = keyed(3, 6);
    let b = keyed(3, 6);
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut p1 = a.try_acquire_many(&1, 2).unwrap();
        p1.merge(a.try_acquire_many(&2, 3).unwrap());
    }));
    assert!(caught.is_err());
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut p1 = a.try_acquire_many(&1, 2).unwrap();
        p1.merge(b.try_acquire_many(&1, 3).unwrap());
    }));
    assert!(caught.is_err());
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut p1 = a.try_acquire_many_owned(&1, 1).unwrap();
        p1.merge(b.try_acquire_many_owned(&1, 2).unwrap());
    }));
    assert!(caught.is_err());
    assert_all_back(&a, 3, 6);
    assert_all_back(&b, 3, 6);
}

/// Two keys sent to the fallback key hold slots of one bulkhead: they merge.
#[test]
fn permits_of_two_keys_sent_to_the_fallback_key_merge() {
    let keyed = KeyedBulkhead::<u32>::builder("api")
        .default_config(limit(4))
        .max_keys(1)
        .fallback_key(0)
        .build()
        .unwrap();
    let _live = keyed.try_acquire(&1).unwrap();
    let mut two = keyed.try_acquire_many(&2, 2).unwrap();
    let three = keyed.try_acquire_many(&3, 1).unwrap();
    assert_eq!(three.key_bulkhead().name(), "api/0");
    two.merge(three);
    assert_eq!(two.num_permits(), 3);
    assert_eq!(keyed.key_metrics(&0).unwrap().in_flight_calls(), 3);
    drop(two);
    assert_eq!(keyed.key_metrics(&0).unwrap().in_flight_calls(), 0);
}

/// Counters and events count guards through split and merge at both levels, as for a
/// plain permit: a split part is a call of its own, a merged one ends without a release.
#[test]
fn counters_count_guards_through_split_and_merge_at_both_levels() {
    let keyed = keyed(4, 4);
    keyed.enable_counters();
    let mut batch = keyed.try_acquire_many(&1, 3).unwrap();
    let part = batch.split(1).unwrap();
    batch.merge(part);
    assert_refused(keyed.try_acquire_many(&1, 5), RejectReason::ExceedsLimit, "api");
    assert_refused(keyed.try_acquire_many(&2, 2), RejectReason::Full, "api");
    let key = keyed.key_metrics(&1).unwrap();
    let total = keyed.total_metrics().unwrap();
    assert_eq!((key.calls_permitted(), key.calls_finished()), (2, 1));
    assert_eq!((total.calls_permitted(), total.calls_finished()), (2, 1));
    assert_eq!(total.calls_rejected(RejectReason::ExceedsLimit), 1);
    drop(batch);
    let key = keyed.key_metrics(&1).unwrap();
    let total = keyed.total_metrics().unwrap();
    assert_eq!((key.calls_permitted(), key.calls_finished()), (2, 2));
    assert_eq!((total.calls_permitted(), total.calls_finished()), (2, 2));
    assert_eq!(total.calls_rejected(RejectReason::Full), 1, "key 2's request for 2");
    // Key 2 granted its 2, then gave them back when the total refused: a call of its own.
    let key2 = keyed.key_metrics(&2).unwrap();
    assert_eq!((key2.calls_permitted(), key2.calls_finished()), (1, 1));
    assert_all_back(&keyed, 4, 4);
}

/// A permit granted while only the total was observed reports its end to the total alone,
/// and one granted before anyone observed reports nothing (a call is observed whole).
#[test]
fn a_weighted_permit_reports_its_end_where_it_was_observed() {
    let keyed = keyed(4, 8);
    let unobserved = keyed.try_acquire_many(&1, 2).unwrap();
    keyed.total().unwrap().enable_counters();
    let total_only = keyed.try_acquire_many(&1, 2).unwrap();
    drop((unobserved, total_only));
    let total = keyed.total_metrics().unwrap();
    assert_eq!((total.calls_permitted(), total.calls_finished()), (1, 1));
    assert_eq!(keyed.key_metrics(&1).unwrap().calls_finished(), 0, "the key is not counting");
    assert_all_back(&keyed, 4, 8);
}

// ---- eviction: a weighted permit keeps its key live ---------------------------------------------

#[test]
fn weighted_split_and_empty_permits_keep_their_key_live() {
    let keyed = keyed(4, 8);
    let mut batch = keyed.try_acquire_many(&1, 3).unwrap();
    let part = batch.split(2).unwrap();
    drop(batch);
    let empty = keyed.try_acquire_many(&2, 0).unwrap();
    let owned = keyed.try_acquire_many_owned(&3, 2).unwrap();
    assert_eq!(keyed.evict_idle(), 0, "every key is held by a permit");
    assert_eq!(keyed.live_keys(), 3);
    drop(part);
    assert_eq!(keyed.evict_idle(), 1, "key 1 idle once its last part is dropped");
    drop((empty, owned));
    assert_eq!(keyed.evict_idle(), 2);
    assert_quiescent(keyed.total().unwrap(), 8);
}

// ---- threads ----------------------------------------------------------------------------------

/// Four threads on two keys (limit 4 each, total 6) acquire random weights with blocking
/// waits: a key's and the total's slots in use never exceed their limits.
#[test]
fn threads_acquiring_random_weights_never_exceed_either_level() {
    with_hang_guard(|| {
        let keyed = waiting(4, 6);
        let per_key = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
        let total = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..4u64)
            .map(|seed| {
                let (keyed, per_key, total) =
                    (Arc::clone(&keyed), Arc::clone(&per_key), Arc::clone(&total));
                thread::spawn(move || {
                    let mut rng = XorShift::new(seed + 1);
                    let key = (seed % 2) as u32;
                    for _ in 0..300 {
                        let n = rng.below(5) as u32;
                        let permit = keyed.acquire_many(&key, n).expect("unbounded waits");
                        let at_key = per_key[key as usize].fetch_add(n as usize, SeqCst);
                        let at_total = total.fetch_add(n as usize, SeqCst);
                        assert!(
                            at_key + n as usize <= 4,
                            "key {key}: {} slots",
                            at_key + n as usize
                        );
                        assert!(at_total + n as usize <= 6, "total: {}", at_total + n as usize);
                        thread::yield_now();
                        per_key[key as usize].fetch_sub(n as usize, SeqCst);
                        total.fetch_sub(n as usize, SeqCst);
                        drop(permit);
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(join_guarded);
        assert_all_back(&keyed, 4, 6);
    });
}

// ---- hostile wakers -----------------------------------------------------------------------------

/// A waker hook that re-enters the keyed bulkhead on every waker operation: weighted
/// refusals and grants (a permit of key 9 taken, split, merged and dropped), metrics, and
/// key 1's and the total's bulkheads ([`reenter`]: their queue, config and drain locks).
/// It holds the keyed bulkhead weakly (the waker must not keep it alive) and counts its runs
/// in `ops`.
fn weighted_reentrant_hook(
    keyed: std::sync::Weak<Keyed>,
    ops: Arc<AtomicUsize>,
) -> impl Fn(Op) + Send + Sync + 'static {
    move |_op| {
        ops.fetch_add(1, SeqCst);
        let Some(keyed) = keyed.upgrade() else { return };
        drop(keyed.try_acquire_many(&1, 2));
        if let Ok(mut permit) = keyed.try_acquire_many(&9, 1) {
            if let Some(part) = permit.split(1) {
                permit.merge(part);
            }
        }
        let _ = keyed.metrics(4);
        if let Some(key) = keyed.key_bulkhead(&1) {
            reenter(&key, false);
        }
        reenter(keyed.total().unwrap(), false);
    }
}

/// Polls `fut` once with `waker`.
fn poll_with<F: Future + ?Sized>(fut: Pin<&mut F>, waker: &Waker) -> Poll<F::Output> {
    fut.poll(&mut Context::from_waker(waker))
}

/// The owned and the borrowed weighted async acquires, queued at the key and then at the
/// total with a waker that re-enters the keyed bulkhead on clone, wake and drop: granted at
/// both levels, and dropped while queued at the total (withdrawn, key slots released). No
/// hook runs under a lock (a deadlock would trip the hang guard).
#[test]
fn weighted_keyed_waits_with_reentrant_waker() {
    with_hang_guard(|| {
        let keyed = Arc::new(keyed_with(limit_wait(2, LONG_WAIT), limit_wait(3, LONG_WAIT)));
        let ops = Arc::new(AtomicUsize::new(0));
        let hook = weighted_reentrant_hook(Arc::downgrade(&keyed), Arc::clone(&ops));
        let waker = hostile_waker(hook, None);
        // Owned, queued at key 1 (held whole), granted both levels by the release.
        let held = keyed.try_acquire_many_owned(&1, 2).unwrap();
        let mut owned = Box::pin(keyed.acquire_many_owned_async(&1, 2));
        assert!(poll_with(owned.as_mut(), &waker).is_pending(), "queued at the key");
        drop(held);
        let Poll::Ready(Ok(permit)) = poll_with(owned.as_mut(), &waker) else {
            panic!("expected a grant at both levels")
        };
        drop(owned);
        assert_eq!(permit.num_permits(), 2);
        // Borrowed, queued at the total (key 2 free, the total has 1 of 3 free).
        let mut borrowed: PendingBorrowed<'_> = Box::pin(keyed.acquire_many_async(&2, 2));
        assert!(poll_with(borrowed.as_mut(), &waker).is_pending(), "queued at the total");
        assert_eq!(in_flight(&keyed, 2), 2, "key 2's slots held while it waits");
        drop(permit);
        let Poll::Ready(Ok(permit)) = poll_with(borrowed.as_mut(), &waker) else {
            panic!("expected a grant at the total")
        };
        drop(borrowed);
        // Owned, dropped while queued at the total: withdrawn, key 3's slots released.
        let mut dropped = Box::pin(keyed.acquire_many_owned_async(&3, 2));
        assert!(poll_with(dropped.as_mut(), &waker).is_pending());
        assert_eq!(in_flight(&keyed, 3), 2);
        drop(dropped);
        assert_eq!(in_flight(&keyed, 3), 0);
        assert_eq!(keyed.total_metrics().unwrap().waiting_calls(), 0);
        drop(permit);
        drop(waker);
        assert!(ops.load(SeqCst) >= 4, "the hook ran on clone, wake and drop");
        assert_all_back(&keyed, 2, 3);
    });
}

/// The owned permit type of the weighted verbs is the unweighted one's: `Send + 'static`.
#[test]
fn owned_weighted_permit_and_future_are_send_and_static() {
    fn send_static<T: Send + 'static>(_: &T) {}
    let keyed = keyed(2, 2);
    let permit: OwnedKeyedPermit = keyed.try_acquire_many_owned(&1, 2).unwrap();
    send_static(&permit);
    send_static(&keyed.acquire_many_owned_async(&1, 1));
}
