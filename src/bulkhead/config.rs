//! Bulkhead configuration: the limit, the maximum wait, the waiter cap, the queue order and
//! the sheddable headroom.

use core::fmt;
use core::time::Duration;

use crate::engine::policy::QueueOrder;
use crate::engine::state::MAX_PERMITS;

/// How many calls a [`Bulkhead`](crate::Bulkhead) admits at once, and how long a caller may
/// wait for a free slot.
///
/// Built with [`BulkheadConfig::builder`], which starts from [`BulkheadConfig::default`]
/// (25 concurrent calls, no wait, no waiter cap), or sized from a connection pool with
/// [`BulkheadConfig::for_pool`].
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use bulkhead::BulkheadConfig;
///
/// let config = BulkheadConfig::builder()
///     .max_concurrent_calls(16)
///     .max_wait_duration(Duration::from_millis(100))
///     .max_waiting_calls(32)
///     .build()?;
/// assert_eq!(config.max_concurrent_calls(), 16);
/// assert_eq!(config.max_waiting_calls(), Some(32));
/// # Ok::<(), bulkhead::ConfigError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BulkheadConfig {
    max_concurrent_calls: usize,
    max_wait_duration: Duration,
    max_waiting_calls: Option<usize>,
    queue_order: QueueOrder,
    sheddable_headroom: usize,
}

impl Default for BulkheadConfig {
    /// 25 concurrent calls, a max wait of zero (fail fast), no waiter cap, FIFO, no
    /// sheddable headroom.
    ///
    /// ```
    /// use bulkhead::BulkheadConfig;
    /// let config = BulkheadConfig::default();
    /// assert_eq!(config.max_concurrent_calls(), 25);
    /// assert!(config.max_wait_duration().is_zero());
    /// assert_eq!(config.max_waiting_calls(), None);
    /// ```
    fn default() -> Self {
        BulkheadConfig {
            max_concurrent_calls: Self::DEFAULT_MAX_CONCURRENT_CALLS,
            max_wait_duration: Duration::ZERO,
            max_waiting_calls: None,
            queue_order: QueueOrder::Fifo,
            sheddable_headroom: 0,
        }
    }
}

impl BulkheadConfig {
    /// The default limit: 25 concurrent calls (Resilience4j's default).
    pub const DEFAULT_MAX_CONCURRENT_CALLS: usize = 25;

    /// The largest `max_concurrent_calls` the engine accepts: 2^30 − 1.
    pub const MAX_CONCURRENT_CALLS: usize = MAX_PERMITS;

    /// The max wait [`for_pool`](Self::for_pool) uses: 100 ms, as the style guide asks.
    pub const POOL_MAX_WAIT: Duration = Duration::from_millis(100);

    /// A builder starting from [`BulkheadConfig::default`].
    ///
    /// # Examples
    ///
    /// ```
    /// use bulkhead::BulkheadConfig;
    /// let config = BulkheadConfig::builder().max_concurrent_calls(0).build()?;
    /// assert_eq!(config.max_concurrent_calls(), 0); // a closed bulkhead
    /// # Ok::<(), bulkhead::ConfigError>(())
    /// ```
    pub fn builder() -> BulkheadConfigBuilder {
        BulkheadConfigBuilder { config: BulkheadConfig::default() }
    }

    /// Sizes a bulkhead for a connection pool of `pool_max_concurrent` (style guide rule
    /// R-RES-BH-3): `floor(pool × 4 / 5)` concurrent calls, never below 1 for a pool of 1
    /// or more (`for_pool(0)` gives 0), and a 100 ms max wait. A pool larger than the
    /// engine's maximum is clamped to [`MAX_CONCURRENT_CALLS`](Self::MAX_CONCURRENT_CALLS).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use bulkhead::BulkheadConfig;
    ///
    /// assert_eq!(BulkheadConfig::for_pool(20).max_concurrent_calls(), 16);
    /// assert_eq!(BulkheadConfig::for_pool(1).max_concurrent_calls(), 1);
    /// assert_eq!(BulkheadConfig::for_pool(0).max_concurrent_calls(), 0);
    /// assert_eq!(BulkheadConfig::for_pool(20).max_wait_duration(), Duration::from_millis(100));
    /// ```
    pub fn for_pool(pool_max_concurrent: usize) -> BulkheadConfig {
        // floor(n * 4 / 5) without overflowing n * 4.
        let n = pool_max_concurrent;
        let calls = (n / 5) * 4 + (n % 5) * 4 / 5;
        let calls = if n >= 1 { calls.max(1) } else { 0 };
        BulkheadConfig {
            max_concurrent_calls: calls.min(Self::MAX_CONCURRENT_CALLS),
            max_wait_duration: Self::POOL_MAX_WAIT,
            ..BulkheadConfig::default()
        }
    }

