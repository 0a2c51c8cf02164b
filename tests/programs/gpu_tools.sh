# gpu_tools: what the GPU runs stand on, checked where there is no GPU (make
# test), so that a GPU machine's short time goes to the GPU:
#   versions     build/tools/gpu_versions asks chapter 6's own GPU libraries
#                their versions (CUDA's runtime and NCCL, where the build has
#                them; "not linked" where it does not), and names a library
#                it cannot load.
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
t_fail versions.bad_library 1 "gpu_versions: $T_TMP/none.so: cannot load it" "$V" "$T_TMP/none.so"
t_fail versions.bad_flag 2 "gpu_versions: unrecognized option '--bogus'" "$V" --bogus
