//! This crate's own sync shim, the pattern any crate that model-checks itself uses: the
//! same names from std, loom or shuttle. We key it on the bulkhead's cfgs, so one
//! `RUSTFLAGS="--cfg bulkhead_loom"` switches the bulkhead and this crate together, and take
//! the checker through `bulkhead::model`, so both use the same loom or shuttle.

#[cfg(not(any(bulkhead_loom, bulkhead_shuttle)))]
pub(crate) use std::sync::{
    atomic::{AtomicUsize, Ordering},
    mpsc, Mutex, MutexGuard,
};

#[cfg(bulkhead_loom)]
pub(crate) use bulkhead::model::loom::sync::{
    atomic::{AtomicUsize, Ordering},
    mpsc, Mutex, MutexGuard,
};

#[cfg(bulkhead_shuttle)]
pub(crate) use bulkhead::model::shuttle::sync::{
    atomic::{AtomicUsize, Ordering},
    mpsc, Mutex, MutexGuard,
};

/// Locks `mutex`, ignoring poisoning (a panicking holder already failed the test).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
