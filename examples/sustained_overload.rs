//! Sustained overload: arrivals at 1.5x what the downstream can serve, for 30 s, through
//! several admission front-ends with the same limit and the same max wait; goodput, the
//! latency of the calls that were served, and refusals by reason (issue 20's evidence).
//!
//! ```text
//! cargo run --release --example sustained_overload -- [--secs 30] [--runs 2] [--only NAME]
//!     [--deadline-ms 1000,300] [--threads 0] [--out benches/results/overload.md]
//! ```
//!
//! - The downstream has 10 slots and works 20 ms per call (a tokio sleep): it serves at most
//!   10 / its measured no-load latency calls per second (about 473/s here, since a tokio sleep
//!   rounds up to the next millisecond tick). Its own latency is measured first: 200 calls
//!   one after another with nothing else running.
//! - Every front-end gets limit 10 (the downstream's capacity, so the downstream itself
//!   never queues: the report checks it) and a max wait of 500 ms (25 service times: long
//!   enough that a standing queue forms and queue order decides who waits).
//! - Load: open loop, Poisson, at 1.5 x the measured capacity, for `--secs` seconds; the
//!   same schedule (one seed per run) for every front-end of a run. Each call is timed from
//!   its scheduled arrival to its answer, queueing included.
//! - Goodput: the calls answered within the client's deadline (and before arrivals stopped)
//!   per second. An admitted call runs to its end whatever its client does (no deadline
//!   propagation, as a server that does not cancel work for a client that left), so the
//!   deadline does not change the run, only what counts: each of `--deadline-ms`'s values
//!   (default 1000 and 300 ms) gets its goodput column from the same run.
//! - One current-thread tokio runtime drives the load, the front-ends and the downstream
//!   (everything on one thread, so no work stealing between the two shared cores adds
//!   noise; `bulkhead`'s own deadline timer is its one thread). `--threads N` uses a
//!   multi-thread runtime with N workers instead: on the 2-core VM, 10 s runs of
//!   `bulkhead-fifo` with 0 and 2 gave the same goodput and latency within the runs' spread.
//!   Front-ends run one after another, each run going through all of them before the next
//!   run starts.
//!
//! `--only NAME` runs one front-end; `--out FILE` also writes the Markdown report there.

#[path = "sustained_overload/harness.rs"]
mod harness;

use std::fmt::Write as _;
use std::time::Duration;

use harness::{quantile, Contender, Scenario, Tally, CONTENDERS};

const CAPACITY: usize = 10;
const SERVICE: Duration = Duration::from_millis(20);
const MAX_WAIT: Duration = Duration::from_millis(500);
const OVERLOAD: f64 = 1.5;
const NO_LOAD_CALLS: usize = 200;

struct Args {
    secs: u64,
    runs: u64,
    only: Option<String>,
    /// The client deadlines goodput is counted for.
    deadlines: Vec<Duration>,
    out: Option<String>,
    /// 0: a current-thread runtime; n: a multi-thread runtime with n workers.
    threads: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        secs: 30,
        runs: 2,
        only: None,
        deadlines: vec![Duration::from_millis(1000), Duration::from_millis(300)],
        out: None,
        threads: 0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        let number = |v: &str| v.parse::<u64>().map_err(|e| format!("{flag} {v:?}: {e}"));
        match flag.as_str() {
            "--secs" => args.secs = number(&value()?)?,
            "--runs" => args.runs = number(&value()?)?,
            "--threads" => args.threads = number(&value()?)? as usize,
            "--deadline-ms" => {
                args.deadlines = value()?
                    .split(',')
                    .map(|ms| number(ms).map(Duration::from_millis))
                    .collect::<Result<_, _>>()?
            }
            "--only" => args.only = Some(value()?),
            "--out" => args.out = Some(value()?),
            _ => return Err(format!("unknown argument {flag:?}")),
        }
    }
    if args.secs == 0 || args.runs == 0 {
        return Err("--secs and --runs must be at least 1".into());
    }
    if let Some(only) = &args.only {
        if !CONTENDERS.iter().any(|c| c.name == only) {
            let names: Vec<_> = CONTENDERS.iter().map(|c| c.name).collect();
            return Err(format!("--only {only:?}: not a front-end; they are {names:?}"));
        }
    }
    Ok(args)
}

/// The 1-minute load average from `/proc/loadavg` ("n/a" where there is none): how busy the
/// shared machine was when a front-end's run started.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "n/a".into())
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e3)
}

fn refusals(tally: &Tally, secs: f64) -> String {
    if tally.refused.is_empty() {
        return "none".into();
    }
    let per_reason: Vec<_> = tally
        .refused
        .iter()
        .map(|(reason, n)| format!("{reason} {n} ({:.1}/s)", *n as f64 / secs))
        .collect();
    per_reason.join(", ")
}

