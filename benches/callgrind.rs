//! Runs one operation `n` times, for instruction counts under
//! `valgrind --tool=callgrind`: `callgrind <op> <n>`. `benches/report.sh` runs each op with
//! `n` and with 0 and divides the difference by `n`, so the set-up (a runtime, a full
//! semaphore) cancels out and only the loop's cost per operation remains.
//!
//! Every op leaves the instance as it found it. `callgrind list` prints the op names.
//! Run as a bench target by `cargo bench` (with `--bench` and no op), it does nothing.

use std::future::Future;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

mod common;
use common::*;

/// The ops: name and what each does, as the report prints them.
const OPS: &[(&str, &str)] = &[
    ("floor_load", "floor: one Relaxed load of a shared word"),
    ("bulkhead_reject", "bulkhead try_acquire on a full bulkhead"),
    (
        "bulkhead_reject_error",
        "bulkhead try_acquire on a full bulkhead, the error kept (black_box)",
    ),
    (
        "bulkhead_reject_err",
        "bulkhead try_acquire().err() on a full bulkhead, the error kept (black_box)",
    ),
    ("bulkhead_reject_owned", "bulkhead try_acquire_owned on a full bulkhead"),
    ("tokio_reject", "tokio try_acquire on a full semaphore"),
    ("tokio_reject_err", "tokio try_acquire().err() on a full semaphore, the error kept"),
    ("tokio_reject_owned", "tokio try_acquire_owned (Arc clone) on a full semaphore"),
    ("async_lock_reject", "async-lock try_acquire on a full semaphore"),
    ("bulkhead_zero_wait", "bulkhead acquire(), max wait 0, full"),
    ("bulkhead_zero_wait_async", "bulkhead acquire_async(), max wait 0, full, polled once"),
    (
        "bulkhead_zero_wait_async_err",
        "bulkhead acquire_async(), max wait 0, full, polled once, the result kept",
    ),
    ("bulkhead_zero_wait_async_tokio", "bulkhead acquire_async().await, max wait 0, in tokio"),
    (
        "bulkhead_acquire_async_free",
        "bulkhead acquire_async() with a free permit, polled once, + drop",
    ),
    ("tokio_acquire_free", "tokio acquire() with a free permit, polled once, + drop"),
    ("tokio_timeout_zero", "tokio timeout(ZERO, acquire()).await on a full semaphore"),
    ("floor_cas_add", "floor: one CAS + one fetch_add"),
    ("bulkhead_acq_rel", "bulkhead try_acquire + drop"),
    ("bulkhead_acq_rel_owned", "bulkhead try_acquire_owned + drop"),
    ("bulkhead_call", "bulkhead call(|| ())"),
    ("tokio_acq_rel", "tokio try_acquire + drop"),
    ("tokio_acq_rel_owned", "tokio try_acquire_owned (Arc clone) + drop"),
    ("async_lock_acq_rel", "async-lock try_acquire + drop"),
    ("mutex_acq_rel", "parking_lot Mutex<usize> inc + dec"),
    ("round_bulkhead_bounded", "waiting round: 2 tasks, 1 permit, acquire_async (max wait 10 s)"),
    ("round_bulkhead_unbounded", "waiting round: 2 tasks, 1 permit, acquire_async (unbounded)"),
    ("round_tokio_bounded", "waiting round: 2 tasks, 1 permit, timeout(10 s, acquire())"),
    ("round_tokio_unbounded", "waiting round: 2 tasks, 1 permit, tokio acquire()"),
    ("round_floor", "waiting round floor: 2 tasks, 1 permit, a flag and one waker slot"),
    ("bulkhead_reject_instrumented", "bulkhead try_acquire on a full bulkhead, metrics on"),
    (
        "bulkhead_reject_instrumented_fresh",
        "bulkhead try_acquire on a full bulkhead, metrics on, no call finished yet (no estimate)",
    ),
    (
        "bulkhead_zero_wait_instrumented",
        "bulkhead acquire(), max wait 0, full, metrics on (the counted zero-wait refusal)",
    ),
    (
        "bulkhead_zero_wait_async_instrumented",
        "bulkhead acquire_async(), max wait 0, full, metrics on, polled once",
    ),
    ("bulkhead_acq_rel_instrumented", "bulkhead try_acquire + drop, metrics on"),
    ("bulkhead_call_instrumented", "bulkhead call(|| ()), metrics on"),
    ("bulkhead_reject_listener", "bulkhead try_acquire on a full bulkhead, one listener"),
    (
        "bulkhead_reject_listener_estimate",
        "bulkhead try_acquire on a full bulkhead, one listener, calls finished (an estimate)",
    ),
    ("floor_hashmap_get", "floor: std HashMap<u64, _> get (RandomState) of one of 1 000 keys"),
    ("keyed_acq_rel", "keyed try_acquire + drop, live key of 1 000, no total"),
    ("keyed_acq_rel_total", "keyed try_acquire + drop, live key of 1 000, with a total"),
    ("keyed_reject", "keyed try_acquire on a full key, only is_err() kept"),
    ("keyed_reject_error", "keyed try_acquire on a full key, the error kept (black_box)"),
    ("keyed_acq_rel_id_hash", "keyed try_acquire + drop, live key of 1 000, IdHasher"),
    ("keyed_reject_error_id_hash", "keyed try_acquire on a full key, error kept, IdHasher"),
    ("bulkhead_acq_rel_listener", "bulkhead try_acquire + drop, one listener"),
    ("floor_instant_now", "floor: one Instant::now()"),
    ("adaptive_reject", "adaptive (Gradient2) try_acquire on a full bulkhead"),
    ("adaptive_acq_rel", "adaptive (Gradient2) try_acquire + drop (records a sample)"),
    ("adaptive_acq_rel_aimd", "adaptive (AIMD) try_acquire + drop (records a sample)"),
    ("adaptive_acq_rel_vegas", "adaptive (Vegas) try_acquire + drop (records a sample)"),
    ("adaptive_call", "adaptive (Gradient2) call(|| ())"),
    ("adaptive_acq_rel_1in8", "adaptive (Gradient2, sample_one_in(8)) try_acquire + drop"),
    ("adaptive_acq_rel_1in16", "adaptive (Gradient2, sample_one_in(16)) try_acquire + drop"),
];

