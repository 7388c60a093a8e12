//! Flattens a YAML or TOML document into Spring-style property paths.
//!
//! Spring Boot reads `application.yml` as a flat list of properties: nested maps and dotted
//! keys are the same thing (`a: {b.c: 1}` is `a.b.c = 1`), and a key in brackets
//! (`[api.bank]`) keeps its dots. We do the same, keeping each segment as written (for error
//! messages) next to its relaxed form (for matching).

use std::fmt::Write as _;

/// One segment of a property path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Seg {
    /// As written, without brackets.
    pub(crate) raw: String,
    /// Spring's relaxed form: lower case, without `-` and `_`.
    pub(crate) canon: String,
}

impl Seg {
    pub(crate) fn new(raw: &str) -> Seg {
        Seg { raw: raw.to_owned(), canon: canonical(raw) }
    }
}

/// Spring's relaxed binding: `maxConcurrentCalls`, `max-concurrent-calls`,
/// `max_concurrent_calls` and `MAX_CONCURRENT_CALLS` are one key.
pub(crate) fn canonical(key: &str) -> String {
    key.chars().filter(|c| *c != '-' && *c != '_').flat_map(char::to_lowercase).collect()
}

/// Renders a path as a user can find it in the file: segments as written, joined by dots,
/// with brackets around a segment that holds a dot (or is empty).
pub(crate) fn render_path(segs: &[Seg]) -> String {
    let mut out = String::new();
    for (i, seg) in segs.iter().enumerate() {
        if i > 0 {
            out.push('.');
        }
        if seg.raw.is_empty() || seg.raw.contains('.') {
            let _ = write!(out, "[{}]", seg.raw);
        } else {
            out.push_str(&seg.raw);
        }
    }
    out
}

/// A leaf value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Value {
    Str(String),
    Int(i64),
    /// A float, as written (YAML) or printed (TOML).
    Float(String),
    Bool(bool),
    Null,
    /// `{}`: a map with nothing in it (declares a name with no settings).
    EmptyMap,
    /// A list, rendered for messages.
    List(String),
    /// Anything else (a TOML date, an unresolved YAML alias), rendered for messages.
    Other(String),
}

impl Value {
    /// How the value appears in an error message: strings quoted, the rest as written.
    pub(crate) fn render(&self) -> String {
        match self {
            Value::Str(s) => format!("{s:?}"),
            Value::Int(n) => n.to_string(),
            Value::Float(s) | Value::List(s) | Value::Other(s) => s.clone(),
            Value::Bool(b) => b.to_string(),
            Value::Null => "null".to_owned(),
            Value::EmptyMap => "{}".to_owned(),
        }
    }

    /// Whether this leaf only declares its path (`name:` or `name: {}`).
    pub(crate) fn is_empty(&self) -> bool {
        matches!(self, Value::Null | Value::EmptyMap)
    }

    /// The value as text, for settings that take a name or a word.
    pub(crate) fn as_text(&self) -> Option<String> {
        match self {
            Value::Str(s) => Some(s.clone()),
            Value::Int(n) => Some(n.to_string()),
            Value::Float(s) => Some(s.clone()),
            Value::Bool(b) => Some(b.to_string()),
            _ => None,
        }
    }
}

/// A property: its path and its value.
#[derive(Clone, Debug)]
pub(crate) struct Leaf {
    pub(crate) path: Vec<Seg>,
    pub(crate) value: Value,
}

/// Splits a key on dots outside brackets: `a.b[c.d].e` is `a`, `b`, `c.d`, `e`.
fn split_key(key: &str, out: &mut Vec<Seg>) -> usize {
    let mut n = 0;
    let mut current = String::new();
    let mut depth = 0usize;
    let mut bracketed = false;
    for c in key.chars() {
        match c {
            '[' if depth == 0 => {
                // `a[b]` starts a new segment at the bracket, as Spring's names do.
                if !current.is_empty() {
                    out.push(Seg::new(&current));
                    n += 1;
                    current.clear();
                }
                depth = 1;
                bracketed = true;
            }
            '[' => {
                depth += 1;
                current.push(c);
            }
            ']' if depth == 1 => depth = 0,
            ']' if depth > 1 => {
                depth -= 1;
                current.push(c);
            }
            '.' if depth == 0 => {
                if !(bracketed && current.is_empty()) {
                    out.push(Seg::new(&current));
                    n += 1;
                }
                current.clear();
                bracketed = false;
            }
            _ => current.push(c),
        }
    }
    if !(bracketed && current.is_empty()) || n == 0 {
        out.push(Seg::new(&current));
        n += 1;
    }
    n
}

