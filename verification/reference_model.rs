//! A reference model of the bulkhead, checked with proptest.
//!
//! Random sequences of operations run on one bulkhead, driven deterministically from one
//! thread: `try_acquire`; async acquires polled by hand with a counting waker (the "queued"
//! callers); a queued caller's deadline, which the harness resolves by completing the sleep
//! future it handed to `acquire_async_with_sleep`; dropping a permit or a pending acquire;
//! `change_config`; and a `call` whose closure queues acquires and then panics. After every
//! step each result, reject reason and metric is compared with a small sequential model:
//! a signed count of free permits (negative is a shrink's debt), a FIFO queue, and the set
//! of queued callers already granted a permit. proptest shrinks a failure to a minimal
//! sequence of operations.
//!
//! Weighted permits: `try_acquire_many(n)` and `acquire_many_async(n)` (n in 0..=4, so some
//! requests exceed the limit of 0..=3), `split` and `merge` of held permits. The queue holds
//! each caller's request; the model grants the head's whole request once enough permits are
//! free, stops at the first it cannot satisfy (strict FIFO), and refuses a head above the
//! limit with `ExceedsLimit`. A weighted queued acquire's deadline is kept by the engine's
//! timer (an hour away), so the model never expires one.
//!
//! Queue order and criticality (issue 20): the config has a `queue_order` (FIFO or LIFO) and
//! a `sheddable_headroom` h (0..=limit), both changed by `ChangeConfig`; `try_acquire_many`
//! and `acquire_many_async` take a `Request` in a class (critical, default, sheddable). The
//! model keeps one queue in arrival order and derives each class's list from it: the next
//! waiter is the first of the highest class queued (its oldest under FIFO, its newest under
//! LIFO), the last-served one the last of the lowest class; a sheddable request requires
//! n + h free; a newcomer served before everyone queued is granted at once, and one that finds
//! the queue at its cap evicts the last-served waiter (`Evicted`) if it is served before it,
//! or is refused `TooManyWaiting`. Adaptive LIFO is left out: it switches on the real clock
//! (queueing delay against a target), which a sequential model cannot drive; the engine's
//! own tests and `tests/queue_policy.rs` cover it.
//!
//! Every other weighted pending acquire is polled with a waker that panics after counting its
//! wake (issue 29): the bulkhead contains the panic, and every expectation stays the model's.
//! After every step the engine's own work conservation check runs beside the model's.
//!
//! Runs under a plain `cargo test --test reference_model`; `PROPTEST_CASES` sets the number
//! of sequences (default 512 here).
#![cfg(not(any(bulkhead_loom, bulkhead_shuttle)))]

use std::collections::HashSet;
use std::future::Future;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use bulkhead::{
    Bulkhead, BulkheadConfig, BulkheadEventKind, BulkheadFull, Criticality, Permit, QueueOrder,
    RejectReason, Request,
};
use proptest::prelude::*;
use proptest::test_runner::{TestError, TestRunner};

/// The configured max wait, as the model sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wait {
    /// Fail fast: a full bulkhead rejects at once.
    Zero,
    /// Long enough that only the harness's sleep future ends it.
    Hour,
    /// `Duration::MAX`: no sleep is armed; only a grant ends the wait.
    Unbounded,
}

impl Wait {
    fn duration(self) -> Duration {
        match self {
            Wait::Zero => Duration::ZERO,
            Wait::Hour => Duration::from_secs(3600),
            Wait::Unbounded => Duration::MAX,
        }
    }
}

/// The queue orders the model knows (adaptive LIFO reads the real clock: left out).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Order {
    Fifo,
    Lifo,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Config {
    limit: usize,
    cap: Option<usize>,
    wait: Wait,
    order: Order,
    /// `sheddable_headroom`, at most `limit` (the builder refuses more).
    headroom: usize,
}

impl Config {
    /// FIFO, no headroom: the configuration of the pinned sequences.
    fn plain(limit: usize, cap: Option<usize>, wait: Wait) -> Config {
        Config { limit, cap, wait, order: Order::Fifo, headroom: 0 }
    }

    fn build(self) -> BulkheadConfig {
        let order = match self.order {
            Order::Fifo => QueueOrder::Fifo,
            Order::Lifo => QueueOrder::Lifo,
        };
        let mut builder = BulkheadConfig::builder()
            .max_concurrent_calls(self.limit)
            .max_wait_duration(self.wait.duration())
            .queue_order(order)
            .sheddable_headroom(self.headroom);
        if let Some(cap) = self.cap {
            builder = builder.max_waiting_calls(cap);
        }
        builder.build().expect("valid config")
    }
}

#[derive(Clone, Debug)]
enum Op {
    TryAcquire,
    /// A new async acquire, polled once.
    Queue,
    /// Polls pending acquire `i` (modulo the number pending).
    Poll(usize),
    /// Pending acquire `i`'s deadline passes: its sleep completes, then it is polled.
    Expire(usize),
    DropPermit(usize),
    DropPending(usize),
    ChangeConfig(Config),
    /// `call` whose closure queues `queued` async acquires, then panics: the permit is
    /// released while unwinding and handed to the oldest of them.
    PanickingCall {
        queued: usize,
    },
    /// `close`: refuses every queued acquire and every newcomer, for good.
    Close,
    /// `try_acquire_many(n)`.
    TryAcquireMany(u32),
    /// A new `acquire_many_async(n)`, polled once.
    QueueMany(u32),
    /// Splits `n` permits off held permit `i`.
    Split(usize, u32),
    /// Merges held permit `j` into held permit `i` (when they differ).
    Merge(usize, usize),
    /// `try_acquire_many(Request::permits(n).criticality(c))`.
    TryAcquireClassed(u32, Criticality),
    /// A new `acquire_many_async(Request::permits(n).criticality(c))`, polled once.
    QueueClassed(u32, Criticality),
}

fn config_strategy() -> impl Strategy<Value = Config> {
    (
        0..=3usize,
        prop_oneof![3 => Just(None), 1 => (0..=2usize).prop_map(Some)],
        prop_oneof![1 => Just(Wait::Zero), 4 => Just(Wait::Hour), 1 => Just(Wait::Unbounded)],
        prop_oneof![3 => Just(Order::Fifo), 2 => Just(Order::Lifo)],
        prop_oneof![2 => Just(0usize), 3 => 1..=3usize],
    )
        .prop_map(|(limit, cap, wait, order, headroom)| Config {
            limit,
            cap,
            wait,
            order,
            // The builder refuses a headroom above the limit.
            headroom: headroom.min(limit),
        })
}

fn class_strategy() -> impl Strategy<Value = Criticality> {
    prop_oneof![
        Just(Criticality::Critical),
        Just(Criticality::Default),
        Just(Criticality::Sheddable)
    ]
}

