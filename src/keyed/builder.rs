//! The builder of a keyed bulkhead and its defaults: the configuration of every key, the
//! total, the bound on live keys, the fallback key, the hasher, the shards and the timer
//! (the guaranteed shares' two setters are in `share.rs`).

use core::fmt;
use core::hash::{BuildHasher, Hash};
use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::sync::Arc;

use super::map::Shard;
use super::settings::Settings;
use super::{share, KeyedBulkhead};
use crate::bulkhead::config::{BulkheadConfig, ConfigError};
use crate::bulkhead::Bulkhead;
use crate::engine::pad::CachePadded;
use crate::engine::sync::{AtomicBool, AtomicU64, AtomicUsize, Mutex};
use crate::engine::timer::{Binding, Timer};

/// The default bound on live keys: 1 024.
pub const DEFAULT_MAX_KEYS: usize = 1024;

/// The most shards [`KeyedBulkheadBuilder::shards`] and the default give: 1 024.
///
/// ```
/// use bulkhead::keyed::{KeyedBulkhead, MAX_SHARDS};
/// let keyed = KeyedBulkhead::<u32>::builder("k").shards(1 << 20).build()?;
/// assert_eq!(keyed.shards(), MAX_SHARDS);
/// # Ok::<(), bulkhead::ConfigError>(())
/// ```
pub const MAX_SHARDS: usize = 1024;

/// The default shard count: the next power of two at or above four per core (as
/// `std::thread::available_parallelism` counts them), at least 8 and at most 64.
///
/// ```
/// let shards = bulkhead::keyed::default_shards();
/// assert!(shards.is_power_of_two() && (8..=64).contains(&shards));
/// ```
pub fn default_shards() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    cores.saturating_mul(4).next_power_of_two().clamp(8, 64)
}

/// Builds a [`KeyedBulkhead`]: [`KeyedBulkhead::builder`].
pub struct KeyedBulkheadBuilder<K, S = RandomState> {
    pub(crate) name: String,
    pub(crate) default: BulkheadConfig,
    pub(crate) overrides: HashMap<K, BulkheadConfig>,
    total: Option<BulkheadConfig>,
    max_keys: usize,
    fallback: Option<K>,
    hasher: S,
    shards: Option<usize>,
    /// Guaranteed shares of the total (`share.rs`).
    pub(super) shares: share::Shares<K>,
    timer: Binding,
}

impl<K: fmt::Debug, S> fmt::Debug for KeyedBulkheadBuilder<K, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedBulkheadBuilder")
            .field("name", &self.name)
            .field("default", &self.default)
            .field("overrides", &self.overrides)
            .field("total", &self.total)
            .field("max_keys", &self.max_keys)
            .field("fallback", &self.fallback)
            .field("shards", &self.shards)
            .finish_non_exhaustive()
    }
}

