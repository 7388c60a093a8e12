//! Builds a `BulkheadRegistry` from a Resilience4j-style `application.yml` (or `.toml`) and
//! checks it against the style guide's rules.
//!
//! ```text
//! cargo run --features serde --example config_file                      # examples/application.yml
//! cargo run --features serde --example config_file -- my/application.toml
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use bulkhead::file::{format_duration, ConfigFile};
use bulkhead::{BulkheadFull, BulkheadRegistry};

fn main() -> ExitCode {
    let path = std::env::args_os().nth(1).map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples").join("application.yml")
    });

    // One call builds every configured bulkhead: configs.default becomes the registry's
    // default, the other configs its named configs, every instance a bulkhead.
    let registry = match BulkheadRegistry::from_file(&path) {
        Ok(registry) => registry,
        Err(e) => {
            eprintln!("{}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    };
    for bulkhead in registry.all() {
        let config = bulkhead.config();
        println!(
            "{:<16} max-concurrent-calls {:>3}  max-wait-duration {:>6}",
            bulkhead.name(),
            config.max_concurrent_calls(),
            format_duration(config.max_wait_duration()),
        );
    }

    // The same name always gives the same bulkhead, shared by every caller of that system.
    let bank = registry.bulkhead("bank");
    let balance: Result<&str, BulkheadFull> = bank.call(|| "42.00 EUR");
    println!("bank answered {balance:?}");

    // A name the file does not know is created with the default config.
    let ledger = registry.bulkhead("ledger");
    println!("ledger (not in the file) got {} calls", ledger.config().max_concurrent_calls());

    // The style guide's rules, as `bulkhead-check` applies them.
    let file = ConfigFile::from_path(&path).expect("loaded above");
    let findings = file.check();
    if findings.is_empty() {
        println!("no findings: the file follows the style guide");
    }
    for finding in &findings {
        println!("{finding}");
    }
    ExitCode::SUCCESS
}
