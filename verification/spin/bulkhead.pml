/*
 * bulkhead.pml -- a Promela model of the bulkhead engine protocol (src/engine/state.rs).
 *
 * Modelled, as the engine writes it (README.md maps every step to its Rust lines):
 *   - the state word: signed `avail`, `limit`, the WAITERS and CLOSED bits;
 *   - the queue mutex `lk`; the slab's FIFO of queued waiters `q` (a withdrawal unlinks its
 *     slot wherever it is, no tombstone), the `live` count, the list of drain waiters;
 *   - each slot's state (FREE, QUEUED, GRANTED, CLOSED, DRAINWAIT, DRAINED), written AND
 *     read only under the lock; only the owner frees its slot;
 *   - the wakes: a drain (or close) collects at most one wake under the lock and delivers
 *     it after unlocking; a woken waiter re-checks its slot under the lock (poll_wait);
 *   - try_acquire, release, enqueue, drain, poll_wait, withdraw, close, wait_drained, and
 *     optionally set_limit;
 *   - NP clients, each doing CYCLES acquires: fast path, then give up (closed, or max wait
 *     zero) or queue, then wait for ever, or until a deadline (sync deadline / async timer),
 *     or until the async future is dropped. Every permit obtained is released.
 *   - optionally a closer (`close()` once, at any moment) and a drainer (`wait_drained`,
 *     for ever or with a timeout).
 *
 * Granularity. Every Promela step holds exactly one access to memory that another thread
 * touches without the lock -- one operation on the state word (load, CAS, fetch_add,
 * fetch_or, fetch_and), or one unpark/wake of another thread -- together with any
 * lock-local work next to it. Taking and dropping the queue mutex are folded into the
 * first and last step of each critical section. Reads of CLOSED and WAITERS under the lock
 * are lock-local: both bits change only under the lock. This is a sound reduction:
 * lock-local work is invisible outside the lock, and a lock operation commutes with every
 * lock-free step of the other threads, so every interleaving of the engine is equivalent
 * to one of the model's.
 *
 * Knobs (spin -DNAME=VALUE):
 *   LIMIT    initial max_concurrent_calls                              (default 1)
 *   CYCLES   acquires per client                                       (default 2)
 *   CONFIG   1: add a change_config process doing set_limit(NEWLIMIT)  (default 0)
 *   NEWLIMIT the limit it sets                                         (default 2)
 *   CLOSE    1: add a closer process calling close() once              (default 0)
 *   DRAIN    1: add a drainer process calling wait_drained for ever; 2: for ever or with a
 *            timeout (needs CLOSE)                                     (default 0)
 *   MUTANT   0: the engine as written; otherwise one seeded bug (mutants.sh)
 *   OLDGRANT defined: drain may grant while close runs (the engine before README "Finding")
 *   WAKESTEP defined: a wake is delivered in its own step after the unlock
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
#ifndef CLOSE
#define CLOSE 0
#endif
#ifndef DRAIN
#define DRAIN 0
#endif
#ifndef MUTANT
#define MUTANT 0
#endif
#if DRAIN && !CLOSE
#error "DRAIN needs CLOSE: a drain waiter with no close waits for ever"
#endif

/* In-model check: all back when the last process ends. The model's own well-formedness
 * stays a plain assert. */
#ifdef CLAIMS_ONLY
#define check(e) skip
#else
#define check(e) assert(e)
#endif

#define NP      3                   /* client processes, _pid 0..NP-1 */
#define DR      NP                  /* the drainer's slot index */
#define NPROC   (NP + CONFIG + CLOSE + (DRAIN > 0))   /* processes that must finish */
#define QN      (NP * CYCLES)       /* FIFO capacity (a stale link (MUTANT 16) adds one) */

/* A slot's state (state.rs SlotState). */
#define FREE      0
#define QUEUED    1
#define GRANTED   2
#define CLOSEDS   3
#define DRAINWAIT 4
#define DRAINED   5

/* What enqueue / poll_wait / withdraw return. */
#define R_NONE     0                /* poll_wait: still waiting; withdraw: withdrawn */
#define R_ACQUIRED 1                /* Enqueued::Acquired */
#define R_QUEUED   2                /* Enqueued::Queued */
#define R_CLOSED   3                /* Enqueued::Closed / Outcome::Closed */
#define R_GRANTED  4                /* Outcome::Granted */
#define R_DRAINED  5                /* Outcome::Drained / wait_drained's None */

