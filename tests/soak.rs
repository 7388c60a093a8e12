//! Soak: std threads and tokio tasks hammer one bulkhead with a random mix of every way to
//! acquire, cancel, panic and reconfigure, while invariants are checked continuously and at
//! the end.
//!
//! * `soak_short` (about 2 s) runs under plain `cargo test`.
//! * `soak` is ignored; `ci/soak.sh` runs it in release for `SOAK_SECS` seconds (default 60):
//!   `SOAK_SECS=600 cargo test --release --test soak -- --ignored --nocapture`.
//!
//! Continuous invariants (checked by every caller right after it gets a permit):
//! * holders (callers between "got a permit" and "about to drop it", counted with an
//!   `AtomicUsize`) never exceed the largest limit ever configured;
//! * once the calls in flight have drained below the current limit after a change (the
//!   config thread waits for `in_flight <= limit`, then publishes the phase as drained),
//!   holders never exceed that limit until the next change;
//! * a caller allowed to wait (`acquire_timeout` with a non-zero wait) is never refused
//!   with `Full`; `Full` and `TooManyWaiting` report `waited == 0`; `WaitTimedOut` reports
//!   at least the wait it was given.
//!
//! End invariants: the listeners saw exactly one `CallRejected` per refusal a caller saw,
//! one `CallPermitted` and one `CallFinished` per permit a caller got; after the last change:
//! work conservation holds (`Bulkhead::check_work_conservation`), available == limit, in
//! flight 0, waiting 0, and a fresh `try_acquire` succeeds. Some async acquires are first
//! polled with a waker that panics in `wake` (issue 29): nothing may notice but the panic hook.

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex, Once};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bulkhead::{Bulkhead, BulkheadConfig, BulkheadEventKind, BulkheadFull, RejectReason};

/// The payload of every deliberate panic; the panic hook stays quiet about it.
struct SoakPanic;

fn quiet_deliberate_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !info.payload().is::<SoakPanic>() {
                previous(info);
            }
        }));
    });
}

/// A waker whose `wake` panics with the soak's quiet payload.
struct PanickingWaker;

impl std::task::Wake for PanickingWaker {
    fn wake(self: Arc<Self>) {
        std::panic::panic_any(SoakPanic);
    }
}

/// xorshift64*: a small, seedable generator, one per worker.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, one_in: u64) -> bool {
        self.below(one_in) == 0
    }
}

/// Outcome counters, as the callers saw them.
#[derive(Default)]
struct Outcomes {
    ops: AtomicUsize,
    granted: AtomicUsize,
    full: AtomicUsize,
    timed_out: AtomicUsize,
    too_many: AtomicUsize,
    cancelled: AtomicUsize,
    call_panics: AtomicUsize,
}

/// Events, as the listeners saw them.
#[derive(Default)]
struct Seen {
    permitted: AtomicUsize,
    rejected: AtomicUsize,
    finished: AtomicUsize,
    listener_panics: AtomicUsize,
}

struct Soak {
    bulkhead: Arc<Bulkhead>,
    stop: AtomicBool,
    holders: AtomicUsize,
    max_holders: AtomicUsize,
    max_limit_ever: AtomicUsize,
    /// generation << 32 | limit << 1 | drained
    phase: AtomicU64,
    out: Outcomes,
    seen: Seen,
    violations: AtomicUsize,
    first_violation: Mutex<Option<String>>,
}

/// Marks one caller as holding a permit for as long as it lives.
struct Holding<'a>(&'a Soak);

impl Drop for Holding<'_> {
    fn drop(&mut self) {
        self.0.holders.fetch_sub(1, SeqCst);
    }
}

impl Soak {
    fn violation(&self, what: String) {
        self.violations.fetch_add(1, SeqCst);
        let mut first = self.first_violation.lock().unwrap();
        if first.is_none() {
            *first = Some(what);
        }
    }

