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
//! # Weighted requests
//!
//! A request for `n` ([`try_acquire_many`](KeyedBulkhead::try_acquire_many) and the other
//! `_many` verbs) takes `n` slots of its key, then `n` of the total, in the same order as a
//! single slot, so the argument above holds. Each level grants its `n` whole or not at all
//! (the engine's weighted requests: strict FIFO, no partial grant), so a waiter never holds
//! part of its request at a level; between the levels it holds its key's `n` while it waits
//! for the total's, and a refusal, timeout or cancellation at the total gives those back
//! before the error returns. A request above the total's limit is refused with
//! [`RejectReason::ExceedsLimit`] before its key is looked up (it could never be granted, so
//! it neither waits at its key nor creates it); one above its key's limit, by the key,
//! before any wait. A keyed permit's `merge` takes only a permit of the same key's bulkhead.
//!
//! # Fairness
//!
//! - Within a key: FIFO, as for any [`Bulkhead`] (no newcomer overtakes a queued caller).
//! - At the total: FIFO among the callers that hold their key slot.
//! - Across keys there is no weighting: what protects a quiet key from a noisy one is the
//!   noisy key's own limit. With per-key limits below the total, no single key can take the
//!   whole total; a key's share of the total is at most its limit. A key cannot borrow
//!   another key's unused slots beyond the total. [Guaranteed shares](#guaranteed-shares)
//!   add a weighting at the total.
//!
//! # Guaranteed shares
//!
//! With a total, each key may be given a guaranteed share of its slots
//! ([`KeyedBulkheadBuilder::guaranteed_share`] for every key,
//! [`KeyedBulkheadBuilder::key_guaranteed_share`] for one). A key's caller holding its key
//! slots counts its key's calls in flight (its own included): at most the key's share, it
//! asks the total as an *owner*, in the total's [`Criticality::Critical`](crate::Criticality)
//! class; above it, as a *borrower*, in its own class with `Critical` demoted to `Default`.
//! The total is a plain [`Bulkhead`], so:
//!
//! - it is never over-admitted, whatever the shares: its engine admits every slot, there is
//!   no second counter to check and then act on (the bug of Netflix concurrency-limits #234);
//! - an idle share is lent: a borrower takes any free slot no owner waits for;
//! - a slot that comes back goes to the oldest waiting owner before any borrower, whatever
//!   their arrival order; then FIFO among borrowers, then the classes (sheddable last);
//! - with the shares summing to at most the total (checked by `build`), an owner that may
//!   wait waits only for the borrowed slots ahead of it to come back, and is never refused
//!   because its share is lent (a full waiter queue evicts a borrower to queue it). One that
//!   may not wait (`try_acquire`, a zero max wait at the total) **is** refused `Full` while
//!   its share is lent: slots are lent, never revoked;
//! - the status is fixed when the caller asks: a queued borrower is not promoted when its
//!   key's owners finish. Counting reads the key's word (no lock, no extra write), and can
//!   only under-count owners, never make more than the share at once.
//!
//! A keyed bulkhead without shares reads no share (one branch per call). Every verb that
//! takes the total asks it in the share's class, the owned futures included (their class is
//! read once the key's slots are held); a request's permits and own
//! [`max_wait`](crate::Request::max_wait) are kept, only its class changes.
//! `acquire_async_with_sleep` keeps its sleeps with shares too. `benches/results/shares.md` has the noisy-neighbour numbers.
//!
//! # Bounded cardinality
//!
//! At most `max_keys` keys are live. A key is *idle* when nothing holds its bulkhead but the
//! map: no permit, no waiter, no caller between the look-up and its acquire (each of them
//! holds an `Arc` to the key's bulkhead, cloned under the lock of the key's shard). When a
//! new key finds the map full, every idle key is evicted (one pass over the shards, one
//! shard's lock at a time); if none was idle, the call goes to the fallback key, if one is
//! configured, or is refused with [`RejectReason::TooManyKeys`] (a [`BulkheadFull`] named
//! `"{name}/{key}"`, so it names the key). An evicted
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
//! writes no reference count.
//!
//! # One family: the same verbs, one refusal
//!
//! A keyed bulkhead offers the verbs of [`Bulkhead`] with a key: `try_acquire`, `acquire`,
//! `acquire_timeout`, `acquire_async`, `acquire_async_with_sleep`, the owned forms
//! (`try_acquire_owned`, `acquire_owned`, `acquire_owned_async`, giving an
//! [`OwnedKeyedPermit`]), the weighted ones (`try_acquire_many`, `acquire_many`,
//! `acquire_many_async`, `try_acquire_many_owned`, `acquire_many_owned_async`, with
//! `num_permits`, `split` and `merge` on the permits; see below), `call`, `call_async`,
//! `call_fallible`, `call_async_fallible`,
//! `call_owned_async_fallible`, `close`, `is_closed`, `wait_drained`, `drained`, `on_event`,
//! `enable_counters`, and `change_*_config` for a key, the default and the total. Every
//! refusal is a [`BulkheadFull`] naming the level that refused: `"{name}/{key}"` for a key
//! (and for [`RejectReason::TooManyKeys`]), `name` for the total; so a `call_fallible` whose
//! error type implements `From<BulkheadFull>` works unchanged on a keyed bulkhead.
//!
//! # Listeners, counters and configuration of every key
//!
//! What the keyed level registers ([`on_event`](KeyedBulkhead::on_event),
//! [`enable_counters`](KeyedBulkhead::enable_counters)) or changes
//! ([`change_key_config`](KeyedBulkhead::change_key_config),
//! [`change_default_config`](KeyedBulkhead::change_default_config)) reaches every live key
//! and every key created later: the keyed level keeps these settings under one lock; a new
//! key's bulkhead is brought up to date with them under its shard's lock, and a change walks
//! the live keys one shard at a time. Either the walk finds the new key in its shard, or the
//! settings changed before the walk locked that shard, hence before the new key's insert
//! locked it. Listeners are registered under the shard lock (no user code runs: a shared
//! handle is boxed); configurations are applied after it, since growing a limit wakes queued
//! callers. Listeners and `tracing` events run after the lock is
//! released: a refusal that anyone observes clones the `Arc` to report outside the lock.
//!
//! # Keys, user code and the shard locks
//!
//! No user code runs or is dropped under a shard's lock, with one exception: the key's
//! [`Hash`] (hashed before the lock, with the map's hasher) and [`Eq`] (run by the look-up,
//! under the lock), as for a std `HashMap` inside a `Mutex`; a new key's `Hash` and `Eq` also
//! run under the lock of the keyed level's settings, which finds its configuration override
//! (a std `HashMap`). Keep them plain: a key whose `hash` or `eq` calls back into this keyed
//! bulkhead deadlocks. Everything else a key does runs
//! outside the locks: its `Clone` and `Display` (a new key's copy and its bulkhead's name are
//! made before its shard is locked), its `Drop` (an evicted entry, or the copy of a key that
//! another caller created first, is dropped after the lock), as do listeners (a key's
//! bulkhead, with its listeners, is dropped after the lock when evicted) and
//! [`metrics`](KeyedBulkhead::metrics)'s key clones (the map shares each key behind an `Arc`
//! so the lock only counts a reference).

mod future;

use core::fmt;
use core::future::Future;
use core::hash::{BuildHasher, Hash};
use core::pin::Pin;
use core::task::{ready, Context, Poll};
use core::time::Duration;
use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::sync::Arc;

use crate::engine::pad::CachePadded;
use hashbrown::HashTable;
use pin_project_lite::pin_project;

use crate::bulkhead::config::{BulkheadConfig, ConfigError};
use crate::bulkhead::error::BulkheadFull;
use crate::bulkhead::future::AcquireOwned;
use crate::bulkhead::permit::{Mark, Marked, Outcome, OwnedPermit, Permit};
use crate::bulkhead::request::Request;
use crate::bulkhead::Bulkhead;
use crate::engine::state::Word;
use crate::engine::sync::{AtomicBool, AtomicU64, AtomicUsize, Mutex, Ordering};
use crate::engine::timer::{Binding, Timer};
use crate::observe::event::{BulkheadEvent, BulkheadEventKind};
use crate::observe::metrics::BulkheadMetrics;
use crate::observe::name::{Name, INLINE_CAPACITY};
use crate::observe::reason::RejectReason;
use crate::observe::Listener;
pub use future::{AcquireKeyed, AcquireKeyedWithSleep, KeyedDrained};

