//! A named set of bulkheads and configurations, as Resilience4j's `BulkheadRegistry` is.

pub(crate) mod global;
pub(crate) mod keyed;

use core::fmt;
use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::RwLock;

use crate::bulkhead::config::{BulkheadConfig, ConfigError};
use crate::bulkhead::Bulkhead;
use crate::engine::timer::Timer;

/// The name of the registry's default configuration. It is reserved: it can be read but
/// neither overwritten nor removed.
pub(crate) const DEFAULT_CONFIG: &str = "default";

/// Holds a service's bulkheads by name, with a default configuration, named configurations
/// and tags, so every part of the service that calls one downstream shares one limit.
///
/// Three ways in, and the keyed namespace with the same shape:
///
/// | | plain | keyed |
/// |---|---|---|
/// | get or create with the registry's configuration | [`bulkhead`](Self::bulkhead) | [`keyed`](Self::keyed) |
/// | get or create as specified | [`bulkhead_with`](Self::bulkhead_with) ([`BulkheadSpec`]: a config or a config's name, tags, an adaptive limit) | [`keyed_with`](Self::keyed_with) (a keyed builder) |
/// | find, never create | [`find`](Self::find) | [`find_keyed`](Self::find_keyed) |
///
/// plus [`try_bulkhead`](Self::try_bulkhead), `bulkhead` for a [strict](Self::strict)
/// registry that refuses names its file does not define. An adaptive bulkhead is an
/// ordinary entry: the limit is attached to it.
///
/// - The same name always gives the same `Arc<Bulkhead>`. **The first creation wins**:
///   asking again under the same name with another spec returns the existing bulkhead
///   unchanged. Use [`Bulkhead::change_config`] to reconfigure it, or
///   [`replace`](Self::replace) to swap it.
/// - Named configurations are added with [`add_config`](Self::add_config). The name
///   `"default"` is reserved for the registry's default configuration.
/// - Tags (for metrics labels, for instance): the registry's own tags, merged with each
///   bulkhead's tags, the bulkhead's winning on a clash ([`tags`](Self::tags)).
/// - With the `serde` feature, `from_file` builds the whole registry from
///   a Resilience4j-style `application.yml` or `.toml` in one call.
///
/// The registry is `Send + Sync`; share it in an `Arc` or a `static`. Lookups take a
/// read lock, creation a write lock; acquiring permits never touches the registry.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use bulkhead::{BulkheadConfig, BulkheadRegistry, BulkheadSpec};
///
/// let registry = BulkheadRegistry::builder()
///     .default_config(BulkheadConfig::for_pool(20))
///     .add_config("reports", BulkheadConfig::builder().max_concurrent_calls(2).build()?)
///     .tag("service", "payments")
///     .build()?;
///
/// let bank = registry.bulkhead("bank"); // created with the default config: 16 calls
/// assert!(Arc::ptr_eq(&bank, &registry.bulkhead("bank"))); // same name, same bulkhead
/// assert_eq!(bank.config().max_concurrent_calls(), 16);
///
/// let reports = registry.bulkhead_with("reports-api", BulkheadSpec::config_named("reports"))?;
/// assert_eq!(reports.config().max_concurrent_calls(), 2);
///
/// let names: Vec<String> = registry.all().iter().map(|b| b.name().to_owned()).collect();
/// assert_eq!(names, ["bank", "reports-api"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct BulkheadRegistry {
    pub(crate) default_config: BulkheadConfig,
    pub(crate) registry_tags: BTreeMap<String, String>,
    pub(crate) inner: RwLock<Inner>,
    /// Set when the registry was built from a configuration file.
    pub(crate) source: Option<FileSource>,
    /// The timer every bulkhead the registry creates is bound to (`None`: the process's).
    pub(crate) timer: Option<Timer>,
}

/// The file a registry was built from: which names it defines, and whether asking for
/// another one is an error ([`BulkheadRegistry::strict`]).
#[derive(Debug)]
pub(crate) struct FileSource {
    /// The file's path as given, or "the configuration text".
    pub(crate) label: String,
    pub(crate) defined: std::collections::BTreeSet<String>,
    pub(crate) strict: bool,
}

#[derive(Default)]
pub(crate) struct Inner {
    /// Named configurations, without "default".
    pub(crate) configs: BTreeMap<String, BulkheadConfig>,
    entries: BTreeMap<String, Entry>,
    /// Keyed bulkheads, by name (a namespace of their own): src/registry/keyed.rs.
    pub(crate) keyed: BTreeMap<String, Arc<dyn self::keyed::AnyKeyed>>,
    /// Names a file-backed registry handed out with the default configuration although
    /// its file does not define them, in the order asked.
    undefined: Vec<String>,
}

struct Entry {
    bulkhead: Arc<Bulkhead>,
    tags: BTreeMap<String, String>,
}