/* How a queued client waits. */
#define FOREVER 1                   /* unbounded wait: sync, or async never dropped */
#define TIMED   2                   /* sync deadline, or async timer (withdraw; keep a grant) */
#define DROP    3                   /* async future dropped (withdraw; release a grant) */

/* ---- the state word: one AtomicU64 in the engine ---- */
short avail   = LIMIT;              /* bits 33..63, signed */
byte  limit   = LIMIT;              /* bits 2..31 */
bit   waiters = 0;                  /* bit 0, WAITERS */
bit   closed  = 0;                  /* bit 1, CLOSED */

/* ---- the queue and its mutex ---- */
byte lk = 0;                        /* 0: free; otherwise the holder's _pid + 1 */
byte q[QN];                         /* FIFO of queued slots (client p's is p + 1), front at
                                       q[0]; entries >= live are 0 */
byte live = 0;                      /* slots in the FIFO (Queue::live) */
bit  dlinked = 0;                   /* the drainer's slot is in the drain list */
byte sst[NP + 1];                   /* slot states: client p's is sst[p], the drainer's
                                       sst[DR] (each owner has at most one slot) */
bit  woken[NP + 1];                 /* unpark token / pending task wake of each owner */

/* ---- ghosts: used only by the properties ---- */
byte own[NP];                       /* permits client p owns (a granted waiter owns one) */
byte orphan = 0;                    /* permits granted to a slot nobody waits on */
byte pending = 0;                   /* drains owed: a release / set_limit saw WAITERS and
                                       has not yet taken the lock */
bit  queued[NP + 1];                /* owner p holds a slot (from alloc to free) */
bit  double_fate = 0;               /* a slot's fate was written twice, or on a free slot */
bit  barged = 0;                    /* a newcomer's CAS won while a waiter was queued */
bit  over_admitted = 0;             /* an acquire CAS left in_flight above the limit */
bit  shrunk = 0;                    /* set_limit lowered the limit */
bit  admitted_closed = 0;           /* a newcomer's CAS won while CLOSED was set */
bit  granted_closed = 0;            /* a drain granted a waiter while CLOSED was set */
bit  late_link = 0;                 /* a waiter was queued while CLOSED was set */
bit  close_done = 0;                /* close() returned */
bit  drained_early = 0;             /* a drain wait ended while open or with calls in flight */
byte done = 0;                      /* processes finished */
byte cdone = 0;                     /* clients finished */

#define IN_FLIGHT (own[0] + own[1] + own[2] + orphan)

#define QUIESCENT (avail == limit && IN_FLIGHT == 0 && waiters == closed && live == 0 && \
                   !dlinked && pending == 0 && lk == 0 && closed == CLOSE && \
                   sst[0] == FREE && sst[1] == FREE && sst[2] == FREE && sst[DR] == FREE)

/* ---------------------------------------------------------------------------------------
 * Lock-local helpers, used only inside d_step.
 */
inline link_back(p) {                                   /* Queue::alloc: link_back */
    assert(live < QN);
    q[live] = p + 1;
    live++
}

inline unlink(p) {                                      /* Queue::unlink(true, p) */
    i = 0;
    do
    :: i < live && q[i] != p + 1 -> i++
    :: else -> break
    od;
    assert(i < live);                                   /* it was linked */
    do
    :: i + 1 < live -> q[i] = q[i + 1]; i++
    :: else -> break
    od;
    live--;
    q[live] = 0;
    i = 0
}

inline pop_front() {                                    /* unlink the head into g */
    g = q[0] - 1;
    unlink(g)
}

/* Writes a fate on slot p (a drain's GRANTED, close's CLOSEDS, DRAINED). */
inline set_fate(p, fate) {
    if
    :: sst[p] != QUEUED && sst[p] != DRAINWAIT -> double_fate = 1
    :: else
    fi;
    sst[p] = fate
}

inline free_slot(p) {                                   /* Queue::free: the owner only */
    assert(sst[p] != FREE);
    sst[p] = FREE;
    queued[p] = 0;
    woken[p] = 0                                        /* (a later wake: spurious) */
}

