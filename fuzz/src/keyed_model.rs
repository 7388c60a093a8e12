//! The sequential model of a keyed bulkhead (issue 13): its live keys with their calls in
//! flight, the fallback key's, the shared total's, and where each held permit is. One model
//! serves the `keyed` fuzz target (`keyed.rs`, also replayed by `tests/fuzz_corpus.rs`) and
//! the proptest reference model (`verification/reference_model.rs`, `mod keyed`), which
//! include this file with `#[path]`.
// Each harness uses part of it.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use bulkhead::keyed::{KeyedBulkhead, KeyedPermit};
use bulkhead::{BulkheadConfig, BulkheadFull, ConfigError};

/// The keys by `'static` reference (a queued acquire borrows its key): `&KEY_REFS[k]` is
/// `&k`.
pub static KEY_REFS: [u8; 8] = [0, 1, 2, 3, 4, 5, 6, 7];

/// A keyed acquire queued at the total (shares only).
pub type Queued<'a> = Pin<Box<dyn Future<Output = Result<KeyedPermit<'a>, BulkheadFull>> + 'a>>;

/// Guaranteed shares of the total (issue 32): every key's default, and key 0's own if any.
#[derive(Clone, Copy, Debug)]
pub struct Shares {
    pub default: u32,
    pub key0: Option<u32>,
}

impl Shares {
    /// `key`'s guarantee.
    pub fn of(&self, key: u8) -> u32 {
        match (key, self.key0) {
            (0, Some(share)) => share,
            _ => self.default,
        }
    }

    /// Whether the builder accepts them with a total of `total` and `max_keys` live keys
    /// (no fallback key: the harnesses give shares only without one): key 0's own share
    /// plus the default for each of `max_keys` keys, at most the total, and a total at all.
    pub fn fit(&self, total: Option<usize>, max_keys: usize) -> bool {
        let any = self.default > 0 || self.key0.is_some_and(|s| s > 0);
        let sum = u64::from(self.key0.unwrap_or(0)) + u64::from(self.default) * max_keys as u64;
        !any || total.is_some_and(|total| sum <= total as u64)
    }
}

/// A keyed bulkhead's configuration, as the harnesses vary it.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub default_limit: usize,
    /// Key 0's own limit.
    pub key0_limit: usize,
    pub total: Option<usize>,
    pub max_keys: usize,
    /// Whether `fallback_key` (the harness's last key) is the fallback key.
    pub fallback: bool,
    /// Guaranteed shares; with them the total's max wait is long (a caller may queue there,
    /// a key's never), so that owners and borrowers can be seen waiting.
    pub shares: Option<Shares>,
}

impl Config {
    /// The keyed bulkhead `name` with this configuration.
    pub fn build(&self, name: &str, fallback_key: u8) -> KeyedBulkhead<u8> {
        self.try_build(name, fallback_key).expect("a valid keyed config")
    }

    /// The keyed bulkhead `name` with this configuration, or the builder's refusal.
    pub fn try_build(
        &self,
        name: &str,
        fallback_key: u8,
    ) -> Result<KeyedBulkhead<u8>, ConfigError> {
        let limit = |n| BulkheadConfig::builder().max_concurrent_calls(n).build().unwrap();
        let mut builder = KeyedBulkhead::<u8>::builder(name)
            .default_config(limit(self.default_limit))
            .key_config(0, limit(self.key0_limit))
            .max_keys(self.max_keys);
        if let Some(total) = self.total {
            let waits = self.shares.map_or(Duration::ZERO, |_| Duration::from_secs(600));
            let total = BulkheadConfig::builder()
                .max_concurrent_calls(total)
                .max_wait_duration(waits)
                .build()
                .unwrap();
            builder = builder.total(total);
        }
        if self.fallback {
            builder = builder.fallback_key(fallback_key);
        }
        if let Some(shares) = self.shares {
            builder = builder.guaranteed_share(shares.default);
            if let Some(share) = shares.key0 {
                builder = builder.key_guaranteed_share(0, share);
            }
        }
        builder.build()
    }
}

/// What an acquire gave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Admitted,
    Key,
    Total,
    TooManyKeys,
}

