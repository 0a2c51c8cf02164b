# tools.sh: the small programs behind the tests and make bench, on input
# made to catch them out: tensordiff's default is bit for bit, so +0 against
# -0 differs (a tolerance test alone would call them equal); verdict names
# the flag it could not read.
. "$(dirname "$0")/../harness/lib.sh"
TD=$BUILD/tools/tensordiff
V=$BUILD/tools/verdict

# A one-tensor safetensors file "x" of float32 values given as hex words.
st_file() { # path word...
    local path=$1; shift
    local n=$# header
    header=$(printf '{"x":{"dtype":"F32","shape":[%d],"data_offsets":[0,%d]}}' "$n" $((4 * n)))
    while [ $(( ${#header} % 8 )) != 0 ]; do header="$header "; done
    {
        printf "$(printf '\\x%02x' $(( ${#header} & 255 )) $(( ${#header} >> 8 & 255 )) 0 0 0 0 0 0)"
        printf '%s' "$header"
        for w in "$@"; do printf "$(printf '\\x%s\\x%s\\x%s\\x%s' "${w:6:2}" "${w:4:2}" "${w:2:2}" "${w:0:2}")"; done
    } > "$path"
}
st_file "$T_TMP/plus.safetensors" 3f800000 00000000
st_file "$T_TMP/minus.safetensors" 3f800000 80000000
st_file "$T_TMP/near.safetensors" 3f800001 00000000

t_out tensordiff_same_file "tensordiff: the same bits" "$TD" "$T_TMP/plus.safetensors" "$T_TMP/plus.safetensors"
# "the same bits" lost to a full disk is no verdict: an error, not exit 0
t_fail tensordiff_into_a_full_disk 1 "tensordiff: writing the output failed" \
    bash -c 'exec "$0" "$@" > /dev/full' "$TD" "$T_TMP/plus.safetensors" "$T_TMP/plus.safetensors"
t_fail tensordiff_signed_zero_differs 1 "tensordiff: " "$TD" "$T_TMP/plus.safetensors" "$T_TMP/minus.safetensors"
t_fail tensordiff_one_ulp_differs 1 "tensordiff: " "$TD" "$T_TMP/plus.safetensors" "$T_TMP/near.safetensors"
st_file "$T_TMP/three.safetensors" 3f800000 00000000 00000000
# no value differs, the tensors do: the verdict names the one, not an empty "largest difference 0, "
t_fail tensordiff_other_shape 1 "tensordiff: DIFFERENT tensors (x: another dtype or shape in B)" \
    "$TD" --quiet "$T_TMP/plus.safetensors" "$T_TMP/three.safetensors"
if [ "$(wc -l <<<"$T_OUT")" = 1 ]; then t_pass tensordiff_quiet_prints_only_the_verdict
else t_failed tensordiff_quiet_prints_only_the_verdict "$T_OUT"; fi
t_out tensordiff_one_ulp_within_tolerance "within tolerance" "$TD" --tolerance=1e-6 "$T_TMP/plus.safetensors" "$T_TMP/near.safetensors"

t_fail verdict_bad_figure 2 "verdict: --figure: expected a finite number, got 'abc'" "$V" --what=x --figure=abc
t_fail verdict_unknown_flag 2 "unrecognized option '--bogus'" "$V" --bogus
# a read error is not "0 verdict lines, all well formed"
t_fail verdict_check_unreadable_input 1 "verdict: standard input: read error after line 0: Is a directory" \
    bash -c 'exec "$0" --check < "$1"' "$V" "$T_TMP"
# a verdict line lost to a full disk is an error, not a verdict given
t_fail verdict_into_a_full_disk 1 "verdict: writing the output failed" \
    bash -c 'exec "$0" "$@" > /dev/full' "$V" --what=x --figure=1 --unit=u --peer=p --peer-figure=2 --peer-unit=u \
    --ratio=figure/peer --target='>=1'
# blas_probe's report lost to a full disk is an error, not a step that ran
t_fail blas_probe_into_a_full_disk 1 "blas_probe: writing the output failed" \
    bash -c 'exec "$0" "$@" > /dev/full' "$BUILD/tools/blas_probe"
# a line longer than any buffer is one line: its tail is not read as a verdict line of its own
t_out verdict_check_long_line "1 verdict line(s), all well formed" bash -c \
    '{ printf "%04095d" 0; echo "bench: not a verdict"; echo "bench: x: 1 u | p: 2 u | ratio 0.50 | target >= 1 | MISS"; } | "$0" --check' "$V"