/// An adaptive bulkhead of cap 16 whose limit stays at 16 (see `adaptive_free`); a plain
/// one unless `attach` (the ops that do not use it): attaching calibrates the sample clock
/// (quanta: a loop that runs until its error is small or 200 ms passed, so its instruction
/// count varies from run to run; the callgrind scripts also leave `quanta::Clock::new` out
/// of the count with `--toggle-collect`).
fn adaptive(limit: bulkhead::adaptive::AdaptiveLimit, attach: bool) -> bulkhead::Bulkhead {
    let config = bulkhead::BulkheadConfig::builder().max_concurrent_calls(16).build().unwrap();
    let bulkhead = bulkhead::Bulkhead::new("adaptive", config);
    if attach {
        bulkhead.set_adaptive_limit(limit).unwrap();
    }
    bulkhead
}

/// The key the keyed ops take (one of 1 000 live keys) and the key held full.
const FREE_KEY: u64 = 500;
const FULL_KEY: u64 = 1;

/// A multiplicative hasher for integer keys (Fibonacci hashing, as FxHash does): what a
/// caller may pass to `KeyedBulkheadBuilder::hasher` for ids it trusts.
#[derive(Default)]
struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        bytes.iter().for_each(|&b| self.write_u64(u64::from(b)));
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A keyed bulkhead with keys 0..1 000 live (16 slots each, key `FULL_KEY` limited to 1)
/// and, with `total`, a shared total.
fn keyed(total: Option<usize>) -> bulkhead::keyed::KeyedBulkhead<u64> {
    keyed_with(total, std::collections::hash_map::RandomState::new())
}

