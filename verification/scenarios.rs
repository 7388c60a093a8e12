//! Scenario bodies shared by the loom harness (`verification/loom.rs`) and the shuttle
//! harness (`verification/shuttle.rs`). Each public function is named for the property it
//! proves and takes its size as parameters: loom runs the small sizes exhaustively, shuttle
//! runs the same bodies small and large.
//!
//! The including harness provides a module `crate::rt` with the checker's `spawn`,
//! `spawn_async`, `block_on`, `yield_now`, atomics and `Mutex`, so one body serves both.
//!
//! Every scenario ends with [`assert_quiescent`]: all threads and tasks are joined (so no
//! waiter is stranded: a stranded one is a deadlock the checker reports), every permit is
//! back, nobody is in flight or queued, and exactly `limit` permits can really be taken.
//!
//! # Catching a missing happens-before
//!
//! The engine has no `UnsafeCell`, so loom can only see a weakened `Ordering` through data
//! the permit protects. [`Occupancy`] is that data for a one-permit bulkhead: every holder
//! reads and rewrites a counter with *Relaxed* accesses. The only thing ordering one
//! holder's write before the next holder's read is the bulkhead's hand-off; without it loom
//! lets the next holder read a stale value and the scenario fails. (Relaxed atomics give loom
//! the same stale-read freedom as a `loom::cell::UnsafeCell`, without `unsafe` in the
//! harness.)

use core::future::Future;
use core::pin::Pin;
use core::sync::atomic::Ordering::{Relaxed, SeqCst};
use core::task::{Context, Poll, Waker};
use core::time::Duration;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::Arc;

use bulkhead::keyed::KeyedBulkhead;
use bulkhead::{Bulkhead, BulkheadConfig, BulkheadFull, RejectReason};

use crate::rt::{self, AtomicBool, AtomicUsize, Mutex};

/// A wait long enough that the model clock never reaches it unless a scenario says so.
const LONG_WAIT: Duration = Duration::from_secs(3600);

pub fn bulkhead(name: &str, limit: usize, wait: Duration, cap: Option<usize>) -> Arc<Bulkhead> {
    let mut builder = BulkheadConfig::builder().max_concurrent_calls(limit).max_wait_duration(wait);
    if let Some(cap) = cap {
        builder = builder.max_waiting_calls(cap);
    }
    Arc::new(Bulkhead::new(name, builder.build().expect("valid config")))
}

pub fn config(limit: usize, wait: Duration) -> BulkheadConfig {
    BulkheadConfig::builder()
        .max_concurrent_calls(limit)
        .max_wait_duration(wait)
        .build()
        .expect("valid config")
}

/// The work done under a permit, instrumented to catch a broken limit or hand-off.
///
/// A violation is recorded, not raised on the spot: panicking while a permit is held would
/// unwind through the permit's release, which loom cannot model (see `loom.rs`). Every
/// scenario calls [`Occupancy::check`] once its threads are joined.
pub struct Occupancy {
    limit: usize,
    /// Holders inside right now.
    inside: AtomicUsize,
    /// Holders that entered so far.
    entries: AtomicUsize,
    /// With a limit of 1: the data the permit protects, read and written non-atomically
    /// (two Relaxed accesses) by every holder.
    data: AtomicUsize,
    /// The first violation seen. A std mutex on purpose: the checkers do not see it, so it
    /// adds no happens-before between holders.
    violation: std::sync::Mutex<Option<String>>,
}

impl Occupancy {
    pub fn new(limit: usize) -> Arc<Occupancy> {
        Arc::new(Occupancy {
            limit,
            inside: AtomicUsize::new(0),
            entries: AtomicUsize::new(0),
            data: AtomicUsize::new(0),
            violation: std::sync::Mutex::new(None),
        })
    }

    /// Called while holding a permit. Every access is Relaxed on purpose: the only
    /// happens-before between two holders must come from the bulkhead.
    pub fn work(&self) {
        // A read-modify-write always reads the latest value, whatever the orderings.
        let inside = self.inside.fetch_add(1, Relaxed);
        if inside >= self.limit {
            self.violated(format!("{} holders inside at once, limit {}", inside + 1, self.limit));
        }
        let prior = self.entries.fetch_add(1, Relaxed);
        if self.limit == 1 {
            let seen = self.data.load(Relaxed);
            if seen != prior {
                self.violated(format!(
                    "holder {} saw stale data ({seen}): the previous release does not \
                     happen-before this acquire",
                    prior + 1
                ));
            }
            self.data.store(seen + 1, Relaxed);
        }
        self.inside.fetch_sub(1, Relaxed);
    }

    fn violated(&self, message: String) {
        let mut violation = self.violation.lock().unwrap_or_else(|e| e.into_inner());
        violation.get_or_insert(message);
    }

    /// After every thread was joined: no violation, and `entries` holders went through.
    pub fn check(&self, entries: usize) {
        if let Some(message) = self.violation.lock().unwrap_or_else(|e| e.into_inner()).take() {
            panic!("{message}");
        }
        assert_eq!(self.entries.load(SeqCst), entries, "holders that went through");
    }
}

/// Asserts that the bulkhead is at rest: every permit back, nobody in flight or queued, and
/// exactly `limit` permits can be taken (none lost, none created).
pub fn assert_quiescent(bulkhead: &Bulkhead, limit: usize) {
    assert_work_conserving(bulkhead);
    let m = bulkhead.metrics();
    assert_eq!(m.max_allowed_concurrent_calls(), limit, "limit");
    assert_eq!(m.available_concurrent_calls(), limit, "permits not all back: {m:?}");
    assert_eq!(m.in_flight_calls(), 0, "calls still in flight: {m:?}");
    assert_eq!(m.waiting_calls(), 0, "waiters stranded: {m:?}");
    // Every wait that ended was collected: no slot left behind by a wait that left without
    // freeing it (cargo-mutants found one such leak only an end-state check missed).
    assert_eq!(bulkhead.queue_slots_in_use(), 0, "a wait left its queue slot behind");
    let held: Vec<_> = (0..limit)
        .map(|i| bulkhead.try_acquire().unwrap_or_else(|e| panic!("permit {i} lost: {e}")))
        .collect();
    assert!(bulkhead.try_acquire().is_err(), "a permit was created");
    // Marked ignored: an adaptive limit learns nothing from the check's own permits.
    held.into_iter().for_each(bulkhead::Permit::ignore);
    assert_eq!(bulkhead.metrics().available_concurrent_calls(), limit);
}

/// Work conservation (design invariant 7), checked wherever a scenario knows nothing is in
/// motion: no queued waiter could be granted from the permits free, no queued request can
/// never be granted, and `WAITERS` is set only while someone waits.
#[track_caller]
pub fn assert_work_conserving(bulkhead: &Bulkhead) {
    if let Err(violation) = bulkhead.check_work_conservation() {
        panic!("work conservation violated at quiescence: {violation}");
    }
}

