//! `tracing` events for what a service wants in its logs (feature `tracing`): refused calls
//! and long waits, each naming the bulkhead and, for a refusal, the reason.
//!
//! | event | level | fields |
//! |-------|-------|--------|
//! | a call refused for any other reason (`Full`, `TooManyWaiting`, `Closed`, `TooManyKeys`, `ExceedsLimit`, `Evicted`, `Reserved`) | `DEBUG` | `bulkhead`, `reason` |
//! | a call refused `WaitTimedOut` (it waited its whole max wait) | `INFO` | `bulkhead`, `reason`, `waited_us` |
//! | a call permitted after waiting at least [`LONG_WAIT`] | `DEBUG` | `bulkhead`, `waited_us` |
//!
//! The target is `bulkhead`, so `RUST_LOG=bulkhead=debug` (or an `EnvFilter` directive)
//! selects them. With no subscriber interested, an event costs one load of tracing's
//! global max level: the macros check it before anything else.

//! Without the feature only [`interested`] exists, a constant `false`, so the check on the
//! refusal path folds away.

#[cfg(feature = "tracing")]
pub(crate) use imp::*;

/// Without the `tracing` feature nobody is interested.
#[cfg(not(feature = "tracing"))]
#[inline(always)]
pub(crate) fn interested() -> bool {
    false
}

#[cfg(feature = "tracing")]
mod imp {
    use core::time::Duration;

    use crate::observe::reason::RejectReason;

    /// A permitted wait at least this long is logged at `DEBUG`.
    pub(crate) const LONG_WAIT: Duration = Duration::from_millis(10);

    fn micros(waited: Duration) -> u64 {
        u64::try_from(waited.as_micros()).unwrap_or(u64::MAX)
    }

    /// Whether a subscriber may want our events: tracing's max-level check for `INFO` (the
    /// most severe level used here), one load of a global. The macros below check again, per
    /// level and per call site.
    #[inline(always)]
    pub(crate) fn interested() -> bool {
        tracing::level_enabled!(tracing::Level::INFO)
    }

    /// A refused call.
    pub(crate) fn rejected(name: &str, reason: RejectReason, waited: Duration) {
        if reason == RejectReason::WaitTimedOut {
            tracing::info!(
                target: "bulkhead",
                bulkhead = name,
                reason = reason.label(),
                waited_us = micros(waited),
                "bulkhead call rejected: waited its whole max wait"
            );
        } else {
            tracing::debug!(target: "bulkhead", bulkhead = name, reason = reason.label(), "bulkhead call rejected");
        }
    }

    /// A call permitted after queueing for `waited`.
    pub(crate) fn waited(name: &str, waited: Duration) {
        if waited >= LONG_WAIT {
            tracing::debug!(
                target: "bulkhead",
                bulkhead = name,
                waited_us = micros(waited),
                "bulkhead call permitted after a long wait"
            );
        }
    }
}