/// [`keyed`] with `hasher`.
fn keyed_with<S: std::hash::BuildHasher>(
    total: Option<usize>,
    hasher: S,
) -> bulkhead::keyed::KeyedBulkhead<u64, S> {
    let limit = |n| bulkhead::BulkheadConfig::builder().max_concurrent_calls(n).build().unwrap();
    let mut builder = bulkhead::keyed::KeyedBulkhead::builder("bench")
        .default_config(limit(16))
        .key_config(FULL_KEY, limit(1))
        .max_keys(1_000)
        .hasher(hasher);
    if let Some(total) = total {
        builder = builder.total(limit(total));
    }
    let keyed = builder.build().expect("a valid keyed configuration");
    // Idle keys stay live until a new key finds the map full, which never happens here.
    for key in 0..1_000 {
        drop(keyed.try_acquire(&key).expect("a free slot"));
    }
    keyed
}

/// The floor of a waiting round: a one-permit hand-off between two tasks with nothing but a
/// flag and one waker slot under a lock (no queue, no timer, no accounting, no names). What
/// a round costs with it is what the runtime costs: yield, wake, reschedule. A release that
/// finds a waiter hands the permit to it (`granted`), and only that waiter may take it: a
/// newcomer (the releasing task coming back) waits behind it, so every round is two waits
/// and four polls, as with a semaphore. (Until stop 39 a newcomer took the grant, so the
/// releasing task never waited: three polls per round, and a floor 1 000 instructions low.)
/// One waker slot is enough for two tasks: at most one waits at a time.
#[derive(Default)]
struct Floor(parking_lot::Mutex<FloorState>);

#[derive(Default)]
struct FloorState {
    held: bool,
    granted: bool,
    waiter: Option<std::task::Waker>,
}

struct FloorPermit(Arc<Floor>);

impl Drop for FloorPermit {
    fn drop(&mut self) {
        let mut state = self.0 .0.lock();
        match state.waiter.take() {
            Some(waker) => {
                // The permit passes to the waiter: `held` stays set.
                state.granted = true;
                drop(state);
                waker.wake();
            }
            None => state.held = false,
        }
    }
}

async fn floor_acquire(floor: Arc<Floor>) -> FloorPermit {
    let mut waiting = false;
    std::future::poll_fn(|cx| {
        let mut state = floor.0.lock();
        if waiting {
            if state.granted {
                state.granted = false;
                return std::task::Poll::Ready(());
            }
        } else if !state.held {
            state.held = true;
            return std::task::Poll::Ready(());
        }
        waiting = true;
        state.waiter = Some(cx.waker().clone());
        std::task::Poll::Pending
    })
    .await;
    FloorPermit(floor)
}

/// The bound of the bounded rounds. The guide's max wait is 100 ms, but under valgrind on a
/// loaded machine a 100 ms timer can expire mid-run; a timer's cost does not depend on its
/// length, so both sides use 10 s.
const ROUND_WAIT: Duration = Duration::from_secs(10);

/// One waiting round per iteration: two tasks on a current-thread runtime share one permit
/// and hold it across a `yield_now`, so in every round each task queues once and is handed
/// the permit once. `acquire` is the awaited acquire under test.
fn rounds<S, F, P>(rt: &tokio::runtime::Runtime, sem: Arc<S>, n: u64, acquire: fn(Arc<S>) -> F)
where
    S: Send + Sync + 'static,
    F: Future<Output = P> + Send + 'static,
    P: Send + 'static,
{
    rt.block_on(async move {
        let task = |sem: Arc<S>| async move {
            for _ in 0..n {
                let permit = acquire(Arc::clone(&sem)).await;
                tokio::task::yield_now().await;
                drop(black_box(permit));
            }
        };
        let a = tokio::spawn(task(Arc::clone(&sem)));
        let b = tokio::spawn(task(sem));
        a.await.unwrap();
        b.await.unwrap();
    });
}

