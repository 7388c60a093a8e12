//! Issue 29: the junctions between the deadline timer, the waiter queue, `set_limit`, the
//! policy names and the adaptive fold that cargo-mutants found unguarded. Each test below
//! fails on the seeded bugs named in its doc comment (all of them are in
//! `verification/mutants.sh`; this file's own in the block "issue 29 (junction tests)").
//! Two candidates of the issue have no test because no behaviour tells them apart, only
//! cost: `Queue::unlink_in` not decrementing `timed` (the queue then never learns that its
//! deadlines are back in order, and scans them all) and `QueueOrder::is_adaptive`
//! answering true for every order (a clock read and a drain after each queued waiter, which
//! only does earlier what a drain already owed would do).
//!
//! The futures here are polled by hand, and only when their waker was called (as an
//! executor polls them): a wait then ends only if something woke it, so a timer that never
//! fires shows up as a wait that does not end within [`BOUND`], never as a hang. The tests
//! run one at a time ([`serial`]): they share the process-wide deadline timer, and the
//! first one needs that timer parked on its own long deadline, with no other test arming
//! or firing meanwhile.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Wake, Waker};
use std::thread;
use std::time::{Duration, Instant};

use bulkhead::adaptive::{AdaptiveLimit, LimitAlgorithm, Limits, Sample};
use bulkhead::{
    Bulkhead, BulkheadConfig, BulkheadFull, Criticality, Outcome, QueueOrder, RejectReason,
};

/// How long a wait that must end may take before the test fails: generous, it only tells
/// a wait that nothing wakes (the seeded bugs) from a late one.
const BOUND: Duration = Duration::from_secs(10);

/// A max wait that never passes during a test, far beyond [`BOUND`] (a timer armed for it
/// never fires while the file runs).
const LONG: Duration = Duration::from_secs(120);

/// The tests of this file run one at a time (see the module docs).
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(PoisonError::into_inner)
}

fn limit_wait(limit: usize, wait: Duration) -> BulkheadConfig {
    BulkheadConfig::builder()
        .max_concurrent_calls(limit)
        .max_wait_duration(wait)
        .build()
        .expect("valid config")
}

/// A waker that records that it was called.
#[derive(Default)]
struct Signal {
    woken: Mutex<bool>,
    cv: Condvar,
}

impl Wake for Signal {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        *self.woken.lock().unwrap() = true;
        self.cv.notify_all();
    }
}

impl Signal {
    /// Whether the waker was called since the last look (and forgets it).
    fn take(&self) -> bool {
        std::mem::take(&mut *self.woken.lock().unwrap())
    }

    /// Waits until the waker is called (and forgets it), or `deadline` passes: `false`.
    fn wait_until(&self, deadline: Instant) -> bool {
        let mut woken = self.woken.lock().unwrap();
        while !*woken {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            woken = self.cv.wait_timeout(woken, deadline - now).unwrap().0;
        }
        *woken = false;
        true
    }
}

/// A future polled by hand, with a waker of its own.
struct Polled<F: Future> {
    fut: Pin<Box<F>>,
    signal: Arc<Signal>,
    waker: Waker,
}

impl<F: Future> Polled<F> {
    /// Polls `fut` once, which must queue it (`Pending`).
    #[track_caller]
    fn queued(fut: F) -> Self {
        let signal = Arc::new(Signal::default());
        let waker = Waker::from(Arc::clone(&signal));
        let mut polled = Polled { fut: Box::pin(fut), signal, waker };
        assert!(polled.poll().is_pending(), "the acquire was expected to queue");
        polled
    }

    fn poll(&mut self) -> Poll<F::Output> {
        self.fut.as_mut().poll(&mut Context::from_waker(&self.waker))
    }

    /// Polls on every wake until the future is ready; `None` if it is not within `bound`.
    /// Never polls without a wake: a wait nothing wakes does not end here.
    fn finish_within(&mut self, bound: Duration) -> Option<F::Output> {
        let deadline = Instant::now() + bound;
        loop {
            if !self.signal.wait_until(deadline) {
                return None;
            }
            if let Poll::Ready(output) = self.poll() {
                return Some(output);
            }
        }
    }
}

