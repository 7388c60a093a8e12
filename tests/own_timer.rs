//! A timer the runtime owns (`bulkhead::timer::Timer`): bulkheads bound to it arm their
//! deadlines there, tell the runtime through its callback, and end when the runtime fires the
//! handle; the process-wide `bulkhead-timer` thread is never started. A test binary of its
//! own: no test here makes an unbound bulkhead wait with a bound, so the thread count means
//! something.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::task::{Poll, Wake, Waker};
use std::thread;
use std::time::{Duration, Instant};

use bulkhead::adaptive::{AdaptiveLimit, Vegas};
use bulkhead::keyed::KeyedBulkhead;
use bulkhead::timer::Timer;
use bulkhead::{Bulkhead, BulkheadConfig, BulkheadRegistry, RejectReason, Request};
use common::{
    assert_quiescent, join_guarded, limit_wait, poll_once, with_hang_guard, CountingWaker,
};

#[path = "../examples/support/measure.rs"]
mod measure;
use measure::timer_threads;

/// The instants a timer's callback was given, in order.
#[derive(Default)]
struct Calls(Mutex<Vec<Instant>>);

impl Calls {
    fn timer(self: &Arc<Self>) -> Timer {
        let calls = Arc::clone(self);
        Timer::new(move |at| calls.0.lock().unwrap().push(at))
    }

    fn all(&self) -> Vec<Instant> {
        self.0.lock().unwrap().clone()
    }
}

/// Sleeps until `at`, then fires `timer`; returns what it returned.
fn fire_at(timer: &Timer, at: Instant) -> Option<Instant> {
    thread::sleep(at.saturating_duration_since(Instant::now()));
    timer.fire_expired()
}

fn expect_timed_out<T: std::fmt::Debug>(poll: Poll<Result<T, bulkhead::BulkheadFull>>) {
    match poll {
        Poll::Ready(Err(err)) => assert_eq!(err.reason(), RejectReason::WaitTimedOut),
        other => panic!("expected WaitTimedOut, got {other:?}"),
    }
}

/// A bulkhead of one permit, max wait `wait`, bound to a fresh timer whose callback
/// records the instants it is given.
fn bound_to_a_recording_timer(name: &str, wait: Duration) -> (Arc<Calls>, Timer, Bulkhead) {
    let calls = Arc::new(Calls::default());
    let timer = calls.timer();
    let bulkhead = Bulkhead::with_timer(name, limit_wait(1, wait), &timer);
    (calls, timer, bulkhead)
}

#[test]
fn a_bound_wait_ends_when_the_runtime_fires_at_the_instant_it_was_given() {
    let wait = Duration::from_millis(5);
    let (calls, timer, bulkhead) = bound_to_a_recording_timer("bound", wait);
    let held = bulkhead.try_acquire().unwrap();
    let (counter, waker) = CountingWaker::new();
    let mut acquire = Box::pin(bulkhead.acquire_async());
    let queued_at = Instant::now();
    assert!(poll_once(&mut acquire, &waker).is_pending());
    let given = calls.all();
    assert_eq!(given.len(), 1, "the callback was told the first deadline: {given:?}");
    assert!(given[0] >= queued_at && given[0] <= queued_at + wait + Duration::from_secs(1));
    assert_eq!(timer.next_deadline(), Some(given[0]));
    // Not on the process-wide heap, and no thread.
    assert_eq!(bulkhead::timer::fire_expired(), None);
    // Before the instant, firing expires nothing and says when to come back.
    assert_eq!(timer.fire_expired(), Some(given[0]));
    assert_eq!(counter.wakes(), 0);
    // At the instant: withdrawn, woken, nothing left armed.
    assert_eq!(fire_at(&timer, given[0]), None);
    assert_eq!(counter.wakes(), 1);
    assert_eq!(bulkhead.metrics().waiting_calls(), 0);
    expect_timed_out(poll_once(&mut acquire, &waker));
    assert_eq!(calls.all().len(), 1, "one deadline, one call");
    assert_eq!(timer_threads(), 0, "no bulkhead-timer thread");
    drop(held);
    assert_quiescent(&bulkhead, 1);
}

