//! Vegas: the queue estimated from the latency above the no-load latency.

use std::time::Duration;

use super::algorithm::{Estimates, LimitAlgorithm, Limits, Sample};
use crate::bulkhead::config::ConfigError;

/// Delay-based algorithm after TCP Vegas: estimates the queue the limit builds at the
/// downstream from how far latency sits above the no-load latency, and keeps it between
/// `alpha` and `beta`.
///
/// The rules and defaults are those of Netflix's concurrency-limits `VegasLimit`
/// (`concurrency-limits-core/.../limit/VegasLimit.java` and
/// `limit/functions/Log10RootIntFunction.java`; read at commit `78a74b9`). With
/// `log(l) = max(1, floor(log10(l)))`, per sample of latency `rtt`:
///
/// - a failure (Netflix's `didDrop`): `limit - log(limit)`;
/// - every `jitter * probe_multiplier * limit` samples (multiplier default **30**,
///   jitter uniform in `[0.5, 1)`, drawn again after each probe), `rtt_noload = rtt`
///   (a probe: the no-load latency may have risen), limit unchanged;
/// - if there is no `rtt_noload` yet or `rtt < rtt_noload`: `rtt_noload = rtt`, unchanged;
/// - `queue = ceil(limit * (1 - rtt_noload / rtt))`;
/// - else if `in_flight * 2 < limit`: unchanged (app-limited);
/// - else, with `alpha = 3 log(l)`, `beta = 6 log(l)`, `threshold = log(l)`:
///   `queue <= threshold`: `limit + beta`; `queue < alpha`: `limit + log(limit)`;
///   `queue > beta`: `limit - log(limit)`; otherwise unchanged;
/// - the result is clamped into `[min, max]` (Netflix: `[1, max]`) and smoothed:
///   `(1 - smoothing) * limit + smoothing * new` (default **1.0**: no smoothing).
///
/// **Our extension:** Netflix's Vegas handles a drop after the probe and no-load checks,
/// so a dropped call's latency can become the no-load latency; a fast refusal (1 ms) then
/// makes every later call look queued. Here a failure only decreases the limit: it
/// neither counts towards the probe nor touches the no-load latency.
///
/// One step therefore moves the limit up by at most `beta` and down by at most `log(l)`.
/// Cancelled and ignored calls change nothing. The jitter comes from a small xorshift
/// generator with a fixed seed ([`with_seed`](Self::with_seed) changes it), so a run is
/// reproducible.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use bulkhead::adaptive::{LimitAlgorithm, Limits, Outcome, Sample, Vegas};
///
/// let mut vegas = Vegas::default();
/// let mut limits = Limits { current: 10, min: 1, max: 16 };
/// let ms = |n| Sample::new(Duration::from_millis(n), 10, Outcome::Success);
/// limits.current = vegas.update(&ms(50), limits); // first sample: rtt_noload = 50 ms
/// limits.current = vegas.update(&ms(50), limits); // no queue: + beta (6)
/// assert_eq!(limits.current, 16);
/// limits.current = vegas.update(&ms(500), limits); // queue = ceil(16 * 0.9) = 15 > beta
/// assert_eq!(limits.current, 15);
/// ```
#[derive(Clone, Debug)]
pub struct Vegas {
    probe_multiplier: u32,
    smoothing: f64,
    estimated: Option<f64>,
    rtt_noload: Option<Duration>,
    last_latency: Option<Duration>,
    last_queue: Option<f64>,
    probe_count: u64,
    probe_jitter: f64,
    rng: u64,
}

impl Vegas {
    /// Netflix's default probe multiplier.
    pub const DEFAULT_PROBE_MULTIPLIER: u32 = 30;
    /// Netflix's default smoothing (none).
    pub const DEFAULT_SMOOTHING: f64 = 1.0;

    /// Vegas with `probe_multiplier` and `smoothing`.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `probe_multiplier` when it is zero, or `smoothing` when it
    /// is outside `(0, 1]`.
    ///
    /// ```
    /// use bulkhead::adaptive::Vegas;
    /// assert!(Vegas::new(30, 1.0).is_ok());
    /// assert_eq!(Vegas::new(0, 1.0).unwrap_err().key(), "probe_multiplier");
    /// ```
    pub fn new(probe_multiplier: u32, smoothing: f64) -> Result<Vegas, ConfigError> {
        if probe_multiplier == 0 {
            return Err(ConfigError::new(
                "probe_multiplier",
                "0".to_string(),
                "must be at least 1".to_string(),
            ));
        }
        if !(smoothing > 0.0 && smoothing <= 1.0) {
            return Err(ConfigError::new(
                "smoothing",
                smoothing.to_string(),
                "must be in (0, 1]".to_string(),
            ));
        }
        let mut vegas = Vegas {
            probe_multiplier,
            smoothing,
            estimated: None,
            rtt_noload: None,
            last_latency: None,
            last_queue: None,
            probe_count: 0,
            probe_jitter: 0.0,
            rng: 0x9E37_79B9_7F4A_7C15,
        };
        vegas.reset_jitter();
        Ok(vegas)
    }

