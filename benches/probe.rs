//! Two measurements criterion cannot make, printed as JSON for `benches/report.sh`:
//!
//! * `probe allocs`: heap allocations per operation, counted by a counting global allocator
//!   (`stats_alloc`), for our fast, reject and slow paths and the competitors'.
//! * `probe deadline`: how far past its max wait (100 µs, 1 ms, 100 ms) a waiter that gets
//!   no permit returns, for our sync and async waits and for tokio's
//!   `timeout(wait, semaphore.acquire())`. Median, p99 and max overshoot.
//!
//! Run as a bench target by `cargo bench` (with `--bench` and no command), it does nothing.

use std::alloc::System;
use std::future::Future;
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bulkhead::RejectReason;
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

mod common;
use common::*;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Runs `op` a few times to warm up (lazy statics, first-use growth), then `n` times inside
/// a counting region; returns (allocations + reallocations, bytes allocated) per call.
fn per_op(n: u64, mut op: impl FnMut()) -> (f64, f64) {
    for _ in 0..100 {
        op();
    }
    let region = Region::new(GLOBAL);
    for _ in 0..n {
        op();
    }
    let change = region.change();
    let allocs = (change.allocations + change.reallocations) as f64 / n as f64;
    (allocs, change.bytes_allocated as f64 / n as f64)
}

