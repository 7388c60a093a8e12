//! Bulkheads per key: one per tenant, downstream host or route, created on first use, with
//! an optional shared total and a bound on how many keys are live.
//!
//! # Two levels, and the order that avoids deadlock
//!
//! With a shared total, a call needs a slot of its key's bulkhead **and** one of the total.
//! Every caller takes them in the same order, its key first, then the total, and holds at
//! most one slot of each, so no two callers can each hold what the other waits for: there is
//! no deadlock. The order is also what keeps tenants apart: a caller waits for the total only
//! once its own key has admitted it, so a noisy key's queue is made of key slots (its own)
//! and never of total slots that other keys need. When either level refuses, the caller holds
//! nothing: a key slot taken before the total refused is released before the error returns.
//!
//! # Fairness
//!
//! - Within a key: FIFO, as for any [`Bulkhead`] (no newcomer overtakes a queued caller).
//! - At the total: FIFO among the callers that hold their key slot.
//! - Across keys there is no weighting: what protects a quiet key from a noisy one is the
//!   noisy key's own limit. With per-key limits below the total, no single key can take the
//!   whole total; a key's share of the total is at most its limit. A key cannot borrow
//!   another key's unused slots beyond the total.
//!
//! # Bounded cardinality
//!
//! At most `max_keys` keys are live. A key is *idle* when nothing holds its bulkhead but the
//! map: no permit, no waiter, no caller between the look-up and its acquire (each of them
//! holds an `Arc` to the key's bulkhead, cloned under the lock of the key's shard). When a
//! new key finds the map full, every idle key is evicted (one pass over the shards, one
//! shard's lock at a time); if none was idle, the call goes to the fallback key, if one is
//! configured, or is refused with [`KeyedFull::TooManyKeys`], which names the key. An evicted
//! key is recreated from its configuration on its next call: it had nothing in flight, so
//! nothing is lost but its bulkhead's own counters and listeners.
//!
//! # The sharded map
//!
//! The live keys are spread over shards (a power of two, [`KeyedBulkheadBuilder::shards`]),
//! each a hash table under its own lock on its own cache line: calls of keys in different
//! shards share no lock and write no common line. A key's shard is fixed by its hash (one
//! hash per call, with the hasher of [`KeyedBulkheadBuilder::hasher`]). No code ever holds
//! two shard locks at once. The bound is global and exact: a new key first reserves a place
//! in one atomic count of live keys (a compare-and-swap that fails at `max_keys`), then is
//! inserted under its shard's lock; an eviction removes the entry, then gives the place
//! back. So the count is never below the number of entries, and two new keys racing in
//! different shards cannot both take the last place.
//!
//! `try_acquire` takes the key's slot under the shard's lock from the map's own `Arc`: a
//! permit clones it once (for the [`OwnedPermit`] inside [`KeyedPermit`]) and a refusal
//! writes no reference count. Listeners and `tracing` events run after the lock is
//! released: a refusal that anyone observes clones the `Arc` to report outside the lock.
//!
//! # Keys, user code and the shard locks
//!
//! No user code runs or is dropped under a shard's lock, with one exception: the key's
//! [`Hash`] (hashed before the lock, with the map's hasher) and [`Eq`] (run by the look-up,
//! under the lock), as for a std `HashMap` inside a `Mutex`. Keep them plain: a key whose
//! `eq` calls back into this keyed bulkhead deadlocks. Everything else a key does runs
//! outside the locks: its `Clone` and `Display` (a new key's copy and its bulkhead's name are
//! made before its shard is locked), its `Drop` (an evicted entry, or the copy of a key that
//! another caller created first, is dropped after the lock), as do listeners (a key's
//! bulkhead, with its listeners, is dropped after the lock when evicted) and
//! [`metrics`](KeyedBulkhead::metrics)'s key clones (the map shares each key behind an `Arc`
//! so the lock only counts a reference).

use core::fmt;
use core::future::Future;
use core::hash::{BuildHasher, Hash};
use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::sync::Arc;

use crossbeam_utils::CachePadded;
use hashbrown::HashTable;

use crate::bulkhead::config::BulkheadConfig;
use crate::bulkhead::config::ConfigError;
use crate::bulkhead::error::BulkheadFull;
use crate::bulkhead::permit::OwnedPermit;
use crate::bulkhead::permit::Permit;
use crate::bulkhead::Bulkhead;
use crate::engine::state::Word;
use crate::engine::sync::{AtomicBool, AtomicUsize, Mutex, Ordering};
use crate::observe::metrics::BulkheadMetrics;
use crate::observe::reason::RejectReason;

