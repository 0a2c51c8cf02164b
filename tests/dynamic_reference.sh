# dynamic_reference: `chapter-2 --sampler=dynamic --print-indices` equals an
# independent Python model of the token-budget batch sampler
# (tests/dynamic_reference.py: written from the rules, with torch.randperm for
# the order) on 40 random configurations, every rank: sizes 1 to 5000, W 1 to
# 8, token and example batches, budgets at and above the longest record,
# max_token_length skipping records, max_samples 1 to 256, sort buffers of 1
# to 100 per rank, shuffle on and off, resumed start steps. Needs Debian's
# python3-torch (only /usr/bin/python3 imports it); plain suite only.
. "$(dirname "$0")/lib.sh"
if [ "${SUITE:-plain}" != plain ]; then t_skip torch_model "runs in the plain suite only"; exit 0; fi
if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    t_skip torch_model "Debian's python3-torch is not installed"; exit 0
fi

exp="$T_TMP/expected"
mkdir -p "$exp"
if ! /usr/bin/python3 tests/dynamic_reference.py "$exp" 2>"$T_TMP/py.log"; then
    t_failed model "tests/dynamic_reference.py failed: $(tail -n 3 "$T_TMP/py.log")"; exit 0
fi

declare -A bad
cases=()
while read -r name case data w rank seed epoch sort budget max_samples max_len type shuffle start; do
    [ "$rank" = 0 ] && cases+=("$case:W=$w,seed=$seed,epoch=$epoch,sort=$sort,budget=$budget,max_samples=$max_samples,max_len=$max_len,$type,shuffle=$shuffle,start=$start")
    [ -n "${bad[$case]:-}" ] && continue
    flags=(--sampler=dynamic --data="$data" --length-field=len --world="$w" --rank="$rank" --seed="$seed"
           --epoch="$epoch" --sort-size="$sort" --budget="$budget" --max-samples="$max_samples"
           --max-token-length="$max_len" --batch-type="$type" --start-step="$start" --print-indices)
    [ "$shuffle" = 0 ] && flags+=(--no-shuffle)
    if ! "$BUILD/chapter-2" "${flags[@]}" > "$T_TMP/got" 2>"$T_TMP/err"; then
        bad[$case]="rank $rank: chapter-2 ${flags[*]} failed: $(head -c 300 "$T_TMP/err")"
    elif ! cmp -s "$T_TMP/got" "$exp/$name"; then
        bad[$case]="rank $rank: chapter-2 ${flags[*]} differs from the model: $(diff "$T_TMP/got" "$exp/$name" | head -n 4 | tr '\n' ' ')"
    fi
done < "$exp/manifest"

for c in "${cases[@]}"; do
    case=${c%%:*}
    if [ -n "${bad[$case]:-}" ]; then t_failed "model_case_$case" "${c#*:}: ${bad[$case]}"
    else t_pass "model_case_$case"; fi
done
[ ${#cases[@]} = 40 ] || t_failed model_case_count "expected 40 configurations, got ${#cases[@]}"