mod share;

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
/// use bulkhead::{BulkheadConfig, keyed::KeyedBulkhead};
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
/// let refused = tenants.try_acquire(&"acme".to_owned()).unwrap_err();
/// assert_eq!(refused.bulkhead_name(), "api/acme");
/// let gold: Vec<_> = (0..7).map(|_| tenants.try_acquire(&"gold".to_owned()).unwrap()).collect();
/// // 9 in flight: the shared total refuses even though gold has a slot left.
/// assert_eq!(tenants.try_acquire(&"gold".to_owned()).unwrap_err().bulkhead_name(), "api");
/// drop((a1, a2, gold));
/// assert_eq!(tenants.total_metrics().unwrap().in_flight_calls(), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct KeyedBulkhead<K, S = RandomState> {
    name: String,
    /// Configurations, listeners and counters for every key (see the module docs).
    settings: Mutex<Settings<K>>,
    max_keys: usize,
    /// The fallback key and its bulkhead: created up front, never evicted, not counted in
    /// `max_keys`.
    fallback: Option<(K, Arc<Bulkhead>)>,
    total: Option<Arc<Bulkhead>>,
    hasher: S,
    /// The live keys: a power of two of shards, each on its own cache line.
    shards: Box<[CachePadded<Mutex<Shard<K>>>]>,
    /// Live keys plus places reserved by inserts under way: never below the number of
    /// entries in the shards, never above `max_keys`. Written only when a key is created or
    /// evicted, on its own line.
    live: CachePadded<AtomicUsize>,
    /// Whether [`close`](KeyedBulkhead::close) ran (each shard also has its own flag).
    closed: AtomicBool,
    /// A bulkhead that admits no call, closed by [`close`](KeyedBulkhead::close): drained
    /// exactly when closed, so the drain waits wait on it for the close.
    close_signal: Bulkhead,
    /// How many calls the keyed level refused with `TooManyKeys`.
    refused_keys: AtomicU64,
    /// Guaranteed shares of the total, if any key has one (`share.rs`).
    shares: Option<share::Shares<K>>,
    /// The timer every bulkhead of this family (each key's, the total) keeps its deadlines on.
    timer: Binding,
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
    /// How many of the keyed level's listeners are registered on `bulkhead`.
    listeners: usize,
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
    /// Guaranteed shares of the total (`share.rs`).
    shares: share::Shares<K>,
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
            settings: Mutex::new(Settings {
                default: self.default,
                overrides: self.overrides,
                version: 0,
                listeners: Vec::new(),
                counting: false,
            }),
            max_keys: self.max_keys,
            fallback: None,
            hasher: self.hasher,
            shards: (0..shards)
                .map(|_| {
                    CachePadded::new(Mutex::new(Shard { table: HashTable::new(), closed: false }))
                })
                .collect(),
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
    /// assert_eq!(tenants.try_acquire(&1).unwrap_err().reason(), RejectReason::Closed);
    /// assert_eq!(tenants.try_acquire(&2).unwrap_err().reason(), RejectReason::Closed);
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
        // Last: a `drained` or `wait_drained` that sees it closes the keys again itself.
        self.close_signal.close();
        true
    }

    /// Closes every shard (a key created in it afterwards is created closed), every live
    /// key, the fallback key and the total, and returns the live keys' bulkheads and the
    /// fallback key's. One shard locked at a time; closing twice is harmless
    /// (`Bulkhead::close` is idempotent), so the drain waits run it too and never miss a key
    /// a close still under way would reach.
    fn close_keys(&self) -> Vec<Arc<Bulkhead>> {
        let mut live = Vec::new();
        for shard in self.shards.iter() {
            let mut shard = shard.lock();
            shard.closed = true;
            live.extend(shard.table.iter().map(|entry| Arc::clone(&entry.bulkhead)));
        }
        live.extend(self.fallback.as_ref().map(|(_, b)| Arc::clone(b)));
        for bulkhead in &live {
            bulkhead.close();
        }
        if let Some(total) = &self.total {
            total.close();
        }
        live
    }

    /// Whether [`close`](Self::close) ran.
    ///
    /// ```
    /// use bulkhead::keyed::KeyedBulkhead;
    /// let tenants = KeyedBulkhead::<u32>::builder("api").build()?;
    /// assert!(!tenants.is_closed());
    /// tenants.close();
    /// assert!(tenants.is_closed());
    /// # Ok::<(), bulkhead::ConfigError>(())
    /// ```
    pub fn is_closed(&self) -> bool {
        // Ordering: Relaxed — a lone flag (see `close`); nothing is read through it.
        self.closed.load(Ordering::Relaxed)
    }

    /// Waits until the keyed bulkhead is closed and no call is in flight on any key (nor on
    /// the total), for at most `timeout` in all. Returns `true` if it is drained, `false` if
    /// `timeout` passed first. Like [`Bulkhead::wait_drained`], it waits for
    /// [`close`](Self::close) too: call it after `close`, or on a thread that waits for
    /// another to close.
    ///
    /// # Blocking
    ///
    /// Blocks the calling thread for up to `timeout`. In async code use
    /// [`drained`](Self::drained).
    ///
    /// # Panics
    ///
    /// As [`Bulkhead::wait_drained`]: if it would wait on a thread that polls async tasks.
    ///
    /// ```
    /// use std::{sync::Arc, time::Duration};
    /// use bulkhead::keyed::KeyedBulkhead;
    /// let tenants = Arc::new(KeyedBulkhead::<u32>::builder("api").build()?);
    /// let permit = tenants.try_acquire_owned(&7)?;
    /// let worker = std::thread::spawn(move || {
    ///     std::thread::sleep(Duration::from_millis(10)); // the call in flight
    ///     drop(permit);
    /// });
    /// assert!(!tenants.wait_drained(Duration::ZERO), "not closed yet");
    /// tenants.close();
    /// assert!(tenants.wait_drained(Duration::from_secs(10)));
    /// worker.join().unwrap();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use = "false means calls were still in flight when the timeout passed"]
    pub fn wait_drained(&self, timeout: std::time::Duration) -> bool {
        // The engine's clock (src/engine/sync.rs), so a model's clock drives this deadline too.
        let clock = crate::engine::sync::Clock::new();
        let deadline = clock.deadline(clock.now(), timeout);
        let left = || deadline.map_or(timeout, |d| clock.between(clock.now(), d));
        // The signal admits no call: it is drained exactly when it is closed.
        if !self.close_signal.wait_drained(timeout) {
            return false;
        }
        // Closes what a close still under way on another thread has not reached yet, so no
        // key created after this snapshot of its shard can admit a call.
        let all = self.close_keys();
        // Key slots are released before the total's: the keys drain first.
        all.iter().all(|bulkhead| bulkhead.wait_drained(left()))
            && self.total.as_ref().map_or(true, |total| total.wait_drained(left()))
    }

    /// Completes when the keyed bulkhead is closed and no call is in flight on any key (nor
    /// on the total): the async [`wait_drained`](Self::wait_drained). Bound it with your
    /// runtime's timeout.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future leaves the drain wait and changes nothing else.
    ///
    /// ```
    /// use bulkhead::keyed::KeyedBulkhead;
    /// let tenants = KeyedBulkhead::<u32>::builder("api").build()?;
    /// let permit = tenants.try_acquire(&7)?;
    /// tenants.close();
    /// drop(permit);
    /// futures::executor::block_on(tenants.drained());
    /// assert_eq!(tenants.key_metrics(&7).unwrap().in_flight_calls(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn drained(&self) -> KeyedDrained<'_, K, S> {
        KeyedDrained::new(self)
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
            // A shard that a close has passed creates no live key again (`insert`); its
            // closed keys are evicted once nothing is in flight, read with Acquire so that
            // a keyed drain wait that no longer sees them happens-after their last holder.
            removed.extend(shard.table.extract_if(|entry| is_idle(&entry.bulkhead)));
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
            shares: share::Shares::default(),
            timer: None,
        }
    }
}

