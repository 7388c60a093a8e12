//! Issue 20 in config files: our own keys `queue-order`, `queue-target`, `queue-interval`
//! and `sheddable-headroom` (feature `serde`): binding in every relaxed spelling, YAML and
//! TOML, inheritance through `base-config`, documents overriding each other, every error
//! naming the key path and the value, and a registry (and a keyed bulkhead) built from a
//! file that actually serves in the written order and keeps the headroom.
//!
//! Run with `cargo test --features serde --test config_file_policy` (or `--all-features`).
#![cfg(feature = "serde")]

mod common;

use std::task::Poll;
use std::time::Duration;

use bulkhead::file::{
    ConfigFile, FileError, Format, Report, DEFAULT_QUEUE_INTERVAL, DEFAULT_QUEUE_TARGET,
};
use bulkhead::keyed::KeyedBulkhead;
use bulkhead::{
    Acquire, Bulkhead, BulkheadConfig, BulkheadRegistry, BulkheadSpec, ConfigError, Criticality,
    QueueOrder, RejectReason,
};
use common::{poll_once, CountingWaker};

const I: &str = "resilience4j.bulkhead.instances";
const C: &str = "resilience4j.bulkhead.configs";

fn yaml(text: &str) -> ConfigFile {
    ConfigFile::from_yaml_str(text).unwrap_or_else(|e| panic!("{e}"))
}

fn toml(text: &str) -> ConfigFile {
    ConfigFile::from_toml_str(text).unwrap_or_else(|e| panic!("{e}"))
}

fn errors(text: &str, format: Format) -> Vec<ConfigError> {
    match ConfigFile::parse(text, format) {
        Err(FileError::Invalid(errors)) => errors,
        other => panic!("expected settings errors, got {other:?}"),
    }
}

/// The one error `text` gives (in YAML), as (key, value, problem).
fn one_error(text: &str) -> (String, String, String) {
    let errors = errors(text, Format::Yaml);
    assert_eq!(errors.len(), 1, "{errors:?}");
    let e = &errors[0];
    (e.key().to_owned(), e.value().to_owned(), e.problem().to_owned())
}

fn config_of(file: &ConfigFile, name: &str) -> BulkheadConfig {
    file.instance(name).unwrap_or_else(|| panic!("no instance {name}")).config().clone()
}

fn adaptive(target_ms: u64, interval_ms: u64) -> QueueOrder {
    QueueOrder::AdaptiveLifo {
        target: Duration::from_millis(target_ms),
        interval: Duration::from_millis(interval_ms),
    }
}

// ---- binding ----

#[test]
fn the_keys_bind_in_every_relaxed_spelling() {
    let file = yaml(
        "
resilience4j.bulkhead.instances:
  a: { queue-order: lifo, sheddable-headroom: 4 }
  b: { queueOrder: LIFO, sheddableHeadroom: 4 }
  c: { queue_order: Lifo, sheddable_headroom: '4' }
  d: { QUEUE_ORDER: lifo, SHEDDABLE_HEADROOM: 4 }
  e: { queue-order: adaptive-lifo, queue-target: 5ms, queue-interval: PT0.2S }
  f: { queueOrder: AdaptiveLifo, queueTarget: 5, queueInterval: 200ms }
  g: { queue_order: ADAPTIVE_LIFO, queue_target: 5ms, queue_interval: 200 }
  h: { queue-order: FIFO }
",
    );
    for name in ["a", "b", "c", "d"] {
        let config = config_of(&file, name);
        assert_eq!(config.queue_order(), QueueOrder::Lifo, "{name}");
        assert_eq!(config.sheddable_headroom(), 4, "{name}");
    }
    for name in ["e", "f", "g"] {
        assert_eq!(config_of(&file, name).queue_order(), adaptive(5, 200), "{name}");
    }
    assert_eq!(config_of(&file, "h").queue_order(), QueueOrder::Fifo);
    assert_eq!(config_of(&file, "h").sheddable_headroom(), 0);
    // The whole configuration is what the builder gives for the same settings.
    let expected = BulkheadConfig::builder()
        .queue_order(QueueOrder::Lifo)
        .sheddable_headroom(4)
        .build()
        .unwrap();
    assert_eq!(config_of(&file, "a"), expected);
}

