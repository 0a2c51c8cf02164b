# plots.sh: chapter 6's figures, for `make plots` and `make report`. Sourced
# by tools/plots.sh, which gives $BUILD, $out (this chapter's folder),
# $BENCH_LOG, plot_run and plot_made (see there).
#
#   the recipe    20 epochs on 4 simulated ranks (build/chapter-6 --plot):
#                 epochs.csv and the Gantt chart of a few steady steps
#   demo slower   the two 4-rank timelines, without and with overlap
#   scaling       DDP's weak scaling on 1 to 64 modelled H100 SXM, ring and
#                 hier, overlap on and off, and the bucket cap (--bench=scaling)
#   accuracy      test accuracy after every epoch at 1, 2, 4 and 8 ranks, the
#                 same global batch: the curves the last `make bench` measured
#                 (--bench=accuracy prints them, 20 minutes of training), read
#                 from its output, with its date and machine; and the same with
#                 --same-bits (accuracy-same-bits), whose curves are one
plot_run "$BUILD/chapter-6" --plot --out="$out" || return 1
plot_run "$BUILD/chapter-6" --demo=slower --out="$out" || return 1
plot_run "$BUILD/chapter-6" --bench=scaling --out="$out" || return 1

# The bench prints "== chapter 6: accuracy, the recipe (E epochs, global batch G) ..." and then one
# line per world, the recipe's (4 ranks) first: "  W ranks x batch B: test accuracy by epoch a1 a2 ...";
# then the same for --same-bits, each line starting "  same-bits ".
curves='^  [0-9]+ ranks? +x batch +[0-9]+: test accuracy by epoch'
if ! grep -Eq "$curves" "$BENCH_LOG" 2>/dev/null; then
    echo "plots: no accuracy curves in $BENCH_LOG (make bench measures them): chapter 6's accuracy figure not drawn"
    return 0
fi
# accuracy_csv PREFIX: the curves whose lines start with "  PREFIX", as CSV on stdout
accuracy_csv() {
    awk -v re="^  $1[0-9]+ ranks? +x batch +[0-9]+: test accuracy by epoch" -v prefix="$1" '$0 ~ re {
        n++; line = $0; sub("^  " prefix, "", line); split(line, half, ":")
        name[n] = half[1]; gsub(/ +/, " ", name[n])
        sub(/^ test accuracy by epoch /, "", half[2]); sub(/ +\(.*$/, "", half[2])
        epochs[n] = split(half[2], acc, " ")
        for (e = 1; e <= epochs[n]; e++) value[n, e] = acc[e]
     }
     END {
        printf "epoch"; for (i = 1; i <= n; i++) printf ",%s", name[i]; printf "\n"
        for (e = 1; e <= epochs[1]; e++) {
            printf "%d", e; for (i = 1; i <= n; i++) printf ",%s", ((i, e) in value ? value[i, e] : "NaN"); printf "\n"
        }
     }' "$BENCH_LOG"
}
bench_date=$(sed -n 's/^date: //p' "$BENCH_LOG" | head -n 1)
bench_host=$(sed -n 's/^machine: //p' "$BENCH_LOG" | head -n 1)
bench_mode=$(sed -n 's/^mode: //p' "$BENCH_LOG" | head -n 1)
recipe=$(sed -n 's/^== chapter 6: accuracy, the recipe (\(.*\)) at .*/\1/p' "$BENCH_LOG" | head -n 1)
for kind in accuracy accuracy-same-bits; do
    prefix=""
    [ "$kind" = accuracy-same-bits ] && prefix="same-bits "
    grep -Eq "^  $prefix[0-9]+ ranks? +x batch" "$BENCH_LOG" || continue # a bench from before --same-bits
    accuracy_csv "$prefix" > "$out/$kind.csv"
    plot_made "$kind.csv from the make bench of $bench_date on $bench_host${bench_mode:+ ($bench_mode)} ($BENCH_LOG)"
    if command -v gnuplot >/dev/null 2>&1; then
        title="test accuracy after each epoch, the recipe ($recipe)${prefix:+ with --same-bits} at 1, 2, 4, 8 ranks: make bench of $bench_date${bench_mode:+, $bench_mode}"
        stem=$out/$kind # in gnuplot's single quotes, a quote is written twice
        gnuplot -e "csv='${stem//\'/\'\'}.csv'; out='${stem//\'/\'\'}'; title='${title//\'/\'\'}'" chapters/06-ddp/accuracy.gp ||
            { echo "plots: gnuplot chapters/06-ddp/accuracy.gp failed" >&2; return 1; }
        echo "plots: $out/$kind.png and .svg, from $BENCH_LOG"
    else
        echo "plots: gnuplot is not installed: $out/$kind.csv not drawn"
    fi
done
