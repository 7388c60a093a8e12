/*
 * bulkhead.pml -- a Promela model of the bulkhead engine protocol (src/state.rs).
 *
 * Modelled, as the engine writes it (README.md maps every step to its Rust lines):
 *   - the state word: signed `avail`, `limit`, the WAITERS bit;
 *   - the queue mutex `lk`, the FIFO `q` with tombstones, the `live` count;
 *   - each waiter's state WAITING -> GRANTED | WITHDRAWN, written under the lock and read
 *     lock-free by its owner (`Waiter::is_granted`);
 *   - try_acquire, release, enqueue, drain, withdraw, and optionally set_limit;
 *   - NP clients, each doing CYCLES acquires: fast path, then give up (try_acquire) or
 *     queue, then wait for ever, or until a deadline (sync deadline / async timer), or until
 *     the async future is dropped. Every permit obtained is released.
 *
 * Granularity. Every Promela step holds exactly one access to memory that another thread
 * reads without the lock -- one operation on the state word (load, CAS, fetch_add,
 * fetch_or, fetch_and), or one store/load of a waiter's state that its owner reads
 * lock-free -- together with any lock-local work next to it. Taking and dropping the queue
 * mutex are folded into the first and last step of each critical section. This is a sound
 * reduction: lock-local work is invisible outside the lock, and a lock operation commutes
 * with every lock-free step of the other threads, so every interleaving of the engine is
 * equivalent to one of the model's.
 *
 * Knobs (spin -DNAME=VALUE):
 *   LIMIT    initial max_concurrent_calls                              (default 1)
 *   CYCLES   acquires per client                                       (default 2)
 *   CONFIG   1: add a change_config process doing set_limit(NEWLIMIT)  (default 0)
 *   NEWLIMIT the limit it sets                                         (default 2)
 *   SLACK    the `+ 16` in withdraw's compaction threshold, scaled down so the
 *            bounded model reaches the compaction branch               (default 0)
 *   MUTANT   0: the engine as written; 1..11: one seeded bug (mutants.sh)
 *   CLAIMS_ONLY  defined: the in-model checks below compile to skip, so a run of a named
 *            ltl property fails only when that property does (run.sh checks them in a
 *            separate claim-less run)
 */

#ifndef LIMIT
#define LIMIT 1
#endif
#ifndef CYCLES
#define CYCLES 2
#endif
#ifndef CONFIG
#define CONFIG 0
#endif
#ifndef NEWLIMIT
#define NEWLIMIT 2
#endif
#ifndef SLACK
#define SLACK 0
#endif
#ifndef MUTANT
#define MUTANT 0
#endif

/* In-model check: all back when the last process ends. The model's own well-formedness
 * stays a plain assert. */
#ifdef CLAIMS_ONLY
#define check(e) skip
#else
#define check(e) assert(e)
#endif

#define NP      3                   /* client processes, _pid 0..NP-1 */
#define NPROC   (NP + CONFIG)       /* processes that must finish */
#define QN      (NP * CYCLES)       /* queue capacity: at most one push per acquire */

/* A waiter's state (state.rs WAITING / GRANTED / WITHDRAWN). */
#define WAITING   0
#define GRANTED   1
#define WITHDRAWN 2

/* How a queued client waits. */
#define FOREVER 1                   /* unbounded wait: sync, or async never dropped */
#define TIMED   2                   /* sync deadline, or async timer (withdraw; keep a grant) */
#define DROP    3                   /* async future dropped (withdraw; release a grant) */

/* Queue entries: client p's live waiter is p + 1; a withdrawn entry is a tombstone. */
#define TOMB (NP + 1)

/* ---- the state word: one AtomicU64 in the engine ---- */
short avail   = LIMIT;              /* bits 32..63, signed */
byte  limit   = LIMIT;              /* bits 1..30 */
bit   waiters = 0;                  /* bit 0, WAITERS */

