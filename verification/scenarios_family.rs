//! Scenario bodies for the kinds of bug issue 17 found no check for, in the keyed and
//! adaptive bulkheads (the engine's are in `scenarios.rs`). Included by `loom.rs` and
//! `shuttle.rs` next to `scenarios.rs`, and programmed against the same `rt` adapter; they
//! reuse its helpers ([`Occupancy`], [`assert_quiescent`], the keyed scenarios' map).
//!
//! As in `scenarios.rs`, nothing panics while a permit is held: a violation is recorded and
//! raised once every thread is joined.

use core::sync::atomic::Ordering::SeqCst;
use core::time::Duration;
use std::sync::Arc;

use bulkhead::{Bulkhead, BulkheadEventKind, RejectReason};

use super::rt::{self, AtomicUsize};
use super::scenarios::{assert_quiescent, keyed_caller, KeyHasher, Keyed, Occupancy};
use super::scenarios_reentrant::block_on_hostile;

fn config(limit: usize, wait: Duration) -> bulkhead::BulkheadConfig {
    bulkhead::BulkheadConfig::builder()
        .max_concurrent_calls(limit)
        .max_wait_duration(wait)
        .build()
        .expect("valid config")
}

fn keyed(key_limit: usize, total: Option<usize>, max_keys: usize) -> Arc<Keyed> {
    let mut builder = bulkhead::keyed::KeyedBulkhead::builder("keyed")
        .default_config(config(key_limit, Duration::ZERO))
        .max_keys(max_keys)
        .shards(2)
        .hasher(core::hash::BuildHasherDefault::<KeyHasher>::default());
    if let Some(total) = total {
        builder = builder.total(config(total, Duration::ZERO));
    }
    Arc::new(builder.build().expect("valid keyed config"))
}

fn join<T>(handle: rt::JoinHandle<T>) -> T {
    match handle.join() {
        Ok(value) => value,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

fn wait_until(mut cond: impl FnMut() -> bool) {
    while !cond() {
        rt::yield_now();
    }
}

/// Two callers create the same new key at once (`try_acquire` of key 4, key limit 2, so both
/// are admitted), with `max_keys` 1 or 2 (at 2 both can reserve a place before either
/// inserts). The key is created once and no place leaks: afterwards exactly one key is live
/// and the count equals the entries; neither caller is refused (a key being created by
/// another caller is never `TooManyKeys`, nor is an existing one); a second key (key 6,
/// same shard) still gets a place (a free one, or key 4's once evicted as idle), and
/// evicting every idle key brings the count to 0.
pub fn keyed_same_new_key_racing_keeps_live_keys(max_keys: usize) {
    let keyed = keyed(2, None, max_keys);
    let refused = Arc::new(AtomicUsize::new(0));
    let caller = {
        let (keyed, refused) = (Arc::clone(&keyed), Arc::clone(&refused));
        move || match keyed.try_acquire(&4) {
            Ok(permit) => drop(permit),
            Err(_) => {
                refused.fetch_add(1, SeqCst);
            }
        }
    };
    let other = rt::spawn(caller.clone());
    caller();
    join(other);
    assert_eq!(refused.load(SeqCst), 0, "a caller of a key being created was refused");
    let entries = keyed.metrics(usize::MAX);
    let entries = entries.keys.len() + entries.other_keys;
    assert_eq!(entries, 1, "key 4 created twice");
    assert_eq!(keyed.live_keys(), 1, "a reserved place leaked (or was never taken)");
    assert_quiescent(&keyed.key_bulkhead(&4).expect("key 4 live"), 2);
    drop(keyed.try_acquire(&6).expect("a place for a second key"));
    let live = keyed.live_keys();
    assert_eq!(live, max_keys.min(2), "places after a second key");
    assert_eq!(keyed.evict_idle(), live);
    assert_eq!(keyed.live_keys(), 0, "places not all given back");
}

/// A keyed call that its key refuses never takes, holds or counts a slot of the total.
/// Key limit 1, a total of 3 with counters and a listener; two callers on key 0 and one on
/// key 1 (`try_acquire`). Three callers hold at most 3 slots of the total (a permit releases
/// its key's slot before the total's, so a total of 2 could refuse a caller whose key was
/// just released), so the total never refuses anyone, and it sees exactly the admitted calls: its counters say `permitted == finished
/// == admitted` and no rejection, its listener heard as many `CallPermitted` and
/// `CallFinished` and no `CallRejected`, and nothing of it is held while a caller is refused.
/// Every call is admitted or refused by its key with `Full`.
pub fn keyed_key_refusal_leaves_total_untouched() {
    let keyed = keyed(1, Some(3), 2);
    let total = keyed.total().expect("a total");
    total.enable_counters();
    let heard = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0), AtomicUsize::new(0)]);
    {
        let heard = Arc::clone(&heard);
        let _keep = total.on_event(move |event| {
            let slot = match event.kind() {
                BulkheadEventKind::CallPermitted => 0,
                BulkheadEventKind::CallFinished => 1,
                _ => 2,
            };
            heard[slot].fetch_add(1, SeqCst);
        });
    }
    let occupancy = Occupancy::new(2);
    let admitted = Arc::new(AtomicUsize::new(0));
    let refused = Arc::new(AtomicUsize::new(0));
    let caller = keyed_caller(&keyed, &occupancy, &admitted, &refused, |refusal| {
        refusal.reason() == RejectReason::Full && refusal.bulkhead_name() != "keyed"
    });
    let handles: Vec<_> = [0, 1]
        .into_iter()
        .map(|key| {
            let caller = caller.clone();
            rt::spawn(move || caller(key))
        })
        .collect();
    caller(0);
    handles.into_iter().for_each(join);
    let admitted = admitted.load(SeqCst);
    assert_eq!(admitted + refused.load(SeqCst), 3, "a call neither admitted nor refused");
    occupancy.check(admitted);
    let m = keyed.total_metrics().expect("a total");
    assert_eq!(m.calls_rejected_total(), 0, "the total refused someone: {m:?}");
    assert_eq!(m.calls_permitted(), admitted as u64, "the total counted a refused call");
    assert_eq!(m.calls_finished(), admitted as u64, "the total counted a refused call");
    let heard: Vec<usize> = heard.iter().map(|n| n.load(SeqCst)).collect();
    assert_eq!(heard, [admitted, admitted, 0], "the total's listener heard a refused call");
    assert_quiescent(keyed.total().expect("a total"), 3);
    for key in [0, 1] {
        if let Some(bulkhead) = keyed.key_bulkhead(&key) {
            assert_quiescent(&bulkhead, 1);
        }
    }
}