/// A bulkhead per key (tenant, host, route), created on first use from a per-key
/// configuration, with an optional shared total across keys and a bound on live keys.
///
/// Each key's bulkhead is named `"{name}/{key}"` (its errors and events say which key), the
/// total is named `name`. See the [module docs](crate::keyed) for the acquisition order, the
/// fairness that holds across keys and eviction.
///
/// Every call hashes its key once and looks it up in the key's shard under that shard's lock
/// (a write to the shard's line per call, on top of the key's bulkhead); keys in different
/// shards do not contend. `S` hashes the keys (default std's `RandomState`; see
/// [`KeyedBulkheadBuilder::hasher`]). `benches/results/keyed.md` measures the cost against a
/// plain bulkhead.
///
/// # Examples
///
/// ```
/// use bulkhead::{BulkheadConfig, keyed::{KeyedBulkhead, KeyedFull}};
///
/// let tenants = KeyedBulkhead::<String>::builder("api")
///     .default_config(BulkheadConfig::builder().max_concurrent_calls(2).build()?)
///     .key_config("gold".to_owned(), BulkheadConfig::builder().max_concurrent_calls(8).build()?)
///     .total(BulkheadConfig::builder().max_concurrent_calls(9).build()?)
///     .max_keys(1_000)
///     .build()?;
///
/// let a1 = tenants.try_acquire(&"acme".to_owned())?;
/// let a2 = tenants.try_acquire(&"acme".to_owned())?;
/// // acme is at its limit of 2; other tenants are not affected.
/// match tenants.try_acquire(&"acme".to_owned()) {
///     Err(KeyedFull::Key(full)) => assert_eq!(full.bulkhead_name(), "api/acme"),
///     other => panic!("{other:?}"),
/// }
/// let gold: Vec<_> = (0..7).map(|_| tenants.try_acquire(&"gold".to_owned()).unwrap()).collect();
/// // 9 in flight: the shared total refuses even though gold has a slot left.
/// assert!(matches!(tenants.try_acquire(&"gold".to_owned()), Err(KeyedFull::Total(_))));
/// drop((a1, a2, gold));
/// assert_eq!(tenants.total_metrics().unwrap().in_flight_calls(), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct KeyedBulkhead<K, S = RandomState> {
    name: String,
    default: BulkheadConfig,
    overrides: HashMap<K, BulkheadConfig>,
    max_keys: usize,
    /// The fallback key and its bulkhead: created up front, never evicted, not counted in
    /// `max_keys`.
    fallback: Option<(K, Arc<Bulkhead>)>,
    total: Option<Arc<Bulkhead>>,
    hasher: S,
    /// The live keys, `shard_mask + 1` shards, each on its own cache line.
    shards: Box<[CachePadded<Mutex<Shard<K>>>]>,
    shard_mask: usize,
    /// Live keys plus places reserved by inserts under way: never below the number of
    /// entries in the shards, never above `max_keys`. Written only when a key is created or
    /// evicted, on its own line.
    live: CachePadded<AtomicUsize>,
    /// Whether [`close`](KeyedBulkhead::close) ran (each shard also has its own flag).
    closed: AtomicBool,
}

/// One shard of the live keys, and whether a close has passed it, under the shard's lock, so
/// a key created in this shard after the close reached it is created closed.
struct Shard<K> {
    /// An entry whose `Arc` only the map holds is idle (see the module docs).
    table: HashTable<Entry<K>>,
    closed: bool,
}

/// A live key, its hash (to grow the table without hashing again) and its bulkhead.
///
/// The key is shared (`Arc<K>`) so that [`KeyedBulkhead::metrics`] can take it under the
/// shard's lock with a reference count and clone the key itself (user code) after the lock.
struct Entry<K> {
    hash: u64,
    key: Arc<K>,
    bulkhead: Arc<Bulkhead>,
}

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
        let shards = self.shards.unwrap_or_else(default_shards).clamp(1, MAX_SHARDS);
        let shards = shards.next_power_of_two();
        let mut keyed = KeyedBulkhead {
            total: self.total.map(|config| Arc::new(Bulkhead::new(self.name.clone(), config))),
            name: self.name,
            default: self.default,
            overrides: self.overrides,
            max_keys: self.max_keys,
            fallback: None,
            hasher: self.hasher,
            shards: (0..shards)
                .map(|_| {
                    CachePadded::new(Mutex::new(Shard { table: HashTable::new(), closed: false }))
                })
                .collect(),
            shard_mask: shards - 1,
            live: CachePadded::new(AtomicUsize::new(0)),
            closed: AtomicBool::new(false),
        };
        if let Some(key) = self.fallback {
            let bulkhead = Arc::new(keyed.new_bulkhead(&key));
            keyed.fallback = Some((key, bulkhead));
        }
        Ok(keyed)
    }
}

