//! Bulkhead settings from Resilience4j-style `application.yml` / `.toml` files, and the
//! style guide's rules as checks on them (feature `serde`).
//!
//! A Spring Boot service configures its bulkheads like this, and this module reads the same
//! file unchanged:
//!
//! ```yaml
//! resilience4j:
//!   bulkhead:
//!     configs:
//!       default:
//!         max-concurrent-calls: 16
//!         max-wait-duration: 100ms
//!     instances:
//!       bank:
//!         base-config: default
//!       reports:
//!         max-concurrent-calls: 2
//!         max-wait-duration: PT0S
//! ```
//!
//! # What is read
//!
//! - `resilience4j.bulkhead.configs.<name>.*` and `resilience4j.bulkhead.instances.<name>.*`
//!   (`backends` is accepted as the old name of `instances`), and
//!   `resilience4j.bulkhead.tags.<key>` (the registry's tags).
//! - Settings: `max-concurrent-calls`, `max-wait-duration`, `base-config`, and this crate's
//!   `max-waiting-calls`, `queue-order`, `queue-target`, `queue-interval` and
//!   `sheddable-headroom` (see [Queue order and headroom](#queue-order-and-headroom)), and
//!   a keyed bulkhead's `guaranteed-share` (a whole number: see
//!   [`Instance::guaranteed_share`]).
//!   `type: SEMAPHORE` is accepted; `type: THREADPOOL` is accepted too but reported by rule
//!   [`R-RES-BH-X1`](rules::THREAD_POOL). An instance's `adaptive:` block is ours too
//!   ([`AdaptiveSettings`]).
//! - `base-config` chains resolve (`instance -> configs.a -> configs.b`); a cycle is an error
//!   naming the chain. An instance without `base-config` starts from `configs.default` when
//!   there is one; a config without `base-config` starts from [`BulkheadConfig::default`].
//! - Spring's way of writing keys: nested maps or dotted keys (`resilience4j.bulkhead:` or
//!   even `resilience4j.bulkhead.instances.bank.max-concurrent-calls: 16`), relaxed binding
//!   (`maxConcurrentCalls`, `max-concurrent-calls`, `max_concurrent_calls` and
//!   `MAX_CONCURRENT_CALLS` are one key), names with dots in brackets (`"[api.bank]"`), YAML
//!   merge keys (`<<: *base`), and several YAML documents (later ones override earlier ones;
//!   documents for a Spring profile, `spring.config.activate.on-profile`, are skipped and
//!   reported as ignored, since no profile is active here).
//! - Durations as Spring writes them: `100ms`, `1s`, `2m`, `1h`, `1d`, `500us`, `10ns`
//!   (units in any case), ISO-8601 (`PT0.1S`, `PT1M30S`, `P1D`), and a bare number (or a YAML
//!   / TOML integer) meaning milliseconds. `1.5s` is refused, as Spring refuses it.
//! - Resilience4j keys that mean nothing here (`writable-stack-trace-enabled`,
//!   `event-consumer-buffer-size`, `fair-call-handling-enabled`, `bulkhead-aspect-order`)
//!   are accepted and listed by [`ConfigFile::ignored`] with their path.
//!   `fair-call-handling-enabled` included: waiting callers are served in the order
//!   `queue-order` sets (FIFO unless set), whatever it says; Resilience4j's unfair mode
//!   (`false`, callers barging in) has no counterpart, and `false` does not mean LIFO.
//! - Everything outside `resilience4j.bulkhead` (`spring`, `logging`, `management`, other
//!   Resilience4j modules) is left alone, except what the rules read:
//!   `resilience4j.thread-pool-bulkhead` and `client.<name>.max-concurrent` (the connection
//!   pool of the client the bulkhead `<name>` protects).
//!
//! # Queue order and headroom
//!
//! Our own keys (Resilience4j has none of these), read like the others: relaxed names
//! (`queueOrder`, `queue_order`), inherited one by one through `base-config`, overridden by a
//! later document, an error when written twice in one document.
//!
//! ```yaml
//! resilience4j.bulkhead:
//!   instances:
//!     search:
//!       max-concurrent-calls: 16
//!       max-wait-duration: 500ms
//!       queue-order: adaptive-lifo   # fifo (default) | lifo | adaptive-lifo
//!       queue-target: 10ms           # adaptive-lifo only; default 10ms
//!       queue-interval: 100ms        # adaptive-lifo only; default 100ms
//!       sheddable-headroom: 4        # default 0
//! ```
//!
//! - `queue-order`: the order queued callers are served in, [`QueueOrder`]: `fifo`, `lifo`
//!   or `adaptive-lifo` (any case, `-` or `_`). Anything else is an error listing the three
//!   (with a "did you mean" when one is close).
//! - `queue-target`, `queue-interval`: adaptive LIFO's target and interval
//!   ([`QueueOrder::AdaptiveLifo`]), durations above zero. When an adaptive-LIFO entry has
//!   none (written or inherited), they are [`DEFAULT_QUEUE_TARGET`] (10 ms) and
//!   [`DEFAULT_QUEUE_INTERVAL`] (100 ms); `bulkhead-check` marks them `(default)`. Written in
//!   an entry whose own queue order is not `adaptive-lifo`, they would do nothing: an
//!   error. An entry that inherits them and writes another `queue-order` itself drops them,
//!   without an error.
//! - `sheddable-headroom`: the permits [`Criticality::Sheddable`] calls must leave free
//!   ([`BulkheadConfigBuilder::sheddable_headroom`]), a whole number. Above the entry's
//!   `max-concurrent-calls` (once both are inherited) it is an error at the key the entry
//!   writes (the headroom, else its limit), naming where the other was written: an entry
//!   lowering its limit under an inherited headroom is named, every one.
//! - A `queue-order` other than `fifo` on an instance with `max-waiting-calls: 0` is a
//!   [`Warning`]: nobody ever queues there.
//!
//! [`QueueOrder`]: crate::QueueOrder
//! [`QueueOrder::AdaptiveLifo`]: crate::QueueOrder::AdaptiveLifo
//! [`Criticality::Sheddable`]: crate::Criticality::Sheddable
//! [`BulkheadConfigBuilder::sheddable_headroom`]: crate::BulkheadConfigBuilder::sheddable_headroom
//!
//! A [`BulkheadRegistry`](crate::BulkheadRegistry) built from the file gives each bulkhead
//! these settings; a keyed bulkhead's per-key configurations
//! (`KeyedBulkheadBuilder::configs_from_file`) too. To apply a changed file to a running
//! bulkhead, read the file again and pass the instance's configuration to
//! [`Bulkhead::change_config`](crate::Bulkhead::change_config): the new order applies to
//! the callers already queued.
//!
//! ```
//! use bulkhead::{file::ConfigFile, BulkheadRegistry, QueueOrder};
//! let registry = BulkheadRegistry::from_yaml_str("resilience4j.bulkhead.instances.search.queue-order: lifo")?;
//! let search = registry.find("search").unwrap();
//! assert_eq!(search.config().queue_order(), QueueOrder::Lifo);
//!
//! let changed = ConfigFile::from_yaml_str("resilience4j.bulkhead.instances.search.queue-order: fifo")?;
//! search.change_config(changed.instance("search").unwrap().config().clone());
//! assert_eq!(search.config().queue_order(), QueueOrder::Fifo);
//!
//! let err = ConfigFile::from_yaml_str("resilience4j.bulkhead.instances.search.queue-order: lifoo")
//!     .unwrap_err();
//! assert_eq!(
//!     err.to_string(),
//!     "resilience4j.bulkhead.instances.search.queue-order: \"lifoo\" is not a queue order: \
//!      write fifo, lifo or adaptive-lifo (did you mean lifo?)"
//! );
//! # Ok::<(), bulkhead::file::FileError>(())
//! ```
//!
//! # Errors
//!
//! Every error names the key path as written in the file and the value, for instance
//! `resilience4j.bulkhead.instances.sber.max-wait-duration: "-5ms" is negative`. Any other
//! key inside a bulkhead section is an error (a typo never passes in silence), and so is a
//! `base-config` naming no config. All errors are collected, not just the first
//! ([`FileError::Invalid`]). Nothing in a file, however malformed, makes the loader panic.
//!
//! Nothing falls back to the defaults in silence: a file without a `resilience4j.bulkhead`
//! section (an empty file included) is an error unless it says `resilience4j.bulkhead: {}`
//! or is read with [`Loader::allow_missing_section`]; a near-miss of the key
//! (`resilience4j.bulkheads`) is an error naming it; `max-concurrent-calls: 0` is a
//! [`Warning`] naming the instance. An error from a file read by path names the file once
//! ([`FileError::path`]).
//!
//! # Examples
//!
//! ```
//! use std::time::Duration;
//! use bulkhead::file::ConfigFile;
//!
//! let file = ConfigFile::from_yaml_str(
//!     "
//! resilience4j.bulkhead:
//!   configs.default: { maxConcurrentCalls: 16, maxWaitDuration: PT0.1S }
//!   instances:
//!     bank: {}
//!     reports: { max-concurrent-calls: 2, max-wait-duration: 0 }
//! ",
//! )?;
//! let bank = file.instance("bank").unwrap();
//! assert_eq!(bank.config().max_concurrent_calls(), 16);
//! assert_eq!(bank.config().max_wait_duration(), Duration::from_millis(100));
//! assert_eq!(bank.base_config(), Some("default"));
//! assert_eq!(file.instance("reports").unwrap().config().max_concurrent_calls(), 2);
//!
//! let err = ConfigFile::from_yaml_str(
//!     "resilience4j.bulkhead.instances.sber.max-wait-duration: -5ms",
//! )
//! .unwrap_err();
//! assert_eq!(
//!     err.to_string(),
//!     r#"resilience4j.bulkhead.instances.sber.max-wait-duration: "-5ms" is negative"#
//! );
//! # Ok::<(), bulkhead::file::FileError>(())
//! ```

