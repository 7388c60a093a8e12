//! The style guide's rules as checks on a config file (feature `serde`).
//!
//! Run with `cargo test --features serde --test rules` (or `--all-features`).
#![cfg(feature = "serde")]

use bulkhead::file::{rules, ConfigFile, Format, Loader, Report, Severity};
use bulkhead::BulkheadConfig;

/// (rule, severity, path) of every finding. Some rules are about other sections
/// (`resilience4j.thread-pool-bulkhead`, `client.*`), so a file may have no bulkhead section.
fn findings(text: &str, format: Format) -> Vec<(&'static str, Severity, String)> {
    let file = Loader::new()
        .allow_missing_section(true)
        .parse(text, format)
        .unwrap_or_else(|e| panic!("{e}"));
    file.check().iter().map(|f| (f.rule(), f.severity(), f.path().to_owned())).collect()
}

fn yaml(text: &str) -> Vec<(&'static str, Severity, String)> {
    findings(text, Format::Yaml)
}

fn toml(text: &str) -> Vec<(&'static str, Severity, String)> {
    findings(text, Format::Toml)
}

fn err(rule: &'static str, path: &str) -> (&'static str, Severity, String) {
    (rule, Severity::Error, path.to_owned())
}

fn warn(rule: &'static str, path: &str) -> (&'static str, Severity, String) {
    (rule, Severity::Warning, path.to_owned())
}

#[test]
fn rule_ids_are_stable() {
    assert_eq!(rules::THREAD_POOL, "R-RES-BH-X1");
    assert_eq!(rules::POOL_SIZE, "R-RES-BH-3");
    assert_eq!(rules::OWN_LAYER, "R-RES-BH-1");
    assert_eq!(rules::MAX_WAIT, "R-RES-BH-WAIT");
}

#[test]
fn a_file_following_the_guide_has_no_findings() {
    let text = "
client.bank.max-concurrent: 20
resilience4j.bulkhead.instances.bank: { max-concurrent-calls: 16, max-wait-duration: 100ms }
";
    assert_eq!(yaml(text), []);
}

// ---- R-RES-BH-X1 ----

#[test]
fn threadpool_type_is_an_error_in_instances_and_configs() {
    let found = yaml(
        "
resilience4j.bulkhead:
  configs.pooled.type: THREADPOOL
  instances:
    bank: { type: threadpool }
    ledger: { type: thread-pool }
    reports: { type: SEMAPHORE }
",
    );
    assert_eq!(
        found,
        [
            err(rules::THREAD_POOL, "resilience4j.bulkhead.configs.pooled.type"),
            err(rules::THREAD_POOL, "resilience4j.bulkhead.instances.bank.type"),
            err(rules::THREAD_POOL, "resilience4j.bulkhead.instances.ledger.type"),
        ]
    );
}

#[test]
fn a_later_document_can_take_threadpool_back() {
    let text = "
resilience4j.bulkhead.instances.bank.type: THREADPOOL
---
resilience4j.bulkhead.instances.bank.type: SEMAPHORE
";
    assert_eq!(yaml(text), []);
    let text = "
resilience4j.bulkhead.instances.bank.type: SEMAPHORE
---
resilience4j.bulkhead.instances.bank.type: THREADPOOL
";
    assert_eq!(yaml(text), [err(rules::THREAD_POOL, "resilience4j.bulkhead.instances.bank.type")]);
}

#[test]
fn thread_pool_bulkhead_sections_are_errors() {
    let found = yaml(
        "
resilience4j:
  thread-pool-bulkhead:
    configs.default.core-thread-pool-size: 2
    instances:
      bank: { max-thread-pool-size: 4 }
    backends.ledger.queue-capacity: 10
",
    );
    assert_eq!(
        found,
        [
            err(rules::THREAD_POOL, "resilience4j.thread-pool-bulkhead.backends.ledger"),
            err(rules::THREAD_POOL, "resilience4j.thread-pool-bulkhead.configs.default"),
            err(rules::THREAD_POOL, "resilience4j.thread-pool-bulkhead.instances.bank"),
        ]
    );
    // A section with no entries is reported once; relaxed spellings count.
    assert_eq!(
        yaml("resilience4j.threadPoolBulkhead.tags.team: core"),
        [err(rules::THREAD_POOL, "resilience4j.threadPoolBulkhead")]
    );
    assert_eq!(
        yaml("resilience4j:\n  thread_pool_bulkhead:\n"),
        [err(rules::THREAD_POOL, "resilience4j.thread_pool_bulkhead")]
    );
}

