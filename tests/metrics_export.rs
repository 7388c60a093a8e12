//! The `metrics` feature, rendered through `metrics-exporter-prometheus` as a scraper sees it.
//!
//! Each test builds its own Prometheus recorder and registers through it as a thread-local
//! recorder, so tests share no global state.
#![cfg(feature = "metrics")]

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use bulkhead::metrics_export::{self, InstrumentedBulkhead};
use bulkhead::{Bulkhead, BulkheadConfig, RejectReason};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle, PrometheusRecorder};

fn config(max: usize, wait: Duration) -> BulkheadConfig {
    BulkheadConfig::builder().max_concurrent_calls(max).max_wait_duration(wait).build().unwrap()
}

fn setup(
    name: &str,
    config: BulkheadConfig,
) -> (PrometheusRecorder, Arc<Bulkhead>, InstrumentedBulkhead) {
    let recorder = PrometheusBuilder::new().build_recorder();
    let bulkhead = Arc::new(Bulkhead::new(name, config));
    let instrumented =
        metrics::with_local_recorder(&recorder, || metrics_export::register(&bulkhead));
    (recorder, bulkhead, instrumented)
}

/// The value of the sample `series` (metric name plus its label set, exactly as rendered),
/// or a panic that shows the whole exposition text.
fn sample(text: &str, series: &str) -> f64 {
    let prefix = format!("{series} ");
    let line = text
        .lines()
        .find(|line| line.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no sample `{series}` in:\n{text}"));
    line[prefix.len()..].trim().parse().unwrap_or_else(|e| panic!("bad value in `{line}`: {e}"))
}

fn render(handle: &PrometheusHandle) -> String {
    handle.render()
}

/// Waits (hang guard: 10 s) until `cond` holds.
fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn gauges_render_with_resilience4j_names_and_current_values() {
    let (recorder, bulkhead, instrumented) = setup("gauges", config(4, Duration::from_secs(30)));
    let handle = recorder.handle();

    // Registration records a first snapshot.
    let text = render(&handle);
    assert_eq!(
        sample(&text, r#"resilience4j_bulkhead_available_concurrent_calls{name="gauges"}"#),
        4.0
    );
    assert_eq!(
        sample(&text, r#"resilience4j_bulkhead_max_allowed_concurrent_calls{name="gauges"}"#),
        4.0
    );
    assert_eq!(sample(&text, r#"bulkhead_in_flight_calls{name="gauges"}"#), 0.0);
    assert_eq!(sample(&text, r#"bulkhead_waiting_calls{name="gauges"}"#), 0.0);
    assert!(
        text.contains("# TYPE resilience4j_bulkhead_available_concurrent_calls gauge"),
        "{text}"
    );

    let held: Vec<_> = (0..4).map(|_| bulkhead.try_acquire().unwrap()).collect();
    // A caller that queues: no event fires for it, the scrape-time snapshot sees it.
    let waiter = {
        let bulkhead = Arc::clone(&bulkhead);
        thread::spawn(move || bulkhead.acquire().map(drop).is_ok())
    };
    eventually("the caller to queue", || bulkhead.metrics().waiting_calls() == 1);

    instrumented.record();
    let text = render(&handle);
    assert_eq!(
        sample(&text, r#"resilience4j_bulkhead_available_concurrent_calls{name="gauges"}"#),
        0.0
    );
    assert_eq!(sample(&text, r#"bulkhead_in_flight_calls{name="gauges"}"#), 4.0);
    assert_eq!(sample(&text, r#"bulkhead_waiting_calls{name="gauges"}"#), 1.0);

    drop(held);
    assert!(waiter.join().unwrap(), "the queued caller gets a released permit");
    instrumented.record();
    let text = render(&handle);
    assert_eq!(
        sample(&text, r#"resilience4j_bulkhead_available_concurrent_calls{name="gauges"}"#),
        4.0
    );
    assert_eq!(sample(&text, r#"bulkhead_in_flight_calls{name="gauges"}"#), 0.0);
    assert_eq!(sample(&text, r#"bulkhead_waiting_calls{name="gauges"}"#), 0.0);
}

#[test]
fn gauges_follow_change_config_which_emits_no_event() {
    let (recorder, bulkhead, instrumented) = setup("resized", BulkheadConfig::for_pool(20));
    let handle = recorder.handle();
    let a = bulkhead.try_acquire().unwrap();
    let b = bulkhead.try_acquire().unwrap();
    bulkhead.change_config(config(1, Duration::ZERO));

    instrumented.record();
    let text = render(&handle);
    assert_eq!(
        sample(&text, r#"resilience4j_bulkhead_max_allowed_concurrent_calls{name="resized"}"#),
        1.0
    );
    // Two in flight over a limit of one: available reads 0, never negative.
    assert_eq!(
        sample(&text, r#"resilience4j_bulkhead_available_concurrent_calls{name="resized"}"#),
        0.0
    );
    assert_eq!(sample(&text, r#"bulkhead_in_flight_calls{name="resized"}"#), 2.0);
    drop((a, b));
}

#[test]
fn counters_count_permitted_rejected_by_reason_and_finished() {
    let (recorder, bulkhead, instrumented) = setup("counted", config(1, Duration::from_millis(2)));
    let handle = recorder.handle();

    bulkhead.call(|| ()).unwrap(); // permitted + finished
    let held = bulkhead.try_acquire().unwrap(); // permitted
    assert_eq!(bulkhead.try_acquire().unwrap_err().reason(), RejectReason::Full);
    assert_eq!(bulkhead.try_acquire().unwrap_err().reason(), RejectReason::Full);
    assert_eq!(bulkhead.acquire().unwrap_err().reason(), RejectReason::WaitTimedOut);
    bulkhead.change_config(
        BulkheadConfig::builder()
            .max_concurrent_calls(1)
            .max_wait_duration(Duration::from_secs(1))
            .max_waiting_calls(0)
            .build()
            .unwrap(),
    );
    assert_eq!(bulkhead.acquire().unwrap_err().reason(), RejectReason::TooManyWaiting);
    drop(held); // finished

    // Counted by the bulkhead; handed to the recorder at scrape time.
    instrumented.collect();
    let text = render(&handle);
    assert_eq!(sample(&text, r#"bulkhead_calls_permitted_total{name="counted"}"#), 2.0);
    assert_eq!(sample(&text, r#"bulkhead_calls_finished_total{name="counted"}"#), 2.0);
    assert_eq!(
        sample(&text, r#"bulkhead_calls_rejected_total{name="counted",reason="full"}"#),
        2.0
    );
    assert_eq!(
        sample(&text, r#"bulkhead_calls_rejected_total{name="counted",reason="wait_timed_out"}"#),
        1.0
    );
    assert_eq!(
        sample(&text, r#"bulkhead_calls_rejected_total{name="counted",reason="too_many_waiting"}"#),
        1.0
    );
    assert!(text.contains("# TYPE bulkhead_calls_rejected_total counter"), "{text}");
}

/// Issue 31: a sheddable call held back by the headroom while slots are free is exported
/// under its own label, `reason="reserved"`, not as `full`.
#[test]
fn a_sheddable_call_held_back_by_the_headroom_is_exported_as_reserved() {
    use bulkhead::Criticality;
    let config =
        BulkheadConfig::builder().max_concurrent_calls(2).sheddable_headroom(1).build().unwrap();
    let (recorder, bulkhead, instrumented) = setup("kept", config);
    let handle = recorder.handle();
    let _user = bulkhead.try_acquire().unwrap();
    let refused = bulkhead.try_acquire_many(Criticality::Sheddable).unwrap_err();
    assert_eq!(refused.reason(), RejectReason::Reserved);

    instrumented.collect();
    let text = render(&handle);
    assert_eq!(
        sample(&text, r#"bulkhead_calls_rejected_total{name="kept",reason="reserved"}"#),
        1.0
    );
    assert_eq!(sample(&text, r#"bulkhead_calls_rejected_total{name="kept",reason="full"}"#), 0.0);
}

#[test]
fn counters_are_exact_under_concurrent_calls() {
    const THREADS: usize = 4;
    const CALLS: usize = 500;
    let (recorder, bulkhead, instrumented) = setup("busy", config(2, Duration::ZERO));
    let barrier = Arc::new(Barrier::new(THREADS));
    let workers: Vec<_> = (0..THREADS)
        .map(|_| {
            let bulkhead = Arc::clone(&bulkhead);
            let barrier = Arc::clone(&barrier);
            thread::spawn(move || {
                barrier.wait();
                let mut ok = 0usize;
                for _ in 0..CALLS {
                    if bulkhead.call(thread::yield_now).is_ok() {
                        ok += 1;
                    }
                }
                ok
            })
        })
        .collect();
    let permitted: usize = workers.into_iter().map(|w| w.join().unwrap()).sum();
    let rejected = THREADS * CALLS - permitted;

    instrumented.record();
    let text = render(&recorder.handle());
    assert_eq!(sample(&text, r#"bulkhead_calls_permitted_total{name="busy"}"#), permitted as f64);
    assert_eq!(sample(&text, r#"bulkhead_calls_finished_total{name="busy"}"#), permitted as f64);
    // The handle was registered up front, so the series exists even if nothing was refused.
    assert_eq!(
        sample(&text, r#"bulkhead_calls_rejected_total{name="busy",reason="full"}"#),
        rejected as f64
    );
    assert_eq!(sample(&text, r#"bulkhead_in_flight_calls{name="busy"}"#), 0.0);
    assert_eq!(
        sample(&text, r#"resilience4j_bulkhead_available_concurrent_calls{name="busy"}"#),
        2.0
    );
}

#[test]
fn wait_histogram_records_permitted_and_rejected_waits() {
    let (recorder, bulkhead, instrumented) = setup("timed", config(1, Duration::from_millis(20)));
    let handle = recorder.handle();

    instrumented.call(|| ()).unwrap(); // permitted at once
    let held = bulkhead.try_acquire().unwrap();
    let err = instrumented.acquire().unwrap_err(); // waits 20 ms, then refused
    assert_eq!(err.reason(), RejectReason::WaitTimedOut);

    // A caller that queues and is served when the holder lets go.
    let served = {
        let instrumented = instrumented.clone();
        thread::spawn(move || {
            instrumented.bulkhead().change_config(config(1, Duration::from_secs(30)));
            instrumented.call(|| ()).is_ok()
        })
    };
    eventually("the caller to queue", || bulkhead.metrics().waiting_calls() == 1);
    drop(held);
    assert!(served.join().unwrap());

    instrumented.collect();
    let text = render(&handle);
    let permitted = r#"{name="timed",outcome="permitted"}"#;
    let rejected = r#"{name="timed",outcome="rejected"}"#;
    // Every acquire is timed, the `try_acquire` made on the bulkhead directly included.
    assert_eq!(sample(&text, &format!("bulkhead_wait_duration_seconds_count{permitted}")), 3.0);
    // Two took their permit at once (a zero wait); the queued one waited for the release.
    let permitted_sum = sample(&text, &format!("bulkhead_wait_duration_seconds_sum{permitted}"));
    assert!(permitted_sum > 0.0, "the queued caller's wait is missing\n{text}");
    assert_eq!(sample(&text, &format!("bulkhead_wait_duration_seconds_count{rejected}")), 1.0);
    // The refused caller waited its whole max wait; the engine measured it.
    let rejected_sum = sample(&text, &format!("bulkhead_wait_duration_seconds_sum{rejected}"));
    assert!(rejected_sum >= 0.020, "rejected wait sum {rejected_sum} < 20 ms\n{text}");
    assert!(rejected_sum == err.waited().as_secs_f64(), "{rejected_sum} != {:?}", err.waited());
}

#[test]
fn async_acquires_are_timed_whoever_makes_them() {
    let (recorder, bulkhead, instrumented) = setup("async", config(1, Duration::from_secs(30)));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        assert_eq!(instrumented.call_async(async { 7 }).await.unwrap(), 7);
        let held = instrumented.acquire_owned_async().await.unwrap();
        let waiting = tokio::spawn(instrumented.acquire_owned_async());
        while bulkhead.metrics().waiting_calls() == 0 {
            tokio::task::yield_now().await;
        }
        drop(held);
        drop(waiting.await.unwrap().unwrap());
        // Straight on the bulkhead, not through the instrumented wrapper: timed all the same.
        drop(bulkhead.acquire_async().await.unwrap());
    });
    instrumented.record();
    let text = render(&recorder.handle());
    assert_eq!(
        sample(&text, r#"bulkhead_wait_duration_seconds_count{name="async",outcome="permitted"}"#),
        4.0
    );
    assert_eq!(sample(&text, r#"bulkhead_calls_finished_total{name="async"}"#), 4.0);
    assert_eq!(sample(&text, r#"bulkhead_in_flight_calls{name="async"}"#), 0.0);
}

/// An async waiter that is handed a permit by a release must be counted as permitted, as a
/// thread waiter is: otherwise `finished` outgrows `permitted` on every async hand-off.
#[test]
fn async_waiter_granted_by_hand_off_is_counted_as_permitted() {
    let (recorder, bulkhead, instrumented) = setup("handoff", config(1, Duration::from_secs(30)));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let held = bulkhead.try_acquire_owned().unwrap();
        let waiting = tokio::spawn(bulkhead.acquire_owned_async());
        while bulkhead.metrics().waiting_calls() == 0 {
            tokio::task::yield_now().await;
        }
        drop(held);
        drop(waiting.await.unwrap().unwrap());
    });
    instrumented.collect();
    let text = render(&recorder.handle());
    assert_eq!(sample(&text, r#"bulkhead_calls_finished_total{name="handoff"}"#), 2.0);
    assert_eq!(sample(&text, r#"bulkhead_calls_permitted_total{name="handoff"}"#), 2.0);
}

/// The same hand-off to a parked thread is counted (the sync path emits the event).
#[test]
fn thread_waiter_granted_by_hand_off_is_counted_as_permitted() {
    let (recorder, bulkhead, instrumented) =
        setup("handoff-sync", config(1, Duration::from_secs(30)));
    let held = bulkhead.try_acquire().unwrap();
    let waiter = {
        let bulkhead = Arc::clone(&bulkhead);
        thread::spawn(move || bulkhead.acquire().map(drop).is_ok())
    };
    eventually("the caller to queue", || bulkhead.metrics().waiting_calls() == 1);
    drop(held);
    assert!(waiter.join().unwrap());
    instrumented.collect();
    let text = render(&recorder.handle());
    assert_eq!(sample(&text, r#"bulkhead_calls_finished_total{name="handoff-sync"}"#), 2.0);
    assert_eq!(sample(&text, r#"bulkhead_calls_permitted_total{name="handoff-sync"}"#), 2.0);
}

#[test]
fn record_free_function_sets_gauges_of_unregistered_bulkheads() {
    let recorder = PrometheusBuilder::new().build_recorder();
    let a = Bulkhead::new("plain-a", config(3, Duration::ZERO));
    let b = Bulkhead::new("plain-b", config(5, Duration::ZERO));
    let _held = b.try_acquire().unwrap();
    metrics::with_local_recorder(&recorder, || {
        metrics_export::record(&a);
        metrics_export::record(&b);
    });
    let text = recorder.handle().render();
    assert_eq!(
        sample(&text, r#"resilience4j_bulkhead_max_allowed_concurrent_calls{name="plain-a"}"#),
        3.0
    );
    assert_eq!(
        sample(&text, r#"resilience4j_bulkhead_available_concurrent_calls{name="plain-b"}"#),
        4.0
    );
    assert_eq!(sample(&text, r#"bulkhead_in_flight_calls{name="plain-b"}"#), 1.0);
    // Neither bulkhead counts calls, so no counters exist for them.
    assert!(!text.contains("bulkhead_calls_permitted_total"), "{text}");
}

#[test]
fn two_bulkheads_are_told_apart_by_the_name_label() {
    let recorder = PrometheusBuilder::new().build_recorder();
    let bank = Arc::new(Bulkhead::new("label-bank", config(2, Duration::ZERO)));
    let pay = Arc::new(Bulkhead::new("label-pay", config(2, Duration::ZERO)));
    let (m_bank, m_pay) = metrics::with_local_recorder(&recorder, || {
        (metrics_export::register(&bank), metrics_export::register(&pay))
    });
    bank.call(|| ()).unwrap();
    let _held = pay.try_acquire().unwrap();
    m_bank.record();
    m_pay.record();
    let text = recorder.handle().render();
    assert_eq!(sample(&text, r#"bulkhead_calls_finished_total{name="label-bank"}"#), 1.0);
    assert_eq!(sample(&text, r#"bulkhead_calls_finished_total{name="label-pay"}"#), 0.0);
    assert_eq!(sample(&text, r#"bulkhead_in_flight_calls{name="label-bank"}"#), 0.0);
    assert_eq!(sample(&text, r#"bulkhead_in_flight_calls{name="label-pay"}"#), 1.0);
}

/// What Prometheus shows is what the callers saw, at every scrape: counters are exact and
/// only grow, and the wait histogram's count is the number of calls, zero waits included.
#[test]
fn every_scrape_shows_exactly_what_callers_saw() {
    let (recorder, bulkhead, _registered) = setup("scraped", config(1, Duration::from_millis(1)));
    let handle = recorder.handle();
    let mut seen_permitted = 0u64;
    let mut seen_full = 0u64;
    let mut seen_timed_out = 0u64;
    for round in 0..5u64 {
        for _ in 0..round * 3 {
            match bulkhead.try_acquire() {
                Ok(permit) => {
                    seen_permitted += 1;
                    let refused = bulkhead.try_acquire().unwrap_err();
                    assert_eq!(refused.reason(), RejectReason::Full);
                    seen_full += 1;
                    if round % 2 == 1 {
                        let timed_out = bulkhead.acquire().unwrap_err();
                        assert_eq!(timed_out.reason(), RejectReason::WaitTimedOut);
                        seen_timed_out += 1;
                    }
                    drop(permit);
                }
                Err(err) => panic!("nobody else holds the permit: {err}"),
            }
        }
        metrics_export::collect();
        let text = render(&handle);
        let series = |metric: &str, labels: &str| {
            sample(&text, &format!("{metric}{{name=\"scraped\"{labels}}}"))
        };
        assert_eq!(series("bulkhead_calls_permitted_total", ""), seen_permitted as f64);
        assert_eq!(series("bulkhead_calls_finished_total", ""), seen_permitted as f64);
        assert_eq!(series("bulkhead_calls_rejected_total", ",reason=\"full\""), seen_full as f64);
        assert_eq!(
            series("bulkhead_calls_rejected_total", ",reason=\"wait_timed_out\""),
            seen_timed_out as f64
        );
        assert_eq!(
            series("bulkhead_wait_duration_seconds_count", ",outcome=\"permitted\""),
            seen_permitted as f64
        );
        assert_eq!(
            series("bulkhead_wait_duration_seconds_count", ",outcome=\"rejected\""),
            (seen_full + seen_timed_out) as f64
        );
    }
}

/// `collect` forgets a bulkhead once every `InstrumentedBulkhead` clone of it is dropped.
#[test]
fn collect_skips_bulkheads_whose_registration_was_dropped() {
    let (recorder, bulkhead, instrumented) = setup("dropped", config(2, Duration::ZERO));
    let handle = recorder.handle();
    drop(instrumented);
    let _held = bulkhead.try_acquire().unwrap();
    metrics_export::collect();
    // The last value handed over stays: registration's own collection, before the acquire.
    assert_eq!(sample(&render(&handle), r#"bulkhead_in_flight_calls{name="dropped"}"#), 0.0);
}

/// The closed state is a scrape-time gauge (0, then 1), and `Closed` refusals have their
/// own `reason` label.
#[test]
fn closed_gauge_and_closed_refusals_are_exported() {
    let (recorder, bulkhead, instrumented) = setup("closing", config(1, Duration::ZERO));
    let handle = recorder.handle();
    instrumented.collect();
    let text = render(&handle);
    assert_eq!(sample(&text, r#"bulkhead_closed{name="closing"}"#), 0.0);
    assert!(bulkhead.close());
    assert_eq!(bulkhead.try_acquire().unwrap_err().reason(), RejectReason::Closed);
    assert_eq!(instrumented.call(|| ()).unwrap_err().reason(), RejectReason::Closed);
    instrumented.collect();
    let text = render(&handle);
    assert_eq!(sample(&text, r#"bulkhead_closed{name="closing"}"#), 1.0);
    assert_eq!(
        sample(&text, r#"bulkhead_calls_rejected_total{name="closing",reason="closed"}"#),
        2.0
    );
    assert_eq!(
        sample(&text, r#"bulkhead_calls_rejected_total{name="closing",reason="full"}"#),
        0.0
    );
}

/// An unbounded async wait on an observed bulkhead reads the clock, so its wait is in the
/// histogram (an unobserved one never reads it).
#[test]
fn unbounded_async_wait_is_timed_when_observed() {
    let (recorder, bulkhead, instrumented) = setup("unbounded", config(1, Duration::MAX));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let held = bulkhead.try_acquire_owned().unwrap();
        let waiting = tokio::spawn(bulkhead.acquire_owned_async());
        while bulkhead.metrics().waiting_calls() == 0 {
            tokio::task::yield_now().await;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
        drop(held);
        drop(waiting.await.unwrap().unwrap());
    });
    instrumented.collect();
    let text = render(&recorder.handle());
    let permitted = r#"{name="unbounded",outcome="permitted"}"#;
    assert_eq!(sample(&text, &format!("bulkhead_wait_duration_seconds_count{permitted}")), 2.0);
    let sum = sample(&text, &format!("bulkhead_wait_duration_seconds_sum{permitted}"));
    assert!(sum >= 0.005, "the unbounded wait was not timed: sum {sum}\n{text}");
}

/// The `key` labels rendered for `metric` under the keyed bulkhead `name`, with their values.
fn keyed_samples(text: &str, metric: &str, name: &str) -> Vec<(String, f64)> {
    let prefix = format!("{metric}{{name=\"{name}\",key=\"");
    text.lines()
        .filter_map(|line| line.strip_prefix(&prefix))
        .map(|rest| {
            let (key, value) = rest.split_once("\"} ").unwrap();
            (key.to_owned(), value.trim().parse().unwrap())
        })
        .collect()
}

#[test]
fn keyed_series_bound_labels_sum_the_rest_and_zero_retired_keys() {
    use bulkhead::keyed::KeyedBulkhead;
    use metrics_export::{KeyedSeries, IN_FLIGHT_CALLS, KEYED_OTHER_KEYS, WAITING_CALLS};

    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let tenants = KeyedBulkhead::<u32>::builder("tenants")
        .default_config(config(8, Duration::ZERO))
        .total(config(1000, Duration::ZERO))
        .build()
        .unwrap();
    let series = KeyedSeries::new(3);
    // 100 tenants: tenant t holds (t % 7) + 1 slots, so 6, 13, 20, ... hold 7, the most.
    let mut held = Vec::new();
    for t in 0..100u32 {
        for _ in 0..=(t % 7) {
            held.push(tenants.try_acquire(&t).unwrap());
        }
    }
    let in_flight_all = held.len() as f64;
    metrics::with_local_recorder(&recorder, || series.record(&tenants));
    let text = render(&handle);
    let rows = keyed_samples(&text, IN_FLIGHT_CALLS, "tenants");
    assert_eq!(rows.len(), 4, "3 keys and other:\n{text}");
    let (own, other): (Vec<_>, Vec<_>) = rows.iter().partition(|(key, _)| key != "other");
    for (key, value) in &own {
        assert_eq!(key.parse::<u32>().unwrap() % 7, 6, "{key} is not among the busiest");
        assert_eq!(*value, 7.0);
    }
    assert_eq!(own.iter().map(|(_, v)| v).sum::<f64>() + other[0].1, in_flight_all);
    assert_eq!(sample(&text, &format!("{KEYED_OTHER_KEYS}{{name=\"tenants\"}}")), 97.0);
    assert_eq!(keyed_samples(&text, WAITING_CALLS, "tenants").len(), 4);
    // The total, as a plain bulkhead.
    assert_eq!(sample(&text, r#"bulkhead_in_flight_calls{name="tenants"}"#), in_flight_all);

    // Everything released, one new key busy: the three old keys drop to zero, the new key
    // gets a series, and nothing else is added.
    let first: Vec<String> = own.iter().map(|(key, _)| key.clone()).collect();
    drop(held);
    let busy: Vec<_> = (0..5).map(|_| tenants.try_acquire(&500).unwrap()).collect();
    metrics::with_local_recorder(&recorder, || series.record(&tenants));
    let text = render(&handle);
    let rows = keyed_samples(&text, IN_FLIGHT_CALLS, "tenants");
    for key in &first {
        assert!(rows.contains(&(key.clone(), 0.0)), "{key} not zeroed:\n{text}");
    }
    assert!(rows.contains(&("500".to_owned(), 5.0)), "{text}");
    assert!(rows.contains(&("other".to_owned(), 0.0)), "{text}");
    // At most cap + 1 live series, plus the retired ones kept at zero by the recorder.
    assert!(rows.len() <= 3 + 1 + first.len(), "{text}");
    drop(busy);
}

/// One export path for the family (issue 19): an adaptive bulkhead's limit gauges come with
/// its registration, and a keyed bulkhead registers through the same `register` and is read
/// by the same `collect`.
#[test]
fn one_register_and_collect_for_plain_adaptive_and_keyed() {
    use bulkhead::adaptive::{AdaptiveLimit, Aimd};
    use bulkhead::keyed::KeyedBulkhead;

    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let bank = Arc::new(Bulkhead::new("export-adaptive", config(4, Duration::ZERO)));
    bank.set_adaptive_limit(AdaptiveLimit::new(Aimd::default())).unwrap();
    let tenants = Arc::new(KeyedBulkhead::<u32>::builder("export-keyed").build().unwrap());
    let (plain, keyed) = metrics::with_local_recorder(&recorder, || {
        (metrics_export::register(&bank), metrics_export::register(&tenants).key_series(1))
    });
    bank.try_acquire().unwrap().fail(); // AIMD: 4 -> 3
    let _held = tenants.try_acquire(&7).unwrap();
    assert!(bank.try_acquire().is_ok());
    metrics::with_local_recorder(&recorder, metrics_export::collect);
    let text = render(&handle);
    assert_eq!(sample(&text, r#"bulkhead_adaptive_limit{name="export-adaptive"}"#), 3.0);
    assert_eq!(sample(&text, r#"bulkhead_adaptive_samples_total{name="export-adaptive"}"#), 2.0);
    assert_eq!(
        sample(
            &text,
            r#"resilience4j_bulkhead_max_allowed_concurrent_calls{name="export-adaptive"}"#
        ),
        3.0
    );
    assert_eq!(sample(&text, r#"bulkhead_in_flight_calls{name="export-keyed",key="7"}"#), 1.0);
    drop((plain, keyed));
}