/// Spins (yielding to the checker) until `cond` holds.
fn wait_until(mut cond: impl FnMut() -> bool) {
    while !cond() {
        rt::yield_now();
    }
}

fn join<T>(handle: rt::JoinHandle<T>) -> T {
    match handle.join() {
        Ok(value) => value,
        Err(panic) => resume_unwind(panic),
    }
}

/// A sleep future the scenario completes by hand: it stands for a deadline passing.
pub struct Trigger {
    fired: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

impl Trigger {
    pub fn new() -> Arc<Trigger> {
        Arc::new(Trigger { fired: AtomicBool::new(false), waker: Mutex::new(None) })
    }

    /// The deadline passes: completes the sleep and wakes its task.
    pub fn fire(&self) {
        self.fired.store(true, SeqCst);
        let waker = self.waker.lock().unwrap().take();
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    pub fn sleep(self: &Arc<Self>) -> TriggerSleep {
        TriggerSleep(Arc::clone(self))
    }
}

pub struct TriggerSleep(Arc<Trigger>);

impl Future for TriggerSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut waker = self.0.waker.lock().unwrap();
        if self.0.fired.load(SeqCst) {
            return Poll::Ready(());
        }
        *waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// How an acquirer takes its permit.
#[derive(Clone, Copy, Debug)]
enum Via {
    Sync,
    Async,
    Call,
}

impl Via {
    fn nth(i: usize) -> Via {
        [Via::Sync, Via::Async, Via::Call][i % 3]
    }
}

/// Takes a permit `via`, does the protected work, releases it.
fn acquire_work_release(bulkhead: &Bulkhead, via: Via, occupancy: &Occupancy) {
    match via {
        Via::Sync => {
            let permit = bulkhead.acquire().expect("an unbounded wait is granted");
            occupancy.work();
            drop(permit);
        }
        Via::Async => {
            let permit = rt::block_on(bulkhead.acquire_async()).expect("granted");
            occupancy.work();
            drop(permit);
        }
        Via::Call => bulkhead.call(|| occupancy.work()).expect("granted"),
    }
}

/// `acquirers` callers (sync, async and `call`, in turn), each taking a permit `rounds`
/// times from a bulkhead of `limit`: never more than `limit` inside at once, and with a
/// limit of 1 every release happens-before the next acquire.
pub fn never_exceeds_limit(acquirers: usize, limit: usize, rounds: usize) {
    let bulkhead = bulkhead("never_exceeds_limit", limit, Duration::MAX, None);
    let occupancy = Occupancy::new(limit);
    let handles: Vec<_> = (1..acquirers)
        .map(|i| {
            let (bulkhead, occupancy) = (Arc::clone(&bulkhead), Arc::clone(&occupancy));
            rt::spawn(move || {
                for _ in 0..rounds {
                    acquire_work_release(&bulkhead, Via::nth(i), &occupancy);
                }
            })
        })
        .collect();
    for _ in 0..rounds {
        acquire_work_release(&bulkhead, Via::nth(0), &occupancy);
    }
    handles.into_iter().for_each(join);
    occupancy.check(acquirers * rounds);
    assert_quiescent(&bulkhead, limit);
}

/// A permit held by the main thread is released (lock-free when it sees no waiter flag)
/// while `waiters` callers queue for it: none is left parked (a lost wake-up would be a
/// deadlock), and each sees the previous holder's writes.
pub fn release_racing_enqueue_wakes_waiter(waiters: usize, async_waiters: bool) {
    let bulkhead = bulkhead("release_racing_enqueue", 1, Duration::MAX, None);
    let occupancy = Occupancy::new(1);
    let held = bulkhead.try_acquire_owned().expect("free");
    occupancy.work();
    let handles: Vec<_> = (0..waiters)
        .map(|i| {
            let (bulkhead, occupancy) = (Arc::clone(&bulkhead), Arc::clone(&occupancy));
            let via = if async_waiters && i % 2 == 0 { Via::Async } else { Via::Sync };
            rt::spawn(move || acquire_work_release(&bulkhead, via, &occupancy))
        })
        .collect();
    drop(held);
    handles.into_iter().for_each(join);
    occupancy.check(1 + waiters);
    assert_quiescent(&bulkhead, 1);
}

/// A sync waiter's deadline passes (another thread advances the model clock) while a
/// release hands it the permit: it ends exactly one of granted (and then owns the permit)
/// or withdrawn (`WaitTimedOut`, and the permit stays free): no leak, no double grant.
pub fn deadline_racing_release_grants_or_withdraws_once(extra_waiters: usize) {
    const DEADLINE: u64 = 5;
    let bulkhead = bulkhead("deadline_racing_release", 1, LONG_WAIT, None);
    let occupancy = Occupancy::new(1);
    let granted = Arc::new(AtomicUsize::new(0));
    let held = bulkhead.try_acquire_owned().expect("free");
    occupancy.work();
    let timed = {
        let (bulkhead, occupancy, granted) =
            (Arc::clone(&bulkhead), Arc::clone(&occupancy), Arc::clone(&granted));
        rt::spawn(move || match bulkhead.acquire_timeout(Duration::from_nanos(DEADLINE)) {
            Ok(permit) => {
                occupancy.work();
                granted.fetch_add(1, SeqCst);
                drop(permit);
            }
            Err(err) => {
                assert_eq!(err.reason(), RejectReason::WaitTimedOut, "{err}");
                assert!(err.waited() >= Duration::from_nanos(DEADLINE), "{err:?}");
            }
        })
    };
    // Unbounded waiters behind it: whatever the timed waiter's fate, the permit reaches them.
    let others: Vec<_> = (0..extra_waiters)
        .map(|_| {
            let (bulkhead, occupancy, granted) =
                (Arc::clone(&bulkhead), Arc::clone(&occupancy), Arc::clone(&granted));
            rt::spawn(move || {
                let permit = bulkhead.acquire_timeout(Duration::MAX).expect("unbounded");
                occupancy.work();
                granted.fetch_add(1, SeqCst);
                drop(permit);
            })
        })
        .collect();
    let clock = rt::spawn(|| bulkhead::model::advance_to(Duration::from_nanos(DEADLINE)));
    drop(held);
    join(timed);
    others.into_iter().for_each(join);
    join(clock);
    let granted = granted.load(SeqCst);
    assert!(granted >= extra_waiters && granted <= extra_waiters + 1);
    occupancy.check(1 + granted);
    assert_quiescent(&bulkhead, 1);
}

/// An async waiter's deadline (a sleep future the scenario completes) fires while a release
/// hands it the permit: exactly one of granted / withdrawn, and the permit is never lost.
pub fn async_deadline_racing_release_grants_or_withdraws_once() {
    let bulkhead = bulkhead("async_deadline_racing_release", 1, LONG_WAIT, None);
    let occupancy = Occupancy::new(1);
    let trigger = Trigger::new();
    let held = bulkhead.try_acquire_owned().expect("free");
    occupancy.work();
    let waiter = {
        let (bulkhead, occupancy, trigger) =
            (Arc::clone(&bulkhead), Arc::clone(&occupancy), Arc::clone(&trigger));
        rt::spawn(move || {
            match rt::block_on(bulkhead.acquire_async_with_sleep(|_| trigger.sleep())) {
                Ok(permit) => {
                    occupancy.work();
                    drop(permit);
                    true
                }
                Err(err) => {
                    assert_eq!(err.reason(), RejectReason::WaitTimedOut, "{err}");
                    false
                }
            }
        })
    };
    let timer = {
        let trigger = Arc::clone(&trigger);
        rt::spawn(move || trigger.fire())
    };
    drop(held);
    let granted = join(waiter);
    join(timer);
    occupancy.check(1 + usize::from(granted));
    assert_quiescent(&bulkhead, 1);
}

/// An async acquire polled once (so it may be queued) and then dropped, while a release
/// may hand it the permit: the permit passes on to the next waiter, which must get it.
pub fn dropped_async_acquire_passes_permit_on(droppers: usize, next_waiters: usize) {
    let bulkhead = bulkhead("dropped_async_acquire", 1, Duration::MAX, None);
    let occupancy = Occupancy::new(1);
    let held = bulkhead.try_acquire_owned().expect("free");
    occupancy.work();
    let droppers: Vec<_> = (0..droppers)
        .map(|_| {
            let (bulkhead, occupancy) = (Arc::clone(&bulkhead), Arc::clone(&occupancy));
            rt::spawn(move || {
                let mut acquire = Box::pin(bulkhead.acquire_async());
                let waker = futures::task::noop_waker();
                match Pin::new(&mut acquire).poll(&mut Context::from_waker(&waker)) {
                    Poll::Ready(result) => {
                        let permit = result.expect("an unbounded wait is granted");
                        occupancy.work();
                        drop(permit);
                        1
                    }
                    // Queued: cancel it. A permit granted meanwhile must be passed on.
                    Poll::Pending => {
                        drop(acquire);
                        0
                    }
                }
            })
        })
        .collect();
    let releaser = rt::spawn(move || drop(held));
    let waiters: Vec<_> = (1..next_waiters)
        .map(|_| {
            let (bulkhead, occupancy) = (Arc::clone(&bulkhead), Arc::clone(&occupancy));
            rt::spawn_async(async move {
                let permit = bulkhead.acquire_async().await.expect("granted");
                occupancy.work();
                drop(permit);
            })
        })
        .collect();
    if next_waiters > 0 {
        let permit = rt::block_on(bulkhead.acquire_async()).expect("granted");
        occupancy.work();
        drop(permit);
    }
    let ready: usize = droppers.into_iter().map(join).sum();
    join(releaser);
    waiters.into_iter().for_each(|w| w.join());
    occupancy.check(1 + ready + next_waiters);
    assert_quiescent(&bulkhead, 1);
}

/// Sync and async waiters queued in a known order are served in that order, and a
/// `try_acquire` racing the hand-offs never overtakes them: it can only succeed once every
/// waiter is done.
pub fn mixed_waiters_keep_fifo_without_barging(waiters: usize, bargers: usize) {
    let bulkhead = bulkhead("mixed_waiters_fifo", 1, Duration::MAX, None);
    let log = Arc::new(Mutex::new(Vec::new()));
    let held = bulkhead.try_acquire_owned().expect("free");
    let mut handles = Vec::new();
    for i in 0..waiters {
        let (b, log) = (Arc::clone(&bulkhead), Arc::clone(&log));
        let record = move || log.lock().unwrap().push(i);
        handles.push(if i % 2 == 0 {
            rt::spawn(move || {
                let permit = b.acquire().expect("granted");
                record();
                drop(permit);
            })
        } else {
            rt::spawn(move || {
                let permit = rt::block_on(b.acquire_async()).expect("granted");
                record();
                drop(permit);
            })
        });
        // Queue them in a known order: wait until this one is queued.
        wait_until(|| bulkhead.metrics().waiting_calls() == i + 1);
    }
    const BARGER: usize = usize::MAX;
    let barger = |bulkhead: &Bulkhead, log: &Mutex<Vec<usize>>, attempts: usize| {
        for _ in 0..attempts {
            if let Ok(permit) = bulkhead.try_acquire() {
                log.lock().unwrap().push(BARGER);
                drop(permit);
            }
            rt::yield_now();
        }
    };
    // The main thread is the first barger; `bargers - 1` more race from their own threads.
    let extra: Vec<_> = (1..bargers)
        .map(|_| {
            let (bulkhead, log) = (Arc::clone(&bulkhead), Arc::clone(&log));
            rt::spawn(move || barger(&bulkhead, &log, waiters + 1))
        })
        .collect();
    drop(held);
    if bargers > 0 {
        barger(&bulkhead, &log, 1);
    }
    handles.into_iter().for_each(join);
    extra.into_iter().for_each(join);
    let log = log.lock().unwrap().clone();
    let served: Vec<usize> = log.iter().copied().take_while(|&i| i != BARGER).collect();
    assert_eq!(served, (0..waiters).collect::<Vec<_>>(), "FIFO broken or barged: {log:?}");
    assert!(log[waiters..].iter().all(|&i| i == BARGER), "{log:?}");
    assert_quiescent(&bulkhead, 1);
}

/// `change_config` grows and then shrinks the limit while calls are in flight and waiters
/// queue: growth serves the waiters, the shrink leaves a debt that releases pay, and at
/// the end no permit was created or lost.
pub fn change_config_grow_and_shrink_keeps_every_permit(
    start: usize,
    limits: &[usize],
    waiters: usize,
) {
    let bulkhead = bulkhead("change_config", start, Duration::MAX, None);
    let peak = limits.iter().copied().chain([start]).max().unwrap_or(start);
    let occupancy = Occupancy::new(peak);
    let held: Vec<_> = (0..start).map(|_| bulkhead.try_acquire_owned().expect("free")).collect();
    let handles: Vec<_> = (0..waiters)
        .map(|i| {
            let (bulkhead, occupancy) = (Arc::clone(&bulkhead), Arc::clone(&occupancy));
            rt::spawn(move || acquire_work_release(&bulkhead, Via::nth(i), &occupancy))
        })
        .collect();
    let changer = {
        let bulkhead = Arc::clone(&bulkhead);
        let limits = limits.to_vec();
        rt::spawn(move || {
            for &limit in &limits {
                bulkhead.change_config(config(limit, Duration::MAX));
                assert_eq!(bulkhead.metrics().max_allowed_concurrent_calls(), limit);
            }
        })
    };
    drop(held);
    handles.into_iter().for_each(join);
    join(changer);
    occupancy.check(waiters);
    let last = limits.last().copied().unwrap_or(start);
    assert_quiescent(&bulkhead, last);
}

/// `waiters` callers queue behind the only permit, which the main thread keeps; growing
/// the limit by `waiters` must serve every one of them at once, without any release (the
/// main thread joins them while still holding its permit: a growth that does not drain is
/// a deadlock).
pub fn grow_serves_queued_waiters(waiters: usize) {
    let bulkhead = bulkhead("grow_serves_waiters", 1, Duration::MAX, None);
    let occupancy = Occupancy::new(1 + waiters);
    let held = bulkhead.try_acquire_owned().expect("free");
    let handles: Vec<_> = (0..waiters)
        .map(|i| {
            let (b, occupancy) = (Arc::clone(&bulkhead), Arc::clone(&occupancy));
            let handle = rt::spawn(move || acquire_work_release(&b, Via::nth(i), &occupancy));
            wait_until(|| bulkhead.metrics().waiting_calls() == i + 1);
            handle
        })
        .collect();
    bulkhead.change_config(config(1 + waiters, Duration::MAX));
    handles.into_iter().for_each(join);
    drop(held);
    occupancy.check(waiters);
    assert_quiescent(&bulkhead, 1 + waiters);
}

/// With `max_waiting_calls = cap` and the only permit held, `contenders` callers race to
/// queue: exactly `cap` queue (and are served once the permit is released), the rest are
/// refused with `TooManyWaiting`, and the queue never holds more than `cap`.
pub fn waiter_cap_holds_under_races(cap: usize, contenders: usize) {
    assert!(contenders > cap);
    let bulkhead = bulkhead("waiter_cap", 1, Duration::MAX, Some(cap));
    let occupancy = Occupancy::new(1);
    let rejected = Arc::new(AtomicUsize::new(0));
    let held = bulkhead.try_acquire_owned().expect("free");
    let handles: Vec<_> = (0..contenders)
        .map(|i| {
            let (bulkhead, occupancy, rejected) =
                (Arc::clone(&bulkhead), Arc::clone(&occupancy), Arc::clone(&rejected));
            let outcome = move |result: Result<(), BulkheadFull>| match result {
                Ok(()) => true,
                Err(err) => {
                    assert_eq!(err.reason(), RejectReason::TooManyWaiting, "{err}");
                    assert_eq!(err.waited(), Duration::ZERO);
                    rejected.fetch_add(1, SeqCst);
                    false
                }
            };
            if i % 2 == 0 {
                rt::spawn(move || {
                    outcome(bulkhead.acquire().map(|permit| {
                        occupancy.work();
                        drop(permit);
                    }))
                })
            } else {
                rt::spawn(move || {
                    outcome(rt::block_on(bulkhead.acquire_async()).map(|permit| {
                        occupancy.work();
                        drop(permit);
                    }))
                })
            }
        })
        .collect();
    // Hold the permit until everyone who cannot queue has been refused.
    let mut over_cap = None;
    wait_until(|| {
        let waiting = bulkhead.metrics().waiting_calls();
        if waiting > cap {
            over_cap = Some(waiting);
            return true;
        }
        rejected.load(SeqCst) == contenders - cap
    });
    // Not while holding the permit: see `Occupancy`.
    drop(held);
    if let Some(waiting) = over_cap {
        panic!("{waiting} waiters queued, cap {cap}");
    }
    let served = handles.into_iter().map(join).filter(|&ok| ok).count();
    assert_eq!(served, cap);
    assert_eq!(rejected.load(SeqCst), contenders - cap);
    occupancy.check(cap);
    assert_quiescent(&bulkhead, 1);
}

/// `call`s whose closures panic race callers whose closures return, all fail-fast (max
/// wait zero): a panicking call releases its permit while unwinding, a racing call either
/// runs (before or after it) or is refused `Full`, never both inside, and nothing leaks.
///
/// Nobody queues here on purpose. Neither checker can run a lock taken while a thread
/// unwinds, which is what a release does when it finds a queued waiter: loom 0.7's `Mutex`
/// `unwrap`s a std mutex that the unwinding guard poisons, and shuttle 0.8's `MutexGuard`
/// skips its unlock while `std::thread::panicking()`, so the model deadlocks. The unwinding
/// hand-off to a queued waiter is checked by the reference model instead (its
/// `PanickingCall` operation queues acquires from inside the closure before panicking).
pub fn panicking_call_releases_permit(panickers: usize, callers: usize) {
    let bulkhead = bulkhead("panicking_call", 1, Duration::ZERO, None);
    let occupancy = Occupancy::new(1);
    let ran = Arc::new(AtomicUsize::new(0));
    let call = |bulkhead: &Bulkhead, occupancy: &Occupancy, ran: &AtomicUsize, panics: bool| {
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            bulkhead.call(|| {
                occupancy.work();
                ran.fetch_add(1, SeqCst);
                if panics {
                    // `resume_unwind` unwinds like a panic without running the panic hook,
                    // so the checkers' output stays readable.
                    resume_unwind(Box::new("the protected call failed"));
                }
            })
        }));
        match outcome {
            Ok(Ok(())) => assert!(!panics),
            Ok(Err(err)) => assert_eq!(err.reason(), RejectReason::Full, "{err}"),
            Err(_) => assert!(panics, "only the panicking closure unwinds"),
        }
    };
    let handles: Vec<_> = (0..panickers + callers.saturating_sub(1))
        .map(|i| {
            let (bulkhead, occupancy, ran) =
                (Arc::clone(&bulkhead), Arc::clone(&occupancy), Arc::clone(&ran));
            rt::spawn(move || call(&bulkhead, &occupancy, &ran, i < panickers))
        })
        .collect();
    if callers > 0 {
        call(&bulkhead, &occupancy, &ran, false);
    }
    handles.into_iter().for_each(join);
    occupancy.check(ran.load(SeqCst));
    assert_quiescent(&bulkhead, 1);
}