impl<K, S> KeyedBulkhead<K, S> {
    /// The keyed bulkhead's name (also the total's name).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Closes the keyed bulkhead for a graceful shutdown: every live key, the fallback key
    /// and the total ([`Bulkhead::close`]); a key created afterwards is created closed. Every
    /// new call is refused with [`RejectReason::Closed`]; calls in flight finish. Returns
    /// `true` if this call closed it, `false` if it was already closed.
    ///
    /// ```
    /// use std::time::Duration;
    /// use bulkhead::{RejectReason, keyed::KeyedBulkhead};
    /// let tenants = KeyedBulkhead::<u32>::builder("api").build()?;
    /// let in_flight = tenants.try_acquire(&1)?;
    /// assert!(tenants.close());
    /// assert!(!tenants.close(), "already closed");
    /// assert!(tenants.is_closed());
    /// // A live key and a key created after the close both refuse.
    /// assert_eq!(tenants.try_acquire(&1).unwrap_err().reason(), Some(RejectReason::Closed));
    /// assert_eq!(tenants.try_acquire(&2).unwrap_err().reason(), Some(RejectReason::Closed));
    /// assert!(!tenants.wait_drained(Duration::ZERO), "a call is still in flight");
    /// drop(in_flight);
    /// assert!(tenants.wait_drained(Duration::from_secs(1)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn close(&self) -> bool {
        // Ordering: Relaxed — a lone flag, no data published with it: the swap's RMW makes
        // one caller the closer, and a key created later reads it under its shard's lock
        // (`insert`) or finds its shard's own flag set by `close_shards`.
        if self.closed.swap(true, Ordering::Relaxed) {
            return false;
        }
        self.close_keys();
        true
    }

    /// Closes every shard (a key created in it afterwards is created closed), every live
    /// key, the fallback key and the total, and returns the live keys' bulkheads. One shard
    /// locked at a time; closing twice is harmless (`Bulkhead::close` is idempotent), so
    /// `wait_drained` runs it too and never misses a key a close still under way would reach.
    fn close_keys(&self) -> Vec<Arc<Bulkhead>> {
        let mut live = Vec::new();
        for shard in self.shards.iter() {
            let mut shard = shard.lock();
            shard.closed = true;
            live.extend(shard.table.iter().map(|entry| Arc::clone(&entry.bulkhead)));
        }
        for bulkhead in live.iter().chain(self.fallback.as_ref().map(|(_, b)| b)) {
            bulkhead.close();
        }
        if let Some(total) = &self.total {
            total.close();
        }
        live
    }

    /// Whether [`close`](Self::close) ran.
    pub fn is_closed(&self) -> bool {
        // Ordering: Relaxed — a lone flag (see `close`); nothing is read through it.
        self.closed.load(Ordering::Relaxed)
    }

    /// After [`close`](Self::close), waits until no call is in flight on any key (nor on the
    /// total), for at most `timeout` in all. Returns `true` if it is drained; `false` at
    /// once if it is not closed (unlike [`Bulkhead::wait_drained`], it does not wait for
    /// another thread to close it).
    ///
    /// # Blocking
    ///
    /// Blocks the calling thread for up to `timeout`.
    ///
    /// # Panics
    ///
    /// As [`Bulkhead::wait_drained`]: if it would wait on a thread that polls async tasks.
    #[must_use = "false means calls were still in flight when the timeout passed"]
    pub fn wait_drained(&self, timeout: std::time::Duration) -> bool {
        // The engine's clock (src/engine/sync.rs), so a model's clock drives this deadline too.
        let clock = crate::engine::sync::Clock::new();
        let deadline = clock.deadline(clock.now(), timeout);
        let left = || deadline.map_or(timeout, |d| clock.between(clock.now(), d));
        if !self.is_closed() {
            return false;
        }
        // Closes what a close still under way on another thread has not reached yet, so no
        // key created after this snapshot of its shard can admit a call.
        let mut all = self.close_keys();
        all.extend(self.fallback.as_ref().map(|(_, b)| Arc::clone(b)));
        // Key slots are released before the total's: the keys drain first.
        all.iter().all(|bulkhead| bulkhead.wait_drained(left()))
            && self.total.as_ref().map_or(true, |total| total.wait_drained(left()))
    }

    /// How many keys are live (the fallback key not counted).
    ///
    /// ```
    /// use bulkhead::keyed::KeyedBulkhead;
    /// let hosts = KeyedBulkhead::<&str>::builder("hosts").build()?;
    /// drop(hosts.try_acquire(&"a.example")?);
    /// assert_eq!(hosts.live_keys(), 1);
    /// assert_eq!(hosts.evict_idle(), 1);
    /// assert_eq!(hosts.live_keys(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn live_keys(&self) -> usize {
        // Ordering: Relaxed — a count read for its value alone; no data is read through it.
        // It includes places reserved by inserts under way (each ends, under its shard's
        // lock, with the key inserted).
        self.live.load(Ordering::Relaxed)
    }

    /// How many shards hold the live keys (a power of two): [`KeyedBulkheadBuilder::shards`].
    ///
    /// ```
    /// use bulkhead::keyed::KeyedBulkhead;
    /// let hosts = KeyedBulkhead::<&str>::builder("hosts").shards(16).build()?;
    /// assert_eq!(hosts.shards(), 16);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn shards(&self) -> usize {
        self.shards.len()
    }

    /// Evicts every idle key now (nothing in flight, nobody waiting); returns how many. A
    /// full map does this by itself when a new key arrives; call it to return memory sooner.
    /// Goes over the shards one at a time (one lock held at a time).
    pub fn evict_idle(&self) -> usize {
        let mut evicted = 0;
        // The entries removed from each shard are dropped after its lock is released: a key's
        // `Drop` and a bulkhead's (its listeners) are user code, which never runs under our
        // lock (it may call this keyed bulkhead again).
        let mut removed = Vec::new();
        for shard in self.shards.iter() {
            let mut shard = shard.lock();
            // A shard that a close has passed creates no live key again (`insert`), so its
            // closed keys need no happens-before with a next holder: nobody holds it but the
            // map is enough (their semaphores keep their waiters flag once closed).
            let closed = shard.closed;
            removed.extend(shard.table.extract_if(|entry| is_idle(&entry.bulkhead, closed)));
            drop(shard);
            if !removed.is_empty() {
                // Gives the places back after the entries are gone, so the count is never
                // below the entries. Ordering: Relaxed — the bound needs only the count's
                // modification order (every reservation is an RMW on it); nothing else is
                // published: the next bulkhead of an evicted key is created under this
                // same shard's lock, which orders it after the eviction.
                self.live.fetch_sub(removed.len(), Ordering::Relaxed);
                evicted += removed.len();
                removed.clear();
            }
        }
        evicted
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
        }
    }
}

