//! Bad input everywhere: limits above the engine's maximum, absurd and overflowing waits,
//! zero capacity with waiters, `change_config` from any value to any value while calls are
//! in flight, `for_pool(usize::MAX)`. Each gives a clear error or its documented behaviour,
//! never a panic and never an arithmetic overflow (overflow checks are on in the test
//! profile; also run `RUSTFLAGS="-C overflow-checks=on" cargo test --release --test
//! bad_input`), and at the end no permit is lost or duplicated.

use std::future::Future;
use std::pin::Pin;
use std::sync::mpsc;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::thread;
use std::time::Duration;

use bulkhead::{Bulkhead, BulkheadConfig, RejectReason};
use futures::task::noop_waker_ref;
use proptest::prelude::*;

const MAX: usize = BulkheadConfig::MAX_CONCURRENT_CALLS;
/// Hang guard: how long a test waits for something that should take milliseconds.
const HANG_GUARD: Duration = Duration::from_secs(60);

fn config(limit: usize, wait: Duration) -> BulkheadConfig {
    BulkheadConfig::builder().max_concurrent_calls(limit).max_wait_duration(wait).build().unwrap()
}

/// Runs `f` on its own thread and fails (instead of hanging) if it does not finish.
fn with_hang_guard<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let handle = thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(HANG_GUARD) {
        Ok(value) => {
            handle.join().unwrap();
            value
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            // `f` panicked: surface its panic.
            handle.join().unwrap();
            unreachable!("{what}: the thread ended without a result and without panicking")
        }
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("hang guard: {what}"),
    }
}

/// Every permit is back and exactly `limit` can be taken (for small limits): none lost,
/// none duplicated.
fn assert_all_back(bulkhead: &Bulkhead) {
    let limit = bulkhead.config().max_concurrent_calls();
    let m = bulkhead.metrics();
    assert_eq!(m.max_allowed_concurrent_calls(), limit, "{m:?}");
    assert_eq!(m.available_concurrent_calls(), limit, "{m:?}");
    assert_eq!(m.in_flight_calls(), 0, "{m:?}");
    assert_eq!(m.waiting_calls(), 0, "{m:?}");
    if limit <= 64 {
        let held: Vec<_> = (0..limit)
            .map(|i| bulkhead.try_acquire().unwrap_or_else(|e| panic!("permit {i}: {e}")))
            .collect();
        assert!(bulkhead.try_acquire().is_err(), "a permit beyond the limit: duplicated");
        drop(held);
    } else {
        assert!(bulkhead.try_acquire().is_ok());
    }
}

// ------------------------------------------------------------------ limits

#[test]
fn limit_above_engine_maximum_is_refused_naming_key_and_value() {
    for n in
        [MAX + 1, MAX + 2, 1 << 30, 1 << 31, u32::MAX as usize, 1 << 40, usize::MAX - 1, usize::MAX]
    {
        let err = BulkheadConfig::builder().max_concurrent_calls(n).build().unwrap_err();
        assert_eq!(err.key(), "max_concurrent_calls");
        assert_eq!(err.value(), n.to_string());
        let text = err.to_string();
        assert!(text.contains("max_concurrent_calls"), "{text}");
        assert!(text.contains(&n.to_string()), "{text}");
        assert!(text.contains(&MAX.to_string()), "names the maximum: {text}");
    }
    // The maximum itself is fine, and a bulkhead of that size works.
    let bulkhead = Bulkhead::new("bad-input-max", config(MAX, Duration::ZERO));
    assert_eq!(bulkhead.metrics().available_concurrent_calls(), MAX);
    let permits: Vec<_> = (0..1000).map(|_| bulkhead.try_acquire().unwrap()).collect();
    assert_eq!(bulkhead.metrics().in_flight_calls(), 1000);
    drop(permits);
    assert_all_back(&bulkhead);
}