impl<K, S> KeyedBulkhead<K, S>
where
    K: Eq + Hash + Clone + fmt::Display,
    S: BuildHasher,
{
    /// The configuration `key` gets: its override, or the default (as last changed by
    /// [`change_key_config`](Self::change_key_config) or
    /// [`change_default_config`](Self::change_default_config)).
    pub fn config_for(&self, key: &K) -> BulkheadConfig {
        self.settings.lock().config_for(key).clone()
    }

    /// The most keys live at once (the fallback key not counted).
    pub fn max_keys(&self) -> usize {
        self.max_keys
    }

    /// A new bulkhead for `key` and the settings version its configuration was read at.
    fn new_bulkhead(&self, key: &K) -> (Bulkhead, u64) {
        let (config, version) = {
            let settings = self.settings.lock();
            (settings.config_for(key).clone(), settings.version)
        };
        // The name (the key's `Display`) is made after the settings lock is released.
        (Bulkhead::bound(format!("{}/{}", self.name, key), config, self.timer.clone()), version)
    }

    /// The shard of a key with this hash. Bits 40.. of the hash: not the low bits the
    /// shard's table indexes its buckets with, nor the top 7 it keeps as tags, so the keys
    /// of one shard still spread over its buckets and tags.
    #[inline]
    fn shard(&self, hash: u64) -> &Mutex<Shard<K>> {
        // The mask is the length less one (a power of two): the length is loaded for the
        // bounds check anyway, so no separate mask field is read.
        let shards = &self.shards;
        &shards[(hash >> 40) as usize & (shards.len() - 1)]
    }

    /// The bulkhead of `key`, created if it is not live: the fallback key's when the map is
    /// full and nothing is idle, an error if there is no fallback key. The `Arc` is cloned
    /// under the shard's lock (eviction, which also holds it, sees the clone).
    pub(crate) fn bulkhead_for(&self, key: &K) -> Result<Arc<Bulkhead>, BulkheadFull> {
        let hash = self.hasher.hash_one(key);
        if let Some(entry) = self.shard(hash).lock().table.find(hash, |e| *e.key == *key) {
            return Ok(Arc::clone(&entry.bulkhead));
        }
        match self.fallback_bulkhead(key) {
            Some(fallback) => Ok(Arc::clone(fallback)),
            None => self.insert(key, hash),
        }
    }

    /// The fallback key's bulkhead if `key` is the fallback key. Asked only after the
    /// shards missed (the fallback key is never in them), so a live key's hit path does not
    /// compare it with the fallback key.
    #[inline]
    fn fallback_bulkhead(&self, key: &K) -> Option<&Arc<Bulkhead>> {
        self.fallback.as_ref().filter(|(fallback, _)| fallback == key).map(|(_, b)| b)
    }

    /// A slot of `key` without waiting, `wrap`ped: [`try_acquire`](Self::try_acquire)'s
    /// first level. A live key's slot is taken under its shard's lock from the map's own
    /// `Arc`, cloned only for a permit (or for a refusal someone observes, reported after
    /// the lock). The result is built in the caller's type (`wrap`): converting a
    /// `Result<OwnedPermit, _>` into a `Result<KeyedPermit, _>` afterwards copied the error
    /// a second time (callgrind: 9 instructions per call, `benches/results/keyed.md`).
    #[inline]
    fn try_key<P>(
        &self,
        key: &K,
        wrap: impl FnOnce(Arc<Bulkhead>, Mark) -> P,
    ) -> Result<P, BulkheadFull> {
        let hash = self.hasher.hash_one(key);
        let shard = self.shard(hash).lock();
        let Some(entry) = shard.table.find(hash, |e| *e.key == *key) else {
            drop(shard);
            return self.try_new_key(key, hash).map(|(bulkhead, mark)| wrap(bulkhead, mark));
        };
        let sem = entry.bulkhead.sem();
        // A default caller takes a permit held back for a sheddable waiter (issue 29).
        match sem.try_acquire().or_else(|word| sem.try_acquire_held_back(word)) {
            Ok(word) => {
                let bulkhead = Arc::clone(&entry.bulkhead);
                drop(shard);
                // Listeners run outside the shard's lock.
                let mark = bulkhead.permitted(word);
                Ok(wrap(bulkhead, mark))
            }
            // Unobserved: building the error runs no user code and writes nothing shared;
            // the guard is released after the error is built. `refuse_unobserved` notifies
            // no one even if a `tracing` subscriber became interested since `observed` looked.
            Err(word) if !observed(word) => Err(entry.bulkhead.refuse_unobserved(word)),
            Err(word) => {
                // Someone observes: report after the lock, on a clone of the `Arc`.
                let bulkhead = Arc::clone(&entry.bulkhead);
                drop(shard);
                Err(bulkhead.refuse(word))
            }
        }
    }

    /// [`try_key`](Self::try_key) for a key not in the shards: the fallback key, or a new
    /// key (created).
    #[cold]
    #[inline(never)]
    fn try_new_key(&self, key: &K, hash: u64) -> Result<(Arc<Bulkhead>, Mark), BulkheadFull> {
        let bulkhead = match self.fallback_bulkhead(key) {
            Some(fallback) => Arc::clone(fallback),
            None => self.insert(key, hash)?,
        };
        take(bulkhead, Bulkhead::try_acquire)
    }

    /// Creates `key` (hash `hash`) in its shard, unless another caller did meanwhile: a place
    /// is reserved in the global count first, so the bound holds across shards. At the bound,
    /// evicts every idle key (shard by shard, without this shard's lock) and tries once more;
    /// then the fallback key, or a [`RejectReason::TooManyKeys`] refusal. After
    /// [`close`](Self::close), a new key is not inserted: the caller gets a closed bulkhead
    /// of its own, so it is refused with `Closed` (never `TooManyKeys`, however full the map)
    /// and takes no place.
    ///
    /// The key's clone and its bulkhead's name (the key's `Display`) are user code: they are
    /// made before the shard's lock is taken, and dropped after it is released when another
    /// caller created the key first. Only the key's `Hash` and `Eq` run under the lock.
    ///
    /// Under the shard's lock the new bulkhead is brought up to date with the keyed level's
    /// settings (a configuration changed since it was read, listeners, counters): a
    /// `change_*_config`, `on_event` or `enable_counters` either finds the entry when it
    /// walks this shard, or updated the settings before that walk locked the shard, and so
    /// before this lock.
    #[cold]
    #[inline(never)]
    fn insert(&self, key: &K, hash: u64) -> Result<Arc<Bulkhead>, BulkheadFull> {
        let (bulkhead, version) = self.new_bulkhead(key);
        let mut new = Some((Arc::new(key.clone()), Arc::new(bulkhead)));
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
                let (copy, bulkhead) = new.take().expect("made above, taken once");
                self.settings.lock().bring_up_to_date(key, &bulkhead, version);
                drop(shard);
                // The key's copy (user code in its `Drop`) goes after the lock.
                drop(copy);
                // Closed before this key was created: it refuses as the others do, and it is
                // not inserted (it would take a place and could never admit anyone).
                bulkhead.close();
                return Ok(bulkhead);
            }
            if !self.reserve() {
                continue;
            }
            let (key, bulkhead) = new.take().expect("made above, taken once");
            let listeners = self.settings.lock().bring_up_to_date(&key, &bulkhead, version);
            let entry = Entry { hash, key, bulkhead: Arc::clone(&bulkhead), listeners };
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

    /// The refusal of a new key the map has no room for: named `"{name}/{key}"` (shortened
    /// to fit inline, never interned: refused keys may be unbounded), counted, told to the
    /// keyed level's listeners and logged as a `tracing` event like any refusal (outside
    /// every lock). A rare, cold path: it allocates.
    #[cold]
    fn too_many_keys(&self, key: &K) -> BulkheadFull {
        let name = transient_name(format!("{}/{}", self.name, key));
        // Ordering: Relaxed — a statistic read for its value alone.
        self.refused_keys.fetch_add(1, Ordering::Relaxed);
        let kind = BulkheadEventKind::CallRejected(RejectReason::TooManyKeys);
        let listeners = self.settings.lock().active_listeners();
        if !listeners.is_empty() {
            let event = BulkheadEvent::new(name, kind);
            for listener in &listeners {
                // As `Listeners::emit`: a panicking listener is caught and ignored.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    listener(&event);
                }));
            }
        }
        // As a plain refusal: a `tracing` event (feature `tracing`), after every lock.
        #[cfg(feature = "tracing")]
        crate::observe::trace::rejected(name.as_str(), RejectReason::TooManyKeys, Duration::ZERO);
        BulkheadFull::new(name, self.max_keys, RejectReason::TooManyKeys, Duration::ZERO)
    }

    /// Takes a slot of `key` and, with a total, one of the total. Never waits.
    ///
    /// # Errors
    ///
    /// A [`BulkheadFull`] naming the level that refused: the key's bulkhead
    /// (`"{name}/{key}"`, reason `Full` or `Closed`), the total (`name`), or
    /// [`RejectReason::TooManyKeys`] if `key` is new, `max_keys` keys are busy and there is
    /// no fallback key. No slot is held after an error.
    ///
    /// ```
    /// use bulkhead::{BulkheadConfig, RejectReason, keyed::KeyedBulkhead};
    /// let hosts = KeyedBulkhead::<&str>::builder("hosts")
    ///     .default_config(BulkheadConfig::builder().max_concurrent_calls(1).build()?)
    ///     .build()?;
    /// let _held = hosts.try_acquire(&"a.example")?;
    /// let refused = hosts.try_acquire(&"a.example").unwrap_err();
    /// assert_eq!(refused.reason(), RejectReason::Full);
    /// assert_eq!(refused.bulkhead_name(), "hosts/a.example");
    /// assert!(hosts.try_acquire(&"b.example").is_ok());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn try_acquire(&self, key: &K) -> Result<KeyedPermit<'_>, BulkheadFull> {
        // One call site: with two (one per arm), LLVM outlined `try_key` (callgrind: +8 on
        // acquire + release, +12 on a refusal). Without a total the key's result is the
        // call's, moved as is.
        if self.has_shares() {
            return self.try_acquire_shared(key);
        }
        let key_permit = self.try_key(key, KeyedPermit::key_slot);
        match self.total.as_deref() {
            None => key_permit,
            Some(total) => key_permit?.with_total(Some(total.try_acquire())),
        }
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
    /// # Panics
    ///
    /// As [`Bulkhead::acquire`]: if it would wait on a thread that polls async tasks.
    ///
    /// ```
    /// use bulkhead::keyed::KeyedBulkhead;
    /// let hosts = KeyedBulkhead::<&str>::builder("hosts").build()?;
    /// let permit = hosts.acquire(&"a.example")?;
    /// assert_eq!(permit.key_bulkhead().name(), "hosts/a.example");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire(&self, key: &K) -> Result<KeyedPermit<'_>, BulkheadFull> {
        if self.has_shares() {
            return self.acquire_shared(key, None);
        }
        let (bulkhead, mark) = take(self.bulkhead_for(key)?, Bulkhead::acquire)?;
        let key_permit = KeyedPermit::key_slot(bulkhead, mark);
        let total = self.total.as_deref().map(Bulkhead::acquire);
        key_permit.with_total(total)
    }

    /// Takes a slot of `key` and, with a total, one of the total, waiting at most `wait` in
    /// all (instead of the configured max waits): the total gets what the key's wait left.
    ///
    /// # Blocking
    ///
    /// Blocks the calling thread for up to `wait`.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire), with `wait` as the max wait. A refusal of the total
    /// reports the total's own wait in [`BulkheadFull::waited`].
    ///
    /// # Panics
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// ```
    /// use std::time::Duration;
    /// use bulkhead::{BulkheadConfig, RejectReason, keyed::KeyedBulkhead};
    /// let hosts = KeyedBulkhead::<&str>::builder("hosts")
    ///     .default_config(BulkheadConfig::builder().max_concurrent_calls(1).build()?)
    ///     .build()?;
    /// let _held = hosts.try_acquire(&"a.example")?;
    /// let err = hosts.acquire_timeout(&"a.example", Duration::from_micros(300)).unwrap_err();
    /// assert_eq!(err.reason(), RejectReason::WaitTimedOut);
    /// assert!(err.waited() >= Duration::from_micros(300));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire_timeout(
        &self,
        key: &K,
        wait: Duration,
    ) -> Result<KeyedPermit<'_>, BulkheadFull> {
        if self.has_shares() {
            return self.acquire_shared(key, Some(wait));
        }
        let clock = crate::engine::sync::Clock::new();
        let deadline = clock.deadline(clock.now(), wait);
        let (bulkhead, mark) = take(self.bulkhead_for(key)?, |b| b.acquire_timeout(wait))?;
        let key_permit = KeyedPermit::key_slot(bulkhead, mark);
        let total = self.total.as_deref().map(|total| {
            // What the key's wait left of `wait`.
            total.acquire_timeout(deadline.map_or(wait, |d| clock.between(clock.now(), d)))
        });
        key_permit.with_total(total)
    }

    /// The async [`acquire`](Self::acquire): waits for a slot of `key` up to the key's max
    /// wait, then for one of the total up to the total's, on any executor (the bulkheads'
    /// own deadlines, as [`Bulkhead::acquire_async`]).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe. Dropping the future at any point leaks nothing: a pending wait is
    /// withdrawn (a slot granted meanwhile is passed on), and a key slot already taken is
    /// released.
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
    pub fn acquire_async(&self, key: &K) -> AcquireKeyed<'_> {
        self.acquire_many_async(key, 1)
    }

    /// Waits asynchronously for a slot of `key`, then of the total, each up to its
    /// configured max wait bounded by a sleep future that `make_sleep` builds from that
    /// duration: no timer of the crate's is used, so it works with any runtime's sleep.
    ///
    /// `make_sleep` is called only for a level where the caller really has to wait (never
    /// when a slot is free, nor when the max wait is zero or unbounded), so at most twice
    /// (once per level): it is `FnMut`, where [`Bulkhead::acquire_async_with_sleep`] takes
    /// an `FnOnce`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`acquire_async`](Self::acquire_async).
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire); [`RejectReason::WaitTimedOut`] when a level's sleep
    /// completes first.
    ///
    /// ```
    /// use std::time::Duration;
    /// use bulkhead::{BulkheadConfig, RejectReason, keyed::KeyedBulkhead};
    /// let hosts = KeyedBulkhead::<&str>::builder("hosts")
    ///     .default_config(
    ///         BulkheadConfig::builder()
    ///             .max_concurrent_calls(1)
    ///             .max_wait_duration(Duration::from_secs(60))
    ///             .build()?,
    ///     )
    ///     .build()?;
    /// let _held = hosts.try_acquire(&"a.example")?;
    /// // A "sleep" that is already over: the wait times out on its first poll.
    /// let err = futures::executor::block_on(
    ///     hosts.acquire_async_with_sleep(&"a.example", |_wait| std::future::ready(())),
    /// )
    /// .unwrap_err();
    /// assert_eq!(err.reason(), RejectReason::WaitTimedOut);
    /// assert_eq!(err.bulkhead_name(), "hosts/a.example");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire_async_with_sleep<M, F>(
        &self,
        key: &K,
        make_sleep: M,
    ) -> AcquireKeyedWithSleep<'_, M, F>
    where
        M: FnMut(Duration) -> F,
        F: Future,
    {
        let guarantee = self.shares.as_ref().map(|shares| shares.of(key));
        AcquireKeyedWithSleep::new(
            self.bulkhead_for(key),
            self.total.as_deref(),
            make_sleep,
            guarantee,
        )
    }

    /// Takes an owned slot of `key` (and of the total) if free. Never waits. The permit
    /// holds the key's bulkhead and the total by `Arc`, so it is `Send + 'static` and can
    /// move to another task or thread; holding it keeps its key live (not idle).
    ///
    /// Unlike [`Bulkhead::try_acquire_owned`] it takes `&self`: the permit needs the key's
    /// bulkhead, not the keyed bulkhead (call it on an `Arc<KeyedBulkhead>` just the same).
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](Self::try_acquire).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use bulkhead::keyed::KeyedBulkhead;
    /// let tenants = Arc::new(KeyedBulkhead::<u64>::builder("api").build()?);
    /// let permit = tenants.try_acquire_owned(&42)?;
    /// std::thread::spawn(move || drop(permit)).join().unwrap();
    /// assert_eq!(tenants.key_metrics(&42).unwrap().in_flight_calls(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_acquire_owned(&self, key: &K) -> Result<OwnedKeyedPermit, BulkheadFull> {
        if self.has_shares() {
            return self.try_acquire_many_owned(key, 1);
        }
        let key_permit = self.try_key(key, OwnedPermit::from_acquired)?;
        let total = self.total.as_ref().map(Bulkhead::try_acquire_owned);
        both(key_permit, total).map(|(key, total)| OwnedKeyedPermit { key, total })
    }

    /// Takes an owned slot of `key` (and of the total), waiting as
    /// [`acquire`](Self::acquire) does.
    ///
    /// # Blocking
    ///
    /// Blocks the calling thread as [`acquire`](Self::acquire) does.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// # Panics
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// ```
    /// use bulkhead::keyed::KeyedBulkhead;
    /// let tenants = KeyedBulkhead::<u64>::builder("api").build()?;
    /// let permit = tenants.acquire_owned(&42)?;
    /// assert_eq!(permit.key_bulkhead().name(), "api/42");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire_owned(&self, key: &K) -> Result<OwnedKeyedPermit, BulkheadFull> {
        if self.has_shares() {
            return self.acquire_owned_shared(key);
        }
        let (bulkhead, mark) = take(self.bulkhead_for(key)?, Bulkhead::acquire)?;
        let key_permit = OwnedPermit::from_acquired(bulkhead, mark);
        let total = self.total.as_ref().map(Bulkhead::acquire_owned);
        both(key_permit, total).map(|(key, total)| OwnedKeyedPermit { key, total })
    }

    /// Waits asynchronously for an owned slot of `key`, then of the total, as
    /// [`acquire_async`](Self::acquire_async) does. The key is looked up (and created) when
    /// this is called; the future holds the key's bulkhead and the total by `Arc`, borrows
    /// nothing, and is `Send + 'static`, so it can be spawned.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`acquire_async`](Self::acquire_async). A future that is dropped
    /// without being polled holds only the key's `Arc`, which keeps the key live until then.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire) (a `TooManyKeys` refusal is the future's output).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use bulkhead::keyed::KeyedBulkhead;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let tenants = Arc::new(KeyedBulkhead::<u64>::builder("api").build()?);
    /// let permit = tokio::spawn(tenants.acquire_owned_async(&42)).await??;
    /// assert_eq!(tenants.key_metrics(&42).unwrap().in_flight_calls(), 1);
    /// drop(permit);
    /// # Ok(())
    /// # }
    /// ```
    pub fn acquire_owned_async(&self, key: &K) -> AcquireOwnedKeyed {
        self.acquire_many_owned_async(key, 1)
    }

    /// Takes `n` slots of `key` and `n` of the total at once, if they are free: a call that
    /// costs `n` of each limit, as [`Bulkhead::try_acquire_many`]. Never waits.
    /// `try_acquire_many(&k, 1)` is [`try_acquire`](Self::try_acquire).
    ///
    /// All or nothing across both levels: either the permit holds `n` slots of the key and
    /// `n` of the total, or nothing is held when the error returns (`n` key slots taken
    /// before the total refused are released first). `n == 0` gives an empty permit unless
    /// a level is closed.
    ///
    /// # Errors
    ///
    /// [`RejectReason::ExceedsLimit`] when `n` is above the total's limit (named `name`:
    /// checked first, before the key is looked up, so such a request creates no key) or
    /// above the key's (`"{name}/{key}"`); otherwise as [`try_acquire`](Self::try_acquire),
    /// `Full` when fewer than `n` slots are free at a level, and, for a sheddable request,
    /// as [`Bulkhead::try_acquire_many`] at each level (`Reserved` from the level whose
    /// `sheddable_headroom` held it back, `ExceedsLimit` when `n` plus a level's headroom is
    /// above its limit).
    ///
    /// ```
    /// use bulkhead::{BulkheadConfig, RejectReason, keyed::KeyedBulkhead};
    /// let limit = |n| BulkheadConfig::builder().max_concurrent_calls(n).build().unwrap();
    /// let tenants = KeyedBulkhead::<u32>::builder("api")
    ///     .default_config(limit(4))
    ///     .total(limit(6))
    ///     .build()?;
    /// let batch = tenants.try_acquire_many(&1, 3)?;
    /// assert_eq!(batch.num_permits(), 3);
    /// // Key 2 has 4 free, the total only 3: refused by the total, key 2 holds nothing.
    /// let err = tenants.try_acquire_many(&2, 4).unwrap_err();
    /// assert_eq!((err.reason(), err.bulkhead_name()), (RejectReason::Full, "api"));
    /// assert_eq!(tenants.key_metrics(&2).unwrap().in_flight_calls(), 0);
    /// // Above a limit: refused at once, whatever is free.
    /// let err = tenants.try_acquire_many(&2, 5).unwrap_err();
    /// assert_eq!((err.reason(), err.bulkhead_name()), (RejectReason::ExceedsLimit, "api/2"));
    /// let err = tenants.try_acquire_many(&3, 7).unwrap_err();
    /// assert_eq!((err.reason(), err.bulkhead_name()), (RejectReason::ExceedsLimit, "api"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_acquire_many(
        &self,
        key: &K,
        request: impl Into<Request>,
    ) -> Result<KeyedPermit<'_>, BulkheadFull> {
        self.many(key, request.into(), |bulkhead, request| bulkhead.try_acquire_many(request))
    }

    /// Takes `n` slots of `key` at once, waiting up to the key's `max_wait_duration`, then
    /// `n` of the total at once, waiting up to the total's, as [`Bulkhead::acquire_many`]
    /// does at each level (strict FIFO: a waiter for 3 holds back a later waiter for 1).
    /// `acquire_many(&k, 1)` is [`acquire`](Self::acquire).
    ///
    /// A waiter never holds part of its request: at each level it is granted all `n` slots
    /// at once or none. Between the levels it holds its key's `n` slots while it waits for
    /// the total's `n` (as [`acquire`](Self::acquire) holds its key's slot), and gives them
    /// all back if the total refuses or times out.
    ///
    /// # Blocking
    ///
    /// Blocks the calling thread while it waits, as [`acquire`](Self::acquire).
    ///
    /// # Errors
    ///
    /// As [`try_acquire_many`](Self::try_acquire_many) (a request above a level's limit is
    /// refused at once, before any wait), with the waiting reasons of the level that refused
    /// (`WaitTimedOut`, `TooManyWaiting`), and `ExceedsLimit` when a level's limit shrank
    /// below `n` while the request waited there.
    ///
    /// # Panics
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// ```
    /// use std::time::Duration;
    /// use bulkhead::{BulkheadConfig, RejectReason, keyed::KeyedBulkhead};
    /// let config = |n| {
    ///     BulkheadConfig::builder()
    ///         .max_concurrent_calls(n)
    ///         .max_wait_duration(Duration::from_millis(5))
    ///         .build()
    ///         .unwrap()
    /// };
    /// let tenants = KeyedBulkhead::<u32>::builder("api")
    ///     .default_config(config(3))
    ///     .total(config(4))
    ///     .build()?;
    /// let held = tenants.try_acquire_many(&1, 2)?;
    /// // Key 2 grants 3 at once; the total has 2 free: waits 5 ms there, then gives up and
    /// // gives key 2's three slots back.
    /// let err = tenants.acquire_many(&2, 3).unwrap_err();
    /// assert_eq!((err.reason(), err.bulkhead_name()), (RejectReason::WaitTimedOut, "api"));
    /// assert_eq!(tenants.key_metrics(&2).unwrap().in_flight_calls(), 0);
    /// drop(held);
    /// assert_eq!(tenants.acquire_many(&2, 3)?.num_permits(), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire_many(
        &self,
        key: &K,
        request: impl Into<Request>,
    ) -> Result<KeyedPermit<'_>, BulkheadFull> {
        self.many(key, request.into(), |bulkhead, request| bulkhead.acquire_many(request))
    }

    /// The borrowed weighted acquires: `acquire` (one of [`Bulkhead::try_acquire_many`] and
    /// [`Bulkhead::acquire_many`]) takes the request at each level, the key's first, with
    /// its criticality at both. The request goes through here and
    /// [`total_admits`](Self::total_admits) only.
    fn many(
        &self,
        key: &K,
        request: Request,
        acquire: impl Fn(&Bulkhead, Request) -> Result<Permit<'_>, BulkheadFull>,
    ) -> Result<KeyedPermit<'_>, BulkheadFull> {
        let n = request.num_permits();
        self.total_admits(n)?;
        let (bulkhead, mark) = take(self.bulkhead_for(key)?, |key| acquire(key, request))?;
        let key_permit = KeyedPermit::key_slots(bulkhead, n, mark);
        let request = self.share_request(key, &key_permit.key, request);
        key_permit.with_total(self.total.as_deref().map(|total| acquire(total, request)))
    }

    /// Refuses a request for `n` above the total's limit (`ExceedsLimit`, or `Closed` if the
    /// total is closed), before its key is looked up: the total could never grant it, so
    /// the caller neither waits for its key nor creates one. The key's own limit is checked
    /// by its bulkhead's weighted acquire, also before any wait; a limit that shrinks later
    /// is the engine's to judge (the waiter at the head is refused).
    #[inline]
    fn total_admits(&self, n: u32) -> Result<(), BulkheadFull> {
        match self.total.as_deref() {
            Some(total) => {
                let word = total.sem().load();
                if word.exceeds_limit(n) {
                    return Err(total.refuse_many(word, Request::permits(n)));
                }
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// Waits asynchronously for `n` slots of `key` at once, then `n` of the total, each up
    /// to its bulkhead's max wait, on any executor: the async
    /// [`acquire_many`](Self::acquire_many). `acquire_many_async(&k, 1)` is
    /// [`acquire_async`](Self::acquire_async).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe. A waiter is granted a level's `n` slots at once, never part of them, so
    /// dropping the future while it waits at the key leaves nothing to give back; dropped
    /// while it waits at the total, it releases the key's `n` slots; a request granted to a
    /// future dropped before it returns goes back whole, to the waiters behind.
    ///
    /// # Errors
    ///
    /// As [`acquire_many`](Self::acquire_many).
    ///
    /// ```
    /// use bulkhead::keyed::KeyedBulkhead;
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build()?.block_on(async {
    /// let hosts = KeyedBulkhead::<&str>::builder("hosts").build()?;
    /// let batch = hosts.acquire_many_async(&"a.example", 4).await?;
    /// assert_eq!(hosts.key_metrics(&"a.example").unwrap().in_flight_calls(), 4);
    /// drop(batch);
    /// # Ok::<(), Box<dyn std::error::Error>>(()) })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire_many_async(&self, key: &K, request: impl Into<Request>) -> AcquireKeyed<'_> {
        let request = request.into();
        // A request above the total's limit is refused before the key is looked up (it
        // creates no key), as the blocking verbs do.
        let looked_up =
            self.total_admits(request.num_permits()).and_then(|()| self.bulkhead_for(key));
        // With shares, the total is asked in the share's class once the key's slots are held.
        let guarantee = self.shares.as_ref().map(|shares| shares.of(key));
        AcquireKeyed::new(looked_up, self.total.as_deref(), request, guarantee)
    }

    /// Takes `n` slots of `key` and `n` of the total at once as an owned permit, if they are
    /// free. Never waits. As [`try_acquire_many`](Self::try_acquire_many), with the permit of
    /// [`try_acquire_owned`](Self::try_acquire_owned).
    ///
    /// # Errors
    ///
    /// As [`try_acquire_many`](Self::try_acquire_many).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use bulkhead::keyed::KeyedBulkhead;
    /// let tenants = Arc::new(KeyedBulkhead::<u64>::builder("api").build()?);
    /// let permit = tenants.try_acquire_many_owned(&42, 5)?;
    /// std::thread::spawn(move || assert_eq!(permit.num_permits(), 5)).join().unwrap();
    /// assert_eq!(tenants.key_metrics(&42).unwrap().in_flight_calls(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_acquire_many_owned(
        &self,
        key: &K,
        request: impl Into<Request>,
    ) -> Result<OwnedKeyedPermit, BulkheadFull> {
        self.many_owned(
            key,
            request.into(),
            |key, request| key.try_acquire_many(request),
            |total, request| total.try_acquire_many_owned(request),
        )
    }

    /// The owned many-slot verbs' one body: `n` slots of `key` taken by `at_key`, wrapped at
    /// once in their owned guard, then `n` of the total by `at_total` (the key's given back
    /// if the total refuses).
    #[inline]
    fn many_owned(
        &self,
        key: &K,
        request: Request,
        at_key: impl FnOnce(&Bulkhead, Request) -> Result<Permit<'_>, BulkheadFull>,
        at_total: impl FnOnce(&Arc<Bulkhead>, Request) -> Result<OwnedPermit, BulkheadFull>,
    ) -> Result<OwnedKeyedPermit, BulkheadFull> {
        let n = request.num_permits();
        self.total_admits(n)?;
        let (bulkhead, mark) = take(self.bulkhead_for(key)?, |key| at_key(key, request))?;
        let key_permit = OwnedPermit::with_permits(bulkhead, n, mark);
        let request = self.share_request(key, key_permit.bulkhead(), request);
        let total = self.total.as_ref().map(|total| at_total(total, request));
        both(key_permit, total).map(|(key, total)| OwnedKeyedPermit { key, total })
    }

    /// Waits asynchronously for `n` slots of `key` at once, then `n` of the total, as an
    /// owned permit: the owned [`acquire_many_async`](Self::acquire_many_async). The key is
    /// looked up (and created) when this is called; the future is `Send + 'static`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`acquire_many_async`](Self::acquire_many_async).
    ///
    /// # Errors
    ///
    /// As [`acquire_many`](Self::acquire_many) (a refusal before any wait is the future's
    /// output).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use bulkhead::keyed::KeyedBulkhead;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let tenants = Arc::new(KeyedBulkhead::<u64>::builder("api").build()?);
    /// let permit = tokio::spawn(tenants.acquire_many_owned_async(&42, 3)).await??;
    /// assert_eq!(tenants.key_metrics(&42).unwrap().in_flight_calls(), 3);
    /// drop(permit);
    /// # Ok(())
    /// # }
    /// ```
    pub fn acquire_many_owned_async(
        &self,
        key: &K,
        request: impl Into<Request>,
    ) -> AcquireOwnedKeyed {
        let request = request.into();
        let looked_up =
            self.total_admits(request.num_permits()).and_then(|()| self.bulkhead_for(key));
        let guarantee = self.shares.as_ref().map(|shares| shares.of(key));
        AcquireOwnedKeyed::new(looked_up, self.total.clone(), request, guarantee)
    }

    /// Takes `n` slots of `key` and `n` of the total at once, waiting at most `wait` in all
    /// (and at most the request's own [`max_wait`](Request::max_wait)), instead of the
    /// configured max waits: the weighted [`acquire_timeout`](Self::acquire_timeout). The
    /// total gets what the key's wait left. A zero wait never queues.
    ///
    /// # Blocking
    ///
    /// Blocks the calling thread for up to that wait.
    ///
    /// # Errors
    ///
    /// As [`acquire_many`](Self::acquire_many), with that wait as the max wait.
    ///
    /// # Panics
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// ```
    /// use std::time::Duration;
    /// use bulkhead::{BulkheadConfig, RejectReason, keyed::KeyedBulkhead};
    /// let hosts = KeyedBulkhead::<&str>::builder("hosts")
    ///     .default_config(BulkheadConfig::builder().max_concurrent_calls(3).build()?)
    ///     .build()?;
    /// let held = hosts.try_acquire(&"a.example")?;
    /// let err = hosts.acquire_many_timeout(&"a.example", 3, Duration::from_millis(2)).unwrap_err();
    /// assert_eq!(err.reason(), RejectReason::WaitTimedOut);
    /// drop(held);
    /// assert_eq!(hosts.acquire_many_timeout(&"a.example", 3, Duration::from_millis(2))?.num_permits(), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire_many_timeout(
        &self,
        key: &K,
        request: impl Into<Request>,
        wait: Duration,
    ) -> Result<KeyedPermit<'_>, BulkheadFull> {
        let request = request.into();
        let wait = request.wait_within(wait);
        let clock = crate::engine::sync::Clock::new();
        let deadline = clock.deadline(clock.now(), wait);
        self.many(key, request, |bulkhead, request| {
            // What the key's wait left of `wait` (all of it, at the key).
            let left = deadline.map_or(wait, |d| clock.between(clock.now(), d));
            bulkhead.acquire_many_timeout(request, left)
        })
    }

    /// Takes `n` slots of `key` and `n` of the total at once as an owned permit, waiting as
    /// [`acquire_many`](Self::acquire_many) does: the blocking
    /// [`acquire_many_owned_async`](Self::acquire_many_owned_async).
    ///
    /// # Blocking
    ///
    /// Blocks the calling thread as [`acquire_many`](Self::acquire_many) does.
    ///
    /// # Errors
    ///
    /// As [`acquire_many`](Self::acquire_many).
    ///
    /// # Panics
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// ```
    /// use bulkhead::keyed::KeyedBulkhead;
    /// let tenants = KeyedBulkhead::<u64>::builder("api").build()?;
    /// let permit = tenants.acquire_many_owned(&42, 3)?;
    /// std::thread::spawn(move || assert_eq!(permit.num_permits(), 3)).join().unwrap();
    /// assert_eq!(tenants.key_metrics(&42).unwrap().in_flight_calls(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire_many_owned(
        &self,
        key: &K,
        request: impl Into<Request>,
    ) -> Result<OwnedKeyedPermit, BulkheadFull> {
        self.many_owned(
            key,
            request.into(),
            |key, request| key.acquire_many(request),
            |total, request| total.acquire_many_owned(request),
        )
    }

    /// Runs `f` on the calling thread with the slots `request` asks for held at `key` and at
    /// the total (its count, its criticality, its own [`max_wait`](Request::max_wait) at
    /// each level): the keyed [`Bulkhead::call_with`]. The slots are released when `f`
    /// returns or unwinds.
    ///
    /// # Blocking
    ///
    /// Waits like [`acquire_many`](Self::acquire_many), then for as long as `f` runs.
    ///
    /// # Errors
    ///
    /// As [`acquire_many`](Self::acquire_many); `f` does not run.
    ///
    /// ```
    /// use bulkhead::{Criticality, Request, keyed::KeyedBulkhead};
    /// let tenants = KeyedBulkhead::<u64>::builder("api").build()?;
    /// let request = Request::permits(2).criticality(Criticality::Critical);
    /// let held = tenants.call_with(&42, request, || tenants.key_metrics(&42).unwrap().in_flight_calls())?;
    /// assert_eq!(held, 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn call_with<T>(
        &self,
        key: &K,
        request: impl Into<Request>,
        f: impl FnOnce() -> T,
    ) -> Result<T, BulkheadFull> {
        let _permit = self.acquire_many(key, request)?;
        Ok(f())
    }

    /// Awaits `fut` in the calling task with the slots `request` asks for held at `key` and
    /// at the total until it completes or is dropped: the keyed
    /// [`Bulkhead::call_async_with`]. Each level waits at most the smaller of its configured
    /// max wait and the request's own [`max_wait`](Request::max_wait), kept by that
    /// bulkhead's timer, on any executor.
    ///
    /// # Cancel safety
    ///
    /// As [`acquire_many_async`](Self::acquire_many_async); once `fut` runs, dropping the
    /// future drops `fut` and releases the slots.
    ///
    /// # Errors
    ///
    /// As [`acquire_many`](Self::acquire_many); `fut` is not polled.
    ///
    /// ```
    /// use std::time::Duration;
    /// use bulkhead::{Request, keyed::KeyedBulkhead};
    /// # futures::executor::block_on(async {
    /// let tenants = KeyedBulkhead::<u64>::builder("api").build()?;
    /// let request = Request::permits(3).max_wait(Duration::from_millis(5));
    /// assert_eq!(tenants.call_async_with(&42, request, async { 7 }).await?, 7);
    /// # Ok::<(), Box<dyn std::error::Error>>(()) })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn call_async_with<F: Future>(
        &self,
        key: &K,
        request: impl Into<Request>,
        fut: F,
    ) -> Result<F::Output, BulkheadFull> {
        let _permit = self.acquire_many_async(key, request).await?;
        Ok(fut.await)
    }

    /// Awaits `fut` with an owned slot of `key` (and of the total) held: the non-fallible
    /// [`call_owned_async_fallible`](Self::call_owned_async_fallible). The key is looked up
    /// when this is called; the future is `Send + 'static` when `fut` is.
    ///
    /// # Cancel safety
    ///
    /// As [`acquire_owned_async`](Self::acquire_owned_async); once `fut` runs, dropping the
    /// future drops `fut` and releases the slots.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire); `fut` is not polled.
    ///
    /// ```
    /// use bulkhead::keyed::KeyedBulkhead;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let tenants = KeyedBulkhead::<u64>::builder("api").build()?;
    /// assert_eq!(tokio::spawn(tenants.call_owned_async(&7, async { 7 })).await??, 7);
    /// # Ok(())
    /// # }
    /// ```
    pub fn call_owned_async<F: Future + Send + 'static>(
        &self,
        key: &K,
        fut: F,
    ) -> impl Future<Output = Result<F::Output, BulkheadFull>> + Send + 'static {
        let acquire = self.acquire_owned_async(key);
        async move {
            let _permit = acquire.await?;
            Ok(fut.await)
        }
    }

    /// Runs `f` on the calling thread with a slot of `key` (and of the total) held; the
    /// slots are released when `f` returns or unwinds.
    ///
    /// # Blocking
    ///
    /// Waits like [`acquire`](Self::acquire), then for as long as `f` runs.
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
    pub fn call<T>(&self, key: &K, f: impl FnOnce() -> T) -> Result<T, BulkheadFull> {
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
    pub async fn call_async<F: Future>(&self, key: &K, fut: F) -> Result<F::Output, BulkheadFull> {
        let _permit = self.acquire_async(key).await?;
        Ok(fut.await)
    }

    /// Runs `f`, which can fail, with a slot of `key` (and of the total) held, and gives its
    /// result with a refusal mapped into `E` by `From<BulkheadFull>`: the keyed
    /// [`Bulkhead::call_fallible`], with the same error mapping (a keyed refusal is a
    /// [`BulkheadFull`] whatever level refused).
    ///
    /// # Blocking
    ///
    /// Waits like [`acquire`](Self::acquire), then for as long as `f` runs.
    ///
    /// # Errors
    ///
    /// `E::from(BulkheadFull)` when no slot was granted (`f` does not run); otherwise what
    /// `f` gave.
    ///
    /// ```
    /// use bulkhead::{BulkheadConfig, BulkheadFull, keyed::KeyedBulkhead};
    ///
    /// #[derive(Debug, PartialEq)]
    /// enum PortError {
    ///     NotFound,
    ///     TemporarilyUnavailable(String),
    /// }
    /// impl From<BulkheadFull> for PortError {
    ///     fn from(full: BulkheadFull) -> Self {
    ///         PortError::TemporarilyUnavailable(full.bulkhead_name().to_owned())
    ///     }
    /// }
    ///
    /// let tenants = KeyedBulkhead::<u64>::builder("api")
    ///     .default_config(BulkheadConfig::builder().max_concurrent_calls(1).build().unwrap())
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(tenants.call_fallible(&7, || Err::<u8, _>(PortError::NotFound)), Err(PortError::NotFound));
    /// let _busy = tenants.try_acquire(&7).unwrap();
    /// assert_eq!(
    ///     tenants.call_fallible(&7, || Ok::<_, PortError>(1)),
    ///     Err(PortError::TemporarilyUnavailable("api/7".to_owned()))
    /// );
    /// ```
    pub fn call_fallible<T, E>(&self, key: &K, f: impl FnOnce() -> Result<T, E>) -> Result<T, E>
    where
        E: From<BulkheadFull>,
    {
        let _permit = self.acquire(key)?;
        f()
    }

    /// Runs `f`, which can fail, with the slots `request` asks for held at `key` and at the
    /// total, a refusal mapped into `E`: the keyed [`Bulkhead::call_fallible_with`].
    ///
    /// # Blocking
    ///
    /// Waits like [`acquire_many`](Self::acquire_many), then for as long as `f` runs.
    ///
    /// # Errors
    ///
    /// `E::from(BulkheadFull)` when the slots were not granted (`f` does not run); otherwise
    /// what `f` gave.
    ///
    /// ```
    /// use bulkhead::{Criticality, keyed::KeyedBulkhead};
    /// type BoxError = Box<dyn std::error::Error + Send + Sync>;
    /// let tenants = KeyedBulkhead::<u64>::builder("api").build()?;
    /// let ok: Result<u32, BoxError> = tenants.call_fallible_with(&7, Criticality::Critical, || Ok(7));
    /// assert_eq!(ok.unwrap(), 7);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn call_fallible_with<T, E>(
        &self,
        key: &K,
        request: impl Into<Request>,
        f: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, E>
    where
        E: From<BulkheadFull>,
    {
        let _permit = self.acquire_many(key, request)?;
        f()
    }

    /// Awaits `fut`, which can fail, with the slots `request` asks for held at `key` and at
    /// the total, a refusal mapped into `E`: the keyed [`Bulkhead::call_async_fallible_with`].
    ///
    /// # Cancel safety
    ///
    /// As [`call_async_with`](Self::call_async_with).
    ///
    /// # Errors
    ///
    /// `E::from(BulkheadFull)` when the slots were not granted (`fut` is not polled);
    /// otherwise what `fut` gave.
    ///
    /// ```
    /// use bulkhead::{Request, keyed::KeyedBulkhead};
    /// type BoxError = Box<dyn std::error::Error + Send + Sync>;
    /// # futures::executor::block_on(async {
    /// let tenants = KeyedBulkhead::<u64>::builder("api").build()?;
    /// let ok: Result<u32, BoxError> = tenants.call_async_fallible_with(&7, Request::permits(2), async { Ok(7) }).await;
    /// assert_eq!(ok.unwrap(), 7);
    /// # Ok::<(), Box<dyn std::error::Error>>(()) })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn call_async_fallible_with<T, E, F>(
        &self,
        key: &K,
        request: impl Into<Request>,
        fut: F,
    ) -> Result<T, E>
    where
        F: Future<Output = Result<T, E>>,
        E: From<BulkheadFull>,
    {
        let _permit = self.acquire_many_async(key, request).await?;
        fut.await
    }

    /// Awaits `fut`, which can fail, with a slot of `key` (and of the total) held, and gives
    /// its result with a refusal mapped into `E` by `From<BulkheadFull>`: the keyed
    /// [`Bulkhead::call_async_fallible`].
    ///
    /// # Cancel safety
    ///
    /// As [`call_async`](Self::call_async).
    ///
    /// # Errors
    ///
    /// `E::from(BulkheadFull)` when no slot was granted (`fut` is dropped without being
    /// polled); otherwise what `fut` gave.
    ///
    /// ```
    /// use bulkhead::{BulkheadFull, keyed::KeyedBulkhead};
    ///
    /// #[derive(Debug, PartialEq)]
    /// struct Unavailable;
    /// impl From<BulkheadFull> for Unavailable {
    ///     fn from(_: BulkheadFull) -> Self {
    ///         Unavailable
    ///     }
    /// }
    ///
    /// let tenants = KeyedBulkhead::<u64>::builder("api").build().unwrap();
    /// let rate = futures::executor::block_on(
    ///     tenants.call_async_fallible(&7, async { Ok::<_, Unavailable>(91.5) }),
    /// );
    /// assert_eq!(rate, Ok(91.5));
    /// ```
    pub async fn call_async_fallible<T, E, F>(&self, key: &K, fut: F) -> Result<T, E>
    where
        F: Future<Output = Result<T, E>>,
        E: From<BulkheadFull>,
    {
        let _permit = self.acquire_async(key).await?;
        fut.await
    }

    /// The fallible async call on an owned permit: like
    /// [`call_async_fallible`](Self::call_async_fallible), but the returned future holds
    /// the key's bulkhead and the total by `Arc` instead of borrowing, so it is `'static`
    /// (and `Send` when `fut` is) and can be given to `tokio::spawn`. The key is looked up
    /// when this is called, the slots are taken when the future is first polled.
    ///
    /// # Cancel safety
    ///
    /// As [`call_async`](Self::call_async).
    ///
    /// # Errors
    ///
    /// `E::from(BulkheadFull)` when no slot was granted (`fut` is dropped without being
    /// polled); otherwise what `fut` gave.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use bulkhead::{BulkheadFull, keyed::KeyedBulkhead};
    ///
    /// #[derive(Debug, PartialEq)]
    /// struct Unavailable;
    /// impl From<BulkheadFull> for Unavailable {
    ///     fn from(_: BulkheadFull) -> Self {
    ///         Unavailable
    ///     }
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let tenants = Arc::new(KeyedBulkhead::<u64>::builder("api").build().unwrap());
    /// let task = tokio::spawn(tenants.call_owned_async_fallible(&7, async { Ok::<_, Unavailable>(7) }));
    /// assert_eq!(task.await.unwrap(), Ok(7));
    /// # }
    /// ```
    pub fn call_owned_async_fallible<T, E, F>(
        &self,
        key: &K,
        fut: F,
    ) -> impl Future<Output = Result<T, E>> + 'static
    where
        F: Future<Output = Result<T, E>> + 'static,
        E: From<BulkheadFull>,
    {
        let acquire = self.acquire_owned_async(key);
        async move {
            let _permit = acquire.await?;
            fut.await
        }
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
        if let Some(fallback) = self.fallback_bulkhead(key) {
            return Some(fallback.metrics());
        }
        let hash = self.hasher.hash_one(key);
        let shard = self.shard(hash).lock();
        shard.table.find(hash, |e| *e.key == *key).map(|entry| entry.bulkhead.metrics())
    }

    /// The bulkhead of `key`, if it is live (or is the fallback key), to read its
    /// configuration or metrics. Does not create the key. Holding the returned `Arc` keeps
    /// the key live: it is not idle, so it is not evicted. To hear every key, use the keyed
    /// level's [`on_event`](Self::on_event) and [`enable_counters`](Self::enable_counters):
    /// what is registered on one key's bulkhead is lost when the key is evicted.
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
        if let Some(fallback) = self.fallback_bulkhead(key) {
            return Some(Arc::clone(fallback));
        }
        let hash = self.hasher.hash_one(key);
        let shard = self.shard(hash).lock();
        shard.table.find(hash, |e| *e.key == *key).map(|entry| Arc::clone(&entry.bulkhead))
    }

    /// Registers a listener for the events of every key's bulkhead (those live now and those
    /// created later, the fallback key's), of the total, and for the keyed level's own
    /// refusals ([`RejectReason::TooManyKeys`], named `"{name}/{key}"`). Events carry the
    /// name of the bulkhead they happened to: `"{name}/{key}"` for a key, `name` for the
    /// total. The returned handle removes the listener from all of them at once.
    ///
    /// As for [`Bulkhead::on_event`]: listeners run on the thread where the event happens,
    /// never under a lock of the keyed bulkhead's; every event of a call that starts after
    /// this returns reaches the listener; a panicking listener is caught.
    ///
    /// How: the keyed level keeps its listeners; a key's bulkhead gets each of them when it
    /// is created (under its shard's lock), and this walks the live keys (one shard lock at
    /// a time), so a key created concurrently gets the listener exactly once either way. An
    /// evicted key's bulkhead goes with its registrations; its next bulkhead gets them again.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use bulkhead::{BulkheadConfig, BulkheadEventKind, RejectReason, keyed::KeyedBulkhead};
    ///
    /// let tenants = KeyedBulkhead::<&str>::builder("api")
    ///     .default_config(BulkheadConfig::builder().max_concurrent_calls(1).build()?)
    ///     .max_keys(1)
    ///     .build()?;
    /// let heard = Arc::new(Mutex::new(Vec::new()));
    /// let log = Arc::clone(&heard);
    /// tenants.on_event(move |event| {
    ///     if let BulkheadEventKind::CallRejected(reason) = event.kind() {
    ///         log.lock().unwrap().push((event.bulkhead_name().to_owned(), reason));
    ///     }
    /// });
    /// let _acme = tenants.try_acquire(&"acme")?; // created after the listener
    /// assert!(tenants.try_acquire(&"acme").is_err());
    /// assert!(tenants.try_acquire(&"globex").is_err());
    /// assert_eq!(
    ///     *heard.lock().unwrap(),
    ///     [
    ///         ("api/acme".to_owned(), RejectReason::Full),
    ///         ("api/globex".to_owned(), RejectReason::TooManyKeys),
    ///     ]
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn on_event(
        &self,
        listener: impl Fn(&BulkheadEvent) + Send + Sync + 'static,
    ) -> crate::ListenerHandle {
        let listener: Arc<Listener> = Arc::new(listener);
        let active = Arc::new(AtomicBool::new(true));
        self.settings.lock().listeners.push((Arc::clone(&listener), Arc::clone(&active)));
        // The bulkheads that are not in the shards: the fallback key's and the total.
        for bulkhead in self.fallback.iter().map(|(_, b)| b).chain(&self.total) {
            bulkhead.add_listener(shared_listener(&listener), Arc::clone(&active));
        }
        self.update_live_keys();
        crate::ListenerHandle { active }
    }

    /// Starts counting calls on every key's bulkhead (live and created later), the fallback
    /// key's and the total ([`Bulkhead::enable_counters`]); each key's
    /// [`key_metrics`](Self::key_metrics) then reports its counts.
    /// [`KeyedMetrics::too_many_keys`] counts the keyed level's own refusals whether or not
    /// this was called. Idempotent.
    ///
    /// ```
    /// use bulkhead::{BulkheadConfig, RejectReason, keyed::KeyedBulkhead};
    /// let tenants = KeyedBulkhead::<u32>::builder("api")
    ///     .default_config(BulkheadConfig::builder().max_concurrent_calls(1).build()?)
    ///     .build()?;
    /// tenants.enable_counters();
    /// let permit = tenants.try_acquire(&7)?;
    /// assert!(tenants.try_acquire(&7).is_err());
    /// drop(permit);
    /// let m = tenants.key_metrics(&7).unwrap();
    /// assert_eq!((m.calls_permitted(), m.calls_rejected(RejectReason::Full), m.calls_finished()), (1, 1, 1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn enable_counters(&self) {
        if !self.settings.lock().enable_counters() {
            return;
        }
        for bulkhead in self.fallback.iter().map(|(_, b)| b).chain(&self.total) {
            bulkhead.enable_counters();
        }
        self.update_live_keys();
    }

    /// Brings every live key's bulkhead up to date with the keyed level's listeners and
    /// counters, one shard lock at a time. Registering runs no user code (it boxes a shared
    /// handle to the listener), so it is done under the lock, which is what makes a key
    /// created concurrently get each listener exactly once (see `insert`).
    fn update_live_keys(&self) {
        for shard in self.shards.iter() {
            let mut shard = shard.lock();
            let settings = self.settings.lock();
            for entry in shard.table.iter_mut() {
                entry.listeners = settings.observe(&entry.bulkhead, entry.listeners);
            }
        }
    }

    /// Replaces `key`'s configuration at run time: its override from now on, and, if the
    /// key is live (or is the fallback key), its bulkhead's configuration at once, as
    /// [`Bulkhead::change_config`] does (never waits; growing admits queued callers,
    /// shrinking revokes nothing). A key created later gets it too.
    ///
    /// ```
    /// use bulkhead::{BulkheadConfig, keyed::KeyedBulkhead};
    /// let limit = |n| BulkheadConfig::builder().max_concurrent_calls(n).build().unwrap();
    /// let tenants = KeyedBulkhead::<u32>::builder("api").default_config(limit(1)).build()?;
    /// let _one = tenants.try_acquire(&7)?;
    /// assert!(tenants.try_acquire(&7).is_err());
    /// tenants.change_key_config(7, limit(2));
    /// let _two = tenants.try_acquire(&7)?;
    /// assert_eq!(tenants.config_for(&7).max_concurrent_calls(), 2);
    /// assert_eq!(tenants.config_for(&8).max_concurrent_calls(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn change_key_config(&self, key: K, config: BulkheadConfig) {
        let replaced = self.settings.lock().set_override(key, config);
        // The key's previous override (user data) is dropped after the lock.
        drop(replaced);
        self.apply_configs();
    }

    /// Replaces the default configuration at run time: every live key without an override
    /// (and the fallback key, if it has none) changes at once, as
    /// [`Bulkhead::change_config`] does; keys created later get it.
    ///
    /// ```
    /// use bulkhead::{BulkheadConfig, keyed::KeyedBulkhead};
    /// let limit = |n| BulkheadConfig::builder().max_concurrent_calls(n).build().unwrap();
    /// let tenants = KeyedBulkhead::<u32>::builder("api")
    ///     .default_config(limit(1))
    ///     .key_config(9, limit(5))
    ///     .build()?;
    /// drop(tenants.try_acquire(&7)?);
    /// tenants.change_default_config(limit(3));
    /// assert_eq!(tenants.key_metrics(&7).unwrap().max_allowed_concurrent_calls(), 3);
    /// assert_eq!(tenants.config_for(&8).max_concurrent_calls(), 3);
    /// assert_eq!(tenants.config_for(&9).max_concurrent_calls(), 5, "an override stays");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn change_default_config(&self, config: BulkheadConfig) {
        self.settings.lock().set_default(config);
        self.apply_configs();
    }

    /// Replaces the shared total's configuration at run time ([`Bulkhead::change_config`]).
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] (key `total`) if this keyed bulkhead was built without a total: a
    /// total cannot be added later.
    ///
    /// ```
    /// use bulkhead::{BulkheadConfig, keyed::KeyedBulkhead};
    /// let limit = |n| BulkheadConfig::builder().max_concurrent_calls(n).build().unwrap();
    /// let tenants = KeyedBulkhead::<u32>::builder("api").total(limit(10)).build()?;
    /// tenants.change_total_config(limit(20))?;
    /// assert_eq!(tenants.total_metrics().unwrap().max_allowed_concurrent_calls(), 20);
    ///
    /// let no_total = KeyedBulkhead::<u32>::builder("hosts").build()?;
    /// let err = no_total.change_total_config(limit(20)).unwrap_err();
    /// assert_eq!((err.key(), err.value()), ("total", "none"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn change_total_config(&self, config: BulkheadConfig) -> Result<(), ConfigError> {
        match &self.total {
            Some(total) => {
                total.change_config(config);
                Ok(())
            }
            None => Err(ConfigError::new(
                "total",
                "none",
                "this keyed bulkhead has no total; build it with `.total(..)` to change one",
            )),
        }
    }

    /// Gives every live key's bulkhead (and the fallback key's) the configuration the
    /// settings give it now. The bulkheads are collected under each shard's lock and changed
    /// after it (`change_config` may wake queued callers: user code). Two changes racing
    /// could apply out of order, so this repeats until the settings did not change while it
    /// applied them: the last pass of the last change applies the latest settings. A key
    /// created meanwhile compares its settings version under its shard's lock (`insert`).
    fn apply_configs(&self) {
        loop {
            let version = self.settings.lock().version;
            let mut live: Vec<(Arc<K>, Arc<Bulkhead>)> = Vec::new();
            for shard in self.shards.iter() {
                let shard = shard.lock();
                live.extend(
                    shard.table.iter().map(|e| (Arc::clone(&e.key), Arc::clone(&e.bulkhead))),
                );
            }
            let fallback = self.fallback.as_ref().map(|(key, b)| (key, b));
            for (key, bulkhead) in live.iter().map(|(k, b)| (&**k, b)).chain(fallback) {
                let config = self.settings.lock().config_for(key).clone();
                if bulkhead.config() != config {
                    bulkhead.change_config(config);
                }
            }
            // The keys and bulkheads (user code in their drops) go after every lock.
            drop(live);
            if self.settings.lock().version == version {
                return;
            }
        }
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
        KeyedMetrics {
            keys: all,
            others,
            other_keys: rest.len(),
            total: self.total_metrics(),
            // Ordering: Relaxed — a statistic read for its value alone.
            too_many_keys: self.refused_keys.load(Ordering::Relaxed),
        }
    }
}

