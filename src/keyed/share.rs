//! Guaranteed shares of the total: each key may be given a number of the total's slots
//! ([`KeyedBulkheadBuilder::guaranteed_share`](super::KeyedBulkheadBuilder::guaranteed_share),
//! [`key_guaranteed_share`](super::KeyedBulkheadBuilder::key_guaranteed_share)) that it
//! gets back first whenever it wants them, and that any key may use while it does not.
//!
//! # How it is built: the total's classes, no new counter
//!
//! The total stays a plain [`Bulkhead`]: its engine admits, queues and hands over slots as
//! for any bulkhead, so it can never admit past its limit, whatever the shares (there is no
//! check-then-act over two counters to get wrong, the over-admission of Netflix
//! concurrency-limits #234). A share only decides the *class* a caller asks the total in:
//!
//! * an **owner** (its key below its guarantee) asks as [`Criticality::Critical`];
//! * a **borrower** (its key at or above its guarantee, or a key with no guarantee) asks in
//!   its own class, with `Critical` demoted to `Default`, so that no borrower ever competes
//!   with an owner.
//!
//! The engine serves the first waiter of the highest class queued, so a slot that comes back
//! goes to the oldest waiting owner, then to the oldest waiting default borrower, then to
//! sheddable ones (the existing classes, FIFO within each). A non-waiting owner takes a free
//! slot even while borrowers queue (a critical caller takes permits held back for a lower
//! class), and a full waiter queue (`max_waiting_calls`) evicts a borrower to queue an owner.
//!
//! # What "below its guarantee" counts
//!
//! The key's own bulkhead's calls in flight, read once, after the caller took its key slots
//! and before it asks the total: a caller is an owner when that count (its own slots
//! included) is at most the key's guarantee. Every caller holding a key slot either is about
//! to ask the total, waits for it, or holds it, so the count is the key's claims on the total.
//! It is read from the key's word, which the key slot's acquire wrote anyway: no lock, no
//! extra atomic write; a keyed bulkhead without shares does not read it at all.
//!
//! The count never makes too many owners: of the owners of one key holding their key slots
//! at once, the one that read last saw all their slots, so at most `guarantee` of a key's
//! calls are owners at a time. It can make too few: a caller that reads while other callers
//! of its key are between their key slot and the total counts them, and may ask as a borrower
//! although some of them end up refused. The status is fixed when the caller asks: a queued
//! borrower is not promoted when its key's owners finish, nor an owner demoted (it was
//! within its guarantee when it asked). A borrower so left behind waits at most as long as
//! it would without shares; its key's next caller asks as an owner.
//!
//! # The guarantee, exactly
//!
//! With the guarantees summing to at most the total's limit (checked at build), an owner
//! waits for no one but older owners: as long as it waits, fewer owners hold slots than the
//! guarantees sum to, so borrowers hold the rest, and each slot they give back goes to the
//! oldest owner. An owner allowed to wait is thus never refused because borrowers hold its
//! share; it waits at most for the borrowed slots ahead of it to come back. An owner that may
//! not wait (`try_acquire`, or a total whose `max_wait_duration` is zero) is refused `Full`
//! while its share is lent: the total has no slot to give it and does not revoke a lent one.
//! The share lends what it does not use; to reserve slots that are never lent, cap the
//! other keys instead (their `max_concurrent_calls`). Between the two: mark a bulk tenant's
//! calls [`Criticality::Sheddable`] and give the total a
//! [`sheddable_headroom`](crate::BulkheadConfigBuilder::sheddable_headroom) of a few slots.
//! The bulk tenant, a borrower, then leaves those slots free, and an owner (`Critical`)
//! takes one at once instead of waiting for a lent slot to come back: with a closed-loop
//! steady tenant, that wait costs its goodput (`benches/results/shares.md`: -21 to -27 %
//! with shares alone, -4.5 to +1.3 % with a headroom of 2 of 12, at 86 to 89 % utilisation
//! against static partitions' 66 to 69 %).
//!
//! The guarantee is of the total only: a key's own `max_concurrent_calls` still caps it (a
//! share above it is never reached), and the key's own queue is FIFO as before. Shrinking
//! the total at run time ([`KeyedBulkhead::change_total_config`]) below the sum of the
//! guarantees keeps the classes but no longer the guarantee of every owner.
//!
//! # Which verbs
//!
//! Every verb that takes the total asks it in the share's class: the borrowed and owned,
//! blocking, async and timed ones, single or weighted, the `call*` forms (fallible or not,
//! with a [`Request`] or not) and the owned futures
//! ([`acquire_owned_async`](KeyedBulkhead::acquire_owned_async),
//! [`acquire_many_owned_async`](KeyedBulkhead::acquire_many_owned_async),
//! [`call_owned_async`](KeyedBulkhead::call_owned_async), whose class is read when the key's
//! slots are granted, not when the future is built). Only the class changes: the request's
//! permits and its own [`max_wait`](Request::max_wait) reach the total as given (an owner's
//! request is promoted to `Critical`, a borrower's `Critical` demoted to `Default`). The
//! named futures ([`AcquireKeyed`](super::AcquireKeyed),
//! [`AcquireKeyedWithSleep`](super::AcquireKeyedWithSleep)) read the class as the owned
//! ones do, so [`acquire_async_with_sleep`](KeyedBulkhead::acquire_async_with_sleep) keeps
//! its sleeps with shares.

