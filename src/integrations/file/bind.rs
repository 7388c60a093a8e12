//! Binds flattened properties to bulkhead settings, Spring's way, and resolves base configs.

use core::time::Duration;
use std::collections::{BTreeMap, BTreeSet};

use super::duration::{self, DurationError};
use super::tree::{self, render_path, Leaf, Seg, Value};
use super::{
    AdaptiveAlgorithm, AdaptiveSettings, ConfigFile, Facts, FileError, Format, Ignored, Instance,
    NamedConfig, Origins, Warning, DEFAULT_QUEUE_INTERVAL, DEFAULT_QUEUE_TARGET,
};
use crate::bulkhead::config::BulkheadConfig;
use crate::bulkhead::config::ConfigError;
use crate::engine::policy::QueueOrder;

/// The settings a bulkhead entry takes, by relaxed name, with the name we print.
const SETTINGS: &[(&str, &str)] = &[
    ("maxconcurrentcalls", "max-concurrent-calls"),
    ("maxwaitduration", "max-wait-duration"),
    ("maxwaitingcalls", "max-waiting-calls"),
    ("baseconfig", "base-config"),
    ("type", "type"),
    ("writablestacktraceenabled", "writable-stack-trace-enabled"),
    ("eventconsumerbuffersize", "event-consumer-buffer-size"),
    ("faircallhandlingenabled", "fair-call-handling-enabled"),
    ("queueorder", "queue-order"),
    ("queuetarget", "queue-target"),
    ("queueinterval", "queue-interval"),
    ("sheddableheadroom", "sheddable-headroom"),
    ("guaranteedshare", "guaranteed-share"),
];

/// The values `queue-order` takes, by relaxed name, with the name we print.
const QUEUE_ORDERS: &[(&str, &str)] =
    &[("fifo", "fifo"), ("lifo", "lifo"), ("adaptivelifo", "adaptive-lifo")];

/// Resilience4j bulkhead keys that have no effect here, and why.
fn ignored_reason(canon: &str) -> Option<&'static str> {
    Some(match canon {
        "writablestacktraceenabled" => "a BulkheadFull error never captures a stack trace",
        "eventconsumerbuffersize" => {
            "events go straight to listeners registered with Bulkhead::on_event; there is no buffer"
        }
        "faircallhandlingenabled" => {
            "waiting callers are served in the order queue-order sets (fifo unless set); \
             Resilience4j's unfair mode has no counterpart here"
        }
        "bulkheadaspectorder" => "there are no Spring aspects here",
        _ => return None,
    })
}

pub(crate) fn duration_problem(e: DurationError) -> String {
    match e {
        DurationError::Negative => "is negative".to_owned(),
        DurationError::TooLarge => "is too large".to_owned(),
        DurationError::Invalid => "is not a duration (write 100ms, 1s, 2m, PT0.1S, or a whole \
                                   number of milliseconds)"
            .to_owned(),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Config,
    Instance,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Setting {
    MaxConcurrentCalls,
    MaxWaitDuration,
    MaxWaitingCalls,
    BaseConfig,
    Type,
    QueueOrder,
    QueueTarget,
    QueueInterval,
    SheddableHeadroom,
    GuaranteedShare,
}

/// A `queue-order` as written; the adaptive one takes its target and interval from
/// `queue-target` and `queue-interval`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Order {
    Fifo,
    Lifo,
    AdaptiveLifo,
}

impl Order {
    fn label(self) -> &'static str {
        match self {
            Order::Fifo => "fifo",
            Order::Lifo => "lifo",
            Order::AdaptiveLifo => "adaptive-lifo",
        }
    }
}

/// A value and where it was written.
#[derive(Clone, Debug)]
struct At<T> {
    value: T,
    path: String,
}

/// One `configs.<name>` or `instances.<name>` entry as written.
#[derive(Clone, Debug, Default)]
struct Decl {
    path: String,
    max_concurrent_calls: Option<At<usize>>,
    max_wait_duration: Option<At<Duration>>,
    max_waiting_calls: Option<At<usize>>,
    /// `None` inside: written empty, meaning "no base config".
    base_config: Option<At<Option<String>>>,
    /// `type: THREADPOOL`, as written (a later document's `type: SEMAPHORE` clears it).
    thread_pool: Option<At<String>>,
    /// The `adaptive:` block (instances only), once any of it is written.
    adaptive: Option<AdaptiveDecl>,
    queue_order: Option<At<Order>>,
    queue_target: Option<At<Duration>>,
    queue_interval: Option<At<Duration>>,
    sheddable_headroom: Option<At<usize>>,
    /// A keyed bulkhead's guaranteed share of its total (read by `configs_from_file`).
    guaranteed_share: Option<At<u32>>,
}

