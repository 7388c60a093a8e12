//! Adaptive limits attached to a bulkhead (issues 12, 19): samples from real calls,
//! outcomes, bounds, limit-change events, and the engine following the limit.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bulkhead::adaptive::{
    AdaptiveLimit, Aimd, Gradient2, LimitAlgorithm, Limits, Outcome, Sample, Vegas,
};
use bulkhead::{Bulkhead, BulkheadConfig, RejectReason};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Records every sample it sees; moves the limit by a script: -1 per failure, +1 per
/// success.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<Sample>>>);

impl LimitAlgorithm for Recorder {
    fn update(&mut self, sample: &Sample, limits: Limits) -> usize {
        self.0.lock().unwrap().push(*sample);
        match sample.outcome {
            Outcome::Failure => limits.current.saturating_sub(1),
            Outcome::Success => limits.current + 1,
            _ => limits.current,
        }
    }
}

fn adaptive(limit: AdaptiveLimit) -> Bulkhead {
    let bank = Bulkhead::new("bank", BulkheadConfig::for_pool(20));
    bank.set_adaptive_limit(limit).unwrap();
    bank
}

fn pool20(algorithm: impl LimitAlgorithm) -> Bulkhead {
    adaptive(AdaptiveLimit::new(algorithm))
}

fn limit(bank: &Bulkhead) -> usize {
    bank.adaptive_limit().unwrap().limit()
}

fn outcomes(recorder: &Recorder) -> Vec<Outcome> {
    recorder.0.lock().unwrap().iter().map(|s| s.outcome).collect()
}

#[test]
fn call_records_latency_and_success() {
    let recorder = Recorder::default();
    let bank = pool20(recorder.clone());
    bank.call(|| std::thread::sleep(Duration::from_millis(20))).unwrap();
    let samples = recorder.0.lock().unwrap().clone();
    assert_eq!(samples.len(), 1);
    assert_eq!(samples[0].outcome, Outcome::Success);
    assert_eq!(samples[0].in_flight, 1);
    assert!(samples[0].latency >= Duration::from_millis(20), "{:?}", samples[0].latency);
}

#[test]
fn call_fallible_err_and_panic_record_failures() {
    let recorder = Recorder::default();
    let bank = pool20(recorder.clone());
    let reply: Result<(), BoxError> = bank.call_fallible(|| Err("503".into()));
    assert!(reply.is_err());
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        bank.call(|| panic!("downstream bug"))
    }));
    assert!(panicked.is_err());
    assert_eq!(outcomes(&recorder), [Outcome::Failure, Outcome::Failure]);
    assert_eq!(limit(&bank), 14, "two failures moved the limit down twice");
    assert_eq!(bank.metrics().in_flight_calls(), 0, "the panic released its permit");
}

#[test]
fn classifier_and_hand_marked_permits() {
    let recorder = Recorder::default();
    let bank = pool20(recorder.clone());
    bank.call_classified(|| 404, |_| Outcome::Ignored).unwrap();
    bank.try_acquire().unwrap().fail();
    bank.try_acquire().unwrap().ignore();
    let mut permit = bank.try_acquire().unwrap();
    permit.set_outcome(Outcome::Cancelled);
    drop(permit);
    drop(bank.try_acquire().unwrap());
    // Every sample but the success was folded as its call ended; the success waits for the
    // fold window, or a reader of the controller, as here.
    assert_eq!(outcomes(&recorder).len(), 4);
    limit(&bank);
    assert_eq!(
        outcomes(&recorder),
        [
            Outcome::Ignored,
            Outcome::Failure,
            Outcome::Ignored,
            Outcome::Cancelled,
            Outcome::Success
        ]
    );
}

