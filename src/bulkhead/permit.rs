//! Permits: guards that release their slot exactly once, on drop, and say how the call ended.
//!
//! # Outcomes and marks
//!
//! A permit can be marked with how its call ended ([`Outcome`]: [`Permit::succeed`],
//! [`Permit::fail`], [`Permit::ignore`], [`Permit::set_outcome`]). A plain bulkhead ignores
//! the mark; a bulkhead with an adaptive limit attached
//! ([`Bulkhead::set_adaptive_limit`](crate::Bulkhead::set_adaptive_limit)) feeds it, with the
//! call's latency, to its controller when the permit ends. Marking is the same on every
//! permit of the family, whoever handed it out.
//!
//! What a permit carries for that is one word, its [`Mark`]: zero for a permit nobody
//! sampled or marked (a plain bulkhead's, always), so that a plain release tests one word
//! and goes on. A sampled permit's mark holds when the call started and how many calls were
//! in flight then; the controller reads it when the permit ends, before the slot is
//! released.

use core::fmt;
use std::sync::Arc;

use crate::bulkhead::Bulkhead;

/// How an admitted call ended, as a limit controller sees it.
///
/// The names follow Netflix's concurrency-limits `Limiter.Listener` (`onSuccess`,
/// `onDropped`, `onIgnore`), which the built-in algorithms reproduce: a [`Failure`] is a
/// "drop" there (the downstream timed out or failed under load), an [`Ignored`] or
/// [`Cancelled`] call feeds no sample to them.
///
/// [`Failure`]: Outcome::Failure
/// [`Ignored`]: Outcome::Ignored
/// [`Cancelled`]: Outcome::Cancelled
///
/// # Examples
///
/// ```
/// use bulkhead::Outcome;
/// assert!(Outcome::Failure.is_failure());
/// assert!(!Outcome::Cancelled.is_failure());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Outcome {
    /// The call completed and its latency tells how loaded the downstream is.
    Success,
    /// The downstream failed: an `Err` the classifier counts, a panic, a timeout. The
    /// built-in algorithms treat it as Netflix's "drop" (a sign of overload).
    Failure,
    /// The caller gave up before the call completed (its future was dropped). Its latency is
    /// only a lower bound; the built-in algorithms ignore it.
    Cancelled,
    /// The call ended in a way that says nothing about the downstream's capacity (a
    /// validation error, a 404): the built-in algorithms ignore it.
    Ignored,
}

impl Outcome {
    /// `true` for [`Outcome::Failure`].
    ///
    /// ```
    /// # use bulkhead::Outcome;
    /// assert!(!Outcome::Success.is_failure());
    /// ```
    pub fn is_failure(self) -> bool {
        matches!(self, Outcome::Failure)
    }

    /// `true` when the built-in algorithms learn from it: [`Success`](Outcome::Success) and
    /// [`Failure`](Outcome::Failure).
    ///
    /// ```
    /// # use bulkhead::Outcome;
    /// assert!(Outcome::Success.is_informative());
    /// assert!(!Outcome::Ignored.is_informative());
    /// ```
    pub fn is_informative(self) -> bool {
        matches!(self, Outcome::Success | Outcome::Failure)
    }

    /// `Ok` is a success, `Err` a failure: how the `_fallible` calls and the tower layer
    /// mark a call.
    pub(crate) fn of_result<T, E>(result: &Result<T, E>) -> Outcome {
        if result.is_ok() {
            Outcome::Success
        } else {
            Outcome::Failure
        }
    }

    const ALL: [Outcome; 4] =
        [Outcome::Success, Outcome::Failure, Outcome::Cancelled, Outcome::Ignored];

    fn code(self) -> u64 {
        // 0 is "unmarked".
        Outcome::ALL.iter().position(|o| *o == self).map_or(0, |i| i as u64 + 1)
    }
}

