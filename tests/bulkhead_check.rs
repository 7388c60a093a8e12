//! The `bulkhead-check` command: output and exit status (feature `cli`).
//!
//! The binary needs `--features cli`, so this file is compiled only then:
//! `cargo test --features cli --test bulkhead_check`, or `cargo test --all-features`.
#![cfg(feature = "cli")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bulkhead-check"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run bulkhead-check")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A file in the temp dir, removed on drop.
struct TempFile(PathBuf);

impl TempFile {
    fn new(name: &str, text: &str) -> TempFile {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "bulkhead-check-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        TempFile(path)
    }

    fn path(&self) -> &str {
        self.0.to_str().unwrap()
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

#[test]
fn clean_file_prints_effective_configs_and_exits_0() {
    let out = run(&["examples/application.yml"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}{}", stderr(&out));
    assert!(text.starts_with("examples/application.yml (YAML)\ninstances:\n"), "{text}");
    let row = |name: &str| -> Vec<String> {
        let line = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("{name}: {text}"));
        line.split_whitespace().map(str::to_owned).collect()
    };
    assert_eq!(
        row("name"),
        [
            "name",
            "max-concurrent-calls",
            "max-wait-duration",
            "max-waiting-calls",
            "queue-order",
            "sheddable-headroom",
            "base",
            "config"
        ]
    );
    assert_eq!(row("bank"), ["bank", "16", "100ms", "no", "cap", "fifo", "4", "default"]);
    assert_eq!(row("payment-gateway"), ["payment-gateway", "8", "0", "0", "fifo", "0", "default"]);
    assert_eq!(
        row("reports"),
        ["reports", "2", "50ms", "no", "cap", "adaptive-lifo", "0", "default"]
    );
    // Adaptive LIFO's target and interval, under their own heading.
    assert!(
        text.contains("adaptive-lifo:\n  reports: queue-target 10ms, queue-interval 100ms\n"),
        "{text}"
    );
    assert!(
        text.contains(
            "examples/application.yml: 3 instance(s), 0 error(s), 0 warning(s), 0 ignored"
        ),
        "{text}"
    );
}

#[test]
fn toml_file_prints_the_same_instances() {
    let yml = stdout(&run(&["examples/application.yml"]));
    let out = run(&["examples/application.toml"]);
    assert_eq!(out.status.code(), Some(0));
    let rows =
        |t: &str| t.lines().filter(|l| l.starts_with("  ")).map(str::to_owned).collect::<Vec<_>>();
    assert_eq!(rows(&stdout(&out)), rows(&yml));
}

#[test]
fn warnings_exit_0_unless_denied() {
    let out = run(&["examples/config/warnings.yml"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    for rule in ["warning[R-RES-BH-3]", "warning[R-RES-BH-1]", "warning[R-RES-BH-WAIT]"] {
        assert!(text.contains(rule), "{rule}: {text}");
    }
    assert!(
        text.contains(
            "  resilience4j.bulkhead.instances.bank.writableStackTraceEnabled: false ignored: "
        ),
        "{text}"
    );
    assert!(text.contains("1 instance(s), 0 error(s), 3 warning(s), 1 ignored"), "{text}");
    let out = run(&["--deny-warnings", "examples/config/warnings.yml"]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn errors_exit_1_and_name_path_and_value() {
    let out = run(&["examples/config/errors.yml"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    for line in [
        "  error[config] resilience4j.bulkhead.instances.sber.max-wait-duration: \"-5ms\" is negative",
        "  error[config] resilience4j.bulkhead.instances.sber.max-concurent-calls: 4 is not a bulkhead setting (did you mean max-concurrent-calls?)",
        "  error[config] resilience4j.bulkhead.configs.b.base-config: \"a\" closes a cycle of base configs: a -> b -> a",
        "  error[config] resilience4j.bulkhead.instances.ledger.base-config: \"shared\" names no config under resilience4j.bulkhead.configs",
        "  error[config] resilience4j.bulkhead.instances.ledger.max-concurrent-calls: 2000000000 is too large: the engine's maximum is 1073741823",
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
    }
    assert!(
        text.contains("error[R-RES-BH-X1] resilience4j.bulkhead.instances.sber.type: "),
        "{text}"
    );
    assert!(
        text.contains("error[R-RES-BH-X1] resilience4j.thread-pool-bulkhead.instances.reports: "),
        "{text}"
    );
    assert!(
        text.contains(
            "error[R-RES-BH-3] resilience4j.bulkhead.instances.bank.max-concurrent-calls: "
        ),
        "{text}"
    );
    assert!(text.contains("8 error(s), 0 warning(s)"), "{text}");
}

#[test]
fn queue_order_and_headroom_are_printed_and_checked() {
    // Issue 20: the new keys, their defaults made visible, their errors and warning.
    let file = TempFile::new(
        "app.yml",
        "
resilience4j.bulkhead:
  configs:
    codel: { queue-order: adaptive-lifo, queue-interval: 200ms }
  instances:
    search: { base-config: codel, max-concurrent-calls: 16, sheddable-headroom: 4 }
    newest: { queue-order: lifo, max-wait-duration: 50ms, max-waiting-calls: 0 }
",
    );
    let out = run(&[file.path()]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let row = |name: &str| -> Vec<String> {
        let line = text.lines().find(|l| l.split_whitespace().next() == Some(name)).unwrap();
        line.split_whitespace().map(str::to_owned).collect()
    };
    assert_eq!(row("search"), ["search", "16", "0", "no", "cap", "adaptive-lifo", "4", "codel"]);
    assert_eq!(row("newest"), ["newest", "25", "50ms", "0", "lifo", "0", "(built-in", "defaults)"]);
    assert!(
        text.contains(
            "adaptive-lifo:\n  search: queue-target 10ms (default), queue-interval 200ms\n"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "  warning[config] resilience4j.bulkhead.instances.newest.queue-order: lifo has no \
             effect on the bulkhead 'newest': max-waiting-calls is 0, so no call ever queues\n"
        ),
        "{text}"
    );
    assert_eq!(counts(&text), ("0".to_owned(), "1".to_owned()), "{text}");

    let file = TempFile::new(
        "app.toml",
        r#"
[resilience4j.bulkhead.instances.search]
max-concurrent-calls = 2
queue-order = "lifoo"
queue-target = "0ms"
sheddable-headroom = 3
"#,
    );
    let out = run(&[file.path()]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    for line in [
        "  error[config] resilience4j.bulkhead.instances.search.queue-order: \"lifoo\" is not a \
         queue order: write fifo, lifo or adaptive-lifo (did you mean lifo?)",
        "  error[config] resilience4j.bulkhead.instances.search.queue-target: \"0ms\" is zero: \
         adaptive LIFO needs a target and an interval above zero",
        "  error[config] resilience4j.bulkhead.instances.search.sheddable-headroom: 3 is above \
         max-concurrent-calls (2, from \
         resilience4j.bulkhead.instances.search.max-concurrent-calls): no sheddable call could \
         ever run",
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
    }
    assert_eq!(counts(&text).0, "3", "{text}");
}

#[test]
fn a_rule_error_alone_exits_1() {
    let file = TempFile::new("app.yml", "resilience4j.bulkhead.instances.bank.type: THREADPOOL\n");
    let out = run(&[file.path()]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
}

#[test]
fn syntax_errors_exit_1() {
    let file = TempFile::new("app.yml", "resilience4j:\n  bulkhead: [oops\n");
    let out = run(&[file.path()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("YAML syntax error"), "{}", stderr(&out));
    let file = TempFile::new("app.toml", "[resilience4j\n");
    let out = run(&[file.path()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("TOML syntax error"), "{}", stderr(&out));
}

#[test]
fn usage_errors_exit_2() {
    let out = run(&[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("no file given") && stderr(&out).contains("usage: bulkhead-check")
    );
    let out = run(&["--colour", "examples/application.yml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("unknown option '--colour'"), "{}", stderr(&out));
    let out = run(&["--format", "json", "examples/application.yml"]);
    assert_eq!(out.status.code(), Some(2));
    let out = run(&["--format"]);
    assert_eq!(out.status.code(), Some(2));
    let out = run(&["examples/no-such-file.yml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("cannot read"), "{}", stderr(&out));
    let out = run(&["examples/config_file.rs"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("cannot tell the format"), "{}", stderr(&out));
}

#[test]
fn help_exits_0() {
    let out = run(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).starts_with("usage: bulkhead-check"));
}

#[test]
fn format_flag_overrides_the_extension() {
    let file = TempFile::new(
        "settings.conf",
        "[resilience4j.bulkhead.instances.bank]\nmax-concurrent-calls = 3\n",
    );
    let out = run(&["--format=toml", file.path()]);
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("(TOML)"));
    assert!(
        stdout(&out).lines().any(|l| l.split_whitespace().take(2).eq(["bank", "3"])),
        "{}",
        stdout(&out)
    );
}

#[test]
fn several_files_exit_with_the_worst_status() {
    let out = run(&["examples/application.yml", "examples/config/errors.yml"]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(
        text.contains("examples/application.yml (YAML)")
            && text.contains("examples/config/errors.yml (YAML)")
    );
    let out = run(&["examples/config/errors.yml", "missing.yml"]);
    assert_eq!(out.status.code(), Some(2));
}

/// The summary line's counts: (errors, warnings).
fn counts(text: &str) -> (String, String) {
    let line = text.lines().last().unwrap_or_default().to_owned();
    let field = |what: &str| {
        line.split(", ").find(|p| p.ends_with(what)).unwrap_or_default().replace(what, "")
    };
    (field(" error(s)"), field(" warning(s)"))
}

#[test]
fn a_file_without_a_bulkhead_section_is_an_error() {
    for (name, text, value) in [
        ("app.yml", "spring.application.name: shop\n", "(not in the file)"),
        ("app.yml", "", "(the file is empty)"),
        ("app.toml", "", "(the file is empty)"),
    ] {
        let file = TempFile::new(name, text);
        let out = run(&[file.path()]);
        let text = stdout(&out);
        assert_eq!(out.status.code(), Some(1), "{text}");
        assert!(
            text.contains(&format!(
                "  error[config] resilience4j.bulkhead: {value} is required: without it, every \
                 bulkhead would silently get the built-in defaults."
            )),
            "{text}"
        );
        assert_eq!(counts(&text).0, "1", "{text}");
        assert_eq!(text.matches(file.path()).count(), 2, "heading and summary only: {text}");
        assert!(stderr(&out).is_empty(), "{}", stderr(&out));
        assert!(Path::new(file.path()).exists());
    }
}

#[test]
fn a_file_without_a_bulkhead_section_passes_when_it_says_so_or_when_allowed() {
    let explicit =
        TempFile::new("app.yml", "spring.application.name: shop\nresilience4j.bulkhead: {}\n");
    let out = run(&[explicit.path()]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let bare = TempFile::new("app.yml", "spring.application.name: shop\n");
    let out = run(&["--allow-missing-section", bare.path()]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(
        stdout(&out)
            .contains("no resilience4j.bulkhead section (allowed by --allow-missing-section)"),
        "{}",
        stdout(&out)
    );
    // A near-miss is an error even then.
    let typo = TempFile::new("app.yml", "resilience4j.bulkheads.instances.bank: {}\n");
    let out = run(&["--allow-missing-section", typo.path()]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
}

#[test]
fn a_near_miss_of_the_section_is_named_with_the_right_key() {
    let file = TempFile::new(
        "application.yml",
        "resilience4j:\n  bulkheads:\n    instances:\n      bank:\n        max-concurrent-calls: 4\n",
    );
    let out = run(&[file.path()]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains(
            "  error[config] resilience4j.bulkheads: {instances: ...} is not a section this crate \
             reads (did you mean resilience4j.bulkhead?)"
        ),
        "{text}"
    );
    assert_eq!(counts(&text).0, "1", "only the near-miss: {text}");
}

#[test]
fn a_zero_limit_is_a_warning_naming_the_instance() {
    let file = TempFile::new(
        "application.yml",
        "resilience4j.bulkhead.instances:\n  bank: { maxConcurrentCalls: 0 }\n  ledger: {}\n",
    );
    let out = run(&[file.path()]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "a warning only: {text}");
    assert!(
        text.contains(
            "  warning[config] resilience4j.bulkhead.instances.bank.maxConcurrentCalls: 0 makes \
             the bulkhead 'bank' refuse every call"
        ),
        "{text}"
    );
    assert_eq!(counts(&text), ("0".to_owned(), "1".to_owned()), "{text}");
    let out = run(&["--deny-warnings", file.path()]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn a_number_too_large_says_too_large_with_the_maximum() {
    let file = TempFile::new(
        "application.yml",
        "resilience4j.bulkhead.instances.bank.maxConcurrentCalls: 99999999999999999999\n",
    );
    let out = run(&[file.path()]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains(
            "  error[config] resilience4j.bulkhead.instances.bank.maxConcurrentCalls: \
             99999999999999999999 is too large: the engine's maximum is 1073741823"
        ),
        "{text}"
    );
    assert!(!text.contains("not a whole number"), "{text}");
}

#[test]
fn every_error_names_the_file_once() {
    // A syntax error: on stderr, naming the file once, exit 1.
    let file = TempFile::new("application.yml", "resilience4j.bulkhead: [unclosed\n");
    let out = run(&[file.path()]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.starts_with(&format!("bulkhead-check: {}: YAML syntax error: ", file.path())),
        "{err}"
    );
    assert_eq!(err.matches(file.path()).count(), 1, "{err}");
    // The same with --format (the file's extension says nothing).
    let conf = TempFile::new("settings.conf", "a = [\n");
    let out = run(&["--format", "toml", conf.path()]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.starts_with(&format!("bulkhead-check: {}: TOML syntax error: ", conf.path())),
        "{err}"
    );
    assert_eq!(err.matches(conf.path()).count(), 1, "{err}");
    // Unreadable, unknown extension: exit 2, named once.
    for (path, says) in [
        ("examples/no-such-file.yml", "cannot read examples/no-such-file.yml: "),
        ("examples/config_file.rs", "examples/config_file.rs: cannot tell the format"),
    ] {
        let out = run(&[path]);
        assert_eq!(out.status.code(), Some(2));
        let err = stderr(&out);
        assert!(err.starts_with(&format!("bulkhead-check: {says}")), "{err}");
        assert_eq!(err.matches(path).count(), 1, "{err}");
    }
    // Settings errors are listed under the file's heading, without repeating it.
    let out = run(&["examples/config/errors.yml"]);
    let text = stdout(&out);
    assert!(
        text.lines().filter(|l| l.contains("error[config]")).all(|l| !l.contains("errors.yml")),
        "{text}"
    );
}

/// Issue 31: an instance left out for its settings errors is in the file: the checker
/// reports its errors, not `R-RES-BH-1`'s "connection pool 'bank' has no bulkhead; add
/// resilience4j.bulkhead.instances.bank". A pool with no instance at all still gets that
/// warning.
#[test]
fn an_instance_dropped_for_its_errors_is_not_reported_missing() {
    let file = TempFile::new(
        "application.yml",
        "\
client:
  bank.max-concurrent: 20
  ledger.max-concurrent: 5
  reports.max-concurrent: 10
resilience4j.bulkhead.instances:
  bank: { base-config: shared, max-concurrent-calls: 16 }
  ledger: { max-concurrent-calls: 4, sheddable-headroom: 5 }
",
    );
    let out = run(&[file.path()]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    for line in [
        "  error[config] resilience4j.bulkhead.instances.bank.base-config: \"shared\" names no \
         config under resilience4j.bulkhead.configs",
        "  error[config] resilience4j.bulkhead.instances.ledger.sheddable-headroom: 5 is above \
         max-concurrent-calls (4, from resilience4j.bulkhead.instances.ledger.\
         max-concurrent-calls): no sheddable call could ever run",
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
    }
    assert!(!text.contains("connection pool 'bank' has no bulkhead"), "{text}");
    assert!(!text.contains("connection pool 'ledger' has no bulkhead"), "{text}");
    assert!(
        text.contains(
            "  warning[R-RES-BH-1] client.reports.max-concurrent: connection pool 'reports' has \
             no bulkhead"
        ),
        "{text}"
    );
    assert_eq!(counts(&text), ("2".to_owned(), "1".to_owned()), "{text}");
}
