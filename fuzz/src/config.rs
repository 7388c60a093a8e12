//! Arbitrary bytes through every configuration entry point, shared by the `config_parsers`
//! fuzz target and `tests/fuzz_corpus.rs`.
//!
//! The first byte picks the entry point; the rest is its input:
//!
//! * `0..=3`: the `BulkheadConfig` builder (every setter, in any order, repeated, with
//!   values decoded from the bytes, including the engine's extremes), `for_pool` with any
//!   `usize`, and applying each accepted configuration to a live bulkhead (`new` and
//!   `change_config`). An accepted configuration must read back exactly as set; a refused
//!   one must name the key and the value.
//! * `4..=5` (feature `serde`): the rest as YAML / TOML text (lossy UTF-8) through
//!   `ConfigFile`, `Report` (the style-guide rules) and `BulkheadRegistry`. A syntax error
//!   must give a position (`line`); every settings error must name its key path, first
//!   thing in its message; every accepted setting must be within the engine's range.
//! * `6` (feature `serde`): the rest as a Spring duration through `parse_duration`; an
//!   error names the key `duration` and quotes the text.
//!
//! None may panic.

use std::time::Duration;

use bulkhead::{Bulkhead, BulkheadConfig, ConfigError};

const MAX: usize = BulkheadConfig::MAX_CONCURRENT_CALLS;
/// The bulkhead's name (one name: names are interned for the life of the process).
const NAME: &str = "fuzz-config";

struct Bytes<'d> {
    data: &'d [u8],
    pos: usize,
}

impl Bytes<'_> {
    fn byte(&mut self) -> Option<u8> {
        let b = *self.data.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }

    /// Eight bytes, little-endian; missing bytes read as zero.
    fn u64(&mut self) -> u64 {
        let mut v = [0u8; 8];
        for b in &mut v {
            *b = self.byte().unwrap_or(0);
        }
        u64::from_le_bytes(v)
    }

    /// A count, biased to small values and to the edges of the engine's range.
    fn count(&mut self) -> usize {
        let mode = self.byte().unwrap_or(0);
        let b = usize::from(self.byte().unwrap_or(0));
        match mode % 8 {
            0..=2 => b,
            3 => MAX - 4 + b % 9, // MAX-4 ..= MAX+4
            4 => usize::MAX - b,
            5 => (MAX + 1) << (b % 32),
            _ => usize::try_from(self.u64()).unwrap_or(usize::MAX),
        }
    }

    /// A duration, from zero to `Duration::MAX`, through every constructor shape.
    fn duration(&mut self) -> Duration {
        match self.byte().unwrap_or(0) % 6 {
            0 => Duration::ZERO,
            1 => Duration::from_millis(u64::from(self.byte().unwrap_or(0))),
            2 => Duration::from_nanos(self.u64()),
            3 => {
                let secs = self.u64();
                let nanos = u32::try_from(self.u64() % 1_000_000_000).unwrap_or(0);
                Duration::new(secs, nanos)
            }
            4 => Duration::MAX,
            _ => Duration::from_secs(u64::MAX - u64::from(self.byte().unwrap_or(0))),
        }
    }
}

/// What the builder was told, last write wins.
#[derive(Clone, Copy, Debug)]
struct Expected {
    calls: usize,
    wait: Duration,
    cap: Option<usize>,
}

/// Runs the config check on `data`. Panics if an entry point panics or misbehaves.
pub fn run_config(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else { return };
    match mode % 8 {
        #[cfg(feature = "serde")]
        4 => file::run_text(rest, bulkhead::file::Format::Yaml),
        #[cfg(feature = "serde")]
        5 => file::run_text(rest, bulkhead::file::Format::Toml),
        #[cfg(feature = "serde")]
        6 => file::run_duration(rest),
        _ => run_builder(rest),
    }
}

