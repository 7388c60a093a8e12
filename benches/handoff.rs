//! Hand-off latency: from a release to the parked waiter running with its permit.
//!
//! Two players share a limit of 1 and pass the permit back and forth. Before each release
//! the holder waits until the other player is queued, then lets it settle (so a sync waiter
//! is really parked and an async waiter's task has returned `Pending`), stamps the time and
//! releases; the woken player reads the clock as soon as it holds the permit. Criterion
//! receives the sum of these release → running intervals, so its "time per iteration" is
//! the mean hand-off latency; the settle time and the re-queueing are not counted.
//!
//! Run with `cargo bench --bench handoff`.

use std::future::Future;
use std::hint::{black_box, spin_loop};
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::thread;
use std::time::{Duration, Instant};

use criterion::Criterion;

mod common;
use common::*;

/// How long a holder waits after seeing its partner queued before it releases. A sync
/// waiter parks within a few microseconds of queueing.
const SYNC_SETTLE: Duration = Duration::from_micros(20);
/// The same for an async waiter: its task only has to return `Pending` to its worker.
const ASYNC_SETTLE: Duration = Duration::from_micros(5);

/// State shared by the two players of one measurement.
struct Handoff {
    epoch: Instant,
    /// When the last release happened, in nanoseconds since `epoch`.
    stamp: AtomicU64,
    /// Hand-offs done so far, and how many to do.
    count: AtomicU64,
    target: u64,
    done: AtomicBool,
    /// Set by a player once its acquire is queued (async players and park/unpark).
    queued: [AtomicBool; 2],
    /// The park/unpark ping-pong's "your turn" flags.
    turn: [AtomicBool; 2],
    /// Hand-offs received so far (async players).
    received: AtomicU64,
}

impl Handoff {
    fn new(target: u64) -> Arc<Handoff> {
        Arc::new(Handoff {
            epoch: Instant::now(),
            stamp: AtomicU64::new(0),
            count: AtomicU64::new(0),
            target,
            done: AtomicBool::new(false),
            queued: [AtomicBool::new(false), AtomicBool::new(false)],
            turn: [AtomicBool::new(false), AtomicBool::new(false)],
            received: AtomicU64::new(0),
        })
    }

    fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// The latency of the hand-off that just reached us.
    fn since_release(&self) -> u64 {
        self.now().saturating_sub(self.stamp.load(Ordering::Acquire))
    }

    /// Counts a hand-off and stamps the release about to happen. Returns whether it is the
    /// last one.
    fn release_now(&self) -> bool {
        let last = self.count.fetch_add(1, Ordering::Relaxed) + 1 >= self.target;
        if last {
            self.done.store(true, Ordering::Release);
        }
        self.stamp.store(self.now(), Ordering::Release);
        last
    }

    fn done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }
}

fn settle(wait: Duration) {
    let start = Instant::now();
    while start.elapsed() < wait {
        spin_loop();
    }
}

/// One sync player: returns the summed latency of the hand-offs it received.
fn sync_bulkhead_player(bulkhead: &bulkhead::Bulkhead, shared: &Handoff) -> u64 {
    let mut received = 0;
    loop {
        let permit = bulkhead.acquire().expect("a 10 s wait is enough");
        // Only the run's very first acquire finds the permit free (before any release);
        // every later one is a hand-off, granted after `release_now` counted it.
        if shared.count.load(Ordering::Relaxed) > 0 {
            received += shared.since_release();
        }
        if shared.done() {
            drop(permit);
            return received;
        }
        // With two players, any queued caller is the partner.
        while bulkhead.metrics().waiting_calls() == 0 {
            spin_loop();
        }
        settle(SYNC_SETTLE);
        let last = shared.release_now();
        drop(permit);
        if last {
            return received;
        }
    }
}

/// One player of the bare `thread::park`/`unpark` ping-pong; player 0 starts with the turn.
fn park_player(me: usize, other: &thread::Thread, shared: &Handoff) -> u64 {
    let mut received = 0;
    let mut has_turn = me == 0;
    loop {
        if !has_turn {
            shared.queued[me].store(true, Ordering::Release);
            while !shared.turn[me].swap(false, Ordering::AcqRel) {
                thread::park();
            }
            received += shared.since_release();
            if shared.done() {
                return received;
            }
        }
        has_turn = false;
        while !shared.queued[1 - me].swap(false, Ordering::AcqRel) {
            spin_loop();
        }
        settle(SYNC_SETTLE);
        let last = shared.release_now();
        shared.turn[1 - me].store(true, Ordering::Release);
        other.unpark();
        if last {
            return received;
        }
    }
}