/// The adaptive scenarios' algorithm: one off the limit per failure, the limit kept
/// otherwise, so a test can count the failures that reached it.
struct DownOnFailure;

impl bulkhead::adaptive::LimitAlgorithm for DownOnFailure {
    fn update(
        &mut self,
        sample: &bulkhead::adaptive::Sample,
        limits: bulkhead::adaptive::Limits,
    ) -> usize {
        match sample.outcome {
            bulkhead::adaptive::Outcome::Failure => limits.current - 1,
            _ => limits.current,
        }
    }
}

/// An adaptive call's failure reaches the controller before its permit passes to a queued
/// caller. Cap 2, limit 2, an algorithm that takes one off per failure and keeps the limit
/// on a success. The main thread holds a permit (B); thread A holds the other, and fails once
/// thread C is queued for one (unbounded wait). The failure shrinks the limit to 1 while B
/// and A are in flight, so A's release pays the debt and C must wait for B's release: C
/// is never inside alongside B. (Released before the sample is recorded, A's permit went to
/// C under the old limit of 2.)
pub fn adaptive_failure_shrinks_limit_before_queued_caller_is_admitted() {
    use bulkhead::adaptive::AdaptiveLimit;

    let adaptive = Arc::new(Bulkhead::new("adaptive_shrink", config(2, Duration::MAX)));
    adaptive.set_adaptive_limit(AdaptiveLimit::new(DownOnFailure)).expect("valid bounds");
    let b = adaptive.try_acquire().expect("B: limit 2, nobody in");
    let a_holds = Arc::new(AtomicUsize::new(0));
    let b_released = Arc::new(AtomicUsize::new(0));
    let violations = Arc::new(AtomicUsize::new(0));
    let a = {
        let (adaptive, a_holds) = (Arc::clone(&adaptive), Arc::clone(&a_holds));
        rt::spawn(move || {
            let permit = adaptive.try_acquire().expect("A: one permit left");
            a_holds.store(1, SeqCst);
            wait_until(|| adaptive.metrics().waiting_calls() == 1);
            permit.fail();
        })
    };
    let c = {
        let (adaptive, a_holds, b_released, violations) = (
            Arc::clone(&adaptive),
            Arc::clone(&a_holds),
            Arc::clone(&b_released),
            Arc::clone(&violations),
        );
        rt::spawn(move || {
            wait_until(|| a_holds.load(SeqCst) == 1);
            let permit = adaptive.acquire().expect("C: an unbounded wait is granted");
            if b_released.load(SeqCst) == 0 {
                // Admitted while B holds its permit, under a limit of 1.
                violations.fetch_add(1, SeqCst);
            }
            permit.succeed();
        })
    };
    join(a);
    assert_eq!(
        adaptive.adaptive_limit().expect("attached").limit(),
        1,
        "the failure shrank the limit"
    );
    b_released.store(1, SeqCst);
    b.succeed();
    join(c);
    assert_eq!(
        violations.load(SeqCst),
        0,
        "a queued caller was admitted under the limit from before the failure"
    );
    assert_eq!(adaptive.adaptive_limit().expect("attached").limit(), 1);
    assert_eq!(adaptive.metrics().max_allowed_concurrent_calls(), 1);
    assert_quiescent(&adaptive, 1);
}