/// An `adaptive:` block as written (our extension of the layout).
#[derive(Clone, Debug, Default)]
struct AdaptiveDecl {
    algorithm: Option<AdaptiveAlgorithm>,
    min_limit: Option<usize>,
    max_limit: Option<usize>,
    initial_limit: Option<usize>,
    timeout: Option<Duration>,
}

#[derive(Default)]
struct Binder {
    errors: Vec<ConfigError>,
    error_paths: BTreeSet<String>,
    configs: BTreeMap<String, Decl>,
    instances: BTreeMap<String, Decl>,
    /// Which document set each setting, and where: later documents override, a second
    /// setting in the same document is an error.
    seen: BTreeMap<(Kind, String, Setting), (usize, String)>,
    tags: BTreeMap<String, String>,
    ignored: Vec<Ignored>,
    has_section: bool,
    facts: Facts,
    thread_pool_sections: BTreeSet<String>,
    thread_pool_section_root: Option<String>,
    /// Sections that look like a misspelt `resilience4j.bulkhead`: the path as written, and
    /// the first key inside it (for the message).
    near_misses: BTreeMap<String, Option<String>>,
}

/// Parses, binds and resolves. `Err` only for syntax errors; settings errors are returned
/// beside what could be resolved. A file without a `resilience4j.bulkhead` section is a
/// settings error unless `allow_missing_section`; a near-miss of that key always is.
pub(crate) fn load(
    text: &str,
    format: Format,
    allow_missing_section: bool,
) -> Result<(ConfigFile, Vec<ConfigError>), FileError> {
    let syntax = |message: String| FileError::Syntax { format, message, path: None };
    let docs = match format {
        Format::Yaml => {
            tree::yaml::guard(text).map_err(syntax)?;
            let docs =
                yaml_rust2::YamlLoader::load_from_str(text).map_err(|e| syntax(e.to_string()))?;
            docs.iter()
                .map(|doc| {
                    let mut leaves = Vec::new();
                    tree::yaml::flatten(doc, &mut Vec::new(), &mut leaves);
                    leaves
                })
                .collect::<Vec<_>>()
        }
        Format::Toml => {
            let table: toml::Table = text
                .parse()
                .map_err(|e: toml::de::Error| syntax(e.to_string().trim_end().to_owned()))?;
            let mut leaves = Vec::new();
            tree::toml::flatten_table(&table, &mut Vec::new(), &mut leaves);
            vec![leaves]
        }
    };

    let mut b = Binder::default();
    for (doc_index, leaves) in docs.iter().enumerate() {
        if let Some(profile) = profile_of(leaves) {
            b.ignored.push(Ignored {
                path: render_path(&profile.path),
                value: profile.value.render(),
                reason: format!(
                    "document {} is for a Spring profile and was skipped (no profile is active here)",
                    doc_index + 1
                ),
            });
            continue;
        }
        for leaf in leaves {
            b.leaf(doc_index, leaf);
        }
    }
    b.facts.thread_pool_sections = if b.thread_pool_sections.is_empty() {
        b.thread_pool_section_root.take().into_iter().collect()
    } else {
        core::mem::take(&mut b.thread_pool_sections).into_iter().collect()
    };
    b.section_errors(text, format, allow_missing_section);
    Ok(b.finish(format))
}

/// The section we read, as a reader would write it.
const SECTION: &str = "resilience4j.bulkhead";

/// Whether the first two keys of a path look like a misspelt `resilience4j.bulkhead` (and
/// are not it, nor another Resilience4j module such as `thread-pool-bulkhead`).
fn near_miss(first: &str, second: Option<&str>) -> bool {
    let bulkheadish = |c: &str| c != "threadpoolbulkhead" && distance(c, "bulkhead") <= 2;
    match (first, second) {
        ("resilience4j", Some(second)) => second != "bulkhead" && bulkheadish(second),
        // `bulkhead.instances...` at the root, or `bulkheads:`.
        (first, _) if bulkheadish(first) => true,
        (first, Some(second)) => {
            first != "resilience4j" && distance(first, "resilience4j") <= 2 && bulkheadish(second)
        }
        _ => false,
    }
}

/// The `spring.config.activate.on-profile` (or legacy `spring.profiles`) leaf of a
/// document, if it has one.
fn profile_of(leaves: &[Leaf]) -> Option<&Leaf> {
    leaves.iter().find(|leaf| {
        let c: Vec<&str> = leaf.path.iter().map(|s| s.canon.as_str()).collect();
        // `spring.profiles: prod` (before Spring Boot 2.4) is a condition too; but
        // `spring.profiles.active` and friends are settings, not conditions.
        c.starts_with(&["spring", "config", "activate", "onprofile"]) || c == ["spring", "profiles"]
    })
}

