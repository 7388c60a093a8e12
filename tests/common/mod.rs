//! Helpers shared by the integration tests. Each test file uses a subset, hence the
//! `dead_code` allowance.
#![allow(dead_code)]

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::task::{Context, Poll, Wake, Waker};
use std::thread;
use std::time::{Duration, Instant};

use bulkhead::{Bulkhead, BulkheadConfig, BulkheadMetrics};

/// How long any blocking part of a test may take before it counts as hung. Generous on
/// purpose: it only catches deadlocks and lost wake-ups, never slowness.
pub const HANG_GUARD: Duration = Duration::from_secs(20);

/// A wait long enough that a waiter never times out during a test.
pub const LONG_WAIT: Duration = Duration::from_secs(60);

/// A config with `limit` concurrent calls and no wait (fail fast).
pub fn limit(limit: usize) -> BulkheadConfig {
    BulkheadConfig::builder().max_concurrent_calls(limit).build().expect("valid config")
}

/// A config with `limit` concurrent calls and a max wait of `wait`.
pub fn limit_wait(limit: usize, wait: Duration) -> BulkheadConfig {
    BulkheadConfig::builder()
        .max_concurrent_calls(limit)
        .max_wait_duration(wait)
        .build()
        .expect("valid config")
}

/// A config with `limit` calls, a max wait of `wait` and at most `waiting` waiters.
pub fn limit_wait_cap(limit: usize, wait: Duration, waiting: usize) -> BulkheadConfig {
    BulkheadConfig::builder()
        .max_concurrent_calls(limit)
        .max_wait_duration(wait)
        .max_waiting_calls(waiting)
        .build()
        .expect("valid config")
}

/// A shared bulkhead.
pub fn shared(name: &str, config: BulkheadConfig) -> Arc<Bulkhead> {
    Arc::new(Bulkhead::new(name, config))
}

/// Spins (sleeping briefly) until `cond` holds; panics after [`HANG_GUARD`].
#[track_caller]
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < HANG_GUARD, "hang guard: still waiting for {what}");
        thread::sleep(Duration::from_micros(200));
    }
}

/// Waits until the bulkhead reports exactly `n` queued callers.
#[track_caller]
pub fn wait_for_waiters(bulkhead: &Bulkhead, n: usize) {
    wait_until(&format!("{n} waiting calls"), || bulkhead.metrics().waiting_calls() == n);
}

/// Runs `body` on its own thread and fails the test if it has not finished within
/// [`HANG_GUARD`]. A panic in `body` fails the test with the same payload.
#[track_caller]
pub fn with_hang_guard<T: Send + 'static>(body: impl FnOnce() -> T + Send + 'static) -> T {
    let (done_tx, done_rx) = mpsc::channel();
    let handle = thread::spawn(move || {
        let value = body();
        let _ = done_tx.send(());
        value
    });
    match done_rx.recv_timeout(HANG_GUARD) {
        Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => match handle.join() {
            Ok(value) => value,
            Err(payload) => std::panic::resume_unwind(payload),
        },
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("hang guard: test body still running"),
    }
}

/// Joins `handle`, failing after [`HANG_GUARD`] instead of hanging the suite.
#[track_caller]
pub fn join_guarded<T>(handle: thread::JoinHandle<T>) -> T {
    wait_until("a thread to finish", || handle.is_finished());
    match handle.join() {
        Ok(value) => value,
        Err(payload) => std::panic::resume_unwind(payload),
    }
}

/// Asserts the quiescent invariant: work conservation, every permit back and nobody waiting.
#[track_caller]
pub fn assert_quiescent(bulkhead: &Bulkhead, max: usize) {
    if let Err(violation) = bulkhead.check_work_conservation() {
        panic!("work conservation violated at quiescence: {violation}");
    }
    let m = bulkhead.metrics();
    assert_eq!(m.max_allowed_concurrent_calls(), max, "max allowed: {m:?}");
    assert_eq!(m.available_concurrent_calls(), max, "available: {m:?}");
    assert_eq!(m.in_flight_calls(), 0, "in flight: {m:?}");
    assert_eq!(m.waiting_calls(), 0, "waiting: {m:?}");
}

/// Asserts the four metric fields at once.
#[track_caller]
pub fn assert_metrics(
    m: BulkheadMetrics,
    available: usize,
    max: usize,
    in_flight: usize,
    waiting: usize,
) {
    assert_eq!(
        (
            m.available_concurrent_calls(),
            m.max_allowed_concurrent_calls(),
            m.in_flight_calls(),
            m.waiting_calls()
        ),
        (available, max, in_flight, waiting),
        "(available, max, in_flight, waiting)"
    );
}

/// A waker that counts how often it was woken.
#[derive(Debug, Default)]
pub struct CountingWaker {
    wakes: AtomicUsize,
}

impl CountingWaker {
    /// A new waker and the handle to read its count.
    pub fn new() -> (Arc<CountingWaker>, Waker) {
        let counter = Arc::new(CountingWaker::default());
        let waker = Waker::from(Arc::clone(&counter));
        (counter, waker)
    }

    pub fn wakes(&self) -> usize {
        self.wakes.load(Ordering::SeqCst)
    }
}

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.wakes.fetch_add(1, Ordering::SeqCst);
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.wakes.fetch_add(1, Ordering::SeqCst);
    }
}

/// Polls `fut` once with `waker`.
pub fn poll_once<F: Future + Unpin>(fut: &mut F, waker: &Waker) -> Poll<F::Output> {
    Pin::new(fut).poll(&mut Context::from_waker(waker))
}

/// A small xorshift64* generator: deterministic from its seed, no dependency.
#[derive(Debug, Clone)]
pub struct XorShift(u64);

impl XorShift {
    pub fn new(seed: u64) -> Self {
        XorShift(seed.max(1))
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform-ish in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// Counts callers inside their permit: entered after the permit is granted and left before
/// it is released, so it never exceeds the real number of calls in flight. `enter` fails the
/// test the moment more than `limit` callers are inside.
#[derive(Default)]
pub struct Holders {
    pub now: AtomicUsize,
    pub peak: AtomicUsize,
}

impl Holders {
    pub fn enter(&self, limit: usize) {
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        assert!(now <= limit, "{now} concurrent holders with a limit of {limit}");
    }

    pub fn leave(&self) {
        self.now.fetch_sub(1, Ordering::SeqCst);
    }
}
