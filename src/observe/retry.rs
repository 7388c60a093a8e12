//! When to come back: the estimate a refusal of an observed bulkhead carries
//! ([`BulkheadFull::retry_after`](crate::BulkheadFull::retry_after), issue 32).
//!
//! # The estimator
//!
//! A refused caller that came back and queued would be served by the `needed`-th permit
//! to come back after its refusal: the callers already waiting are served first (FIFO),
//! then it, and a shrink's debt (`available < 0`) is paid before anyone:
//!
//! ```text
//! needed      = waiting + max(1, 1 - available)
//! retry_after = needed × (time between releases)
//! ```
//!
//! The time between releases is measured, not modelled: the bulkhead already counts the
//! calls that finished (its counters, or, for a bulkhead observed by listeners alone, one
//! count here), so a refusal reads that count (at most once per [`LOOK_EVERY`], and only when
//! a window is due) and keeps a moving average of *window length / releases in it*. Under overload the calls in flight are the
//! limit, so by Little's law that interval is `mean hold / limit`, and the estimate is
//! `(waiting + 1) × mean hold / limit`; measuring the release rate instead of the hold time
//! needs no clock read at the grant or the release (the observed paths already count) and
//! stays right when the limit moves or calls are weighted.
//!
//! A window is at least [`MIN_WINDOW`] long and holds about [`RELEASES_PER_WINDOW`]
//! releases (it stretches to `8 ×` the current interval), so one window's sample is an
//! average of several holds; successive samples are blended with weight 1/4 (an average
//! over the last ~4 windows). A window in which nothing came back says the interval is at
//! least a window's share of it: the estimate grows without waiting for a release.
//!
//! # Costs
//!
//! Nothing on an unobserved bulkhead: the state lives behind a `OnceLock` that only the
//! observers' registration fills, and only observed paths look at it. The refusal of a
//! caller the next release would serve carries the bulkhead's encoded estimate (one
//! Relaxed load); one such refusal in [`TICK_EVERY`] of a thread (its first included), and
//! every refusal with a queue or a debt ahead, asks this tracker, which reads the clock (the
//! raw TSC with the feature `tsc`, else `Instant`) and, at most once per [`LOOK_EVERY`],
//! sums the finished counters. Until the first estimate exists, each observed release
//! asks too (the bulkhead's `note_release`): the first look is the releases' to take, so a
//! bulkhead whose calls never finish does not read the clock on every refusal.

use core::time::Duration;

use crate::engine::sync::{AtomicU64, Ordering, SampleClock};

/// The shortest window between two samples of the release rate.
pub(crate) const MIN_WINDOW: Duration = Duration::from_millis(5);

/// How often at most a refusal reads the release count (summing the counters): the other
/// refusals only read the clock and the average.
pub(crate) const LOOK_EVERY: Duration = Duration::from_millis(1);

/// About how many releases a window holds: it lasts at least this many current intervals.
pub(crate) const RELEASES_PER_WINDOW: u64 = 8;

/// The release-rate tracker of an observed bulkhead; see the module docs.
#[derive(Debug)]
pub(crate) struct RetryStats {
    clock: SampleClock,
    /// Releases observed without counters (a listener's `CallFinished`): the counters'
    /// `finished` sum plus this is every observed release.
    untallied: AtomicU64,
    /// When a refusal last read the release count, in the clock's ticks.
    looked: AtomicU64,
    /// [`LOOK_EVERY`] in the clock's ticks (compared without converting).
    look_ticks: u64,
    /// The current window's start, in the clock's ticks.
    window_start: AtomicU64,
    /// Observed releases when the current window started.
    window_finished: AtomicU64,
    /// The moving average of the time between releases, in nanoseconds; 0 until a window
    /// saw a release.
    interval: AtomicU64,
    /// Encodes `interval` as the tail the bulkhead keeps (given by the bulkhead, which owns
    /// the error's layout): see [`interval`](Self::interval).
    tail_of: fn(u64) -> u64,
}

impl RetryStats {
    /// `tail_of` encodes an interval (nanoseconds, 0: none) as the bits a refusal carries
    /// (`BulkheadFull`'s packing, which the layer above owns): called when the average moves.
    pub(crate) fn new(tail_of: fn(u64) -> u64) -> RetryStats {
        let clock = SampleClock::new();
        let start = clock.raw();
        RetryStats {
            untallied: AtomicU64::new(0),
            looked: AtomicU64::new(start),
            look_ticks: clock.ticks(LOOK_EVERY.as_nanos() as u64),
            window_start: AtomicU64::new(start),
            window_finished: AtomicU64::new(0),
            interval: AtomicU64::new(0),
            tail_of,
            clock,
        }
    }

