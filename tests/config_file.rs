//! Config files in Resilience4j's Spring Boot layout (feature `serde`).
//!
//! Run with `cargo test --features serde --test config_file` (or `--all-features`).
#![cfg(feature = "serde")]

use std::time::Duration;

use bulkhead::file::{ConfigFile, FileError, Format, Report};
use bulkhead::BulkheadConfig;
use proptest::prelude::*;

fn yaml(text: &str) -> ConfigFile {
    ConfigFile::from_yaml_str(text).unwrap_or_else(|e| panic!("{e}"))
}

fn toml(text: &str) -> ConfigFile {
    ConfigFile::from_toml_str(text).unwrap_or_else(|e| panic!("{e}"))
}

/// The settings errors, as displayed.
fn yaml_errors(text: &str) -> Vec<String> {
    match ConfigFile::from_yaml_str(text) {
        Err(FileError::Invalid(errors)) => errors.iter().map(ToString::to_string).collect(),
        other => panic!("expected settings errors, got {other:?}"),
    }
}

fn toml_errors(text: &str) -> Vec<String> {
    match ConfigFile::from_toml_str(text) {
        Err(FileError::Invalid(errors)) => errors.iter().map(ToString::to_string).collect(),
        other => panic!("expected settings errors, got {other:?}"),
    }
}

fn calls(file: &ConfigFile, name: &str) -> usize {
    file.instance(name)
        .unwrap_or_else(|| panic!("no instance {name}"))
        .config()
        .max_concurrent_calls()
}

fn wait(file: &ConfigFile, name: &str) -> Duration {
    file.instance(name).unwrap_or_else(|| panic!("no instance {name}")).config().max_wait_duration()
}

fn config(calls: usize, wait_ms: u64) -> BulkheadConfig {
    BulkheadConfig::builder()
        .max_concurrent_calls(calls)
        .max_wait_duration(Duration::from_millis(wait_ms))
        .build()
        .unwrap()
}

const NESTED: &str = "
spring:
  application:
    name: shop
resilience4j:
  bulkhead:
    configs:
      shared:
        max-concurrent-calls: 8
        max-wait-duration: 50ms
    instances:
      bank:
        max-concurrent-calls: 16
        max-wait-duration: 100ms
        max-waiting-calls: 4
      reports:
        base-config: shared
";

#[test]
fn nested_yaml_reads_configs_and_instances() {
    let file = yaml(NESTED);
    assert_eq!(file.format(), Format::Yaml);
    assert!(file.has_bulkhead_section());
    let bank = file.instance("bank").unwrap();
    assert_eq!(bank.path(), "resilience4j.bulkhead.instances.bank");
    assert_eq!(bank.config().max_concurrent_calls(), 16);
    assert_eq!(bank.config().max_wait_duration(), Duration::from_millis(100));
    assert_eq!(bank.config().max_waiting_calls(), Some(4));
    assert_eq!(bank.base_config(), None);
    let reports = file.instance("reports").unwrap();
    assert_eq!(*reports.config(), config(8, 50));
    assert_eq!(reports.base_config(), Some("shared"));
    assert_eq!(file.configs().len(), 1);
    assert_eq!(file.config("shared").unwrap().path(), "resilience4j.bulkhead.configs.shared");
    let names: Vec<&str> = file.instances().iter().map(|i| i.name()).collect();
    assert_eq!(names, ["bank", "reports"]);
}

#[test]
fn dotted_section_key_reads_like_nested() {
    let dotted = yaml(
        "
resilience4j.bulkhead:
  configs:
    shared: { max-concurrent-calls: 8, max-wait-duration: 50ms }
  instances:
    bank: { max-concurrent-calls: 16, max-wait-duration: 100ms, max-waiting-calls: 4 }
    reports: { base-config: shared }
",
    );
    let nested = yaml(NESTED);
    assert_eq!(dotted.instances(), nested.instances());
    assert_eq!(dotted.configs(), nested.configs());
}

#[test]
fn fully_dotted_keys_read_like_nested() {
    let file = yaml(
        "
resilience4j.bulkhead.configs.shared.max-concurrent-calls: 8
resilience4j.bulkhead.configs.shared.max-wait-duration: 50ms
resilience4j.bulkhead.instances.bank.max-concurrent-calls: 16
resilience4j.bulkhead.instances.bank.max-wait-duration: 100ms
resilience4j.bulkhead.instances.bank.max-waiting-calls: 4
resilience4j.bulkhead.instances.reports.base-config: shared
",
    );
    let nested = yaml(NESTED);
    // Same settings; only the path of each instance section is spelt the same way too.
    assert_eq!(file.instances(), nested.instances());
}

#[test]
fn dotted_and_nested_keys_mix_in_one_file() {
    let file = yaml(
        "
resilience4j:
  bulkhead.instances:
    bank:
      max-concurrent-calls: 16
resilience4j.bulkhead.instances.bank.max-wait-duration: 100ms
",
    );
    assert_eq!(*file.instance("bank").unwrap().config(), config(16, 100));
}

