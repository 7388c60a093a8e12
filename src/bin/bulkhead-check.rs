//! `bulkhead-check`: reads Resilience4j-style `application.yml` / `.toml` files, prints each
//! bulkhead instance's effective configuration, and checks the style guide's rules.
//!
//! ```text
//! cargo run --features cli --bin bulkhead-check -- application.yml
//! ```
//!
//! Exit status: 0 when there is nothing worse than a warning, 1 on any error (a syntax
//! error, a settings error, a file without a `resilience4j.bulkhead` section, or a rule of
//! severity error), 2 on a usage error (bad arguments, an unreadable file, an unknown
//! extension).

use std::io::Write as _;
use std::process::ExitCode;

use bulkhead::file::{format_duration, FileError, Format, Loader, Report, Severity};
use bulkhead::QueueOrder;

const USAGE: &str = "\
usage: bulkhead-check [--format yaml|toml] [--deny-warnings] [--allow-missing-section] FILE...

Reads Resilience4j-style bulkhead settings (resilience4j.bulkhead.*) from each FILE
(.yml, .yaml or .toml), prints every instance's effective configuration, and checks the
style guide's rules (R-RES-BH-X1, R-RES-BH-3, R-RES-BH-1, R-RES-BH-WAIT). A file without
a resilience4j.bulkhead section is an error (every bulkhead would get the defaults): write
`resilience4j.bulkhead: {}` in a file that has none on purpose, or pass
--allow-missing-section.

options:
  --format yaml|toml   read every FILE in this format, whatever its extension
  --deny-warnings      exit 1 on warnings too
  --allow-missing-section
                       accept a file without a resilience4j.bulkhead section
  -h, --help           print this help

exit status: 0 no errors (warnings allowed), 1 errors found, 2 usage error";

struct Args {
    format: Option<Format>,
    deny_warnings: bool,
    allow_missing_section: bool,
    files: Vec<String>,
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Option<Args>, String> {
    let mut parsed = Args {
        format: None,
        deny_warnings: false,
        allow_missing_section: false,
        files: Vec::new(),
    };
    let mut only_files = false;
    while let Some(arg) = args.next() {
        if only_files {
            parsed.files.push(arg);
            continue;
        }
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_owned(), Some(v.to_owned())),
            _ => (arg.clone(), None),
        };
        match flag.as_str() {
            "-h" | "--help" => return Ok(None),
            "--deny-warnings" if inline.is_none() => parsed.deny_warnings = true,
            "--allow-missing-section" if inline.is_none() => parsed.allow_missing_section = true,
            "--format" => {
                let value = inline.or_else(|| args.next()).ok_or("--format needs a value")?;
                parsed.format = Some(match value.to_ascii_lowercase().as_str() {
                    "yaml" | "yml" => Format::Yaml,
                    "toml" => Format::Toml,
                    other => return Err(format!("unknown format '{other}' (use yaml or toml)")),
                });
            }
            "--" => only_files = true,
            s if s.starts_with('-') && s != "-" => return Err(format!("unknown option '{arg}'")),
            _ => parsed.files.push(arg),
        }
    }
    if parsed.files.is_empty() {
        return Err("no file given".to_owned());
    }
    Ok(Some(parsed))
}

/// Reads one file: `Err` with the exit status when it cannot be checked. Every error
/// names the file (once).
fn load(path: &str, args: &Args) -> Result<Report, (FileError, u8)> {
    let mut loader = Loader::new().allow_missing_section(args.allow_missing_section);
    if let Some(format) = args.format {
        loader = loader.format(format);
    }
    loader.report(path).map_err(|e| {
        let status = match e {
            FileError::Syntax { .. } | FileError::Invalid(_) => 1,
            _ => 2,
        };
        (e, status)
    })
}