/// Levenshtein distance, for "did you mean" hints on short keys.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur.push((prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

fn suggestion(canon: &str, candidates: &[(&str, &str)]) -> String {
    candidates
        .iter()
        .map(|(c, shown)| (distance(canon, c), *shown))
        .filter(|(d, _)| *d <= 3)
        .min_by_key(|(d, _)| *d)
        .map(|(_, shown)| format!(" (did you mean {shown}?)"))
        .unwrap_or_default()
}

/// A whole number of calls, at most `max`. A number too large for any integer type (YAML
/// reads `99999999999999999999` as a float) is "too large", not "not a whole number".
fn count(value: &Value, max: usize) -> Result<usize, String> {
    let above = || {
        if max == BulkheadConfig::MAX_CONCURRENT_CALLS {
            format!("is too large: the engine's maximum is {max}")
        } else {
            format!("is too large: the maximum is {max}")
        }
    };
    let n: i128 = match value {
        Value::Int(n) => i128::from(*n),
        Value::Str(s) | Value::Float(s) => {
            let t = s.trim();
            let digits = t.strip_prefix(['+', '-']).unwrap_or(t);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err("is not a whole number".to_owned());
            }
            match t.parse::<i128>() {
                Ok(n) => n,
                Err(_) if t.starts_with('-') => return Err("is negative".to_owned()),
                Err(_) => return Err(above()),
            }
        }
        Value::Null | Value::EmptyMap => return Err("has no value".to_owned()),
        _ => return Err("is not a whole number".to_owned()),
    };
    if n < 0 {
        return Err("is negative".to_owned());
    }
    match usize::try_from(n) {
        Ok(n) if n <= max => Ok(n),
        _ => Err(above()),
    }
}

fn duration_value(value: &Value) -> Result<Duration, String> {
    match value {
        Value::Int(n) => duration::from_millis(*n).map_err(duration_problem),
        Value::Str(s) => duration::parse(s).map_err(duration_problem),
        Value::Null | Value::EmptyMap => Err("has no value".to_owned()),
        _ => Err(duration_problem(DurationError::Invalid)),
    }
}

/// A `queue-order`: `fifo`, `lifo` or `adaptive-lifo`, in any relaxed spelling.
fn order_value(value: &Value) -> Result<Order, String> {
    const VALID: &str = "write fifo, lifo or adaptive-lifo";
    if value.is_empty() {
        return Err(format!("has no value ({VALID})"));
    }
    let Some(text) = value.as_text() else {
        return Err(format!("is not a queue order: {VALID}"));
    };
    match tree::canonical(&text).as_str() {
        "fifo" => Ok(Order::Fifo),
        "lifo" => Ok(Order::Lifo),
        "adaptivelifo" => Ok(Order::AdaptiveLifo),
        other => {
            let hint = suggestion(other, QUEUE_ORDERS);
            Err(format!("is not a queue order: {VALID}{hint}"))
        }
    }
}

/// A `queue-target` or `queue-interval`: a duration above zero.
fn positive_duration(value: &Value) -> Result<Duration, String> {
    let d = duration_value(value)?;
    if d.is_zero() {
        return Err("is zero: adaptive LIFO needs a target and an interval above zero".to_owned());
    }
    Ok(d)
}

impl Binder {
    fn error(&mut self, path: String, value: String, problem: impl Into<String>) {
        // One error per path: a bad map reports once, not once per key inside it.
        if self.error_paths.insert(path.clone()) {
            self.errors.push(ConfigError::new(path, value, problem));
        }
    }

    fn leaf(&mut self, doc: usize, leaf: &Leaf) {
        let segs = &leaf.path;
        let canon = |i: usize| segs.get(i).map(|s| s.canon.as_str());
        match (canon(0), canon(1)) {
            (Some("resilience4j"), Some("bulkhead")) => {
                self.has_section = true;
                self.bulkhead_leaf(doc, leaf);
            }
            (Some("resilience4j"), Some("threadpoolbulkhead")) => {
                self.thread_pool_section_root.get_or_insert_with(|| render_path(&segs[..2]));
                if segs.len() >= 4 && matches!(canon(2), Some("configs" | "instances" | "backends"))
                {
                    self.thread_pool_sections.insert(render_path(&segs[..4]));
                }
            }
            (Some("client"), Some(_)) if segs.len() == 3 && canon(2) == Some("maxconcurrent") => {
                let name = segs[1].raw.clone();
                self.facts.pools.insert(name, (render_path(segs), leaf.value.clone()));
            }
            (Some(first), second) if near_miss(first, second) => {
                // `bulkhead:` at the root is one key; `resilience4j.bulkheads:` two.
                let n = if distance(first, "bulkhead") <= 2 { 1 } else { 2 };
                let inner = segs.get(n).map(|s| s.raw.clone());
                self.near_misses.entry(render_path(&segs[..n])).or_insert(inner);
            }
            _ => {}
        }
    }