/// Every member of the family arms its bounded waits on the timer it is bound to.
#[test]
fn binding_reaches_owned_weighted_keyed_adaptive_and_registry_waits() {
    let calls = Arc::new(Calls::default());
    let timer = calls.timer();
    let wait = Duration::from_millis(3);
    let (_counter, waker) = CountingWaker::new();

    // Owned and weighted waits of a plain bulkhead.
    let plain = Arc::new(Bulkhead::with_timer("plain", limit_wait(2, wait), &timer));
    let held = plain.try_acquire_many(2).unwrap();
    let mut owned = Box::pin(plain.acquire_owned_async());
    assert!(poll_once(&mut owned, &waker).is_pending());
    let mut weighted = Box::pin(plain.acquire_many_async(Request::permits(2)));
    assert!(poll_once(&mut weighted, &waker).is_pending());

    // The adaptive limit keeps its bulkhead's timer.
    let adaptive = Bulkhead::with_timer("adaptive", limit_wait(1, wait), &timer);
    adaptive.set_adaptive_limit(AdaptiveLimit::new(Vegas::default())).unwrap();
    let limit = adaptive.metrics().max_allowed_concurrent_calls();
    let adaptive_held = adaptive.try_acquire_many(limit as u32).unwrap();
    let mut adaptive_wait = Box::pin(adaptive.acquire_async());
    assert!(poll_once(&mut adaptive_wait, &waker).is_pending());

    // Keyed: a key's own wait, and a wait for the total.
    let keyed = KeyedBulkhead::<u32>::builder("keyed")
        .default_config(limit_wait(1, wait))
        .total(limit_wait(1, wait))
        .timer(&timer)
        .build()
        .unwrap();
    let key_held = keyed.try_acquire(&1).unwrap(); // key 1 and the total are full
    let mut per_key = Box::pin(keyed.acquire_async(&1));
    assert!(poll_once(&mut per_key, &waker).is_pending());
    let mut total = Box::pin(keyed.acquire_async(&2));
    assert!(poll_once(&mut total, &waker).is_pending());

    // What a registry creates, plain and keyed.
    let registry = BulkheadRegistry::builder()
        .default_config(limit_wait(1, wait))
        .timer(&timer)
        .build()
        .unwrap();
    let named = registry.bulkhead("named");
    let named_held = named.try_acquire().unwrap();
    let mut named_wait = Box::pin(named.acquire_async());
    assert!(poll_once(&mut named_wait, &waker).is_pending());
    let reg_keyed = registry.keyed::<u32>("reg-keyed").unwrap();
    let reg_key_held = reg_keyed.try_acquire(&1).unwrap();
    let mut reg_keyed_wait = Box::pin(reg_keyed.acquire_async(&1));
    assert!(poll_once(&mut reg_keyed_wait, &waker).is_pending());

    assert_eq!(bulkhead::timer::fire_expired(), None, "nothing on the process-wide heap");
    assert!(!calls.all().is_empty());
    let mut next = timer.next_deadline();
    let started = Instant::now();
    while let Some(at) = next {
        assert!(started.elapsed() < common::HANG_GUARD, "hang guard");
        next = fire_at(&timer, at);
    }
    expect_timed_out(poll_once(&mut owned, &waker));
    expect_timed_out(poll_once(&mut weighted, &waker));
    expect_timed_out(poll_once(&mut adaptive_wait, &waker));
    expect_timed_out(poll_once(&mut per_key, &waker));
    expect_timed_out(poll_once(&mut total, &waker));
    expect_timed_out(poll_once(&mut named_wait, &waker));
    expect_timed_out(poll_once(&mut reg_keyed_wait, &waker));
    assert_eq!(timer_threads(), 0, "no bulkhead-timer thread");
    drop((held, adaptive_held, key_held, named_held, reg_key_held));
    assert_quiescent(&plain, 2);
    assert_eq!(named.check_work_conservation(), Ok(()));
    assert_eq!(adaptive.check_work_conservation(), Ok(()));
}

