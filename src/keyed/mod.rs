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
//! [`RejectReason::ExceedsLimit`](crate::RejectReason::ExceedsLimit) before its key is looked
//! up (it could never be granted, so it neither waits at its key nor creates it); one above its
//! key's limit, by the key, before any wait. A keyed permit's `merge` takes only a permit of
//! the same key's bulkhead.
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
//! configured, or is refused with
//! [`RejectReason::TooManyKeys`](crate::RejectReason::TooManyKeys) (a
//! [`BulkheadFull`](crate::BulkheadFull) named
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
//! permit clones it once (for the [`OwnedPermit`](crate::OwnedPermit) inside [`KeyedPermit`])
//! and a refusal writes no reference count.
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
//! refusal is a [`BulkheadFull`](crate::BulkheadFull) naming the level that refused:
//! `"{name}/{key}"` for a key (and for
//! [`RejectReason::TooManyKeys`](crate::RejectReason::TooManyKeys)), `name` for the total; so a
//! `call_fallible` whose error type implements `From<BulkheadFull>` works unchanged on a keyed
//! bulkhead.
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

// Where things are (the files of this module; the module docs above are for users):
//
// | file | what |
// |---|---|
// | `mod.rs` | `KeyedBulkhead` itself, its name and configuration, close and drain |
// | `builder.rs` | `KeyedBulkheadBuilder`, `KeyedBulkhead::builder` and the defaults |
// | `map.rs` | the sharded map of live keys: look-up, creation, the bound, eviction |
// | `acquire.rs` | the acquire verbs, each level in turn (key, then total) |
// | `call.rs` | the `call` verbs, on the acquire verbs |
// | `permit.rs` | `KeyedPermit`, `OwnedKeyedPermit` |
// | `future.rs` | the named futures: `AcquireKeyed`, `AcquireKeyedWithSleep`, `AcquireOwnedKeyed`, `KeyedDrained` |
// | `settings.rs` | listeners, counters and configuration changes of every key |
// | `metrics.rs` | `KeyedMetrics` and the per-key and total metrics |
// | `share.rs` | guaranteed shares of the total |

mod acquire;
mod builder;
mod call;
mod future;
mod map;
mod metrics;
mod permit;
mod settings;
mod share;

use core::fmt;
use core::hash::{BuildHasher, Hash};
use std::collections::hash_map::RandomState;
use std::sync::Arc;

use crate::bulkhead::config::BulkheadConfig;
use crate::bulkhead::Bulkhead;
use crate::engine::pad::CachePadded;
use crate::engine::sync::{AtomicBool, AtomicU64, AtomicUsize, Mutex, Ordering};
use crate::engine::timer::Binding;
use map::Shard;
use settings::Settings;

pub use builder::{default_shards, KeyedBulkheadBuilder, DEFAULT_MAX_KEYS, MAX_SHARDS};
pub use future::{AcquireKeyed, AcquireKeyedWithSleep, AcquireOwnedKeyed, KeyedDrained};
pub use metrics::KeyedMetrics;
pub use permit::{KeyedPermit, OwnedKeyedPermit};

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

impl<K, S> KeyedBulkhead<K, S> {
    /// The keyed bulkhead's name (also the total's name).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Closes the keyed bulkhead for a graceful shutdown: every live key, the fallback key
    /// and the total ([`Bulkhead::close`]); a key created afterwards is created closed. Every
    /// new call is refused with [`RejectReason::Closed`](crate::RejectReason::Closed); calls in
    /// flight finish. Returns
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

    /// The shared total, if one is configured.
    pub fn total(&self) -> Option<&Bulkhead> {
        self.total.as_deref()
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