/// The word a permit carries for a limit controller (see the module docs).
///
/// | bits    | field                                                            |
/// |---------|------------------------------------------------------------------|
/// | 0..=2   | the outcome marked: 0 unmarked, else `Outcome::ALL` index + 1     |
/// | 3       | an unmarked end is `Cancelled`, not `Success` (a call's future)  |
/// | 4       | sampled: the fields below are set                                 |
/// | 5       | observed: granted while counters, listeners or a controller were on |
/// | 6..=19  | calls in flight when it started (saturating at 2^14 − 1)          |
/// | 20..=63 | when it started: ticks of the controller's clock, mod 2^44        |
///
/// A permit granted while the bulkhead was observed always has a non-zero mark, so its
/// release takes the observed path (counted, `CallFinished`); one granted unobserved is
/// released without looking at the observers: a call is observed whole, or not at all.
///
/// A latency is the difference of two clock readings modulo 2^44 ticks of the controller's
/// sample clock (`engine::sync::SampleClock`: TSC ticks, 1.6 hours at 3 GHz; nanoseconds,
/// 4.9 hours, where the clock falls back to the OS's): a call held longer than that is
/// measured short by a multiple of it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Mark(u64);

const OUTCOME: u64 = 0b111;
const UNMARKED_CANCELLED: u64 = 1 << 3;
const SAMPLED: u64 = 1 << 4;
const OBSERVED: u64 = 1 << 5;
/// In a mark that is not sampled: granted while the counters alone observed, so the release
/// counts inline (bits from `IN_FLIGHT_SHIFT` on are free in such a mark).
const COUNTED: u64 = 1 << 6;
const IN_FLIGHT_SHIFT: u32 = 6;
const IN_FLIGHT_MAX: u64 = (1 << 14) - 1;
const START_SHIFT: u32 = 20;
const START_BITS: u32 = 64 - START_SHIFT;

impl Mark {
    /// Not observed, not sampled, not marked: a plain permit.
    pub(crate) const NONE: Mark = Mark(0);

    /// A permit granted while the bulkhead was observed, not sampled.
    pub(crate) const OBSERVED: Mark = Mark(OBSERVED);

    /// A permit granted while the counters alone observed (counted inline, issue 21).
    pub(crate) const COUNTED: Mark = Mark(OBSERVED | COUNTED);

    /// A sampled permit (observed, then) that started at `start_ticks` (of the controller's
    /// clock) with `in_flight` calls in flight.
    #[inline]
    pub(crate) fn sampled(start_ticks: u64, in_flight: usize) -> Mark {
        let in_flight = (in_flight as u64).min(IN_FLIGHT_MAX);
        Mark(OBSERVED | SAMPLED | in_flight << IN_FLIGHT_SHIFT | start_ticks << START_SHIFT)
    }

    /// Whether the release must look at this mark at all.
    #[inline]
    pub(crate) fn is_set(self) -> bool {
        self.0 != 0
    }

    pub(crate) fn is_sampled(self) -> bool {
        self.0 & SAMPLED != 0
    }

    pub(crate) fn is_observed(self) -> bool {
        self.0 & OBSERVED != 0
    }

    /// Granted while the counters alone observed, and not sampled.
    #[inline]
    pub(crate) fn is_counted(self) -> bool {
        self.0 & (SAMPLED | COUNTED) == COUNTED
    }

    /// Calls in flight when the permit was granted, itself included (saturating).
    #[inline]
    pub(crate) fn in_flight(self) -> usize {
        ((self.0 >> IN_FLIGHT_SHIFT) & IN_FLIGHT_MAX) as usize
    }

    /// The ticks from the start to `now_ticks` (same clock), modulo 2^44.
    #[inline]
    pub(crate) fn elapsed_ticks(self, now_ticks: u64) -> u64 {
        let elapsed = (now_ticks << START_SHIFT).wrapping_sub(self.0 & !((1 << START_SHIFT) - 1));
        elapsed >> START_SHIFT
    }

