//! What the keyed level applies to every key's bulkhead (the module docs' "Listeners,
//! counters and configuration of every key"): the settings under their one lock, the
//! listeners and counters registered on every key, and the configuration changes of a key,
//! the default and the total.

use core::fmt;
use core::hash::{BuildHasher, Hash};
use std::collections::HashMap;
use std::sync::Arc;

use super::KeyedBulkhead;
use crate::bulkhead::config::{BulkheadConfig, ConfigError};
use crate::bulkhead::Bulkhead;
use crate::engine::sync::{AtomicBool, Ordering};
use crate::observe::event::{BulkheadEvent, ListenerHandle};
use crate::observe::Listener;

impl<K, S> KeyedBulkhead<K, S>
where
    K: Eq + Hash + Clone + fmt::Display,
    S: BuildHasher,
{
    /// A new bulkhead for `key` and the settings version its configuration was read at.
    pub(super) fn new_bulkhead(&self, key: &K) -> (Bulkhead, u64) {
        let (config, version) = {
            let settings = self.settings.lock();
            (settings.config_for(key).clone(), settings.version)
        };
        // The name (the key's `Display`) is made after the settings lock is released.
        (Bulkhead::bound(format!("{}/{}", self.name, key), config, self.timer.clone()), version)
    }

    /// Registers a listener for the events of every key's bulkhead (those live now and those
    /// created later, the fallback key's), of the total, and for the keyed level's own
    /// refusals ([`RejectReason::TooManyKeys`](crate::RejectReason::TooManyKeys), named
    /// `"{name}/{key}"`). Events carry the name of the bulkhead they happened to:
    /// `"{name}/{key}"` for a key, `name` for the total. The returned handle removes the
    /// listener from all of them at once.
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
    ) -> ListenerHandle {
        let listener: Arc<Listener> = Arc::new(listener);
        let active = Arc::new(AtomicBool::new(true));
        self.settings.lock().listeners.push((Arc::clone(&listener), Arc::clone(&active)));
        // The bulkheads that are not in the shards: the fallback key's and the total.
        for bulkhead in self.fallback.iter().map(|(_, b)| b).chain(&self.total) {
            bulkhead.add_listener(shared_listener(&listener), Arc::clone(&active));
        }
        self.update_live_keys();
        ListenerHandle { active }
    }

    /// Starts counting calls on every key's bulkhead (live and created later), the fallback
    /// key's and the total ([`Bulkhead::enable_counters`]); each key's
    /// [`key_metrics`](Self::key_metrics) then reports its counts.
    /// [`KeyedMetrics::too_many_keys`](crate::keyed::KeyedMetrics::too_many_keys) counts the
    /// keyed level's own refusals whether or not this was called. Idempotent.
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
            let live = self.collect_live(|e| (Arc::clone(&e.key), Arc::clone(&e.bulkhead)));
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
}

/// What the keyed level applies to every key's bulkhead, under one lock: configurations,
/// listeners and counters. Taken briefly, never while user code runs, except a key's `Hash`
/// and `Eq` (the overrides are a map by key, as the shards are).
pub(super) struct Settings<K> {
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
    /// `default` for every key but those of `overrides`; no listener, no counters.
    pub(super) fn new(default: BulkheadConfig, overrides: HashMap<K, BulkheadConfig>) -> Self {
        Settings { default, overrides, version: 0, listeners: Vec::new(), counting: false }
    }

    pub(super) fn config_for(&self, key: &K) -> &BulkheadConfig {
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
    pub(super) fn active_listeners(&self) -> Vec<Arc<Listener>> {
        self.listeners
            .iter()
            // Ordering: Relaxed — the flag guards no data (as `Listeners::emit`).
            .filter(|(_, active)| active.load(Ordering::Relaxed))
            .map(|(listener, _)| Arc::clone(listener))
            .collect()
    }

    /// Registers on `bulkhead` the listeners from index `seen` on, and counters if they are
    /// on; returns how many listeners it has now. Runs no user code.
    pub(super) fn observe(&self, bulkhead: &Bulkhead, seen: usize) -> usize {
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
    pub(super) fn bring_up_to_date(&self, key: &K, bulkhead: &Bulkhead, version: u64) -> usize {
        if self.version != version {
            let config = self.config_for(key);
            if bulkhead.config() != *config {
                bulkhead.change_config(config.clone());
            }
        }
        self.observe(bulkhead, 0)
    }
}

/// A keyed-level listener, shared by every bulkhead it is registered on.
fn shared_listener(listener: &Arc<Listener>) -> Box<Listener> {
    let listener = Arc::clone(listener);
    Box::new(move |event: &BulkheadEvent| listener(event))
}