inline load_word() {
    la = avail; lw = waiters; lc = closed; ll = limit
}

inline forget_word() {
    la = 0; lw = 0; lc = 0; ll = 0
}

#define SAME_WORD (avail == la && waiters == lw && closed == lc && limit == ll)

/* ---------------------------------------------------------------------------------------
 * Semaphore::try_acquire: a Relaxed load, then CAS while the word admits a newcomer.
 * (compare_exchange_weak's spurious failure is a retry with the same value: abstracted.)
 * On a refusal `lc` keeps the CLOSED bit the refusing word had (Err(word).is_closed()).
 */
#if MUTANT == 6
#define ADMITS (lc == 0 && la >= 1)                     /* BUG: ignores WAITERS (barging) */
#elif MUTANT == 18
#define ADMITS (lw == 0 && la >= 1)                     /* BUG: ignores CLOSED */
#else
#define ADMITS (lw == 0 && lc == 0 && la >= 1)          /* Word::admits_newcomer */
#endif

/* One CAS attempt, as a d_step body: ok = 1 won; stop = 1 refused (Err(word)). */
inline cas_step() {
    if
    :: SAME_WORD ->
        avail--; own[me]++; ok = 1;
        if
        :: live > 0 -> barged = 1                       /* barged past a queued waiter */
        :: else
        fi;
        if
        :: closed -> admitted_closed = 1
        :: else
        fi;
        if
        :: IN_FLIGHT > limit -> over_admitted = 1
        :: else
        fi
    :: else ->
        load_word();
        if
        :: !ADMITS -> stop = 1
        :: else
        fi
    fi
}

/* The fast path: ok = 1 acquired; otherwise lc says whether the refusal was Closed. */
inline try_acquire() {
    d_step {
        load_word();
        if
        :: !ADMITS -> stop = 1
        :: else
        fi
    };
    do
    :: stop -> d_step { stop = 0; la = 0; lw = 0; ll = 0 }; break   /* keep lc */
    :: else ->
        d_step { cas_step() };
        if
        :: ok -> forget_word(); break
        :: else
        fi
    od
}

/* ---------------------------------------------------------------------------------------
 * The wake collected in `wk` (WakeList, holds one), delivered after unlocking.
 */
#ifdef WAKESTEP
inline deliver() { skip }
inline wake_all() {
    if
    :: wk != 0 ->
        d_step {                                        /* thread.unpark / waker.wake */
            if
            :: sst[wk - 1] != FREE -> woken[wk - 1] = 1
            :: else                                     /* its wait is over: spurious */
            fi;
            wk = 0
        }
    :: else
    fi
}
#else
inline deliver() {
    if
    :: wk != 0 ->
            if
            :: sst[wk - 1] != FREE -> woken[wk - 1] = 1
            :: else                                     /* its wait is over: spurious */
            fi;
            wk = 0
    :: else
    fi
}
inline wake_all() { skip }
#endif

/* ---------------------------------------------------------------------------------------
 * One pass of Semaphore::drain under the lock (taken first if this process does not hold
 * it: release_slow / set_limit, or a later round of drain_and_wake; the first take by a
 * release or set_limit retires its pending drain). Sets `more` (drain's return value). The
 * pass ends by dropping the lock; with ctx = 1 (enqueue's own drain) it first checks
 * whether our own slot was granted (then frees it and discards our own wake).
 */
inline drain_exit() {
    if
    :: ctx >= 1 ->
        if
        :: sst[me] == GRANTED ->
            ok = 1;
            assert(wk == me + 1);                       /* wakes.discard_last(): our own */
            wk = 0;
            free_slot(me)
        :: else
        fi
    :: else
    fi;
    forget_word();
    if
    :: ctx != 2 -> lk = 0; deliver()                   /* the guard is dropped */
    :: else                                             /* (MUTANT 8 keeps it) */
    fi;
    stop = 1
}

#if MUTANT == 11
#define NO_FREE_PERMIT (la < 0)                         /* BUG: off by one, grants at 0 */
#else
#define NO_FREE_PERMIT (la <= 0)
#endif
#ifndef OLDGRANT                                        /* the fix for README "Finding": */
#define NO_GRANT (NO_FREE_PERMIT || lc)                 /* no grant once CLOSED is set */
#else
#define NO_GRANT NO_FREE_PERMIT
#endif