    /// One release seen by an observer other than the counters.
    #[cold]
    pub(crate) fn untallied_release(&self) {
        // Ordering: Relaxed — a statistic; it publishes nothing, and a read-modify-write
        // loses no update whatever the ordering.
        self.untallied.fetch_add(1, Ordering::Relaxed);
    }

    /// The time between releases, in nanoseconds, refreshing it when a look is due (at
    /// most once per [`LOOK_EVERY`]). `counted` sums the counters' finished calls (0 without
    /// counters). `None` until a release was seen. Multiply by the releases a caller needs
    /// ([`releases_needed`]) for its estimate.
    ///
    /// `tail` is the bulkhead's copy of the average, encoded (`tail_of`) as the bits a
    /// `Full` refusal of a caller served by the next release carries (0 while there is no
    /// average): rewritten whenever the average moves. The counted refusal's fast path
    /// reads that cell instead of encoding, and without reaching this tracker (issue 33).
    #[inline]
    pub(crate) fn interval(&self, tail: &AtomicU64, counted: impl FnOnce() -> u64) -> Option<u64> {
        let now = self.clock.raw();
        // Ordering: Relaxed (this load and every other access below) — the estimate is a
        // statistic: no data is published through these fields, a stale value only makes
        // one estimate older, and the window's start and the last look are claimed by
        // compare-exchanges (so one refusal per look sums the counters) whose atomicity,
        // not ordering, is what matters.
        let looked = self.looked.load(Ordering::Relaxed);
        // Ordering: Relaxed — as above.
        let mut interval = self.interval.load(Ordering::Relaxed);
        if now.saturating_sub(looked) >= self.look_ticks
            // Ordering: Relaxed on success and failure — as above.
            && self.looked.compare_exchange(looked, now, Ordering::Relaxed, Ordering::Relaxed).is_ok()
        {
            interval = self.look(now, interval, tail, counted);
        }
        (interval != 0).then_some(interval)
    }

    /// Reads the release count (at most once per [`LOOK_EVERY`]) and, if the window is due,
    /// samples the interval. Returns the interval to use now.
    #[cold]
    fn look(
        &self,
        now: u64,
        interval: u64,
        tail: &AtomicU64,
        counted: impl FnOnce() -> u64,
    ) -> u64 {
        // Ordering: Relaxed — as in `interval`.
        let start = self.window_start.load(Ordering::Relaxed);
        let elapsed = self.clock.nanos(now.saturating_sub(start));
        let window =
            (MIN_WINDOW.as_nanos() as u64).max(interval.saturating_mul(RELEASES_PER_WINDOW));
        if elapsed < window && interval != 0 {
            return interval;
        }
        // Ordering: Relaxed — as in `interval`.
        let total = counted().wrapping_add(self.untallied.load(Ordering::Relaxed));
        // Ordering: Relaxed — as in `interval`.
        let released = total.saturating_sub(self.window_finished.load(Ordering::Relaxed));
        if released == 0 {
            // A whole window (about `RELEASES_PER_WINDOW` intervals) and nothing came back:
            // the interval is at least `elapsed / RELEASES_PER_WINDOW` now. The window keeps
            // its start, so the next sample covers this stretch too. (Taking `elapsed`
            // itself overestimated bursty releases: ten calls of 20 ms that started together
            // come back together, and a window between two bursts saw none; the queued
            // cell's p90 error was 156 ms, benches/results/retry_after.md.)
            let longer =
                if interval == 0 { 0 } else { interval.max(elapsed / RELEASES_PER_WINDOW) };
            self.publish(longer, tail);
            return longer;
        }
        // Ordering: Relaxed on success and failure — as in `interval`: whoever wins the
        // window stores its sample; a loser uses the average it loaded.
        if self
            .window_start
            .compare_exchange(start, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            return interval;
        }
        // Ordering: Relaxed — as in `interval`.
        self.window_finished.store(total, Ordering::Relaxed);
        let sample = (elapsed / released).max(1);
        let blended = if interval == 0 { sample } else { (3 * interval + sample) / 4 };
        self.publish(blended, tail);
        blended
    }

    /// Stores a new average, and its encoded tail in `tail`.
    fn publish(&self, interval: u64, tail: &AtomicU64) {
        // Ordering: Relaxed — as in `interval`: a statistic; a reader that sees the new
        // interval with the old tail (or the reverse) carries an estimate one look older.
        self.interval.store(interval, Ordering::Relaxed);
        // Ordering: Relaxed — as above.
        tail.store((self.tail_of)(interval), Ordering::Relaxed);
    }
}