#[test]
fn relaxed_binding_reads_every_spelling_as_one_key() {
    let spellings = [
        ("maxConcurrentCalls", "maxWaitDuration", "maxWaitingCalls", "baseConfig"),
        ("max-concurrent-calls", "max-wait-duration", "max-waiting-calls", "base-config"),
        ("max_concurrent_calls", "max_wait_duration", "max_waiting_calls", "base_config"),
        ("MAX_CONCURRENT_CALLS", "MAX_WAIT_DURATION", "MAX_WAITING_CALLS", "BASE_CONFIG"),
        ("maxconcurrentcalls", "MaxWaitDuration", "max-waitingCalls", "base-Config"),
    ];
    for (calls_key, wait_key, waiting_key, base_key) in spellings {
        let file = yaml(&format!(
            "
resilience4j.bulkhead:
  configs.shared.{calls_key}: 3
  instances:
    bank:
      {base_key}: shared
      {wait_key}: 20ms
      {waiting_key}: 7
"
        ));
        let bank = file.instance("bank").unwrap();
        assert_eq!(bank.config().max_concurrent_calls(), 3, "{calls_key}");
        assert_eq!(bank.config().max_wait_duration(), Duration::from_millis(20), "{wait_key}");
        assert_eq!(bank.config().max_waiting_calls(), Some(7), "{waiting_key}");
        assert_eq!(bank.base_config(), Some("shared"), "{base_key}");
    }
}

#[test]
fn relaxed_binding_applies_to_section_names_too() {
    let file = yaml("Resilience4J.BULKHEAD.Instances.bank.max-concurrent-calls: 5");
    assert_eq!(calls(&file, "bank"), 5);
}

#[test]
fn instance_names_are_kept_as_written() {
    let file = yaml("resilience4j.bulkhead.instances: { paymentGateway: {}, payment-gateway: {} }");
    let names: Vec<&str> = file.instances().iter().map(|i| i.name()).collect();
    assert_eq!(names, ["payment-gateway", "paymentGateway"]);
}

#[test]
fn one_key_written_twice_in_relaxed_forms_is_an_error() {
    let errors = yaml_errors(
        "
resilience4j.bulkhead.instances.bank:
  maxConcurrentCalls: 5
  max-concurrent-calls: 6
",
    );
    assert_eq!(
        errors,
        ["resilience4j.bulkhead.instances.bank.max-concurrent-calls: 6 is set twice (also as \
          resilience4j.bulkhead.instances.bank.maxConcurrentCalls)"]
    );
}

#[test]
fn backends_is_an_alias_of_instances() {
    let file = yaml(
        "
resilience4j.bulkhead:
  backends:
    bank: { max-concurrent-calls: 16 }
  instances:
    reports: { max-concurrent-calls: 2 }
",
    );
    assert_eq!(calls(&file, "bank"), 16);
    assert_eq!(file.instance("bank").unwrap().path(), "resilience4j.bulkhead.backends.bank");
    assert_eq!(calls(&file, "reports"), 2);
}

#[test]
fn backends_and_instances_setting_the_same_key_is_an_error() {
    let errors = yaml_errors(
        "
resilience4j.bulkhead:
  backends.bank.max-concurrent-calls: 16
  instances.bank.max-concurrent-calls: 8
",
    );
    assert_eq!(
        errors,
        ["resilience4j.bulkhead.instances.bank.max-concurrent-calls: 8 is set twice (also as \
          resilience4j.bulkhead.backends.bank.max-concurrent-calls)"]
    );
}

#[test]
fn durations_are_read_as_spring_writes_them() {
    let cases: &[(&str, Duration)] = &[
        ("100ms", Duration::from_millis(100)),
        ("1s", Duration::from_secs(1)),
        ("2m", Duration::from_secs(120)),
        ("1h", Duration::from_secs(3600)),
        ("1d", Duration::from_secs(86_400)),
        ("500us", Duration::from_micros(500)),
        ("10ns", Duration::from_nanos(10)),
        ("10MS", Duration::from_millis(10)),
        ("PT0.1S", Duration::from_millis(100)),
        ("PT1M30S", Duration::from_secs(90)),
        ("pt0.25s", Duration::from_millis(250)),
        ("P1DT2H", Duration::from_secs(93_600)),
        ("PT0S", Duration::ZERO),
        ("250", Duration::from_millis(250)),
        ("\"250\"", Duration::from_millis(250)),
        ("0", Duration::ZERO),
        ("'+5s'", Duration::from_secs(5)),
    ];
    for (written, expected) in cases {
        let file = yaml(&format!("resilience4j.bulkhead.instances.a.max-wait-duration: {written}"));
        assert_eq!(wait(&file, "a"), *expected, "{written}");
        let file = toml(&format!(
            "[resilience4j.bulkhead.instances.a]\nmax-wait-duration = {}",
            if written.starts_with(['"', '\'']) || written.parse::<u64>().is_ok() {
                written.replace('\'', "\"")
            } else {
                format!("\"{written}\"")
            }
        ));
        assert_eq!(wait(&file, "a"), *expected, "TOML {written}");
    }
}

#[test]
fn bad_durations_name_the_key_path_and_the_value() {
    let path = "resilience4j.bulkhead.instances.sber.max-wait-duration";
    let not_a_duration = "is not a duration (write 100ms, 1s, 2m, PT0.1S, or a whole number of \
                          milliseconds)";
    let cases = [
        ("-5ms", format!("{path}: \"-5ms\" is negative")),
        ("-5", format!("{path}: -5 is negative")),
        ("'-PT1S'", format!("{path}: \"-PT1S\" is negative")),
        ("1.5s", format!("{path}: \"1.5s\" {not_a_duration}")),
        ("0.5", format!("{path}: 0.5 {not_a_duration}")),
        ("soon", format!("{path}: \"soon\" {not_a_duration}")),
        ("5 sec", format!("{path}: \"5 sec\" {not_a_duration}")),
        ("true", format!("{path}: true {not_a_duration}")),
        ("[1, 2]", format!("{path}: [1, 2] {not_a_duration}")),
        ("99999999999999999999d", format!("{path}: \"99999999999999999999d\" is too large")),
        ("", format!("{path}: null has no value")),
    ];
    for (written, expected) in cases {
        let errors = yaml_errors(&format!(
            "resilience4j.bulkhead.instances.sber.max-wait-duration: {written}"
        ));
        assert_eq!(errors, [expected], "{written}");
    }
}

