//! Two-thread costs (the machine this suite targets has 2 cores): rejection while a second
//! thread churns acquire/release on the same instance, and contended acquire + release
//! throughput with a limit of 1.
//!
//! Run with `cargo bench --bench contention`. Under churn the measured thread's
//! `try_acquire` sometimes finds the permit free (between the churner's release and its next
//! acquire); it then takes and drops it. The share of such calls is printed at the end (and
//! written to the file named by `BULKHEAD_BENCH_MIX`, if set) so the mix is on record.

use std::collections::BTreeMap;
use std::hint::{black_box, spin_loop};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use bulkhead::Bulkhead;
use criterion::{Bencher, Criterion};

mod common;
use common::*;

/// How long the churner holds each permit, in `spin_loop` hints: long enough that the
/// instance is full most of the time (so the measured calls are mostly rejections), short
/// enough that the word is written millions of times a second.
const HOLD_SPINS: u32 = 8;

fn hold() {
    for _ in 0..HOLD_SPINS {
        spin_loop();
    }
}

/// Calls made and permits found free, per benchmark, across all its samples.
static MIX: Mutex<BTreeMap<&'static str, (u64, u64)>> = Mutex::new(BTreeMap::new());

/// Times `iters` calls of `probe` on this thread while another thread calls `churn` in a
/// loop on the same instance. `probe` returns whether it found a permit free.
fn under_churn<S: Send + Sync + 'static>(
    b: &mut Bencher<'_>,
    name: &'static str,
    shared: &Arc<S>,
    churn: fn(&S),
    probe: fn(&S) -> bool,
) {
    b.iter_custom(|iters| {
        let stop = Arc::new(AtomicBool::new(false));
        let started = Arc::new(Barrier::new(2));
        let churner = {
            let (shared, stop, started) = (Arc::clone(shared), Arc::clone(&stop), started.clone());
            thread::spawn(move || {
                started.wait();
                while !stop.load(Ordering::Relaxed) {
                    churn(&shared);
                }
            })
        };
        started.wait();
        let mut free = 0u64;
        let start = Instant::now();
        for _ in 0..iters {
            free += u64::from(probe(black_box(shared)));
        }
        let elapsed = start.elapsed();
        stop.store(true, Ordering::Relaxed);
        churner.join().expect("the churner does not panic");
        let mut mix = MIX.lock().unwrap_or_else(|e| e.into_inner());
        let entry = mix.entry(name).or_default();
        entry.0 += iters;
        entry.1 += free;
        elapsed
    })
}

/// The churner's loop body on a bulkhead: take the permit, hold it, drop it.
fn bulkhead_churn(s: &Bulkhead) {
    if let Ok(permit) = s.try_acquire() {
        hold();
        drop(permit);
    }
}

/// The measured call on a bulkhead: whether it found the permit free.
fn bulkhead_probe(s: &Bulkhead) -> bool {
    match s.try_acquire() {
        Ok(permit) => {
            drop(permit);
            true
        }
        Err(err) => {
            black_box(err);
            false
        }
    }
}

fn rejection_under_churn(c: &mut Criterion) {
    let mut group = c.benchmark_group("rejection_under_churn");

    let ours = Arc::new(bulkhead(1, Duration::ZERO));
    group.bench_function("bulkhead/try_acquire", |b| {
        under_churn(b, "bulkhead/try_acquire", &ours, bulkhead_churn, bulkhead_probe)
    });

    // The same, with metrics on: every call is counted, by both threads.
    let instrumented = Arc::new(bulkhead(1, Duration::ZERO));
    instrument(&instrumented);
    group.bench_function("bulkhead/try_acquire_instrumented", |b| {
        under_churn(
            b,
            "bulkhead/try_acquire_instrumented",
            &instrumented,
            bulkhead_churn,
            bulkhead_probe,
        )
    });

    let tokio_sem = Arc::new(tokio::sync::Semaphore::new(1));
    group.bench_function("tokio/try_acquire", |b| {
        under_churn(
            b,
            "tokio/try_acquire",
            &tokio_sem,
            |s| {
                if let Ok(permit) = s.try_acquire() {
                    hold();
                    drop(permit);
                }
            },
            |s| match s.try_acquire() {
                Ok(permit) => {
                    drop(permit);
                    true
                }
                Err(err) => {
                    black_box(err);
                    false
                }
            },
        )
    });

    let async_lock_sem = Arc::new(async_lock::Semaphore::new(1));
    group.bench_function("async_lock/try_acquire", |b| {
        under_churn(
            b,
            "async_lock/try_acquire",
            &async_lock_sem,
            |s| {
                if let Some(guard) = s.try_acquire() {
                    hold();
                    drop(guard);
                }
            },
            |s| match s.try_acquire() {
                Some(guard) => {
                    drop(guard);
                    true
                }
                None => false,
            },
        )
    });

    // The floor: a bare load of a word the churner takes and returns permits on.
    let word = Arc::new(AtomicU64::new(ONE));
    group.bench_function("floor/load", |b| {
        under_churn(
            b,
            "floor/load",
            &word,
            |w| {
                let current = w.load(Ordering::Relaxed);
                if current >= ONE
                    && w.compare_exchange(
                        current,
                        current - ONE,
                        Ordering::Acquire,
                        Ordering::Relaxed,
                    )
                    .is_ok()
                {
                    hold();
                    w.fetch_add(ONE, Ordering::Release);
                }
            },
            |w| {
                black_box(w.load(Ordering::Relaxed));
                false
            },
        )
    });
    group.finish();
}

