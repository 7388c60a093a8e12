//! The `adaptive:` block of a config file (issue 12; our extension of Resilience4j's layout).
#![cfg(feature = "serde")]

use std::time::Duration;

use bulkhead::file::{rules, AdaptiveAlgorithm, ConfigFile, FileError, Report, Severity};
use bulkhead::BulkheadRegistry;

#[test]
fn yaml_and_toml_blocks_bind_with_relaxed_names() {
    let yaml = ConfigFile::from_yaml_str(
        "
resilience4j.bulkhead.instances.bank:
  maxConcurrentCalls: 16
  adaptive:
    algorithm: AIMD
    min_limit: 2
    maxLimit: 12
    initial-limit: 8
    timeout: 1s
",
    )
    .unwrap();
    let toml = ConfigFile::from_toml_str(
        "
[resilience4j.bulkhead.instances.bank]
max-concurrent-calls = 16
[resilience4j.bulkhead.instances.bank.adaptive]
algorithm = \"aimd\"
min-limit = 2
max-limit = 12
initial-limit = 8
timeout = \"1s\"
",
    )
    .unwrap();
    for file in [yaml, toml] {
        let a = file.instance("bank").unwrap().adaptive().unwrap().clone();
        assert_eq!(a.algorithm(), AdaptiveAlgorithm::Aimd);
        assert_eq!(
            (a.min_limit(), a.max_limit(), a.initial_limit(), a.timeout()),
            (Some(2), Some(12), Some(8), Some(Duration::from_secs(1)))
        );
        assert_eq!(a.path(), "resilience4j.bulkhead.instances.bank.adaptive");
        let registry = BulkheadRegistry::from_config_file(&file);
        let bank = registry.find("bank").unwrap();
        let control = bank.adaptive_limit().expect("the file's block is attached");
        assert_eq!((control.min_limit(), control.limit(), control.max_limit()), (2, 8, 12));
        assert_eq!(bank.metrics().max_allowed_concurrent_calls(), 8);
        // The settings attach to another bulkhead too, once.
        let other =
            bulkhead::Bulkhead::new("other", file.instance("bank").unwrap().config().clone());
        a.attach(&other).unwrap();
        assert_eq!(other.adaptive_limit().unwrap().limit(), 8);
        assert_eq!(a.attach(&other).unwrap_err().key(), "adaptive_limit");
    }
}

fn errors(yaml: &str) -> Vec<(String, String, String)> {
    match ConfigFile::from_yaml_str(yaml) {
        Err(FileError::Invalid(errors)) => errors
            .iter()
            .map(|e| (e.key().to_owned(), e.value().to_owned(), e.problem().to_owned()))
            .collect(),
        other => panic!("expected settings errors, got {other:?}"),
    }
}

#[test]
fn bad_blocks_are_errors_naming_key_and_value() {
    let base = "resilience4j.bulkhead.instances.bank";
    let e = errors(&format!("{base}:\n  max-concurrent-calls: 16\n  adaptive.max-limit: 20\n"));
    assert_eq!(e[0].0, format!("{base}.adaptive.max-limit"));
    assert_eq!(e[0].1, "20");
    assert!(e[0].2.contains("16"), "{e:?}");
    let e = errors(&format!("{base}.adaptive.algorithm: reno\n"));
    assert_eq!(
        (e[0].0.as_str(), e[0].1.as_str()),
        (&*format!("{base}.adaptive.algorithm"), "\"reno\"")
    );
    let e = errors(&format!("{base}.adaptive.smoothing: 2\n"));
    assert!(e[0].2.contains("not an adaptive setting"), "{e:?}");
    let e = errors(&format!("{base}.adaptive: {{ min-limit: 9, max-limit: 4 }}\n"));
    assert_eq!((e[0].0.as_str(), e[0].1.as_str()), (&*format!("{base}.adaptive.min-limit"), "9"));
    let e = errors("resilience4j.bulkhead.configs.default.adaptive.algorithm: vegas\n");
    assert!(e[0].2.contains("not inherited"), "{e:?}");
}

#[test]
fn check_warns_when_the_adaptive_max_exceeds_80_percent_of_the_pool() {
    let report = Report::parse(
        "
client.bank.max-concurrent: 20
resilience4j.bulkhead.instances.bank:
  max-concurrent-calls: 16
  adaptive: { algorithm: vegas }
client.shop.max-concurrent: 10
resilience4j.bulkhead.instances.shop:
  max-concurrent-calls: 9
  adaptive: { algorithm: vegas, max-limit: 8 }
",
        bulkhead::file::Format::Yaml,
    )
    .unwrap();
    let adaptive: Vec<_> =
        report.findings().iter().filter(|f| f.path().ends_with(".adaptive")).collect();
    assert!(adaptive.is_empty(), "bank's max is 16 = 80 % of 20, shop's 8: {adaptive:?}");

    let report = Report::parse(
        "
client.bank.max-concurrent: 10
resilience4j.bulkhead.instances.bank:
  max-concurrent-calls: 9
  adaptive: { algorithm: vegas }
",
        bulkhead::file::Format::Yaml,
    )
    .unwrap();
    let f = report
        .findings()
        .iter()
        .find(|f| f.path() == "resilience4j.bulkhead.instances.bank.adaptive")
        .expect("a finding on the adaptive block");
    assert_eq!((f.rule(), f.severity()), (rules::POOL_SIZE, Severity::Warning));
    assert!(f.message().contains("max-limit: 8"), "{}", f.message());
}

/// A registry built from a file makes the instances with an `adaptive:` block adaptive:
/// their bulkheads carry the limit, so every call through the registry's entry records a
/// sample; the other instances stay static, and `replace` puts whatever it is given.
#[test]
fn registry_from_a_file_builds_the_adaptive_instances() {
    let registry = BulkheadRegistry::from_yaml_str(
        "
resilience4j.bulkhead.instances:
  bank:
    max-concurrent-calls: 16
    adaptive: { algorithm: aimd, min-limit: 2, max-limit: 12, initial-limit: 8 }
  shop:
    max-concurrent-calls: 4
",
    )
    .unwrap();
    let bank = registry.find("bank").unwrap();
    let control = bank.adaptive_limit().expect("bank has an adaptive block");
    assert_eq!((control.min_limit(), control.max_limit(), control.limit()), (2, 12, 8));
    assert_eq!(bank.config().max_concurrent_calls(), 16, "the cap stays configured");
    assert_eq!(bank.metrics().max_allowed_concurrent_calls(), 8, "the engine runs at 8");
    assert!(registry.find("shop").unwrap().adaptive_limit().is_none());
    assert_eq!(registry.find("shop").unwrap().config().max_concurrent_calls(), 4);

    assert_eq!(registry.bulkhead("bank").call(|| 42).unwrap(), 42);
    assert_eq!(bank.adaptive_limit().unwrap().metrics().samples(), 1);

    let replacement = std::sync::Arc::new(bulkhead::Bulkhead::new(
        "bank",
        bulkhead::BulkheadConfig::for_pool(20),
    ));
    registry.replace("bank", replacement);
    assert!(
        registry.find("bank").unwrap().adaptive_limit().is_none(),
        "the replacement has no adaptive limit"
    );
}
