//! The refusal's tail (issue 33): the latency of each refused `try_acquire` while other
//! threads acquire and release permits on the same instance, as percentiles of an HDR-style
//! histogram, for our bulkhead, tokio's `Semaphore::try_acquire` and async-lock's, next to
//! two floors measured under the same churn.
//!
//! ```text
//! cargo bench --no-run --bench refusal_tail
//! target/release/deps/refusal_tail-<hash> --iters=1000000 --churners=1,2,4 --runs=3
//! target/release/deps/refusal_tail-<hash> --iters=1000000 --churners=1,2,4 --runs=3 --pace=1000
//! ```
//!
//! (`cargo bench --bench refusal_tail` runs the first with its defaults, which are those
//! above; it prints markdown tables to stdout and progress to stderr.
//! `benches/results/refusal_tail.md` holds both commands' output and a reading.)
//!
//! # What one slice measures
//!
//! `c` churner threads loop on one instance with `c` permits: take a permit if one is free,
//! hold it for `--hold` `spin_loop` hints, release it. The state word's cache line moves
//! between cores at every acquire and release. Meanwhile the measuring thread (the main
//! thread) times single `try_acquire` calls on the same instance. With every permit held it
//! is refused; between a release and the next acquire it may find a permit free and take it:
//! such a call is a *grant*, dropped at once (outside the timed window), counted and not
//! recorded. After a grant the measured thread waits twice a churner's hold before its next
//! call, so that the churners, not the measured thread, retake the permit: without that
//! wait it out-raced them (it holds nothing) and only 19-66 % of its calls were refusals at
//! `--hold=8` (one trial run at 300 000 refusals per cell); with it, 64-91 %.
//!
//! The limit is the number of churners (`--limit=N` overrides it), so with every churner
//! holding a permit the instance is full. Each churner count is measured in `--rounds`
//! slices per subject, interleaved: a slice starts fresh churners on a fresh instance, makes
//! `--warmup` calls it discards, then records `--iters / --rounds` refusals (or stops after
//! `--max-secs`, which the tables then show as fewer refusals). A subject's slices are merged
//! into one histogram per churner count and run, so each subject's samples are spread over
//! the same minutes as its peers' and a burst of load from other jobs lands on all of them.
//!
//! # Timing: one `Instant` pair per call
//!
//! Each call is bracketed by two `Instant::now()` reads and the difference recorded, clock
//! cost included. On Linux with the TSC clocksource `Instant::now()` is the vDSO's
//! `clock_gettime`, which reads the counter fenced (`rdtsc_ordered`), so the second read
//! waits for the measured load to complete. The reads cost more than the refusal
//! itself, so the p50 is mostly the clock: the `floor/clock` row (two back-to-back reads, no
//! call between, same churn on other threads) is that cost with its own percentiles; a row's
//! p50 minus the floor's p50 is roughly the call. Batching (one pair around k calls) would
//! make the median sharper but would smear the tail: one preempted or cache-missing call
//! would be averaged with k - 1 quick ones, and the percentile would no longer be of calls.
//! The tail is what this bench is for, so it times each call. The TSC read without the OS
//! clock (`rdtsc`) needs `unsafe`, which this crate forbids, benches included, and would not
//! be finer here: the header prints the clock's back-to-back differences at rest, and on the
//! 2-core VM this was written on they come in steps of 10 ns (20 or 30 ns), the step of its
//! TSC. Percentiles are therefore multiples of that step (20/21, 30/31, ... after the
//! conversion to ns), and two subjects within one step of each other are not told apart by
//! a percentile. The mean is finer: where a call starts within a step varies, so the
//! rounding averages out over a million calls. The plain mean also carries the preemptions
//! (one 8 ms reading in a million adds 8 ns), so the tables also give the mean of the
//! readings up to 1 µs.
//!
//! `floor/load` times one Relaxed load of an `AtomicU64` that the churners take and return
//! permits on (a compare-exchange and a `fetch_add`, as in `benches/contention.rs`), and
//! records the loads that saw no free permit: the hardware floor of a refusal that is one
//! load of a bouncing line.
//!
//! # Same run, interleaved
//!
//! One invocation makes `--runs` runs; each run measures every churner count, and for each
//! count runs `--rounds` rounds of slices: `floor/clock`, then the three semaphores in an
//! order rotated by one per round and per run (ours, tokio, async-lock; then tokio,
//! async-lock, ours; ...), then `floor/load`. Threads are not pinned (pinning needs a
//! dependency and `unsafe`); with 2 cores, 2 and 4 churners oversubscribe the machine, and
//! the scheduler's time slices are part of what is measured: the floors show how much.
//!
//! # Paced churn (`--pace=NS`)
//!
//! Free-running churners turn permits over as fast as each implementation lets them, and
//! the implementations differ: tokio's release takes its waiter list's mutex before it
//! returns the permit (`batch_semaphore::release` in tokio 1.54), so its churners take and
//! return fewer permits per second (the `churn` column) and write the line less often, and
//! its refusals meet fewer invalidations. That is a real property of tokio under churn, but
//! it is not its refusal path. With `--pace=NS` each churner holds its permit until its next
//! slot (one every `NS` ns) instead of for `--hold` spins, so every subject's line is
//! written at about the same rate, and what differs is the refusal itself.
//!
//! # The histogram
//!
//! Written here, no dependency: exact 1 ns buckets below 1 024 ns, then 128 buckets per
//! power of two (each at most 1/128 = 0.78 % wide). A percentile is the highest value of the
//! bucket holding that rank (as HdrHistogram reports it), capped at the exact maximum.