use core::fmt;
use core::time::Duration;
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};

use crate::bulkhead::config::BulkheadConfig;
use crate::bulkhead::config::ConfigError;

mod adaptive;
mod bind;
mod duration;
mod keyed;
mod registry;
pub mod rules;
mod tree;

pub use adaptive::{AdaptiveAlgorithm, AdaptiveSettings};
pub use rules::{Finding, Severity};

/// The syntax of a configuration file.
///
/// # Examples
///
/// ```
/// use bulkhead::file::Format;
/// assert_eq!(Format::from_path("config/application.yml"), Some(Format::Yaml));
/// assert_eq!(Format::from_path("app.TOML"), Some(Format::Toml));
/// assert_eq!(Format::from_path("app.properties"), None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Format {
    /// YAML 1.2 (`.yml`, `.yaml`), one or more documents.
    Yaml,
    /// TOML (`.toml`).
    Toml,
}

impl Format {
    /// The format a file name's extension stands for: `.yml` / `.yaml` or `.toml`, in any
    /// case.
    pub fn from_path(path: impl AsRef<Path>) -> Option<Format> {
        let ext = path.as_ref().extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "yml" | "yaml" => Some(Format::Yaml),
            "toml" => Some(Format::Toml),
            _ => None,
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::Yaml => "YAML",
            Format::Toml => "TOML",
        })
    }
}

/// A configuration file could not be used.
///
/// # Examples
///
/// ```
/// use bulkhead::file::{ConfigFile, FileError};
///
/// let err = ConfigFile::from_yaml_str(
///     "resilience4j.bulkhead.instances.bank: { max-concurent-calls: 16, max-wait-duration: 1.5s }",
/// )
/// .unwrap_err();
/// let FileError::Invalid(errors) = &err else { panic!("{err}") };
/// assert_eq!(errors.len(), 2);
/// assert_eq!(
///     errors[0].to_string(),
///     "resilience4j.bulkhead.instances.bank.max-concurent-calls: 16 is not a bulkhead \
///      setting (did you mean max-concurrent-calls?)"
/// );
/// assert_eq!(errors[1].key(), "resilience4j.bulkhead.instances.bank.max-wait-duration");
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum FileError {
    /// The file could not be read (or is not UTF-8).
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The file name's extension is none of `.yml`, `.yaml`, `.toml`.
    UnknownFormat {
        /// The file.
        path: PathBuf,
    },
    /// The text is not valid YAML or TOML.
    Syntax {
        /// Which syntax it was read as.
        format: Format,
        /// The parser's message, with the position.
        message: String,
        /// The file, when the text was read from one (the message then starts with it).
        path: Option<PathBuf>,
    },
    /// The bulkhead settings are wrong: every error found, each naming the key path and the
    /// value.
    Invalid(Vec<ConfigError>),
}

