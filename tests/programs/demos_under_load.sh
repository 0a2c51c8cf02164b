# demos_under_load: every chapter's failure demos tell their story on a busy
# machine. A learner's laptop is never idle, and a demo whose watchdog or
# detector depends on the host's timing would blame the wrong rank or miss its
# hazard there. Two busy processes (a CPU hog per core of a 2-core machine)
# run beside: chapter 4's race demo (the detector catches the early release,
# the fix runs clean), chapter 5's five fault demos (each diagnosis as its
# story says) and chapter 6's four (each broken run fails as told, each fix
# works; 4 GPUs slower than 1 on one global batch, faster with a batch each).
# The stories' own checks decide; this only adds the load.
. "$(dirname "$0")/../harness/lib.sh"

t_busy_start

t_run "$BUILD/chapter-4" --demo=race
if [ "$T_STATUS" != 0 ]; then t_failed chapter4_race "exit $T_STATUS: $(tail -n 3 <<<"$T_OUT")"
elif ! grep -q "host write while in flight" <<<"$T_OUT"; then t_failed chapter4_race "the detector missed the early release"
elif ! grep -q "^fixed: 6 batches, no hazard" <<<"$T_OUT"; then t_failed chapter4_race "the fixed loop did not run clean"
else t_pass chapter4_race; fi

# every story ends in its diagnosis, so the program exits 1; a story told
# otherwise says UNEXPECTED
t_run "$BUILD/chapter-5" --demo=all
n=$(grep -c "^==== demo " <<<"$T_OUT")
if [ "$T_STATUS" != 1 ] || grep -q UNEXPECTED <<<"$T_OUT" || [ "$n" != 5 ]; then
    t_failed chapter5_demos "exit $T_STATUS, $n stories: $(grep -m 3 -B 2 UNEXPECTED <<<"$T_OUT")"
else t_pass chapter5_demos; fi

T_TIMEOUT=240
t_run "$BUILD/chapter-6" --demo=all
if [ "$T_STATUS" != 0 ] || grep -q UNEXPECTED <<<"$T_OUT"; then
    t_failed chapter6_demos "exit $T_STATUS: $(grep -m 3 -A 3 UNEXPECTED <<<"$T_OUT")"
else t_pass chapter6_demos; fi
# the slower story is told in modelled time: its verdict holds however busy the machine is
if grep -q "verdict: with the same global batch, 4 GPUs are SLOWER than 1" <<<"$T_OUT"; then t_pass chapter6_slower_verdict
else t_failed chapter6_slower_verdict "no verdict: $(sed -n '/^==== demo slower/,$p' <<<"$T_OUT" | tail -n 5)"; fi

t_busy_stop
