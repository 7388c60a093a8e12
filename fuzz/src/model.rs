//! Reference-model checking for one bulkhead, shared by the `ops` fuzz target and by
//! `tests/fuzz_corpus.rs` (which includes this file with `#[path]`), so the corpus replay
//! under plain `cargo test` runs exactly the checks the fuzzer runs.
//!
//! [`run_ops`] decodes bytes into a sequence of operations on one bulkhead (sync and async
//! acquires, harness-controlled deadlines, permit and future drops, reconfiguration,
//! listeners) and after every step compares every observable with a small sequential
//! model: each result and rejection reason, `waited`, the error's limit, all four metrics,
//! which queued futures were woken (exactly the ones granted, in FIFO order), when a sleep
//! future was built and for how long, and the events every listener saw. Any difference
//! panics with the step number and both values.
//!
//! Weighted permits: a `try_acquire` byte with bit 0x40 asks for `n` permits
//! (`try_acquire_many`, n in {0, 2, 3, 5}), a start byte with bit 0x80 starts
//! `acquire_many_async` / `acquire_many_owned_async`, and a drop-permit byte with bit 0x80
//! splits a held permit (0x40 clear) or merges two (0x40 set). The model's queue holds
//! each future's request: the head's whole request is granted once free, in order, and a
//! head above the limit is refused with `ExceedsLimit`.
//!
//! Queue order and criticality (issue 20): the first header byte's bits 4-5 give the
//! `sheddable_headroom` h (at most the limit) and bit 6 LIFO order; a config change takes h
//! from its limit byte's bits 4-5 and the order from its wait byte's bit 6. A weighted
//! `try_acquire_many` byte whose low nibble is 2 asks in a class (bit 7 clear: critical, set:
//! sheddable; n in {1, 2, 1, 3}); a weighted start byte with bits 5-6 = 2 or 3 asks
//! `acquire_many_async` in the critical or sheddable class. The model keeps one queue
//! (`queue_model.rs`, shared with the proptest model) in
//! arrival order and derives each class's list from it: the next waiter is the first of the
//! highest class queued (oldest under FIFO, newest under LIFO), the last-served one the last
//! of the lowest class; a sheddable request requires n + h free; a waiting newcomer served
//! before everyone queued is granted at once, and at the waiter cap it evicts the last-served
//! waiter (`Evicted`, which must be woken) if it is served before it, else it is refused
//! `TooManyWaiting`. Adaptive LIFO is left out: it switches on the real clock, which a
//! sequential model cannot drive (`tests/queue_policy.rs` covers it).
//!
//! [`run_config`] feeds bytes to every configuration entry point the crate has.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

#[path = "queue_model.rs"]
mod queue_model;

use queue_model::{ClassQueue, Enqueue, Served, Waiter};

use bulkhead::{
    Acquire, AcquireOwned, AcquireWithSleep, Bulkhead, BulkheadConfig, BulkheadEventKind,
    BulkheadFull, Criticality, OwnedPermit, Permit, QueueOrder, RejectReason, Request,
};

/// The bulkhead's name (one name: names are interned for the life of the process).
pub const NAME: &str = "fuzz-ops";
/// At most this many futures and permits are alive at once; extra starts are skipped.
const MAX_LIVE: usize = 48;
/// At most this many listeners.
const MAX_LISTENERS: usize = 3;
const MAX: usize = BulkheadConfig::MAX_CONCURRENT_CALLS;

/// The limits a configuration byte can select: small ones (where the interesting
/// interleavings are) and the engine's extremes.
const LIMITS: [usize; 16] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, MAX, MAX - 1, 1 << 20, 2];

/// The max waits a configuration byte can select.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WaitMode {
    /// Fail fast.
    Zero,
    /// One hour: a deadline the harness decides (its sleep future), never the real clock.
    Long,
    /// `u64::MAX - 1` nanoseconds (584 years): still a bounded wait. (Exactly `u64::MAX`
    /// nanoseconds is the engine's "unbounded" sentinel; see RELIABILITY.md.)
    Huge,
    /// `Duration::MAX`: unbounded, no sleep is ever built.
    Max,
    /// `u64::MAX` seconds: does not fit in nanoseconds, so unbounded as well.
    Secs,
}

impl WaitMode {
    fn decode(b: u8) -> WaitMode {
        match b % 8 {
            0 | 1 => WaitMode::Zero,
            2..=4 => WaitMode::Long,
            5 => WaitMode::Huge,
            6 => WaitMode::Max,
            _ => WaitMode::Secs,
        }
    }

    fn duration(self) -> Duration {
        match self {
            WaitMode::Zero => Duration::ZERO,
            WaitMode::Long => Duration::from_secs(3600),
            WaitMode::Huge => Duration::from_nanos(u64::MAX - 1),
            WaitMode::Max => Duration::MAX,
            WaitMode::Secs => Duration::from_secs(u64::MAX),
        }
    }

    /// The wait a sleep future is built for, `None` when the wait is unbounded.
    fn bounded(self) -> Option<Duration> {
        match self {
            WaitMode::Long | WaitMode::Huge => Some(self.duration()),
            WaitMode::Zero | WaitMode::Max | WaitMode::Secs => None,
        }
    }
}

/// A counting waker: how often the engine woke a future.
struct CountingWaker(AtomicUsize);

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A sleep future that completes when the harness says the deadline has passed.
pub struct HarnessSleep {
    fired: Rc<Cell<bool>>,
}

