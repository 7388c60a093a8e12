//! The rejection error.

use core::fmt;
use core::num::NonZeroU64;
use core::time::Duration;

use crate::observe::name::Name;
use crate::observe::reason::RejectReason;

/// The bulkhead refused a call. Map it like a circuit breaker's "call not permitted":
/// the downstream is temporarily unavailable (HTTP 503, or a fallback).
///
/// Building one allocates nothing and writes no cache line that other threads share: it is
/// a copy of the bulkhead's name (inline for a short name, a pointer to an interned one, see
/// [`Bulkhead::new`](crate::Bulkhead::new)) and one packed word (limit, reason, time
/// waited), so keeping it costs a refusal about as much as tokio's one-byte
/// `TryAcquireError` (`benches/results/latest.md`).
///
/// Its message names the bulkhead and says what happened, a sentence of its own for each
/// [`RejectReason`] (Resilience4j's `is full and does not permit further calls` for
/// [`Full`](RejectReason::Full)), then, in parentheses, the reason, the limit and, for a
/// caller that queued, how long it waited:
///
/// | reason | message |
/// |---|---|
/// | `Full` | `Bulkhead 'bank' is full and does not permit further calls (full; max concurrent calls 1)` |
/// | `WaitTimedOut` | `Bulkhead 'bank' stayed full for the call's whole max wait (wait timed out; max concurrent calls 1; waited 20ms)` |
/// | `TooManyWaiting` | `Bulkhead 'bank' is full and already has as many callers waiting as it allows (too many waiting; max concurrent calls 1)` |
/// | `Closed` | `Bulkhead 'bank' is closed and permits no further calls (closed; max concurrent calls 1)` |
/// | `TooManyKeys` | `Bulkhead 'hosts/a.example' has no room for another key (too many keys; max keys 3)` |
/// | `ExceedsLimit` | `Bulkhead 'bank' cannot grant this request under its current limit (request exceeds the limit; max concurrent calls 1)` |
/// | `Evicted` | `Bulkhead 'bank' evicted the call from its queue to serve another first (evicted from the queue; max concurrent calls 1; waited 3ms)` |
/// | `Reserved` | `Bulkhead 'bank' keeps its remaining free permits for calls that are not sheddable (held back by the sheddable headroom; max concurrent calls 4)` |
///
/// # Examples
///
/// ```
/// use bulkhead::{Bulkhead, BulkheadConfig, RejectReason};
/// let bulkhead = Bulkhead::new("bank", BulkheadConfig::builder().max_concurrent_calls(1).build()?);
/// let _held = bulkhead.try_acquire()?;
/// let err = bulkhead.try_acquire().unwrap_err();
/// assert_eq!(err.bulkhead_name(), "bank");
/// assert_eq!(err.max_concurrent_calls(), 1);
/// assert_eq!(err.reason(), RejectReason::Full);
/// assert!(err.waited().is_zero());
/// assert!(err.to_string().starts_with("Bulkhead 'bank' is full and does not permit further calls"));
/// bulkhead.close();
/// assert_eq!(
///     bulkhead.try_acquire().unwrap_err().to_string(),
///     "Bulkhead 'bank' is closed and permits no further calls (closed; max concurrent calls 1)"
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct BulkheadFull {
    name: Name,
    packed: Packed,
}

/// Limit, reason and time waited in one `u64`, laid out so that the fast paths' refusal is
/// the state word's low half with bit 0 set: one `or` of the word the caller loaded (see
/// [`Packed::refused`]; the compiler finds it from the limit and the closed flag):
///
/// | bits    | field   | meaning                                                           |
/// |---------|---------|-------------------------------------------------------------------|
/// | 0       | –       | one: the word is never zero, which leaves zero to `Option`'s `None` |
/// | 1       | closed  | with reason code 0: `Closed` if set, `Full` if clear              |
/// | 2..=31  | limit   | `max_concurrent_calls` at the refusal (≤ 2^30 − 1)                |
/// | 32..=35 | reason  | 0: decided by bit 1; `k + 1`: `RejectReason::ALL[k]`              |
/// | 36..=63 | waited  | nanoseconds, `m << e` with a 6-bit `e` and a 22-bit `m`, rounded up |
///
/// A refusal that carries a [`retry_after`](BulkheadFull::retry_after) estimate (only an
/// observed bulkhead's, built on its out-of-line paths) sets bit 1 with a reason code that
/// is not 0 (bit 1 means `Closed` only with code 0, so it is free there), and shares the top
/// 28 bits:
///
/// | bits    | field       | meaning                                                     |
/// |---------|-------------|-------------------------------------------------------------|
/// | 36..=51 | waited      | nanoseconds, 6-bit `e`, 10-bit `m`, rounded up              |
/// | 52..=63 | retry after | nanoseconds, 5-bit `e`, 7-bit `m`, rounded up (≤ 272 s)     |
///
/// The fast paths' refusal never has that flag, so it stays one `or` of the word and
/// answers `None`.
#[derive(Clone, Copy)]
struct Packed(NonZeroU64);

