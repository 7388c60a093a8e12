//! The map of live keys: its shards, the look-up that creates a key on first use, the
//! bound on live keys and eviction (the module docs' "Bounded cardinality", "The sharded
//! map" and "Keys, user code and the shard locks"). Everything that walks the shards, or
//! takes a shard's lock, is here; the rest of the keyed bulkhead reaches the entries through
//! [`collect_live`](KeyedBulkhead::collect_live), [`with_live`](KeyedBulkhead::with_live)
//! and [`update_live_keys`](KeyedBulkhead::update_live_keys).

use core::fmt;
use core::hash::{BuildHasher, Hash};
use core::time::Duration;
use std::sync::Arc;

use hashbrown::HashTable;

use super::permit::take;
use super::KeyedBulkhead;
use crate::bulkhead::error::BulkheadFull;
use crate::bulkhead::permit::Mark;
use crate::bulkhead::Bulkhead;
use crate::engine::sync::{Mutex, Ordering};
use crate::observe::event::{BulkheadEvent, BulkheadEventKind};
use crate::observe::name::{Name, INLINE_CAPACITY};
use crate::observe::reason::RejectReason;

/// One shard of the live keys, and whether a close has passed it, under the shard's lock, so
/// a key created in this shard after the close reached it is created closed.
pub(super) struct Shard<K> {
    /// An entry whose `Arc` only the map holds is idle (see the module docs).
    table: HashTable<Entry<K>>,
    closed: bool,
}

impl<K> Shard<K> {
    /// An empty shard that no close has passed.
    pub(super) fn new() -> Self {
        Shard { table: HashTable::new(), closed: false }
    }
}

/// A live key, its hash (to grow the table without hashing again) and its bulkhead.
///
/// The key is shared (`Arc<K>`) so that [`KeyedBulkhead::metrics`] can take it under the
/// shard's lock with a reference count and clone the key itself (user code) after the lock.
pub(super) struct Entry<K> {
    hash: u64,
    pub(super) key: Arc<K>,
    pub(super) bulkhead: Arc<Bulkhead>,
    /// How many of the keyed level's listeners are registered on `bulkhead`.
    listeners: usize,
}

impl<K, S> KeyedBulkhead<K, S> {
    /// Closes every shard (a key created in it afterwards is created closed), every live
    /// key, the fallback key and the total, and returns the live keys' bulkheads and the
    /// fallback key's. One shard locked at a time; closing twice is harmless
    /// (`Bulkhead::close` is idempotent), so the drain waits run it too and never miss a key
    /// a close still under way would reach.
    pub(super) fn close_keys(&self) -> Vec<Arc<Bulkhead>> {
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

    /// How many shards hold the live keys (a power of two):
    /// [`KeyedBulkheadBuilder::shards`](crate::keyed::KeyedBulkheadBuilder::shards).
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

    /// `f` of every live entry, collected one shard's lock at a time (`f` runs under it, so
    /// it runs no user code: it clones `Arc`s or reads a bulkhead). What it returns is the
    /// caller's to drop after the locks.
    pub(super) fn collect_live<T>(&self, mut f: impl FnMut(&Entry<K>) -> T) -> Vec<T> {
        let mut all = Vec::new();
        for shard in self.shards.iter() {
            let shard = shard.lock();
            all.extend(shard.table.iter().map(&mut f));
        }
        all
    }
}

impl<K, S> KeyedBulkhead<K, S>
where
    K: Eq + Hash + Clone + fmt::Display,
    S: BuildHasher,
{
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
    pub(super) fn try_key<P>(
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
        // A default caller takes a permit held back for a sheddable waiter (issue 29).
        match entry.bulkhead.try_take() {
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
            Err(word) if !Bulkhead::refusal_is_observed(word) => {
                Err(entry.bulkhead.refuse_unobserved(word))
            }
            Err(word) => {
                // Someone observes: report after the lock, on a clone of the `Arc`.
                let bulkhead = Arc::clone(&entry.bulkhead);
                drop(shard);
                // The refusal `Bulkhead::try_acquire` makes for this word: with the
                // counters alone observing, the counted refusal's inline path.
                Err(bulkhead.refuse_from(word, word.is_quiet_full()))
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
        self.with_live(key, Arc::clone)
    }

    /// `f` of `key`'s bulkhead if it is live (under its shard's lock, so `f` runs no user
    /// code) or is the fallback key; `None` otherwise. Does not create the key.
    pub(super) fn with_live<T>(&self, key: &K, f: impl FnOnce(&Arc<Bulkhead>) -> T) -> Option<T> {
        if let Some(fallback) = self.fallback_bulkhead(key) {
            return Some(f(fallback));
        }
        let hash = self.hasher.hash_one(key);
        let shard = self.shard(hash).lock();
        shard.table.find(hash, |e| *e.key == *key).map(|entry| f(&entry.bulkhead))
    }

    /// Brings every live key's bulkhead up to date with the keyed level's listeners and
    /// counters, one shard lock at a time. Registering runs no user code (it boxes a shared
    /// handle to the listener), so it is done under the lock, which is what makes a key
    /// created concurrently get each listener exactly once (see `insert`).
    pub(super) fn update_live_keys(&self) {
        for shard in self.shards.iter() {
            let mut shard = shard.lock();
            let settings = self.settings.lock();
            for entry in shard.table.iter_mut() {
                entry.listeners = settings.observe(&entry.bulkhead, entry.listeners);
            }
        }
    }
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
    Arc::strong_count(bulkhead) == 1 && bulkhead.is_idle_acquire()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bulkhead::config::BulkheadConfig;
    use crate::engine::sync::AtomicUsize;
    use crate::keyed::builder::MAX_SHARDS;

    fn limit(n: usize) -> BulkheadConfig {
        BulkheadConfig::builder().max_concurrent_calls(n).build().unwrap()
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