#[test]
fn adaptive_lifo_without_target_or_interval_takes_the_documented_defaults() {
    assert_eq!(DEFAULT_QUEUE_TARGET, Duration::from_millis(10));
    assert_eq!(DEFAULT_QUEUE_INTERVAL, Duration::from_millis(100));
    let file = yaml(
        "
resilience4j.bulkhead.instances:
  both: { queue-order: adaptive-lifo }
  target: { queue-order: adaptive-lifo, queue-target: 20ms }
  interval: { queue-order: adaptive-lifo, queue-interval: 1s }
",
    );
    assert_eq!(config_of(&file, "both").queue_order(), adaptive(10, 100));
    assert_eq!(config_of(&file, "target").queue_order(), adaptive(20, 100));
    assert_eq!(config_of(&file, "interval").queue_order(), adaptive(10, 1000));
    // Where each value comes from: `None` is the default.
    let both = file.instance("both").unwrap();
    assert_eq!(
        both.origin("queue-order"),
        Some("resilience4j.bulkhead.instances.both.queue-order")
    );
    assert_eq!(both.origin("queue-target"), None);
    assert_eq!(both.origin("queueInterval"), None);
    let target = file.instance("target").unwrap();
    assert_eq!(
        target.origin("QUEUE_TARGET"),
        Some("resilience4j.bulkhead.instances.target.queue-target")
    );
    assert_eq!(target.origin("no-such-setting"), None);
}

#[test]
fn without_the_keys_nothing_changes() {
    let file = yaml("resilience4j.bulkhead.instances.plain.max-concurrent-calls: 3");
    let plain = file.instance("plain").unwrap();
    assert_eq!(plain.config().queue_order(), QueueOrder::Fifo);
    assert_eq!(plain.config().sheddable_headroom(), 0);
    assert_eq!(plain.origin("queue-order"), None);
    assert_eq!(plain.origin("sheddable-headroom"), None);
    assert!(file.warnings().is_empty() && file.ignored().is_empty());
}

#[test]
fn the_settings_inherit_through_base_config_one_by_one() {
    let file = yaml(
        "
resilience4j.bulkhead:
  configs:
    default: { max-concurrent-calls: 16, sheddable-headroom: 2 }
    lifo: { queue-order: lifo }
    codel: { queue-order: adaptive-lifo, queue-target: 5ms, queue-interval: 50ms }
    slower: { base-config: codel, queue-interval: 500ms }
  instances:
    plain: {}
    newest: { base-config: lifo }
    search: { base-config: slower, sheddable-headroom: 6 }
    tuned: { base-config: codel, queue-target: 15ms }
    back-to-fifo: { base-config: codel, queue-order: fifo }
",
    );
    let plain = config_of(&file, "plain");
    assert_eq!((plain.queue_order(), plain.sheddable_headroom()), (QueueOrder::Fifo, 2));
    // `lifo` has no base-config: it starts from the built-in defaults, not configs.default.
    let newest = config_of(&file, "newest");
    assert_eq!((newest.queue_order(), newest.sheddable_headroom()), (QueueOrder::Lifo, 0));
    let search = config_of(&file, "search");
    assert_eq!((search.queue_order(), search.sheddable_headroom()), (adaptive(5, 500), 6));
    assert_eq!(config_of(&file, "tuned").queue_order(), adaptive(15, 50));
    // An entry that sets another order itself drops the inherited target and interval,
    // without an error: the order it writes wins.
    assert_eq!(config_of(&file, "back-to-fifo").queue_order(), QueueOrder::Fifo);
    let back = file.instance("back-to-fifo").unwrap();
    assert_eq!(back.origin("queue-target"), None);
    let search = file.instance("search").unwrap();
    assert_eq!(
        search.origin("queue-target"),
        Some("resilience4j.bulkhead.configs.codel.queue-target")
    );
    assert_eq!(
        search.origin("queue-interval"),
        Some("resilience4j.bulkhead.configs.slower.queue-interval")
    );
    assert_eq!(
        file.config("slower").unwrap().config().queue_order(),
        adaptive(5, 500),
        "named configs resolve too"
    );
    assert_eq!(file.default_config().sheddable_headroom(), 2);
}