/// A classed request's permits: mostly one, sometimes none or above the limit.
fn classed_permits() -> impl Strategy<Value = u32> {
    prop_oneof![3 => Just(1u32), 2 => 0..=4u32]
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => Just(Op::TryAcquire),
        4 => Just(Op::Queue),
        2 => any::<usize>().prop_map(Op::Poll),
        2 => any::<usize>().prop_map(Op::Expire),
        4 => any::<usize>().prop_map(Op::DropPermit),
        2 => any::<usize>().prop_map(Op::DropPending),
        1 => config_strategy().prop_map(Op::ChangeConfig),
        1 => (0..=2usize).prop_map(|queued| Op::PanickingCall { queued }),
        1 => Just(Op::Close),
        2 => (0..=4u32).prop_map(Op::TryAcquireMany),
        3 => (0..=4u32).prop_map(Op::QueueMany),
        1 => (any::<usize>(), 0..=3u32).prop_map(|(i, n)| Op::Split(i, n)),
        1 => (any::<usize>(), any::<usize>()).prop_map(|(i, j)| Op::Merge(i, j)),
        2 => (classed_permits(), class_strategy()).prop_map(|(n, c)| Op::TryAcquireClassed(n, c)),
        3 => (classed_permits(), class_strategy()).prop_map(|(n, c)| Op::QueueClassed(n, c)),
    ]
}

#[path = "../fuzz/src/queue_model.rs"]
mod queue_model;

use queue_model::{ClassQueue, Enqueue, Served, Waiter};

/// The sequential model.
#[derive(Debug)]
struct Model {
    config: Config,
    /// Free permits; negative while a shrink's debt is unpaid.
    available: i64,
    /// Queued callers, with the order and headroom of `config` (see `queue_model.rs`).
    queue: ClassQueue,
    /// Queued callers that were handed a permit and have not been polled since.
    granted: HashSet<u64>,
    /// Whether `close` ran.
    closed: bool,
    /// Queued callers that `close` refused and have not been polled since.
    refused: HashSet<u64>,
    /// Queued callers refused at the head for asking more than a shrunk limit.
    exceeded: HashSet<u64>,
    /// Queued callers evicted to make room for a newcomer served before them.
    evicted: HashSet<u64>,
}

/// The model's queue for `config`'s order and headroom, holding `waiters`.
fn class_queue(config: Config, waiters: Vec<Waiter>) -> ClassQueue {
    let headroom = u32::try_from(config.headroom).expect("a small headroom");
    ClassQueue { waiters, lifo: config.order == Order::Lifo, headroom }
}

impl Model {
    fn new(config: Config) -> Model {
        Model {
            config,
            available: config.limit as i64,
            queue: class_queue(config, Vec::new()),
            granted: HashSet::new(),
            closed: false,
            refused: HashSet::new(),
            exceeded: HashSet::new(),
            evicted: HashSet::new(),
        }
    }

    fn free_for_newcomer(&self) -> bool {
        self.free_for_many(1)
    }

    /// Whether a default-class newcomer asking for `n` is granted at once: an empty request
    /// unless closed; otherwise open, `n` free and served before everyone queued (past a
    /// sheddable waiter's headroom, under the lock: issue 29).
    fn free_for_many(&self, n: u32) -> bool {
        !self.closed && self.queue.try_admits(self.available, n, Criticality::Default)
    }

    /// Whether a non-waiting `try_acquire_many(Request::permits(n).criticality(class))` is
    /// granted: never once closed; otherwise see `ClassQueue::try_admits`.
    fn try_admits(&self, n: u32, class: Criticality) -> bool {
        !self.closed && self.queue.try_admits(self.available, n, class)
    }

    /// Under the queue lock, a waiting acquire that the fast path refused (open, a max wait,
    /// `n` within the limit, `n` > 0). Does not change the model.
    fn enqueue_outcome(&self, n: u32, class: Criticality) -> Enqueue {
        self.queue.enqueue(self.available, self.config.limit as i64, self.config.cap, n, class)
    }

    /// Queues `waiter` after evicting `evict`, then drains.
    fn push(&mut self, waiter: Waiter, evict: Option<u64>) {
        if let Some(evict) = evict {
            self.queue.remove(evict);
            self.evicted.insert(evict);
        }
        self.queue.waiters.push(waiter);
        self.drain();
    }

    /// A request above the limit (a request for 1 never is: limit 0 waits for growth).
    fn exceeds(&self, n: u32) -> bool {
        n > 1 && n as usize > self.config.limit
    }

    /// The reason a newcomer asking for `n` in `class` that was refused and may not wait is
    /// given: `Closed`, else as `ClassQueue::try_refusal` (above the limit, with the headroom
    /// for a sheddable request: `ExceedsLimit`; held back by the headroom alone: `Reserved`;
    /// otherwise `Full`).
    fn refusal_many(&self, n: u32, class: Criticality) -> RejectReason {
        if self.closed {
            RejectReason::Closed
        } else {
            self.queue.try_refusal(self.available, self.config.limit as i64, n, class)
        }
    }

    /// Refuses every queued caller; permits free and in flight are untouched.
    fn close(&mut self) {
        self.closed = true;
        self.refused.extend(self.queue.waiters.drain(..).map(|w| w.id));
    }

    /// The reason a newcomer that found no free permit and may not wait is given.
    fn refusal(&self) -> RejectReason {
        if self.closed {
            RejectReason::Closed
        } else {
            RejectReason::Full
        }
    }

    /// Hands free permits to the queued callers in serving order: each next waiter's whole
    /// request (plus the headroom for a sheddable one), stopping at the first it cannot
    /// satisfy; a next waiter above the limit is refused.
    fn drain(&mut self) {
        let limit = self.config.limit as i64;
        while let Some((waiter, served)) = self.queue.drain_step(self.available, limit) {
            match served {
                Served::Granted => {
                    self.available -= i64::from(waiter.need);
                    self.granted.insert(waiter.id);
                }
                Served::Exceeded => {
                    self.exceeded.insert(waiter.id);
                }
            }
        }
    }

    fn release(&mut self, n: u32) {
        self.available += i64::from(n);
        self.drain();
    }

    fn change_config(&mut self, config: Config) {
        self.available += config.limit as i64 - self.config.limit as i64;
        self.config = config;
        self.queue = class_queue(config, std::mem::take(&mut self.queue.waiters));
        self.drain();
    }

    /// A queued caller leaves; if it was the next waiter, the new next may be served.
    fn withdraw(&mut self, id: u64) {
        if self.queue.remove(id) {
            self.drain();
        }
    }
}