use std::hint::{black_box, spin_loop};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use bulkhead::Bulkhead;

mod common;

/// Below this many nanoseconds every value has its own bucket.
const LINEAR: u64 = 1024;
/// Sub-buckets per power of two above `LINEAR`, as a power of two.
const SUB_BITS: u32 = 7;
/// log2(LINEAR).
const LINEAR_BITS: u32 = 10;

/// A log-linear histogram of nanoseconds.
#[derive(Clone)]
struct Histogram {
    counts: Vec<u64>,
    total: u64,
    max: u64,
    sum: u128,
}

impl Histogram {
    fn new() -> Self {
        let buckets = LINEAR as usize + (64 - LINEAR_BITS as usize) * (1 << SUB_BITS);
        Self { counts: vec![0; buckets], total: 0, max: 0, sum: 0 }
    }

    fn index(value: u64) -> usize {
        if value < LINEAR {
            return value as usize;
        }
        let msb = 63 - value.leading_zeros();
        let shift = msb - SUB_BITS;
        let sub = ((value >> shift) & ((1 << SUB_BITS) - 1)) as usize;
        LINEAR as usize + ((msb - LINEAR_BITS) as usize) * (1 << SUB_BITS) + sub
    }

    /// The lowest and highest value of bucket `index`.
    fn bounds(index: usize) -> (u64, u64) {
        if index < LINEAR as usize {
            return (index as u64, index as u64);
        }
        let above = index - LINEAR as usize;
        let msb = LINEAR_BITS + (above >> SUB_BITS) as u32;
        let sub = (above & ((1 << SUB_BITS) - 1)) as u64;
        let shift = msb - SUB_BITS;
        let low = ((1 << SUB_BITS) + sub) << shift;
        (low, low + ((1u64 << shift) - 1))
    }

    #[inline]
    fn record(&mut self, nanos: u64) {
        self.counts[Self::index(nanos)] += 1;
        self.total += 1;
        self.max = self.max.max(nanos);
        self.sum += u128::from(nanos);
    }

    /// The exact mean. Each reading is rounded to the clock's step, but where the call
    /// starts within a step varies from call to call, so the rounding averages out.
    fn mean(&self) -> f64 {
        self.sum as f64 / self.total.max(1) as f64
    }

    /// The exact mean of the values up to 1 000 ns (each has its own bucket there): the
    /// calls, without the preemptions and interrupts that a single 8 ms reading in a
    /// million adds 8 ns of to the plain mean.
    fn mean_below_1us(&self) -> f64 {
        let (mut n, mut sum) = (0u64, 0u64);
        for (nanos, &count) in self.counts[..=1000].iter().enumerate() {
            n += count;
            sum += nanos as u64 * count;
        }
        sum as f64 / n.max(1) as f64
    }

    /// How many values are above `nanos` (exact below 1 024 ns; above, to the bucket
    /// holding `nanos`, at most 0.78 % wide).
    fn above(&self, nanos: u64) -> u64 {
        self.counts[Self::index(nanos) + 1..].iter().sum()
    }