/// After `close` and the last release: closed, every permit back and none takeable, nobody
/// in flight or queued, and a drain wait is over at once.
pub fn assert_closed_and_drained(bulkhead: &Bulkhead, limit: usize) {
    assert_work_conserving(bulkhead);
    let m = bulkhead.metrics();
    assert!(m.is_closed(), "not closed: {m:?}");
    assert_eq!(m.available_concurrent_calls(), limit, "permits not all back: {m:?}");
    assert_eq!(m.in_flight_calls(), 0, "calls still in flight: {m:?}");
    assert_eq!(m.waiting_calls(), 0, "waiters stranded: {m:?}");
    let refused = bulkhead.try_acquire().map(drop).expect_err("a closed bulkhead admitted a call");
    assert_eq!(refused.reason(), RejectReason::Closed);
    assert!(bulkhead.wait_drained(Duration::ZERO), "closed with nothing in flight, not drained");
}

/// How a waiter in the close scenarios waits.
#[derive(Clone, Copy, Debug)]
pub enum Waits {
    /// `acquire()`, unbounded.
    Sync,
    /// `acquire_async()`, unbounded.
    Async,
    /// `acquire_timeout(5 ns)`: the model clock is advanced past it by another thread.
    SyncTimed,
    /// `acquire_async()` on a bulkhead whose max wait is 5 ns, clock advanced likewise.
    AsyncTimed,
    /// `acquire_async()` polled once, then dropped (cancelled) by its thread.
    Cancelled,
}