#[test]
fn bad_call_limits_name_the_key_path_and_the_value() {
    let path = "resilience4j.bulkhead.instances.bank.max-concurrent-calls";
    let cases = [
        ("-1", format!("{path}: -1 is negative")),
        ("1073741824", format!("{path}: 1073741824 is too large: the engine's maximum is 1073741823")),
        (
            "'99999999999999999999999'",
            format!(
                "{path}: \"99999999999999999999999\" is too large: the engine's maximum is 1073741823"
            ),
        ),
        ("2.5", format!("{path}: 2.5 is not a whole number")),
        ("many", format!("{path}: \"many\" is not a whole number")),
        ("true", format!("{path}: true is not a whole number")),
        ("[16]", format!("{path}: [16] is not a whole number")),
        ("{a: 1}", format!("{path}: {{...}} is a map, not a single value")),
    ];
    for (written, expected) in cases {
        let errors = yaml_errors(&format!(
            "resilience4j.bulkhead.instances.bank.max-concurrent-calls: {written}"
        ));
        assert_eq!(errors, [expected], "{written}");
    }
    // The largest limit the engine takes is accepted; a digit string too.
    let file = yaml("resilience4j.bulkhead.instances: { a: { max-concurrent-calls: 1073741823 }, b: { max-concurrent-calls: '7' }, c: { max-concurrent-calls: 0 } }");
    assert_eq!(calls(&file, "a"), BulkheadConfig::MAX_CONCURRENT_CALLS);
    assert_eq!(calls(&file, "b"), 7);
    assert_eq!(calls(&file, "c"), 0);
}

#[test]
fn max_waiting_calls_is_read_and_checked() {
    let file = yaml("resilience4j.bulkhead.instances.a.max-waiting-calls: 0");
    assert_eq!(file.instance("a").unwrap().config().max_waiting_calls(), Some(0));
    let errors = yaml_errors("resilience4j.bulkhead.instances.a.max-waiting-calls: -3");
    assert_eq!(errors, ["resilience4j.bulkhead.instances.a.max-waiting-calls: -3 is negative"]);
    let file = yaml("resilience4j.bulkhead.instances.a: {}");
    assert_eq!(file.instance("a").unwrap().config().max_waiting_calls(), None);
}

#[test]
fn resilience4j_keys_without_meaning_here_are_ignored_with_their_path() {
    let file = yaml(
        "
resilience4j.bulkhead:
  bulkhead-aspect-order: 1
  configs.default:
    writable-stack-trace-enabled: false
  instances.bank:
    eventConsumerBufferSize: 10
    fair_call_handling_enabled: true
    max-concurrent-calls: 4
",
    );
    let ignored: Vec<(&str, &str)> = file.ignored().iter().map(|i| (i.path(), i.value())).collect();
    assert_eq!(
        ignored,
        [
            ("resilience4j.bulkhead.bulkhead-aspect-order", "1"),
            ("resilience4j.bulkhead.configs.default.writable-stack-trace-enabled", "false"),
            ("resilience4j.bulkhead.instances.bank.eventConsumerBufferSize", "10"),
            ("resilience4j.bulkhead.instances.bank.fair_call_handling_enabled", "true"),
        ]
    );
    assert!(file.ignored().iter().all(|i| !i.reason().is_empty()));
    assert_eq!(calls(&file, "bank"), 4);
}

#[test]
fn a_typo_is_an_error_naming_its_full_path() {
    let errors = yaml_errors(
        "
resilience4j:
  bulkhead:
    configs:
      shared:
        max-wait-duraton: 10ms
    instances:
      bank:
        max-concurent-calls: 16
        maxConcurrentCall: 16
        colour: blue
",
    );
    assert_eq!(
        errors,
        [
            "resilience4j.bulkhead.configs.shared.max-wait-duraton: \"10ms\" is not a bulkhead setting (did you mean max-wait-duration?)",
            "resilience4j.bulkhead.instances.bank.max-concurent-calls: 16 is not a bulkhead setting (did you mean max-concurrent-calls?)",
            "resilience4j.bulkhead.instances.bank.maxConcurrentCall: 16 is not a bulkhead setting (did you mean max-concurrent-calls?)",
            "resilience4j.bulkhead.instances.bank.colour: \"blue\" is not a bulkhead setting",
        ]
    );
}

#[test]
fn an_unknown_section_key_is_an_error() {
    let errors = yaml_errors(
        "
resilience4j.bulkhead:
  instance:
    bank: { max-concurrent-calls: 1 }
  max-concurrent-calls: 3
",
    );
    assert_eq!(
        errors,
        [
            "resilience4j.bulkhead.instance: {...} is not a bulkhead section (configs, instances, backends or tags) (did you mean instances?)",
            "resilience4j.bulkhead.max-concurrent-calls: 3 is not a bulkhead section (configs, instances, backends or tags)",
        ]
    );
}

