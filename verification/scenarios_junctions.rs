//! Where features meet (issue 29): each scenario pairs two features that share state and
//! checks work conservation (design invariant 7) at quiescence, beside the limit and the
//! permit count. Each failed before its fix (see `verification/README.md`, "Junctions"):
//!
//! - weights x the deadline timer: a weighted head the timer withdraws while its future is
//!   never polled again must not strand the free slots the waiter behind it could use;
//! - headroom x shrink: a sheddable request racing a shrink that leaves it unable to ever fit
//!   is refused, whichever of `enqueue` and `set_limit` comes first;
//! - drain x close x release: a drain waiter queued *before* `close` sees every write of the
//!   call whose release left nothing in flight;
//! - a panicking waker x a release batch: the waiter behind a waker that panics is still
//!   granted and woken, and the panic does not escape the release.
//!
//! Shared by `verification/loom.rs` and `verification/shuttle.rs`; filter with `junctions::`.

use core::future::Future;
use core::sync::atomic::Ordering::{Relaxed, SeqCst};
use core::task::{Context, Poll, Waker};
use core::time::Duration;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Once};
use std::task::Wake;

use bulkhead::{BulkheadConfig, Criticality, RejectReason, Request};

use crate::rt::{self, AtomicUsize};
use crate::scenarios::{assert_quiescent, assert_work_conserving, bulkhead, Occupancy};

/// A wait long enough that the model clock never reaches it unless a scenario says so.
const LONG_WAIT: Duration = Duration::from_secs(3600);

fn join<T>(handle: rt::JoinHandle<T>) -> T {
    match handle.join() {
        Ok(value) => value,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

fn noop() -> Waker {
    futures::task::noop_waker()
}

/// A waker whose `wake` panics with the payload the engine contains under the checkers
/// (`bulkhead::model::ContainedPanic`); it counts its calls in a std atomic (read after the
/// threads that wake it were joined).
struct PanickingWaker(std::sync::atomic::AtomicUsize);

impl Wake for PanickingWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
        std::panic::panic_any(bulkhead::model::ContainedPanic);
    }
}

/// Keeps the panic hook quiet for the contained payload (thousands of executions would each
/// print it, with a backtrace under `RUST_BACKTRACE=1`); every other panic is reported as
/// before.
fn quiet_contained_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !info.payload().is::<bulkhead::model::ContainedPanic>() {
                previous(info);
            }
        }));
    });
}

/// Weights x timer. Limit 2, one permit held throughout: a bounded async head for 2 is
/// queued by one poll, then kept alive and never polled again. Behind it a thread (or task,
/// `async_behind`) waits for 1 with no deadline of its own. The model clock passes the head's
/// deadline: the timer withdraws the head, and the slot it held back must go to the waiter
/// behind, without the head's future (before the fix: nobody served it, a deadlock).
pub fn timed_out_weighted_head_unpolled_serves_the_waiter_behind(async_behind: bool) {
    timed_out_head_unpolled_serves_the_waiter_behind(async_behind, false);
}

/// The same where five features meet (issue 31's per-call wait): the bulkhead's own wait is
/// an hour, and the head's deadline is its request's own `max_wait`; the head is weighted
/// (2) and `Critical`, and its waker panics when the timer withdraws it (contained: the
/// timer goes on, the waiter behind is still served).
pub fn per_call_wait_critical_weighted_head_with_panicking_waker_serves_the_waiter_behind() {
    quiet_contained_panics();
    timed_out_head_unpolled_serves_the_waiter_behind(false, true);
}

