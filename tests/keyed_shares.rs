//! Guaranteed shares of a keyed bulkhead's total (issue 32): owners (a key within its
//! share) are served before borrowers, idle shares are lent, the total is never
//! over-admitted, and bad shares are a configuration error naming the keys.

mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

#[path = "../verification/hostile_waker.rs"]
mod hostile_waker;

use bulkhead::keyed::KeyedBulkhead;
use bulkhead::{BulkheadConfig, BulkheadFull, Criticality, RejectReason, Request};
use common::{join_guarded, with_hang_guard, LONG_WAIT};
use futures::task::noop_waker;
use hostile_waker::{hostile_waker, reenter};

/// A waker whose wake panics (the engine contains it), counting its wakes.
#[derive(Default)]
struct PanicsOnWake(AtomicUsize);

impl PanicsOnWake {
    fn wakes(&self) -> usize {
        self.0.load(SeqCst)
    }
}

impl std::task::Wake for PanicsOnWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
        panic!("a waker that panics (contained)");
    }
}

fn config(limit: usize, wait: Duration) -> BulkheadConfig {
    BulkheadConfig::builder().max_concurrent_calls(limit).max_wait_duration(wait).build().unwrap()
}

/// Two keys at most, each with a share of `share` of a total of `total` (waits unbounded);
/// a key may take the whole total.
fn shared(total: usize, share: u32) -> Arc<KeyedBulkhead<&'static str>> {
    Arc::new(
        KeyedBulkhead::<&str>::builder("api")
            .default_config(config(total + 2, LONG_WAIT))
            .total(config(total, LONG_WAIT))
            .max_keys(2)
            .guaranteed_share(share)
            .build()
            .unwrap(),
    )
}

fn poll<F: Future + ?Sized>(fut: Pin<&mut F>, waker: &Waker) -> Poll<F::Output> {
    fut.poll(&mut Context::from_waker(waker))
}

/// The permit a pending future was granted (held by the caller).
fn granted<T: std::fmt::Debug, F: Future<Output = Result<T, BulkheadFull>> + ?Sized>(
    fut: Pin<&mut F>,
) -> T {
    match poll(fut, &noop_waker()) {
        Poll::Ready(Ok(permit)) => permit,
        other => panic!("expected a permit, got {other:?}"),
    }
}

fn conserved(keyed: &KeyedBulkhead<&'static str>, keys: &[&'static str]) {
    assert_eq!(keyed.total().unwrap().check_work_conservation(), Ok(()));
    for key in keys {
        if let Some(bulkhead) = keyed.key_bulkhead(key) {
            assert_eq!(bulkhead.check_work_conservation(), Ok(()), "key {key}");
        }
    }
}

#[test]
fn an_idle_share_is_lent() {
    let keyed = shared(4, 2);
    // "a" is alone: it takes its own share and "b"'s.
    let held: Vec<_> = (0..4).map(|_| keyed.try_acquire(&"a").unwrap()).collect();
    assert_eq!(keyed.total_metrics().unwrap().available_concurrent_calls(), 0);
    // "b" may not wait: refused while its share is lent (documented).
    let refused = keyed.try_acquire(&"b").unwrap_err();
    assert_eq!((refused.reason(), refused.bulkhead_name()), (RejectReason::Full, "api"));
    assert_eq!(keyed.key_metrics(&"b").unwrap().in_flight_calls(), 0, "b holds nothing");
    drop(held);
    conserved(&keyed, &["a", "b"]);
}

