//! `BulkheadFull::retry_after` (issue 32): `None` unobserved, an estimate once an observed
//! bulkhead saw calls finish, growing with the queue ahead, undisturbed by hostile listeners.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use bulkhead::{Bulkhead, RejectReason};
use common::{join_guarded, limit, limit_wait, limit_wait_cap, shared, wait_for_waiters};

/// Runs `calls` calls of `hold` each, one after the other.
fn finish_calls(bulkhead: &Bulkhead, calls: usize, hold: Duration) {
    for _ in 0..calls {
        let permit = bulkhead.try_acquire().expect("a free permit");
        thread::sleep(hold);
        drop(permit);
    }
}

#[test]
fn unobserved_refusals_carry_no_estimate() {
    let bulkhead = Bulkhead::new("quiet", limit_wait_cap(1, Duration::from_millis(5), 0));
    finish_calls(&bulkhead, 3, Duration::from_millis(1));
    let _held = bulkhead.try_acquire().unwrap();
    let full = bulkhead.try_acquire().unwrap_err();
    assert_eq!(full.reason(), RejectReason::Full);
    assert_eq!(full.retry_after(), None);
    let capped = bulkhead.acquire().unwrap_err();
    assert_eq!(capped.reason(), RejectReason::TooManyWaiting);
    assert_eq!(capped.retry_after(), None);
    let timed_out = Bulkhead::new("quiet-wait", limit_wait(1, Duration::from_millis(2)));
    let _held = timed_out.try_acquire().unwrap();
    let err = timed_out.acquire().unwrap_err();
    assert_eq!(err.reason(), RejectReason::WaitTimedOut);
    assert_eq!(err.retry_after(), None);
}

#[test]
fn an_observed_bulkhead_estimates_once_calls_finished() {
    let bulkhead = Bulkhead::new("counted", limit(1));
    bulkhead.enable_counters();
    let held = bulkhead.try_acquire().unwrap();
    // Nothing finished yet: nothing to estimate from.
    assert_eq!(bulkhead.try_acquire().unwrap_err().retry_after(), None);
    drop(held);
    finish_calls(&bulkhead, 2, Duration::from_millis(2));
    let _held = bulkhead.try_acquire().unwrap();
    let retry = bulkhead.try_acquire().unwrap_err().retry_after().expect("calls finished");
    assert!(retry > Duration::ZERO, "{retry:?}");
    // A closed bulkhead frees nothing: no estimate.
    bulkhead.close();
    assert_eq!(bulkhead.try_acquire().unwrap_err().retry_after(), None);
}

#[test]
fn a_bulkhead_observed_by_a_listener_alone_estimates_too() {
    let bulkhead = Bulkhead::new("heard", limit(1));
    let _handle = bulkhead.on_event(|_| {});
    finish_calls(&bulkhead, 2, Duration::from_millis(1));
    let _held = bulkhead.try_acquire().unwrap();
    assert!(bulkhead.try_acquire().unwrap_err().retry_after().is_some());
    assert!(!bulkhead.metrics().is_counting());
}

#[test]
fn the_estimate_grows_with_the_queue_ahead() {
    let counted = shared("queue", limit_wait(1, common::LONG_WAIT));
    counted.enable_counters();
    estimate_grows_with_the_queue_ahead(&counted);
}

/// As above, heard by a listener alone: its refusal takes another path (`refuse_observed`,
/// which carries the encoded estimate of a caller the next release would serve only when
/// nobody is queued; stop 39).
#[test]
fn the_estimate_heard_by_a_listener_grows_with_the_queue_ahead() {
    let heard = shared("queue-heard", limit_wait(1, common::LONG_WAIT));
    let _handle = heard.on_event(|_| {});
    estimate_grows_with_the_queue_ahead(&heard);
}

fn estimate_grows_with_the_queue_ahead(bulkhead: &Arc<Bulkhead>) {
    finish_calls(bulkhead, 4, Duration::from_millis(2));
    let held = bulkhead.try_acquire().unwrap();
    // Nobody queued: one release serves a caller coming back.
    let alone = bulkhead.try_acquire().unwrap_err().retry_after().expect("calls finished");
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let bulkhead = Arc::clone(bulkhead);
            thread::spawn(move || drop(bulkhead.acquire().expect("granted in turn")))
        })
        .collect();
    wait_for_waiters(bulkhead, 3);
    // Four releases instead of one, at an interval that only grows while none comes back.
    // Twice: a refusal that reads no clock must not carry the estimate of a caller with
    // nobody ahead either (the first may be its thread's tick).
    for _ in 0..2 {
        let behind_three = bulkhead.try_acquire().unwrap_err().retry_after().expect("finished");
        assert!(behind_three >= alone * 4 - alone / 64, "{behind_three:?} vs {alone:?}");
    }
    drop(held);
    waiters.into_iter().for_each(join_guarded);
    common::assert_quiescent(bulkhead, 1);
}

