//! An instance's `adaptive:` block: our extension of Resilience4j's layout (Resilience4j
//! never shipped an adaptive bulkhead).

use core::time::Duration;

use crate::adaptive::{AdaptiveLimit, Aimd, Gradient2, Vegas};
use crate::bulkhead::config::{BulkheadConfig, ConfigError};
use crate::bulkhead::Bulkhead;

/// The algorithm an `adaptive:` block names (`algorithm: aimd | gradient2 | vegas`, relaxed
/// case, `-` and `_` ignored), each at its defaults.
///
/// ```
/// use bulkhead::file::AdaptiveAlgorithm;
/// assert_eq!(AdaptiveAlgorithm::from_name("Gradient-2"), Some(AdaptiveAlgorithm::Gradient2));
/// assert_eq!(AdaptiveAlgorithm::from_name("reno"), None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AdaptiveAlgorithm {
    /// [`Aimd::default`].
    Aimd,
    /// [`Gradient2::default`] (the default when the block names none).
    Gradient2,
    /// [`Vegas::default`].
    Vegas,
}

impl AdaptiveAlgorithm {
    /// The algorithm a file names, if any.
    pub fn from_name(name: &str) -> Option<AdaptiveAlgorithm> {
        match super::tree::canonical(name).as_str() {
            "aimd" => Some(AdaptiveAlgorithm::Aimd),
            "gradient2" => Some(AdaptiveAlgorithm::Gradient2),
            "vegas" => Some(AdaptiveAlgorithm::Vegas),
            _ => None,
        }
    }
}

/// An instance's `adaptive:` block, checked against the instance's configuration: our
/// extension of the Resilience4j layout.
///
/// ```yaml
/// resilience4j.bulkhead.instances.bank:
///   max-concurrent-calls: 16      # the cap: the adaptive limit never goes above it
///   adaptive:
///     algorithm: vegas            # aimd | gradient2 (default) | vegas
///     min-limit: 2                # default 1
///     max-limit: 16               # default max-concurrent-calls; never above it
///     initial-limit: 16           # default max-limit
///     timeout: 1s                 # optional: a slower success counts as a failure
/// ```
///
/// The block goes under an instance (not under `configs`: it is not inherited). Errors
/// name the key and the value: an unknown algorithm or key, a `max-limit` above
/// `max-concurrent-calls`, a `min-limit` above the max, an `initial-limit` outside the
/// bounds. `bulkhead-check` also warns when the max exceeds 80 % of the instance's
/// connection pool (rule R-RES-BH-3).
///
/// # Examples
///
/// ```
/// use bulkhead::file::{AdaptiveAlgorithm, ConfigFile};
/// use bulkhead::BulkheadRegistry;
///
/// let file = ConfigFile::from_yaml_str(
///     "
/// resilience4j.bulkhead.instances.bank:
///   max-concurrent-calls: 16
///   adaptive: { algorithm: vegas, min-limit: 2 }
/// ",
/// )?;
/// let bank = file.instance("bank").unwrap();
/// let settings = bank.adaptive().unwrap();
/// assert_eq!(settings.algorithm(), AdaptiveAlgorithm::Vegas);
/// assert_eq!(settings.path(), "resilience4j.bulkhead.instances.bank.adaptive");
///
/// let registry = BulkheadRegistry::from_config_file(&file);
/// let adaptive = registry.find("bank").unwrap().adaptive_limit().unwrap().metrics();
/// assert_eq!((adaptive.min_limit(), adaptive.max_limit()), (2, 16));
/// # Ok::<(), bulkhead::file::FileError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdaptiveSettings {
    pub(crate) path: String,
    pub(crate) algorithm: AdaptiveAlgorithm,
    pub(crate) min_limit: Option<usize>,
    pub(crate) max_limit: Option<usize>,
    pub(crate) initial_limit: Option<usize>,
    pub(crate) timeout: Option<Duration>,
}

impl AdaptiveSettings {
    /// The path of the block, e.g. `resilience4j.bulkhead.instances.bank.adaptive`.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The algorithm.
    pub fn algorithm(&self) -> AdaptiveAlgorithm {
        self.algorithm
    }

