# chapter6_torch.sh: build/chapter-6 against PyTorch 1.13 (Debian's
# python3-torch; only /usr/bin/python3 imports it), with
# tests/crosscheck/chapter6_torch.py:
#   - the parameters a run saves (--save) load into torch's MLP with
#     load_state_dict(strict=True), and torch's evaluation of them on the test
#     set counts the samples the program said it got right, within 2 of 10000
#     (a sample whose two largest logits differ by less than the two sides'
#     rounding can go either way; measured: 0 apart);
#   - from the same initial parameters (torch.manual_seed's, via --init),
#     torch training single-process on the union of the 4 ranks' batches for
#     30 steps ends with our 4-rank run's parameters, to 1e-5 of each tensor's
#     largest element (the .py says why not bit for bit);
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

# 1. a saved model, evaluated by torch: the accuracy the program printed
t_run $P --world=4 --train-size=8192 --epochs=1 --batch=64 --save="$T_TMP/model.safetensors" --out="$T_TMP/out"
ours=$(sed -n 's/^test accuracy: [0-9.]* (\([0-9]*\) of \([0-9]*\))$/\1 \2/p' <<<"$T_OUT")
if [ "$T_STATUS" != 0 ] || [ -z "$ours" ]; then t_failed saved_model_run "exit $T_STATUS: $(tail -n 3 <<<"$T_OUT")"
else
    theirs=$(/usr/bin/python3 "$PY" evaluate "$T_TMP/model.safetensors" 2>"$T_TMP/py.log" | sed -n 's/^correct \([0-9]*\) of \([0-9]*\)$/\1 \2/p')
    read -r c n <<<"$ours"; read -r tc tn <<<"$theirs"
    if [ -z "$theirs" ]; then t_failed torch_evaluates_the_saved_model "chapter6_torch.py failed: $(tail -n 3 "$T_TMP/py.log")"
    elif [ "$n" != "$tn" ] || [ $((c > tc ? c - tc : tc - c)) -gt 2 ]; then
        t_failed torch_evaluates_the_saved_model "we printed $c of $n right, torch counts $tc of $tn"
    else echo "   (we printed $c of $n right, torch counts $tc of $tn)"; t_pass torch_evaluates_the_saved_model; fi
fi

# 2. four ranks against one process on their batches' union, from torch's initial parameters
if ! /usr/bin/python3 "$PY" init "$T_TMP/init.safetensors" 7 2>"$T_TMP/py.log"; then
    t_failed torch_init "chapter6_torch.py init failed: $(tail -n 3 "$T_TMP/py.log")"; exit 0
fi
t_ok four_ranks_from_torch_init $P --world=4 --batch=16 --steps=30 --schedule=constant --optimizer=sgd --lr=0.05 --momentum=0.9 \
    --seed=3 --init="$T_TMP/init.safetensors" --test-data=none --save="$T_TMP/ours.safetensors" --out="$T_TMP/out"
status=0
out=$(/usr/bin/python3 "$PY" train "$T_TMP/init.safetensors" "$T_TMP/ours.safetensors" 4 16 30 0.05 0.9 3 \
      2>"$T_TMP/py.log") || status=$?
printf '%s\n' "$out"
if [ "$status" != 0 ] && ! grep -q '^FAIL ' <<<"$out"; then
    t_failed union_of_4_ranks "chapter6_torch.py train failed (status $status): $(tail -n 3 "$T_TMP/py.log")"
fi

# 3. the recipe's peer: its W-rank split is the global batch, to float32 rounding
if [ ! -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
    t_skip recipe_split "Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)"
else
    t_out recipe_split "    8     16  " env OPENBLAS_NUM_THREADS=1 /usr/bin/python3 chapters/06-ddp/recipe_torch.py --check-split
fi