impl<K, S> KeyedBulkhead<K, S>
where
    K: Eq + Hash + Clone + fmt::Display,
    S: BuildHasher,
{
    /// The configuration `key` gets: its override, or the default.
    pub fn config_for(&self, key: &K) -> BulkheadConfig {
        self.overrides.get(key).unwrap_or(&self.default).clone()
    }

    /// The most keys live at once (the fallback key not counted).
    pub fn max_keys(&self) -> usize {
        self.max_keys
    }

    fn new_bulkhead(&self, key: &K) -> Bulkhead {
        Bulkhead::new(format!("{}/{}", self.name, key), self.config_for(key))
    }

    /// The shard of a key with this hash. Bits 40.. of the hash: not the low bits the
    /// shard's table indexes its buckets with, nor the top 7 it keeps as tags, so the keys
    /// of one shard still spread over its buckets and tags.
    #[inline]
    fn shard(&self, hash: u64) -> &Mutex<Shard<K>> {
        &self.shards[(hash >> 40) as usize & self.shard_mask]
    }

    /// The bulkhead of `key`, created if it is not live: the fallback key's when the map is
    /// full and nothing is idle, an error if there is no fallback key. The `Arc` is cloned
    /// under the shard's lock (eviction, which also holds it, sees the clone).
    pub(crate) fn bulkhead_for(&self, key: &K) -> Result<Arc<Bulkhead>, KeyedFull> {
        if let Some((fallback, bulkhead)) = &self.fallback {
            if fallback == key {
                return Ok(Arc::clone(bulkhead));
            }
        }
        let hash = self.hasher.hash_one(key);
        if let Some(entry) = self.shard(hash).lock().table.find(hash, |e| *e.key == *key) {
            return Ok(Arc::clone(&entry.bulkhead));
        }
        self.insert(key, hash)
    }

    /// A slot of `key` without waiting: [`try_acquire`](Self::try_acquire)'s first level.
    /// A live key's slot is taken under its shard's lock from the map's own `Arc`, cloned
    /// only for a permit (or for a refusal someone observes, reported after the lock).
    #[inline]
    fn try_key(&self, key: &K) -> Result<OwnedPermit, KeyedFull> {
        if let Some((fallback, bulkhead)) = &self.fallback {
            if fallback == key {
                return bulkhead.try_acquire_owned().map_err(KeyedFull::Key);
            }
        }
        let hash = self.hasher.hash_one(key);
        let shard = self.shard(hash).lock();
        let Some(entry) = shard.table.find(hash, |e| *e.key == *key) else {
            drop(shard);
            return self.insert(key, hash)?.try_acquire_owned().map_err(KeyedFull::Key);
        };
        match entry.bulkhead.sem().try_acquire() {
            Ok(word) => {
                let bulkhead = Arc::clone(&entry.bulkhead);
                drop(shard);
                // Listeners run outside the shard's lock.
                let mark = bulkhead.permitted(word);
                Ok(OwnedPermit::from_acquired(bulkhead, mark))
            }
            // Unobserved: building the error runs no user code and writes nothing shared;
            // the guard is released after the error is built. `refuse_unobserved` notifies
            // no one even if a `tracing` subscriber became interested since `observed` looked.
            Err(word) if !observed(word) => {
                Err(KeyedFull::Key(entry.bulkhead.refuse_unobserved(word)))
            }
            Err(word) => {
                // Someone observes: report after the lock, on a clone of the `Arc`.
                let bulkhead = Arc::clone(&entry.bulkhead);
                drop(shard);
                Err(KeyedFull::Key(bulkhead.refuse(word)))
            }
        }
    }

    /// Creates `key` (hash `hash`) in its shard, unless another caller did meanwhile: a place
    /// is reserved in the global count first, so the bound holds across shards. At the bound,
    /// evicts every idle key (shard by shard, without this shard's lock) and tries once more;
    /// then the fallback key, or [`KeyedFull::TooManyKeys`]. After [`close`](Self::close),
    /// a new key is not inserted: the caller gets a closed bulkhead of its own, so it is
    /// refused with `Closed` (never `TooManyKeys`, however full the map) and takes no place.
    ///
    /// The key's clone and its bulkhead's name (the key's `Display`) are user code: they are
    /// made before the shard's lock is taken, and dropped after it is released when another
    /// caller created the key first. Only the key's `Hash` and `Eq` run under the lock.
    #[cold]
    #[inline(never)]
    fn insert(&self, key: &K, hash: u64) -> Result<Arc<Bulkhead>, KeyedFull> {
        let mut new = Some((Arc::new(key.clone()), Arc::new(self.new_bulkhead(key))));
        for attempt in 0..2 {
            if attempt == 1 {
                // No shard lock is held here: `evict_idle` takes them one at a time.
                self.evict_idle();
            }
            let mut shard = self.shard(hash).lock();
            if let Some(entry) = shard.table.find(hash, |e| *e.key == *key) {
                let found = Arc::clone(&entry.bulkhead);
                drop(shard);
                // Another caller created it: ours is dropped after the lock.
                drop(new);
                return Ok(found);
            }
            // Ordering: Relaxed — a lone flag (see `close`); `close_keys` also sets this
            // shard's flag under this lock, which covers a close that has passed the shard.
            if shard.closed || self.closed.load(Ordering::Relaxed) {
                drop(shard);
                let (_, bulkhead) = new.take().expect("made above, taken once");
                // Closed before this key was created: it refuses as the others do, and it is
                // not inserted (it would take a place and could never admit anyone).
                bulkhead.close();
                return Ok(bulkhead);
            }
            if !self.reserve() {
                continue;
            }
            let (key, bulkhead) = new.take().expect("made above, taken once");
            let entry = Entry { hash, key, bulkhead: Arc::clone(&bulkhead) };
            // The place is the entry's now: `evict_idle` gives it back. Nothing between the
            // reservation and here runs user code or can fail.
            shard.table.insert_unique(hash, entry, |e| e.hash);
            return Ok(bulkhead);
        }
        drop(new);
        match &self.fallback {
            Some((_, bulkhead)) => Ok(Arc::clone(bulkhead)),
            None => Err(self.too_many_keys(key)),
        }
    }

    /// Takes a place for a new key in the global count of live keys; `false` at `max_keys`.
    /// Released by the eviction of the key inserted with it (`evict_idle`).
    fn reserve(&self) -> bool {
        // Ordering: Relaxed (both) — the bound needs only the count's modification order:
        // every reservation and release is an RMW on this one atomic, so two inserts racing
        // for the last place cannot both succeed; no data is published through the count.
        let mut live = self.live.load(Ordering::Relaxed);
        loop {
            if live >= self.max_keys {
                return false;
            }
            // Ordering: Relaxed, success and failure — as above.
            match self.live.compare_exchange(live, live + 1, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return true,
                Err(now) => live = now,
            }
        }
    }

    #[cold]
    fn too_many_keys(&self, key: &K) -> KeyedFull {
        KeyedFull::TooManyKeys {
            name: self.name.clone(),
            key: key.to_string(),
            max_keys: self.max_keys,
        }
    }

    /// Takes a slot of `key` and, with a total, one of the total. Never waits.
    ///
    /// # Errors
    ///
    /// [`KeyedFull::Key`] if the key is full (reason `Full` or `Closed`),
    /// [`KeyedFull::Total`] if the total is, [`KeyedFull::TooManyKeys`] if `key` is new,
    /// `max_keys` keys are busy and there is no fallback key. No slot is held after an error.
    ///
    /// ```
    /// use bulkhead::{BulkheadConfig, RejectReason, keyed::KeyedBulkhead};
    /// let hosts = KeyedBulkhead::<&str>::builder("hosts")
    ///     .default_config(BulkheadConfig::builder().max_concurrent_calls(1).build()?)
    ///     .build()?;
    /// let _held = hosts.try_acquire(&"a.example")?;
    /// let refused = hosts.try_acquire(&"a.example").unwrap_err();
    /// assert_eq!(refused.reason(), Some(RejectReason::Full));
    /// assert!(hosts.try_acquire(&"b.example").is_ok());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_acquire(&self, key: &K) -> Result<KeyedPermit<'_>, KeyedFull> {
        let key_permit = self.try_key(key)?;
        let total = self.total.as_deref().map(Bulkhead::try_acquire);
        both(key_permit, total)
    }

    /// Takes a slot of `key`, waiting up to the key's `max_wait_duration`, then one of the
    /// total, waiting up to the total's. A call may thus wait up to the sum of both.
    ///
    /// # Blocking
    ///
    /// Blocks the calling thread while it waits (like [`Bulkhead::acquire`]); from async
    /// code use [`acquire_async`](Self::acquire_async).
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](Self::try_acquire), with the waiting reasons of the level that
    /// refused (`WaitTimedOut`, `TooManyWaiting`).
    ///
    /// ```
    /// use bulkhead::keyed::KeyedBulkhead;
    /// let hosts = KeyedBulkhead::<&str>::builder("hosts").build()?;
    /// let permit = hosts.acquire(&"a.example")?;
    /// assert_eq!(permit.key_bulkhead().name(), "hosts/a.example");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire(&self, key: &K) -> Result<KeyedPermit<'_>, KeyedFull> {
        let bulkhead = self.bulkhead_for(key)?;
        let key_permit = bulkhead.acquire_owned().map_err(KeyedFull::Key)?;
        let total = self.total.as_deref().map(Bulkhead::acquire);
        both(key_permit, total)
    }

    /// The async [`acquire`](Self::acquire): waits for a slot of `key` up to the key's max
    /// wait, then for one of the total up to the total's.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future at any point leaks nothing: a pending wait is withdrawn (a slot
    /// granted meanwhile is passed on), and a key slot already taken is released.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// ```
    /// use bulkhead::keyed::KeyedBulkhead;
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build()?.block_on(async {
    /// let hosts = KeyedBulkhead::<&str>::builder("hosts").build()?;
    /// let permit = hosts.acquire_async(&"a.example").await?;
    /// assert_eq!(hosts.key_metrics(&"a.example").unwrap().in_flight_calls(), 1);
    /// drop(permit);
    /// # Ok::<(), Box<dyn std::error::Error>>(()) })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn acquire_async(&self, key: &K) -> Result<KeyedPermit<'_>, KeyedFull> {
        let bulkhead = self.bulkhead_for(key)?;
        let key_permit = bulkhead.acquire_owned_async().await.map_err(KeyedFull::Key)?;
        let total = match &self.total {
            Some(total) => Some(total.acquire_async().await),
            None => None,
        };
        both(key_permit, total)
    }

    /// Runs `f` on the calling thread with a slot of `key` (and of the total) held; the
    /// slots are released when `f` returns or unwinds.
    ///
    /// # Blocking
    ///
    /// Waits like [`acquire`](Self::acquire).
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire); `f` does not run.
    ///
    /// ```
    /// use bulkhead::keyed::KeyedBulkhead;
    /// let tenants = KeyedBulkhead::<u64>::builder("api").build()?;
    /// assert_eq!(tenants.call(&42, || "done")?, "done");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn call<T>(&self, key: &K, f: impl FnOnce() -> T) -> Result<T, KeyedFull> {
        let _permit = self.acquire(key)?;
        Ok(f())
    }

    /// Awaits `fut` in the calling task with a slot of `key` (and of the total) held until it
    /// completes or is dropped.
    ///
    /// # Cancel safety
    ///
    /// As [`acquire_async`](Self::acquire_async); once `fut` runs, dropping the future drops
    /// `fut` and releases the slots.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire); `fut` is not polled.
    ///
    /// ```
    /// use bulkhead::keyed::KeyedBulkhead;
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build()?.block_on(async {
    /// let tenants = KeyedBulkhead::<u64>::builder("api").build()?;
    /// assert_eq!(tenants.call_async(&42, async { 7 }).await?, 7);
    /// # Ok::<(), Box<dyn std::error::Error>>(()) })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn call_async<F: Future>(&self, key: &K, fut: F) -> Result<F::Output, KeyedFull> {
        let _permit = self.acquire_async(key).await?;
        Ok(fut.await)
    }

    /// The shared total, shared (for owned acquires: the tower layer's response future).
    #[cfg(feature = "tower")]
    pub(crate) fn total_arc(&self) -> Option<&Arc<Bulkhead>> {
        self.total.as_ref()
    }

    /// The shared total, if one is configured.
    pub fn total(&self) -> Option<&Bulkhead> {
        self.total.as_deref()
    }

    /// A snapshot of the total's metrics, if one is configured.
    pub fn total_metrics(&self) -> Option<BulkheadMetrics> {
        self.total.as_deref().map(Bulkhead::metrics)
    }

    /// A snapshot of `key`'s metrics, if it is live (or is the fallback key). Does not
    /// create the key.
    pub fn key_metrics(&self, key: &K) -> Option<BulkheadMetrics> {
        if let Some((fallback, bulkhead)) = &self.fallback {
            if fallback == key {
                return Some(bulkhead.metrics());
            }
        }
        let hash = self.hasher.hash_one(key);
        let shard = self.shard(hash).lock();
        shard.table.find(hash, |e| *e.key == *key).map(|entry| entry.bulkhead.metrics())
    }

    /// The bulkhead of `key`, if it is live (or is the fallback key), to register listeners,
    /// enable counters or read its configuration. Does not create the key. Holding the
    /// returned `Arc` keeps the key live: it is not idle, so it is not evicted.
    ///
    /// ```
    /// use bulkhead::keyed::KeyedBulkhead;
    /// let hosts = KeyedBulkhead::<&str>::builder("hosts").build()?;
    /// assert!(hosts.key_bulkhead(&"a.example").is_none());
    /// drop(hosts.try_acquire(&"a.example")?);
    /// assert_eq!(hosts.key_bulkhead(&"a.example").unwrap().name(), "hosts/a.example");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn key_bulkhead(&self, key: &K) -> Option<Arc<Bulkhead>> {
        if let Some((fallback, bulkhead)) = &self.fallback {
            if fallback == key {
                return Some(Arc::clone(bulkhead));
            }
        }
        let hash = self.hasher.hash_one(key);
        let shard = self.shard(hash).lock();
        shard.table.find(hash, |e| *e.key == *key).map(|entry| Arc::clone(&entry.bulkhead))
    }

    /// Metrics with a bounded number of labels: the `cap` live keys with the most calls in
    /// flight (then waiting) each on their own, every other live key summed into
    /// [`KeyedMetrics::others`]. Export `others` under one label (say `key="other"`), so a
    /// dashboard has at most `cap + 1` series whatever the number of tenants.
    ///
    /// ```
    /// use bulkhead::keyed::KeyedBulkhead;
    /// let tenants = KeyedBulkhead::<u32>::builder("api").build()?;
    /// let held: Vec<_> = (0..5).map(|t| tenants.try_acquire(&t).unwrap()).collect();
    /// let _two = tenants.try_acquire(&3)?;
    /// let metrics = tenants.metrics(2);
    /// assert_eq!(metrics.keys.len(), 2);
    /// assert_eq!(metrics.keys[0].0, 3); // two in flight
    /// assert_eq!(metrics.other_keys, 3);
    /// assert_eq!(metrics.others.in_flight_calls(), 3);
    /// # drop(held);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn metrics(&self, cap: usize) -> KeyedMetrics<K> {
        // Under each shard's lock the keys are only shared (a reference count): cloning a
        // key is user code, done after the locks, as is dropping the shared handles.
        let mut shared: Vec<(Arc<K>, BulkheadMetrics)> = Vec::new();
        for shard in self.shards.iter() {
            let shard = shard.lock();
            shared.extend(shard.table.iter().map(|e| (Arc::clone(&e.key), e.bulkhead.metrics())));
        }
        let mut all: Vec<(K, BulkheadMetrics)> =
            shared.into_iter().map(|(key, m)| (K::clone(&key), m)).collect();
        if let Some((key, bulkhead)) = &self.fallback {
            all.push((key.clone(), bulkhead.metrics()));
        }
        all.sort_by(|(_, a), (_, b)| {
            (b.in_flight_calls(), b.waiting_calls()).cmp(&(a.in_flight_calls(), a.waiting_calls()))
        });
        let rest = all.split_off(cap.min(all.len()));
        let mut others = BulkheadMetrics {
            available: 0,
            max_allowed: 0,
            in_flight: 0,
            waiting: 0,
            closed: false,
            counts: None,
        };
        for (_, m) in &rest {
            others.available += m.available;
            others.max_allowed += m.max_allowed;
            others.in_flight += m.in_flight;
            others.waiting += m.waiting;
        }
        KeyedMetrics { keys: all, others, other_keys: rest.len(), total: self.total_metrics() }
    }
}

