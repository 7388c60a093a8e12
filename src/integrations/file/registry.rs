//! Building a registry from a configuration file.

use std::collections::BTreeMap;

use super::{ConfigFile, FileError};
use crate::engine::timer::Timer;
use crate::registry::{BulkheadRegistry, FileSource, DEFAULT_CONFIG};

/// Building a registry from a configuration file (feature `serde`).
impl BulkheadRegistry {
    /// Builds a registry from a Resilience4j-style `.yml`, `.yaml` or `.toml` file in one
    /// call: `configs.default` becomes the default configuration, the other `configs` the
    /// named ones, `tags` the registry tags, and every instance is created with its
    /// effective configuration. See [`crate::integrations::file`] for what is read.
    ///
    /// The style guide's rules are not applied here; run `bulkhead-check` or
    /// [`ConfigFile::check`](ConfigFile::check) in CI for those.
    ///
    /// Nothing falls back to the defaults in silence: a file without a
    /// `resilience4j.bulkhead` section is an error (see [`Loader`](super::Loader) to
    /// allow one), and a name asked for that the file does not define is reported
    /// ([`undefined_names`](Self::undefined_names)) or, in a [strict](Self::strict)
    /// registry, refused by [`try_bulkhead`](Self::try_bulkhead).
    ///
    /// # Errors
    ///
    /// [`FileError`](FileError), naming the file: unreadable file, unknown
    /// extension, syntax error, a missing (or misspelt) `resilience4j.bulkhead` section, or
    /// every settings error found.
    ///
    /// ```no_run
    /// let registry = bulkhead::BulkheadRegistry::from_file("application.yml")?;
    /// let bank = registry.find("bank").expect("configured in application.yml");
    /// let balance = bank.call(|| "42.00 EUR");
    /// # drop(balance);
    /// # Ok::<(), bulkhead::file::FileError>(())
    /// ```
    pub fn from_file(path: impl AsRef<std::path::Path>) -> Result<BulkheadRegistry, FileError> {
        ConfigFile::from_path(path).map(|f| BulkheadRegistry::from_config_file(&f))
    }

    /// Builds a registry from YAML text; see [`from_file`](Self::from_file).
    ///
    /// # Errors
    ///
    /// [`FileError::Syntax`](FileError::Syntax) or
    /// [`FileError::Invalid`](FileError::Invalid).
    ///
    /// ```
    /// use bulkhead::BulkheadRegistry;
    /// let registry = BulkheadRegistry::from_yaml_str(
    ///     "
    /// resilience4j:
    ///   bulkhead:
    ///     tags: { service: payments }
    ///     configs:
    ///       default: { max-concurrent-calls: 16, max-wait-duration: 100ms }
    ///       reports: { max-concurrent-calls: 2 }
    ///     instances:
    ///       bank: {}
    ///       statements: { base-config: reports }
    /// ",
    /// )?;
    /// assert_eq!(registry.names(), ["bank", "statements"]);
    /// assert_eq!(registry.find("bank").unwrap().config().max_concurrent_calls(), 16);
    /// assert_eq!(registry.find("statements").unwrap().config().max_concurrent_calls(), 2);
    /// assert_eq!(registry.bulkhead("new").config().max_concurrent_calls(), 16); // default
    /// assert_eq!(registry.config_names(), ["default", "reports"]);
    /// assert_eq!(registry.tags("bank").unwrap()["service"], "payments");
    /// # Ok::<(), bulkhead::file::FileError>(())
    /// ```
    pub fn from_yaml_str(text: &str) -> Result<BulkheadRegistry, FileError> {
        ConfigFile::from_yaml_str(text).map(|f| BulkheadRegistry::from_config_file(&f))
    }

    /// Builds a registry from TOML text; see [`from_file`](Self::from_file).
    ///
    /// # Errors
    ///
    /// [`FileError::Syntax`](FileError::Syntax) or
    /// [`FileError::Invalid`](FileError::Invalid).
    ///
    /// ```
    /// let registry = bulkhead::BulkheadRegistry::from_toml_str(
    ///     "[resilience4j.bulkhead.instances.bank]\nmax-concurrent-calls = 16",
    /// )?;
    /// assert_eq!(registry.find("bank").unwrap().config().max_concurrent_calls(), 16);
    /// # Ok::<(), bulkhead::file::FileError>(())
    /// ```
    pub fn from_toml_str(text: &str) -> Result<BulkheadRegistry, FileError> {
        ConfigFile::from_toml_str(text).map(|f| BulkheadRegistry::from_config_file(&f))
    }

