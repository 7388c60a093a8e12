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
    /// # Errors
    ///
    /// A [`ConfigError`] naming the instance's path and the key, for a key that does not
    /// parse as `K`.
    ///
    /// ```
    /// use bulkhead::{file::ConfigFile, keyed::KeyedBulkhead};
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
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn configs_from_file(mut self, file: &ConfigFile) -> Result<Self, ConfigError>
    where
        K: core::str::FromStr,
    {
        self.default = match file.instance(&self.name) {
            Some(instance) => instance.config().clone(),
            None => file.default_config(),
        };
        let prefix = format!("{}/", self.name);
        for instance in file.instances() {
            if let Some(text) = instance.name().strip_prefix(&prefix) {
                let key = text.parse::<K>().map_err(|_| {
                    ConfigError::new(instance.path(), text, "is not a valid key for this bulkhead")
                })?;
                self.overrides.insert(key, instance.config().clone());
            }
        }
        Ok(self)
    }
}
