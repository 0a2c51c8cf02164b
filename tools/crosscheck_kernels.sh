#!/usr/bin/env bash
# crosscheck_kernels.sh: the PyTorch cross-checks under each of OpenBLAS's
# kernel sets, one after another (make crosscheck-kernels).
#
#   tools/crosscheck_kernels.sh [TEST.sh ...]    default: every tests/crosscheck/*.sh
#   KERNELS='Haswell SkylakeX Zen Prescott'      the kernel sets (OPENBLAS_CORETYPE values)
#
# Why: a kernel set sums the matrix products in its own order, so our float32
# results, and PyTorch's (it uses the same OpenBLAS), round differently under
# each; `make test` runs the cross-checks under the one OpenBLAS picks for
# this CPU, and they must hold under every other too. Run this before you
# stop when you touch the model, the optimizer, the reducer or a cross-check.
#
# Before each kernel set, build/tools/blas_probe runs one training step under
# it. OpenBLAS 0.3.21 takes any kernel set it knows whether or not the CPU has
# its instructions: on a CPU without AVX-512, SkylakeX dies with SIGILL at the
# first product, and that set is reported "not run" with the reason (it cannot
# run on this machine, whatever the code). A name OpenBLAS does not know it
# ignores, keeping the set it detected: reported "not run" too.
#
# A test that skips (python3-torch not installed: "PASS name (skipped: why)")
# compared nothing: skips are counted apart from passes, and a set whose tests
# all skipped is "not run", with the first reason. A test that says neither
# PASS nor FAIL fails, whatever its exit status.
#
# Prints each test's PASS/FAIL lines tagged with the kernel set, then one line
# per set and the verdict, which counts the sets that ran and names each set
# not run and why: "crosscheck-kernels: PASS (3 of 4 kernel sets; SkylakeX not
# run: needs AVX-512)": a PASS that left a set out says so where it is read.
# Exits 0 only when every set that could run here passed, and at least one did.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
KERNELS=${KERNELS:-Haswell SkylakeX Zen Prescott}
tests=("$@")
[ ${#tests[@]} -gt 0 ] || tests=(tests/crosscheck/*.sh)
probe=$BUILD/tools/blas_probe
if [ ! -x "$probe" ]; then
    echo "crosscheck_kernels.sh: $probe is not built (make tests)" >&2
    exit 2
fi
# the Python cross-checks import each other: no __pycache__ folders in the tree
export PYTHONDONTWRITEBYTECODE=1

summary=() not_run=()
failed=0 ran=0 sets=0
skip_set() { # SET WHY [DETAIL]: a kernel set that cannot run here, in its line and in the verdict's
    summary+=("$1: not run: $2${3:-}")
    not_run+=("$1 not run: $2")
}
for k in $KERNELS; do
    sets=$((sets + 1))
    out=$(OPENBLAS_CORETYPE=$k "$probe" 2>&1)
    status=$?
    core=$(sed -n 's/^blas_probe: .*, core \([A-Za-z0-9]*\).*/\1/p' <<<"$out" | head -n 1)
    if [ $status = 132 ]; then
        case $k in
        SkylakeX|Cooperlake|SapphireRapids) need="needs AVX-512" ;; # OpenBLAS's AVX-512 kernel sets
        *) need="needs instructions this CPU lacks" ;;
        esac
        skip_set "$k" "$need" " (OpenBLAS loaded it anyway; blas_probe died with SIGILL)"
        continue
    elif [ $status != 0 ]; then
        summary+=("$k: FAIL: blas_probe exited $status: $(tail -n 2 <<<"$out")")
        failed=$((failed + 1))
        continue
    elif [ "$core" != "$k" ]; then
        skip_set "$k" "OpenBLAS does not know it" " and used its $core kernels"
        continue
    fi
    pass=0 fail=0 skip=0 skipped_why=""
    for t in "${tests[@]}"; do
        out=$(OPENBLAS_CORETYPE=$k BUILD="$BUILD" SUITE=plain timeout -k 5 1200 bash "$t" 2>&1)
        status=$?
        while IFS= read -r line; do
            case $line in
            PASS\ *"(skipped: "*)
                skip=$((skip + 1)); echo "[$k] $line"
                [ -n "$skipped_why" ] || { skipped_why=${line#*(skipped: }; skipped_why=${skipped_why%)}; } ;;
            PASS\ *) pass=$((pass + 1)); echo "[$k] $line" ;;
            FAIL\ *) fail=$((fail + 1)); echo "[$k] $line" ;;
            esac
        done <<<"$out"
        if [ $status != 0 ] && ! grep -q '^FAIL ' <<<"$out"; then
            fail=$((fail + 1))
            echo "[$k] FAIL $(basename "$t" .sh): exited $status without naming a failed test: $(tail -n 3 <<<"$out")"
        elif ! grep -qE '^(PASS|FAIL) ' <<<"$out"; then
            fail=$((fail + 1))
            echo "[$k] FAIL $(basename "$t" .sh): said neither PASS nor FAIL: $(tail -n 3 <<<"$out")"
        fi
    done
    skips=""
    [ $skip = 0 ] || skips=", $skip skipped"
    if [ $fail != 0 ]; then summary+=("$k: FAIL ($fail failed, $pass passed$skips)"); failed=$((failed + 1))
    elif [ $pass = 0 ]; then skip_set "$k" "all $skip tests skipped" " ($skipped_why)"
    else summary+=("$k: PASS ($pass passed$skips)"); ran=$((ran + 1)); fi
done

echo
echo "kernel sets (OPENBLAS_CORETYPE), $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //'):"
printf '  %s\n' "${summary[@]}"
of_sets="of $sets kernel set"
[ $sets = 1 ] || of_sets+=s
left_out=""
[ ${#not_run[@]} = 0 ] || left_out=$(printf '; %s' "${not_run[@]}")
if [ $failed != 0 ]; then echo "crosscheck-kernels: FAIL ($failed $of_sets failed$left_out)"
elif [ $ran = 0 ]; then echo "crosscheck-kernels: FAIL (no kernel set ran a test here$left_out)"
else echo "crosscheck-kernels: PASS ($ran $of_sets$left_out)"; fi
[ $failed = 0 ] && [ $ran != 0 ]
