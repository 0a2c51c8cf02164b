# comm_nccl: --backend=nccl where it cannot run. A build without NCCL must
# say so; a build with NCCL on a machine without a GPU must say "no CUDA
# device found" and exit 1, whichever way the ranks were started (threads,
# torchrun-style variables, mpirun), never crash or hang. On a machine with a
# GPU this is tests/gpu/nccl.sh's job (make test-gpu). First: where nvcc and
# NCCL are installed, the build must have used them.
. "$(dirname "$0")/../harness/lib.sh"

if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
prog=$BUILD/chapter-5
small=(--backend=nccl --min-bytes=4 --max-bytes=4K --iters=1 --warmup=0 --timeout=10)

# A GPU build that silently turned itself off would make every check below a
# skip. So where the toolkit is (nvcc on PATH or /usr/local/cuda/bin/nvcc,
# which may be a wrapper script: nvcc --dryrun names its real toolkit; NCCL's
# library and header in that toolkit), the plain build must have NCCL and its
# objects in the library. Debian 12 packages no NCCL,
# so a fresh Debian machine takes the "not built" branch; this project's CI
# machine has CUDA and NCCL in /usr/local/cuda and must build them.
nvcc=$(command -v nvcc 2>/dev/null || true)
[ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
if [ "${SUITE:-plain}" != plain ]; then
    t_skip gpu_build "the $SUITE suite is built without CUDA"
elif [ "${WITH_CUDA:-1}" = 0 ] || [ -z "$nvcc" ]; then
    t_skip gpu_build "no nvcc on this machine (or WITH_CUDA=0): GPU code is not built"
else
    cuda_home=$("$nvcc" --dryrun -c -x cu /dev/null -o /dev/null 2>&1 | sed -n 's/^#\$ TOP=//p' | head -n 1)
    cuda_home=$(cd "${cuda_home:-/nonexistent}" 2>/dev/null && pwd -P)
    if { [ -e "$cuda_home/lib/libnccl.so" ] || [ -e "$cuda_home/lib64/libnccl.so" ]; } &&
        [ -e "$cuda_home/include/nccl.h" ]; then
        if ! grep -q 'HAVE_NCCL := 1' "$BUILD/config.mk" 2>/dev/null; then
            t_failed gpu_build "nvcc and NCCL are in $cuda_home, but $BUILD/config.mk lacks HAVE_NCCL := 1"
        elif ! ar t "$BUILD/libddp.a" 2>/dev/null | grep -qx 'comm_nccl.o'; then
            t_failed gpu_build "HAVE_NCCL := 1, but $BUILD/libddp.a holds no comm_nccl.o"
        else
            t_pass gpu_build
        fi
    elif ! grep -q 'HAVE_CUDA := 1' "$BUILD/config.mk" 2>/dev/null; then
        t_failed gpu_build "nvcc is at $nvcc, but $BUILD/config.mk lacks HAVE_CUDA := 1"
    else
        t_skip gpu_build "CUDA without NCCL in $cuda_home: --backend=nccl is off"
    fi
fi

if [ ! -x "$prog" ]; then
    t_failed built "$prog is missing"
elif ! grep -q 'HAVE_NCCL := 1' "$BUILD/config.mk" 2>/dev/null; then
    t_fail not_built 1 "this build has no NCCL support" "$prog" "${small[@]}"
elif command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    t_skip no_device "this machine has a GPU: make test-gpu runs tests/gpu/nccl.sh"
else
    t_fail no_device.threads 1 "nccl: no CUDA device found" "$prog" "${small[@]}" --world=2
    t_fail no_device.torchrun 1 "nccl: no CUDA device found" \
        env RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 "$prog" "${small[@]}"
    if [ "${SUITE:-plain}" = plain ] && command -v mpirun >/dev/null 2>&1 &&
        grep -q 'HAVE_MPI := 1' "$BUILD/config.mk"; then
        t_fail no_device.mpirun nonzero "nccl: no CUDA device found" \
            mpirun --oversubscribe -np 2 "$prog" "${small[@]}"
    else
        t_skip no_device.mpirun "needs mpirun and an MPI build (plain suite)"
    fi
fi