/// How [`BulkheadRegistry::bulkhead_with`] creates a bulkhead that does not exist yet: its
/// configuration (given, or the name of one of the registry's), its own tags, and an
/// adaptive limit to attach. A [`BulkheadConfig`] converts into a spec of just that
/// configuration.
///
/// ```
/// use bulkhead::adaptive::{AdaptiveLimit, Vegas};
/// use bulkhead::{BulkheadConfig, BulkheadRegistry, BulkheadSpec};
/// let registry = BulkheadRegistry::default();
/// let spec = BulkheadSpec::config(BulkheadConfig::for_pool(10))
///     .tags([("tier", "1")])
///     .adaptive_limit(AdaptiveLimit::new(Vegas::default()));
/// let bank = registry.bulkhead_with("bank", spec)?;
/// assert_eq!(bank.adaptive_limit().unwrap().limit(), 8);
/// # Ok::<(), bulkhead::RegistryError>(())
/// ```
#[derive(Debug)]
#[must_use = "a spec does nothing until given to `BulkheadRegistry::bulkhead_with`"]
pub struct BulkheadSpec {
    config: SpecConfig,
    tags: BTreeMap<String, String>,
    adaptive: Option<crate::adaptive::AdaptiveLimit>,
}

#[derive(Debug)]
enum SpecConfig {
    Given(BulkheadConfig),
    Named(String),
}

impl BulkheadSpec {
    /// A bulkhead with `config`.
    pub fn config(config: BulkheadConfig) -> Self {
        BulkheadSpec { config: SpecConfig::Given(config), tags: BTreeMap::new(), adaptive: None }
    }

    /// A bulkhead with the registry's configuration named `name`
    /// ([`BulkheadRegistry::add_config`], or a file's `configs`).
    pub fn config_named(name: impl Into<String>) -> Self {
        BulkheadSpec {
            config: SpecConfig::Named(name.into()),
            tags: BTreeMap::new(),
            adaptive: None,
        }
    }

    /// The bulkhead's own tags, over the registry's (a bulkhead's tag wins).
    pub fn tags<K: Into<String>, V: Into<String>>(
        mut self,
        tags: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        extend_tags(&mut self.tags, tags);
        self
    }

    /// An adaptive limit attached at creation
    /// ([`Bulkhead::set_adaptive_limit`](crate::Bulkhead::set_adaptive_limit)).
    pub fn adaptive_limit(mut self, limit: crate::adaptive::AdaptiveLimit) -> Self {
        self.adaptive = Some(limit);
        self
    }
}

impl From<BulkheadConfig> for BulkheadSpec {
    fn from(config: BulkheadConfig) -> Self {
        BulkheadSpec::config(config)
    }
}

/// Adds `tags` to `into` (a later value for a key wins): the registry builder's tags and a
/// [`BulkheadSpec`]'s.
fn extend_tags<K: Into<String>, V: Into<String>>(
    into: &mut BTreeMap<String, String>,
    tags: impl IntoIterator<Item = (K, V)>,
) {
    into.extend(tags.into_iter().map(|(k, v)| (k.into(), v.into())));
}

/// A registry operation was refused.
///
/// # Examples
///
/// ```
/// use bulkhead::{BulkheadConfig, BulkheadRegistry, RegistryError};
///
/// let registry = BulkheadRegistry::default();
/// let err = registry.add_config("default", BulkheadConfig::for_pool(10)).unwrap_err();
/// assert_eq!(err, RegistryError::ReservedConfigName);
/// let err = registry.bulkhead_with("bank", bulkhead::BulkheadSpec::config_named("missing")).unwrap_err();
/// assert_eq!(err.to_string(), "no bulkhead configuration named 'missing'");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RegistryError {
    /// `"default"` names the registry's default configuration: it cannot be overwritten or
    /// removed. Set it with [`BulkheadRegistry::new`] or the builder's `default_config`.
    ReservedConfigName,
    /// No configuration is registered under this name.
    UnknownConfig(String),
    /// The keyed bulkhead `name` is registered with another key type
    /// ([`BulkheadRegistry::keyed`]).
    KeyTypeMismatch {
        /// The keyed bulkhead's name.
        name: String,
        /// The key type it is registered with.
        registered: &'static str,
        /// The key type asked for.
        requested: &'static str,
    },
    /// A keyed bulkhead's builder, or a spec's adaptive limit, refused its configuration
    /// ([`BulkheadRegistry::keyed_with`], [`BulkheadRegistry::bulkhead_with`]).
    Config(ConfigError),
    /// A [strict](BulkheadRegistry::strict) registry built from a configuration file was
    /// asked ([`BulkheadRegistry::try_bulkhead`]) for a bulkhead its file does not define.
    NotInFile {
        /// The name asked for.
        name: String,
        /// The file (its path as given), or "the configuration text".
        file: String,
    },
}

impl fmt::Display for RegistryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegistryError::ReservedConfigName => f.write_str(
                "the configuration name 'default' is reserved for the registry's default \
                 configuration: it cannot be overwritten or removed",
            ),
            RegistryError::UnknownConfig(name) => {
                write!(f, "no bulkhead configuration named '{name}'")
            }
            RegistryError::KeyTypeMismatch { name, registered, requested } => write!(
                f,
                "the keyed bulkhead '{name}' is registered with keys of type {registered}, \
                 not {requested}"
            ),
            RegistryError::Config(err) => write!(f, "{err}"),
            RegistryError::NotInFile { name, file } => write!(
                f,
                "no bulkhead '{name}' in {file} (resilience4j.bulkhead.instances.{name}): the \
                 registry is strict, so it does not create one with the default configuration"
            ),
        }
    }
}

