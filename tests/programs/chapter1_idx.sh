# chapter1_idx: build/chapter-1 as a learner runs it, on IDX and synthetic
# data: the default lesson, --get, --check, --bench's flag handling, usage
# errors. Caches of the installed Fashion-MNIST go to this test's directory.
set -euo pipefail
. "$(dirname "$0")/../harness/lib.sh"
ch1="$BUILD/chapter-1"
export XDG_CACHE_HOME=$T_TMP/cache TMPDIR=$T_TMP
unset DDP_CACHE_DIR # it would come first (lib/dataset/cache_dir.h)
fashion=/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz

t_out help "usage: chapter-1" "$ch1" --help
t_out synthetic_summary "random access: 100000 reads" "$ch1" --data=synthetic
t_out synthetic_check "all 60000 records OK (sizes, labels 0..9)" "$ch1" --data=synthetic --check
t_out synthetic_get_hex "00000000 " "$ch1" --data=synthetic --get=5
if [ -r "$fashion" ]; then
    t_out default_is_fashion "Fashion-MNIST's training set, the default" "$ch1"
    # the second run finds the cache the first one built
    t_run "$ch1"
    if [ "$T_STATUS" = 0 ] && grep -q "opened again" <<<"$T_OUT" && ! grep -q "decompressed into" <<<"$T_OUT"; then
        t_pass second_run_uses_the_cache
    else t_failed second_run_uses_the_cache "status $T_STATUS: $(head -n 8 <<<"$T_OUT")"; fi
    t_out fashion_get_0 "fashion-mnist/train-images-idx3-ubyte.gz: 784 bytes, label 9 Ankle boot" "$ch1" --get=0
    t_out fashion_check "all 60000 records OK (sizes, labels 0..9)" "$ch1" --check
    # the cache of the installed files went to XDG_CACHE_HOME, not /usr
    if ls "$XDG_CACHE_HOME"/ddp-datapath/train-images-idx3-ubyte.gz-*.ddpcache >/dev/null 2>&1; then
        t_pass cache_in_xdg_cache_home
    else t_failed cache_in_xdg_cache_home "no cache under $XDG_CACHE_HOME/ddp-datapath"; fi
else
    t_skip default_is_fashion "Fashion-MNIST is not installed"
    t_out default_falls_back_to_synthetic "Fashion-MNIST is not installed" "$ch1"
fi
t_fail bench_unknown 2 "--bench: unknown value 'nope' (idx, jsonl or all)" "$ch1" --bench=nope
t_fail bench_on_synthetic 1 "synthetic is not a non-empty IDX file" "$ch1" --bench=idx --data=synthetic
t_fail two_modes 2 "pick one" "$ch1" --check --get=1
t_fail unknown_flag 2 "unrecognized option '--frobnicate'" "$ch1" --frobnicate
t_fail stray_argument 2 "unexpected argument 'extra'" "$ch1" extra
t_fail zero_lines 2 "--lines: expected 1 to" "$ch1" --experiment --lines=0
# a flag the chosen run would ignore is refused, naming it
t_fail lines_need_the_experiment 2 "--lines does nothing without --experiment or --bench=jsonl" "$ch1" --check \
    --lines=10
t_fail out_needs_the_experiment 2 "--out does nothing without --experiment" "$ch1" --bench=idx --out="$T_TMP/o"
t_fail experiment_makes_its_own_data 2 "--data does nothing with --experiment" "$ch1" --experiment --data=synthetic

# --length-field names a field of JSONL records: on data without fields it is refused, not ignored.
t_fail length_field_on_synthetic 1 'synthetic: a length field ("n") is a field of JSONL records; synthetic records have none' \
    "$ch1" --data=synthetic --length-field=n --check
dataset_idx_ok=$T_TMP/lf-images-idx3-ubyte
printf '\0\0\x08\x03\0\0\0\x01\0\0\0\x01\0\0\0\x01\x07' > "$dataset_idx_ok"
t_fail length_field_on_idx 1 "$dataset_idx_ok: a length field (\"num_tokens\") is a field of JSONL records; IDX records have none" \
    "$ch1" --data="$dataset_idx_ok" --length-field=num_tokens --get=0
# a record printed into a full disk is an error, not exit 0 with half a record
t_fail get_into_a_full_disk 1 "chapter-1: writing the output failed" \
    bash -c 'exec "$0" "$@" > /dev/full' "$ch1" --data=synthetic --get=0
t_fail length_field_empty 2 "--length-field: expected a field name, got an empty value" "$ch1" --data=synthetic --length-field= --check

# Generated files are sized before they are written: a corpus that cannot fit
# is refused with what it needs and what is free, and nothing is written.
t_fail experiment_too_many_lines 1 "chapter-1: the JSONL corpus of 18446744073709551615 lines needs more than 16.0 EiB" \
    "$ch1" --experiment --lines=18446744073709551615
t_fail experiment_larger_than_the_disk 1 "are free on" "$ch1" --experiment --lines=100000000000000
if compgen -G "$TMPDIR/ddp-chapter-1/*" >/dev/null; then
    t_failed experiment_refusal_writes_nothing "$(ls "$TMPDIR/ddp-chapter-1")"
else t_pass experiment_refusal_writes_nothing; fi

# The experiment measures each strategy in a child process for 2 s. A SIGTERM
# to the program alone, as a scheduler sends it, must take the child along:
# left running, it would go on measuring (building an index, for minutes on a
# large corpus) after the job was stopped.
children_of() { # the pids whose parent is $1 (from /proc: no procps needed)
    local f st
    for f in /proc/[0-9]*/stat; do
        read -r -a st 2>/dev/null < "$f" || continue
        [ "${st[3]:-}" = "$1" ] && echo "${st[0]}"
    done
    return 0
}
env --default-signal=INT "$ch1" --experiment --lines=20000 --out="$T_TMP/exp-term" > /dev/null 2>&1 &
pid=$! child= count=0 tries=0
# the same child in three polls 0.3 s apart: one with a second or so left to measure
until [ $count -ge 3 ] || [ $tries -ge 100 ]; do
    now=$(children_of $pid)
    if [ -z "$now" ]; then count=0
    elif [ "$now" = "$child" ]; then count=$((count + 1))
    else count=1; fi
    child=$now
    [ $count -ge 3 ] || sleep 0.3
    tries=$((tries + 1))
done
kill -TERM $pid 2>/dev/null
{ wait $pid; } 2>/dev/null && status=0 || status=$?
sleep 0.5 # left alone, the child would still be reading
state=
[ -n "$child" ] && read -r -a state 2>/dev/null < "/proc/$child/stat" || true
if [ $count -lt 3 ]; then t_failed experiment_sigterm_ends_the_child "no child process lived 0.6 s (status $status)"
elif [ "$status" != 143 ]; then t_failed experiment_sigterm_ends_the_child "expected status 143, got $status"
elif [ -n "${state[2]:-}" ] && [ "${state[2]}" != Z ]; then
    t_failed experiment_sigterm_ends_the_child "child $child still running (state ${state[2]}) 0.5 s after its parent died"
else t_pass experiment_sigterm_ends_the_child; fi