use core::fmt;
use core::hash::{BuildHasher, Hash};
use core::time::Duration;
use std::collections::HashMap;
use std::sync::Arc;

use crate::bulkhead::config::ConfigError;
use crate::bulkhead::error::BulkheadFull;
use crate::bulkhead::permit::OwnedPermit;
use crate::bulkhead::request::Request;
use crate::bulkhead::Bulkhead;
use crate::engine::policy::Criticality;

use super::permit::{take, KeyedPermit, OwnedKeyedPermit};
use super::{KeyedBulkhead, KeyedBulkheadBuilder};

/// The guaranteed shares: every key's default and the keys given their own.
#[derive(Clone, Debug)]
pub(crate) struct Shares<K> {
    default: u32,
    keys: HashMap<K, u32>,
}

impl<K> Default for Shares<K> {
    fn default() -> Self {
        Shares { default: 0, keys: HashMap::new() }
    }
}

impl<K: Eq + Hash + Clone + fmt::Display> Shares<K> {
    pub(crate) fn set_default(&mut self, slots: u32) {
        self.default = slots;
    }

    pub(crate) fn set_key(&mut self, key: K, slots: u32) {
        self.keys.insert(key, slots);
    }

    /// Whether any key has a guarantee (a keyed bulkhead without one reads no share).
    pub(crate) fn is_set(&self) -> bool {
        self.default > 0 || self.keys.values().any(|&slots| slots > 0)
    }

    /// `key`'s guarantee: its own, or the default.
    #[inline]
    pub(crate) fn of(&self, key: &K) -> u32 {
        self.keys.get(key).copied().unwrap_or(self.default)
    }

    /// Checks the shares against the total's limit (`None`: no total) and the bound on live
    /// keys. The default share counts once for every key that may be live without a share
    /// of its own: `max_keys` of them (every explicit key may be idle and evicted), plus the
    /// fallback key unless it has its own share. A guarantee is only one if every key that
    /// can be live at once can hold its share at once.
    pub(crate) fn validate(
        &self,
        total: Option<usize>,
        max_keys: usize,
        fallback: Option<&K>,
    ) -> Result<(), ConfigError> {
        if !self.is_set() {
            return Ok(());
        }
        let Some(total) = total else {
            return Err(ConfigError::new(
                "guaranteed_share",
                self.describe(0, false),
                "a guaranteed share is a share of the total: build with `.total(..)`",
            ));
        };
        let fallback_default = fallback.is_some_and(|key| !self.keys.contains_key(key));
        let default_keys = max_keys as u128 + u128::from(fallback_default);
        let sum = self.keys.values().map(|&s| u128::from(s)).sum::<u128>()
            + u128::from(self.default) * default_keys;
        if sum > total as u128 {
            return Err(ConfigError::new(
                "guaranteed_share",
                self.describe(max_keys, fallback_default),
                format!("the guaranteed shares sum to {sum}, above the total's {total} slots"),
            ));
        }
        Ok(())
    }

