//! examples/sustained_overload.rs's harness for one second, every front-end: it keeps
//! compiling, and its bookkeeping holds. Only structural facts are asserted (every arrival is
//! accounted for exactly once, the front-end keeps the downstream within its capacity, a
//! served call took at least the service time); no figure that depends on timing.

// The example's report reads the rest of the tally.
#[allow(dead_code)]
#[path = "../examples/sustained_overload/harness.rs"]
mod harness;

use std::time::Duration;

use harness::{Scenario, CONTENDERS};

#[test]
fn every_arrival_is_served_or_refused_and_the_downstream_never_queues() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a current-thread tokio runtime");
    let scenario = Scenario {
        capacity: 4,
        service: Duration::from_millis(10),
        max_wait: Duration::from_millis(50),
        // 1.5 x the downstream's nominal 400 calls/s.
        rate: 600.0,
        run_for: Duration::from_secs(1),
        seed: 1,
    };
    let no_load = runtime.block_on(harness::no_load_latency(&scenario, 3));
    assert_eq!(no_load.len(), 3);
    assert!(harness::quantile(&no_load, 0.0) >= scenario.service, "{no_load:?}");

    for contender in CONTENDERS {
        let name = contender.name;
        let tally = runtime.block_on(harness::run(contender, &scenario));
        assert!(tally.arrivals > 0, "{name}: no arrivals in a second at 600/s");
        assert_eq!(
            tally.served_count() + tally.refused_count(),
            tally.arrivals,
            "{name}: every arrival is served or refused, once: {tally:?}"
        );
        assert!(tally.served_count() > 0, "{name}: nothing served: {tally:?}");
        assert!(tally.served_in_run.len() as u64 <= tally.served_count(), "{name}: {tally:?}");
        // Every served call took the service time, so a client that waits for nothing gets
        // no goodput.
        assert_eq!(tally.late(Duration::ZERO), tally.served_count(), "{name}");
        assert_eq!(tally.goodput_per_sec(Duration::ZERO), 0.0, "{name}");
        assert_eq!(tally.spawn_lag.len() as u64, tally.arrivals, "{name}");
        assert_eq!(
            tally.downstream_queued, 0,
            "{name}: the front-end let more than {} in",
            scenario.capacity
        );
        // A served call slept the service time inside the downstream.
        assert!(tally.quantile(0.0) >= scenario.service, "{name}: {:?}", tally.quantile(0.0));
    }
}