/// The permit of a caller that holds `key_permit` and tried the total (if any): both, or
/// the total's refusal with the key's slot released first.
fn both<'a>(
    key_permit: OwnedPermit,
    total: Option<Result<Permit<'a>, BulkheadFull>>,
) -> Result<KeyedPermit<'a>, KeyedFull> {
    match total {
        None => Ok(KeyedPermit { key: key_permit, total: None }),
        Some(Ok(total)) => Ok(KeyedPermit { key: key_permit, total: Some(total) }),
        Some(Err(refused)) => {
            // The total refused: give the key's slot back before telling the caller, so
            // no slot of either level is held once the error is returned.
            drop(key_permit);
            Err(KeyedFull::Total(refused))
        }
    }
}

/// Whether a refusal read from `word` reaches user code (listeners, counters, a `tracing`
/// subscriber): the condition under which `Bulkhead::reject` does more than build the error.
#[inline]
fn observed(word: Word) -> bool {
    word.is_observed() || crate::observe::trace::interested()
}

/// Whether a key's bulkhead may be evicted: nobody holds it but the map, and its last
/// release happens-before this check. Called with its shard's lock held; `closed` is the
/// shard's close flag.
///
/// - The count: every clone of the `Arc` is made under its shard's lock (look-ups), and the
///   callers hold theirs from the look-up until their permit is dropped or their wait ends;
///   so a count of 1 means no permit, no waiter and no caller between its look-up and its
///   acquire, and none can appear while the lock is held. Metrics alone would miss that last
///   caller (loom and shuttle catch it: `keyed_eviction_racing_acquire_keeps_key_limit`).
/// - The Acquire read of the semaphore: the count is read Relaxed (`Arc::strong_count`),
///   which orders nothing; without it, the next caller of the key, admitted by a new
///   bulkhead, could miss the last holder's writes (loom found this in the same scenario).
/// - A closed shard: no caller of the key is admitted again (a key created in a closed shard
///   is closed and never inserted), so the count alone decides. A closed semaphore keeps its
///   waiters flag set for good, so `is_idle_acquire` never says yes for it (before this, a
///   closed key was never idle and `evict_idle` evicted nothing after `close`).
fn is_idle(bulkhead: &Arc<Bulkhead>, closed: bool) -> bool {
    Arc::strong_count(bulkhead) == 1 && (closed || bulkhead.sem().is_idle_acquire())
}