#[test]
fn a_returning_slot_goes_to_the_owner_before_an_older_borrower() {
    let keyed = shared(2, 1);
    let noop = noop_waker();
    let b1 = keyed.try_acquire(&"b").unwrap(); // b's share
    let b2 = keyed.try_acquire(&"b").unwrap(); // borrowed: a is idle
                                               // b asks again first: a borrower, queued at the total.
    let mut borrower = Box::pin(keyed.acquire_many_async(&"b", 1));
    assert!(poll(borrower.as_mut(), &noop).is_pending());
    // a asks later, as a sheddable call even: an owner all the same.
    let mut owner = Box::pin(keyed.acquire_many_async(&"a", Criticality::Sheddable));
    assert!(poll(owner.as_mut(), &noop).is_pending());
    assert_eq!(keyed.total_metrics().unwrap().waiting_calls(), 2);
    conserved(&keyed, &["a", "b"]);

    drop(b2); // the borrowed slot comes back: to a, not to b's older waiter
    let a = match poll(owner.as_mut(), &noop) {
        Poll::Ready(Ok(permit)) => permit,
        other => panic!("the owner was not served first: {other:?}"),
    };
    assert!(poll(borrower.as_mut(), &noop).is_pending(), "the borrower still waits");
    conserved(&keyed, &["a", "b"]);
    drop(b1);
    assert!(matches!(poll(borrower.as_mut(), &noop), Poll::Ready(Ok(_))));
    drop((a, borrower, owner));
    assert_eq!(keyed.total_metrics().unwrap().in_flight_calls(), 0);
    conserved(&keyed, &["a", "b"]);
}

#[test]
fn a_critical_borrower_is_demoted_below_an_owner() {
    let keyed = shared(2, 1);
    let noop = noop_waker();
    let b: Vec<_> = (0..2).map(|_| keyed.try_acquire(&"b").unwrap()).collect();
    let mut borrower = Box::pin(keyed.acquire_many_async(&"b", Criticality::Critical));
    assert!(poll(borrower.as_mut(), &noop).is_pending());
    let mut owner = Box::pin(keyed.acquire_many_async(&"a", 1));
    assert!(poll(owner.as_mut(), &noop).is_pending());
    let mut b = b;
    drop(b.pop());
    let a = granted(owner.as_mut()); // owner first
    assert!(poll(borrower.as_mut(), &noop).is_pending());
    drop((a, b, owner, borrower));
    conserved(&keyed, &["a", "b"]);
}

#[test]
fn a_key_over_its_share_waits_behind_owners_in_fifo() {
    // Shares 1 + 1 of 3; b holds 3 (one owned, two borrowed). Borrowers of b queue first,
    // then a's owner: every returning slot serves a first, then b in order.
    let keyed = Arc::new(
        KeyedBulkhead::<&str>::builder("api")
            .default_config(config(5, LONG_WAIT))
            .total(config(3, LONG_WAIT))
            .key_guaranteed_share("a", 1)
            .key_guaranteed_share("b", 1)
            .build()
            .unwrap(),
    );
    let noop = noop_waker();
    let mut held: Vec<_> = (0..3).map(|_| keyed.try_acquire(&"b").unwrap()).collect();
    let mut borrowers: Vec<_> =
        (0..2).map(|_| Box::pin(keyed.acquire_many_async(&"b", 1))).collect();
    for borrower in &mut borrowers {
        assert!(poll(borrower.as_mut(), &noop).is_pending());
    }
    let mut owner = Box::pin(keyed.acquire_many_async(&"a", 1));
    assert!(poll(owner.as_mut(), &noop).is_pending());
    drop(held.pop());
    let a = granted(owner.as_mut());
    assert!(poll(borrowers[0].as_mut(), &noop).is_pending());
    drop(held.pop());
    let b0 = granted(borrowers[0].as_mut()); // then FIFO among borrowers
    assert!(poll(borrowers[1].as_mut(), &noop).is_pending());
    drop(held);
    let b1 = granted(borrowers[1].as_mut());
    drop((a, b0, b1, borrowers, owner));
    conserved(&keyed, &["a", "b"]);
}

#[test]
fn an_owner_that_may_wait_is_served_by_the_next_release() {
    with_hang_guard(|| {
        let keyed = shared(2, 1);
        let b: Vec<_> = (0..2).map(|_| keyed.try_acquire(&"b").unwrap()).collect();
        let owner = {
            let keyed = Arc::clone(&keyed);
            std::thread::spawn(move || keyed.acquire(&"a").map(|p| p.num_permits()))
        };
        common::wait_until("the owner waits at the total", || {
            keyed.total_metrics().unwrap().waiting_calls() == 1
        });
        drop(b);
        assert_eq!(join_guarded(owner).unwrap(), 1);
        conserved(&keyed, &["a", "b"]);
    });
}