const ONE: u64 = 1;
const CLOSED_BIT: u64 = 1 << 1;
const LIMIT_SHIFT: u32 = 2;
const LIMIT_MASK: u64 = (1 << 30) - 1;
const REASON_SHIFT: u32 = 32;
const REASON_MASK: u64 = 0xf;
const WAITED_SHIFT: u32 = 36;
const MANTISSA_BITS: u32 = 22;
const MANTISSA_MASK: u64 = (1 << MANTISSA_BITS) - 1;
/// With a retry estimate: the waited field's mantissa bits (its exponent keeps 6) ...
const SHORT_WAITED_MANTISSA: u32 = 10;
/// ... and the retry estimate's, above it at bit 52 (exponent 5 bits).
const RETRY_SHIFT: u32 = 52;
const RETRY_MANTISSA: u32 = 7;
const RETRY_EXPONENT: u32 = 5;

// Reason codes are 1 + the index, in 4 bits.
const _: () = assert!(RejectReason::ALL.len() < 16);
// The limit fits its 30 bits.
const _: () = assert!(crate::engine::state::MAX_PERMITS as u64 <= LIMIT_MASK);

impl Packed {
    /// A refusal decided by the state word alone (the fast paths): `Closed` or `Full`, no
    /// wait. Written as the word's own bits so that it compiles to one `or` of the word.
    #[inline]
    fn refused(limit: usize, closed: bool) -> Packed {
        Packed::from(((limit as u64 & LIMIT_MASK) << LIMIT_SHIFT) | (u64::from(closed) << 1))
    }

    #[inline]
    fn from(bits: u64) -> Packed {
        Packed(NonZeroU64::MIN | bits)
    }

    #[inline]
    fn bits(self) -> u64 {
        self.0.get() & !ONE
    }

    /// Any other refusal: an explicit reason and the time waited. The limit saturates at
    /// 2^30 − 1 (a keyed bulkhead's `max_keys`, reported by `TooManyKeys`, may exceed any
    /// engine limit).
    fn with(limit: usize, reason: RejectReason, waited: Duration) -> Packed {
        let limit = (limit as u64).min(LIMIT_MASK) << LIMIT_SHIFT;
        let reason = (reason.index() as u64 + 1) << REASON_SHIFT;
        Packed::from(limit | reason | (encode_waited(waited) << WAITED_SHIFT))
    }

    fn limit(self) -> usize {
        ((self.bits() >> LIMIT_SHIFT) & LIMIT_MASK) as usize
    }

    fn reason(self) -> RejectReason {
        match (self.bits() >> REASON_SHIFT) & REASON_MASK {
            0 if self.bits() & CLOSED_BIT != 0 => RejectReason::Closed,
            0 => RejectReason::Full,
            code => RejectReason::ALL[code as usize - 1],
        }
    }

    /// As [`with`](Self::with), carrying `retry` too (`reason` is never `Closed` here).
    fn with_retry(limit: usize, reason: RejectReason, waited: Duration, retry: Duration) -> Packed {
        let base = Packed::with(limit, reason, Duration::ZERO).bits();
        let waited = encode_float(nanos_of(waited), SHORT_WAITED_MANTISSA, 6);
        let retry = encode_float(nanos_of(retry), RETRY_MANTISSA, RETRY_EXPONENT);
        Packed::from(base | CLOSED_BIT | (waited << WAITED_SHIFT) | (retry << RETRY_SHIFT))
    }

    /// Whether the refusal carries a retry estimate: bit 1 with an explicit reason code.
    fn has_retry(self) -> bool {
        self.bits() & CLOSED_BIT != 0 && (self.bits() >> REASON_SHIFT) & REASON_MASK != 0
    }

