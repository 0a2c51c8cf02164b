# randperm_threshold.sh: torch.randperm's switch to its inside-out algorithm,
# at the real size. `make stress` runs it: sampler_randperm at n =
# SAMPLER_RANDPERM_THRESHOLD under SAMPLER_RANDPERM_AUTO (860 MB of entries,
# half a minute on 2 cores) must equal the plain inside-out loop
# (tests/unit/test_sampler.c's sampler_randperm_large_n_branch, which skips
# itself unless DDP_STRESS is set). make test checks the choice itself
# (sampler_pick_randperm) and both algorithms on small n.
. "$(dirname "$0")/../harness/lib.sh"
T_TIMEOUT=600
name=sampler_randperm_large_n_branch
t_run env DDP_STRESS=1 "$BUILD/tests/unit/test_sampler" "$name"
if [ "$T_STATUS" = 0 ] && grep -qx "PASS test_sampler.$name" <<<"$T_OUT"; then t_pass "$name"
else t_failed "$name" "exit $T_STATUS: $(tail -n 3 <<<"$T_OUT")"; exit 1; fi