#[test]
fn refusals_after_a_wait_carry_the_wait_and_the_estimate() {
    let wait = Duration::from_millis(3);
    let bulkhead = Bulkhead::new("waited", limit_wait_cap(1, wait, 1));
    bulkhead.enable_counters();
    finish_calls(&bulkhead, 2, Duration::from_millis(1));
    let _held = bulkhead.try_acquire().unwrap();
    let err = bulkhead.acquire().unwrap_err();
    assert_eq!(err.reason(), RejectReason::WaitTimedOut);
    assert!(err.waited() >= wait, "{:?}", err.waited());
    assert!(err.retry_after().is_some());
    assert_eq!(bulkhead.metrics().calls_rejected(RejectReason::WaitTimedOut), 1);
}

thread_local! {
    /// Whether this thread is inside the re-entering listener.
    static INSIDE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Clears [`INSIDE`] when the re-entering listener's call ends.
struct Reset;

impl Drop for Reset {
    fn drop(&mut self) {
        INSIDE.with(|inside| inside.set(false));
    }
}

#[test]
fn hostile_listeners_disturb_neither_the_estimate_nor_the_counts() {
    let bulkhead = shared("hostile", limit(2));
    bulkhead.enable_counters();
    let _panics = bulkhead.on_event(|_| panic!("a listener that panics"));
    // What the re-entering listener did itself: calls it finished, refusals it got.
    let own = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
    let weak = Arc::downgrade(&bulkhead);
    let mine = Arc::clone(&own);
    // Re-enters the bulkhead on every event (bounded): takes and drops a permit if one is
    // free, else reads its own refusal's estimate.
    let _reenters = bulkhead.on_event(move |_| {
        // One level deep: the events of its own call reach it too, and are let through.
        if INSIDE.with(|inside| inside.replace(true)) {
            return;
        }
        let _out = Reset;
        let Some(bulkhead) = weak.upgrade() else { return };
        match bulkhead.try_acquire() {
            Ok(permit) => {
                mine[0].fetch_add(1, Ordering::Relaxed);
                drop(permit);
            }
            Err(err) => {
                assert_eq!(err.reason(), RejectReason::Full);
                mine[1].fetch_add(1, Ordering::Relaxed);
            }
        };
    });
    let quiet = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    finish_calls(&bulkhead, 3, Duration::from_millis(1));
    let a = bulkhead.try_acquire().unwrap();
    let b = bulkhead.try_acquire().unwrap();
    let refused = bulkhead.try_acquire().unwrap_err();
    drop((a, b));
    std::panic::set_hook(quiet);
    assert!(refused.retry_after().is_some(), "{refused:?}");
    let m = bulkhead.metrics();
    let (ok, no) = (own[0].load(Ordering::Relaxed) as u64, own[1].load(Ordering::Relaxed) as u64);
    // Every call counted exactly once: ours (3 + 2 permitted, 1 refused) and the listener's.
    assert_eq!(m.calls_permitted(), 5 + ok);
    assert_eq!(m.calls_finished(), 5 + ok);
    assert_eq!(m.calls_rejected(RejectReason::Full), 1 + no);
    assert!(ok > 0 && no > 0, "the listener re-entered both ways: {ok} {no}");
    common::assert_quiescent(&bulkhead, 2);
}

#[test]
fn a_keyed_bulkheads_refusals_carry_the_keys_estimate() {
    let keyed = bulkhead::keyed::KeyedBulkhead::<u32>::builder("tenants")
        .default_config(limit(1))
        .total(limit(4))
        .build()
        .unwrap();
    let _held = keyed.try_acquire(&1).unwrap();
    // Unobserved: no estimate.
    assert_eq!(keyed.try_acquire(&1).unwrap_err().retry_after(), None);
    keyed.enable_counters();
    for _ in 0..3 {
        let permit = keyed.try_acquire(&2).unwrap();
        thread::sleep(Duration::from_millis(1));
        drop(permit);
    }
    let _busy = keyed.try_acquire(&2).unwrap();
    let refused = keyed.try_acquire(&2).unwrap_err();
    assert_eq!(refused.bulkhead_name(), "tenants/2");
    assert!(refused.retry_after().is_some(), "{refused:?}");
    let m = keyed.key_metrics(&2).unwrap();
    assert_eq!((m.calls_permitted(), m.calls_finished()), (4, 3));
}

#[test]
fn every_counted_refusal_is_counted_once_and_carries_the_estimate() {
    // The counted refusal reads a ready-encoded estimate and reads the clock on one refusal
    // in 16 of a thread (issue 33): across several such periods, each refusal is counted
    // exactly once and each carries an estimate, the same one while no look is due.
    let bulkhead = Bulkhead::new("tally", limit(1));
    bulkhead.enable_counters();
    finish_calls(&bulkhead, 4, Duration::from_millis(1));
    let _held = bulkhead.try_acquire().unwrap();
    let before = bulkhead.metrics().calls_rejected_total();
    let refusals = 100;
    for _ in 0..refusals {
        let full = bulkhead.try_acquire().unwrap_err();
        assert_eq!(full.reason(), RejectReason::Full);
        let retry = full.retry_after().expect("calls finished");
        assert!(retry > Duration::ZERO, "{retry:?}");
    }
    assert_eq!(bulkhead.metrics().calls_rejected_total() - before, refusals);
}

/// Runs calls of `hold` one after the other until `total` passed, refusing a call about
/// every 100 µs while each is held (all on this thread); returns the last refusal's estimate.
fn calls_with_refusals(bulkhead: &Bulkhead, hold: Duration, total: Duration) -> Duration {
    let start = std::time::Instant::now();
    let mut last = None;
    while start.elapsed() < total {
        let permit = bulkhead.try_acquire().expect("a free permit");
        let held = std::time::Instant::now();
        while held.elapsed() < hold {
            let full = bulkhead.try_acquire().unwrap_err();
            assert_eq!(full.reason(), RejectReason::Full);
            last = full.retry_after().or(last);
            thread::sleep(Duration::from_micros(100));
        }
        drop(permit);
    }
    last.expect("calls finished and refusals came")
}

#[test]
fn a_counted_refusals_estimate_follows_the_release_rate() {
    // The counted refusal carries the estimate the tracker stored, and every 16th refusal of
    // a thread reads the clock, which is how the tracker sees time pass and samples the
    // release rate (issue 33; cargo-mutants: the tick's `count % TICK_EVERY` made `/` or `+`
    // never ticked again once an estimate existed, and the estimate froze). Calls of 1 ms,
    // then of 25 ms: the estimate for a caller the next release serves moves from about
    // 1 ms to about 25 ms (blended over windows of about 8 releases: about 10 ms after 2
    // windows, 22-23 ms measured at the end here).
    let bulkhead = Bulkhead::new("drifting", limit(1));
    bulkhead.enable_counters();
    let fast = calls_with_refusals(&bulkhead, Duration::from_millis(1), Duration::from_millis(150));
    assert!(fast > Duration::ZERO, "{fast:?}");
    let slow =
        calls_with_refusals(&bulkhead, Duration::from_millis(25), Duration::from_millis(900));
    // A frozen estimate is the same one both times; a slow machine stretches the 1 ms calls
    // (sleeps overshoot), never the 25 ms ones below 25 ms.
    assert!(
        slow > fast && slow >= Duration::from_millis(8),
        "the estimate did not follow: {fast:?} then {slow:?}"
    );
}

/// Fills `bulkhead` with `try_acquire` and returns the permits and the refusal that ended it.
fn fill(bulkhead: &Bulkhead) -> (Vec<bulkhead::Permit<'_>>, bulkhead::BulkheadFull) {
    let mut held = Vec::new();
    loop {
        match bulkhead.try_acquire() {
            Ok(permit) => held.push(permit),
            Err(full) => return (held, full),
        }
    }
}

/// A listener's refusals carry the estimate every time: all but one refusal in 16 of a
/// thread read the bulkhead's encoded estimate instead of the clock (stop 39), and the
/// 16th asks the tracker, as the counted refusal does. Each refusal is still heard once.
#[test]
fn every_refusal_heard_by_a_listener_carries_the_estimate() {
    let bulkhead = Bulkhead::new("heard-often", limit(1));
    let heard = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&heard);
    let _handle = bulkhead.on_event(move |_| {
        seen.fetch_add(1, Ordering::SeqCst);
    });
    finish_calls(&bulkhead, 2, Duration::from_millis(1));
    let _held = bulkhead.try_acquire().unwrap();
    let before = heard.load(Ordering::SeqCst);
    for _ in 0..100 {
        let full = bulkhead.try_acquire().unwrap_err();
        assert_eq!(full.reason(), RejectReason::Full);
        assert!(full.retry_after().is_some(), "refusal heard by a listener, calls finished");
    }
    assert_eq!(heard.load(Ordering::SeqCst) - before, 100, "each refusal heard once");
}

/// An adaptive bulkhead's controller alone learns nothing from a refusal and has no
/// release-rate tracker, so its refusal carries no estimate (stop 39 returns it without
/// asking). A listener that joins starts the tracker; after it leaves, the refusals still
/// carry an estimate (the listener chain only grows, so the bulkhead stays observed, and the
/// tracker stays).
#[test]
fn a_controller_alone_gives_no_estimate_and_a_tracker_once_started_stays() {
    use bulkhead::adaptive::{AdaptiveLimit, Aimd};
    let bank = Bulkhead::new("adaptive-alone", limit(2));
    bank.set_adaptive_limit(AdaptiveLimit::new(Aimd::default())).unwrap();
    finish_calls(&bank, 3, Duration::from_millis(1));
    let (held, full) = fill(&bank);
    assert_eq!(full.reason(), RejectReason::Full);
    assert_eq!(full.retry_after(), None, "a controller alone keeps no release rate");
    drop(held);
    let handle = bank.on_event(|_| {});
    finish_calls(&bank, 3, Duration::from_millis(1));
    assert!(handle.remove());
    let (_held, full) = fill(&bank);
    assert_eq!(full.reason(), RejectReason::Full);
    assert!(full.retry_after().is_some(), "the listener's tracker stays");
}
