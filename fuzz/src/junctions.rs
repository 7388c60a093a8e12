//! Random sequences over every feature that shares the queue (issue 29), shared by the
//! `junctions` fuzz target and by `tests/junction_props.rs` (which includes this file with
//! `#[path]` and drives [`run`] from a proptest strategy, and replays the committed corpus
//! through [`run_junctions`]).
//!
//! The steps ([`Op`]): weights, classes and the sheddable headroom, the three queue orders, a
//! waiter cap, bounded waits that the deadline timer withdraws while their future is not
//! polled, `change_config` both ways, `close` with drain waiters queued before and after it,
//! wakers that panic or re-enter the bulkhead from `wake` (`try_acquire` and drop, `metrics`,
//! `change_config(config())`), and (when asked) an adaptive limit that moves at every
//! release. No model of the outcomes: after every step the invariants that must hold
//! whatever the outcomes are checked on the engine itself:
//!
//! - work conservation (`Bulkhead::check_work_conservation`): no queued waiter could be
//!   granted from the permits free, none can never be granted, the waiters flag is set only
//!   while someone waits;
//! - no permit lost or created: the calls in flight are at least the permits the harness
//!   holds, and once everything is dropped every permit is back and exactly `limit` can be
//!   taken;
//! - no step panics (a waker's panic is contained by the engine);
//! - a drain wait ends, and was woken, once the bulkhead is closed with nothing in flight.
//!
//! The deadline timer's thread is disabled for the whole process (the first [`run`] does it,
//! before any bounded wait): the step `FireExpired` runs `bulkhead::timer::fire_expired()`,
//! the timer's own work, with every waiter's future unpolled. A bounded wait here is 1 ns,
//! so every engine-timed waiter is due. A process that runs other bounded waits before the
//! first `run` (the other targets' checks in `tests/fuzz_corpus.rs`) cannot host this one.
//!
//! [`decode`] maps any bytes to a valid sequence (see its docs for the layout); every step
//! kind is reachable from one byte and its argument bytes.

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex, Once, PoisonError, Weak};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use bulkhead::adaptive::{AdaptiveLimit, LimitAlgorithm, Limits, Outcome, Sample};
use bulkhead::{Bulkhead, BulkheadConfig, BulkheadFull, Criticality, Permit, QueueOrder, Request};

/// At most this many steps are decoded from one input (a longer input's tail is ignored).
pub const MAX_STEPS: usize = 200;

/// What a queued waiter's waker does besides counting its wakes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hostile {
    /// Nothing more.
    No,
    /// Panics after counting (the engine must contain it).
    Panics,
    /// Re-enters the bulkhead from `wake`: `try_acquire` and drop, `metrics`,
    /// `change_config(config())` (each deadlocks if the engine wakes under its lock).
    Reenters,
}

impl Hostile {
    /// `b % 3`: no, panics, re-enters.
    pub fn from_byte(b: u8) -> Hostile {
        match b % 3 {
            0 => Hostile::No,
            1 => Hostile::Panics,
            _ => Hostile::Reenters,
        }
    }
}

/// How many times a [`Hostile::Reenters`] waker re-entered its bulkhead, in this process.
static REENTRIES: AtomicUsize = AtomicUsize::new(0);

/// How many times a [`Hostile::Reenters`] waker re-entered its bulkhead so far, in this
/// process (a test's evidence that the re-entering path ran).
pub fn reentries() -> usize {
    // SeqCst: test code; the strongest order keeps the count beyond question.
    REENTRIES.load(SeqCst)
}

/// A waker that counts its wakes, then does what its [`Hostile`] says.
struct Counting {
    wakes: AtomicUsize,
    hostile: Hostile,
    bulkhead: Weak<Bulkhead>,
}

impl Counting {
    fn new(hostile: Hostile, bulkhead: &Weak<Bulkhead>) -> Arc<Counting> {
        Arc::new(Counting { wakes: AtomicUsize::new(0), hostile, bulkhead: Weak::clone(bulkhead) })
    }