/// Ops per run unless `list` says otherwise.
const DEFAULT_N: u64 = 200_000;

fn run(op: &str, n: u64) -> Result<(), String> {
    let full = full_bulkhead();
    let free = Arc::new(bulkhead(16, Duration::ZERO));
    let tokio_full = full_tokio();
    let tokio_free = Arc::new(tokio::sync::Semaphore::new(16));
    let async_lock_full = full_async_lock();
    let async_lock_free = async_lock::Semaphore::new(16);
    let counter = parking_lot::Mutex::new(0usize);
    let floor_full = floor_word();
    let floor_free = AtomicU64::new(16 * ONE);
    let rt = current_thread_runtime();
    let mut cx = noop_context();
    // Instrumented twins: metrics on (see `instrument`), or one counting listener.
    let full_instrumented = full_seen_finishing();
    let full_instrumented_fresh = full_bulkhead();
    instrument(&full_instrumented_fresh);
    let free_instrumented = Arc::new(bulkhead(16, Duration::ZERO));
    instrument(&free_instrumented);
    let heard = Arc::new(AtomicU64::new(0));
    let full_listened = full_bulkhead();
    count_events(&full_listened, &heard);
    let full_listened_estimate = full_finishing(|bulkhead| count_events(bulkhead, &heard));
    let free_listened = Arc::new(bulkhead(16, Duration::ZERO));
    count_events(&free_listened, &heard);

    // Adaptive twins. One permit is in flight on each, so every sample has in_flight = 1
    // < limit / 2: the algorithms take their "app-limited" branch and the limit stays at
    // 16, so each iteration does the same work (the sample is still fully processed: the
    // clock reads, the lock, the averages).
    use bulkhead::adaptive::{AdaptiveLimit, Aimd, Gradient2, Vegas};
    // A fold window of an hour: natively a loop runs ~10 000 calls a millisecond, so the
    // 16-sample batch, not the 1 ms window, decides when it folds; under valgrind (~50x
    // slower) the window would fire first, and when depends on the machine's speed.
    let attach = op.starts_with("adaptive");
    let adaptive =
        |limit: AdaptiveLimit| adaptive(limit.fold_window(Duration::from_secs(3600)), attach);
    let adaptive_free = adaptive(AdaptiveLimit::new(Gradient2::default()));
    let adaptive_aimd = adaptive(AdaptiveLimit::new(Aimd::default()));
    let adaptive_vegas = adaptive(AdaptiveLimit::new(Vegas::default()));
    let sampled = |k| adaptive(AdaptiveLimit::new(Gradient2::default()).sample_one_in(k));
    let adaptive_1in8 = sampled(8);
    let adaptive_1in16 = sampled(16);
    let adaptive_full = adaptive(AdaptiveLimit::new(Gradient2::default()));
    let _held: Vec<_> = (0..16).map(|_| adaptive_full.try_acquire().unwrap()).collect();

    // Keyed bulkheads (issue 13): 1 000 live keys, so the look-up is in a map of realistic
    // size; the key measured is one of them.
    let keyed_free = keyed(None);
    let keyed_total = keyed(Some(16_000));
    let keyed_full = keyed(None);
    std::mem::forget(keyed_full.try_acquire(&FULL_KEY).expect("a free slot"));
    let id_hash = std::hash::BuildHasherDefault::<IdHasher>::default;
    let keyed_free_id = keyed_with(None, id_hash());
    let keyed_full_id = keyed_with(None, id_hash());
    std::mem::forget(keyed_full_id.try_acquire(&FULL_KEY).expect("a free slot"));

    // The keyed floor (issue 21): a std map of 1 000 live keys with the default hasher.
    let hashmap: std::collections::HashMap<u64, usize> = (0..1_000).map(|k| (k, 0)).collect();

    match op {
        "floor_hashmap_get" => (0..n).for_each(|_| {
            black_box(black_box(&hashmap).get(black_box(&FREE_KEY)));
        }),
        "floor_instant_now" => (0..n).for_each(|_| {
            black_box(std::time::Instant::now());
        }),
        "adaptive_reject" => (0..n).for_each(|_| {
            black_box(black_box(&adaptive_full).try_acquire().is_err());
        }),
        "adaptive_acq_rel" => {
            (0..n).for_each(|_| drop(black_box(black_box(&adaptive_free).try_acquire())))
        }
        "adaptive_acq_rel_aimd" => {
            (0..n).for_each(|_| drop(black_box(black_box(&adaptive_aimd).try_acquire())))
        }
        "adaptive_acq_rel_vegas" => {
            (0..n).for_each(|_| drop(black_box(black_box(&adaptive_vegas).try_acquire())))
        }
        "adaptive_acq_rel_1in8" => {
            (0..n).for_each(|_| drop(black_box(black_box(&adaptive_1in8).try_acquire())))
        }
        "adaptive_acq_rel_1in16" => {
            (0..n).for_each(|_| drop(black_box(black_box(&adaptive_1in16).try_acquire())))
        }
        "adaptive_call" => (0..n).for_each(|_| {
            black_box(black_box(&adaptive_free).call(|| black_box(())).is_ok());
        }),
        "floor_load" => (0..n).for_each(|_| {
            black_box(black_box(&*floor_full).load(Ordering::Relaxed));
        }),
        "bulkhead_reject" => (0..n).for_each(|_| {
            black_box(black_box(&*full).try_acquire().is_err());
        }),
        // The error itself goes through `black_box`, so it is built in full whatever the
        // optimizer knows about its drop (with `is_err()` alone, an error without drop glue
        // is never built at all).
        "bulkhead_reject_error" => (0..n).for_each(|_| {
            drop(black_box(black_box(&*full).try_acquire()));
        }),
        // What a caller that handles the refusal keeps: the error alone, as with tokio's
        // `try_acquire().err()` below.
        "bulkhead_reject_err" => (0..n).for_each(|_| {
            black_box(black_box(&*full).try_acquire().err());
        }),
        "bulkhead_reject_owned" => (0..n).for_each(|_| {
            black_box(black_box(&full).try_acquire_owned().is_err());
        }),
        "tokio_reject" => (0..n).for_each(|_| {
            black_box(black_box(&*tokio_full).try_acquire().is_err());
        }),
        "tokio_reject_err" => (0..n).for_each(|_| {
            black_box(black_box(&*tokio_full).try_acquire().err());
        }),
        "tokio_reject_owned" => (0..n).for_each(|_| {
            black_box(Arc::clone(black_box(&tokio_full)).try_acquire_owned().is_err());
        }),
        "async_lock_reject" => (0..n).for_each(|_| {
            black_box(black_box(&*async_lock_full).try_acquire().is_none());
        }),
        "bulkhead_zero_wait" => (0..n).for_each(|_| {
            black_box(black_box(&*full).acquire().is_err());
        }),
        "bulkhead_zero_wait_async" => (0..n).for_each(|_| {
            let mut fut = std::pin::pin!(black_box(&*full).acquire_async());
            black_box(fut.as_mut().poll(&mut cx).is_ready());
        }),
        // As above, but the refusal is read (`black_box`): with `is_ready()` alone the
        // compiler may skip building an error nobody reads.
        "bulkhead_zero_wait_async_err" => (0..n).for_each(|_| {
            let mut fut = std::pin::pin!(black_box(&*full).acquire_async());
            drop(black_box(fut.as_mut().poll(&mut cx)));
        }),
        "bulkhead_acquire_async_free" => (0..n).for_each(|_| {
            let mut fut = std::pin::pin!(black_box(&*free).acquire_async());
            drop(black_box(fut.as_mut().poll(&mut cx)));
        }),
        "tokio_acquire_free" => (0..n).for_each(|_| {
            let mut fut = std::pin::pin!(black_box(&*tokio_free).acquire());
            drop(black_box(fut.as_mut().poll(&mut cx)));
        }),
        "bulkhead_zero_wait_async_tokio" => rt.block_on(async {
            for _ in 0..n {
                black_box(black_box(&*full).acquire_async().await.is_err());
            }
        }),
        "tokio_timeout_zero" => rt.block_on(async {
            for _ in 0..n {
                let acquire = black_box(&*tokio_full).acquire();
                black_box(tokio::time::timeout(Duration::ZERO, acquire).await.is_err());
            }
        }),
        "floor_cas_add" => (0..n).for_each(|_| {
            let word = black_box(&floor_free);
            let current = word.load(Ordering::Relaxed);
            if word
                .compare_exchange(current, current - ONE, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                word.fetch_add(ONE, Ordering::Release);
            }
        }),
        "bulkhead_acq_rel" => (0..n).for_each(|_| drop(black_box(black_box(&*free).try_acquire()))),
        "bulkhead_acq_rel_owned" => {
            (0..n).for_each(|_| drop(black_box(black_box(&free).try_acquire_owned())))
        }
        "bulkhead_call" => (0..n).for_each(|_| {
            black_box(black_box(&*free).call(|| black_box(())).is_ok());
        }),
        "tokio_acq_rel" => {
            (0..n).for_each(|_| drop(black_box(black_box(&*tokio_free).try_acquire())))
        }
        "tokio_acq_rel_owned" => (0..n)
            .for_each(|_| drop(black_box(Arc::clone(black_box(&tokio_free)).try_acquire_owned()))),
        "async_lock_acq_rel" => {
            (0..n).for_each(|_| drop(black_box(black_box(&async_lock_free).try_acquire())))
        }
        "mutex_acq_rel" => (0..n).for_each(|_| {
            if mutex_try_acquire(black_box(&counter), 16) {
                mutex_release(black_box(&counter));
            }
        }),
        "round_bulkhead_bounded" => {
            rounds(&rt, Arc::new(bulkhead(1, ROUND_WAIT)), n, |b| async move {
                b.acquire_owned_async().await.expect("the round's permit")
            })
        }
        "round_bulkhead_unbounded" => {
            rounds(&rt, Arc::new(bulkhead(1, Duration::MAX)), n, |b| async move {
                b.acquire_owned_async().await.expect("the round's permit")
            })
        }
        "round_tokio_bounded" => {
            rounds(&rt, Arc::new(tokio::sync::Semaphore::new(1)), n, |s| async move {
                let acquire = s.acquire_owned();
                tokio::time::timeout(ROUND_WAIT, acquire).await.expect("in time").expect("open")
            })
        }
        "round_tokio_unbounded" => {
            rounds(&rt, Arc::new(tokio::sync::Semaphore::new(1)), n, |s| async move {
                s.acquire_owned().await.expect("open")
            })
        }
        "round_floor" => rounds(&rt, Arc::new(Floor::default()), n, floor_acquire),
        "bulkhead_reject_instrumented" => (0..n).for_each(|_| {
            black_box(black_box(&*full_instrumented).try_acquire().is_err());
        }),
        "bulkhead_reject_instrumented_fresh" => (0..n).for_each(|_| {
            black_box(black_box(&*full_instrumented_fresh).try_acquire().is_err());
        }),
        "bulkhead_zero_wait_instrumented" => (0..n).for_each(|_| {
            black_box(black_box(&*full_instrumented).acquire().is_err());
        }),
        "bulkhead_zero_wait_async_instrumented" => (0..n).for_each(|_| {
            let mut fut = std::pin::pin!(black_box(&*full_instrumented).acquire_async());
            black_box(fut.as_mut().poll(&mut cx).is_ready());
        }),
        "bulkhead_acq_rel_instrumented" => {
            (0..n).for_each(|_| drop(black_box(black_box(&*free_instrumented).try_acquire())))
        }
        "bulkhead_call_instrumented" => (0..n).for_each(|_| {
            black_box(black_box(&*free_instrumented).call(|| black_box(())).is_ok());
        }),
        "keyed_acq_rel" => {
            (0..n).for_each(|_| drop(black_box(black_box(&keyed_free).try_acquire(&FREE_KEY))))
        }
        "keyed_acq_rel_total" => {
            (0..n).for_each(|_| drop(black_box(black_box(&keyed_total).try_acquire(&FREE_KEY))))
        }
        "keyed_reject" => (0..n).for_each(|_| {
            black_box(black_box(&keyed_full).try_acquire(&FULL_KEY).is_err());
        }),
        "keyed_reject_error" => {
            (0..n).for_each(|_| drop(black_box(black_box(&keyed_full).try_acquire(&FULL_KEY))))
        }
        "keyed_acq_rel_id_hash" => {
            (0..n).for_each(|_| drop(black_box(black_box(&keyed_free_id).try_acquire(&FREE_KEY))))
        }
        "keyed_reject_error_id_hash" => {
            (0..n).for_each(|_| drop(black_box(black_box(&keyed_full_id).try_acquire(&FULL_KEY))))
        }
        "bulkhead_reject_listener" => (0..n).for_each(|_| {
            black_box(black_box(&*full_listened).try_acquire().is_err());
        }),
        "bulkhead_reject_listener_estimate" => (0..n).for_each(|_| {
            black_box(black_box(&*full_listened_estimate).try_acquire().is_err());
        }),
        "bulkhead_acq_rel_listener" => {
            (0..n).for_each(|_| drop(black_box(black_box(&*free_listened).try_acquire())))
        }
        _ => return Err(format!("unknown op {op:?}; `callgrind list` prints the ops")),
    }
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        // `cargo bench` runs every bench target with `--bench` (and any flags given after
        // `--`): nothing to do here.
        None => {}
        Some(flag) if flag.starts_with("--") => {}
        // One line per op: name, description, and how many ops to run. `timeout(ZERO, ..)`
        // waits for the timer's next 1 ms tick on every call, so it gets fewer.
        Some("list") => {
            for (name, what) in OPS {
                let n = if *name == "tokio_timeout_zero" { 2_000 } else { DEFAULT_N };
                println!("{name}\t{what}\t{n}");
            }
        }
        Some(op) => {
            let n = args.get(1).and_then(|n| n.parse().ok()).unwrap_or(DEFAULT_N);
            if let Err(err) = run(op, n) {
                eprintln!("{err}");
                std::process::exit(2);
            }
        }
    }
}

/// A full bulkhead, instrumented, that has seen calls finish and refused once since: its
/// refusals carry a retry estimate, as a service's do once it ran a while (a bulkhead that
/// never saw a call finish has no estimate and reads the clock on each refusal, issue 33).
/// Built before the n = 0 baseline too, so its cost is subtracted.
fn full_seen_finishing() -> Arc<bulkhead::Bulkhead> {
    full_finishing(instrument)
}

/// [`full_seen_finishing`] observed by `observe` instead of the counters.
fn full_finishing(observe: impl FnOnce(&Arc<bulkhead::Bulkhead>)) -> Arc<bulkhead::Bulkhead> {
    let bulkhead = Arc::new(bulkhead(1, Duration::ZERO));
    observe(&bulkhead);
    for _ in 0..4 {
        drop(bulkhead.try_acquire().expect("a free permit"));
    }
    // Past the estimator's first look (`LOOK_EVERY`, 1 ms).
    std::thread::sleep(Duration::from_millis(3));
    std::mem::forget(bulkhead.try_acquire_owned().expect("a free permit"));
    let refused = bulkhead.try_acquire().expect_err("full");
    assert!(refused.retry_after().is_some(), "an estimate once calls finished");
    bulkhead
}
