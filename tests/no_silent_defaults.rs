//! Issue 18, "no silent defaults", through the library: a file that would silently give
//! every bulkhead the built-in defaults is an error; a zero limit is a warning naming the
//! instance; a number too large says so with the maximum; every error from a file names
//! it once; a registry built from a file reports (or, strict, refuses) names the file does
//! not define. tests/bulkhead_check.rs checks the same cases through `bulkhead-check`.
//!
//! Run with `cargo test --features serde --test no_silent_defaults` (or `--all-features`).
#![cfg(feature = "serde")]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use bulkhead::file::{ConfigFile, FileError, Format, Loader};
use bulkhead::{BulkheadRegistry, RegistryError};

/// A file in a fresh temp dir, removed on drop.
struct TempFile(PathBuf);

impl TempFile {
    fn new(name: &str, text: &str) -> TempFile {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "bulkhead-no-silent-defaults-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        TempFile(path)
    }

    fn path(&self) -> &Path {
        &self.0
    }

    fn shown(&self) -> String {
        self.0.display().to_string()
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
        if let Some(dir) = self.0.parent() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// The error `from_file` gives for `text` in a file called `name`, and that file's name.
fn from_file_error(name: &str, text: &str) -> (FileError, String) {
    let file = TempFile::new(name, text);
    let err = BulkheadRegistry::from_file(file.path()).expect_err("expected an error");
    (err, file.shown())
}

/// Every line of the message starts with the file's name, and names it nowhere else.
fn names_the_file_once_per_line(message: &str, file: &str) {
    for line in message.lines() {
        assert!(line.starts_with(&format!("{file}: ")), "{line:?} does not start with {file}");
        assert_eq!(line.matches(file).count(), 1, "{line:?} names {file} more than once");
    }
}

#[test]
fn an_empty_file_is_an_error_not_the_defaults() {
    for (name, text) in [("app.yml", ""), ("app.yaml", "\n  \n# nothing here\n"), ("app.toml", "")]
    {
        let (err, file) = from_file_error(name, text);
        let FileError::Invalid(errors) = &err else { panic!("{name}: {err:?}") };
        assert_eq!(errors.len(), 1, "{err}");
        assert_eq!(errors[0].key(), "resilience4j.bulkhead");
        assert_eq!(errors[0].file(), Some(Path::new(&file)));
        let expected_value =
            if text.trim().is_empty() { "(the file is empty)" } else { "(not in the file)" };
        assert_eq!(errors[0].value(), expected_value, "{name}");
        assert!(errors[0]
            .problem()
            .contains("every bulkhead would silently get the built-in defaults"));
        names_the_file_once_per_line(&err.to_string(), &file);
    }
}

#[test]
fn a_file_without_the_section_is_an_error_that_says_how_to_mean_it() {
    let (err, file) = from_file_error("application.yml", "spring.application.name: shop\n");
    assert_eq!(
        err.to_string(),
        format!(
            "{file}: resilience4j.bulkhead: (not in the file) is required: without it, every \
             bulkhead would silently get the built-in defaults. If the file has no bulkhead \
             settings on purpose, write `resilience4j.bulkhead: {{}}` in it, or load it with \
             Loader::allow_missing_section"
        )
    );
    let (err, _) = from_file_error("application.toml", "[spring]\napplication.name = \"shop\"\n");
    assert!(err.to_string().contains("write `[resilience4j.bulkhead]` in it"), "{err}");
    // Other Resilience4j modules, the thread-pool bulkhead included, are not near-misses.
    let err = ConfigFile::from_yaml_str(
        "resilience4j:\n  retry.instances.a.max-attempts: 3\n  thread-pool-bulkhead.instances.a: {}\n",
    )
    .unwrap_err();
    assert_eq!(err.errors().len(), 1, "{err}");
    assert_eq!(err.errors()[0].key(), "resilience4j.bulkhead");
    // The same through the text constructors of the registry.
    assert!(BulkheadRegistry::from_yaml_str("logging.level.root: INFO").is_err());
    assert!(BulkheadRegistry::from_toml_str("").is_err());
}

#[test]
fn a_near_miss_of_the_section_is_named_with_the_right_key() {
    let cases = [
        (
            "resilience4j:\n  bulkheads:\n    instances:\n      bank: {max-concurrent-calls: 4}\n",
            "resilience4j.bulkheads",
            "{instances: ...}",
        ),
        (
            "resilience4j.bulkhed.instances.bank.max-concurrent-calls: 4\n",
            "resilience4j.bulkhed",
            "{instances: ...}",
        ),
        (
            "resilence4j.bulkhead.configs.default.max-wait-duration: 10ms\n",
            "resilence4j.bulkhead",
            "{configs: ...}",
        ),
        ("bulkhead:\n  instances:\n    bank: {}\n", "bulkhead", "{instances: ...}"),
        ("resilience4j.Bulkheads: {}\n", "resilience4j.Bulkheads", "{}"),
    ];
    for (text, near_miss, value) in cases {
        let (err, file) = from_file_error("application.yml", text);
        let FileError::Invalid(errors) = &err else { panic!("{text}: {err:?}") };
        assert_eq!(errors.len(), 1, "{text}: only the near-miss, not also 'missing': {err}");
        assert_eq!(errors[0].key(), near_miss, "{text}");
        assert_eq!(errors[0].value(), value, "{text}");
        assert!(
            errors[0].problem().starts_with(
                "is not a section this crate reads (did you mean resilience4j.bulkhead?)"
            ),
            "{err}"
        );
        names_the_file_once_per_line(&err.to_string(), &file);
    }
    // TOML too.
    let err = ConfigFile::from_toml_str(
        "[resilience4j.bulkheads.instances.bank]\nmax-concurrent-calls = 4\n",
    )
    .unwrap_err();
    assert_eq!(err.errors()[0].key(), "resilience4j.bulkheads");
    // A near-miss beside the real section is an error too: half the settings would be lost.
    let err = ConfigFile::from_yaml_str(
        "resilience4j:\n  bulkhead.instances.bank: {}\n  bulkheads.instances.reports: {}\n",
    )
    .unwrap_err();
    let keys: Vec<&str> = err.errors().iter().map(|e| e.key()).collect();
    assert_eq!(keys, ["resilience4j.bulkheads"]);
    // But a root-level `bulkhead` key beside the real section is the application's own.
    let file = ConfigFile::from_yaml_str(
        "bulkhead.enabled: true\nresilience4j.bulkhead.instances.bank: {}\n",
    )
    .unwrap();
    assert_eq!(file.instances().len(), 1);
    // And opting in to a missing section does not let a near-miss through.
    let err = Loader::new()
        .allow_missing_section(true)
        .parse("resilience4j.bulkheads.instances.bank: {}", Format::Yaml)
        .unwrap_err();
    assert_eq!(err.errors()[0].key(), "resilience4j.bulkheads");
}

#[test]
fn a_file_may_say_it_has_no_bulkheads_or_the_caller_may_opt_in() {
    // Explicitly, in the file.
    for (name, text) in [
        ("app.yml", "spring.application.name: shop\nresilience4j.bulkhead: {}\n"),
        ("app.yml", "resilience4j:\n  bulkhead:\n"),
        ("app.toml", "[resilience4j.bulkhead]\n"),
    ] {
        let file = TempFile::new(name, text);
        let registry =
            BulkheadRegistry::from_file(file.path()).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        assert!(registry.is_empty(), "{text:?}");
    }
    // Or by the caller, with a loader option.
    let file = TempFile::new("application.yml", "spring.application.name: shop\n");
    let loaded = Loader::new().allow_missing_section(true).load(file.path()).unwrap();
    assert!(!loaded.has_bulkhead_section());
    assert_eq!(loaded.path(), Some(file.path()));
    let registry = BulkheadRegistry::from_config_file(&loaded);
    assert!(registry.is_empty());
    let empty = Loader::new().allow_missing_section(true).parse("", Format::Toml).unwrap();
    assert!(empty.instances().is_empty() && empty.configs().is_empty());
}

#[test]
fn a_zero_limit_loads_with_a_warning_naming_the_instance() {
    let file = TempFile::new(
        "application.yml",
        "
resilience4j.bulkhead:
  configs:
    closed: { maxConcurrentCalls: 0 }
  instances:
    bank: { maxConcurrentCalls: 0 }
    reports: { base-config: closed }
    ledger: { max-concurrent-calls: 3 }
",
    );
    let loaded = ConfigFile::from_path(file.path()).expect("a zero limit is valid");
    let warnings: Vec<(&str, &str, &str)> =
        loaded.warnings().iter().map(|w| (w.instance(), w.path(), w.value())).collect();
    assert_eq!(
        warnings,
        [
            ("bank", "resilience4j.bulkhead.instances.bank.maxConcurrentCalls", "0"),
            ("reports", "resilience4j.bulkhead.configs.closed.maxConcurrentCalls", "0"),
        ]
    );
    assert!(loaded.warnings()[1].to_string().contains("the bulkhead 'reports' refuse every call"));
    // The registry still builds them as written: closed.
    let registry = BulkheadRegistry::from_config_file(&loaded);
    assert!(registry.find("bank").unwrap().try_acquire().is_err());
    assert!(registry.find("ledger").unwrap().try_acquire().is_ok());
    // No warning when nothing is zero.
    assert!(ConfigFile::from_yaml_str("resilience4j.bulkhead.instances.a: {}")
        .unwrap()
        .warnings()
        .is_empty());
}

#[test]
fn a_number_too_large_says_too_large_with_the_maximum() {
    let calls = "resilience4j.bulkhead.instances.bank.maxConcurrentCalls";
    for written in ["99999999999999999999", "\"99999999999999999999\"", "1073741824"] {
        let err = ConfigFile::from_yaml_str(&format!("{calls}: {written}")).unwrap_err();
        let message = err.errors()[0].to_string();
        assert!(
            message.ends_with("is too large: the engine's maximum is 1073741823"),
            "{written}: {message}"
        );
        assert!(!message.contains("not a whole number"), "{message}");
    }
    let waiting = "resilience4j.bulkhead.instances.bank.max-waiting-calls";
    let err = ConfigFile::from_yaml_str(&format!("{waiting}: 99999999999999999999")).unwrap_err();
    assert_eq!(
        err.errors()[0].to_string(),
        format!("{waiting}: 99999999999999999999 is too large: the maximum is {}", usize::MAX)
    );
    // A fraction is still "not a whole number".
    let err = ConfigFile::from_yaml_str(&format!("{calls}: 2.5")).unwrap_err();
    assert!(err.errors()[0].to_string().ends_with("2.5 is not a whole number"));
}

#[test]
fn every_error_from_a_file_names_it_once() {
    // YAML syntax.
    let (err, file) = from_file_error("application.yml", "resilience4j.bulkhead: [unclosed\n");
    assert!(matches!(&err, FileError::Syntax { format: Format::Yaml, .. }), "{err:?}");
    assert_eq!(err.path(), Some(Path::new(&file)));
    names_the_file_once_per_line(&err.to_string(), &file);
    // TOML syntax, including an integer too large for TOML.
    let (err, file) = from_file_error(
        "application.toml",
        "[resilience4j.bulkhead.instances.bank]\nmax-concurrent-calls = 99999999999999999999\n",
    );
    assert!(matches!(&err, FileError::Syntax { format: Format::Toml, .. }), "{err:?}");
    assert!(err.to_string().starts_with(&format!("{file}: TOML syntax error: ")), "{err}");
    assert_eq!(err.to_string().matches(&file).count(), 1, "{err}");
    // Settings errors: each line.
    let (err, file) = from_file_error(
        "application.yml",
        "resilience4j.bulkhead.instances.bank: { max-concurent-calls: 1, max-wait-duration: -1ms }\n",
    );
    assert_eq!(err.errors().len(), 2);
    names_the_file_once_per_line(&err.to_string(), &file);
    // Unreadable file, unknown extension.
    let missing = std::env::temp_dir().join("bulkhead-no-such-dir/application.yml");
    let err = BulkheadRegistry::from_file(&missing).unwrap_err();
    assert_eq!(err.to_string().matches(&missing.display().to_string()).count(), 1, "{err}");
    let file = TempFile::new("application.properties", "a=b\n");
    let err = BulkheadRegistry::from_file(file.path()).unwrap_err();
    assert_eq!(err.to_string().matches(&file.shown()).count(), 1, "{err}");
    // Text has no file to name.
    let err = ConfigFile::from_yaml_str("a: [").unwrap_err();
    assert_eq!(err.path(), None);
    assert!(err.to_string().starts_with("YAML syntax error: "), "{err}");
}

#[test]
fn a_file_backed_registry_reports_names_its_file_does_not_define() {
    let file = TempFile::new(
        "application.yml",
        "resilience4j.bulkhead.instances.bank.max-concurrent-calls: 4\n",
    );
    let registry = BulkheadRegistry::from_file(file.path()).unwrap();
    assert_eq!(registry.bulkhead("bank").config().max_concurrent_calls(), 4);
    assert!(registry.undefined_names().is_empty());
    // A name the file lacks is still created with the defaults, and reported once.
    assert_eq!(registry.bulkhead("bnak").config().max_concurrent_calls(), 25);
    registry.bulkhead("bnak");
    assert_eq!(registry.try_bulkhead("reports").unwrap().name(), "reports");
    assert_eq!(registry.undefined_names(), ["bnak", "reports"]);
    // A configuration given in code is not a silent default.
    registry.bulkhead_with("explicit", bulkhead::BulkheadConfig::for_pool(4)).unwrap();
    assert_eq!(registry.undefined_names(), ["bnak", "reports"]);
    // A registry built in code has no file: nothing is undefined.
    let plain = BulkheadRegistry::default().strict();
    plain.bulkhead("x");
    assert!(plain.undefined_names().is_empty());
    assert!(plain.try_bulkhead("y").is_ok());
}

#[test]
fn a_strict_file_backed_registry_refuses_names_its_file_does_not_define() {
    let file = TempFile::new(
        "application.yml",
        "resilience4j.bulkhead.instances.bank.max-concurrent-calls: 4\n",
    );
    let registry = BulkheadRegistry::from_file(file.path()).unwrap().strict();
    assert_eq!(registry.try_bulkhead("bank").unwrap().config().max_concurrent_calls(), 4);
    let err = registry.try_bulkhead("bnak").unwrap_err();
    assert_eq!(err, RegistryError::NotInFile { name: "bnak".into(), file: file.shown() });
    assert_eq!(
        err.to_string(),
        format!(
            "no bulkhead 'bnak' in {} (resilience4j.bulkhead.instances.bnak): the registry is \
             strict, so it does not create one with the default configuration",
            file.shown()
        )
    );
    assert!(registry.find("bnak").is_none(), "a refused name is not created");
    assert!(registry.undefined_names().is_empty());
    // A bulkhead created in code with its own configuration is then found.
    registry.bulkhead_with("explicit", bulkhead::BulkheadConfig::for_pool(4)).unwrap();
    assert!(registry.try_bulkhead("explicit").is_ok());
    // From text, the error says so.
    let text = BulkheadRegistry::from_yaml_str("resilience4j.bulkhead: {}").unwrap().strict();
    assert!(text.try_bulkhead("a").unwrap_err().to_string().contains("in the configuration text"));
}