#[test]
fn a_later_document_overrides_and_twice_in_one_document_is_an_error() {
    let file = yaml(
        "
resilience4j.bulkhead.instances.search:
  max-concurrent-calls: 8
  queue-order: lifo
  sheddable-headroom: 2
---
resilience4j.bulkhead.instances.search:
  queue-order: adaptive-lifo
  queue-target: 30ms
  sheddable-headroom: 3
",
    );
    let search = config_of(&file, "search");
    assert_eq!((search.queue_order(), search.sheddable_headroom()), (adaptive(30, 100), 3));

    let errors = errors(
        "
resilience4j.bulkhead.instances.search:
  queue-order: lifo
  queueOrder: fifo
  sheddable-headroom: 1
  sheddable_headroom: 2
",
        Format::Yaml,
    );
    let shown: Vec<(&str, &str)> = errors.iter().map(|e| (e.key(), e.value())).collect();
    assert_eq!(
        shown,
        [
            ("resilience4j.bulkhead.instances.search.queueOrder", "\"fifo\""),
            ("resilience4j.bulkhead.instances.search.sheddable_headroom", "2"),
        ]
    );
    assert_eq!(
        errors[0].problem(),
        "is set twice (also as resilience4j.bulkhead.instances.search.queue-order)"
    );
}

#[test]
fn toml_reads_like_yaml() {
    let t = toml(
        r#"
[resilience4j.bulkhead.configs.codel]
queue-order = "adaptive-lifo"
queue-target = "5ms"
queue-interval = 50

[resilience4j.bulkhead.instances.search]
base-config = "codel"
max-concurrent-calls = 16
sheddable-headroom = 4

[resilience4j.bulkhead.instances.newest]
queueOrder = "LIFO"
"#,
    );
    let y = yaml(
        "
resilience4j.bulkhead:
  configs.codel: { queue-order: adaptive-lifo, queue-target: 5ms, queue-interval: 50 }
  instances:
    search: { base-config: codel, max-concurrent-calls: 16, sheddable-headroom: 4 }
    newest: { queueOrder: LIFO }
",
    );
    for name in ["search", "newest"] {
        assert_eq!(config_of(&t, name), config_of(&y, name), "{name}");
    }
    assert_eq!(config_of(&t, "search").queue_order(), adaptive(5, 50));
    assert_eq!(config_of(&t, "search").sheddable_headroom(), 4);
    assert_eq!(config_of(&t, "newest").queue_order(), QueueOrder::Lifo);
}

// ---- errors: key path and value, never a panic, never a silent default ----

#[test]
fn an_unknown_order_lists_the_valid_ones_with_a_hint() {
    const VALID: &str = "is not a queue order: write fifo, lifo or adaptive-lifo";
    for (written, shown, problem) in [
        ("lifoo", "\"lifoo\"", format!("{VALID} (did you mean lifo?)")),
        ("adaptive-fifo", "\"adaptive-fifo\"", format!("{VALID} (did you mean adaptive-lifo?)")),
        ("fifa", "\"fifa\"", format!("{VALID} (did you mean fifo?)")),
        // Nothing close: no hint.
        ("random", "\"random\"", VALID.to_owned()),
        // Not a word at all.
        ("[lifo]", "[\"lifo\"]", VALID.to_owned()),
        ("~", "null", "has no value (write fifo, lifo or adaptive-lifo)".to_owned()),
        ("{ type: lifo }", "{...}", "is a map, not a single value".to_owned()),
    ] {
        let (k, v, p) = one_error(&format!("{I}.search.queue-order: {written}"));
        let key = "resilience4j.bulkhead.instances.search.queue-order";
        assert_eq!((k.as_str(), v.as_str(), p), (key, shown, problem), "{written}");
    }
}