fn timed_out_head_unpolled_serves_the_waiter_behind(async_behind: bool, per_call: bool) {
    const DEADLINE: u64 = 5;
    let deadline = Duration::from_nanos(DEADLINE);
    let configured = if per_call { LONG_WAIT } else { deadline };
    let bulkhead = bulkhead("weights_x_timer", 2, configured, None);
    let occupancy = Occupancy::new(2);
    let held = bulkhead.try_acquire_owned().expect("free");
    let (mut head, waker) = if per_call {
        let request = Request::permits(2).criticality(Criticality::Critical).max_wait(deadline);
        let panicking = Arc::new(PanickingWaker(std::sync::atomic::AtomicUsize::new(0)));
        (Box::pin(bulkhead.acquire_many_async(request)), Waker::from(panicking))
    } else {
        (Box::pin(bulkhead.acquire_many_async(2)), noop())
    };
    assert!(head.as_mut().poll(&mut Context::from_waker(&waker)).is_pending());
    let behind = {
        let (bulkhead, occupancy) = (Arc::clone(&bulkhead), Arc::clone(&occupancy));
        rt::spawn(move || {
            let permit = if async_behind {
                // Its own sleep never fires: only a grant ends this wait.
                rt::block_on(bulkhead.acquire_async_with_sleep(|_| core::future::pending::<()>()))
            } else {
                bulkhead.acquire_timeout(LONG_WAIT)
            };
            let permit = permit.expect("granted once the head left");
            occupancy.work();
            drop(permit);
        })
    };
    let clock = rt::spawn(move || bulkhead::model::advance_to(deadline));
    join(clock);
    join(behind);
    // The head's future is still alive and unpolled: nothing may depend on it.
    assert_work_conserving(&bulkhead);
    match head.as_mut().poll(&mut Context::from_waker(&noop())) {
        Poll::Ready(Err(e)) => assert_eq!(e.reason(), RejectReason::WaitTimedOut),
        other => panic!("the head ends timed out, got {other:?}"),
    }
    drop(head);
    drop(held);
    occupancy.check(1);
    assert_quiescent(&bulkhead, 2);
}

fn headroom_config(limit: usize, headroom: usize) -> BulkheadConfig {
    BulkheadConfig::builder()
        .max_concurrent_calls(limit)
        .max_wait_duration(LONG_WAIT)
        .sheddable_headroom(headroom)
        .build()
        .expect("valid config")
}

/// Headroom x shrink. Limit 4, headroom 1, every permit held: a sheddable request for 2
/// (2 + 1 fits 4: it may queue) races a `change_config` to limit 2 (2 + 1 no longer fits).
/// Whichever comes first, the request is refused `ExceedsLimit` without any release (a
/// request left queued waits for ever: a deadlock), and nothing is lost.
pub fn shrink_racing_sheddable_enqueue_refuses_what_cannot_fit() {
    let bulkhead = Arc::new(bulkhead::Bulkhead::new("headroom_x_shrink", headroom_config(4, 1)));
    let held = bulkhead.try_acquire_many_owned(4).expect("free");
    let shed = {
        let bulkhead = Arc::clone(&bulkhead);
        rt::spawn(move || {
            let request = Request::permits(2).criticality(Criticality::Sheddable);
            match bulkhead.acquire_many(request) {
                Err(e) => assert_eq!(e.reason(), RejectReason::ExceedsLimit),
                Ok(_) => panic!("nothing was released: it cannot have been granted"),
            }
        })
    };
    let shrink = {
        let bulkhead = Arc::clone(&bulkhead);
        rt::spawn(move || bulkhead.change_config(headroom_config(2, 1)))
    };
    join(shrink);
    join(shed);
    assert_work_conserving(&bulkhead);
    drop(held);
    assert_quiescent(&bulkhead, 2);
}

/// Drain x close x release. A drain waiter queues *before* `close` (the async form is
/// polled once first; the blocking one races, and loom explores it queuing first), while a
/// worker writes (Relaxed) and then drops the last permit, lock-free if it comes before the
/// close. The drain waiter, once told "drained", must see the write: the drain that
/// completes it must acquire the last release (before the fix: a Relaxed read, and loom
/// finds the stale value).
pub fn drain_waiter_queued_before_close_sees_the_last_calls_writes(async_drain: bool) {
    let bulkhead = bulkhead("drain_x_close", 1, LONG_WAIT, None);
    let data = Arc::new(AtomicUsize::new(0));
    let permit = bulkhead.try_acquire_owned().expect("free");
    let worker = {
        let data = Arc::clone(&data);
        rt::spawn(move || {
            data.store(1, Relaxed);
            drop(permit);
        })
    };
    let drainer = if async_drain {
        let mut drained = Box::pin({
            let bulkhead = Arc::clone(&bulkhead);
            async move { bulkhead.drained().await }
        });
        let waker = noop();
        let first = drained.as_mut().poll(&mut Context::from_waker(&waker));
        let data = Arc::clone(&data);
        rt::spawn(move || {
            if first.is_pending() {
                rt::block_on(drained);
            }
            assert_eq!(data.load(Relaxed), 1, "drained before the last call's write was visible");
        })
    } else {
        let (bulkhead, data) = (Arc::clone(&bulkhead), Arc::clone(&data));
        rt::spawn(move || {
            assert!(bulkhead.wait_drained(Duration::MAX));
            assert_eq!(data.load(Relaxed), 1, "drained before the last call's write was visible");
        })
    };
    bulkhead.close();
    join(worker);
    join(drainer);
    crate::scenarios::assert_closed_and_drained(&bulkhead, 1);
}