#[test]
fn two_timers_in_one_process_do_not_interfere() {
    let (calls_a, calls_b) = (Arc::new(Calls::default()), Arc::new(Calls::default()));
    let (timer_a, timer_b) = (calls_a.timer(), calls_b.timer());
    let a = Bulkhead::with_timer("a", limit_wait(1, Duration::from_millis(2)), &timer_a);
    let b = Bulkhead::with_timer("b", limit_wait(1, Duration::from_secs(60)), &timer_b);
    let (held_a, held_b) = (a.try_acquire().unwrap(), b.try_acquire().unwrap());
    let (counter_a, waker_a) = CountingWaker::new();
    let (counter_b, waker_b) = CountingWaker::new();
    let mut wait_a = Box::pin(a.acquire_async());
    let mut wait_b = Box::pin(b.acquire_async());
    assert!(poll_once(&mut wait_a, &waker_a).is_pending());
    assert!(poll_once(&mut wait_b, &waker_b).is_pending());
    assert_eq!(calls_a.all().len(), 1);
    assert_eq!(calls_b.all().len(), 1);
    let at_a = calls_a.all()[0];
    // Past A's deadline, firing B ends nothing of A's (and B's deadline is far away).
    thread::sleep(at_a.saturating_duration_since(Instant::now()));
    assert_eq!(timer_b.fire_expired(), Some(calls_b.all()[0]));
    assert_eq!((counter_a.wakes(), counter_b.wakes()), (0, 0));
    assert_eq!(a.metrics().waiting_calls(), 1);
    // Firing A ends A's, not B's.
    assert_eq!(timer_a.fire_expired(), None);
    assert_eq!((counter_a.wakes(), counter_b.wakes()), (1, 0));
    expect_timed_out(poll_once(&mut wait_a, &waker_a));
    assert!(poll_once(&mut wait_b, &waker_b).is_pending());
    drop(held_b);
    assert!(matches!(poll_once(&mut wait_b, &waker_b), Poll::Ready(Ok(_))));
    drop(held_a);
    assert_quiescent(&a, 1);
    assert_quiescent(&b, 1);
    assert_eq!(timer_threads(), 0);
}

#[test]
fn a_panicking_callback_is_contained_and_the_deadline_stays_armed() {
    let panics = Arc::new(AtomicUsize::new(0));
    let timer = Timer::new({
        let panics = Arc::clone(&panics);
        move |_| {
            panics.fetch_add(1, Ordering::SeqCst);
            panic!("the runtime's callback panics");
        }
    });
    let bulkhead = Bulkhead::with_timer("panicky", limit_wait(1, Duration::from_millis(2)), &timer);
    let held = bulkhead.try_acquire().unwrap();
    let (counter, waker) = CountingWaker::new();
    let mut acquire = Box::pin(bulkhead.acquire_async());
    assert!(poll_once(&mut acquire, &waker).is_pending(), "the poll survived the panic");
    assert_eq!(panics.load(Ordering::SeqCst), 1);
    let at = timer.next_deadline().expect("still armed");
    assert_eq!(fire_at(&timer, at), None);
    assert_eq!(counter.wakes(), 1);
    expect_timed_out(poll_once(&mut acquire, &waker));
    // The bulkhead still serves: a release hands the slot to the next waiter.
    let mut next = Box::pin(bulkhead.acquire_async());
    assert!(poll_once(&mut next, &waker).is_pending());
    drop(held);
    assert!(matches!(poll_once(&mut next, &waker), Poll::Ready(Ok(_))));
    drop(next);
    assert_quiescent(&bulkhead, 1);
}