impl<K, S> KeyedBulkheadBuilder<K, S>
where
    K: Eq + Hash + Clone + fmt::Display,
    S: BuildHasher,
{
    /// The same builder under another name (the registry names what it builds).
    pub(crate) fn named(mut self, name: &str) -> Self {
        name.clone_into(&mut self.name);
        self
    }

    /// Binds the family to `timer` unless the builder was bound already (a registry's
    /// timer is the default for what it builds).
    pub(crate) fn timer_unless_bound(mut self, timer: Option<&Timer>) -> Self {
        if self.timer.is_none() {
            self.timer = timer.and_then(Timer::binding);
        }
        self
    }

    /// The configuration of every key without an override (default:
    /// [`BulkheadConfig::default`]).
    pub fn default_config(mut self, config: BulkheadConfig) -> Self {
        self.default = config;
        self
    }

    /// The configuration of `key`, instead of the default.
    pub fn key_config(mut self, key: K, config: BulkheadConfig) -> Self {
        self.overrides.insert(key, config);
        self
    }

    /// A shared total across all keys: a call needs a slot of its key and one of the total.
    /// Its `max_wait_duration` bounds the wait for a total slot, after the key's own wait.
    pub fn total(mut self, config: BulkheadConfig) -> Self {
        self.total = Some(config);
        self
    }

    /// At most `max_keys` keys live at once (default [`DEFAULT_MAX_KEYS`]); the fallback key
    /// is not counted.
    pub fn max_keys(mut self, max_keys: usize) -> Self {
        self.max_keys = max_keys;
        self
    }

    /// When `max_keys` keys are live and none is idle, a call for a new key goes to `key`'s
    /// bulkhead instead of being refused. The fallback key is created at once and never
    /// evicted.
    pub fn fallback_key(mut self, key: K) -> Self {
        self.fallback = Some(key);
        self
    }

    /// Hashes the keys with `hasher` instead of std's `RandomState` (SipHash, keyed at
    /// random: resists keys chosen to collide). Each call hashes its key once, to pick its
    /// shard and find it there. A faster hasher pays off for small keys the callers do not
    /// choose freely (integer ids); keep a keyed hasher for keys taken from requests.
    ///
    /// ```
    /// use std::hash::{BuildHasherDefault, Hasher};
    /// use bulkhead::keyed::KeyedBulkhead;
    ///
    /// /// A multiplicative hasher for integer ids (Fibonacci hashing): a few instructions.
    /// #[derive(Default)]
    /// struct IdHasher(u64);
    /// impl Hasher for IdHasher {
    ///     fn write(&mut self, bytes: &[u8]) {
    ///         for &b in bytes {
    ///             self.write_u64(u64::from(b));
    ///         }
    ///     }
    ///     fn write_u64(&mut self, n: u64) {
    ///         self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    ///     }
    ///     fn finish(&self) -> u64 {
    ///         self.0
    ///     }
    /// }
    ///
    /// let tenants = KeyedBulkhead::<u64>::builder("api")
    ///     .hasher(BuildHasherDefault::<IdHasher>::default())
    ///     .build()?;
    /// drop(tenants.try_acquire(&42)?);
    /// assert_eq!(tenants.live_keys(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn hasher<H: BuildHasher>(self, hasher: H) -> KeyedBulkheadBuilder<K, H> {
        KeyedBulkheadBuilder {
            name: self.name,
            default: self.default,
            overrides: self.overrides,
            total: self.total,
            max_keys: self.max_keys,
            fallback: self.fallback,
            hasher,
            shards: self.shards,
            shares: self.shares,
            timer: self.timer,
        }
    }

    /// Spreads the live keys over `shards` locks (rounded up to a power of two, at least 1,
    /// at most [`MAX_SHARDS`]; default [`default_shards`]). More shards make two busy keys
    /// less likely to share a lock; each shard costs a cache line and a table. Any count
    /// works with any `max_keys`: the bound is kept across shards.
    ///
    /// ```
    /// use bulkhead::keyed::KeyedBulkhead;
    /// let hosts = KeyedBulkhead::<u32>::builder("hosts").shards(3).max_keys(2).build()?;
    /// assert_eq!(hosts.shards(), 4);
    /// let (_a, _b) = (hosts.try_acquire(&1)?, hosts.try_acquire(&2)?);
    /// assert!(hosts.try_acquire(&3).is_err(), "two busy keys, max_keys 2");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn shards(mut self, shards: usize) -> Self {
        self.shards = Some(shards);
        self
    }

    /// Binds every bulkhead of the family (each key's, the fallback key's and the total) to
    /// `timer`, a [`Timer`] the embedder drives: their bounded async waits keep their
    /// deadlines there, never on the process-wide `bulkhead-timer` thread (see
    /// [`Bulkhead::with_timer`]). Default: the process's timer.
    ///
    /// ```
    /// use bulkhead::keyed::KeyedBulkhead;
    /// use bulkhead::timer::Timer;
    /// let timer = Timer::new(|at| println!("wake the runtime at {at:?}"));
    /// let hosts = KeyedBulkhead::<u32>::builder("hosts").timer(&timer).build()?;
    /// let _permit = hosts.try_acquire(&7)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn timer(mut self, timer: &Timer) -> Self {
        self.timer = timer.binding();
        self
    }

    /// Builds the keyed bulkhead.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] for `max_keys` 0 without a fallback key (every call would be refused).
    ///
    /// ```
    /// use bulkhead::keyed::KeyedBulkhead;
    /// let err = KeyedBulkhead::<u64>::builder("hosts").max_keys(0).build().unwrap_err();
    /// assert_eq!(err.key(), "max_keys");
    /// assert_eq!(err.value(), "0");
    /// ```
    pub fn build(self) -> Result<KeyedBulkhead<K, S>, ConfigError> {
        if self.max_keys == 0 && self.fallback.is_none() {
            return Err(ConfigError::new(
                "max_keys",
                "0",
                "refuses every key: give a fallback key or allow at least one key",
            ));
        }
        let total_limit = self.total.as_ref().map(BulkheadConfig::max_concurrent_calls);
        self.shares.validate(total_limit, self.max_keys, self.fallback.as_ref())?;
        let shares = self.shares.is_set().then_some(self.shares);
        let shards = self.shards.unwrap_or_else(default_shards).clamp(1, MAX_SHARDS);
        let shards = shards.next_power_of_two();
        let closed_config = BulkheadConfig::builder().max_concurrent_calls(0).build()?;
        let mut keyed = KeyedBulkhead {
            total: self.total.map(|config| {
                Arc::new(Bulkhead::bound(self.name.clone(), config, self.timer.clone()))
            }),
            close_signal: Bulkhead::bound(self.name.clone(), closed_config, self.timer.clone()),
            timer: self.timer,
            name: self.name,
            settings: Mutex::new(Settings::new(self.default, self.overrides)),
            max_keys: self.max_keys,
            fallback: None,
            hasher: self.hasher,
            shards: (0..shards).map(|_| CachePadded::new(Mutex::new(Shard::new()))).collect(),
            live: CachePadded::new(AtomicUsize::new(0)),
            closed: AtomicBool::new(false),
            refused_keys: AtomicU64::new(0),
            shares,
        };
        if let Some(key) = self.fallback {
            let bulkhead = Arc::new(keyed.new_bulkhead(&key).0);
            keyed.fallback = Some((key, bulkhead));
        }
        Ok(keyed)
    }
}

