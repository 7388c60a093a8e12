//! Async stress on a multi-thread tokio runtime: many tasks, random cancellation (outer
//! timeouts, futures dropped after one poll, aborted tasks) and short max waits. Concurrent
//! holders never exceed the limit, and at the end every permit is back.

mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bulkhead::{Bulkhead, RejectReason};
use common::*;

const TASKS: usize = 64;
const RUN_FOR: Duration = Duration::from_millis(1200);

/// Holding a permit asynchronously (the counting itself is `common::Holders`).
trait HoldAsync {
    async fn hold(&self, limit: usize, rng: &mut XorShift);
}

impl HoldAsync for Holders {
    async fn hold(&self, limit: usize, rng: &mut XorShift) {
        self.enter(limit);
        match rng.below(3) {
            0 => tokio::task::yield_now().await,
            1 => tokio::time::sleep(Duration::from_micros(rng.below(200))).await,
            _ => {}
        }
        self.leave();
    }
}

/// Polls a future exactly once, then drops it: cancellation right after it queued.
struct PollOnceThenDrop<F>(Option<F>);

impl<F: Future + Unpin> Future for PollOnceThenDrop<F> {
    type Output = Option<F::Output>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut fut = self.0.take().expect("polled once");
        let out = match Pin::new(&mut fut).poll(cx) {
            Poll::Ready(out) => Some(out),
            Poll::Pending => None,
        };
        drop(fut);
        Poll::Ready(out)
    }
}

#[derive(Default)]
struct Counts {
    granted: AtomicUsize,
    rejected: AtomicUsize,
    cancelled: AtomicUsize,
}