#[test]
fn a_callback_that_reenters_the_timer_and_the_bulkhead_does_not_deadlock() {
    with_hang_guard(|| {
        // The callback fires the timer and tries the bulkhead, on the arming thread.
        let cell: Arc<OnceLock<(Timer, Arc<Bulkhead>)>> = Arc::new(OnceLock::new());
        let reentered = Arc::new(AtomicUsize::new(0));
        let timer = Timer::new({
            let cell = Arc::clone(&cell);
            let reentered = Arc::clone(&reentered);
            move |_| {
                if let Some((timer, bulkhead)) = cell.get() {
                    let _ = timer.fire_expired();
                    let _ = timer.next_deadline();
                    assert!(bulkhead.try_acquire().is_err(), "full while its waiter arms");
                    let _ = bulkhead.metrics();
                    reentered.fetch_add(1, Ordering::SeqCst);
                }
            }
        });
        let bulkhead = Arc::new(Bulkhead::with_timer(
            "reentrant",
            limit_wait(1, Duration::from_millis(2)),
            &timer,
        ));
        let _ = cell.set((timer.clone(), Arc::clone(&bulkhead)));
        let held = bulkhead.try_acquire().unwrap();
        let (_counter, waker) = CountingWaker::new();
        let mut acquire = Box::pin(bulkhead.acquire_async());
        assert!(poll_once(&mut acquire, &waker).is_pending());
        assert_eq!(reentered.load(Ordering::SeqCst), 1);
        let at = timer.next_deadline().expect("armed");
        assert_eq!(fire_at(&timer, at), None);
        expect_timed_out(poll_once(&mut acquire, &waker));
        drop(held);
        assert_quiescent(&bulkhead, 1);
        // The cycle callback -> cell -> timer is the test's own; break it.
        drop(acquire);
    });
}

/// A waker woken by `Timer::fire_expired` that re-enters the bulkhead and the timer.
struct ReenteringWaker {
    bulkhead: Arc<Bulkhead>,
    timer: Timer,
    woken: AtomicBool,
}

impl Wake for ReenteringWaker {
    fn wake(self: Arc<Self>) {
        let _ = self.timer.fire_expired();
        drop(self.bulkhead.try_acquire());
        self.woken.store(true, Ordering::SeqCst);
    }
}

struct PanickingWaker;

impl Wake for PanickingWaker {
    fn wake(self: Arc<Self>) {
        panic!("a waker that panics when the runtime's timer fires");
    }
}

#[test]
fn wakers_fired_by_the_handle_may_reenter_or_panic() {
    with_hang_guard(|| {
        let timer = Timer::new(|_| {});
        let bulkhead = Arc::new(Bulkhead::with_timer(
            "wakers",
            limit_wait(1, Duration::from_millis(2)),
            &timer,
        ));
        let held = bulkhead.try_acquire().unwrap();
        let reentering = Arc::new(ReenteringWaker {
            bulkhead: Arc::clone(&bulkhead),
            timer: timer.clone(),
            woken: AtomicBool::new(false),
        });
        let (counter, counting) = CountingWaker::new();
        let mut panicking_wait = Box::pin(bulkhead.acquire_async());
        let mut reentering_wait = Box::pin(bulkhead.acquire_async());
        let mut counted_wait = Box::pin(bulkhead.acquire_async());
        assert!(poll_once(&mut panicking_wait, &Waker::from(Arc::new(PanickingWaker))).is_pending());
        assert!(poll_once(&mut reentering_wait, &Waker::from(Arc::clone(&reentering))).is_pending());
        assert!(poll_once(&mut counted_wait, &counting).is_pending());
        let at = timer.next_deadline().expect("armed");
        assert_eq!(fire_at(&timer, at), None, "every wait expired, the panic contained");
        assert!(reentering.woken.load(Ordering::SeqCst));
        assert_eq!(counter.wakes(), 1, "the waiter after the panicking one was woken too");
        for wait in [&mut panicking_wait, &mut reentering_wait, &mut counted_wait] {
            expect_timed_out(poll_once(wait, &counting));
        }
        drop(held);
        assert_quiescent(&bulkhead, 1);
    });
}