impl Future for HarnessSleep {
    type Output = ();
    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        if self.fired.get() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

type MakeSleep = Box<dyn FnOnce(Duration) -> HarnessSleep>;

/// A permit the harness holds.
enum Held<'a> {
    Borrowed(Permit<'a>),
    Owned(OwnedPermit),
}

impl Held<'_> {
    fn bulkhead(&self) -> &Bulkhead {
        match self {
            Held::Borrowed(p) => p.bulkhead(),
            Held::Owned(p) => p.bulkhead(),
        }
    }

    fn num_permits(&self) -> u32 {
        match self {
            Held::Borrowed(p) => p.num_permits(),
            Held::Owned(p) => p.num_permits(),
        }
    }

    fn split(&mut self, n: u32) -> Option<Self> {
        match self {
            Held::Borrowed(p) => p.split(n).map(Held::Borrowed),
            Held::Owned(p) => p.split(n).map(Held::Owned),
        }
    }

    /// Merges `other` into this permit when both are of the same kind; gives it back
    /// otherwise.
    fn merge(&mut self, other: Self) -> Result<(), Self> {
        match (self, other) {
            (Held::Borrowed(p), Held::Borrowed(o)) => {
                p.merge(o);
                Ok(())
            }
            (Held::Owned(p), Held::Owned(o)) => {
                p.merge(o);
                Ok(())
            }
            (_, other) => Err(other),
        }
    }
}

/// The weighted requests a byte can select: empty, two of the small ones, and one above
/// most limits.
const WEIGHTS: [u32; 4] = [0, 2, 3, 5];

/// The requests a classed byte can select: mostly single permits, where the headroom and the
/// order matter most.
const CLASSED: [u32; 4] = [1, 2, 1, 3];

/// The id the model's queue gives a blocking caller (`acquire_timeout`) while it waits.
const BLOCKING: u64 = u64::MAX;

/// The three kinds of acquire future.
enum RealFuture<'a> {
    WithSleep(Pin<Box<AcquireWithSleep<'a, MakeSleep, HarnessSleep>>>),
    Plain(Pin<Box<Acquire<'a>>>),
    Owned(Pin<Box<AcquireOwned>>),
}

impl<'a> RealFuture<'a> {
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Result<Held<'a>, BulkheadFull>> {
        match self {
            RealFuture::WithSleep(f) => f.as_mut().poll(cx).map(|r| r.map(Held::Borrowed)),
            RealFuture::Plain(f) => f.as_mut().poll(cx).map(|r| r.map(Held::Borrowed)),
            RealFuture::Owned(f) => f.as_mut().poll(cx).map(|r| r.map(Held::Owned)),
        }
    }
}

/// A live future and what the harness knows about it.
struct LiveFuture<'a> {
    future: RealFuture<'a>,
    waker: Arc<CountingWaker>,
    fired: Rc<Cell<bool>>,
    /// Each wait `make_sleep` was called with.
    made: Rc<Cell<Option<Duration>>>,
    made_calls: Rc<Cell<usize>>,
    /// Model: granted a permit it has not yet returned from `poll`.
    granted: bool,
    /// Model: the wait its sleep was built for, if one was.
    sleep_for: Option<Duration>,
    /// Model: the max wait when it queued.
    wait: Duration,
    /// The permits it asked for.
    need: u32,
    /// Model: refused at the head for asking more than a shrunk limit.
    exceeded: bool,
    /// Model: evicted from a full queue for a newcomer served before it.
    evicted: bool,
}

/// Event counts, per kind, summed over listeners.
#[derive(Default)]
struct EventCounts {
    permitted: AtomicUsize,
    full: AtomicUsize,
    timed_out: AtomicUsize,
    too_many: AtomicUsize,
    finished: AtomicUsize,
    exceeds: AtomicUsize,
    evicted: AtomicUsize,
    reserved: AtomicUsize,
}

impl EventCounts {
    fn record(&self, kind: BulkheadEventKind) {
        let counter = match kind {
            BulkheadEventKind::CallPermitted => &self.permitted,
            BulkheadEventKind::CallRejected(RejectReason::Full) => &self.full,
            BulkheadEventKind::CallRejected(RejectReason::WaitTimedOut) => &self.timed_out,
            BulkheadEventKind::CallRejected(RejectReason::TooManyWaiting) => &self.too_many,
            BulkheadEventKind::CallFinished => &self.finished,
            BulkheadEventKind::CallRejected(RejectReason::ExceedsLimit) => &self.exceeds,
            BulkheadEventKind::CallRejected(RejectReason::Evicted) => &self.evicted,
            BulkheadEventKind::CallRejected(RejectReason::Reserved) => &self.reserved,
            other => panic!("an event kind the model does not know: {other:?}"),
        };
        counter.fetch_add(1, Ordering::SeqCst);
    }

    fn snapshot(&self) -> [usize; 8] {
        [
            self.permitted.load(Ordering::SeqCst),
            self.full.load(Ordering::SeqCst),
            self.timed_out.load(Ordering::SeqCst),
            self.too_many.load(Ordering::SeqCst),
            self.finished.load(Ordering::SeqCst),
            self.exceeds.load(Ordering::SeqCst),
            self.evicted.load(Ordering::SeqCst),
            self.reserved.load(Ordering::SeqCst),
        ]
    }
}

/// The sequential reference model plus the real objects it shadows.
struct Harness<'a> {
    bulkhead: &'a Arc<Bulkhead>,
    step: usize,
    // ---- model ----
    limit: i64,
    available: i64,
    wait: WaitMode,
    cap: Option<usize>,
    /// Queued callers (future ids: indices into `futures` are not stable), with the order
    /// and the sheddable headroom (see `queue_model.rs`).
    queue: ClassQueue,
    listeners: usize,
    expected_events: [usize; 8],
    /// What the bulkhead's own counters must read: every event once, listeners or not.
    expected_counts: [u64; 8],
    // ---- real ----
    futures: Vec<(u64, LiveFuture<'a>)>,
    permits: Vec<Held<'a>>,
    next_id: u64,
    events: Arc<EventCounts>,
}