    /// A near-miss of `resilience4j.bulkhead` is an error; so is a file without the
    /// section, unless the caller allows it.
    fn section_errors(&mut self, text: &str, format: Format, allow_missing_section: bool) {
        let defaults = "every bulkhead would silently get the built-in defaults";
        for (path, inner) in core::mem::take(&mut self.near_misses) {
            // `bulkhead:` at the root beside a real section is likely the application's
            // own key; under `resilience4j` a second bulkhead-like section is a typo.
            if self.has_section && !path.contains('.') {
                continue;
            }
            let value = inner.map_or_else(|| "{}".to_owned(), |k| format!("{{{k}: ...}}"));
            let problem = format!(
                "is not a section this crate reads (did you mean {SECTION}?): without \
                 {SECTION}, {defaults}"
            );
            self.error(path, value, problem);
        }
        if self.has_section || allow_missing_section || !self.errors.is_empty() {
            return;
        }
        let what = if text.trim().is_empty() { "the file is empty" } else { "not in the file" };
        let explicit = match format {
            Format::Yaml => "resilience4j.bulkhead: {}",
            Format::Toml => "[resilience4j.bulkhead]",
        };
        self.error(
            SECTION.to_owned(),
            format!("({what})"),
            format!(
                "is required: without it, {defaults}. If the file has no bulkhead settings on \
                 purpose, write `{explicit}` in it, or load it with \
                 Loader::allow_missing_section"
            ),
        );
    }

    fn bulkhead_leaf(&mut self, doc: usize, leaf: &Leaf) {
        let segs = &leaf.path;
        let value = &leaf.value;
        let shown = |n: usize| render_path(&segs[..n]);
        let deeper = segs.len() > 3;
        match segs.get(2).map(|s| s.canon.as_str()) {
            None => {
                if !value.is_empty() {
                    self.error(shown(2), value.render(), "is not a map of bulkhead settings");
                }
            }
            Some(section @ ("configs" | "instances" | "backends")) => {
                let kind = if section == "configs" { Kind::Config } else { Kind::Instance };
                if !deeper {
                    if !value.is_empty() {
                        self.error(shown(3), value.render(), "is not a map of names");
                    }
                    return;
                }
                let name = segs[3].raw.clone();
                let decls = match kind {
                    Kind::Config => &mut self.configs,
                    Kind::Instance => &mut self.instances,
                };
                decls
                    .entry(name.clone())
                    .or_insert_with(|| Decl { path: shown(4), ..Decl::default() });
                match segs.get(4) {
                    None => {
                        if !value.is_empty() {
                            self.error(
                                shown(4),
                                value.render(),
                                "is not a map of bulkhead settings",
                            );
                        }
                    }
                    Some(key) => self.setting(doc, kind, name, key, segs, value),
                }
            }
            Some("tags") => match segs.len() {
                3 if value.is_empty() => {}
                3 => self.error(shown(3), value.render(), "is not a map of tags"),
                4 => match value.as_text() {
                    Some(text) => {
                        self.tags.insert(segs[3].raw.clone(), text);
                    }
                    None => self.error(shown(4), value.render(), "is not a tag value"),
                },
                _ => self.error(shown(4), "{...}".to_owned(), "is a map, not a tag value"),
            },
            Some(key @ "bulkheadaspectorder") if segs.len() == 3 => {
                self.ignore(shown(3), value, key);
            }
            Some(key) => {
                let hint = suggestion(
                    key,
                    &[
                        ("configs", "configs"),
                        ("instances", "instances"),
                        ("backends", "backends"),
                        ("tags", "tags"),
                    ],
                );
                let v = if deeper { "{...}".to_owned() } else { value.render() };
                self.error(
                    shown(3),
                    v,
                    format!(
                        "is not a bulkhead section (configs, instances, backends or tags){hint}"
                    ),
                );
            }
        }
    }

    fn ignore(&mut self, path: String, value: &Value, canon: &str) {
        let reason = ignored_reason(canon).unwrap_or("no effect here");
        self.ignored.push(Ignored { path, value: value.render(), reason: reason.to_owned() });
    }