    fn wakes(&self) -> usize {
        // SeqCst: test code; the strongest order keeps the count beyond question.
        self.wakes.load(SeqCst)
    }
}

impl Wake for Counting {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // SeqCst: test code; the strongest order keeps the count beyond question.
        self.wakes.fetch_add(1, SeqCst);
        match self.hostile {
            Hostile::No => {}
            Hostile::Panics => std::panic::panic_any(Quiet),
            Hostile::Reenters => {
                if let Some(bulkhead) = self.bulkhead.upgrade() {
                    // SeqCst: test code; the strongest order keeps the count beyond question.
                    REENTRIES.fetch_add(1, SeqCst);
                    drop(bulkhead.try_acquire());
                    let _ = bulkhead.metrics();
                    bulkhead.change_config(bulkhead.config());
                }
            }
        }
    }
}

/// An adaptive limit that moves on every sample, up and down within its bounds: the engine's
/// limit then changes under queued waiters at every release (adaptive limit moves, issue 29).
struct Cycle(usize);

impl LimitAlgorithm for Cycle {
    fn update(&mut self, _sample: &Sample, limits: Limits) -> usize {
        self.0 = self.0.wrapping_mul(5).wrapping_add(3);
        limits.min + self.0 % (limits.max.saturating_sub(limits.min) + 1)
    }
}

/// The payload of the deliberate panics; the panic hook stays quiet about it.
struct Quiet;

/// Once per process: disables the timer thread (before any bounded wait of this harness)
/// and installs a panic hook that is quiet about [`Quiet`] and hands every other panic to
/// the hook before it (libFuzzer's, which aborts, in the fuzz target).
fn once_per_process() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        assert!(bulkhead::timer::disable_thread(), "before any bounded wait of this process");
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !info.payload().is::<Quiet>() {
                previous(info);
            }
        }));
    });
}

/// A bulkhead configuration, small enough that the interesting interleavings are reached.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// 0 to 4 concurrent calls.
    pub limit: usize,
    /// The sheddable headroom (clamped to the limit).
    pub headroom: usize,
    /// `% 3`: FIFO, LIFO, adaptive LIFO.
    pub order: u8,
    /// A 1 ns wait (due at once for the timer) if set, else an unbounded one.
    pub bounded: bool,
    /// The waiter cap.
    pub cap: Option<usize>,
}

impl Config {
    /// The bulkhead configuration.
    pub fn build(self) -> BulkheadConfig {
        let order = match self.order % 3 {
            0 => QueueOrder::Fifo,
            1 => QueueOrder::Lifo,
            _ => QueueOrder::AdaptiveLifo {
                target: Duration::from_millis(5),
                interval: Duration::from_millis(20),
            },
        };
        let wait = if self.bounded { Duration::from_nanos(1) } else { Duration::MAX };
        let mut builder = BulkheadConfig::builder()
            .max_concurrent_calls(self.limit)
            .max_wait_duration(wait)
            .sheddable_headroom(self.headroom.min(self.limit))
            .queue_order(order);
        if let Some(cap) = self.cap {
            builder = builder.max_waiting_calls(cap);
        }
        builder.build().expect("valid config")
    }

    /// Two bytes: the first gives the limit (`% 5`), the headroom (`/ 5 % 4`) and the order
    /// (`/ 20 % 3`); the second whether the wait is bounded (bit 0) and the cap (bits 1-2:
    /// none, 1, 2, 3).
    pub fn from_bytes(a: u8, b: u8) -> Config {
        let a = usize::from(a);
        Config {
            limit: a % 5,
            headroom: a / 5 % 4,
            order: (a / 20 % 3) as u8,
            bounded: b & 1 != 0,
            cap: match (b >> 1) & 3 {
                0 => None,
                k => Some(usize::from(k)),
            },
        }
    }
}

