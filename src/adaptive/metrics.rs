//! An adaptive limit's gauges through the `metrics` facade (feature `metrics`): exported
//! with its bulkhead's by `metrics_export::register` / `collect` / `record`, labelled `name`.
//!
//! | metric | kind | meaning |
//! |--------|------|---------|
//! | `bulkhead_adaptive_limit` | gauge | the limit the controller last set |
//! | `bulkhead_adaptive_min_limit`, `bulkhead_adaptive_max_limit` | gauge | its bounds |
//! | `bulkhead_adaptive_samples_total` | counter | samples recorded |
//! | `bulkhead_adaptive_no_load_latency_seconds` | gauge | the algorithm's no-load latency, if it has one |
//! | `bulkhead_adaptive_last_latency_seconds` | gauge | the latency of the last sample it used |
//! | `bulkhead_adaptive_gradient` | gauge | Gradient2's last gradient |
//! | `bulkhead_adaptive_queue_size` | gauge | the estimated queue |
//!
//! An estimate the algorithm does not have is not set.

use super::AdaptiveControl;

/// Hands the recorder `control`'s gauges, labelled `name`.
pub(crate) fn record(control: &AdaptiveControl<'_>, name: &str) {
    let m = control.metrics();
    let name = name.to_string();
    let gauge = |metric: &'static str, value: f64| {
        ::metrics::gauge!(metric, "name" => name.clone()).set(value);
    };
    gauge("bulkhead_adaptive_limit", m.limit() as f64);
    gauge("bulkhead_adaptive_min_limit", m.min_limit() as f64);
    gauge("bulkhead_adaptive_max_limit", m.max_limit() as f64);
    ::metrics::counter!("bulkhead_adaptive_samples_total", "name" => name.clone())
        .absolute(m.samples());
    let e = m.estimates();
    if let Some(d) = e.no_load_latency {
        gauge("bulkhead_adaptive_no_load_latency_seconds", d.as_secs_f64());
    }
    if let Some(d) = e.last_latency {
        gauge("bulkhead_adaptive_last_latency_seconds", d.as_secs_f64());
    }
    if let Some(g) = e.gradient {
        gauge("bulkhead_adaptive_gradient", g);
    }
    if let Some(q) = e.queue_size {
        gauge("bulkhead_adaptive_queue_size", q);
    }
}