/// A caller queued at the total (shares only), holding its key slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Waiter {
    /// The harness's name for it.
    pub id: usize,
    pub key: u8,
    /// Asked as an owner (its key within its guarantee when it asked).
    pub owner: bool,
}

pub struct Model {
    pub config: Config,
    /// Callers queued at the total, in arrival order.
    pub waiters: Vec<Waiter>,
    /// Waiters a returning slot was handed to, not yet collected by the harness.
    pub granted: Vec<Waiter>,
    pub fallback_key: u8,
    pub live: BTreeMap<u8, usize>,
    pub fallback_in_flight: usize,
    pub total_in_flight: usize,
    /// Per held permit: `Some(key)` on a live key's bulkhead, `None` on the fallback's.
    pub held: Vec<Option<u8>>,
}

impl Model {
    pub fn new(config: Config, fallback_key: u8) -> Model {
        Model {
            config,
            waiters: Vec::new(),
            granted: Vec::new(),
            fallback_key,
            live: BTreeMap::new(),
            fallback_in_flight: 0,
            total_in_flight: 0,
            held: Vec::new(),
        }
    }

    fn limit(&self, key: u8) -> usize {
        if key == 0 {
            self.config.key0_limit
        } else {
            self.config.default_limit
        }
    }

    /// Where a call for `key` goes (`Some(key)`, `None` for the fallback's bulkhead), or
    /// `Err` for too many keys; creates or evicts keys as the real map does.
    fn route(&mut self, key: u8) -> Result<Option<u8>, Outcome> {
        if self.config.fallback && key == self.fallback_key {
            return Ok(None);
        }
        if self.live.contains_key(&key) {
            return Ok(Some(key));
        }
        if self.live.len() >= self.config.max_keys {
            self.evict_idle();
        }
        if self.live.len() < self.config.max_keys {
            self.live.insert(key, 0);
            Ok(Some(key))
        } else if self.config.fallback {
            Ok(None)
        } else {
            Err(Outcome::TooManyKeys)
        }
    }

    pub fn in_flight(&mut self, on: Option<u8>) -> &mut usize {
        match on {
            Some(key) => self.live.get_mut(&key).expect("routed to a live key"),
            None => &mut self.fallback_in_flight,
        }
    }

    /// Where a call for `key` goes if its key has a free slot (nothing taken yet), or the
    /// refusal: too many keys, or its key full.
    fn key_has_room(&mut self, key: u8) -> Result<Option<u8>, Outcome> {
        let on = self.route(key)?;
        let limit = self.limit(on.unwrap_or(self.fallback_key));
        if *self.in_flight(on) >= limit {
            return Err(Outcome::Key);
        }
        Ok(on)
    }

    /// An acquire of `key`: the outcome, and where the permit is if admitted (not yet
    /// recorded in `held`).
    pub fn acquire(&mut self, key: u8) -> (Outcome, Option<Option<u8>>) {
        let on = match self.key_has_room(key) {
            Ok(on) => on,
            Err(outcome) => return (outcome, None),
        };
        if let Some(total) = self.config.total {
            if self.total_in_flight >= total {
                return (Outcome::Total, None);
            }
            self.total_in_flight += 1;
        }
        *self.in_flight(on) += 1;
        (Outcome::Admitted, Some(on))
    }

    /// An acquire of `key` that may queue at the total (shares only; the keys never wait):
    /// as [`acquire`](Self::acquire), or `Outcome::Total` with the caller queued as waiter
    /// `id`, its key slot held, an owner when its key's calls (its own included) are within
    /// the key's guarantee.
    pub fn acquire_waiting(&mut self, key: u8, id: usize) -> (Outcome, Option<Option<u8>>) {
        let total = self.config.total.expect("shares have a total");
        if self.total_in_flight < total {
            return self.acquire(key);
        }
        let on = match self.key_has_room(key) {
            Ok(on) => on,
            Err(outcome) => return (outcome, None),
        };
        *self.in_flight(on) += 1;
        let guarantee = self.config.shares.map_or(0, |s| s.of(key));
        let owner = guarantee > 0 && *self.in_flight(on) <= guarantee as usize;
        self.waiters.push(Waiter { id, key, owner });
        (Outcome::Total, Some(on))
    }

