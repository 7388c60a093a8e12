//! Gradient2: the ratio of a long-term average latency to the current one.

use std::time::Duration;

use super::algorithm::{Estimates, LimitAlgorithm, Limits, Sample};
use crate::bulkhead::config::ConfigError;

/// Latency-gradient algorithm: shrinks the limit by the ratio of the long-term average
/// latency to the current one, and grows it by a fixed queue allowance while latency holds.
///
/// The rules and defaults are those of Netflix's concurrency-limits `Gradient2Limit`
/// (`concurrency-limits-core/.../limit/Gradient2Limit.java`, with its
/// `measurement/ExpAvgMeasurement.java`; read at commit `78a74b9`). Per sample, with
/// `short` its latency and `long` the long-term average:
///
/// - `long` is an exponential average over `long_window` samples (default **600**,
///   factor `2 / (window + 1)`), a plain mean over the first **10** (the warm-up);
/// - if `long / short > 2`, the average is cut by 5 % (recovery after a long overload);
/// - if `in_flight < limit / 2` the limit is unchanged (app-limited: don't grow);
/// - `gradient = clamp(rtt_tolerance * long / short, 0.5, 1.0)` (tolerance default
///   **1.5**: latency may inflate by half before the limit shrinks);
/// - `new = limit * gradient + queue_size` (default **4**), then smoothed:
///   `limit * (1 - smoothing) + new * smoothing` (default **0.2**), clamped into
///   `[min, max]`. The limit is kept as a float; the bulkhead uses its integer part.
///
/// One step therefore moves the fractional limit by at most `smoothing * queue_size` up
/// and `smoothing * (limit / 2 - queue_size)` down.
///
/// **Our extension:** Netflix's Gradient2 ignores drops (it uses a dropped call's latency
/// like any other). Here a [`Outcome::Failure`](super::Outcome::Failure) counts as the
/// steepest gradient the rule allows, 0.5, whatever the in-flight count, and does not
/// enter the latency averages (a fast failure would otherwise pull the average down).
/// A burst of failures thus lowers the limit towards `2 * queue_size`, within the same
/// per-step bound. Cancelled and ignored calls change nothing.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use bulkhead::adaptive::{Gradient2, LimitAlgorithm, Limits, Outcome, Sample};
///
/// let mut g = Gradient2::default();
/// let mut limits = Limits { current: 16, min: 1, max: 16 };
/// for _ in 0..10 { // warm-up at 50 ms
///     let s = Sample::new(Duration::from_millis(50), 16, Outcome::Success);
///     limits.current = g.update(&s, limits);
/// }
/// assert_eq!(limits.current, 16);
/// let slow = Sample::new(Duration::from_secs(2), 16, Outcome::Success);
/// limits.current = g.update(&slow, limits);
/// assert!(limits.current < 16); // gradient 0.5: 16 * 0.8 + (8 + 4) * 0.2 = 15.2
/// ```
#[derive(Clone, Debug)]
pub struct Gradient2 {
    smoothing: f64,
    queue_size: f64,
    rtt_tolerance: f64,
    long_window: u32,
    estimated: Option<f64>,
    long: ExpAvg,
    last_latency: Option<Duration>,
    last_gradient: Option<f64>,
}

impl Gradient2 {
    /// Netflix's default smoothing factor.
    pub const DEFAULT_SMOOTHING: f64 = 0.2;
    /// Netflix's default queue allowance.
    pub const DEFAULT_QUEUE_SIZE: usize = 4;
    /// Netflix's default latency tolerance.
    pub const DEFAULT_RTT_TOLERANCE: f64 = 1.5;
    /// Netflix's default long window, in samples.
    pub const DEFAULT_LONG_WINDOW: u32 = 600;
    /// Netflix's warm-up: the first samples are averaged plainly.
    const WARMUP: u32 = 10;

    /// Gradient2 with the given parameters.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the key: `smoothing` outside `(0, 1]`, `rtt_tolerance`
    /// below 1 (Netflix's precondition), `long_window` zero.
    ///
    /// ```
    /// use bulkhead::adaptive::Gradient2;
    /// assert!(Gradient2::new(0.2, 4, 1.5, 600).is_ok());
    /// assert_eq!(Gradient2::new(0.2, 4, 0.9, 600).unwrap_err().key(), "rtt_tolerance");
    /// ```
    pub fn new(
        smoothing: f64,
        queue_size: usize,
        rtt_tolerance: f64,
        long_window: u32,
    ) -> Result<Gradient2, ConfigError> {
        if !(smoothing > 0.0 && smoothing <= 1.0) {
            return Err(ConfigError::new(
                "smoothing",
                smoothing.to_string(),
                "must be in (0, 1]".to_string(),
            ));
        }
        if !(rtt_tolerance >= 1.0 && rtt_tolerance.is_finite()) {
            return Err(ConfigError::new(
                "rtt_tolerance",
                rtt_tolerance.to_string(),
                "must be a finite number >= 1.0".to_string(),
            ));
        }
        if long_window == 0 {
            return Err(ConfigError::new(
                "long_window",
                "0".to_string(),
                "must be at least 1".to_string(),
            ));
        }
        Ok(Gradient2 {
            smoothing,
            queue_size: queue_size as f64,
            rtt_tolerance,
            long_window,
            estimated: None,
            long: ExpAvg::new(long_window, Self::WARMUP),
            last_latency: None,
            last_gradient: None,
        })
    }

