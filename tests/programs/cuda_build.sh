# cuda_build: what a build with CUDA holds, checked without a GPU (running
# it is make test-gpu's job). Where $BUILD/config.mk says HAVE_CUDA := 1:
# chapter 6 links cuBLAS, the CUDA runtime and (with NCCL) NCCL; the CUDA
# backend's object defines one CUDA kernel for each name of KERNEL_LIST
# (lib/transfer/kernels.h) and carries device code; and nvcc builds it with
# no fused multiply-add, so that a GPU runs the arithmetic test_device_ops
# checks here. First, in any build: a toolkit without cuBLAS turns the GPU
# code off, saying so, instead of failing to link.
. "$(dirname "$0")/../harness/lib.sh"

# A stand-in toolkit: nvcc names its TOP as the real one does (mk/features.sh
# asks it), and the files the detection looks for are empty.
if [ "${SUITE:-plain}" != plain ]; then
    t_skip features_need_cublas "runs in the plain suite only"
else
    fake=$T_TMP/toolkit
    mkdir -p "$fake/bin" "$fake/lib64" "$fake/include"
    printf '#!/bin/sh\ncase "$*" in\n*--dryrun*) echo "#\\$ TOP=%s" >&2 ;;\n*--version*) echo "stand-in" ;;\nesac\n' \
        "$fake" > "$fake/bin/nvcc"
    chmod +x "$fake/bin/nvcc"
    touch "$fake/lib64/libcudart.so" "$fake/include/cuda_runtime.h"
    detect() { env WITH_CUDA=1 PATH="$fake/bin:$PATH" sh mk/features.sh > "$T_TMP/config.mk" 2> "$T_TMP/features.log"; }
    if ! detect; then
        t_failed features_need_cublas "mk/features.sh failed: $(tail -n 3 "$T_TMP/features.log")"
    elif ! grep -qx 'HAVE_CUDA := 0' "$T_TMP/config.mk"; then
        t_failed features_need_cublas "a toolkit without libcublas.so and cublas_v2.h: expected HAVE_CUDA := 0, got" \
            "$(grep HAVE_CUDA "$T_TMP/config.mk")"
    elif ! grep -q 'libcublas.so.*GPU code is not built' "$T_TMP/features.log"; then
        t_failed features_need_cublas "expected the detection to name libcublas.so, got: $(grep cuda "$T_TMP/features.log")"
    else
        touch "$fake/lib64/libcublas.so" "$fake/include/cublas_v2.h"
        if detect && grep -qx 'HAVE_CUDA := 1' "$T_TMP/config.mk"; then t_pass features_need_cublas
        else t_failed features_need_cublas "with cuBLAS added the stand-in toolkit is still refused: $(grep cuda "$T_TMP/features.log")"; fi
    fi
fi

if ! grep -q 'HAVE_CUDA := 1' "$BUILD/config.mk" 2>/dev/null; then
    t_skip gpu_objects "this build has no CUDA (HAVE_CUDA := 1 is not in $BUILD/config.mk)"
    exit 0
fi

# chapter 6 links what its device and communicator call
needed=$(readelf -d "$BUILD/chapter-6" 2>&1 | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
libs=(libcublas libcudart)
if grep -q 'HAVE_NCCL := 1' "$BUILD/config.mk"; then libs+=(libnccl)
else t_skip chapter6_links_nccl "this build has no NCCL"; fi
for lib in "${libs[@]}"; do
    if grep -q "^$lib\.so" <<<"$needed"; then t_pass "chapter6_links_$lib"
    else t_failed "chapter6_links_$lib" "$BUILD/chapter-6 does not need $lib.so; it needs: $(tr '\n' ' ' <<<"$needed")"; fi
done

# one CUDA kernel per name of KERNEL_LIST, and device code to run them
obj=$BUILD/obj/lib/transfer/cuda/device_cuda.o
names=$(sed -n 's/^ *X(\([a-z0-9_]*\)).*/\1/p' lib/transfer/kernels.h)
symbols=$(nm -C --defined-only "$obj" 2>&1)
missing=""
for name in $names; do
    grep -q " T cu_kernel_$name(" <<<"$symbols" || missing="$missing $name"
done
if [ -z "$names" ]; then t_failed kernels_defined "no kernel names found in lib/transfer/kernels.h's KERNEL_LIST"
elif [ -n "$missing" ]; then t_failed kernels_defined "$obj defines no CUDA kernel for:$missing"
else t_pass kernels_defined; fi
if readelf -S "$obj" 2>/dev/null | grep -q '\.nv_fatbin'; then t_pass device_code
else t_failed device_code "$obj has no .nv_fatbin section: no device code"; fi

# the recipe that builds it (make -n: printed, not run) asks for no fused multiply-add
recipe=$(env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS make -n -W lib/transfer/cuda/device_cuda.cu BUILD="$BUILD" "$obj" 2>&1)
if grep -q -- ' -fmad=false ' <<<"$recipe"; then t_pass no_fused_multiply_add
else t_failed no_fused_multiply_add "nvcc builds $obj without -fmad=false: $(grep nvcc <<<"$recipe" | head -c 400)"; fi