    /// Records how the call ended, on a permit whose end anyone will hear of. A permit
    /// granted unobserved (mark zero: no counters, listener, controller's sample or
    /// `tracing` saw its grant) tells no one of its end, so its mark stays zero and its
    /// release stays the plain one: the tower layer and `call_async_fallible` mark every
    /// call (issue 21: `benches/peers.sh`'s permitted tower call, 312 -> 297 instructions).
    #[inline]
    fn mark(&mut self, outcome: Outcome) {
        if self.is_set() {
            self.0 = (self.0 & !OUTCOME) | outcome.code();
        }
    }

    /// As [`mark`](Self::mark): only on a permit whose end anyone will hear of.
    #[inline]
    fn unmarked_is_cancelled(&mut self) {
        if self.is_set() {
            self.0 |= UNMARKED_CANCELLED;
        }
    }

    /// How the call ended: as marked, else `Failure` while the thread panics, else
    /// `Cancelled` or `Success` as the acquirer said.
    pub(crate) fn outcome(self) -> Outcome {
        match self.0 & OUTCOME {
            0 if std::thread::panicking() => Outcome::Failure,
            0 if self.0 & UNMARKED_CANCELLED != 0 => Outcome::Cancelled,
            0 => Outcome::Success,
            code => Outcome::ALL[code as usize - 1],
        }
    }
}

const _: () = assert!(START_BITS == 44);

/// The outcome-marking methods, the same on every permit type.
macro_rules! marking {
    ($permit:ty, $take:literal) => {
        impl $permit {
            /// Sets the outcome reported when the permit ends (the last one set wins). A
            /// plain bulkhead ignores it; an adaptive limit learns from it. Unmarked, a
            /// permit reports [`Outcome::Success`], or [`Outcome::Failure`] when dropped
            /// while its thread panics.
            ///
            /// ```
            /// use bulkhead::adaptive::{AdaptiveLimit, Aimd};
            /// use bulkhead::{Bulkhead, BulkheadConfig, Outcome};
            /// let bulkhead = std::sync::Arc::new(Bulkhead::new("bank", BulkheadConfig::for_pool(20)));
            /// bulkhead.set_adaptive_limit(AdaptiveLimit::new(Aimd::default()))?;
            #[doc = concat!("let mut permit = ", $take, ";")]
            /// permit.set_outcome(Outcome::Ignored);
            /// drop(permit);
            /// assert_eq!(bulkhead.adaptive_limit().unwrap().limit(), 16); // ignored: no change
            /// # Ok::<(), Box<dyn std::error::Error>>(())
            /// ```
            #[inline]
            pub fn set_outcome(&mut self, outcome: Outcome) {
                self.mark.mark(outcome);
            }

            /// Ends the permit, reporting a success.
            ///
            /// ```
            /// use bulkhead::adaptive::{AdaptiveLimit, Aimd};
            /// use bulkhead::{Bulkhead, BulkheadConfig};
            /// let bulkhead = std::sync::Arc::new(Bulkhead::new("bank", BulkheadConfig::for_pool(20)));
            /// bulkhead.set_adaptive_limit(AdaptiveLimit::new(Aimd::default()))?;
            #[doc = concat!("let permit = ", $take, ";")]
            /// permit.succeed();
            /// assert_eq!(bulkhead.adaptive_limit().unwrap().metrics().samples(), 1);
            /// # Ok::<(), Box<dyn std::error::Error>>(())
            /// ```
            #[inline]
            pub fn succeed(mut self) {
                self.mark.mark(Outcome::Success);
            }

            /// Ends the permit, reporting a failure (the downstream failed or timed out).
            ///
            /// ```
            /// use bulkhead::adaptive::{AdaptiveLimit, Aimd};
            /// use bulkhead::{Bulkhead, BulkheadConfig};
            /// let bulkhead = std::sync::Arc::new(Bulkhead::new("bank", BulkheadConfig::for_pool(20)));
            /// bulkhead.set_adaptive_limit(AdaptiveLimit::new(Aimd::default()))?;
            #[doc = concat!("let permit = ", $take, ";")]
            /// permit.fail();
            /// assert_eq!(bulkhead.adaptive_limit().unwrap().limit(), 14); // AIMD backed off
            /// # Ok::<(), Box<dyn std::error::Error>>(())
            /// ```
            #[inline]
            pub fn fail(mut self) {
                self.mark.mark(Outcome::Failure);
            }

            /// Ends the permit, reporting an ignored call (it says nothing of the
            /// downstream's capacity: the built-in algorithms learn nothing).
            ///
            /// ```
            /// use bulkhead::adaptive::{AdaptiveLimit, Aimd};
            /// use bulkhead::{Bulkhead, BulkheadConfig};
            /// let bulkhead = std::sync::Arc::new(Bulkhead::new("bank", BulkheadConfig::for_pool(20)));
            /// bulkhead.set_adaptive_limit(AdaptiveLimit::new(Aimd::default()))?;
            #[doc = concat!("let permit = ", $take, ";")]
            /// permit.ignore();
            /// assert_eq!(bulkhead.adaptive_limit().unwrap().limit(), 16);
            /// # Ok::<(), Box<dyn std::error::Error>>(())
            /// ```
            #[inline]
            pub fn ignore(mut self) {
                self.mark.mark(Outcome::Ignored);
            }
        }

        impl Marked for $permit {
            #[inline]
            fn set(&mut self, outcome: Outcome) {
                self.mark.mark(outcome);
            }

            #[inline]
            fn unmarked_is_cancelled(&mut self) {
                self.mark.unmarked_is_cancelled();
            }
        }
    };
}