/// One async player: `acquire()` builds the acquire future of the semaphore under test.
async fn async_player<A, F, P>(me: usize, shared: Arc<Handoff>, acquire: A) -> u64
where
    A: Fn() -> F,
    F: Future<Output = P>,
{
    let mut received = 0;
    loop {
        // The acquire future is dropped as soon as it has produced the permit, as
        // `.await` on it would: a finished future still holding its listener would keep
        // async-lock's `notify(1)` from reaching the next waiter.
        let permit = {
            let mut fut = pin!(acquire());
            // A first poll that finds the permit free happens only at the start of the run;
            // every other acquire queues and is granted by the partner's release.
            match futures::poll!(fut.as_mut()) {
                Poll::Ready(permit) => permit,
                Poll::Pending => {
                    shared.queued[me].store(true, Ordering::Release);
                    let permit = fut.await;
                    received += shared.since_release();
                    shared.received.fetch_add(1, Ordering::Release);
                    permit
                }
            }
        };
        if shared.done() {
            drop(permit);
            return received;
        }
        while !shared.queued[1 - me].swap(false, Ordering::AcqRel) {
            tokio::task::yield_now().await;
        }
        settle(ASYNC_SETTLE);
        let last = shared.release_now();
        let handed = shared.count.load(Ordering::Relaxed);
        drop(permit);
        if last {
            return received;
        }
        // async-lock's semaphore is not FIFO: a releaser that polls again at once takes the
        // permit back before the woken waiter runs. Wait (untimed) until the partner holds it,
        // so every competitor is measured on the same ping-pong.
        while shared.received.load(Ordering::Acquire) < handed {
            tokio::task::yield_now().await;
        }
    }
}

fn handoff(c: &mut Criterion) {
    let mut group = c.benchmark_group("handoff");

    let ours = Arc::new(bulkhead(1, Duration::from_secs(10)));
    group.bench_function("bulkhead/sync", |b| {
        b.iter_custom(|iters| {
            let shared = Handoff::new(iters);
            let partner = {
                let (ours, shared) = (Arc::clone(&ours), Arc::clone(&shared));
                thread::spawn(move || sync_bulkhead_player(&ours, &shared))
            };
            let mine = sync_bulkhead_player(&ours, &shared);
            let theirs = partner.join().expect("the partner does not panic");
            Duration::from_nanos(mine + theirs)
        })
    });

    group.bench_function("std/park_unpark", |b| {
        b.iter_custom(|iters| {
            let shared = Handoff::new(iters);
            let main = thread::current();
            let partner = {
                let shared = Arc::clone(&shared);
                thread::spawn(move || park_player(1, &main, &shared))
            };
            let mine = park_player(0, partner.thread(), &shared);
            let theirs = partner.join().expect("the partner does not panic");
            Duration::from_nanos(mine + theirs)
        })
    });

    let rt = two_worker_runtime();
    let tokio_sem = Arc::new(tokio::sync::Semaphore::new(1));
    let async_lock_sem = Arc::new(async_lock::Semaphore::new(1));
    group.bench_function("bulkhead/async", |b| {
        b.iter_custom(|iters| {
            let shared = Handoff::new(iters);
            let players = (0..2).map(|me| {
                let (ours, shared) = (Arc::clone(&ours), Arc::clone(&shared));
                rt.spawn(async move { async_player(me, shared, || ours.acquire_async()).await })
            });
            let players: Vec<_> = players.collect();
            Duration::from_nanos(rt.block_on(join_sum(players)))
        })
    });
    // The same with an unbounded max wait: no tokio timer is armed when the waiter queues
    // (nor cancelled when it is granted), which isolates the timer's share of the above.
    let unbounded = Arc::new(bulkhead(1, Duration::MAX));
    group.bench_function("bulkhead/async_unbounded_wait", |b| {
        b.iter_custom(|iters| {
            let shared = Handoff::new(iters);
            let players = (0..2).map(|me| {
                let (ours, shared) = (Arc::clone(&unbounded), Arc::clone(&shared));
                rt.spawn(async move { async_player(me, shared, || ours.acquire_async()).await })
            });
            let players: Vec<_> = players.collect();
            Duration::from_nanos(rt.block_on(join_sum(players)))
        })
    });
    group.bench_function("tokio/async", |b| {
        b.iter_custom(|iters| {
            let shared = Handoff::new(iters);
            let players = (0..2).map(|me| {
                let (sem, shared) = (Arc::clone(&tokio_sem), Arc::clone(&shared));
                rt.spawn(async move { async_player(me, shared, || sem.acquire()).await })
            });
            let players: Vec<_> = players.collect();
            Duration::from_nanos(rt.block_on(join_sum(players)))
        })
    });
    group.bench_function("async_lock/async", |b| {
        b.iter_custom(|iters| {
            let shared = Handoff::new(iters);
            let players = (0..2).map(|me| {
                let (sem, shared) = (Arc::clone(&async_lock_sem), Arc::clone(&shared));
                rt.spawn(async move { async_player(me, shared, || sem.acquire()).await })
            });
            let players: Vec<_> = players.collect();
            Duration::from_nanos(rt.block_on(join_sum(players)))
        })
    });
    group.finish();
    black_box(&ours);
}

async fn join_sum(players: Vec<tokio::task::JoinHandle<u64>>) -> u64 {
    let mut sum = 0;
    for player in players {
        sum += player.await.expect("a player does not panic");
    }
    sum
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    handoff(&mut c);
    c.final_summary();
}