impl FileError {
    /// The file the error is about, when the text was read from one. Every message of an
    /// error from a file read by path starts with the file's name, once.
    ///
    /// ```
    /// use bulkhead::file::ConfigFile;
    /// let err = ConfigFile::from_path("no/such/application.yml").unwrap_err();
    /// assert_eq!(err.path().unwrap().to_str(), Some("no/such/application.yml"));
    /// assert!(err.to_string().starts_with("cannot read no/such/application.yml: "));
    /// ```
    pub fn path(&self) -> Option<&Path> {
        match self {
            FileError::Io { path, .. } | FileError::UnknownFormat { path } => Some(path),
            FileError::Syntax { path, .. } => path.as_deref(),
            FileError::Invalid(errors) => errors.first().and_then(ConfigError::file),
        }
    }

    /// The same error, read from `path`.
    fn in_file(self, path: &Path) -> FileError {
        match self {
            FileError::Syntax { format, message, path: None } => {
                FileError::Syntax { format, message, path: Some(path.to_path_buf()) }
            }
            FileError::Invalid(errors) => {
                FileError::Invalid(errors.into_iter().map(|e| e.in_file(path)).collect())
            }
            other => other,
        }
    }

    /// The settings errors ([`FileError::Invalid`]); empty for the other variants.
    ///
    /// ```
    /// use bulkhead::file::ConfigFile;
    /// let err = ConfigFile::from_toml_str("[resilience4j.bulkhead.instances.a]\nmax-concurrent-calls = -1").unwrap_err();
    /// assert_eq!(err.errors()[0].to_string(), "resilience4j.bulkhead.instances.a.max-concurrent-calls: -1 is negative");
    /// ```
    pub fn errors(&self) -> &[ConfigError] {
        match self {
            FileError::Invalid(errors) => errors,
            _ => &[],
        }
    }
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FileError::Io { path, source } => write!(f, "cannot read {}: {source}", path.display()),
            FileError::UnknownFormat { path } => write!(
                f,
                "{}: cannot tell the format from the extension (use .yml, .yaml or .toml)",
                path.display()
            ),
            FileError::Syntax { format, message, path } => {
                if let Some(path) = path {
                    write!(f, "{}: ", path.display())?;
                }
                write!(f, "{format} syntax error: {message}")
            }
            FileError::Invalid(errors) => {
                for (i, e) in errors.iter().enumerate() {
                    if i > 0 {
                        f.write_str("\n")?;
                    }
                    write!(f, "{e}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for FileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FileError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Where each effective setting of an entry was written (`None`: the built-in default).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Origins {
    pub(crate) max_concurrent_calls: Option<String>,
    pub(crate) max_wait_duration: Option<String>,
    pub(crate) max_waiting_calls: Option<String>,
    pub(crate) queue_order: Option<String>,
    pub(crate) queue_target: Option<String>,
    pub(crate) queue_interval: Option<String>,
    pub(crate) sheddable_headroom: Option<String>,
    pub(crate) guaranteed_share: Option<String>,
}

/// A bulkhead instance from `resilience4j.bulkhead.instances.<name>` (or a named config from
/// `configs.<name>`, see [`NamedConfig`]), with its effective configuration (base configs
/// applied).
///
/// # Examples
///
/// ```
/// use bulkhead::file::ConfigFile;
/// let file = ConfigFile::from_yaml_str(
///     "
/// resilience4j.bulkhead:
///   configs:
///     base: { max-concurrent-calls: 8 }
///     slow: { base-config: base, max-wait-duration: 50ms }
///   instances.bank.base-config: slow
/// ",
/// )?;
/// let bank = file.instance("bank").unwrap();
/// assert_eq!(bank.name(), "bank");
/// assert_eq!(bank.path(), "resilience4j.bulkhead.instances.bank");
/// assert_eq!(bank.config().max_concurrent_calls(), 8);
/// assert_eq!(bank.base_config(), Some("slow"));
/// assert_eq!(bank.base_chain(), ["slow", "base"]);
/// # Ok::<(), bulkhead::file::FileError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instance {
    pub(crate) name: String,
    pub(crate) path: String,
    pub(crate) config: BulkheadConfig,
    pub(crate) chain: Vec<String>,
    pub(crate) origins: Origins,
    pub(crate) adaptive: Option<AdaptiveSettings>,
    pub(crate) guaranteed_share: Option<u32>,
}

impl Instance {
    /// Its `adaptive:` block, if it has one and the block is valid (our extension of the
    /// layout; see [`AdaptiveSettings`]).
    ///
    /// ```
    /// use bulkhead::file::ConfigFile;
    /// let file = ConfigFile::from_yaml_str("resilience4j.bulkhead.instances.bank.adaptive.algorithm: aimd")?;
    /// assert!(file.instance("bank").unwrap().adaptive().is_some());
    /// # Ok::<(), bulkhead::file::FileError>(())
    /// ```
    pub fn adaptive(&self) -> Option<&AdaptiveSettings> {
        self.adaptive.as_ref()
    }

    /// Its `guaranteed-share` (our extension of the layout), written or inherited through
    /// `base-config`: read by a keyed bulkhead's
    /// [`configs_from_file`](crate::keyed::KeyedBulkheadBuilder::configs_from_file), the
    /// keyed bulkhead's own instance giving every key's default share and an instance
    /// `"<name>/<key>"` that key's. A plain bulkhead has no total to share: it ignores it.
    ///
    /// ```
    /// use bulkhead::file::ConfigFile;
    /// let file = ConfigFile::from_yaml_str("resilience4j.bulkhead.instances.tenants/gold.guaranteed-share: 4")?;
    /// assert_eq!(file.instance("tenants/gold").unwrap().guaranteed_share(), Some(4));
    /// # Ok::<(), bulkhead::file::FileError>(())
    /// ```
    pub fn guaranteed_share(&self) -> Option<u32> {
        self.guaranteed_share
    }

    /// The name: the key under `instances` (or under `configs`, for a [`NamedConfig`]).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The path of its section in the file, e.g. `resilience4j.bulkhead.instances.bank`.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The effective configuration.
    pub fn config(&self) -> &BulkheadConfig {
        &self.config
    }

    /// The config it starts from: its `base-config`, or `default` when it names none and
    /// `configs.default` exists; `None` when it starts from [`BulkheadConfig::default`].
    pub fn base_config(&self) -> Option<&str> {
        self.chain.first().map(String::as_str)
    }

    /// The whole chain of base configs, nearest first.
    pub fn base_chain(&self) -> &[String] {
        &self.chain
    }

    /// Where the effective value of `setting` was written: the key path in the file (in
    /// this entry or in a config it inherits from), or `None` when it is the built-in
    /// default. `setting` is a key as the file writes it, relaxed (`queue-target`,
    /// `queueTarget`); `None` too for a name that is not one of `max-concurrent-calls`,
    /// `max-wait-duration`, `max-waiting-calls`, `queue-order`, `queue-target`,
    /// `queue-interval`, `sheddable-headroom`, `guaranteed-share`.
    ///
    /// ```
    /// use bulkhead::file::ConfigFile;
    /// let file = ConfigFile::from_yaml_str(
    ///     "
    /// resilience4j.bulkhead:
    ///   configs.shared: { queue-order: adaptive-lifo, queue-interval: 200ms }
    ///   instances.search: { base-config: shared, sheddable-headroom: 2 }
    /// ",
    /// )?;
    /// let search = file.instance("search").unwrap();
    /// assert_eq!(search.origin("queue-order"), Some("resilience4j.bulkhead.configs.shared.queue-order"));
    /// assert_eq!(search.origin("sheddableHeadroom"), Some("resilience4j.bulkhead.instances.search.sheddable-headroom"));
    /// assert_eq!(search.origin("queue-target"), None); // the default, 10ms
    /// # Ok::<(), bulkhead::file::FileError>(())
    /// ```
    pub fn origin(&self, setting: &str) -> Option<&str> {
        let o = &self.origins;
        match tree::canonical(setting).as_str() {
            "maxconcurrentcalls" => o.max_concurrent_calls.as_deref(),
            "maxwaitduration" => o.max_wait_duration.as_deref(),
            "maxwaitingcalls" => o.max_waiting_calls.as_deref(),
            "queueorder" => o.queue_order.as_deref(),
            "queuetarget" => o.queue_target.as_deref(),
            "queueinterval" => o.queue_interval.as_deref(),
            "sheddableheadroom" => o.sheddable_headroom.as_deref(),
            "guaranteedshare" => o.guaranteed_share.as_deref(),
            _ => None,
        }
    }
}

/// A named configuration from `resilience4j.bulkhead.configs.<name>`, resolved: the same
/// shape as an [`Instance`] (name, path, effective config, base-config chain), so the same
/// type. For a config, `base_config` is its own `base-config`, if it names one.
///
/// # Examples
///
/// ```
/// use bulkhead::file::ConfigFile;
/// let file = ConfigFile::from_yaml_str("resilience4j.bulkhead.configs.shared.max-concurrent-calls: 4")?;
/// let shared = &file.configs()[0];
/// assert_eq!((shared.name(), shared.config().max_concurrent_calls()), ("shared", 4));
/// assert_eq!(shared.base_config(), None);
/// # Ok::<(), bulkhead::file::FileError>(())
/// ```
pub type NamedConfig = Instance;

/// A key that was accepted but has no effect here, or a document that was skipped.
///
/// # Examples
///
/// ```
/// use bulkhead::file::ConfigFile;
/// let file = ConfigFile::from_yaml_str(
///     "resilience4j.bulkhead.instances.bank: { writableStackTraceEnabled: false }",
/// )?;
/// let ignored = &file.ignored()[0];
/// assert_eq!(ignored.path(), "resilience4j.bulkhead.instances.bank.writableStackTraceEnabled");
/// assert_eq!(ignored.value(), "false");
/// assert!(ignored.to_string().starts_with("resilience4j.bulkhead.instances.bank.writableStackTraceEnabled: false ignored"));
/// # Ok::<(), bulkhead::file::FileError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ignored {
    pub(crate) path: String,
    pub(crate) value: String,
    pub(crate) reason: String,
}

impl Ignored {
    /// The key path as written.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The value as written.
    pub fn value(&self) -> &str {
        &self.value
    }