    /// Called right after a permit was obtained (and before it is dropped).
    fn hold(&self) -> Holding<'_> {
        let h = self.holders.fetch_add(1, SeqCst) + 1;
        self.max_holders.fetch_max(h, SeqCst);
        self.out.granted.fetch_add(1, SeqCst);
        let max_ever = self.max_limit_ever.load(SeqCst);
        if h > max_ever {
            self.violation(format!("{h} holders > largest limit ever set {max_ever}"));
        }
        let phase = self.phase.load(SeqCst);
        let limit = ((phase >> 1) & 0x7FFF_FFFF) as usize;
        if phase & 1 == 1 && h > limit {
            self.violation(format!("{h} holders > drained limit {limit} (phase {})", phase >> 32));
        }
        Holding(self)
    }

    /// Counts a refusal and checks what it reports. `allowed_wait`: the wait the caller was
    /// given, if it is known exactly.
    fn refused(&self, err: &BulkheadFull, allowed_wait: Option<Duration>) {
        let counter = match err.reason() {
            RejectReason::Full => &self.out.full,
            RejectReason::WaitTimedOut => &self.out.timed_out,
            RejectReason::TooManyWaiting => &self.out.too_many,
            other => {
                self.violation(format!("unknown reason {other:?}"));
                return;
            }
        };
        counter.fetch_add(1, SeqCst);
        // A refused client backs off a little, as a real one would.
        std::thread::yield_now();
        match (err.reason(), allowed_wait) {
            (RejectReason::Full, Some(w)) if !w.is_zero() => {
                self.violation(format!("Full for a caller allowed to wait {w:?}"));
            }
            (RejectReason::WaitTimedOut, Some(w)) if err.waited() < w => {
                self.violation(format!("WaitTimedOut after {:?} < {w:?}", err.waited()));
            }
            (RejectReason::Full | RejectReason::TooManyWaiting, _) if !err.waited().is_zero() => {
                self.violation(format!("{:?} with waited {:?}", err.reason(), err.waited()));
            }
            _ => {}
        }
    }
}

fn config(limit: usize, wait: Duration, cap: Option<usize>) -> BulkheadConfig {
    let b = BulkheadConfig::builder().max_concurrent_calls(limit).max_wait_duration(wait);
    match cap {
        Some(k) => b.max_waiting_calls(k),
        None => b,
    }
    .build()
    .expect("valid config")
}

const LIMITS: [usize; 9] = [0, 1, 2, 3, 4, 8, 8, 16, 32];
const WAITS_US: [u64; 5] = [0, 100, 1_000, 2_000, 5_000];
const CAPS: [Option<usize>; 8] = [None, None, None, None, Some(0), Some(2), Some(8), Some(16)];
const INITIAL_LIMIT: usize = 8;

/// A sync worker: one random operation per iteration.
fn sync_worker(s: &Soak, seed: u64) {
    let mut rng = Rng(seed);
    let b = &*s.bulkhead;
    while !s.stop.load(SeqCst) {
        s.out.ops.fetch_add(1, SeqCst);
        match rng.below(7) {
            6 => {
                // Issue 29: an async acquire first polled with a waker that panics in `wake`
                // (as a hostile executor's might), then driven by `block_on` with its own.
                // Whoever wakes the first waker (a release, the timer, a config change)
                // contains the panic and serves everyone else.
                let mut acquire = Box::pin(b.acquire_async());
                let panicking = std::task::Waker::from(Arc::new(PanickingWaker));
                let first = acquire.as_mut().poll(&mut Context::from_waker(&panicking));
                drop(panicking);
                let result = match first {
                    Poll::Ready(result) => result,
                    Poll::Pending => futures::executor::block_on(acquire),
                };
                match result {
                    Ok(p) => {
                        let h = s.hold();
                        hold_sync(&mut rng);
                        drop(h);
                        drop(p);
                    }
                    Err(e) => s.refused(&e, None),
                }
            }
            0 => match b.try_acquire() {
                Ok(p) => {
                    let h = s.hold();
                    hold_sync(&mut rng);
                    drop(h);
                    drop(p);
                }
                Err(e) => s.refused(&e, Some(Duration::ZERO)),
            },
            1 | 2 => {
                let wait = Duration::from_micros(rng.below(3_000));
                match b.acquire_timeout(wait) {
                    Ok(p) => {
                        let h = s.hold();
                        hold_sync(&mut rng);
                        drop(h);
                        drop(p);
                    }
                    Err(e) => s.refused(&e, Some(wait)),
                }
            }
            3 => match s.bulkhead.try_acquire_owned() {
                Ok(p) => {
                    let h = s.hold();
                    hold_sync(&mut rng);
                    drop(h);
                    drop(p);
                }
                Err(e) => s.refused(&e, Some(Duration::ZERO)),
            },
            _ => {
                let panics = rng.chance(8);
                let pause = rng.below(4);
                let result = catch_unwind(AssertUnwindSafe(|| {
                    b.call(|| {
                        let _h = s.hold();
                        if pause == 0 {
                            std::thread::sleep(Duration::from_micros(50));
                        }
                        if panics {
                            std::panic::panic_any(SoakPanic);
                        }
                    })
                }));
                match result {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => s.refused(&e, None),
                    Err(_) => {
                        s.out.call_panics.fetch_add(1, SeqCst);
                    }
                }
            }
        }
    }
}

