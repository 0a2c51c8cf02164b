# gpu_transfer: the device interface's cuda backend on a real GPU (make test-gpu
# only): the unit tests of tests/unit/test_device.c and test_pinned_pool.c with
# DEVICE_TEST_BACKEND=cuda (copies round-trip bit-exact from every kind of host
# memory, events order two streams, the pinned pool's limit and its errors;
# the simulator-only tests say they skip, and why), then chapter 4's sections
# and benchmarks with --backend=cuda. Written without a GPU at hand: see
# chapters/04-transfer/README.md for what has run where.
. "$(dirname "$0")/../harness/lib.sh"
P=$BUILD/chapter-4

t_need_gpu transfer || exit 0

for t in test_device test_pinned_pool; do # their own PASS/FAIL lines, one per test
    DEVICE_TEST_BACKEND=cuda timeout -k 5 "$T_TIMEOUT" "$BUILD/tests/unit/$t" 2>&1 | sed "s/^\(PASS\|FAIL\) $t\./\1 $T_SCRIPT.$t./"
done
t_out chapter4_sweep "of limit" $P --backend=cuda --only=sweep --out="$T_TMP/out"
t_out chapter4_pinning "pool: first, then" $P --backend=cuda --only=pinning --out="$T_TMP/out"
t_out chapter4_loop "double buffering:" $P --backend=cuda --only=loop --steps=16 --out="$T_TMP/out"
t_out chapter4_bench "bench: GPU pinned H2D of 256 MiB" $P --bench
t_fail chapter4_pool_runs_out 1 "pinned pool: " $P --backend=cuda --only=loop --pool=64K --out="$T_TMP/out"