    /// The value at percentile `p` (0 < p <= 100): the highest value of the bucket holding
    /// rank ceil(p% of total), capped at the maximum.
    fn percentile(&self, p: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((p / 100.0 * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (index, &count) in self.counts.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return Self::bounds(index).1.min(self.max);
            }
        }
        self.max
    }

    /// Checks the bucket layout once at start: every value falls in a bucket whose bounds
    /// hold it, indices never decrease, and no bucket is wider than 1/128 of its low end.
    fn self_check() {
        let mut last = 0;
        let mut value = 0u64;
        while value < u64::MAX / 3 {
            for v in [value, value + 1, value.saturating_mul(2).saturating_sub(1)] {
                let index = Self::index(v);
                let (low, high) = Self::bounds(index);
                assert!(low <= v && v <= high, "{v} outside bucket {index} [{low}, {high}]");
                assert!(high - low <= low >> SUB_BITS, "bucket {index} too wide");
            }
            let index = Self::index(value);
            assert!(index >= last, "index of {value} went down");
            last = index;
            value += value / 4 + 1;
        }
        assert_eq!(Self::index(u64::MAX), Self::new().counts.len() - 1);
    }
}

/// How long a churner holds each permit, in `spin_loop` hints (`--hold`).
static HOLD_SPINS: AtomicU64 = AtomicU64::new(8);

/// With `--pace=NS` (not 0), a churner holds each permit until its next slot, one every
/// `NS` nanoseconds, instead of for `--hold` spins: every subject's churners then take and
/// return permits at the same rate (as long as they keep up; a churner that falls behind
/// starts again from the present, it does not catch up).
static PACE_NANOS: AtomicU64 = AtomicU64::new(0);

/// A churner's hold: `--hold` spins, or until the next `--pace` slot.
struct Pacer {
    pace: Duration,
    next: Instant,
}

impl Pacer {
    fn new() -> Self {
        Self {
            pace: Duration::from_nanos(PACE_NANOS.load(Ordering::Relaxed)),
            next: Instant::now(),
        }
    }

    fn hold(&mut self) {
        if self.pace.is_zero() {
            return hold();
        }
        self.next += self.pace;
        let now = Instant::now();
        if self.next <= now {
            self.next = now;
            return;
        }
        while Instant::now() < self.next {
            spin_loop();
        }
    }
}

fn hold() {
    for _ in 0..HOLD_SPINS.load(Ordering::Relaxed) {
        spin_loop();
    }
}

/// One permit in the floor's word, as in our state word.
const ONE: u64 = 1 << 32;

/// What the measured thread saw in one call.
enum Probe {
    Refused(Duration),
    Granted,
}

/// What a slice measures.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Subject {
    FloorClock,
    Ours,
    Tokio,
    AsyncLock,
    FloorLoad,
}

impl Subject {
    fn name(self) -> &'static str {
        match self {
            Subject::FloorClock => "floor/clock (Instant::now() x2)",
            Subject::Ours => "bulkhead::Bulkhead::try_acquire",
            Subject::Tokio => "tokio::sync::Semaphore::try_acquire",
            Subject::AsyncLock => "async_lock::Semaphore::try_acquire",
            Subject::FloorLoad => "floor/load (one Relaxed load)",
        }
    }

    fn short(self) -> &'static str {
        match self {
            Subject::FloorClock => "floor/clock",
            Subject::Ours => "bulkhead",
            Subject::Tokio => "tokio",
            Subject::AsyncLock => "async-lock",
            Subject::FloorLoad => "floor/load",
        }
    }
}

/// A shared instance: what the churners loop on and the measured thread probes.
trait Churned: Send + Sync + 'static {
    /// One churner step: take a permit if one is free, hold it, release it. Returns whether
    /// it took one.
    fn churn(&self, hold: &mut impl FnMut()) -> bool;
    /// One timed call of the measured thread.
    fn probe(&self) -> Probe;
}

impl Churned for Bulkhead {
    #[inline]
    fn churn(&self, hold: &mut impl FnMut()) -> bool {
        match self.try_acquire() {
            Ok(permit) => {
                hold();
                drop(permit);
                true
            }
            Err(_) => false,
        }
    }

    #[inline]
    fn probe(&self) -> Probe {
        let start = Instant::now();
        let result = black_box(black_box(self).try_acquire());
        let end = Instant::now();
        match result {
            Err(full) => {
                black_box(full);
                Probe::Refused(end - start)
            }
            Ok(permit) => {
                drop(permit);
                Probe::Granted
            }
        }
    }
}