/* ---- the queue and its mutex ---- */
byte lk = 0;                        /* 0: free; otherwise the holder's _pid + 1 */
byte q[QN];                         /* FIFO, front at q[0]; slots >= qlen are 0 */
byte qlen = 0;
byte live = 0;                      /* entries that are not tombstones */
byte wst[NP];                       /* client p's current waiter's state */

/* ---- ghosts: used only by the properties ---- */
byte own[NP];                       /* permits client p owns (a granted waiter owns one) */
byte transit = 0;                   /* CASed out of `avail` by a drain, not yet GRANTED */
byte orphan = 0;                    /* permits granted to a dead (withdrawn) waiter */
byte pending = 0;                   /* drains owed: a release / set_limit saw WAITERS and
                                       has not yet taken the lock */
bit  queued[NP];                    /* client p has a WAITING waiter in the queue */
bit  double_fate = 0;               /* some waiter's fate was written twice */
bit  barged = 0;                    /* a try_acquire CAS won while a live waiter was queued */
bit  over_admitted = 0;             /* an acquire CAS left in_flight above the limit */
bit  shrunk = 0;                    /* set_limit lowered the limit */
byte done = 0;                      /* processes finished */

#define IN_FLIGHT (own[0] + own[1] + own[2] + transit + orphan)

/* ---------------------------------------------------------------------------------------
 * Lock-local helpers, used only inside d_step.
 */
inline pop_front() {
    i = 0;
    do
    :: i + 1 < qlen -> q[i] = q[i + 1]; i++
    :: else -> break
    od;
    qlen--;
    q[qlen] = 0;
    i = 0
}

inline clear_queue() {                                  /* queue.waiters.clear() */
    i = 0;
    do
    :: i < qlen -> q[i] = 0; i++
    :: else -> break
    od;
    qlen = 0;
    i = 0
}

inline retain_live() {                                  /* retain(state == WAITING) */
    i = 0; j = 0;
    do
    :: i < qlen ->
        if
        :: q[i] != TOMB -> q[j] = q[i]; j++
        :: else
        fi;
        i++
    :: else -> break
    od;
    i = j;
    do
    :: i < qlen -> q[i] = 0; i++
    :: else -> break
    od;
    qlen = j;
    i = 0; j = 0
}

inline load_word() {
    la = avail; lw = waiters; ll = limit
}

inline forget_word() {
    la = 0; lw = 0; ll = 0
}

/* ---------------------------------------------------------------------------------------
 * Semaphore::try_acquire: a Relaxed load, then CAS while the word admits a newcomer.
 * (compare_exchange_weak's spurious failure is a retry with the same value: abstracted.)
 * `first` is the load step; enqueue passes one that also takes the lock.
 */
#if MUTANT == 6
#define ADMITS (la >= 1)                                /* BUG: ignores WAITERS (barging) */
#else
#define ADMITS (lw == 0 && la >= 1)                     /* Word::admits_newcomer */
#endif

inline try_acquire(ok) {
    d_step { load_word() };
    cas_loop(ok)
}

inline cas_loop(ok) {
    do
    :: !ADMITS -> ok = 0; break                         /* rejection: Err(word) */
    :: else ->
        d_step {                                        /* compare_exchange_weak */
            if
            :: avail == la && waiters == lw && limit == ll ->
                avail--; own[me]++; ok = 1;
                if
                :: live > 0 -> barged = 1               /* barged past a live waiter */
                :: else
                fi;
                if
                :: IN_FLIGHT > limit -> over_admitted = 1
                :: else
                fi
            :: else ->
                load_word(); ok = 0
            fi
        };
        if
        :: ok -> break
        :: else
        fi
    od;
    atomic { forget_word() }
}

/* ---------------------------------------------------------------------------------------
 * Semaphore::drain, then drop the lock. Takes the lock first if this process does not hold
 * it (release_slow / set_limit: that retires the pending drain). With want = 1 the final
 * step also reads our own grant (enqueue's `waiter.is_granted()` under the lock) into ok;
 * want = 2 does that and keeps the lock (only MUTANT 8 needs it).
 */
