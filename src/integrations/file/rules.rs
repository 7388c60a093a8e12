//! The style guide's bulkhead rules, as checks on a configuration file.
//!
//! Each finding carries a stable rule id (the guide's where it numbers the rule), a
//! severity, the key path it is about, and a message.
//!
//! | id | severity | what |
//! |----|----------|------|
//! | [`R-RES-BH-X1`](THREAD_POOL) | error | `type: THREADPOOL` in a bulkhead entry, or a `resilience4j.thread-pool-bulkhead` section: thread-pool bulkheads are forbidden for outbound calls |
//! | [`R-RES-BH-3`](POOL_SIZE) | error | a bulkhead allowing as many calls as its connection pool (`client.<name>.max-concurrent`), or more; or a pool size that is not a whole number |
//! | [`R-RES-BH-3`](POOL_SIZE) | warning | a bulkhead not at 80 % of its pool (`floor(pool × 4 / 5)`, as [`BulkheadConfig::for_pool`]) |
//! | [`R-RES-BH-3`](POOL_SIZE) | warning | an `adaptive:` block whose max (`max-limit`, else `max-concurrent-calls`) is above 80 % of the pool |
//! | [`R-RES-BH-1`](OWN_LAYER) | warning | a connection pool (`client.<name>.max-concurrent`) with no bulkhead instance `<name>` (an instance written but left out for its settings errors is not missing: its errors are reported instead) |
//! | [`R-RES-BH-WAIT`](MAX_WAIT) | warning | `max-wait-duration` above 1 s: the bulkhead turns into a queue |
//!
//! # Examples
//!
//! ```
//! use bulkhead::file::{rules, ConfigFile, Severity};
//!
//! let file = ConfigFile::from_yaml_str(
//!     "
//! client.bank.max-concurrent: 20
//! resilience4j.bulkhead.instances.bank:
//!   max-concurrent-calls: 10
//!   max-wait-duration: 2s
//! ",
//! )?;
//! let findings = rules::check(&file);
//! assert_eq!(findings.len(), 2);
//! assert_eq!(findings[0].rule(), rules::POOL_SIZE);
//! assert_eq!(findings[0].severity(), Severity::Warning);
//! assert_eq!(findings[0].path(), "resilience4j.bulkhead.instances.bank.max-concurrent-calls");
//! assert_eq!(findings[1].rule(), rules::MAX_WAIT);
//! # Ok::<(), bulkhead::file::FileError>(())
//! ```

use core::fmt;
use core::time::Duration;
use std::collections::BTreeSet;

use super::tree::Value;
use super::{duration, ConfigFile, Origins};
use crate::bulkhead::config::BulkheadConfig;

/// R-RES-BH-X1 (forbidden): a thread-pool bulkhead for outbound calls. It loses the caller's
/// context (thread-locals, tracing spans, security context) and builds a pool on top of the
/// connection pool.
pub const THREAD_POOL: &str = "R-RES-BH-X1";

/// R-RES-BH-3: size the bulkhead at 80 % of the connection pool (a pool of 20 gives 16), so it
/// trips before the pool runs dry.
pub const POOL_SIZE: &str = "R-RES-BH-3";

/// R-RES-BH-1: the bulkhead is its own layer, separate from the connection pool; a pool
/// without a bulkhead makes callers wait seconds when the downstream is slow.
pub const OWN_LAYER: &str = "R-RES-BH-1";

/// The guide's max-wait advice (it has no number of its own; the id is this crate's): the
/// wait is short (100 ms in the guide, 0 to fail fast), never long enough to turn the
/// bulkhead into a queue.
pub const MAX_WAIT: &str = "R-RES-BH-WAIT";

/// The longest `max-wait-duration` that [`MAX_WAIT`] lets pass without a warning.
pub const MAX_WAIT_LIMIT: Duration = Duration::from_secs(1);

/// How bad a finding is: errors make `bulkhead-check` exit non-zero.
///
/// ```
/// use bulkhead::file::Severity;
/// assert!(Severity::Error > Severity::Warning);
/// assert_eq!(Severity::Error.to_string(), "error");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// The file works, but not as the guide advises.
    Warning,
    /// The guide forbids it.
    Error,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Warning => "warning",
            Severity::Error => "error",
        })
    }
}

