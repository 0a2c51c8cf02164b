# crosscheck_kernels.sh: tools/crosscheck_kernels.sh (make crosscheck-kernels)
# and build/tools/blas_probe, on stand-in tests that say what they saw, so
# that the driver itself is checked in seconds: each test runs under the
# kernel set named in OPENBLAS_CORETYPE, a failure anywhere fails the whole,
# a kernel set OpenBLAS does not know or this CPU cannot run is reported "not
# run" (never a pass), so is one whose tests all skipped (a skip compared
# nothing), the verdict line names each set not run and why, a test that says
# nothing fails, and nothing run at all is a failure.
. "$(dirname "$0")/../harness/lib.sh"
probe=$BUILD/tools/blas_probe
K=tools/crosscheck_kernels.sh

t_out probe_names_the_core ", core Prescott" env OPENBLAS_CORETYPE=Prescott "$probe"
t_out probe_runs_a_step "one training step ran" env OPENBLAS_CORETYPE=Prescott "$probe"
t_fail probe_bad_flag 2 "blas_probe: unrecognized option '--bogus'" "$probe" --bogus

printf 'echo "PASS stand_in.core_$OPENBLAS_CORETYPE"\n' > "$T_TMP/passes.sh"
printf 'echo "PASS stand_in.one"; echo "FAIL stand_in.two: on purpose"\n' > "$T_TMP/fails.sh"
printf 'exit 3\n' > "$T_TMP/crashes.sh"
printf 'echo "compared everything"\n' > "$T_TMP/says_nothing.sh"
printf 'echo "PASS stand_in.torch (skipped: Debian'"'"'s python3-torch is not installed)"\n' > "$T_TMP/skips.sh"

t_run env BUILD="$BUILD" KERNELS=Prescott bash $K "$T_TMP/passes.sh"
if [ "$T_STATUS" = 0 ] && grep -qxF "[Prescott] PASS stand_in.core_Prescott" <<<"$T_OUT" &&
   grep -qxF "  Prescott: PASS (1 passed)" <<<"$T_OUT" && grep -qxF "crosscheck-kernels: PASS (1 of 1 kernel set)" <<<"$T_OUT"; then
    t_pass runs_under_the_kernel_set
else t_failed runs_under_the_kernel_set "exit $T_STATUS: $(tail -n 4 <<<"$T_OUT")"; fi

t_run env BUILD="$BUILD" KERNELS=Prescott bash $K "$T_TMP/passes.sh" "$T_TMP/fails.sh" "$T_TMP/crashes.sh"
if [ "$T_STATUS" = 1 ] && grep -qF "[Prescott] FAIL crashes: exited 3 without naming a failed test" <<<"$T_OUT" &&
   grep -qxF "  Prescott: FAIL (2 failed, 2 passed)" <<<"$T_OUT" &&
   grep -qxF "crosscheck-kernels: FAIL (1 of 1 kernel set failed)" <<<"$T_OUT"; then
    t_pass a_failure_fails
else t_failed a_failure_fails "exit $T_STATUS: $(tail -n 4 <<<"$T_OUT")"; fi

# a test that exits 0 with no verdict compared nothing anyone can see
t_run env BUILD="$BUILD" KERNELS="Prescott Zen" bash $K "$T_TMP/passes.sh" "$T_TMP/says_nothing.sh"
if [ "$T_STATUS" = 1 ] && grep -qxF "[Zen] FAIL says_nothing: said neither PASS nor FAIL: compared everything" <<<"$T_OUT" &&
   grep -qxF "crosscheck-kernels: FAIL (2 of 2 kernel sets failed)" <<<"$T_OUT"; then
    t_pass a_test_without_verdict_fails
else t_failed a_test_without_verdict_fails "exit $T_STATUS: $(tail -n 4 <<<"$T_OUT")"; fi

# a skipped test compared nothing: counted apart; a set whose tests all skipped did not run
t_run env BUILD="$BUILD" KERNELS=Prescott bash $K "$T_TMP/passes.sh" "$T_TMP/skips.sh"
if [ "$T_STATUS" = 0 ] && grep -qxF "  Prescott: PASS (1 passed, 1 skipped)" <<<"$T_OUT"; then
    t_pass skips_counted_apart
else t_failed skips_counted_apart "exit $T_STATUS: $(tail -n 4 <<<"$T_OUT")"; fi
t_run env BUILD="$BUILD" KERNELS=Prescott bash $K "$T_TMP/skips.sh" "$T_TMP/skips.sh"
if [ "$T_STATUS" = 1 ] && grep -qxF "  Prescott: not run: all 2 tests skipped (Debian's python3-torch is not installed)" <<<"$T_OUT" &&
   grep -qxF "crosscheck-kernels: FAIL (no kernel set ran a test here; Prescott not run: all 2 tests skipped)" <<<"$T_OUT"; then
    t_pass all_skipped_not_run
else t_failed all_skipped_not_run "exit $T_STATUS: $(tail -n 4 <<<"$T_OUT")"; fi

t_run env BUILD="$BUILD" KERNELS=NoSuchKernels bash $K "$T_TMP/passes.sh"
if [ "$T_STATUS" = 1 ] && grep -qF "NoSuchKernels: not run: OpenBLAS does not know it and used its" <<<"$T_OUT" &&
   grep -qxF "crosscheck-kernels: FAIL (no kernel set ran a test here; NoSuchKernels not run: OpenBLAS does not know it)" <<<"$T_OUT"; then
    t_pass unknown_kernel_set_not_run
else t_failed unknown_kernel_set_not_run "exit $T_STATUS: $(tail -n 4 <<<"$T_OUT")"; fi

# a PASS that left a set out says which, and why, in the verdict line itself
t_run env BUILD="$BUILD" KERNELS="NoSuchKernels Prescott" bash $K "$T_TMP/passes.sh"
if [ "$T_STATUS" = 0 ] &&
   grep -qxF "crosscheck-kernels: PASS (1 of 2 kernel sets; NoSuchKernels not run: OpenBLAS does not know it)" <<<"$T_OUT"; then
    t_pass pass_names_the_sets_not_run
else t_failed pass_names_the_sets_not_run "exit $T_STATUS: $(tail -n 4 <<<"$T_OUT")"; fi

# SkylakeX's kernels need AVX-512: on a CPU without it OpenBLAS loads them anyway and the probe dies
if [ "${SUITE:-plain}" != plain ]; then t_skip missing_instructions_not_run "the sanitizers take SIGILL over"
elif grep -qw avx512f /proc/cpuinfo; then t_skip missing_instructions_not_run "this CPU has AVX-512"
else
    t_run env BUILD="$BUILD" KERNELS="SkylakeX Prescott" bash $K "$T_TMP/passes.sh"
    if [ "$T_STATUS" = 0 ] && grep -qF "SkylakeX: not run: needs AVX-512 (OpenBLAS loaded it anyway" <<<"$T_OUT" &&
       ! grep -qF "[SkylakeX]" <<<"$T_OUT" &&
       grep -qxF "crosscheck-kernels: PASS (1 of 2 kernel sets; SkylakeX not run: needs AVX-512)" <<<"$T_OUT"; then
        t_pass missing_instructions_not_run
    else t_failed missing_instructions_not_run "exit $T_STATUS: $(tail -n 4 <<<"$T_OUT")"; fi
fi