    /// The shares as an error names them: `key=slots` for each key of its own (sorted), then
    /// the default times the keys it counts for.
    fn describe(&self, max_keys: usize, fallback_default: bool) -> String {
        let mut keys: Vec<String> =
            self.keys.iter().map(|(key, slots)| format!("{key}={slots}")).collect();
        keys.sort();
        if self.default > 0 {
            let extra = if fallback_default { " + the fallback key" } else { "" };
            keys.push(format!("default={} x {max_keys} keys (max_keys){extra}", self.default));
        }
        keys.join(", ")
    }
}

/// The class a caller of a key with `guarantee` asks the total in, its key having
/// `key_in_flight` calls in flight (the caller's own slots included): `Critical` while within
/// the guarantee (an owner), else its own class with `Critical` demoted to `Default` (a
/// borrower).
#[inline]
pub(crate) fn class_at_total(
    guarantee: u32,
    key_in_flight: usize,
    asked: Criticality,
) -> Criticality {
    if guarantee > 0 && key_in_flight <= guarantee as usize {
        Criticality::Critical
    } else if asked == Criticality::Critical {
        Criticality::Default
    } else {
        asked
    }
}

/// `request` as the total should see it from a caller holding its slots of `key_bulkhead`,
/// its key's guarantee being `guarantee`: [`class_at_total`] read from the key's calls in
/// flight, the request's permits and own max wait kept.
#[inline]
pub(crate) fn at_total(guarantee: u32, key_bulkhead: &Bulkhead, request: Request) -> Request {
    let in_flight = key_bulkhead.in_flight();
    request.criticality(class_at_total(guarantee, in_flight, request.class()))
}

impl<K, S> KeyedBulkheadBuilder<K, S>
where
    K: Eq + Hash + Clone + fmt::Display,
    S: BuildHasher,
{
    /// Gives every key (without a share of its own) a guaranteed share of `slots` of the
    /// total: while a key holds fewer of the total's slots than its share, its callers are
    /// served before every caller of a key at or above its share, whatever their arrival
    /// order; while it does not use them, any key may. See the
    /// [shares section of the module docs](crate::keyed#guaranteed-shares) for what is guaranteed.
    ///
    /// Needs a [`total`](Self::total). The default share counts for every key that may be
    /// live at once: `build` fails with a [`ConfigError`] (key `guaranteed_share`, naming
    /// each key's share and the default) if the keys' own shares plus `slots` times
    /// `max_keys` (plus the fallback key's) exceed the total's `max_concurrent_calls`. So a
    /// default share wants a small `max_keys`; `0` (the default) gives no key a share.
    ///
    /// ```
    /// use std::time::Duration;
    /// use bulkhead::{BulkheadConfig, keyed::KeyedBulkhead};
    /// let config = |n, wait_ms| {
    ///     BulkheadConfig::builder()
    ///         .max_concurrent_calls(n)
    ///         .max_wait_duration(Duration::from_millis(wait_ms))
    ///         .build()
    /// };
    /// let tenants = KeyedBulkhead::<&str>::builder("api")
    ///     .default_config(config(4, 0)?)
    ///     .total(config(4, 1_000)?)
    ///     .max_keys(2)
    ///     .guaranteed_share(2)
    ///     .build()?;
    /// // "acme" is alone: it borrows "zeta"'s idle share and takes all 4 slots.
    /// let acme: Vec<_> = (0..4).map(|_| tenants.try_acquire(&"acme")).collect::<Result<_, _>>()?;
    /// assert_eq!(tenants.total_metrics().unwrap().available_concurrent_calls(), 0);
    /// drop(acme);
    ///
    /// // Too generous: 2 keys x 3 slots is above the total's 4.
    /// let err = KeyedBulkhead::<&str>::builder("api")
    ///     .total(config(4, 0)?)
    ///     .max_keys(2)
    ///     .guaranteed_share(3)
    ///     .build()
    ///     .unwrap_err();
    /// assert_eq!(err.key(), "guaranteed_share");
    /// assert_eq!(err.value(), "default=3 x 2 keys (max_keys)");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn guaranteed_share(mut self, slots: u32) -> Self {
        self.shares.set_default(slots);
        self
    }

    /// Gives `key` a guaranteed share of `slots` of the total, instead of the default
    /// ([`guaranteed_share`](Self::guaranteed_share), which says what a share guarantees).
    /// The keys' own shares plus the default's count must not exceed the total's limit: the
    /// [`ConfigError`] names every key and its share.
    ///
    /// ```
    /// use bulkhead::{BulkheadConfig, keyed::KeyedBulkhead};
    /// let limit = |n| BulkheadConfig::builder().max_concurrent_calls(n).build();
    /// let err = KeyedBulkhead::<&str>::builder("api")
    ///     .total(limit(8)?)
    ///     .key_guaranteed_share("gold", 6)
    ///     .key_guaranteed_share("silver", 3)
    ///     .build()
    ///     .unwrap_err();
    /// assert_eq!(err.value(), "gold=6, silver=3");
    /// let tenants = KeyedBulkhead::<&str>::builder("api")
    ///     .total(limit(8)?)
    ///     .key_guaranteed_share("gold", 6)
    ///     .key_guaranteed_share("silver", 2)
    ///     .build()?;
    /// assert_eq!(tenants.guaranteed_share_of(&"silver"), 2);
    /// assert_eq!(tenants.guaranteed_share_of(&"bronze"), 0);
    /// # Ok::<(), bulkhead::ConfigError>(())
    /// ```
    pub fn key_guaranteed_share(mut self, key: K, slots: u32) -> Self {
        self.shares.set_key(key, slots);
        self
    }
}

