//! Keyed bulkheads in a [`BulkheadRegistry`]: looked up by name, closed and drained with the
//! registry's other bulkheads.
//!
//! The registry holds each keyed bulkhead type-erased (its key type is the caller's), with
//! the two operations the registry applies to all of them, `close` and `wait_drained`; a
//! look-up downcasts it back to `KeyedBulkhead<K>` and refuses another `K` by name.

use core::any::Any;
use core::fmt;
use core::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use crate::keyed::{KeyedBulkhead, KeyedBulkheadBuilder};
use crate::registry::BulkheadRegistry;
use crate::registry::RegistryError;

/// What the registry needs of a keyed bulkhead whatever its key type.
pub(crate) trait AnyKeyed: Send + Sync {
    fn close(&self) -> bool;
    fn wait_drained(&self, timeout: Duration) -> bool;
    fn into_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync>;
    fn key_type(&self) -> &'static str;
}

impl<K> AnyKeyed for KeyedBulkhead<K>
where
    K: Send + Sync + 'static,
{
    fn close(&self) -> bool {
        KeyedBulkhead::close(self)
    }

    fn wait_drained(&self, timeout: Duration) -> bool {
        KeyedBulkhead::wait_drained(self, timeout)
    }

    fn into_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync> {
        self
    }

    fn key_type(&self) -> &'static str {
        core::any::type_name::<K>()
    }
}

fn downcast<K>(
    name: &str,
    entry: &Arc<dyn AnyKeyed>,
) -> Result<Arc<KeyedBulkhead<K>>, RegistryError>
where
    K: Send + Sync + 'static,
{
    let registered = entry.key_type();
    Arc::clone(entry).into_any().downcast::<KeyedBulkhead<K>>().map_err(|_| {
        RegistryError::KeyTypeMismatch {
            name: name.to_owned(),
            registered,
            requested: core::any::type_name::<K>(),
        }
    })
}

impl BulkheadRegistry {
    /// The keyed bulkhead `name`, created if it does not exist yet with the registry's
    /// default configuration for every key, no total and
    /// [`DEFAULT_MAX_KEYS`](crate::keyed::DEFAULT_MAX_KEYS). The same name always gives the
    /// same `Arc` (the first creation wins). Keyed bulkheads have a namespace of their own:
    /// a plain bulkhead and a keyed one may share a name.
    ///
    /// [`close_all`](Self::close_all) and [`wait_drained`](Self::wait_drained) reach keyed
    /// bulkheads too.
    ///
    /// # Errors
    ///
    /// [`RegistryError::KeyTypeMismatch`] when `name` is registered with another key type.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use bulkhead::{BulkheadConfig, BulkheadRegistry, RegistryError};
    ///
    /// let registry = BulkheadRegistry::new(BulkheadConfig::for_pool(5)); // 4 calls
    /// let tenants = registry.keyed::<u64>("tenants")?;
    /// assert!(Arc::ptr_eq(&tenants, &registry.keyed::<u64>("tenants")?));
    /// assert_eq!(tenants.config_for(&42).max_concurrent_calls(), 4);
    ///
    /// let err = registry.keyed::<String>("tenants").unwrap_err();
    /// assert!(matches!(err, RegistryError::KeyTypeMismatch { .. }));
    /// assert_eq!(
    ///     err.to_string(),
    ///     "the keyed bulkhead 'tenants' is registered with keys of type u64, not alloc::string::String"
    /// );
    /// # Ok::<(), RegistryError>(())
    /// ```
    pub fn keyed<K>(&self, name: &str) -> Result<Arc<KeyedBulkhead<K>>, RegistryError>
    where
        K: Eq + Hash + Clone + fmt::Display + Send + Sync + 'static,
    {
        self.keyed_with(name, KeyedBulkhead::builder(name).default_config(self.default_config()))
    }