/// Issue 21: samples are recorded per thread and folded into the controller by whoever
/// gets its lock with `try_lock`. Two threads each end two sampled calls on an adaptive
/// bulkhead (cap 4, limit 4; an algorithm that takes one off per failure fed to it), one a
/// success and one a failure, in either order, while the main thread reads the controller
/// (a fold that waits for the lock). In a model a thread's ring holds 2 samples and asks
/// for a fold at 2, so every call either folds, finds the lock taken, or waits for the next.
///
/// Once both threads are joined, and before anyone reads the controller again, the
/// engine's limit is 2: each failure reached the algorithm, through its own fold or through
/// the recheck of the thread that held the lock when it asked (nobody else is left to fold
/// it). Then the controller has fed exactly 4 samples (none lost, none counted twice),
/// dropped none, and every permit is back.
pub fn adaptive_fold_loses_and_repeats_no_sample() {
    use bulkhead::adaptive::AdaptiveLimit;

    let adaptive = Arc::new(Bulkhead::new("adaptive_fold", config(4, Duration::ZERO)));
    adaptive.set_adaptive_limit(AdaptiveLimit::new(DownOnFailure)).expect("valid bounds");
    let callers: Vec<_> = (0..2)
        .map(|t| {
            let adaptive = Arc::clone(&adaptive);
            rt::spawn(move || {
                for i in 0..2 {
                    // Never refused: the limit stays at 2 or more, and each caller holds one.
                    let permit = adaptive.try_acquire().expect("a free permit");
                    if (t + i) % 2 == 0 {
                        permit.succeed();
                    } else {
                        permit.fail();
                    }
                }
            })
        })
        .collect();
    let seen = adaptive.adaptive_limit().expect("attached").limit();
    callers.into_iter().for_each(join);
    assert!((2..=4).contains(&seen), "the limit read during the calls is {seen}");
    assert_eq!(
        adaptive.metrics().max_allowed_concurrent_calls(),
        2,
        "a failure was left for a later fold (the lock holder did not look again)"
    );
    let metrics = adaptive.adaptive_limit().expect("attached").metrics();
    assert_eq!(metrics.samples(), 4, "a sample was lost or fed twice");
    assert_eq!(metrics.samples_dropped(), 0);
    assert_eq!(metrics.limit(), 2);
    assert_quiescent(&adaptive, 2);
}