inline drain_exit(want) {
    if
    :: want > 0 -> ok = (wst[me] == GRANTED)
    :: else
    fi;
    forget_word();
    if
    :: want < 2 -> lk = 0                               /* the guard is dropped */
    :: else                                             /* (MUTANT 8 keeps it) */
    fi;
    stop = 1
}

#if MUTANT == 11
#define NO_FREE_PERMIT (la < 0)                         /* BUG: off by one, grants at 0 */
#else
#define NO_FREE_PERMIT (la <= 0)
#endif

inline drain(want) {
    do
    :: d_step {
        (lk == 0 || lk == _pid + 1) ->
        if
        :: lk == 0 -> lk = _pid + 1; pending--          /* release_slow: queue.lock() */
        :: else
        fi;
#if MUTANT != 7
        do                                              /* pop tombstones off the front */
        :: qlen > 0 && q[0] == TOMB -> pop_front()
        :: else -> break
        od;
#endif
        if
        :: live == 0 ->
            clear_queue();
            waiters = 0;                                /* clear_waiters_flag: fetch_and */
            drain_exit(want)
        :: else ->
            load_word();                                /* state.load */
            if
            :: NO_FREE_PERMIT -> drain_exit(want)       /* available() <= 0: return */
            :: else
            fi
        fi
       };
       if
       :: stop -> stop = 0; break
       :: else ->
            do
            :: d_step {                                 /* compare_exchange_weak */
                if
                :: avail == la && waiters == lw && limit == ll ->
                    avail--; transit++; cas = 1; forget_word();
                    if
                    :: IN_FLIGHT > limit -> over_admitted = 1
                    :: else
                    fi
                :: else ->
                    load_word();
                    if
                    :: NO_FREE_PERMIT -> drain_exit(want)
                    :: else
                    fi
                fi
               };
               if
               :: cas || stop -> break
               :: else
               fi
            od;
            if
            :: stop -> stop = 0; break
            :: else ->
                d_step {                /* pop_front; live -= 1; store GRANTED; wake */
                    assert(qlen > 0 && live > 0);
                    g = q[0];
                    pop_front();
                    live--;
                    transit--;
                    if
                    :: g == TOMB ->                     /* only reachable with MUTANT 7 */
                        orphan++; double_fate = 1
                    :: else ->
                        g--;
                        if
                        :: wst[g] != WAITING -> double_fate = 1
                        :: else
                        fi;
                        wst[g] = GRANTED;
                        own[g]++;
                        queued[g] = 0
                    fi;
                    g = 0; cas = 0
                }
            fi
       fi
    od
}

/* ---------------------------------------------------------------------------------------
 * Semaphore::release: fetch_add(ONE_PERMIT); if WAITERS was set, lock and drain.
 */
inline release() {
    d_step {                                            /* fetch_add */
        lw = waiters;
        avail++;
        own[me]--;
#if MUTANT == 1
        lw = 0;                                         /* BUG: ignores WAITERS */
#endif
        if
        :: lw -> pending++
        :: else
        fi
    };
    if
    :: lw -> lw = 0; drain(0)                           /* release_slow */
    :: else
    fi
}

/* ---------------------------------------------------------------------------------------
 * Semaphore::enqueue (max_waiting: None). ok = 1: Acquired; ok = 0: Queued.
 */
inline enqueue() {
    d_step { lk == 0 -> lk = _pid + 1; load_word() };   /* queue.lock(); try_acquire load */
    cas_loop(ok);
    if
    :: ok -> lk = 0                                     /* Acquired (guard dropped) */
    :: else ->
        d_step {
#if MUTANT != 8
            waiters = 1;                                /* fetch_or(WAITERS) */
#endif
            q[qlen] = me + 1; qlen++; live++;           /* push_back; live += 1 */
            queued[me] = 1
        };
#if MUTANT == 3
        d_step { ok = (wst[me] == GRANTED); lk = 0 }    /* BUG: no drain after the push */
#elif MUTANT == 8
        drain(2);
        atomic { waiters = 1; lk = 0 }                  /* BUG: flag set after the drain */
#else
        drain(1)                                        /* drain; is_granted; unlock */
#endif
    fi
}

