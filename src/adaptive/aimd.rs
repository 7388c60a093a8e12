//! Additive increase, multiplicative decrease.

use std::time::Duration;

use super::algorithm::{Estimates, LimitAlgorithm, Limits, Sample};
use crate::bulkhead::config::ConfigError;

/// Loss-based AIMD: +1 while calls succeed and the bulkhead is at least half used, times
/// `backoff_ratio` on a failure (a call slower than the timeout is one).
///
/// The rules and defaults are those of Netflix's concurrency-limits `AIMDLimit`
/// (`concurrency-limits-core/.../limit/AIMDLimit.java`, read at commit `78a74b9`):
///
/// - a failure (Netflix's `didDrop`; the controller also counts a success slower than the
///   timeout as one, by default **5 s** here: [`default_timeout`](LimitAlgorithm::default_timeout)):
///   `limit = floor(limit * backoff_ratio)` (default **0.9**, allowed in `[0.5, 1.0)`);
/// - otherwise, if `in_flight * 2 >= limit` (the bulkhead was at least half used, so the
///   limit is what held the caller back): `limit + 1`;
/// - otherwise unchanged (an idle caller proves nothing about the downstream);
/// - always clamped into `[min, max]`.
///
/// One step therefore moves the limit by at most +1, or down to `floor(limit * ratio)`.
/// Netflix's defaults for the bounds (min 20, max 200) do not apply: the adaptive
/// bulkhead's bounds do (max = the configured `max_concurrent_calls`).
/// [`Outcome::Cancelled`](super::Outcome::Cancelled) and
/// [`Outcome::Ignored`](super::Outcome::Ignored) change nothing (Netflix's `onIgnore`).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use bulkhead::adaptive::{Aimd, LimitAlgorithm, Limits, Outcome, Sample};
///
/// let mut aimd = Aimd::default();
/// let limits = Limits { current: 10, min: 1, max: 16 };
/// let fail = Sample::new(Duration::from_millis(5), 10, Outcome::Failure);
/// assert_eq!(aimd.update(&fail, limits), 9); // floor(10 * 0.9)
/// let ok = Sample::new(Duration::from_millis(5), 10, Outcome::Success);
/// assert_eq!(aimd.update(&ok, limits), 11);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Aimd {
    backoff_ratio: f64,
}

impl Aimd {
    /// Netflix's default backoff ratio.
    pub const DEFAULT_BACKOFF_RATIO: f64 = 0.9;
    /// Netflix's default timeout: a call slower than this counts as a failure. It is this
    /// algorithm's [`default_timeout`](LimitAlgorithm::default_timeout); set another with
    /// [`AdaptiveLimit::timeout`](super::AdaptiveLimit::timeout).
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

    /// AIMD with `backoff_ratio`.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `backoff_ratio` when it is outside `[0.5, 1.0)` (Netflix's
    /// precondition).
    ///
    /// ```
    /// use bulkhead::adaptive::Aimd;
    /// assert!(Aimd::new(0.5).is_ok());
    /// assert_eq!(Aimd::new(1.0).unwrap_err().key(), "backoff_ratio");
    /// ```
    pub fn new(backoff_ratio: f64) -> Result<Aimd, ConfigError> {
        if !(0.5..1.0).contains(&backoff_ratio) {
            return Err(ConfigError::new(
                "backoff_ratio",
                backoff_ratio.to_string(),
                "must be in [0.5, 1.0)".to_string(),
            ));
        }
        Ok(Aimd { backoff_ratio })
    }

    /// The backoff ratio.
    ///
    /// ```
    /// # use bulkhead::adaptive::Aimd;
    /// assert_eq!(Aimd::default().backoff_ratio(), 0.9);
    /// ```
    pub fn backoff_ratio(&self) -> f64 {
        self.backoff_ratio
    }
}

impl Default for Aimd {
    fn default() -> Self {
        Aimd { backoff_ratio: Self::DEFAULT_BACKOFF_RATIO }
    }
}

impl LimitAlgorithm for Aimd {
    fn update(&mut self, sample: &Sample, limits: Limits) -> usize {
        if !sample.outcome.is_informative() {
            return limits.current;
        }
        let current = limits.current;
        let next = if sample.outcome.is_failure() {
            (current as f64 * self.backoff_ratio) as usize
        } else if sample.in_flight.saturating_mul(2) >= current {
            current.saturating_add(1)
        } else {
            current
        };
        next.clamp(limits.min, limits.max)
    }

    fn estimates(&self) -> Estimates {
        Estimates::default()
    }

    fn default_timeout(&self) -> Option<Duration> {
        Some(Self::DEFAULT_TIMEOUT)
    }
}
