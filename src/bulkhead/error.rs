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

    fn waited(self) -> Duration {
        decode_waited(self.bits() >> WAITED_SHIFT)
    }
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

    pub(crate) fn new(
        name: Name,
        max_concurrent_calls: usize,
        reason: RejectReason,
        waited: Duration,
    ) -> Self {
        BulkheadFull { name, packed: Packed::with(max_concurrent_calls, reason, waited) }
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
    /// one part in two million, rounded up (exact below 4 ms).
    pub fn waited(&self) -> Duration {
        self.packed.waited()
    }
}

impl PartialEq for BulkheadFull {
    fn eq(&self, other: &BulkheadFull) -> bool {
        self.name == other.name
            && (self.max_concurrent_calls(), self.reason(), self.waited())
                == (other.max_concurrent_calls(), other.reason(), other.waited())
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