    /// How many calls may be in flight at once.
    ///
    /// ```
    /// # use bulkhead::BulkheadConfig;
    /// assert_eq!(BulkheadConfig::default().max_concurrent_calls(), 25);
    /// ```
    pub fn max_concurrent_calls(&self) -> usize {
        self.max_concurrent_calls
    }

    /// How long a caller may wait for a free slot before it is refused. Zero: fail fast.
    ///
    /// ```
    /// # use bulkhead::BulkheadConfig;
    /// assert!(BulkheadConfig::default().max_wait_duration().is_zero());
    /// ```
    pub fn max_wait_duration(&self) -> Duration {
        self.max_wait_duration
    }

    /// How many callers may wait at once; `None` means waiters are bounded by time only.
    ///
    /// ```
    /// # use bulkhead::BulkheadConfig;
    /// assert_eq!(BulkheadConfig::default().max_waiting_calls(), None);
    /// ```
    pub fn max_waiting_calls(&self) -> Option<usize> {
        self.max_waiting_calls
    }

    /// The order queued callers are served in; see [`QueueOrder`].
    ///
    /// ```
    /// # use bulkhead::{BulkheadConfig, QueueOrder};
    /// assert_eq!(BulkheadConfig::default().queue_order(), QueueOrder::Fifo);
    /// ```
    pub fn queue_order(&self) -> QueueOrder {
        self.queue_order
    }

    /// The permits a sheddable call must leave free: see
    /// [`Criticality`](crate::Criticality). 0 (the default): sheddable calls are admitted
    /// as any other.
    ///
    /// ```
    /// # use bulkhead::BulkheadConfig;
    /// assert_eq!(BulkheadConfig::default().sheddable_headroom(), 0);
    /// ```
    pub fn sheddable_headroom(&self) -> usize {
        self.sheddable_headroom
    }
}

/// Builds a [`BulkheadConfig`], validating it in [`build`](Self::build).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use bulkhead::BulkheadConfig;
///
/// let config = BulkheadConfig::builder()
///     .max_concurrent_calls(4)
///     .max_wait_duration(Duration::from_micros(300))
///     .build()?;
/// assert_eq!(config.max_wait_duration(), Duration::from_micros(300));
/// # Ok::<(), bulkhead::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct BulkheadConfigBuilder {
    config: BulkheadConfig,
}

impl BulkheadConfigBuilder {
    /// Sets the limit. 0 is valid: a closed bulkhead that refuses every call.
    pub fn max_concurrent_calls(mut self, n: usize) -> Self {
        self.config.max_concurrent_calls = n;
        self
    }

    /// Sets the max wait. Sub-millisecond values are honoured; `Duration::MAX` (or any wait
    /// that does not fit the clock) means "wait until a slot frees".
    pub fn max_wait_duration(mut self, d: Duration) -> Self {
        self.config.max_wait_duration = d;
        self
    }

    /// Caps the number of waiting callers. `0` means nobody may wait.
    pub fn max_waiting_calls(mut self, n: usize) -> Self {
        self.config.max_waiting_calls = Some(n);
        self
    }

    /// Sets the order queued callers are served in (default FIFO); see [`QueueOrder`] for
    /// when to use which.
    ///
    /// ```
    /// use bulkhead::{BulkheadConfig, QueueOrder};
    /// let config = BulkheadConfig::builder().queue_order(QueueOrder::Lifo).build()?;
    /// assert_eq!(config.queue_order(), QueueOrder::Lifo);
    /// # Ok::<(), bulkhead::ConfigError>(())
    /// ```
    pub fn queue_order(mut self, order: QueueOrder) -> Self {
        self.config.queue_order = order;
        self
    }