impl<K: fmt::Debug, S> fmt::Debug for KeyedBulkhead<K, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedBulkhead")
            .field("name", &self.name)
            .field("live_keys", &self.live_keys())
            .field("shards", &self.shards.len())
            .field("max_keys", &self.max_keys)
            .field("total", &self.total)
            .finish()
    }
}

/// The metrics of a [`KeyedBulkhead`], with bounded cardinality:
/// [`KeyedBulkhead::metrics`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct KeyedMetrics<K> {
    /// Up to `cap` keys, busiest first, each with its own snapshot.
    pub keys: Vec<(K, BulkheadMetrics)>,
    /// The other live keys, summed (available, max allowed, in flight, waiting).
    pub others: BulkheadMetrics,
    /// How many keys `others` sums.
    pub other_keys: usize,
    /// The shared total, if one is configured.
    pub total: Option<BulkheadMetrics>,
}

/// A slot of a key and, with a total, one of the total; both released on drop.
///
/// ```
/// use bulkhead::keyed::KeyedBulkhead;
/// let hosts = KeyedBulkhead::<&str>::builder("hosts").build()?;
/// let permit = hosts.try_acquire(&"a.example")?;
/// assert_eq!(permit.key_bulkhead().metrics().in_flight_calls(), 1);
/// drop(permit);
/// assert_eq!(hosts.key_metrics(&"a.example").unwrap().in_flight_calls(), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "the slots are released as soon as the permit is dropped"]
#[clippy::has_significant_drop]
pub struct KeyedPermit<'a> {
    // Dropped in declaration order: the key's slot, then the total's.
    key: OwnedPermit,
    total: Option<Permit<'a>>,
}