/// Reads bytes; `None` once they run out, which ends the run.
struct Bytes<'d> {
    data: &'d [u8],
    pos: usize,
}

impl Bytes<'_> {
    fn next(&mut self) -> Option<u8> {
        let b = *self.data.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }
}

fn cap_decode(b: u8) -> Option<usize> {
    match b % 8 {
        0..=3 => None,
        n => Some(usize::from(n - 4)), // Some(0..=3)
    }
}

/// The model's copy of a headroom (at most 3).
fn headroom_u32(headroom: usize) -> u32 {
    u32::try_from(headroom).expect("a headroom of at most 3")
}

/// The headroom bits 4-5 of `b` select, at most `limit` (the builder refuses more).
fn headroom_decode(b: u8, limit: usize) -> usize {
    usize::from((b >> 4) & 3).min(limit)
}

fn build(
    limit: usize,
    wait: WaitMode,
    cap: Option<usize>,
    lifo: bool,
    headroom: usize,
) -> BulkheadConfig {
    let order = if lifo { QueueOrder::Lifo } else { QueueOrder::Fifo };
    let mut builder = BulkheadConfig::builder()
        .max_concurrent_calls(limit)
        .max_wait_duration(wait.duration())
        .queue_order(order)
        .sheddable_headroom(headroom);
    if let Some(cap) = cap {
        builder = builder.max_waiting_calls(cap);
    }
    match builder.build() {
        Ok(config) => config,
        Err(e) => panic!("limit {limit} (<= MAX_CONCURRENT_CALLS) was refused: {e}"),
    }
}

/// Runs the `ops` check on `data`. Panics on the first difference from the model.
pub fn run_ops(data: &[u8]) {
    let mut bytes = Bytes { data, pos: 0 };
    let (Some(a), Some(b)) = (bytes.next(), bytes.next()) else {
        return;
    };
    let limit = LIMITS[usize::from(a % 16)];
    let wait = WaitMode::decode(b);
    let cap = cap_decode(b >> 3);
    let lifo = a & 0x40 != 0;
    let headroom = headroom_decode(a, limit);
    let bulkhead = Arc::new(Bulkhead::new(NAME, build(limit, wait, cap, lifo, headroom)));
    // Counted from the start, so the counters must equal every event the model expects.
    bulkhead.enable_counters();
    let trace = std::env::var_os("BULKHEAD_FUZZ_TRACE").is_some();
    let mut h = Harness {
        bulkhead: &bulkhead,
        step: 0,
        limit: limit as i64,
        available: limit as i64,
        wait,
        cap,
        queue: ClassQueue { waiters: Vec::new(), lifo, headroom: headroom_u32(headroom) },
        listeners: 0,
        expected_events: [0; 8],
        expected_counts: [0; 8],
        futures: Vec::new(),
        permits: Vec::new(),
        next_id: 0,
        events: Arc::new(EventCounts::default()),
    };
    h.check();
    while let Some(op) = bytes.next() {
        h.step += 1;
        let done = h.apply(op, &mut bytes);
        if trace {
            eprintln!("op {:2} -> {}", op % 16, h.ctx());
        }
        h.check();
        if done {
            break;
        }
    }
    h.finish();
}

impl<'a> Harness<'a> {
    fn ctx(&self) -> String {
        format!(
            "step {}: limit {} available {} wait {:?} cap {:?} lifo {} headroom {} queue {:?} \
             permits {} futures {}",
            self.step,
            self.limit,
            self.available,
            self.wait,
            self.cap,
            self.queue.lifo,
            self.queue.headroom,
            self.queue.waiters,
            self.permits.len(),
            self.futures.len()
        )
    }

    /// Applies one operation; returns `true` when the input ran out mid-operation.
    fn apply(&mut self, op: u8, bytes: &mut Bytes<'_>) -> bool {
        match op % 16 {
            2 if op & 0x40 != 0 => {
                let class =
                    if op & 0x80 == 0 { Criticality::Critical } else { Criticality::Sheddable };
                self.try_acquire_classed(CLASSED[usize::from(op >> 4) & 3], class);
            }
            0..=2 if op & 0x40 != 0 => {
                self.try_acquire_many(op & 0x80 != 0, WEIGHTS[usize::from(op >> 4) & 3]);
            }
            0..=2 => self.try_acquire(op & 0x80 != 0),
            3..=5 => {
                let Some(kind) = bytes.next() else { return true };
                self.start(kind);
            }
            6 | 7 => {
                let Some(i) = bytes.next() else { return true };
                self.poll(i, false);
            }
            8 => {
                let Some(i) = bytes.next() else { return true };
                self.poll(i, true);
            }
            9 => {
                let Some(i) = bytes.next() else { return true };
                self.drop_future(i);
            }
            10 | 11 if op & 0x80 != 0 => {
                let (Some(i), Some(j)) = (bytes.next(), bytes.next()) else { return true };
                if op & 0x40 == 0 {
                    self.split(i, u32::from(j % 4));
                } else {
                    self.merge(i, j);
                }
            }
            10 | 11 => {
                let Some(i) = bytes.next() else { return true };
                self.drop_permit(i);
            }
            12 => {
                let (Some(l), Some(w)) = (bytes.next(), bytes.next()) else { return true };
                self.change_config(l, w);
            }
            13 => {
                let Some(w) = bytes.next() else { return true };
                self.acquire_timeout(w);
            }
            14 => self.call(),
            _ => self.listen(),
        }
        false
    }

