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
        let bank = a.in_registry(&registry, "bank");
        assert_eq!((bank.min_limit(), bank.limit(), bank.max_limit()), (2, 8, 12));
        assert_eq!(registry.find("bank").unwrap().metrics().max_allowed_concurrent_calls(), 8);
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
/// `find_adaptive` gives the handle whose calls record samples, `find` its engine; the
/// other instances stay static, and `replace` ends the entry's adaptive state.
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
    let bank = registry.find_adaptive("bank").expect("bank has an adaptive block");
    assert_eq!((bank.min_limit(), bank.max_limit(), bank.limit()), (2, 12, 8));
    let engine = registry.find("bank").unwrap();
    assert!(std::sync::Arc::ptr_eq(&engine, bank.bulkhead()));
    assert_eq!(engine.config().max_concurrent_calls(), 8, "the engine runs at the initial limit");
    assert!(registry.find_adaptive("shop").is_none());
    assert_eq!(registry.find("shop").unwrap().config().max_concurrent_calls(), 4);

    assert_eq!(bank.call(|| 42).unwrap(), 42);
    assert_eq!(registry.find_adaptive("bank").unwrap().adaptive_metrics().samples(), 1);

    let replacement = std::sync::Arc::new(bulkhead::Bulkhead::new(
        "bank",
        bulkhead::BulkheadConfig::for_pool(20),
    ));
    registry.replace("bank", replacement);
    assert!(registry.find_adaptive("bank").is_none(), "a replaced entry is no longer adaptive");
}