#[test]
fn for_pool_of_any_size_is_clamped_and_never_overflows() {
    for (pool, want) in [
        (0, 0),
        (1, 1),
        (2, 1),
        (5, 4),
        (20, 16),
        (MAX, MAX / 5 * 4 + MAX % 5 * 4 / 5),
        (usize::MAX / 4, MAX),
        (usize::MAX - 1, MAX),
        (usize::MAX, MAX),
    ] {
        let config = BulkheadConfig::for_pool(pool);
        assert_eq!(config.max_concurrent_calls(), want, "for_pool({pool})");
        assert_eq!(config.max_wait_duration(), Duration::from_millis(100));
    }
    let bulkhead = Bulkhead::new("bad-input-pool", BulkheadConfig::for_pool(usize::MAX));
    assert_eq!(bulkhead.metrics().max_allowed_concurrent_calls(), MAX);
    assert_all_back(&bulkhead);
}

#[test]
fn waiter_cap_of_usize_max_behaves_as_no_cap() {
    let config = BulkheadConfig::builder()
        .max_concurrent_calls(1)
        .max_wait_duration(Duration::from_secs(3600))
        .max_waiting_calls(usize::MAX)
        .build()
        .unwrap();
    assert_eq!(config.max_waiting_calls(), Some(usize::MAX));
    let bulkhead = Bulkhead::new("bad-input-cap", config);
    let held = bulkhead.try_acquire().unwrap();
    let mut cx = Context::from_waker(noop_waker_ref());
    let mut queued: Vec<_> = (0..100).map(|_| Box::pin(bulkhead.acquire_async())).collect();
    for f in &mut queued {
        assert!(Pin::new(f).poll(&mut cx).is_pending(), "queued, not refused");
    }
    assert_eq!(bulkhead.metrics().waiting_calls(), 100);
    drop(queued);
    drop(held);
    assert_all_back(&bulkhead);
}

// ------------------------------------------------------------------ absurd waits

/// Holds the only permit for a moment on another thread, then frees it.
fn free_later(bulkhead: &Arc<Bulkhead>) -> thread::JoinHandle<()> {
    let permit = bulkhead.try_acquire_owned().expect("the permit is free");
    thread::spawn(move || {
        thread::sleep(Duration::from_millis(30));
        drop(permit);
    })
}

/// Waits that do not fit the clock: `Duration::MAX`, `u64::MAX` seconds, 2^62 seconds
/// (fits a `Duration`, overflows `Instant + wait`), `u64::MAX` nanoseconds.
const ABSURD_WAITS: [Duration; 5] = [
    Duration::MAX,
    Duration::from_secs(u64::MAX),
    Duration::from_secs(1 << 62),
    Duration::from_nanos(u64::MAX),
    Duration::from_nanos(u64::MAX - 1),
];

#[test]
fn acquire_timeout_with_absurd_wait_gets_a_permit_freed_by_another_thread() {
    for wait in ABSURD_WAITS {
        let bulkhead = Arc::new(Bulkhead::new("bad-input-wait", config(1, Duration::ZERO)));
        let freer = free_later(&bulkhead);
        let b = Arc::clone(&bulkhead);
        let got = with_hang_guard("acquire_timeout(absurd)", move || {
            b.acquire_timeout(wait).map(drop).map_err(|e| e.to_string())
        });
        assert_eq!(got, Ok(()), "acquire_timeout({wait:?})");
        freer.join().unwrap();
        assert_all_back(&bulkhead);
    }
}

#[test]
fn acquire_timeout_with_absurd_wait_returns_at_once_when_it_cannot_queue() {
    // A free permit: granted at once. A waiter cap of 0: refused at once, waited zero.
    let capped =
        BulkheadConfig::builder().max_concurrent_calls(1).max_waiting_calls(0).build().unwrap();
    let bulkhead = Bulkhead::new("bad-input-wait-cap", capped);
    for wait in ABSURD_WAITS {
        let permit = bulkhead.acquire_timeout(wait).expect("a permit is free");
        let err = bulkhead.acquire_timeout(wait).unwrap_err();
        assert_eq!(err.reason(), RejectReason::TooManyWaiting, "wait {wait:?}");
        assert_eq!(err.waited(), Duration::ZERO);
        drop(permit);
    }
    assert_all_back(&bulkhead);
}

