#!/usr/bin/env bash
# gpu_reference.sh: one run on a real GPU, recorded with what it takes to read
# it: `make test-gpu` and the GPU benchmarks, written to
# notebooks-out/reference/DATE-GPU/ (notebooks-out/reference/README.md says
# what each file holds):
#   environment.txt  the date, the commit, the GPUs and their driver
#                    (nvidia-smi), the CUDA runtime, cuBLAS and NCCL versions
#                    the build's own libraries report (build/tools/gpu_versions
#                    on what `ldd build/chapter-6` resolves), nvcc, PyTorch,
#                    the CPU
#   test-gpu.txt     make test-gpu's whole output, each test's own lines too
#   bench-gpu.txt    chapter 4's benchmarks (the GPU's pinned copies, the
#                    double-buffered step; its simulator lines too) and
#                    chapter 6's GPU benchmarks (bench_gpu.sh)
#
#   tools/gpu_reference.sh [--out=DIR]    DIR instead of the dated folder
#
# Fits in 9 minutes on one GPU: make test-gpu may take 300 s, chapter 4's
# benchmarks 45 s, chapter 6's 120 s; a part that runs out of time is cut
# there, and its file says so. The folder appears whole or not at all (it is
# written beside itself under another name, renamed at the end). Without a
# GPU, or with a build whose chapter 6 cannot start here (a library missing),
# it stops before running anything and writes nothing. Exit 0 when every test
# passed and every benchmark ran; 1 otherwise (what ran is still recorded);
# 2 for a bad argument.
set -uo pipefail
cd "$(dirname "$0")/.."
PROG=gpu_reference
BUILD=build # the build make test-gpu tests
TEST_S=300 CH4_S=45 CH6_S=120
out=""
for arg in "$@"; do
    case $arg in
    -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
    --out=?*) out=${arg#--out=} ;;
    *) echo "$PROG: unknown argument '$arg' (try --help)" >&2; exit 2 ;;
    esac
done
fail() { echo "$PROG: $*" >&2; exit 1; }
. tools/bench.sh
. tools/torch_python.sh

gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null || true)
[ -n "$gpus" ] || fail "no NVIDIA GPU visible (nvidia-smi lists none): nothing to record"
make -s tests > /dev/null || fail "make tests failed: build the tree first"
missing=$(ldd "$BUILD/chapter-6" 2>&1 | sed -n 's/^[[:space:]]*\([^ ]*\) => not found$/\1/p' | tr '\n' ' ')
[ -z "$missing" ] || fail "$BUILD/chapter-6 cannot start here: ${missing% } not found (ldd $BUILD/chapter-6)"

count=$(grep -c . <<<"$gpus")
name=$(head -n 1 <<<"$gpus")
slug=$(tr 'A-Z' 'a-z' <<<"$name" | sed 's/[^a-z0-9]\{1,\}/-/g; s/^-//; s/-$//')
[ "$count" = 1 ] || slug="${count}x-$slug"
out=${out:-notebooks-out/reference/$(date -u +%Y-%m-%d)-$slug}
[ ! -e "$out" ] || fail "$out exists: move it away, or name another folder with --out=DIR"
mkdir -p "$(dirname "$out")" || fail "cannot make the folder $(dirname "$out")"
tmp=$(mktemp -d "$out.tmp-XXXXXX") || fail "cannot write beside $out"
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

# the libraries chapter 6 loads here, by their file names (ldd's third column)
libs=$(ldd "$BUILD/chapter-6" | awk '/lib(cudart|cublas|cublasLt|nccl)\.so/ { print $3 }')
echo "== $PROG: $count x $name; recording in $out"
{
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "commit: $(git describe --always --dirty 2>/dev/null || echo 'not a git checkout')"
    echo "gpus:"
    nvidia-smi --query-gpu=index,name,driver_version,memory.total,pcie.link.gen.max,pcie.link.width.max \
        --format=csv | sed 's/^/  /'
    echo "the driver's CUDA: $(nvidia-smi | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -n 1)"
    echo "the build's libraries, as each reports itself:"
    # shellcheck disable=SC2086 # one path per word
    "$BUILD/tools/gpu_versions" $libs 2>&1 | sed 's/^/  /'
    echo "nvcc: $("$(sed -n 's/^CUDA_HOME := //p' "$BUILD/config.mk")/bin/nvcc" --version 2>/dev/null | tail -n 1)"
    py=$(torch_python --cuda || torch_python || true)
    if [ -n "$py" ]; then
        echo "pytorch ($py): $("$py" -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)' 2>&1)"
    else
        echo "pytorch: none (no python3 here imports torch)"
    fi
    echo "cpu: $(bench_machine)"
    [ "$count" = 1 ] || { echo "topology:"; nvidia-smi topo -m 2>&1 | sed 's/^/  /'; }
} > "$tmp/environment.txt"

status=0
# part NAME FILE SECONDS CMD...: CMD's output into FILE; a failure or a timeout is said there and here
part() {
    local what=$1 file=$2 limit=$3 rc=0
    shift 3
    timeout -k 10 "$limit" "$@" >> "$file" 2>&1 || rc=$?
    if [ $rc = 124 ] || [ $rc = 137 ]; then
        echo "$PROG: $what ran out of its $limit s and was stopped here" | tee -a "$file"
    elif [ $rc != 0 ]; then
        echo "$PROG: $what exited $rc" | tee -a "$file"
    fi
    [ $rc = 0 ] || status=1
}
part "make test-gpu" "$tmp/test-gpu.txt" $TEST_S env VERBOSE=1 make -s test-gpu
{
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "gpu: $name"
    echo
} > "$tmp/bench-gpu.txt"
export BUILD
part "chapter 4's benchmarks" "$tmp/bench-gpu.txt" $CH4_S chapters/04-transfer/bench.sh
part "chapter 6's GPU benchmarks" "$tmp/bench-gpu.txt" $CH6_S chapters/06-ddp/bench_gpu.sh

grep -h '^[0-9]* passed, [0-9]* failed$' "$tmp/test-gpu.txt" || echo "make test-gpu: no count (see test-gpu.txt)"
grep -h '^bench: ' "$tmp/bench-gpu.txt"
chmod 0755 "$tmp" && chmod 0644 "$tmp"/* # mktemp made them private: the record is for everyone
mv "$tmp" "$out" || fail "cannot rename $tmp to $out"
trap - EXIT
echo "recorded in $out"
exit $status