/* ---------------------------------------------------------------------------------------
 * Semaphore::withdraw. ok = 1: the waiter had been granted and owns the permit.
 */
inline withdraw() {
    d_step {
        lk == 0 -> lk = _pid + 1;                       /* queue.lock() */
        if
#if MUTANT == 2
        :: wst[me] == GRANTED || wst[me] == WAITING ->  /* BUG: ignores a grant */
            if
            :: wst[me] == GRANTED -> double_fate = 1
            :: else
            fi;
#else
        :: wst[me] == GRANTED -> ok = 1                 /* keep the permit */
        :: wst[me] == WAITING ->
#endif
            wst[me] = WITHDRAWN;
            queued[me] = 0;
            i = 0;                                      /* our entry becomes a tombstone */
            do
            :: i >= qlen -> break                       /* (not queued: MUTANT 2 only) */
            :: i < qlen && q[i] == me + 1 -> q[i] = TOMB; break
            :: else -> i++
            od;
            i = 0;
            live--;
            if
            :: live == 0 ->
                clear_queue();
                waiters = 0                             /* clear_waiters_flag: fetch_and */
            :: else ->
#if MUTANT == 4
                waiters = 0;                            /* BUG: cleared while live > 0 */
#endif
                if
                :: qlen > 2 * live + SLACK -> retain_live()
                :: else
                fi
            fi;
            ok = 0
        :: else -> assert(false)                        /* withdraws at most once */
        fi;
        lk = 0                                          /* the guard is dropped */
    }
}

/* ---------------------------------------------------------------------------------------
 * A client: CYCLES acquires, as Bulkhead::try_acquire / acquire_timeout (+ wait_blocking)
 * and the async Core::poll / Core::cancel do them.
 */
active [NP] proctype Client() {
    byte me = _pid;
    byte k = 0;
    byte mode = 0;
    short la = 0;
    bit lw = 0;
    byte ll = 0;
    bit ok = 0;
    bit stop = 0;
    bit cas = 0;
    byte g = 0;
    byte i = 0;
    byte j = 0;

    assert(me < NP);
    do
    :: k < CYCLES ->
        try_acquire(ok);                                /* the fast path */
        if
        :: ok -> ok = 0; release()                      /* held, then the Permit drops */
        :: else ->
            if
            :: skip                                     /* max wait zero: rejected, Full */
            :: ok = 0; enqueue();                       /* the slow path */
                if
                :: ok -> ok = 0; release()              /* Enqueued::Acquired */
                :: else ->
                    if                                  /* how this waiter waits */
                    :: mode = FOREVER
                    :: mode = TIMED
                    :: mode = DROP
                    fi;
                    do
                    :: wst[me] == GRANTED ->            /* is_granted(): woken, owns it */
                        release(); break
                    :: mode == TIMED ->                 /* the deadline passed */
                        withdraw();
                        if
                        :: ok -> ok = 0; release()      /* the grant won: success */
                        :: else                         /* WaitTimedOut */
                        fi;
                        break
                    :: mode == DROP ->                  /* the future is dropped */
                        withdraw();
                        if
#if MUTANT == 5
                        :: ok -> ok = 0                 /* BUG: the permit is forgotten */
#else
                        :: ok -> ok = 0; release()      /* Core::cancel releases it */
#endif
                        :: else
                        fi;
                        break
                    od
                fi
            fi
        fi;
        atomic { wst[me] = WAITING; mode = 0; k++ }     /* the Arc<Waiter> is dropped */
    :: else -> break
    od;
    atomic {
        done++;
        if
        :: done == NPROC ->                             /* everyone finished: all is back */
            check(avail == limit && IN_FLIGHT == 0 && waiters == 0 && live == 0 &&
                   pending == 0 && lk == 0)
        :: else
        fi
    }
}

