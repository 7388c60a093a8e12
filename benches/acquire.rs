//! Single-threaded costs, each group measuring our bulkhead next to its competitors in the
//! same run: rejection, zero-wait rejection through the waiting API, uncontended acquire +
//! release, and the cost of events.
//!
//! Run with `cargo bench --bench acquire`; `benches/report.sh` runs it in quick mode and
//! writes `benches/results/latest.md`.

use std::future::Future;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::Criterion;

mod common;
use common::*;

/// `try_acquire` on a full instance: the reject path alone.
fn rejection(c: &mut Criterion) {
    let mut group = c.benchmark_group("rejection");

    let ours = full_bulkhead();
    group.bench_function("bulkhead/try_acquire", |b| {
        b.iter(|| black_box(black_box(&*ours).try_acquire()).is_err())
    });
    // The refusal a caller keeps to handle it: the error itself, as tokio's below.
    group.bench_function("bulkhead/try_acquire_err", |b| {
        b.iter(|| black_box(black_box(&*ours).try_acquire().err()))
    });
    group.bench_function("bulkhead/try_acquire_owned", |b| {
        b.iter(|| black_box(black_box(&ours).try_acquire_owned()).is_err())
    });

    let tokio_sem = full_tokio();
    group.bench_function("tokio/try_acquire", |b| {
        b.iter(|| black_box(black_box(&*tokio_sem).try_acquire()).is_err())
    });
    group.bench_function("tokio/try_acquire_err", |b| {
        b.iter(|| black_box(black_box(&*tokio_sem).try_acquire().err()))
    });
    // `try_acquire_owned` takes `self: Arc<Self>`, so a caller pays for the clone.
    group.bench_function("tokio/try_acquire_owned", |b| {
        b.iter(|| black_box(Arc::clone(black_box(&tokio_sem)).try_acquire_owned()).is_err())
    });

    let async_lock_sem = full_async_lock();
    group.bench_function("async_lock/try_acquire", |b| {
        b.iter(|| black_box(black_box(&*async_lock_sem).try_acquire()).is_none())
    });

    let word = floor_word();
    group.bench_function("floor/load", |b| {
        b.iter(|| black_box(black_box(&*word).load(Ordering::Relaxed)))
    });
    group.finish();
}

/// A caller allowed to wait zero: `acquire()` / `acquire_async()` on a full bulkhead with
/// `max_wait_duration` 0, against what Rust services do today to bound a semaphore wait,
/// `tokio::time::timeout(wait, semaphore.acquire())` with a zero wait.
fn zero_wait_rejection(c: &mut Criterion) {
    let mut group = c.benchmark_group("zero_wait_rejection");

    let ours = full_bulkhead();
    group.bench_function("bulkhead/acquire", |b| {
        b.iter(|| black_box(black_box(&*ours).acquire()).is_err())
    });
    // Built and polled once by hand, as an executor would: the first poll decides.
    group.bench_function("bulkhead/acquire_async_poll", |b| {
        let mut cx = noop_context();
        b.iter(|| {
            let mut fut = std::pin::pin!(black_box(&*ours).acquire_async());
            black_box(fut.as_mut().poll(&mut cx)).is_ready()
        })
    });
    group.bench_function("bulkhead/acquire_owned_async_poll", |b| {
        let mut cx = noop_context();
        b.iter(|| {
            let mut fut = std::pin::pin!(black_box(&ours).acquire_owned_async());
            black_box(fut.as_mut().poll(&mut cx)).is_ready()
        })
    });

    // Inside a tokio runtime: one `block_on` per batch of iterations, timed inside it.
    let rt = current_thread_runtime();
    group.bench_function("bulkhead/acquire_async_in_tokio", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    black_box(black_box(&*ours).acquire_async().await.is_err());
                }
                start.elapsed()
            })
        })
    });

    let tokio_sem = full_tokio();
    group.bench_function("tokio/timeout_zero_acquire", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    let acquire = black_box(&*tokio_sem).acquire();
                    black_box(tokio::time::timeout(Duration::ZERO, acquire).await.is_err());
                }
                start.elapsed()
            })
        })
    });
    group.bench_function("tokio/timeout_zero_acquire_owned", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    let acquire = Arc::clone(black_box(&tokio_sem)).acquire_owned();
                    black_box(tokio::time::timeout(Duration::ZERO, acquire).await.is_err());
                }
                start.elapsed()
            })
        })
    });
    group.finish();
}