/// `ended` is a refusal `WaitTimedOut` after at least `wait`.
#[track_caller]
fn assert_timed_out<T>(what: &str, ended: Option<Result<T, BulkheadFull>>, wait: Duration) {
    match ended {
        None => panic!("{what}: not ended {BOUND:?} after its {wait:?} max wait (never woken)"),
        Some(Ok(_)) => panic!("{what}: granted, expected WaitTimedOut"),
        Some(Err(err)) => {
            assert_eq!(err.reason(), RejectReason::WaitTimedOut, "{what}: {err}");
            assert!(err.waited() >= wait, "{what}: waited {:?} < {wait:?}", err.waited());
        }
    }
}

/// `ended` is a grant (the permit is released here).
#[track_caller]
fn assert_granted<T>(what: &str, ended: Option<Result<T, BulkheadFull>>) {
    match ended {
        None => panic!("{what}: not granted the released permit within {BOUND:?}"),
        Some(Ok(permit)) => drop(permit),
        Some(Err(err)) => panic!("{what}: refused: {err}"),
    }
}

/// Polls `cond` until it holds; fails the test after [`BOUND`].
#[track_caller]
fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < BOUND, "still waiting for {what} after {BOUND:?}");
        thread::sleep(Duration::from_micros(200));
    }
}

/// Joins `handle`, failing the test (not hanging) if it runs past [`BOUND`].
#[track_caller]
fn join_within<T>(handle: thread::JoinHandle<T>) -> T {
    wait_until("a thread to finish", || handle.is_finished());
    handle.join().unwrap_or_else(|payload| std::panic::resume_unwind(payload))
}

// ---------------------------------------------------------------------------------------
// Item 1: the timer thread parked on a later deadline is woken for an earlier one.
// ---------------------------------------------------------------------------------------

/// Mutant `timer_schedule_wakes_for_later_deadline` (timer.rs `schedule`: `at < top.at`
/// becomes `at > top.at`): the timer thread sleeps until the 120 s deadline of the first
/// bulkhead and never hears of the second bulkhead's 20 ms one.
#[test]
fn an_earlier_deadline_on_another_bulkhead_wakes_the_parked_timer() {
    let _serial = serial();
    let fast_wait = Duration::from_millis(20);
    let slow = Bulkhead::new("junction-slow", limit_wait(1, LONG));
    let fast = Bulkhead::new("junction-fast", limit_wait(1, fast_wait));
    let _slow_held = slow.try_acquire().unwrap();
    let _fast_held = fast.try_acquire().unwrap();
    let mut first = Polled::queued(slow.acquire_async());
    // Give the timer thread (started by this wait if no test before started it) time to
    // park until the 120 s deadline, so that only `schedule`'s unpark can wake it.
    thread::sleep(Duration::from_millis(50));
    let mut second = Polled::queued(fast.acquire_async());
    assert_timed_out("the 20 ms waiter", second.finish_within(BOUND), fast_wait);
    assert!(!first.signal.take(), "the 120 s waiter was woken");
    assert!(first.poll().is_pending(), "the 120 s waiter ended");
    assert_eq!(slow.metrics().waiting_calls(), 1);
    assert_eq!(fast.metrics().waiting_calls(), 0);
}

// ---------------------------------------------------------------------------------------
// Item 2: after firing for one waiter, the timer re-arms for the next one of the queue.
// ---------------------------------------------------------------------------------------

