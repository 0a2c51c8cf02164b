# chapter6_torch.sh: build/chapter-6 against PyTorch 1.13 (Debian's
# python3-torch; only /usr/bin/python3 imports it), with
# tests/crosscheck/chapter6_torch.py, which says why each check compares what
# it does (a ReLU input within rounding of 0 goes either way, so two float32
# runs part ways however right they are: nothing here depends on which way it
# fell, on any CPU or OpenBLAS kernel set):
#   - the parameters a run saves (--save) load into torch's MLP with
#     load_state_dict(strict=True), and torch's evaluation of them in float64
#     on the test set counts the samples the program said it got right, but
#     for the samples whose two largest logits our rounding could swap;
#   - a real run (4 ranks of 16, SGD at lr 0.05 with momentum 0.9, from
#     torch.manual_seed's parameters via --init), stopped and resumed after
#     every one of its first 20 steps and around steps 200 and 600
#     (--checkpoint, --resume: exact): from each state, torch computes the
#     step on the union of the 4 ranks' batches in float64, and our averaged
#     gradient and the update it made must agree (step_reference.py's bounds,
#     the allowance for ReLU units on their edge bounded too);
#   - on the same states, the gradient check's own power: our gradient off by
#     a factor 1 + 5e-4 is refused in every tensor, with the edge allowance as
#     it is and widened to 300 sigmas, where it would swallow most of fc1;
#   - a whole 30-step run of plain SGD at lr 0.01, where the trajectories are
#     stable, ends where torch's float64 run ends, to 2e-3 of each tensor's
#     largest element (measured: 6e-7);
#   - chapters/06-ddp/recipe_torch.py, the recipe's PyTorch peer, splits the
#     global batch into 2, 4 and 8 ranks' batches whose union it is, with the
#     same gradient to float32 rounding (--check-split; Fashion-MNIST only).
# Runs in the plain suite only.
. "$(dirname "$0")/../harness/lib.sh"
P=$BUILD/chapter-6
PY=tests/crosscheck/chapter6_torch.py
if [ "${SUITE:-plain}" != plain ]; then t_skip chapter6_torch "runs in the plain suite only"; exit 0; fi
if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    t_skip chapter6_torch "Debian's python3-torch is not installed"; exit 0
fi
# torch_side NAME ARGS...: chapter6_torch.py prints its own PASS/FAIL lines; a crash is one more failure
torch_side() {
    local name=$1 status=0 out
    shift
    out=$(/usr/bin/python3 "$PY" "$@" 2>"$T_TMP/py.log") || status=$?
    printf '%s\n' "$out"
    if [ "$status" != 0 ] && ! grep -q '^FAIL ' <<<"$out"; then
        t_failed "$name" "chapter6_torch.py $1 failed (status $status): $(tail -n 3 "$T_TMP/py.log")"
    fi
}

# 1. a saved model, evaluated by torch: the accuracy the program printed
t_run $P --world=4 --train-size=8192 --epochs=1 --batch=64 --save="$T_TMP/model.safetensors" --out="$T_TMP/out"
ours=$(sed -n 's/^test accuracy: [0-9.]* (\([0-9]*\) of [0-9]*)$/\1/p' <<<"$T_OUT")
if [ "$T_STATUS" != 0 ] || [ -z "$ours" ]; then t_failed saved_model_run "exit $T_STATUS: $(tail -n 3 <<<"$T_OUT")"
else torch_side torch_evaluates_the_saved_model evaluate "$T_TMP/model.safetensors" "$ours"; fi

if ! /usr/bin/python3 "$PY" init "$T_TMP/init.safetensors" 7 2>"$T_TMP/py.log"; then
    t_failed torch_init "chapter6_torch.py init failed: $(tail -n 3 "$T_TMP/py.log")"; exit 0
fi
job=(--world=4 --batch=16 --schedule=constant --optimizer=sgd --seed=3 --test-data=none --out="$T_TMP/out")

# 2. one step at a time along a real run: stopped after each step K it keeps,
# resumed from there, its checkpoint kept as ck/step-K.safetensors
sgd=(--lr=0.05 --momentum=0.9)
from=(--init="$T_TMP/init.safetensors")
mkdir -p "$T_TMP/ck"
for k in $(seq 1 20) 200 201 600 601; do
    t_run $P "${job[@]}" "${sgd[@]}" "${from[@]}" --steps=$k --checkpoint="$T_TMP/run"
    if [ "$T_STATUS" != 0 ]; then t_failed steps_run "--steps=$k: exit $T_STATUS: $(tail -n 3 <<<"$T_OUT")"; break; fi
    cp "$T_TMP/run/checkpoint.safetensors" "$T_TMP/ck/step-$k.safetensors"
    from=(--resume="$T_TMP/run")
done
if [ "$T_STATUS" = 0 ]; then
    torch_side steps_from_our_states steps "$T_TMP/init.safetensors" "$T_TMP/ck" 4 16 0.05 0.9 3
    torch_side wrong_average_refused power "$T_TMP/init.safetensors" "$T_TMP/ck" 4 16 0.9 3
fi

# 3. a whole run where the trajectories are stable
t_ok run_from_torch_init $P "${job[@]}" --steps=30 --lr=0.01 --momentum=0 --init="$T_TMP/init.safetensors" \
    --save="$T_TMP/ours.safetensors"
if [ "$T_STATUS" = 0 ]; then
    torch_side run_of_4_ranks run "$T_TMP/init.safetensors" "$T_TMP/ours.safetensors" 4 16 30 0.01 3
fi

# 4. the recipe's peer: its W-rank split is the global batch, to float32 rounding
if [ ! -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
    t_skip recipe_split "Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)"
else
    t_out recipe_split "    8     16  " env OPENBLAS_NUM_THREADS=1 /usr/bin/python3 chapters/06-ddp/recipe_torch.py --check-split
fi