impl std::error::Error for RegistryError {}

impl Default for BulkheadRegistry {
    /// A registry whose default configuration is [`BulkheadConfig::default`].
    ///
    /// ```
    /// use bulkhead::{BulkheadConfig, BulkheadRegistry};
    /// let registry = BulkheadRegistry::default();
    /// assert_eq!(registry.default_config(), BulkheadConfig::default());
    /// ```
    fn default() -> Self {
        BulkheadRegistry::new(BulkheadConfig::default())
    }
}

impl BulkheadRegistry {
    /// A registry with `default_config`, no named configurations, no tags.
    ///
    /// # Examples
    ///
    /// ```
    /// use bulkhead::{BulkheadConfig, BulkheadRegistry};
    /// let registry = BulkheadRegistry::new(BulkheadConfig::for_pool(20));
    /// assert_eq!(registry.bulkhead("bank").config(), BulkheadConfig::for_pool(20));
    /// ```
    pub fn new(default_config: BulkheadConfig) -> Self {
        BulkheadRegistry {
            default_config,
            registry_tags: BTreeMap::new(),
            inner: RwLock::new(Inner::default()),
            source: None,
            timer: None,
        }
    }

    /// A builder for a registry with a default configuration, named configurations and
    /// tags.
    ///
    /// # Examples
    ///
    /// ```
    /// use bulkhead::{BulkheadConfig, BulkheadRegistry};
    /// let registry = BulkheadRegistry::builder()
    ///     .add_config("bank", BulkheadConfig::for_pool(20))
    ///     .build()?;
    /// assert_eq!(registry.config("bank"), Some(BulkheadConfig::for_pool(20)));
    /// # Ok::<(), bulkhead::RegistryError>(())
    /// ```
    pub fn builder() -> BulkheadRegistryBuilder {
        BulkheadRegistryBuilder {
            default_config: BulkheadConfig::default(),
            configs: Vec::new(),
            tags: BTreeMap::new(),
            timer: None,
        }
    }

    /// The default configuration: what [`bulkhead`](Self::bulkhead) creates with.
    ///
    /// ```
    /// # use bulkhead::{BulkheadConfig, BulkheadRegistry};
    /// assert_eq!(BulkheadRegistry::default().default_config(), BulkheadConfig::default());
    /// ```
    pub fn default_config(&self) -> BulkheadConfig {
        self.default_config.clone()
    }

    /// Adds or overwrites the configuration `name`, returning the one it replaced.
    /// Bulkheads already created with the old one keep it.
    ///
    /// # Errors
    ///
    /// [`RegistryError::ReservedConfigName`] for `"default"`.
    ///
    /// # Examples
    ///
    /// ```
    /// use bulkhead::{BulkheadConfig, BulkheadRegistry};
    /// let registry = BulkheadRegistry::default();
    /// assert_eq!(registry.add_config("bank", BulkheadConfig::for_pool(20))?, None);
    /// let old = registry.add_config("bank", BulkheadConfig::for_pool(10))?;
    /// assert_eq!(old, Some(BulkheadConfig::for_pool(20)));
    /// assert!(registry.add_config("default", BulkheadConfig::for_pool(10)).is_err());
    /// # Ok::<(), bulkhead::RegistryError>(())
    /// ```
    pub fn add_config(
        &self,
        name: impl Into<String>,
        config: BulkheadConfig,
    ) -> Result<Option<BulkheadConfig>, RegistryError> {
        let name = name.into();
        if name == DEFAULT_CONFIG {
            return Err(RegistryError::ReservedConfigName);
        }
        Ok(self.inner.write().configs.insert(name, config))
    }

    /// Removes the configuration `name`, returning it (`None` if there was none). Bulkheads
    /// created with it keep it.
    ///
    /// # Errors
    ///
    /// [`RegistryError::ReservedConfigName`] for `"default"`.
    ///
    /// # Examples
    ///
    /// ```
    /// use bulkhead::{BulkheadConfig, BulkheadRegistry, RegistryError};
    /// let registry = BulkheadRegistry::default();
    /// registry.add_config("bank", BulkheadConfig::for_pool(20))?;
    /// assert_eq!(registry.remove_config("bank")?, Some(BulkheadConfig::for_pool(20)));
    /// assert_eq!(registry.remove_config("bank")?, None);
    /// assert_eq!(registry.remove_config("default"), Err(RegistryError::ReservedConfigName));
    /// # Ok::<(), bulkhead::RegistryError>(())
    /// ```
    pub fn remove_config(&self, name: &str) -> Result<Option<BulkheadConfig>, RegistryError> {
        if name == DEFAULT_CONFIG {
            return Err(RegistryError::ReservedConfigName);
        }
        Ok(self.inner.write().configs.remove(name))
    }