    // ---------------------------------------------------------------- model helpers

    /// A newcomer is admitted by the fast path: nobody queued and a permit free.
    fn admits(&self) -> bool {
        self.admits_many(1)
    }

    /// A default-class newcomer asking for `n` is admitted: an empty request always (no
    /// close here); otherwise `n` free and served before everyone queued (past a sheddable
    /// waiter's headroom: see `ClassQueue::try_admits`).
    fn admits_many(&self, n: u32) -> bool {
        self.queue.try_admits(self.available, n, Criticality::Default)
    }

    /// A non-waiting classed `try_acquire_many` (see `ClassQueue::try_admits`).
    fn try_admits(&self, n: u32, class: Criticality) -> bool {
        self.queue.try_admits(self.available, n, class)
    }

    /// The reason a non-waiting classed `try_acquire_many` that `try_admits` refused is given
    /// (see `ClassQueue::try_refusal`).
    fn try_refusal(&self, n: u32, class: Criticality) -> RejectReason {
        self.queue.try_refusal(self.available, self.limit, n, class)
    }

    /// Under the queue lock, for a waiting acquire the fast path refused (max wait not zero,
    /// `n` within the limit). Changes nothing.
    fn enqueue_outcome(&self, n: u32, class: Criticality) -> Enqueue {
        self.queue.enqueue(self.available, self.limit, self.cap, n, class)
    }

    /// Queues `waiter` after evicting `evict` (marked, to find `Evicted` when polled), then
    /// drains.
    fn push(&mut self, waiter: Waiter, evict: Option<u64>) {
        if let Some(evict) = evict {
            self.queue.remove(evict);
            self.future_mut(evict).evicted = true;
        }
        self.queue.waiters.push(waiter);
        self.drain();
    }

    /// A queued caller leaves (if still queued); if it was the next waiter, the new next may
    /// be served.
    fn withdraw(&mut self, id: u64) {
        if self.queue.remove(id) {
            self.drain();
        }
    }

    /// A request above the limit (never one for 1: a limit of 0 waits for growth).
    fn exceeds(&self, n: u32) -> bool {
        n > 1 && i64::from(n) > self.limit
    }

    fn emit(&mut self, kind: usize) {
        self.expected_events[kind] += self.listeners;
        self.expected_counts[kind] += 1;
    }

    /// Model drain: free permits go to the queued futures in serving order, each next
    /// waiter's whole request (plus the headroom for a sheddable one), stopping at the first
    /// that does not fit; a next waiter above the limit is refused.
    fn drain(&mut self) {
        while let Some((waiter, served)) = self.queue.drain_step(self.available, self.limit) {
            assert_ne!(
                waiter.id,
                BLOCKING,
                "model: a drain would end the blocking caller's wait ({})",
                self.ctx()
            );
            match served {
                Served::Granted => {
                    self.available -= i64::from(waiter.need);
                    self.future_mut(waiter.id).granted = true;
                }
                Served::Exceeded => self.future_mut(waiter.id).exceeded = true,
            }
        }
    }