fn hold_sync(rng: &mut Rng) {
    match rng.below(4) {
        0 => std::thread::sleep(Duration::from_micros(50)),
        1 => std::thread::yield_now(),
        _ => {}
    }
}

async fn hold_async(rng: &mut Rng) {
    match rng.below(8) {
        0 => tokio::time::sleep(Duration::from_millis(1)).await,
        1..=3 => tokio::task::yield_now().await,
        _ => {}
    }
}

/// Polls a future once, then drops it if it is not ready.
struct PollOnce<F>(Option<F>);

impl<F: Future + Unpin> Future for PollOnce<F> {
    type Output = Option<F::Output>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(mut fut) = self.0.take() else { return Poll::Ready(None) };
        match Pin::new(&mut fut).poll(cx) {
            Poll::Ready(out) => Poll::Ready(Some(out)),
            Poll::Pending => Poll::Ready(None), // dropped here: cancelled while queued
        }
    }
}

/// An async worker: one random operation per iteration.
async fn async_worker(s: Arc<Soak>, seed: u64) {
    let mut rng = Rng(seed);
    let b = &*s.bulkhead;
    while !s.stop.load(SeqCst) {
        s.out.ops.fetch_add(1, SeqCst);
        match rng.below(5) {
            0 | 1 => {
                let outer = Duration::from_micros(rng.below(4_000));
                match tokio::time::timeout(outer, b.acquire_async()).await {
                    Ok(Ok(p)) => {
                        let h = s.hold();
                        hold_async(&mut rng).await;
                        drop(h);
                        drop(p);
                    }
                    Ok(Err(e)) => s.refused(&e, None),
                    Err(_) => {
                        s.out.cancelled.fetch_add(1, SeqCst);
                    }
                }
            }
            2 => match PollOnce(Some(Box::pin(b.acquire_async()))).await {
                Some(Ok(p)) => {
                    let h = s.hold();
                    hold_async(&mut rng).await;
                    drop(h);
                    drop(p);
                }
                Some(Err(e)) => s.refused(&e, None),
                None => {
                    s.out.cancelled.fetch_add(1, SeqCst);
                }
            },
            3 => {
                let task = tokio::spawn(s.bulkhead.acquire_owned_async());
                if rng.chance(2) {
                    tokio::task::yield_now().await;
                    task.abort();
                }
                match task.await {
                    Ok(Ok(p)) => {
                        let h = s.hold();
                        hold_async(&mut rng).await;
                        drop(h);
                        drop(p);
                    }
                    Ok(Err(e)) => s.refused(&e, None),
                    Err(join) => {
                        assert!(join.is_cancelled(), "acquire task failed: {join}");
                        s.out.cancelled.fetch_add(1, SeqCst);
                    }
                }
            }
            _ => {
                let pause = rng.chance(4);
                let inner = Arc::clone(&s);
                let result = b
                    .call_async(async move {
                        let _h = inner.hold();
                        if pause {
                            tokio::time::sleep(Duration::from_millis(1)).await;
                        }
                    })
                    .await;
                if let Err(e) = result {
                    s.refused(&e, None);
                }
            }
        }
    }
}