/// One rule's verdict on one place in the file.
///
/// Displays as `error[R-RES-BH-X1] <path>: <message>`.
///
/// ```
/// use bulkhead::file::{rules, ConfigFile, Severity};
/// let file = ConfigFile::from_yaml_str(
///     "resilience4j.bulkhead: {}\nresilience4j.thread-pool-bulkhead.instances.bank.core-thread-pool-size: 4",
/// )?;
/// let finding = &file.check()[0];
/// assert_eq!(finding.rule(), rules::THREAD_POOL);
/// assert_eq!(finding.severity(), Severity::Error);
/// assert_eq!(finding.path(), "resilience4j.thread-pool-bulkhead.instances.bank");
/// assert!(finding.to_string().starts_with("error[R-RES-BH-X1] resilience4j.thread-pool-bulkhead.instances.bank: "));
/// # Ok::<(), bulkhead::file::FileError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    rule: &'static str,
    severity: Severity,
    path: String,
    message: String,
}

impl Finding {
    /// The rule id, one of this module's constants.
    ///
    /// ```
    /// let file = bulkhead::file::ConfigFile::from_yaml_str("resilience4j.bulkhead.instances.a.max-wait-duration: 5s")?;
    /// let finding = &file.check()[0];
    /// assert_eq!(finding.rule(), "R-RES-BH-WAIT");
    /// # Ok::<(), bulkhead::file::FileError>(())
    /// ```
    pub fn rule(&self) -> &'static str {
        self.rule
    }

    /// How bad it is.
    ///
    /// ```
    /// let file = bulkhead::file::ConfigFile::from_yaml_str("resilience4j.bulkhead.instances.a.max-wait-duration: 5s")?;
    /// let finding = &file.check()[0];
    /// assert_eq!(finding.severity(), bulkhead::file::Severity::Warning);
    /// # Ok::<(), bulkhead::file::FileError>(())
    /// ```
    pub fn severity(&self) -> Severity {
        self.severity
    }

    /// The key path it is about, as written in the file.
    ///
    /// ```
    /// let file = bulkhead::file::ConfigFile::from_yaml_str("resilience4j.bulkhead.instances.a.max-wait-duration: 5s")?;
    /// let finding = &file.check()[0];
    /// assert_eq!(finding.path(), "resilience4j.bulkhead.instances.a.max-wait-duration");
    /// # Ok::<(), bulkhead::file::FileError>(())
    /// ```
    pub fn path(&self) -> &str {
        &self.path
    }

    /// What is wrong and what the guide asks for.
    ///
    /// ```
    /// let file = bulkhead::file::ConfigFile::from_yaml_str("resilience4j.bulkhead.instances.a.max-wait-duration: 5s")?;
    /// let finding = &file.check()[0];
    /// assert!(finding.message().starts_with("max-wait-duration is 5s"));
    /// # Ok::<(), bulkhead::file::FileError>(())
    /// ```
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[{}] {}: {}", self.severity, self.rule, self.path, self.message)
    }
}

fn finding(rule: &'static str, severity: Severity, path: &str, message: String) -> Finding {
    Finding { rule, severity, path: path.to_owned(), message }
}

/// Applies every rule to `file`. Findings come rule by rule, in the order of the table
/// above, each rule's sorted by name.
///
/// ```
/// let file = bulkhead::file::ConfigFile::from_yaml_str("resilience4j.bulkhead.instances.bank.max-concurrent-calls: 16")?;
/// assert!(bulkhead::file::rules::check(&file).is_empty());
/// # Ok::<(), bulkhead::file::FileError>(())
/// ```
pub fn check(file: &ConfigFile) -> Vec<Finding> {
    let mut out = Vec::new();
    thread_pool(file, &mut out);
    pool_size(file, &mut out);
    max_wait(file, &mut out);
    out
}

fn thread_pool(file: &ConfigFile, out: &mut Vec<Finding>) {
    const WHY: &str = "thread-pool bulkheads are forbidden for outbound calls: the call would run \
                       on another thread, losing the caller's context (thread-locals, tracing \
                       spans, security context), and the pool sits on top of the connection pool";
    for (path, value) in &file.facts.thread_pool_types {
        let message = format!("{value}: {WHY}; use the semaphore bulkhead (remove `type`)");
        out.push(finding(THREAD_POOL, Severity::Error, path, message));
    }
    for path in &file.facts.thread_pool_sections {
        let message = format!("{WHY}; configure it under resilience4j.bulkhead instead");
        out.push(finding(THREAD_POOL, Severity::Error, path, message));
    }
}