    /// The configuration `name`; `"default"` gives the default configuration.
    ///
    /// ```
    /// # use bulkhead::{BulkheadConfig, BulkheadRegistry};
    /// let registry = BulkheadRegistry::new(BulkheadConfig::for_pool(20));
    /// assert_eq!(registry.config("default"), Some(BulkheadConfig::for_pool(20)));
    /// assert_eq!(registry.config("other"), None);
    /// ```
    pub fn config(&self, name: &str) -> Option<BulkheadConfig> {
        if name == DEFAULT_CONFIG {
            return Some(self.default_config());
        }
        self.inner.read().configs.get(name).cloned()
    }

    /// The names of all configurations, `"default"` included, sorted.
    ///
    /// ```
    /// # use bulkhead::{BulkheadConfig, BulkheadRegistry};
    /// let registry = BulkheadRegistry::default();
    /// registry.add_config("slow", BulkheadConfig::for_pool(4))?;
    /// assert_eq!(registry.config_names(), ["default", "slow"]);
    /// # Ok::<(), bulkhead::RegistryError>(())
    /// ```
    pub fn config_names(&self) -> Vec<String> {
        let inner = self.inner.read();
        let mut names: Vec<String> = inner.configs.keys().cloned().collect();
        names.push(DEFAULT_CONFIG.to_owned());
        names.sort();
        names
    }

    /// The bulkhead `name`, created with the default configuration if it does not exist yet.
    /// The same name always gives the same bulkhead (the first creation wins).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use bulkhead::BulkheadRegistry;
    /// let registry = BulkheadRegistry::default();
    /// let a = registry.bulkhead("bank");
    /// let b = registry.bulkhead("bank");
    /// assert!(Arc::ptr_eq(&a, &b));
    /// assert_eq!(a.config().max_concurrent_calls(), 25);
    /// ```
    ///
    /// A registry built from a configuration file (`from_file`, feature `serde`) that is
    /// asked for a name its file does not define still creates it with the default
    /// configuration, and says so: the name is listed by
    /// [`undefined_names`](Self::undefined_names) and, with the `tracing` feature, logged
    /// at WARN (target `bulkhead`). To make it an error, use a [strict](Self::strict)
    /// registry and [`try_bulkhead`](Self::try_bulkhead).
    pub fn bulkhead(&self, name: &str) -> Arc<Bulkhead> {
        self.get_or_create(name, true, || {
            (self.new_bulkhead(name, self.default_config()), BTreeMap::new())
        })
    }

