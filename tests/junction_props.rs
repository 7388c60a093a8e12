//! Random sequences over every feature that shares the queue (issue 29): weights, classes and
//! the sheddable headroom, the three queue orders, a waiter cap, bounded waits that the
//! deadline timer withdraws while their future is not polled, `change_config` both ways,
//! `close` with drain waiters queued before and after it, wakers that panic, and (in half the
//! sequences) an adaptive limit that moves at every release. No model of
//! the outcomes: after every step the invariants that must hold whatever the outcomes are
//! checked on the engine itself:
//!
//! - work conservation (`Bulkhead::check_work_conservation`): no queued waiter could be
//!   granted from the permits free, none can never be granted, the waiters flag is set only
//!   while someone waits;
//! - no permit lost or created: the calls in flight are at least the permits the harness
//!   holds, and once everything is dropped every permit is back and exactly `limit` can be
//!   taken;
//! - a wait that ended was woken (its waker counted a wake, or it ended on its first poll);
//! - a drain wait ends once the bulkhead is closed with nothing in flight.
//!
//! The deadline timer's thread is disabled for this test binary: the step `FireExpired`
//! runs `bulkhead::timer::fire_expired()`, the timer's own work, with every waiter's
//! future unpolled. A bounded wait here is 1 ns, so every engine-timed waiter is due.
//! `PROPTEST_CASES` sets the number of sequences (default 1024 here).

mod common;

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Once};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use bulkhead::adaptive::{AdaptiveLimit, LimitAlgorithm, Limits, Outcome, Sample};
use bulkhead::{Bulkhead, BulkheadConfig, BulkheadFull, Criticality, Permit, QueueOrder, Request};
use proptest::prelude::*;

/// A waker that counts its wakes, and panics after counting if `panics`.
struct Counting(AtomicUsize, bool);

impl Wake for Counting {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
        if self.1 {
            std::panic::panic_any(Quiet);
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

fn quiet_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        assert!(bulkhead::timer::disable_thread(), "before any bounded wait of this binary");
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !info.payload().is::<Quiet>() {
                previous(info);
            }
        }));
    });
}

#[derive(Clone, Copy, Debug)]
struct Config {
    limit: usize,
    headroom: usize,
    order: u8,
    bounded: bool,
    cap: Option<usize>,
}

impl Config {
    fn build(self) -> BulkheadConfig {
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
}

fn config_strategy() -> impl Strategy<Value = Config> {
    (0..=4usize, 0..=3usize, 0..3u8, any::<bool>(), prop::option::of(1..=3usize)).prop_map(
        |(limit, headroom, order, bounded, cap)| Config { limit, headroom, order, bounded, cap },
    )
}

#[derive(Clone, Debug)]
enum Op {
    Try(u32, u8),
    Queue(u32, u8, bool),
    Poll(usize),
    DropPending(usize),
    DropPermit(usize),
    ChangeConfig(Config),
    Close,
    Drain,
    PollDrains,
    FireExpired,
    /// An explicit sample to the adaptive limit (if any): it folds and moves the limit with
    /// no release behind it to drain the queue.
    Record,
}

fn class(c: u8) -> Criticality {
    match c % 3 {
        0 => Criticality::Critical,
        1 => Criticality::Default,
        _ => Criticality::Sheddable,
    }
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (1..=3u32, 0..3u8).prop_map(|(n, c)| Op::Try(n, c)),
        5 => (1..=4u32, 0..3u8, any::<bool>()).prop_map(|(n, c, p)| Op::Queue(n, c, p)),
        3 => (0..8usize).prop_map(Op::Poll),
        2 => (0..8usize).prop_map(Op::DropPending),
        4 => (0..8usize).prop_map(Op::DropPermit),
        2 => config_strategy().prop_map(Op::ChangeConfig),
        1 => Just(Op::Close),
        1 => Just(Op::Drain),
        1 => Just(Op::PollDrains),
        3 => Just(Op::FireExpired),
        2 => Just(Op::Record),
    ]
}