/// What holds permits a call's outcome is marked on: a permit, or the permits of one call
/// (a keyed call's key and total: `OwnedKeyedPermit`).
pub(crate) trait Marked {
    /// Marks how the call ended.
    fn set(&mut self, outcome: Outcome);
    /// Reports [`Outcome::Cancelled`] if it ends unmarked and not unwinding: for permits
    /// held by a call's future, which may be dropped before the call completes.
    fn unmarked_is_cancelled(&mut self);
}

/// A slot in a [`Bulkhead`], borrowed from it. Dropping the permit releases the slot
/// (exactly once) and emits `CallFinished`.
///
/// # Examples
///
/// ```
/// use bulkhead::{Bulkhead, BulkheadConfig};
/// let bulkhead = Bulkhead::new("bank", BulkheadConfig::default());
/// {
///     let _permit = bulkhead.try_acquire()?;
///     assert_eq!(bulkhead.metrics().in_flight_calls(), 1);
/// } // released here
/// assert_eq!(bulkhead.metrics().in_flight_calls(), 0);
/// # Ok::<(), bulkhead::BulkheadFull>(())
/// ```
///
/// A permit is `Send`, so a scoped thread may finish the call:
///
/// ```
/// fn is_send<T: Send>(_: &T) {}
/// # let bulkhead = bulkhead::Bulkhead::new("bank", Default::default());
/// let permit = bulkhead.try_acquire().unwrap();
/// is_send(&permit);
/// ```
///
/// It cannot outlive its bulkhead:
///
/// ```compile_fail
/// # use bulkhead::{Bulkhead, BulkheadConfig};
/// let permit = {
///     let bulkhead = Bulkhead::new("bank", BulkheadConfig::default());
///     bulkhead.try_acquire().unwrap()
/// };
/// ```
#[must_use = "dropping a permit releases its slot at once"]
#[clippy::has_significant_drop]
pub struct Permit<'a> {
    bulkhead: &'a Bulkhead,
    /// The slots it holds: 1 for the plain acquires, `n` for `acquire_many(n)`.
    permits: u32,
    mark: Mark,
}

impl<'a> Permit<'a> {
    #[inline]
    pub(crate) fn new(bulkhead: &'a Bulkhead, mark: Mark) -> Self {
        Permit { bulkhead, permits: 1, mark }
    }

    /// A permit for `permits` slots already taken from `bulkhead`.
    #[inline]
    pub(crate) fn with_permits(bulkhead: &'a Bulkhead, permits: u32, mark: Mark) -> Self {
        Permit { bulkhead, permits, mark }
    }