#[tokio::test]
async fn async_calls_record_success_timeout_and_cancellation() {
    let recorder = Recorder::default();
    let bank = pool20(recorder.clone());
    assert_eq!(bank.call_async(async { 7 }).await.unwrap(), 7);
    let slow = tokio::time::sleep(Duration::from_secs(60));
    let timed_out: Result<(), BoxError> = bank
        .call_async_fallible(async {
            tokio::time::timeout(Duration::from_millis(5), slow).await.map_err(BoxError::from)
        })
        .await;
    assert!(timed_out.is_err());
    // Cancelled: the caller's own timeout drops the call's future.
    let call = bank.call_async(tokio::time::sleep(Duration::from_secs(60)));
    assert!(tokio::time::timeout(Duration::from_millis(5), call).await.is_err());
    assert_eq!(outcomes(&recorder), [Outcome::Success, Outcome::Failure, Outcome::Cancelled]);
    assert_eq!(bank.metrics().in_flight_calls(), 0);
}

#[test]
fn limit_never_exceeds_the_guides_cap_nor_drops_below_min() {
    // An algorithm that asks for absurd limits: the controller clamps.
    struct Wild(usize);
    impl LimitAlgorithm for Wild {
        fn update(&mut self, _: &Sample, _: Limits) -> usize {
            self.0 += 1;
            if self.0 % 2 == 0 {
                usize::MAX
            } else {
                0
            }
        }
    }
    let bank = adaptive(AdaptiveLimit::new(Wild(0)).min_limit(3));
    for i in 0..10 {
        bank.call(|| ()).unwrap();
        let expected = if i % 2 == 0 { 3 } else { 16 };
        assert_eq!(limit(&bank), expected);
        assert_eq!(bank.adaptive_limit().unwrap().metrics().limit(), expected);
    }
}

#[test]
fn the_engine_follows_the_limit() {
    // Window zero: every sample folds as its call ends, so each success counts on its own.
    let bank = adaptive(AdaptiveLimit::new(Aimd::default()).fold_window(Duration::ZERO));
    for _ in 0..5 {
        bank.try_acquire().unwrap().fail(); // 16 -> 14 -> 12 -> 10 -> 9 -> 8
    }
    assert_eq!(limit(&bank), 8);
    let held: Vec<_> = (0..8).map(|_| bank.try_acquire().unwrap()).collect();
    let refused = bank.try_acquire().unwrap_err();
    assert_eq!(refused.reason(), RejectReason::Full);
    assert_eq!(refused.max_concurrent_calls(), 8);
    // Successes of calls admitted with 1..=8 in flight: +1 each once in_flight * 2 >=
    // limit (the 4th to the 8th), so 8 -> 13; the first three were app-limited.
    drop(held);
    assert_eq!(limit(&bank), 13);
    // The wait settings of the original config are kept.
    assert_eq!(bank.config().max_wait_duration(), Duration::from_millis(100));
}

#[test]
fn limit_change_events_carry_old_and_new() {
    let bank = pool20(Aimd::default());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    bank.adaptive_limit().unwrap().on_limit_change(move |c| {
        assert_eq!(c.bulkhead_name(), "bank");
        sink.lock().unwrap().push((c.old_limit(), c.new_limit()));
    });
    // A panicking listener does not stop the others, nor the controller.
    bank.adaptive_limit().unwrap().on_limit_change(|_| panic!("a buggy listener"));
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    bank.adaptive_limit().unwrap().on_limit_change(move |_| {
        counter.fetch_add(1, Ordering::Relaxed);
    });
    bank.try_acquire().unwrap().fail();
    bank.try_acquire().unwrap().fail();
    drop(bank.try_acquire().unwrap()); // in_flight 1 < 12 / 2: unchanged, no event
    assert_eq!(*seen.lock().unwrap(), [(16, 14), (14, 12)]);
    assert_eq!(calls.load(Ordering::Relaxed), 2);
}

#[test]
fn builder_errors_name_the_key_and_value() {
    let b = Bulkhead::new("b", BulkheadConfig::for_pool(20));
    let err = |limit: AdaptiveLimit| b.set_adaptive_limit(limit).unwrap_err();
    let aimd = || AdaptiveLimit::new(Aimd::default());
    let e = err(aimd().max_limit(17));
    assert_eq!((e.key(), e.value()), ("max_limit", "17"));
    let e = err(aimd().min_limit(17));
    assert_eq!((e.key(), e.value()), ("min_limit", "17"));
    let e = err(aimd().min_limit(4).initial_limit(2));
    assert_eq!((e.key(), e.value()), ("initial_limit", "2"));
    let e = err(aimd().sample_one_in(0));
    assert_eq!((e.key(), e.value()), ("sample_one_in", "0"));
    assert!(b.adaptive_limit().is_none(), "a refused limit is not attached");
    let e = err(aimd().timeout(Duration::ZERO));
    assert_eq!(e.key(), "timeout");
    assert!(e.to_string().contains("timeout"), "{e}");
}

