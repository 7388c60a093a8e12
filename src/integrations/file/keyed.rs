//! Per-key configurations of a keyed bulkhead from a config file.

use core::fmt;
use core::hash::{BuildHasher, Hash};

use super::ConfigFile;
use crate::bulkhead::config::ConfigError;
use crate::keyed::KeyedBulkheadBuilder;

impl<K, S> KeyedBulkheadBuilder<K, S>
where
    K: Eq + Hash + Clone + fmt::Display,
    S: BuildHasher,
{
    /// Per-key configuration from a config file ([`ConfigFile`],
    /// feature `serde`): the default from the instance named like this keyed bulkhead (or
    /// the file's `configs.default` when there is no such instance), and an override for each
    /// instance named `"<name>/<key>"`, the key parsed with `FromStr`. Everything the file
    /// layout allows applies: `base-config` chains, relaxed binding, TOML, and our own keys
    /// (`queue-order`, `queue-target`, `queue-interval`, `sheddable-headroom`), per key.
    ///
    /// `guaranteed-share` (ours too) gives the keys guaranteed shares of the total: on the
    /// keyed bulkhead's own instance, every key's default
    /// ([`guaranteed_share`](Self::guaranteed_share)); on `"<name>/<key>"`, that key's
    /// ([`key_guaranteed_share`](Self::key_guaranteed_share)). The total and `max_keys` are
    /// the builder's, so the shares are checked against them by [`build`](Self::build): a
    /// sum above the total is a [`ConfigError`] at key `guaranteed_share` naming every key's
    /// share and the default. A value that is not a whole number up to `u32::MAX` is an
    /// error of the file itself, naming its path and the value.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the instance's path and the key, for a key that does not
    /// parse as `K`.
    ///
    /// ```
    /// use bulkhead::{file::ConfigFile, keyed::KeyedBulkhead, BulkheadConfig};
    /// let file = ConfigFile::from_yaml_str("
    /// resilience4j.bulkhead:
    ///   configs:
    ///     gold: { max-concurrent-calls: 8 }
    ///   instances:
    ///     tenants: { max-concurrent-calls: 2, max-wait-duration: 0 }
    ///     tenants/42: { base-config: gold }
    ///     tenants/7: { max-concurrent-calls: 1 }
    /// ")?;
    /// let tenants = KeyedBulkhead::<u64>::builder("tenants").configs_from_file(&file)?.build()?;
    /// assert_eq!(tenants.config_for(&1).max_concurrent_calls(), 2);
    /// assert_eq!(tenants.config_for(&42).max_concurrent_calls(), 8);
    /// assert_eq!(tenants.config_for(&7).max_concurrent_calls(), 1);
    ///
    /// let bad = ConfigFile::from_yaml_str("resilience4j.bulkhead.instances.tenants/x: {}")?;
    /// let err = KeyedBulkhead::<u64>::builder("tenants").configs_from_file(&bad).unwrap_err();
    /// assert_eq!(err.key(), "resilience4j.bulkhead.instances.tenants/x");
    /// assert_eq!(err.value(), "x");
    ///
    /// // Guaranteed shares: 1 slot for every key by default, 4 for key 42.
    /// let file = ConfigFile::from_yaml_str("
    /// resilience4j.bulkhead.instances:
    ///   tenants: { max-concurrent-calls: 8, guaranteed-share: 1 }
    ///   tenants/42: { guaranteed-share: 4 }
    /// ")?;
    /// let limit = BulkheadConfig::builder().max_concurrent_calls(8).build()?;
    /// let tenants = KeyedBulkhead::<u64>::builder("tenants")
    ///     .configs_from_file(&file)?
    ///     .total(limit)
    ///     .max_keys(4)
    ///     .build()?;
    /// assert_eq!((tenants.guaranteed_share_of(&42), tenants.guaranteed_share_of(&1)), (4, 1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn configs_from_file(mut self, file: &ConfigFile) -> Result<Self, ConfigError>
    where
        K: core::str::FromStr,
    {
        self.default = match file.instance(&self.name) {
            Some(instance) => {
                if let Some(slots) = instance.guaranteed_share() {
                    self = self.guaranteed_share(slots);
                }
                instance.config().clone()
            }
            None => file.default_config(),
        };
        let prefix = format!("{}/", self.name);
        for instance in file.instances() {
            if let Some(text) = instance.name().strip_prefix(&prefix) {
                let key = text.parse::<K>().map_err(|_| {
                    ConfigError::new(instance.path(), text, "is not a valid key for this bulkhead")
                })?;
                if let Some(slots) = instance.guaranteed_share() {
                    self = self.key_guaranteed_share(key.clone(), slots);
                }
                self.overrides.insert(key, instance.config().clone());
            }
        }
        Ok(self)
    }
}