/// Mutant `timer_rearm_skips_timed_waiters` (state.rs `Queue::earliest_deadline`:
/// `self.timed > 0` becomes `self.timed == 0`): the fire for A's deadline finds no later
/// deadline, so nothing re-arms the timer for B's.
#[test]
fn the_timer_rearms_for_the_next_deadline_of_the_same_queue() {
    let _serial = serial();
    let wait = Duration::from_millis(100);
    let bulkhead = Bulkhead::new("junction-rearm", limit_wait(1, wait));
    let _held = bulkhead.try_acquire().unwrap();
    let mut a = Polled::queued(bulkhead.acquire_async());
    // B's deadline comes 50 ms after A's: the fire for A's does not expire B too.
    thread::sleep(Duration::from_millis(50));
    let mut b = Polled::queued(bulkhead.acquire_async());
    assert_timed_out("waiter A", a.finish_within(BOUND), wait);
    assert_timed_out("waiter B", b.finish_within(BOUND), wait);
    assert_eq!(bulkhead.metrics().waiting_calls(), 0);
    assert_eq!(bulkhead.metrics().in_flight_calls(), 1);
}

// ---------------------------------------------------------------------------------------
// Item 3: a waiter leaving while deadlines are out of queue order.
// ---------------------------------------------------------------------------------------

/// Mutant `unlink_restores_order_with_timed_left` (state.rs `Queue::unlink_in`:
/// `self.timed == 0` becomes `self.timed != 0`): C leaving makes the queue believe its
/// deadlines are in order again, so the fire for B's deadline stops at A's later one
/// (and re-arms for A's, 120 s away).
#[test]
fn a_waiter_leaving_keeps_shortened_deadlines_out_of_order() {
    let _serial = serial();
    let short = Duration::from_millis(200);
    let bulkhead = Bulkhead::new("junction-shortened", limit_wait(1, LONG));
    let held = bulkhead.try_acquire().unwrap();
    let mut a = Polled::queued(bulkhead.acquire_async());
    bulkhead.change_config(limit_wait(1, short));
    let mut b = Polled::queued(bulkhead.acquire_async());
    let c = Polled::queued(bulkhead.acquire_async());
    drop(c); // leaves the queue: an unlink with two timed waiters left, out of order
    assert_eq!(bulkhead.metrics().waiting_calls(), 2);
    assert_timed_out("waiter B", b.finish_within(BOUND), short);
    assert!(!a.signal.take(), "A (120 s) was woken");
    assert_eq!(bulkhead.metrics().waiting_calls(), 1, "A waits on");
    drop(held);
    assert_granted("waiter A", a.finish_within(BOUND));
    assert_eq!(bulkhead.metrics().available_concurrent_calls(), 1);
}

// ---------------------------------------------------------------------------------------
// Item 5: a shrink refuses a queued request above the new limit without a release.
// ---------------------------------------------------------------------------------------

/// A `change_config` that shrinks the limit below a queued request refuses it at once
/// (caught by mutant `drain_never_refuses_above_limit`). Not by mutant
/// `shrink_with_waiters_skips_drain`: `change_config` also serves the queue because
/// `set_policy` asks for it whenever a waiter is queued, whatever `set_limit` answers; the
/// adaptive test below reaches `set_limit`'s answer alone.
#[test]
fn a_shrink_refuses_a_queued_request_above_the_new_limit_at_once() {
    let _serial = serial();
    let bulkhead = Bulkhead::new("junction-shrink", limit_wait(4, LONG));
    let held = bulkhead.try_acquire_many(2).unwrap();
    let mut three = Polled::queued(bulkhead.acquire_many_async(3)); // 2 free, 3 asked
    assert_eq!(bulkhead.metrics().waiting_calls(), 1);
    bulkhead.change_config(limit_wait(2, LONG));
    // No release, no wait: `change_config` itself refused and woke the waiter.
    assert!(three.signal.take(), "the shrink did not wake the request for 3");
    match three.poll() {
        Poll::Ready(Err(err)) => assert_eq!(err.reason(), RejectReason::ExceedsLimit, "{err}"),
        Poll::Ready(Ok(_)) => panic!("3 permits granted above a limit of 2"),
        Poll::Pending => panic!("the request for 3 still waits above a limit of 2"),
    }
    assert_eq!(bulkhead.metrics().waiting_calls(), 0);
    drop(held);
    assert_eq!(bulkhead.metrics().available_concurrent_calls(), 2);
    assert_eq!(bulkhead.metrics().in_flight_calls(), 0);
}

