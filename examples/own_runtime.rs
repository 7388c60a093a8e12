//! A runtime that embeds the bulkhead with a timer of its own (issue 30).
//!
//! A small single-threaded executor: a ready queue, a binary heap of timers, and a thread
//! that parks with a timeout until the earliest one. Its bulkhead is bound to a
//! `bulkhead::timer::Timer` whose callback pushes "fire the bulkhead's timer at t" into that
//! heap; when the entry is due the executor calls `timer.fire_expired()` and pushes the
//! instant it returns. Nothing ticks: the executor wakes only for an instant someone gave it.
//!
//! Bounded waits with contention (two permits held by tasks, four tasks waiting at once),
//! a 500 µs wait and a 5 ms wait, 480 waits each (about half time out). Prints the number of
//! `bulkhead-timer` threads, how often the executor fired the bulkhead's timer against the
//! deadlines it was given, and the overshoot (how long past its bound a timed-out wait
//! returned) p50/p99.
//!
//!     cargo run --release --example own_runtime            # bound to the runtime's timer
//!     cargo run --release --example own_runtime -- process # the process-wide thread instead

use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use bulkhead::timer::Timer;
use bulkhead::{Bulkhead, BulkheadConfig, RejectReason};

#[path = "support/measure.rs"]
mod measure;
use measure::{percentile, timer_threads};

/// What a timer entry does when due.
enum Action {
    /// A task's sleep ended.
    Wake(Waker),
    /// The bulkhead asked to be fired.
    FireBulkhead,
}

/// The runtime's timers: a heap of (instant, arrival) → action.
#[derive(Default)]
struct Timers {
    heap: BinaryHeap<Reverse<(Instant, u64)>>,
    actions: std::collections::HashMap<u64, Action>,
    seq: u64,
    /// Instants a bulkhead fire is pending at: an instant given twice (by the callback and
    /// by `fire_expired`'s answer) is fired once.
    fires_pending: std::collections::BTreeSet<Instant>,
}

impl Timers {
    fn push(&mut self, at: Instant, action: Action) {
        if matches!(action, Action::FireBulkhead) && !self.fires_pending.insert(at) {
            return;
        }
        self.seq += 1;
        self.heap.push(Reverse((at, self.seq)));
        self.actions.insert(self.seq, action);
    }

    fn pop_due(&mut self, now: Instant) -> Option<Action> {
        match self.heap.peek() {
            Some(Reverse((at, _))) if *at <= now => {
                let Reverse((at, seq)) = self.heap.pop()?;
                self.fires_pending.remove(&at);
                self.actions.remove(&seq)
            }
            _ => None,
        }
    }

    fn next(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse((at, _))| *at)
    }
}

/// What wakers and the bulkhead's callback share with the executor (they may run on other
/// threads: a release on another thread wakes a task here).
struct Shared {
    ready: Mutex<VecDeque<usize>>,
    timers: Mutex<Timers>,
    thread: Thread,
    /// Callbacks from the bulkhead: deadlines it armed before every other.
    told: AtomicUsize,
}

struct TaskWaker {
    id: usize,
    shared: Arc<Shared>,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.shared.ready.lock().unwrap().push_back(self.id);
        self.shared.thread.unpark();
    }
}

type Task = Pin<Box<dyn Future<Output = ()>>>;

struct Executor {
    shared: Arc<Shared>,
    tasks: RefCell<Vec<Option<Task>>>,
    spawned: RefCell<Vec<Task>>,
    /// The bulkhead timer this runtime drives (`None`: the process thread does).
    timer: RefCell<Option<Timer>>,
    /// How often the runtime fired the bulkhead's timer.
    fires: RefCell<usize>,
}

impl Executor {
    fn new() -> Rc<Executor> {
        Rc::new(Executor {
            shared: Arc::new(Shared {
                ready: Mutex::new(VecDeque::new()),
                timers: Mutex::new(Timers::default()),
                thread: thread::current(),
                told: AtomicUsize::new(0),
            }),
            tasks: RefCell::new(Vec::new()),
            spawned: RefCell::new(Vec::new()),
            timer: RefCell::new(None),
            fires: RefCell::new(0),
        })
    }

    /// The bulkhead timer of this runtime: its callback schedules a fire on our heap.
    fn bulkhead_timer(&self) -> Timer {
        let shared = Arc::clone(&self.shared);
        let timer = Timer::new(move |at| {
            shared.told.fetch_add(1, Ordering::Relaxed);
            shared.timers.lock().unwrap().push(at, Action::FireBulkhead);
            shared.thread.unpark();
        });
        *self.timer.borrow_mut() = Some(timer.clone());
        timer
    }

    fn spawn(&self, task: impl Future<Output = ()> + 'static) {
        self.spawned.borrow_mut().push(Box::pin(task));
    }

    fn sleep(&self, wait: Duration) -> Sleep {
        Sleep { at: Instant::now() + wait, shared: Arc::clone(&self.shared), armed: false }
    }