/// Issue 29 (6c): the algorithm runs holding no lock of ours, so it may call back into the
/// controller. Here it does on the first failure it is fed: it reads the controller's limit
/// and metrics and feeds it one more failure by hand, from inside the fold. Two threads race
/// (cap 4, limit 4): one feeds a failure by hand (`record`: through the pending list), the
/// other ends a successful call (into its ring; a lone success asks for no fold, so this
/// thread never folds). The failure the algorithm feeds from inside the fold of the hand-fed
/// one arrives after that fold took the pending list: only the fold's recheck can find it.
///
/// Once both threads are joined, and before anyone reads the controller again, the engine's
/// limit is 2: both failures reached the algorithm (a fold that skipped its recheck of the
/// pending list leaves 3). Then, once read, the controller has fed 3 samples (the success
/// folded with one of the folds or by the read), none lost, none fed twice, no deadlock.
pub fn adaptive_reentrant_algorithm_loses_no_sample() {
    use bulkhead::adaptive::{AdaptiveLimit, LimitAlgorithm, Limits, Outcome, Sample};
    use std::sync::{OnceLock, Weak};

    struct Reentrant(Arc<OnceLock<Weak<Bulkhead>>>, bool);
    impl LimitAlgorithm for Reentrant {
        fn update(&mut self, sample: &Sample, limits: Limits) -> usize {
            if sample.outcome != Outcome::Failure {
                return limits.current;
            }
            if !self.1 {
                self.1 = true;
                let bank = self.0.get().and_then(Weak::upgrade).expect("the bulkhead lives");
                let control = bank.adaptive_limit().expect("attached");
                assert!(control.limit() >= limits.current, "the limit went below the fold's");
                let _ = control.metrics();
                control.record(Sample::new(Duration::from_millis(1), 1, Outcome::Failure));
            }
            limits.current - 1
        }
    }

    let adaptive = Arc::new(Bulkhead::new("adaptive_reentrant", config(4, Duration::ZERO)));
    let cell = Arc::new(OnceLock::new());
    let algorithm = Reentrant(Arc::clone(&cell), false);
    adaptive.set_adaptive_limit(AdaptiveLimit::new(algorithm)).expect("valid bounds");
    cell.set(Arc::downgrade(&adaptive)).expect("set once");
    let callers: Vec<_> = (0..2)
        .map(|t| {
            let adaptive = Arc::clone(&adaptive);
            rt::spawn(move || {
                if t == 0 {
                    // Fed by hand: through the pending list.
                    let sample = Sample::new(Duration::from_millis(1), 1, Outcome::Failure);
                    adaptive.adaptive_limit().expect("attached").record(sample);
                } else {
                    adaptive.try_acquire().expect("a free permit").succeed();
                }
            })
        })
        .collect();
    callers.into_iter().for_each(join);
    assert_eq!(
        adaptive.metrics().max_allowed_concurrent_calls(),
        2,
        "a failure was left for a later fold (the folder did not look again)"
    );
    let metrics = adaptive.adaptive_limit().expect("attached").metrics();
    assert_eq!((metrics.samples(), metrics.samples_dropped()), (3, 0), "lost or fed twice");
    assert_eq!(metrics.limit(), 2);
    assert_quiescent(&adaptive, 2);
}

/// `close` racing a new key at a full map: `max_keys` 1, key 0 held by the main thread, one
/// thread tries key 1 while another closes. Key 1 is refused either way: `TooManyKeys` if
/// its look-up came first, `Closed` after, and never inserted (one key live throughout).
/// Once closed, a new key is refused `Closed` however full the map; once key 0 is released
/// it is idle although closed, and `evict_idle` gives its place back.
pub fn keyed_close_racing_new_key_at_full_map() {
    let keyed = keyed(1, None, 1);
    let held = keyed.try_acquire(&0).expect("key 0, the only place");
    let newcomer = {
        let keyed = Arc::clone(&keyed);
        rt::spawn(move || match keyed.try_acquire(&1) {
            Ok(_) => panic!("key 1 admitted: the map is full and key 0 busy"),
            Err(full) if full.reason() == RejectReason::TooManyKeys => false,
            Err(full) if full.reason() == RejectReason::Closed => true,
            Err(other) => panic!("key 1 refused by {other}"),
        })
    };
    let closer = {
        let keyed = Arc::clone(&keyed);
        rt::spawn(move || assert!(keyed.close()))
    };
    let _closed_first = join(newcomer);
    join(closer);
    assert_eq!(keyed.live_keys(), 1, "a refused key took a place");
    let after = keyed.try_acquire(&3).expect_err("closed");
    assert_eq!(after.reason(), RejectReason::Closed, "after close: {after:?}");
    drop(held);
    assert_eq!(keyed.evict_idle(), 1, "the closed, idle key 0 is evicted");
    assert_eq!(keyed.live_keys(), 0);
}

/// Issue 19: the keyed owned async acquire (`AcquireOwnedKeyed`, also the keyed tower
/// layer's) on keys 0 and 1 (key limit 1) through a total of 1, unbounded waits, each
/// polled only with hostile wakers that re-enter its key's bulkhead on every waker
/// operation: both are granted (no waker runs under a lock, no deadlock), the total admits
/// one at a time with a happens-before between holders, and every slot is back.
pub fn keyed_owned_async_hostile_wakers_keep_total() {
    keyed_async_hostile_wakers_keep_total(true);
}