inline drain_pass() {
    do
    :: d_step {
        (lk == 0 || lk == _pid + 1) ->
        if
        :: lk == 0 ->
            lk = _pid + 1;                              /* queue.lock() */
            if
            :: owe -> owe = 0; pending--
            :: else
            fi
        :: else
        fi;
        if
        :: live == 0 ->
            if
            :: !closed ->
                waiters = 0;                            /* clear_waiters_flag: fetch_and */
                more = 0; drain_exit()
            :: else ->
#if MUTANT == 13
                waiters = 0;                            /* BUG: clears WAITERS after close */
#endif
                load_word();                            /* state.load: in_flight() */
                if
#if MUTANT == 19
                :: false -> skip                        /* BUG: ignores calls in flight */
#else
                :: ll - la > 0 -> more = 0; drain_exit()
#endif
                :: else ->
#if MUTANT != 15
                    if                                  /* pop the drain waiters */
                    :: wk == 0 && dlinked ->
                        dlinked = 0;
                        if
                        :: !(closed && IN_FLIGHT == 0) -> drained_early = 1
                        :: else
                        fi;
                        set_fate(DR, DRAINED);
                        wk = DR + 1
                    :: else
                    fi;
#endif
                    more = dlinked; drain_exit()    /* drainers.head != NIL */
                fi
            fi
        :: else ->
            if
            :: wk != 0 -> more = 1; drain_exit()    /* wakes.is_full(): return true */
            :: else ->
                load_word();                            /* state.load */
                if
                :: NO_GRANT -> more = 0; drain_exit()
                :: else
                fi
            fi
        fi
       };
       if
       :: stop -> stop = 0; break
       :: else ->
            do                                          /* [grant path] */
            :: d_step {                                 /* compare_exchange_weak */
                if
                :: SAME_WORD ->
                    avail--; forget_word(); cas = 1;
                    pop_front();                        /* pop_front(true, Granted) */
                    if
                    :: closed -> granted_closed = 1
                    :: else
                    fi;
                    if
                    :: sst[g] == QUEUED ->
                        set_fate(g, GRANTED);
                        own[g]++
                    :: else ->                          /* a stale link (MUTANT 16 only) */
                        double_fate = 1; orphan++
                    fi;
                    wk = g + 1;                         /* wakes.push */
                    g = 0;
                    if
                    :: IN_FLIGHT > limit -> over_admitted = 1
                    :: else
                    fi
                :: else ->
                    load_word();
                    if
                    :: NO_GRANT -> more = 0; drain_exit()
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
            :: else -> cas = 0                          /* loop: the next waiter */
            fi                                          /* [/grant path] */
       fi
    od
}

/* Semaphore::drain_and_wake: drain passes (the first with ctx as the caller set it, the
 * lock held or not), each ending with the lock dropped and its wake delivered, while the
 * pass returned `more`. */
inline drain_and_wake() {
    do
    :: drain_pass();
#if MUTANT == 8
        if
        :: ctx == 2 -> d_step { waiters = 1; lk = 0; deliver() } /* BUG: flag set late */
        :: else
        fi;
#endif
        wake_all();
        if
        :: more -> ctx = 0                              /* lock, drain again */
        :: else -> ctx = 0; break
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
        :: lw -> pending++; owe = 1
        :: else
        fi
    };
    if
    :: lw -> lw = 0; drain_and_wake()                   /* release_slow */
    :: else
    fi
}

/* ---------------------------------------------------------------------------------------
 * Semaphore::enqueue (max_waiting: None). Sets res: R_ACQUIRED, R_QUEUED or R_CLOSED.
 */