    /// `min-limit`, if set.
    pub fn min_limit(&self) -> Option<usize> {
        self.min_limit
    }

    /// `max-limit`, if set.
    pub fn max_limit(&self) -> Option<usize> {
        self.max_limit
    }

    /// `initial-limit`, if set.
    pub fn initial_limit(&self) -> Option<usize> {
        self.initial_limit
    }

    /// `timeout`, if set.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// These settings as an [`AdaptiveLimit`] for a bulkhead whose configured cap is `cap`.
    /// The settings were checked against the file's configuration for the instance; should
    /// the bulkhead hold a smaller cap (changed since), the bounds are clamped to it.
    ///
    /// ```
    /// use bulkhead::file::ConfigFile;
    /// use bulkhead::Bulkhead;
    /// let file = ConfigFile::from_yaml_str(
    ///     "resilience4j.bulkhead.instances.bank: {max-concurrent-calls: 16, adaptive: {algorithm: vegas, min-limit: 4}}",
    /// )?;
    /// let instance = &file.instances()[0];
    /// let bank = Bulkhead::new("bank", instance.config().clone());
    /// bank.set_adaptive_limit(instance.adaptive().unwrap().limit(16))?;
    /// assert_eq!(bank.adaptive_limit().unwrap().min_limit(), 4);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn limit(&self, cap: usize) -> AdaptiveLimit {
        let mut limit = match self.algorithm {
            AdaptiveAlgorithm::Aimd => AdaptiveLimit::new(Aimd::default()),
            AdaptiveAlgorithm::Gradient2 => AdaptiveLimit::new(Gradient2::default()),
            AdaptiveAlgorithm::Vegas => AdaptiveLimit::new(Vegas::default()),
        };
        let max = self.max_limit.map_or(cap, |n| n.min(cap));
        if let Some(n) = self.max_limit {
            limit = limit.max_limit(n.min(cap));
        }
        let min = self.min_limit.map_or(1.min(max), |n| n.min(max));
        if let Some(n) = self.min_limit {
            limit = limit.min_limit(n.min(max));
        }
        if let Some(n) = self.initial_limit {
            limit = limit.initial_limit(n.clamp(min, max));
        }
        if let Some(t) = self.timeout {
            limit = limit.timeout(t);
        }
        limit
    }

    /// Attaches these settings to `bulkhead` ([`Bulkhead::set_adaptive_limit`]), clamped to
    /// its current cap as [`limit`](Self::limit) does.
    ///
    /// # Errors
    ///
    /// As [`Bulkhead::set_adaptive_limit`]: `adaptive_limit` when one is already attached.
    pub fn attach(&self, bulkhead: &Bulkhead) -> Result<(), ConfigError> {
        bulkhead.set_adaptive_limit(self.limit(bulkhead.config().max_concurrent_calls()))
    }

    pub(crate) fn check(&self, config: &BulkheadConfig) -> Result<(), ConfigError> {
        let error = |key: &str, value: String, problem: String| {
            Err(ConfigError::new(format!("{}.{key}", self.path), value, problem))
        };
        let cap = config.max_concurrent_calls();
        let max = self.max_limit.unwrap_or(cap);
        if max > cap {
            let problem = format!("exceeds max-concurrent-calls ({cap}), the guide's cap");
            return error("max-limit", max.to_string(), problem);
        }
        let min = self.min_limit.unwrap_or(1.min(max));
        if min > max {
            return error("min-limit", min.to_string(), format!("exceeds the max limit ({max})"));
        }
        if let Some(initial) = self.initial_limit {
            if !(min..=max).contains(&initial) {
                let problem = format!("is outside [{min}, {max}]");
                return error("initial-limit", initial.to_string(), problem);
            }
        }
        if self.timeout.is_some_and(|t| t.is_zero()) {
            return error("timeout", "0s".to_owned(), "must be positive".to_owned());
        }
        Ok(())
    }
}
