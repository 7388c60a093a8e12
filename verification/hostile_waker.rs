//! A hostile waker: its `clone`, `wake`, `wake_by_ref` and `drop` each run a hook, which
//! re-enters the bulkhead the waker waits on (acquire, release, close, change_config,
//! metrics, drain): [`reentrant_hook`] and [`reenter`]. Shared by `tests/reentrant.rs` (real
//! threads) and the loom and shuttle scenarios (`verification/scenarios_reentrant.rs`).
//!
//! A waker is foreign code to the bulkhead: with many executors the last waker reference
//! owns the task, so its `drop` may drop a future and a permit inside it. Any of these hooks
//! run while a lock of the bulkhead is held deadlocks (its mutexes are not re-entrant): that
//! is what these wakers are for.
//!
//! Building a `Waker` with hooks on `clone` and `drop` needs a `RawWaker` vtable, hence the
//! `unsafe` below (test code only; the library forbids `unsafe`).
#![allow(unsafe_code, dead_code)]

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::task::{Context, RawWaker, RawWakerVTable, Waker};
use std::time::Duration;

use bulkhead::Bulkhead;

/// What the waker was asked to do when its hook ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Clone,
    Wake,
    WakeByRef,
    Drop,
}

/// The hook: called with the operation, on the thread that performs it.
pub type Hook = dyn Fn(Op) + Send + Sync + 'static;

struct Inner {
    hook: Box<Hook>,
    /// Woken when the waker is woken: lets a test thread wait for a wake without spinning.
    on_wake: Option<Waker>,
}

/// A waker whose every operation runs `hook` (every reference's drop too); `wake` also
/// wakes `on_wake` (if any). Whatever the hook captures (a permit, say) is dropped with the
/// last reference.
pub fn hostile_waker(hook: impl Fn(Op) + Send + Sync + 'static, on_wake: Option<Waker>) -> Waker {
    let inner = Arc::new(Inner { hook: Box::new(hook), on_wake });
    let raw = RawWaker::new(Arc::into_raw(inner).cast::<()>(), &VTABLE);
    // SAFETY: the vtable's functions treat the data pointer as an `Arc<Inner>` obtained
    // from `Arc::into_raw`, keeping the reference count in step with clones and drops.
    unsafe { Waker::from_raw(raw) }
}

static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, wake, wake_by_ref, drop_waker);

/// # Safety
/// `data` comes from `Arc::<Inner>::into_raw` and its reference is live.
unsafe fn inner<'a>(data: *const ()) -> &'a Inner {
    // SAFETY: per the function's contract.
    unsafe { &*data.cast::<Inner>() }
}

unsafe fn clone(data: *const ()) -> RawWaker {
    // SAFETY: `data` is a live `Arc<Inner>` pointer (vtable contract); the new RawWaker
    // owns the reference added here.
    unsafe {
        Arc::increment_strong_count(data.cast::<Inner>());
        (inner(data).hook)(Op::Clone);
    }
    RawWaker::new(data, &VTABLE)
}

unsafe fn wake(data: *const ()) {
    // SAFETY: `wake` consumes the waker's reference: run the hook, then drop it.
    unsafe {
        let inner_ref = inner(data);
        (inner_ref.hook)(Op::Wake);
        if let Some(waker) = &inner_ref.on_wake {
            waker.wake_by_ref();
        }
        drop(Arc::from_raw(data.cast::<Inner>()));
    }
}

unsafe fn wake_by_ref(data: *const ()) {
    // SAFETY: `data` is a live `Arc<Inner>` pointer; the reference is not consumed.
    unsafe {
        let inner_ref = inner(data);
        (inner_ref.hook)(Op::WakeByRef);
        if let Some(waker) = &inner_ref.on_wake {
            waker.wake_by_ref();
        }
    }
}

unsafe fn drop_waker(data: *const ()) {
    // SAFETY: `data` is live until the `from_raw` below gives this waker's reference back;
    // the last one drops the hook and what it captured.
    unsafe {
        (inner(data).hook)(Op::Drop);
        drop(Arc::from_raw(data.cast::<Inner>()));
    }
}

/// Every public operation of `bulkhead` that takes or may take one of its locks, once: a
/// refusal or a permit taken and released, an async acquire queued with another waker and
/// withdrawn on drop (the queue lock), the blocking slow path (queued, parked a microsecond,
/// withdrawn), the config lock and a limit change that may serve waiters, metrics, a
/// zero-timeout drain wait (queued and withdrawn), and `close` if asked.
///
/// Under a model checker nothing may block (no time passes there), so the blocking acquire
/// is left out; under loom, whose cost grows with every lock operation, one operation per
/// lock is kept: the async acquire and `config()`.
pub fn reenter(bulkhead: &Bulkhead, close: bool) {
    drop(bulkhead.try_acquire());
    {
        let noop = futures::task::noop_waker();
        let mut acquire = Box::pin(bulkhead.acquire_async());
        drop(acquire.as_mut().poll(&mut Context::from_waker(&noop)));
    }
    if cfg!(bulkhead_loom) {
        let _ = bulkhead.config();
    } else {
        if !cfg!(bulkhead_shuttle) {
            drop(bulkhead.acquire_timeout(Duration::from_micros(1)));
        }
        bulkhead.change_config(bulkhead.config());
        assert!(bulkhead.metrics().max_allowed_concurrent_calls() >= 1);
        let _ = bulkhead.wait_drained(Duration::ZERO);
    }
    if close {
        bulkhead.close();
    }
}

/// A waker hook that re-enters `bulkhead` (if it is still alive: the hook holds it by a
/// `Weak`, so a waker left in a queue does not keep its bulkhead alive) on every operation,
/// closes it on `close_on`, and counts its runs in `ops` if given. Under loom a clone
/// re-enters only when it closes (a clone is made outside the lock by construction: no
/// `&Waker` is held under it); drops and wakes always re-enter.
pub fn reentrant_hook(
    bulkhead: &Arc<Bulkhead>,
    close_on: Option<Op>,
    ops: Option<&Arc<AtomicUsize>>,
) -> impl Fn(Op) + Send + Sync + 'static {
    let weak: Weak<Bulkhead> = Arc::downgrade(bulkhead);
    let ops = ops.map(Arc::clone);
    move |op| {
        if let Some(ops) = &ops {
            ops.fetch_add(1, Ordering::Relaxed);
        }
        if cfg!(bulkhead_loom) && op == Op::Clone && close_on != Some(op) {
            return;
        }
        if let Some(bulkhead) = weak.upgrade() {
            reenter(&bulkhead, close_on == Some(op));
        }
    }
}