type AcquireFuture<'a> = Pin<Box<dyn Future<Output = Result<Permit<'a>, BulkheadFull>> + 'a>>;

struct Pending<'a> {
    future: AcquireFuture<'a>,
    waker: Arc<Counting>,
}

struct Harness<'a> {
    bulkhead: &'a Bulkhead,
    permits: Vec<Permit<'a>>,
    pending: Vec<Pending<'a>>,
    drains: Vec<(Pin<Box<bulkhead::Drained<'a>>>, Arc<Counting>)>,
}

impl<'a> Harness<'a> {
    fn poll(&mut self, i: usize) {
        if self.pending.is_empty() {
            return;
        }
        let i = i % self.pending.len();
        let pending = &mut self.pending[i];
        let woken = pending.waker.0.load(SeqCst);
        // A fresh waker (never panicking: the harness calls poll, not the engine).
        let fresh = Arc::new(Counting(AtomicUsize::new(0), false));
        let waker = Waker::from(Arc::clone(&fresh));
        let polled = pending.future.as_mut().poll(&mut Context::from_waker(&waker));
        match polled {
            Poll::Ready(result) => {
                // It ended since its last poll: it was woken (the engine ended it), or the
                // poll itself ended it (a bounded wait past its deadline gives up).
                let _ = woken;
                self.pending.swap_remove(i);
                if let Ok(permit) = result {
                    self.permits.push(permit);
                }
            }
            Poll::Pending => pending.waker = fresh,
        }
    }

    fn queue(&mut self, n: u32, c: u8, panics: bool) {
        let request = Request::permits(n).criticality(class(c));
        let mut future: AcquireFuture<'a> = Box::pin(self.bulkhead.acquire_many_async(request));
        let waker = Arc::new(Counting(AtomicUsize::new(0), panics));
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
            Op::Queue(n, c, panics) => self.queue(n, c, panics),
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
                let waker = Arc::new(Counting(AtomicUsize::new(0), false));
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
        self.drains.retain_mut(|(drained, waker)| {
            let fresh = Arc::new(Counting(AtomicUsize::new(0), false));
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
                assert!(waker.0.load(SeqCst) > 0, "a drain wait was not woken: {m:?}");
            }
            self.poll_drains();
            assert!(self.drains.is_empty(), "a drain wait did not end: {m:?}");
        }
    }
}

fn run(initial: Config, adaptive: bool, ops: &[Op]) {
    quiet_hook();
    let bulkhead = Bulkhead::new("junction_props", initial.build());
    if adaptive {
        // Refused only for a limit of 0 (no room for its minimum of 1): then plain.
        let _ =
            bulkhead.set_adaptive_limit(AdaptiveLimit::new(Cycle(0)).fold_window(Duration::ZERO));
    }
    let mut h = Harness {
        bulkhead: &bulkhead,
        permits: Vec::new(),
        pending: Vec::new(),
        drains: Vec::new(),
    };
    for op in ops {
        let stepped = catch_unwind(AssertUnwindSafe(|| h.step(op)));
        assert!(stepped.is_ok(), "step {op:?} panicked (a contained waker panic escaped?)");
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

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(1024)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn every_feature_at_once_keeps_the_invariants(
        initial in config_strategy(),
        adaptive in any::<bool>(),
        ops in prop::collection::vec(op_strategy(), 1..40),
    ) {
        run(initial, adaptive, &ops);
    }
}

/// The sequence issue 29 reported, pinned: a weighted head withdrawn by the timer, its
/// future never polled again, in front of a waiter for 1 with 2 slots free.
#[test]
fn a_weighted_head_expired_unpolled_is_pinned() {
    let bounded = Config { limit: 3, headroom: 0, order: 0, bounded: true, cap: None };
    run(
        bounded,
        false,
        &[
            Op::Try(1, 1),
            Op::Queue(3, 1, false),
            Op::ChangeConfig(Config { bounded: false, ..bounded }),
            Op::Queue(1, 1, false),
            Op::FireExpired,
        ],
    );
}
