//! The acquire verbs of the keyed bulkhead, each taking its key's slots, then as many of the
//! total (the module docs' "Two levels, and the order that avoids deadlock" and "Weighted
//! requests"): `try_acquire`, `acquire`, `acquire_timeout`, the async, owned and weighted
//! forms. The `call` verbs built on them are in `call.rs`; with guaranteed shares, the
//! single-slot verbs go through `share.rs`.

use core::fmt;
use core::future::Future;
use core::hash::{BuildHasher, Hash};
use core::time::Duration;
use std::sync::Arc;

use super::future::{AcquireKeyed, AcquireKeyedWithSleep, AcquireOwnedKeyed};
use super::permit::{take, KeyedPermit, OwnedKeyedPermit};
use super::KeyedBulkhead;
use crate::bulkhead::error::BulkheadFull;
use crate::bulkhead::permit::{OwnedPermit, Permit};
use crate::bulkhead::request::Request;
use crate::bulkhead::Bulkhead;

impl<K, S> KeyedBulkhead<K, S>
where
    K: Eq + Hash + Clone + fmt::Display,
    S: BuildHasher,
{
    /// Takes a slot of `key` and, with a total, one of the total. Never waits.
    ///
    /// # Errors
    ///
    /// A [`BulkheadFull`] naming the level that refused: the key's bulkhead
    /// (`"{name}/{key}"`, reason `Full` or `Closed`), the total (`name`), or
    /// [`RejectReason::TooManyKeys`](crate::RejectReason::TooManyKeys) if `key` is new,
    /// `max_keys` keys are busy and there is no fallback key. No slot is held after an error.
    ///
    /// ```
    /// use bulkhead::{BulkheadConfig, RejectReason, keyed::KeyedBulkhead};
    /// let hosts = KeyedBulkhead::<&str>::builder("hosts")
    ///     .default_config(BulkheadConfig::builder().max_concurrent_calls(1).build()?)
    ///     .build()?;
    /// let _held = hosts.try_acquire(&"a.example")?;
    /// let refused = hosts.try_acquire(&"a.example").unwrap_err();
    /// assert_eq!(refused.reason(), RejectReason::Full);
    /// assert_eq!(refused.bulkhead_name(), "hosts/a.example");
    /// assert!(hosts.try_acquire(&"b.example").is_ok());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn try_acquire(&self, key: &K) -> Result<KeyedPermit<'_>, BulkheadFull> {
        // One call site: with two (one per arm), LLVM outlined `try_key` (callgrind: +8 on
        // acquire + release, +12 on a refusal). Without a total the key's result is the
        // call's, moved as is.
        if self.has_shares() {
            return self.try_acquire_shared(key);
        }
        let key_permit = self.try_key(key, KeyedPermit::key_slot);
        match self.total.as_deref() {
            None => key_permit,
            Some(total) => key_permit?.with_total(Some(total.try_acquire())),
        }
    }

    /// Takes a slot of `key`, waiting up to the key's `max_wait_duration`, then one of the
    /// total, waiting up to the total's. A call may thus wait up to the sum of both.
    ///
    /// # Blocking
    ///
    /// Blocks the calling thread while it waits (like [`Bulkhead::acquire`]); from async
    /// code use [`acquire_async`](Self::acquire_async).
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](Self::try_acquire), with the waiting reasons of the level that
    /// refused (`WaitTimedOut`, `TooManyWaiting`).
    ///
    /// # Panics
    ///
    /// As [`Bulkhead::acquire`]: if it would wait on a thread that polls async tasks.
    ///
    /// ```
    /// use bulkhead::keyed::KeyedBulkhead;
    /// let hosts = KeyedBulkhead::<&str>::builder("hosts").build()?;
    /// let permit = hosts.acquire(&"a.example")?;
    /// assert_eq!(permit.key_bulkhead().name(), "hosts/a.example");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire(&self, key: &K) -> Result<KeyedPermit<'_>, BulkheadFull> {
        if self.has_shares() {
            return self.acquire_shared(key, None);
        }
        let (bulkhead, mark) = take(self.bulkhead_for(key)?, Bulkhead::acquire)?;
        let key_permit = KeyedPermit::key_slot(bulkhead, mark);
        let total = self.total.as_deref().map(Bulkhead::acquire);
        key_permit.with_total(total)
    }

    /// Takes a slot of `key` and, with a total, one of the total, waiting at most `wait` in
    /// all (instead of the configured max waits): the total gets what the key's wait left.
    ///
    /// # Blocking
    ///
    /// Blocks the calling thread for up to `wait`.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire), with `wait` as the max wait. A refusal of the total
    /// reports the total's own wait in [`BulkheadFull::waited`].
    ///
    /// # Panics
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// ```
    /// use std::time::Duration;
    /// use bulkhead::{BulkheadConfig, RejectReason, keyed::KeyedBulkhead};
    /// let hosts = KeyedBulkhead::<&str>::builder("hosts")
    ///     .default_config(BulkheadConfig::builder().max_concurrent_calls(1).build()?)
    ///     .build()?;
    /// let _held = hosts.try_acquire(&"a.example")?;
    /// let err = hosts.acquire_timeout(&"a.example", Duration::from_micros(300)).unwrap_err();
    /// assert_eq!(err.reason(), RejectReason::WaitTimedOut);
    /// assert!(err.waited() >= Duration::from_micros(300));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire_timeout(
        &self,
        key: &K,
        wait: Duration,
    ) -> Result<KeyedPermit<'_>, BulkheadFull> {
        if self.has_shares() {
            return self.acquire_shared(key, Some(wait));
        }
        let clock = crate::engine::sync::Clock::new();
        let deadline = clock.deadline(clock.now(), wait);
        let (bulkhead, mark) = take(self.bulkhead_for(key)?, |b| b.acquire_timeout(wait))?;
        let key_permit = KeyedPermit::key_slot(bulkhead, mark);
        let total = self.total.as_deref().map(|total| {
            // What the key's wait left of `wait`.
            total.acquire_timeout(deadline.map_or(wait, |d| clock.between(clock.now(), d)))
        });
        key_permit.with_total(total)
    }

    /// The async [`acquire`](Self::acquire): waits for a slot of `key` up to the key's max
    /// wait, then for one of the total up to the total's, on any executor (the bulkheads'
    /// own deadlines, as [`Bulkhead::acquire_async`]).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe. Dropping the future at any point leaks nothing: a pending wait is
    /// withdrawn (a slot granted meanwhile is passed on), and a key slot already taken is
    /// released.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// ```
    /// use bulkhead::keyed::KeyedBulkhead;
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build()?.block_on(async {
    /// let hosts = KeyedBulkhead::<&str>::builder("hosts").build()?;
    /// let permit = hosts.acquire_async(&"a.example").await?;
    /// assert_eq!(hosts.key_metrics(&"a.example").unwrap().in_flight_calls(), 1);
    /// drop(permit);
    /// # Ok::<(), Box<dyn std::error::Error>>(()) })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire_async(&self, key: &K) -> AcquireKeyed<'_> {
        self.acquire_many_async(key, 1)
    }

    /// Waits asynchronously for a slot of `key`, then of the total, each up to its
    /// configured max wait bounded by a sleep future that `make_sleep` builds from that
    /// duration: no timer of the crate's is used, so it works with any runtime's sleep.
    ///
    /// `make_sleep` is called only for a level where the caller really has to wait (never
    /// when a slot is free, nor when the max wait is zero or unbounded), so at most twice
    /// (once per level): it is `FnMut`, where [`Bulkhead::acquire_async_with_sleep`] takes
    /// an `FnOnce`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`acquire_async`](Self::acquire_async).
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire);
    /// [`RejectReason::WaitTimedOut`](crate::RejectReason::WaitTimedOut) when a level's sleep
    /// completes first.
    ///
    /// ```
    /// use std::time::Duration;
    /// use bulkhead::{BulkheadConfig, RejectReason, keyed::KeyedBulkhead};
    /// let hosts = KeyedBulkhead::<&str>::builder("hosts")
    ///     .default_config(
    ///         BulkheadConfig::builder()
    ///             .max_concurrent_calls(1)
    ///             .max_wait_duration(Duration::from_secs(60))
    ///             .build()?,
    ///     )
    ///     .build()?;
    /// let _held = hosts.try_acquire(&"a.example")?;
    /// // A "sleep" that is already over: the wait times out on its first poll.
    /// let err = futures::executor::block_on(
    ///     hosts.acquire_async_with_sleep(&"a.example", |_wait| std::future::ready(())),
    /// )
    /// .unwrap_err();
    /// assert_eq!(err.reason(), RejectReason::WaitTimedOut);
    /// assert_eq!(err.bulkhead_name(), "hosts/a.example");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire_async_with_sleep<M, F>(
        &self,
        key: &K,
        make_sleep: M,
    ) -> AcquireKeyedWithSleep<'_, M, F>
    where
        M: FnMut(Duration) -> F,
        F: Future,
    {
        // As the other waiting forms: a total of limit 0 refuses it before the key is looked
        // up (it creates no key); otherwise the look-up alone decides.
        let (looked_up, guarantee) = self.look_up_to_wait(key, Request::permits(1));
        AcquireKeyedWithSleep::new(looked_up, self.total.as_deref(), make_sleep, guarantee)
    }

    /// Takes an owned slot of `key` (and of the total) if free. Never waits. The permit
    /// holds the key's bulkhead and the total by `Arc`, so it is `Send + 'static` and can
    /// move to another task or thread; holding it keeps its key live (not idle).
    ///
    /// Unlike [`Bulkhead::try_acquire_owned`] it takes `&self`: the permit needs the key's
    /// bulkhead, not the keyed bulkhead (call it on an `Arc<KeyedBulkhead>` just the same).
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](Self::try_acquire).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use bulkhead::keyed::KeyedBulkhead;
    /// let tenants = Arc::new(KeyedBulkhead::<u64>::builder("api").build()?);
    /// let permit = tenants.try_acquire_owned(&42)?;
    /// std::thread::spawn(move || drop(permit)).join().unwrap();
    /// assert_eq!(tenants.key_metrics(&42).unwrap().in_flight_calls(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_acquire_owned(&self, key: &K) -> Result<OwnedKeyedPermit, BulkheadFull> {
        if self.has_shares() {
            return self.try_acquire_many_owned(key, 1);
        }
        let key_permit = self.try_key(key, OwnedPermit::from_acquired)?;
        let total = self.total.as_ref().map(Bulkhead::try_acquire_owned);
        OwnedKeyedPermit::both(key_permit, total)
    }

    /// Takes an owned slot of `key` (and of the total), waiting as
    /// [`acquire`](Self::acquire) does.
    ///
    /// # Blocking
    ///
    /// Blocks the calling thread as [`acquire`](Self::acquire) does.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// # Panics
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// ```
    /// use bulkhead::keyed::KeyedBulkhead;
    /// let tenants = KeyedBulkhead::<u64>::builder("api").build()?;
    /// let permit = tenants.acquire_owned(&42)?;
    /// assert_eq!(permit.key_bulkhead().name(), "api/42");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire_owned(&self, key: &K) -> Result<OwnedKeyedPermit, BulkheadFull> {
        if self.has_shares() {
            return self.acquire_owned_shared(key);
        }
        let (bulkhead, mark) = take(self.bulkhead_for(key)?, Bulkhead::acquire)?;
        let key_permit = OwnedPermit::from_acquired(bulkhead, mark);
        let total = self.total.as_ref().map(Bulkhead::acquire_owned);
        OwnedKeyedPermit::both(key_permit, total)
    }

    /// Waits asynchronously for an owned slot of `key`, then of the total, as
    /// [`acquire_async`](Self::acquire_async) does. The key is looked up (and created) when
    /// this is called; the future holds the key's bulkhead and the total by `Arc`, borrows
    /// nothing, and is `Send + 'static`, so it can be spawned.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`acquire_async`](Self::acquire_async). A future that is dropped
    /// without being polled holds only the key's `Arc`, which keeps the key live until then.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire) (a `TooManyKeys` refusal is the future's output).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use bulkhead::keyed::KeyedBulkhead;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let tenants = Arc::new(KeyedBulkhead::<u64>::builder("api").build()?);
    /// let permit = tokio::spawn(tenants.acquire_owned_async(&42)).await??;
    /// assert_eq!(tenants.key_metrics(&42).unwrap().in_flight_calls(), 1);
    /// drop(permit);
    /// # Ok(())
    /// # }
    /// ```
    pub fn acquire_owned_async(&self, key: &K) -> AcquireOwnedKeyed {
        self.acquire_many_owned_async(key, 1)
    }

    /// Takes `n` slots of `key` and `n` of the total at once, if they are free: a call that
    /// costs `n` of each limit, as [`Bulkhead::try_acquire_many`]. Never waits.
    /// `try_acquire_many(&k, 1)` is [`try_acquire`](Self::try_acquire).
    ///
    /// All or nothing across both levels: either the permit holds `n` slots of the key and
    /// `n` of the total, or nothing is held when the error returns (`n` key slots taken
    /// before the total refused are released first). `n == 0` gives an empty permit unless
    /// a level is closed.
    ///
    /// # Errors
    ///
    /// [`RejectReason::ExceedsLimit`](crate::RejectReason::ExceedsLimit) when `n` is above the
    /// total's limit (named `name`: checked first, before the key is looked up, so such a
    /// request creates no key) or above the key's (`"{name}/{key}"`); otherwise as
    /// [`try_acquire`](Self::try_acquire),
    /// `Full` when fewer than `n` slots are free at a level, and, for a sheddable request,
    /// as [`Bulkhead::try_acquire_many`] at each level (`Reserved` from the level whose
    /// `sheddable_headroom` held it back, `ExceedsLimit` when `n` plus a level's headroom is
    /// above its limit).
    ///
    /// ```
    /// use bulkhead::{BulkheadConfig, RejectReason, keyed::KeyedBulkhead};
    /// let limit = |n| BulkheadConfig::builder().max_concurrent_calls(n).build().unwrap();
    /// let tenants = KeyedBulkhead::<u32>::builder("api")
    ///     .default_config(limit(4))
    ///     .total(limit(6))
    ///     .build()?;
    /// let batch = tenants.try_acquire_many(&1, 3)?;
    /// assert_eq!(batch.num_permits(), 3);
    /// // Key 2 has 4 free, the total only 3: refused by the total, key 2 holds nothing.
    /// let err = tenants.try_acquire_many(&2, 4).unwrap_err();
    /// assert_eq!((err.reason(), err.bulkhead_name()), (RejectReason::Full, "api"));
    /// assert_eq!(tenants.key_metrics(&2).unwrap().in_flight_calls(), 0);
    /// // Above a limit: refused at once, whatever is free.
    /// let err = tenants.try_acquire_many(&2, 5).unwrap_err();
    /// assert_eq!((err.reason(), err.bulkhead_name()), (RejectReason::ExceedsLimit, "api/2"));
    /// let err = tenants.try_acquire_many(&3, 7).unwrap_err();
    /// assert_eq!((err.reason(), err.bulkhead_name()), (RejectReason::ExceedsLimit, "api"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_acquire_many(
        &self,
        key: &K,
        request: impl Into<Request>,
    ) -> Result<KeyedPermit<'_>, BulkheadFull> {
        self.many(key, request.into(), |bulkhead, request| bulkhead.try_acquire_many(request))
    }

    /// Takes `n` slots of `key` at once, waiting up to the key's `max_wait_duration`, then
    /// `n` of the total at once, waiting up to the total's, as [`Bulkhead::acquire_many`]
    /// does at each level (strict FIFO: a waiter for 3 holds back a later waiter for 1).
    /// `acquire_many(&k, 1)` is [`acquire`](Self::acquire).
    ///
    /// A waiter never holds part of its request: at each level it is granted all `n` slots
    /// at once or none. Between the levels it holds its key's `n` slots while it waits for
    /// the total's `n` (as [`acquire`](Self::acquire) holds its key's slot), and gives them
    /// all back if the total refuses or times out.
    ///
    /// # Blocking
    ///
    /// Blocks the calling thread while it waits, as [`acquire`](Self::acquire).
    ///
    /// # Errors
    ///
    /// As [`try_acquire_many`](Self::try_acquire_many) (a request above a level's limit is
    /// refused at once, before any wait), with the waiting reasons of the level that refused
    /// (`WaitTimedOut`, `TooManyWaiting`), and `ExceedsLimit` when a level's limit shrank
    /// below `n` while the request waited there.
    ///
    /// # Panics
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// ```
    /// use std::time::Duration;
    /// use bulkhead::{BulkheadConfig, RejectReason, keyed::KeyedBulkhead};
    /// let config = |n| {
    ///     BulkheadConfig::builder()
    ///         .max_concurrent_calls(n)
    ///         .max_wait_duration(Duration::from_millis(5))
    ///         .build()
    ///         .unwrap()
    /// };
    /// let tenants = KeyedBulkhead::<u32>::builder("api")
    ///     .default_config(config(3))
    ///     .total(config(4))
    ///     .build()?;
    /// let held = tenants.try_acquire_many(&1, 2)?;
    /// // Key 2 grants 3 at once; the total has 2 free: waits 5 ms there, then gives up and
    /// // gives key 2's three slots back.
    /// let err = tenants.acquire_many(&2, 3).unwrap_err();
    /// assert_eq!((err.reason(), err.bulkhead_name()), (RejectReason::WaitTimedOut, "api"));
    /// assert_eq!(tenants.key_metrics(&2).unwrap().in_flight_calls(), 0);
    /// drop(held);
    /// assert_eq!(tenants.acquire_many(&2, 3)?.num_permits(), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire_many(
        &self,
        key: &K,
        request: impl Into<Request>,
    ) -> Result<KeyedPermit<'_>, BulkheadFull> {
        self.many(key, request.into(), |bulkhead, request| bulkhead.acquire_many(request))
    }

    /// The borrowed weighted acquires: `acquire` (one of [`Bulkhead::try_acquire_many`] and
    /// [`Bulkhead::acquire_many`]) takes the request at each level, the key's first, with
    /// its criticality at both. The request goes through here and
    /// [`total_admits`](Self::total_admits) only.
    fn many(
        &self,
        key: &K,
        request: Request,
        acquire: impl Fn(&Bulkhead, Request) -> Result<Permit<'_>, BulkheadFull>,
    ) -> Result<KeyedPermit<'_>, BulkheadFull> {
        let n = request.num_permits();
        self.total_admits(n)?;
        let (bulkhead, mark) = take(self.bulkhead_for(key)?, |key| acquire(key, request))?;
        let key_permit = KeyedPermit::key_slots(bulkhead, n, mark);
        let request = self.share_request(key, &key_permit.key, request);
        key_permit.with_total(self.total.as_deref().map(|total| acquire(total, request)))
    }

    /// What a waiting future of `key` starts from: the key's bulkhead, or the refusal its
    /// first poll reports (a request above the total's limit is refused before the key is
    /// looked up, so it creates no key, as the blocking verbs do); and, with shares, the
    /// key's guarantee (the total is asked in the share's class once the key's slots are
    /// held).
    fn look_up_to_wait(
        &self,
        key: &K,
        request: Request,
    ) -> (Result<Arc<Bulkhead>, BulkheadFull>, Option<u32>) {
        let looked_up =
            self.total_admits(request.num_permits()).and_then(|()| self.bulkhead_for(key));
        (looked_up, self.shares.as_ref().map(|shares| shares.of(key)))
    }

    /// Refuses a request for `n` above the total's limit (`ExceedsLimit`, or `Closed` if the
    /// total is closed), before its key is looked up: the total could never grant it, so
    /// the caller neither waits for its key nor creates one. The key's own limit is checked
    /// by its bulkhead's weighted acquire, also before any wait; a limit that shrinks later
    /// is the engine's to judge (the waiter at the head is refused).
    #[inline]
    fn total_admits(&self, n: u32) -> Result<(), BulkheadFull> {
        match self.total.as_deref() {
            Some(total) => total.refuse_above_limit(n),
            None => Ok(()),
        }
    }

    /// Waits asynchronously for `n` slots of `key` at once, then `n` of the total, each up
    /// to its bulkhead's max wait, on any executor: the async
    /// [`acquire_many`](Self::acquire_many). `acquire_many_async(&k, 1)` is
    /// [`acquire_async`](Self::acquire_async).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe. A waiter is granted a level's `n` slots at once, never part of them, so
    /// dropping the future while it waits at the key leaves nothing to give back; dropped
    /// while it waits at the total, it releases the key's `n` slots; a request granted to a
    /// future dropped before it returns goes back whole, to the waiters behind.
    ///
    /// # Errors
    ///
    /// As [`acquire_many`](Self::acquire_many).
    ///
    /// ```
    /// use bulkhead::keyed::KeyedBulkhead;
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build()?.block_on(async {
    /// let hosts = KeyedBulkhead::<&str>::builder("hosts").build()?;
    /// let batch = hosts.acquire_many_async(&"a.example", 4).await?;
    /// assert_eq!(hosts.key_metrics(&"a.example").unwrap().in_flight_calls(), 4);
    /// drop(batch);
    /// # Ok::<(), Box<dyn std::error::Error>>(()) })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire_many_async(&self, key: &K, request: impl Into<Request>) -> AcquireKeyed<'_> {
        let request = request.into();
        let (looked_up, guarantee) = self.look_up_to_wait(key, request);
        AcquireKeyed::new(looked_up, self.total.as_deref(), request, guarantee)
    }

    /// Takes `n` slots of `key` and `n` of the total at once as an owned permit, if they are
    /// free. Never waits. As [`try_acquire_many`](Self::try_acquire_many), with the permit of
    /// [`try_acquire_owned`](Self::try_acquire_owned).
    ///
    /// # Errors
    ///
    /// As [`try_acquire_many`](Self::try_acquire_many).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use bulkhead::keyed::KeyedBulkhead;
    /// let tenants = Arc::new(KeyedBulkhead::<u64>::builder("api").build()?);
    /// let permit = tenants.try_acquire_many_owned(&42, 5)?;
    /// std::thread::spawn(move || assert_eq!(permit.num_permits(), 5)).join().unwrap();
    /// assert_eq!(tenants.key_metrics(&42).unwrap().in_flight_calls(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_acquire_many_owned(
        &self,
        key: &K,
        request: impl Into<Request>,
    ) -> Result<OwnedKeyedPermit, BulkheadFull> {
        self.many_owned(
            key,
            request.into(),
            |key, request| key.try_acquire_many(request),
            |total, request| total.try_acquire_many_owned(request),
        )
    }

    /// The owned many-slot verbs' one body: `n` slots of `key` taken by `at_key`, wrapped at
    /// once in their owned guard, then `n` of the total by `at_total` (the key's given back
    /// if the total refuses).
    #[inline]
    fn many_owned(
        &self,
        key: &K,
        request: Request,
        at_key: impl FnOnce(&Bulkhead, Request) -> Result<Permit<'_>, BulkheadFull>,
        at_total: impl FnOnce(&Arc<Bulkhead>, Request) -> Result<OwnedPermit, BulkheadFull>,
    ) -> Result<OwnedKeyedPermit, BulkheadFull> {
        let n = request.num_permits();
        self.total_admits(n)?;
        let (bulkhead, mark) = take(self.bulkhead_for(key)?, |key| at_key(key, request))?;
        let key_permit = OwnedPermit::with_permits(bulkhead, n, mark);
        let request = self.share_request(key, key_permit.bulkhead(), request);
        let total = self.total.as_ref().map(|total| at_total(total, request));
        OwnedKeyedPermit::both(key_permit, total)
    }

    /// Waits asynchronously for `n` slots of `key` at once, then `n` of the total, as an
    /// owned permit: the owned [`acquire_many_async`](Self::acquire_many_async). The key is
    /// looked up (and created) when this is called; the future is `Send + 'static`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`acquire_many_async`](Self::acquire_many_async).
    ///
    /// # Errors
    ///
    /// As [`acquire_many`](Self::acquire_many) (a refusal before any wait is the future's
    /// output).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use bulkhead::keyed::KeyedBulkhead;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let tenants = Arc::new(KeyedBulkhead::<u64>::builder("api").build()?);
    /// let permit = tokio::spawn(tenants.acquire_many_owned_async(&42, 3)).await??;
    /// assert_eq!(tenants.key_metrics(&42).unwrap().in_flight_calls(), 3);
    /// drop(permit);
    /// # Ok(())
    /// # }
    /// ```
    pub fn acquire_many_owned_async(
        &self,
        key: &K,
        request: impl Into<Request>,
    ) -> AcquireOwnedKeyed {
        let request = request.into();
        let (looked_up, guarantee) = self.look_up_to_wait(key, request);
        AcquireOwnedKeyed::new(looked_up, self.total.clone(), request, guarantee)
    }

    /// Takes `n` slots of `key` and `n` of the total at once, waiting at most `wait` in all
    /// (and at most the request's own [`max_wait`](Request::max_wait)), instead of the
    /// configured max waits: the weighted [`acquire_timeout`](Self::acquire_timeout). The
    /// total gets what the key's wait left. A zero wait never queues.
    ///
    /// # Blocking
    ///
    /// Blocks the calling thread for up to that wait.
    ///
    /// # Errors
    ///
    /// As [`acquire_many`](Self::acquire_many), with that wait as the max wait.
    ///
    /// # Panics
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// ```
    /// use std::time::Duration;
    /// use bulkhead::{BulkheadConfig, RejectReason, keyed::KeyedBulkhead};
    /// let hosts = KeyedBulkhead::<&str>::builder("hosts")
    ///     .default_config(BulkheadConfig::builder().max_concurrent_calls(3).build()?)
    ///     .build()?;
    /// let held = hosts.try_acquire(&"a.example")?;
    /// let err = hosts.acquire_many_timeout(&"a.example", 3, Duration::from_millis(2)).unwrap_err();
    /// assert_eq!(err.reason(), RejectReason::WaitTimedOut);
    /// drop(held);
    /// assert_eq!(hosts.acquire_many_timeout(&"a.example", 3, Duration::from_millis(2))?.num_permits(), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire_many_timeout(
        &self,
        key: &K,
        request: impl Into<Request>,
        wait: Duration,
    ) -> Result<KeyedPermit<'_>, BulkheadFull> {
        let request = request.into();
        let wait = request.wait_within(wait);
        let clock = crate::engine::sync::Clock::new();
        let deadline = clock.deadline(clock.now(), wait);
        self.many(key, request, |bulkhead, request| {
            // What the key's wait left of `wait` (all of it, at the key).
            let left = deadline.map_or(wait, |d| clock.between(clock.now(), d));
            bulkhead.acquire_many_timeout(request, left)
        })
    }

    /// Takes `n` slots of `key` and `n` of the total at once as an owned permit, waiting as
    /// [`acquire_many`](Self::acquire_many) does: the blocking
    /// [`acquire_many_owned_async`](Self::acquire_many_owned_async).
    ///
    /// # Blocking
    ///
    /// Blocks the calling thread as [`acquire_many`](Self::acquire_many) does.
    ///
    /// # Errors
    ///
    /// As [`acquire_many`](Self::acquire_many).
    ///
    /// # Panics
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// ```
    /// use bulkhead::keyed::KeyedBulkhead;
    /// let tenants = KeyedBulkhead::<u64>::builder("api").build()?;
    /// let permit = tenants.acquire_many_owned(&42, 3)?;
    /// std::thread::spawn(move || assert_eq!(permit.num_permits(), 3)).join().unwrap();
    /// assert_eq!(tenants.key_metrics(&42).unwrap().in_flight_calls(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire_many_owned(
        &self,
        key: &K,
        request: impl Into<Request>,
    ) -> Result<OwnedKeyedPermit, BulkheadFull> {
        self.many_owned(
            key,
            request.into(),
            |key, request| key.acquire_many(request),
            |total, request| total.acquire_many_owned(request),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bulkhead::config::BulkheadConfig;

    fn limit(n: usize) -> BulkheadConfig {
        BulkheadConfig::builder().max_concurrent_calls(n).build().unwrap()
    }

    #[test]
    fn total_refusal_releases_the_key_slot() {
        let keyed = KeyedBulkhead::<u8>::builder("k")
            .default_config(limit(2))
            .total(limit(1))
            .build()
            .unwrap();
        let _one = keyed.try_acquire(&1).unwrap();
        assert_eq!(keyed.try_acquire(&2).unwrap_err().bulkhead_name(), "k");
        assert_eq!(keyed.key_metrics(&2).unwrap().in_flight_calls(), 0);
        assert_eq!(keyed.total_metrics().unwrap().in_flight_calls(), 1);
    }
}
