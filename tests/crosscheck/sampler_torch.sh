# sampler_torch.sh: `chapter-2 --print-indices` equals PyTorch's
# DistributedSampler index for index, on every configuration that
# tests/crosscheck/sampler_torch.py generates (n = 0, n < W, padding larger than n, n near
# 10^6; W = 1 .. 16 and every rank; drop_last and shuffle on and off; seeds -1,
# 2^32+5, 2^63-1, -2^63; epochs above 0). Needs Debian's python3-torch, which
# only /usr/bin/python3 imports; runs in the plain suite only.
. "$(dirname "$0")/../harness/lib.sh"
exp="$T_TMP/expected"
t_python_expected torch_cross_check tests/crosscheck/sampler_torch.py "$exp" || exit 0

# One verdict per configuration, naming the first rank that differs.
declare -A bad
cases=()
while read -r name case n w rank seed epoch shuffle drop_last; do
    [ "$rank" = 0 ] && cases+=("$case:n=$n,W=$w,seed=$seed,epoch=$epoch,shuffle=$shuffle,drop_last=$drop_last")
    flags=(--size="$n" --world="$w" --rank="$rank" --seed="$seed" --epoch="$epoch" --print-indices)
    [ "$shuffle" = 0 ] && flags+=(--no-shuffle)
    [ "$drop_last" = 1 ] && flags+=(--drop-last)
    t_case_compare "$case" "rank $rank (against torch)" "$exp/$name" "$BUILD/chapter-2" "${flags[@]}"
done < "$exp/manifest"

t_case_verdicts torch_case
[ ${#cases[@]} -gt 50 ] || t_failed torch_case_count "expected more than 50 configurations, got ${#cases[@]}"