#[test]
fn scalars_where_maps_belong_are_errors() {
    let errors = yaml_errors(
        "
resilience4j.bulkhead:
  configs: 5
  instances:
    bank: 16
",
    );
    assert_eq!(
        errors,
        [
            "resilience4j.bulkhead.configs: 5 is not a map of names",
            "resilience4j.bulkhead.instances.bank: 16 is not a map of bulkhead settings",
        ]
    );
    assert_eq!(
        yaml_errors("resilience4j.bulkhead: on"),
        ["resilience4j.bulkhead: \"on\" is not a map of bulkhead settings"]
    );
}

#[test]
fn empty_sections_and_entries_are_fine() {
    let file = yaml(
        "
resilience4j:
  bulkhead:
    configs:
    instances:
      bank:
      reports: {}
",
    );
    assert_eq!(*file.instance("bank").unwrap().config(), BulkheadConfig::default());
    assert_eq!(*file.instance("reports").unwrap().config(), BulkheadConfig::default());
    assert!(file.configs().is_empty());
    // An empty file is an error (issue 18), unless the caller allows a missing section.
    assert_eq!(
        yaml_errors("")[0].split(" is required").next(),
        Some("resilience4j.bulkhead: (the file is empty)")
    );
    let empty = ConfigFile::loader().allow_missing_section(true).parse("", Format::Yaml).unwrap();
    assert!(empty.instances().is_empty());
    assert!(!empty.has_bulkhead_section());
}

#[test]
fn an_unknown_base_config_is_an_error_naming_it() {
    let errors = yaml_errors(
        "
resilience4j.bulkhead:
  configs.shared.base-config: missing-too
  instances.bank.base-config: sharde
",
    );
    assert_eq!(
        errors,
        [
            "resilience4j.bulkhead.configs.shared.base-config: \"missing-too\" names no config under resilience4j.bulkhead.configs",
            "resilience4j.bulkhead.instances.bank.base-config: \"sharde\" names no config under resilience4j.bulkhead.configs",
        ]
    );
}

#[test]
fn base_config_chains_resolve_nearest_first() {
    let file = yaml(
        "
resilience4j.bulkhead:
  configs:
    root: { max-concurrent-calls: 10, max-wait-duration: 10ms, max-waiting-calls: 3 }
    middle: { base-config: root, max-wait-duration: 20ms }
    leaf: { base-config: middle, max-concurrent-calls: 5 }
  instances:
    bank: { base-config: leaf, max-waiting-calls: 1 }
",
    );
    let bank = file.instance("bank").unwrap();
    assert_eq!(bank.base_chain(), ["leaf", "middle", "root"]);
    assert_eq!(bank.config().max_concurrent_calls(), 5); // leaf
    assert_eq!(bank.config().max_wait_duration(), Duration::from_millis(20)); // middle
    assert_eq!(bank.config().max_waiting_calls(), Some(1)); // the instance itself
    let leaf = file.config("leaf").unwrap();
    assert_eq!(leaf.base_chain(), ["middle", "root"]);
    assert_eq!(leaf.config().max_waiting_calls(), Some(3));
}

#[test]
fn base_config_cycles_are_an_error_naming_the_chain() {
    let errors = yaml_errors(
        "
resilience4j.bulkhead:
  configs:
    a: { base-config: b }
    b: { base-config: c }
    c: { base-config: a }
    self: { base-config: self }
    ok: { max-concurrent-calls: 1 }
  instances:
    bank: { base-config: a }
    fine: { base-config: ok }
",
    );
    assert_eq!(
        errors,
        [
            "resilience4j.bulkhead.configs.c.base-config: \"a\" closes a cycle of base configs: a -> b -> c -> a",
            "resilience4j.bulkhead.configs.self.base-config: \"self\" closes a cycle of base configs: self -> self",
        ]
    );
    // Lenient reading keeps what resolves.
    let report = Report::parse(
        "resilience4j.bulkhead: { configs: { a: { base-config: a } }, instances: { x: { base-config: a }, y: {} } }",
        Format::Yaml,
    )
    .unwrap();
    assert_eq!(report.errors().len(), 1);
    let names: Vec<&str> = report.file().instances().iter().map(|i| i.name()).collect();
    assert_eq!(names, ["y"]);
}

#[test]
fn configs_default_applies_to_instances_without_base_config() {
    let file = yaml(
        "
resilience4j.bulkhead:
  configs:
    default: { max-concurrent-calls: 16, max-wait-duration: 100ms }
    other: { max-concurrent-calls: 2 }
    on-default: { base-config: default, max-wait-duration: 0 }
  instances:
    implicit: {}
    tuned: { max-wait-duration: 5ms }
    explicit: { base-config: other }
    chained: { base-config: on-default }
    empty-base: { base-config: '' }
",
    );
    assert_eq!(*file.instance("implicit").unwrap().config(), config(16, 100));
    assert_eq!(file.instance("implicit").unwrap().base_config(), Some("default"));
    assert_eq!(*file.instance("tuned").unwrap().config(), config(16, 5));
    // An explicit base-config replaces configs.default; a config without base-config starts
    // from the built-in defaults (25 calls, no wait).
    assert_eq!(*file.instance("explicit").unwrap().config(), config(2, 0));
    assert_eq!(*file.instance("chained").unwrap().config(), config(16, 0));
    assert_eq!(*file.instance("empty-base").unwrap().config(), config(16, 100));
    assert_eq!(file.default_config(), config(16, 100));
}

#[test]
fn without_configs_default_instances_start_from_built_in_defaults() {
    let file = yaml("resilience4j.bulkhead.instances.bank.max-wait-duration: 10ms");
    assert_eq!(*file.instance("bank").unwrap().config(), config(25, 10));
    assert_eq!(file.instance("bank").unwrap().base_config(), None);
    assert_eq!(file.default_config(), BulkheadConfig::default());
}