/// A panicking waker x a release batch. Limit 2, both permits held as one batch: a task
/// queued by one poll with a waker that panics, and behind it a thread waiting for 1. A
/// release of the batch satisfies both; the first wake panics. The panic is contained (the
/// releasing thread carries on), the waiter behind is granted and woken (before the fix: it
/// stayed queued with a slot free, a deadlock), and the first waiter holds its grant.
pub fn panicking_waker_in_a_release_batch_serves_the_rest() {
    quiet_contained_panics();
    let bulkhead = bulkhead("panic_x_batch", 2, LONG_WAIT, None);
    let occupancy = Occupancy::new(2);
    let batch = bulkhead.try_acquire_many_owned(2).expect("free");
    let panicking = Arc::new(PanickingWaker(std::sync::atomic::AtomicUsize::new(0)));
    let panicking_waker = Waker::from(Arc::clone(&panicking));
    let mut first = Box::pin(bulkhead.acquire_async());
    assert!(first.as_mut().poll(&mut Context::from_waker(&panicking_waker)).is_pending());
    drop(panicking_waker);
    let behind = {
        let (bulkhead, occupancy) = (Arc::clone(&bulkhead), Arc::clone(&occupancy));
        rt::spawn(move || {
            let permit = bulkhead.acquire().expect("granted by the batch's release");
            occupancy.work();
            drop(permit);
        })
    };
    let releaser = rt::spawn(move || {
        let released = catch_unwind(AssertUnwindSafe(move || drop(batch)));
        assert!(released.is_ok(), "a waker's panic escaped the release");
    });
    join(releaser);
    join(behind);
    assert!(panicking.0.load(SeqCst) <= 1, "woken at most once");
    match first.as_mut().poll(&mut Context::from_waker(&noop())) {
        Poll::Ready(Ok(permit)) => {
            occupancy.work();
            drop(permit);
        }
        other => panic!("the first waiter was granted, got {other:?}"),
    }
    drop(first);
    occupancy.check(2);
    assert_quiescent(&bulkhead, 2);
}

/// Unfit refusal x foreign wakers (issue 29). Limit 4, all 4 held as two batches of 2; two
/// tasks queued by one poll each for 3 permits (3 fits 4: they may wait), the first with a
/// waker whose `wake` panics, the second with a waker that re-enters the bulkhead (acquires,
/// polls an acquire, reads the config) from every clone, wake and drop. A thread shrinks the
/// limit to 2 (3 no longer fits) while another releases one batch. Whichever comes first,
/// both requests are refused `ExceedsLimit` by the drain that finds them unfit: the panic
/// is contained (the shrinking or releasing thread carries on), the re-entering waker runs
/// after every lock is released (under a lock: a deadlock), and the second is refused and
/// woken although the first's wake panicked.
pub fn unfit_refusal_with_panicking_and_reentrant_wakers() {
    use crate::hostile_waker::{hostile_waker, reentrant_hook};

    quiet_contained_panics();
    let bulkhead = bulkhead("unfit_x_wakers", 4, LONG_WAIT, None);
    let first_batch = bulkhead.try_acquire_many_owned(2).expect("free");
    let second_batch = bulkhead.try_acquire_many_owned(2).expect("free");
    let panicking = Arc::new(PanickingWaker(std::sync::atomic::AtomicUsize::new(0)));
    let panicking_waker = Waker::from(Arc::clone(&panicking));
    let mut first = Box::pin(bulkhead.acquire_many_async(3));
    assert!(first.as_mut().poll(&mut Context::from_waker(&panicking_waker)).is_pending());
    drop(panicking_waker);
    let reentrant_waker = hostile_waker(reentrant_hook(&bulkhead, None, None), None);
    let mut second = Box::pin(bulkhead.acquire_many_async(3));
    assert!(second.as_mut().poll(&mut Context::from_waker(&reentrant_waker)).is_pending());
    drop(reentrant_waker);
    let shrink = {
        let bulkhead = Arc::clone(&bulkhead);
        rt::spawn(move || {
            let shrunk = catch_unwind(AssertUnwindSafe(|| {
                bulkhead.change_config(crate::scenarios::config(2, LONG_WAIT));
            }));
            assert!(shrunk.is_ok(), "a waker's panic escaped change_config");
        })
    };
    let releaser = rt::spawn(move || {
        let released = catch_unwind(AssertUnwindSafe(move || drop(first_batch)));
        assert!(released.is_ok(), "a waker's panic escaped the release");
    });
    join(shrink);
    join(releaser);
    assert_eq!(panicking.0.load(SeqCst), 1, "the panicking waker was woken once");
    for (name, acquire) in [("first", first.as_mut()), ("second", second.as_mut())] {
        match acquire.poll(&mut Context::from_waker(&noop())) {
            Poll::Ready(Err(e)) => assert_eq!(e.reason(), RejectReason::ExceedsLimit, "{name}"),
            other => panic!("the {name} request for 3 was not refused at limit 2: {other:?}"),
        }
    }
    drop((first, second));
    assert_work_conserving(&bulkhead);
    drop(second_batch);
    assert_quiescent(&bulkhead, 2);
}

