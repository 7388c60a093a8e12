//! No user code runs, or is dropped, under a lock of the keyed, adaptive and registry layers
//! (issue 17). Each test has a key, a listener, a limit-change callback, a waker or a
//! classifier call back into the same bulkhead (acquire, try_acquire, a permit dropped,
//! close, metrics, evict_idle, registration) from where it runs: under one of our locks
//! (parking_lot or std, neither re-entrant) that would deadlock. Each test runs on its own
//! thread behind a generous hang guard (30 s), so a regression fails instead of hanging.

use std::cell::Cell;
use std::fmt;
use std::future::Future;
use std::hash::{Hash, Hasher};
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc;
use std::sync::{Arc, OnceLock, Weak};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

#[path = "../verification/hostile_waker.rs"]
mod hostile_waker;

use hostile_waker::{hostile_waker, reenter, Op};

use bulkhead::adaptive::{AdaptiveLimit, LimitAlgorithm, Limits, Outcome, Sample};
use bulkhead::keyed::KeyedBulkhead;
use bulkhead::{Bulkhead, BulkheadConfig, BulkheadRegistry, RejectReason};

/// Runs `f` on its own thread; fails if it is not done within 30 s (a deadlock: user code
/// ran under one of our locks and called back in), and passes on its panic.
fn hang_guard(name: &'static str, f: impl FnOnce() + Send + 'static) {
    let (done, finished) = mpsc::channel();
    let thread = std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            f();
            let _ = done.send(());
        })
        .expect("spawn");
    match finished.recv_timeout(Duration::from_secs(30)) {
        Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => {
            if let Err(panic) = thread.join() {
                std::panic::resume_unwind(panic);
            }
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("{name}: no answer in 30 s: user code ran under a lock and called back in")
        }
    }
}

fn config(limit: usize) -> BulkheadConfig {
    BulkheadConfig::builder()
        .max_concurrent_calls(limit)
        .max_wait_duration(Duration::ZERO)
        .build()
        .unwrap()
}

thread_local! {
    /// Set while a hook runs: a hook's own calls (which clone, display and drop keys) do not
    /// re-enter again.
    static IN_HOOK: Cell<bool> = const { Cell::new(false) };
}

/// What a key's hooks call back into, and how often they did.
#[derive(Default)]
struct Hook {
    keyed: OnceLock<Weak<KeyedBulkhead<Key>>>,
    calls: AtomicUsize,
    /// Whether the hooks also call `evict_idle` (which would evict the tests' idle keys).
    evict: AtomicBool,
}

impl Hook {
    /// Calls the keyed bulkhead's public methods (every one takes a shard lock, or all of
    /// them in turn), once per hook invocation, not from inside another hook.
    fn reenter(&self) {
        if IN_HOOK.with(|h| h.replace(true)) {
            return;
        }
        if let Some(keyed) = self.keyed.get().and_then(Weak::upgrade) {
            let probe = Key::plain(1_000);
            let _ = keyed.key_metrics(&probe);
            let _ = keyed.key_bulkhead(&probe);
            let _ = keyed.metrics(4);
            let _ = keyed.live_keys();
            // An existing key (any shard: they share one) and a permit dropped.
            drop(keyed.try_acquire(&Key::plain(7)));
            if self.evict.load(SeqCst) {
                let _ = keyed.evict_idle();
            }
            self.calls.fetch_add(1, SeqCst);
        }
        IN_HOOK.with(|h| h.set(false));
    }
}

/// A key whose `Clone`, `Display` and `Drop` call back into the keyed bulkhead (when it has
/// a hook). `Hash` and `Eq` (which run under the shard's lock, as documented) use the id.
struct Key {
    id: u32,
    hook: Option<Arc<Hook>>,
}

impl Key {
    fn plain(id: u32) -> Key {
        Key { id, hook: None }
    }

    fn hooked(id: u32, hook: &Arc<Hook>) -> Key {
        Key { id, hook: Some(Arc::clone(hook)) }
    }
}

impl Clone for Key {
    fn clone(&self) -> Self {
        if let Some(hook) = &self.hook {
            hook.reenter();
        }
        Key { id: self.id, hook: self.hook.clone() }
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(hook) = &self.hook {
            hook.reenter();
        }
        write!(f, "{}", self.id)
    }
}

impl Drop for Key {
    fn drop(&mut self) {
        if let Some(hook) = &self.hook {
            hook.reenter();
        }
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}

impl Eq for Key {}

impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.id.hash(state);
    }
}

/// One shard, so every key shares the lock a hook would deadlock on.
fn hooked_keyed(max_keys: usize, hook: &Arc<Hook>) -> Arc<KeyedBulkhead<Key>> {
    let keyed = Arc::new(
        KeyedBulkhead::<Key>::builder("api")
            .default_config(config(1))
            .shards(1)
            .max_keys(max_keys)
            .build()
            .unwrap(),
    );
    hook.keyed.set(Arc::downgrade(&keyed)).unwrap();
    keyed
}