/// A one-permit bulkhead whose permit is held; a waiter queues (`waits`); then `close`, the
/// release of the held permit, and (for timed waits) the deadline all race. The waiter ends
/// exactly once: granted (it works and releases; only if the release beat the close),
/// refused `Closed`, or `WaitTimedOut`. Then the bulkhead is closed and drained, with every
/// permit back: close never loses nor creates a permit, and never strands a waiter.
pub fn close_racing_waiter_release_and_deadline(waits: Waits) {
    const DEADLINE: u64 = 5;
    let timed = matches!(waits, Waits::SyncTimed | Waits::AsyncTimed);
    let wait = if matches!(waits, Waits::AsyncTimed) {
        Duration::from_nanos(DEADLINE)
    } else {
        Duration::MAX
    };
    let bulkhead = bulkhead("close_racing", 1, wait, None);
    let occupancy = Occupancy::new(1);
    let held = bulkhead.try_acquire_owned().expect("free");
    occupancy.work();
    let entries = Arc::new(AtomicUsize::new(1));
    let waiter = {
        let (bulkhead, occupancy, entries) =
            (Arc::clone(&bulkhead), Arc::clone(&occupancy), Arc::clone(&entries));
        rt::spawn(move || {
            let outcome = match waits {
                Waits::Sync => bulkhead.acquire().map(drop_after_work(&occupancy, &entries)),
                Waits::SyncTimed => bulkhead
                    .acquire_timeout(Duration::from_nanos(DEADLINE))
                    .map(drop_after_work(&occupancy, &entries)),
                Waits::Async | Waits::AsyncTimed => rt::block_on(bulkhead.acquire_async())
                    .map(drop_after_work(&occupancy, &entries)),
                Waits::Cancelled => {
                    let waker = futures::task::noop_waker();
                    let mut acquire = Box::pin(bulkhead.acquire_async());
                    match acquire.as_mut().poll(&mut Context::from_waker(&waker)) {
                        Poll::Ready(result) => result.map(drop_after_work(&occupancy, &entries)),
                        // Dropped while queued, or holding a grant it never saw: either way
                        // nothing may be lost.
                        Poll::Pending => Ok(()),
                    }
                }
            };
            if let Err(err) = outcome {
                let expected = if timed {
                    matches!(err.reason(), RejectReason::Closed | RejectReason::WaitTimedOut)
                } else {
                    err.reason() == RejectReason::Closed
                };
                assert!(expected, "unexpected refusal: {err}");
            }
        })
    };
    let closer = {
        let bulkhead = Arc::clone(&bulkhead);
        rt::spawn(move || {
            bulkhead.close();
        })
    };
    let clock =
        timed.then(|| rt::spawn(|| bulkhead::model::advance_to(Duration::from_nanos(DEADLINE))));
    drop(held);
    join(waiter);
    join(closer);
    if let Some(clock) = clock {
        join(clock);
    }
    occupancy.check(entries.load(SeqCst));
    assert_closed_and_drained(&bulkhead, 1);
}

