# ddp_torch.sh: the model, its loss, backward and the optimizers against
# PyTorch 1.13, and safetensors files across the two. build/tests/unit/
# test_torch_cases writes six cases (SGD with momentum; with weight decay and
# Nesterov; Adam; each with and without BatchNorm; a one-hidden-layer model
# at batch 7): the batches and the whole run, the state before every step and
# every step's logits, loss, gradient and ReLU masks.
# tests/crosscheck/ddp_torch.py rebuilds each in torch: the initial
# parameters must be torch.manual_seed's bit for bit, and every step, from the
# state our run reached, must agree with torch computing it in float64 within
# bounds that hold on any CPU and OpenBLAS kernel set
# (tests/crosscheck/step_reference.py; it prints the errors it measured); our
# --save files must load with load_state_dict. Then the C side must load the
# file torch wrote. Needs Debian's python3-torch (only /usr/bin/python3
# imports it); runs in the plain suite only.
. "$(dirname "$0")/../harness/lib.sh"
prog="$BUILD/tests/unit/test_torch_cases"
if [ "${SUITE:-plain}" != plain ]; then t_skip torch_equivalence "runs in the plain suite only"; exit 0; fi
if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    t_skip torch_equivalence "Debian's python3-torch is not installed"; exit 0
fi
dir="$T_TMP/cases"
mkdir -p "$dir"
if ! DDP_TORCH_DIR="$dir" "$prog" torch_cases_written > "$T_TMP/c.log" 2>&1; then
    t_failed cases_written "$prog failed: $(tail -n 3 "$T_TMP/c.log")"; exit 0
fi
# ddp_torch.py prints a PASS/FAIL line per check itself; a crash is one more failure
status=0
out=$(/usr/bin/python3 tests/crosscheck/ddp_torch.py "$dir" 2>"$T_TMP/py.log") || status=$?
printf '%s\n' "$out"
if [ "$status" != 0 ] && ! grep -q '^FAIL ' <<<"$out"; then
    t_failed torch_side "ddp_torch.py failed (status $status): $(tail -n 3 "$T_TMP/py.log")"; exit 0
fi
t_out torch_written_loads "PASS test_torch_cases.torch_file_loads" env DDP_TORCH_DIR="$dir" "$prog" torch_file_loads