    fn setting(
        &mut self,
        doc: usize,
        kind: Kind,
        name: String,
        key: &Seg,
        segs: &[Seg],
        value: &Value,
    ) {
        let path = render_path(&segs[..5]);
        let canon = key.canon.as_str();
        if canon == "adaptive" {
            self.adaptive_setting(kind, &name, path, segs, value);
            return;
        }
        let setting = match canon {
            "maxconcurrentcalls" => Setting::MaxConcurrentCalls,
            "maxwaitduration" => Setting::MaxWaitDuration,
            "maxwaitingcalls" => Setting::MaxWaitingCalls,
            "baseconfig" => Setting::BaseConfig,
            "type" => Setting::Type,
            "queueorder" => Setting::QueueOrder,
            "queuetarget" => Setting::QueueTarget,
            "queueinterval" => Setting::QueueInterval,
            "sheddableheadroom" => Setting::SheddableHeadroom,
            "guaranteedshare" => Setting::GuaranteedShare,
            _ if ignored_reason(canon).is_some() => {
                if segs.len() == 5 {
                    self.ignore(path, value, canon);
                }
                return;
            }
            _ => {
                let v = if segs.len() > 5 { "{...}".to_owned() } else { value.render() };
                let hint = suggestion(canon, SETTINGS);
                self.error(path, v, format!("is not a bulkhead setting{hint}"));
                return;
            }
        };
        if segs.len() > 5 {
            self.error(path, "{...}".to_owned(), "is a map, not a single value");
            return;
        }
        // Same setting twice: an error within a document, an override across documents.
        let id = (kind, name.clone(), setting);
        if let Some((earlier_doc, earlier_path)) = self.seen.get(&id) {
            if *earlier_doc == doc {
                let problem = format!("is set twice (also as {earlier_path})");
                self.error(path, value.render(), problem);
                return;
            }
        }
        self.seen.insert(id, (doc, path.clone()));

        let decl = match kind {
            Kind::Config => self.configs.get_mut(&name),
            Kind::Instance => self.instances.get_mut(&name),
        };
        let Some(decl) = decl else { return };
        let result = match setting {
            Setting::MaxConcurrentCalls => count(value, BulkheadConfig::MAX_CONCURRENT_CALLS)
                .map(|n| decl.max_concurrent_calls = Some(At { value: n, path: path.clone() })),
            Setting::MaxWaitingCalls => count(value, usize::MAX)
                .map(|n| decl.max_waiting_calls = Some(At { value: n, path: path.clone() })),
            Setting::MaxWaitDuration => duration_value(value)
                .map(|d| decl.max_wait_duration = Some(At { value: d, path: path.clone() })),
            Setting::BaseConfig => match value {
                Value::Null => {
                    decl.base_config = Some(At { value: None, path: path.clone() });
                    Ok(())
                }
                _ => match value.as_text() {
                    Some(text) => {
                        let base = if text.is_empty() { None } else { Some(text) };
                        decl.base_config = Some(At { value: base, path: path.clone() });
                        Ok(())
                    }
                    None => Err("is not a config name".to_owned()),
                },
            },
            Setting::Type => match value.as_text().map(|t| tree::canonical(&t)) {
                Some(t) if t == "semaphore" => {
                    decl.thread_pool = None;
                    Ok(())
                }
                Some(t) if t == "threadpool" => {
                    decl.thread_pool = Some(At { value: value.render(), path: path.clone() });
                    Ok(())
                }
                _ => Err("is not a bulkhead type (SEMAPHORE or THREADPOOL)".to_owned()),
            },
            Setting::QueueOrder => order_value(value)
                .map(|o| decl.queue_order = Some(At { value: o, path: path.clone() })),
            Setting::QueueTarget => positive_duration(value)
                .map(|d| decl.queue_target = Some(At { value: d, path: path.clone() })),
            Setting::QueueInterval => positive_duration(value)
                .map(|d| decl.queue_interval = Some(At { value: d, path: path.clone() })),
            Setting::SheddableHeadroom => count(value, BulkheadConfig::MAX_CONCURRENT_CALLS)
                .map(|n| decl.sheddable_headroom = Some(At { value: n, path: path.clone() })),
            Setting::GuaranteedShare => count(value, u32::MAX as usize).map(|n| {
                let value = u32::try_from(n).unwrap_or(u32::MAX); // `count` checked the bound
                decl.guaranteed_share = Some(At { value, path: path.clone() });
            }),
        };
        if let Err(problem) = result {
            self.error(path, value.render(), problem);
        }
    }

    /// An entry's `guaranteed-share`: its own, else that of the nearest config of its
    /// `base-config` chain that writes one.
    fn inherited_share(&self, decl: &Decl, chain: &[String]) -> Option<At<u32>> {
        decl.guaranteed_share
            .clone()
            .or_else(|| chain.iter().find_map(|c| self.configs.get(c)?.guaranteed_share.clone()))
    }