    fn waited(self) -> Duration {
        if self.has_retry() {
            let bits = (self.bits() >> WAITED_SHIFT) & ((1 << (SHORT_WAITED_MANTISSA + 6)) - 1);
            return Duration::from_nanos(decode_float(bits, SHORT_WAITED_MANTISSA));
        }
        decode_waited(self.bits() >> WAITED_SHIFT)
    }

    fn retry_after(self) -> Option<Duration> {
        self.has_retry()
            .then(|| Duration::from_nanos(decode_float(self.bits() >> RETRY_SHIFT, RETRY_MANTISSA)))
    }
}

/// The bits a `Full` refusal with no wait and a retry estimate of `retry_nanos` has above
/// the limit ([`BulkheadFull::retry_bits`]); 0 for no estimate (`retry_nanos` 0).
/// Computed when the estimate changes, so that the counted refusal only `or`s them in.
pub(crate) fn retry_tail(retry_nanos: u64) -> u64 {
    if retry_nanos == 0 {
        return 0;
    }
    let full = (RejectReason::Full.index() as u64 + 1) << REASON_SHIFT;
    let retry = encode_float(retry_nanos, RETRY_MANTISSA, RETRY_EXPONENT);
    // The waited field (bits 36..=51) stays zero: a fast refusal waited nothing.
    CLOSED_BIT | full | (retry << RETRY_SHIFT)
}