impl Churned for tokio::sync::Semaphore {
    #[inline]
    fn churn(&self, hold: &mut impl FnMut()) -> bool {
        match self.try_acquire() {
            Ok(permit) => {
                hold();
                drop(permit);
                true
            }
            Err(_) => false,
        }
    }

    #[inline]
    fn probe(&self) -> Probe {
        let start = Instant::now();
        let result = black_box(black_box(self).try_acquire());
        let end = Instant::now();
        match result {
            Err(err) => {
                black_box(err);
                Probe::Refused(end - start)
            }
            Ok(permit) => {
                drop(permit);
                Probe::Granted
            }
        }
    }
}

impl Churned for async_lock::Semaphore {
    #[inline]
    fn churn(&self, hold: &mut impl FnMut()) -> bool {
        match self.try_acquire() {
            Some(guard) => {
                hold();
                drop(guard);
                true
            }
            None => false,
        }
    }

    #[inline]
    fn probe(&self) -> Probe {
        let start = Instant::now();
        let result = black_box(black_box(self).try_acquire());
        let end = Instant::now();
        match result {
            None => Probe::Refused(end - start),
            Some(guard) => {
                drop(guard);
                Probe::Granted
            }
        }
    }
}

/// The floors' word: free permits times `ONE`. Churners take and return permits on it the
/// way a semaphore would.
struct Word {
    permits: AtomicU64,
    /// `true`: time two back-to-back clock reads; `false`: time one load of `permits`.
    clock_only: bool,
}

impl Churned for Word {
    #[inline]
    fn churn(&self, hold: &mut impl FnMut()) -> bool {
        let current = self.permits.load(Ordering::Relaxed);
        if current >= ONE
            && self
                .permits
                .compare_exchange(current, current - ONE, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        {
            hold();
            self.permits.fetch_add(ONE, Ordering::Release);
            true
        } else {
            false
        }
    }

    #[inline]
    fn probe(&self) -> Probe {
        if self.clock_only {
            let start = black_box(Instant::now());
            let end = Instant::now();
            return Probe::Refused(end - start);
        }
        let start = Instant::now();
        let seen = black_box(black_box(&self.permits).load(Ordering::Relaxed));
        let end = Instant::now();
        if seen < ONE {
            Probe::Refused(end - start)
        } else {
            Probe::Granted
        }
    }
}

/// The settings of one invocation.
struct Settings {
    /// Refusals recorded per subject, churner count and run (split over `rounds` slices).
    iters: u64,
    /// Calls made and discarded at the start of each slice.
    warmup: u64,
    churners: Vec<usize>,
    runs: usize,
    /// Slices per subject, churner count and run, interleaved across subjects.
    rounds: u64,
    /// Permits per instance: `None` for as many as there are churners.
    limit: Option<usize>,
    /// The most a slice may take, in seconds.
    max_secs: f64,
}

impl Settings {
    fn limit(&self, churners: usize) -> usize {
        self.limit.unwrap_or(churners)
    }
}

/// What the slices of one cell (a subject at one churner count in one run) measured.
struct Outcome {
    /// The refusals' latencies.
    hist: Histogram,
    /// Calls that found a permit free.
    grants: u64,
    /// Permits the churners took and returned, and the time they churned (warm-up included).
    churn_pairs: u64,
    churn_time: Duration,
    /// The recorded part's duration (warm-up excluded).
    elapsed: Duration,
}

impl Outcome {
    fn new() -> Self {
        Self {
            hist: Histogram::new(),
            grants: 0,
            churn_pairs: 0,
            churn_time: Duration::ZERO,
            elapsed: Duration::ZERO,
        }
    }

    /// Permits the churners took and returned per second.
    fn churn_rate(&self) -> f64 {
        self.churn_pairs as f64 / self.churn_time.as_secs_f64().max(1e-9)
    }

