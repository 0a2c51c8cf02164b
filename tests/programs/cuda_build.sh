# cuda_build: what a build with CUDA holds, checked without a GPU (running
# it is make test-gpu's job). A toolkit without cuBLAS, which the device
# operations' matrix products need, turns the GPU code off, saying so,
# instead of failing to link.
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