    /// Why it has no effect.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

impl fmt::Display for Ignored {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} ignored: {}", self.path, self.value, self.reason)
    }
}

/// Something in the file that loads but is probably not meant: an instance whose
/// `max-concurrent-calls` is 0 (a bulkhead that refuses every call), or whose `queue-order`
/// (other than `fifo`) can never apply because its `max-waiting-calls` is 0. Listed by
/// [`ConfigFile::warnings`], printed by `bulkhead-check`, and logged at WARN (target
/// `bulkhead`) when the file is loaded with the `tracing` feature on.
///
/// # Examples
///
/// ```
/// use bulkhead::file::ConfigFile;
/// let file = ConfigFile::from_yaml_str("resilience4j.bulkhead.instances.bank.maxConcurrentCalls: 0")?;
/// let warning = &file.warnings()[0];
/// assert_eq!(warning.instance(), "bank");
/// assert_eq!(warning.path(), "resilience4j.bulkhead.instances.bank.maxConcurrentCalls");
/// assert_eq!(
///     warning.to_string(),
///     "resilience4j.bulkhead.instances.bank.maxConcurrentCalls: 0 makes the bulkhead 'bank' \
///      refuse every call (max-concurrent-calls 0: a closed bulkhead)"
/// );
/// # Ok::<(), bulkhead::file::FileError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning {
    pub(crate) instance: String,
    pub(crate) path: String,
    pub(crate) value: String,
    pub(crate) message: String,
}

impl Warning {
    /// The instance it is about.
    pub fn instance(&self) -> &str {
        &self.instance
    }

    /// The key path where the value was written (the instance's own key, or the config it
    /// inherits it from).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The value as written.
    pub fn value(&self) -> &str {
        &self.value
    }

    /// What it does, naming the instance.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} {}", self.path, self.value, self.message)
    }
}

