//! Sustained overload: arrivals at 1.5x what the downstream can serve, for 30 s, through
//! several admission front-ends with the same limit and the same max wait; goodput, the
//! latency of the calls that were served, and refusals by reason (issue 20's evidence).
//!
//! ```text
//! cargo run --release --example sustained_overload -- [--secs 30] [--runs 2] [--only NAME]
//!     [--deadline-ms 1000] [--out benches/results/overload.md]
//! ```
//!
//! - The downstream has 10 slots and works 20 ms per call (a tokio sleep): it serves at most
//!   10 / its measured no-load latency calls per second (about 480/s, since a tokio sleep
//!   rounds up to the next millisecond tick). Its own latency is measured first: 200 calls
//!   one after another with nothing else running.
//! - Every front-end gets limit 10 (the downstream's capacity, so the downstream itself
//!   never queues: the report checks it) and a max wait of 500 ms (25 service times: long
//!   enough that a standing queue forms and queue order decides who waits).
//! - Load: open loop, Poisson, at 1.5 x the measured capacity, for `--secs` seconds; the
//!   same schedule (one seed per run) for every front-end of a run. Each call is timed from
//!   its scheduled arrival to its answer, queueing included. A client gives up after
//!   `--deadline-ms` (default 1 s); a call answered later would not count as goodput (the call
//!   still runs to its end: no deadline propagation).
//! - One current-thread tokio runtime drives the load, the front-ends and the downstream
//!   (the least scheduling noise on a small shared machine; `bulkhead`'s own deadline timer
//!   is its one thread). Front-ends run one after another, each run going through all of
//!   them before the next run starts.
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
    deadline: Duration,
    out: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut args =
        Args { secs: 30, runs: 2, only: None, deadline: Duration::from_secs(1), out: None };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        let number = |v: String| v.parse::<u64>().map_err(|e| format!("{flag} {v:?}: {e}"));
        match flag.as_str() {
            "--secs" => args.secs = number(value()?)?,
            "--runs" => args.runs = number(value()?)?,
            "--deadline-ms" => args.deadline = Duration::from_millis(number(value()?)?),
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

/// `(min, max)` of `f` over `tallies`, formatted.
fn spread(tallies: &[&Tally], f: impl Fn(&Tally) -> f64, digits: usize) -> String {
    let values: Vec<f64> = tallies.iter().map(|t| f(t)).collect();
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if values.len() == 1 {
        format!("{min:.digits$}")
    } else {
        format!("{min:.digits$} – {max:.digits$}")
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
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a current-thread tokio runtime");
    let mut scenario = Scenario {
        capacity: CAPACITY,
        service: SERVICE,
        max_wait: MAX_WAIT,
        deadline: args.deadline,
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
    // results[run][contender]
    let mut results: Vec<Vec<Tally>> = Vec::new();
    for run in 0..args.runs {
        scenario.seed = 0x5EED_0000 + run;
        let mut row = Vec::new();
        for contender in &contenders {
            let tally = runtime.block_on(harness::run(contender, &scenario));
            eprintln!(
                "run {} {}: arrivals {}, served {} (late {}), goodput {:.1}/s, refused {}, p50 {} p99 {} max {} ms",
                run + 1,
                contender.name,
                tally.arrivals,
                tally.served_count(),
                tally.late,
                tally.goodput_per_sec(),
                tally.refused_count(),
                ms(tally.quantile(0.5)),
                ms(tally.quantile(0.99)),
                ms(tally.quantile(1.0)),
            );
            row.push(tally);
        }
        results.push(row);
    }

    let report = report(&scenario, &no_load, capacity_per_sec, &contenders, &results);
    print!("{report}");
    if let Some(out) = &args.out {
        if let Err(e) = std::fs::write(out, &report) {
            eprintln!("sustained_overload: writing {out}: {e}");
            std::process::exit(1);
        }
    }
}

fn report(
    scenario: &Scenario,
    no_load: &[Duration],
    capacity_per_sec: f64,
    contenders: &[&Contender],
    results: &[Vec<Tally>],
) -> String {
    let secs = scenario.run_for.as_secs_f64();
    let command: Vec<String> = std::env::args().skip(1).collect();
    let mut r = String::new();
    let _ = writeln!(r, "# Sustained overload (issue 20)\n");
    let _ = writeln!(
        r,
        "Command:\n\n```text\ncargo run --release --example sustained_overload -- {}\n```\n",
        command.join(" ")
    );
    let _ = writeln!(
        r,
        "Machine: {} logical CPUs (a VM shared with other jobs), one current-thread tokio \
         runtime. Written by the command above; see the example's docs for the set-up.\n",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let _ = writeln!(r, "## Set-up\n");
    let _ = writeln!(
        r,
        "- Downstream: {} slots, {} ms of work per call (a tokio sleep). Its own latency, \
         {NO_LOAD_CALLS} calls one after another with nothing else running: p50 {} ms, p99 {} ms, \
         max {} ms; so it serves at most {capacity_per_sec:.0} calls/s.",
        scenario.capacity,
        scenario.service.as_millis(),
        ms(quantile(no_load, 0.5)),
        ms(quantile(no_load, 0.99)),
        ms(quantile(no_load, 1.0)),
    );
    let _ = writeln!(
        r,
        "- Load: open loop, Poisson, {:.0} arrivals/s ({OVERLOAD} x that capacity) for {secs:.0} s \
         per front-end and run; the same arrival schedule for every front-end within a run (seed \
         per run). Latency is from the scheduled arrival to the answer, queueing included.",
        scenario.rate
    );
    let _ = writeln!(
        r,
        "- Every front-end: limit {}, max wait {} ms. Client deadline {} ms: goodput/s is the \
         calls answered within it and before arrivals stopped, per second of arrivals (every \
         admitted call runs to its end, no deadline propagation; \"late\" counts the served \
         calls answered after the deadline).",
        scenario.capacity,
        scenario.max_wait.as_millis(),
        scenario.deadline.as_millis()
    );
    let _ = writeln!(
        r,
        "- Runs: {}, one after another; each run goes through every front-end.\n",
        results.len()
    );

    let _ = writeln!(r, "## Summary (min – max over the runs)\n");
    let _ = writeln!(
        r,
        "| front-end | goodput/s | served p50 ms | served p99 ms | served max ms | refused/s | downstream queued |"
    );
    let _ = writeln!(r, "|---|---:|---:|---:|---:|---:|---:|");
    for (i, contender) in contenders.iter().enumerate() {
        let tallies: Vec<&Tally> = results.iter().map(|run| &run[i]).collect();
        let _ = writeln!(
            r,
            "| {} | {} | {} | {} | {} | {} | {} |",
            contender.name,
            spread(&tallies, Tally::goodput_per_sec, 1),
            spread(&tallies, |t| t.quantile(0.5).as_secs_f64() * 1e3, 1),
            spread(&tallies, |t| t.quantile(0.99).as_secs_f64() * 1e3, 1),
            spread(&tallies, |t| t.quantile(1.0).as_secs_f64() * 1e3, 1),
            spread(&tallies, |t| t.refused_count() as f64 / secs, 1),
            spread(&tallies, |t| t.downstream_queued as f64, 0),
        );
    }

    let _ = writeln!(r, "\n## Every run\n");
    let _ = writeln!(
        r,
        "| run | front-end | arrivals | served | late | goodput/s | p50 ms | p99 ms | max ms | refused by reason | spawn lag p99 / max ms |"
    );
    let _ = writeln!(r, "|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---:|");
    for (run, row) in results.iter().enumerate() {
        for (contender, t) in contenders.iter().zip(row) {
            let _ = writeln!(
                r,
                "| {} | {} | {} | {} | {} | {:.1} | {} | {} | {} | {} | {} / {} |",
                run + 1,
                contender.name,
                t.arrivals,
                t.served_count(),
                t.late,
                t.goodput_per_sec(),
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
         arrival (it counts in that call's latency).",
        scenario.capacity
    );
    r
}