#[test]
fn max_wait_duration_max_in_config_waits_until_a_permit_frees() {
    for wait in ABSURD_WAITS {
        let bulkhead = Arc::new(Bulkhead::new("bad-input-config-wait", config(1, wait)));
        assert_eq!(bulkhead.config().max_wait_duration(), wait);
        // Sync `acquire` and `call`.
        let freer = free_later(&bulkhead);
        let b = Arc::clone(&bulkhead);
        let got = with_hang_guard("acquire with absurd max wait", move || b.acquire().is_ok());
        assert!(got, "acquire with max wait {wait:?}");
        freer.join().unwrap();
        let freer = free_later(&bulkhead);
        let b = Arc::clone(&bulkhead);
        let got = with_hang_guard("call with absurd max wait", move || b.call(|| 7).ok());
        assert_eq!(got, Some(7));
        freer.join().unwrap();
        // Async, on tokio's timer.
        let freer = free_later(&bulkhead);
        let b = Arc::clone(&bulkhead);
        let got = with_hang_guard("acquire_async with absurd max wait", move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(async { b.acquire_async().await.is_ok() })
        });
        assert!(got, "acquire_async with max wait {wait:?}");
        freer.join().unwrap();
        assert_all_back(&bulkhead);
    }
}

#[test]
fn unbounded_max_wait_never_builds_a_sleep() {
    // `Duration::MAX` and anything beyond u64 nanoseconds mean "until a slot frees":
    // `acquire_async_with_sleep` must not ask for a sleep (it could not be built).
    for wait in [Duration::MAX, Duration::from_secs(u64::MAX)] {
        let bulkhead = Bulkhead::new("bad-input-no-sleep", config(1, wait));
        let held = bulkhead.try_acquire().unwrap();
        let mut cx = Context::from_waker(noop_waker_ref());
        let mut f = Box::pin(bulkhead.acquire_async_with_sleep(|w| -> std::future::Ready<()> {
            panic!("make_sleep called for an unbounded wait ({w:?})")
        }));
        assert!(Pin::new(&mut f).poll(&mut cx).is_pending());
        assert_eq!(bulkhead.metrics().waiting_calls(), 1);
        drop(held);
        match Pin::new(&mut f).poll(&mut cx) {
            Poll::Ready(Ok(permit)) => drop(permit),
            other => panic!("expected the freed permit, got {:?}", other.map(|r| r.map(drop))),
        }
        drop(f);
        assert_all_back(&bulkhead);
    }
}

#[test]
fn huge_bounded_wait_times_out_by_its_sleep_without_overflow() {
    // The largest waits that still fit the clock: the sleep is built with them, and a
    // timeout reports at least that long without overflowing.
    for wait in [Duration::from_nanos(u64::MAX - 1), Duration::from_secs(100 * 365 * 24 * 3600)] {
        let bulkhead = Bulkhead::new("bad-input-huge-wait", config(1, wait));
        let held = bulkhead.try_acquire().unwrap();
        let mut asked = None;
        let err = futures::executor::block_on(bulkhead.acquire_async_with_sleep(|w| {
            asked = Some(w);
            std::future::ready(())
        }))
        .unwrap_err();
        assert_eq!(asked, Some(wait));
        assert_eq!(err.reason(), RejectReason::WaitTimedOut);
        assert!(err.waited() >= wait, "waited {:?} < {wait:?}", err.waited());
        assert!(err.to_string().contains("wait timed out"), "{err}");
        drop(held);
        assert_all_back(&bulkhead);
    }
}

// ------------------------------------------------------------------ zero capacity

/// Polls every still-pending future once; returns which became ready (and keeps their
/// permits in `granted`).
fn poll_all<'a>(
    futures: &mut [Option<Pin<Box<bulkhead::Acquire<'a>>>>],
    granted: &mut Vec<bulkhead::Permit<'a>>,
) -> Vec<bool> {
    let mut cx = Context::from_waker(noop_waker_ref());
    futures
        .iter_mut()
        .map(|slot| {
            let Some(f) = slot else { return false };
            match Pin::new(f).poll(&mut cx) {
                Poll::Ready(Ok(permit)) => {
                    granted.push(permit);
                    *slot = None;
                    true
                }
                Poll::Ready(Err(e)) => panic!("refused: {e}"),
                Poll::Pending => false,
            }
        })
        .collect()
}