#[test]
fn thread_pool_findings_explain_the_rule() {
    let file =
        ConfigFile::from_yaml_str("resilience4j.bulkhead.instances.bank.type: THREADPOOL").unwrap();
    let found = file.check();
    assert_eq!(found.len(), 1);
    assert_eq!(
        found[0].to_string(),
        "error[R-RES-BH-X1] resilience4j.bulkhead.instances.bank.type: \"THREADPOOL\": thread-pool \
         bulkheads are forbidden for outbound calls: the call would run on another thread, losing \
         the caller's context (thread-locals, tracing spans, security context), and the pool sits \
         on top of the connection pool; use the semaphore bulkhead (remove `type`)"
    );
}

// ---- R-RES-BH-3 ----

#[test]
fn bulkhead_at_or_above_the_pool_is_an_error() {
    for calls in [20, 21, 500] {
        let text = format!(
            "client.bank.max-concurrent: 20\nresilience4j.bulkhead.instances.bank.max-concurrent-calls: {calls}"
        );
        assert_eq!(
            yaml(&text),
            [err(rules::POOL_SIZE, "resilience4j.bulkhead.instances.bank.max-concurrent-calls")],
            "{calls}"
        );
    }
    let file = ConfigFile::from_yaml_str(
        "client.bank.max-concurrent: 20\nresilience4j.bulkhead.instances.bank.max-concurrent-calls: 20",
    )
    .unwrap();
    assert_eq!(
        file.check()[0].message(),
        "bulkhead 'bank' allows 20 concurrent calls, not fewer than its connection pool \
         (client.bank.max-concurrent: 20): the pool runs dry before the bulkhead trips; use 16 \
         (80 % of the pool)"
    );
}

#[test]
fn bulkhead_not_at_80_percent_is_a_warning() {
    let file = ConfigFile::from_yaml_str(
        "client.bank.max-concurrent: 20\nresilience4j.bulkhead.instances.bank.max-concurrent-calls: 10",
    )
    .unwrap();
    let found = file.check();
    assert_eq!(found.len(), 1);
    assert_eq!((found[0].rule(), found[0].severity()), (rules::POOL_SIZE, Severity::Warning));
    assert_eq!(
        found[0].message(),
        "bulkhead 'bank' allows 10 concurrent calls; the guide sizes it at 80 % of its connection \
         pool (client.bank.max-concurrent: 20): 16"
    );
}

#[test]
fn pool_rule_uses_for_pool_arithmetic_for_every_size() {
    for pool in 1..=40usize {
        let advised = BulkheadConfig::for_pool(pool).max_concurrent_calls();
        for calls in 0..=pool + 1 {
            let text = format!(
                "client.x.max-concurrent: {pool}\nresilience4j.bulkhead.instances.x.max-concurrent-calls: {calls}"
            );
            let path = "resilience4j.bulkhead.instances.x.max-concurrent-calls";
            let expected = if calls >= pool {
                vec![err(rules::POOL_SIZE, path)]
            } else if calls != advised {
                vec![warn(rules::POOL_SIZE, path)]
            } else {
                vec![]
            };
            assert_eq!(yaml(&text), expected, "pool {pool}, calls {calls}");
        }
    }
}