/// A new key's `Clone` and `Display` (its copy for the map, its bulkhead's name) call back
/// in: they run before the shard's lock.
#[test]
fn keyed_new_key_clone_and_display_reenter() {
    hang_guard("keyed_new_key_clone_and_display_reenter", || {
        let hook = Arc::new(Hook::default());
        let keyed = hooked_keyed(16, &hook);
        drop(keyed.try_acquire(&Key::plain(7)).unwrap());
        let permit = keyed.try_acquire(&Key::hooked(1, &hook)).unwrap();
        assert_eq!(permit.key_bulkhead().name(), "api/1");
        assert!(hook.calls.load(SeqCst) >= 2, "clone and display both called back");
        drop(permit);
        // The blocking and async paths create keys the same way.
        drop(keyed.acquire(&Key::hooked(2, &hook)).unwrap());
        drop(futures::executor::block_on(keyed.acquire_async(&Key::hooked(3, &hook))).unwrap());
        assert_eq!(keyed.live_keys(), 4);
    });
}

/// `metrics` clones every live key: after the shard's lock.
#[test]
fn keyed_metrics_key_clone_reenters() {
    hang_guard("keyed_metrics_key_clone_reenters", || {
        let hook = Arc::new(Hook::default());
        let keyed = hooked_keyed(16, &hook);
        drop(keyed.try_acquire(&Key::hooked(1, &hook)).unwrap());
        let before = hook.calls.load(SeqCst);
        let metrics = keyed.metrics(8);
        assert!(metrics.keys.iter().any(|(key, _)| key.id == 1));
        assert!(hook.calls.load(SeqCst) > before, "the key's clone called back");
    });
}

/// An evicted key is dropped after the shard's lock: by `evict_idle`, and by a new key
/// arriving at a full map.
#[test]
fn keyed_evicted_key_drop_reenters() {
    hang_guard("keyed_evicted_key_drop_reenters", || {
        let hook = Arc::new(Hook::default());
        let keyed = hooked_keyed(2, &hook);
        drop(keyed.try_acquire(&Key::hooked(1, &hook)).unwrap());
        // From now on the hooks evict too (keys 1 and 7, the hooks' own, are live and idle).
        hook.evict.store(true, SeqCst);
        let before = hook.calls.load(SeqCst);
        assert!(keyed.evict_idle() >= 1);
        assert!(hook.calls.load(SeqCst) > before, "the evicted key's drop called back");
        drop(keyed.try_acquire(&Key::hooked(2, &hook)).unwrap());
        let before = hook.calls.load(SeqCst);
        // max_keys 2 (key 2 and the hooks' key 7 live): key 3 evicts the idle keys, whose
        // drops call back in.
        let three = keyed.try_acquire(&Key::hooked(3, &hook)).unwrap();
        assert!(hook.calls.load(SeqCst) > before);
        assert!(keyed.key_metrics(&Key::plain(2)).is_none(), "key 2 evicted");
        drop(three);
    });
}

/// Two threads create the same hooked key at once: the loser's copy is dropped after the
/// lock. (Whether they race is up to the scheduler; the guard holds either way.)
#[test]
fn keyed_same_new_key_loser_copy_drop_reenters() {
    hang_guard("keyed_same_new_key_loser_copy_drop_reenters", || {
        let hook = Arc::new(Hook::default());
        let keyed = hooked_keyed(64, &hook);
        for id in 100..132 {
            let threads: Vec<_> = (0..2)
                .map(|_| {
                    let (keyed, hook) = (Arc::clone(&keyed), Arc::clone(&hook));
                    std::thread::spawn(move || drop(keyed.try_acquire(&Key::hooked(id, &hook))))
                })
                .collect();
            threads.into_iter().for_each(|t| t.join().unwrap());
        }
        // Key 7 (the hooks' own, plain) plus the 32 hooked ones.
        assert_eq!(keyed.live_keys(), 33);
        assert_eq!(keyed.metrics(usize::MAX).keys.len(), 33);
    });
}

