//! Foreign code the engine calls, and the containment of its panics: a task's `wake` (which
//! may panic), called by whoever serves the queue (a release, `close`, a drain, the deadline
//! timer). Nothing here holds or knows a lock: callers call it after unlocking.

use std::task::Waker;

/// The payload a waker (or other foreign code) of a model test panics with to test the
/// bulkhead's containment: `std::panic::panic_any(ContainedPanic)`.
///
/// Outside the checkers the bulkhead contains every panic of a waker it calls. Under them it
/// contains only this payload and re-raises any other, so that a checker's own panic (a
/// deadlock found, a failed assertion inside a re-entrant waker) still reaches the checker.
///
/// ```ignore
/// struct Panicking;
/// impl std::task::Wake for Panicking {
///     fn wake(self: std::sync::Arc<Self>) {
///         std::panic::panic_any(bulkhead::model::ContainedPanic);
///     }
/// }
/// ```
#[cfg(any(bulkhead_loom, bulkhead_shuttle))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContainedPanic;

/// Calls `waker.wake()` (foreign code, which also drops the waker), containing its panic: the
/// caller goes on with its work (the other waiters it serves, the timer's other deadlines),
/// and the panic is reported ([`contained`]), never re-raised. Not re-raised because the
/// caller may be a permit's `Drop` (a panic there while unwinding aborts the process) or the
/// process-wide timer thread, and because the task whose waker panicked is not the caller's.
#[inline]
pub(crate) fn wake_task(waker: Waker) {
    if let Err(payload) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| waker.wake())) {
        contained(payload, "a waker's wake");
    }
}

/// A panic of foreign code (`what`) that the engine caught and will not re-raise: reported as
/// an ERROR event under the `tracing` feature (the panic hook has already printed it as for
/// any panic), then its payload dropped (a payload whose own `Drop` panics is forgotten).
///
/// Under the model checkers only payloads of `bulkhead::model::ContainedPanic` are contained;
/// any other panic (a checker's own: a deadlock found, a failed assertion) is re-raised so
/// the checker still sees it.
#[cold]
#[inline(never)]
pub(crate) fn contained(payload: Box<dyn core::any::Any + Send>, what: &'static str) {
    #[cfg(any(bulkhead_loom, bulkhead_shuttle))]
    if !payload.is::<ContainedPanic>() {
        std::panic::resume_unwind(payload);
    }
    #[cfg(feature = "tracing")]
    {
        let panic = payload
            .downcast_ref::<&'static str>()
            .copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("(not a string)");
        tracing::error!(
            target: "bulkhead",
            panicked_in = what,
            panic,
            "a panic of foreign code was contained; the bulkhead served every other waiter"
        );
    }
    #[cfg(not(feature = "tracing"))]
    let _ = what;
    if let Err(again) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(payload))) {
        core::mem::forget(again);
    }
}