/// As [`keyed_owned_async_hostile_wakers_keep_total`], with the borrowed named future
/// (`AcquireKeyed`, issue 30) when `owned` is false: one `Core` and timer reused from the
/// key's level to the total's.
pub fn keyed_async_hostile_wakers_keep_total(owned: bool) {
    let keyed = {
        let builder = bulkhead::keyed::KeyedBulkhead::builder("keyed")
            .default_config(config(1, Duration::MAX))
            .total(config(1, Duration::MAX))
            .shards(2)
            .hasher(core::hash::BuildHasherDefault::<KeyHasher>::default());
        Arc::new(builder.build().expect("valid keyed config"))
    };
    let occupancy = Occupancy::new(1);
    let caller = {
        let (keyed, occupancy) = (Arc::clone(&keyed), Arc::clone(&occupancy));
        move |key: usize| {
            // The key's bulkhead exists once the future is made (the look-up creates it).
            let key_bulkhead = || keyed.key_bulkhead(&key).expect("created by the look-up");
            if owned {
                let acquire = Box::pin(keyed.acquire_owned_async(&key));
                hold_through(&key_bulkhead(), &occupancy, acquire);
            } else {
                let acquire = Box::pin(keyed.acquire_async(&key));
                hold_through(&key_bulkhead(), &occupancy, acquire);
            }
        }
    };
    let other = {
        let caller = caller.clone();
        rt::spawn(move || caller(1))
    };
    caller(0);
    join(other);
    occupancy.check(2);
    assert_quiescent(keyed.total().expect("a total"), 1);
    for key in [0, 1] {
        assert_quiescent(&keyed.key_bulkhead(&key).expect("live"), 1);
    }
}

/// Drives `acquire` with hostile wakers re-entering `bulkhead`, then holds the permit
/// through `occupancy`'s check.
fn hold_through<P, F>(bulkhead: &Arc<Bulkhead>, occupancy: &Occupancy, acquire: F)
where
    F: core::future::Future<Output = Result<P, bulkhead::BulkheadFull>> + Unpin,
{
    let permit = block_on_hostile(bulkhead, None, acquire).expect("an unbounded wait");
    occupancy.work();
    drop(permit);
}

/// Issue 19: a keyed-level listener registered (`on_event`) while another thread creates a
/// new key (key 5, with a permit taken and dropped) reaches that key's bulkhead exactly
/// once: a call on the key after both are done is heard exactly twice (permitted,
/// finished); 0 means the new key missed the listener, 4 that it got it twice. (A new
/// key is brought up to date under its shard's lock and `on_event` walks the shards after
/// adding the listener; either order of the two meets.)
pub fn keyed_listener_racing_new_key_registered_once() {
    let keyed = keyed(1, None, 4);
    let heard = Arc::new(AtomicUsize::new(0));
    let registrar = {
        let (keyed, heard) = (Arc::clone(&keyed), Arc::clone(&heard));
        rt::spawn(move || {
            let _keep = keyed.on_event(move |_| {
                heard.fetch_add(1, SeqCst);
            });
        })
    };
    drop(keyed.try_acquire(&5).expect("a new key with a free slot"));
    join(registrar);
    let before = heard.load(SeqCst);
    drop(keyed.try_acquire(&5).expect("free again"));
    let after = heard.load(SeqCst) - before;
    assert_eq!(after, 2, "a call on the new key was heard {after} times, not once per event");
    assert_quiescent(&keyed.key_bulkhead(&5).expect("live"), 1);
}