async fn worker(
    bulkhead: Arc<Bulkhead>,
    holders: Arc<Holders>,
    counts: Arc<Counts>,
    limit: usize,
    seed: u64,
    until: Instant,
) {
    let mut rng = XorShift::new(seed);
    let max_wait = bulkhead.config().max_wait_duration();
    while Instant::now() < until {
        match rng.below(6) {
            // An outer timeout that may cancel the acquire while it is queued.
            0 => {
                let outer = Duration::from_micros(rng.below(500));
                match tokio::time::timeout(outer, bulkhead.acquire_async()).await {
                    Ok(Ok(permit)) => {
                        holders.hold(limit, &mut rng).await;
                        drop(permit);
                        counts.granted.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(Err(err)) => check_rejection(&err, &counts, max_wait),
                    Err(_) => {
                        counts.cancelled.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            // The configured max wait, bounded by tokio's timer.
            1 => match bulkhead.acquire_async().await {
                Ok(permit) => {
                    holders.hold(limit, &mut rng).await;
                    drop(permit);
                    counts.granted.fetch_add(1, Ordering::Relaxed);
                }
                Err(err) => check_rejection(&err, &counts, max_wait),
            },
            // Dropped right after its first poll.
            2 => match PollOnceThenDrop(Some(Box::pin(bulkhead.acquire_async()))).await {
                Some(Ok(permit)) => {
                    holders.hold(limit, &mut rng).await;
                    drop(permit);
                    counts.granted.fetch_add(1, Ordering::Relaxed);
                }
                Some(Err(err)) => check_rejection(&err, &counts, max_wait),
                None => {
                    counts.cancelled.fetch_add(1, Ordering::Relaxed);
                }
            },
            // call_async, sometimes cancelled mid-flight by an outer timeout.
            3 => {
                let outer = Duration::from_micros(200 + rng.below(800));
                let holders = Arc::clone(&holders);
                let mut inner_rng = XorShift::new(rng.next_u64());
                let work = async move { holders.hold_cancellable(limit, &mut inner_rng).await };
                match tokio::time::timeout(outer, bulkhead.call_async(work)).await {
                    Ok(Ok(())) => {
                        counts.granted.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(Err(err)) => check_rejection(&err, &counts, max_wait),
                    Err(_) => {
                        counts.cancelled.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            // A spawned owned acquire, sometimes aborted.
            4 => {
                let task = tokio::spawn(bulkhead.acquire_owned_async());
                if rng.below(2) == 0 {
                    tokio::time::sleep(Duration::from_micros(rng.below(300))).await;
                    task.abort();
                }
                match task.await {
                    Ok(Ok(permit)) => {
                        holders.hold(limit, &mut rng).await;
                        drop(permit);
                        counts.granted.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(Err(err)) => check_rejection(&err, &counts, max_wait),
                    Err(join) => {
                        assert!(join.is_cancelled(), "the acquire task panicked: {join}");
                        counts.cancelled.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            _ => match bulkhead.try_acquire() {
                Ok(permit) => {
                    holders.enter(limit);
                    holders.leave();
                    drop(permit);
                    counts.granted.fetch_add(1, Ordering::Relaxed);
                }
                Err(err) => {
                    assert_eq!(err.reason(), RejectReason::Full);
                    counts.rejected.fetch_add(1, Ordering::Relaxed);
                }
            },
        }
    }
}

impl Holders {
    /// Like `hold`, but safe to cancel at its await point: the count is left on drop.
    async fn hold_cancellable(&self, limit: usize, rng: &mut XorShift) {
        struct Leave<'a>(&'a Holders);
        impl Drop for Leave<'_> {
            fn drop(&mut self) {
                self.0.leave();
            }
        }
        self.enter(limit);
        let _leave = Leave(self);
        tokio::time::sleep(Duration::from_micros(rng.below(400))).await;
    }
}

fn check_rejection(err: &bulkhead::BulkheadFull, counts: &Counts, max_wait: Duration) {
    match err.reason() {
        RejectReason::Full | RejectReason::TooManyWaiting => {
            assert_eq!(err.waited(), Duration::ZERO)
        }
        RejectReason::WaitTimedOut => {
            assert!(err.waited() >= max_wait, "waited {:?} < {max_wait:?}", err.waited())
        }
        other => panic!("unknown reason {other:?}"),
    }
    counts.rejected.fetch_add(1, Ordering::Relaxed);
}

async fn run(name: &str, limit: usize, config: bulkhead::BulkheadConfig) {
    let bulkhead = shared(name, config);
    let holders = Arc::new(Holders::default());
    let counts = Arc::new(Counts::default());
    let until = Instant::now() + RUN_FOR;
    let tasks: Vec<_> = (0..TASKS)
        .map(|i| {
            tokio::spawn(worker(
                Arc::clone(&bulkhead),
                Arc::clone(&holders),
                Arc::clone(&counts),
                limit,
                0xa5_0000 + i as u64,
                until,
            ))
        })
        .collect();
    for task in tasks {
        tokio::time::timeout(HANG_GUARD, task)
            .await
            .expect("hang guard: a stress task is stuck")
            .expect("a stress task panicked");
    }
    assert_quiescent(&bulkhead, limit);
    assert_eq!(holders.now.load(Ordering::SeqCst), 0);
    let granted = counts.granted.load(Ordering::Relaxed);
    let rejected = counts.rejected.load(Ordering::Relaxed);
    let cancelled = counts.cancelled.load(Ordering::Relaxed);
    let peak = holders.peak.load(Ordering::SeqCst);
    println!("{name}: granted {granted}, rejected {rejected}, cancelled {cancelled}, peak {peak}");
    assert!(granted > 0, "the stress admitted nothing");
    assert!(rejected + cancelled > 0, "the stress never filled the bulkhead");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn async_stress_random_cancellation_never_exceeds_limit() {
    run("async-stress", 4, limit_wait(4, Duration::from_micros(300))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn async_stress_with_waiter_cap_never_exceeds_limit() {
    run("async-stress-capped", 2, limit_wait_cap(2, Duration::from_millis(1), 8)).await;
}

/// Sync threads and async tasks share one queue under load.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_stress_with_sync_threads_on_the_same_bulkhead() {
    const LIMIT: usize = 3;
    let bulkhead = shared("async-stress-mixed", limit_wait(LIMIT, Duration::from_micros(500)));
    let holders = Arc::new(Holders::default());
    let counts = Arc::new(Counts::default());
    let until = Instant::now() + RUN_FOR;
    let threads: Vec<_> = (0..3)
        .map(|t| {
            let bh = Arc::clone(&bulkhead);
            let holders = Arc::clone(&holders);
            std::thread::spawn(move || {
                let mut rng = XorShift::new(0x7e_0000 + t);
                while Instant::now() < until {
                    let wait = Duration::from_micros(rng.below(400));
                    if let Ok(permit) = bh.acquire_timeout(wait) {
                        holders.enter(LIMIT);
                        std::thread::yield_now();
                        holders.leave();
                        drop(permit);
                    }
                }
            })
        })
        .collect();
    let tasks: Vec<_> = (0..32)
        .map(|i| {
            tokio::spawn(worker(
                Arc::clone(&bulkhead),
                Arc::clone(&holders),
                Arc::clone(&counts),
                LIMIT,
                0xb6_0000 + i,
                until,
            ))
        })
        .collect();
    for task in tasks {
        tokio::time::timeout(HANG_GUARD, task).await.expect("hang guard").expect("no panic");
    }
    let joined = tokio::task::spawn_blocking(move || {
        for thread in threads {
            join_guarded(thread);
        }
    });
    tokio::time::timeout(HANG_GUARD, joined).await.expect("hang guard").unwrap();
    assert_quiescent(&bulkhead, LIMIT);
}