#[test]
fn a_misspelt_key_suggests_ours() {
    let (key, value, problem) = one_error(&format!("{I}.search.queue-ordr: lifo"));
    assert_eq!(
        (key.as_str(), value.as_str()),
        ("resilience4j.bulkhead.instances.search.queue-ordr", "\"lifo\"")
    );
    assert_eq!(problem, "is not a bulkhead setting (did you mean queue-order?)");
    let (_, _, problem) = one_error(&format!("{I}.search.shedable-headroom: 2"));
    assert_eq!(problem, "is not a bulkhead setting (did you mean sheddable-headroom?)");
}

#[test]
fn target_or_interval_without_adaptive_lifo_is_an_error() {
    // Written in the entry, with no order at all.
    let (key, value, problem) = one_error(&format!("{I}.search.queue-target: 10ms"));
    assert_eq!(key, "resilience4j.bulkhead.instances.search.queue-target");
    assert_eq!(value, "10ms");
    assert_eq!(
        problem,
        "applies only to queue-order: adaptive-lifo, and this entry's queue order is fifo \
         (the default)"
    );
    // Written beside another order.
    let (key, value, problem) =
        one_error(&format!("{I}.search: {{ queue-order: lifo, queue-interval: 1s }}"));
    assert_eq!(
        (key.as_str(), value.as_str()),
        ("resilience4j.bulkhead.instances.search.queue-interval", "1s")
    );
    assert!(
        problem.ends_with(
            "this entry's queue order is lifo (from resilience4j.bulkhead.instances.search.queue-order)"
        ),
        "{problem}"
    );
    // In a named config that is not adaptive LIFO itself (instances using it are not
    // reported again).
    let errors = errors(
        &format!("{C}.tuning.queue-target: 5ms\n{I}.search: {{ base-config: tuning, queue-order: adaptive-lifo }}"),
        Format::Yaml,
    );
    let keys: Vec<&str> = errors.iter().map(ConfigError::key).collect();
    assert_eq!(keys, ["resilience4j.bulkhead.configs.tuning.queue-target"]);
    // Both keys: both reported.
    let errors =
        errors_of_yaml(&format!("{I}.search: {{ queue-target: 5ms, queue-interval: 50ms }}"));
    assert_eq!(errors.len(), 2, "{errors:?}");
}

fn errors_of_yaml(text: &str) -> Vec<ConfigError> {
    errors(text, Format::Yaml)
}

#[test]
fn a_zero_or_bad_target_or_interval_is_an_error() {
    for (text, key, value, problem) in [
        (
            "queue-target: 0",
            "queue-target",
            "0",
            "is zero: adaptive LIFO needs a target and an interval above zero",
        ),
        (
            "queue-interval: 0ms",
            "queue-interval",
            "\"0ms\"",
            "is zero: adaptive LIFO needs a target and an interval above zero",
        ),
        (
            "queue-target: PT0S",
            "queue-target",
            "\"PT0S\"",
            "is zero: adaptive LIFO needs a target and an interval above zero",
        ),
        ("queue-target: -5ms", "queue-target", "\"-5ms\"", "is negative"),
        ("queue-interval: 1.5s", "queue-interval", "\"1.5s\"", "is not a duration"),
        ("queue-target: ", "queue-target", "null", "has no value"),
    ] {
        let (k, v, p) = one_error(&format!("{I}.search: {{ queue-order: adaptive-lifo, {text} }}"));
        assert_eq!(k, format!("resilience4j.bulkhead.instances.search.{key}"), "{text}");
        assert_eq!(v, value, "{text}");
        assert!(p.starts_with(problem), "{text}: {p}");
    }
}