inline enqueue() {
    d_step {                                            /* queue.lock(); try_acquire load */
        lk == 0 -> lk = _pid + 1;
        load_word();
        if
        :: !ADMITS -> stop = 1
        :: else
        fi
    };
    do
    :: stop -> stop = 0; break
    :: else ->
        d_step { cas_step() };
        if
        :: ok -> break
        :: else
        fi
    od;
    if
    :: ok -> ok = 0; res = R_ACQUIRED; d_step { forget_word(); lk = 0 }
#if MUTANT != 14
    :: !ok && lc -> res = R_CLOSED; d_step { forget_word(); lk = 0 }   /* refused: Closed */
    :: else ->
#else
    :: else ->                                          /* BUG: ignores CLOSED */
#endif
        d_step {
#if MUTANT == 12
            lw = (la <= 0);                             /* BUG: decides on the stale load */
#else
            lw = (avail <= 0);                          /* prev.available() <= 0 */
#endif
#if MUTANT != 8
            waiters = 1;                                /* fetch_or(WAITERS) */
#endif
            sst[me] = QUEUED; queued[me] = 1;           /* queue.alloc(Queued) */
            link_back(me);
            if
            :: closed -> late_link = 1
            :: else
            fi;
            la = 0; lc = 0; ll = 0;                     /* (lw: the decision) */
#if MUTANT == 3
            lw = 1;                                     /* BUG: never drains */
#endif
#if MUTANT == 8
            lw = 0;                                     /* BUG: drains, then sets WAITERS */
#endif
            if
            :: lw -> lw = 0; res = R_QUEUED; lk = 0     /* return Queued: no drain */
            :: else
            fi
        };
        if
        :: res == R_QUEUED -> skip
        :: else ->
            ok = 0;
#if MUTANT == 8
            ctx = 2;                                    /* BUG: the flag after the drain */
#else
            ctx = 1;                                    /* then: own slot granted? */
#endif
            drain_and_wake();
            if
            :: ok -> ok = 0; res = R_ACQUIRED
            :: else -> res = R_QUEUED
            fi
        fi
    fi
}

/* ---------------------------------------------------------------------------------------
 * Semaphore::poll_wait, as a woken owner runs it: the wake consumed (park returns / the
 * task is polled) and the slot checked under the lock. Sets res: R_NONE still waiting.
 */
inline poll_wait() {
    d_step {
        woken[me] && lk == 0 ->
        woken[me] = 0;
        if
        :: sst[me] == QUEUED || sst[me] == DRAINWAIT -> res = R_NONE
        :: sst[me] == GRANTED -> res = R_GRANTED; free_slot(me)
        :: sst[me] == CLOSEDS -> res = R_CLOSED; free_slot(me)
        :: sst[me] == DRAINED -> res = R_DRAINED; free_slot(me)
        :: else -> assert(false)                        /* the owner's slot is in use */
        fi
    }
}

/* ---------------------------------------------------------------------------------------
 * Semaphore::withdraw. Sets res: R_NONE withdrawn, or the outcome the wait already had.
 */
inline withdraw() {
    d_step {
        lk == 0 -> lk = _pid + 1;                       /* queue.lock() */
        if
        :: sst[me] == QUEUED ->
#if MUTANT == 16
            live = live;                                /* BUG: left linked (stale link) */
#else
            unlink(me);
#endif
            if
            :: live == 0 && !closed -> waiters = 0      /* clear_waiters_flag: fetch_and */
            :: else ->
#if MUTANT == 4
                waiters = 0                             /* BUG: cleared while live > 0 */
#else
                skip
#endif
            fi;
            res = R_NONE
        :: sst[me] == DRAINWAIT -> dlinked = 0; res = R_NONE   /* unlink(false, ..) */
#if MUTANT == 2
        :: sst[me] == GRANTED -> double_fate = 1; res = R_NONE /* BUG: drops the grant */
#else
        :: sst[me] == GRANTED -> res = R_GRANTED
#endif
        :: sst[me] == CLOSEDS -> res = R_CLOSED
        :: sst[me] == DRAINED -> res = R_DRAINED
        :: else -> assert(false)                        /* withdraws at most once */
        fi;
        free_slot(me);
        lk = 0                                          /* the guard is dropped */
    }
}

/* The processes' locals (try_acquire, drain, enqueue... use them). */
#define LOCALS \
    short la = 0; bit lw = 0; bit lc = 0; byte ll = 0; \
    bit ok = 0; bit stop = 0; bit cas = 0; bit more = 0; bit owe = 0; byte ctx = 0; \
    byte wk = 0; byte g = 0; byte i = 0; byte res = 0; byte mode = 0

/* Counts this process finished; the last one checks that all is back. */
inline finish() {
    atomic {
        done++;
        if
        :: _pid < NP -> cdone++
        :: else
        fi;
        if
        :: done == NPROC -> check(QUIESCENT)
        :: else
        fi
    }
}