    fn calls(&self) -> u64 {
        self.hist.total + self.grants
    }
}

/// One cell: a subject's outcome at one churner count in one run.
struct Cell {
    run: usize,
    churners: usize,
    subject: Subject,
    outcome: Outcome,
}

/// Every subject, in the order the tables list them.
const SUBJECTS: [Subject; 5] =
    [Subject::FloorClock, Subject::Ours, Subject::Tokio, Subject::AsyncLock, Subject::FloorLoad];

/// The semaphores compared, rotated between slices.
const PEERS: [Subject; 3] = [Subject::Ours, Subject::Tokio, Subject::AsyncLock];

/// Runs one slice: `churners` threads churn `shared`; this thread records refusals into
/// `out`.
fn slice<S: Churned>(shared: Arc<S>, churners: usize, settings: &Settings, out: &mut Outcome) {
    let stop = Arc::new(AtomicBool::new(false));
    let pairs = Arc::new(AtomicU64::new(0));
    let go = Arc::new(Barrier::new(churners + 1));
    let threads: Vec<_> = (0..churners)
        .map(|_| {
            let (shared, stop, pairs, go) =
                (Arc::clone(&shared), Arc::clone(&stop), Arc::clone(&pairs), Arc::clone(&go));
            thread::spawn(move || {
                go.wait();
                let mut taken = 0u64;
                let mut pacer = Pacer::new();
                let mut hold = || pacer.hold();
                while !stop.load(Ordering::Relaxed) {
                    taken += u64::from(shared.churn(&mut hold));
                }
                pairs.fetch_add(taken, Ordering::Relaxed);
            })
        })
        .collect();
    go.wait();
    let churning = Instant::now();

    for _ in 0..settings.warmup {
        if let Probe::Granted = shared.probe() {
            hold();
            hold();
        }
    }
    let target = out.hist.total + settings.iters / settings.rounds;
    let hist = &mut out.hist;
    let mut grants = 0u64;
    let deadline = Duration::from_secs_f64(settings.max_secs);
    let start = Instant::now();
    'measure: while hist.total < target {
        // Check the deadline every 4 096 calls, outside any timed window.
        for _ in 0..4096 {
            match shared.probe() {
                Probe::Refused(took) => {
                    hist.record(took.as_nanos() as u64);
                    if hist.total == target {
                        break 'measure;
                    }
                }
                Probe::Granted => {
                    grants += 1;
                    // Back off before the next call: see "What one slice measures".
                    hold();
                    hold();
                }
            }
        }
        if start.elapsed() >= deadline {
            break;
        }
    }
    let elapsed = start.elapsed();
    stop.store(true, Ordering::Relaxed);
    for thread in threads {
        thread.join().expect("a churner does not panic");
    }
    out.grants += grants;
    out.churn_pairs += pairs.load(Ordering::Relaxed);
    out.churn_time += churning.elapsed();
    out.elapsed += elapsed;
}

/// Runs one slice of `subject` on a fresh instance (all permits free), adding to `out`.
fn measure(subject: Subject, churners: usize, settings: &Settings, out: &mut Outcome) {
    let limit = settings.limit(churners);
    match subject {
        Subject::Ours => {
            slice(Arc::new(common::bulkhead(limit, Duration::ZERO)), churners, settings, out)
        }
        Subject::Tokio => {
            slice(Arc::new(tokio::sync::Semaphore::new(limit)), churners, settings, out)
        }
        Subject::AsyncLock => {
            slice(Arc::new(async_lock::Semaphore::new(limit)), churners, settings, out)
        }
        Subject::FloorClock | Subject::FloorLoad => {
            let word = Word {
                permits: AtomicU64::new(limit as u64 * ONE),
                clock_only: subject == Subject::FloorClock,
            };
            slice(Arc::new(word), churners, settings, out)
        }
    }
}

/// Two back-to-back `Instant::now()` reads, `pairs` times, on an otherwise idle process (no
/// churner): the most frequent differences and their shares, most frequent first. The gap
/// between the two most frequent is the clock's apparent step.
fn clock_at_rest(pairs: u32) -> Vec<(u64, f64)> {
    let mut counts = std::collections::BTreeMap::<u64, u64>::new();
    for _ in 0..pairs {
        let start = black_box(Instant::now());
        let end = Instant::now();
        *counts.entry((end - start).as_nanos() as u64).or_default() += 1;
    }
    let mut by_count: Vec<(u64, u64)> = counts.into_iter().collect();
    by_count.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    by_count.iter().take(4).map(|&(nanos, n)| (nanos, n as f64 / f64::from(pairs))).collect()
}

/// Nanoseconds as the tables print them.
fn fmt_ns(nanos: u64) -> String {
    if nanos < 10_000 {
        format!("{nanos} ns")
    } else if nanos < 10_000_000 {
        format!("{:.1} µs", nanos as f64 / 1e3)
    } else {
        format!("{:.1} ms", nanos as f64 / 1e6)
    }
}