/// Whether an evicted waiter's `waited` is plausible: the time the harness took (well
/// under a minute), not its max wait. (This model found an engine bug here: an evicted
/// async waiter with a bounded wait reported its whole max wait; pinned by
/// `evicted_waiter_reports_the_time_it_waited`.)
fn evicted_waited_ok(waited: Duration, _wait: Wait) -> bool {
    waited < Duration::from_secs(60)
}

/// A waker that counts its wake-ups, and then panics if `panics` (issue 29: a waker that
/// panics in `wake` must take nobody else down; the model's expectations are unchanged).
#[derive(Default)]
struct CountingWaker(AtomicUsize, bool);

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
        if self.1 {
            panic!("a pending acquire's waker panics in wake()");
        }
    }
}

/// The sleep a pending acquire waits on; the harness completes it to end the wait.
#[derive(Default)]
struct Sleep {
    /// How many times the acquire built its sleep (`make_sleep` calls).
    armed: AtomicUsize,
    fired: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

struct SleepFuture(Arc<Sleep>);

impl Future for SleepFuture {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0.fired.load(SeqCst) {
            return Poll::Ready(());
        }
        *self.0.waker.lock().unwrap() = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// The payload of the panicking call's own panic.
const PANIC: &str = "the protected call failed";

type AcquireFuture<'a> = Pin<Box<dyn Future<Output = Result<Permit<'a>, BulkheadFull>> + 'a>>;

/// A queued async acquire held by the harness.
struct Pending<'a> {
    id: u64,
    future: AcquireFuture<'a>,
    /// The waker of the latest poll: a fresh one each time, as an executor moving a task
    /// between threads would give, so a future that keeps an old waker is caught.
    waker: Arc<CountingWaker>,
    sleep: Arc<Sleep>,
    /// The max wait in force when it queued.
    wait: Wait,
    /// The permits it asked for (`acquire_many_async`); `None` for the plain acquire with a
    /// sleep of the harness's.
    many: Option<u32>,
}

impl<'a> Pending<'a> {
    fn poll(&mut self) -> Poll<Result<Permit<'a>, BulkheadFull>> {
        // Every other weighted acquire (no sleep of the harness's, so only the bulkhead
        // ever wakes it) has a waker that panics.
        let panics = self.many.is_some() && self.id % 2 == 1;
        self.waker = Arc::new(CountingWaker(AtomicUsize::new(0), panics));
        let waker = Waker::from(Arc::clone(&self.waker));
        self.future.as_mut().poll(&mut Context::from_waker(&waker))
    }
}

/// What the callers saw: permits handed to them, permits they dropped, refusals per reason.
/// The bulkhead's counters, and the events a listener hears, must match it exactly.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Seen {
    permitted: u64,
    finished: u64,
    full: u64,
    wait_timed_out: u64,
    too_many_waiting: u64,
    closed: u64,
    exceeds_limit: u64,
    evicted: u64,
    reserved: u64,
    /// `BulkheadEventKind::Closed` events (not a call: no counter; at most one, for the
    /// first `close`).
    close_events: u64,
}

impl Seen {
    fn refused(&mut self, reason: RejectReason) {
        match reason {
            RejectReason::Full => self.full += 1,
            RejectReason::WaitTimedOut => self.wait_timed_out += 1,
            RejectReason::TooManyWaiting => self.too_many_waiting += 1,
            RejectReason::Closed => self.closed += 1,
            RejectReason::ExceedsLimit => self.exceeds_limit += 1,
            RejectReason::Evicted => self.evicted += 1,
            RejectReason::Reserved => self.reserved += 1,
            other => panic!("unexpected reason {other:?}"),
        }
    }
}

/// A listener's tally of events, in the shape of [`Seen`].
#[derive(Default)]
struct Heard(Mutex<Seen>);

impl Heard {
    fn hear(&self, event: &bulkhead::BulkheadEvent) {
        let mut heard = self.0.lock().unwrap();
        match event.kind() {
            BulkheadEventKind::CallPermitted => heard.permitted += 1,
            BulkheadEventKind::CallFinished => heard.finished += 1,
            BulkheadEventKind::CallRejected(reason) => heard.refused(reason),
            BulkheadEventKind::Closed => heard.close_events += 1,
            other => panic!("unexpected event {other:?}"),
        }
    }
}

struct Harness<'a> {
    bulkhead: &'a Bulkhead,
    model: Model,
    permits: Vec<Permit<'a>>,
    pending: Vec<Pending<'a>>,
    next_id: u64,
    seen: Seen,
    heard: Arc<Heard>,
}

impl<'a> Harness<'a> {
    fn expect_full(&mut self, err: &BulkheadFull, reason: RejectReason) {
        self.seen.refused(err.reason());
        assert_eq!(err.reason(), reason, "{err}");
        assert_eq!(err.max_concurrent_calls(), self.model.config.limit);
        assert_eq!(err.waited(), Duration::ZERO);
        assert_eq!(err.bulkhead_name(), "reference_model");
    }

    fn try_acquire(&mut self) {
        let result = self.bulkhead.try_acquire();
        if self.model.free_for_newcomer() {
            self.model.available -= 1;
            self.permits.push(result.expect("the model has a free permit"));
            self.seen.permitted += 1;
        } else {
            let err = result.expect_err("the model has no permit for a newcomer");
            self.expect_full(&err, self.model.refusal());
        }
    }