/// Shortens a rendering for messages.
fn clip(mut s: String) -> String {
    const MAX: usize = 60;
    if s.chars().count() > MAX {
        s = s.chars().take(MAX).collect::<String>() + "...";
    }
    s
}

pub(crate) mod yaml {
    use std::collections::{HashMap, HashSet};

    use super::{clip, split_key, Leaf, Seg, Value};
    use yaml_rust2::parser::{Event, Parser};
    use yaml_rust2::Yaml;

    /// The deepest nesting of maps and lists we read. Real configuration files stay far
    /// below; the YAML parser's own limit covers flow collections (`[[[`) only, and a deep
    /// block nesting would overflow the stack when the value tree is built or dropped.
    pub(crate) const MAX_DEPTH: usize = 64;

    /// The most nodes a file may expand to once aliases are resolved (the loader copies an
    /// anchored node for every alias, so a few lines can otherwise expand exponentially).
    pub(crate) const MAX_NODES: usize = 100_000;

    /// Reads the event stream once, without building anything, and refuses what the loader
    /// could not handle safely: nesting deeper than [`MAX_DEPTH`] or more than [`MAX_NODES`]
    /// nodes after alias expansion. Syntax errors are left for the loader to report.
    pub(crate) fn guard(text: &str) -> Result<(), String> {
        let mut parser = Parser::new_from_str(text);
        let mut depth = 0usize;
        let mut nodes = 0usize;
        // Collections being read: (anchor id, node count at their start).
        let mut open: Vec<(usize, usize)> = Vec::new();
        // Expanded size of each anchored node.
        let mut sizes: HashMap<usize, usize> = HashMap::new();
        loop {
            let Ok((event, mark)) = parser.next_token() else { return Ok(()) };
            let at = || format!("at line {} column {}", mark.line(), mark.col() + 1);
            match event {
                Event::StreamEnd => return Ok(()),
                Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) => {
                    depth += 1;
                    if depth > MAX_DEPTH {
                        return Err(format!(
                            "maps and lists nested deeper than {MAX_DEPTH} levels {}",
                            at()
                        ));
                    }
                    open.push((anchor, nodes));
                    nodes += 1;
                }
                Event::SequenceEnd | Event::MappingEnd => {
                    depth = depth.saturating_sub(1);
                    if let Some((anchor, start)) = open.pop() {
                        if anchor > 0 {
                            sizes.insert(anchor, nodes - start);
                        }
                    }
                }
                Event::Scalar(_, _, anchor, _) => {
                    nodes += 1;
                    if anchor > 0 {
                        sizes.insert(anchor, 1);
                    }
                }
                Event::Alias(id) => {
                    nodes = nodes.saturating_add(sizes.get(&id).copied().unwrap_or(1))
                }
                _ => {}
            }
            if nodes > MAX_NODES {
                return Err(format!(
                    "more than {MAX_NODES} values once aliases are expanded {}",
                    at()
                ));
            }
        }
    }

    /// The key as text: Spring reads `1: x` as the key `1`.
    fn key_text(key: &Yaml) -> String {
        match key {
            Yaml::String(s) | Yaml::Real(s) => s.clone(),
            Yaml::Integer(n) => n.to_string(),
            Yaml::Boolean(b) => b.to_string(),
            Yaml::Null => String::new(),
            other => clip(render(other)),
        }
    }

    /// A short rendering of any node, for messages.
    pub(crate) fn render(node: &Yaml) -> String {
        match node {
            Yaml::String(s) => format!("{s:?}"),
            Yaml::Real(s) => s.clone(),
            Yaml::Integer(n) => n.to_string(),
            Yaml::Boolean(b) => b.to_string(),
            Yaml::Null => "null".to_owned(),
            Yaml::Array(items) => {
                clip(format!("[{}]", items.iter().map(render).collect::<Vec<_>>().join(", ")))
            }
            Yaml::Hash(map) => clip(format!(
                "{{{}}}",
                map.iter()
                    .map(|(k, v)| format!("{}: {}", key_text(k), render(v)))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            Yaml::Alias(_) | Yaml::BadValue => "<alias>".to_owned(),
        }
    }

    /// Flattens one YAML document into leaves, resolving `<<` merge keys as SnakeYAML does
    /// (explicit keys win over merged ones).
    pub(crate) fn flatten(node: &Yaml, prefix: &mut Vec<Seg>, out: &mut Vec<Leaf>) {
        let value = match node {
            Yaml::Hash(map) => {
                let explicit: Vec<(&Yaml, &Yaml)> =
                    map.iter().filter(|(k, _)| k.as_str() != Some("<<")).collect();
                let mut taken: HashSet<&Yaml> = explicit.iter().map(|(k, _)| *k).collect();
                let mut merged: Vec<(&Yaml, &Yaml)> = Vec::new();
                if let Some(source) = map.get(&Yaml::String("<<".to_owned())) {
                    let sources: Vec<&Yaml> = match source {
                        Yaml::Array(items) => items.iter().collect(),
                        other => vec![other],
                    };
                    for source in sources {
                        if let Yaml::Hash(m) = source {
                            for (k, v) in m {
                                if taken.insert(k) {
                                    merged.push((k, v));
                                }
                            }
                        }
                    }
                }
                if explicit.is_empty() && merged.is_empty() {
                    Value::EmptyMap
                } else {
                    for (k, v) in explicit.into_iter().chain(merged) {
                        let n = split_key(&key_text(k), prefix);
                        flatten(v, prefix, out);
                        prefix.truncate(prefix.len() - n);
                    }
                    return;
                }
            }
            Yaml::String(s) => Value::Str(s.clone()),
            Yaml::Integer(n) => Value::Int(*n),
            Yaml::Real(s) => Value::Float(s.clone()),
            Yaml::Boolean(b) => Value::Bool(*b),
            Yaml::Null => Value::Null,
            Yaml::Array(_) => Value::List(render(node)),
            Yaml::Alias(_) | Yaml::BadValue => Value::Other(render(node)),
        };
        out.push(Leaf { path: prefix.clone(), value });
    }
}

pub(crate) mod toml {
    use super::{clip, split_key, Leaf, Seg, Value};

    fn render(value: &::toml::Value) -> String {
        match value {
            ::toml::Value::String(s) => format!("{s:?}"),
            ::toml::Value::Integer(n) => n.to_string(),
            ::toml::Value::Float(f) => f.to_string(),
            ::toml::Value::Boolean(b) => b.to_string(),
            ::toml::Value::Datetime(d) => d.to_string(),
            ::toml::Value::Array(items) => {
                clip(format!("[{}]", items.iter().map(render).collect::<Vec<_>>().join(", ")))
            }
            ::toml::Value::Table(t) => clip(format!(
                "{{{}}}",
                t.iter()
                    .map(|(k, v)| format!("{k} = {}", render(v)))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }

    /// Flattens a TOML table into leaves. A quoted key with dots (`"resilience4j.bulkhead"`)
    /// is split like a dotted YAML key.
    pub(crate) fn flatten_table(table: &::toml::Table, prefix: &mut Vec<Seg>, out: &mut Vec<Leaf>) {
        if table.is_empty() {
            out.push(Leaf { path: prefix.clone(), value: Value::EmptyMap });
            return;
        }
        for (k, v) in table {
            let n = split_key(k, prefix);
            flatten(v, prefix, out);
            prefix.truncate(prefix.len() - n);
        }
    }

    fn flatten(value: &::toml::Value, prefix: &mut Vec<Seg>, out: &mut Vec<Leaf>) {
        let value = match value {
            ::toml::Value::Table(t) => return flatten_table(t, prefix, out),
            ::toml::Value::String(s) => Value::Str(s.clone()),
            ::toml::Value::Integer(n) => Value::Int(*n),
            ::toml::Value::Float(_) => Value::Float(render(value)),
            ::toml::Value::Boolean(b) => Value::Bool(*b),
            ::toml::Value::Array(_) => Value::List(render(value)),
            ::toml::Value::Datetime(_) => Value::Other(render(value)),
        };
        out.push(Leaf { path: prefix.clone(), value });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(key: &str) -> Vec<String> {
        let mut out = Vec::new();
        split_key(key, &mut out);
        out.into_iter().map(|s| s.raw).collect()
    }

    #[test]
    fn split_key_honours_brackets() {
        assert_eq!(split("a.b.c"), ["a", "b", "c"]);
        assert_eq!(split("instances.[api.bank].x"), ["instances", "api.bank", "x"]);
        assert_eq!(split("instances[api.bank].x"), ["instances", "api.bank", "x"]);
        assert_eq!(split("[a.b]"), ["a.b"]);
        assert_eq!(split(""), [""]);
        assert_eq!(split("a..b"), ["a", "", "b"]);
    }

    #[test]
    fn canonical_is_relaxed() {
        for k in [
            "maxConcurrentCalls",
            "max-concurrent-calls",
            "max_concurrent_calls",
            "MAX_CONCURRENT_CALLS",
        ] {
            assert_eq!(canonical(k), "maxconcurrentcalls");
        }
    }

    #[test]
    fn render_path_brackets_dotted_names() {
        let segs = vec![Seg::new("instances"), Seg::new("api.bank"), Seg::new("maxWaitDuration")];
        assert_eq!(render_path(&segs), "instances.[api.bank].maxWaitDuration");
    }
}