    /// Runs until every task finished.
    fn run(&self) {
        loop {
            for task in self.spawned.borrow_mut().drain(..) {
                let mut tasks = self.tasks.borrow_mut();
                tasks.push(Some(task));
                self.shared.ready.lock().unwrap().push_back(tasks.len() - 1);
            }
            let next = self.shared.ready.lock().unwrap().pop_front();
            if let Some(id) = next {
                let task = self.tasks.borrow_mut()[id].take();
                if let Some(mut task) = task {
                    let waker =
                        Waker::from(Arc::new(TaskWaker { id, shared: Arc::clone(&self.shared) }));
                    if task.as_mut().poll(&mut Context::from_waker(&waker)).is_pending() {
                        self.tasks.borrow_mut()[id] = Some(task);
                    }
                }
                continue;
            }
            if self.spawned.borrow().is_empty() && self.tasks.borrow().iter().all(Option::is_none) {
                return;
            }
            let due = self.shared.timers.lock().unwrap().pop_due(Instant::now());
            match due {
                Some(Action::Wake(waker)) => waker.wake(),
                Some(Action::FireBulkhead) => {
                    *self.fires.borrow_mut() += 1;
                    let timer = self.timer.borrow().clone();
                    if let Some(next) = timer.and_then(|timer| timer.fire_expired()) {
                        self.shared.timers.lock().unwrap().push(next, Action::FireBulkhead);
                    }
                }
                None => {
                    // Nothing ready, nothing due: park until the earliest timer (or a wake).
                    let next = self.shared.timers.lock().unwrap().next();
                    match next {
                        Some(at) => {
                            thread::park_timeout(at.saturating_duration_since(Instant::now()))
                        }
                        None => thread::park(),
                    }
                }
            }
        }
    }
}

/// The runtime's own sleep.
struct Sleep {
    at: Instant,
    shared: Arc<Shared>,
    armed: bool,
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.at {
            return Poll::Ready(());
        }
        if !self.armed {
            self.armed = true;
            let at = self.at;
            self.shared.timers.lock().unwrap().push(at, Action::Wake(cx.waker().clone()));
        }
        Poll::Pending
    }
}

const WAITERS: usize = 4;
const WAITS_PER_WAITER: usize = 120;

/// Contended bounded waits of `wait` on one executor; returns the overshoots of the waits
/// that timed out, and how many were granted.
fn run_case(wait: Duration, bound: bool) -> (Vec<Duration>, usize, usize, usize) {
    let executor = Executor::new();
    let config = BulkheadConfig::builder()
        .max_concurrent_calls(2)
        .max_wait_duration(wait)
        .build()
        .expect("valid config");
    let bulkhead = Rc::new(if bound {
        Bulkhead::with_timer("own-runtime", config, &executor.bulkhead_timer())
    } else {
        Bulkhead::new("own-runtime", config)
    });
    let overshoots = Rc::new(RefCell::new(Vec::new()));
    let granted = Rc::new(RefCell::new(0));
    let done = Rc::new(RefCell::new(0));
    // One permit held throughout; the other cycled: held 3 waits long, then let go for
    // whoever waits (some waits are granted, most time out).
    let held = bulkhead.try_acquire().ok();
    {
        let (bulkhead, executor2, done) =
            (Rc::clone(&bulkhead), Rc::clone(&executor), Rc::clone(&done));
        executor.spawn(async move {
            while *done.borrow() < WAITERS {
                if let Ok(permit) = bulkhead.try_acquire() {
                    executor2.sleep(wait * 3).await;
                    drop(permit);
                }
                executor2.sleep(wait / 4).await;
            }
        });
    }
    for _ in 0..WAITERS {
        let (bulkhead, executor2) = (Rc::clone(&bulkhead), Rc::clone(&executor));
        let (overshoots, granted, done) =
            (Rc::clone(&overshoots), Rc::clone(&granted), Rc::clone(&done));
        executor.spawn(async move {
            for _ in 0..WAITS_PER_WAITER {
                let start = Instant::now();
                match bulkhead.acquire_async().await {
                    Ok(permit) => {
                        *granted.borrow_mut() += 1;
                        drop(permit);
                        executor2.sleep(wait / 8).await;
                    }
                    Err(err) => {
                        assert_eq!(err.reason(), RejectReason::WaitTimedOut);
                        overshoots.borrow_mut().push(start.elapsed().saturating_sub(wait));
                    }
                }
            }
            *done.borrow_mut() += 1;
        });
    }
    executor.run();
    drop(held);
    bulkhead.check_work_conservation().expect("work conservation at quiescence");
    let fires = *executor.fires.borrow();
    let told = executor.shared.told.load(Ordering::Relaxed);
    let mut overshoots = overshoots.take();
    overshoots.sort();
    let granted = *granted.borrow();
    (overshoots, granted, fires, told)
}

fn main() {
    let bound = std::env::args().nth(1).as_deref() != Some("process");
    println!(
        "mode: {}",
        if bound {
            "bound to the runtime's own timer (bulkhead::timer::Timer)"
        } else {
            "process-wide bulkhead-timer thread (Bulkhead::new)"
        }
    );
    for wait in [Duration::from_micros(500), Duration::from_millis(5)] {
        let (overshoots, granted, fires, told) = run_case(wait, bound);
        println!(
            "wait {:>6?}: {} timed out, {} granted; overshoot p50 {:>9?} p99 {:>9?} max {:>9?}",
            wait,
            overshoots.len(),
            granted,
            percentile(&overshoots, 0.5),
            percentile(&overshoots, 0.99),
            overshoots.last().copied().unwrap_or_default(),
        );
        if bound {
            println!(
                "    runtime fired the bulkhead's timer {fires} times; the callback armed {told} \
                 deadlines (every fire is at an instant the bulkhead gave: no tick, no polling)"
            );
        }
    }
    println!("bulkhead-timer threads: {}", timer_threads());
}