/* ---------------------------------------------------------------------------------------
 * Optional: Bulkhead::change_config -> Semaphore::set_limit(NEWLIMIT), once.
 */
#if CONFIG
active proctype Config() {
    byte me = 0;                                        /* drain(0) never reads it */
    short la = 0;
    bit lw = 0;
    byte ll = 0;
    bit ok = 0;
    bit stop = 0;
    bit cas = 0;
    byte g = 0;
    byte i = 0;
    byte j = 0;

    d_step { load_word() };
    do
    :: d_step {                                         /* compare_exchange_weak */
        if
        :: avail == la && waiters == lw && limit == ll ->
            avail = la + NEWLIMIT - ll;                 /* available + delta */
#if MUTANT == 10
            if
            :: avail < 0 -> avail = 0                   /* BUG: a shrink forgives the debt */
            :: else
            fi;
#endif
            limit = NEWLIMIT;
            if
            :: NEWLIMIT < ll -> shrunk = 1
            :: else
            fi;
#if MUTANT == 9
            ok = 0;                                     /* BUG: waiters never served */
#else
            ok = (waiters && avail > 0);                /* has_waiters && available > 0 */
#endif
            if
            :: ok -> pending++
            :: else
            fi;
            forget_word();
            stop = 1
        :: else ->
            load_word()
        fi
       };
       if
       :: stop -> stop = 0; break
       :: else
       fi
    od;
    if
    :: ok -> ok = 0; drain(0)                           /* release_slow */
    :: else
    fi;
    atomic {
        done++;
        if
        :: done == NPROC ->
            check(avail == limit && IN_FLIGHT == 0 && waiters == 0 && live == 0 &&
                   pending == 0 && lk == 0)
        :: else
        fi
    }
}
#endif

/* ---------------------------------------------------------------------------------------
 * Properties, each checked by name (pan -N). Safety: pan built with -DSAFETY.
 * Liveness: pan -a -f (weak fairness).
 */

/* Calls in flight never exceed the limit; after a shrink, never the old limit either: a
 * shrink does not revoke, the debt is paid by releases. */
ltl within_limit { [] (IN_FLIGHT <= limit || (shrunk && IN_FLIGHT <= LIMIT)) }

/* Every admission (an acquire CAS, in try_acquire or in drain) leaves in_flight within the
 * current limit: while a shrink's debt is unpaid, nobody is admitted. */
ltl admits_within_limit { [] !over_admitted }

/* No barging: a newcomer's CAS never wins while a live waiter is queued. */
ltl no_barging { [] !barged }

/* No permit created or lost: free + owned (+ held by a drain mid-grant) == limit. */
ltl accounting { [] (avail + IN_FLIGHT == limit) }

/* A waiter's fate is written once: never both granted and withdrawn. */
ltl one_fate { [] !double_fate }

/* WAITERS is set whenever a live waiter is queued, and is set with no live waiter only
 * inside a critical section whose holder will clear it. */
ltl flag_tracks_queue { [] ((live > 0 -> waiters) && ((waiters && live == 0) -> lk != 0)) }

/* No stranded permit: a free permit while WAITERS is set has a drain coming (a release or
 * set_limit saw the flag and heads for the lock) or sits inside a critical section. */
ltl free_permit_drained { [] ((waiters && avail > 0) -> (pending > 0 || lk != 0)) }

/* Liveness: every queued waiter is eventually granted or withdraws. */
ltl queued_served { [] ((queued[0] -> <> !queued[0]) && (queued[1] -> <> !queued[1]) &&
                        (queued[2] -> <> !queued[2])) }

/* Liveness: every process finishes and every permit comes back. Once all processes have
 * finished nothing moves any more, so this <> is also the <>[] ("for good"). */
ltl all_back { <> (done == NPROC && avail == limit && IN_FLIGHT == 0 && waiters == 0 &&
                      live == 0) }