/// The protected work, then the permit's release.
fn drop_after_work<'a, P>(
    occupancy: &'a Occupancy,
    entries: &'a AtomicUsize,
) -> impl FnOnce(P) + 'a {
    move |permit| {
        occupancy.work();
        entries.fetch_add(1, SeqCst);
        drop(permit);
    }
}

/// A thread waits for the drain (unbounded) while `close` and the last release race: the
/// release that leaves nothing in flight must complete the drain wait, whichever comes first
/// (a lost wake-up is a deadlock the checker reports). With `async_drain` the wait is the
/// `drained()` future.
pub fn drain_wait_racing_close_and_last_release(async_drain: bool) {
    let bulkhead = bulkhead("drain_racing", 2, Duration::MAX, None);
    let a = bulkhead.try_acquire_owned().expect("free");
    let b = bulkhead.try_acquire_owned().expect("free");
    let drainer = {
        let bulkhead = Arc::clone(&bulkhead);
        rt::spawn(move || {
            if async_drain {
                rt::block_on(bulkhead.drained());
            } else {
                assert!(bulkhead.wait_drained(Duration::MAX));
            }
        })
    };
    let releaser = rt::spawn(move || drop(b));
    bulkhead.close();
    drop(a);
    join(releaser);
    join(drainer);
    assert_closed_and_drained(&bulkhead, 2);
}

/// A queued future is re-polled with a *different* waker (as `block_on` does after a first
/// poll by hand) while another thread's release grants it the permit. Register-then-check
/// must hold: either the re-poll sees the grant, or the grant wakes the new waker. A grant
/// that woke only the stale waker leaves `block_on` parked forever: a deadlock.
pub fn repoll_with_new_waker_racing_grant_is_woken() {
    let bulkhead = bulkhead("repoll_new_waker", 1, Duration::MAX, None);
    let occupancy = Occupancy::new(1);
    let held = bulkhead.try_acquire_owned().expect("free");
    occupancy.work();
    let stale = futures::task::noop_waker();
    let mut acquire = Box::pin(bulkhead.acquire_async());
    assert!(acquire.as_mut().poll(&mut Context::from_waker(&stale)).is_pending(), "queued");
    let releaser = rt::spawn(move || drop(held));
    let permit = rt::block_on(acquire).expect("granted");
    occupancy.work();
    drop(permit);
    join(releaser);
    occupancy.check(2);
}