#[test]
fn zero_capacity_queues_waiters_and_growth_admits_them_in_order() {
    let long = Duration::from_secs(3600);
    let bulkhead = Arc::new(Bulkhead::new("bad-input-zero", config(0, long)));
    assert_eq!(bulkhead.try_acquire().unwrap_err().reason(), RejectReason::Full);
    assert_eq!(bulkhead.acquire_timeout(Duration::ZERO).unwrap_err().reason(), RejectReason::Full);
    // Six async waiters in a known order, then two sync threads behind them.
    let mut futures: Vec<_> = (0..6).map(|_| Some(Box::pin(bulkhead.acquire_async()))).collect();
    let mut granted = Vec::new();
    assert_eq!(poll_all(&mut futures, &mut granted), [false; 6]);
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let b = Arc::clone(&bulkhead);
            thread::spawn(move || b.acquire_timeout(HANG_GUARD).map(drop).map_err(|e| e.reason()))
        })
        .collect();
    let deadline = std::time::Instant::now() + HANG_GUARD;
    while bulkhead.metrics().waiting_calls() < 8 {
        assert!(std::time::Instant::now() < deadline, "hang guard: threads never queued");
        thread::sleep(Duration::from_millis(1));
    }
    // Grow to 2: exactly the two oldest are granted.
    bulkhead.change_config(config(2, long));
    assert_eq!(poll_all(&mut futures, &mut granted), [true, true, false, false, false, false]);
    let m = bulkhead.metrics();
    assert_eq!((m.in_flight_calls(), m.waiting_calls(), m.available_concurrent_calls()), (2, 6, 0));
    // Back to 0 while two are in flight: a debt of two, nobody admitted.
    bulkhead.change_config(config(0, long));
    drop(granted.pop());
    assert_eq!(poll_all(&mut futures, &mut granted), [false; 6]);
    assert_eq!(bulkhead.metrics().in_flight_calls(), 1);
    // Grow to 5: one slot is still held, so the next four futures get the other four.
    bulkhead.change_config(config(5, long));
    assert_eq!(poll_all(&mut futures, &mut granted), [false, false, true, true, true, true]);
    assert_eq!(bulkhead.metrics().waiting_calls(), 2);
    // Releasing hands permits to the two threads, in turn.
    drop(granted);
    for t in threads {
        assert_eq!(t.join().unwrap(), Ok(()));
    }
    assert_all_back(&bulkhead);
}

// ------------------------------------------------------------------ change_config

/// The limits a reconfiguration picks from: closed, tiny, the engine's extremes.
fn any_limit() -> impl Strategy<Value = usize> {
    prop_oneof![Just(0), Just(1), Just(2), 0..8usize, Just(MAX - 1), Just(MAX), Just(1 << 20)]
}

