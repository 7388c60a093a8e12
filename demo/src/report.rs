//! Turns the runs' samples into the side-by-side table and a hand-written SVG chart.

use std::fmt::Write as _;
use std::time::Duration;

use crate::http::ClientError;
use crate::load::Sample;
use crate::RunResult;

/// Seconds, or `INFINITY` for a request that got no answer.
fn seconds(sample: &Sample) -> f64 {
    match sample.outcome {
        Ok(_) => sample.latency.as_secs_f64(),
        Err(_) => f64::INFINITY,
    }
}

/// Nearest-rank percentile of an ascending slice.
fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

fn sorted(mut values: Vec<f64>) -> Vec<f64> {
    values.sort_by(f64::total_cmp);
    values
}

fn fmt_secs(s: f64) -> String {
    if s < 1e-6 {
        format!("{:.0} ns", s * 1e9)
    } else if s < 1e-3 {
        format!("{:.0} µs", s * 1e6)
    } else if s < 0.01 {
        format!("{:.2} ms", s * 1e3)
    } else if s < 1.0 {
        format!("{:.0} ms", s * 1e3)
    } else {
        format!("{s:.2} s")
    }
}

fn fmt_percentile(sorted: &[f64], p: f64, timeout: Duration) -> String {
    match percentile(sorted, p) {
        None => "-".into(),
        Some(s) if s.is_infinite() => format!("no answer ({}+)", fmt_secs(timeout.as_secs_f64())),
        Some(s) => fmt_secs(s),
    }
}

fn count(samples: &[Sample], pred: impl Fn(&Result<u16, ClientError>) -> bool) -> usize {
    samples.iter().filter(|s| pred(&s.outcome)).count()
}

/// The side-by-side table, one column per run.
pub fn table(results: &[RunResult], timeout: Duration, workers: usize, pool: usize) -> String {
    let mut rows: Vec<(String, Vec<String>)> = Vec::new();
    let mut row = |name: &str, cell: &dyn Fn(&RunResult) -> String| {
        rows.push((name.to_string(), results.iter().map(cell).collect()));
    };
    let during = |r: &RunResult| -> Vec<Sample> {
        r.probes.iter().filter(|p| p.sent >= 0.0 && p.sent <= r.burst_end).copied().collect()
    };
    let health = |r: &RunResult| sorted(during(r).iter().map(seconds).collect());
    let to_503 = |r: &RunResult| {
        sorted(r.pays.iter().filter(|s| s.outcome == Ok(503)).map(seconds).collect())
    };
    let refusals = |r: &RunResult| sorted(r.rejections.iter().map(Duration::as_secs_f64).collect());
    let secs = timeout.as_secs();

    row("burst lasted (last /pay answer)", &|r| fmt_secs(r.burst_end));
    row("/health p50 during the burst", &|r| fmt_percentile(&health(r), 50.0, timeout));
    row("/health p99 during the burst", &|r| fmt_percentile(&health(r), 99.0, timeout));
    row("/health max during the burst", &|r| fmt_percentile(&health(r), 100.0, timeout));
    row(&format!("/health probes unanswered ({secs} s)"), &|r| {
        let probes = during(r);
        format!("{} of {}", count(&probes, Result::is_err), probes.len())
    });
    row("/pay 200 ok", &|r| count(&r.pays, |o| *o == Ok(200)).to_string());
    row("/pay 503 rejected (bulkhead full)", &|r| count(&r.pays, |o| *o == Ok(503)).to_string());
    row("/pay 500 (no pooled connection)", &|r| count(&r.pays, |o| *o == Ok(500)).to_string());
    row("/pay other errors", &|r| {
        count(&r.pays, |o| {
            matches!(o, Ok(s) if ![200, 500, 503].contains(s)) || *o == Err(ClientError::Failed)
        })
        .to_string()
    });
    row(&format!("/pay client gave up ({secs} s)"), &|r| {
        count(&r.pays, |o| *o == Err(ClientError::Timeout)).to_string()
    });
    row("time to a 503, p50 (client)", &|r| fmt_percentile(&to_503(r), 50.0, timeout));
    row("time to a 503, p99 (client)", &|r| fmt_percentile(&to_503(r), 99.0, timeout));
    row("bulkhead refusal p50 (in service)", &|r| fmt_percentile(&refusals(r), 50.0, timeout));
    row("bulkhead refusal p99 (in service)", &|r| fmt_percentile(&refusals(r), 99.0, timeout));
    row("adaptive limit at the burst start", &|r| r.limits.map_or("-".into(), |l| l.0.to_string()));
    row("adaptive limit at the end", &|r| r.limits.map_or("-".into(), |l| l.1.to_string()));
    row("first burst (not measured) 200/503", &|r| {
        r.warm_up.map_or("-".into(), |(ok, rejected)| format!("{ok} / {rejected}"))
    });
    row(&format!("peak busy workers (of {workers})"), &|r| r.peak_busy.to_string());
    row("peak workers waiting for a conn.", &|r| r.peak_pool_waiters.to_string());
    row(&format!("peak downstream calls (pool {pool})"), &|r| r.downstream_peak.to_string());
    row("downstream calls answered", &|r| r.downstream_served.to_string());
    row("all workers free again at", &|r| {
        r.idle_at.map_or_else(|| "not by the deadline".into(), fmt_secs)
    });
    row("run time", &|r| format!("{:.1} s", r.run_time.as_secs_f64()));

    let name_width = rows.iter().map(|(n, _)| n.chars().count()).max().unwrap_or(0);
    let col_width = rows
        .iter()
        .flat_map(|(_, cells)| cells.iter().map(|c| c.chars().count()))
        .chain(results.iter().map(|r| r.label.len()))
        .max()
        .unwrap_or(0)
        + 2;
    let mut out = String::new();
    let _ = write!(out, "{:name_width$}", "");
    for r in results {
        let _ = write!(out, "{:>col_width$}", r.label);
    }
    out.push('\n');
    for (name, cells) in rows {
        let _ = write!(out, "{name:name_width$}");
        for cell in cells {
            let _ = write!(out, "{cell:>col_width$}");
        }
        out.push('\n');
    }
    out
}