#[test]
fn pool_rule_follows_inherited_and_default_limits() {
    // Inherited from a config: the finding points where the value is written.
    assert_eq!(
        yaml(
            "
client.bank.max-concurrent: 10
resilience4j.bulkhead:
  configs.default.max-concurrent-calls: 12
  instances.bank: {}
"
        ),
        [err(rules::POOL_SIZE, "resilience4j.bulkhead.configs.default.max-concurrent-calls")]
    );
    // The built-in default of 25 against a pool of 20: the instance's own path.
    let file = ConfigFile::from_yaml_str(
        "client.bank.max-concurrent: 20\nresilience4j.bulkhead.instances.bank: {}",
    )
    .unwrap();
    let found = file.check();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].path(), "resilience4j.bulkhead.instances.bank");
    assert!(
        found[0].message().contains("25 concurrent calls (the default)"),
        "{}",
        found[0].message()
    );
}

#[test]
fn pool_rule_matches_the_instance_name_exactly_and_reads_relaxed_pool_keys() {
    let text = "
client:
  Bank: { maxConcurrent: 20 }
  bank: { max_concurrent: '20' }
resilience4j.bulkhead.instances.bank.max-concurrent-calls: 16
";
    // `Bank` has no bulkhead of its own name (R-RES-BH-1); `bank` is at 80 %.
    assert_eq!(yaml(text), [warn(rules::OWN_LAYER, "client.Bank.maxConcurrent")]);
}

#[test]
fn a_pool_that_is_not_a_number_is_an_error() {
    let file = ConfigFile::from_yaml_str(
        "client.bank.max-concurrent: lots\nresilience4j.bulkhead.instances.bank.max-concurrent-calls: 16",
    )
    .unwrap();
    let found = file.check();
    assert_eq!(found.len(), 1);
    assert_eq!((found[0].rule(), found[0].severity()), (rules::POOL_SIZE, Severity::Error));
    assert_eq!(found[0].path(), "client.bank.max-concurrent");
    assert!(
        found[0].message().starts_with("\"lots\" is not a whole number"),
        "{}",
        found[0].message()
    );
}

// ---- R-RES-BH-1 ----

#[test]
fn a_pool_without_a_bulkhead_is_a_warning() {
    let file = Loader::new()
        .allow_missing_section(true)
        .parse("client.ledger.max-concurrent: 5", Format::Yaml)
        .unwrap();
    let found = file.check();
    assert_eq!(found.len(), 1);
    assert_eq!((found[0].rule(), found[0].severity()), (rules::OWN_LAYER, Severity::Warning));
    assert_eq!(found[0].path(), "client.ledger.max-concurrent");
    assert!(found[0].message().ends_with("max-concurrent-calls: 4"), "{}", found[0].message());
}

/// Issue 31: a pool whose instance is written but left out for its errors has a bulkhead;
/// the report gives the instance's error, not R-RES-BH-1.
#[test]
fn a_pool_whose_instance_has_errors_is_not_reported_without_a_bulkhead() {
    let report = Report::parse(
        "client.bank.max-concurrent: 20\n\
         resilience4j.bulkhead.instances.bank: { base-config: shared, max-concurrent-calls: 16 }",
        Format::Yaml,
    )
    .unwrap();
    assert!(report.file().instance("bank").is_none(), "left out for its error");
    assert_eq!(report.errors().len(), 1);
    assert_eq!(report.errors()[0].key(), "resilience4j.bulkhead.instances.bank.base-config");
    assert!(report.findings().is_empty(), "{:?}", report.findings());
}

// ---- max wait ----

#[test]
fn a_wait_above_one_second_is_a_warning() {
    for (wait, expect_warning) in [
        ("1s", false),
        ("1000", false),
        ("PT1.000000001S", true),
        ("1001ms", true),
        ("2m", true),
        ("100ms", false),
        ("0", false),
    ] {
        let found = yaml(&format!("resilience4j.bulkhead.instances.a.max-wait-duration: {wait}"));
        let expected = if expect_warning {
            vec![warn(rules::MAX_WAIT, "resilience4j.bulkhead.instances.a.max-wait-duration")]
        } else {
            vec![]
        };
        assert_eq!(found, expected, "{wait}");
    }
}

