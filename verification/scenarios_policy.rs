//! Queue order and criticality under the model checkers (see `src/engine/policy.rs` and
//! `src/engine/state.rs`): a LIFO eviction racing the release that would have served the
//! evicted waiter, a critical caller's share of the limit (the sheddable headroom) under
//! contention with sheddable callers, and a critical waiter served before an earlier default
//! one by a racing release.
//!
//! Shared by `verification/loom.rs` and `verification/shuttle.rs` (the `rt` adapter);
//! filter with `policy::`.

use core::future::Future;
use core::pin::Pin;
use core::sync::atomic::Ordering::SeqCst;
use core::task::{Context, Poll, Waker};
use core::time::Duration;
use std::sync::Arc;

use bulkhead::{
    Bulkhead, BulkheadConfig, BulkheadFull, Criticality, OwnedPermit, QueueOrder, RejectReason,
};

use crate::rt;
use crate::scenarios::assert_quiescent;

fn join<T>(handle: rt::JoinHandle<T>) -> T {
    match handle.join() {
        Ok(value) => value,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

fn bulkhead(name: &str, config: bulkhead::BulkheadConfigBuilder) -> Arc<Bulkhead> {
    let config = config.max_wait_duration(Duration::MAX).build().expect("valid config");
    Arc::new(Bulkhead::new(name, config))
}

/// Counts wakes; plain std atomics: read only after the threads that wake it were joined.
#[derive(Default)]
struct Counter(std::sync::atomic::AtomicUsize);

impl std::task::Wake for Counter {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
    }
}

type Pending = Pin<Box<dyn Future<Output = Result<OwnedPermit, BulkheadFull>> + Send>>;

/// Where a hand-polled waiter stands.
enum State {
    Queued,
    Holds(OwnedPermit),
    /// Was granted, and gave its permit back.
    Returned,
    Refused(RejectReason),
}

/// An owned async acquire polled by hand, with a waker that counts its wakes. `Send`, so a
/// thread can queue it and hand it back.
struct Waiter {
    fut: Pending,
    wakes: Arc<Counter>,
    waker: Waker,
    state: State,
}

impl Waiter {
    /// Polls `fut` once: queued, or done at once.
    fn start(fut: Pending) -> Waiter {
        let wakes = Arc::new(Counter::default());
        let waker = Waker::from(Arc::clone(&wakes));
        let mut waiter = Waiter { fut, wakes, waker, state: State::Queued };
        waiter.poll();
        waiter
    }

    fn poll(&mut self) {
        if matches!(self.state, State::Queued) {
            let mut cx = Context::from_waker(&self.waker);
            match self.fut.as_mut().poll(&mut cx) {
                Poll::Ready(Ok(permit)) => self.state = State::Holds(permit),
                Poll::Ready(Err(err)) => self.state = State::Refused(err.reason()),
                Poll::Pending => {}
            }
        }
    }

    fn queued(&self) -> bool {
        matches!(self.state, State::Queued)
    }

    fn holds(&self) -> bool {
        matches!(self.state, State::Holds(_))
    }

    fn woken(&self) -> bool {
        self.wakes.0.load(SeqCst) > 0
    }

    /// Polls again only if woken: a waiter that finished while queued must have been woken
    /// (no lost wake-up), and one never woken is still pending.
    fn poll_if_woken(&mut self) {
        if self.queued() && self.woken() {
            self.poll();
            assert!(!self.queued(), "woken but still pending (with nothing to wake it)");
        }
    }

    /// Gives a held permit back.
    fn give_back(&mut self) {
        if self.holds() {
            if let State::Holds(permit) = core::mem::replace(&mut self.state, State::Returned) {
                drop(permit);
            }
        }
    }
}

/// LIFO with room for one waiter: `a` is queued behind a held permit. One thread releases
/// the held permit while another queues `b`, which (being newer) evicts `a` if `a` is
/// still queued when it arrives, or takes the permit straight away if it is free and `a`
/// is still queued (LIFO: the newest goes first). Whatever the interleaving: `a` ends
/// granted or evicted (and is woken either way), `b` is granted, exactly one of them holds
/// the permit at a time, and every permit comes back.
pub fn lifo_eviction_racing_release() {
    let bulkhead = bulkhead(
        "policy_lifo_evict",
        BulkheadConfig::builder()
            .max_concurrent_calls(1)
            .max_waiting_calls(1)
            .queue_order(QueueOrder::Lifo),
    );
    let held = bulkhead.try_acquire_owned().expect("free");
    let mut a = Waiter::start(Box::pin(bulkhead.acquire_owned_async()));
    assert!(a.queued(), "a queued behind the held permit");
    let releaser = rt::spawn(move || drop(held));
    let newcomer = {
        let bulkhead = Arc::clone(&bulkhead);
        rt::spawn(move || Waiter::start(Box::pin(bulkhead.acquire_owned_async())))
    };
    join(releaser);
    let mut b = join(newcomer);
    // Both threads are done: whoever holds the permit gives it back, and the other is
    // served. Two rounds at most: each gives one permit back.
    for _ in 0..3 {
        a.poll_if_woken();
        b.poll_if_woken();
        assert!(!(a.holds() && b.holds()), "two permits out of a limit of 1");
        a.give_back();
        b.give_back();
    }
    assert!(!a.queued() && !b.queued(), "a waiter was stranded");
    if let State::Refused(reason) = a.state {
        assert_eq!(reason, RejectReason::Evicted, "a was refused for another reason");
    }
    assert!(matches!(b.state, State::Returned), "b, the newest, was not served");
    assert_quiescent(&bulkhead, 1);
}

/// The critical share: a limit of 2 with a sheddable headroom of 1, one default permit held.
/// A sheddable caller (blocking, unbounded wait) and a critical `try_acquire_many` race for
/// the one free permit. The headroom is the critical caller's: it always gets it (taking it
/// past the queued sheddable waiter if need be), and the sheddable caller is served only
/// once both other permits are back. No more than one sheddable call is ever in flight.
pub fn critical_share_under_sheddable_contention() {
    let bulkhead = bulkhead(
        "policy_headroom",
        BulkheadConfig::builder().max_concurrent_calls(2).sheddable_headroom(1),
    );
    let held = bulkhead.try_acquire_owned().expect("free");
    let shed = {
        let bulkhead = Arc::clone(&bulkhead);
        rt::spawn(move || {
            let permit = bulkhead.acquire_many(Criticality::Sheddable).expect("an unbounded wait");
            // Admitted only with the headroom free after it.
            assert_eq!(bulkhead.metrics().available_concurrent_calls(), 1, "headroom taken");
            drop(permit);
        })
    };
    let critical = {
        let bulkhead = Arc::clone(&bulkhead);
        rt::spawn(move || bulkhead.try_acquire_many_owned(Criticality::Critical).map(drop))
    };
    let got = join(critical);
    assert!(got.is_ok(), "the critical caller found its share taken: {:?}", got.err());
    drop(held);
    join(shed);
    assert_quiescent(&bulkhead, 2);
}

/// Class before arrival: a default waiter queued first, then a critical one, behind one
/// held permit released by another thread while a third tries a critical
/// `try_acquire_many` (it may find the released permit free but held back for the
/// waiters: it must not take it, the critical waiter queued before it). The release serves
/// the critical waiter; the default one only after the critical permit is back.
pub fn critical_waiter_overtakes_earlier_default_one() {
    let bulkhead = bulkhead("policy_classes", BulkheadConfig::builder().max_concurrent_calls(1));
    let held = bulkhead.try_acquire_owned().expect("free");
    let mut plain = Waiter::start(Box::pin(bulkhead.acquire_owned_async()));
    let mut critical =
        Waiter::start(Box::pin(bulkhead.acquire_many_owned_async(Criticality::Critical)));
    assert!(plain.queued() && critical.queued(), "both queued");
    let releaser = rt::spawn(move || drop(held));
    let barger = {
        let bulkhead = Arc::clone(&bulkhead);
        rt::spawn(move || bulkhead.try_acquire_many_owned(Criticality::Critical).is_ok())
    };
    join(releaser);
    assert!(!join(barger), "a critical try overtook a queued critical waiter");
    assert!(!plain.woken(), "the default waiter was served before the critical one");
    critical.poll_if_woken();
    assert!(critical.holds(), "the release did not serve the critical waiter");
    plain.poll();
    assert!(plain.queued(), "two permits out of a limit of 1");
    critical.give_back();
    plain.poll_if_woken();
    assert!(plain.holds(), "the default waiter was not served after");
    plain.give_back();
    assert_quiescent(&bulkhead, 1);
}

/// Adaptive LIFO's age test is strict, as CoDel's: a waiter exactly `target` old is not yet
/// above the target, so the interval after which the queue stands starts only once a waiter
/// is older than that. On the model clock (one thread does every step; a second only reads
/// the metrics, so the checkers add little but the clock's exactness): `a` queues at 0; a newcomer at exactly `TARGET` ages the queue (the
/// enqueue's drain) and finds nobody above the target; one at `TARGET + INTERVAL` finds `a`
/// above it for the first time, so the queue does not stand yet and `a` stays queued; one a
/// whole interval later finds the queue standing, and the oldest waiter past the target,
/// `a`, is refused `Evicted`. cargo-mutants (shard 18/32): `> target` made `>= target`
/// went unseen (real clocks never land on the boundary).
pub fn adaptive_lifo_age_is_strictly_above_target() {
    const TARGET: Duration = Duration::from_millis(10);
    const INTERVAL: Duration = Duration::from_millis(20);
    let bulkhead = bulkhead(
        "policy_adaptive_strict",
        BulkheadConfig::builder()
            .max_concurrent_calls(1)
            .queue_order(QueueOrder::AdaptiveLifo { target: TARGET, interval: INTERVAL }),
    );
    let held = bulkhead.try_acquire_owned().expect("free");
    // A reader of the metrics beside the steps below: the checkers want a thread to
    // interleave; reading changes nothing the scenario checks.
    let reader = {
        let bulkhead = Arc::clone(&bulkhead);
        rt::spawn(move || bulkhead.metrics().waiting_calls() <= 4)
    };
    let start = bulkhead::model::now();
    let queue = || Waiter::start(Box::pin(bulkhead.acquire_owned_async()));
    let mut a = queue();
    assert!(a.queued(), "a queued behind the held permit");
    bulkhead::model::advance_to(start + TARGET);
    let b = queue();
    bulkhead::model::advance_to(start + TARGET + INTERVAL);
    let c = queue();
    assert!(
        a.queued() && !a.woken(),
        "a, exactly at the target at {TARGET:?}, started the interval: evicted one interval early"
    );
    bulkhead::model::advance_to(start + TARGET + INTERVAL + INTERVAL);
    let d = queue();
    a.poll_if_woken();
    assert!(
        matches!(a.state, State::Refused(RejectReason::Evicted)),
        "the queue stood for an interval: its oldest waiter past the target is evicted"
    );
    // The rest end as permits come back: served newest first while the queue stands, and
    // a waiter past the target may be evicted meanwhile (the model clock stands still, so
    // the queue keeps standing); none is stranded, and the newest is served.
    assert!(join(reader), "at most four waiters");
    drop(held);
    let mut waiters = [b, c, d];
    for _ in 0..4 {
        for waiter in &mut waiters {
            waiter.poll_if_woken();
        }
        assert!(waiters.iter().filter(|w| w.holds()).count() <= 1, "two permits out of 1");
        for waiter in &mut waiters {
            waiter.give_back();
        }
    }
    for waiter in &waiters {
        assert!(
            matches!(waiter.state, State::Returned | State::Refused(RejectReason::Evicted)),
            "a waiter was stranded, or refused for another reason"
        );
    }
    assert!(matches!(waiters[2].state, State::Returned), "the newest waiter was not served");
    assert_quiescent(&bulkhead, 1);
}