/// The builder, `for_pool`, `new` and `change_config`.
fn run_builder(data: &[u8]) {
    let mut bytes = Bytes { data, pos: 0 };
    let defaults = BulkheadConfig::default();
    let mut builder = BulkheadConfig::builder();
    let mut expected = Expected {
        calls: defaults.max_concurrent_calls(),
        wait: defaults.max_wait_duration(),
        cap: defaults.max_waiting_calls(),
    };
    assert_eq!(expected.calls, BulkheadConfig::DEFAULT_MAX_CONCURRENT_CALLS);
    let bulkhead = Bulkhead::new(NAME, defaults);
    while let Some(op) = bytes.byte() {
        match op % 5 {
            0 => {
                let n = bytes.count();
                builder = builder.max_concurrent_calls(n);
                expected.calls = n;
            }
            1 => {
                let d = bytes.duration();
                builder = builder.max_wait_duration(d);
                expected.wait = d;
            }
            2 => {
                let k = bytes.count();
                builder = builder.max_waiting_calls(k);
                expected.cap = Some(k);
            }
            3 => {
                if let Some(config) = check_build(builder.clone(), expected) {
                    apply(&bulkhead, config);
                }
            }
            _ => {
                let n = bytes.count();
                apply(&bulkhead, check_for_pool(n));
            }
        }
    }
    if let Some(config) = check_build(builder, expected) {
        apply(&bulkhead, config);
    }
}

/// Builds and checks the outcome against what the builder was told.
fn check_build(
    builder: bulkhead::BulkheadConfigBuilder,
    expected: Expected,
) -> Option<BulkheadConfig> {
    match builder.build() {
        Ok(config) => {
            assert!(
                expected.calls <= MAX,
                "accepted {} calls, above the maximum {MAX}",
                expected.calls
            );
            assert_eq!(config.max_concurrent_calls(), expected.calls);
            assert_eq!(config.max_wait_duration(), expected.wait);
            assert_eq!(config.max_waiting_calls(), expected.cap);
            Some(config)
        }
        Err(err) => {
            assert!(expected.calls > MAX, "refused a valid config {expected:?}: {err}");
            check_error(&err, "max_concurrent_calls", &expected.calls.to_string());
            None
        }
    }
}

/// Every error names its key and the offending value, in its fields and its message.
fn check_error(err: &ConfigError, key: &str, value: &str) {
    assert_eq!(err.key(), key, "{err}");
    assert_eq!(err.value(), value, "{err}");
    assert!(!err.problem().is_empty(), "{err}");
    let text = err.to_string();
    assert!(text.contains(key) && text.contains(value), "message {text:?} names neither");
}

/// `for_pool(n)` is floor(n * 4 / 5), at least 1 for n >= 1, capped at the maximum.
fn check_for_pool(n: usize) -> BulkheadConfig {
    let config = BulkheadConfig::for_pool(n);
    let exact = (n as u128 * 4 / 5).min(MAX as u128) as usize;
    let want = if n == 0 { 0 } else { exact.max(1) };
    assert_eq!(config.max_concurrent_calls(), want, "for_pool({n})");
    assert_eq!(config.max_wait_duration(), Duration::from_millis(100), "for_pool({n})");
    assert_eq!(config.max_waiting_calls(), None, "for_pool({n})");
    config
}

/// Applies an accepted config to a live bulkhead and checks it took effect.
fn apply(bulkhead: &Bulkhead, config: BulkheadConfig) {
    let n = config.max_concurrent_calls();
    bulkhead.change_config(config.clone());
    assert_eq!(bulkhead.config(), config);
    let m = bulkhead.metrics();
    assert_eq!(m.max_allowed_concurrent_calls(), n);
    assert_eq!(m.available_concurrent_calls(), n);
    assert_eq!(m.in_flight_calls(), 0);
    assert_eq!(m.waiting_calls(), 0);
    let permit = bulkhead.try_acquire();
    assert_eq!(permit.is_ok(), n > 0, "try_acquire with limit {n}");
    drop(permit);
    assert_eq!(bulkhead.metrics().available_concurrent_calls(), n);
    let fresh = Bulkhead::new(NAME, config);
    assert_eq!(fresh.metrics().available_concurrent_calls(), n);
}

#[cfg(feature = "serde")]
mod file {
    //! The configuration-file entry points (feature `serde`).

    use bulkhead::file::{parse_duration, ConfigFile, FileError, Format, Report};
    use bulkhead::{BulkheadConfig, BulkheadRegistry, ConfigError};