/// `threads` callers (one of them the main thread) each make `rounds` fail-fast calls on a
/// one-permit bulkhead that counts calls, while the main thread also reads the counts:
/// each read is never below an earlier one, and once everyone is joined the counts are
/// exactly what the callers saw (no increment lost by the per-thread cells, none counted
/// twice).
pub fn counters_sum_exact_after_concurrent_calls(threads: usize, rounds: usize) {
    let bulkhead = bulkhead("counters_exact", 1, Duration::ZERO, None);
    bulkhead.enable_counters();
    let permitted = Arc::new(AtomicUsize::new(0));
    let rejected = Arc::new(AtomicUsize::new(0));
    let calls = move |bulkhead: &Bulkhead, permitted: &AtomicUsize, rejected: &AtomicUsize| {
        for _ in 0..rounds {
            match bulkhead.try_acquire() {
                Ok(permit) => {
                    drop(permit);
                    permitted.fetch_add(1, SeqCst);
                }
                Err(err) => {
                    assert_eq!(err.reason(), RejectReason::Full, "{err}");
                    rejected.fetch_add(1, SeqCst);
                }
            }
        }
    };
    let handles: Vec<_> = (1..threads)
        .map(|_| {
            let (bulkhead, permitted, rejected) =
                (Arc::clone(&bulkhead), Arc::clone(&permitted), Arc::clone(&rejected));
            rt::spawn(move || calls(&bulkhead, &permitted, &rejected))
        })
        .collect();
    let before = bulkhead.metrics();
    calls(&bulkhead, &permitted, &rejected);
    let during = bulkhead.metrics();
    assert!(during.calls_permitted() >= before.calls_permitted(), "{before:?} then {during:?}");
    assert!(during.calls_finished() >= before.calls_finished(), "{before:?} then {during:?}");
    handles.into_iter().for_each(join);
    let m = bulkhead.metrics();
    assert_eq!(m.calls_permitted(), permitted.load(SeqCst) as u64, "permitted: {m:?}");
    assert_eq!(m.calls_finished(), permitted.load(SeqCst) as u64, "finished: {m:?}");
    assert_eq!(m.calls_rejected(RejectReason::Full), rejected.load(SeqCst) as u64, "{m:?}");
    assert_eq!(m.calls_rejected_total(), rejected.load(SeqCst) as u64, "{m:?}");
    assert_quiescent(&bulkhead, 1);
}

/// Two listeners; `emitters` threads make `rounds` calls while one thread removes the first
/// listener. Every event reaches the kept listener; the removed one hears at most the events
/// emitted before its removal, and nothing of the calls made after `remove` returned (here:
/// one more call once everyone joined).
pub fn listener_removed_while_calls_emit_hears_nothing_after(emitters: usize, rounds: usize) {
    let bulkhead = bulkhead("listener_removal", 1, Duration::ZERO, None);
    let (removed, kept) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let handle = {
        let removed = Arc::clone(&removed);
        bulkhead.on_event(move |_| {
            removed.fetch_add(1, SeqCst);
        })
    };
    {
        let kept = Arc::clone(&kept);
        bulkhead.on_event(move |_| {
            kept.fetch_add(1, SeqCst);
        });
    }
    let emitting: Vec<_> = (0..emitters)
        .map(|_| {
            let bulkhead = Arc::clone(&bulkhead);
            rt::spawn(move || {
                (0..rounds)
                    .map(|_| match bulkhead.try_acquire() {
                        Ok(permit) => {
                            drop(permit);
                            2
                        }
                        Err(_) => 1,
                    })
                    .sum::<usize>()
            })
        })
        .collect();
    let remover = rt::spawn(move || assert!(handle.remove(), "registered until removed"));
    join(remover);
    let before = removed.load(SeqCst);
    let all: usize = emitting.into_iter().map(join).sum();
    assert_eq!(kept.load(SeqCst), all, "the kept listener hears every event");
    assert!(removed.load(SeqCst) <= all);
    // Calls still in flight when `remove` returned may have been heard; none made after.
    let heard_after_join = removed.load(SeqCst);
    assert!(heard_after_join >= before);
    drop(bulkhead.try_acquire().expect("the permit is back"));
    assert_eq!(removed.load(SeqCst), heard_after_join, "a call after the removal was heard");
    assert_eq!(kept.load(SeqCst), all + 2);
    assert_quiescent(&bulkhead, 1);
}

/// `registrars` threads each register a listener (and enable the counters) while
/// `emitters` threads make `rounds` calls. A call that starts after an emitter saw a
/// registrar's "done" flag (raised once `on_event` and `enable_counters` returned) must
/// reach that listener and the counters: every listener hears at least those calls'
/// events, never more than all events, and no registration is lost.
///
/// With `counting_first` the counters are enabled before anyone starts, so the calls count
/// inline (the counters alone observe: `Bulkhead::fast`, issue 21) until a listener joins:
/// the switch back to the full path must lose no later event and no count.
pub fn listener_registered_while_calls_emit_hears_later_calls(
    registrars: usize,
    emitters: usize,
    rounds: usize,
    counting_first: bool,
) {
    let bulkhead = bulkhead("listener_registration", 1, Duration::ZERO, None);
    if counting_first {
        bulkhead.enable_counters();
    }
    let heard: Vec<Arc<AtomicUsize>> =
        (0..registrars).map(|_| Arc::new(AtomicUsize::new(0))).collect();
    let done: Vec<Arc<AtomicBool>> =
        (0..registrars).map(|_| Arc::new(AtomicBool::new(false))).collect();
    let registering: Vec<_> = (0..registrars)
        .map(|i| {
            let (bulkhead, heard, done) =
                (Arc::clone(&bulkhead), Arc::clone(&heard[i]), Arc::clone(&done[i]));
            rt::spawn(move || {
                bulkhead.on_event(move |_| {
                    heard.fetch_add(1, SeqCst);
                });
                if !counting_first {
                    bulkhead.enable_counters();
                }
                done.store(true, SeqCst);
            })
        })
        .collect();
    // Per emitter: events of calls made after each registrar was done, and all events.
    let emitting: Vec<_> = (0..emitters)
        .map(|_| {
            let (bulkhead, done) = (Arc::clone(&bulkhead), done.clone());
            rt::spawn(move || {
                let mut after = vec![0usize; done.len()];
                let mut all = 0;
                let mut counted_after = 0u64;
                for _ in 0..rounds {
                    let seen: Vec<bool> = done.iter().map(|flag| flag.load(SeqCst)).collect();
                    let events = match bulkhead.try_acquire() {
                        Ok(permit) => {
                            drop(permit);
                            2
                        }
                        Err(_) => 1,
                    };
                    all += events;
                    for (after, seen) in after.iter_mut().zip(&seen) {
                        if *seen {
                            *after += events;
                        }
                    }
                    if seen.iter().any(|&s| s) {
                        counted_after += 1;
                    }
                }
                (after, all, counted_after)
            })
        })
        .collect();
    registering.into_iter().for_each(join);
    let mut after = vec![0usize; registrars];
    let mut all = 0;
    let mut counted_after = 0;
    for handle in emitting {
        let (a, total, counted) = join(handle);
        after.iter_mut().zip(&a).for_each(|(sum, n)| *sum += n);
        all += total;
        counted_after += counted;
    }
    for (i, heard) in heard.iter().enumerate() {
        let heard = heard.load(SeqCst);
        assert!(heard >= after[i], "listener {i} heard {heard} events, {} came after it", after[i]);
        assert!(heard <= all, "listener {i} heard {heard} events of {all}");
    }
    // Calls after the first registrar was done are counted (permitted or rejected: one each).
    let m = bulkhead.metrics();
    let counted = m.calls_permitted() + m.calls_rejected_total();
    assert!(counted >= counted_after, "counted {counted} calls, {counted_after} came after");
    // Every listener is still registered: one more call reaches each.
    let before: Vec<usize> = heard.iter().map(|h| h.load(SeqCst)).collect();
    drop(bulkhead.try_acquire().expect("nobody holds the permit"));
    for (i, heard) in heard.iter().enumerate() {
        assert_eq!(heard.load(SeqCst), before[i] + 2, "listener {i} lost");
    }
    assert_quiescent(&bulkhead, 1);
}