    /// A queued waiter gives up (its future dropped): its key slot back.
    pub fn cancel(&mut self, id: usize) {
        let i = self.waiters.iter().position(|w| w.id == id).expect("a queued waiter");
        let waiter = self.waiters.remove(i);
        *self.in_flight(Some(waiter.key)) -= 1;
    }

    /// The end of a call on `on`. Its total slot goes to the oldest waiting owner, else the
    /// oldest waiter (all borrowers ask in the default class), else back to the total.
    pub fn release(&mut self, on: Option<u8>) {
        *self.in_flight(on) -= 1;
        if self.config.total.is_some() {
            let next = self.waiters.iter().position(|w| w.owner).or(if self.waiters.is_empty() {
                None
            } else {
                Some(0)
            });
            match next {
                Some(i) => {
                    let waiter = self.waiters.remove(i);
                    // Owners first: no owner left behind a borrower served.
                    assert!(
                        waiter.owner || self.waiters.iter().all(|w| !w.owner),
                        "a borrower served while an owner waits"
                    );
                    self.granted.push(waiter);
                }
                None => self.total_in_flight -= 1,
            }
        }
    }

    /// Drops every idle key; returns how many.
    pub fn evict_idle(&mut self) -> usize {
        let before = self.live.len();
        self.live.retain(|_, in_flight| *in_flight > 0);
        before - self.live.len()
    }

    /// Compares the keyed bulkhead's live keys, each of keys `0..keys` in flight and the
    /// total's with the model.
    pub fn check(&self, keyed: &KeyedBulkhead<u8>, keys: u8, step: usize) {
        assert_eq!(keyed.live_keys(), self.live.len(), "step {step}: live keys");
        for key in 0..keys {
            let real = keyed.key_metrics(&key).map(|m| m.in_flight_calls());
            let expected = if self.config.fallback && key == self.fallback_key {
                Some(self.fallback_in_flight)
            } else {
                self.live.get(&key).copied()
            };
            assert_eq!(real, expected, "step {step}: key {key} in flight");
        }
        let total = keyed.total_metrics().map(|m| m.in_flight_calls());
        assert_eq!(total, self.config.total.map(|_| self.total_in_flight), "step {step}: total");
        if let (Some(limit), Some(metrics)) = (self.config.total, keyed.total_metrics()) {
            assert!(metrics.in_flight_calls() <= limit, "step {step}: the total over-admitted");
            assert_eq!(metrics.waiting_calls(), self.waiters.len(), "step {step}: waiting");
        }
    }
}

/// After the run, with every permit dropped: every slot of the total is back.
pub fn check_total_back(keyed: &KeyedBulkhead<u8>) {
    if let Some(total) = keyed.total_metrics() {
        assert_eq!(total.in_flight_calls(), 0, "every total slot back");
    }
}

/// Polls the queued acquires (`(id, key, future)`) after step `step`: the ones served must
/// be exactly those `model` handed a returning slot to (owners first); their permits join
/// `held`.
pub fn serve_queued<'a>(
    queued: &mut Vec<(usize, u8, Queued<'a>)>,
    held: &mut Vec<KeyedPermit<'a>>,
    model: &mut Model,
    step: usize,
) {
    struct Unwoken;
    impl Wake for Unwoken {
        fn wake(self: Arc<Self>) {}
    }
    let waker = Waker::from(Arc::new(Unwoken));
    let mut cx = Context::from_waker(&waker);
    let mut served = Vec::new();
    queued.retain_mut(|(id, key, fut)| match fut.as_mut().poll(&mut cx) {
        Poll::Pending => true,
        Poll::Ready(Ok(permit)) => {
            held.push(permit);
            model.held.push(Some(*key));
            served.push(*id);
            false
        }
        Poll::Ready(Err(full)) => panic!("step {step}: queued waiter {id} refused: {full}"),
    });
    let mut granted: Vec<usize> = model.granted.drain(..).map(|w| w.id).collect();
    served.sort_unstable();
    granted.sort_unstable();
    assert_eq!(served, granted, "step {step}: the waiters served (owners first)");
}