    /// A new async acquire, polled once: `acquire_async_with_sleep` (its sleep completed by
    /// the harness), or with `many`, `acquire_many_async(n)` in `class`, whose deadline (an
    /// hour, or none) the engine's timer keeps and never reaches here.
    fn queue(&mut self, many: Option<u32>, class: Criticality) {
        let sleep = Arc::new(Sleep::default());
        let future: AcquireFuture<'a> = match many {
            Some(n) if class == Criticality::Default => {
                Box::pin(self.bulkhead.acquire_many_async(n))
            }
            Some(n) => {
                Box::pin(self.bulkhead.acquire_many_async(Request::permits(n).criticality(class)))
            }
            None => {
                let arm = Arc::clone(&sleep);
                Box::pin(self.bulkhead.acquire_async_with_sleep(move |_wait| {
                    arm.armed.fetch_add(1, SeqCst);
                    SleepFuture(arm)
                }))
            }
        };
        let n = many.unwrap_or(1);
        let id = self.next_id;
        self.next_id += 1;
        let config = self.model.config;
        let mut pending =
            Pending { id, future, waker: Arc::default(), sleep, wait: config.wait, many };
        let result = pending.poll();
        let armed = pending.sleep.armed.load(SeqCst);
        // The fast path (a non-waiting acquire), then the refusals that need no queue, then
        // the queue lock.
        let model = &self.model;
        let expected = if model.try_admits(n, class) {
            Enqueue::Granted
        } else if model.closed || model.exceeds(n) || n == 0 || config.wait == Wait::Zero {
            let reason = model.refusal_many(n, class);
            let err = match result {
                Poll::Ready(Err(err)) => err,
                other => panic!(
                    "acquire {id} of {n} ({class}): {:?}, the model refuses {reason:?}",
                    other.map(|r| r.map(drop))
                ),
            };
            assert_eq!(armed, 0, "armed a sleep without queueing");
            self.expect_full(&err, reason);
            return;
        } else {
            model.enqueue_outcome(n, class)
        };
        let evict = match expected {
            Enqueue::Queued(evict) => evict,
            _ => None,
        };
        if let Enqueue::Queued(evict) = expected {
            self.model.push(Waiter { id, need: n, class }, evict);
        }
        // The drain after queueing may end the newcomer's own wait at once.
        let granted_at_once = expected == Enqueue::Granted || self.model.granted.remove(&id);
        match result {
            Poll::Ready(Ok(permit)) => {
                assert!(
                    granted_at_once,
                    "acquire {id} of {n} ({class}) admitted, model: {expected:?}"
                );
                assert_eq!(armed, 0, "armed a sleep without queueing");
                assert_eq!(permit.num_permits(), n);
                if expected == Enqueue::Granted {
                    self.model.available -= i64::from(n);
                }
                self.permits.push(permit);
                self.seen.permitted += 1;
            }
            Poll::Ready(Err(err)) => {
                assert!(
                    !granted_at_once,
                    "acquire {id} of {n} ({class}) refused ({err}), model: granted"
                );
                assert_eq!(armed, 0, "armed a sleep without queueing");
                let reason = if self.model.exceeded.remove(&id) {
                    RejectReason::ExceedsLimit
                } else {
                    // Under the lock: the waiter cap, or a sheddable request that the
                    // headroom leaves no room for under this limit (issue 29).
                    match expected {
                        Enqueue::Refused(reason) => reason,
                        other => panic!("acquire {id} refused ({err}), model: {other:?}"),
                    }
                };
                self.expect_full(&err, reason);
            }
            Poll::Pending => {
                assert!(
                    matches!(expected, Enqueue::Queued(_)) && !granted_at_once,
                    "acquire {id} of {n} ({class}) queued, model: {expected:?}"
                );
                assert!(!self.model.closed, "queued on a closed bulkhead");
                assert!(!self.model.exceeds(n), "queued a request above the limit");
                assert_ne!(config.wait, Wait::Zero, "queued with a zero max wait");
                let sleeps = many.is_none() && config.wait == Wait::Hour;
                assert_eq!(armed, usize::from(sleeps), "make_sleep calls");
                self.pending.push(pending);
            }
        }
        if let Some(evicted) = evict {
            // The evicted waiter was woken; it finds `Evicted` on its next poll.
            let waiter = self.pending.iter().find(|p| p.id == evicted).expect("evicted is pending");
            assert!(
                waiter.waker.0.load(SeqCst) > 0,
                "acquire {evicted} was evicted for acquire {id} but not woken"
            );
        }
    }

    /// `try_acquire_many(n)`, or with `class`, `try_acquire_many(Request::permits(n).criticality(c))`.
    fn try_acquire_many(&mut self, n: u32, class: Option<Criticality>) {
        let (result, admits) = match class {
            None => (self.bulkhead.try_acquire_many(n), self.model.free_for_many(n)),
            Some(class) => (
                self.bulkhead.try_acquire_many(Request::permits(n).criticality(class)),
                self.model.try_admits(n, class),
            ),
        };
        if admits {
            let permit = result.expect("the model has the permits free");
            assert_eq!(permit.num_permits(), n);
            self.model.available -= i64::from(n);
            self.permits.push(permit);
            self.seen.permitted += 1;
        } else {
            let err = result.expect_err("the model has too few permits for a newcomer");
            self.expect_full(&err, self.model.refusal_many(n, class.unwrap_or_default()));
        }
    }

    /// Splits `n` permits off held permit `i`: a new guard, counted as permitted.
    fn split(&mut self, i: usize, n: u32) {
        if self.permits.is_empty() {
            return;
        }
        let i = i % self.permits.len();
        let held = self.permits[i].num_permits();
        match self.permits[i].split(n) {
            Some(part) => {
                assert!(n <= held, "split {n} off a permit of {held}");
                assert_eq!((self.permits[i].num_permits(), part.num_permits()), (held - n, n));
                self.permits.push(part);
                self.seen.permitted += 1;
            }
            None => {
                assert!(n > held, "refused to split {n} off a permit of {held}");
                assert_eq!(self.permits[i].num_permits(), held, "a failed split changed it");
            }
        }
    }

    /// Merges held permit `j` into held permit `i`: `j`'s call finishes, its permits stay.
    fn merge(&mut self, i: usize, j: usize) {
        let len = self.permits.len();
        if len < 2 || i % len == j % len {
            return;
        }
        let (i, j) = (i % len, j % len);
        let total = self.permits[i].num_permits() + self.permits[j].num_permits();
        let other = self.permits.remove(j);
        let i = if j < i { i - 1 } else { i };
        self.permits[i].merge(other);
        assert_eq!(self.permits[i].num_permits(), total);
        self.seen.finished += 1;
    }

    /// Polls pending acquire `i`, after its deadline passed if `expire`.
    fn poll(&mut self, i: usize, expire: bool) {
        if self.pending.is_empty() {
            return;
        }
        let i = i % self.pending.len();
        let pending = &mut self.pending[i];
        if expire {
            pending.sleep.fired.store(true, SeqCst);
            if let Some(waker) = pending.sleep.waker.lock().unwrap().take() {
                waker.wake();
            }
        }
        let id = pending.id;
        // A weighted acquire's deadline is the engine timer's, an hour away: never passed.
        let timed = expire && pending.wait == Wait::Hour && pending.many.is_none();
        let wait = pending.wait.duration();
        let granted = self.model.granted.contains(&id);
        if self.model.exceeded.remove(&id) {
            match pending.poll() {
                Poll::Ready(Err(err)) => self.expect_full(&err, RejectReason::ExceedsLimit),
                other => panic!(
                    "acquire {id} asked more than the limit: {:?}",
                    other.map(|r| r.map(drop))
                ),
            }
            self.pending.remove(i);
            return;
        }
        if self.model.evicted.remove(&id) {
            match pending.poll() {
                Poll::Ready(Err(err)) => {
                    assert_eq!(err.reason(), RejectReason::Evicted, "{err}");
                    self.seen.refused(err.reason());
                    assert_eq!(err.max_concurrent_calls(), self.model.config.limit);
                    assert!(evicted_waited_ok(err.waited(), pending.wait), "evicted {id}: {err:?}");
                }
                other => {
                    panic!("acquire {id} was evicted: {:?}", other.map(|r| r.map(drop)))
                }
            }
            self.pending.remove(i);
            return;
        }
        if self.model.refused.remove(&id) {
            match pending.poll() {
                Poll::Ready(Err(err)) => self.expect_full(&err, RejectReason::Closed),
                other => {
                    panic!("acquire {id} queued before close: {:?}", other.map(|r| r.map(drop)))
                }
            }
            self.pending.remove(i);
            return;
        }
        match pending.poll() {
            Poll::Ready(Ok(permit)) => {
                assert!(granted, "pending acquire {id} got a permit the model did not grant");
                assert_eq!(permit.num_permits(), pending.many.unwrap_or(1));
                self.model.granted.remove(&id);
                self.pending.remove(i);
                self.permits.push(permit);
                self.seen.permitted += 1;
            }
            Poll::Ready(Err(err)) => {
                assert!(!granted, "pending acquire {id} was granted but failed: {err}");
                assert!(timed, "pending acquire {id} failed without a deadline: {err}");
                assert_eq!(err.reason(), RejectReason::WaitTimedOut, "{err}");
                self.seen.refused(err.reason());
                assert!(err.waited() >= wait, "{err:?}");
                assert_eq!(err.max_concurrent_calls(), self.model.config.limit);
                self.model.withdraw(id);
                self.pending.remove(i);
            }
            Poll::Pending => {
                assert!(!granted, "pending acquire {id} was granted but is still pending");
                assert!(!timed, "pending acquire {id} is still pending after its deadline");
            }
        }
    }

    fn drop_permit(&mut self, i: usize) {
        if self.permits.is_empty() {
            return;
        }
        let permit = self.permits.remove(i % self.permits.len());
        let n = permit.num_permits();
        drop(permit);
        self.seen.finished += 1;
        self.model.release(n);
    }

    fn drop_pending(&mut self, i: usize) {
        if self.pending.is_empty() {
            return;
        }
        let pending = self.pending.remove(i % self.pending.len());
        let id = pending.id;
        let need = pending.many.unwrap_or(1);
        drop(pending);
        if self.model.granted.remove(&id) {
            // The permits granted to a dropped acquire pass on to the next waiters.
            self.model.release(need);
        } else if self.model.refused.remove(&id)
            || self.model.exceeded.remove(&id)
            || self.model.evicted.remove(&id)
        {
            // Refused (close, above the limit, evicted): it held nothing.
        } else {
            self.model.withdraw(id);
        }
    }

    fn change_config(&mut self, config: Config) {
        self.bulkhead.change_config(config.build());
        self.model.change_config(config);
    }

    fn panicking_call(&mut self, queued: usize) {
        if !self.model.free_for_newcomer() {
            if self.model.config.wait == Wait::Zero {
                let err = self.bulkhead.call(|| unreachable!("refused")).expect_err("full");
                self.expect_full(&err, self.model.refusal());
            }
            // Otherwise `call` would block this (only) thread: skip.
            return;
        }
        self.model.available -= 1;
        let bulkhead = self.bulkhead;
        let unwound = catch_unwind(AssertUnwindSafe(|| {
            bulkhead.call(|| {
                for _ in 0..queued {
                    self.queue(None, Criticality::Default);
                }
                resume_unwind(Box::new(PANIC));
            })
        }));
        match unwound {
            Ok(_) => panic!("the panic did not propagate out of call"),
            // Our own panic: expected. Anything else is a failed check inside the closure.
            Err(payload) if payload.downcast_ref::<&str>() == Some(&PANIC) => {}
            Err(payload) => resume_unwind(payload),
        }
        // The call was permitted, and its permit was released while unwinding.
        self.seen.permitted += 1;
        self.seen.finished += 1;
        self.model.release(1);
    }

    fn step(&mut self, op: &Op) {
        match *op {
            Op::TryAcquire => self.try_acquire(),
            Op::Queue => self.queue(None, Criticality::Default),
            Op::Poll(i) => self.poll(i, false),
            Op::Expire(i) => self.poll(i, true),
            Op::DropPermit(i) => self.drop_permit(i),
            Op::DropPending(i) => self.drop_pending(i),
            Op::ChangeConfig(config) => self.change_config(config),
            Op::PanickingCall { queued } => self.panicking_call(queued),
            Op::TryAcquireMany(n) => self.try_acquire_many(n, None),
            Op::QueueMany(n) => self.queue(Some(n), Criticality::Default),
            Op::TryAcquireClassed(n, class) => self.try_acquire_many(n, Some(class)),
            Op::QueueClassed(n, class) => self.queue(Some(n), class),
            Op::Split(i, n) => self.split(i, n),
            Op::Merge(i, j) => self.merge(i, j),
            Op::Close => {
                let first = self.bulkhead.close();
                assert_eq!(first, !self.model.closed, "close reports the first");
                self.seen.close_events += u64::from(first);
                self.model.close();
                for pending in &self.pending {
                    if self.model.refused.contains(&pending.id) {
                        assert!(
                            pending.waker.0.load(SeqCst) > 0,
                            "close did not wake queued acquire {}",
                            pending.id
                        );
                    }
                }
            }
        }
    }

    /// Metrics, held permits and wake-ups against the model.
    fn check(&self) {
        let model = &self.model;
        let limit = model.config.limit as i64;
        let m = self.bulkhead.metrics();
        assert_eq!(m.max_allowed_concurrent_calls(), model.config.limit, "limit: {m:?}");
        assert_eq!(
            m.available_concurrent_calls() as i64,
            model.available.max(0),
            "available: {m:?}"
        );
        assert_eq!(
            m.in_flight_calls() as i64,
            (limit - model.available).max(0),
            "in flight: {m:?}"
        );
        assert_eq!(m.waiting_calls(), model.queue.len(), "waiting: {m:?}");
        // Every pending future holds one queue slot (queued, or ended and not yet polled),
        // and nothing else does: a wait that left without freeing its slot shows here.
        assert_eq!(
            self.bulkhead.queue_slots_in_use(),
            self.pending.len(),
            "queue slots in use vs. pending futures"
        );
        assert_eq!(m.is_closed(), model.closed, "closed: {m:?}");
        let drained = model.closed && limit - model.available == 0;
        assert_eq!(self.bulkhead.wait_drained(Duration::ZERO), drained, "drained: {m:?}");
        // The counters and the events are exactly what the callers saw.
        let counted = Seen {
            permitted: m.calls_permitted(),
            finished: m.calls_finished(),
            full: m.calls_rejected(RejectReason::Full),
            wait_timed_out: m.calls_rejected(RejectReason::WaitTimedOut),
            too_many_waiting: m.calls_rejected(RejectReason::TooManyWaiting),
            closed: m.calls_rejected(RejectReason::Closed),
            exceeds_limit: m.calls_rejected(RejectReason::ExceedsLimit),
            evicted: m.calls_rejected(RejectReason::Evicted),
            reserved: m.calls_rejected(RejectReason::Reserved),
            // Not counted: the first close is the only one that emits.
            close_events: u64::from(m.is_closed()),
        };
        assert_eq!(counted, self.seen, "counters vs. what callers saw");
        assert_eq!(*self.heard.0.lock().unwrap(), self.seen, "events vs. what callers saw");
        // Every permit in flight is held by the harness or granted to a pending acquire.
        let held: i64 = self.permits.iter().map(|p| i64::from(p.num_permits())).sum();
        let granted: i64 = self
            .pending
            .iter()
            .filter(|p| model.granted.contains(&p.id))
            .map(|p| i64::from(p.many.unwrap_or(1)))
            .sum();
        assert_eq!(held + granted, limit - model.available, "permits held + granted vs. the model");
        // The model's own invariant: after every step its next waiter cannot be served, and
        // nothing queued can never fit; and the engine's, checked on the engine itself.
        assert!(model.queue.next_waits(model.available, limit), "model: next servable: {model:?}");
        if let Err(violation) = self.bulkhead.check_work_conservation() {
            panic!("work conservation: {violation}");
        }
        for pending in &self.pending {
            // A queued caller the model did not serve was not woken by a grant: a waiter for
            // 2 must not wake on 1 (kotlinx PR #1553). Wakes by close, a shrink's refusal or
            // its own sleep are allowed.
            let served = model.granted.contains(&pending.id)
                || model.refused.contains(&pending.id)
                || model.exceeded.contains(&pending.id)
                || model.evicted.contains(&pending.id);
            if pending.many.is_some() && !served {
                assert_eq!(
                    pending.waker.0.load(SeqCst),
                    0,
                    "queued acquire {} was woken though the model did not serve it",
                    pending.id
                );
            }
            if model.evicted.contains(&pending.id) {
                assert!(
                    pending.waker.0.load(SeqCst) > 0,
                    "pending acquire {} was evicted but not woken",
                    pending.id
                );
            }
            if model.exceeded.contains(&pending.id) {
                assert!(
                    pending.waker.0.load(SeqCst) > 0,
                    "pending acquire {} was refused above the limit but not woken",
                    pending.id
                );
            }
            if model.granted.contains(&pending.id) {
                assert!(
                    pending.waker.0.load(SeqCst) > 0,
                    "pending acquire {} was granted but its latest waker was not woken",
                    pending.id
                );
            }
        }
    }
}