#[test]
fn everything_outside_the_bulkhead_sections_is_left_alone() {
    let file = yaml(
        "
spring:
  application.name: shop
  datasource: { url: 'jdbc:postgresql://db/shop', hikari.maximum-pool-size: ten }
logging.level: { root: INFO, com.example: DEBUG }
management.endpoints.web.exposure.include: [health, prometheus]
server.port: not-a-number
resilience4j:
  circuitbreaker:
    instances.bank: { sliding-window-size: 20, max-concurrent-calls: nonsense, typo-key: 1 }
  retry.instances.bank.max-attempts: -3
  ratelimiter: 5
  bulkhead.instances.bank.max-concurrent-calls: 16
resilience4jbulkhead.instances.x.max-concurrent-calls: -1
client.bank.anything-else: [1, 2]
",
    );
    assert_eq!(file.instances().len(), 1);
    assert_eq!(calls(&file, "bank"), 16);
    assert!(file.ignored().is_empty());
}

#[test]
fn all_errors_are_collected() {
    let errors = yaml_errors(
        "
resilience4j.bulkhead:
  configs.shared: { max-concurrent-calls: -1, max-wait-duration: later }
  instances:
    a: { max-concurrent-calls: 2000000000, base-config: nope }
    b: { max-waiting-calls: x, typo: 1, type: FORKJOIN }
",
    );
    assert_eq!(errors.len(), 7, "{errors:#?}");
    for e in &errors {
        assert!(e.starts_with("resilience4j.bulkhead."), "{e}");
    }
}

#[test]
fn type_semaphore_is_accepted_and_other_types_are_checked() {
    let file =
        yaml("resilience4j.bulkhead.instances.a: { type: SEMAPHORE, max-concurrent-calls: 3 }");
    assert_eq!(calls(&file, "a"), 3);
    assert!(file.check().is_empty());
    // THREADPOOL loads (the rules report it); an unknown type is an error.
    assert!(ConfigFile::from_yaml_str("resilience4j.bulkhead.instances.a.type: THREADPOOL").is_ok());
    assert_eq!(
        yaml_errors("resilience4j.bulkhead.instances.a.type: FORKJOIN"),
        ["resilience4j.bulkhead.instances.a.type: \"FORKJOIN\" is not a bulkhead type (SEMAPHORE or THREADPOOL)"]
    );
}

#[test]
fn names_with_dots_use_brackets() {
    let file = yaml(
        "
resilience4j.bulkhead.instances:
  '[api.bank]': { max-concurrent-calls: 3 }
resilience4j.bulkhead.instances[pay.gw].max-concurrent-calls: 4
",
    );
    assert_eq!(calls(&file, "api.bank"), 3);
    assert_eq!(
        file.instance("api.bank").unwrap().path(),
        "resilience4j.bulkhead.instances.[api.bank]"
    );
    assert_eq!(calls(&file, "pay.gw"), 4);
    assert_eq!(
        yaml_errors("resilience4j.bulkhead.instances.[api.bank].max-concurrent-calls: -1"),
        ["resilience4j.bulkhead.instances.[api.bank].max-concurrent-calls: -1 is negative"]
    );
}

#[test]
fn yaml_merge_keys_are_honoured() {
    let file = yaml(
        "
defaults: &defaults
  max-concurrent-calls: 6
  max-wait-duration: 30ms
resilience4j.bulkhead.instances:
  a:
    <<: *defaults
  b:
    <<: *defaults
    max-concurrent-calls: 2
",
    );
    assert_eq!(*file.instance("a").unwrap().config(), config(6, 30));
    assert_eq!(*file.instance("b").unwrap().config(), config(2, 30));
}

#[test]
fn later_documents_override_earlier_ones_and_profile_documents_are_skipped() {
    let file = yaml(
        "
resilience4j.bulkhead.instances.bank: { max-concurrent-calls: 16, max-wait-duration: 100ms }
---
resilience4j.bulkhead.instances.bank.max-concurrent-calls: 12
---
spring.config.activate.on-profile: prod
resilience4j.bulkhead.instances.bank.max-concurrent-calls: 99
---
spring.profiles: test
resilience4j.bulkhead.instances.bank.max-concurrent-calls: -1
",
    );
    assert_eq!(*file.instance("bank").unwrap().config(), config(12, 100));
    let ignored: Vec<String> = file.ignored().iter().map(ToString::to_string).collect();
    assert_eq!(ignored.len(), 2, "{ignored:?}");
    assert!(
        ignored[0].starts_with("spring.config.activate.on-profile: \"prod\" ignored: document 3"),
        "{ignored:?}"
    );
    assert!(ignored[1].starts_with("spring.profiles: \"test\" ignored: document 4"), "{ignored:?}");
}

#[test]
fn registry_tags_are_read() {
    let file = yaml("resilience4j.bulkhead.tags: { service: payments, tier: 1 }");
    assert_eq!(file.tags().get("service").map(String::as_str), Some("payments"));
    assert_eq!(file.tags().get("tier").map(String::as_str), Some("1"));
    assert_eq!(
        yaml_errors("resilience4j.bulkhead.tags.team: [a, b]"),
        ["resilience4j.bulkhead.tags.team: [\"a\", \"b\"] is not a tag value"]
    );
}