/// `close` races a newcomer while the only permit stays held until the newcomer is done:
/// the newcomer must be refused `Closed`, whether it saw the close on its fast path or only
/// under the queue lock, or was queued before the close and woken by it. A newcomer queued
/// after the close would never be woken: a deadlock the checker reports.
pub fn close_racing_newcomer_refuses_it(async_waiter: bool) {
    let bulkhead = bulkhead("close_racing_newcomer", 1, Duration::MAX, None);
    let held = bulkhead.try_acquire_owned().expect("free");
    let newcomer = {
        let bulkhead = Arc::clone(&bulkhead);
        rt::spawn(move || {
            let result = if async_waiter {
                rt::block_on(bulkhead.acquire_async()).map(drop)
            } else {
                bulkhead.acquire().map(drop)
            };
            let err = result.expect_err("the only permit is held until this caller is done");
            assert_eq!(err.reason(), RejectReason::Closed, "{err}");
        })
    };
    bulkhead.close();
    join(newcomer);
    drop(held);
    assert_closed_and_drained(&bulkhead, 1);
}

/// Adaptive bulkhead (issue 12): `threads` callers each make `calls` calls that fail and
/// succeed alternately, under an algorithm that moves the limit by one per sample (-1 on
/// a failure, +1 on a success). Limit changes must reach the engine in the order the
/// controller produced them: at quiescence the engine's limit is the controller's, every
/// permit is back, and no caller was ever admitted above the cap.
pub fn adaptive_limit_changes_reach_engine_in_order(threads: usize, calls: usize) {
    use bulkhead::adaptive::{AdaptiveLimit, LimitAlgorithm, Limits, Outcome, Sample};

    struct Step;
    impl LimitAlgorithm for Step {
        fn update(&mut self, sample: &Sample, limits: Limits) -> usize {
            match sample.outcome {
                Outcome::Failure => limits.current - 1,
                Outcome::Success => limits.current + 1,
                _ => limits.current,
            }
        }
    }

    let cap = 3;
    let adaptive = Arc::new(Bulkhead::new("adaptive_in_order", config(cap, Duration::ZERO)));
    adaptive.set_adaptive_limit(AdaptiveLimit::new(Step).initial_limit(2)).expect("valid bounds");
    let occupancy = Occupancy::new(cap);
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (adaptive, occupancy) = (Arc::clone(&adaptive), Arc::clone(&occupancy));
            rt::spawn(move || {
                for i in 0..calls {
                    if let Ok(permit) = adaptive.try_acquire() {
                        occupancy.work();
                        if (t + i) % 2 == 0 {
                            permit.fail();
                        } else {
                            permit.succeed();
                        }
                    }
                }
            })
        })
        .collect();
    handles.into_iter().for_each(join);
    occupancy.check(occupancy.entries.load(SeqCst));
    let controller = adaptive.adaptive_limit().expect("attached").limit();
    let engine = adaptive.metrics().max_allowed_concurrent_calls();
    assert_eq!(engine, controller, "the engine's limit is not the controller's last");
    assert_quiescent(&adaptive, controller);
}

// ---------------------------------------------------------------------------------------
// Keyed bulkheads (issue 13): two levels, and eviction.
// ---------------------------------------------------------------------------------------

/// The keyed scenarios' hasher: deterministic (std's `RandomState` would draw new keys in
/// every execution, and a checker must replay an execution exactly) and transparent: key `k`
/// hashes to `k << 40 | k`, so with the scenarios' 2 shards (bits 40.. of the hash pick
/// the shard) even keys share shard 0 and odd keys shard 1.
#[derive(Clone, Copy, Default)]
pub struct KeyHasher(u64);

impl core::hash::Hasher for KeyHasher {
    fn write(&mut self, _bytes: &[u8]) {
        unreachable!("the scenarios' keys are usize")
    }