/// The slots of a caller that holds `key` and tried the total (if any): both, or the
/// total's refusal with the key's slot released first, so no slot of either level is held
/// once the error is returned.
#[inline]
fn both<Q, P>(
    key: Q,
    total: Option<Result<P, BulkheadFull>>,
) -> Result<(Q, Option<P>), BulkheadFull> {
    match total {
        None => Ok((key, None)),
        Some(Ok(total)) => Ok((key, Some(total))),
        Some(Err(refused)) => {
            drop(key);
            Err(refused)
        }
    }
}

/// A slot of `bulkhead` taken by `acquire`, returned with the `Arc` (no second clone of it,
/// no release in between). The caller wraps it at once in a guard that releases it
/// ([`KeyedPermit::key_slot`] or `OwnedPermit::from_acquired`); nothing that can panic comes
/// between.
#[inline]
fn take(
    bulkhead: Arc<Bulkhead>,
    acquire: impl FnOnce(&Bulkhead) -> Result<Permit<'_>, BulkheadFull>,
) -> Result<(Arc<Bulkhead>, Mark), BulkheadFull> {
    // The borrowed guard is given up, its mark kept: its slot is the caller's guard's.
    let mark = acquire(&bulkhead)?.into_mark();
    Ok((bulkhead, mark))
}