#[test]
fn syntax_errors_are_reported_as_such() {
    let err = ConfigFile::from_yaml_str("resilience4j:\n  bulkhead: [unclosed\n").unwrap_err();
    assert!(matches!(err, FileError::Syntax { format: Format::Yaml, .. }), "{err:?}");
    assert!(err.to_string().starts_with("YAML syntax error: "), "{err}");
    let err = ConfigFile::from_yaml_str("a: 1\na: 2\n").unwrap_err();
    assert!(err.to_string().contains("duplicated key"), "{err}");
    let err = ConfigFile::from_toml_str("[resilience4j.bulkhead\n").unwrap_err();
    assert!(matches!(err, FileError::Syntax { format: Format::Toml, .. }), "{err:?}");
    assert!(err.errors().is_empty());
}

// ---- TOML ----

#[test]
fn toml_tables_read_like_nested_yaml() {
    let file = toml(
        r#"
[spring.application]
name = "shop"

[resilience4j.bulkhead.configs.shared]
max-concurrent-calls = 8
max-wait-duration = "50ms"

[resilience4j.bulkhead.instances.bank]
max-concurrent-calls = 16
max-wait-duration = "100ms"
max-waiting-calls = 4

[resilience4j.bulkhead.instances.reports]
base-config = "shared"
"#,
    );
    assert_eq!(file.format(), Format::Toml);
    assert_eq!(file.instances(), yaml(NESTED).instances());
}

#[test]
fn toml_dotted_and_quoted_keys_read_like_dotted_yaml() {
    let file = toml(
        r#"
"resilience4j.bulkhead.instances.bank.max-concurrent-calls" = 16
resilience4j.bulkhead.instances.bank.max-wait-duration = 100
"resilience4j.bulkhead".backends.reports = { maxConcurrentCalls = 2, MAX_WAIT_DURATION = "PT0.1S" }
"#,
    );
    assert_eq!(*file.instance("bank").unwrap().config(), config(16, 100));
    assert_eq!(*file.instance("reports").unwrap().config(), config(2, 100));
}

#[test]
fn toml_errors_read_like_yaml_errors() {
    assert_eq!(
        toml_errors("[resilience4j.bulkhead.instances.sber]\nmax-wait-duration = \"-5ms\""),
        ["resilience4j.bulkhead.instances.sber.max-wait-duration: \"-5ms\" is negative"]
    );
    assert_eq!(
        toml_errors(
            "[resilience4j.bulkhead.instances.bank]\nmax-concurent-calls = 16\nmax-concurrent-calls = 1.5\nmax-wait-duration = 2024-01-01"
        ),
        [
            "resilience4j.bulkhead.instances.bank.max-concurent-calls: 16 is not a bulkhead setting (did you mean max-concurrent-calls?)",
            "resilience4j.bulkhead.instances.bank.max-concurrent-calls: 1.5 is not a whole number",
            "resilience4j.bulkhead.instances.bank.max-wait-duration: 2024-01-01 is not a duration (write 100ms, 1s, 2m, PT0.1S, or a whole number of milliseconds)",
        ]
    );
    assert_eq!(
        toml_errors("[resilience4j.bulkhead.instances.bank]\nbase-config = \"nope\""),
        ["resilience4j.bulkhead.instances.bank.base-config: \"nope\" names no config under resilience4j.bulkhead.configs"]
    );
}

#[test]
fn toml_ignored_keys_chains_and_cycles() {
    let file = toml(
        r#"
[resilience4j.bulkhead.configs.default]
max-concurrent-calls = 16
writable-stack-trace-enabled = false
[resilience4j.bulkhead.configs.slow]
base-config = "default"
max-wait-duration = "PT1S"
[resilience4j.bulkhead.instances.bank]
[resilience4j.bulkhead.instances.reports]
base-config = "slow"
"#,
    );
    assert_eq!(*file.instance("bank").unwrap().config(), config(16, 0));
    assert_eq!(*file.instance("reports").unwrap().config(), config(16, 1000));
    assert_eq!(file.instance("reports").unwrap().base_chain(), ["slow", "default"]);
    assert_eq!(
        file.ignored()[0].path(),
        "resilience4j.bulkhead.configs.default.writable-stack-trace-enabled"
    );
    assert_eq!(
        toml_errors("[resilience4j.bulkhead.configs]\na = { base-config = \"b\" }\nb = { base-config = \"a\" }"),
        ["resilience4j.bulkhead.configs.b.base-config: \"a\" closes a cycle of base configs: a -> b -> a"]
    );
}

// ---- files ----

fn example(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples").join(name)
}

#[test]
fn example_files_load_and_agree() {
    let yml = ConfigFile::from_path(example("application.yml")).unwrap();
    let tml = ConfigFile::from_path(example("application.toml")).unwrap();
    assert_eq!(yml.format(), Format::Yaml);
    assert_eq!(tml.format(), Format::Toml);
    let summary = |f: &ConfigFile| -> Vec<(String, BulkheadConfig, Vec<String>)> {
        f.instances()
            .iter()
            .map(|i| (i.name().to_owned(), i.config().clone(), i.base_chain().to_vec()))
            .collect()
    };
    assert_eq!(summary(&yml), summary(&tml));
    assert_eq!(summary(&yml).len(), 3);
    assert!(yml.check().is_empty(), "{:?}", yml.check());
    assert!(tml.check().is_empty(), "{:?}", tml.check());
}