    fn write_usize(&mut self, k: usize) {
        self.0 = (k as u64) << 40 | k as u64;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A keyed bulkhead of the scenarios: 2 shards, [`KeyHasher`].
pub type Keyed = KeyedBulkhead<usize, core::hash::BuildHasherDefault<KeyHasher>>;

/// A caller of `keyed.try_acquire(key)`: an admitted call works under `occupancy` and
/// counts in `admitted`; a refusal that `expected` accepts counts in `refused`; any other
/// refusal fails the scenario.
pub fn keyed_caller(
    keyed: &Arc<Keyed>,
    occupancy: &Arc<Occupancy>,
    admitted: &Arc<AtomicUsize>,
    refused: &Arc<AtomicUsize>,
    expected: fn(&BulkheadFull) -> bool,
) -> impl Fn(usize) + Clone + Send + Sync + 'static {
    let (keyed, occupancy, admitted, refused) =
        (Arc::clone(keyed), Arc::clone(occupancy), Arc::clone(admitted), Arc::clone(refused));
    move |key: usize| match keyed.try_acquire(&key) {
        Ok(permit) => {
            occupancy.work();
            drop(permit);
            admitted.fetch_add(1, SeqCst);
        }
        Err(refusal) if expected(&refusal) => {
            refused.fetch_add(1, SeqCst);
        }
        Err(other) => panic!("key {key} refused by {other}"),
    }
}

fn keyed(key_limit: usize, total: Option<usize>, wait: Duration, max_keys: usize) -> Arc<Keyed> {
    let mut builder = KeyedBulkhead::builder("keyed")
        .default_config(config(key_limit, wait))
        .max_keys(max_keys)
        .shards(2)
        .hasher(core::hash::BuildHasherDefault::<KeyHasher>::default());
    if let Some(total) = total {
        builder = builder.total(config(total, wait));
    }
    Arc::new(builder.build().expect("valid keyed config"))
}

/// Every live key of `keys` and the total (if any) at rest, with their limits.
fn assert_keyed_quiescent(keyed: &Keyed, keys: &[usize], key_limit: usize) {
    for key in keys {
        if let Some(bulkhead) = keyed.key_bulkhead(key) {
            assert_quiescent(&bulkhead, key_limit);
        }
    }
    if let Some(total) = keyed.total() {
        let limit = total.config().max_concurrent_calls();
        assert_quiescent(total, limit);
    }
}

/// `callers` threads, each on its own key (limit 1 each), through a shared total of
/// `total`, with `try_acquire`: the total is never exceeded, a caller the total refused
/// holds no slot of its key at that point (it is the key's only user, so its key shows
/// nothing in flight), and every slot of both levels is back at the end.
pub fn keyed_refusal_holds_no_slot(callers: usize, total: usize) {
    let keyed = keyed(1, Some(total), Duration::ZERO, callers);
    let occupancy = Occupancy::new(total);
    let admitted = Arc::new(AtomicUsize::new(0));
    let leaked = Arc::new(AtomicUsize::new(0));
    let caller = {
        let (keyed, occupancy, admitted, leaked) = (
            Arc::clone(&keyed),
            Arc::clone(&occupancy),
            Arc::clone(&admitted),
            Arc::clone(&leaked),
        );
        move |key: usize| match keyed.try_acquire(&key) {
            Ok(permit) => {
                occupancy.work();
                drop(permit);
                admitted.fetch_add(1, SeqCst);
            }
            // The total is named like the keyed bulkhead.
            Err(full) if full.bulkhead_name() == "keyed" => {
                let in_flight = keyed.key_metrics(&key).map_or(0, |m| m.in_flight_calls());
                // Recorded, not asserted here: a leaked slot is a permit a panic would not
                // unwind through, but keep the harness's rule of one check after the join.
                leaked.fetch_add(in_flight, SeqCst);
            }
            Err(other) => panic!("key {key} refused by {other}"),
        }
    };
    let handles: Vec<_> = (1..callers)
        .map(|key| {
            let caller = caller.clone();
            rt::spawn(move || caller(key))
        })
        .collect();
    caller(0);
    handles.into_iter().for_each(join);
    assert_eq!(leaked.load(SeqCst), 0, "a key slot was held after the total refused");
    occupancy.check(admitted.load(SeqCst));
    let keys: Vec<usize> = (0..callers).collect();
    assert_keyed_quiescent(&keyed, &keys, 1);
}

/// Two callers on key 0 (one sync, one async) and, with `third`, a sync caller on key 1;
/// key limit 1, total 1, unbounded waits: everyone gets through (a caller waits for the total
/// only once its key admitted it, so no two callers wait for each other: a deadlock is
/// reported by the checker), the total admits one at a time with a happens-before between
/// holders, and every slot is back.
pub fn keyed_waits_never_deadlock(third: bool) {
    let keyed = keyed(1, Some(1), Duration::MAX, 4);
    let occupancy = Occupancy::new(1);
    let sync_caller = {
        let (keyed, occupancy) = (Arc::clone(&keyed), Arc::clone(&occupancy));
        move |key: usize| {
            let permit = keyed.acquire(&key).expect("an unbounded wait is granted");
            occupancy.work();
            drop(permit);
        }
    };
    let async_caller = {
        let (keyed, occupancy) = (Arc::clone(&keyed), Arc::clone(&occupancy));
        rt::spawn(move || {
            let permit = rt::block_on(keyed.acquire_async(&0)).expect("granted");
            occupancy.work();
            drop(permit);
        })
    };
    let other = third.then(|| {
        let sync_caller = sync_caller.clone();
        rt::spawn(move || sync_caller(1))
    });
    sync_caller(0);
    join(async_caller);
    other.into_iter().for_each(join);
    occupancy.check(if third { 3 } else { 2 });
    assert_keyed_quiescent(&keyed, &[0, 1], 1);
}

/// Eviction racing acquires of the same key: two callers take key 7 (limit 1, unbounded
/// wait) while a third thread evicts idle keys (`evict_idle`, or a new key arriving at a
/// full map when `by_new_key`). A key is evicted only when nobody holds its bulkhead, so the
/// two callers always share one bulkhead: never two inside at once, and every slot is back.
/// A new key may find the map busy (`TooManyKeys`), and so may a caller of key 7 after the
/// new key took the only place: both are fine; nothing else is.
pub fn keyed_eviction_racing_acquire_keeps_key_limit(by_new_key: bool) {
    let keyed = keyed(1, None, Duration::MAX, 1);
    let occupancy = Occupancy::new(1);
    let admitted = Arc::new(AtomicUsize::new(0));
    let caller = {
        let (keyed, occupancy, admitted) =
            (Arc::clone(&keyed), Arc::clone(&occupancy), Arc::clone(&admitted));
        move || match keyed.acquire(&7) {
            Ok(permit) => {
                occupancy.work();
                drop(permit);
                admitted.fetch_add(1, SeqCst);
            }
            Err(full) if full.reason() == RejectReason::TooManyKeys => {}
            Err(other) => panic!("key 7 refused by {other}"),
        }
    };
    let first = {
        let caller = caller.clone();
        rt::spawn(caller)
    };
    let evictor = {
        let keyed = Arc::clone(&keyed);
        rt::spawn(move || {
            if by_new_key {
                match keyed.try_acquire(&8) {
                    Ok(permit) => drop(permit),
                    Err(full) if full.reason() == RejectReason::TooManyKeys => {}
                    Err(other) => panic!("key 8 refused by {other}"),
                }
            } else {
                keyed.evict_idle();
            }
        })
    };
    caller();
    join(first);
    join(evictor);
    occupancy.check(admitted.load(SeqCst));
    assert!(keyed.live_keys() <= 1, "{} keys live, max 1", keyed.live_keys());
    assert_keyed_quiescent(&keyed, &[7, 8], 1);
}

/// Two new keys racing for the last place, in different shards: `max_keys` 1, keys 0 and 1
/// (shards 0 and 1, so no lock orders them), limit 1 each, a total of 2, `try_acquire`.
/// The bound is global: never two keys live, so never two callers inside at once (each
/// holds its own key's slot; `Occupancy` of 1 sees both). The one that loses the race is
/// refused with `TooManyKeys` unless the winner's key was already idle and evicted; every
/// call ends admitted or refused, one at least is admitted, the count of live keys equals
/// the entries in the shards, and every slot of both levels is back.
pub fn keyed_new_keys_racing_in_two_shards_keep_max_keys() {
    let keyed = keyed(1, Some(2), Duration::ZERO, 1);
    let occupancy = Occupancy::new(1);
    let admitted = Arc::new(AtomicUsize::new(0));
    let refused = Arc::new(AtomicUsize::new(0));
    let caller = keyed_caller(&keyed, &occupancy, &admitted, &refused, |refusal| {
        refusal.reason() == RejectReason::TooManyKeys
    });
    let other = {
        let caller = caller.clone();
        rt::spawn(move || caller(1))
    };
    caller(0);
    join(other);
    let admitted = admitted.load(SeqCst);
    assert_eq!(admitted + refused.load(SeqCst), 2, "a call neither admitted nor refused");
    assert!(admitted >= 1, "both new keys refused: one place was free");
    occupancy.check(admitted);
    let live = keyed.live_keys();
    assert!(live <= 1, "{live} keys live, max 1");
    let entries = keyed.metrics(usize::MAX);
    assert_eq!(entries.keys.len() + entries.other_keys, live, "the count drifted from the map");
    assert_keyed_quiescent(&keyed, &[0, 1], 1);
}