/// Releases `permits` slots of `bulkhead` granted while it was observed (`mark` set): out
/// of line, off a keyed permit's inlined drop.
#[inline(never)]
fn release_marked_slots(bulkhead: &Bulkhead, permits: u32, mark: Mark) {
    bulkhead.release_permits(permits, mark);
}

/// A name for an error or event that is not a bulkhead's (a refused key's): inline, cut at a
/// character boundary with `…` if longer than an inline name holds, never interned (refused
/// keys are unbounded, the interned names are capped for the whole process).
fn transient_name(mut name: String) -> Name {
    if name.len() > INLINE_CAPACITY {
        let mut cut = INLINE_CAPACITY - '…'.len_utf8();
        while !name.is_char_boundary(cut) {
            cut -= 1;
        }
        name.truncate(cut);
        name.push('…');
    }
    Name::new(name)
}

/// A keyed-level listener, shared by every bulkhead it is registered on.
fn shared_listener(listener: &Arc<Listener>) -> Box<Listener> {
    let listener = Arc::clone(listener);
    Box::new(move |event: &BulkheadEvent| listener(event))
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
///   is closed and never inserted), so the count decides; `is_idle_acquire` still reads the
///   semaphore with Acquire (it says yes for a closed one with nothing in flight, though
///   its waiters flag stays set for good), so the keyed `wait_drained`, which no longer
///   sees an evicted key, still happens-after its last holder's release (issue 29: the
///   count alone, read Relaxed, ordered nothing).
fn is_idle(bulkhead: &Arc<Bulkhead>) -> bool {
    Arc::strong_count(bulkhead) == 1 && bulkhead.sem().is_idle_acquire()
}

/// What the keyed level applies to every key's bulkhead, under one lock: configurations,
/// listeners and counters. Taken briefly, never while user code runs, except a key's `Hash`
/// and `Eq` (the overrides are a map by key, as the shards are).
struct Settings<K> {
    default: BulkheadConfig,
    overrides: HashMap<K, BulkheadConfig>,
    /// Bumped by every configuration change (see `apply_configs` and `insert`).
    version: u64,
    /// The keyed level's listeners, in registration order, each with its handle's flag.
    listeners: Vec<(Arc<Listener>, Arc<AtomicBool>)>,
    /// Whether `enable_counters` ran.
    counting: bool,
}

impl<K: Eq + Hash> Settings<K> {
    fn config_for(&self, key: &K) -> &BulkheadConfig {
        self.overrides.get(key).unwrap_or(&self.default)
    }

    /// Sets `key`'s override; returns the key if it already had one (to drop after the lock:
    /// a key's `Drop` is user code).
    fn set_override(&mut self, key: K, config: BulkheadConfig) -> Option<K> {
        self.version += 1;
        match self.overrides.get_mut(&key) {
            Some(current) => {
                *current = config;
                Some(key)
            }
            None => {
                self.overrides.insert(key, config);
                None
            }
        }
    }

    fn set_default(&mut self, config: BulkheadConfig) {
        self.version += 1;
        self.default = config;
    }

    /// Turns counting on; `false` if it already was.
    fn enable_counters(&mut self) -> bool {
        !core::mem::replace(&mut self.counting, true)
    }

    /// The listeners not removed, to call after the lock.
    fn active_listeners(&self) -> Vec<Arc<Listener>> {
        self.listeners
            .iter()
            // Ordering: Relaxed — the flag guards no data (as `Listeners::emit`).
            .filter(|(_, active)| active.load(Ordering::Relaxed))
            .map(|(listener, _)| Arc::clone(listener))
            .collect()
    }

    /// Registers on `bulkhead` the listeners from index `seen` on, and counters if they are
    /// on; returns how many listeners it has now. Runs no user code.
    fn observe(&self, bulkhead: &Bulkhead, seen: usize) -> usize {
        for (listener, active) in self.listeners.iter().skip(seen) {
            bulkhead.add_listener(shared_listener(listener), Arc::clone(active));
        }
        if self.counting {
            bulkhead.enable_counters();
        }
        self.listeners.len()
    }

    /// A new key's bulkhead, built from the settings at `version`: changed to the current
    /// configuration if it changed since, and observed. Its shard's lock is held, and the
    /// bulkhead has no waiter yet, so `change_config` wakes nobody.
    fn bring_up_to_date(&self, key: &K, bulkhead: &Bulkhead, version: u64) -> usize {
        if self.version != version {
            let config = self.config_for(key);
            if bulkhead.config() != *config {
                bulkhead.change_config(config.clone());
            }
        }
        self.observe(bulkhead, 0)
    }
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
    /// How many calls the keyed level refused with [`RejectReason::TooManyKeys`] since it
    /// was built (counted whether or not [`KeyedBulkhead::enable_counters`] ran).
    pub too_many_keys: u64,
}

/// A slot of a key (or `n` of them, from the weighted verbs) and, with a total, as many of
/// the total, borrowed from the [`KeyedBulkhead`]; both released on drop (the key's first).
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
    // Both levels are released by `Drop`, the key's slots first; the key's `Arc` goes with
    // the fields afterwards. No field has a release of its own (a `KeySlot` or an
    // `OwnedPermit` for the key, a `Permit` for the total): each was a second drop function
    // called from this one's, and adding the total to a permit then had to drop the field's
    // old value. One `Drop` saved 7 to 9 instructions per keyed acquire + release and 57
    // with a total (callgrind, `benches/results/keyed.md`).
    key: Arc<Bulkhead>,
    /// The slots held of the key's bulkhead, and of the total when there is one (the two
    /// always hold as many): 1 for the plain acquires, `n` for the weighted ones.
    permits: u32,
    mark: Mark,
    /// The total, when the keyed bulkhead has one, and the mark of its slots.
    total: Option<&'a Bulkhead>,
    total_mark: Mark,
}