fn allocs() {
    const N: u64 = 10_000;
    let full = full_bulkhead();
    let free = Arc::new(bulkhead(16, Duration::ZERO));
    let waits = Arc::new(bulkhead(1, Duration::from_micros(1)));
    let held = waits.try_acquire_owned().expect("one free permit");
    let heard_full = full_bulkhead();
    let heard = Arc::new(AtomicUsize::new(0));
    let sink = Arc::clone(&heard);
    heard_full.on_event(move |_| {
        sink.fetch_add(1, Ordering::Relaxed);
    });
    // Instrumented: metrics on (see `instrument`) and a listener.
    let full_instrumented = full_bulkhead();
    instrument(&full_instrumented);
    let free_instrumented = Arc::new(bulkhead(16, Duration::ZERO));
    instrument(&free_instrumented);
    let instrumented_heard = Arc::new(std::sync::atomic::AtomicU64::new(0));
    count_events(&full_instrumented, &instrumented_heard);
    count_events(&free_instrumented, &instrumented_heard);
    let tokio_full = full_tokio();
    let tokio_free = Arc::new(tokio::sync::Semaphore::new(16));
    let async_lock_full = full_async_lock();
    let async_lock_free = async_lock::Semaphore::new(16);
    let counter = parking_lot::Mutex::new(0usize);
    let rt = current_thread_runtime();
    let mut cx = noop_context();

    let mut rows: Vec<(&str, &str, (f64, f64))> = Vec::new();
    let mut row = |path: &'static str, name: &'static str, cost: (f64, f64)| {
        rows.push((path, name, cost));
    };

    row("reject", "bulkhead try_acquire", per_op(N, || drop(black_box(full.try_acquire()))));
    row(
        "reject",
        "bulkhead try_acquire_owned",
        per_op(N, || drop(black_box(full.try_acquire_owned()))),
    );
    row("reject", "bulkhead acquire (max wait 0)", per_op(N, || drop(black_box(full.acquire()))));
    row(
        "reject",
        "bulkhead acquire_async (max wait 0, one poll)",
        per_op(N, || {
            let mut fut = std::pin::pin!(full.acquire_async());
            drop(black_box(fut.as_mut().poll(&mut cx)));
        }),
    );
    row(
        "reject",
        "bulkhead acquire_owned_async (max wait 0, one poll)",
        per_op(N, || {
            let mut fut = std::pin::pin!(full.acquire_owned_async());
            drop(black_box(fut.as_mut().poll(&mut cx)));
        }),
    );
    row(
        "reject",
        "bulkhead try_acquire, one listener",
        per_op(N, || drop(black_box(heard_full.try_acquire()))),
    );
    row(
        "reject",
        "bulkhead acquire_async().await in tokio (max wait 0)",
        rt.block_on(async {
            for _ in 0..100 {
                drop(black_box(full.acquire_async().await));
            }
            let region = Region::new(GLOBAL);
            for _ in 0..N {
                drop(black_box(full.acquire_async().await));
            }
            let change = region.change();
            (
                (change.allocations + change.reallocations) as f64 / N as f64,
                change.bytes_allocated as f64 / N as f64,
            )
        }),
    );
    row(
        "reject",
        "bulkhead try_acquire, instrumented",
        per_op(N, || drop(black_box(full_instrumented.try_acquire()))),
    );
    row(
        "reject",
        "bulkhead try_acquire_owned, instrumented",
        per_op(N, || drop(black_box(full_instrumented.try_acquire_owned()))),
    );
    row(
        "reject",
        "bulkhead acquire (max wait 0), instrumented",
        per_op(N, || drop(black_box(full_instrumented.acquire()))),
    );
    row(
        "reject",
        "bulkhead acquire_async (max wait 0, one poll), instrumented",
        per_op(N, || {
            let mut fut = std::pin::pin!(full_instrumented.acquire_async());
            drop(black_box(fut.as_mut().poll(&mut cx)));
        }),
    );
    row("fast", "bulkhead try_acquire + drop", per_op(N, || drop(black_box(free.try_acquire()))));
    row(
        "fast",
        "bulkhead try_acquire + drop, instrumented",
        per_op(N, || drop(black_box(free_instrumented.try_acquire()))),
    );
    row(
        "fast",
        "bulkhead try_acquire_owned + drop, instrumented",
        per_op(N, || drop(black_box(free_instrumented.try_acquire_owned()))),
    );
    row(
        "fast",
        "bulkhead acquire_async + drop (one poll), instrumented",
        per_op(N, || {
            let mut fut = std::pin::pin!(free_instrumented.acquire_async());
            drop(black_box(fut.as_mut().poll(&mut cx)));
        }),
    );
    row(
        "fast",
        "bulkhead call, instrumented",
        per_op(N, || drop(black_box(free_instrumented.call(|| black_box(1))))),
    );
    row(
        "fast",
        "bulkhead try_acquire_owned + drop",
        per_op(N, || drop(black_box(free.try_acquire_owned()))),
    );
    row("fast", "bulkhead acquire + drop", per_op(N, || drop(black_box(free.acquire()))));
    row(
        "fast",
        "bulkhead acquire_async + drop (one poll)",
        per_op(N, || {
            let mut fut = std::pin::pin!(free.acquire_async());
            drop(black_box(fut.as_mut().poll(&mut cx)));
        }),
    );
    row("fast", "bulkhead call", per_op(N, || drop(black_box(free.call(|| black_box(1))))));
    let hand = Arc::new(bulkhead(1, Duration::MAX));
    let mut holder = Some(hand.try_acquire_owned().expect("one free permit"));
    row(
        "slow",
        "bulkhead acquire_owned_async that queues, then is granted by a release",
        per_op(N, || {
            let mut fut = std::pin::pin!(hand.acquire_owned_async());
            assert!(fut.as_mut().poll(&mut cx).is_pending(), "queued");
            drop(holder.take());
            match fut.as_mut().poll(&mut cx) {
                std::task::Poll::Ready(Ok(permit)) => holder = Some(permit),
                _ => panic!("granted by the release"),
            }
        }),
    );
    row(
        "slow",
        "bulkhead acquire_timeout(1 µs) that queues and times out",
        per_op(200, || drop(black_box(waits.acquire()))),
    );
    row("reject", "tokio try_acquire", per_op(N, || drop(black_box(tokio_full.try_acquire()))));
    row(
        "reject",
        "tokio timeout(ZERO, acquire()).await",
        // Each call waits for the timer's next 1 ms tick: fewer calls.
        rt.block_on(async {
            const CALLS: u64 = 1_000;
            let region = Region::new(GLOBAL);
            for _ in 0..CALLS {
                let acquire = tokio_full.acquire();
                drop(black_box(tokio::time::timeout(Duration::ZERO, acquire).await));
            }
            let change = region.change();
            (
                (change.allocations + change.reallocations) as f64 / CALLS as f64,
                change.bytes_allocated as f64 / CALLS as f64,
            )
        }),
    );
    row(
        "fast",
        "tokio try_acquire + drop",
        per_op(N, || drop(black_box(tokio_free.try_acquire()))),
    );
    row(
        "reject",
        "async-lock try_acquire",
        per_op(N, || drop(black_box(async_lock_full.try_acquire()))),
    );
    row(
        "fast",
        "async-lock try_acquire + drop",
        per_op(N, || drop(black_box(async_lock_free.try_acquire()))),
    );
    row(
        "fast",
        "Mutex<usize> inc + dec",
        per_op(N, || {
            if mutex_try_acquire(&counter, 16) {
                mutex_release(&counter);
            }
        }),
    );
    drop(held);
    assert!(heard.load(Ordering::Relaxed) > 0, "the listener ran");

    let items: Vec<String> = rows
        .iter()
        .map(|(path, name, (allocs, bytes))| {
            format!(
                "{{\"path\":\"{path}\",\"op\":\"{name}\",\"allocs_per_op\":{allocs},\"bytes_per_op\":{bytes}}}"
            )
        })
        .collect();
    println!("[{}]", items.join(",\n"));
}

/// Overshoot statistics in microseconds: (median, p99, max, early returns).
fn stats(mut overshoot_ns: Vec<i128>) -> (f64, f64, f64, usize) {
    overshoot_ns.sort_unstable();
    let early = overshoot_ns.iter().filter(|&&o| o < 0).count();
    let at = |q: f64| {
        let i = ((overshoot_ns.len() - 1) as f64 * q).round() as usize;
        overshoot_ns[i] as f64 / 1000.0
    };
    (at(0.5), at(0.99), at(1.0), early)
}