#[test]
fn bad_headroom_is_an_error() {
    let path = "resilience4j.bulkhead.instances.search.sheddable-headroom";
    for (text, value, problem) in [
        ("x", "\"x\"", "is not a whole number".to_owned()),
        ("2.5", "2.5", "is not a whole number".to_owned()),
        ("-1", "-1", "is negative".to_owned()),
        ("true", "true", "is not a whole number".to_owned()),
        ("1073741824", "1073741824", "is too large: the engine's maximum is 1073741823".to_owned()),
        (
            "26",
            "26",
            "is above max-concurrent-calls (25, the default): no sheddable call could ever run"
                .to_owned(),
        ),
    ] {
        let (k, v, p) = one_error(&format!("{I}.search.sheddable-headroom: {text}"));
        assert_eq!((k.as_str(), v.as_str(), p), (path, value, problem), "{text}");
    }
    // Equal to the limit is allowed (sheddable calls never run, which the engine accepts).
    assert_eq!(
        config_of(
            &yaml(&format!("{I}.search: {{ max-concurrent-calls: 4, sheddable-headroom: 4 }}")),
            "search"
        )
        .sheddable_headroom(),
        4
    );
}

#[test]
fn headroom_above_the_limit_is_checked_after_inheritance() {
    let text = "
resilience4j.bulkhead:
  configs:
    shared: { sheddable-headroom: 4 }
    low: { max-concurrent-calls: 3 }
  instances:
    big: { base-config: shared, max-concurrent-calls: 16 }
    small: { base-config: shared, max-concurrent-calls: 2 }
    tiny: { base-config: shared, max-concurrent-calls: 1 }
";
    // Each entry that lowers the limit under an inherited headroom is named at its limit.
    let errors = errors_of_yaml(text);
    let shown: Vec<(&str, &str, &str)> =
        errors.iter().map(|e| (e.key(), e.value(), e.problem())).collect();
    let below = "is below sheddable-headroom (4, from \
                 resilience4j.bulkhead.configs.shared.sheddable-headroom): no sheddable call \
                 could ever run";
    assert_eq!(
        shown,
        [
            ("resilience4j.bulkhead.instances.small.max-concurrent-calls", "2", below),
            ("resilience4j.bulkhead.instances.tiny.max-concurrent-calls", "1", below),
        ]
    );
    // Neither written in the entry: named at the headroom, with the entry (and the config
    // that lowers the limit, at its limit).
    let errors = errors_of_yaml(
        "
resilience4j.bulkhead:
  configs:
    shared: { sheddable-headroom: 4 }
    low: { base-config: shared, max-concurrent-calls: 3 }
  instances.via-low: { base-config: low, max-wait-duration: 0 }
",
    );
    let shown: Vec<(&str, &str)> = errors.iter().map(|e| (e.key(), e.value())).collect();
    assert_eq!(
        shown,
        [
            ("resilience4j.bulkhead.configs.low.max-concurrent-calls", "3"),
            ("resilience4j.bulkhead.configs.shared.sheddable-headroom", "4"),
        ]
    );
    assert_eq!(
        errors[1].problem(),
        "is above max-concurrent-calls (3, from \
         resilience4j.bulkhead.configs.low.max-concurrent-calls) of \
         resilience4j.bulkhead.instances.via-low: no sheddable call could ever run"
    );
    // Leniently, the good entries still resolve and the bad one is left out.
    let report = Report::parse(text, Format::Yaml).unwrap();
    let names: Vec<&str> = report.file().instances().iter().map(|i| i.name()).collect();
    assert_eq!(names, ["big"]);
    assert_eq!(report.errors().len(), 2);
    assert!(report.has_errors());
    // A limit inherited, a headroom written in the entry.
    let (key, value, problem) = one_error(&format!(
        "{C}.default.max-concurrent-calls: 3\n{I}.search.sheddable-headroom: 5"
    ));
    assert_eq!(
        (key.as_str(), value.as_str()),
        ("resilience4j.bulkhead.instances.search.sheddable-headroom", "5")
    );
    assert_eq!(
        problem,
        "is above max-concurrent-calls (3, from \
         resilience4j.bulkhead.configs.default.max-concurrent-calls): no sheddable call could \
         ever run"
    );
}