fn run(initial: Config, ops: &[Op]) {
    let bulkhead = Bulkhead::new("reference_model", initial.build());
    bulkhead.enable_counters();
    let heard = Arc::new(Heard::default());
    let listener = Arc::clone(&heard);
    bulkhead.on_event(move |event| listener.hear(event));
    let mut harness = Harness {
        bulkhead: &bulkhead,
        model: Model::new(initial),
        permits: Vec::new(),
        pending: Vec::new(),
        next_id: 0,
        seen: Seen::default(),
        heard,
    };
    harness.check();
    for op in ops {
        harness.step(op);
        harness.check();
    }
    // Wind down: drop every pending acquire (a granted one passes its permit on), then every
    // permit. At rest every permit is back.
    while !harness.pending.is_empty() {
        harness.drop_pending(0);
        harness.check();
    }
    while !harness.permits.is_empty() {
        harness.drop_permit(0);
        harness.check();
    }
    let m = bulkhead.metrics();
    let limit = harness.model.config.limit;
    assert_eq!(
        (m.available_concurrent_calls(), m.in_flight_calls(), m.waiting_calls()),
        (limit, 0, 0),
        "at rest"
    );
}

/// Random sequences against the model. On a failure, proptest shrinks the sequence (it
/// tries deleting each operation once, then simplifies each one); a final pass then deletes
/// every operation whose removal keeps the failure, until none can go, so the reported
/// sequence is minimal: removing any one operation makes it pass.
#[test]
fn bulkhead_matches_sequential_model() {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(512);
    let mut runner = TestRunner::new(ProptestConfig { cases, ..ProptestConfig::default() });
    let strategy = (config_strategy(), proptest::collection::vec(op_strategy(), 1..60));
    match runner.run(&strategy, |(initial, ops)| {
        run(initial, &ops);
        Ok(())
    }) {
        Ok(()) => {}
        Err(TestError::Fail(reason, (initial, ops))) => {
            let ops = minimize(initial, ops);
            panic!(
                "{reason}\nminimal failing sequence: initial = {initial:?}, ops = {ops:#?}\n\
                 (pin it as a #[test] calling run(initial, &ops))"
            );
        }
        Err(err) => panic!("{err}"),
    }
}