impl<K> KeyedBulkhead<K, RandomState>
where
    K: Eq + Hash + Clone + fmt::Display,
{
    /// A builder named `name`: default configuration [`BulkheadConfig::default`] for every
    /// key, no total, [`DEFAULT_MAX_KEYS`] keys, no fallback key, std's `RandomState` hasher
    /// ([`hasher`](KeyedBulkheadBuilder::hasher) changes it), [`default_shards`] shards.
    ///
    /// ```
    /// use bulkhead::keyed::KeyedBulkhead;
    /// let hosts = KeyedBulkhead::<&str>::builder("hosts").build()?;
    /// assert_eq!(hosts.name(), "hosts");
    /// assert_eq!(hosts.config_for(&"a.example").max_concurrent_calls(), 25);
    /// # Ok::<(), bulkhead::ConfigError>(())
    /// ```
    pub fn builder(name: impl Into<String>) -> KeyedBulkheadBuilder<K> {
        KeyedBulkheadBuilder {
            name: name.into(),
            default: BulkheadConfig::default(),
            overrides: HashMap::new(),
            total: None,
            max_keys: DEFAULT_MAX_KEYS,
            fallback: None,
            hasher: RandomState::new(),
            shards: None,
            shares: share::Shares::default(),
            timer: None,
        }
    }
}