/// A runtime's timer in miniature: a thread that sleeps until the earliest instant it was
/// given (by the callback or by `fire_expired`'s answer) and fires the handle then. It never
/// wakes on a tick: `fires` counts how often it fired.
struct Driver {
    next: Mutex<(Option<Instant>, bool)>,
    changed: Condvar,
    fires: AtomicUsize,
}

impl Driver {
    fn offer(&self, at: Instant) {
        let mut next = self.next.lock().unwrap();
        if next.0.map_or(true, |old| at < old) {
            next.0 = Some(at);
            self.changed.notify_one();
        }
    }

    fn run(&self, timer: &Timer) {
        let mut next = self.next.lock().unwrap();
        loop {
            if next.1 {
                return;
            }
            match next.0 {
                None => next = self.changed.wait(next).unwrap(),
                Some(at) if at > Instant::now() => {
                    let left = at.saturating_duration_since(Instant::now());
                    next = self.changed.wait_timeout(next, left).unwrap().0;
                }
                Some(_) => {
                    next.0 = None;
                    drop(next);
                    self.fires.fetch_add(1, Ordering::SeqCst);
                    if let Some(then) = timer.fire_expired() {
                        self.offer(then);
                    }
                    next = self.next.lock().unwrap();
                }
            }
        }
    }
}

#[test]
fn contended_bounded_waits_all_end_through_a_driven_handle() {
    with_hang_guard(|| {
        let driver = Arc::new(Driver {
            next: Mutex::new((None, false)),
            changed: Condvar::new(),
            fires: AtomicUsize::new(0),
        });
        let timer = Timer::new({
            let driver = Arc::clone(&driver);
            move |at| driver.offer(at)
        });
        let runtime = thread::spawn({
            let (driver, timer) = (Arc::clone(&driver), timer.clone());
            move || driver.run(&timer)
        });
        let config = BulkheadConfig::builder()
            .max_concurrent_calls(2)
            .max_wait_duration(Duration::from_millis(1))
            .build()
            .unwrap();
        let bulkhead = Arc::new(Bulkhead::with_timer("contended", config, &timer));
        let (granted, timed_out) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let bulkhead = Arc::clone(&bulkhead);
                let (granted, timed_out) = (Arc::clone(&granted), Arc::clone(&timed_out));
                thread::spawn(move || {
                    for _ in 0..50 {
                        match futures::executor::block_on(bulkhead.acquire_async()) {
                            Ok(permit) => {
                                granted.fetch_add(1, Ordering::SeqCst);
                                thread::sleep(Duration::from_micros(700));
                                drop(permit);
                            }
                            Err(err) => {
                                assert_eq!(err.reason(), RejectReason::WaitTimedOut);
                                timed_out.fetch_add(1, Ordering::SeqCst);
                            }
                        }
                    }
                })
            })
            .collect();
        for worker in workers {
            join_guarded(worker);
        }
        assert_eq!(granted.load(Ordering::SeqCst) + timed_out.load(Ordering::SeqCst), 200);
        if timed_out.load(Ordering::SeqCst) > 0 {
            assert!(driver.fires.load(Ordering::SeqCst) > 0, "timed-out waits were fired");
        }
        assert_eq!(timer_threads(), 0, "the runtime's thread only: no bulkhead-timer");
        assert_eq!(bulkhead::timer::fire_expired(), None);
        driver.next.lock().unwrap().1 = true;
        driver.changed.notify_one();
        join_guarded(runtime);
        assert_quiescent(&bulkhead, 2);
    });
}