    /// The same algorithm with the probe jitter drawn from `seed` (any value; 0 is mapped
    /// to a fixed non-zero seed).
    ///
    /// ```
    /// # use bulkhead::adaptive::Vegas;
    /// let vegas = Vegas::default().with_seed(7);
    /// assert_eq!(vegas.probe_multiplier(), 30);
    /// ```
    pub fn with_seed(mut self, seed: u64) -> Vegas {
        self.rng = if seed == 0 { 0x9E37_79B9_7F4A_7C15 } else { seed };
        self.reset_jitter();
        self
    }

    /// The probe multiplier.
    ///
    /// ```
    /// # use bulkhead::adaptive::Vegas;
    /// assert_eq!(Vegas::default().probe_multiplier(), 30);
    /// ```
    pub fn probe_multiplier(&self) -> u32 {
        self.probe_multiplier
    }

    /// The smoothing factor.
    ///
    /// ```
    /// # use bulkhead::adaptive::Vegas;
    /// assert_eq!(Vegas::default().smoothing(), 1.0);
    /// ```
    pub fn smoothing(&self) -> f64 {
        self.smoothing
    }

    /// A new jitter, uniform in [0.5, 1), from xorshift64.
    fn reset_jitter(&mut self) {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        let unit = (x >> 11) as f64 / (1u64 << 53) as f64;
        self.probe_jitter = 0.5 + 0.5 * unit;
    }

    /// Clamps `target`, smooths it against `estimated`, keeps it and returns its integer part.
    fn apply(&mut self, target: f64, estimated: f64, limits: Limits) -> usize {
        let clamped = target.clamp(limits.min as f64, limits.max as f64);
        let next = (1.0 - self.smoothing) * estimated + self.smoothing * clamped;
        self.estimated = Some(next);
        limits.clamp(next)
    }

    fn estimate(&self, limits: Limits) -> f64 {
        match self.estimated {
            Some(e) if e as usize == limits.current => e,
            _ => limits.current as f64,
        }
    }
}

/// Netflix's `Log10RootIntFunction` with baseline 0: `max(1, floor(log10(l)))`.
fn log10(limit: f64) -> f64 {
    if limit < 10.0 {
        1.0
    } else {
        limit.log10().floor().max(1.0)
    }
}

impl Default for Vegas {
    fn default() -> Self {
        Vegas::new(Self::DEFAULT_PROBE_MULTIPLIER, Self::DEFAULT_SMOOTHING)
            .expect("the defaults are valid")
    }
}

impl LimitAlgorithm for Vegas {
    fn update(&mut self, sample: &Sample, limits: Limits) -> usize {
        if !sample.outcome.is_informative() {
            return limits.current;
        }
        let estimated = self.estimate(limits);
        self.estimated = Some(estimated);
        if sample.outcome.is_failure() {
            // Our extension: a failure neither probes nor sets the no-load latency (a fast
            // refusal's latency says nothing about the downstream's service time).
            let target = estimated - log10(estimated);
            return self.apply(target, estimated, limits);
        }
        self.last_latency = Some(sample.latency);
        self.probe_count += 1;
        if self.probe_jitter * f64::from(self.probe_multiplier) * estimated
            <= self.probe_count as f64
        {
            self.reset_jitter();
            self.probe_count = 0;
            self.rtt_noload = Some(sample.latency);
            return limits.current;
        }
        let noload = match self.rtt_noload {
            Some(noload) if sample.latency >= noload && !noload.is_zero() => noload,
            _ => {
                self.rtt_noload = Some(sample.latency);
                return limits.current;
            }
        };
        let rtt = sample.nanos();
        let queue = (estimated * (1.0 - noload.as_secs_f64() * 1e9 / rtt)).ceil();
        self.last_queue = Some(queue);
        let l = log10(estimated);
        let target = if (sample.in_flight as f64) * 2.0 < estimated {
            return limits.current;
        } else if queue <= l {
            estimated + 6.0 * l
        } else if queue < 3.0 * l {
            estimated + l
        } else if queue > 6.0 * l {
            estimated - l
        } else {
            return limits.current;
        };
        self.apply(target, estimated, limits)
    }

    fn estimates(&self) -> Estimates {
        Estimates {
            no_load_latency: self.rtt_noload,
            last_latency: self.last_latency,
            gradient: None,
            queue_size: self.last_queue,
            estimated_limit: self.estimated,
        }
    }
}