/// Changes the config up and down until told to stop; publishes each phase.
fn config_changer(s: &Soak, seed: u64) -> usize {
    let mut rng = Rng(seed);
    let mut generation = 1u64;
    let mut changes = 0;
    while !s.stop.load(SeqCst) {
        let limit = LIMITS[rng.below(LIMITS.len() as u64) as usize];
        let wait = Duration::from_micros(WAITS_US[rng.below(WAITS_US.len() as u64) as usize]);
        let cap = CAPS[rng.below(CAPS.len() as u64) as usize];
        generation += 1;
        s.max_limit_ever.fetch_max(limit, SeqCst);
        s.phase.store(generation << 32 | (limit as u64) << 1, SeqCst);
        s.bulkhead.change_config(config(limit, wait, cap));
        changes += 1;
        // Wait (bounded) for a shrink to drain, then publish the stricter phase.
        let drain_deadline = Instant::now() + Duration::from_millis(500);
        while s.bulkhead.metrics().in_flight_calls() > limit && Instant::now() < drain_deadline {
            std::thread::sleep(Duration::from_micros(100));
        }
        if s.bulkhead.metrics().in_flight_calls() <= limit {
            s.phase.store(generation << 32 | (limit as u64) << 1 | 1, SeqCst);
        }
        std::thread::sleep(Duration::from_millis(1 + rng.below(20)));
    }
    changes
}