/// What the rules need beyond the bulkhead settings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Facts {
    /// `type: THREADPOOL` in a bulkhead entry: (path of the `type` key, value as written).
    pub(crate) thread_pool_types: Vec<(String, String)>,
    /// `resilience4j.thread-pool-bulkhead` entries (or the section itself when it has none).
    pub(crate) thread_pool_sections: Vec<String>,
    /// `client.<name>.max-concurrent`: name, path, value.
    pub(crate) pools: BTreeMap<String, (String, tree::Value)>,
    /// Instances written in the file but left out of it for their settings errors (a
    /// missing or circular base config, a headroom above the limit, ...): the rules must
    /// not call them missing (issue 31: their errors say what is wrong).
    pub(crate) unresolved_instances: BTreeSet<String>,
}

/// The bulkhead settings of a configuration file, resolved.
///
/// Loading does not apply the style guide's rules: run [`check`](Self::check) (or the
/// `bulkhead-check` command) for those.
///
/// # Examples
///
/// ```
/// use bulkhead::file::ConfigFile;
/// let file = ConfigFile::from_toml_str(
///     r#"
/// [resilience4j.bulkhead.configs.default]
/// max-concurrent-calls = 16
/// max-wait-duration = "100ms"
///
/// [resilience4j.bulkhead.instances.bank]
/// [resilience4j.bulkhead.instances.reports]
/// maxConcurrentCalls = 2
/// "#,
/// )?;
/// let names: Vec<_> = file.instances().iter().map(|i| i.name()).collect();
/// assert_eq!(names, ["bank", "reports"]);
/// assert_eq!(file.default_config().max_concurrent_calls(), 16);
/// assert!(file.check().is_empty());
/// # Ok::<(), bulkhead::file::FileError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigFile {
    pub(crate) format: Format,
    pub(crate) path: Option<PathBuf>,
    pub(crate) configs: Vec<NamedConfig>,
    pub(crate) instances: Vec<Instance>,
    pub(crate) tags: BTreeMap<String, String>,
    pub(crate) ignored: Vec<Ignored>,
    pub(crate) warnings: Vec<Warning>,
    pub(crate) has_section: bool,
    pub(crate) facts: Facts,
}

impl ConfigFile {
    /// Reads a `.yml`, `.yaml` or `.toml` file.
    ///
    /// # Errors
    ///
    /// [`FileError::Io`], [`FileError::UnknownFormat`], [`FileError::Syntax`] or
    /// [`FileError::Invalid`].
    ///
    /// ```no_run
    /// let file = bulkhead::file::ConfigFile::from_path("src/main/resources/application.yml")?;
    /// println!("{} instances", file.instances().len());
    /// # Ok::<(), bulkhead::file::FileError>(())
    /// ```
    pub fn from_path(path: impl AsRef<Path>) -> Result<ConfigFile, FileError> {
        Loader::new().load(path)
    }

    /// A [`Loader`], to read a file with options (a file without a `resilience4j.bulkhead`
    /// section, a format other than the extension's).
    ///
    /// ```
    /// use bulkhead::file::{ConfigFile, Format};
    /// let file = ConfigFile::loader()
    ///     .allow_missing_section(true)
    ///     .parse("spring.application.name: shop", Format::Yaml)?;
    /// assert!(file.instances().is_empty());
    /// # Ok::<(), bulkhead::file::FileError>(())
    /// ```
    pub fn loader() -> Loader {
        Loader::new()
    }

    /// Reads YAML text (one or more documents).
    ///
    /// # Errors
    ///
    /// [`FileError::Syntax`] or [`FileError::Invalid`], which includes text without a
    /// `resilience4j.bulkhead` section (every bulkhead would silently get the defaults):
    /// write `resilience4j.bulkhead: {}` if that is meant, or use
    /// [`Loader::allow_missing_section`].
    ///
    /// ```
    /// use bulkhead::file::ConfigFile;
    /// let err = ConfigFile::from_yaml_str("spring.application.name: shop").unwrap_err();
    /// assert!(err.to_string().starts_with("resilience4j.bulkhead: (not in the file) is required"));
    /// let file = ConfigFile::from_yaml_str("spring.application.name: shop\nresilience4j.bulkhead: {}")?;
    /// assert!(file.instances().is_empty());
    /// # Ok::<(), bulkhead::file::FileError>(())
    /// ```
    pub fn from_yaml_str(text: &str) -> Result<ConfigFile, FileError> {
        Loader::new().parse(text, Format::Yaml)
    }

    /// Reads TOML text.
    ///
    /// # Errors
    ///
    /// [`FileError::Syntax`] or [`FileError::Invalid`].
    ///
    /// ```
    /// let file = bulkhead::file::ConfigFile::from_toml_str("[resilience4j.bulkhead.instances.bank]")?;
    /// assert_eq!(file.instances()[0].name(), "bank");
    /// # Ok::<(), bulkhead::file::FileError>(())
    /// ```
    pub fn from_toml_str(text: &str) -> Result<ConfigFile, FileError> {
        Loader::new().parse(text, Format::Toml)
    }

    /// Reads text in `format`.
    ///
    /// # Errors
    ///
    /// [`FileError::Syntax`] or [`FileError::Invalid`].
    ///
    /// ```
    /// use bulkhead::file::{ConfigFile, Format};
    /// assert!(ConfigFile::parse("a = [", Format::Toml).is_err());
    /// ```
    pub fn parse(text: &str, format: Format) -> Result<ConfigFile, FileError> {
        Loader::new().parse(text, format)
    }

    /// The file it was read from ([`from_path`](Self::from_path), [`Loader::load`]); `None`
    /// for text.
    ///
    /// ```
    /// # use bulkhead::file::ConfigFile;
    /// assert_eq!(ConfigFile::from_yaml_str("resilience4j.bulkhead: {}")?.path(), None);
    /// # Ok::<(), bulkhead::file::FileError>(())
    /// ```
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Settings that load but are probably not meant (see [`Warning`]).
    ///
    /// ```
    /// # use bulkhead::file::ConfigFile;
    /// let file = ConfigFile::from_yaml_str("resilience4j.bulkhead.instances: { a: {}, b: { max-concurrent-calls: 0 } }")?;
    /// let closed: Vec<&str> = file.warnings().iter().map(|w| w.instance()).collect();
    /// assert_eq!(closed, ["b"]);
    /// # Ok::<(), bulkhead::file::FileError>(())
    /// ```
    pub fn warnings(&self) -> &[Warning] {
        &self.warnings
    }