    /// How many slots this permit holds.
    ///
    /// ```
    /// # use bulkhead::{Bulkhead, BulkheadConfig};
    /// let bulkhead = Bulkhead::new("bank", BulkheadConfig::default());
    /// assert_eq!(bulkhead.try_acquire()?.num_permits(), 1);
    /// assert_eq!(bulkhead.try_acquire_many(3)?.num_permits(), 3);
    /// # Ok::<(), bulkhead::BulkheadFull>(())
    /// ```
    pub fn num_permits(&self) -> u32 {
        self.permits
    }

    /// Splits `n` slots off into a new permit of the same bulkhead; `None` (and nothing
    /// changes) if this permit holds fewer than `n`. `split(0)` gives an empty permit and
    /// `split(self.num_permits())` moves every slot, leaving this one empty; an empty permit
    /// is still a guard (dropping it releases nothing, and still counts as a finished call).
    ///
    /// No slot is released or taken: the bulkhead's metrics do not change. Counters and
    /// events count guards, so the new permit emits `CallPermitted` now and `CallFinished`
    /// when dropped, like any other; with an adaptive limit it is a call of its own (sampled
    /// from now).
    ///
    /// ```
    /// # use bulkhead::{Bulkhead, BulkheadConfig};
    /// let bulkhead = Bulkhead::new("bank", BulkheadConfig::default());
    /// let mut batch = bulkhead.try_acquire_many(5)?;
    /// let two = batch.split(2).unwrap();
    /// assert_eq!((batch.num_permits(), two.num_permits()), (3, 2));
    /// assert!(batch.split(4).is_none());
    /// drop(two);
    /// assert_eq!(bulkhead.metrics().in_flight_calls(), 3);
    /// # Ok::<(), bulkhead::BulkheadFull>(())
    /// ```
    pub fn split(&mut self, n: u32) -> Option<Self> {
        self.permits = self.permits.checked_sub(n)?;
        let mark = self.bulkhead.permitted(self.bulkhead.sem().load());
        Some(Permit { bulkhead: self.bulkhead, permits: n, mark })
    }

    /// Moves every slot of `other` into this permit. `other`'s call ends here: it emits
    /// `CallFinished` as if dropped, but releases nothing.
    ///
    /// # Panics
    ///
    /// If `other` belongs to another bulkhead (its slots cannot count against this one's
    /// limit). `other` is then dropped while unwinding, releasing its slots to its own
    /// bulkhead, so no slot is lost.
    ///
    /// ```
    /// # use bulkhead::{Bulkhead, BulkheadConfig};
    /// let bulkhead = Bulkhead::new("bank", BulkheadConfig::default());
    /// let mut batch = bulkhead.try_acquire_many(2)?;
    /// batch.merge(bulkhead.try_acquire()?);
    /// assert_eq!(batch.num_permits(), 3);
    /// assert_eq!(bulkhead.metrics().in_flight_calls(), 3);
    /// # Ok::<(), bulkhead::BulkheadFull>(())
    /// ```
    #[track_caller]
    pub fn merge(&mut self, mut other: Self) {
        assert!(
            core::ptr::eq(self.bulkhead, other.bulkhead),
            "merging permits of two bulkheads ('{}' and '{}')",
            self.bulkhead.name(),
            other.bulkhead.name()
        );
        self.permits += core::mem::take(&mut other.permits);
    }

    /// The bulkhead this permit belongs to.
    ///
    /// ```
    /// # use bulkhead::{Bulkhead, BulkheadConfig};
    /// let bulkhead = Bulkhead::new("bank", BulkheadConfig::default());
    /// let permit = bulkhead.try_acquire()?;
    /// assert_eq!(permit.bulkhead().name(), "bank");
    /// # Ok::<(), bulkhead::BulkheadFull>(())
    /// ```
    pub fn bulkhead(&self) -> &'a Bulkhead {
        self.bulkhead
    }

    /// Gives up the guard without releasing its slot, and returns its mark: for a caller
    /// that holds the slot by other means (a keyed permit's key slot).
    pub(crate) fn into_mark(self) -> Mark {
        let mark = self.mark;
        core::mem::forget(self);
        mark
    }

    /// Turns this permit into an owned one without releasing the slot in between.
    pub(crate) fn into_owned(self, bulkhead: Arc<Bulkhead>) -> OwnedPermit {
        debug_assert!(core::ptr::eq(self.bulkhead, &*bulkhead));
        let (permits, mark) = (self.permits, self.mark);
        // The slot moves to the owned permit; this guard must not release it.
        core::mem::forget(self);
        OwnedPermit { bulkhead, permits, mark }
    }
}