fn fails(initial: Config, ops: &[Op]) -> bool {
    catch_unwind(AssertUnwindSafe(|| run(initial, ops))).is_err()
}

/// Deletes operations one at a time while the failure persists.
fn minimize(initial: Config, mut ops: Vec<Op>) -> Vec<Op> {
    loop {
        let before = ops.len();
        let mut i = 0;
        while i < ops.len() {
            let mut shorter = ops.clone();
            shorter.remove(i);
            if fails(initial, &shorter) {
                ops = shorter;
            } else {
                i += 1;
            }
        }
        if ops.len() == before {
            return ops;
        }
    }
}

/// The one sequence that must always work: a release during a panic hands the permit to a
/// caller that queued from inside the panicking closure.
#[test]
fn panicking_call_hands_permit_to_waiter_queued_inside() {
    let config = Config::plain(1, None, Wait::Hour);
    run(config, &[Op::PanickingCall { queued: 2 }, Op::Poll(0), Op::DropPermit(0), Op::Poll(0)]);
}

/// Issue 20's rules on fixed sequences (random ones reach some of them rarely: a critical
/// try past a held-back waiter about once in a hundred sequences), each checked step by step
/// against the model like any random sequence.
#[test]
fn queue_order_and_classes_on_fixed_sequences() {
    use Criticality::{Critical, Default, Sheddable};
    let hour =
        |limit, cap, order, headroom| Config { limit, cap, wait: Wait::Hour, order, headroom };
    // A sheddable waiter below the headroom holds 1 free permit back: a default try is
    // refused (someone is queued), a critical one takes it; the releases then serve the
    // sheddable waiter once 1 + h are free.
    run(
        hour(2, None, Order::Fifo, 1),
        &[
            Op::TryAcquire,
            Op::QueueClassed(1, Sheddable),
            Op::TryAcquireClassed(1, Default),
            Op::TryAcquireClassed(1, Sheddable),
            Op::TryAcquireClassed(1, Critical),
            Op::DropPermit(0),
            Op::DropPermit(0),
            Op::Poll(0),
        ],
    );
    // FIFO at the cap of 1: a default newcomer evicts the sheddable waiter, a second default
    // one is refused (same class, oldest first), a critical one evicts the default; growth
    // serves the critical waiter.
    run(
        hour(0, Some(1), Order::Fifo, 0),
        &[
            Op::QueueClassed(1, Sheddable),
            Op::QueueClassed(1, Default),
            Op::Queue,
            Op::QueueClassed(1, Critical),
            Op::Poll(0),
            Op::Poll(0),
            Op::ChangeConfig(hour(1, Some(1), Order::Fifo, 0)),
            Op::Poll(0),
        ],
    );
    // LIFO at the cap of 3: a fourth (default) newcomer evicts the oldest default waiter; a
    // release of 2 serves the critical waiter, then the newest default one; later a default
    // newcomer goes past a weighted waiter of its class that holds back 1 free permit, and
    // a critical try then finds none.
    run(
        hour(2, Some(3), Order::Lifo, 0),
        &[
            Op::TryAcquireMany(2),
            Op::Queue,
            Op::QueueMany(1),
            Op::QueueClassed(1, Critical),
            Op::QueueClassed(1, Default),
            Op::DropPermit(0),
            Op::Poll(0),
            Op::Poll(1),
            Op::Poll(1),
            Op::QueueMany(2),
            Op::DropPermit(0),
            Op::QueueClassed(1, Default),
            Op::TryAcquireClassed(1, Critical),
        ],
    );
}

