//! One noisy tenant against three quiet ones, first through one shared bulkhead, then
//! through a bulkhead per tenant (`bulkhead::keyed`) under the same shared total.
//!
//! `cargo run --release --example noisy_tenant` (about 2 seconds)
//!
//! Every call "takes" 5 ms (a sleep standing for a downstream call). The noisy tenant runs
//! 16 threads calling back to back; each quiet tenant runs one thread calling every 10 ms.
//! With one shared bulkhead of 12 slots the noisy tenant takes them all and the quiet
//! tenants are refused; with 4 slots per tenant (and the same total of 12) the noisy tenant
//! saturates its own key while the quiet tenants' calls go through.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bulkhead::keyed::KeyedBulkhead;
use bulkhead::{Bulkhead, BulkheadConfig};

const RUN_FOR: Duration = Duration::from_millis(800);
const CALL_TAKES: Duration = Duration::from_millis(5);
const QUIET_PAUSE: Duration = Duration::from_millis(10);
const NOISY_THREADS: usize = 16;
const QUIET_TENANTS: [&str; 3] = ["quiet-a", "quiet-b", "quiet-c"];

#[derive(Default, Clone, Copy)]
struct Tally {
    admitted: u64,
    refused_by_key: u64,
    refused_by_total: u64,
}

type Tallies = Arc<Mutex<BTreeMap<&'static str, Tally>>>;

/// Runs the load: `call(tenant)` makes one protected call and says how it went.
fn run(call: Arc<dyn Fn(&'static str) -> Outcome + Send + Sync>) -> BTreeMap<&'static str, Tally> {
    let tallies: Tallies = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    let mut spawn = |tenant: &'static str, pause: Duration| {
        let (call, tallies, stop) = (Arc::clone(&call), Arc::clone(&tallies), Arc::clone(&stop));
        threads.push(std::thread::spawn(move || {
            let mut tally = Tally::default();
            while !stop.load(Ordering::Relaxed) {
                match call(tenant) {
                    Outcome::Admitted => tally.admitted += 1,
                    Outcome::RefusedByKey => tally.refused_by_key += 1,
                    Outcome::RefusedByTotal => tally.refused_by_total += 1,
                }
                std::thread::sleep(pause);
            }
            let mut all = tallies.lock().unwrap();
            let sum = all.entry(tenant).or_default();
            sum.admitted += tally.admitted;
            sum.refused_by_key += tally.refused_by_key;
            sum.refused_by_total += tally.refused_by_total;
        }));
    };
    for _ in 0..NOISY_THREADS {
        spawn("noisy", Duration::ZERO);
    }
    for tenant in QUIET_TENANTS {
        spawn(tenant, QUIET_PAUSE);
    }
    let start = Instant::now();
    std::thread::sleep(RUN_FOR);
    stop.store(true, Ordering::Relaxed);
    threads.into_iter().for_each(|t| t.join().unwrap());
    eprintln!("(ran {:?})", start.elapsed());
    let tallies = tallies.lock().unwrap().clone();
    tallies
}

enum Outcome {
    Admitted,
    RefusedByKey,
    RefusedByTotal,
}

fn print(title: &str, tallies: &BTreeMap<&'static str, Tally>) {
    println!("\n{title}");
    println!(
        "{:<10} {:>9} {:>15} {:>17} {:>10}",
        "tenant", "admitted", "refused (key)", "refused (total)", "admitted %"
    );
    for (tenant, t) in tallies {
        let calls = t.admitted + t.refused_by_key + t.refused_by_total;
        let share = if calls == 0 { 0.0 } else { 100.0 * t.admitted as f64 / calls as f64 };
        println!(
            "{tenant:<10} {:>9} {:>15} {:>17} {share:>9.1}%",
            t.admitted, t.refused_by_key, t.refused_by_total
        );
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let fail_fast = |n| BulkheadConfig::builder().max_concurrent_calls(n).build();

    // One bulkhead for everyone.
    let shared = Arc::new(Bulkhead::new("downstream", fail_fast(12)?));
    let shared_tallies =
        run(Arc::new(move |_tenant| match shared.call(|| std::thread::sleep(CALL_TAKES)) {
            Ok(()) => Outcome::Admitted,
            Err(_) => Outcome::RefusedByTotal,
        }));
    print("one shared bulkhead, 12 slots:", &shared_tallies);

    // A bulkhead per tenant, 4 slots each, under the same total of 12.
    let keyed = Arc::new(
        KeyedBulkhead::<&'static str>::builder("downstream")
            .default_config(fail_fast(4)?)
            .total(fail_fast(12)?)
            .max_keys(100)
            .build()?,
    );
    let keyed_tallies = {
        let keyed = Arc::clone(&keyed);
        run(Arc::new(move |tenant| match keyed.call(&tenant, || std::thread::sleep(CALL_TAKES)) {
            Ok(()) => Outcome::Admitted,
            // The total is named like the keyed bulkhead; a key's bulkhead "downstream/KEY".
            Err(full) if full.bulkhead_name() == "downstream" => Outcome::RefusedByTotal,
            Err(_) => Outcome::RefusedByKey,
        }))
    };
    print("a bulkhead per tenant, 4 slots each, total 12:", &keyed_tallies);
    println!("\nlive keys at the end: {}", keyed.live_keys());
    Ok(())
}
