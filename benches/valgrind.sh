# Shared by the callgrind/DHAT bench scripts (macro.sh, peers.sh, waiting.sh,
# adaptive_cost.sh), which source it after setting WORK (a scratch directory) and EXE (the
# bench binary, run as `EXE <op> <n>`).

# `quanta::Clock::new` (the adaptive limits' clock calibration, once per process) runs a
# loop bounded by wall time, so its instruction count varies from run to run: it is left
# out of every count (collection is toggled off inside it).
instructions() { # op n -> total instructions
    valgrind --tool=callgrind --toggle-collect='quanta::Clock::new' --collect-atstart=yes \
        --callgrind-out-file="$WORK/cg.$1.$2" "$EXE" "$1" "$2" \
        >/dev/null 2>"$WORK/cg.$1.$2.log"
    python3 benches/report.py callgrind "$WORK/cg.$1.$2"
}

blocks() { # op n -> heap blocks allocated in all
    valgrind --tool=dhat --dhat-out-file="$WORK/dhat.$1.$2.json" "$EXE" "$1" "$2" 2>&1 \
        >/dev/null | sed -n -E 's/.*Total: +[0-9,]+ bytes in ([0-9,]+) blocks.*/\1/p' | tr -d ,
}

per() { # count_at_0 count_at_n n [decimals, default 1] -> (count_at_n - count_at_0) / n
    # Rounded first, then + 0.0: a tiny negative difference prints 0.0, not -0.0.
    python3 -c "d = ${4:-1}; print(f'{round(($2 - $1) / $3, d) + 0.0:.{d}f}')"
}