    /// Keeps `n` permits from sheddable calls: a sheddable call is admitted only if `n`
    /// permits stay free after it (see [`Criticality`](crate::Criticality)). At most
    /// `max_concurrent_calls`.
    ///
    /// ```
    /// use bulkhead::BulkheadConfig;
    /// let config = BulkheadConfig::builder().max_concurrent_calls(10).sheddable_headroom(3).build()?;
    /// assert_eq!(config.sheddable_headroom(), 3);
    /// # Ok::<(), bulkhead::ConfigError>(())
    /// ```
    pub fn sheddable_headroom(mut self, n: usize) -> Self {
        self.config.sheddable_headroom = n;
        self
    }

    /// Validates and returns the configuration.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] naming `max_concurrent_calls` and its value when it is above
    /// [`BulkheadConfig::MAX_CONCURRENT_CALLS`]; `sheddable_headroom` when it is above
    /// `max_concurrent_calls`; `queue_order` when an adaptive LIFO's target or interval is
    /// zero.
    ///
    /// ```
    /// use bulkhead::BulkheadConfig;
    /// let err = BulkheadConfig::builder().max_concurrent_calls(usize::MAX).build().unwrap_err();
    /// assert_eq!(err.key(), "max_concurrent_calls");
    /// assert!(err.to_string().contains(&usize::MAX.to_string()));
    /// ```
    pub fn build(self) -> Result<BulkheadConfig, ConfigError> {
        let n = self.config.max_concurrent_calls;
        if n > BulkheadConfig::MAX_CONCURRENT_CALLS {
            return Err(ConfigError::new(
                "max_concurrent_calls",
                n.to_string(),
                format!(
                    "is above the engine's maximum of {}",
                    BulkheadConfig::MAX_CONCURRENT_CALLS
                ),
            ));
        }
        let headroom = self.config.sheddable_headroom;
        if headroom > n {
            return Err(ConfigError::new(
                "sheddable_headroom",
                headroom.to_string(),
                format!("is above max_concurrent_calls ({n}): no sheddable call could ever run"),
            ));
        }
        if let QueueOrder::AdaptiveLifo { target, interval } = self.config.queue_order {
            if target.is_zero() || interval.is_zero() {
                return Err(ConfigError::new(
                    "queue_order",
                    format!("adaptive-lifo (target {target:?}, interval {interval:?})"),
                    "needs a target and an interval above zero",
                ));
            }
        }
        Ok(self.config)
    }
}

/// A configuration value was rejected. The message names the key and the value.
///
/// # Examples
///
/// ```
/// use bulkhead::BulkheadConfig;
/// let err = BulkheadConfig::builder().max_concurrent_calls(1 << 40).build().unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     "max_concurrent_calls: 1099511627776 is above the engine's maximum of 1073741823"
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    key: String,
    value: String,
    problem: String,
    /// The file it was read from, when it was read from one (feature `serde`).
    file: Option<std::path::PathBuf>,
}

impl ConfigError {
    /// A new error: `key: value problem`.
    pub fn new(
        key: impl Into<String>,
        value: impl Into<String>,
        problem: impl Into<String>,
    ) -> Self {
        ConfigError { key: key.into(), value: value.into(), problem: problem.into(), file: None }
    }

    /// The same error, read from `file` (its message then starts with the file's name).
    #[cfg_attr(not(feature = "serde"), allow(dead_code))]
    pub(crate) fn in_file(mut self, file: &std::path::Path) -> Self {
        self.file = Some(file.to_path_buf());
        self
    }

    /// The file the key was read from, when the error comes from a file loaded by path
    /// (`BulkheadRegistry::from_file`, `ConfigFile::from_path`); its message then starts
    /// with the file's name.
    pub fn file(&self) -> Option<&std::path::Path> {
        self.file.as_deref()
    }

    /// The offending key (a path such as `resilience4j.bulkhead.instances.x.max-wait-duration`
    /// when it comes from a file).
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The offending value, as written.
    pub fn value(&self) -> &str {
        &self.value
    }

    /// What is wrong with it.
    pub fn problem(&self) -> &str {
        &self.problem
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(file) = &self.file {
            write!(f, "{}: ", file.display())?;
        }
        write!(f, "{}: {} {}", self.key, self.value, self.problem)
    }
}

impl std::error::Error for ConfigError {}