#[test]
fn from_path_reports_io_and_unknown_extensions() {
    let err = ConfigFile::from_path(example("no-such-file.yml")).unwrap_err();
    assert!(matches!(err, FileError::Io { .. }), "{err:?}");
    assert!(std::error::Error::source(&err).is_some());
    let err = ConfigFile::from_path(example("config_file.rs")).unwrap_err();
    assert!(matches!(err, FileError::UnknownFormat { .. }), "{err:?}");
    assert!(err.to_string().contains("use .yml, .yaml or .toml"), "{err}");
}

// ---- garbage never panics ----

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    let deep = "[".repeat(100_000);
    assert!(matches!(ConfigFile::from_yaml_str(&deep), Err(FileError::Syntax { .. })));
    let deep_map = "a:\n".to_owned()
        + &(1..2000).map(|i| format!("{}a:\n", " ".repeat(i))).collect::<String>();
    let err = ConfigFile::from_yaml_str(&deep_map).unwrap_err();
    assert!(err.to_string().contains("nested deeper than 64 levels at line 65"), "{err}");
    let deep_list =
        (0..100_000).map(|i| format!("{}-\n", " ".repeat(i % 7000))).collect::<String>();
    let _ = ConfigFile::from_yaml_str(&deep_list);
    let compact = "- ".repeat(100_000) + "x";
    assert!(matches!(ConfigFile::from_yaml_str(&compact), Err(FileError::Syntax { .. })));
    // A "billion laughs": every level repeats the one before ten times.
    let mut bomb = String::from("l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..9 {
        bomb += &format!("l{i}: &l{i} [{}]\n", vec![format!("*l{}", i - 1); 10].join(", "));
    }
    let err = ConfigFile::from_yaml_str(&bomb).unwrap_err();
    assert!(err.to_string().contains("once aliases are expanded"), "{err}");
    let deep_toml = format!("a = {}", "[".repeat(100_000));
    assert!(matches!(ConfigFile::from_toml_str(&deep_toml), Err(FileError::Syntax { .. })));
    let deep_inline = format!("a = {}", "{ b = ".repeat(100_000));
    assert!(ConfigFile::from_toml_str(&deep_inline).is_err());
}

/// Every parser entry point, leniently and strictly; none may panic.
fn parse_everything(text: &str) {
    for format in [Format::Yaml, Format::Toml] {
        let _ = ConfigFile::parse(text, format);
        if let Ok(report) = Report::parse(text, format) {
            for e in report.errors() {
                assert!(!e.key().is_empty());
            }
            let _ = report.has_errors();
        }
    }
    let _ = bulkhead::file::parse_duration(text);
    let _ = bulkhead::BulkheadRegistry::from_yaml_str(text);
    let _ = bulkhead::BulkheadRegistry::from_toml_str(text);
}