    /// The syntax it was read as.
    ///
    /// ```
    /// # use bulkhead::file::{ConfigFile, Format};
    /// assert_eq!(ConfigFile::from_toml_str("[resilience4j.bulkhead]")?.format(), Format::Toml);
    /// # Ok::<(), bulkhead::file::FileError>(())
    /// ```
    pub fn format(&self) -> Format {
        self.format
    }

    /// The instances, sorted by name, with their effective configurations.
    ///
    /// ```
    /// # use bulkhead::file::ConfigFile;
    /// let file = ConfigFile::from_yaml_str("resilience4j.bulkhead.instances: { b: {}, a: {} }")?;
    /// let names: Vec<&str> = file.instances().iter().map(|i| i.name()).collect();
    /// assert_eq!(names, ["a", "b"]);
    /// # Ok::<(), bulkhead::file::FileError>(())
    /// ```
    pub fn instances(&self) -> &[Instance] {
        &self.instances
    }

    /// The instance `name`.
    ///
    /// ```
    /// # use bulkhead::file::ConfigFile;
    /// let file = ConfigFile::from_yaml_str("resilience4j.bulkhead.instances.bank.max-concurrent-calls: 4")?;
    /// assert_eq!(file.instance("bank").unwrap().config().max_concurrent_calls(), 4);
    /// assert!(file.instance("Bank").is_none()); // names are exact
    /// # Ok::<(), bulkhead::file::FileError>(())
    /// ```
    pub fn instance(&self, name: &str) -> Option<&Instance> {
        self.instances.iter().find(|i| i.name == name)
    }

    /// The named configs (`configs.default` included), sorted by name, resolved.
    ///
    /// ```
    /// # use bulkhead::file::ConfigFile;
    /// let file = ConfigFile::from_yaml_str("resilience4j.bulkhead.configs: { slow: {}, default: {} }")?;
    /// let names: Vec<&str> = file.configs().iter().map(|c| c.name()).collect();
    /// assert_eq!(names, ["default", "slow"]);
    /// # Ok::<(), bulkhead::file::FileError>(())
    /// ```
    pub fn configs(&self) -> &[NamedConfig] {
        &self.configs
    }

    /// The config `name`.
    ///
    /// ```
    /// # use bulkhead::file::ConfigFile;
    /// let file = ConfigFile::from_yaml_str("resilience4j.bulkhead.configs.slow.max-wait-duration: 50ms")?;
    /// assert_eq!(file.config("slow").unwrap().config().max_wait_duration().as_millis(), 50);
    /// # Ok::<(), bulkhead::file::FileError>(())
    /// ```
    pub fn config(&self, name: &str) -> Option<&NamedConfig> {
        self.configs.iter().find(|c| c.name == name)
    }

    /// `configs.default` if the file has one, else [`BulkheadConfig::default`].
    ///
    /// ```
    /// # use bulkhead::{BulkheadConfig, file::ConfigFile};
    /// let file = ConfigFile::from_yaml_str("resilience4j.bulkhead.instances.bank: {}")?;
    /// assert_eq!(file.default_config(), BulkheadConfig::default());
    /// # Ok::<(), bulkhead::file::FileError>(())
    /// ```
    pub fn default_config(&self) -> BulkheadConfig {
        self.config("default").map(|c| c.config.clone()).unwrap_or_default()
    }

    /// `resilience4j.bulkhead.tags.*`: the tags for a registry built from this file.
    ///
    /// ```
    /// # use bulkhead::file::ConfigFile;
    /// let file = ConfigFile::from_yaml_str("resilience4j.bulkhead.tags.service: payments")?;
    /// assert_eq!(file.tags()["service"], "payments");
    /// # Ok::<(), bulkhead::file::FileError>(())
    /// ```
    pub fn tags(&self) -> &BTreeMap<String, String> {
        &self.tags
    }

    /// Keys accepted but without effect here, and skipped documents.
    ///
    /// ```
    /// # use bulkhead::file::ConfigFile;
    /// let file = ConfigFile::from_yaml_str("resilience4j.bulkhead.configs.default.event-consumer-buffer-size: 10")?;
    /// assert_eq!(file.ignored()[0].path(), "resilience4j.bulkhead.configs.default.event-consumer-buffer-size");
    /// # Ok::<(), bulkhead::file::FileError>(())
    /// ```
    pub fn ignored(&self) -> &[Ignored] {
        &self.ignored
    }

    /// Whether the file has a `resilience4j.bulkhead` section at all (only a file loaded with
    /// [`Loader::allow_missing_section`] may have none).
    ///
    /// ```
    /// # use bulkhead::file::{ConfigFile, Format};
    /// let file = ConfigFile::loader()
    ///     .allow_missing_section(true)
    ///     .parse("resilience4j.retry.instances.a.max-attempts: 3", Format::Yaml)?;
    /// assert!(!file.has_bulkhead_section());
    /// # Ok::<(), bulkhead::file::FileError>(())
    /// ```
    pub fn has_bulkhead_section(&self) -> bool {
        self.has_section
    }

    /// Applies the style guide's rules ([`rules`]) and returns the findings.
    ///
    /// ```
    /// # use bulkhead::file::{rules, ConfigFile};
    /// let file = ConfigFile::from_yaml_str("resilience4j.bulkhead.instances.bank.type: THREADPOOL")?;
    /// assert_eq!(file.check()[0].rule(), rules::THREAD_POOL);
    /// # Ok::<(), bulkhead::file::FileError>(())
    /// ```
    pub fn check(&self) -> Vec<Finding> {
        rules::check(self)
    }
}

/// A file checked leniently: the settings that could be resolved, every settings error, and
/// the rules' findings. This is what `bulkhead-check` prints.
///
/// # Examples
///
/// ```
/// use bulkhead::file::{Format, Report, Severity};
/// let report = Report::parse(
///     "
/// client.bank.max-concurrent: 20
/// resilience4j.bulkhead.instances:
///   bank: { max-concurrent-calls: 20 }
///   typo: { max-concurrent-call: 1 }
/// ",
///     Format::Yaml,
/// )?;
/// assert_eq!(report.file().instances().len(), 2);
/// assert_eq!(report.errors().len(), 1); // the typo
/// assert_eq!(report.findings()[0].rule(), "R-RES-BH-3");
/// assert_eq!(report.findings()[0].severity(), Severity::Error);
/// assert!(report.has_errors());
/// # Ok::<(), bulkhead::file::FileError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Report {
    file: ConfigFile,
    errors: Vec<ConfigError>,
    findings: Vec<Finding>,
}