fn table(rows: &[Vec<String>]) -> String {
    let mut widths = vec![0; rows.first().map_or(0, Vec::len)];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in rows {
        let mut line = String::from("  ");
        for (i, (cell, w)) in row.iter().zip(&widths).enumerate() {
            line.push_str(cell);
            if i + 1 < row.len() {
                line.push_str(&" ".repeat(w - cell.chars().count() + 2));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn print_report(
    out: &mut impl std::io::Write,
    path: &str,
    report: &Report,
) -> std::io::Result<(usize, usize)> {
    let file = report.file();
    writeln!(out, "{path} ({})", file.format())?;
    if !file.has_bulkhead_section() && report.errors().is_empty() {
        writeln!(out, "  no resilience4j.bulkhead section (allowed by --allow-missing-section)")?;
    }
    if !file.instances().is_empty() {
        writeln!(out, "instances:")?;
        let mut rows = vec![[
            "name",
            "max-concurrent-calls",
            "max-wait-duration",
            "max-waiting-calls",
            "queue-order",
            "sheddable-headroom",
            "base config",
        ]
        .map(str::to_owned)
        .to_vec()];
        for i in file.instances() {
            let c = i.config();
            rows.push(vec![
                i.name().to_owned(),
                c.max_concurrent_calls().to_string(),
                format_duration(c.max_wait_duration()),
                c.max_waiting_calls().map_or_else(|| "no cap".to_owned(), |n| n.to_string()),
                c.queue_order().label().to_owned(),
                c.sheddable_headroom().to_string(),
                if i.base_chain().is_empty() {
                    "(built-in defaults)".to_owned()
                } else {
                    i.base_chain().join(" -> ")
                },
            ]);
        }
        write!(out, "{}", table(&rows))?;
        // Adaptive LIFO's target and interval, and whether the file wrote them.
        let lifo: Vec<_> = file
            .instances()
            .iter()
            .filter_map(|i| match i.config().queue_order() {
                QueueOrder::AdaptiveLifo { target, interval } => Some((i, target, interval)),
                _ => None,
            })
            .collect();
        if !lifo.is_empty() {
            writeln!(out, "adaptive-lifo:")?;
            for (i, target, interval) in lifo {
                let shown = |d, key| {
                    let default = if i.origin(key).is_none() { " (default)" } else { "" };
                    format!("{key} {}{default}", format_duration(d))
                };
                writeln!(
                    out,
                    "  {}: {}, {}",
                    i.name(),
                    shown(target, "queue-target"),
                    shown(interval, "queue-interval")
                )?;
            }
        }
        // Our extension of the layout: instances with an `adaptive:` block.
        let adaptive: Vec<_> =
            file.instances().iter().filter_map(|i| i.adaptive().map(|a| (i, a))).collect();
        if !adaptive.is_empty() {
            writeln!(out, "adaptive:")?;
            for (i, a) in adaptive {
                let max = a.max_limit().unwrap_or(i.config().max_concurrent_calls());
                let min = a.min_limit().unwrap_or(1.min(max));
                let initial = a.initial_limit().unwrap_or(max);
                let timeout = a
                    .timeout()
                    .map_or_else(String::new, |t| format!(", timeout {}", format_duration(t)));
                writeln!(
                    out,
                    "  {}: {:?}, limit in [{min}, {max}], starts at {initial}{timeout}",
                    i.name(),
                    a.algorithm()
                )?;
            }
        }
    }
    if !file.configs().is_empty() {
        let names: Vec<&str> = file.configs().iter().map(|c| c.name()).collect();
        writeln!(out, "configs: {}", names.join(", "))?;
    }
    if !file.ignored().is_empty() {
        writeln!(out, "ignored:")?;
        for ignored in file.ignored() {
            writeln!(out, "  {ignored}")?;
        }
    }
    let mut errors = report.errors().len();
    let mut warnings = report.warnings().len();
    if !report.errors().is_empty() || !report.warnings().is_empty() || !report.findings().is_empty()
    {
        writeln!(out, "findings:")?;
    }
    // The heading names the file: each line names the key and the value.
    for e in report.errors() {
        writeln!(out, "  error[config] {}: {} {}", e.key(), e.value(), e.problem())?;
    }
    for w in report.warnings() {
        writeln!(out, "  warning[config] {w}")?;
    }
    for f in report.findings() {
        match f.severity() {
            Severity::Error => errors += 1,
            Severity::Warning => warnings += 1,
        }
        writeln!(out, "  {f}")?;
    }
    writeln!(
        out,
        "{path}: {} instance(s), {errors} error(s), {warnings} warning(s), {} ignored",
        file.instances().len(),
        file.ignored().len()
    )?;
    Ok((errors, warnings))
}

fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(Some(args)) => args,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("bulkhead-check: {message}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let mut status = 0u8;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    for (n, path) in args.files.iter().enumerate() {
        if n > 0 {
            let _ = writeln!(out);
        }
        match load(path, &args) {
            Ok(report) => match print_report(&mut out, path, &report) {
                Ok((errors, warnings)) => {
                    if errors > 0 || (args.deny_warnings && warnings > 0) {
                        status = status.max(1);
                    }
                }
                Err(_) => return ExitCode::from(2), // stdout closed
            },
            Err((e, code)) => {
                let _ = out.flush();
                eprintln!("bulkhead-check: {e}");
                status = status.max(code);
            }
        }
    }
    ExitCode::from(status)
}