/// A key's bulkhead dropped at eviction drops its listeners after the shard's lock, and a
/// listener's captures may call back in; a listener that calls back in on every event
/// (acquire, refuse, release) also runs outside the lock.
#[test]
fn keyed_listener_reenters_and_is_dropped_outside_the_lock() {
    struct OnDrop(Weak<KeyedBulkhead<u32>>, Arc<AtomicUsize>);
    impl Drop for OnDrop {
        fn drop(&mut self) {
            if let Some(keyed) = self.0.upgrade() {
                let _ = keyed.metrics(4);
                drop(keyed.try_acquire(&9));
                let _ = keyed.evict_idle();
                self.1.fetch_add(1, SeqCst);
            }
        }
    }
    hang_guard("keyed_listener_reenters_and_is_dropped_outside_the_lock", || {
        let keyed = one_shard_with_key_1();
        let (heard, dropped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        {
            let guard = OnDrop(Arc::downgrade(&keyed), Arc::clone(&dropped));
            let (weak, heard) = (Arc::downgrade(&keyed), Arc::clone(&heard));
            keyed.key_bulkhead(&1).unwrap().on_event(move |_| {
                let _ = &guard;
                if let Some(keyed) = weak.upgrade() {
                    let _ = keyed.metrics(4);
                    let _ = keyed.key_metrics(&1);
                    drop(keyed.try_acquire(&2));
                }
                heard.fetch_add(1, SeqCst);
            });
        }
        let permit = keyed.try_acquire(&1).unwrap();
        assert_eq!(keyed.try_acquire(&1).unwrap_err().bulkhead_name(), "api/1");
        drop(permit);
        assert_eq!(heard.load(SeqCst), 3, "permitted, rejected, finished");
        assert_eq!(dropped.load(SeqCst), 0);
        // Evicting key 1 drops its bulkhead, its listener and the guard: after the lock.
        assert!(keyed.evict_idle() >= 1);
        assert_eq!(dropped.load(SeqCst), 1, "the listener was dropped with its key");
    });
}

/// `close` and refusals after it, with a hooked key: a key created after close is refused
/// `Closed`, and its copy and bulkhead are dropped after the lock.
#[test]
fn keyed_close_with_hooked_keys() {
    hang_guard("keyed_close_with_hooked_keys", || {
        let hook = Arc::new(Hook::default());
        let keyed = hooked_keyed(1, &hook);
        drop(keyed.try_acquire(&Key::hooked(1, &hook)).unwrap());
        assert!(keyed.close());
        let refused = keyed.try_acquire(&Key::hooked(2, &hook)).unwrap_err();
        assert_eq!(refused.reason(), RejectReason::Closed);
        assert_eq!(keyed.evict_idle(), 1);
        assert_eq!(keyed.live_keys(), 0);
    });
}

/// A key type for the registry test, whose `Display` and `Drop` call the registry.
#[derive(Clone, PartialEq, Eq, Hash)]
struct RegKey(u32);

static REGISTRY: OnceLock<BulkheadRegistry> = OnceLock::new();
static REG_CALLS: AtomicUsize = AtomicUsize::new(0);

impl fmt::Display for RegKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(registry) = REGISTRY.get() {
            let _ = registry.keyed_names();
            REG_CALLS.fetch_add(1, SeqCst);
        }
        write!(f, "{}", self.0)
    }
}

impl Drop for RegKey {
    fn drop(&mut self) {
        if let Some(registry) = REGISTRY.get() {
            let _ = registry.find_keyed::<RegKey>("tenants");
            REG_CALLS.fetch_add(1, SeqCst);
        }
    }
}

/// The registry builds a keyed bulkhead (naming its fallback key's bulkhead runs the key's
/// `Display`) before its lock, and drops one it removed (with its keys) after it.
#[test]
fn keyed_registry_key_display_and_drop_reenter() {
    hang_guard("keyed_registry_key_display_and_drop_reenter", || {
        let registry = REGISTRY.get_or_init(BulkheadRegistry::default);
        let builder = KeyedBulkhead::<RegKey>::builder("tenants").fallback_key(RegKey(0));
        let keyed = registry.keyed_with("tenants", builder).unwrap();
        assert!(REG_CALLS.load(SeqCst) >= 1, "the fallback key's Display called back");
        drop(keyed.try_acquire(&RegKey(5)).unwrap());
        drop(keyed);
        let before = REG_CALLS.load(SeqCst);
        assert!(registry.remove_keyed("tenants"));
        assert!(REG_CALLS.load(SeqCst) > before, "the removed keyed bulkhead's keys dropped");
    });
}

/// Moves the limit by one per sample: -1 on a failure, +1 on a success.
struct Step;

impl LimitAlgorithm for Step {
    fn update(&mut self, sample: &Sample, limits: Limits) -> usize {
        match sample.outcome {
            Outcome::Failure => limits.current.saturating_sub(1),
            Outcome::Success => limits.current + 1,
            _ => limits.current,
        }
    }
}

fn adaptive(cap: usize, initial: usize, wait: Duration) -> Arc<Bulkhead> {
    let config = BulkheadConfig::builder()
        .max_concurrent_calls(cap)
        .max_wait_duration(wait)
        .build()
        .unwrap();
    let bank = Arc::new(Bulkhead::new("bank", config));
    // Window zero (issue 21): every sample folds as its call ends, so a success changes the
    // limit (and calls the listeners) before its call returns, as these tests count on.
    let limit = AdaptiveLimit::new(Step).initial_limit(initial).fold_window(Duration::ZERO);
    bank.set_adaptive_limit(limit).unwrap();
    bank
}

/// A limit-change listener calls back in: acquires, drops a permit (which records a sample
/// and may change the limit again), reads the metrics, registers and removes listeners.
#[test]
fn adaptive_limit_listener_reenters() {
    hang_guard("adaptive_limit_listener_reenters", || {
        let bank = adaptive(4, 2, Duration::ZERO);
        let heard = Arc::new(AtomicUsize::new(0));
        {
            let (weak, heard) = (Arc::downgrade(&bank), Arc::clone(&heard));
            bank.adaptive_limit().unwrap().on_limit_change(move |change| {
                let Some(bank) = weak.upgrade() else { return };
                assert_eq!(bank.adaptive_limit().unwrap().metrics().limit(), change.new_limit());
                if heard.fetch_add(1, SeqCst) == 0 {
                    // Only on the first change: this failure changes the limit again.
                    bank.try_acquire().expect("a permit").fail();
                }
                let _ = bank.metrics();
                bank.adaptive_limit().unwrap().on_limit_change(|_| {}).remove();
            });
        }
        bank.try_acquire().unwrap().succeed();
        // 2 -> 3 (success), then the listener's failure: 3 -> 2.
        assert_eq!(heard.load(SeqCst), 2);
        assert_eq!(bank.adaptive_limit().unwrap().limit(), 2);
        assert_eq!(bank.metrics().max_allowed_concurrent_calls(), 2);
    });
}