impl KeyedPermit<'_> {
    /// The bulkhead of the permit's key (the fallback key's, if the call was sent there).
    pub fn key_bulkhead(&self) -> &Bulkhead {
        self.key.bulkhead()
    }
}

impl fmt::Debug for KeyedPermit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedPermit")
            .field("key", &self.key.bulkhead().name())
            .field("total", &self.total.is_some())
            .finish()
    }
}

/// A [`KeyedBulkhead`] refused a call. Map it like [`BulkheadFull`] (HTTP 503, or a
/// fallback); [`TooManyKeys`](Self::TooManyKeys) may deserve a 429 instead.
///
/// ```
/// use bulkhead::keyed::{KeyedBulkhead, KeyedFull};
/// let hosts = KeyedBulkhead::<&str>::builder("hosts").max_keys(1).build()?;
/// let _busy = hosts.try_acquire(&"a.example")?;
/// let refused = hosts.try_acquire(&"b.example").unwrap_err();
/// assert!(matches!(&refused, KeyedFull::TooManyKeys { key, max_keys: 1, .. } if key == "b.example"));
/// assert_eq!(
///     refused.to_string(),
///     "Keyed bulkhead 'hosts' refused key 'b.example': 1 keys are busy (max_keys 1)"
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyedFull {
    /// The key's bulkhead (named `"{name}/{key}"`) refused.
    Key(BulkheadFull),
    /// The shared total (named `name`) refused; the key's slot was released.
    Total(BulkheadFull),
    /// The key is not live, `max_keys` keys are and none is idle, and there is no fallback
    /// key. Building this error allocates (the key's text): a rare, cold path.
    TooManyKeys {
        /// The keyed bulkhead's name.
        name: String,
        /// The refused key, as its `Display` writes it.
        key: String,
        /// The bound on live keys.
        max_keys: usize,
    },
}

impl KeyedFull {
    /// The refusal of the level that refused, if a bulkhead did.
    pub fn bulkhead_full(&self) -> Option<&BulkheadFull> {
        match self {
            KeyedFull::Key(full) | KeyedFull::Total(full) => Some(full),
            KeyedFull::TooManyKeys { .. } => None,
        }
    }

    /// Why the bulkhead that refused did, if one did.
    pub fn reason(&self) -> Option<RejectReason> {
        self.bulkhead_full().map(BulkheadFull::reason)
    }
}

impl fmt::Display for KeyedFull {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyedFull::Key(full) => fmt::Display::fmt(full, f),
            KeyedFull::Total(full) => write!(f, "{full} (the total across keys)"),
            KeyedFull::TooManyKeys { name, key, max_keys } => write!(
                f,
                "Keyed bulkhead '{name}' refused key '{key}': {max_keys} keys are busy \
                 (max_keys {max_keys})"
            ),
        }
    }
}

impl std::error::Error for KeyedFull {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.bulkhead_full().map(|full| full as _)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(n: usize) -> BulkheadConfig {
        BulkheadConfig::builder().max_concurrent_calls(n).build().unwrap()
    }