impl Report {
    /// Reads and checks a `.yml`, `.yaml` or `.toml` file.
    ///
    /// # Errors
    ///
    /// [`FileError::Io`], [`FileError::UnknownFormat`] or [`FileError::Syntax`]: settings
    /// errors go into the report.
    ///
    /// ```no_run
    /// let report = bulkhead::file::Report::from_path("application.yml")?;
    /// assert!(!report.has_errors());
    /// # Ok::<(), bulkhead::file::FileError>(())
    /// ```
    pub fn from_path(path: impl AsRef<Path>) -> Result<Report, FileError> {
        Loader::new().report(path)
    }

    /// Reads and checks text in `format`.
    ///
    /// # Errors
    ///
    /// [`FileError::Syntax`]: settings errors go into the report.
    ///
    /// ```
    /// use bulkhead::file::{Format, Report};
    /// let report = Report::parse("resilience4j.bulkhead.instances.a.max-wait-duration: 5s", Format::Yaml)?;
    /// assert!(report.errors().is_empty());
    /// assert_eq!(report.findings()[0].rule(), bulkhead::file::rules::MAX_WAIT);
    /// assert!(!report.has_errors()); // a warning
    /// # Ok::<(), bulkhead::file::FileError>(())
    /// ```
    pub fn parse(text: &str, format: Format) -> Result<Report, FileError> {
        Loader::new().parse_report(text, format)
    }

    /// What could be resolved (an entry with an error in its chain is left out).
    ///
    /// ```
    /// let report = bulkhead::file::Report::parse("resilience4j.bulkhead.instances.a: {}", bulkhead::file::Format::Yaml)?;
    /// assert_eq!(report.file().instances().len(), 1);
    /// # Ok::<(), bulkhead::file::FileError>(())
    /// ```
    pub fn file(&self) -> &ConfigFile {
        &self.file
    }

    /// Every settings error.
    ///
    /// ```
    /// let report = bulkhead::file::Report::parse("resilience4j.bulkhead.instances.a.typo: 1", bulkhead::file::Format::Yaml)?;
    /// assert_eq!(report.errors()[0].key(), "resilience4j.bulkhead.instances.a.typo");
    /// # Ok::<(), bulkhead::file::FileError>(())
    /// ```
    pub fn errors(&self) -> &[ConfigError] {
        &self.errors
    }

    /// The rules' findings.
    ///
    /// ```
    /// let report = bulkhead::file::Report::parse("resilience4j.bulkhead.instances.a.max-wait-duration: 5s", bulkhead::file::Format::Yaml)?;
    /// assert_eq!(report.findings().len(), 1);
    /// # Ok::<(), bulkhead::file::FileError>(())
    /// ```
    pub fn findings(&self) -> &[Finding] {
        &self.findings
    }

    /// The warnings of the settings that could be resolved ([`ConfigFile::warnings`]).
    ///
    /// ```
    /// let report = bulkhead::file::Report::parse("resilience4j.bulkhead.instances.a.max-concurrent-calls: 0", bulkhead::file::Format::Yaml)?;
    /// assert_eq!(report.warnings()[0].instance(), "a");
    /// assert!(!report.has_errors());
    /// # Ok::<(), bulkhead::file::FileError>(())
    /// ```
    pub fn warnings(&self) -> &[Warning] {
        self.file.warnings()
    }

    /// Whether there is a settings error or a finding of severity [`Severity::Error`].
    ///
    /// ```
    /// let report = bulkhead::file::Report::parse("resilience4j.bulkhead.instances.a.type: THREADPOOL", bulkhead::file::Format::Yaml)?;
    /// assert!(report.has_errors());
    /// # Ok::<(), bulkhead::file::FileError>(())
    /// ```
    pub fn has_errors(&self) -> bool {
        !self.errors.is_empty() || self.findings.iter().any(|f| f.severity() == Severity::Error)
    }
}

/// Reads configuration files with options; [`ConfigFile::from_path`] and its siblings use
/// the defaults.
///
/// - A file without a `resilience4j.bulkhead` section is an error by default: every
///   bulkhead built from it would silently get the built-in defaults. A file that has no
///   bulkhead settings on purpose says so (`resilience4j.bulkhead: {}`, in TOML
///   `[resilience4j.bulkhead]`), or the caller opts in with
///   [`allow_missing_section`](Self::allow_missing_section). A near-miss of the key
///   (`resilience4j.bulkheads`, `resilience4j.bulkhed`, `bulkhead` at the root of a file
///   without the section) is an error either way, naming it and suggesting
///   `resilience4j.bulkhead`.
/// - [`format`](Self::format) reads a file in a format other than its extension's.
/// - Every error from a file read by path names the file, once ([`FileError::path`]).
///
/// # Examples
///
/// ```
/// use bulkhead::{file::{Format, Loader}, BulkheadRegistry};
///
/// // A shared application.yml that configures no bulkhead: opt in, then build a registry.
/// let file = Loader::new()
///     .allow_missing_section(true)
///     .parse("spring.application.name: shop", Format::Yaml)?;
/// let registry = BulkheadRegistry::from_config_file(&file);
/// assert!(registry.is_empty());
///
/// // A near-miss is never allowed.
/// let err = Loader::new()
///     .allow_missing_section(true)
///     .parse("resilience4j.bulkheads.instances.bank.max-concurrent-calls: 4", Format::Yaml)
///     .unwrap_err();
/// assert!(err.to_string().starts_with(
///     "resilience4j.bulkheads: {instances: ...} is not a section this crate reads \
///      (did you mean resilience4j.bulkhead?)"
/// ));
/// # Ok::<(), bulkhead::file::FileError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[must_use = "a loader does nothing until it loads or parses"]
pub struct Loader {
    allow_missing_section: bool,
    format: Option<Format>,
}

