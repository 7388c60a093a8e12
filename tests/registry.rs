//! BulkheadRegistry: named bulkheads, named configs, tags, and building from a file.

use std::collections::BTreeMap;
use std::sync::{Arc, Barrier};

use bulkhead::{Bulkhead, BulkheadConfig, BulkheadRegistry, RegistryError};

fn limit(n: usize) -> BulkheadConfig {
    BulkheadConfig::builder().max_concurrent_calls(n).build().unwrap()
}

#[test]
fn registry_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync + 'static>() {}
    assert_send_sync::<BulkheadRegistry>();
    assert_send_sync::<RegistryError>();
}

#[test]
fn default_registry_uses_the_default_config() {
    let registry = BulkheadRegistry::default();
    assert_eq!(registry.default_config(), BulkheadConfig::default());
    assert_eq!(registry.bulkhead("bank").config(), BulkheadConfig::default());
    assert_eq!(registry.config("default"), Some(BulkheadConfig::default()));
    assert_eq!(registry.config_names(), ["default"]);
}

#[test]
fn new_and_builder_set_the_default_config() {
    let registry = BulkheadRegistry::new(BulkheadConfig::for_pool(20));
    assert_eq!(registry.bulkhead("bank").config(), BulkheadConfig::for_pool(20));
    let registry = BulkheadRegistry::builder().default_config(limit(3)).build().unwrap();
    assert_eq!(registry.bulkhead("bank").config(), limit(3));
}

#[test]
fn same_name_gives_the_same_bulkhead() {
    let registry = BulkheadRegistry::default();
    let a = registry.bulkhead("bank");
    let b = registry.bulkhead("bank");
    assert!(Arc::ptr_eq(&a, &b));
    assert!(!Arc::ptr_eq(&a, &registry.bulkhead("ledger")));
    assert_eq!(a.name(), "bank");
    // One limit shared: a permit taken through one handle is seen through the other.
    let _held = a.try_acquire().unwrap();
    assert_eq!(b.metrics().in_flight_calls(), 1);
}

#[test]
fn concurrent_get_or_create_makes_one_bulkhead() {
    let registry = Arc::new(BulkheadRegistry::default());
    let threads = 8;
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let registry = Arc::clone(&registry);
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                barrier.wait();
                (0..100).map(|i| registry.bulkhead(&format!("b{}", i % 10))).collect::<Vec<_>>()
            })
        })
        .collect();
    let results: Vec<Vec<Arc<Bulkhead>>> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(registry.len(), 10);
    for i in 0..100 {
        let first = &results[0][i];
        for other in &results[1..] {
            assert!(Arc::ptr_eq(first, &other[i]), "b{} created twice", i % 10);
        }
        assert!(Arc::ptr_eq(first, &registry.find(&format!("b{}", i % 10)).unwrap()));
    }
}

#[test]
fn default_config_name_is_reserved() {
    let registry = BulkheadRegistry::new(limit(4));
    assert_eq!(registry.add_config("default", limit(9)), Err(RegistryError::ReservedConfigName));
    assert_eq!(registry.remove_config("default"), Err(RegistryError::ReservedConfigName));
    assert_eq!(registry.default_config(), limit(4));
    assert_eq!(registry.config("default"), Some(limit(4)));
    let err = BulkheadRegistry::builder().add_config("default", limit(9)).build().unwrap_err();
    assert_eq!(err, RegistryError::ReservedConfigName);
    assert!(err.to_string().contains("'default' is reserved"), "{err}");
}

#[test]
fn named_configs_are_added_overwritten_and_removed() {
    let registry = BulkheadRegistry::default();
    assert_eq!(registry.add_config("slow", limit(2)), Ok(None));
    assert_eq!(registry.add_config("slow", limit(3)), Ok(Some(limit(2))));
    assert_eq!(registry.config("slow"), Some(limit(3)));
    assert_eq!(registry.config_names(), ["default", "slow"]);
    let made =
        registry.bulkhead_with("reports", bulkhead::BulkheadSpec::config_named("slow")).unwrap();
    assert_eq!(made.config(), limit(3));
    assert_eq!(registry.remove_config("slow"), Ok(Some(limit(3))));
    assert_eq!(registry.remove_config("slow"), Ok(None));
    assert_eq!(registry.config("slow"), None);
    // Removing a config leaves the bulkheads made with it alone.
    assert_eq!(registry.find("reports").unwrap().config(), limit(3));
}