/// A removed listener is dropped after the listeners' lock: its captures' `Drop` registers
/// another listener.
#[test]
fn adaptive_removed_listener_drop_reenters() {
    struct OnDrop(Weak<Bulkhead>, Arc<AtomicUsize>);
    impl Drop for OnDrop {
        fn drop(&mut self) {
            if let Some(bank) = self.0.upgrade() {
                let _ = bank.adaptive_limit().unwrap().on_limit_change(|_| {});
                let _ = bank.adaptive_limit().unwrap().metrics();
                self.1.fetch_add(1, SeqCst);
            }
        }
    }
    hang_guard("adaptive_removed_listener_drop_reenters", || {
        let bank = adaptive(4, 2, Duration::ZERO);
        let dropped = Arc::new(AtomicUsize::new(0));
        let guard = OnDrop(Arc::downgrade(&bank), Arc::clone(&dropped));
        let handle = bank.adaptive_limit().unwrap().on_limit_change(move |_| {
            let _ = &guard;
        });
        assert!(handle.remove());
        // The next registration prunes (and drops) the removed listener.
        let _ = bank.adaptive_limit().unwrap().on_limit_change(|_| {});
        assert_eq!(dropped.load(SeqCst), 1);
    });
}

/// A waker that calls back in when a grown limit grants its queued acquire: the new limit
/// reaches the engine (which wakes it) after the controller's lock.
#[test]
fn adaptive_waker_woken_by_growth_reenters() {
    struct Reenter(Weak<Bulkhead>, AtomicUsize);
    impl Wake for Reenter {
        fn wake(self: Arc<Self>) {
            self.wake_by_ref();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            if let Some(bank) = self.0.upgrade() {
                let _ = bank.adaptive_limit().unwrap().metrics();
                let _ = bank.adaptive_limit().unwrap().limit();
                // A call that records a sample (ignored: the limit stays).
                if let Ok(permit) = bank.try_acquire() {
                    permit.ignore();
                }
            }
            self.1.fetch_add(1, SeqCst);
        }
    }
    hang_guard("adaptive_waker_woken_by_growth_reenters", || {
        let bank = adaptive(2, 1, Duration::MAX);
        let held = bank.try_acquire().unwrap();
        let waker = Arc::new(Reenter(Arc::downgrade(&bank), AtomicUsize::new(0)));
        let task = Waker::from(Arc::clone(&waker));
        let mut cx = Context::from_waker(&task);
        let mut queued = pin!(bank.acquire_async());
        assert!(queued.as_mut().poll(&mut cx).is_pending(), "limit 1, held");
        // The success grows the limit to 2, which grants the queued acquire and wakes it.
        held.succeed();
        assert!(waker.1.load(SeqCst) >= 1, "woken by the growth");
        let Poll::Ready(Ok(permit)) = queued.as_mut().poll(&mut cx) else {
            panic!("granted by the growth")
        };
        permit.ignore();
        assert_eq!(bank.adaptive_limit().unwrap().limit(), 2);
    });
}

/// A classifier calls back in (acquire, metrics) while its call's permit is held.
#[test]
fn adaptive_classifier_reenters() {
    hang_guard("adaptive_classifier_reenters", || {
        let bank = adaptive(4, 2, Duration::ZERO);
        let inner = Arc::clone(&bank);
        let value = bank
            .call_classified(
                || 5,
                move |v| {
                    assert_eq!(inner.metrics().in_flight_calls(), 1);
                    inner.try_acquire().unwrap().ignore();
                    let _ = inner.adaptive_limit().unwrap().metrics();
                    if *v == 5 {
                        Outcome::Failure
                    } else {
                        Outcome::Success
                    }
                },
            )
            .unwrap();
        assert_eq!(value, 5);
        assert_eq!(bank.adaptive_limit().unwrap().limit(), 1);
    });
}

/// A metrics recorder is user code too: one that calls back into the exporter (a scrape
/// from inside a handle, say) while our exporter feeds it.
#[cfg(feature = "metrics")]
mod recorder {
    use std::sync::{Arc, OnceLock};

    use metrics::{
        Counter, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder, SharedString,
        Unit,
    };

    use super::*;

    type Callback = Box<dyn Fn() + Send + Sync>;

    /// Calls `callback` (once set) from every gauge registration and histogram record, not
    /// from inside itself.
    #[derive(Default)]
    struct Reentrant {
        callback: Arc<OnceLock<Callback>>,
        calls: Arc<AtomicUsize>,
        /// Call back only from the registration of a gauge with this `key` label.
        only_key: Option<&'static str>,
    }

    struct Hist(Arc<OnceLock<Callback>>, Arc<AtomicUsize>);

    fn call(callback: &OnceLock<Callback>, calls: &AtomicUsize) {
        if IN_HOOK.with(|h| h.replace(true)) {
            return;
        }
        if let Some(callback) = callback.get() {
            callback();
            calls.fetch_add(1, SeqCst);
        }
        IN_HOOK.with(|h| h.set(false));
    }

    impl HistogramFn for Hist {
        fn record(&self, _: f64) {
            call(&self.0, &self.1);
        }
    }