/// `min – max` of `f` over `tallies` (one figure when they agree at this precision).
fn spread(tallies: &[&Tally], f: impl Fn(&Tally) -> f64, digits: usize) -> String {
    let values: Vec<f64> = tallies.iter().map(|t| f(t)).collect();
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let (min, max) = (format!("{min:.digits$}"), format!("{max:.digits$}"));
    if min == max {
        min
    } else {
        format!("{min} – {max}")
    }
}

fn main() {
    let args = match parse_args() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("sustained_overload: {message}");
            std::process::exit(2);
        }
    };
    let mut builder = if args.threads == 0 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        builder.worker_threads(args.threads);
        builder
    };
    let runtime = builder.enable_time().build().expect("a tokio runtime");
    let mut scenario = Scenario {
        capacity: CAPACITY,
        service: SERVICE,
        max_wait: MAX_WAIT,
        rate: 0.0,
        run_for: Duration::from_secs(args.secs),
        seed: 0,
    };
    let no_load = runtime.block_on(harness::no_load_latency(&scenario, NO_LOAD_CALLS));
    let own_p50 = quantile(&no_load, 0.5);
    let capacity_per_sec = CAPACITY as f64 / own_p50.as_secs_f64();
    scenario.rate = OVERLOAD * capacity_per_sec;
    eprintln!(
        "downstream alone: p50 {} ms, p99 {} ms => capacity {capacity_per_sec:.0}/s; arrivals {:.0}/s",
        ms(own_p50),
        ms(quantile(&no_load, 0.99)),
        scenario.rate
    );

    let contenders: Vec<&Contender> = CONTENDERS
        .iter()
        .filter(|c| args.only.as_ref().map_or(true, |only| c.name == only))
        .collect();
    // results[run][contender]: the tally and the load average when its run started.
    let mut results: Vec<Vec<(Tally, String)>> = Vec::new();
    for run in 0..args.runs {
        scenario.seed = 0x5EED_0000 + run;
        let mut row = Vec::new();
        for contender in &contenders {
            let load = load_average();
            let tally = runtime.block_on(harness::run(contender, &scenario));
            eprintln!(
                "run {} {}: load {load}, arrivals {}, served {}, refused {}, p50 {} p99 {} max {} ms",
                run + 1,
                contender.name,
                tally.arrivals,
                tally.served_count(),
                tally.refused_count(),
                ms(tally.quantile(0.5)),
                ms(tally.quantile(0.99)),
                ms(tally.quantile(1.0)),
            );
            row.push((tally, load));
        }
        results.push(row);
    }

    let report = Report { args: &args, scenario: &scenario, no_load: &no_load, capacity_per_sec };
    let text = report.write(&contenders, &results);
    print!("{text}");
    if let Some(out) = &args.out {
        if let Err(e) = std::fs::write(out, &text) {
            eprintln!("sustained_overload: writing {out}: {e}");
            std::process::exit(1);
        }
    }
}

struct Report<'a> {
    args: &'a Args,
    scenario: &'a Scenario,
    no_load: &'a [Duration],
    capacity_per_sec: f64,
}