fn run_soak(duration: Duration, sync_threads: usize, async_tasks: usize) {
    quiet_deliberate_panics();
    let initial = config(INITIAL_LIMIT, Duration::from_millis(1), Some(16));
    let s = Arc::new(Soak {
        bulkhead: Arc::new(Bulkhead::new("soak", initial)),
        stop: AtomicBool::new(false),
        holders: AtomicUsize::new(0),
        max_holders: AtomicUsize::new(0),
        max_limit_ever: AtomicUsize::new(INITIAL_LIMIT),
        phase: AtomicU64::new(1 << 32 | (INITIAL_LIMIT as u64) << 1 | 1),
        out: Outcomes::default(),
        seen: Seen::default(),
        violations: AtomicUsize::new(0),
        first_violation: Mutex::new(None),
    });
    // The bulkhead's own counters, a counting listener that panics every 997th event, and a
    // quiet one.
    s.bulkhead.enable_counters();
    let counts = Arc::clone(&s);
    let tick = AtomicUsize::new(0);
    s.bulkhead.on_event(move |event| {
        match event.kind() {
            BulkheadEventKind::CallPermitted => counts.seen.permitted.fetch_add(1, SeqCst),
            BulkheadEventKind::CallRejected(_) => counts.seen.rejected.fetch_add(1, SeqCst),
            BulkheadEventKind::CallFinished => counts.seen.finished.fetch_add(1, SeqCst),
            _ => 0,
        };
        if tick.fetch_add(1, SeqCst) % 997 == 996 {
            counts.seen.listener_panics.fetch_add(1, SeqCst);
            std::panic::panic_any(SoakPanic);
        }
    });
    let second = AtomicUsize::new(0);
    s.bulkhead.on_event(move |_| {
        second.fetch_add(1, SeqCst);
    });

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let tasks: Vec<_> = (0..async_tasks)
        .map(|i| runtime.spawn(async_worker(Arc::clone(&s), 0xA5A5_0000 + i as u64)))
        .collect();
    let started = Instant::now();
    let changes = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..sync_threads)
            .map(|i| {
                let s = &*s;
                scope.spawn(move || sync_worker(s, 0x5EED_0000 + i as u64))
            })
            .collect();
        let changer = scope.spawn(|| config_changer(&s, 0xC0FF_EE00));
        std::thread::sleep(duration);
        s.stop.store(true, SeqCst);
        for w in workers {
            w.join().expect("sync worker panicked");
        }
        changer.join().expect("config thread panicked")
    });
    runtime.block_on(async {
        for t in tasks {
            t.await.expect("async worker panicked");
        }
    });
    drop(runtime);
    let elapsed = started.elapsed();

    let o = &s.out;
    let ops = o.ops.load(SeqCst);
    let granted = o.granted.load(SeqCst);
    let refused = o.full.load(SeqCst) + o.timed_out.load(SeqCst) + o.too_many.load(SeqCst);
    println!(
        "soak: {:.1} s, {} sync threads + {} tokio tasks (2 workers), {} config changes",
        elapsed.as_secs_f64(),
        sync_threads,
        async_tasks,
        changes
    );
    println!(
        "soak: {ops} ops, {:.0} ops/s; granted {granted}, Full {}, WaitTimedOut {}, TooManyWaiting {}, cancelled {}, call panics {}, listener panics {}",
        ops as f64 / elapsed.as_secs_f64(),
        o.full.load(SeqCst),
        o.timed_out.load(SeqCst),
        o.too_many.load(SeqCst),
        o.cancelled.load(SeqCst),
        o.call_panics.load(SeqCst),
        s.seen.listener_panics.load(SeqCst),
    );
    println!(
        "soak: max concurrent holders {}, largest limit {}; events permitted {}, rejected {}, finished {}",
        s.max_holders.load(SeqCst),
        s.max_limit_ever.load(SeqCst),
        s.seen.permitted.load(SeqCst),
        s.seen.rejected.load(SeqCst),
        s.seen.finished.load(SeqCst),
    );

    assert_eq!(
        s.violations.load(SeqCst),
        0,
        "first violation: {:?}",
        s.first_violation.lock().unwrap()
    );
    assert_eq!(s.holders.load(SeqCst), 0);
    assert!(granted > 0 && refused > 0, "the mix never granted or never refused");
    assert!(o.cancelled.load(SeqCst) > 0, "no acquire was ever cancelled");
    assert!(o.call_panics.load(SeqCst) > 0, "no call ever panicked");
    assert!(s.seen.listener_panics.load(SeqCst) > 0, "the listener never panicked");
    // Every refusal a caller saw was one event, and every permit a caller got finished once.
    assert_eq!(s.seen.rejected.load(SeqCst), refused, "CallRejected events vs refusals seen");
    assert_eq!(s.seen.finished.load(SeqCst), granted, "CallFinished events vs permits granted");
    assert_eq!(s.seen.permitted.load(SeqCst), granted, "CallPermitted events vs permits granted");
    // The bulkhead's counters (per-thread cells, summed) are exactly what callers saw too.
    let m = s.bulkhead.metrics();
    let as_seen = |n: usize| n as u64;
    assert_eq!(m.calls_permitted(), as_seen(granted), "permitted counter vs permits granted");
    assert_eq!(m.calls_finished(), as_seen(granted), "finished counter vs permits granted");
    assert_eq!(m.calls_rejected(RejectReason::Full), as_seen(o.full.load(SeqCst)), "Full");
    assert_eq!(
        m.calls_rejected(RejectReason::WaitTimedOut),
        as_seen(o.timed_out.load(SeqCst)),
        "WaitTimedOut"
    );
    assert_eq!(
        m.calls_rejected(RejectReason::TooManyWaiting),
        as_seen(o.too_many.load(SeqCst)),
        "TooManyWaiting"
    );

    // At rest, after the last change: work conserving (issue 29), every permit back.
    if let Err(violation) = s.bulkhead.check_work_conservation() {
        panic!("work conservation at rest: {violation}");
    }
    let last = s.bulkhead.config();
    let limit = last.max_concurrent_calls();
    let m = s.bulkhead.metrics();
    assert_eq!(m.max_allowed_concurrent_calls(), limit);
    assert_eq!(m.available_concurrent_calls(), limit, "available at rest ({m:?})");
    assert_eq!(m.in_flight_calls(), 0, "in flight at rest ({m:?})");
    assert_eq!(m.waiting_calls(), 0, "waiting at rest ({m:?})");
    assert_eq!(s.bulkhead.queue_slots_in_use(), 0, "a wait left its queue slot behind");
    s.bulkhead.change_config(config(INITIAL_LIMIT, Duration::ZERO, None));
    let m = s.bulkhead.metrics();
    assert_eq!(m.available_concurrent_calls(), INITIAL_LIMIT, "{m:?}");
    let permits: Vec<_> = (0..INITIAL_LIMIT)
        .map(|i| s.bulkhead.try_acquire().unwrap_or_else(|e| panic!("fresh acquire {i}: {e}")))
        .collect();
    assert!(s.bulkhead.try_acquire().is_err(), "one permit too many: a permit was duplicated");
    drop(permits);
    assert_eq!(s.bulkhead.metrics().available_concurrent_calls(), INITIAL_LIMIT);
}

fn soak_secs() -> u64 {
    std::env::var("SOAK_SECS").ok().and_then(|v| v.parse().ok()).unwrap_or(60)
}

#[test]
fn soak_short() {
    run_soak(Duration::from_secs(2), 3, 8);
}

#[test]
#[ignore = "long: run by ci/soak.sh in release (SOAK_SECS, default 60)"]
fn soak() {
    run_soak(Duration::from_secs(soak_secs()), 4, 32);
}