impl<K, S> KeyedBulkhead<K, S>
where
    K: Eq + Hash + Clone + fmt::Display,
    S: BuildHasher,
{
    /// `request` as the total should see it from a caller holding its slots of
    /// `key_bulkhead` (the bulkhead of `key`): its class set by `key`'s share, unchanged
    /// without shares.
    #[inline]
    pub(super) fn share_request(
        &self,
        key: &K,
        key_bulkhead: &Bulkhead,
        request: Request,
    ) -> Request {
        match &self.shares {
            None => request,
            Some(shares) => self.share_request_slow(shares, key, key_bulkhead, request),
        }
    }

    #[cold]
    #[inline(never)]
    fn share_request_slow(
        &self,
        shares: &Shares<K>,
        key: &K,
        key_bulkhead: &Bulkhead,
        request: Request,
    ) -> Request {
        at_total(shares.of(key), key_bulkhead, request)
    }

    /// [`try_acquire`](KeyedBulkhead::try_acquire) with shares (so with a total): the key's
    /// slot, then the total's in the share's class.
    #[cold]
    #[inline(never)]
    pub(super) fn try_acquire_shared(&self, key: &K) -> Result<KeyedPermit<'_>, BulkheadFull> {
        let key_permit = self.try_key(key, KeyedPermit::key_slot)?;
        let total = self.total.as_deref().map(|total| {
            total.try_acquire_many(self.share_request(key, &key_permit.key, Request::default()))
        });
        key_permit.with_total(total)
    }

    /// [`acquire`](KeyedBulkhead::acquire) (`wait` `None`) and
    /// [`acquire_timeout`](KeyedBulkhead::acquire_timeout) with shares: the key's slot, then
    /// the total's in the share's class, waiting up to the total's max wait, or what the
    /// key's wait left of `wait`.
    #[cold]
    #[inline(never)]
    pub(super) fn acquire_shared(
        &self,
        key: &K,
        wait: Option<Duration>,
    ) -> Result<KeyedPermit<'_>, BulkheadFull> {
        let clock = crate::engine::sync::Clock::new();
        let start = clock.now();
        let bulkhead = self.bulkhead_for(key)?;
        let (bulkhead, mark) = take(bulkhead, |b| match wait {
            None => b.acquire(),
            Some(wait) => b.acquire_timeout(wait),
        })?;
        let key_permit = KeyedPermit::key_slot(bulkhead, mark);
        let total = self.total.as_deref().map(|total| {
            let request = self.share_request(key, &key_permit.key, Request::default());
            match wait {
                None => total.acquire_many(request),
                Some(wait) => {
                    let left =
                        clock.deadline(start, wait).map_or(wait, |d| clock.between(clock.now(), d));
                    total.acquire_many_timeout(request, left)
                }
            }
        });
        key_permit.with_total(total)
    }

    /// [`acquire_owned`](KeyedBulkhead::acquire_owned) with shares.
    #[cold]
    #[inline(never)]
    pub(super) fn acquire_owned_shared(&self, key: &K) -> Result<OwnedKeyedPermit, BulkheadFull> {
        let (bulkhead, mark) = take(self.bulkhead_for(key)?, Bulkhead::acquire)?;
        let key_permit = OwnedPermit::from_acquired(bulkhead, mark);
        let total = self.total.as_ref().map(|total| {
            let request = self.share_request(key, key_permit.bulkhead(), Request::default());
            total.acquire_many(request).map(|permit| permit.into_owned(Arc::clone(total)))
        });
        OwnedKeyedPermit::both(key_permit, total)
    }

    /// Whether callers ask the total in their share's class.
    #[inline]
    pub(super) fn has_shares(&self) -> bool {
        self.shares.is_some()
    }

    /// `key`'s guaranteed share of the total: its own, the default, or 0 without shares.
    ///
    /// ```
    /// use bulkhead::{BulkheadConfig, keyed::KeyedBulkhead};
    /// let limit = |n| BulkheadConfig::builder().max_concurrent_calls(n).build();
    /// let tenants = KeyedBulkhead::<&str>::builder("api")
    ///     .total(limit(10)?)
    ///     .max_keys(4)
    ///     .guaranteed_share(1)
    ///     .key_guaranteed_share("gold", 5)
    ///     .build()?;
    /// assert_eq!(tenants.guaranteed_share_of(&"gold"), 5);
    /// assert_eq!(tenants.guaranteed_share_of(&"acme"), 1);
    /// # Ok::<(), bulkhead::ConfigError>(())
    /// ```
    pub fn guaranteed_share_of(&self, key: &K) -> u32 {
        self.shares.as_ref().map_or(0, |shares| shares.of(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_ask_critical_borrowers_never_do() {
        use Criticality::*;
        assert_eq!(class_at_total(2, 1, Default), Critical);
        assert_eq!(class_at_total(2, 2, Sheddable), Critical);
        assert_eq!(class_at_total(2, 3, Critical), Default);
        assert_eq!(class_at_total(2, 3, Sheddable), Sheddable);
        assert_eq!(class_at_total(0, 0, Critical), Default);
        assert_eq!(class_at_total(0, 1, Default), Default);
    }

    #[test]
    fn shares_above_the_total_name_the_keys_and_values() {
        let mut shares = Shares::<String>::default();
        shares.set_key("gold".into(), 6);
        shares.set_key("silver".into(), 3);
        shares.set_default(1);
        let err = shares.validate(Some(10), 2, None).unwrap_err();
        assert_eq!(err.key(), "guaranteed_share");
        assert_eq!(err.value(), "gold=6, silver=3, default=1 x 2 keys (max_keys)");
        assert!(err.to_string().contains("sum to 11, above the total's 10"), "{err}");
        assert!(shares.validate(Some(11), 2, None).is_ok());
        let err = shares.validate(Some(11), 2, Some(&"fb".to_owned())).unwrap_err();
        assert!(err.value().ends_with("+ the fallback key"), "{err}");
        assert_eq!(shares.validate(None, 2, None).unwrap_err().key(), "guaranteed_share");
    }
}