    /// One key of an instance's `adaptive:` block (our extension; later documents override).
    fn adaptive_setting(
        &mut self,
        kind: Kind,
        name: &str,
        path: String,
        segs: &[Seg],
        value: &Value,
    ) {
        if kind == Kind::Config {
            let problem = "is not inherited: an adaptive block goes under an instance";
            self.error(path, "{...}".to_owned(), problem);
            return;
        }
        let Some(decl) = self.instances.get_mut(name) else { return };
        let block = decl.adaptive.get_or_insert_with(AdaptiveDecl::default);
        let Some(key) = segs.get(5) else {
            if !value.is_empty() {
                self.error(path, value.render(), "is not a map of adaptive settings");
            }
            return;
        };
        let path = render_path(&segs[..6]);
        if segs.len() > 6 {
            self.error(path, "{...}".to_owned(), "is a map, not a single value");
            return;
        }
        let max = BulkheadConfig::MAX_CONCURRENT_CALLS;
        let result = match key.canon.as_str() {
            "algorithm" => {
                match value.as_text().as_deref().and_then(AdaptiveAlgorithm::from_name) {
                    Some(a) => {
                        block.algorithm = Some(a);
                        Ok(())
                    }
                    None => Err("is not an algorithm (aimd, gradient2 or vegas)".to_owned()),
                }
            }
            "minlimit" => count(value, max).map(|n| block.min_limit = Some(n)),
            "maxlimit" => count(value, max).map(|n| block.max_limit = Some(n)),
            "initiallimit" => count(value, max).map(|n| block.initial_limit = Some(n)),
            "timeout" => duration_value(value).map(|d| block.timeout = Some(d)),
            _ => Err("is not an adaptive setting (algorithm, min-limit, max-limit, \
                      initial-limit or timeout)"
                .to_owned()),
        };
        if let Err(problem) = result {
            self.error(path, value.render(), problem);
        }
    }

    fn finish(mut self, format: Format) -> (ConfigFile, Vec<ConfigError>) {
        for decl in self.configs.values().chain(self.instances.values()) {
            if let Some(At { value, path }) = &decl.thread_pool {
                self.facts.thread_pool_types.push((path.clone(), value.clone()));
            }
        }
        let mut cycles: BTreeSet<Vec<String>> = BTreeSet::new();
        let mut configs = Vec::new();
        let config_names: Vec<String> = self.configs.keys().cloned().collect();
        for name in &config_names {
            let decl = self.configs[name].clone();
            if let Some((config, chain, origins)) =
                self.resolve(&decl, Some(name), None, &mut cycles)
            {
                let guaranteed_share = self.inherited_share(&decl, &chain);
                configs.push(NamedConfig {
                    name: name.clone(),
                    path: decl.path,
                    config,
                    chain,
                    origins: Origins {
                        guaranteed_share: path_of(guaranteed_share.clone()),
                        ..origins
                    },
                    adaptive: None,
                    guaranteed_share: guaranteed_share.map(|at| at.value),
                });
            }
        }
        let mut instances = Vec::new();
        let instance_decls = core::mem::take(&mut self.instances);
        let implicit = self.configs.contains_key("default").then_some("default");
        for (name, decl) in instance_decls {
            if let Some((config, chain, origins)) = self.resolve(&decl, None, implicit, &mut cycles)
            {
                let guaranteed_share = self.inherited_share(&decl, &chain);
                let adaptive = decl.adaptive.as_ref().and_then(|block| {
                    let settings = AdaptiveSettings {
                        path: format!("{}.adaptive", decl.path),
                        algorithm: block.algorithm.unwrap_or(AdaptiveAlgorithm::Gradient2),
                        min_limit: block.min_limit,
                        max_limit: block.max_limit,
                        initial_limit: block.initial_limit,
                        timeout: block.timeout,
                    };
                    match settings.check(&config) {
                        Ok(()) => Some(settings),
                        Err(e) => {
                            self.error(e.key().to_owned(), e.value().to_owned(), e.problem());
                            None
                        }
                    }
                });
                instances.push(Instance {
                    name,
                    path: decl.path,
                    config,
                    chain,
                    origins: Origins {
                        guaranteed_share: path_of(guaranteed_share.clone()),
                        ..origins
                    },
                    adaptive,
                    guaranteed_share: guaranteed_share.map(|at| at.value),
                });
            } else {
                self.facts.unresolved_instances.insert(name);
            }
        }
        let mut warnings: Vec<Warning> = instances
            .iter()
            .filter(|i| i.config.max_concurrent_calls() == 0)
            .map(|i| Warning {
                instance: i.name.clone(),
                path: i.origins.max_concurrent_calls.clone().unwrap_or_else(|| i.path.clone()),
                value: "0".to_owned(),
                message: format!(
                    "makes the bulkhead '{}' refuse every call (max-concurrent-calls 0: a \
                     closed bulkhead)",
                    i.name
                ),
            })
            .collect();
        warnings.extend(instances.iter().filter_map(unused_queue_order));
        let file = ConfigFile {
            format,
            path: None,
            configs,
            instances,
            tags: self.tags,
            ignored: self.ignored,
            warnings,
            has_section: self.has_section,
            facts: self.facts,
        };
        (file, self.errors)
    }