    /// The keyed bulkhead `name`, built from `builder` if it does not exist yet (the
    /// builder's own name is replaced by `name`). An existing one is returned unchanged,
    /// whatever `builder` says (the first creation wins).
    ///
    /// # Errors
    ///
    /// [`RegistryError::KeyTypeMismatch`] when `name` is registered with another key type;
    /// [`RegistryError::Config`] when `name` is new and `builder` refuses its configuration.
    ///
    /// # Examples
    ///
    /// ```
    /// use bulkhead::{BulkheadConfig, BulkheadRegistry, RegistryError, keyed::KeyedBulkhead};
    ///
    /// let registry = BulkheadRegistry::default();
    /// let hosts = registry.keyed_with(
    ///     "hosts",
    ///     KeyedBulkhead::<String>::builder("ignored")
    ///         .default_config(BulkheadConfig::builder().max_concurrent_calls(2).build()?)
    ///         .total(BulkheadConfig::builder().max_concurrent_calls(10).build()?)
    ///         .max_keys(100),
    /// )?;
    /// assert_eq!(hosts.name(), "hosts");
    /// let permit = hosts.try_acquire(&"a.example".to_owned())?;
    /// assert_eq!(permit.key_bulkhead().name(), "hosts/a.example");
    ///
    /// // Found by name elsewhere in the service, whatever configuration is asked for.
    /// let again = registry.keyed_with("hosts", KeyedBulkhead::<String>::builder("hosts"))?;
    /// assert_eq!(again.max_keys(), 100);
    ///
    /// let bad = registry.keyed_with("other", KeyedBulkhead::<String>::builder("x").max_keys(0));
    /// assert!(matches!(bad, Err(RegistryError::Config(e)) if e.key() == "max_keys"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn keyed_with<K>(
        &self,
        name: &str,
        builder: KeyedBulkheadBuilder<K>,
    ) -> Result<Arc<KeyedBulkhead<K>>, RegistryError>
    where
        K: Eq + Hash + Clone + fmt::Display + Send + Sync + 'static,
    {
        if let Some(entry) = self.inner.read().keyed.get(name) {
            return downcast(name, entry);
        }
        // Built before the lock: building runs the keys' `Display` (the fallback key's
        // bulkhead is named after it), and a failed or unused build drops the builder's keys,
        // user code that never runs under our lock. A build that loses the race below is
        // dropped after the lock.
        let builder = builder.named(name).timer_unless_bound(self.timer.as_ref());
        let keyed = Arc::new(builder.build().map_err(RegistryError::Config)?);
        let mut inner = self.inner.write();
        // Another thread may have created it meanwhile: the first one wins.
        if let Some(entry) = inner.keyed.get(name) {
            let found = downcast(name, entry);
            drop(inner);
            drop(keyed);
            return found;
        }
        inner.keyed.insert(name.to_owned(), Arc::clone(&keyed) as Arc<dyn AnyKeyed>);
        drop(inner);
        Ok(keyed)
    }

    /// The keyed bulkhead `name`, if one is registered with key type `K`. Never creates
    /// one; `None` too when `name` has another key type.
    ///
    /// ```
    /// use bulkhead::BulkheadRegistry;
    /// let registry = BulkheadRegistry::default();
    /// assert!(registry.find_keyed::<u64>("tenants").is_none());
    /// registry.keyed::<u64>("tenants")?;
    /// assert_eq!(registry.find_keyed::<u64>("tenants").unwrap().name(), "tenants");
    /// assert!(registry.find_keyed::<u32>("tenants").is_none());
    /// # Ok::<(), bulkhead::RegistryError>(())
    /// ```
    pub fn find_keyed<K>(&self, name: &str) -> Option<Arc<KeyedBulkhead<K>>>
    where
        K: Send + Sync + 'static,
    {
        let inner = self.inner.read();
        downcast(name, inner.keyed.get(name)?).ok()
    }

    /// Removes the keyed bulkhead `name` from the registry; returns whether one was there.
    /// Holders of its `Arc` keep using it; the next [`keyed`](Self::keyed) call under that
    /// name creates a new one.
    ///
    /// ```
    /// use bulkhead::BulkheadRegistry;
    /// let registry = BulkheadRegistry::default();
    /// registry.keyed::<u64>("tenants")?;
    /// assert!(registry.remove_keyed("tenants"));
    /// assert!(!registry.remove_keyed("tenants"));
    /// assert!(registry.keyed_names().is_empty());
    /// # Ok::<(), bulkhead::RegistryError>(())
    /// ```
    pub fn remove_keyed(&self, name: &str) -> bool {
        // Dropped after the lock: if this was the last `Arc`, dropping it drops the keys and
        // the listeners (user code).
        let removed = self.inner.write().keyed.remove(name);
        removed.is_some()
    }

    /// The names of every registered keyed bulkhead, sorted.
    ///
    /// ```
    /// use bulkhead::BulkheadRegistry;
    /// let registry = BulkheadRegistry::default();
    /// registry.keyed::<u64>("tenants")?;
    /// registry.keyed::<String>("hosts")?;
    /// assert_eq!(registry.keyed_names(), ["hosts", "tenants"]);
    /// # Ok::<(), bulkhead::RegistryError>(())
    /// ```
    pub fn keyed_names(&self) -> Vec<String> {
        self.inner.read().keyed.keys().cloned().collect()
    }

    fn all_keyed(&self) -> Vec<Arc<dyn AnyKeyed>> {
        self.inner.read().keyed.values().cloned().collect()
    }

    /// How many keyed bulkheads `close_all` closed.
    pub(crate) fn close_all_keyed(&self) -> usize {
        self.all_keyed().iter().filter(|keyed| keyed.close()).count()
    }

    /// Whether every keyed bulkhead drains, each within what `left` says remains.
    pub(crate) fn wait_drained_keyed(&self, left: impl Fn() -> Duration) -> bool {
        self.all_keyed().iter().all(|keyed| keyed.wait_drained(left()))
    }
}