    #[test]
    fn total_refusal_releases_the_key_slot() {
        let keyed = KeyedBulkhead::<u8>::builder("k")
            .default_config(limit(2))
            .total(limit(1))
            .build()
            .unwrap();
        let _one = keyed.try_acquire(&1).unwrap();
        assert!(matches!(keyed.try_acquire(&2), Err(KeyedFull::Total(_))));
        assert_eq!(keyed.key_metrics(&2).unwrap().in_flight_calls(), 0);
        assert_eq!(keyed.total_metrics().unwrap().in_flight_calls(), 1);
    }

    #[test]
    fn full_map_evicts_idle_keys_then_falls_back() {
        let keyed = KeyedBulkhead::<u8>::builder("k")
            .default_config(limit(1))
            .max_keys(2)
            .fallback_key(0)
            .build()
            .unwrap();
        let one = keyed.try_acquire(&1).unwrap();
        drop(keyed.try_acquire(&2).unwrap());
        // 2 is idle: evicted to make room for 3.
        let three = keyed.try_acquire(&3).unwrap();
        assert_eq!(keyed.live_keys(), 2);
        assert!(keyed.key_metrics(&2).is_none());
        // 1 and 3 busy: 4 goes to the fallback key.
        let four = keyed.try_acquire(&4).unwrap();
        assert_eq!(four.key_bulkhead().name(), "k/0");
        assert!(matches!(keyed.try_acquire(&5), Err(KeyedFull::Key(_))));
        drop((one, three, four));
        assert_eq!(keyed.evict_idle(), 2);
    }

    #[test]
    fn max_keys_is_global_across_shards() {
        let keyed = Arc::new(
            KeyedBulkhead::<u64>::builder("k")
                .default_config(limit(1))
                .max_keys(3)
                .shards(64)
                .build()
                .unwrap(),
        );
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let keyed = Arc::clone(&keyed);
                std::thread::spawn(move || {
                    for i in 0..2_000 {
                        if let Ok(permit) = keyed.try_acquire(&(t * 100_000 + i)) {
                            let live = keyed.live_keys();
                            assert!(live <= 3, "{live} keys live, max 3");
                            drop(permit);
                        }
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        let live = keyed.live_keys();
        assert!(live <= 3);
        assert_eq!(keyed.metrics(usize::MAX).keys.len(), live, "count and entries agree");
        assert_eq!(keyed.evict_idle(), live);
        assert_eq!(keyed.live_keys(), 0);
    }

    #[test]
    fn one_shard_and_many_keys() {
        let keyed = KeyedBulkhead::<u32>::builder("k").shards(0).max_keys(500).build().unwrap();
        assert_eq!(keyed.shards(), 1);
        for key in 0..500 {
            drop(keyed.try_acquire(&key).unwrap());
        }
        assert_eq!(keyed.live_keys(), 500);
        for key in 0..500 {
            assert!(keyed.key_metrics(&key).is_some(), "key {key} lost");
        }
        let big = KeyedBulkhead::<u32>::builder("k").shards(usize::MAX).build().unwrap();
        assert_eq!(big.shards(), MAX_SHARDS);
    }

    /// Listeners run outside the shard's lock: one that looks up its own key (same shard)
    /// on a permit and on a refusal does not deadlock.
    #[test]
    fn listeners_run_outside_the_shard_lock() {
        let keyed = Arc::new(
            KeyedBulkhead::<u8>::builder("k").default_config(limit(1)).shards(1).build().unwrap(),
        );
        drop(keyed.try_acquire(&1).unwrap());
        let heard = Arc::new(AtomicUsize::new(0));
        {
            let (weak, heard) = (Arc::downgrade(&keyed), Arc::clone(&heard));
            keyed.key_bulkhead(&1).unwrap().on_event(move |_| {
                if let Some(keyed) = weak.upgrade() {
                    assert!(keyed.key_metrics(&1).is_some());
                }
                // Ordering: Relaxed — a test counter read after the calls on this thread.
                heard.fetch_add(1, Ordering::Relaxed);
            });
        }
        let permit = keyed.try_acquire(&1).unwrap();
        assert!(matches!(keyed.try_acquire(&1), Err(KeyedFull::Key(_))));
        drop(permit);
        // Ordering: Relaxed — as above.
        assert_eq!(heard.load(Ordering::Relaxed), 3, "permitted, rejected, finished");
    }

    #[test]
    fn keys_created_after_close_are_closed_in_every_shard() {
        let keyed = KeyedBulkhead::<u32>::builder("k").shards(8).build().unwrap();
        drop(keyed.try_acquire(&0).unwrap());
        assert!(keyed.close());
        for key in 0..64 {
            assert_eq!(keyed.try_acquire(&key).unwrap_err().reason(), Some(RejectReason::Closed));
        }
        assert!(keyed.wait_drained(std::time::Duration::ZERO));
    }

    /// A key whose `Display` panics while it is created gives its reserved place back.
    #[test]
    fn a_panicking_key_gives_its_place_back() {
        #[derive(Clone, PartialEq, Eq, Hash)]
        struct Key(u8);
        impl fmt::Display for Key {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                assert!(self.0 != 0, "key 0 cannot be displayed");
                write!(f, "{}", self.0)
            }
        }
        let keyed = KeyedBulkhead::<Key>::builder("k").max_keys(1).build().unwrap();
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            drop(keyed.try_acquire(&Key(0)));
        }));
        assert!(panicked.is_err());
        assert_eq!(keyed.live_keys(), 0, "the place was given back");
        drop(keyed.try_acquire(&Key(1)).unwrap());
        assert_eq!(keyed.live_keys(), 1);
    }
}