impl Loader {
    /// The defaults: the section is required, the format comes from the extension.
    pub fn new() -> Loader {
        Loader::default()
    }

    /// Whether a file without a `resilience4j.bulkhead` section loads (with no instances,
    /// no configs, and the built-in default configuration). Off by default.
    pub fn allow_missing_section(mut self, allow: bool) -> Loader {
        self.allow_missing_section = allow;
        self
    }

    /// Reads files in `format`, whatever their extension.
    ///
    /// ```no_run
    /// use bulkhead::file::{Format, Loader};
    /// let file = Loader::new().format(Format::Yaml).load("config/bulkheads.conf")?;
    /// println!("{} instances", file.instances().len());
    /// # Ok::<(), bulkhead::file::FileError>(())
    /// ```
    pub fn format(mut self, format: Format) -> Loader {
        self.format = Some(format);
        self
    }

    /// Reads a file.
    ///
    /// # Errors
    ///
    /// [`FileError::Io`], [`FileError::UnknownFormat`], [`FileError::Syntax`] or
    /// [`FileError::Invalid`], each naming the file.
    pub fn load(&self, path: impl AsRef<Path>) -> Result<ConfigFile, FileError> {
        let path = path.as_ref();
        let (text, format) = self.read(path)?;
        let mut file = self.parse(&text, format).map_err(|e| e.in_file(path))?;
        file.path = Some(path.to_path_buf());
        Ok(file)
    }

    /// Reads text in `format` (the loader's own format, if set, is for files only).
    ///
    /// # Errors
    ///
    /// [`FileError::Syntax`] or [`FileError::Invalid`].
    pub fn parse(&self, text: &str, format: Format) -> Result<ConfigFile, FileError> {
        let (file, errors) = bind::load(text, format, self.allow_missing_section)?;
        if !errors.is_empty() {
            return Err(FileError::Invalid(errors));
        }
        #[cfg(feature = "tracing")]
        for warning in &file.warnings {
            tracing::warn!(
                target: "bulkhead",
                bulkhead = warning.instance.as_str(),
                key = warning.path.as_str(),
                "{warning}"
            );
        }
        Ok(file)
    }

    /// Reads and checks a file, leniently, as `bulkhead-check` does: see [`Report`].
    ///
    /// # Errors
    ///
    /// [`FileError::Io`], [`FileError::UnknownFormat`] or [`FileError::Syntax`], each naming
    /// the file: settings errors go into the report (each naming the file too).
    pub fn report(&self, path: impl AsRef<Path>) -> Result<Report, FileError> {
        let path = path.as_ref();
        let (text, format) = self.read(path)?;
        let mut report = self.parse_report(&text, format).map_err(|e| e.in_file(path))?;
        report.file.path = Some(path.to_path_buf());
        report.errors = report.errors.into_iter().map(|e| e.in_file(path)).collect();
        Ok(report)
    }

    /// Reads and checks text in `format`, leniently: see [`Report`].
    ///
    /// # Errors
    ///
    /// [`FileError::Syntax`]: settings errors go into the report.
    pub fn parse_report(&self, text: &str, format: Format) -> Result<Report, FileError> {
        let (file, errors) = bind::load(text, format, self.allow_missing_section)?;
        let findings = rules::check(&file);
        Ok(Report { file, errors, findings })
    }

    fn read(&self, path: &Path) -> Result<(String, Format), FileError> {
        let format = self
            .format
            .or_else(|| Format::from_path(path))
            .ok_or_else(|| FileError::UnknownFormat { path: path.into() })?;
        let text = std::fs::read_to_string(path)
            .map_err(|source| FileError::Io { path: path.into(), source })?;
        Ok((text, format))
    }
}

/// The `queue-target` of an entry with `queue-order: adaptive-lifo` that writes none (nor
/// inherits one): 10 ms, a queueing delay well under a typical caller's deadline. See
/// [`QueueOrder::AdaptiveLifo`](crate::QueueOrder::AdaptiveLifo).
///
/// ```
/// use bulkhead::{file::{ConfigFile, DEFAULT_QUEUE_INTERVAL, DEFAULT_QUEUE_TARGET}, QueueOrder};
/// let file = ConfigFile::from_yaml_str("resilience4j.bulkhead.instances.search.queue-order: adaptive-lifo")?;
/// assert_eq!(
///     file.instance("search").unwrap().config().queue_order(),
///     QueueOrder::AdaptiveLifo { target: DEFAULT_QUEUE_TARGET, interval: DEFAULT_QUEUE_INTERVAL }
/// );
/// # Ok::<(), bulkhead::file::FileError>(())
/// ```
pub const DEFAULT_QUEUE_TARGET: Duration = Duration::from_millis(10);

/// The `queue-interval` of an entry with `queue-order: adaptive-lifo` that writes none (nor
/// inherits one): 100 ms, about a caller's round trip. See [`DEFAULT_QUEUE_TARGET`].
pub const DEFAULT_QUEUE_INTERVAL: Duration = Duration::from_millis(100);

/// Formats a duration as Spring users write it (`100ms`, `1s`, `2m`, `0`).
///
/// ```
/// use std::time::Duration;
/// assert_eq!(bulkhead::file::format_duration(Duration::from_millis(1500)), "1500ms");
/// assert_eq!(bulkhead::file::format_duration(Duration::from_secs(120)), "2m");
/// ```
pub fn format_duration(d: Duration) -> String {
    duration::format(d)
}

/// Parses a duration as Spring does (`100ms`, `PT0.1S`, a bare number of milliseconds).
///
/// # Errors
///
/// A [`ConfigError`] with key `duration`, the text, and what is wrong with it.
///
/// ```
/// use std::time::Duration;
/// use bulkhead::file::parse_duration;
/// assert_eq!(parse_duration("PT1M30S")?, Duration::from_secs(90));
/// assert_eq!(parse_duration("250")?, Duration::from_millis(250));
/// assert_eq!(parse_duration("-5ms").unwrap_err().to_string(), r#"duration: "-5ms" is negative"#);
/// # Ok::<(), bulkhead::ConfigError>(())
/// ```
pub fn parse_duration(text: &str) -> Result<Duration, ConfigError> {
    duration::parse(text)
        .map_err(|e| ConfigError::new("duration", format!("{text:?}"), bind::duration_problem(e)))
}