fn deadline() {
    let waits = [
        (Duration::from_micros(100), 300),
        (Duration::from_micros(200), 300),
        (Duration::from_millis(1), 200),
        (Duration::from_millis(100), 20),
    ];
    let rt = current_thread_runtime();
    let mut items = Vec::new();
    for (wait, samples) in waits {
        let ours = bulkhead(1, wait);
        let _held = ours.try_acquire().expect("one free permit");
        let tokio_full = full_tokio();

        let mut sync = Vec::new();
        for _ in 0..samples {
            let start = Instant::now();
            let err = ours.acquire().expect_err("nobody releases");
            let elapsed = start.elapsed();
            assert_eq!(err.reason(), RejectReason::WaitTimedOut);
            sync.push(elapsed.as_nanos() as i128 - wait.as_nanos() as i128);
        }
        let (asynchronous, tokio_timeout) = rt.block_on(async {
            let mut asynchronous = Vec::new();
            for _ in 0..samples {
                let start = Instant::now();
                let err = ours.acquire_async().await.expect_err("nobody releases");
                let elapsed = start.elapsed();
                assert_eq!(err.reason(), RejectReason::WaitTimedOut);
                asynchronous.push(elapsed.as_nanos() as i128 - wait.as_nanos() as i128);
            }
            let mut tokio_timeout = Vec::new();
            for _ in 0..samples {
                let start = Instant::now();
                let res = tokio::time::timeout(wait, tokio_full.acquire()).await;
                let elapsed = start.elapsed();
                assert!(res.is_err(), "nobody releases");
                tokio_timeout.push(elapsed.as_nanos() as i128 - wait.as_nanos() as i128);
            }
            (asynchronous, tokio_timeout)
        });
        // No runtime at all: the bulkhead's own timer ends the wait.
        let mut block_on = Vec::new();
        for _ in 0..samples {
            let start = Instant::now();
            let err = futures::executor::block_on(ours.acquire_async()).expect_err("full");
            let elapsed = start.elapsed();
            assert_eq!(err.reason(), RejectReason::WaitTimedOut);
            block_on.push(elapsed.as_nanos() as i128 - wait.as_nanos() as i128);
        }
        for (how, overshoot) in [
            ("bulkhead acquire (sync)", sync),
            ("bulkhead acquire_async (current-thread tokio runtime)", asynchronous),
            ("bulkhead acquire_async (futures::executor::block_on)", block_on),
            ("tokio timeout(wait, acquire()) (current-thread runtime)", tokio_timeout),
        ] {
            let (median, p99, max, early) = stats(overshoot);
            items.push(format!(
                "{{\"wait_us\":{},\"how\":\"{how}\",\"samples\":{samples},\"median_us\":{median},\"p99_us\":{p99},\"max_us\":{max},\"early\":{early}}}",
                wait.as_micros()
            ));
        }
    }
    println!("[{}]", items.join(",\n"));
}

/// `size_of` the futures a caller holds while it waits, ours and tokio's, and of the error
/// and event types, as JSON.
fn sizes() {
    use std::mem::size_of_val;
    let bulkhead = Arc::new(bulkhead(1, Duration::from_millis(100)));
    let sem = Arc::new(tokio::sync::Semaphore::new(1));
    // tokio's timeout needs a runtime to be built in.
    let runtime = current_thread_runtime();
    let _entered = runtime.enter();
    let rows = [
        ("bulkhead Acquire (acquire_async)", size_of_val(&bulkhead.acquire_async())),
        (
            "bulkhead AcquireOwned (acquire_owned_async)",
            size_of_val(&bulkhead.acquire_owned_async()),
        ),
        (
            "bulkhead call_async(ready(())) future",
            size_of_val(&bulkhead.call_async(std::future::ready(()))),
        ),
        ("bulkhead Drained (drained)", size_of_val(&bulkhead.drained())),
        ("tokio Semaphore::acquire()", size_of_val(&sem.acquire())),
        ("tokio Semaphore::acquire_owned()", size_of_val(&Arc::clone(&sem).acquire_owned())),
        (
            "tokio timeout(100 ms, acquire())",
            size_of_val(&tokio::time::timeout(Duration::from_millis(100), sem.acquire())),
        ),
        ("tokio::time::Sleep", std::mem::size_of::<tokio::time::Sleep>()),
        ("bulkhead BulkheadFull (the error)", std::mem::size_of::<bulkhead::BulkheadFull>()),
        (
            "bulkhead Result<Permit, BulkheadFull> (try_acquire)",
            std::mem::size_of::<Result<bulkhead::Permit<'static>, bulkhead::BulkheadFull>>(),
        ),
        ("bulkhead BulkheadEvent", std::mem::size_of::<bulkhead::BulkheadEvent>()),
    ];
    let items: Vec<String> = rows
        .iter()
        .map(|(what, bytes)| format!("{{\"what\": \"{what}\", \"bytes\": {bytes}}}"))
        .collect();
    println!("[{}]", items.join(",\n"));
}

fn main() {
    match std::env::args().nth(1).as_deref() {
        Some("allocs") => allocs(),
        Some("sizes") => sizes(),
        Some("deadline") => deadline(),
        // `cargo bench` runs every bench target with `--bench`: nothing to do here.
        _ => {}
    }
}