    /// Applies the entry's base-config chain. `None` (with the error recorded) when the chain
    /// names an unknown config or loops.
    fn resolve(
        &mut self,
        decl: &Decl,
        own_config_name: Option<&str>,
        implicit_base: Option<&str>,
        cycles: &mut BTreeSet<Vec<String>>,
    ) -> Option<(BulkheadConfig, Vec<String>, Origins)> {
        let mut layers: Vec<Decl> = vec![decl.clone()];
        let mut chain: Vec<String> = Vec::new();
        // A config is the first link of its own chain, so `a -> b -> a` is seen from `a`.
        let mut visited: Vec<String> = own_config_name.map(str::to_owned).into_iter().collect();
        let mut next: Option<(String, Option<String>)> = match &decl.base_config {
            Some(At { value: Some(base), path }) => Some((base.clone(), Some(path.clone()))),
            // No base-config, or an empty one (as Resilience4j reads it).
            _ => implicit_base.map(|b| (b.to_owned(), None)),
        };
        while let Some((base, base_path)) = next {
            let Some(base_decl) = self.configs.get(&base).cloned() else {
                if let Some(path) = base_path {
                    self.error(
                        path,
                        format!("{base:?}"),
                        "names no config under resilience4j.bulkhead.configs",
                    );
                }
                return None;
            };
            if let Some(pos) = visited.iter().position(|c| *c == base) {
                let mut members: Vec<String> = visited[pos..].to_vec();
                let shown = members.iter().chain([&base]).cloned().collect::<Vec<_>>().join(" -> ");
                members.sort();
                if cycles.insert(members) {
                    if let Some(path) = base_path {
                        self.error(
                            path,
                            format!("{base:?}"),
                            format!("closes a cycle of base configs: {shown}"),
                        );
                    }
                }
                return None;
            }
            chain.push(base.clone());
            visited.push(base.clone());
            next = match &base_decl.base_config {
                Some(At { value: Some(b), path }) => Some((b.clone(), Some(path.clone()))),
                _ => None,
            };
            layers.push(base_decl);
        }
        let defaults = BulkheadConfig::default();
        let mcc = nearest(&layers, |l| &l.max_concurrent_calls);
        let mwd = nearest(&layers, |l| &l.max_wait_duration);
        let mwc = nearest(&layers, |l| &l.max_waiting_calls);
        let order = nearest(&layers, |l| &l.queue_order);
        let target = nearest(&layers, |l| &l.queue_target);
        let interval = nearest(&layers, |l| &l.queue_interval);
        let headroom = nearest(&layers, |l| &l.sheddable_headroom);
        let calls = mcc.as_ref().map_or(defaults.max_concurrent_calls(), |a| a.value);
        let kind = order.as_ref().map_or(Order::Fifo, |a| a.value);
        let adaptive = kind == Order::AdaptiveLifo;

        // `queue-target` / `queue-interval` written in an entry that is not adaptive LIFO
        // would do nothing: an error, not a silent no-op. (An entry that inherits them and
        // sets another order itself is fine: the order it writes wins.)
        if !adaptive {
            let order_from = order
                .as_ref()
                .map_or_else(|| "the default".to_owned(), |a| format!("from {}", a.path));
            for at in [&decl.queue_target, &decl.queue_interval].into_iter().flatten() {
                let problem = format!(
                    "applies only to queue-order: adaptive-lifo, and this entry's queue order \
                     is {} ({order_from})",
                    kind.label()
                );
                self.error(at.path.clone(), duration::format(at.value), problem);
            }
        }
        if let Some(At { value: h, path: h_path }) = &headroom {
            if *h > calls {
                // At the key this entry writes: the headroom, else its own limit (so each
                // entry that lowers the limit under an inherited headroom is named).
                let never = "no sheddable call could ever run";
                let (key, value, problem) = match (&decl.sheddable_headroom, &mcc) {
                    (None, Some(limit)) if decl.max_concurrent_calls.is_some() => (
                        limit.path.clone(),
                        calls.to_string(),
                        format!("is below sheddable-headroom ({h}, from {h_path}): {never}"),
                    ),
                    _ => {
                        let from = mcc.as_ref().map_or_else(
                            || ", the default".to_owned(),
                            |a| format!(", from {}", a.path),
                        );
                        let entry = if decl.sheddable_headroom.is_some() {
                            String::new()
                        } else {
                            format!(" of {}", decl.path)
                        };
                        let problem = format!(
                            "is above max-concurrent-calls ({calls}{from}){entry}: {never}"
                        );
                        (h_path.clone(), h.to_string(), problem)
                    }
                };
                self.error(key, value, problem);
                return None;
            }
        }

        let queue_order = match kind {
            Order::Fifo => QueueOrder::Fifo,
            Order::Lifo => QueueOrder::Lifo,
            Order::AdaptiveLifo => QueueOrder::AdaptiveLifo {
                target: target.as_ref().map_or(DEFAULT_QUEUE_TARGET, |a| a.value),
                interval: interval.as_ref().map_or(DEFAULT_QUEUE_INTERVAL, |a| a.value),
            },
        };
        let mut builder = BulkheadConfig::builder()
            .max_concurrent_calls(calls)
            .max_wait_duration(mwd.as_ref().map_or(defaults.max_wait_duration(), |a| a.value))
            .queue_order(queue_order)
            .sheddable_headroom(headroom.as_ref().map_or(0, |a| a.value));
        if let Some(At { value: n, .. }) = &mwc {
            builder = builder.max_waiting_calls(*n);
        }
        match builder.build() {
            Ok(config) => Some((
                config,
                chain,
                Origins {
                    max_concurrent_calls: path_of(mcc),
                    max_wait_duration: path_of(mwd),
                    max_waiting_calls: path_of(mwc),
                    queue_order: path_of(order),
                    // Only an adaptive LIFO has a target and an interval.
                    queue_target: path_of(target.filter(|_| adaptive)),
                    queue_interval: path_of(interval.filter(|_| adaptive)),
                    sheddable_headroom: path_of(headroom),
                    guaranteed_share: None, // an instance's, set by the caller
                },
            )),
            Err(e) => {
                // Values are checked as they are read (and the headroom above); keep any
                // future check visible, at the key it is about.
                let at = match e.key() {
                    "sheddable_headroom" => path_of(headroom),
                    "queue_order" => path_of(order),
                    _ => path_of(mcc),
                };
                self.error(
                    at.unwrap_or_else(|| decl.path.clone()),
                    e.value().to_owned(),
                    e.problem().to_owned(),
                );
                None
            }
        }
    }
}