/// Issue 20, keyed weighted permits: weighted requests racing another key's release through
/// the total. Keys of 2 slots, a total of 3, unbounded waits at both levels. The main thread
/// holds key 1's 2 slots (1 of the total left) and releases them while the callers run:
/// with `blocking`, one thread asks key 0 for 2 (`acquire_many`); each of `owned_async`
/// threads asks its own key (2, 3, ...) for 2 with `acquire_many_owned_async`, polls it,
/// yields, polls again and cancels it (drops it) if it is still pending: queued at its key
/// (nothing held), or at the total (its key's 2 must go back), or granted but not yet
/// polled (both levels must go back).
///
/// Every holder counts the total's slots it holds: they never exceed 3 (a request granted
/// fewer of the total than of its key would show here); every request is granted whole or
/// cancelled; at the end every slot of every key and of the total is back.
pub fn keyed_weighted_racing_release_keeps_total(blocking: bool, owned_async: usize) {
    use core::future::Future;
    use core::task::{Context, Poll};

    let keyed = {
        let builder = bulkhead::keyed::KeyedBulkhead::builder("keyed")
            .default_config(config(2, Duration::MAX))
            .total(config(3, Duration::MAX))
            .shards(2)
            .hasher(core::hash::BuildHasherDefault::<KeyHasher>::default());
        Arc::new(builder.build().expect("valid keyed config"))
    };
    // Slots of the total held by the callers (each adds what its permit holds once granted,
    // and takes it off before the release), and how often that went above 3.
    let in_use = Arc::new(AtomicUsize::new(0));
    let over = Arc::new(AtomicUsize::new(0));
    let enter = {
        let (in_use, over) = (Arc::clone(&in_use), Arc::clone(&over));
        move |n: u32| {
            if in_use.fetch_add(n as usize, SeqCst) + n as usize > 3 {
                over.fetch_add(1, SeqCst);
            }
        }
    };
    let leave = {
        let in_use = Arc::clone(&in_use);
        move |n: u32| {
            in_use.fetch_sub(n as usize, SeqCst);
        }
    };
    let held = keyed.try_acquire_many_owned(&1, 2).expect("key 1 and the total are free");
    enter(held.num_permits());
    let mut handles = Vec::new();
    if blocking {
        let (keyed, enter, leave) = (Arc::clone(&keyed), enter.clone(), leave.clone());
        handles.push(rt::spawn(move || {
            let permit = keyed.acquire_many(&0, 2).expect("an unbounded wait is granted");
            enter(permit.num_permits());
            leave(permit.num_permits());
            drop(permit);
            1
        }));
    }
    for key in 2..2 + owned_async {
        let (keyed, enter, leave) = (Arc::clone(&keyed), enter.clone(), leave.clone());
        handles.push(rt::spawn(move || {
            let mut acquire = Box::pin(keyed.acquire_many_owned_async(&key, 2));
            let waker = futures::task::noop_waker();
            for attempt in 0..2 {
                if attempt == 1 {
                    rt::yield_now();
                }
                if let Poll::Ready(result) = acquire.as_mut().poll(&mut Context::from_waker(&waker))
                {
                    let permit = result.expect("an unbounded wait is granted");
                    enter(permit.num_permits());
                    leave(permit.num_permits());
                    drop(permit);
                    return 1;
                }
            }
            // Still pending: cancelled, wherever it waits.
            drop(acquire);
            0
        }));
    }
    leave(held.num_permits());
    drop(held);
    let granted: usize = handles.into_iter().map(join).sum();
    assert!(granted >= usize::from(blocking), "the blocking request was not granted");
    assert_eq!(over.load(SeqCst), 0, "the total's slots in use went above its limit of 3");
    assert_quiescent(keyed.total().expect("a total"), 3);
    for key in (0..2 + owned_async).filter(|&key| blocking || key != 0) {
        assert_quiescent(&keyed.key_bulkhead(&key).expect("live"), 2);
    }
}

/// Issue 32, guaranteed shares: keys of 3 slots, a total of `total` with unbounded waits, key
/// 0's share `key0_share` and every other key's `default_share` (`max_keys` 2).
fn keyed_shares(total: usize, key0_share: u32, default_share: u32) -> Arc<Keyed> {
    let builder = bulkhead::keyed::KeyedBulkhead::builder("keyed")
        .default_config(config(3, Duration::MAX))
        .total(config(total, Duration::MAX))
        .max_keys(2)
        .shards(2)
        .hasher(core::hash::BuildHasherDefault::<KeyHasher>::default())
        .key_guaranteed_share(0, key0_share)
        .guaranteed_share(default_share);
    Arc::new(builder.build().expect("valid shares"))
}