fn nanos_of(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// `nanos` as `m << e` in `mantissa + exponent` bits, rounded up; past the largest value
/// those bits hold, that value.
fn encode_float(nanos: u64, mantissa: u32, exponent: u32) -> u64 {
    let max_m = (1u64 << mantissa) - 1;
    let max_e = (1u64 << exponent) - 1;
    // The smallest `e` with `nanos >> e` within the mantissa, then rounded up (which may
    // carry into one more bit, hence the second step). No loop: two shifts.
    let mut e = u64::from((64 - nanos.leading_zeros()).saturating_sub(mantissa));
    let ceil = |e: u64| (nanos >> e) + u64::from(nanos & ((1u64 << e) - 1) != 0);
    let mut m = ceil(e);
    if m > max_m {
        e += 1;
        m = ceil(e);
    }
    if e > max_e {
        return (max_e << mantissa) | max_m;
    }
    (e << mantissa) | m
}

fn decode_float(bits: u64, mantissa: u32) -> u64 {
    let e = (bits >> mantissa) as u32;
    let m = bits & ((1 << mantissa) - 1);
    m.checked_shl(e).filter(|n| n >> e == m).unwrap_or(u64::MAX)
}

/// `waited` in 28 bits: `m << e` nanoseconds, the smallest `e` (6 bits) for which the
/// mantissa `m` (22 bits), rounded up, fits. Exact below 4.2 ms; above, rounded up by less
/// than one part in two million (under 50 ns for 100 ms), so never below the time waited.
/// Waits beyond `u64::MAX` nanoseconds (584 years) saturate there.
fn encode_waited(waited: Duration) -> u64 {
    let nanos = u64::try_from(waited.as_nanos()).unwrap_or(u64::MAX);
    let mut e = 0;
    // Round up: `ceil(nanos / 2^e)`.
    let mut m = nanos;
    while m > MANTISSA_MASK {
        e += 1;
        m = (nanos >> e) + u64::from(nanos & ((1 << e) - 1) != 0);
    }
    (e << MANTISSA_BITS) | m
}

fn decode_waited(bits: u64) -> Duration {
    let e = (bits >> MANTISSA_BITS) as u32;
    let m = bits & MANTISSA_MASK;
    // `m << e` may exceed u64 only for a saturated wait; keep it there.
    let nanos = m.checked_shl(e).filter(|n| n >> e == m).unwrap_or(u64::MAX);
    Duration::from_nanos(nanos)
}

impl BulkheadFull {
    /// The refusal of a fast path: `Closed` if `closed`, `Full` otherwise, no wait.
    #[inline]
    pub(crate) fn refused(name: Name, limit: usize, closed: bool) -> Self {
        BulkheadFull { name, packed: Packed::refused(limit, closed) }
    }

    /// The counted fast refusal's word, the name aside ([`from_bits`](Self::from_bits)
    /// makes the error): [`refused`](Self::refused) as `Full`, carrying the retry estimate
    /// encoded in `tail` ([`retry_tail`]; 0: none). One `or`.
    #[inline(always)]
    pub(crate) fn retry_bits(limit: usize, tail: u64) -> NonZeroU64 {
        Packed::from(Packed::refused(limit, false).bits() | tail).0
    }

    /// A refusal of `name` from the word of another refusal ([`bits`](Self::bits)): the
    /// counted refusal's paths meet on this one register, and build the error once.
    #[inline(always)]
    pub(crate) fn from_bits(name: Name, bits: NonZeroU64) -> Self {
        BulkheadFull { name, packed: Packed(bits) }
    }

    /// This refusal's word (limit, reason, waited, retry estimate), its name aside.
    #[inline(always)]
    pub(crate) fn bits(&self) -> NonZeroU64 {
        self.packed.0
    }

    pub(crate) fn new(
        name: Name,
        max_concurrent_calls: usize,
        reason: RejectReason,
        waited: Duration,
    ) -> Self {
        BulkheadFull { name, packed: Packed::with(max_concurrent_calls, reason, waited) }
    }

    /// This refusal, carrying `retry` as its [`retry_after`](Self::retry_after) (for an
    /// observed bulkhead's refusals; `Closed` never carries one).
    pub(crate) fn with_retry_after(self, retry: Option<Duration>) -> Self {
        match retry {
            Some(retry) if self.reason() != RejectReason::Closed => {
                // A fast refusal (`Full`, no wait) needs no decoding of the wait.
                let waited = if self.packed.bits() >> WAITED_SHIFT == 0 {
                    Duration::ZERO
                } else {
                    self.waited()
                };
                let (limit, reason) = (self.max_concurrent_calls(), self.reason());
                BulkheadFull {
                    name: self.name,
                    packed: Packed::with_retry(limit, reason, waited, retry),
                }
            }
            _ => self,
        }
    }

    /// When a slot is likely to be free for this caller, if the bulkhead can tell: an
    /// estimate from what the bulkhead saw, for a client deciding when to come back (an
    /// HTTP `Retry-After`).
    ///
    /// `Some` for a refusal by an *observed* bulkhead (counters on, a listener registered,
    /// or registered with `metrics_export`) once it has seen calls finish; `None` for an
    /// unobserved bulkhead (whose refusal stays one load and pays nothing for this), before
    /// any call finished, and for [`Closed`](RejectReason::Closed),
    /// [`ExceedsLimit`](RejectReason::ExceedsLimit), [`Reserved`](RejectReason::Reserved)
    /// and [`TooManyKeys`](RejectReason::TooManyKeys) (no release frees a slot for them).
    ///
    /// The estimate is *the time until as many calls came back as would serve this caller
    /// if it queued now*: `(waiting + 1 + debt) × interval`, where `waiting` is the callers
    /// queued ahead, `debt` what a shrink left to pay, and `interval` the measured time
    /// between two releases (a moving average over windows of about 8 releases, at least
    /// 5 ms). Under overload that is `(waiting + 1) × mean hold / limit` (Little's law).
    /// Accuracy on a real overload, against naive estimates, and what honouring it buys a
    /// client: `benches/results/retry_after.md` and the overload chapter of `docs/`.
    /// Kept to within one part in 128, rounded up; at most about 272 s.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use bulkhead::{Bulkhead, BulkheadConfig};
    ///
    /// let bank = Bulkhead::new("bank", BulkheadConfig::builder().max_concurrent_calls(1).build()?);
    /// // Unobserved: no estimate.
    /// let held = bank.try_acquire()?;
    /// assert_eq!(bank.try_acquire().unwrap_err().retry_after(), None);
    /// drop(held);
    ///
    /// bank.enable_counters(); // observed from now on
    /// let held = bank.try_acquire()?;
    /// std::thread::sleep(Duration::from_millis(2));
    /// drop(held); // a call finished: the bulkhead has seen a release
    /// let _busy = bank.try_acquire()?;
    /// let refused = bank.try_acquire().unwrap_err();
    /// let retry = refused.retry_after().expect("observed, and a call finished");
    /// assert!(retry > Duration::ZERO);
    /// // An HTTP `Retry-After` is whole seconds, rounded up, at least 1:
    /// let header = retry.as_secs() + u64::from(retry.subsec_nanos() > 0);
    /// assert_eq!(header.max(1), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn retry_after(&self) -> Option<Duration> {
        self.packed.retry_after()
    }

    /// The name of the bulkhead that refused the call.
    pub fn bulkhead_name(&self) -> &str {
        self.name.as_str()
    }

    /// The limit when the call was refused (for [`RejectReason::TooManyKeys`], the keyed
    /// bulkhead's `max_keys`).
    pub fn max_concurrent_calls(&self) -> usize {
        self.packed.limit()
    }

    /// Why the call was refused.
    pub fn reason(&self) -> RejectReason {
        self.packed.reason()
    }

    /// How long the caller waited, measured from the start of the call: at least the allowed
    /// wait for [`RejectReason::WaitTimedOut`], how long it queued for
    /// [`RejectReason::Evicted`] (zero for an unbounded async wait that began unobserved:
    /// it never read the clock), zero for the other reasons. Kept to within
    /// one part in two million, rounded up (exact below 4 ms); on a refusal that also carries
    /// a [`retry_after`](Self::retry_after), to one part in a thousand, rounded up.
    pub fn waited(&self) -> Duration {
        self.packed.waited()
    }
}