    /// The smoothing factor.
    ///
    /// ```
    /// # use bulkhead::adaptive::Gradient2;
    /// assert_eq!(Gradient2::default().smoothing(), 0.2);
    /// ```
    pub fn smoothing(&self) -> f64 {
        self.smoothing
    }

    /// The queue allowance.
    ///
    /// ```
    /// # use bulkhead::adaptive::Gradient2;
    /// assert_eq!(Gradient2::default().queue_size(), 4);
    /// ```
    pub fn queue_size(&self) -> usize {
        self.queue_size as usize
    }

    /// The latency tolerance.
    ///
    /// ```
    /// # use bulkhead::adaptive::Gradient2;
    /// assert_eq!(Gradient2::default().rtt_tolerance(), 1.5);
    /// ```
    pub fn rtt_tolerance(&self) -> f64 {
        self.rtt_tolerance
    }

    /// The long window, in samples.
    ///
    /// ```
    /// # use bulkhead::adaptive::Gradient2;
    /// assert_eq!(Gradient2::default().long_window(), 600);
    /// ```
    pub fn long_window(&self) -> u32 {
        self.long_window
    }

    /// The fractional limit, re-read from `current` when someone else moved it.
    fn estimate(&mut self, limits: Limits) -> f64 {
        match self.estimated {
            Some(e) if e as usize == limits.current => e,
            _ => limits.current as f64,
        }
    }
}

impl Default for Gradient2 {
    fn default() -> Self {
        Gradient2::new(
            Self::DEFAULT_SMOOTHING,
            Self::DEFAULT_QUEUE_SIZE,
            Self::DEFAULT_RTT_TOLERANCE,
            Self::DEFAULT_LONG_WINDOW,
        )
        .expect("the defaults are valid")
    }
}

impl LimitAlgorithm for Gradient2 {
    fn update(&mut self, sample: &Sample, limits: Limits) -> usize {
        if !sample.outcome.is_informative() {
            return limits.current;
        }
        let estimated = self.estimate(limits);
        let gradient = if sample.outcome.is_failure() {
            0.5
        } else {
            let short = sample.nanos();
            let long = self.long.add(short);
            self.last_latency = Some(sample.latency);
            if long / short > 2.0 {
                self.long.scale(0.95);
            }
            if (sample.in_flight as f64) < estimated / 2.0 {
                self.estimated = Some(estimated);
                return limits.current;
            }
            (self.rtt_tolerance * long / short).clamp(0.5, 1.0)
        };
        self.last_gradient = Some(gradient);
        let target = estimated * gradient + self.queue_size;
        let smoothed = estimated * (1.0 - self.smoothing) + target * self.smoothing;
        let next = smoothed.clamp(limits.min as f64, limits.max as f64);
        self.estimated = Some(next);
        limits.clamp(next)
    }

    fn estimates(&self) -> Estimates {
        Estimates {
            no_load_latency: self.long.get().map(|n| Duration::from_nanos(n as u64)),
            last_latency: self.last_latency,
            gradient: self.last_gradient,
            queue_size: Some(self.queue_size),
            estimated_limit: self.estimated,
        }
    }
}

/// Netflix's `ExpAvgMeasurement`: a plain mean over the warm-up, then an exponential
/// average with factor `2 / (window + 1)`.
#[derive(Clone, Debug)]
struct ExpAvg {
    value: f64,
    sum: f64,
    count: u32,
    factor: f64,
    warmup: u32,
}

impl ExpAvg {
    fn new(window: u32, warmup: u32) -> ExpAvg {
        ExpAvg { value: 0.0, sum: 0.0, count: 0, factor: 2.0 / (f64::from(window) + 1.0), warmup }
    }

    fn add(&mut self, sample: f64) -> f64 {
        if self.count < self.warmup {
            self.count += 1;
            self.sum += sample;
            self.value = self.sum / f64::from(self.count);
        } else {
            self.value = self.value * (1.0 - self.factor) + sample * self.factor;
        }
        self.value
    }

    fn scale(&mut self, by: f64) {
        self.value *= by;
    }

    fn get(&self) -> Option<f64> {
        (self.count > 0).then_some(self.value)
    }
}