/// Engine bug found by the model (issue 20), fixed: a LIFO queue at its cap evicts its
/// oldest waiter for a newcomer; the evicted acquire (bounded wait, an hour) reported having
/// waited the whole hour (`Core::waited` gave evictions the time-out's floor). Minimal
/// sequence as the model reported it.
#[test]
fn evicted_waiter_reports_the_time_it_waited() {
    let bulkhead = Bulkhead::new(
        "reference_model",
        Config { limit: 0, cap: Some(1), wait: Wait::Hour, order: Order::Lifo, headroom: 0 }
            .build(),
    );
    let waker = Waker::from(Arc::new(CountingWaker::default()));
    let mut cx = Context::from_waker(&waker);
    let mut oldest = Box::pin(bulkhead.acquire_async());
    assert!(oldest.as_mut().poll(&mut cx).is_pending());
    let mut newest = Box::pin(bulkhead.acquire_many_async(1));
    assert!(newest.as_mut().poll(&mut cx).is_pending());
    let Poll::Ready(Err(err)) = oldest.as_mut().poll(&mut cx) else { panic!("not evicted") };
    assert_eq!(err.reason(), RejectReason::Evicted);
    assert!(err.waited() < Duration::from_secs(60), "{err:?}");
}

/// Tombstones behind a long waiter: 20 queued acquires time out behind the oldest, which
/// makes `withdraw` compact the queue. The compaction must keep the live waiter (and only
/// it): the release then grants it. Pinned because random sequences rarely build 17
/// tombstones (this kills cargo-mutants' `== with !=` in the compaction filter).
#[test]
fn timeout_storm_behind_a_long_waiter_keeps_it_queued() {
    let config = Config::plain(1, None, Wait::Hour);
    let mut ops = vec![Op::TryAcquire];
    // Pending index 0 is the long waiter; 1..=20 time out, always the second pending one.
    ops.extend(std::iter::repeat_n(Op::Queue, 21));
    ops.extend(std::iter::repeat_n(Op::Expire(1), 20));
    ops.extend([Op::Queue, Op::DropPermit(0), Op::Poll(0), Op::DropPermit(0), Op::Poll(0)]);
    run(config, &ops);
}

/// The acquire futures' `Debug` shows whether they are queued (kills cargo-mutants'
/// `fmt -> Ok(Default::default())` on `Acquire`, `AcquireWithSleep`, `AcquireOwned` and
/// their shared core).
#[test]
fn acquire_futures_debug_shows_queued_state() {
    let config = Config::plain(1, None, Wait::Unbounded);
    let bulkhead = Arc::new(Bulkhead::new("reference_model", config.build()));
    let held = bulkhead.try_acquire().expect("free");
    let waker = Waker::from(Arc::new(CountingWaker::default()));
    let mut cx = Context::from_waker(&waker);
    let mut plain = Box::pin(bulkhead.acquire_async());
    let mut with_sleep =
        Box::pin(bulkhead.acquire_async_with_sleep(|_| std::future::pending::<()>()));
    let mut owned = Box::pin(bulkhead.acquire_owned_async());
    for debug in [format!("{plain:?}"), format!("{with_sleep:?}"), format!("{owned:?}")] {
        assert_eq!(debug, "Acquire { queued: false, done: false }");
    }
    assert!(Pin::new(&mut plain).poll(&mut cx).is_pending());
    assert!(Pin::new(&mut with_sleep).poll(&mut cx).is_pending());
    assert!(Pin::new(&mut owned).poll(&mut cx).is_pending());
    for debug in [format!("{plain:?}"), format!("{with_sleep:?}"), format!("{owned:?}")] {
        assert_eq!(debug, "Acquire { queued: true, done: false }");
    }
    drop((plain, with_sleep, owned, held));
    assert_eq!(bulkhead.metrics().available_concurrent_calls(), 1);
}

#[path = "../fuzz/src/keyed_model.rs"]
mod keyed_model;

/// Issue 13: the keyed bulkhead against a sequential model of its keys, the shared total,
/// the bound on live keys and eviction. Operations: `try_acquire` of one of a few keys, drop
/// a held permit, `evict_idle`. After every step the result (admitted, refused by the key,
/// by the total, or for too many keys), the live keys, each live key's calls in flight and
/// the total's are compared with the model. With guaranteed shares (issue 32) a caller may
/// also queue at the total (`Wait`) and give up (`Cancel`); the callers served when a slot
/// comes back must be the model's (owners before borrowers, FIFO within each), and the
/// total is never over-admitted.
mod keyed {
    use bulkhead::keyed::KeyedPermit;
    use bulkhead::RejectReason;
    use proptest::prelude::*;
    use proptest::test_runner::{TestError, TestRunner};

    /// The keys used: 0..KEYS. Key 0 has its own limit; key `KEYS - 1` may be the fallback.
    const KEYS: u8 = 6;
    const FALLBACK: u8 = KEYS - 1;

    use super::keyed_model::{
        check_total_back, serve_queued, Config, Model, Outcome, Queued, Shares, KEY_REFS,
    };

    #[derive(Clone, Copy, Debug)]
    pub enum Op {
        TryAcquire(u8),
        /// With shares: an `acquire_async` of the key, polled once, queued if pending.
        Wait(u8),
        /// With shares: drops the `i % queued`-th queued acquire, if any.
        Cancel(usize),
        /// Drops the `i % held`-th permit held, if any.
        Drop(usize),
        EvictIdle,
    }