    /// The bulkhead `name`, as [`bulkhead`](Self::bulkhead) gives it, except that a
    /// [strict](Self::strict) registry built from a file refuses a name its file does not
    /// define (Spring's strict binding). Every other registry behaves as `bulkhead`.
    ///
    /// # Errors
    ///
    /// [`RegistryError::NotInFile`], naming the bulkhead and the file.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[cfg(feature = "serde")] {
    /// use bulkhead::{BulkheadRegistry, RegistryError};
    /// let registry = BulkheadRegistry::from_yaml_str("resilience4j.bulkhead.instances.bank: {}")?.strict();
    /// assert_eq!(registry.try_bulkhead("bank")?.name(), "bank");
    /// let err = registry.try_bulkhead("bnak").unwrap_err();
    /// assert!(matches!(&err, RegistryError::NotInFile { name, .. } if name == "bnak"));
    /// assert!(registry.find("bnak").is_none()); // nothing was created
    /// # }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_bulkhead(&self, name: &str) -> Result<Arc<Bulkhead>, RegistryError> {
        if let Some(bulkhead) = self.find(name) {
            return Ok(bulkhead);
        }
        match &self.source {
            Some(source) if source.strict && !source.defined.contains(name) => {
                Err(RegistryError::NotInFile { name: name.to_owned(), file: source.label.clone() })
            }
            _ => Ok(self.bulkhead(name)),
        }
    }

    /// Makes a registry built from a configuration file strict:
    /// [`try_bulkhead`](Self::try_bulkhead) refuses a name the file does not define, instead of creating it
    /// with the default configuration. [`bulkhead`](Self::bulkhead) cannot fail: it still
    /// creates one, and reports it ([`undefined_names`](Self::undefined_names), `tracing`).
    /// No effect on a registry not built from a file.
    ///
    /// ```
    /// # #[cfg(feature = "serde")] {
    /// let registry = bulkhead::BulkheadRegistry::from_yaml_str("resilience4j.bulkhead.instances.bank: {}")?
    ///     .strict();
    /// assert!(registry.try_bulkhead("reports").is_err());
    /// # }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn strict(mut self) -> Self {
        if let Some(source) = &mut self.source {
            source.strict = true;
        }
        self
    }

    /// The names a registry built from a configuration file handed out with the default
    /// configuration although the file does not define them, in the order first asked.
    /// Empty for a registry not built from a file. A service can check it after start-up
    /// (or in a test) to catch a name that does not match its file.
    ///
    /// ```
    /// # #[cfg(feature = "serde")] {
    /// let registry = bulkhead::BulkheadRegistry::from_yaml_str("resilience4j.bulkhead.instances.bank: {}")?;
    /// registry.bulkhead("bank");
    /// registry.bulkhead("bnak"); // a typo in the code: 25 calls, no wait
    /// assert_eq!(registry.undefined_names(), ["bnak"]);
    /// # }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn undefined_names(&self) -> Vec<String> {
        self.inner.read().undefined.clone()
    }

    /// Records (and logs) that `name`, which the registry's file does not define, is being
    /// created with the default configuration: `Some` if so. Called on the creation path
    /// only (under the write lock), so once per name.
    fn note_undefined(&self, name: &str) -> Option<()> {
        let source = self.source.as_ref()?;
        if source.defined.contains(name) {
            return None;
        }
        #[cfg(not(feature = "tracing"))]
        let _ = source;
        #[cfg(feature = "tracing")]
        tracing::warn!(
            target: "bulkhead",
            bulkhead = name,
            file = source.label.as_str(),
            "bulkhead '{name}' is not defined in {}: created with the default configuration",
            source.label
        );
        Some(())
    }

    /// The bulkhead `name`, created as `spec` says if it does not exist yet: with its
    /// configuration (given, or named among the registry's configurations), its own tags,
    /// and an adaptive limit attached. An existing bulkhead is returned unchanged, whatever
    /// the spec (the first creation wins), except that a named configuration must exist.
    ///
    /// The keyed namespace has the same shape: [`keyed_with`](Self::keyed_with) takes a
    /// keyed bulkhead's builder.
    ///
    /// # Errors
    ///
    /// [`RegistryError::UnknownConfig`] when the spec names a configuration the registry
    /// does not have (checked even when the bulkhead exists, so a typo never passes
    /// silently); [`RegistryError::Config`] when its adaptive limit does not fit the
    /// configuration (nothing is registered then).
    ///
    /// # Examples
    ///
    /// ```
    /// use bulkhead::adaptive::{AdaptiveLimit, Aimd};
    /// use bulkhead::{BulkheadConfig, BulkheadRegistry, BulkheadSpec, RegistryError};
    ///
    /// let registry = BulkheadRegistry::builder().tag("team", "core").build()?;
    /// let bank = registry.bulkhead_with("bank", BulkheadConfig::for_pool(20))?;
    /// assert_eq!(bank.config().max_concurrent_calls(), 16);
    /// // The first creation wins: the same name with another config is the same bulkhead.
    /// let again = registry.bulkhead_with("bank", BulkheadConfig::for_pool(100))?;
    /// assert!(std::sync::Arc::ptr_eq(&bank, &again));
    ///
    /// registry.add_config("pool-20", BulkheadConfig::for_pool(20))?;
    /// let shop = registry.bulkhead_with(
    ///     "shop",
    ///     BulkheadSpec::config_named("pool-20")
    ///         .tags([("tier", "0")])
    ///         .adaptive_limit(AdaptiveLimit::new(Aimd::default())),
    /// )?;
    /// assert_eq!(shop.adaptive_limit().unwrap().max_limit(), 16);
    /// assert_eq!(registry.tags("shop").unwrap()["tier"], "0");
    /// assert_eq!(registry.tags("shop").unwrap()["team"], "core");
    /// assert_eq!(
    ///     registry.bulkhead_with("shop", BulkheadSpec::config_named("pool-2O")).unwrap_err(),
    ///     RegistryError::UnknownConfig("pool-2O".into())
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn bulkhead_with(
        &self,
        name: &str,
        spec: impl Into<BulkheadSpec>,
    ) -> Result<Arc<Bulkhead>, RegistryError> {
        let spec = spec.into();
        let config = match spec.config {
            SpecConfig::Given(config) => config,
            SpecConfig::Named(config_name) => {
                self.config(&config_name).ok_or(RegistryError::UnknownConfig(config_name))?
            }
        };
        if let Some(found) = self.find(name) {
            return Ok(found);
        }
        // The bulkhead and its limit are made before any lock of ours: attaching an adaptive
        // limit runs no user code, but its error must leave nothing registered.
        let bulkhead = self.new_bulkhead(name, config);
        if let Some(limit) = spec.adaptive {
            bulkhead.set_adaptive_limit(limit).map_err(RegistryError::Config)?;
        }
        let tags = spec.tags;
        Ok(self.get_or_create(name, false, || (bulkhead, tags)))
    }

    /// A bulkhead as this registry creates it: bound to the registry's timer, if it has one.
    pub(crate) fn new_bulkhead(&self, name: &str, config: BulkheadConfig) -> Bulkhead {
        match &self.timer {
            Some(timer) => Bulkhead::with_timer(name, config, timer),
            None => Bulkhead::new(name, config),
        }
    }

    /// `with_default`: the caller gave no configuration (a file-backed registry reports a
    /// name its file does not define).
    pub(crate) fn get_or_create(
        &self,
        name: &str,
        with_default: bool,
        make: impl FnOnce() -> (Bulkhead, BTreeMap<String, String>),
    ) -> Arc<Bulkhead> {
        if let Some(entry) = self.inner.read().entries.get(name) {
            return Arc::clone(&entry.bulkhead);
        }
        // The caller's values (tags' conversions) run before the write lock, not under it.
        let (bulkhead, tags) = make();
        let bulkhead = Arc::new(bulkhead);
        let mut inner = self.inner.write();
        // Another thread may have created it between the two locks: the first one wins, and
        // ours (with the tags) is dropped after unlocking.
        if let Some(entry) = inner.entries.get(name) {
            let winner = Arc::clone(&entry.bulkhead);
            drop(inner);
            drop((bulkhead, tags));
            return winner;
        }
        let undefined = with_default
            && self.source.as_ref().is_some_and(|source| !source.defined.contains(name));
        if undefined {
            inner.undefined.push(name.to_owned());
        }
        inner.entries.insert(name.to_owned(), Entry { bulkhead: Arc::clone(&bulkhead), tags });
        drop(inner);
        // The warning (a `tracing` subscriber is foreign code) after unlocking.
        if undefined {
            let _ = self.note_undefined(name);
        }
        bulkhead
    }

    /// The bulkhead `name`, if it exists. Never creates one.
    ///
    /// ```
    /// # use bulkhead::BulkheadRegistry;
    /// let registry = BulkheadRegistry::default();
    /// assert!(registry.find("bank").is_none());
    /// registry.bulkhead("bank");
    /// assert_eq!(registry.find("bank").unwrap().name(), "bank");
    /// ```
    pub fn find(&self, name: &str) -> Option<Arc<Bulkhead>> {
        self.inner.read().entries.get(name).map(|e| Arc::clone(&e.bulkhead))
    }

    /// Removes the bulkhead `name` (and its tags) from the registry and returns it. Holders
    /// of the `Arc` keep using it; the next [`bulkhead`](Self::bulkhead) call under that name
    /// creates a new one.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use bulkhead::BulkheadRegistry;
    /// let registry = BulkheadRegistry::default();
    /// let old = registry.bulkhead("bank");
    /// assert!(Arc::ptr_eq(&registry.remove("bank").unwrap(), &old));
    /// assert!(registry.find("bank").is_none());
    /// assert!(registry.remove("bank").is_none());
    /// ```
    pub fn remove(&self, name: &str) -> Option<Arc<Bulkhead>> {
        // Removed under the lock, dropped after it: the entry may hold the last reference to
        // a bulkhead whose listeners are user code.
        let removed = self.inner.write().entries.remove(name);
        removed.map(|e| e.bulkhead)
    }

    /// Replaces the bulkhead registered as `name` with `bulkhead` and returns the old one.
    /// Like Resilience4j's `replace`, it does nothing and returns `None` when no bulkhead is
    /// registered under `name`. The entry's tags are kept.
    ///
    /// # Panics
    ///
    /// When `bulkhead.name()` is not `name`: the registry's names and the bulkheads' own
    /// names (in errors, events and metrics) must agree.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use bulkhead::{Bulkhead, BulkheadConfig, BulkheadRegistry};
    /// let registry = BulkheadRegistry::default();
    /// let old = registry.bulkhead("bank");
    /// let new = Arc::new(Bulkhead::new("bank", BulkheadConfig::for_pool(20)));
    /// let replaced = registry.replace("bank", Arc::clone(&new)).unwrap();
    /// assert!(Arc::ptr_eq(&replaced, &old));
    /// assert!(Arc::ptr_eq(&registry.bulkhead("bank"), &new));
    /// assert!(registry.replace("other", Arc::new(Bulkhead::new("other", BulkheadConfig::default()))).is_none());
    /// ```
    #[track_caller]
    pub fn replace(&self, name: &str, bulkhead: Arc<Bulkhead>) -> Option<Arc<Bulkhead>> {
        assert_eq!(
            bulkhead.name(),
            name,
            "BulkheadRegistry::replace: the bulkhead's name must be the registry name"
        );
        let mut inner = self.inner.write();
        let entry = inner.entries.get_mut(name)?;
        let old = core::mem::replace(&mut entry.bulkhead, bulkhead);
        drop(inner);
        Some(old)
    }

    /// Every registered bulkhead, sorted by name (a snapshot).
    ///
    /// ```
    /// # use bulkhead::BulkheadRegistry;
    /// let registry = BulkheadRegistry::default();
    /// registry.bulkhead("b");
    /// registry.bulkhead("a");
    /// let names: Vec<_> = registry.all().iter().map(|b| b.name().to_owned()).collect();
    /// assert_eq!(names, ["a", "b"]);
    /// ```
    pub fn all(&self) -> Vec<Arc<Bulkhead>> {
        self.inner.read().entries.values().map(|e| Arc::clone(&e.bulkhead)).collect()
    }

    /// Closes every registered bulkhead ([`Bulkhead::close`]) and keyed bulkhead
    /// ([`KeyedBulkhead::close`](crate::keyed::KeyedBulkhead::close)) for a graceful
    /// shutdown, and returns how many this call closed. Closed bulkheads stay registered (and closed):
    /// [`bulkhead`](Self::bulkhead) returns them as they are; [`remove`](Self::remove) one
    /// to have the next look-up build a fresh, open bulkhead.
    ///
    /// ```
    /// use std::time::Duration;
    /// use bulkhead::{BulkheadRegistry, RejectReason};
    /// let registry = BulkheadRegistry::default();
    /// let bank = registry.bulkhead("bank");
    /// registry.bulkhead("ledger");
    /// let in_flight = bank.try_acquire()?;
    /// assert_eq!(registry.close_all(), 2);
    /// assert_eq!(registry.close_all(), 0, "already closed");
    /// assert_eq!(registry.bulkhead("bank").try_acquire().unwrap_err().reason(), RejectReason::Closed);
    /// assert!(!registry.wait_drained(Duration::ZERO), "a call is still in flight");
    /// drop(in_flight);
    /// assert!(registry.wait_drained(Duration::from_secs(1)));
    /// # Ok::<(), bulkhead::BulkheadFull>(())
    /// ```
    pub fn close_all(&self) -> usize {
        self.all().iter().filter(|bulkhead| bulkhead.close()).count() + self.close_all_keyed()
    }

    /// Waits until every registered bulkhead and keyed bulkhead is closed and drained, for
    /// at most `timeout` in all. Returns `true` if they all are.
    ///
    /// # Blocking
    ///
    /// Blocks the calling thread for up to `timeout`; in async code, await
    /// [`Bulkhead::drained`] on each of [`all`](Self::all) instead.
    ///
    /// # Panics
    ///
    /// As [`Bulkhead::wait_drained`]: if it would wait on a thread that polls async tasks.
    pub fn wait_drained(&self, timeout: std::time::Duration) -> bool {
        let deadline = std::time::Instant::now().checked_add(timeout);
        let left =
            || deadline.map_or(timeout, |d| d.saturating_duration_since(std::time::Instant::now()));
        self.all().iter().all(|bulkhead| bulkhead.wait_drained(left()))
            && self.wait_drained_keyed(left)
    }

    /// The names of every registered bulkhead, sorted.
    ///
    /// ```
    /// # use bulkhead::BulkheadRegistry;
    /// let registry = BulkheadRegistry::default();
    /// registry.bulkhead("bank");
    /// assert_eq!(registry.names(), ["bank"]);
    /// ```
    pub fn names(&self) -> Vec<String> {
        self.inner.read().entries.keys().cloned().collect()
    }

    /// How many bulkheads are registered.
    ///
    /// ```
    /// # use bulkhead::BulkheadRegistry;
    /// let registry = BulkheadRegistry::default();
    /// assert_eq!(registry.len(), 0);
    /// registry.bulkhead("bank");
    /// assert_eq!(registry.len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.inner.read().entries.len()
    }

    /// Whether no bulkhead is registered.
    ///
    /// ```
    /// # use bulkhead::BulkheadRegistry;
    /// assert!(BulkheadRegistry::default().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.inner.read().entries.is_empty()
    }

    /// The registry's own tags (applied to every bulkhead).
    ///
    /// ```
    /// # use bulkhead::BulkheadRegistry;
    /// let registry = BulkheadRegistry::builder().tag("service", "payments").build()?;
    /// assert_eq!(registry.registry_tags()["service"], "payments");
    /// # Ok::<(), bulkhead::RegistryError>(())
    /// ```
    pub fn registry_tags(&self) -> &BTreeMap<String, String> {
        &self.registry_tags
    }

    /// The tags of the bulkhead `name`: the registry's tags merged with the bulkhead's own,
    /// the bulkhead's winning on a clash. `None` if no such bulkhead is registered.
    ///
    /// ```
    /// # use bulkhead::BulkheadRegistry;
    /// let registry = BulkheadRegistry::builder().tag("service", "payments").build()?;
    /// registry.bulkhead("bank");
    /// assert_eq!(registry.tags("bank").unwrap()["service"], "payments");
    /// assert_eq!(registry.tags("nope"), None);
    /// # Ok::<(), bulkhead::RegistryError>(())
    /// ```
    pub fn tags(&self, name: &str) -> Option<BTreeMap<String, String>> {
        let inner = self.inner.read();
        let entry = inner.entries.get(name)?;
        let mut tags = self.registry_tags.clone();
        tags.extend(entry.tags.iter().map(|(k, v)| (k.clone(), v.clone())));
        Some(tags)
    }
}

