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
            "base",
            "config"
        ]
    );
    assert_eq!(row("bank"), ["bank", "16", "100ms", "no", "cap", "default"]);
    assert_eq!(row("payment-gateway"), ["payment-gateway", "8", "0", "0", "default"]);
    assert_eq!(row("reports"), ["reports", "2", "50ms", "no", "cap", "default"]);
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
        "  error[config] resilience4j.bulkhead.instances.ledger.max-concurrent-calls: 2000000000 is above the engine's maximum of 1073741823",
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

#[test]
fn a_file_without_a_bulkhead_section_says_so() {
    let file = TempFile::new("app.yml", "spring.application.name: shop\n");
    let out = run(&[file.path()]);
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).contains("no resilience4j.bulkhead section"), "{}", stdout(&out));
    assert!(Path::new(file.path()).exists());
}