impl PartialEq for BulkheadFull {
    fn eq(&self, other: &BulkheadFull) -> bool {
        self.name == other.name
            && (self.max_concurrent_calls(), self.reason(), self.waited(), self.retry_after())
                == (
                    other.max_concurrent_calls(),
                    other.reason(),
                    other.waited(),
                    other.retry_after(),
                )
    }
}

impl Eq for BulkheadFull {}

impl fmt::Debug for BulkheadFull {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BulkheadFull")
            .field("name", &self.name)
            .field("max_concurrent_calls", &self.max_concurrent_calls())
            .field("reason", &self.reason())
            .field("waited", &self.waited())
            .field("retry_after", &self.retry_after())
            .finish()
    }
}

impl fmt::Display for BulkheadFull {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let reason = self.reason();
        let limit =
            if reason == RejectReason::TooManyKeys { "max keys" } else { "max concurrent calls" };
        write!(
            f,
            "Bulkhead '{}' {} ({}; {limit} {}",
            self.name,
            reason.sentence(),
            reason,
            self.max_concurrent_calls()
        )?;
        // Only a caller that queued waited (`WaitTimedOut`, `Evicted`).
        let waited = self.waited();
        if !waited.is_zero() {
            write!(f, "; waited {waited:?}")?;
        }
        f.write_str(")")
    }
}

impl std::error::Error for BulkheadFull {}

#[cfg(test)]
mod tests {
    use super::*;

    fn name() -> Name {
        Name::new("bank".to_owned())
    }

    #[test]
    fn a_fast_refusal_decodes_its_limit_and_reason() {
        for limit in [0, 1, 16, crate::engine::state::MAX_PERMITS] {
            for closed in [false, true] {
                let full = BulkheadFull::refused(name(), limit, closed);
                assert_eq!(full.max_concurrent_calls(), limit);
                let reason = if closed { RejectReason::Closed } else { RejectReason::Full };
                assert_eq!(full.reason(), reason);
                assert_eq!(full.waited(), Duration::ZERO);
                assert_eq!(full, BulkheadFull::new(name(), limit, reason, Duration::ZERO));
            }
        }
    }

    #[test]
    fn the_counted_refusals_ready_tail_encodes_as_the_full_computation_does() {
        // `retry_bits(retry_tail(n))` (the counted refusal's inline path) is the refusal
        // `with_retry_after` builds from the same estimate (its out-of-line paths).
        let fast =
            |limit, tail| BulkheadFull::from_bits(name(), BulkheadFull::retry_bits(limit, tail));
        assert_eq!(fast(4, retry_tail(0)).retry_after(), None);
        for limit in [1, 16, crate::engine::state::MAX_PERMITS] {
            for nanos in [1, 127, 128, 129, 40_000, 999_999, 20_000_001, 3_000_000_000, u64::MAX] {
                let fast = fast(limit, retry_tail(nanos));
                let slow = BulkheadFull::refused(name(), limit, false)
                    .with_retry_after(Some(Duration::from_nanos(nanos)));
                assert_eq!(fast, slow, "limit {limit}, {nanos} ns");
                assert_eq!(fast.retry_after(), slow.retry_after());
                assert_eq!(fast.reason(), RejectReason::Full);
                assert_eq!(fast.max_concurrent_calls(), limit);
                assert_eq!(fast.waited(), Duration::ZERO);
            }
        }
    }