/* ---------------------------------------------------------------------------------------
 * A client: CYCLES acquires, as Bulkhead::try_acquire / acquire_timeout (+ wait_blocking)
 * and the async Core::poll / Core::cancel do them.
 */
active [NP] proctype Client() {
    byte me = _pid;
    byte k = 0;
    LOCALS;

    assert(me < NP);
    do
    :: k < CYCLES ->
        try_acquire();                                  /* the fast path; ok: acquired */
        if
        :: ok
        :: !ok && lc -> lc = 0                          /* refused: Closed */
        :: else ->
            forget_word();
            if
            :: skip                                     /* max wait zero: refused, Full */
            :: enqueue();                               /* the slow path */
                if
                :: res == R_ACQUIRED -> res = 0; ok = 1 /* Enqueued::Acquired */
                :: res == R_CLOSED -> res = 0           /* Enqueued::Closed */
                :: res == R_QUEUED ->
                    if                                  /* how this waiter waits */
                    :: res = 0; mode = FOREVER
                    :: res = 0; mode = TIMED
                    :: res = 0; mode = DROP
                    fi;
                    do
                    :: poll_wait();                     /* woken: check the slot */
                        if
                        :: res == R_NONE                /* spurious: wait on */
                        :: res == R_GRANTED -> res = 0; ok = 1; break
                        :: res == R_CLOSED -> res = 0; break /* Outcome::Closed: refused */
                        fi
                    :: mode == TIMED ->                 /* the deadline passed */
                        withdraw();
                        if
                        :: res == R_GRANTED -> res = 0; ok = 1 /* the grant won: success */
                        :: res == R_CLOSED -> res = 0   /* refused: Closed */
                        :: res == R_NONE                /* WaitTimedOut */
                        fi;
                        break
                    :: mode == DROP ->                  /* the future is dropped */
                        withdraw();
                        if
#if MUTANT == 5
                        :: res == R_GRANTED -> res = 0  /* BUG: the permit is forgotten */
#else
                        :: res == R_GRANTED -> res = 0; ok = 1 /* Core::cancel releases it */
#endif
                        :: res == R_CLOSED -> res = 0
                        :: res == R_NONE
                        fi;
                        break
                    od
                fi
            fi
        fi;
        if
        :: ok -> atomic { ok = 0; mode = 0 }; release() /* held, then the Permit drops */
        :: else -> mode = 0
        fi;
        k++
    :: else -> break
    od;
    finish()
}

/* ---------------------------------------------------------------------------------------
 * Optional: Bulkhead::change_config -> Semaphore::set_limit(NEWLIMIT), once.
 */