#[test]
fn a_key_evicted_while_lending_gets_its_share_back_when_recreated() {
    let keyed = shared(4, 2);
    let noop = noop_waker();
    drop(keyed.try_acquire(&"a").unwrap()); // a is live and idle
    let held: Vec<_> = (0..4).map(|_| keyed.try_acquire(&"b").unwrap()).collect();
    let mut borrower = Box::pin(keyed.acquire_many_async(&"b", 1));
    assert!(poll(borrower.as_mut(), &noop).is_pending());
    // c is new: the map is full (a, b), a is idle and evicted; c owns a share at once.
    let mut owner = Box::pin(keyed.acquire_many_async(&"c", 1));
    assert!(poll(owner.as_mut(), &noop).is_pending());
    assert!(keyed.key_metrics(&"a").is_none(), "a was evicted");
    let mut held = held;
    drop(held.pop());
    let c = granted(owner.as_mut()); // the new key is an owner
    assert!(poll(borrower.as_mut(), &noop).is_pending());
    drop((c, held, owner, borrower));
    assert_eq!(keyed.total_metrics().unwrap().in_flight_calls(), 0);
    conserved(&keyed, &["b", "c"]);
}

#[test]
fn weighted_owner_within_its_share_and_borrower_above_it() {
    let keyed = shared(4, 2);
    let noop = noop_waker();
    let b = keyed.try_acquire_many(&"b", 4).unwrap(); // 4 > share 2: asked as a borrower
    let mut owner = Box::pin(keyed.acquire_many_async(&"a", 2)); // 2 <= 2: an owner
    assert!(poll(owner.as_mut(), &noop).is_pending());
    let mut borrower = Box::pin(keyed.acquire_many_async(&"b", 1));
    // Default class behind a critical waiter: it does not barge past the owner.
    assert!(poll(borrower.as_mut(), &noop).is_pending());
    drop(b);
    let a = granted(owner.as_mut());
    assert_eq!(a.num_permits(), 2);
    let b = granted(borrower.as_mut()); // the rest is lent at once
    drop((a, b, owner, borrower));
    conserved(&keyed, &["a", "b"]);
}

#[test]
fn the_total_is_never_over_admitted_whatever_the_shares() {
    with_hang_guard(|| {
        const TOTAL: usize = 5;
        let keyed = Arc::new(
            KeyedBulkhead::<&str>::builder("api")
                .default_config(config(4, Duration::from_millis(20)))
                .total(config(TOTAL, Duration::from_millis(20)))
                .max_keys(3)
                .key_guaranteed_share("a", 3)
                .key_guaranteed_share("b", 2)
                .build()
                .unwrap(),
        );
        let in_flight = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..6)
            .map(|t| {
                let (keyed, in_flight, peak) =
                    (Arc::clone(&keyed), Arc::clone(&in_flight), Arc::clone(&peak));
                std::thread::spawn(move || {
                    let key = ["a", "b", "c"][t % 3];
                    for i in 0..300 {
                        let n = 1 + (i % 2) as u32;
                        let permit: Result<_, BulkheadFull> = match (t + i) % 4 {
                            0 => keyed.try_acquire(&key),
                            1 => keyed.acquire(&key),
                            2 => keyed.acquire_timeout(&key, Duration::from_millis(5)),
                            _ => keyed.acquire_many(&key, Request::permits(n)),
                        };
                        if let Ok(permit) = permit {
                            let now = in_flight.fetch_add(permit.num_permits() as usize, SeqCst)
                                + permit.num_permits() as usize;
                            peak.fetch_max(now, SeqCst);
                            std::thread::yield_now();
                            in_flight.fetch_sub(permit.num_permits() as usize, SeqCst);
                        }
                    }
                })
            })
            .collect();
        for thread in threads {
            join_guarded(thread);
        }
        assert!(peak.load(SeqCst) <= TOTAL, "peak {} above the total", peak.load(SeqCst));
        assert!(peak.load(SeqCst) > 0);
        assert_eq!(keyed.total_metrics().unwrap().in_flight_calls(), 0);
        conserved(&keyed, &["a", "b", "c"]);
    });
}

