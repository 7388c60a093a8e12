//! Reference-model checking for a keyed bulkhead (issue 13), shared by the `keyed` fuzz
//! target and by `tests/fuzz_corpus.rs` (which includes this file with `#[path]`).
//!
//! [`run_keyed_ops`] decodes bytes into a configuration (a default limit, key 0's own limit,
//! an optional shared total, `max_keys`, an optional fallback key) and a sequence of
//! operations: `try_acquire` and a zero-wait `acquire_async` (polled once) of one of eight
//! keys, `call` of a key (whose closure checks the key is in flight), dropping a held permit
//! and `evict_idle`. After every step it compares the outcome (admitted, refused by the key,
//! by the total, or for too many keys, with the refused key named), the live keys, every
//! key's calls in flight and the total's with a sequential model, and panics with the step
//! number on any difference.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use bulkhead::keyed::{KeyedBulkhead, KeyedFull, KeyedPermit};
use bulkhead::{BulkheadConfig, RejectReason};

const KEYS: u8 = 8;
/// The fallback key, when the configuration has one.
const FALLBACK: u8 = KEYS - 1;
/// At most this many permits held at once; extra acquires are skipped.
const MAX_HELD: usize = 32;

/// A waker for futures that must be ready on their first poll.
struct NoWake;

impl Wake for NoWake {
    fn wake(self: Arc<Self>) {}
}

#[derive(Clone, Copy, Debug)]
struct Config {
    default_limit: usize,
    key0_limit: usize,
    total: Option<usize>,
    max_keys: usize,
    fallback: bool,
}

#[derive(Debug, PartialEq, Eq, Clone, Copy)]
enum Outcome {
    Admitted,
    Key,
    Total,
    TooManyKeys,
}

/// The sequential model (see `verification/reference_model.rs`, `mod keyed`, its proptest
/// twin).
struct Model {
    config: Config,
    live: BTreeMap<u8, usize>,
    fallback_in_flight: usize,
    total_in_flight: usize,
    held: Vec<Option<u8>>,
}

