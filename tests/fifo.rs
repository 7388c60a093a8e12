//! FIFO: queued callers, sync and async alike, are granted in arrival order, one release at
//! a time, and no newcomer overtakes them.

mod common;

use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::task::Poll;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use bulkhead::{Acquire, Bulkhead};
use common::*;

/// A sync waiter on its own thread: reports its id when granted, then holds the permit until
/// told to release it.
struct SyncWaiter {
    release: Sender<()>,
    handle: JoinHandle<()>,
}

fn spawn_sync_waiter(bulkhead: &Arc<Bulkhead>, id: usize, granted: &Sender<usize>) -> SyncWaiter {
    let (release, release_rx) = mpsc::channel::<()>();
    let bh = Arc::clone(bulkhead);
    let granted = granted.clone();
    let handle = thread::spawn(move || {
        let permit = bh.acquire_timeout(LONG_WAIT).expect("a queued waiter is granted");
        granted.send(id).unwrap();
        release_rx.recv().unwrap();
        drop(permit);
    });
    SyncWaiter { release, handle }
}

fn expect_grant(granted: &Receiver<usize>, id: usize) {
    let got = granted.recv_timeout(HANG_GUARD).expect("hang guard: no grant");
    assert_eq!(got, id, "waiter {got} was granted out of turn (expected {id})");
}

fn expect_no_grant(granted: &Receiver<usize>) {
    if let Ok(id) = granted.try_recv() {
        panic!("waiter {id} was granted out of turn");
    }
}

#[test]
fn fifo_sync_waiters_are_granted_in_arrival_order() {
    with_hang_guard(|| {
        const N: usize = 8;
        let bulkhead = shared("fifo-sync", limit(1));
        let held = bulkhead.try_acquire().unwrap();
        let (granted_tx, granted_rx) = mpsc::channel();
        let mut waiters = Vec::new();
        for id in 0..N {
            waiters.push(spawn_sync_waiter(&bulkhead, id, &granted_tx));
            wait_for_waiters(&bulkhead, id + 1);
        }
        drop(held);
        for (id, waiter) in waiters.into_iter().enumerate() {
            expect_grant(&granted_rx, id);
            assert_eq!(bulkhead.metrics().waiting_calls(), N - id - 1);
            assert!(bulkhead.try_acquire().is_err(), "a newcomer overtook the queue");
            // Give a wrongly woken waiter a moment to show itself.
            thread::sleep(Duration::from_millis(2));
            expect_no_grant(&granted_rx);
            waiter.release.send(()).unwrap();
            join_guarded(waiter.handle);
        }
        assert_quiescent(&bulkhead, 1);
    });
}

#[test]
fn fifo_sync_waiters_with_limit_above_one_keep_order() {
    with_hang_guard(|| {
        const N: usize = 6;
        let bulkhead = shared("fifo-sync-limit-2", limit(2));
        let held: Vec<_> = (0..2).map(|_| bulkhead.try_acquire().unwrap()).collect();
        let (granted_tx, granted_rx) = mpsc::channel();
        let mut waiters = Vec::new();
        for id in 0..N {
            waiters.push(spawn_sync_waiter(&bulkhead, id, &granted_tx));
            wait_for_waiters(&bulkhead, id + 1);
        }
        drop(held); // two grants: 0 and 1, in either report order
        let mut first = [
            granted_rx.recv_timeout(HANG_GUARD).unwrap(),
            granted_rx.recv_timeout(HANG_GUARD).unwrap(),
        ];
        first.sort_unstable();
        assert_eq!(first, [0, 1]);
        for id in 2..N {
            waiters[id - 2].release.send(()).unwrap();
            expect_grant(&granted_rx, id);
        }
        for waiter in &waiters[N - 2..] {
            waiter.release.send(()).unwrap();
        }
        for waiter in waiters {
            join_guarded(waiter.handle);
        }
        assert_quiescent(&bulkhead, 2);
    });
}

enum Mixed<'a> {
    Sync(SyncWaiter),
    Async(std::pin::Pin<Box<Acquire<'a>>>, Arc<CountingWaker>, std::task::Waker),
}