/// A warning for an instance whose `queue-order` (other than fifo) can never apply:
/// `max-waiting-calls: 0` lets nobody queue. (A zero `max-wait-duration` does not: a caller
/// may still wait with its own timeout, `Bulkhead::acquire_timeout`.)
fn unused_queue_order(i: &Instance) -> Option<Warning> {
    let order = i.config.queue_order();
    let path = i.origins.queue_order.as_ref()?;
    if order == QueueOrder::Fifo || i.config.max_waiting_calls() != Some(0) {
        return None;
    }
    Some(Warning {
        instance: i.name.clone(),
        path: path.clone(),
        value: order.label().to_owned(),
        message: format!(
            "has no effect on the bulkhead '{}': max-waiting-calls is 0, so no call ever queues",
            i.name
        ),
    })
}

/// Where a setting was written, if it was.
fn path_of<T>(at: Option<At<T>>) -> Option<String> {
    at.map(|a| a.path)
}

/// The value of a setting in the nearest layer that writes it (layers nearest first).
fn nearest<T: Clone>(layers: &[Decl], field: impl Fn(&Decl) -> &Option<At<T>>) -> Option<At<T>> {
    layers.iter().find_map(|layer| field(layer).clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distance_counts_edits() {
        assert_eq!(distance("maxconcurentcalls", "maxconcurrentcalls"), 1);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("same", "same"), 0);
    }

    #[test]
    fn count_reads_numbers_and_digit_strings() {
        let max = BulkheadConfig::MAX_CONCURRENT_CALLS;
        assert_eq!(count(&Value::Int(20), max), Ok(20));
        assert_eq!(count(&Value::Str(" 20 ".into()), max), Ok(20));
        assert_eq!(count(&Value::Int(-1), max), Err("is negative".into()));
        assert_eq!(
            count(&Value::Str("-99999999999999999999999999999999999999999".into()), max),
            Err("is negative".into())
        );
        assert_eq!(count(&Value::Str("2.5".into()), max), Err("is not a whole number".into()));
        assert_eq!(count(&Value::Float("2.0".into()), max), Err("is not a whole number".into()));
        assert_eq!(
            count(&Value::Int(1 << 30), max),
            Err("is too large: the engine's maximum is 1073741823".into())
        );
        assert_eq!(
            count(&Value::Str("99999999999999999999999999999999999999999".into()), usize::MAX),
            Err(format!("is too large: the maximum is {}", usize::MAX))
        );
    }
}