impl fmt::Debug for BulkheadRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = self.inner.read();
        f.debug_struct("BulkheadRegistry")
            .field("default_config", &self.default_config)
            .field("configs", &inner.configs)
            .field("tags", &self.registry_tags)
            .field("bulkheads", &inner.entries.values().map(|e| &e.bulkhead).collect::<Vec<_>>())
            .finish()
    }
}

/// Builds a [`BulkheadRegistry`]; see [`BulkheadRegistry::builder`].
///
/// # Examples
///
/// ```
/// use bulkhead::{BulkheadConfig, BulkheadRegistry};
/// let registry = BulkheadRegistry::builder()
///     .default_config(BulkheadConfig::for_pool(10))
///     .add_config("bank", BulkheadConfig::for_pool(20))
///     .tags([("service", "payments"), ("zone", "eu")])
///     .build()?;
/// assert_eq!(registry.bulkhead("x").config().max_concurrent_calls(), 8);
/// # Ok::<(), bulkhead::RegistryError>(())
/// ```
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct BulkheadRegistryBuilder {
    default_config: BulkheadConfig,
    configs: Vec<(String, BulkheadConfig)>,
    tags: BTreeMap<String, String>,
    timer: Option<Timer>,
}

impl BulkheadRegistryBuilder {
    /// Sets the default configuration ([`BulkheadConfig::default`] unless set).
    ///
    /// ```
    /// use bulkhead::{BulkheadConfig, BulkheadRegistry};
    /// let registry = BulkheadRegistry::builder().default_config(BulkheadConfig::for_pool(5)).build()?;
    /// assert_eq!(registry.default_config().max_concurrent_calls(), 4);
    /// # let _ = BulkheadConfig::default();
    /// # Ok::<(), bulkhead::RegistryError>(())
    /// ```
    pub fn default_config(mut self, config: BulkheadConfig) -> Self {
        self.default_config = config;
        self
    }