#[test]
fn bulkhead_with_an_unknown_config_is_an_error() {
    let registry = BulkheadRegistry::default();
    let err = registry
        .bulkhead_with("bank", bulkhead::BulkheadSpec::config_named("missing"))
        .unwrap_err();
    assert_eq!(err, RegistryError::UnknownConfig("missing".to_owned()));
    assert_eq!(err.to_string(), "no bulkhead configuration named 'missing'");
    assert!(registry.find("bank").is_none(), "a failed call must not create the bulkhead");
    // Checked even when the bulkhead exists.
    registry.bulkhead("bank");
    assert!(registry
        .bulkhead_with("bank", bulkhead::BulkheadSpec::config_named("missing"))
        .is_err());
    // "default" is a valid config name.
    assert_eq!(
        registry
            .bulkhead_with("ledger", bulkhead::BulkheadSpec::config_named("default"))
            .unwrap()
            .config(),
        BulkheadConfig::default()
    );
}

#[test]
fn first_creation_wins_on_a_name_collision() {
    let registry = BulkheadRegistry::default();
    registry.add_config("two", limit(2)).unwrap();
    let first = registry.bulkhead_with("bank", limit(7)).unwrap();
    let again = registry.bulkhead_with("bank", limit(100)).unwrap();
    let by_config =
        registry.bulkhead_with("bank", bulkhead::BulkheadSpec::config_named("two")).unwrap();
    let by_default = registry.bulkhead("bank");
    for other in [&again, &by_config, &by_default] {
        assert!(Arc::ptr_eq(&first, other));
    }
    assert_eq!(first.config(), limit(7));
    assert!(format!("{registry:?}").contains("bank"));
}

#[test]
fn find_never_creates() {
    let registry = BulkheadRegistry::default();
    assert!(registry.find("bank").is_none());
    assert!(registry.is_empty());
    let made = registry.bulkhead("bank");
    assert!(Arc::ptr_eq(&registry.find("bank").unwrap(), &made));
    assert_eq!(registry.len(), 1);
}

#[test]
fn remove_takes_the_bulkhead_out() {
    let registry = BulkheadRegistry::default();
    let old = registry.bulkhead_with("bank", limit(1)).unwrap();
    let permit = old.try_acquire().unwrap();
    let removed = registry.remove("bank").unwrap();
    assert!(Arc::ptr_eq(&removed, &old));
    assert!(registry.find("bank").is_none());
    assert!(registry.remove("bank").is_none());
    // Holders keep using the removed one; the name now makes a fresh bulkhead.
    let fresh = registry.bulkhead("bank");
    assert!(!Arc::ptr_eq(&fresh, &old));
    assert_eq!(fresh.metrics().in_flight_calls(), 0);
    drop(permit);
    assert_eq!(old.metrics().available_concurrent_calls(), 1);
}

#[test]
fn replace_swaps_an_existing_bulkhead_only() {
    let registry = BulkheadRegistry::builder().tag("team", "core").build().unwrap();
    registry
        .bulkhead_with("bank", bulkhead::BulkheadSpec::config(limit(1)).tags([("tier", "0")]))
        .unwrap();
    let new = Arc::new(Bulkhead::new("bank", limit(5)));
    let old = registry.replace("bank", Arc::clone(&new)).unwrap();
    assert_eq!(old.config(), limit(1));
    assert!(Arc::ptr_eq(&registry.bulkhead("bank"), &new));
    assert_eq!(registry.tags("bank").unwrap()["tier"], "0", "tags stay with the name");
    let absent = Arc::new(Bulkhead::new("ledger", limit(5)));
    assert!(registry.replace("ledger", absent).is_none());
    assert!(registry.find("ledger").is_none(), "replace never inserts");
}

#[test]
#[should_panic(expected = "the bulkhead's name must be the registry name")]
fn replace_with_a_bulkhead_of_another_name_panics() {
    let registry = BulkheadRegistry::default();
    registry.bulkhead("bank");
    registry.replace("bank", Arc::new(Bulkhead::new("ledger", limit(1))));
}

#[test]
fn all_and_names_are_sorted_by_name() {
    let registry = BulkheadRegistry::default();
    for name in ["payments", "bank", "ledger", "audit"] {
        registry.bulkhead(name);
    }
    let names: Vec<String> = registry.all().iter().map(|b| b.name().to_owned()).collect();
    assert_eq!(names, ["audit", "bank", "ledger", "payments"]);
    assert_eq!(registry.names(), names);
    assert_eq!(registry.len(), 4);
}

