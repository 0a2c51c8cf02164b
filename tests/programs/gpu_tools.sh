# gpu_tools: what the GPU runs stand on, checked where there is no GPU (make
# test), so that a GPU machine's short time goes to the GPU:
#   versions     build/tools/gpu_versions asks chapter 6's own GPU libraries
#                their versions (CUDA's runtime and NCCL, where the build has
#                them; "not linked" where it does not), and names a library
#                it cannot load;
#   gpu_skips    each script of tests/gpu/ (make test-gpu) says it skips and
#                why, every line of it a skip: none runs, fails or passes
#                silently without a GPU;
#   bench_gpu    chapter 6's GPU benchmarks say "not run: no GPU", one
#                verdict per target;
#   reference    tools/gpu_reference.sh stops at once, writing nothing;
# and the gpu suite's mpirun jobs are not skipped where mpirun can run.
. "$(dirname "$0")/../harness/lib.sh"
V=$BUILD/tools/gpu_versions

# versions: the libraries ldd resolves for chapter 6, as gpu_reference.sh passes them
libs=$(ldd "$BUILD/chapter-6" | awk '/lib(cudart|cublas|nccl)\.so/ { print $3 }')
# shellcheck disable=SC2086 # one path per word
t_run "$V" $libs
if [ "$T_STATUS" != 0 ]; then t_failed versions "exit $T_STATUS: $T_OUT"
elif grep -q 'HAVE_CUDA := 1' "$BUILD/config.mk"; then
    t_lines versions.cuda_runtime "cuda runtime: " "cuda runtime: [0-9]+\.[0-9]+ \(/.*libcudart\.so[.0-9]*\)"
    if grep -q 'HAVE_NCCL := 1' "$BUILD/config.mk"; then
        t_lines versions.nccl "nccl: " "nccl: 2\.[0-9]+\.[0-9]+ \(/.*libnccl\.so[.0-9]*\)"
    fi
else
    t_lines versions.not_linked "cu" "(cuda runtime|cuda driver|cublas): not linked"
fi
# the versions lost to a full disk are an error: gpu_reference.sh records what this prints
t_fail versions.into_a_full_disk 1 "gpu_versions: writing the output failed" \
    bash -c 'exec "$0" "$@" > /dev/full' "$V"
t_fail versions.bad_library 1 "gpu_versions: $T_TMP/none.so: cannot open: No such file" "$V" "$T_TMP/none.so"
printf 'not ELF' > "$T_TMP/text.so"
t_fail versions.not_a_library 1 "gpu_versions: $T_TMP/text.so: cannot load it" "$V" "$T_TMP/text.so"
# dlopen of a FIFO waits for a writer forever; dlopen("") answers with the program itself
mkfifo "$T_TMP/fifo.so"
T_TIMEOUT=20 t_fail versions.fifo_library 1 "gpu_versions: $T_TMP/fifo.so: not a regular file (a FIFO)" "$V" "$T_TMP/fifo.so"
t_fail versions.empty_library 2 "gpu_versions: LIBRARY: expected a path, got an empty value" "$V" ""
t_fail versions.bad_flag 2 "gpu_versions: unrecognized option '--bogus'" "$V" --bogus

# the gpu suite tests the plain build, MPI and all: its mpirun jobs run where mpirun is
if command -v mpirun > /dev/null 2>&1 && grep -q 'HAVE_MPI := 1' "$BUILD/config.mk"; then
    t_ok mpirun_in_the_gpu_suite env BUILD="$BUILD" SUITE=gpu bash -c '. tests/harness/lib.sh; t_need_mpirun x'
fi

if nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    t_skip without_a_gpu "this machine has a GPU: make test-gpu runs tests/gpu/, tools/gpu_reference.sh records"
    exit 0
fi
for s in tests/gpu/*.sh; do
    name=gpu_skips.$(basename "$s" .sh)
    t_run env BUILD="$BUILD" SUITE=gpu bash "$s"
    said=$(grep -E '^(PASS|FAIL) ' <<<"$T_OUT" || true)
    other=$(grep -vE '^PASS [^ ]+ \(skipped: .+\)$' <<<"$said" || true)
    if [ "$T_STATUS" != 0 ]; then t_failed "$name" "exit $T_STATUS: $(tail -n 3 <<<"$T_OUT")"
    elif [ -z "$said" ]; then t_failed "$name" "said nothing: $(tail -n 3 <<<"$T_OUT")"
    elif [ -n "$other" ]; then t_failed "$name" "without a GPU, not a skip: $(head -n 2 <<<"$other")"
    else t_pass "$name"; fi
done

t_run env BUILD="$BUILD" chapters/06-ddp/bench_gpu.sh
if [ "$T_STATUS" != 0 ]; then t_failed bench_gpu "exit $T_STATUS: $(tail -n 3 <<<"$T_OUT")"
elif [ "$(grep -c '^bench: ' <<<"$T_OUT")" != 4 ]; then t_failed bench_gpu "expected 4 verdicts: $T_OUT"
else t_lines bench_gpu.not_run "bench: " 'bench: GPU [^|]+ \| [^|]+ \| target [<>]= [0-9.]+ \| not run: no GPU'; fi

t_fail reference.no_gpu 1 "gpu_reference: no NVIDIA GPU visible (nvidia-smi lists none): nothing to record" \
    tools/gpu_reference.sh --out="$T_TMP/ref"
if [ -e "$T_TMP/ref" ] || compgen -G "$T_TMP/ref.tmp-*" > /dev/null; then
    t_failed reference.writes_nothing "left: $(ls -d "$T_TMP"/ref*)"
else t_pass reference.writes_nothing; fi