/// How often a thread's counted refusal reads the clock for the estimate: once per this
/// many of its refusals (the others read the bulkhead's encoded tail; see
/// [`RetryStats::interval`]).
pub(crate) const TICK_EVERY: u64 = 16;

/// How many releases serve a caller refused now: the `waiting` callers ahead, then it, after
/// a shrink's debt (`available < 0`).
pub(crate) fn releases_needed(waiting: usize, available: i64) -> u64 {
    let own = 1i64.saturating_sub(available.min(0)).max(1);
    (waiting as u64).saturating_add(own as u64)
}

#[cfg(all(test, not(any(bulkhead_loom, bulkhead_shuttle))))]
mod tests {
    use super::*;

    #[test]
    fn no_estimate_before_a_release_then_one_per_interval() {
        let stats = RetryStats::new(|nanos| nanos.wrapping_mul(3));
        let tail = AtomicU64::new(0);
        assert_eq!(stats.interval(&tail, || 0), None);
        assert_eq!(tail.load(Ordering::Relaxed), 0, "no average, no tail");
        std::thread::sleep(Duration::from_millis(2));
        // Four releases in at least 2 ms: at least 0.5 ms apart.
        let interval = stats.interval(&tail, || 4).expect("releases seen");
        assert!(interval >= 500_000, "{interval}");
        assert_eq!(tail.load(Ordering::Relaxed), interval * 3);
        // Within the look's period: the same interval, not re-read.
        assert_eq!(stats.interval(&tail, || panic!("not due")), Some(interval));
    }

    /// `look` at `ms` milliseconds after the tracker started, with the average `interval`
    /// (nanoseconds) and `counted` releases seen in all; returns its answer and the tail.
    fn look_at(stats: &RetryStats, ms: u64, interval: u64, counted: u64) -> (u64, u64) {
        let start = stats.window_start.load(Ordering::Relaxed);
        let now = start + stats.clock.ticks(ms * 1_000_000);
        let tail = AtomicU64::new(u64::MAX);
        let answer = stats.look(now, interval, &tail, || counted);
        (answer, tail.load(Ordering::Relaxed))
    }

    fn near(got: u64, want: u64) -> bool {
        // The clock's ticks and nanoseconds convert with a rounding of a few nanoseconds.
        got.abs_diff(want) <= 1_000
    }

    /// The estimator's arithmetic, at chosen instants (cargo-mutants, the refusal's in-diff
    /// run of stop 38: every operator of the blend and of the empty window's stretch
    /// survived, the tests only bounding the estimate from below).
    #[test]
    fn a_window_blends_its_sample_and_an_empty_window_stretches_the_average() {
        let ms = 1_000_000;
        // Within the window (at least 8 intervals of 10 ms): the average, no sample taken.
        let stats = RetryStats::new(|nanos| nanos + 1);
        assert_eq!(look_at(&stats, 40, 10 * ms, 4), (10 * ms, u64::MAX));
        // A window of 100 ms with 4 releases: a sample of 25 ms, blended 3:1 with the 10 ms
        // average: 13.75 ms, published with its tail.
        let (blended, tail) = look_at(&stats, 100, 10 * ms, 4);
        assert!(near(blended, 13_750_000), "{blended}");
        assert_eq!(tail, blended + 1);
        // The first sample is taken whole.
        let first = RetryStats::new(|nanos| nanos + 1);
        let (sample, _) = look_at(&first, 100, 0, 4);
        assert!(near(sample, 25 * ms), "{sample}");
        // A window of 200 ms in which nothing came back: the average is at least an eighth
        // of it, 25 ms (from 10 ms); the window keeps its start.
        let empty = RetryStats::new(|nanos| nanos + 1);
        let (longer, tail) = look_at(&empty, 200, 10 * ms, 0);
        assert!(near(longer, 25 * ms), "{longer}");
        assert_eq!(tail, longer + 1);
        // No estimate out of nothing: without an average, none.
        let none = RetryStats::new(|nanos| nanos + 1);
        assert_eq!(look_at(&none, 200, 0, 0), (0, 1));
    }

    #[test]
    fn releases_needed_counts_the_queue_and_a_shrinks_debt() {
        assert_eq!(releases_needed(0, 0), 1);
        assert_eq!(releases_needed(3, 0), 4);
        assert_eq!(releases_needed(0, -2), 3);
        assert_eq!(releases_needed(2, 5), 3);
    }
}