#[test]
fn toml_errors_read_like_yaml_errors() {
    let text = r#"
[resilience4j.bulkhead.instances.search]
queue-order = "lifoo"
sheddable-headroom = "many"

[resilience4j.bulkhead.instances.plain]
queue-target = "10ms"
"#;
    let errors = errors(text, Format::Toml);
    let shown: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            "resilience4j.bulkhead.instances.search.queue-order: \"lifoo\" is not a queue order: \
             write fifo, lifo or adaptive-lifo (did you mean lifo?)",
            "resilience4j.bulkhead.instances.search.sheddable-headroom: \"many\" is not a whole \
             number",
            "resilience4j.bulkhead.instances.plain.queue-target: 10ms applies only to \
             queue-order: adaptive-lifo, and this entry's queue order is fifo (the default)",
        ]
    );
}

#[test]
fn an_order_nobody_can_wait_for_is_a_warning() {
    let file = yaml(&format!(
        "{I}.search: {{ queue-order: lifo, max-wait-duration: 100ms, max-waiting-calls: 0 }}"
    ));
    let warnings: Vec<String> = file.warnings().iter().map(ToString::to_string).collect();
    assert_eq!(
        warnings,
        ["resilience4j.bulkhead.instances.search.queue-order: lifo has no effect on the \
          bulkhead 'search': max-waiting-calls is 0, so no call ever queues"]
    );
    assert_eq!(file.warnings()[0].instance(), "search");
    // A zero max wait is no reason: a caller may still wait with its own timeout.
    let file = yaml(&format!("{I}.search: {{ queue-order: lifo, max-wait-duration: 0 }}"));
    assert!(file.warnings().is_empty(), "{:?}", file.warnings());
    // FIFO, or an order nobody wrote, is never warned about.
    let file = yaml(&format!("{I}.search: {{ queue-order: fifo, max-waiting-calls: 0 }}"));
    assert!(file.warnings().is_empty(), "{:?}", file.warnings());
}

#[test]
fn fair_call_handling_stays_ignored_and_points_at_queue_order() {
    let file =
        yaml(&format!("{I}.search: {{ fair-call-handling-enabled: false, queue-order: lifo }}"));
    let ignored = &file.ignored()[0];
    assert_eq!(ignored.path(), "resilience4j.bulkhead.instances.search.fair-call-handling-enabled");
    assert_eq!(ignored.value(), "false");
    assert!(ignored.reason().contains("queue-order"), "{}", ignored.reason());
    assert_eq!(config_of(&file, "search").queue_order(), QueueOrder::Lifo);
    // Alone, it changes nothing: FIFO stays.
    let file = yaml(&format!("{I}.search.fair-call-handling-enabled: false"));
    assert_eq!(config_of(&file, "search").queue_order(), QueueOrder::Fifo);
}

// ---- behaviour: a registry built from a file ----

/// Queues `n` async waiters (0 first) on a bulkhead whose one permit is held, runs `then`,
/// releases the permit, and lets each waiter served release it in turn: the order the
/// waiters were served in. Futures are polled by hand, so the order they queue in is the
/// order of the polls.
fn served_order(bulkhead: &Bulkhead, n: usize, then: impl FnOnce()) -> Vec<usize> {
    let (_wakes, waker) = CountingWaker::new();
    let held = bulkhead.try_acquire().expect("the one permit is free");
    let mut waiters: Vec<Option<Acquire<'_>>> =
        (0..n).map(|_| Some(bulkhead.acquire_async())).collect();
    for fut in waiters.iter_mut().flatten() {
        assert!(poll_once(fut, &waker).is_pending(), "expected to queue");
    }
    then();
    drop(held);
    let mut order = Vec::new();
    while order.len() < n {
        let mut served = Vec::new();
        for (i, slot) in waiters.iter_mut().enumerate() {
            if let Some(fut) = slot {
                if let Poll::Ready(result) = poll_once(fut, &waker) {
                    served.push((i, result.expect("granted, not refused")));
                    *slot = None;
                }
            }
        }
        assert_eq!(served.len(), 1, "one permit, one waiter served at a time");
        let (i, permit) = served.pop().unwrap();
        order.push(i);
        drop(permit);
    }
    order
}

const SERVICE: &str = "
resilience4j.bulkhead:
  configs:
    default: { max-wait-duration: 30s }
  instances:
    search:
      max-concurrent-calls: 1
      queue-order: lifo