/// One step of a sequence.
#[derive(Clone, Debug)]
pub enum Op {
    /// `try_acquire_many` of n permits in class c (`% 3`: critical, default, sheddable).
    Try(u32, u8),
    /// `acquire_many_async` of n permits in class c, polled once with a counting waker.
    Queue(u32, u8, Hostile),
    /// Polls the i-th (`% len`) pending future again.
    Poll(usize),
    /// Drops the i-th pending future (withdraws it).
    DropPending(usize),
    /// Drops the i-th held permit.
    DropPermit(usize),
    /// `change_config` to this configuration.
    ChangeConfig(Config),
    /// `close`.
    Close,
    /// A `drained()` wait, polled once.
    Drain,
    /// Polls every drain wait.
    PollDrains,
    /// `bulkhead::timer::fire_expired()`: withdraws every bounded waiter (all are due).
    FireExpired,
    /// An explicit sample to the adaptive limit (if any): it folds and moves the limit with
    /// no release behind it to drain the queue.
    Record,
}

/// The class of byte `c`: `% 3` critical, default, sheddable.
fn class(c: u8) -> Criticality {
    match c % 3 {
        0 => Criticality::Critical,
        1 => Criticality::Default,
        _ => Criticality::Sheddable,
    }
}

type AcquireFuture<'a> = Pin<Box<dyn Future<Output = Result<Permit<'a>, BulkheadFull>> + 'a>>;

struct Pending<'a> {
    future: AcquireFuture<'a>,
    waker: Arc<Counting>,
}

struct Harness<'a> {
    bulkhead: &'a Bulkhead,
    weak: Weak<Bulkhead>,
    permits: Vec<Permit<'a>>,
    pending: Vec<Pending<'a>>,
    drains: Vec<(Pin<Box<bulkhead::Drained<'a>>>, Arc<Counting>)>,
}

impl<'a> Harness<'a> {
    fn counting(&self, hostile: Hostile) -> Arc<Counting> {
        Counting::new(hostile, &self.weak)
    }

    fn poll(&mut self, i: usize) {
        if self.pending.is_empty() {
            return;
        }
        let i = i % self.pending.len();
        // A fresh waker of the same kind: the one the engine registers now, and wakes later.
        let fresh = self.counting(self.pending[i].waker.hostile);
        let pending = &mut self.pending[i];
        let waker = Waker::from(Arc::clone(&fresh));
        match pending.future.as_mut().poll(&mut Context::from_waker(&waker)) {
            Poll::Ready(result) => {
                // It ended since its last poll: the engine ended it (and woke it), or the
                // poll itself ended it (a bounded wait past its deadline gives up).
                self.pending.swap_remove(i);
                if let Ok(permit) = result {
                    self.permits.push(permit);
                }
            }
            Poll::Pending => pending.waker = fresh,
        }
    }

    fn queue(&mut self, n: u32, c: u8, hostile: Hostile) {
        let request = Request::permits(n).criticality(class(c));
        let mut future: AcquireFuture<'a> = Box::pin(self.bulkhead.acquire_many_async(request));
        let waker = self.counting(hostile);
        let w = Waker::from(Arc::clone(&waker));
        match future.as_mut().poll(&mut Context::from_waker(&w)) {
            Poll::Ready(Ok(permit)) => self.permits.push(permit),
            Poll::Ready(Err(_)) => {}
            Poll::Pending => self.pending.push(Pending { future, waker }),
        }
    }