#[test]
fn timeout_turns_slow_successes_into_failures() {
    let recorder = Recorder::default();
    let bank = adaptive(AdaptiveLimit::new(recorder.clone()).timeout(Duration::from_millis(50)));
    bank.call(|| std::thread::sleep(Duration::from_millis(100))).unwrap();
    bank.call(|| ()).unwrap();
    limit(&bank); // folds the success
    assert_eq!(outcomes(&recorder), [Outcome::Failure, Outcome::Success]);
}

/// Many threads, calls that fail and succeed at random: in-flight never exceeds the limit
/// in force, nor the cap; every permit comes back.
#[test]
fn concurrent_calls_stay_within_the_cap() {
    for algorithm in [
        Box::new(Aimd::default()) as Box<dyn LimitAlgorithm>,
        Box::new(Gradient2::default()),
        Box::new(Vegas::default()),
    ] {
        let bank = Arc::new(pool20(algorithm));
        let in_flight = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let (bank, in_flight, peak) = (bank.clone(), in_flight.clone(), peak.clone());
                std::thread::spawn(move || {
                    for i in 0..2_000u32 {
                        let _ = bank.call_fallible(|| {
                            let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                            peak.fetch_max(now, Ordering::SeqCst);
                            std::thread::yield_now();
                            in_flight.fetch_sub(1, Ordering::SeqCst);
                            if (i + t) % 7 == 0 {
                                Err(BoxError::from("503"))
                            } else {
                                Ok(())
                            }
                        });
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert!(peak.load(Ordering::SeqCst) <= 16, "peak {}", peak.load(Ordering::SeqCst));
        let m = bank.adaptive_limit().unwrap().metrics();
        assert!((1..=16).contains(&m.limit()));
        assert_eq!(bank.metrics().in_flight_calls(), 0);
        assert_eq!(bank.metrics().available_concurrent_calls(), m.limit());
    }
}

#[test]
fn a_registry_entry_becomes_adaptive_for_every_holder() {
    let registry = bulkhead::BulkheadRegistry::builder()
        .add_config("slow-bank", BulkheadConfig::for_pool(10))
        .build()
        .unwrap();
    let bank =
        registry.bulkhead_with("bank", bulkhead::BulkheadSpec::config_named("slow-bank")).unwrap();
    bank.set_adaptive_limit(AdaptiveLimit::new(Aimd::default())).unwrap();
    assert_eq!(
        bank.adaptive_limit().unwrap().max_limit(),
        8,
        "the cap is the registry's config for the name"
    );
    let found = registry.find("bank").unwrap();
    assert!(Arc::ptr_eq(&found, &bank));
    // A call through another holder of the same entry feeds the controller.
    found.try_acquire().unwrap().fail();
    assert_eq!(bank.adaptive_limit().unwrap().metrics().samples(), 1);
    assert_eq!(found.metrics().max_allowed_concurrent_calls(), 7, "the registry sees the limit");
    assert_eq!(registry.close_all(), 1);
    assert!(bank.try_acquire().is_err());
}

#[test]
fn adaptive_types_and_futures_are_send() {
    fn send_sync<T: Send + Sync>(_: &T) {}
    fn send<T: Send>(_: &T) {}
    let bank = pool20(Gradient2::default());
    send_sync(&bank);
    let permit = bank.try_acquire().unwrap();
    send(&permit);
    drop(permit);
    // The async calls can run on a multi-threaded runtime (spawned tasks need Send).
    let call = bank.call_async(async { 1 });
    send(&call);
    let acquire = bank.acquire_async();
    send(&acquire);
    let _ = (call, acquire);
}

/// `on_limit_change` returns a handle that removes the listener: later changes reach only
/// the listeners still registered.
#[test]
fn a_removed_limit_listener_hears_no_later_change() {
    let bank = pool20(Aimd::default());
    let (removed, kept) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let handle = {
        let removed = Arc::clone(&removed);
        bank.adaptive_limit().unwrap().on_limit_change(move |_| {
            removed.fetch_add(1, Ordering::SeqCst);
        })
    };
    {
        let kept = Arc::clone(&kept);
        drop(bank.adaptive_limit().unwrap().on_limit_change(move |_| {
            kept.fetch_add(1, Ordering::SeqCst);
        }));
    }
    bank.try_acquire().unwrap().fail(); // 16 -> 14
    assert_eq!((removed.load(Ordering::SeqCst), kept.load(Ordering::SeqCst)), (1, 1));
    assert!(handle.remove());
    bank.try_acquire().unwrap().fail(); // 14 -> 12
    assert_eq!(limit(&bank), 12);
    assert_eq!((removed.load(Ordering::SeqCst), kept.load(Ordering::SeqCst)), (1, 2));
    assert!(!handle.is_registered() && !handle.remove());
}

/// The cap follows `change_config`: the controller's bounds move with it and the engine
/// keeps the controller's limit, not the configured cap.
#[test]
fn change_config_moves_the_cap_not_the_limit() {
    let bank = pool20(Aimd::default());
    bank.try_acquire().unwrap().fail(); // 16 -> 14
    bank.change_config(BulkheadConfig::for_pool(10)); // cap 8
    let control = bank.adaptive_limit().unwrap();
    assert_eq!((control.limit(), control.max_limit()), (8, 8));
    assert_eq!(bank.metrics().max_allowed_concurrent_calls(), 8);
    bank.change_config(BulkheadConfig::for_pool(40)); // cap 32: the limit stays where it was
    assert_eq!((control.limit(), control.max_limit()), (8, 32));
    assert_eq!(bank.metrics().max_allowed_concurrent_calls(), 8);
    assert_eq!(bank.config().max_concurrent_calls(), 32);
}

/// Every verb of the family feeds the controller: owned permits, bounded waits, async.
#[tokio::test]
async fn every_verb_feeds_the_controller() {
    let recorder = Recorder::default();
    // Window zero: each call's sample is fed as the call ends (no run of successes merged).
    let bank = Arc::new(adaptive(AdaptiveLimit::new(recorder.clone()).fold_window(Duration::ZERO)));
    bank.try_acquire_owned().unwrap().fail();
    bank.acquire_timeout(Duration::from_millis(1)).unwrap().succeed();
    bank.acquire_owned_async().await.unwrap().ignore();
    drop(bank.acquire_async().await.unwrap());
    let r: Result<u8, BoxError> = bank.call_owned_async_fallible(async { Ok(1) }).await;
    assert_eq!(r.unwrap(), 1);
    assert_eq!(
        outcomes(&recorder),
        [Outcome::Failure, Outcome::Success, Outcome::Ignored, Outcome::Success, Outcome::Success]
    );
}

/// Issue 21: successes gather per thread and reach the algorithm as one sample per fold
/// (mean latency, highest in-flight count); a failure is fed at once, on its own, after the
/// run of successes before it.
#[test]
fn successes_fold_as_one_sample_and_a_failure_at_once() {
    let recorder = Recorder::default();
    let window = Duration::from_secs(3600); // no fold by time in this test
    let bank = adaptive(AdaptiveLimit::new(recorder.clone()).fold_window(window));
    let held = bank.try_acquire().unwrap(); // in flight 1
    let second = bank.try_acquire().unwrap(); // in flight 2
    let third = bank.try_acquire().unwrap(); // in flight 3
    drop(second);
    drop(third);
    assert!(outcomes(&recorder).is_empty(), "two successes wait for a fold");
    held.fail(); // a failure folds at once: the run of two, then the failure
    let samples = recorder.0.lock().unwrap().clone();
    assert_eq!(samples.len(), 2);
    assert_eq!((samples[0].outcome, samples[0].in_flight), (Outcome::Success, 3));
    assert_eq!((samples[1].outcome, samples[1].in_flight), (Outcome::Failure, 1));
    let metrics = bank.adaptive_limit().unwrap().metrics();
    assert_eq!((metrics.samples(), metrics.samples_dropped()), (3, 0));
    // The run's +1 is clamped at the cap (16), the failure takes one off.
    assert_eq!(metrics.limit(), 15);
}

/// Issue 21: a thread with 32 samples waiting folds them without a reader; the samples of
/// a thread that stopped calling reach the algorithm at the next reader (or another
/// thread's fold).
#[test]
fn a_full_batch_folds_without_a_reader_and_a_reader_folds_the_rest() {
    let recorder = Recorder::default();
    let window = Duration::from_secs(3600);
    let bank = Arc::new(adaptive(AdaptiveLimit::new(recorder.clone()).fold_window(window)));
    for _ in 0..32 {
        bank.call(|| ()).unwrap();
    }
    assert_eq!(outcomes(&recorder), [Outcome::Success], "32 waiting: one fold, one run");
    let other = Arc::clone(&bank);
    std::thread::spawn(move || other.call(|| ()).unwrap()).join().unwrap();
    assert_eq!(outcomes(&recorder).len(), 1, "the other thread's sample waits");
    assert_eq!(bank.adaptive_limit().unwrap().metrics().samples(), 33);
    assert_eq!(outcomes(&recorder).len(), 2);
}

/// A controller alone decides its samples inline (issue 21); with counters or a listener
/// beside it, the full path decides. Either way one call in `k` is sampled, and the counts
/// and events of every call stay whole. Run on a fresh thread: the sampling countdown is
/// per thread.
#[test]
fn one_call_in_k_is_sampled_with_the_controller_alone_and_with_company() {
    std::thread::spawn(|| {
        let bank = Bulkhead::new("sampled-bank", BulkheadConfig::for_pool(20));
        let limit =
            AdaptiveLimit::new(Aimd::default()).sample_one_in(4).fold_window(Duration::ZERO);
        bank.set_adaptive_limit(limit).unwrap();
        for _ in 0..8 {
            drop(bank.try_acquire().unwrap());
        }
        assert_eq!(bank.adaptive_limit().unwrap().metrics().samples(), 2, "alone: 2 of 8");
        bank.enable_counters();
        let heard = Arc::new(AtomicUsize::new(0));
        let sink = Arc::clone(&heard);
        bank.on_event(move |_| {
            sink.fetch_add(1, Ordering::Relaxed);
        });
        for _ in 0..8 {
            drop(bank.try_acquire().unwrap());
        }
        assert_eq!(bank.adaptive_limit().unwrap().metrics().samples(), 4, "with company: 2 more");
        let m = bank.metrics();
        assert_eq!((m.calls_permitted(), m.calls_finished()), (8, 8));
        assert_eq!(heard.load(Ordering::Relaxed), 16, "a CallPermitted and a CallFinished each");
    })
    .join()
    .unwrap();
}

/// An algorithm whose `update` panics on the failures it is fed (a bug in user code).
struct PanicsOnFailure;

impl LimitAlgorithm for PanicsOnFailure {
    fn update(&mut self, sample: &Sample, limits: Limits) -> usize {
        assert_ne!(sample.outcome, Outcome::Failure, "a buggy algorithm");
        limits.current
    }
}

#[test]
fn a_panicking_algorithm_loses_no_permit() {
    let bank = pool20(PanicsOnFailure);
    for _ in 0..3 {
        let permit = bank.try_acquire().unwrap();
        // A failure folds at once, on this thread, as the permit ends.
        let ended = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| permit.fail()));
        assert!(ended.is_ok(), "the algorithm's panic reached the caller");
        assert_eq!(bank.metrics().in_flight_calls(), 0, "the permit came back");
    }
    bank.call(|| ()).unwrap();
    let control = bank.adaptive_limit().unwrap();
    assert_eq!(control.limit(), 16, "a panicking update leaves the limit as it was");
    let metrics = control.metrics();
    assert_eq!((metrics.samples(), metrics.samples_dropped()), (1, 3), "{metrics:?}");
    assert_eq!(bank.metrics().in_flight_calls(), 0);
}
