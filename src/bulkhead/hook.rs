//! The hook a limit controller attaches to a bulkhead: how the face reaches an adaptive
//! limit without knowing any algorithm (as it reaches listeners without knowing them).
//!
//! A bulkhead with a hook has its `OBSERVED` bit set, so its grants take the observed path,
//! which asks the hook for the new permit's [`Mark`]; a marked permit's release calls the
//! hook before the slot is released. A bulkhead without one pays nothing: the bit it
//! already tests, and a zero mark.
//!
//! The hook is ours (`adaptive::Controller`), not user code; what it runs of the user's (a
//! `LimitAlgorithm`, limit-change listeners) follows the adaptive module's rules.

use core::any::Any;

use crate::bulkhead::permit::Mark;
use crate::bulkhead::Bulkhead;
use crate::engine::sync::{per_thread_countdown, CountdownKey};

/// What the face asks of an attached limit controller.
pub(crate) trait LimitHook: Any + Send + Sync {
    /// A permit of `bulkhead` was just granted: its mark (sampled or not).
    fn started(&self, bulkhead: &Bulkhead) -> Mark {
        let k = self.sample_one_in();
        if k <= 1 || sample_due(k) {
            self.started_sampled(bulkhead.sem().load().in_flight())
        } else {
            Mark::OBSERVED
        }
    }

    /// A permit was just granted and is to be sampled, with `in_flight` calls in flight
    /// (itself included): its sampled mark.
    fn started_sampled(&self, in_flight: usize) -> Mark;

    /// The controller samples one grant in this many (at least 1).
    fn sample_one_in(&self) -> u32;

    /// A sampled permit of `bulkhead` ends, before its slot is released.
    fn finished(&self, bulkhead: &Bulkhead, mark: Mark);

    /// The configured `max_concurrent_calls` became `cap` (under the config lock): move the
    /// bounds. [`apply`](Self::apply) follows once the config lock is released.
    fn cap_changed(&self, cap: usize);

    /// Brings the engine's limit to the controller's (holding no lock of ours).
    fn apply(&self, bulkhead: &Bulkhead);

    /// For `Bulkhead::adaptive_limit`.
    fn as_any(&self) -> &dyn Any;
}

/// Whether this call is the one in `k` (`k` ≥ 1) a controller samples: a per-thread
/// countdown, shared by every bulkhead the thread calls (no shared write, no clock).
#[inline(always)]
pub(crate) fn sample_due(k: u32) -> bool {
    per_thread_countdown! { COUNTDOWN }
    countdown_due(&COUNTDOWN, k)
}

/// Whether this observed refusal is the one in [`TICK_EVERY`] of the thread that reads the
/// clock for the Retry-After estimate (issue 33); the others carry the bulkhead's encoded
/// estimate. A per-thread countdown of its own, as [`sample_due`] (a refusal does not move
/// a controller's sampling).
///
/// [`TICK_EVERY`]: crate::observe::retry::TICK_EVERY
#[inline(always)]
pub(crate) fn retry_tick_due() -> bool {
    per_thread_countdown! { COUNTDOWN }
    countdown_due(&COUNTDOWN, crate::observe::retry::TICK_EVERY as u32)
}

/// One step of a per-thread countdown: true once in `k` calls (the first call included).
#[inline(always)]
fn countdown_due(countdown: &'static CountdownKey, k: u32) -> bool {
    // Two one-line accesses (as `cached_thread_slot`): each inlines to one `%fs` access,
    // where a closure doing both was left as a call to `LocalKey::with` (callgrind). An
    // unsampled call is a load, a decrement, a store and a sign test (issue 21: testing for
    // zero before the decrement cost two instructions more). Signed and 64-bit, so that any
    // `k` fits and the sample is the call that takes the countdown below zero.
    let left = countdown.with(core::cell::Cell::get) - 1;
    countdown.with(|c| c.set(left));
    if left >= 0 {
        return false;
    }
    countdown.with(|c| c.set(i64::from(k) - 1));
    true
}