/// Sync and async waiters share one queue: alternating arrivals are granted alternately.
#[test]
fn fifo_mixed_sync_and_async_waiters_are_granted_in_arrival_order() {
    with_hang_guard(|| {
        const N: usize = 8;
        let bulkhead = shared("fifo-mixed", limit_wait(1, LONG_WAIT));
        let held = bulkhead.try_acquire().unwrap();
        let (granted_tx, granted_rx) = mpsc::channel();
        let mut waiters = Vec::new();
        for id in 0..N {
            if id % 2 == 0 {
                waiters.push(Mixed::Sync(spawn_sync_waiter(&bulkhead, id, &granted_tx)));
            } else {
                let (counter, waker) = CountingWaker::new();
                let mut fut = Box::pin(bulkhead.acquire_async());
                assert!(poll_once(&mut fut, &waker).is_pending(), "async waiter {id} queued");
                waiters.push(Mixed::Async(fut, counter, waker));
            }
            wait_for_waiters(&bulkhead, id + 1);
        }
        drop(held);
        let mut rest = waiters;
        for id in 0..N {
            let waiter = rest.remove(0);
            // Nobody behind the head may have been woken or granted.
            for later in &rest {
                if let Mixed::Async(_, counter, _) = later {
                    assert_eq!(counter.wakes(), 0, "an async waiter behind {id} was woken");
                }
            }
            match waiter {
                Mixed::Sync(waiter) => {
                    expect_grant(&granted_rx, id);
                    thread::sleep(Duration::from_millis(2));
                    expect_no_grant(&granted_rx);
                    waiter.release.send(()).unwrap();
                    join_guarded(waiter.handle);
                }
                Mixed::Async(mut fut, counter, waker) => {
                    wait_until("async waiter woken", || counter.wakes() > 0);
                    let permit = match poll_once(&mut fut, &waker) {
                        Poll::Ready(result) => result.expect("granted"),
                        Poll::Pending => panic!("async waiter {id} woken but not granted"),
                    };
                    thread::sleep(Duration::from_millis(2));
                    expect_no_grant(&granted_rx);
                    drop(permit);
                }
            }
        }
        assert_quiescent(&bulkhead, 1);
    });
}

/// A waiter that times out in the middle of the queue does not disturb the order of the
/// others.
#[test]
fn fifo_with_waiter_timing_out_mid_queue_keeps_order() {
    with_hang_guard(|| {
        let bulkhead = shared("fifo-timeout-mid", limit(1));
        let held = bulkhead.try_acquire().unwrap();
        let (granted_tx, granted_rx) = mpsc::channel();
        let first = spawn_sync_waiter(&bulkhead, 0, &granted_tx);
        wait_for_waiters(&bulkhead, 1);
        let err = bulkhead.acquire_timeout(Duration::from_millis(5)).unwrap_err();
        assert_eq!(err.reason(), bulkhead::RejectReason::WaitTimedOut);
        let third = spawn_sync_waiter(&bulkhead, 2, &granted_tx);
        wait_for_waiters(&bulkhead, 2);
        drop(held);
        expect_grant(&granted_rx, 0);
        first.release.send(()).unwrap();
        expect_grant(&granted_rx, 2);
        third.release.send(()).unwrap();
        join_guarded(first.handle);
        join_guarded(third.handle);
        assert_quiescent(&bulkhead, 1);
    });
}

/// Tokio tasks queued in a known order are served in that order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifo_tokio_tasks_are_granted_in_arrival_order() {
    const N: usize = 6;
    let bulkhead = shared("fifo-tokio", limit_wait(1, LONG_WAIT));
    let held = bulkhead.try_acquire_owned().unwrap();
    let (granted_tx, mut granted_rx) = tokio::sync::mpsc::unbounded_channel();
    let mut releases = Vec::new();
    let mut tasks = Vec::new();
    for id in 0..N {
        let (release_tx, release_rx) = tokio::sync::oneshot::channel::<()>();
        releases.push(release_tx);
        let bh = Arc::clone(&bulkhead);
        let granted = granted_tx.clone();
        tasks.push(tokio::spawn(async move {
            let permit = bh.acquire_owned_async().await.expect("granted");
            granted.send(id).unwrap();
            release_rx.await.unwrap();
            drop(permit);
        }));
        let start = std::time::Instant::now();
        while bulkhead.metrics().waiting_calls() != id + 1 {
            assert!(start.elapsed() < HANG_GUARD, "hang guard: task {id} never queued");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    drop(held);
    for (id, release) in releases.into_iter().enumerate() {
        let got = tokio::time::timeout(HANG_GUARD, granted_rx.recv())
            .await
            .expect("hang guard")
            .expect("channel open");
        assert_eq!(got, id, "task {got} granted out of turn");
        release.send(()).unwrap();
    }
    for task in tasks {
        tokio::time::timeout(HANG_GUARD, task).await.expect("hang guard").unwrap();
    }
    assert_quiescent(&bulkhead, 1);
}