    #[test]
    fn a_retry_estimate_keeps_the_reason_limit_and_wait_and_is_never_below_itself() {
        assert_eq!(BulkheadFull::refused(name(), 4, false).retry_after(), None);
        for reason in RejectReason::ALL {
            for retry in [0, 1, 127, 128, 129, 999_999, 20_000_001, 3_000_000_000, u64::MAX / 7] {
                let retry = Duration::from_nanos(retry);
                let waited = Duration::from_micros(3_333);
                let full =
                    BulkheadFull::new(name(), 9, reason, waited).with_retry_after(Some(retry));
                assert_eq!((full.reason(), full.max_concurrent_calls()), (reason, 9));
                if reason == RejectReason::Closed {
                    assert_eq!(full.retry_after(), None);
                    assert_eq!(full.waited(), waited);
                    continue;
                }
                // Rounded up, to within one part in 128 (below the 272 s cap).
                let got = full.retry_after().expect("carried");
                let cap = Duration::from_nanos(127 << 31);
                assert!(got >= retry.min(cap), "{got:?} < {retry:?}");
                assert!(got.as_nanos() <= retry.as_nanos() + retry.as_nanos() / 64 + 1, "{got:?}");
                // The wait to within one part in a thousand, rounded up.
                assert!(full.waited() >= waited && full.waited() <= waited + waited / 512);
            }
        }
        let plain = BulkheadFull::new(name(), 1, RejectReason::Full, Duration::ZERO);
        assert_eq!(plain.clone().with_retry_after(None), plain);
        assert_ne!(plain.clone().with_retry_after(Some(Duration::from_millis(5))), plain);
    }

    #[test]
    fn every_reason_and_limit_survive_the_packing() {
        for reason in RejectReason::ALL {
            for limit in [0, 7, crate::engine::state::MAX_PERMITS] {
                let full = BulkheadFull::new(name(), limit, reason, Duration::from_millis(3));
                assert_eq!((full.reason(), full.max_concurrent_calls()), (reason, limit));
                assert_eq!(full.bulkhead_name(), "bank");
            }
        }
    }

    #[test]
    fn waited_is_never_below_the_wait_and_close_to_it() {
        let mut waits: Vec<u64> = vec![0, 1, 999, MANTISSA_MASK, MANTISSA_MASK + 1, 20_000_000];
        waits.extend([100_000_001, 1_000_000_007, 3_600_000_000_013, u64::MAX / 3, u64::MAX]);
        waits.extend((0..64).map(|shift| (1u64 << shift) + 1));
        for nanos in waits {
            let wait = Duration::from_nanos(nanos);
            let got = decode_waited(encode_waited(wait));
            assert!(got >= wait, "{got:?} < {wait:?}");
            // Within one part in two million (2^-21), exact below 2^22 ns.
            let slack = if nanos <= MANTISSA_MASK { 0 } else { (nanos >> 21) + 1 };
            assert!(got.as_nanos() - wait.as_nanos() <= u128::from(slack), "{got:?} for {wait:?}");
        }
        // Longer than u64 nanoseconds: saturates there.
        assert_eq!(decode_waited(encode_waited(Duration::MAX)), Duration::from_nanos(u64::MAX));
        let full = BulkheadFull::new(name(), 1, RejectReason::WaitTimedOut, Duration::MAX);
        assert_eq!(full.reason(), RejectReason::WaitTimedOut);
    }

    #[test]
    fn every_reason_has_a_sentence_of_its_own_and_only_full_says_full() {
        let mut sentences = std::collections::HashSet::new();
        for reason in RejectReason::ALL {
            let text = BulkheadFull::new(name(), 3, reason, Duration::ZERO).to_string();
            let head = format!("Bulkhead 'bank' {} ({reason}; ", reason.sentence());
            assert!(text.starts_with(&head), "{text}");
            assert!(sentences.insert(reason.sentence()), "{reason:?} shares its sentence");
            let full = text.contains("is full and does not permit further calls");
            assert_eq!(full, reason == RejectReason::Full, "{text}");
        }
    }

    #[test]
    fn the_error_is_small_and_option_costs_nothing() {
        assert_eq!(core::mem::size_of::<BulkheadFull>(), 32);
        assert_eq!(core::mem::size_of::<Option<BulkheadFull>>(), 32);
    }
}