/// A waker that counts its wakes (in a std atomic, read after the threads are joined).
struct CountingWaker(std::sync::atomic::AtomicUsize);

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// A newcomer granted by its own enqueue is not woken (cargo-mutants, shard 7/32:
/// `WakeList::take_last` returning `None`). Limit 1, the permit held by a thread that
/// releases it while the main thread polls an `acquire_async` once. If the release lands
/// between the poll's try and its enqueue, the drain that follows the enqueue grants the
/// newcomer itself: its wake is taken out and dropped uncalled (the caller is right there,
/// returning `Ready`). Either way, a future that is `Ready` on its first poll was never
/// woken, and one that is `Pending` is woken once, by the release.
pub fn newcomer_granted_by_its_own_enqueue_is_not_woken() {
    let bulkhead = bulkhead("own_wake", 1, LONG_WAIT, None);
    let held = bulkhead.try_acquire_owned().expect("free");
    let releaser = rt::spawn(move || drop(held));
    let counting = Arc::new(CountingWaker(std::sync::atomic::AtomicUsize::new(0)));
    let waker = Waker::from(Arc::clone(&counting));
    let mut acquire = Box::pin(bulkhead.acquire_async());
    match acquire.as_mut().poll(&mut Context::from_waker(&waker)) {
        Poll::Ready(Ok(permit)) => {
            join(releaser);
            assert_eq!(counting.0.load(SeqCst), 0, "granted on its first poll, and woken");
            drop(permit);
        }
        Poll::Pending => {
            join(releaser);
            assert_eq!(counting.0.load(SeqCst), 1, "queued, then granted by the release");
            match acquire.as_mut().poll(&mut Context::from_waker(&noop())) {
                Poll::Ready(Ok(permit)) => drop(permit),
                other => panic!("the release did not reach the queued future: {other:?}"),
            }
        }
        Poll::Ready(Err(e)) => panic!("refused with a wait of an hour: {e}"),
    }
    drop(acquire);
    assert_quiescent(&bulkhead, 1);
}

/// The keyed named future (issue 30) x cancel x release: key limit 1, a total of 1 held by
/// key 0's owned permit, which another thread drops while the main thread drops `first`
/// (`acquire_async(&1)`, waiting at the total with key 1's slot held). `second`
/// (`acquire_async(&2)`) waits at the total behind it. Whether the release grants `first`
/// before its drop (which must pass the slot on) or after (which finds it gone), `second` is
/// granted with nothing else in motion, and every level is quiescent and work-conserving.
pub fn keyed_total_waiter_dropped_racing_release() {
    let config = |limit| {
        BulkheadConfig::builder()
            .max_concurrent_calls(limit)
            .max_wait_duration(LONG_WAIT)
            .build()
            .expect("valid config")
    };
    let keyed = bulkhead::keyed::KeyedBulkhead::<usize>::builder("keyed")
        .default_config(config(1))
        .total(config(1))
        .build()
        .expect("valid keyed config");
    let held = keyed.try_acquire_owned(&0).expect("free");
    let mut first = Box::pin(keyed.acquire_async(&1));
    let mut second = Box::pin(keyed.acquire_async(&2));
    let waker = noop();
    let mut cx = Context::from_waker(&waker);
    assert!(first.as_mut().poll(&mut cx).is_pending(), "the total is held");
    assert!(second.as_mut().poll(&mut cx).is_pending(), "behind `first` at the total");
    let releaser = rt::spawn(move || drop(held));
    drop(first);
    join(releaser);
    match second.as_mut().poll(&mut cx) {
        Poll::Ready(Ok(permit)) => drop(permit),
        other => panic!("the total's slot was stranded by the dropped waiter: {other:?}"),
    }
    drop(second);
    for key in [0, 1, 2] {
        assert_quiescent(&keyed.key_bulkhead(&key).expect("live"), 1);
    }
    assert_quiescent(keyed.total().expect("a total"), 1);
}