impl<'a> KeyedPermit<'a> {
    /// The key's part of a permit: one slot of `key` already taken, with its mark; no total
    /// yet ([`with_total`](Self::with_total) adds it).
    #[inline]
    fn key_slot(key: Arc<Bulkhead>, mark: Mark) -> Self {
        Self::key_slots(key, 1, mark)
    }

    /// As [`key_slot`](Self::key_slot), for `permits` slots of `key` already taken.
    #[inline]
    fn key_slots(key: Arc<Bulkhead>, permits: u32, mark: Mark) -> Self {
        KeyedPermit { key, permits, mark, total: None, total_mark: Mark::NONE }
    }

    /// Adds the total's answer (if the keyed bulkhead has a total): the permit with both
    /// levels, or the total's refusal with the key's slots released first (`both`). Inlined
    /// always: out of line it cost `keyed_acq_rel_total` 49 instructions (callgrind).
    #[inline(always)]
    fn with_total(
        self,
        total: Option<Result<Permit<'a>, BulkheadFull>>,
    ) -> Result<Self, BulkheadFull> {
        let (mut permit, total) = both(self, total)?;
        if let Some(total) = total {
            debug_assert_eq!(total.num_permits(), permit.permits);
            permit.total = Some(total.bulkhead());
            // The total's slots move to this permit, which releases them.
            permit.total_mark = total.into_mark();
        }
        Ok(permit)
    }

