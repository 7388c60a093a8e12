//! The limit algorithm interface: what a sample is, and the trait every algorithm implements.

use std::time::Duration;

use crate::bulkhead::permit::Outcome;

/// One admitted call, measured when its permit ended.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use bulkhead::adaptive::{Outcome, Sample};
/// let sample = Sample::new(Duration::from_millis(50), 4, Outcome::Success);
/// assert_eq!(sample.in_flight, 4);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    /// From the moment the permit was granted to the moment it ended.
    pub latency: Duration,
    /// Calls in flight when this one was admitted, itself included (as Netflix's limiters
    /// pass it).
    pub in_flight: usize,
    /// How the call ended.
    pub outcome: Outcome,
}

impl Sample {
    /// A sample of a call that took `latency`, was admitted with `in_flight` calls in flight
    /// (itself included) and ended with `outcome`.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use bulkhead::adaptive::{Outcome, Sample};
    /// let s = Sample::new(Duration::from_secs(2), 16, Outcome::Failure);
    /// assert!(s.outcome.is_failure());
    /// ```
    pub fn new(latency: Duration, in_flight: usize, outcome: Outcome) -> Sample {
        Sample { latency, in_flight, outcome }
    }

    /// The latency in nanoseconds as a float, at least 1 (a zero latency would divide by 0).
    pub(crate) fn nanos(&self) -> f64 {
        (self.latency.as_secs_f64() * 1e9).max(1.0)
    }
}

/// The limit an algorithm works from, and the bounds the controller enforces.
///
/// `min <= current <= max` always holds. The controller clamps whatever
/// [`LimitAlgorithm::update`] returns into `[min, max]`, so an algorithm (yours included)
/// can never take the bulkhead past the guide's cap.
///
/// ```
/// use bulkhead::adaptive::Limits;
/// let limits = Limits { current: 10, min: 1, max: 16 };
/// assert_eq!(limits.clamp(40.0), 16);
/// assert_eq!(limits.clamp(0.3), 1);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The limit in force now.
    pub current: usize,
    /// The lowest limit allowed.
    pub min: usize,
    /// The highest limit allowed (by default the bulkhead's configured
    /// `max_concurrent_calls`, i.e. 80 % of the pool with `BulkheadConfig::for_pool`).
    pub max: usize,
}

impl Limits {
    /// `value` truncated towards zero (as Netflix's `(int)` casts do) and clamped into
    /// `[min, max]`. NaN gives `min`.
    pub fn clamp(&self, value: f64) -> usize {
        if value.is_nan() || value < self.min as f64 {
            self.min
        } else if value >= self.max as f64 {
            self.max
        } else {
            (value as usize).clamp(self.min, self.max)
        }
    }
}

/// An algorithm's internal estimates, for metrics. Each is `None` when the algorithm has
/// no such notion (or has not estimated it yet).
///
/// ```
/// use bulkhead::adaptive::Estimates;
/// assert_eq!(Estimates::default().no_load_latency, None);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Estimates {
    /// The latency the algorithm believes the downstream has without load (Vegas's
    /// `rtt_noload`, Gradient2's long-term average).
    pub no_load_latency: Option<Duration>,
    /// The latency of the last sample the algorithm used.
    pub last_latency: Option<Duration>,
    /// Gradient2's last gradient, in `[0.5, 1.0]`.
    pub gradient: Option<f64>,
    /// The estimated queue (Vegas: `limit * (1 - no_load / latency)`; Gradient2: the
    /// allowance added each update).
    pub queue_size: Option<f64>,
    /// The algorithm's fractional limit before truncation, when it keeps one.
    pub estimated_limit: Option<f64>,
}

/// A concurrency limit algorithm: turns samples of admitted calls into a new limit.
///
/// The adaptive bulkhead calls [`update`](Self::update) once per sample, one fold at a
/// time and holding no lock, in the order the samples were recorded, and clamps the result into `[limits.min,
/// limits.max]`. The built-in algorithms are [`Aimd`](super::Aimd),
/// [`Gradient2`](super::Gradient2) and [`Vegas`](super::Vegas); plug your own by
/// implementing this trait.
///
/// `update` and `estimates` run holding no lock of the crate (issue 29): they may read the
/// controller that runs them (the same bulkhead's
/// [`adaptive_limit`](crate::Bulkhead::adaptive_limit) accessors), feed it a sample
/// ([`record`](super::AdaptiveControl::record): folded once the current fold ends), or call
/// the bulkhead. A panic in either is caught: the sample counts as dropped.
///
/// # Examples
///
/// A "halve on failure, +1 on success" algorithm:
///
/// ```
/// use bulkhead::adaptive::{AdaptiveLimit, LimitAlgorithm, Limits, Sample};
/// use bulkhead::{Bulkhead, BulkheadConfig, Outcome};
///
/// struct Halving;
/// impl LimitAlgorithm for Halving {
///     fn update(&mut self, sample: &Sample, limits: Limits) -> usize {
///         match sample.outcome {
///             Outcome::Failure => limits.current / 2,
///             Outcome::Success => limits.current + 1,
///             _ => limits.current,
///         }
///     }
/// }
///
/// let bank = Bulkhead::new("bank", BulkheadConfig::for_pool(20));
/// bank.set_adaptive_limit(AdaptiveLimit::new(Halving))?;
/// let permit = bank.try_acquire()?;
/// permit.fail(); // records a failure
/// assert_eq!(bank.adaptive_limit().unwrap().limit(), 8);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait LimitAlgorithm: Send + 'static {
    /// The new limit after `sample`, given the limit in force and its bounds.
    ///
    /// Runs under the adaptive bulkhead's controller lock (one sample at a time): it must
    /// not call back into the bulkhead (that would deadlock); the limit it returns is
    /// applied, and listeners are told, after the lock is released.
    ///
    /// A panic here is caught: the limit stays as it was and the sample counts in
    /// [`AdaptiveMetrics::samples_dropped`](super::AdaptiveMetrics::samples_dropped). It
    /// runs on whichever call folds the samples, often inside a permit's release, so it
    /// never unwinds through that release nor into a caller whose call succeeded. The same
    /// holds for [`estimates`](Self::estimates) (none, then).
    fn update(&mut self, sample: &Sample, limits: Limits) -> usize;

    /// The algorithm's estimates, for metrics. None by default.
    fn estimates(&self) -> Estimates {
        Estimates::default()
    }

    /// The latency above which a successful call counts as a failure, unless
    /// [`AdaptiveLimit::timeout`](super::AdaptiveLimit::timeout) sets one: the algorithm's
    /// own default (5 s for [`Aimd`](super::Aimd), as Netflix's `AIMDLimit`). None by
    /// default.
    fn default_timeout(&self) -> Option<Duration> {
        None
    }
}

impl<A: LimitAlgorithm + ?Sized> LimitAlgorithm for Box<A> {
    fn update(&mut self, sample: &Sample, limits: Limits) -> usize {
        (**self).update(sample, limits)
    }

    fn estimates(&self) -> Estimates {
        (**self).estimates()
    }

    fn default_timeout(&self) -> Option<Duration> {
        (**self).default_timeout()
    }
}