    fn step(&mut self, op: &Op) {
        match *op {
            Op::Try(n, c) => {
                let request = Request::permits(n).criticality(class(c));
                if let Ok(permit) = self.bulkhead.try_acquire_many(request) {
                    self.permits.push(permit);
                }
            }
            Op::Queue(n, c, hostile) => self.queue(n, c, hostile),
            Op::Poll(i) => self.poll(i),
            Op::DropPending(i) => {
                if !self.pending.is_empty() {
                    let i = i % self.pending.len();
                    drop(self.pending.swap_remove(i));
                }
            }
            Op::DropPermit(i) => {
                if !self.permits.is_empty() {
                    let i = i % self.permits.len();
                    drop(self.permits.swap_remove(i));
                }
            }
            Op::ChangeConfig(config) => self.bulkhead.change_config(config.build()),
            Op::Close => {
                self.bulkhead.close();
            }
            Op::Drain => {
                let mut drained = Box::pin(self.bulkhead.drained());
                let waker = self.counting(Hostile::No);
                let w = Waker::from(Arc::clone(&waker));
                if drained.as_mut().poll(&mut Context::from_waker(&w)).is_pending() {
                    self.drains.push((drained, waker));
                }
            }
            Op::PollDrains => self.poll_drains(),
            Op::FireExpired => {
                let _ = bulkhead::timer::fire_expired();
            }
            Op::Record => {
                if let Some(control) = self.bulkhead.adaptive_limit() {
                    control.record(Sample::new(Duration::from_millis(1), 1, Outcome::Success));
                }
            }
        }
    }

    /// Polls every drain wait, each with a fresh counting waker (the one it registers now:
    /// the one a completion must wake).
    fn poll_drains(&mut self) {
        let weak = Weak::clone(&self.weak);
        self.drains.retain_mut(|(drained, waker)| {
            let fresh = Counting::new(Hostile::No, &weak);
            let w = Waker::from(Arc::clone(&fresh));
            let pending = drained.as_mut().poll(&mut Context::from_waker(&w)).is_pending();
            *waker = fresh;
            pending
        });
    }

    fn check(&mut self) {
        if let Err(violation) = self.bulkhead.check_work_conservation() {
            panic!("work conservation: {violation}");
        }
        let m = self.bulkhead.metrics();
        let held: usize = self.permits.iter().map(|p| p.num_permits() as usize).sum();
        assert!(
            m.in_flight_calls() >= held,
            "in flight {} < held {held}: {m:?}",
            m.in_flight_calls()
        );
        // Closed with nothing in flight: every drain wait was completed, and woken.
        if m.is_closed() && m.in_flight_calls() == 0 {
            for (_, waker) in &self.drains {
                assert!(waker.wakes() > 0, "a drain wait was not woken: {m:?}");
            }
            self.poll_drains();
            assert!(self.drains.is_empty(), "a drain wait did not end: {m:?}");
        }
        // Each pending future and drain wait holds one queue slot (queued, or ended and not
        // yet polled), and nothing else does: a wait that left without freeing its slot
        // shows here.
        assert_eq!(
            self.bulkhead.queue_slots_in_use(),
            self.pending.len() + self.drains.len(),
            "queue slots in use vs. pending futures and drain waits"
        );
    }
}

/// Runs `ops` on a bulkhead built from `initial` (with the moving adaptive limit if
/// `adaptive`), checking the invariants after every step and once everything is dropped.
/// Panics, naming the step, on a violation.
pub fn run(initial: Config, adaptive: bool, ops: &[Op]) {
    once_per_process();
    // One run at a time in a process: `fire_expired` withdraws the due waiters of every
    // bulkhead, and a withdrawal on another test thread's bulkhead, between its step and its
    // check, would show that check a queue in the middle of being served.
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _one_at_a_time = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    let bulkhead = Arc::new(Bulkhead::new("junctions", initial.build()));
    if adaptive {
        // Refused only for a limit of 0 (no room for its minimum of 1): then plain.
        let _ =
            bulkhead.set_adaptive_limit(AdaptiveLimit::new(Cycle(0)).fold_window(Duration::ZERO));
    }
    let mut h = Harness {
        bulkhead: &bulkhead,
        weak: Arc::downgrade(&bulkhead),
        permits: Vec::new(),
        pending: Vec::new(),
        drains: Vec::new(),
    };
    for (i, op) in ops.iter().enumerate() {
        let stepped = catch_unwind(AssertUnwindSafe(|| h.step(op)));
        assert!(stepped.is_ok(), "step {i} {op:?} panicked (a contained waker panic escaped?)");
        h.check();
    }
    // Everything dropped: every permit back, work conserving, exactly `limit` takeable.
    h.pending.clear();
    h.permits.clear();
    let _ = bulkhead::timer::fire_expired();
    h.check();
    h.poll_drains();
    let m = bulkhead.metrics();
    assert_eq!(m.in_flight_calls(), 0, "{m:?}");
    assert_eq!(m.waiting_calls(), 0, "{m:?}");
    assert_eq!(m.available_concurrent_calls(), m.max_allowed_concurrent_calls(), "{m:?}");
    if !m.is_closed() {
        let limit = m.max_allowed_concurrent_calls();
        let all: Vec<_> = (0..limit)
            .map(|i| bulkhead.try_acquire().unwrap_or_else(|e| panic!("{i}: {e}")))
            .collect();
        assert!(bulkhead.try_acquire().is_err(), "a permit was created");
        drop(all);
    }
}