const COLORS: [&str; 5] = ["#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e"];

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// An SVG chart: `/health` latency over time (log scale) above busy workers over time, one
/// series per run, time measured from the burst start.
pub fn svg(results: &[RunResult], timeout: Duration, workers: usize, setup: &str) -> String {
    let (width, height) = (960.0, 660.0);
    let (left, right) = (80.0, 930.0);
    let (lat_top, lat_bottom) = (76.0, 400.0);
    let (busy_top, busy_bottom) = (460.0, 600.0);
    let x_min =
        results.iter().flat_map(|r| r.probes.iter().map(|p| p.sent)).fold(0.0, f64::min).floor();
    let x_max = results
        .iter()
        .flat_map(|r| r.probes.iter().map(|p| p.sent).chain(r.busy.iter().map(|b| b.0)))
        .fold(1.0, f64::max)
        .ceil();
    let x = |t: f64| left + (t - x_min) / (x_max - x_min) * (right - left);
    let (lat_min, lat_max) = (1e-4_f64, timeout.as_secs_f64());
    let y_lat = |s: f64| {
        let s = s.clamp(lat_min, lat_max);
        lat_bottom - (s / lat_min).log10() / (lat_max / lat_min).log10() * (lat_bottom - lat_top)
    };
    let y_busy =
        |n: usize| busy_bottom - n as f64 / workers.max(1) as f64 * (busy_bottom - busy_top);

    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{left}" y="28" font-size="16" font-weight="bold">/health latency while a burst of /pay calls meets a slow downstream</text>"#
    );
    let _ = writeln!(s, r##"<text x="{left}" y="46" fill="#555">{}</text>"##, escape(setup));
    let _ = writeln!(
        s,
        r##"<text x="{left}" y="62" fill="#555">one /health probe every 20 ms; probes with no answer are drawn at {} s (the client timeout)</text>"##,
        timeout.as_secs_f64()
    );

    // Latency grid: one line per decade.
    let mut decade = lat_min;
    while decade <= lat_max * 1.0001 {
        let y = y_lat(decade);
        let _ = writeln!(
            s,
            r##"<line x1="{left}" y1="{y:.1}" x2="{right}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            left - 6.0,
            y + 4.0,
            fmt_secs(decade).replace(".00", "").replace(".0 ", " ")
        );
        decade *= 10.0;
    }
    // Busy-worker grid.
    for n in [0, workers / 2, workers] {
        let y = y_busy(n);
        let _ = writeln!(
            s,
            r##"<line x1="{left}" y1="{y:.1}" x2="{right}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{n}</text>"##,
            left - 6.0,
            y + 4.0
        );
    }
    // Time axis, shared by both panels.
    let mut t = x_min;
    while t <= x_max + 1e-9 {
        let xt = x(t);
        let _ = writeln!(
            s,
            r##"<line x1="{xt:.1}" y1="{lat_top}" x2="{xt:.1}" y2="{lat_bottom}" stroke="#f0f0f0"/><line x1="{xt:.1}" y1="{busy_top}" x2="{xt:.1}" y2="{busy_bottom}" stroke="#f0f0f0"/><text x="{xt:.1}" y="{:.1}" text-anchor="middle">{t:.0}</text>"##,
            busy_bottom + 18.0
        );
        t += if x_max - x_min > 20.0 { 2.0 } else { 1.0 };
    }
    let x0 = x(0.0);
    let _ = writeln!(
        s,
        r##"<line x1="{x0:.1}" y1="{lat_top}" x2="{x0:.1}" y2="{busy_bottom}" stroke="#888" stroke-dasharray="4 3"/><text x="{:.1}" y="{:.1}" fill="#555">burst starts</text>"##,
        x0 + 4.0,
        lat_top + 12.0
    );
    let _ = writeln!(
        s,
        r##"<rect x="{left}" y="{lat_top}" width="{:.1}" height="{:.1}" fill="none" stroke="#333"/><rect x="{left}" y="{busy_top}" width="{:.1}" height="{:.1}" fill="none" stroke="#333"/>"##,
        right - left,
        lat_bottom - lat_top,
        right - left,
        busy_bottom - busy_top
    );
    let _ = writeln!(
        s,
        r#"<text transform="translate(22 {:.1}) rotate(-90)" text-anchor="middle">/health latency (log scale)</text>"#,
        (lat_top + lat_bottom) / 2.0
    );
    let _ = writeln!(
        s,
        r#"<text transform="translate(22 {:.1}) rotate(-90)" text-anchor="middle">busy workers</text>"#,
        (busy_top + busy_bottom) / 2.0
    );
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">seconds since the burst started</text>"#,
        (left + right) / 2.0,
        busy_bottom + 40.0
    );

    for (i, r) in results.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let mut probes = r.probes.clone();
        probes.sort_by(|a, b| a.sent.total_cmp(&b.sent));
        let points: Vec<String> =
            probes.iter().map(|p| format!("{:.1},{:.1}", x(p.sent), y_lat(seconds(p)))).collect();
        let _ = writeln!(
            s,
            r#"<polyline fill="none" stroke="{color}" stroke-width="1.3" stroke-opacity="0.85" points="{}"/>"#,
            points.join(" ")
        );
        let mut steps = Vec::new();
        let mut last: Option<usize> = None;
        for &(t, n) in &r.busy {
            if let Some(prev) = last.filter(|&p| p != n) {
                steps.push(format!("{:.1},{:.1}", x(t), y_busy(prev)));
            }
            steps.push(format!("{:.1},{:.1}", x(t), y_busy(n)));
            last = Some(n);
        }
        let _ = writeln!(
            s,
            r#"<polyline fill="none" stroke="{color}" stroke-width="1.5" stroke-opacity="0.85" points="{}"/>"#,
            steps.join(" ")
        );
        let ly = lat_top + 30.0 + i as f64 * 18.0;
        let lx = right - 190.0;
        let _ = writeln!(
            s,
            r#"<line x1="{lx}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{color}" stroke-width="3"/><text x="{:.1}" y="{ly:.1}">{}</text>"#,
            ly - 4.0,
            lx + 22.0,
            ly - 4.0,
            lx + 28.0,
            escape(r.label)
        );
    }
    s.push_str("</svg>\n");
    s
}
