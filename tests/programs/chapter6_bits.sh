# chapter6_bits: chapter 6's training gives the bits it gave before its model
# moved onto device operations. Eight runs from a fixed --init (SGD and Adam,
# BatchNorm, accumulation, fp16 and bf16 compression, 2 and 3 ranks, 30
# steps each) save their parameters, whose SHA-256 were recorded with the
# model's former CPU loops and row-major cblas_sgemm calls. The matrix
# products round by the OpenBLAS kernel set, so every run names one
# (OPENBLAS_CORETYPE): Prescott (SSE3, any x86-64 CPU) always, Haswell (AVX2
# and FMA) where the CPU has them, both recorded with OpenBLAS 0.3.21
# (Debian 12's): another OpenBLAS may pick other kernels, and the pins are
# skipped there with the reason. The initial parameters come from a 1-step
# run under Prescott, so they are the same bits on every such machine.
. "$(dirname "$0")/../harness/lib.sh"
P=$BUILD/chapter-6
C=(--data=synthetic --test-data=none --world=2 --batch=32 --train-size=2048 --out="$T_TMP/out")

version=$(env OPENBLAS_CORETYPE=Prescott "$BUILD/tools/blas_probe" 2>/dev/null | sed -n 's/.*OpenBLAS \([0-9.]*\).*/\1/p' | head -n 1)
if [ "$version" != 0.3.21 ]; then
    t_skip pinned_bits "the bits were recorded with OpenBLAS 0.3.21; this build has '${version:-an unknown version}'"
    exit 0
fi

OPENBLAS_CORETYPE=Prescott t_ok init "$P" "${C[@]}" --steps=1 --seed=3 --save="$T_TMP/init.safetensors"
OPENBLAS_CORETYPE=Prescott t_ok init_bn "$P" "${C[@]}" --steps=1 --seed=3 --batchnorm --save="$T_TMP/init-bn.safetensors"

# name  init  flags  sha256 under Prescott  sha256 under Haswell
runs=(
"adam init --optimizer=adam
 a9a217db4524ed72025bcb1102cbad408661d6b6c282e306d9482f592c4b1d60 8cda69dc4455d15d261f990c611324016eb6f6616fea60e0bffb2d589eb44998"
"sgd_bn_accumulate init-bn --optimizer=sgd --batchnorm --accumulate=2
 8ca0f61391bc7c16e5710abf1b732c7009f60077b90fde82b9bfa365cba54c34 7d0fc66b2954c7198801971db00a622d5c76df72cb7357f75251d01506838b23"
"sgd_fp16_decay init --optimizer=sgd --compress=fp16 --weight-decay=0.01
 74552d70df1e58e9f3b4c649c600a2bc603ee324d1c03e08d8d1e41fb9bb7c3a 385a53061701da46acb0fe39b2d08661fba5eed424249f78d664105bd9f361f8"
"adam_bf16_bn_world3 init-bn --optimizer=adam --compress=bf16 --batchnorm --world=3
 581ef1c6ea6dfbc64e765369f091c259ac1d79b39aacedc7ca887ae6dd77f15c c35738c840794845c0ce0a4bf1505499927a51e8b8c555836f5a7509ac317646"
)
cores=(Prescott)
if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then cores+=(Haswell)
else t_skip pinned_bits.Haswell "this CPU has no AVX2 and FMA: OpenBLAS cannot run its Haswell kernels"; fi
for run in "${runs[@]}"; do
    read -r name init flags <<<"$(sed -n 1p <<<"$run")"
    read -r want_prescott want_haswell <<<"$(sed -n 2p <<<"$run")"
    for core in "${cores[@]}"; do
        want=$want_prescott
        [ "$core" = Haswell ] && want=$want_haswell
        out=$T_TMP/$name-$core.safetensors
        # shellcheck disable=SC2086 # the flags are words
        if OPENBLAS_CORETYPE=$core t_run "$P" "${C[@]}" --steps=30 --seed=5 --init="$T_TMP/$init.safetensors" \
            $flags --save="$out" && [ "$(sha256sum < "$out" | cut -d' ' -f1)" = "$want" ]; then
            t_pass "pinned_bits.$name.$core"
        else
            t_failed "pinned_bits.$name.$core" "the saved parameters are not the recorded bits (sha256 $(sha256sum < "$out" 2>/dev/null | cut -c1-16)..., recorded ${want:0:16}...)"
        fi
    done
done
