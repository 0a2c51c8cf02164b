# sampler_torch.sh: `chapter-2 --print-indices` equals PyTorch's
# DistributedSampler index for index, on every configuration that
# tests/sampler_torch.py generates (n = 0, n < W, padding larger than n, n near
# 10^6; W = 1 .. 16 and every rank; drop_last and shuffle on and off; seeds -1,
# 2^32+5, 2^63-1, -2^63; epochs above 0). Needs Debian's python3-torch, which
# only /usr/bin/python3 imports; runs in the plain suite only.
. "$(dirname "$0")/lib.sh"
if [ "${SUITE:-plain}" != plain ]; then t_skip torch_cross_check "runs in the plain suite only"; exit 0; fi
if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    t_skip torch_cross_check "Debian's python3-torch is not installed"; exit 0
fi

exp="$T_TMP/expected"
mkdir -p "$exp"
if ! /usr/bin/python3 tests/sampler_torch.py "$exp" 2>"$T_TMP/py.log"; then
    t_failed torch_expected "tests/sampler_torch.py failed: $(tail -n 3 "$T_TMP/py.log")"; exit 0
fi

# One verdict per configuration, naming the first rank that differs.
declare -A bad
cases=()
while read -r name case n w rank seed epoch shuffle drop_last; do
    [ "$rank" = 0 ] && cases+=("$case:n=$n,W=$w,seed=$seed,epoch=$epoch,shuffle=$shuffle,drop_last=$drop_last")
    [ -n "${bad[$case]:-}" ] && continue
    flags=(--size="$n" --world="$w" --rank="$rank" --seed="$seed" --epoch="$epoch" --print-indices)
    [ "$shuffle" = 0 ] && flags+=(--no-shuffle)
    [ "$drop_last" = 1 ] && flags+=(--drop-last)
    if ! "$BUILD/chapter-2" "${flags[@]}" > "$T_TMP/got" 2>"$T_TMP/err"; then
        bad[$case]="rank $rank: chapter-2 ${flags[*]} failed: $(head -c 300 "$T_TMP/err")"
    elif ! cmp -s "$T_TMP/got" "$exp/$name"; then
        bad[$case]="rank $rank: chapter-2 ${flags[*]} differs from torch: $(diff "$T_TMP/got" "$exp/$name" | head -n 4 | tr '\n' ' ')"
    fi
done < "$exp/manifest"

for c in "${cases[@]}"; do
    case=${c%%:*}
    if [ -n "${bad[$case]:-}" ]; then t_failed "torch_case_$case" "${c#*:}: ${bad[$case]}"
    else t_pass "torch_case_$case"; fi
done
[ ${#cases[@]} -gt 50 ] || t_failed torch_case_count "expected more than 50 configurations, got ${#cases[@]}"