    impl Recorder for Reentrant {
        fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn register_counter(&self, _: &Key, _: &Metadata<'_>) -> Counter {
            Counter::noop()
        }
        fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
            let wanted = self.only_key.map_or(true, |only| {
                key.labels().any(|label| label.key() == "key" && label.value() == only)
            });
            if wanted {
                call(&self.callback, &self.calls);
            }
            Gauge::noop()
        }
        fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
            Histogram::from_arc(Arc::new(Hist(Arc::clone(&self.callback), Arc::clone(&self.calls))))
        }
    }

    /// The wait histogram is fed after the exporter's lock: a handle that scrapes again
    /// (`collect`) from `record` does not deadlock.
    #[test]
    fn wait_histogram_record_reenters_collect() {
        hang_guard("wait_histogram_record_reenters_collect", || {
            let recorder = Reentrant::default();
            let bank = Arc::new(bulkhead::Bulkhead::new("bank", config(2)));
            let instrumented = metrics::with_local_recorder(&recorder, || {
                bulkhead::metrics_export::register(&bank)
            });
            assert!(recorder.callback.set(Box::new(bulkhead::metrics_export::collect)).is_ok());
            drop(bank.try_acquire().unwrap()); // a permitted call with a zero wait
            metrics::with_local_recorder(&recorder, || instrumented.collect());
            assert!(recorder.calls.load(SeqCst) >= 1, "the histogram was fed and called back");
        });
    }

    /// `KeyedSeries::record` zeroes the keys that left the top `cap` after its lock: a
    /// recorder that records the series again from `register_gauge` does not deadlock.
    #[test]
    fn keyed_series_zeroing_reenters_record() {
        hang_guard("keyed_series_zeroing_reenters_record", || {
            // Key 1's gauges are registered, the second time, only to zero them.
            let recorder = Reentrant { only_key: Some("1"), ..Reentrant::default() };
            let keyed = Arc::new(KeyedBulkhead::<u32>::builder("api").build().unwrap());
            let series = Arc::new(bulkhead::metrics_export::KeyedSeries::new(1));
            let one = keyed.try_acquire(&1).unwrap();
            metrics::with_local_recorder(&recorder, || series.record(&keyed));
            {
                let (keyed, series) = (Arc::clone(&keyed), Arc::clone(&series));
                let _ = recorder.callback.set(Box::new(move || series.record(&keyed)));
            }
            // Key 2 busier than key 1: key 1 leaves the top 1 and is zeroed.
            let two: Vec<_> = (0..2).map(|_| keyed.try_acquire(&2).unwrap()).collect();
            drop(one);
            metrics::with_local_recorder(&recorder, || series.record(&keyed));
            assert!(recorder.calls.load(SeqCst) >= 1);
            drop(two);
        });
    }
}

/// A keyed bulkhead ("api", limit 1 per key, one shard) whose key 1 is live and idle.
fn one_shard_with_key_1() -> Arc<KeyedBulkhead<u32>> {
    let keyed = Arc::new(
        KeyedBulkhead::<u32>::builder("api").default_config(config(1)).shards(1).build().unwrap(),
    );
    drop(keyed.try_acquire(&1).unwrap());
    keyed
}

/// A key's listener closes the whole keyed bulkhead when its call finishes (close locks
/// every shard in turn and closes key 1's bulkhead, whose `Closed` event reaches the same
/// listener again), and checks the drain from there.
#[test]
fn keyed_listener_closes_the_keyed_bulkhead() {
    hang_guard("keyed_listener_closes_the_keyed_bulkhead", || {
        let keyed = one_shard_with_key_1();
        let closed = Arc::new(AtomicUsize::new(0));
        {
            let (weak, closed) = (Arc::downgrade(&keyed), Arc::clone(&closed));
            keyed.key_bulkhead(&1).unwrap().on_event(move |event| {
                let Some(keyed) = weak.upgrade() else { return };
                match event.kind() {
                    bulkhead::BulkheadEventKind::CallFinished => {
                        assert!(keyed.close());
                        assert!(keyed.wait_drained(Duration::ZERO));
                    }
                    bulkhead::BulkheadEventKind::Closed => {
                        closed.fetch_add(1, SeqCst);
                    }
                    _ => {}
                }
            });
        }
        drop(keyed.try_acquire(&1).unwrap());
        assert_eq!(closed.load(SeqCst), 1, "key 1's Closed event, from inside its listener");
        assert!(keyed.is_closed());
        assert_eq!(keyed.try_acquire(&1).unwrap_err().reason(), RejectReason::Closed);
        assert_eq!(keyed.try_acquire(&2).unwrap_err().reason(), RejectReason::Closed);
    });
}

/// A limit-change listener changes the engine's wait settings and then closes it; the
/// recording caller, and the next, see it closed.
#[test]
fn adaptive_limit_listener_changes_config_and_closes() {
    hang_guard("adaptive_limit_listener_changes_config_and_closes", || {
        let bank = adaptive(4, 2, Duration::ZERO);
        {
            let weak = Arc::downgrade(&bank);
            bank.adaptive_limit().unwrap().on_limit_change(move |change| {
                let Some(bank) = weak.upgrade() else { return };
                let engine = &bank;
                engine.change_config(config(change.new_limit()));
                assert_eq!(engine.metrics().max_allowed_concurrent_calls(), change.new_limit());
                assert!(engine.close());
            });
        }
        bank.try_acquire().unwrap().fail();
        assert!(bank.metrics().is_closed());
        assert_eq!(bank.try_acquire().unwrap_err().reason(), RejectReason::Closed);
    });
}