/// "median [lowest-highest]" of one value per run, each printed with `show`.
fn spread(mut values: Vec<f64>, show: impl Fn(f64) -> String) -> String {
    values.sort_by(f64::total_cmp);
    match values[..] {
        [] => String::new(),
        [only] => show(only),
        [lowest, .., highest] => {
            format!("{} [{}-{}]", show(values[values.len() / 2]), show(lowest), show(highest))
        }
    }
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path).map(|s| s.trim().to_owned()).unwrap_or_else(|_| "?".into())
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|line| line.starts_with("model name"))
                .and_then(|line| line.split(':').nth(1))
                .map(|model| model.trim().to_owned())
        })
        .unwrap_or_else(|| "?".into())
}

fn usage() -> ! {
    eprintln!(
        "usage: refusal_tail [--iters=N] [--warmup=N] [--churners=1,2,4] [--runs=N] \
         [--rounds=N] [--limit=churners|N] [--hold=SPINS] [--pace=NS] [--max-secs=S]"
    );
    std::process::exit(2);
}

fn parse_settings(args: &[String]) -> Settings {
    let mut settings = Settings {
        iters: 1_000_000,
        warmup: 20_000,
        churners: vec![1, 2, 4],
        runs: 3,
        rounds: 10,
        limit: None,
        max_secs: 2.0,
    };
    for arg in args {
        let Some((key, value)) = arg.split_once('=') else { usage() };
        let number = || value.parse::<u64>().unwrap_or_else(|_| usage());
        match key {
            "--iters" => settings.iters = number().max(1),
            "--warmup" => settings.warmup = number(),
            "--runs" => settings.runs = number().max(1) as usize,
            "--rounds" => settings.rounds = number().max(1),
            "--limit" => {
                settings.limit = match value {
                    "churners" => None,
                    _ => Some(number().max(1) as usize),
                }
            }
            "--hold" => HOLD_SPINS.store(number(), Ordering::Relaxed),
            "--pace" => PACE_NANOS.store(number(), Ordering::Relaxed),
            "--max-secs" => settings.max_secs = value.parse().unwrap_or_else(|_| usage()),
            "--churners" => {
                settings.churners = value
                    .split(',')
                    .map(|n| n.parse::<usize>().ok().filter(|&n| n > 0).unwrap_or_else(|| usage()))
                    .collect()
            }
            _ => usage(),
        }
    }
    settings
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    // `cargo bench` passes `--bench`, then any filter: run with the defaults unless a filter
    // is given that does not match this target's name.
    if let Some(at) = args.iter().position(|arg| arg == "--bench") {
        args.remove(at);
        let filters: Vec<String> = args.iter().filter(|a| !a.starts_with("--")).cloned().collect();
        if filters.iter().any(|f| !"refusal_tail".contains(f.as_str())) {
            return;
        }
        args.retain(|a| a.starts_with("--"));
    }
    let settings = parse_settings(&args);
    Histogram::self_check();

    let command: Vec<String> = std::env::args().collect();
    let load_start = read_trimmed("/proc/loadavg");
    let began = Instant::now();
    let at_rest = clock_at_rest(1_000_000);

    let mut cells = Vec::new();
    for run in 0..settings.runs {
        for &churners in &settings.churners {
            let mut outcomes: Vec<(Subject, Outcome)> =
                SUBJECTS.iter().map(|&subject| (subject, Outcome::new())).collect();
            for round in 0..settings.rounds as usize {
                // floor/clock first, the peers rotated by one per round and per run, then
                // floor/load.
                let mut order = vec![Subject::FloorClock];
                order.extend((0..PEERS.len()).map(|i| PEERS[(i + run + round) % PEERS.len()]));
                order.push(Subject::FloorLoad);
                for subject in order {
                    let (_, out) = outcomes
                        .iter_mut()
                        .find(|(s, _)| *s == subject)
                        .expect("every subject has an outcome");
                    measure(subject, churners, &settings, out);
                }
            }
            for (subject, outcome) in outcomes {
                // Progress on stderr; the tables go to stdout.
                let hist = &outcome.hist;
                eprintln!(
                    "run {} churners {churners} {:<11} refusals {:>8} grants {:>8} p99.9 {:>9} max {:>9}",
                    run + 1,
                    subject.short(),
                    hist.total,
                    outcome.grants,
                    fmt_ns(hist.percentile(99.9)),
                    fmt_ns(hist.max)
                );
                cells.push(Cell { run, churners, subject, outcome });
            }
        }
    }
    let wall = began.elapsed();
    let load_end = read_trimmed("/proc/loadavg");

    let run = Invocation { command, load_start, load_end, wall, at_rest };
    report(&settings, &cells, &run);
}

