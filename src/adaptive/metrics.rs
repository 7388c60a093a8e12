//! The adaptive bulkhead's own metrics through the `metrics` facade (feature `metrics`).

use super::AdaptiveBulkhead;

impl AdaptiveBulkhead {
    /// Hands the adaptive controller's state to the installed `metrics` recorder, labelled
    /// `name` (the bulkhead's name). Call it where you call
    /// [`metrics_export::collect`](crate::metrics_export::collect): right before the
    /// `/metrics` handler renders (nothing on the call path touches the recorder).
    ///
    /// | metric | kind | meaning |
    /// |--------|------|---------|
    /// | `bulkhead_adaptive_limit` | gauge | the limit the controller last set |
    /// | `bulkhead_adaptive_min_limit`, `bulkhead_adaptive_max_limit` | gauge | its bounds |
    /// | `bulkhead_adaptive_samples_total` | counter | samples recorded |
    /// | `bulkhead_adaptive_no_load_latency_seconds` | gauge | the algorithm's no-load latency, if it has one |
    /// | `bulkhead_adaptive_last_latency_seconds` | gauge | the latency of the last sample it used |
    /// | `bulkhead_adaptive_gradient` | gauge | Gradient2's last gradient |
    /// | `bulkhead_adaptive_queue_size` | gauge | the estimated queue |
    ///
    /// An estimate the algorithm does not have is not set. The engine's own gauges (the
    /// current limit as `resilience4j_bulkhead_max_allowed_concurrent_calls`, calls in
    /// flight, ...) come from registering [`bulkhead`](Self::bulkhead) with
    /// [`metrics_export::register`](crate::metrics_export::register).
    ///
    /// # Examples
    ///
    /// ```
    /// use bulkhead::adaptive::{AdaptiveBulkhead, Vegas};
    /// use bulkhead::BulkheadConfig;
    /// use metrics_exporter_prometheus::PrometheusBuilder;
    ///
    /// let recorder = PrometheusBuilder::new().build_recorder();
    /// let bank = AdaptiveBulkhead::new("bank", BulkheadConfig::for_pool(20), Vegas::default());
    /// bank.call(|| ())?;
    /// metrics::with_local_recorder(&recorder, || bank.record_metrics());
    /// let text = recorder.handle().render();
    /// assert!(text.contains(r#"bulkhead_adaptive_limit{name="bank"} 16"#), "{text}");
    /// assert!(text.contains(r#"bulkhead_adaptive_samples_total{name="bank"} 1"#));
    /// assert!(text.contains("bulkhead_adaptive_no_load_latency_seconds"));
    /// # Ok::<(), bulkhead::BulkheadFull>(())
    /// ```
    pub fn record_metrics(&self) {
        let m = self.adaptive_metrics();
        let name = self.name().to_string();
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
}