/// Calls `registry.find(name)` when dropped: a user value that reaches the registry from a
/// destructor.
struct FindsOnDrop(&'static BulkheadRegistry, &'static str);

impl Drop for FindsOnDrop {
    fn drop(&mut self) {
        let _ = self.0.find(self.1);
    }
}

/// An adaptive entry replaced, replaced again, then removed: each time the bulkhead the
/// registry held may be the last reference, and its limit listener's
/// captured value calls back into the registry when it drops. Dropped under the registry's
/// write lock, that re-entry deadlocks.
#[test]
fn registry_drops_replaced_entries_after_its_lock() {
    hang_guard("registry_drops_after_lock", || {
        static REG: OnceLock<BulkheadRegistry> = OnceLock::new();
        let registry = REG.get_or_init(BulkheadRegistry::default);
        // An adaptive bulkhead named "bank" whose limit listener calls back into the
        // registry when it drops.
        let listening = || {
            let bank = Arc::new(Bulkhead::new("bank", BulkheadConfig::default()));
            bank.set_adaptive_limit(AdaptiveLimit::new(bulkhead::adaptive::Aimd::default()))
                .unwrap();
            let hook = FindsOnDrop(registry, "bank");
            let handle = bank.adaptive_limit().unwrap().on_limit_change(move |_| {
                let _ = &hook;
            });
            drop(handle); // removal via the handle is not asked: the listener stays
            bank
        };
        let _ = registry.bulkhead("bank");
        assert!(registry.replace("bank", listening()).is_some());
        // The registry holds the last reference to the first; replacing drops it.
        assert!(registry.replace("bank", listening()).is_some());
        let plain = Arc::new(Bulkhead::new("bank", BulkheadConfig::default()));
        assert!(registry.replace("bank", plain).is_some());
        assert!(registry.replace("bank", listening()).is_some());
        assert!(registry.remove("bank").is_some());
        assert!(registry.find("bank").is_none());
    });
}

/// A keyed bulkhead ("api", one shard) whose keys have 1 slot and wait up to 10 s, with a
/// total of `total` (also waiting up to 10 s).
fn keyed_waiting(total: usize) -> Arc<KeyedBulkhead<u32>> {
    let wait = |n| {
        BulkheadConfig::builder()
            .max_concurrent_calls(n)
            .max_wait_duration(Duration::from_secs(10))
            .build()
            .unwrap()
    };
    Arc::new(
        KeyedBulkhead::<u32>::builder("api")
            .default_config(wait(1))
            .total(wait(total))
            .shards(1)
            .build()
            .unwrap(),
    )
}

/// A waker hook that re-enters the keyed bulkhead (a refused `try_acquire` of key 1, a
/// permit of key 9 taken and dropped, metrics) and key 1's and the total's bulkheads
/// ([`reenter`]: their queue, config and drain locks) on every waker operation.
fn keyed_reentrant_hook(
    keyed: &Arc<KeyedBulkhead<u32>>,
    ops: &Arc<AtomicUsize>,
) -> impl Fn(Op) + Send + Sync + 'static {
    let weak = Arc::downgrade(keyed);
    let ops = Arc::clone(ops);
    move |_op| {
        ops.fetch_add(1, SeqCst);
        let Some(keyed) = weak.upgrade() else { return };
        drop(keyed.try_acquire(&1));
        drop(keyed.try_acquire(&9));
        let _ = keyed.key_metrics(&1);
        let _ = keyed.metrics(4);
        if let Some(key) = keyed.key_bulkhead(&1) {
            reenter(&key, false);
        }
        reenter(keyed.total().unwrap(), false);
    }
}

/// The keyed owned async acquire (`AcquireOwnedKeyed`), queued at the key and then at the
/// total with a waker that re-enters the keyed bulkhead on clone, wake and drop: granted at
/// both levels, then a queued one dropped (withdrawn). No hook runs under a lock.
#[test]
fn keyed_owned_async_with_reentrant_waker() {
    hang_guard("keyed_owned_async_with_reentrant_waker", || {
        let keyed = keyed_waiting(1);
        let ops = Arc::new(AtomicUsize::new(0));
        let waker = hostile_waker(keyed_reentrant_hook(&keyed, &ops), None);
        let held = keyed.try_acquire_owned(&1).unwrap();
        let mut acquire = Box::pin(keyed.acquire_owned_async(&1));
        assert!(acquire.as_mut().poll(&mut Context::from_waker(&waker)).is_pending(), "key");
        drop(held); // grants key 1 and the total to the queued future: its waker is woken
        let permit = match acquire.as_mut().poll(&mut Context::from_waker(&waker)) {
            Poll::Ready(Ok(permit)) => permit,
            other => panic!("expected a permit, got {other:?}"),
        };
        drop(acquire);
        // Queued at the total: key 2 is free, the total is held by key 1's permit.
        let mut acquire = Box::pin(keyed.acquire_owned_async(&2));
        assert!(acquire.as_mut().poll(&mut Context::from_waker(&waker)).is_pending(), "total");
        assert_eq!(keyed.key_metrics(&2).unwrap().in_flight_calls(), 1, "key 2's slot held");
        drop(permit);
        assert!(matches!(
            acquire.as_mut().poll(&mut Context::from_waker(&waker)),
            Poll::Ready(Ok(_))
        ));
        drop(acquire);
        // Dropped while queued at the total: the key's slot is released, the wait withdrawn.
        let held = keyed.try_acquire_owned(&3).unwrap();
        let mut acquire = Box::pin(keyed.acquire_owned_async(&2));
        assert!(acquire.as_mut().poll(&mut Context::from_waker(&waker)).is_pending());
        drop(acquire);
        assert_eq!(keyed.key_metrics(&2).unwrap().in_flight_calls(), 0);
        assert_eq!(keyed.total_metrics().unwrap().waiting_calls(), 0);
        drop(held);
        drop(waker);
        assert!(ops.load(SeqCst) >= 4, "the hook ran on clone, wake and drop");
        assert_eq!(keyed.total_metrics().unwrap().in_flight_calls(), 0);
    });
}