    use super::MAX;

    /// Every settings error names its key path, and its message starts with it.
    fn check_named(err: &ConfigError, what: &str) {
        let text = err.to_string();
        assert!(!err.key().is_empty(), "{what}: an error without a key: {text:?}");
        assert!(
            text.starts_with(err.key()),
            "{what}: message {text:?} does not start with its key"
        );
    }

    fn check_error(err: &FileError, what: &str) {
        match err {
            FileError::Syntax { message, .. } => {
                assert!(
                    message.contains("line"),
                    "{what}: syntax error without a position: {message:?}"
                );
            }
            FileError::Invalid(errors) => {
                assert!(!errors.is_empty(), "{what}: Invalid with no error");
                for e in errors {
                    check_named(e, what);
                }
            }
            other => panic!("{what}: parsing a string gave {other:?}"),
        }
    }

    fn check_config(config: &BulkheadConfig, what: &str) {
        assert!(
            config.max_concurrent_calls() <= MAX,
            "{what}: limit above the maximum: {config:?}"
        );
        // Whatever a file says must rebuild through the builder (the same validation).
        let mut builder = BulkheadConfig::builder()
            .max_concurrent_calls(config.max_concurrent_calls())
            .max_wait_duration(config.max_wait_duration());
        if let Some(k) = config.max_waiting_calls() {
            builder = builder.max_waiting_calls(k);
        }
        assert_eq!(builder.build().as_ref(), Ok(config), "{what}");
    }

    pub(super) fn run_text(data: &[u8], format: Format) {
        let text = String::from_utf8_lossy(data);
        let parsed = ConfigFile::parse(&text, format);
        let by_name = match format {
            Format::Yaml => ConfigFile::from_yaml_str(&text),
            _ => ConfigFile::from_toml_str(&text),
        };
        assert_eq!(parsed.is_ok(), by_name.is_ok(), "parse vs from_{format}_str");
        match &parsed {
            Ok(file) => {
                check_config(&file.default_config(), "default config");
                for c in file.configs() {
                    assert!(!c.path().is_empty());
                    check_config(c.config(), c.path());
                }
                for i in file.instances() {
                    assert!(!i.path().is_empty());
                    check_config(i.config(), i.path());
                }
                for finding in file.check() {
                    assert!(!finding.to_string().is_empty());
                }
                // Registries create (and intern the names of) their bulkheads: only for a
                // bounded universe of names, so a long fuzz run does not grow without bound.
                if file.instances().iter().all(|i| i.name().chars().count() <= 1) {
                    let registry = match format {
                        Format::Yaml => BulkheadRegistry::from_yaml_str(&text),
                        _ => BulkheadRegistry::from_toml_str(&text),
                    }
                    .expect("the registry accepts what ConfigFile accepted");
                    for i in file.instances() {
                        let b = registry.find(i.name()).expect("an instance has its bulkhead");
                        assert_eq!(&b.config(), i.config(), "{}", i.path());
                    }
                }
            }
            Err(err) => check_error(err, "ConfigFile::parse"),
        }
        match Report::parse(&text, format) {
            Ok(report) => {
                for e in report.errors() {
                    check_named(e, "Report::parse");
                }
                let rule_errors = report
                    .findings()
                    .iter()
                    .any(|f| f.severity() == bulkhead::file::Severity::Error);
                assert_eq!(report.has_errors(), !report.errors().is_empty() || rule_errors);
                // Settings errors in the report exactly when ConfigFile refuses the text.
                assert_eq!(!report.errors().is_empty(), parsed.is_err(), "Report vs ConfigFile");
            }
            Err(err) => {
                assert!(matches!(err, FileError::Syntax { .. }), "Report::parse gave {err:?}");
                check_error(&err, "Report::parse");
            }
        }
    }

    pub(super) fn run_duration(data: &[u8]) {
        let text = String::from_utf8_lossy(data);
        if let Err(err) = parse_duration(&text) {
            assert_eq!(err.key(), "duration");
            assert_eq!(err.value(), format!("{text:?}"));
            check_named(&err, "parse_duration");
        }
    }
}