/// Pieces of real files, to reach deep into the binder rather than stop at a syntax error.
fn fragment() -> impl Strategy<Value = String> {
    let keys = prop::sample::select(vec![
        "resilience4j.bulkhead",
        "resilience4j.bulkhead.instances",
        "resilience4j.bulkhead.configs",
        "resilience4j.bulkhead.backends.x",
        "resilience4j.thread-pool-bulkhead.instances.x",
        "client.x.max-concurrent",
        "instances",
        "configs",
        "x",
        "default",
        "[a.b]",
        "max-concurrent-calls",
        "maxWaitDuration",
        "MAX_WAITING_CALLS",
        "base-config",
        "type",
        "tags",
        "writable-stack-trace-enabled",
        "queue-order",
        "queueTarget",
        "queue_interval",
        "sheddable-headroom",
        "<<",
        "spring.config.activate.on-profile",
    ]);
    let values = prop::sample::select(vec![
        "",
        "16",
        "-1",
        "1073741824",
        "99999999999999999999",
        "2.5",
        "100ms",
        "-5ms",
        "PT0.1S",
        "PT-1S",
        "P",
        "x",
        "default",
        "THREADPOOL",
        "SEMAPHORE",
        "lifo",
        "adaptive-lifo",
        "0",
        "true",
        "[1, 2]",
        "{}",
        "~",
        "'[a.b]'",
        "&a 1",
        "*a",
        "---",
        "1_000",
    ]);
    (0usize..4, keys, values)
        .prop_map(|(indent, k, v)| format!("{}{k}: {v}\n", "  ".repeat(indent)))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_text_never_panics(text in "\\PC{0,200}") {
        parse_everything(&text);
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        parse_everything(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn random_yaml_like_files_never_panic(lines in prop::collection::vec(fragment(), 0..24)) {
        let text: String = lines.concat();
        parse_everything(&text);
        // The same lines as TOML-ish `key = value`.
        parse_everything(&text.replace(": ", " = "));
    }

    #[test]
    fn durations_written_any_way_never_panic(text in "[-+]?[pP]?[tT]?[0-9.,]{0,25}[a-zA-Z]{0,3}") {
        let file = format!("resilience4j.bulkhead.instances.a.max-wait-duration: '{text}'");
        match ConfigFile::from_yaml_str(&file) {
            Ok(f) => prop_assert_eq!(f.instances().len(), 1),
            Err(e) => {
                let errors = e.errors();
                prop_assert_eq!(errors.len(), 1);
                prop_assert_eq!(errors[0].key(), "resilience4j.bulkhead.instances.a.max-wait-duration");
            }
        }
    }
}

/// The YAML shown in docs/config-files.md (the config-file guide) is a working file.
#[test]
fn the_documented_yaml_snippet_loads_and_passes_the_rules() {
    let doc = include_str!("../docs/config-files.md");
    let start = doc.find("```yaml\n").expect("a yaml block") + "```yaml\n".len();
    let end = start + doc[start..].find("```").unwrap();
    let file = yaml(&doc[start..end]);
    let names: Vec<&str> = file.instances().iter().map(|i| i.name()).collect();
    assert_eq!(names, ["bank", "reports"]);
    assert_eq!(*file.instance("bank").unwrap().config(), config(16, 100));
    assert_eq!(*file.instance("reports").unwrap().config(), config(2, 0));
    assert!(file.check().is_empty(), "{:?}", file.check());
}

/// The settings errors as (key, value) pairs.
fn yaml_error_pairs(text: &str) -> Vec<(String, String)> {
    match ConfigFile::from_yaml_str(text) {
        Err(FileError::Invalid(errors)) => {
            errors.iter().map(|e| (e.key().to_owned(), e.value().to_owned())).collect()
        }
        other => panic!("expected settings errors, got {other:?}"),
    }
}

/// The keyed bulkhead "tenants" configured from `file`, with a total of `total` slots and
/// at most `max_keys` keys.
fn tenants_from<K>(
    file: &ConfigFile,
    total: usize,
    max_keys: usize,
) -> Result<bulkhead::keyed::KeyedBulkhead<K>, bulkhead::ConfigError>
where
    K: Eq + std::hash::Hash + Clone + std::fmt::Display + std::str::FromStr,
{
    bulkhead::keyed::KeyedBulkhead::<K>::builder("tenants")
        .configs_from_file(file)?
        .total(BulkheadConfig::builder().max_concurrent_calls(total).build()?)
        .max_keys(max_keys)
        .build()
}

#[test]
fn guaranteed_shares_from_a_file_default_and_per_key() {
    let file = yaml(
        "
resilience4j.bulkhead:
  configs.gold: { guaranteedShare: 3 }
  instances:
    tenants: { max-concurrent-calls: 8, guaranteed-share: 1 }
    tenants/42: { base-config: gold }
    tenants/7: { guaranteed_share: 0 }
",
    );
    let gold = file.instance("tenants/42").unwrap();
    assert_eq!(gold.guaranteed_share(), Some(3), "inherited through base-config");
    assert_eq!(
        gold.origin("guaranteed-share"),
        Some("resilience4j.bulkhead.configs.gold.guaranteedShare")
    );
    let tenants = tenants_from::<u64>(&file, 8, 4).unwrap();
    assert_eq!(tenants.guaranteed_share_of(&42), 3);
    assert_eq!(tenants.guaranteed_share_of(&7), 0, "a key may opt out of the default");
    assert_eq!(tenants.guaranteed_share_of(&1), 1);

    let file = toml(
        "[resilience4j.bulkhead.instances.tenants]\nguaranteed-share = 2\n\
         [resilience4j.bulkhead.instances.\"tenants/5\"]\nguaranteed-share = 4\n",
    );
    assert_eq!(file.instance("tenants").unwrap().guaranteed_share(), Some(2));
    assert_eq!(file.instance("tenants/5").unwrap().guaranteed_share(), Some(4));
}

#[test]
fn bad_guaranteed_shares_name_the_key_and_the_value() {
    let path = "resilience4j.bulkhead.instances.tenants.guaranteed-share";
    for (value, problem) in [
        ("-1", "is negative"),
        ("two", "is not a whole number"),
        ("1.5", "is not a whole number"),
        ("4294967296", "is too large"),
        ("~", "has no value"),
        ("[1, 2]", ""),
    ] {
        let text = format!("resilience4j.bulkhead.instances.tenants.guaranteed-share: {value}");
        let errors = yaml_errors(&text);
        assert_eq!(errors.len(), 1, "{value}: {errors:?}");
        assert!(errors[0].starts_with(path), "{value}: {errors:?}");
        assert!(errors[0].contains(problem), "{value}: {errors:?}");
        let pairs = yaml_error_pairs(&text);
        assert_eq!(pairs[0].0, path, "{value}");
    }
    let pairs = yaml_error_pairs("resilience4j.bulkhead.instances.tenants/9.guaranteed-share: -3");
    assert_eq!(
        pairs,
        [(
            "resilience4j.bulkhead.instances.tenants/9.guaranteed-share".to_owned(),
            "-3".to_owned()
        )]
    );
    // The largest share parses (the check against the total is the builder's).
    let file = yaml("resilience4j.bulkhead.instances.tenants.guaranteed-share: 4294967295");
    assert_eq!(file.instance("tenants").unwrap().guaranteed_share(), Some(u32::MAX));
}

#[test]
fn guaranteed_shares_from_a_file_above_the_total_name_the_keys_and_values() {
    use bulkhead::keyed::KeyedBulkhead;
    let file = yaml(
        "
resilience4j.bulkhead.instances:
  tenants: { guaranteed-share: 2 }
  tenants/gold: { guaranteed-share: 5 }
  tenants/silver: { guaranteed-share: 3 }
",
    );
    let err = tenants_from::<String>(&file, 10, 2).unwrap_err();
    assert_eq!(err.key(), "guaranteed_share");
    assert_eq!(err.value(), "gold=5, silver=3, default=2 x 2 keys (max_keys)");
    assert!(err.to_string().contains("sum to 12, above the total's 10"), "{err}");
    // Without a total a share means nothing: an error too, not a silent no-op.
    let err = KeyedBulkhead::<String>::builder("tenants")
        .configs_from_file(&file)
        .unwrap()
        .build()
        .unwrap_err();
    assert_eq!(err.key(), "guaranteed_share");
    assert!(err.value().contains("gold=5"), "{err}");
}