#[test]
fn a_long_wait_in_a_shared_config_is_reported_once_where_written() {
    let file = ConfigFile::from_yaml_str(
        "
resilience4j.bulkhead:
  configs.slow.max-wait-duration: 5s
  instances: { a: { base-config: slow }, b: { base-config: slow }, c: { max-wait-duration: 3s } }
",
    )
    .unwrap();
    let found = file.check();
    let paths: Vec<&str> = found.iter().map(|f| f.path()).collect();
    assert_eq!(
        paths,
        [
            "resilience4j.bulkhead.configs.slow.max-wait-duration",
            "resilience4j.bulkhead.instances.c.max-wait-duration"
        ]
    );
    assert!(found.iter().all(|f| f.rule() == rules::MAX_WAIT && f.severity() == Severity::Warning));
    assert_eq!(
        found[0].message(),
        "max-wait-duration is 5s, above 1s: waiting callers turn the bulkhead into a queue; the \
         guide uses 100ms (0 fails fast)"
    );
}

// ---- TOML and reports ----

#[test]
fn rules_apply_to_toml_files_alike() {
    let found = toml(
        r#"
[client.bank]
max-concurrent = 20

[resilience4j.thread-pool-bulkhead.instances.reports]
core-thread-pool-size = 2

[resilience4j.bulkhead.instances.bank]
max-concurrent-calls = 20
max-wait-duration = "PT5S"

[resilience4j.bulkhead.instances.ledger]
type = "THREADPOOL"
"#,
    );
    assert_eq!(
        found,
        [
            err(rules::THREAD_POOL, "resilience4j.bulkhead.instances.ledger.type"),
            err(rules::THREAD_POOL, "resilience4j.thread-pool-bulkhead.instances.reports"),
            err(rules::POOL_SIZE, "resilience4j.bulkhead.instances.bank.max-concurrent-calls"),
            warn(rules::MAX_WAIT, "resilience4j.bulkhead.instances.bank.max-wait-duration"),
        ]
    );
}

#[test]
fn report_counts_settings_errors_and_rule_errors() {
    let warnings_only =
        Report::parse("resilience4j.bulkhead.instances.a.max-wait-duration: 2s", Format::Yaml)
            .unwrap();
    assert!(!warnings_only.has_errors());
    assert_eq!(warnings_only.findings().len(), 1);

    let rule_error =
        Report::parse("resilience4j.bulkhead.instances.a.type: THREADPOOL", Format::Yaml).unwrap();
    assert!(rule_error.errors().is_empty());
    assert!(rule_error.has_errors());

    let settings_error =
        Report::parse("resilience4j.bulkhead.instances.a.max-wait-duration: -1", Format::Yaml)
            .unwrap();
    assert!(settings_error.findings().is_empty());
    assert_eq!(settings_error.errors().len(), 1);
    assert!(settings_error.has_errors());

    // Rules still run on the parts that resolved.
    let both = Report::parse(
        "resilience4j.bulkhead.instances: { a: { type: THREADPOOL }, b: { typo: 1 } }",
        Format::Yaml,
    )
    .unwrap();
    assert_eq!(both.errors().len(), 1);
    assert_eq!(both.findings().len(), 1);
}

#[test]
fn the_examples_error_file_reports_every_rule() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/config/errors.yml");
    let report = Report::from_path(path).unwrap();
    let rules_found: Vec<&str> = report.findings().iter().map(|f| f.rule()).collect();
    assert_eq!(rules_found, [rules::THREAD_POOL, rules::THREAD_POOL, rules::POOL_SIZE]);
    assert_eq!(report.errors().len(), 5);
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/config/warnings.yml");
    let report = Report::from_path(path).unwrap();
    assert!(report.errors().is_empty());
    let rules_found: Vec<&str> = report.findings().iter().map(|f| f.rule()).collect();
    assert_eq!(rules_found, [rules::POOL_SIZE, rules::OWN_LAYER, rules::MAX_WAIT]);
    assert!(report.findings().iter().all(|f| f.severity() == Severity::Warning));
}