/// A pool size: a whole number, written as a YAML/TOML integer or as digits.
fn pool_value(value: &Value) -> Option<usize> {
    match value {
        Value::Int(n) => usize::try_from(*n).ok(),
        Value::Str(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn pool_size(file: &ConfigFile, out: &mut Vec<Finding>) {
    let mut no_bulkhead = Vec::new();
    for (name, (pool_path, value)) in &file.facts.pools {
        let Some(pool) = pool_value(value) else {
            let message = format!(
                "{} is not a whole number, so bulkhead '{name}' cannot be checked against its \
                 connection pool",
                value.render()
            );
            out.push(finding(POOL_SIZE, Severity::Error, pool_path, message));
            continue;
        };
        let Some(instance) = file.instance(name) else {
            // An instance left out for its settings errors is in the file: those errors are
            // reported, and it cannot be checked against its pool until they are fixed.
            if !file.facts.unresolved_instances.contains(name) {
                no_bulkhead.push((name, pool_path, pool));
            }
            continue;
        };
        let calls = instance.config().max_concurrent_calls();
        let advised = BulkheadConfig::for_pool(pool).max_concurrent_calls();
        let (path, default_note) = match &instance.origins.max_concurrent_calls {
            Some(path) => (path.as_str(), ""),
            None => (instance.path(), " (the default)"),
        };
        if calls >= pool {
            let message = format!(
                "bulkhead '{name}' allows {calls} concurrent calls{default_note}, not fewer than \
                 its connection pool ({pool_path}: {pool}): the pool runs dry before the \
                 bulkhead trips; use {advised} (80 % of the pool)"
            );
            out.push(finding(POOL_SIZE, Severity::Error, path, message));
        } else if calls != advised {
            let message = format!(
                "bulkhead '{name}' allows {calls} concurrent calls{default_note}; the guide sizes \
                 it at 80 % of its connection pool ({pool_path}: {pool}): {advised}"
            );
            out.push(finding(POOL_SIZE, Severity::Warning, path, message));
        }
        if let Some(adaptive) = instance.adaptive() {
            let max = adaptive.max_limit().unwrap_or(calls);
            if max > advised {
                let message = format!(
                    "adaptive bulkhead '{name}' may grow to {max} concurrent calls, above 80 % \
                     of its connection pool ({pool_path}: {pool}): set max-limit: {advised}"
                );
                out.push(finding(POOL_SIZE, Severity::Warning, adaptive.path(), message));
            }
        }
    }
    for (name, pool_path, pool) in no_bulkhead {
        let advised = BulkheadConfig::for_pool(pool).max_concurrent_calls();
        let message = format!(
            "connection pool '{name}' has no bulkhead: a slow downstream makes callers wait for \
             a connection; add resilience4j.bulkhead.instances.{name} with \
             max-concurrent-calls: {advised}"
        );
        out.push(finding(OWN_LAYER, Severity::Warning, pool_path, message));
    }
}

fn max_wait(file: &ConfigFile, out: &mut Vec<Finding>) {
    // One finding per place the long wait is written, however many entries inherit it.
    let mut seen = BTreeSet::new();
    let entries = file
        .configs
        .iter()
        .map(|c| (&c.config, &c.origins))
        .chain(file.instances.iter().map(|i| (&i.config, &i.origins)));
    for (config, Origins { max_wait_duration, .. }) in entries {
        let wait = config.max_wait_duration();
        let Some(path) = max_wait_duration else { continue };
        if wait > MAX_WAIT_LIMIT && seen.insert(path.clone()) {
            let message = format!(
                "max-wait-duration is {}, above {}: waiting callers turn the bulkhead into a \
                 queue; the guide uses 100ms (0 fails fast)",
                duration::format(wait),
                duration::format(MAX_WAIT_LIMIT)
            );
            out.push(finding(MAX_WAIT, Severity::Warning, path, message));
        }
    }
}