#[cfg(feature = "serde")]
#[test]
fn a_registry_from_a_config_file_binds_its_instances_and_later_names() {
    let calls = Arc::new(Calls::default());
    let timer = calls.timer();
    let file = bulkhead::file::ConfigFile::from_yaml_str(
        "
resilience4j.bulkhead:
  configs.default: { max-concurrent-calls: 1, max-wait-duration: 3ms }
  instances.bank: {}
",
    )
    .unwrap();
    let registry = BulkheadRegistry::from_config_file_with_timer(&file, &timer);
    let (_counter, waker) = CountingWaker::new();
    // The file's instance, and a name created later from the default configuration.
    let bank = registry.find("bank").expect("defined in the file");
    let later = registry.bulkhead("later");
    let held = (bank.try_acquire().unwrap(), later.try_acquire().unwrap());
    let mut bank_wait = Box::pin(bank.acquire_async());
    let mut later_wait = Box::pin(later.acquire_async());
    assert!(poll_once(&mut bank_wait, &waker).is_pending());
    assert!(poll_once(&mut later_wait, &waker).is_pending());
    assert_eq!(bulkhead::timer::fire_expired(), None, "nothing on the process-wide heap");
    assert!(!calls.all().is_empty(), "the runtime was told of the deadline");
    let mut next = timer.next_deadline();
    let started = Instant::now();
    while let Some(at) = next {
        assert!(started.elapsed() < common::HANG_GUARD, "hang guard");
        next = fire_at(&timer, at);
    }
    expect_timed_out(poll_once(&mut bank_wait, &waker));
    expect_timed_out(poll_once(&mut later_wait, &waker));
    assert_eq!(timer_threads(), 0, "no bulkhead-timer thread");
    drop(held);
    assert_eq!(bank.check_work_conservation(), Ok(()));
    assert_eq!(later.check_work_conservation(), Ok(()));
}

/// A re-poll after the deadline gives up by itself, whether or not the runtime has fired the
/// timer yet (a runtime may fire late, or a poll may come first). cargo-mutants (future
/// 5/17): the re-poll's own deadline check could be skipped for the engine's timer (its
/// guard made `true`, or `engine_timer && just_queued` made `||`) and nothing saw it, since
/// every test let the timer end the wait.
#[test]
fn a_repoll_after_the_deadline_gives_up_before_the_runtime_fires() {
    let wait = Duration::from_millis(5);
    let (calls, timer, bulkhead) = bound_to_a_recording_timer("late runtime", wait);
    let held = bulkhead.try_acquire().expect("free");
    let (wakes, waker) = CountingWaker::new();
    let mut acquire = Box::pin(bulkhead.acquire_async());
    assert!(poll_once(&mut acquire, &waker).is_pending(), "queued");
    let deadline = calls.all()[0];
    thread::sleep(deadline.saturating_duration_since(Instant::now()) + wait);
    // The runtime has not fired: nothing woke the task, and the wait is still queued.
    assert_eq!(wakes.wakes(), 0);
    assert_eq!(bulkhead.metrics().waiting_calls(), 1);
    expect_timed_out(poll_once(&mut acquire, &waker));
    assert_eq!(bulkhead.metrics().waiting_calls(), 0, "it left the queue");
    // The runtime fires late: nothing is left to end.
    assert_eq!(timer.fire_expired(), None);
    drop(held);
    assert_quiescent(&bulkhead, 1);
}

/// A timer's `Debug` says what is armed and when the next deadline is, before, while and
/// after a bound wait (cargo-mutants, engine 30/32: `Debug` for `Timer` and for the state it
/// shares made empty went unseen).
#[test]
fn a_timer_shows_what_is_armed_in_debug() {
    let (_calls, timer, bulkhead) = bound_to_a_recording_timer("shown", Duration::from_millis(5));
    assert_eq!(format!("{timer:?}"), "Timer { armed: 0, next: None }");
    let held = bulkhead.try_acquire().unwrap();
    let (_counter, waker) = CountingWaker::new();
    let mut acquire = Box::pin(bulkhead.acquire_async());
    assert!(poll_once(&mut acquire, &waker).is_pending());
    let next = timer.next_deadline().expect("the wait's deadline");
    assert_eq!(format!("{timer:?}"), format!("Timer {{ armed: 1, next: Some({next:?}) }}"));
    assert_eq!(fire_at(&timer, next), None);
    assert_eq!(format!("{timer:?}"), "Timer { armed: 0, next: None }");
    expect_timed_out(poll_once(&mut acquire, &waker));
    drop(held);
    assert_quiescent(&bulkhead, 1);
}