/// A sleep that is pending until `fired` is set, and wakes nobody itself.
struct Sleep(Arc<AtomicBool>);

impl Future for Sleep {
    type Output = ();

    fn poll(self: std::pin::Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        if self.0.load(SeqCst) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

/// The keyed `acquire_async_with_sleep`, queued at the key then at the total with a waker
/// that re-enters the keyed bulkhead: granted by a release, and timed out by its sleep (the
/// key's slot released when the total's sleep fires). No hook runs under a lock.
#[test]
fn keyed_with_sleep_with_reentrant_waker() {
    hang_guard("keyed_with_sleep_with_reentrant_waker", || {
        let keyed = keyed_waiting(1);
        let ops = Arc::new(AtomicUsize::new(0));
        let waker = hostile_waker(keyed_reentrant_hook(&keyed, &ops), None);
        let fired = Arc::new(AtomicBool::new(false));
        let sleeps = Arc::new(AtomicUsize::new(0));
        let make_sleep = {
            let (fired, sleeps) = (Arc::clone(&fired), Arc::clone(&sleeps));
            move |_wait: Duration| {
                sleeps.fetch_add(1, SeqCst);
                Sleep(Arc::clone(&fired))
            }
        };
        let held = keyed.try_acquire(&1).unwrap();
        {
            let mut acquire = pin!(keyed.acquire_async_with_sleep(&1, make_sleep.clone()));
            assert!(acquire.as_mut().poll(&mut Context::from_waker(&waker)).is_pending());
            drop(held); // grants key 1, then the total is free
            assert!(matches!(
                acquire.as_mut().poll(&mut Context::from_waker(&waker)),
                Poll::Ready(Ok(_))
            ));
        }
        assert_eq!(sleeps.load(SeqCst), 1, "one sleep: only the key's level waited");
        // The total is busy: key 2 waits there until its sleep fires.
        let total_holder = keyed.try_acquire(&3).unwrap();
        {
            let mut acquire = pin!(keyed.acquire_async_with_sleep(&2, make_sleep));
            assert!(acquire.as_mut().poll(&mut Context::from_waker(&waker)).is_pending());
            assert_eq!(keyed.key_metrics(&2).unwrap().in_flight_calls(), 1);
            fired.store(true, SeqCst);
            match acquire.as_mut().poll(&mut Context::from_waker(&waker)) {
                Poll::Ready(Err(full)) => {
                    assert_eq!(full.reason(), RejectReason::WaitTimedOut);
                    assert_eq!(full.bulkhead_name(), "api", "the total timed out");
                }
                other => panic!("expected the total's timeout, got {other:?}"),
            }
        }
        assert_eq!(keyed.key_metrics(&2).unwrap().in_flight_calls(), 0, "key slot released");
        drop(total_holder);
        drop(waker);
        assert!(ops.load(SeqCst) >= 2);
        assert_eq!(keyed.total_metrics().unwrap().in_flight_calls(), 0);
    });
}

/// A keyed-level listener re-enters the keyed bulkhead from every event, of a key created
/// before it was registered and of one created after, and from a `TooManyKeys` refusal
/// (emitted by the keyed level after its locks).
#[test]
fn keyed_level_listener_reenters() {
    hang_guard("keyed_level_listener_reenters", || {
        let keyed = Arc::new(
            KeyedBulkhead::<u32>::builder("api")
                .default_config(config(1))
                .shards(1)
                .max_keys(2)
                .build()
                .unwrap(),
        );
        drop(keyed.try_acquire(&1).unwrap());
        let heard = Arc::new(AtomicUsize::new(0));
        let handle = {
            let (weak, heard) = (Arc::downgrade(&keyed), Arc::clone(&heard));
            keyed.on_event(move |_| {
                if heard.fetch_add(1, SeqCst) > 1_000 {
                    return; // the re-entries' own events
                }
                if let Some(keyed) = weak.upgrade() {
                    let _ = keyed.metrics(4);
                    let _ = keyed.key_metrics(&1);
                    keyed.enable_counters();
                    keyed.change_default_config(config(1));
                }
            })
        };
        let one = keyed.try_acquire(&1).unwrap(); // live before the listener
        let two = keyed.try_acquire(&2).unwrap(); // created after it
        let refused = keyed.try_acquire(&3).unwrap_err();
        assert_eq!(refused.reason(), RejectReason::TooManyKeys);
        drop((one, two));
        assert!(heard.load(SeqCst) >= 5, "permitted x2, too many keys, finished x2");
        assert!(handle.remove());
        let before = heard.load(SeqCst);
        drop(keyed.try_acquire(&1).unwrap());
        assert_eq!(heard.load(SeqCst), before, "removed from every key at once");
    });
}

/// Issue 29 (6c): the algorithm is user code and runs holding no lock of ours. This one
/// calls back into the controller that runs it on every sample (reads its limit, bounds and
/// metrics, Debug-prints it); on the first sample (itself fed by hand) it feeds it a failure
/// by hand, from inside the fold (folded by the same fold's recheck before `record` returns,
/// not lost); on the third it calls the bulkhead (a call whose permit records a sample of its own, folded
/// likewise). Under a lock, the first read would wait for ever.
#[test]
fn adaptive_algorithm_reenters_the_controller() {
    struct Reentrant {
        bank: Arc<std::sync::OnceLock<Weak<Bulkhead>>>,
        fed: Arc<AtomicUsize>,
    }
    impl LimitAlgorithm for Reentrant {
        fn update(&mut self, sample: &Sample, limits: Limits) -> usize {
            let n = self.fed.fetch_add(1, SeqCst);
            if let Some(bank) = self.bank.get().and_then(Weak::upgrade) {
                let control = bank.adaptive_limit().unwrap();
                if n == 0 {
                    assert_eq!(control.limit(), limits.current, "the limit the fold started from");
                }
                assert_eq!((control.min_limit(), control.max_limit()), (limits.min, limits.max));
                let _ = control.metrics();
                let _ = format!("{control:?}");
                if n == 0 {
                    // A hand-fed failure, from inside the fold.
                    control.record(Sample::new(Duration::from_millis(1), 1, Outcome::Failure));
                }
                if n == 2 {
                    // A call: its permit's sample waits in this thread's ring.
                    if let Ok(permit) = bank.try_acquire() {
                        permit.ignore();
                    }
                }
            }
            match sample.outcome {
                Outcome::Failure => limits.current.saturating_sub(1),
                _ => limits.current,
            }
        }
    }
    hang_guard("adaptive_algorithm_reenters_the_controller", || {
        let config = BulkheadConfig::builder()
            .max_concurrent_calls(8)
            .max_wait_duration(Duration::ZERO)
            .build()
            .unwrap();
        let bank = Arc::new(Bulkhead::new("bank", config));
        let cell = Arc::new(std::sync::OnceLock::new());
        let fed = Arc::new(AtomicUsize::new(0));
        let algorithm = Reentrant { bank: Arc::clone(&cell), fed: Arc::clone(&fed) };
        let limit = AdaptiveLimit::new(algorithm).initial_limit(6).fold_window(Duration::ZERO);
        bank.set_adaptive_limit(limit).unwrap();
        cell.set(Arc::downgrade(&bank)).unwrap();

        // A sample fed by hand: the fold feeds it from the pending list, and the algorithm
        // feeds another from inside (pending again: the fold's recheck must find it).
        bank.adaptive_limit().unwrap().record(Sample::new(
            Duration::from_millis(1),
            1,
            Outcome::Failure,
        ));
        // Read from the engine, which folds nothing: the first failure (6 -> 5) and the one
        // the algorithm fed (5 -> 4) were both folded before `record` returned.
        assert_eq!(bank.metrics().max_allowed_concurrent_calls(), 4, "the hand-fed sample waits");
        assert_eq!(fed.load(SeqCst), 2);
        bank.try_acquire().unwrap().succeed();
        // The call's success, then the inner call's ignored sample.
        assert_eq!(fed.load(SeqCst), 4, "the inner call's sample waits");
        let control = bank.adaptive_limit().unwrap();
        assert_eq!(control.limit(), 4);
        let metrics = control.metrics();
        assert_eq!((metrics.samples(), metrics.samples_dropped()), (4, 0));
        assert_eq!(bank.metrics().available_concurrent_calls(), 4);
        bank.check_work_conservation().unwrap();
    });
}

/// A panicking algorithm is caught (its samples count as dropped) and leaves the controller
/// usable: the algorithm is put back, and later folds run.
#[test]
fn adaptive_panicking_algorithm_is_put_back() {
    struct PanicsOnFailure;
    impl LimitAlgorithm for PanicsOnFailure {
        fn update(&mut self, sample: &Sample, limits: Limits) -> usize {
            assert_ne!(sample.outcome, Outcome::Failure, "the algorithm's own panic");
            limits.current + 1
        }
    }
    hang_guard("adaptive_panicking_algorithm_is_put_back", || {
        let bank = Bulkhead::new("bank", config(8));
        let limit =
            AdaptiveLimit::new(PanicsOnFailure).initial_limit(2).fold_window(Duration::ZERO);
        bank.set_adaptive_limit(limit).unwrap();
        bank.try_acquire().unwrap().fail();
        bank.try_acquire().unwrap().succeed();
        let metrics = bank.adaptive_limit().unwrap().metrics();
        assert_eq!((metrics.samples(), metrics.samples_dropped(), metrics.limit()), (1, 1, 3));
        assert_eq!(bank.metrics().available_concurrent_calls(), 3);
        bank.check_work_conservation().unwrap();
    });
}