";

#[test]
fn a_registry_from_a_file_serves_lifo() {
    let registry = BulkheadRegistry::from_yaml_str(SERVICE).unwrap();
    let search = registry.find("search").unwrap();
    assert_eq!(search.config().queue_order(), QueueOrder::Lifo);
    assert_eq!(served_order(&search, 3, || {}), [2, 1, 0], "newest first");
    common::assert_quiescent(&search, 1);
}

#[test]
fn a_registry_from_a_file_keeps_the_headroom_from_sheddable_calls() {
    let registry = BulkheadRegistry::from_toml_str(
        r#"
[resilience4j.bulkhead.instances.batch]
max-concurrent-calls = 3
sheddable-headroom = 2
"#,
    )
    .unwrap();
    let batch = registry.find("batch").unwrap();
    assert_eq!(batch.config().sheddable_headroom(), 2);
    let first = batch.try_acquire_many(Criticality::Sheddable).unwrap();
    // 2 free, both held back from sheddable calls.
    let refused = batch.try_acquire_many(Criticality::Sheddable).unwrap_err();
    assert_eq!(refused.reason(), RejectReason::Reserved);
    // Default and critical calls take them.
    let user = batch.try_acquire().unwrap();
    let critical = batch.try_acquire_many(Criticality::Critical).unwrap();
    drop((first, user, critical));
    common::assert_quiescent(&batch, 3);
}

#[test]
fn a_file_reloaded_with_change_config_switches_the_order_of_queued_waiters() {
    let registry = BulkheadRegistry::from_yaml_str(
        "resilience4j.bulkhead.instances.search: { max-concurrent-calls: 1, max-wait-duration: 30s }",
    )
    .unwrap();
    let search = registry.find("search").unwrap();
    assert_eq!(search.config().queue_order(), QueueOrder::Fifo);
    assert_eq!(served_order(&search, 3, || {}), [0, 1, 2], "oldest first");
    // The file changes while callers wait: read it again and hand the instance's config to
    // the bulkhead.
    let order = served_order(&search, 3, || {
        let reloaded = yaml(SERVICE);
        search.change_config(reloaded.instance("search").unwrap().config().clone());
    });
    assert_eq!(search.config().queue_order(), QueueOrder::Lifo);
    assert_eq!(order, [2, 1, 0], "the waiters already queued are served newest first");
    common::assert_quiescent(&search, 1);
}

#[test]
fn a_registry_from_a_file_carries_adaptive_lifo_and_named_configs() {
    let registry = BulkheadRegistry::from_yaml_str(
        "
resilience4j.bulkhead:
  configs:
    codel: { queue-order: adaptive-lifo, queue-target: 5ms }
  instances:
    search: { base-config: codel, max-wait-duration: 1s }
",
    )
    .unwrap();
    assert_eq!(registry.find("search").unwrap().config().queue_order(), adaptive(5, 100));
    // A bulkhead created later from the named config gets it too.
    let later = registry.bulkhead_with("later", BulkheadSpec::config_named("codel")).unwrap();
    assert_eq!(later.config().queue_order(), adaptive(5, 100));
}

#[test]
fn a_keyed_bulkhead_from_a_file_gets_the_order_and_headroom_per_key() {
    let file = yaml(
        "
resilience4j.bulkhead:
  configs:
    gold: { max-concurrent-calls: 8, sheddable-headroom: 2 }
  instances:
    tenants: { max-concurrent-calls: 2, max-wait-duration: 100ms, queue-order: lifo }
    tenants/42: { base-config: gold, queue-order: adaptive-lifo }
",
    );
    let tenants =
        KeyedBulkhead::<u64>::builder("tenants").configs_from_file(&file).unwrap().build().unwrap();
    let plain = tenants.config_for(&1);
    assert_eq!((plain.queue_order(), plain.sheddable_headroom()), (QueueOrder::Lifo, 0));
    let gold = tenants.config_for(&42);
    assert_eq!((gold.queue_order(), gold.sheddable_headroom()), (adaptive(10, 100), 2));
}