#[test]
fn tags_merge_registry_then_bulkhead() {
    let registry = BulkheadRegistry::builder()
        .tag("service", "payments")
        .tags([("zone", "eu"), ("tier", "1")])
        .build()
        .unwrap();
    registry
        .bulkhead_with(
            "bank",
            bulkhead::BulkheadSpec::config(limit(4)).tags([("tier", "0"), ("downstream", "sber")]),
        )
        .unwrap();
    registry.bulkhead("ledger");
    let expected: BTreeMap<String, String> =
        [("service", "payments"), ("zone", "eu"), ("tier", "0"), ("downstream", "sber")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
    assert_eq!(registry.tags("bank").unwrap(), expected);
    assert_eq!(registry.tags("ledger").unwrap()["tier"], "1");
    assert_eq!(registry.tags("ledger").unwrap().len(), 3);
    assert_eq!(registry.tags("unknown"), None);
    assert_eq!(registry.registry_tags().len(), 3);
    // get-or-create with tags keeps the first tags too.
    registry
        .bulkhead_with("bank", bulkhead::BulkheadSpec::config(limit(4)).tags([("tier", "9")]))
        .unwrap();
    assert_eq!(registry.tags("bank").unwrap()["tier"], "0");
}

#[test]
fn debug_lists_configs_and_bulkheads() {
    let registry = BulkheadRegistry::default();
    registry.add_config("slow", BulkheadConfig::for_pool(4)).unwrap();
    registry.bulkhead("bank");
    let shown = format!("{registry:?}");
    assert!(shown.starts_with("BulkheadRegistry"), "{shown}");
    assert!(shown.contains("slow") && shown.contains("bank"), "{shown}");
}

#[cfg(feature = "serde")]
mod from_file {
    use super::*;
    use bulkhead::file::FileError;

    const YAML: &str = "
resilience4j:
  bulkhead:
    tags: { service: payments }
    configs:
      default: { max-concurrent-calls: 16, max-wait-duration: 100ms }
      reports: { max-concurrent-calls: 2, max-wait-duration: 0 }
    instances:
      bank: {}
      statements: { base-config: reports }
      ledger: { max-concurrent-calls: 4 }
";

    fn check(registry: &BulkheadRegistry) {
        assert_eq!(registry.names(), ["bank", "ledger", "statements"]);
        assert_eq!(registry.default_config(), BulkheadConfig::for_pool(20));
        assert_eq!(registry.find("bank").unwrap().config(), BulkheadConfig::for_pool(20));
        assert_eq!(registry.find("statements").unwrap().config(), limit(2));
        let ledger = registry.find("ledger").unwrap().config();
        assert_eq!(ledger.max_concurrent_calls(), 4);
        assert_eq!(ledger.max_wait_duration(), std::time::Duration::from_millis(100));
        assert_eq!(registry.config_names(), ["default", "reports"]);
        assert_eq!(registry.tags("bank").unwrap()["service"], "payments");
        // Names not in the file get the file's default config.
        assert_eq!(registry.bulkhead("new").config(), BulkheadConfig::for_pool(20));
        assert_eq!(
            registry
                .bulkhead_with("x", bulkhead::BulkheadSpec::config_named("reports"))
                .unwrap()
                .config(),
            limit(2)
        );
    }

    #[test]
    fn from_yaml_str_builds_configs_and_instances() {
        check(&BulkheadRegistry::from_yaml_str(YAML).unwrap());
    }

    #[test]
    fn from_toml_str_builds_the_same_registry() {
        let registry = BulkheadRegistry::from_toml_str(
            r#"
[resilience4j.bulkhead.tags]
service = "payments"
[resilience4j.bulkhead.configs.default]
max-concurrent-calls = 16
max-wait-duration = "100ms"
[resilience4j.bulkhead.configs.reports]
max-concurrent-calls = 2
max-wait-duration = 0
[resilience4j.bulkhead.instances.bank]
[resilience4j.bulkhead.instances.statements]
base-config = "reports"
[resilience4j.bulkhead.instances.ledger]
max-concurrent-calls = 4
"#,
        )
        .unwrap();
        check(&registry);
    }

    #[test]
    fn from_file_reads_the_example() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/application.yml");
        let registry = BulkheadRegistry::from_file(&path).unwrap();
        assert_eq!(registry.names(), ["bank", "payment-gateway", "reports"]);
        assert_eq!(registry.find("bank").unwrap().config().max_concurrent_calls(), 16);
        let toml = BulkheadRegistry::from_file(path.with_extension("toml")).unwrap();
        let configs = |r: &BulkheadRegistry| r.all().iter().map(|b| b.config()).collect::<Vec<_>>();
        assert_eq!(configs(&registry), configs(&toml));
    }

    #[test]
    fn from_file_refuses_a_file_with_errors() {
        let err = BulkheadRegistry::from_yaml_str(
            "resilience4j.bulkhead.instances.sber.max-wait-duration: -5ms",
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "resilience4j.bulkhead.instances.sber.max-wait-duration: \"-5ms\" is negative"
        );
        assert!(matches!(BulkheadRegistry::from_toml_str("a = ["), Err(FileError::Syntax { .. })));
        assert!(matches!(
            BulkheadRegistry::from_file("/nonexistent/application.yml"),
            Err(FileError::Io { .. })
        ));
    }
}