marking!(Permit<'_>, "bulkhead.try_acquire()?");

impl Drop for Permit<'_> {
    #[inline]
    fn drop(&mut self) {
        self.bulkhead.release_permits(self.permits, self.mark);
    }
}

impl fmt::Debug for Permit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("bulkhead", &self.bulkhead.name())
            .field("permits", &self.permits)
            .finish()
    }
}

/// A slot in a [`Bulkhead`] that owns a reference to it, so it can move anywhere
/// (`Send + 'static`). Dropping it releases the slot exactly once.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use bulkhead::{Bulkhead, BulkheadConfig};
/// let bulkhead = Arc::new(Bulkhead::new("bank", BulkheadConfig::default()));
/// let permit = bulkhead.try_acquire_owned()?;
/// let worker = std::thread::spawn(move || {
///     // ... the call ...
///     drop(permit);
/// });
/// worker.join().unwrap();
/// assert_eq!(bulkhead.metrics().in_flight_calls(), 0);
/// # Ok::<(), bulkhead::BulkheadFull>(())
/// ```
#[must_use = "dropping a permit releases its slot at once"]
#[clippy::has_significant_drop]
pub struct OwnedPermit {
    bulkhead: Arc<Bulkhead>,
    /// The slots it holds, as [`Permit`]'s.
    permits: u32,
    mark: Mark,
}

impl OwnedPermit {
    /// A permit for a slot already taken from `bulkhead`.
    pub(crate) fn from_acquired(bulkhead: Arc<Bulkhead>, mark: Mark) -> Self {
        OwnedPermit { bulkhead, permits: 1, mark }
    }

    /// A permit for `permits` slots already taken from `bulkhead`.
    pub(crate) fn with_permits(bulkhead: Arc<Bulkhead>, permits: u32, mark: Mark) -> Self {
        OwnedPermit { bulkhead, permits, mark }
    }

    /// How many slots this permit holds, as [`Permit::num_permits`].
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use bulkhead::{Bulkhead, BulkheadConfig};
    /// let bulkhead = Arc::new(Bulkhead::new("bank", BulkheadConfig::default()));
    /// assert_eq!(bulkhead.try_acquire_many_owned(3)?.num_permits(), 3);
    /// # Ok::<(), bulkhead::BulkheadFull>(())
    /// ```
    pub fn num_permits(&self) -> u32 {
        self.permits
    }

    /// Splits `n` slots off into a new owned permit, as [`Permit::split`]: `None` if this
    /// permit holds fewer than `n`; 0 and all are allowed.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use bulkhead::{Bulkhead, BulkheadConfig};
    /// let bulkhead = Arc::new(Bulkhead::new("bank", BulkheadConfig::default()));
    /// let mut batch = bulkhead.try_acquire_many_owned(4)?;
    /// let one = batch.split(1).unwrap();
    /// std::thread::spawn(move || drop(one)).join().unwrap();
    /// assert_eq!(bulkhead.metrics().in_flight_calls(), 3);
    /// # Ok::<(), bulkhead::BulkheadFull>(())
    /// ```
    pub fn split(&mut self, n: u32) -> Option<Self> {
        self.permits = self.permits.checked_sub(n)?;
        let mark = self.bulkhead.permitted(self.bulkhead.sem().load());
        Some(OwnedPermit { bulkhead: Arc::clone(&self.bulkhead), permits: n, mark })
    }