    /// The bulkhead of the permit's key (the fallback key's, if the call was sent there).
    pub fn key_bulkhead(&self) -> &Bulkhead {
        &self.key
    }

    /// How many slots this permit holds of its key, and as many of the total when the keyed
    /// bulkhead has one: 1 for the plain acquires, `n` for
    /// [`try_acquire_many`](KeyedBulkhead::try_acquire_many) and the other weighted verbs.
    ///
    /// ```
    /// use bulkhead::keyed::KeyedBulkhead;
    /// let hosts = KeyedBulkhead::<&str>::builder("hosts").build()?;
    /// assert_eq!(hosts.try_acquire(&"a.example")?.num_permits(), 1);
    /// assert_eq!(hosts.try_acquire_many(&"a.example", 3)?.num_permits(), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn num_permits(&self) -> u32 {
        self.permits
    }

    /// Splits `n` slots off into a new permit of the same key (and `n` of the total with
    /// them); `None`, changing nothing, if this permit holds fewer than `n`. As
    /// [`Permit::split`]: `split(0)` gives an empty permit, no slot is taken or released,
    /// and the new permit is a call of its own for counters and events (`CallPermitted` now
    /// on the key and the total, `CallFinished` when dropped). Like any keyed permit, the
    /// new one keeps its key live until it is dropped.
    ///
    /// ```
    /// use bulkhead::{BulkheadConfig, keyed::KeyedBulkhead};
    /// let tenants = KeyedBulkhead::<u32>::builder("api")
    ///     .total(BulkheadConfig::builder().max_concurrent_calls(8).build()?)
    ///     .build()?;
    /// let mut batch = tenants.try_acquire_many(&7, 5)?;
    /// let two = batch.split(2).unwrap();
    /// assert_eq!((batch.num_permits(), two.num_permits()), (3, 2));
    /// assert!(batch.split(4).is_none());
    /// drop(two);
    /// assert_eq!(tenants.key_metrics(&7).unwrap().in_flight_calls(), 3);
    /// assert_eq!(tenants.total_metrics().unwrap().in_flight_calls(), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn split(&mut self, n: u32) -> Option<Self> {
        self.permits = self.permits.checked_sub(n)?;
        // The new guard's own marks, as `Permit::split` gives it (counted and told now if
        // anyone observes). The `Arc` is cloned from this permit's, outside the shard's
        // lock: the key is not idle (this permit holds it), so no eviction can race it.
        let mark = self.key.permitted(self.key.sem().load());
        let total_mark = self.total.map_or(Mark::NONE, |total| total.permitted(total.sem().load()));
        Some(KeyedPermit {
            key: Arc::clone(&self.key),
            permits: n,
            mark,
            total: self.total,
            total_mark,
        })
    }

    /// Moves every slot of `other` (of the key and of the total) into this permit. As
    /// [`Permit::merge`]: `other`'s call ends here (it reports `CallFinished` as if dropped)
    /// but releases nothing.
    ///
    /// # Panics
    ///
    /// If `other` holds slots of another bulkhead: another key, or another keyed bulkhead
    /// (its slots cannot count against this key's limit), as [`Permit::merge`] and tokio's
    /// `SemaphorePermit::merge` do. Two keys whose calls went to the fallback key hold slots
    /// of the same bulkhead and merge. On the panic `other` is dropped while unwinding, so
    /// its slots go back to its own key and total: nothing is lost.
    ///
    /// ```
    /// use bulkhead::keyed::KeyedBulkhead;
    /// let tenants = KeyedBulkhead::<u32>::builder("api").build()?;
    /// let mut batch = tenants.try_acquire_many(&7, 2)?;
    /// batch.merge(tenants.try_acquire(&7)?);
    /// assert_eq!(batch.num_permits(), 3);
    /// assert_eq!(tenants.key_metrics(&7).unwrap().in_flight_calls(), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn merge(&mut self, mut other: Self) {
        let same_total = match (self.total, other.total) {
            (None, None) => true,
            (Some(a), Some(b)) => core::ptr::eq(a, b),
            _ => false,
        };
        assert!(
            Arc::ptr_eq(&self.key, &other.key) && same_total,
            "merging permits of two bulkheads ('{}' and '{}')",
            self.key.name(),
            other.key.name()
        );
        self.permits += core::mem::take(&mut other.permits);
    }
}