#[test]
fn shares_are_checked_against_the_total_and_name_the_keys() {
    let err = KeyedBulkhead::<&str>::builder("api")
        .total(config(10, Duration::ZERO))
        .max_keys(4)
        .guaranteed_share(1)
        .key_guaranteed_share("gold", 5)
        .key_guaranteed_share("silver", 2)
        .build()
        .unwrap_err();
    assert_eq!(err.key(), "guaranteed_share");
    assert_eq!(err.value(), "gold=5, silver=2, default=1 x 4 keys (max_keys)");
    assert!(err.to_string().contains("sum to 11, above the total's 10"), "{err}");

    let no_total = KeyedBulkhead::<&str>::builder("api").guaranteed_share(1).build().unwrap_err();
    assert_eq!(
        (no_total.key(), no_total.value()),
        ("guaranteed_share", "default=1 x 0 keys (max_keys)")
    );
    // A zero share is no share: no total needed.
    assert!(KeyedBulkhead::<&str>::builder("api").guaranteed_share(0).build().is_ok());
    // The fallback key counts once more for the default share.
    let err = KeyedBulkhead::<&str>::builder("api")
        .total(config(4, Duration::ZERO))
        .max_keys(2)
        .fallback_key("other")
        .guaranteed_share(2)
        .build()
        .unwrap_err();
    assert!(err.value().ends_with("+ the fallback key"), "{err}");
}

#[test]
fn no_shares_keep_the_plain_classes() {
    // Without shares a critical call of a key is critical at the total too.
    let keyed = Arc::new(
        KeyedBulkhead::<&str>::builder("api")
            .default_config(config(2, LONG_WAIT))
            .total(config(1, LONG_WAIT))
            .build()
            .unwrap(),
    );
    let noop = noop_waker();
    let held = keyed.try_acquire(&"a").unwrap();
    let mut first = Box::pin(keyed.acquire_many_async(&"a", 1));
    assert!(poll(first.as_mut(), &noop).is_pending());
    let mut critical = Box::pin(keyed.acquire_many_async(&"b", Criticality::Critical));
    assert!(poll(critical.as_mut(), &noop).is_pending());
    drop(held);
    let b = granted(critical.as_mut());
    assert!(poll(first.as_mut(), &noop).is_pending());
    drop((b, first, critical));
    conserved(&keyed, &["a", "b"]);
}

/// The owner's waiting path with a waker that re-enters the keyed bulkhead (its key, the
/// total) on every clone, wake and drop: no hook runs under a lock.
#[test]
fn an_owner_waiting_with_a_reentrant_waker() {
    with_hang_guard(|| {
        let keyed = shared(2, 1);
        let ops = Arc::new(AtomicUsize::new(0));
        let hook = {
            let weak = Arc::downgrade(&keyed);
            let ops = Arc::clone(&ops);
            move |_op| {
                ops.fetch_add(1, SeqCst);
                let Some(keyed) = weak.upgrade() else { return };
                drop(keyed.try_acquire(&"a"));
                drop(keyed.try_acquire(&"b"));
                let _ = keyed.metrics(4);
                reenter(keyed.total().unwrap(), false);
            }
        };
        let waker = hostile_waker(hook, None);
        let b: Vec<_> = (0..2).map(|_| keyed.try_acquire(&"b").unwrap()).collect();
        let mut owner = Box::pin(keyed.acquire_many_async(&"a", 1));
        assert!(poll(owner.as_mut(), &waker).is_pending());
        let before = ops.load(SeqCst);
        let mut b = b;
        drop(b.pop());
        assert!(ops.load(SeqCst) > before, "the owner's waker was woken");
        let a = match poll(owner.as_mut(), &waker) {
            Poll::Ready(Ok(permit)) => permit,
            other => panic!("expected a permit, got {other:?}"),
        };
        drop((a, owner, b, waker));
        assert_eq!(keyed.total_metrics().unwrap().in_flight_calls(), 0);
        conserved(&keyed, &["a", "b"]);
    });
}