impl Report<'_> {
    fn write(&self, contenders: &[&Contender], results: &[Vec<(Tally, String)>]) -> String {
        let mut r = String::new();
        self.setup(&mut r, results.len());
        self.summary(&mut r, contenders, results);
        self.every_run(&mut r, contenders, results);
        r
    }

    fn setup(&self, r: &mut String, runs: usize) {
        let scenario = self.scenario;
        let command: Vec<String> = std::env::args().skip(1).collect();
        let runtime = match self.args.threads {
            0 => "one current-thread tokio runtime".to_string(),
            n => format!("one multi-thread tokio runtime with {n} workers"),
        };
        let deadlines: Vec<String> =
            self.args.deadlines.iter().map(|d| format!("{} ms", d.as_millis())).collect();
        let _ = writeln!(r, "# Sustained overload (issue 20)\n");
        let _ = writeln!(
            r,
            "Command:\n\n```text\ncargo run --release --example sustained_overload -- {}\n```\n",
            command.join(" ")
        );
        let _ = writeln!(
            r,
            "Machine: {} logical CPUs (a VM shared with other jobs), {runtime}. Written by the \
             command above; examples/sustained_overload.rs's docs describe the set-up.\n",
            std::thread::available_parallelism().map_or(0, |n| n.get())
        );
        let _ = writeln!(r, "## Set-up\n");
        let _ = writeln!(
            r,
            "- Downstream: {} slots, {} ms of work per call (a tokio sleep). Its own latency, \
             {NO_LOAD_CALLS} calls one after another with nothing else running: p50 {} ms, p99 \
             {} ms, max {} ms; so it serves at most {:.0} calls/s.",
            scenario.capacity,
            scenario.service.as_millis(),
            ms(quantile(self.no_load, 0.5)),
            ms(quantile(self.no_load, 0.99)),
            ms(quantile(self.no_load, 1.0)),
            self.capacity_per_sec,
        );
        let _ = writeln!(
            r,
            "- Load: open loop, Poisson, {:.0} arrivals/s ({OVERLOAD} x that capacity) for {} s \
             per front-end and run; the same arrival schedule for every front-end within a run \
             (a seed per run). Latency: from the scheduled arrival to the answer, queueing \
             included.",
            scenario.rate,
            scenario.run_for.as_secs()
        );
        let _ = writeln!(
            r,
            "- Every front-end: limit {}, max wait {} ms.",
            scenario.capacity,
            scenario.max_wait.as_millis()
        );
        let _ = writeln!(
            r,
            "- Goodput/s: calls answered within the client's deadline ({}) and before arrivals \
             stopped, per second of arrivals. Every admitted call runs to its end whatever its \
             client does (no deadline propagation), so each deadline's column comes from the \
             same run; \"late\" counts served calls answered after the deadline.",
            deadlines.join(", ")
        );
        let _ = writeln!(
            r,
            "- Runs: {runs}, one after another; each run goes through every front-end.\n"
        );
    }

    fn summary(&self, r: &mut String, contenders: &[&Contender], results: &[Vec<(Tally, String)>]) {
        let secs = self.scenario.run_for.as_secs_f64();
        let deadlines = &self.args.deadlines;
        let _ = writeln!(r, "## Summary (min – max over the runs)\n");
        let mut header = "| front-end |".to_string();
        for d in deadlines {
            let _ = write!(header, " goodput/s ({} ms) |", d.as_millis());
        }
        let _ = writeln!(
            r,
            "{header} served p50 ms | served p99 ms | served max ms | refused/s | downstream queued |"
        );
        let _ = writeln!(r, "|---|{}---:|---:|---:|---:|---:|", "---:|".repeat(deadlines.len()));
        for (i, contender) in contenders.iter().enumerate() {
            let tallies: Vec<&Tally> = results.iter().map(|run| &run[i].0).collect();
            let _ = write!(r, "| {} |", contender.name);
            for &d in deadlines {
                let _ = write!(r, " {} |", spread(&tallies, |t| t.goodput_per_sec(d), 1));
            }
            let _ = writeln!(
                r,
                " {} | {} | {} | {} | {} |",
                spread(&tallies, |t| t.quantile(0.5).as_secs_f64() * 1e3, 1),
                spread(&tallies, |t| t.quantile(0.99).as_secs_f64() * 1e3, 1),
                spread(&tallies, |t| t.quantile(1.0).as_secs_f64() * 1e3, 1),
                spread(&tallies, |t| t.refused_count() as f64 / secs, 1),
                spread(&tallies, |t| t.downstream_queued as f64, 0),
            );
        }
    }

    fn every_run(
        &self,
        r: &mut String,
        contenders: &[&Contender],
        results: &[Vec<(Tally, String)>],
    ) {
        let secs = self.scenario.run_for.as_secs_f64();
        let deadlines = &self.args.deadlines;
        let mut header = "| run | front-end | load avg | arrivals | served |".to_string();
        for d in deadlines {
            let _ = write!(header, " late ({0} ms) | goodput/s ({0} ms) |", d.as_millis());
        }
        let _ = writeln!(r, "\n## Every run\n");
        let _ = writeln!(
            r,
            "{header} p50 ms | p99 ms | max ms | refused by reason | spawn lag p99 / max ms |"
        );
        let _ = writeln!(
            r,
            "|---:|---|---:|---:|---:|{}---:|---:|---:|---|---:|",
            "---:|---:|".repeat(deadlines.len())
        );
        for (run, row) in results.iter().enumerate() {
            for (contender, (t, load)) in contenders.iter().zip(row) {
                let _ = write!(
                    r,
                    "| {} | {} | {load} | {} | {} |",
                    run + 1,
                    contender.name,
                    t.arrivals,
                    t.served_count()
                );
                for &d in deadlines {
                    let _ = write!(r, " {} | {:.1} |", t.late(d), t.goodput_per_sec(d));
                }
                let _ = writeln!(
                    r,
                    " {} | {} | {} | {} | {} / {} |",
                    ms(t.quantile(0.5)),
                    ms(t.quantile(0.99)),
                    ms(t.quantile(1.0)),
                    refusals(t, secs),
                    ms(quantile(&t.spawn_lag, 0.99)),
                    ms(quantile(&t.spawn_lag, 1.0)),
                );
            }
        }
        let _ = writeln!(
            r,
            "\nReasons: `bulkhead` reports `RejectReason::label()`; tokio's semaphore inside \
             `timeout` can only time out (`timeout`); tower-resilience-bulkhead's `BulkheadError` \
             kinds are `timeout`, `full`, `closed`, `not_ready`. \"downstream queued\" counts calls \
             that found all {} downstream slots taken (0: the front-end did all the queueing). \
             \"spawn lag\" is how late the load generator started a call after its scheduled \
             arrival (it counts in that call's latency). \"load avg\": the machine's 1-minute \
             load average when that run started (2 cores).",
            self.scenario.capacity
        );
    }
}