    /// Adds a named configuration; a later one with the same name replaces it. `"default"`
    /// is refused by [`build`](Self::build).
    ///
    /// ```
    /// use bulkhead::{BulkheadConfig, BulkheadRegistry};
    /// let registry = BulkheadRegistry::builder().add_config("slow", BulkheadConfig::for_pool(5)).build()?;
    /// assert_eq!(registry.config_names(), ["default", "slow"]);
    /// # let _ = BulkheadConfig::default();
    /// # Ok::<(), bulkhead::RegistryError>(())
    /// ```
    pub fn add_config(mut self, name: impl Into<String>, config: BulkheadConfig) -> Self {
        self.configs.push((name.into(), config));
        self
    }

    /// Adds a registry tag (applied to every bulkhead unless the bulkhead has its own).
    ///
    /// ```
    /// use bulkhead::{BulkheadConfig, BulkheadRegistry};
    /// let registry = BulkheadRegistry::builder().tag("zone", "eu").build()?;
    /// assert_eq!(registry.registry_tags()["zone"], "eu");
    /// # let _ = BulkheadConfig::default();
    /// # Ok::<(), bulkhead::RegistryError>(())
    /// ```
    pub fn tag(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.tags.insert(key.into(), value.into());
        self
    }

    /// Adds several registry tags.
    ///
    /// ```
    /// use bulkhead::{BulkheadConfig, BulkheadRegistry};
    /// let registry = BulkheadRegistry::builder().tags([("zone", "eu"), ("tier", "1")]).build()?;
    /// assert_eq!(registry.registry_tags().len(), 2);
    /// # let _ = BulkheadConfig::default();
    /// # Ok::<(), bulkhead::RegistryError>(())
    /// ```
    pub fn tags<K: Into<String>, V: Into<String>>(
        mut self,
        tags: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        extend_tags(&mut self.tags, tags);
        self
    }