/// The owner's waiting path with a waker whose wake panics: the panic stays inside the
/// release, the owner is still granted, the borrower behind it keeps its place.
#[test]
fn an_owner_waiting_with_a_panicking_waker() {
    with_hang_guard(|| {
        let keyed = shared(2, 1);
        let noop = noop_waker();
        let mut b: Vec<_> = (0..2).map(|_| keyed.try_acquire(&"b").unwrap()).collect();
        let mut borrower = Box::pin(keyed.acquire_many_async(&"b", 1));
        assert!(poll(borrower.as_mut(), &noop).is_pending());
        let panics = Arc::new(PanicsOnWake::default());
        let mut owner = Box::pin(keyed.acquire_many_async(&"a", 1));
        assert!(poll(owner.as_mut(), &Waker::from(Arc::clone(&panics))).is_pending());
        drop(b.pop()); // wakes the owner, whose waker panics: contained
        assert_eq!(panics.wakes(), 1);
        let a = granted(owner.as_mut());
        assert!(poll(borrower.as_mut(), &noop).is_pending());
        drop(b);
        let b = granted(borrower.as_mut());
        drop((a, b, owner, borrower));
        conserved(&keyed, &["a", "b"]);
    });
}

/// Blocks until the test lets the owner's call finish.
type Hold = Box<dyn FnOnce() + Send>;