    fn future_mut(&mut self, id: u64) -> &mut LiveFuture<'a> {
        match self.futures.iter_mut().find(|(fid, _)| *fid == id) {
            Some((_, f)) => f,
            None => panic!("model queue names future {id}, which is gone"),
        }
    }

    fn expect_err(&self, err: &BulkheadFull, reason: RejectReason, wait: Duration, what: &str) {
        let ctx = self.ctx();
        assert_eq!(err.reason(), reason, "{what}: reason ({ctx})");
        assert_eq!(err.bulkhead_name(), NAME, "{what}: name ({ctx})");
        assert_eq!(err.max_concurrent_calls() as i64, self.limit, "{what}: limit ({ctx})");
        match reason {
            RejectReason::WaitTimedOut => {
                assert!(
                    err.waited() >= wait,
                    "{what}: waited {:?} < {wait:?} ({ctx})",
                    err.waited()
                )
            }
            // Evicted after the time the harness took (well under a minute), never its max
            // wait (this model found the bug that reported the max wait, issue 20).
            RejectReason::Evicted => {
                let waited = err.waited();
                assert!(
                    waited < Duration::from_secs(60),
                    "{what}: evicted after {waited:?} ({ctx})"
                )
            }
            _ => assert_eq!(err.waited(), Duration::ZERO, "{what}: waited ({ctx})"),
        }
        // Each reason its own sentence (issue 31); `Full` keeps Resilience4j's.
        let text = err.to_string();
        let prefix = match reason {
            RejectReason::Full => format!("Bulkhead '{NAME}' is full and does not permit further"),
            _ => format!("Bulkhead '{NAME}' "),
        };
        assert!(text.starts_with(&prefix), "{what}: message {text:?} ({ctx})");
        let detail = match err.waited() {
            w if w.is_zero() => format!(" ({reason}; max concurrent calls {})", self.limit),
            w => format!(" ({reason}; max concurrent calls {}; waited {w:?})", self.limit),
        };
        assert!(text.ends_with(&detail), "{what}: message {text:?}, not {detail:?} ({ctx})");
        let full = "is full and does not permit";
        assert_eq!(reason == RejectReason::Full, text.contains(full), "{what}: {text:?} ({ctx})");
    }

    // ---------------------------------------------------------------- operations

    fn try_acquire(&mut self, owned: bool) {
        let result = if owned {
            self.bulkhead.try_acquire_owned().map(Held::Owned)
        } else {
            self.bulkhead.try_acquire().map(Held::Borrowed)
        };
        if self.admits() {
            let p = match result {
                Ok(p) => p,
                Err(e) => panic!("try_acquire refused ({e}) but the model admits ({})", self.ctx()),
            };
            self.available -= 1;
            self.emit(0);
            self.keep(p);
        } else {
            match result {
                Ok(_) => panic!("try_acquire admitted but the model refuses ({})", self.ctx()),
                Err(e) => self.expect_err(&e, RejectReason::Full, Duration::ZERO, "try_acquire"),
            }
            self.emit(1);
        }
    }

    /// `try_acquire_many(n)` (owned or borrowed).
    fn try_acquire_many(&mut self, owned: bool, n: u32) {
        let result = if owned {
            self.bulkhead.try_acquire_many_owned(n).map(Held::Owned)
        } else {
            self.bulkhead.try_acquire_many(n).map(Held::Borrowed)
        };
        if self.admits_many(n) {
            let p = match result {
                Ok(p) => p,
                Err(e) => panic!("try_acquire_many({n}) refused ({e}) ({})", self.ctx()),
            };
            assert_eq!(p.num_permits(), n, "permits held ({})", self.ctx());
            self.available -= i64::from(n);
            self.emit(0);
            self.keep(p);
        } else {
            let Err(e) = result else {
                panic!("try_acquire_many({n}) admitted but the model refuses ({})", self.ctx());
            };
            if self.exceeds(n) {
                self.expect_err(&e, RejectReason::ExceedsLimit, Duration::ZERO, "try_many");
                self.emit(5);
            } else {
                self.expect_err(&e, RejectReason::Full, Duration::ZERO, "try_acquire_many");
                self.emit(1);
            }
        }
    }

    /// `try_acquire_many(Request::permits(n).criticality(class))`.
    fn try_acquire_classed(&mut self, n: u32, class: Criticality) {
        let result = self.bulkhead.try_acquire_many(Request::permits(n).criticality(class));
        let what = "try_acquire_classed";
        if self.try_admits(n, class) {
            let p = match result {
                Ok(p) => p,
                Err(e) => panic!("{what}({n}, {class}) refused ({e}) ({})", self.ctx()),
            };
            assert_eq!(p.num_permits(), n, "permits held ({})", self.ctx());
            self.available -= i64::from(n);
            self.emit(0);
            self.keep(Held::Borrowed(p));
        } else {
            let Err(e) = result else {
                panic!("{what}({n}, {class}) admitted but the model refuses ({})", self.ctx());
            };
            // Above the limit (with the headroom, for a sheddable request), held back by the
            // headroom alone (issue 31), or full.
            let reason = self.try_refusal(n, class);
            self.expect_err(&e, reason, Duration::ZERO, what);
            self.emit(event_index(reason));
        }
    }

    /// Splits `n` off held permit `i`: a new guard, counted as permitted.
    fn split(&mut self, i: u8, n: u32) {
        let Some(i) = self.index(i, self.permits.len()) else { return };
        let held = self.permits[i].num_permits();
        match self.permits[i].split(n) {
            Some(part) => {
                assert!(n <= held, "split {n} off {held} ({})", self.ctx());
                assert_eq!(part.num_permits(), n);
                assert_eq!(self.permits[i].num_permits(), held - n);
                self.emit(0);
                self.keep(part);
            }
            None => assert!(n > held, "refused to split {n} off {held} ({})", self.ctx()),
        }
    }

    /// Merges held permit `j` into `i` (same kind, different permits): `j`'s call finishes.
    fn merge(&mut self, i: u8, j: u8) {
        let len = self.permits.len();
        let (Some(i), Some(j)) = (self.index(i, len), self.index(j, len)) else { return };
        if i == j {
            return;
        }
        let total = self.permits[i].num_permits() + self.permits[j].num_permits();
        let other = self.permits.remove(j);
        let i = if j < i { i - 1 } else { i };
        match self.permits[i].merge(other) {
            Ok(()) => {
                assert_eq!(self.permits[i].num_permits(), total, "merged ({})", self.ctx());
                self.emit(4);
            }
            Err(other) => self.permits.push(other),
        }
    }

    /// Keeps a permit, or drops it at once (a finished call) when the harness holds many.
    fn keep(&mut self, permit: Held<'a>) {
        self.permits.push(permit);
        if self.permits.len() > MAX_LIVE {
            // The oldest permit goes; the caller accounts for its acquire, we for its release.
            let n = self.permits.remove(0).num_permits();
            self.release_model(true, n);
        }
    }

    fn release_model(&mut self, emits: bool, n: u32) {
        self.available += i64::from(n);
        if emits {
            self.emit(4);
        }
        self.drain();
    }

    fn start(&mut self, kind: u8) {
        if self.futures.len() >= MAX_LIVE {
            return;
        }
        let waker = Arc::new(CountingWaker(AtomicUsize::new(0)));
        let fired = Rc::new(Cell::new(false));
        let made = Rc::new(Cell::new(None));
        let made_calls = Rc::new(Cell::new(0));
        let class = match (kind >> 5) & 3 {
            _ if kind & 0x80 == 0 => Criticality::Default,
            2 => Criticality::Critical,
            3 => Criticality::Sheddable,
            _ => Criticality::Default,
        };
        let need = match () {
            _ if kind & 0x80 == 0 => 1,
            _ if class == Criticality::Default => WEIGHTS[usize::from(kind >> 3) & 3],
            _ => CLASSED[usize::from(kind >> 3) & 3],
        };
        let request = Request::permits(need).criticality(class);
        let future = match kind % 3 {
            _ if kind & 0x80 != 0 && kind % 2 == 0 => {
                RealFuture::Plain(Box::pin(self.bulkhead.acquire_many_async(request)))
            }
            _ if kind & 0x80 != 0 => {
                RealFuture::Owned(Box::pin(self.bulkhead.acquire_many_owned_async(request)))
            }
            0 => {
                let (fired, made, made_calls) =
                    (Rc::clone(&fired), Rc::clone(&made), Rc::clone(&made_calls));
                let make: MakeSleep = Box::new(move |wait| {
                    made.set(Some(wait));
                    made_calls.set(made_calls.get() + 1);
                    HarnessSleep { fired }
                });
                RealFuture::WithSleep(Box::pin(self.bulkhead.acquire_async_with_sleep(make)))
            }
            1 => RealFuture::Plain(Box::pin(self.bulkhead.acquire_async())),
            _ => RealFuture::Owned(Box::pin(self.bulkhead.acquire_owned_async())),
        };
        let id = self.next_id;
        self.next_id += 1;
        let mut live = LiveFuture {
            future,
            waker,
            fired,
            made,
            made_calls,
            granted: false,
            sleep_for: None,
            wait: self.wait.duration(),
            need,
            exceeded: false,
            evicted: false,
        };
        let w = Waker::from(Arc::clone(&live.waker));
        let result = live.future.poll(&mut Context::from_waker(&w));
        let what = "first poll";
        // The fast path, the refusals that need no queue, then the queue lock.
        let expected = if self.try_admits(need, class) {
            Enqueue::Granted
        } else if self.exceeds(need) {
            Enqueue::Refused(RejectReason::ExceedsLimit)
        } else if self.wait == WaitMode::Zero {
            Enqueue::Refused(self.try_refusal(need, class))
        } else {
            self.enqueue_outcome(need, class)
        };
        match expected {
            Enqueue::Granted => {
                let p = match result {
                    Poll::Ready(Ok(p)) => p,
                    other => panic!(
                        "{what}: {} but the model admits {need} ({class}) ({})",
                        show(&other),
                        self.ctx()
                    ),
                };
                assert_eq!(p.num_permits(), need, "{what}: permits ({})", self.ctx());
                self.available -= i64::from(need);
                self.emit(0);
                self.keep(p);
            }
            Enqueue::Refused(reason) => {
                match result {
                    Poll::Ready(Err(e)) => self.expect_err(&e, reason, Duration::ZERO, what),
                    other => panic!(
                        "{what}: {} but the model refuses {need} ({class}) with {reason:?} ({})",
                        show(&other),
                        self.ctx()
                    ),
                }
                self.emit(event_index(reason));
            }
            Enqueue::Queued(evict) => {
                if !result.is_pending() {
                    panic!(
                        "{what}: {} but the model queues {need} ({class}) ({})",
                        show(&result),
                        self.ctx()
                    );
                }
                if matches!(live.future, RealFuture::WithSleep(_)) {
                    live.sleep_for = self.wait.bounded();
                }
                self.futures.push((id, live));
                self.push(Waiter { id, need, class }, evict);
                let f = self.future_mut(id);
                assert!(
                    !f.granted && !f.exceeded,
                    "model: the drain after queueing ended future {id}'s own wait"
                );
                return;
            }
        }
        // Completed on the first poll: it must not have built a sleep.
        assert_eq!(
            live.made_calls.get(),
            0,
            "{what}: a sleep was built without queueing ({})",
            self.ctx()
        );
    }

    fn index(&self, i: u8, len: usize) -> Option<usize> {
        (len > 0).then(|| usize::from(i) % len)
    }

    /// Polls future `i`; with `expire`, first tells its sleep that the deadline passed.
    fn poll(&mut self, i: u8, expire: bool) {
        let Some(i) = self.index(i, self.futures.len()) else { return };
        let (id, f) = &mut self.futures[i];
        let id = *id;
        if expire {
            f.fired.set(true);
        }
        let w = Waker::from(Arc::clone(&f.waker));
        let result = f.future.poll(&mut Context::from_waker(&w));
        let granted = f.granted;
        let exceeded = f.exceeded;
        let evicted = f.evicted;
        let need = f.need;
        let times_out = f.fired.get() && f.sleep_for.is_some();
        let wait = f.wait;
        let what = if expire { "poll after deadline" } else { "poll" };
        if exceeded {
            match result {
                Poll::Ready(Err(e)) => {
                    self.expect_err(&e, RejectReason::ExceedsLimit, Duration::ZERO, what)
                }
                other => panic!(
                    "{what} of future {id}: {} but the model refused it above the limit ({})",
                    show(&other),
                    self.ctx()
                ),
            }
            self.futures.remove(i);
            self.emit(5);
        } else if evicted {
            match result {
                Poll::Ready(Err(e)) => self.expect_err(&e, RejectReason::Evicted, wait, what),
                other => panic!(
                    "{what} of future {id}: {} but the model evicted it ({})",
                    show(&other),
                    self.ctx()
                ),
            }
            self.futures.remove(i);
            self.emit(6);
        } else if granted {
            let p = match result {
                Poll::Ready(Ok(p)) => p,
                other => panic!("{what} of granted future {id}: {} ({})", show(&other), self.ctx()),
            };
            assert_eq!(p.num_permits(), need, "{what}: permits of future {id} ({})", self.ctx());
            self.futures.remove(i);
            self.emit(0);
            self.keep(p);
        } else if times_out {
            match result {
                Poll::Ready(Err(e)) => self.expect_err(&e, RejectReason::WaitTimedOut, wait, what),
                other => panic!(
                    "{what} of future {id}: {} but the model times it out ({})",
                    show(&other),
                    self.ctx()
                ),
            }
            self.futures.remove(i);
            self.emit(2);
            self.withdraw(id);
        } else if !result.is_pending() {
            panic!(
                "{what} of queued future {id}: {} but the model says pending ({})",
                show(&result),
                self.ctx()
            );
        }
    }

    fn drop_future(&mut self, i: u8) {
        let Some(i) = self.index(i, self.futures.len()) else { return };
        let (id, f) = self.futures.remove(i);
        let (granted, need) = (f.granted, f.need);
        drop(f);
        if granted {
            // The permits granted to a dropped future go to the next waiters, silently.
            self.release_model(false, need);
        } else {
            // Gone from the queue (if still there); if it was the next waiter, the one it held
            // back may now be served.
            self.withdraw(id);
        }
    }

    fn drop_permit(&mut self, i: u8) {
        let Some(i) = self.index(i, self.permits.len()) else { return };
        let n = self.permits.remove(i).num_permits();
        self.release_model(true, n);
    }

    fn change_config(&mut self, l: u8, w: u8) {
        let limit = LIMITS[usize::from(l % 16)];
        if l >= 0xF0 {
            // Above the engine's maximum: the builder refuses it, naming key and value, and
            // nothing changes.
            let bad = MAX + 1 + usize::from(l & 0x0F) * (usize::MAX / 32);
            let err = BulkheadConfig::builder()
                .max_concurrent_calls(bad)
                .build()
                .expect_err("a limit above MAX_CONCURRENT_CALLS must be refused");
            assert_eq!(err.key(), "max_concurrent_calls");
            assert_eq!(err.value(), bad.to_string());
            let text = err.to_string();
            assert!(
                text.contains("max_concurrent_calls") && text.contains(&bad.to_string()),
                "{text}"
            );
            return;
        }
        let wait = WaitMode::decode(w);
        let cap = cap_decode(w >> 3);
        let lifo = w & 0x40 != 0;
        let headroom = headroom_decode(l, limit);
        let config = build(limit, wait, cap, lifo, headroom);
        self.bulkhead.change_config(config.clone());
        assert_eq!(self.bulkhead.config(), config, "config() after change_config ({})", self.ctx());
        self.available += limit as i64 - self.limit;
        self.limit = limit as i64;
        self.wait = wait;
        self.cap = cap;
        self.queue.lifo = lifo;
        self.queue.headroom = headroom_u32(headroom);
        self.drain();
    }

    /// What a blocking default-class acquire for one permit gets before it would park:
    /// the fast path, a zero wait's refusal, then the queue lock.
    fn blocking_outcome(&self, wait: Duration) -> Enqueue {
        if self.admits() {
            Enqueue::Granted
        } else if wait.is_zero() {
            Enqueue::Refused(RejectReason::Full)
        } else {
            self.enqueue_outcome(1, Criticality::Default)
        }
    }

    /// The blocking acquire with a wait it cannot block on for long: zero, 1 ns, or
    /// `Duration::MAX` when the model says it returns at once.
    fn acquire_timeout(&mut self, w: u8) {
        let wait = match w % 3 {
            0 => Duration::ZERO,
            1 => Duration::from_nanos(1),
            _ => Duration::MAX,
        };
        let expected = self.blocking_outcome(wait);
        if matches!(expected, Enqueue::Queued(_)) && wait == Duration::MAX {
            return; // nobody would ever wake it: single-threaded harness
        }
        let result = self.bulkhead.acquire_timeout(wait);
        let what = "acquire_timeout";
        match expected {
            Enqueue::Granted => {
                let p = match result {
                    Ok(p) => p,
                    Err(e) => panic!(
                        "{what}({wait:?}) refused ({e}) but the model admits ({})",
                        self.ctx()
                    ),
                };
                self.available -= 1;
                self.emit(0);
                self.keep(Held::Borrowed(p));
            }
            Enqueue::Refused(reason) => {
                let Err(e) = result else {
                    panic!("{what}({wait:?}) admitted but the model refuses ({})", self.ctx());
                };
                self.expect_err(&e, reason, Duration::ZERO, what);
                self.emit(event_index(reason));
            }
            Enqueue::Queued(evict) => {
                // Queued (evicting `evict`), parked for 1 ns, timed out and withdrawn; the
                // drains on the way may have served others.
                let Err(e) = result else {
                    panic!("{what}({wait:?}) admitted but the model times out ({})", self.ctx());
                };
                let blocking = Waiter { id: BLOCKING, need: 1, class: Criticality::Default };
                self.push(blocking, evict);
                self.withdraw(BLOCKING);
                self.expect_err(&e, RejectReason::WaitTimedOut, wait, what);
                self.emit(2);
            }
        }
    }

    /// `call` when the model says it does not block; checks the metrics inside the call.
    fn call(&mut self) {
        let expected = self.blocking_outcome(self.wait.duration());
        if matches!(expected, Enqueue::Queued(_)) {
            return; // would wait for an hour or forever
        }
        let expected_inside = (self.limit - self.available + 1) as usize;
        let bulkhead = self.bulkhead;
        let result = bulkhead.call(|| bulkhead.metrics().in_flight_calls());
        match expected {
            Enqueue::Granted => {
                match result {
                    Ok(inside) => assert_eq!(
                        inside,
                        expected_inside,
                        "in_flight inside call ({})",
                        self.ctx()
                    ),
                    Err(e) => panic!("call refused ({e}) but the model admits ({})", self.ctx()),
                }
                self.emit(0);
                self.available -= 1;
                self.release_model(true, 1);
            }
            Enqueue::Refused(reason) => {
                let Err(e) = result else {
                    panic!("call admitted but the model refuses ({})", self.ctx())
                };
                self.expect_err(&e, reason, Duration::ZERO, "call");
                self.emit(event_index(reason));
            }
            Enqueue::Queued(_) => unreachable!("skipped above"),
        }
    }

    fn listen(&mut self) {
        if self.listeners >= MAX_LISTENERS {
            return;
        }
        let events = Arc::clone(&self.events);
        self.bulkhead.on_event(move |event| {
            assert_eq!(event.bulkhead_name(), NAME);
            events.record(event.kind());
        });
        self.listeners += 1;
    }

    // ---------------------------------------------------------------- checks

    /// Compares every observable with the model.
    fn check(&self) {
        let ctx = self.ctx();
        let granted: i64 =
            self.futures.iter().filter(|(_, f)| f.granted).map(|(_, f)| i64::from(f.need)).sum();
        let held: i64 = self.permits.iter().map(|p| i64::from(p.num_permits())).sum();
        // The model's own invariants.
        assert_eq!(
            self.limit - self.available,
            held + granted,
            "model: in flight != held permits + granted futures ({ctx})"
        );
        assert!(
            self.queue.next_waits(self.available, self.limit),
            "model: the next waiter is servable, or an unfit one is queued ({ctx})"
        );
        // The engine's own work conservation, at this quiescent point (issue 29).
        if let Err(violation) = self.bulkhead.check_work_conservation() {
            panic!("work conservation: {violation} ({ctx})");
        }

        let m = self.bulkhead.metrics();
        assert_eq!(
            m.available_concurrent_calls() as i64,
            self.available.max(0),
            "available ({ctx})"
        );
        assert_eq!(m.max_allowed_concurrent_calls() as i64, self.limit, "max_allowed ({ctx})");
        assert_eq!(
            m.in_flight_calls() as i64,
            (self.limit - self.available).max(0),
            "in_flight ({ctx})"
        );
        assert_eq!(m.waiting_calls(), self.queue.len(), "waiting ({ctx})");
        // Each live future holds one queue slot (queued, or ended and not yet polled), and
        // nothing else does: a wait that left without freeing its slot shows here.
        assert_eq!(
            self.bulkhead.queue_slots_in_use(),
            self.futures.len(),
            "queue slots in use vs. live futures ({ctx})"
        );

        for p in &self.permits {
            assert!(
                std::ptr::eq(p.bulkhead(), &**self.bulkhead),
                "a permit names another bulkhead"
            );
        }
        for (id, f) in &self.futures {
            let woken = f.waker.0.load(Ordering::SeqCst);
            assert_eq!(
                woken,
                usize::from(f.granted || f.exceeded || f.evicted),
                "wake-ups of future {id} ({ctx})"
            );
            let (made, calls) = (f.made.get(), f.made_calls.get());
            assert_eq!(made, f.sleep_for, "sleep built for future {id} ({ctx})");
            assert_eq!(
                calls,
                usize::from(f.sleep_for.is_some()),
                "make_sleep calls, future {id} ({ctx})"
            );
        }
        assert_eq!(
            self.events.snapshot(),
            self.expected_events,
            "events [permitted, full, timed out, too many, finished, exceeds, evicted, reserved] ({ctx})"
        );
        let counted = [
            m.calls_permitted(),
            m.calls_rejected(RejectReason::Full),
            m.calls_rejected(RejectReason::WaitTimedOut),
            m.calls_rejected(RejectReason::TooManyWaiting),
            m.calls_finished(),
            m.calls_rejected(RejectReason::ExceedsLimit),
            m.calls_rejected(RejectReason::Evicted),
            m.calls_rejected(RejectReason::Reserved),
        ];
        assert_eq!(
            counted, self.expected_counts,
            "counters [permitted, full, timed out, too many, finished, exceeds, evicted, reserved] ({ctx})"
        );
    }

    /// Drops everything; every permit must come back.
    fn finish(mut self) {
        self.step += 1;
        while !self.futures.is_empty() {
            self.drop_future(0);
            self.check();
        }
        while !self.permits.is_empty() {
            self.drop_permit(0);
            self.check();
        }
        let ctx = self.ctx();
        let m = self.bulkhead.metrics();
        assert_eq!(m.in_flight_calls(), 0, "in flight at the end ({ctx})");
        assert_eq!(m.waiting_calls(), 0, "waiting at the end ({ctx})");
        assert_eq!(
            m.available_concurrent_calls() as i64,
            self.limit,
            "available at the end ({ctx})"
        );
        if self.limit > 0 {
            let fresh = self.bulkhead.try_acquire();
            assert!(fresh.is_ok(), "a fresh try_acquire at the end ({ctx})");
        }
    }
}

/// The index of a refusal in the event and counter arrays.
fn event_index(reason: RejectReason) -> usize {
    match reason {
        RejectReason::Full => 1,
        RejectReason::WaitTimedOut => 2,
        RejectReason::TooManyWaiting => 3,
        RejectReason::ExceedsLimit => 5,
        RejectReason::Evicted => 6,
        RejectReason::Reserved => 7,
        other => panic!("a refusal the model does not know: {other:?}"),
    }
}

fn show<T>(poll: &Poll<Result<T, BulkheadFull>>) -> String {
    match poll {
        Poll::Pending => "Pending".to_string(),
        Poll::Ready(Ok(_)) => "Ready(Ok)".to_string(),
        Poll::Ready(Err(e)) => format!("Ready(Err({:?}, waited {:?}))", e.reason(), e.waited()),
    }
}