/// What the tables' header says about the invocation.
struct Invocation {
    command: Vec<String>,
    load_start: String,
    load_end: String,
    wall: Duration,
    at_rest: Vec<(u64, f64)>,
}

impl Invocation {
    /// The clock's apparent step: the gap between its two most frequent back-to-back
    /// differences at rest (at least 1 ns).
    fn step(&self) -> u64 {
        match self.at_rest[..] {
            [(a, _), (b, _), ..] => a.abs_diff(b).max(1),
            _ => 1,
        }
    }
}

fn report(settings: &Settings, cells: &[Cell], run: &Invocation) {
    let cores = thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let limit = match settings.limit {
        Some(n) => n.to_string(),
        None => "the number of churners".into(),
    };
    println!("## Setup\n");
    println!("- command: `{}`", run.command.join(" "));
    println!(
        "- machine: {} ({cores} cores online), clocksource `{}`",
        cpu_model(),
        read_trimmed("/sys/devices/system/clocksource/clocksource0/current_clocksource")
    );
    println!("- /proc/loadavg at start: `{}`; at end: `{}`", run.load_start, run.load_end);
    let hold = match PACE_NANOS.load(Ordering::Relaxed) {
        0 => format!("for {} `spin_loop` hints", HOLD_SPINS.load(Ordering::Relaxed)),
        pace => format!("until its next slot, one every {pace} ns per churner (paced)"),
    };
    println!(
        "- per cell (subject x churner count x run): {} refusals recorded in {} interleaved \
         slices, each after {} discarded warm-up calls and stopped after at most {} s; \
         limit: {limit}; churners hold each permit {hold}; wall time {:.1} s",
        settings.iters,
        settings.rounds,
        settings.warmup,
        settings.max_secs,
        run.wall.as_secs_f64()
    );
    let at_rest: Vec<String> = run
        .at_rest
        .iter()
        .map(|(nanos, share)| format!("{nanos} ns ({:.1} %)", share * 100.0))
        .collect();
    println!(
        "- time per call: two `Instant::now()` reads around it, clock cost included \
         (`floor/clock` is that cost alone, under the same churn); at rest (no churner), \
         1 000 000 back-to-back pairs differ most often by {}: an apparent clock step of \
         {} ns",
        at_rest.join(", "),
        run.step()
    );
    println!(
        "- percentiles from a log-linear histogram (1 ns buckets below 1 024 ns, <= 0.78 % \
         wide above), each the highest value of its bucket, capped at the exact max\n"
    );

    println!("## Summary: median of the {} runs [lowest-highest run]\n", settings.runs);
    println!(
        "| churners | subject | p50 | p99 | p99.9 | p99.99 | max | mean | mean <= 1 µs \
         | refusals / calls |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for &churners in &settings.churners {
        for &subject in &SUBJECTS {
            let rows: Vec<&Cell> =
                cells.iter().filter(|c| c.churners == churners && c.subject == subject).collect();
            let ns = |f: &dyn Fn(&Histogram) -> u64| {
                spread(rows.iter().map(|c| f(&c.outcome.hist) as f64).collect(), |v| {
                    fmt_ns(v as u64)
                })
            };
            let mean = spread(rows.iter().map(|c| c.outcome.hist.mean()).collect(), |v| {
                format!("{v:.1} ns")
            });
            let trimmed =
                spread(rows.iter().map(|c| c.outcome.hist.mean_below_1us()).collect(), |v| {
                    format!("{v:.1} ns")
                });
            let refusals: u64 = rows.iter().map(|c| c.outcome.hist.total).sum();
            let calls: u64 = rows.iter().map(|c| c.outcome.calls()).sum();
            println!(
                "| {churners} | {} | {} | {} | {} | {} | {} | {mean} | {trimmed} | {:.1} % |",
                subject.name(),
                ns(&|h| h.percentile(50.0)),
                ns(&|h| h.percentile(99.0)),
                ns(&|h| h.percentile(99.9)),
                ns(&|h| h.percentile(99.99)),
                ns(&|h| h.max),
                100.0 * refusals as f64 / calls.max(1) as f64
            );
        }
    }

    println!(
        "\n## Slow refusals per million: median of the {} runs [lowest-highest run]\n",
        settings.runs
    );
    let thresholds: [(u64, &str); 5] = [
        (100, "100 ns"),
        (1_000, "1 µs"),
        (10_000, "10 µs"),
        (100_000, "100 µs"),
        (1_000_000, "1 ms"),
    ];
    let header: Vec<String> = thresholds.iter().map(|(_, name)| format!("> {name}")).collect();
    println!("| churners | subject | {} |", header.join(" | "));
    println!("|---:|---|{}", "---:|".repeat(thresholds.len()));
    for &churners in &settings.churners {
        for &subject in &SUBJECTS {
            let rows: Vec<&Cell> =
                cells.iter().filter(|c| c.churners == churners && c.subject == subject).collect();
            let shares: Vec<String> = thresholds
                .iter()
                .map(|&(nanos, _)| {
                    let per_million = rows
                        .iter()
                        .map(|c| {
                            let hist = &c.outcome.hist;
                            hist.above(nanos) as f64 * 1e6 / hist.total.max(1) as f64
                        })
                        .collect();
                    spread(per_million, |v| format!("{v:.0}"))
                })
                .collect();
            println!("| {churners} | {} | {} |", subject.short(), shares.join(" | "));
        }
    }

    let step = run.step();
    println!(
        "\n## Ours against tokio at p99.9, run by run\n\n\
         Each cell: ours vs tokio, (the difference in clock steps of {step} ns, rounded), \
         floor/load's p99.9 in the same run for scale, and ours' mean of the refusals up to \
         1 µs minus tokio's (finer than a step: see the setup).\n"
    );
    let runs: Vec<String> = (1..=settings.runs).map(|r| format!("run {r}")).collect();
    println!("| churners | {} | ours <= tokio | ours at most one step above |", runs.join(" | "));
    println!("|---:|{}---:|---:|", "---|".repeat(settings.runs));
    for &churners in &settings.churners {
        let mut row = Vec::new();
        let (mut at_or_below, mut within_step) = (0, 0);
        for run in 0..settings.runs {
            let hist = |subject| {
                cells
                    .iter()
                    .find(|c| c.run == run && c.churners == churners && c.subject == subject)
                    .map(|c| &c.outcome.hist)
            };
            let p999 = |subject| hist(subject).map_or(0, |h| h.percentile(99.9));
            let mean = |subject| hist(subject).map_or(0.0, Histogram::mean_below_1us);
            let (ours, tokio) = (p999(Subject::Ours), p999(Subject::Tokio));
            // The ns conversion turns a step into 10 or 11 ns (20/21, 30/31, ...): round.
            let steps = ((ours as f64 - tokio as f64) / step as f64).round() as i64;
            at_or_below += usize::from(ours <= tokio);
            within_step += usize::from(steps <= 1);
            row.push(format!(
                "{} vs {} ({steps:+}); load {}; mean <= 1 µs {:+.1} ns",
                fmt_ns(ours),
                fmt_ns(tokio),
                fmt_ns(p999(Subject::FloorLoad)),
                mean(Subject::Ours) - mean(Subject::Tokio)
            ));
        }
        println!(
            "| {churners} | {} | {at_or_below}/{} | {within_step}/{} |",
            row.join(" | "),
            settings.runs,
            settings.runs
        );
    }

    println!("\n## Every cell\n");
    println!(
        "| run | churners | subject | refusals | grants | churn (M acquire+release/s) \
         | p50 | p99 | p99.9 | p99.99 | max | mean | mean <= 1 µs | seconds recorded |"
    );
    println!("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for c in cells {
        let hist = &c.outcome.hist;
        println!(
            "| {} | {} | {} | {} | {} | {:.1} | {} | {} | {} | {} | {} | {:.1} ns | {:.1} ns | {:.2} |",
            c.run + 1,
            c.churners,
            c.subject.short(),
            hist.total,
            c.outcome.grants,
            c.outcome.churn_rate() / 1e6,
            fmt_ns(hist.percentile(50.0)),
            fmt_ns(hist.percentile(99.0)),
            fmt_ns(hist.percentile(99.9)),
            fmt_ns(hist.percentile(99.99)),
            fmt_ns(hist.max),
            hist.mean(),
            hist.mean_below_1us(),
            c.outcome.elapsed.as_secs_f64()
        );
    }
}