/// A total of 2, shares of 1: b holds both slots (one borrowed) and a borrower of b waits
/// at the total. `owner` (run on a thread: a's verb, calling `hold` while it holds its
/// slots) must wait there too, then be served by the next returning slot before b's older
/// borrower: the verb asks the total as an owner.
fn owner_served_first_through(
    verb: &str,
    owner: impl FnOnce(Arc<KeyedBulkhead<&'static str>>, Hold) -> u32 + Send + 'static,
) {
    let verb = verb.to_owned();
    with_hang_guard(move || {
        let keyed = shared(2, 1);
        let noop = noop_waker();
        let mut b: Vec<_> = (0..2).map(|_| keyed.try_acquire(&"b").unwrap()).collect();
        let mut borrower = Box::pin(keyed.acquire_many_async(&"b", 1));
        assert!(poll(borrower.as_mut(), &noop).is_pending());
        let (finish, finished) = std::sync::mpsc::channel::<()>();
        let thread = {
            let keyed = Arc::clone(&keyed);
            let hold: Hold = Box::new(move || finished.recv().unwrap());
            std::thread::spawn(move || owner(keyed, hold))
        };
        common::wait_until("the owner waits at the total", || {
            keyed.total_metrics().unwrap().waiting_calls() == 2
        });
        drop(b.pop()); // the borrowed slot comes back: to a, not to b's older waiter
        common::wait_until("one of the two is served", || {
            keyed.total_metrics().unwrap().waiting_calls() == 1
        });
        assert!(
            poll(borrower.as_mut(), &noop).is_pending(),
            "{verb}: the borrower was served first"
        );
        finish.send(()).unwrap();
        assert_eq!(join_guarded(thread), 1, "{verb}");
        assert!(matches!(poll(borrower.as_mut(), &noop), Poll::Ready(Ok(_))), "{verb}");
        drop((b, borrower));
        assert_eq!(keyed.total_metrics().unwrap().in_flight_calls(), 0, "{verb}");
        conserved(&keyed, &["a", "b"]);
    });
}

#[test]
fn call_with_asks_the_total_as_an_owner() {
    // Sheddable and with a max wait of its own: promoted to Critical, the wait kept (long).
    owner_served_first_through("call_with", |keyed, hold| {
        let request = Request::default().criticality(Criticality::Sheddable).max_wait(LONG_WAIT);
        keyed.call_with(&"a", request, || (hold(), 1).1).unwrap()
    });
}

#[test]
fn call_fallible_with_asks_the_total_as_an_owner() {
    owner_served_first_through("call_fallible_with", |keyed, hold| {
        keyed.call_fallible_with(&"a", 1, || Ok::<_, BulkheadFull>((hold(), 1).1)).unwrap()
    });
}

#[test]
fn call_fallible_asks_the_total_as_an_owner() {
    owner_served_first_through("call_fallible", |keyed, hold| {
        keyed.call_fallible(&"a", || Ok::<_, BulkheadFull>((hold(), 1).1)).unwrap()
    });
}

#[test]
fn call_async_with_asks_the_total_as_an_owner() {
    owner_served_first_through("call_async_with", |keyed, hold| {
        let request = Request::default().max_wait(LONG_WAIT);
        futures::executor::block_on(keyed.call_async_with(&"a", request, async { (hold(), 1).1 }))
            .unwrap()
    });
}

#[test]
fn call_async_fallible_with_asks_the_total_as_an_owner() {
    owner_served_first_through("call_async_fallible_with", |keyed, hold| {
        let fut =
            keyed.call_async_fallible_with(&"a", 1, async { Ok::<_, BulkheadFull>((hold(), 1).1) });
        futures::executor::block_on(fut).unwrap()
    });
}

/// `permit`'s permits, once `hold` let it go.
fn held<P>(permit: P, hold: Hold, n: impl FnOnce(&P) -> u32) -> u32 {
    hold();
    n(&permit)
}

#[test]
fn acquire_many_timeout_asks_the_total_as_an_owner() {
    owner_served_first_through("acquire_many_timeout", |keyed, hold| {
        held(keyed.acquire_many_timeout(&"a", 1, LONG_WAIT).unwrap(), hold, |p| p.num_permits())
    });
}

#[test]
fn acquire_timeout_asks_the_total_as_an_owner() {
    owner_served_first_through("acquire_timeout", |keyed, hold| {
        held(keyed.acquire_timeout(&"a", LONG_WAIT).unwrap(), hold, |p| p.num_permits())
    });
}

#[test]
fn blocking_acquire_many_owned_asks_the_total_as_an_owner() {
    owner_served_first_through("acquire_many_owned", |keyed, hold| {
        held(keyed.acquire_many_owned(&"a", 1).unwrap(), hold, |p| p.num_permits())
    });
}

#[test]
fn acquire_owned_asks_the_total_as_an_owner() {
    owner_served_first_through("acquire_owned", |keyed, hold| {
        held(keyed.acquire_owned(&"a").unwrap(), hold, |p| p.num_permits())
    });
}

#[test]
fn owned_futures_ask_the_total_as_owners() {
    owner_served_first_through("acquire_owned_async", |keyed, hold| {
        let permit = futures::executor::block_on(keyed.acquire_owned_async(&"a")).unwrap();
        held(permit, hold, |p| p.num_permits())
    });
    owner_served_first_through("acquire_many_owned_async", |keyed, hold| {
        let request = Request::default().criticality(Criticality::Sheddable);
        let permit =
            futures::executor::block_on(keyed.acquire_many_owned_async(&"a", request)).unwrap();
        held(permit, hold, |p| p.num_permits())
    });
    owner_served_first_through("call_owned_async", |keyed, hold| {
        futures::executor::block_on(keyed.call_owned_async(&"a", async move { (hold(), 1).1 }))
            .unwrap()
    });
    owner_served_first_through("call_owned_async_fallible", |keyed, hold| {
        let fut = keyed
            .call_owned_async_fallible(&"a", async move { Ok::<_, BulkheadFull>((hold(), 1).1) });
        futures::executor::block_on(fut).unwrap()
    });
}

#[test]
fn call_async_fallible_asks_the_total_as_an_owner() {
    owner_served_first_through("call_async_fallible", |keyed, hold| {
        let fut = keyed.call_async_fallible(&"a", async { Ok::<_, BulkheadFull>((hold(), 1).1) });
        futures::executor::block_on(fut).unwrap()
    });
}

#[test]
fn a_critical_borrower_of_an_owned_future_is_demoted() {
    let keyed = shared(2, 1);
    let noop = noop_waker();
    let mut b: Vec<_> = (0..2).map(|_| keyed.try_acquire(&"b").unwrap()).collect();
    // b is above its share: its critical owned future asks the total as a default borrower.
    let mut borrower = Box::pin(
        keyed.acquire_many_owned_async(&"b", Request::default().criticality(Criticality::Critical)),
    );
    assert!(poll(borrower.as_mut(), &noop).is_pending());
    let mut owner = Box::pin(keyed.acquire_owned_async(&"a"));
    assert!(poll(owner.as_mut(), &noop).is_pending());
    drop(b.pop());
    let a = granted(owner.as_mut()); // the owner first, though the borrower asked Critical
    assert!(poll(borrower.as_mut(), &noop).is_pending());
    drop(b);
    let b = granted(borrower.as_mut());
    drop((a, b, owner, borrower));
    conserved(&keyed, &["a", "b"]);
}

#[test]
fn a_borrowers_own_max_wait_and_weight_survive_the_share_path() {
    with_hang_guard(|| {
        let keyed = shared(4, 1);
        let held: Vec<_> = (0..4).map(|_| keyed.try_acquire(&"b").unwrap()).collect();
        // b is over its share: a borrower; the total waits 60 s, the request 1 ms. If the
        // share path dropped the request's max wait, this would hang (the guard fails it).
        let request = Request::permits(1)
            .criticality(Criticality::Critical)
            .max_wait(Duration::from_millis(1));
        let err = keyed.call_with(&"b", request, || ()).unwrap_err();
        assert_eq!((err.reason(), err.bulkhead_name()), (RejectReason::WaitTimedOut, "api"));
        let err = keyed.acquire_many_timeout(&"b", request, LONG_WAIT).unwrap_err();
        assert_eq!(err.reason(), RejectReason::WaitTimedOut);
        let fut = keyed.call_async_with(&"b", request, async {});
        assert_eq!(
            futures::executor::block_on(fut).unwrap_err().reason(),
            RejectReason::WaitTimedOut
        );
        // A zero max wait never queues, owner or borrower.
        let err =
            keyed.call_with(&"a", Request::default().max_wait(Duration::ZERO), || ()).unwrap_err();
        assert_eq!((err.reason(), err.bulkhead_name()), (RejectReason::Full, "api"));
        drop(held);
        // The weight reaches the total: 3 of a (1 owned, 2 borrowed), whatever the class.
        let permit =
            keyed.acquire_many_owned(&"a", Request::permits(3).max_wait(LONG_WAIT)).unwrap();
        assert_eq!(permit.num_permits(), 3);
        assert_eq!(keyed.total_metrics().unwrap().in_flight_calls(), 3);
        drop(permit);
        conserved(&keyed, &["a", "b"]);
    });
}

#[test]
fn named_keyed_futures_ask_the_total_as_owners() {
    // `AcquireKeyed` (acquire_async, acquire_many_async) and `AcquireKeyedWithSleep` read the
    // class once the key's slots are held, as the owned futures do; the sleep form keeps its
    // sleeps (a sleep that never ends here: the wait is the owner's to win).
    owner_served_first_through("acquire_async", |keyed, hold| {
        let permit = futures::executor::block_on(keyed.acquire_async(&"a")).unwrap();
        held(permit, hold, |p| p.num_permits())
    });
    owner_served_first_through("acquire_many_async", |keyed, hold| {
        let request = Request::default().criticality(Criticality::Sheddable);
        let permit = futures::executor::block_on(keyed.acquire_many_async(&"a", request)).unwrap();
        held(permit, hold, |p| p.num_permits())
    });
    owner_served_first_through("acquire_async_with_sleep", |keyed, hold| {
        let never = |_wait: Duration| std::future::pending::<()>();
        let acquire = keyed.acquire_async_with_sleep(&"a", never);
        let permit = futures::executor::block_on(acquire).unwrap();
        held(permit, hold, |p| p.num_permits())
    });
}