/// Issue 32: a borrower and an owner race for the last slot of the total without waiting.
/// Total 2, key 0's share 1, key 1's none; the main thread holds one slot of key 1. Key 1
/// (a borrower) and key 0 (an owner) each `try_acquire` once and work under the
/// occupancy check (limit 2 with the main thread's slot): the total is never over-admitted,
/// whoever wins; the loser is refused by the total and holds no slot of its key; at the end
/// every slot of both keys and of the total is back.
pub fn keyed_shares_owner_and_borrower_race_for_last_slot() {
    let keyed = keyed_shares(2, 1, 0);
    let occupancy = Occupancy::new(1);
    let held = keyed.try_acquire(&1).expect("key 1 and the total are free");
    let caller = {
        let (keyed, occupancy) = (Arc::clone(&keyed), Arc::clone(&occupancy));
        move |key: usize| match keyed.try_acquire(&key) {
            Ok(permit) => {
                occupancy.work();
                drop(permit);
                1
            }
            Err(refused) => {
                assert_eq!(refused.bulkhead_name(), "keyed", "refused by the total only");
                0
            }
        }
    };
    let borrower = {
        let caller = caller.clone();
        rt::spawn(move || caller(1))
    };
    let admitted = caller(0) + join(borrower);
    assert!(admitted >= 1, "the last slot was free: someone takes it");
    occupancy.check(admitted);
    drop(held);
    assert_quiescent(keyed.total().expect("a total"), 2);
    for key in [0, 1] {
        assert_quiescent(&keyed.key_bulkhead(&key).expect("live"), 3);
    }
}

/// Issue 32: an owner's release handed to the right class. Total 1, held by the main thread
/// through key 1 (no share). A borrower of key 1 (asking `Critical` if `critical_borrower`:
/// it must be demoted) and an owner of key 0 (its share is 1) both queue at the total, in either order; the main thread
/// waits for both, then releases: the slot goes to the owner, whichever queued first. Each
/// records its key when granted, then releases, which grants the other.
pub fn keyed_shares_release_goes_to_owner(critical_borrower: bool) {
    let keyed = keyed_shares(1, 1, 0);
    let first = Arc::new(AtomicUsize::new(usize::MAX));
    let held = keyed.try_acquire(&1).expect("free");
    let spawn = |key: usize, request: bulkhead::Request| {
        let (keyed, first) = (Arc::clone(&keyed), Arc::clone(&first));
        rt::spawn(move || {
            let permit = keyed.acquire_many(&key, request).expect("an unbounded wait");
            let _ = first.compare_exchange(usize::MAX, key, SeqCst, SeqCst);
            drop(permit);
        })
    };
    let class = if critical_borrower {
        bulkhead::Criticality::Critical
    } else {
        bulkhead::Criticality::Default
    };
    let borrower = spawn(1, bulkhead::Request::permits(1).criticality(class));
    let owner = spawn(0, bulkhead::Request::permits(1));
    let total = keyed.total().expect("a total");
    wait_until(|| total.metrics().waiting_calls() == 2);
    drop(held);
    join(borrower);
    join(owner);
    assert_eq!(first.load(SeqCst), 0, "the released slot went to the borrower, not the owner");
    assert_quiescent(total, 1);
}

/// Issue 32: a key evicted while its share is lent. Total 2, every key's share 1,
/// `max_keys` 2. Key 2 is used once and left idle (its share lent from then on); the main
/// thread holds both slots of the total through key 1 (one of them borrowed). A borrower
/// of key 1 and a caller of key 3 (new: the map is full, so key 2, idle, is evicted to make
/// room) queue at the total in either order; the release goes to key 3, an owner by the
/// default share from its first call.
pub fn keyed_shares_key_evicted_while_lending() {
    let keyed = keyed_shares(2, 0, 1);
    drop(keyed.try_acquire(&2).expect("free"));
    let held = [keyed.try_acquire(&1).expect("free"), keyed.try_acquire(&1).expect("lent")];
    let first = Arc::new(AtomicUsize::new(usize::MAX));
    let spawn = |key: usize| {
        let (keyed, first) = (Arc::clone(&keyed), Arc::clone(&first));
        rt::spawn(move || {
            let permit = keyed.acquire(&key).expect("an unbounded wait");
            let _ = first.compare_exchange(usize::MAX, key, SeqCst, SeqCst);
            drop(permit);
        })
    };
    let borrower = spawn(1);
    let newcomer = spawn(3);
    let total = keyed.total().expect("a total");
    wait_until(|| total.metrics().waiting_calls() == 2);
    assert!(keyed.key_bulkhead(&2).is_none(), "key 2 was idle: evicted for key 3");
    let [one, two] = held;
    drop(one);
    join(newcomer);
    join(borrower);
    drop(two);
    assert_eq!(first.load(SeqCst), 3, "the new key's share went to a borrower");
    assert_quiescent(total, 2);
}