impl Model {
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
        if self.config.fallback && key == FALLBACK {
            return Ok(None);
        }
        if self.live.contains_key(&key) {
            return Ok(Some(key));
        }
        if self.live.len() >= self.config.max_keys {
            self.live.retain(|_, in_flight| *in_flight > 0);
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

    fn in_flight(&mut self, on: Option<u8>) -> &mut usize {
        match on {
            Some(key) => self.live.get_mut(&key).expect("routed to a live key"),
            None => &mut self.fallback_in_flight,
        }
    }

    /// An acquire of `key`: the outcome, and where the permit is if admitted.
    fn acquire(&mut self, key: u8) -> (Outcome, Option<Option<u8>>) {
        let on = match self.route(key) {
            Ok(on) => on,
            Err(outcome) => return (outcome, None),
        };
        let limit = self.limit(on.unwrap_or(FALLBACK));
        if *self.in_flight(on) >= limit {
            return (Outcome::Key, None);
        }
        if let Some(total) = self.config.total {
            if self.total_in_flight >= total {
                return (Outcome::Total, None);
            }
            self.total_in_flight += 1;
        }
        *self.in_flight(on) += 1;
        (Outcome::Admitted, Some(on))
    }

    fn release(&mut self, on: Option<u8>) {
        *self.in_flight(on) -= 1;
        if self.config.total.is_some() {
            self.total_in_flight -= 1;
        }
    }
}

fn outcome_of<T>(result: &Result<T, KeyedFull>, key: u8, step: usize) -> Outcome {
    match result {
        Ok(_) => Outcome::Admitted,
        Err(KeyedFull::Key(full)) => {
            // A fail-fast refusal of a bulkhead that is not closed.
            assert_eq!(full.reason(), RejectReason::Full, "step {step}: key refusal reason");
            Outcome::Key
        }
        Err(KeyedFull::Total(full)) => {
            assert_eq!(full.bulkhead_name(), "fuzz-keyed", "step {step}: total's name");
            Outcome::Total
        }
        Err(KeyedFull::TooManyKeys { key: named, .. }) => {
            assert_eq!(*named, key.to_string(), "step {step}: the refused key is named");
            Outcome::TooManyKeys
        }
        Err(other) => panic!("step {step}: unexpected refusal {other}"),
    }
}

/// Decodes `data` and checks the keyed bulkhead against the model after every step.
pub fn run_keyed_ops(data: &[u8]) {
    if data.len() < 3 {
        return;
    }
    let (head, ops) = data.split_at(3);
    let config = Config {
        default_limit: usize::from(head[0] % 4),
        key0_limit: usize::from((head[0] >> 2) % 5),
        total: (head[1] & 1 == 1).then_some(usize::from((head[1] >> 1) % 6)),
        max_keys: usize::from(head[2] % 5),
        fallback: head[2] & 0x80 != 0,
    };
    if config.max_keys == 0 && !config.fallback {
        // The builder refuses it, naming the key.
        let err = KeyedBulkhead::<u8>::builder("fuzz-keyed").max_keys(0).build().unwrap_err();
        assert_eq!(err.key(), "max_keys");
        return;
    }
    let limit = |n| BulkheadConfig::builder().max_concurrent_calls(n).build().unwrap();
    let mut builder = KeyedBulkhead::<u8>::builder("fuzz-keyed")
        .default_config(limit(config.default_limit))
        .key_config(0, limit(config.key0_limit))
        .max_keys(config.max_keys);
    if let Some(total) = config.total {
        builder = builder.total(limit(total));
    }
    if config.fallback {
        builder = builder.fallback_key(FALLBACK);
    }
    let keyed = builder.build().expect("a valid keyed config");
    let mut model = Model {
        config,
        live: BTreeMap::new(),
        fallback_in_flight: 0,
        total_in_flight: 0,
        held: Vec::new(),
    };
    let mut held: Vec<KeyedPermit<'_>> = Vec::new();
    let waker = Waker::from(Arc::new(NoWake));
    let mut cx = Context::from_waker(&waker);
    for (step, &byte) in ops.iter().enumerate() {
        let key = (byte >> 3) % KEYS;
        match byte % 8 {
            0..=2 if held.len() < MAX_HELD => {
                let result = keyed.try_acquire(&key);
                let got = outcome_of(&result, key, step);
                let (expected, on) = model.acquire(key);
                assert_eq!(got, expected, "step {step}: try_acquire({key})");
                if let (Ok(permit), Some(on)) = (result, on) {
                    held.push(permit);
                    model.held.push(on);
                }
            }
            3 if held.len() < MAX_HELD => {
                // Every limit here is fail-fast: one poll decides.
                let mut fut = pin!(keyed.acquire_async(&key));
                let Poll::Ready(result) = fut.as_mut().poll(&mut cx) else {
                    panic!("step {step}: a zero-wait acquire_async({key}) is pending")
                };
                let got = outcome_of(&result, key, step);
                let (expected, on) = model.acquire(key);
                assert_eq!(got, expected, "step {step}: acquire_async({key})");
                if let (Ok(permit), Some(on)) = (result, on) {
                    held.push(permit);
                    model.held.push(on);
                }
            }
            4 => {
                let result =
                    keyed.call(&key, || keyed.key_metrics(&key).map(|m| m.in_flight_calls()));
                let got = outcome_of(&result, key, step);
                let (expected, on) = model.acquire(key);
                assert_eq!(got, expected, "step {step}: call({key})");
                if let (Ok(seen), Some(on)) = (result, on) {
                    if on == Some(key) || (on.is_none() && key == FALLBACK) {
                        assert_eq!(seen, Some(*model.in_flight(on)), "step {step}: in call");
                    }
                    model.release(on);
                }
            }
            5 | 6 if !held.is_empty() => {
                let i = usize::from(byte >> 3) % held.len();
                drop(held.remove(i));
                let on = model.held.remove(i);
                model.release(on);
            }
            7 => {
                let before = model.live.len();
                model.live.retain(|_, in_flight| *in_flight > 0);
                assert_eq!(keyed.evict_idle(), before - model.live.len(), "step {step}: evicted");
            }
            _ => {}
        }
        assert_eq!(keyed.live_keys(), model.live.len(), "step {step}: live keys");
        for key in 0..KEYS {
            let real = keyed.key_metrics(&key).map(|m| m.in_flight_calls());
            let expected = if config.fallback && key == FALLBACK {
                Some(model.fallback_in_flight)
            } else {
                model.live.get(&key).copied()
            };
            assert_eq!(real, expected, "step {step}: key {key} in flight");
        }
        let total = keyed.total_metrics().map(|m| m.in_flight_calls());
        assert_eq!(total, config.total.map(|_| model.total_in_flight), "step {step}: total");
    }
    drop(held);
    if let Some(total) = keyed.total_metrics() {
        assert_eq!(total.in_flight_calls(), 0, "every total slot back");
    }
}
