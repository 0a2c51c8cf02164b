#!/bin/sh
# Feature detection: the first thing the build runs. It prints one line per
# feature on stderr (found or not, and what a missing one turns off) and writes
# the Make variables of build/config.mk on stdout. Missing hard requirements
# (a C compiler, zlib, jansson, OpenBLAS) stop the build with the apt-get line that fixes it.
# Override any detection from the environment: WITH_CUDA=0, WITH_MPI=0.

say() { printf '  %-10s %s\n' "$1" "$2" >&2; }
missing=""
CC=${CC:-cc}

echo "features:" >&2
if command -v "$CC" >/dev/null 2>&1; then say cc "found: $("$CC" --version | head -n 1)"
else say cc "NOT FOUND: nothing can be built"; missing="$missing gcc make"; fi

probe_lib() { # $1 header, $2 -l flag: can we compile and link against it?
    printf '#include <%s>\nint main(void){return 0;}\n' "$1" |
        "$CC" -x c - -o /dev/null "$2" >/dev/null 2>&1
}
if probe_lib zlib.h -lz; then say zlib "found"
else say zlib "NOT FOUND (required: it reads gzipped datasets)"; missing="$missing zlib1g-dev"; fi
if probe_lib jansson.h -ljansson; then say jansson "found"
else say jansson "NOT FOUND (required: it parses JSONL length fields)"; missing="$missing libjansson-dev"; fi
# OpenBLAS, not any CBLAS: the model sets one BLAS thread per rank with
# openblas_set_num_threads(), which only OpenBLAS's cblas.h declares.
if printf '#include <cblas.h>\nint main(void){openblas_set_num_threads(1);return 0;}\n' |
   "$CC" -x c - -o /dev/null -lopenblas >/dev/null 2>&1; then say openblas "found"
else say openblas "NOT FOUND (required: the model's matrix products)"; missing="$missing libopenblas-dev"; fi

# CUDA + NCCL. nvcc on the PATH may be a wrapper script outside the toolkit
# (Debian-style /usr/local/bin/nvcc), so ask nvcc itself where its toolkit is
# (the TOP line of --dryrun) instead of guessing from its path. The toolkit may
# keep its libraries in lib64/ or lib/ (and libnccl.so only in lib/): look in both.
cuda_home=""; cuda_lib=""; nccl_lib=""
if [ "${WITH_CUDA:-1}" != 0 ]; then
    nvcc=$(command -v nvcc 2>/dev/null || true)
    [ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
    if [ -n "$nvcc" ]; then
        top=$("$nvcc" --dryrun -c -x cu /dev/null -o /dev/null 2>&1 | sed -n 's/^#\$ TOP=//p' | head -n 1)
        [ -n "$top" ] && cuda_home=$(cd "$top" 2>/dev/null && pwd -P)
    fi
fi
first_dir_with() { # $1 file name, then directories: print the first that holds it
    want=$1; shift
    for d in "$@"; do [ -e "$d/$want" ] && { echo "$d"; return; }; done
}
have_cuda=0; have_nccl=0
if [ -n "$cuda_home" ]; then
    cuda_lib=$(first_dir_with libcudart.so "$cuda_home/lib64" "$cuda_home/lib")
fi
# The device operations' matrix products are cuBLAS's: a toolkit without it
# builds no GPU code rather than failing to link.
if [ -n "$cuda_lib" ] && [ -e "$cuda_home/include/cuda_runtime.h" ] &&
   [ -e "$cuda_lib/libcublas.so" ] && [ -e "$cuda_home/include/cublas_v2.h" ]; then
    have_cuda=1
    say cuda "found: $("$nvcc" --version | tail -n 1) in $cuda_home"
    nccl_lib=$(first_dir_with libnccl.so "$cuda_home/lib64" "$cuda_home/lib")
    if [ -n "$nccl_lib" ] && [ -e "$cuda_home/include/nccl.h" ]; then have_nccl=1; say nccl "found in $nccl_lib"
    else say nccl "not found in $cuda_home/lib64 or lib: --backend=nccl is off"; fi
elif [ -n "$cuda_home" ]; then
    say cuda "nvcc found, but not libcudart.so, libcublas.so, cuda_runtime.h and cublas_v2.h all in $cuda_home: GPU code is not built"
    say nccl "not found (needs CUDA): --backend=nccl is off"
    cuda_home=""
else
    say cuda "not found: GPU code is not built; every chapter runs in the simulator"
    say nccl "not found (needs CUDA): --backend=nccl is off"
fi

have_mpi=0
if [ "${WITH_MPI:-1}" != 0 ] && command -v mpicc >/dev/null 2>&1; then
    have_mpi=1; say mpi "found: $(mpirun --version 2>/dev/null | head -n 1)"
else say mpi "not found: --backend=mpi and the mpirun tests are off (apt-get install openmpi-bin libopenmpi-dev)"; fi

if command -v gnuplot >/dev/null 2>&1; then say gnuplot "found"
else say gnuplot "not found: CSV is written, plots are not rendered (apt-get install gnuplot-nox)"; fi

have_clang=0
if command -v clang >/dev/null 2>&1 &&
   printf 'int LLVMFuzzerTestOneInput(const char*d,unsigned long n){(void)d;(void)n;return 0;}\n' |
   clang -x c - -fsanitize=fuzzer -o /dev/null >/dev/null 2>&1; then
    have_clang=1; say clang "found, with libFuzzer"
else say clang "not found (or no libFuzzer): make fuzz is off (apt-get install clang libclang-rt-14-dev)"; fi

if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import torch' >/dev/null 2>&1; then
    say pytorch "found: $(/usr/bin/python3 -c 'import torch; print(torch.__version__)')"
else say pytorch "not found: cross-checks and benchmarks against PyTorch are skipped (apt-get install python3-torch)"; fi

if [ -n "$missing" ]; then
    echo "error: required packages are missing. Install them with \`make deps\` (as root or with sudo), or:" >&2
    echo "  sudo apt-get install$missing" >&2
    exit 1
fi

echo "HAVE_CUDA := $have_cuda"
echo "HAVE_NCCL := $have_nccl"
echo "HAVE_MPI := $have_mpi"
echo "HAVE_CLANG_FUZZER := $have_clang"
echo "CUDA_HOME := $cuda_home"
echo "CUDA_LIBDIR := $cuda_lib"
echo "NCCL_LIBDIR := $nccl_lib"