/// An algorithm that sets the limit the test chose.
struct Fixed(Arc<AtomicUsize>);

impl LimitAlgorithm for Fixed {
    fn update(&mut self, _sample: &Sample, _limits: Limits) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// Mutant `shrink_with_waiters_skips_drain` (state.rs `Semaphore::set_limit`:
/// `new.limit() < word.limit()` becomes `>`): an adaptive limit that shrinks (the engine's
/// `set_limit`, through `set_engine_limit`, which serves the queue only on its answer) no
/// longer drains, so the queued request for 3 waits above the new limit of 2 until some
/// release drains.
#[test]
fn an_adaptive_shrink_refuses_a_queued_request_above_the_new_limit_at_once() {
    let _serial = serial();
    let target = Arc::new(AtomicUsize::new(4));
    let bulkhead = Bulkhead::new("junction-adaptive-shrink", limit_wait(4, LONG));
    bulkhead.set_adaptive_limit(AdaptiveLimit::new(Fixed(Arc::clone(&target)))).unwrap();
    let held = bulkhead.try_acquire_many(2).unwrap();
    let mut three = Polled::queued(bulkhead.acquire_many_async(3)); // 2 free, 3 asked
    assert_eq!(bulkhead.metrics().waiting_calls(), 1);
    target.store(2, Ordering::SeqCst);
    let control = bulkhead.adaptive_limit().unwrap();
    control.record(Sample::new(Duration::from_millis(1), 2, Outcome::Success));
    assert_eq!(control.limit(), 2);
    assert_eq!(bulkhead.metrics().max_allowed_concurrent_calls(), 2);
    // No release, no wait: the shrink itself refused and woke the waiter.
    assert!(three.signal.take(), "the shrink did not wake the request for 3");
    match three.poll() {
        Poll::Ready(Err(err)) => assert_eq!(err.reason(), RejectReason::ExceedsLimit, "{err}"),
        Poll::Ready(Ok(_)) => panic!("3 permits granted above a limit of 2"),
        Poll::Pending => panic!("the request for 3 still waits above a limit of 2"),
    }
    assert_eq!(bulkhead.metrics().waiting_calls(), 0);
    drop(held);
    assert_eq!(bulkhead.metrics().available_concurrent_calls(), 2);
    assert_eq!(bulkhead.metrics().in_flight_calls(), 0);
}

// ---------------------------------------------------------------------------------------
// Item 6: the names of the queue orders and classes.
// ---------------------------------------------------------------------------------------

/// Mutant `queue_order_display_empty` (policy.rs: `QueueOrder`'s `Display` writes
/// nothing). The labels are the config-file spellings (docs/config-files.md,
/// `queue-order`) and `bulkhead-check`'s column.
#[test]
fn queue_orders_print_their_config_file_names() {
    let _serial = serial();
    assert_eq!(QueueOrder::Fifo.label(), "fifo");
    assert_eq!(QueueOrder::Lifo.label(), "lifo");
    let adaptive = QueueOrder::AdaptiveLifo {
        target: Duration::from_millis(10),
        interval: Duration::from_millis(100),
    };
    assert_eq!(adaptive.label(), "adaptive-lifo");
    assert_eq!(QueueOrder::Fifo.to_string(), "fifo");
    assert_eq!(QueueOrder::Lifo.to_string(), "lifo");
    assert_eq!(adaptive.to_string(), "adaptive-lifo (target 10ms, interval 100ms)");
    assert_eq!(QueueOrder::default().to_string(), "fifo");
}

/// Mutant `criticality_label_wrong` (policy.rs: `Criticality::label` returns "xyzzy"; the
/// `Display` goes through it).
#[test]
fn criticalities_print_their_labels() {
    let _serial = serial();
    let expected = [
        (Criticality::Critical, "critical"),
        (Criticality::Default, "default"),
        (Criticality::Sheddable, "sheddable"),
    ];
    for (class, name) in expected {
        assert_eq!(class.label(), name);
        assert_eq!(class.to_string(), name);
    }
    assert_eq!(Criticality::default().label(), "default");
}

// ---------------------------------------------------------------------------------------
// Item 7: engine-timed waiters behind a head that has no engine deadline.
// ---------------------------------------------------------------------------------------

/// Two engine-timed async waiters, X and then Y 50 ms later, queued behind a head that
/// waits without an engine deadline: both end with `WaitTimedOut`. X's deadline is armed
/// when X queues (caught by mutant `pop_expired_stops_at_untimed`); Y's only by the
/// re-arm after X's fire, which must look past the untimed head (caught by mutant
/// `earliest_deadline_stops_at_untimed`).
fn timed_waiters_behind_an_untimed_head_expire(bulkhead: &Bulkhead, wait: Duration) {
    assert_eq!(bulkhead.metrics().waiting_calls(), 1, "the head waits");
    let mut x = Polled::queued(bulkhead.acquire_async());
    thread::sleep(Duration::from_millis(50));
    let mut y = Polled::queued(bulkhead.acquire_async());
    assert_timed_out("waiter X", x.finish_within(BOUND), wait);
    assert_timed_out("waiter Y", y.finish_within(BOUND), wait);
    assert_eq!(bulkhead.metrics().waiting_calls(), 1, "the head waits on");
}

/// The head is a thread blocked in `acquire_timeout` (it keeps its own deadline).
#[test]
fn timed_waiters_expire_behind_a_blocking_head() {
    let _serial = serial();
    let wait = Duration::from_millis(100);
    let bulkhead = Arc::new(Bulkhead::new("junction-blocking-head", limit_wait(1, wait)));
    let held = bulkhead.try_acquire().unwrap();
    let head = {
        let bulkhead = Arc::clone(&bulkhead);
        thread::spawn(move || bulkhead.acquire_timeout(LONG).map(|permit| permit.num_permits()))
    };
    wait_until("the blocking head to queue", || bulkhead.metrics().waiting_calls() == 1);
    timed_waiters_behind_an_untimed_head_expire(&bulkhead, wait);
    drop(held);
    assert_eq!(join_within(head).expect("the head is granted the released permit"), 1);
    assert_eq!(bulkhead.metrics().available_concurrent_calls(), 1);
}

/// The head bounds its wait with a sleep of its own (`acquire_async_with_sleep`; one that
/// never ends here).
#[test]
fn timed_waiters_expire_behind_a_head_with_its_own_sleep() {
    let _serial = serial();
    let wait = Duration::from_millis(100);
    let bulkhead = Bulkhead::new("junction-sleep-head", limit_wait(1, wait));
    let held = bulkhead.try_acquire().unwrap();
    let mut head =
        Polled::queued(bulkhead.acquire_async_with_sleep(|_wait| std::future::pending::<()>()));
    timed_waiters_behind_an_untimed_head_expire(&bulkhead, wait);
    assert!(!head.signal.take(), "the head was woken");
    drop(held);
    assert_granted("the head", head.finish_within(BOUND));
}

/// The head waits unbounded (`acquire_async` with no max wait); the max wait is then
/// shortened for the waiters behind it.
#[test]
fn timed_waiters_expire_behind_an_unbounded_head() {
    let _serial = serial();
    let wait = Duration::from_millis(100);
    let bulkhead = Bulkhead::new("junction-unbounded-head", limit_wait(1, Duration::MAX));
    let held = bulkhead.try_acquire().unwrap();
    let mut head = Polled::queued(bulkhead.acquire_async());
    bulkhead.change_config(limit_wait(1, wait));
    timed_waiters_behind_an_untimed_head_expire(&bulkhead, wait);
    assert!(!head.signal.take(), "the head was woken");
    drop(held);
    assert_granted("the head", head.finish_within(BOUND));
}

// ---------------------------------------------------------------------------------------
// Item 8: a full per-thread sample ring while another thread holds the controller.
// ---------------------------------------------------------------------------------------

#[derive(Default)]
struct GateState {
    /// The next `update` holds the controller's lock until `open`.
    hold: bool,
    holding: bool,
    open: bool,
    /// Failure samples the algorithm was fed.
    failures: u64,
}

/// An algorithm that can hold the controller's lock (it runs under it), and counts the
/// failures it is fed. It keeps the limit as it is.
#[derive(Default)]
struct Gate {
    state: Mutex<GateState>,
    cv: Condvar,
}

struct GateAlgorithm(Arc<Gate>);

impl LimitAlgorithm for GateAlgorithm {
    fn update(&mut self, sample: &Sample, limits: Limits) -> usize {
        let gate = &self.0;
        let mut state = gate.state.lock().unwrap();
        if sample.outcome == Outcome::Failure {
            state.failures += 1;
        }
        if std::mem::take(&mut state.hold) {
            state.holding = true;
            gate.cv.notify_all();
            // Bounded: a test that fails before opening the gate does not hang here.
            let deadline = Instant::now() + BOUND;
            while !state.open && Instant::now() < deadline {
                let left = deadline.saturating_duration_since(Instant::now());
                state = gate.cv.wait_timeout(state, left).unwrap().0;
            }
            state.holding = false;
        }
        limits.current
    }
}

/// Mutants `adaptive_full_ring_overwrites` (fold.rs `Slot::push`: `>= RING` becomes
/// `> RING`: the first push to a full ring overwrites its oldest sample, not folded yet)
/// and `adaptive_full_ring_drop_uncounted` (mod.rs `push_to_full_ring` drops the sample
/// without `drop_one`). Another thread holds the controller's lock (inside the algorithm)
/// while this one records 300 calls, more than a ring holds (128): every sample is then
/// either folded or counted in `samples_dropped`, and the oldest sample of the full ring,
/// a failure, reaches the algorithm.
#[test]
fn a_full_sample_ring_loses_no_sample_silently() {
    let _serial = serial();
    const CALLS: u64 = 300;
    let gate = Arc::new(Gate::default());
    let config = BulkheadConfig::builder().max_concurrent_calls(4).build().unwrap();
    let bank = Arc::new(Bulkhead::new("junction-ring", config));
    // No fold by time: this thread asks for folds only on its failure and a full batch.
    let limit =
        AdaptiveLimit::new(GateAlgorithm(Arc::clone(&gate))).fold_window(Duration::from_secs(3600));
    bank.set_adaptive_limit(limit).unwrap();
    gate.state.lock().unwrap().hold = true;
    let holder = {
        let bank = Arc::clone(&bank);
        // Its failure folds at once, on its thread: `update` holds the lock there.
        thread::spawn(move || bank.try_acquire().unwrap().fail())
    };
    {
        let deadline = Instant::now() + BOUND;
        let mut state = gate.state.lock().unwrap();
        while !state.holding {
            assert!(Instant::now() < deadline, "the holder never entered the algorithm");
            state = gate.cv.wait_timeout(state, Duration::from_millis(10)).unwrap().0;
        }
    }
    // This thread's ring: a failure first (its oldest sample), then successes past full.
    bank.try_acquire().unwrap().fail();
    for _ in 1..CALLS {
        drop(bank.try_acquire().unwrap());
    }
    {
        let mut state = gate.state.lock().unwrap();
        state.open = true;
        gate.cv.notify_all();
    }
    join_within(holder);
    let metrics = bank.adaptive_limit().unwrap().metrics();
    assert!(metrics.samples_dropped() > 0, "the ring never filled: {metrics:?}");
    assert_eq!(
        metrics.samples() + metrics.samples_dropped(),
        1 + CALLS,
        "a sample was neither folded nor counted as dropped: {metrics:?}"
    );
    assert_eq!(
        gate.state.lock().unwrap().failures,
        2,
        "the holder's failure and this thread's oldest sample: {metrics:?}"
    );
    assert_eq!(bank.metrics().in_flight_calls(), 0);
}