/// Runs `op` `iters` times on each of two threads started together; returns the wall time
/// divided by 2, i.e. the time per operation of the pair.
fn on_two_threads<S: Send + Sync + 'static>(iters: u64, shared: &Arc<S>, op: fn(&S)) -> Duration {
    let go = Arc::new(Barrier::new(3));
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let (shared, go) = (Arc::clone(shared), Arc::clone(&go));
            thread::spawn(move || {
                go.wait();
                for _ in 0..iters {
                    op(&shared);
                }
            })
        })
        .collect();
    go.wait();
    let start = Instant::now();
    for thread in threads {
        thread.join().expect("a bench thread does not panic");
    }
    start.elapsed() / 2
}

/// Spawns two tasks on `$rt` that each run `$body` `$iters` times with `$s` bound to a clone
/// of the `Arc` `$shared`; evaluates to the wall time divided by 2.
macro_rules! on_two_tasks {
    ($rt:expr, $iters:expr, $shared:expr, |$s:ident| $body:expr) => {{
        let iters = $iters;
        $rt.block_on(async {
            let start = Instant::now();
            let tasks: Vec<_> = (0..2)
                .map(|_| {
                    let $s = Arc::clone(&$shared);
                    tokio::spawn(async move {
                        for _ in 0..iters {
                            $body;
                        }
                    })
                })
                .collect();
            for task in tasks {
                task.await.expect("a bench task does not panic");
            }
            start.elapsed() / 2
        })
    }};
}

/// Two threads acquiring and releasing with a limit of 1: sync (blocking and spinning) and
/// async (two tasks on a two-worker tokio runtime). Times are per acquire + release.
fn contended(c: &mut Criterion) {
    let mut group = c.benchmark_group("contended");

    // Blocking: a thread that finds the permit taken queues and parks; the release hands the
    // permit over (FIFO), so the two threads alternate.
    let ours = Arc::new(bulkhead(1, Duration::from_secs(10)));
    group.bench_function("bulkhead/acquire_blocking", |b| {
        b.iter_custom(|iters| {
            on_two_threads(iters, &ours, |s| drop(s.acquire().expect("10 s is enough")))
        })
    });

    // Spinning on try_acquire: the cost of the word itself under contention.
    group.bench_function("bulkhead/try_acquire_spin", |b| {
        b.iter_custom(|iters| {
            on_two_threads(iters, &ours, |s| loop {
                if let Ok(permit) = s.try_acquire() {
                    break drop(black_box(permit));
                }
                spin_loop();
            })
        })
    });
    let tokio_sem = Arc::new(tokio::sync::Semaphore::new(1));
    group.bench_function("tokio/try_acquire_spin", |b| {
        b.iter_custom(|iters| {
            on_two_threads(iters, &tokio_sem, |s| loop {
                if let Ok(permit) = s.try_acquire() {
                    break drop(black_box(permit));
                }
                spin_loop();
            })
        })
    });
    let async_lock_sem = Arc::new(async_lock::Semaphore::new(1));
    group.bench_function("async_lock/try_acquire_spin", |b| {
        b.iter_custom(|iters| {
            on_two_threads(iters, &async_lock_sem, |s| loop {
                if let Some(guard) = s.try_acquire() {
                    break drop(black_box(guard));
                }
                spin_loop();
            })
        })
    });
    let counter = Arc::new(parking_lot::Mutex::new(0usize));
    group.bench_function("mutex_usize/spin", |b| {
        b.iter_custom(|iters| {
            on_two_threads(iters, &counter, |s| {
                while !mutex_try_acquire(s, 1) {
                    spin_loop();
                }
                mutex_release(s);
            })
        })
    });
    let word = Arc::new(AtomicU64::new(ONE));
    group.bench_function("floor/cas_fetch_add_spin", |b| {
        b.iter_custom(|iters| {
            on_two_threads(iters, &word, |w| loop {
                let current = w.load(Ordering::Relaxed);
                if current >= ONE
                    && w.compare_exchange(
                        current,
                        current - ONE,
                        Ordering::Acquire,
                        Ordering::Relaxed,
                    )
                    .is_ok()
                {
                    w.fetch_add(ONE, Ordering::Release);
                    break;
                }
                spin_loop();
            })
        })
    });

    // Async: two tasks on a two-worker runtime, each awaiting a permit and dropping it.
    let rt = two_worker_runtime();
    group.bench_function("bulkhead/acquire_async", |b| {
        b.iter_custom(|iters| {
            on_two_tasks!(rt, iters, ours, |s| drop(
                s.acquire_async().await.expect("10 s is enough")
            ))
        })
    });
    group.bench_function("tokio/acquire", |b| {
        b.iter_custom(|iters| {
            on_two_tasks!(rt, iters, tokio_sem, |s| drop(s.acquire().await.expect("never closed")))
        })
    });
    group.bench_function("async_lock/acquire", |b| {
        b.iter_custom(|iters| on_two_tasks!(rt, iters, async_lock_sem, |s| drop(s.acquire().await)))
    });
    group.finish();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    rejection_under_churn(&mut c);
    contended(&mut c);
    c.final_summary();

    let mix = MIX.lock().unwrap_or_else(|e| e.into_inner());
    let mut json = String::from("{");
    for (i, (name, (calls, free))) in mix.iter().enumerate() {
        let share = if *calls == 0 { 0.0 } else { *free as f64 / *calls as f64 };
        eprintln!(
            "rejection_under_churn/{name}: {calls} calls, {:.2}% found a free permit",
            share * 100.0
        );
        let sep = if i == 0 { "" } else { "," };
        json.push_str(&format!("{sep}\"{name}\":{{\"calls\":{calls},\"free\":{free}}}"));
    }
    json.push('}');
    if let Ok(path) = std::env::var("BULKHEAD_BENCH_MIX") {
        std::fs::write(&path, json).expect("BULKHEAD_BENCH_MIX names a writable file");
    }
}