impl Drop for KeyedPermit<'_> {
    /// The common case inline: a key's slots granted unobserved, no total. Everything else
    /// (a mark to report, a total to release) is out of line, so the drop keeps few values
    /// live across a call and saves few registers.
    #[inline]
    fn drop(&mut self) {
        if self.mark.is_set() {
            return self.release_marked();
        }
        self.key.release_permits(self.permits, Mark::NONE);
        if let Some(total) = self.total {
            if self.total_mark.is_set() {
                return release_marked_slots(total, self.permits, self.total_mark);
            }
            total.release_permits(self.permits, Mark::NONE);
        }
    }
}

impl KeyedPermit<'_> {
    /// Releases the key's slots (first) and the total's: the drop of a permit whose key
    /// was observed when it was granted.
    #[inline(never)]
    fn release_marked(&mut self) {
        self.key.release_permits(self.permits, self.mark);
        if let Some(total) = self.total {
            total.release_permits(self.permits, self.total_mark);
        }
    }
}

impl fmt::Debug for KeyedPermit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedPermit")
            .field("key", &self.key.name())
            .field("permits", &self.permits)
            .field("total", &self.total.is_some())
            .finish()
    }
}

/// A slot of a key (or `n` of them) and, with a total, as many of the total, holding both
/// bulkheads by `Arc`: `Send + 'static`, so it can move to another task or thread. Both
/// released on drop (the key's first). Holding it keeps its key live.
///
/// ```
/// use std::sync::Arc;
/// use bulkhead::{BulkheadConfig, keyed::KeyedBulkhead};
/// let tenants = Arc::new(
///     KeyedBulkhead::<u64>::builder("api")
///         .total(BulkheadConfig::builder().max_concurrent_calls(4).build()?)
///         .build()?,
/// );
/// let permit = tenants.try_acquire_owned(&42)?;
/// assert_eq!(permit.key_bulkhead().name(), "api/42");
/// assert_eq!(permit.total_bulkhead().unwrap().name(), "api");
/// std::thread::spawn(move || drop(permit)).join().unwrap();
/// assert_eq!(tenants.total_metrics().unwrap().in_flight_calls(), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "the slots are released as soon as the permit is dropped"]
#[clippy::has_significant_drop]
pub struct OwnedKeyedPermit {
    // Dropped in declaration order: the key's slot, then the total's.
    key: OwnedPermit,
    total: Option<OwnedPermit>,
}

impl OwnedKeyedPermit {
    /// The bulkhead of the permit's key (the fallback key's, if the call was sent there).
    pub fn key_bulkhead(&self) -> &Arc<Bulkhead> {
        self.key.bulkhead()
    }

    /// How many slots this permit holds of its key (and as many of the total), as
    /// [`KeyedPermit::num_permits`].
    ///
    /// ```
    /// use bulkhead::keyed::KeyedBulkhead;
    /// let tenants = KeyedBulkhead::<u64>::builder("api").build()?;
    /// assert_eq!(tenants.try_acquire_many_owned(&42, 4)?.num_permits(), 4);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn num_permits(&self) -> u32 {
        self.key.num_permits()
    }

    /// Splits `n` slots off into a new owned permit of the same key (and `n` of the total),
    /// as [`KeyedPermit::split`]: `None`, changing nothing, if this permit holds fewer.
    ///
    /// ```
    /// use bulkhead::{BulkheadConfig, keyed::KeyedBulkhead};
    /// let tenants = KeyedBulkhead::<u64>::builder("api")
    ///     .total(BulkheadConfig::builder().max_concurrent_calls(8).build()?)
    ///     .build()?;
    /// let mut batch = tenants.try_acquire_many_owned(&42, 4)?;
    /// let one = batch.split(1).unwrap();
    /// std::thread::spawn(move || drop(one)).join().unwrap();
    /// assert_eq!(tenants.total_metrics().unwrap().in_flight_calls(), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn split(&mut self, n: u32) -> Option<Self> {
        let key = self.key.split(n)?;
        // The total holds as many slots as the key, so its split succeeds too.
        let total = self.total.as_mut().and_then(|total| total.split(n));
        debug_assert_eq!(total.is_some(), self.total.is_some());
        Some(OwnedKeyedPermit { key, total })
    }

    /// Moves every slot of `other` (of the key and of the total) into this permit, as
    /// [`KeyedPermit::merge`].
    ///
    /// # Panics
    ///
    /// If `other` holds slots of another bulkhead (another key, or another keyed
    /// bulkhead); `other` then releases its slots to its own key and total while unwinding.
    ///
    /// ```
    /// use bulkhead::keyed::KeyedBulkhead;
    /// let tenants = KeyedBulkhead::<u64>::builder("api").build()?;
    /// let mut batch = tenants.try_acquire_owned(&42)?;
    /// batch.merge(tenants.try_acquire_many_owned(&42, 2)?);
    /// assert_eq!(batch.num_permits(), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn merge(&mut self, other: Self) {
        let same_total = match (&self.total, &other.total) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a.bulkhead(), b.bulkhead()),
            _ => false,
        };
        assert!(
            Arc::ptr_eq(self.key.bulkhead(), other.key.bulkhead()) && same_total,
            "merging permits of two bulkheads ('{}' and '{}')",
            self.key.bulkhead().name(),
            other.key.bulkhead().name()
        );
        let OwnedKeyedPermit { key, total } = other;
        self.key.merge(key);
        if let (Some(mine), Some(theirs)) = (&mut self.total, total) {
            mine.merge(theirs);
        }
    }

    /// The shared total, if the keyed bulkhead has one.
    pub fn total_bulkhead(&self) -> Option<&Arc<Bulkhead>> {
        self.total.as_ref().map(OwnedPermit::bulkhead)
    }
}

/// An outcome marked on a keyed call reaches both levels' permits (the tower layer's guard).
impl Marked for OwnedKeyedPermit {
    fn set(&mut self, outcome: Outcome) {
        self.key.set(outcome);
        if let Some(total) = &mut self.total {
            total.set(outcome);
        }
    }

    fn unmarked_is_cancelled(&mut self) {
        self.key.unmarked_is_cancelled();
        if let Some(total) = &mut self.total {
            total.unmarked_is_cancelled();
        }
    }
}

impl fmt::Debug for OwnedKeyedPermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedKeyedPermit")
            .field("key", &self.key.bulkhead().name())
            .field("total", &self.total.is_some())
            .finish()
    }
}

pin_project! {
    /// The future returned by [`KeyedBulkhead::acquire_owned_async`] and
    /// [`KeyedBulkhead::acquire_many_owned_async`]: waits for its slots of the key, then as
    /// many of the total (each up to its bulkhead's max wait, each granted whole).
    /// `Send + 'static`.
    ///
    /// # Cancel safety
    ///
    /// Dropping it at any point loses nothing: a queued wait leaves its queue, and the key
    /// slots already taken are released.
    #[must_use = "futures do nothing unless polled"]
    pub struct AcquireOwnedKeyed {
        #[pin]
        state: OwnedState,
    }
}

pin_project! {
    #[project = OwnedStateProj]
    enum OwnedState {
        // The look-up refused (too many keys, no fallback key).
        Refused { refused: Option<BulkheadFull> },
        Key {
            #[pin]
            acquire: AcquireOwned,
            total: Option<Arc<Bulkhead>>,
            // The request, kept for the total (the key's acquire has its own copy).
            request: Request,
            // The key's guaranteed share, with shares (`share.rs`): the total is asked in
            // the share's class, read once the key's slots are held.
            guarantee: Option<u32>,
        },
        Total {
            #[pin]
            acquire: AcquireOwned,
            key: Option<OwnedPermit>,
        },
        Done,
    }
}

impl AcquireOwnedKeyed {
    /// Waits for `permits` slots of the looked-up key's bulkhead, then as many of `total`
    /// (in the class of the key's `guarantee`, with shares).
    pub(crate) fn new(
        looked_up: Result<Arc<Bulkhead>, BulkheadFull>,
        total: Option<Arc<Bulkhead>>,
        request: Request,
        guarantee: Option<u32>,
    ) -> Self {
        let state = match looked_up {
            Ok(bulkhead) => {
                let acquire = AcquireOwned::many(bulkhead, request);
                OwnedState::Key { acquire, total, request, guarantee }
            }
            Err(refused) => OwnedState::Refused { refused: Some(refused) },
        };
        AcquireOwnedKeyed { state }
    }
}

impl Future for AcquireOwnedKeyed {
    type Output = Result<OwnedKeyedPermit, BulkheadFull>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        loop {
            let next = match state.as_mut().project() {
                OwnedStateProj::Refused { refused } => {
                    Err(refused.take().expect("a refusal is reported once"))
                }
                OwnedStateProj::Key { acquire, total, request, guarantee } => {
                    match ready!(acquire.poll(cx)) {
                        Err(refused) => Err(refused),
                        Ok(key) => match total.take() {
                            None => Ok(OwnedKeyedPermit { key, total: None }),
                            Some(total) => {
                                // The same request of the total as of the key, in the share's
                                // class with shares.
                                let request = match *guarantee {
                                    None => *request,
                                    Some(g) => share::at_total(g, key.bulkhead(), *request),
                                };
                                let acquire = AcquireOwned::many(total, request);
                                state.set(OwnedState::Total { acquire, key: Some(key) });
                                continue;
                            }
                        },
                    }
                }
                OwnedStateProj::Total { acquire, key } => {
                    let acquired = ready!(acquire.poll(cx));
                    let key = key.take().expect("the key's slot is held until the total answers");
                    both(key, Some(acquired)).map(|(key, total)| OwnedKeyedPermit { key, total })
                }
                OwnedStateProj::Done => panic!("AcquireOwnedKeyed polled after completion"),
            };
            state.set(OwnedState::Done);
            return Poll::Ready(next);
        }
    }
}

impl fmt::Debug for AcquireOwnedKeyed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let stage = match &self.state {
            OwnedState::Refused { .. } => "refused",
            OwnedState::Key { .. } => "key",
            OwnedState::Total { .. } => "total",
            OwnedState::Done => "done",
        };
        f.debug_struct("AcquireOwnedKeyed").field("waiting_for", &stage).finish()
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
        assert_eq!(keyed.try_acquire(&2).unwrap_err().bulkhead_name(), "k");
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
        assert_eq!(keyed.try_acquire(&5).unwrap_err().bulkhead_name(), "k/0");
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
        assert_eq!(keyed.try_acquire(&1).unwrap_err().bulkhead_name(), "k/1");
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
            assert_eq!(keyed.try_acquire(&key).unwrap_err().reason(), RejectReason::Closed);
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
