# dynamic_reference: `chapter-2 --sampler=dynamic --print-indices` equals an
# independent Python model of the token-budget batch sampler
# (tests/crosscheck/dynamic_reference.py: written from the rules, with torch.randperm for
# the order) on 40 random configurations, every rank: sizes 1 to 5000, W 1 to
# 8, token and example batches, budgets at and above the longest record,
# max_token_length skipping records, max_samples 1 to 256, sort buffers of 1
# to 100 per rank, shuffle on and off, resumed start steps. Needs Debian's
# python3-torch (only /usr/bin/python3 imports it); plain suite only.
. "$(dirname "$0")/../harness/lib.sh"
exp="$T_TMP/expected"
t_python_expected torch_model tests/crosscheck/dynamic_reference.py "$exp" || exit 0

declare -A bad
cases=()
while read -r name case data w rank seed epoch sort budget max_samples max_len type shuffle start; do
    [ "$rank" = 0 ] && cases+=("$case:W=$w,seed=$seed,epoch=$epoch,sort=$sort,budget=$budget,max_samples=$max_samples,max_len=$max_len,$type,shuffle=$shuffle,start=$start")
    flags=(--sampler=dynamic --data="$data" --length-field=len --world="$w" --rank="$rank" --seed="$seed"
           --epoch="$epoch" --sort-size="$sort" --budget="$budget" --max-samples="$max_samples"
           --max-token-length="$max_len" --batch-type="$type" --start-step="$start" --print-indices)
    [ "$shuffle" = 0 ] && flags+=(--no-shuffle)
    t_case_compare "$case" "rank $rank (against the model)" "$exp/$name" "$BUILD/chapter-2" "${flags[@]}"
done < "$exp/manifest"

t_case_verdicts model_case
[ ${#cases[@]} = 40 ] || t_failed model_case_count "expected 40 configurations, got ${#cases[@]}"