    /// Binds every bulkhead the registry creates, and every keyed bulkhead it builds from
    /// a builder not bound to a timer of its own, to `timer`, a [`Timer`] the embedder
    /// drives (see [`Bulkhead::with_timer`]). Bulkheads handed to
    /// [`replace`](BulkheadRegistry::replace) keep their own timer. Default: the process's.
    ///
    /// ```
    /// use bulkhead::timer::Timer;
    /// use bulkhead::BulkheadRegistry;
    /// let timer = Timer::new(|at| println!("wake the runtime at {at:?}"));
    /// let registry = BulkheadRegistry::builder().timer(&timer).build()?;
    /// let _bank = registry.bulkhead("bank"); // its bounded waits use `timer`
    /// # Ok::<(), bulkhead::RegistryError>(())
    /// ```
    pub fn timer(mut self, timer: &Timer) -> Self {
        self.timer = Some(timer.clone());
        self
    }

    /// Builds the registry.
    ///
    /// # Errors
    ///
    /// [`RegistryError::ReservedConfigName`] when a named configuration is called
    /// `"default"` (use [`default_config`](Self::default_config)).
    ///
    /// ```
    /// use bulkhead::{BulkheadConfig, BulkheadRegistry, RegistryError};
    /// let err = BulkheadRegistry::builder()
    ///     .add_config("default", BulkheadConfig::for_pool(4))
    ///     .build()
    ///     .unwrap_err();
    /// assert_eq!(err, RegistryError::ReservedConfigName);
    /// ```
    pub fn build(self) -> Result<BulkheadRegistry, RegistryError> {
        let mut registry = BulkheadRegistry::new(self.default_config);
        registry.registry_tags = self.tags;
        registry.timer = self.timer;
        for (name, config) in self.configs {
            registry.add_config(name, config)?;
        }
        Ok(registry)
    }
}

// Runs docs/config-files.md's Rust blocks (the config-file guide; the README's summary of it
// is docs/config-guide.md) as doctests, so they cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../../docs/config-files.md")]
struct ConfigFilesDoctests;