/// Uncontended acquire + release: a free permit taken and dropped on one thread.
fn acquire_release(c: &mut Criterion) {
    let mut group = c.benchmark_group("acquire_release");

    let ours = Arc::new(bulkhead(16, Duration::ZERO));
    group.bench_function("bulkhead/try_acquire", |b| {
        b.iter(|| drop(black_box(black_box(&*ours).try_acquire())))
    });
    group.bench_function("bulkhead/try_acquire_owned", |b| {
        b.iter(|| drop(black_box(black_box(&ours).try_acquire_owned())))
    });
    group.bench_function("bulkhead/call", |b| {
        b.iter(|| black_box(black_box(&*ours).call(|| black_box(1))))
    });

    let tokio_sem = Arc::new(tokio::sync::Semaphore::new(16));
    group.bench_function("tokio/try_acquire", |b| {
        b.iter(|| drop(black_box(black_box(&*tokio_sem).try_acquire())))
    });
    group.bench_function("tokio/try_acquire_owned", |b| {
        b.iter(|| drop(black_box(Arc::clone(black_box(&tokio_sem)).try_acquire_owned())))
    });

    let async_lock_sem = async_lock::Semaphore::new(16);
    group.bench_function("async_lock/try_acquire", |b| {
        b.iter(|| drop(black_box(black_box(&async_lock_sem).try_acquire())))
    });

    let counter = parking_lot::Mutex::new(0usize);
    group.bench_function("mutex_usize/lock_inc_dec", |b| {
        b.iter(|| {
            if mutex_try_acquire(black_box(&counter), 16) {
                mutex_release(black_box(&counter));
            }
        })
    });

    // One CAS to take a permit and one fetch_add to return it, as our engine does.
    let word = AtomicU64::new(16 * ONE);
    group.bench_function("floor/cas_fetch_add", |b| {
        b.iter(|| {
            let word = black_box(&word);
            let current = word.load(Ordering::Relaxed);
            let taken = word
                .compare_exchange(current, current - ONE, Ordering::Acquire, Ordering::Relaxed)
                .is_ok();
            if taken {
                word.fetch_add(ONE, Ordering::Release);
            }
            black_box(taken)
        })
    });
    group.finish();
}

/// What observing costs: `call`, acquire + release and a rejection with no listener, with one
/// listener registered, and instrumented (metrics on: the bulkhead's own counters, exported
/// through an atomics-only recorder), side by side; and a metrics snapshot.
fn events(c: &mut Criterion) {
    let mut group = c.benchmark_group("events");

    let quiet = bulkhead(16, Duration::ZERO);
    let heard = bulkhead(16, Duration::ZERO);
    let seen = Arc::new(AtomicUsize::new(0));
    let sink = Arc::clone(&seen);
    heard.on_event(move |_| {
        sink.fetch_add(1, Ordering::Relaxed);
    });
    group.bench_function("bulkhead/call/no_listener", |b| {
        b.iter(|| black_box(black_box(&quiet).call(|| black_box(1))))
    });
    group.bench_function("bulkhead/call/one_listener", |b| {
        b.iter(|| black_box(black_box(&heard).call(|| black_box(1))))
    });
    let instrumented = Arc::new(bulkhead(16, Duration::ZERO));
    instrument(&instrumented);
    group.bench_function("bulkhead/call/instrumented", |b| {
        b.iter(|| black_box(black_box(&*instrumented).call(|| black_box(1))))
    });
    group.bench_function("bulkhead/acq_rel/no_listener", |b| {
        b.iter(|| drop(black_box(black_box(&quiet).try_acquire())))
    });
    group.bench_function("bulkhead/acq_rel/instrumented", |b| {
        b.iter(|| drop(black_box(black_box(&*instrumented).try_acquire())))
    });

    let quiet_full = full_bulkhead();
    let heard_full = full_bulkhead();
    let sink = Arc::clone(&seen);
    heard_full.on_event(move |_| {
        sink.fetch_add(1, Ordering::Relaxed);
    });
    group.bench_function("bulkhead/reject/no_listener", |b| {
        b.iter(|| black_box(black_box(&*quiet_full).try_acquire()).is_err())
    });
    group.bench_function("bulkhead/reject/one_listener", |b| {
        b.iter(|| black_box(black_box(&*heard_full).try_acquire()).is_err())
    });
    let instrumented_full = full_bulkhead();
    instrument(&instrumented_full);
    group.bench_function("bulkhead/reject/instrumented", |b| {
        b.iter(|| black_box(black_box(&*instrumented_full).try_acquire()).is_err())
    });

    group.bench_function("bulkhead/metrics", |b| b.iter(|| black_box(black_box(&quiet).metrics())));
    group.finish();
    black_box(seen.load(Ordering::Relaxed));
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    rejection(&mut c);
    zero_wait_rejection(&mut c);
    acquire_release(&mut c);
    events(&mut c);
    c.final_summary();
}
