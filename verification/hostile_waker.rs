//! A hostile waker: its `clone`, `wake`, `wake_by_ref` and `drop` each run a hook, which
//! re-enters the bulkhead the waker waits on (acquire, release, close, change_config,
//! metrics, drain). Shared by `tests/reentrant.rs` (real threads) and the loom and shuttle
//! scenarios (`verification/scenarios_reentrant.rs`).
//!
//! A waker is foreign code to the bulkhead: with many executors the last waker reference
//! owns the task, so its `drop` may drop a future and a permit inside it. Any of these hooks
//! run while a lock of the bulkhead is held deadlocks (its mutexes are not re-entrant): that
//! is what these wakers are for.
//!
//! Building a `Waker` with hooks on `clone` and `drop` needs a `RawWaker` vtable, hence the
//! `unsafe` below (test code only; the library forbids `unsafe`).
#![allow(unsafe_code, dead_code)]

use std::sync::Arc;
use std::task::{RawWaker, RawWakerVTable, Waker};

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