#[derive(Clone, Debug)]
enum Step {
    Change(usize),
    Acquire,
    Release(usize),
    Queue,
    DropQueued(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => any_limit().prop_map(Step::Change),
        3 => Just(Step::Acquire),
        2 => any::<usize>().prop_map(Step::Release),
        2 => Just(Step::Queue),
        1 => any::<usize>().prop_map(Step::DropQueued),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Any sequence of reconfigurations (0, 1, the maximum, back) while permits are held
    /// and callers are queued: the metrics follow the limit exactly, the queue is served in
    /// order as room appears, and at the end every permit is back.
    #[test]
    fn change_config_any_to_any_with_calls_in_flight(start in any_limit(), steps in prop::collection::vec(step(), 1..60)) {
        let long = Duration::from_secs(3600);
        let bulkhead = Bulkhead::new("bad-input-prop", config(start, long));
        let mut limit = start as i64;
        let mut held = Vec::new();
        let mut queued: Vec<Option<Pin<Box<bulkhead::Acquire<'_>>>>> = Vec::new();
        for step in steps {
            match step {
                Step::Change(n) => {
                    bulkhead.change_config(config(n, long));
                    limit = n as i64;
                }
                Step::Acquire => {
                    let waiting = queued.iter().any(Option::is_some);
                    let in_flight = held.len() as i64;
                    let result = bulkhead.try_acquire();
                    prop_assert_eq!(result.is_ok(), !waiting && in_flight < limit);
                    if let Ok(p) = result { held.push(p) }
                }
                Step::Release(i) if !held.is_empty() => {
                    let i = i % held.len();
                    drop(held.remove(i));
                }
                Step::Queue if queued.len() < 16 => queued.push(Some(Box::pin(bulkhead.acquire_async()))),
                Step::DropQueued(i) if !queued.is_empty() => {
                    let i = i % queued.len();
                    queued.remove(i);
                }
                _ => {}
            }
            // Serve the queue: futures become ready oldest first, and only while room is left.
            let before = held.len();
            let ready = poll_all(&mut queued, &mut held);
            let got = ready.iter().filter(|r| **r).count();
            queued.retain(Option::is_some);
            if got > 0 {
                prop_assert!(ready.iter().take_while(|r| **r).count() == got, "out of order: {:?}", ready);
            }
            let in_flight = held.len() as i64;
            prop_assert!(in_flight <= limit.max(before as i64), "in flight {} > limit {}", in_flight, limit);
            let waiting = queued.len();
            if waiting > 0 {
                prop_assert!(in_flight >= limit, "{} queued with {} of {} in flight", waiting, in_flight, limit);
            }
            let m = bulkhead.metrics();
            prop_assert_eq!(m.max_allowed_concurrent_calls() as i64, limit);
            prop_assert_eq!(m.in_flight_calls() as i64, in_flight);
            prop_assert_eq!(m.available_concurrent_calls() as i64, (limit - in_flight).max(0));
            prop_assert_eq!(m.waiting_calls(), waiting);
        }
        drop(queued);
        drop(held);
        assert_all_back(&bulkhead);
    }
}

#[test]
fn change_config_extremes_while_threads_churn() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
    let bulkhead = Arc::new(Bulkhead::new("bad-input-churn", config(4, Duration::from_millis(1))));
    let stop = Arc::new(AtomicBool::new(false));
    let holders = Arc::new(AtomicUsize::new(0));
    let max_seen = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..4)
        .map(|i| {
            let (b, stop, holders, max_seen) = (
                Arc::clone(&bulkhead),
                Arc::clone(&stop),
                Arc::clone(&holders),
                Arc::clone(&max_seen),
            );
            thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(SeqCst) {
                    let wait = Duration::from_micros(if i % 2 == 0 { 0 } else { 200 });
                    if let Ok(permit) = b.acquire_timeout(wait) {
                        let h = holders.fetch_add(1, SeqCst) + 1;
                        max_seen.fetch_max(h, SeqCst);
                        n += 1;
                        if n % 7 == 0 {
                            thread::yield_now();
                        }
                        holders.fetch_sub(1, SeqCst);
                        drop(permit);
                    }
                }
                n
            })
        })
        .collect();
    let sequence = [0, 1, MAX, 0, MAX - 1, 2, 1, MAX, 1, 0, 3];
    let mut strict_samples = 0;
    for round in 0..200 {
        let n = sequence[round % sequence.len()];
        bulkhead.change_config(config(n, Duration::from_micros(100 * (round % 3) as u64)));
        // Once the calls in flight have drained to the new limit, no more than `n` callers
        // hold a permit until the next change (holders <= in flight <= limit).
        let deadline = std::time::Instant::now() + HANG_GUARD;
        while bulkhead.metrics().in_flight_calls() > n {
            assert!(std::time::Instant::now() < deadline, "hang guard: never drained to {n}");
            thread::yield_now();
        }
        for _ in 0..50 {
            let h = holders.load(SeqCst);
            assert!(h <= n, "{h} callers hold permits under a drained limit of {n}");
            strict_samples += 1;
        }
        thread::sleep(Duration::from_micros(200));
    }
    stop.store(true, SeqCst);
    let granted: u64 = workers.into_iter().map(|w| w.join().unwrap()).sum();
    assert!(granted > 0);
    println!(
        "churn: {granted} permits granted, {strict_samples} strict samples, max holders {}",
        max_seen.load(SeqCst)
    );
    bulkhead.change_config(config(3, Duration::ZERO));
    assert_all_back(&bulkhead);
}
