# torch_python.sh: which python3 has PyTorch, for the scripts that set our
# programs beside it on a GPU (tests/gpu/, chapters/06-ddp/bench_gpu.sh).
# Sourced, not run.
#
#   torch_python          prints the first python3 that imports torch
#   torch_python --cuda   ... whose torch also sees a GPU (torch.cuda.is_available())
#
# The candidates, in order: $TORCH_PYTHON when set, /usr/bin/python3 (Debian's
# python3-torch, what the CPU cross-checks use) and the python3 on the PATH (a
# GPU machine's own PyTorch often lives in a virtual environment there, and
# Debian's torch has no CUDA). Returns 1, printing nothing, when none fits.

torch_python() {
    local test='import torch' py
    [ "${1:-}" = --cuda ] && test='import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)'
    for py in ${TORCH_PYTHON:-} /usr/bin/python3 "$(command -v python3 2>/dev/null)"; do
        [ -n "$py" ] && [ -x "$py" ] || continue
        if "$py" -c "$test" > /dev/null 2>&1; then
            echo "$py"
            return 0
        fi
    done
    return 1
}