/// Reads bytes, giving 0 once they run out.
struct Bytes<'d>(std::slice::Iter<'d, u8>);

impl Bytes<'_> {
    fn next(&mut self) -> u8 {
        self.0.next().copied().unwrap_or(0)
    }
}

/// Decodes any bytes into `(initial config, adaptive, steps)`; never fails.
///
/// Header: two config bytes ([`Config::from_bytes`]) and a byte whose bit 0 attaches the
/// adaptive limit (missing bytes read as 0). Then each step is one byte whose low nibble
/// picks the kind and whose high nibble `h` is its index or argument, plus an argument byte
/// `a` for some kinds (two for a config change):
///
/// | nibble | step |
/// |---|---|
/// | 0, 1 | `Try(1 + h % 3, h / 3)` |
/// | 2, 3, 4 | `Queue(1 + a % 4, a / 4 % 3, Hostile::from_byte(h))` |
/// | 5, 6 | `Poll(h)` |
/// | 7 | `DropPending(h)` |
/// | 8, 9 | `DropPermit(h)` |
/// | 10 | `ChangeConfig(Config::from_bytes(a, b))` |
/// | 11 | `Close` |
/// | 12 | `Drain` |
/// | 13 | `PollDrains` |
/// | 14 | `FireExpired` |
/// | 15 | `Record` |
///
/// At most [`MAX_STEPS`] steps are decoded.
pub fn decode(data: &[u8]) -> (Config, bool, Vec<Op>) {
    let mut bytes = Bytes(data.iter());
    let (a, b) = (bytes.next(), bytes.next());
    let initial = Config::from_bytes(a, b);
    let adaptive = bytes.next() & 1 != 0;
    let mut ops = Vec::new();
    while bytes.0.len() > 0 && ops.len() < MAX_STEPS {
        let byte = bytes.next();
        let h = byte >> 4;
        let op = match byte & 15 {
            0 | 1 => Op::Try(1 + u32::from(h % 3), h / 3),
            2..=4 => {
                let a = bytes.next();
                Op::Queue(1 + u32::from(a % 4), a / 4 % 3, Hostile::from_byte(h))
            }
            5 | 6 => Op::Poll(usize::from(h)),
            7 => Op::DropPending(usize::from(h)),
            8 | 9 => Op::DropPermit(usize::from(h)),
            10 => {
                let (a, b) = (bytes.next(), bytes.next());
                Op::ChangeConfig(Config::from_bytes(a, b))
            }
            11 => Op::Close,
            12 => Op::Drain,
            13 => Op::PollDrains,
            14 => Op::FireExpired,
            _ => Op::Record,
        };
        ops.push(op);
    }
    (initial, adaptive, ops)
}

/// The `junctions` fuzz target: [`decode`], then [`run`]. `BULKHEAD_FUZZ_TRACE=1` prints the
/// decoded sequence first.
pub fn run_junctions(data: &[u8]) {
    let (initial, adaptive, ops) = decode(data);
    if std::env::var_os("BULKHEAD_FUZZ_TRACE").is_some() {
        eprintln!("junctions: {initial:?} adaptive={adaptive}");
        for (i, op) in ops.iter().enumerate() {
            eprintln!("  {i}: {op:?}");
        }
    }
    run(initial, adaptive, &ops);
}