    /// Builds a registry from a file already loaded; see [`from_file`](Self::from_file).
    /// An instance with an `adaptive:` block gets that adaptive limit attached
    /// ([`Bulkhead::adaptive_limit`](crate::Bulkhead::adaptive_limit); the block:
    /// [`AdaptiveSettings`]).
    ///
    /// [`AdaptiveSettings`]: super::AdaptiveSettings
    ///
    /// ```
    /// use bulkhead::{file::ConfigFile, BulkheadRegistry};
    /// let file = ConfigFile::from_yaml_str("resilience4j.bulkhead.instances.bank.max-concurrent-calls: 16")?;
    /// let registry = BulkheadRegistry::from_config_file(&file);
    /// assert_eq!(registry.find("bank").unwrap().config().max_concurrent_calls(), 16);
    /// # Ok::<(), bulkhead::file::FileError>(())
    /// ```
    pub fn from_config_file(file: &ConfigFile) -> BulkheadRegistry {
        BulkheadRegistry::from_config_file_bound(file, None)
    }

    /// [`from_config_file`](Self::from_config_file), every bulkhead the registry creates
    /// (the file's instances first) bound to `timer`, a [`Timer`] the embedder drives: as
    /// [`BulkheadRegistryBuilder::timer`](crate::registry::BulkheadRegistryBuilder::timer)
    /// for a registry built in code.
    ///
    /// ```
    /// use std::future::Future;
    /// use bulkhead::{file::ConfigFile, timer::Timer, BulkheadRegistry};
    /// let file = ConfigFile::from_yaml_str(
    ///     "resilience4j.bulkhead.instances.bank: { max-concurrent-calls: 1, max-wait-duration: 5ms }",
    /// )?;
    /// let timer = Timer::new(|_at| { /* wake the runtime's timer wheel */ });
    /// let registry = BulkheadRegistry::from_config_file_with_timer(&file, &timer);
    /// let bank = registry.find("bank").unwrap();
    /// let _held = bank.try_acquire()?;
    /// // The bounded wait below is kept by `timer`, not by the process's timer thread.
    /// let mut wait = std::pin::pin!(bank.acquire_async());
    /// let waker = std::task::Waker::noop();
    /// assert!(wait.as_mut().poll(&mut std::task::Context::from_waker(waker)).is_pending());
    /// assert!(timer.next_deadline().is_some());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// [`Timer`]: crate::timer::Timer
    pub fn from_config_file_with_timer(file: &ConfigFile, timer: &Timer) -> BulkheadRegistry {
        BulkheadRegistry::from_config_file_bound(file, Some(timer.clone()))
    }

    fn from_config_file_bound(file: &ConfigFile, timer: Option<Timer>) -> BulkheadRegistry {
        let mut registry = BulkheadRegistry::new(file.default_config());
        registry.timer = timer;
        registry.registry_tags = file.tags().clone();
        registry.source = Some(FileSource {
            label: file
                .path()
                .map_or_else(|| "the configuration text".to_owned(), |p| p.display().to_string()),
            defined: file.instances().iter().map(|i| i.name().to_owned()).collect(),
            strict: false,
        });
        {
            let mut inner = registry.inner.write();
            for config in file.configs().iter().filter(|c| c.name() != DEFAULT_CONFIG) {
                inner.configs.insert(config.name().to_owned(), config.config().clone());
            }
        }
        for instance in file.instances() {
            let bulkhead = registry.get_or_create(instance.name(), false, || {
                (registry.new_bulkhead(instance.name(), instance.config().clone()), BTreeMap::new())
            });
            if let Some(settings) = instance.adaptive() {
                // A fresh bulkhead has no controller yet, and the settings were checked
                // against this very configuration when the file was read.
                settings.attach(&bulkhead).expect("adaptive settings checked when read");
            }
        }
        registry
    }
}