#if CONFIG
active proctype Config() {
    byte me = 0;                                        /* drain_pass with ctx 0 never reads it */
    LOCALS;

    d_step { load_word() };
    do
    :: d_step {                                         /* compare_exchange_weak */
        if
        :: SAME_WORD ->
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
            :: ok -> pending++; owe = 1
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
    :: ok -> ok = 0; drain_and_wake()                   /* release_slow */
    :: else
    fi;
    finish()
}
#endif

/* ---------------------------------------------------------------------------------------
 * Optional: Bulkhead::close -> Semaphore::close, once, at any moment.
 */
#if CLOSE
/* close()'s loop body: while !wakes.is_full() pop a waiter as Closed; if live == 0 break
 * (the lock kept), else drop the lock (then wake and lock again). */
inline close_pop() {
    if
#if MUTANT == 20
    :: false -> skip                                    /* BUG: forgets the queued waiters */
#else
    :: live > 0 ->
        pop_front();                                    /* pop_front(true, Closed) */
        set_fate(g, CLOSEDS);
#if MUTANT != 17
        wk = g + 1;                                     /* wakes.push */
#endif
        g = 0
#endif
    :: else
    fi;
    if
#if MUTANT == 20
    :: true -> more = 0
#endif
    :: live == 0 -> more = 0                            /* break, the lock kept */
    :: else -> more = 1; lk = 0; deliver()              /* drop(queue) */
    fi
}

active proctype Closer() {
    byte me = 0;                                        /* drain_pass with ctx 0 never reads it */
    LOCALS;

    d_step {
        lk == 0 -> lk = _pid + 1;                       /* queue.lock() */
        assert(!closed);                                /* the only close: returns true */
        closed = 1;                                     /* fetch_or(CLOSED | WAITERS) */
        waiters = 1;
        close_pop()
    };
    do
    :: more -> wake_all(); d_step { lk == 0 -> lk = _pid + 1; close_pop() }
    :: else -> break
    od;
    drain_and_wake();                                   /* with the lock held */
    close_done = 1;
    finish()
}
#endif

/* ---------------------------------------------------------------------------------------
 * Optional: Bulkhead::wait_drained (blocking; the async Drained is the same, a drop being
 * the timeout): Semaphore::wait_drained, then park_on.
 */
#if DRAIN
active proctype Drainer() {
    byte me = DR;
    LOCALS;

    d_step {
        lk == 0 -> lk = _pid + 1;                       /* queue.lock(); state.load */
        if
        :: closed && limit - avail == 0 ->              /* already drained: None */
            if
            :: !(closed && IN_FLIGHT == 0) -> drained_early = 1
            :: else
            fi;
            res = R_DRAINED
        :: else ->                                      /* alloc(DrainWait) */
            sst[DR] = DRAINWAIT; queued[DR] = 1; dlinked = 1;
            res = R_NONE
        fi;
        lk = 0
    };
    if
    :: res == R_NONE ->
        if
        :: mode = FOREVER
#if DRAIN == 2
        :: mode = TIMED
#endif
        fi;
        do
        :: poll_wait();                                 /* woken: check the slot */
            if
            :: res == R_NONE
            :: res == R_DRAINED -> break
            fi
        :: mode == TIMED ->                             /* timeout passed, or dropped */
            withdraw();
            assert(res == R_NONE || res == R_DRAINED);
            break
        od
    :: else
    fi;
    finish()
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

/* No barging: a newcomer's CAS never wins while a waiter is queued. */
ltl no_barging { [] !barged }

/* No permit created or lost: free + owned == limit, at every instant. */
ltl accounting { [] (avail + IN_FLIGHT == limit) }

/* A slot's fate (granted, closed, drained) is written once, only on a waiting slot; a
 * withdrawal never overwrites a fate. */
ltl one_fate { [] !double_fate }

/* WAITERS is set whenever a waiter is queued or the bulkhead is closed, and is set with no
 * waiter on an open bulkhead only inside a critical section whose holder will clear it. */
ltl flag_tracks_queue { [] (((live > 0 || closed) -> waiters) &&
                            ((waiters && live == 0 && !closed) -> lk != 0)) }

/* No stranded permit: a free permit while a waiter is queued on an open bulkhead has a
 * drain coming (a release or set_limit saw the flag and heads for the lock) or sits inside
 * a critical section. */
ltl free_permit_drained { [] ((live > 0 && avail > 0 && !closed) -> (pending > 0 || lk != 0)) }

/* Close: no newcomer is admitted (fast path or enqueue) once CLOSED is set. */
ltl no_admit_after_close { [] !admitted_closed }

/* Close: nobody is queued after CLOSED is set, and when close returns the queue is empty. */
ltl none_queued_after_close { [] (!late_link && (close_done -> live == 0)) }

/* Close: a drain wait ends (Drained, or wait_drained's immediate None) only once the
 * bulkhead is closed with no call in flight. */
ltl drained_when_idle { [] !drained_early }

/* Close, strict: no queued waiter is granted once CLOSED is set. NOT part of run.sh: it
 * fails on the engine as written (README "Finding"). */
ltl no_grant_after_close { [] !granted_closed }

/* Liveness: every queued waiter's wait eventually ends and its owner sees it (granted,
 * refused Closed, or withdrawn; the slot is freed). */
ltl queued_served { [] ((queued[0] -> <> !queued[0]) && (queued[1] -> <> !queued[1]) &&
                        (queued[2] -> <> !queued[2])) }

/* Liveness: a drain waiter is eventually released once the bulkhead is closed and every
 * client has finished. */
ltl drain_released { [] ((queued[DR] && closed && cdone == NP) -> <> !queued[DR]) }

/* Liveness: every process finishes and every permit comes back. Once all processes have
 * finished nothing moves any more, so this <> is also the <>[] ("for good"). */
ltl all_back { <> (done == NPROC && QUIESCENT) }