    fn config_strategy() -> impl Strategy<Value = Config> {
        let shares = proptest::option::of((0..2u32, proptest::option::of(0..4u32)));
        (0..3usize, 0..4usize, proptest::option::of(0..5usize), 0..4usize, any::<bool>(), shares)
            .prop_map(|(default_limit, key0_limit, total, max_keys, fallback, shares)| {
                // Shares need a total; the harness gives them no fallback key.
                let shares = shares
                    .filter(|_| total.is_some_and(|t| t > 0))
                    .map(|(default, key0)| Shares { default, key0 });
                let fallback = fallback && shares.is_none();
                // With shares, keys deep enough to hold a borrowed slot and queue for more.
                let deeper = if shares.is_some() { 2 } else { 0 };
                // Shares above the total: the builder's error is checked in `run`.
                Config {
                    default_limit: default_limit + deeper,
                    key0_limit: key0_limit + deeper,
                    total,
                    // max_keys 0 needs a fallback key (the builder refuses it otherwise).
                    max_keys: if fallback { max_keys } else { max_keys.max(1) },
                    fallback,
                    shares,
                }
            })
    }

    fn op_strategy() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0..KEYS).prop_map(Op::TryAcquire),
            3 => (0..KEYS).prop_map(Op::Wait),
            3 => any::<usize>().prop_map(Op::Drop),
            1 => any::<usize>().prop_map(Op::Cancel),
            1 => Just(Op::EvictIdle),
        ]
    }

    /// The shared model's acquire, recording where an admitted permit is.
    fn try_acquire(model: &mut Model, key: u8) -> Outcome {
        let (outcome, on) = model.acquire(key);
        model.held.extend(on);
        outcome
    }

    /// Drops the `i % held`-th permit held, if any: its index.
    fn drop_permit(model: &mut Model, i: usize) -> Option<usize> {
        if model.held.is_empty() {
            return None;
        }
        let i = i % model.held.len();
        let on = model.held.remove(i);
        model.release(on);
        Some(i)
    }

    pub fn run(config: Config, ops: &[Op]) {
        if let Some(shares) = config.shares.filter(|s| !s.fit(config.total, config.max_keys)) {
            let Err(err) = config.try_build("model", FALLBACK) else {
                panic!("shares {shares:?} above the total {:?} were accepted", config.total)
            };
            assert_eq!(err.key(), "guaranteed_share");
            return;
        }
        let keyed = config.build("model", FALLBACK);
        let mut model = Model::new(config, FALLBACK);
        let mut held: Vec<KeyedPermit<'_>> = Vec::new();
        let mut queued: Vec<(usize, u8, Queued<'_>)> = Vec::new();
        let waker = futures::task::noop_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        for (step, op) in ops.iter().enumerate() {
            match *op {
                Op::Wait(key) if config.shares.is_some() => {
                    let mut fut: Queued<'_> =
                        Box::pin(keyed.acquire_async(&KEY_REFS[usize::from(key)]));
                    let (expected, on) = model.acquire_waiting(key, step);
                    match fut.as_mut().poll(&mut cx) {
                        std::task::Poll::Pending => {
                            assert_eq!(
                                (expected, on),
                                (Outcome::Total, Some(Some(key))),
                                "step {step}"
                            );
                            queued.push((step, key, fut));
                        }
                        std::task::Poll::Ready(result) => {
                            let got = match &result {
                                Ok(_) => Outcome::Admitted,
                                Err(full) if full.reason() == RejectReason::TooManyKeys => {
                                    Outcome::TooManyKeys
                                }
                                Err(full) if full.bulkhead_name() == "model" => Outcome::Total,
                                Err(_) => Outcome::Key,
                            };
                            assert_eq!(got, expected, "step {step}: acquire_async({key})");
                            assert!(got != Outcome::Total, "step {step}: refused, not queued");
                            if let (Ok(permit), Some(on)) = (result, on) {
                                held.push(permit);
                                model.held.push(on);
                            }
                        }
                    }
                }
                Op::Cancel(i) if !queued.is_empty() => {
                    let (id, _, fut) = queued.remove(i % queued.len());
                    drop(fut);
                    model.cancel(id);
                }
                Op::Wait(_) | Op::Cancel(_) => {}
                Op::TryAcquire(key) => {
                    let got = match keyed.try_acquire(&key) {
                        Ok(permit) => {
                            held.push(permit);
                            Outcome::Admitted
                        }
                        Err(full) if full.reason() == RejectReason::TooManyKeys => {
                            let named = format!("model/{key}");
                            assert_eq!(full.bulkhead_name(), named, "the refused key is named");
                            Outcome::TooManyKeys
                        }
                        Err(full) if full.bulkhead_name() == "model" => Outcome::Total,
                        Err(_) => Outcome::Key,
                    };
                    assert_eq!(
                        got,
                        try_acquire(&mut model, key),
                        "step {step}: try_acquire({key})"
                    );
                }
                Op::Drop(i) => {
                    if let Some(i) = drop_permit(&mut model, i) {
                        drop(held.remove(i));
                    }
                }
                Op::EvictIdle => {
                    assert_eq!(keyed.evict_idle(), model.evict_idle(), "step {step}: evicted");
                }
            }
            serve_queued(&mut queued, &mut held, &mut model, step);
            // The state, compared after every step.
            model.check(&keyed, KEYS, step);
        }
        drop(queued);
        drop(held);
        check_total_back(&keyed);
    }

    /// Shares of 1 of a total of 2: key 0 holds both slots and queues a borrower; key 1
    /// queues an owner after it; the slot that comes back is the owner's (the model checks).
    #[test]
    fn keyed_shares_serve_the_owner_first() {
        let config = Config {
            default_limit: 2,
            key0_limit: 3,
            total: Some(2),
            max_keys: 2,
            fallback: false,
            shares: Some(Shares { default: 1, key0: None }),
        };
        let ops = [Op::TryAcquire(0), Op::TryAcquire(0), Op::Wait(0), Op::Wait(1), Op::Drop(0)];
        run(config, &ops);
    }

    #[test]
    fn keyed_bulkhead_matches_sequential_model() {
        let cases =
            std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(512);
        let mut runner = TestRunner::new(ProptestConfig { cases, ..ProptestConfig::default() });
        let strategy = (config_strategy(), proptest::collection::vec(op_strategy(), 1..60));
        match runner.run(&strategy, |(config, ops)| {
            run(config, &ops);
            Ok(())
        }) {
            Ok(()) => {}
            Err(TestError::Fail(reason, (config, ops))) => {
                panic!("{reason}\nminimal failing sequence: config = {config:?}, ops = {ops:?}")
            }
            Err(err) => panic!("{err}"),
        }
    }
}