    /// Moves every slot of `other` into this permit, as [`Permit::merge`].
    ///
    /// # Panics
    ///
    /// If `other` belongs to another bulkhead; `other` then releases its slots to its own
    /// bulkhead while unwinding.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use bulkhead::{Bulkhead, BulkheadConfig};
    /// let bulkhead = Arc::new(Bulkhead::new("bank", BulkheadConfig::default()));
    /// let mut batch = bulkhead.try_acquire_owned()?;
    /// batch.merge(bulkhead.try_acquire_many_owned(2)?);
    /// assert_eq!(batch.num_permits(), 3);
    /// # Ok::<(), bulkhead::BulkheadFull>(())
    /// ```
    #[track_caller]
    pub fn merge(&mut self, mut other: Self) {
        assert!(
            Arc::ptr_eq(&self.bulkhead, &other.bulkhead),
            "merging permits of two bulkheads ('{}' and '{}')",
            self.bulkhead.name(),
            other.bulkhead.name()
        );
        self.permits += core::mem::take(&mut other.permits);
    }

    /// The bulkhead this permit belongs to.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use bulkhead::{Bulkhead, BulkheadConfig};
    /// let bulkhead = Arc::new(Bulkhead::new("bank", BulkheadConfig::default()));
    /// let permit = bulkhead.try_acquire_owned()?;
    /// assert!(Arc::ptr_eq(permit.bulkhead(), &bulkhead));
    /// # Ok::<(), bulkhead::BulkheadFull>(())
    /// ```
    pub fn bulkhead(&self) -> &Arc<Bulkhead> {
        &self.bulkhead
    }
}

marking!(OwnedPermit, "bulkhead.try_acquire_owned()?");

impl Drop for OwnedPermit {
    fn drop(&mut self) {
        self.bulkhead.release_permits(self.permits, self.mark);
    }
}

impl fmt::Debug for OwnedPermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedPermit")
            .field("bulkhead", &self.bulkhead.name())
            .field("permits", &self.permits)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sampled mark keeps its fields apart: the start, the calls in flight and the outcome
    /// bits never leak into one another, so the latency is exact to the tick and the count
    /// saturates (cargo-mutants, future 13/17: the start's mask made `(1 << 20) + 1` or
    /// `(1 << 20) / 1` let the low fields into the subtraction, one tick short).
    #[test]
    fn a_sampled_mark_gives_its_exact_ticks_and_calls_in_flight() {
        let wrap = 1u64 << START_BITS;
        for start in [0, 1, 2, 7, 1 << 20, wrap - 2, wrap - 1, u64::MAX] {
            for in_flight in [1, 2, 3, 1_000, IN_FLIGHT_MAX as usize, usize::MAX] {
                for elapsed in [0, 1, 5, 1 << 30, wrap - 1] {
                    let mut mark = Mark::sampled(start, in_flight);
                    mark.unmarked_is_cancelled();
                    mark.mark(Outcome::Failure);
                    let now = start.wrapping_add(elapsed);
                    let case = format!("start {start}, in flight {in_flight}, elapsed {elapsed}");
                    assert_eq!(mark.elapsed_ticks(now), elapsed, "{case}");
                    let expected = in_flight.min(IN_FLIGHT_MAX as usize);
                    assert_eq!(mark.in_flight(), expected, "{case}");
                    assert!(mark.is_set() && mark.is_observed() && mark.is_sampled(), "{case}");
                    assert!(!mark.is_counted(), "{case}");
                    assert_eq!(mark.outcome(), Outcome::Failure, "{case}");
                }
            }
        }
    }

    /// The counted mark is counted, and an outcome marked on it keeps it so.
    #[test]
    fn a_counted_mark_stays_counted_whatever_its_outcome() {
        for outcome in Outcome::ALL {
            let mut mark = Mark::COUNTED;
            mark.mark(outcome);
            assert!(mark.is_counted() && mark.is_observed() && !mark.is_sampled());
            assert_eq!(mark.outcome(), outcome);
        }
        let mut none = Mark::NONE;
        none.mark(Outcome::Failure);
        assert!(!none.is_set(), "an unobserved permit's mark stays zero");
    }
}
