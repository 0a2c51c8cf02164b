# output_paths.sh: the programs write every file through one place
# (lib/base/fsutil.h), which refuses anything but a regular file or a new name
# and leaves what it refused as it was, and open every file they read without
# ever blocking.
#
# Each writer (chapter 6's --save, --trace, --checkpoint and --out with the
# files in it; the other chapters' --out and the files in it) against a FIFO,
# a character device (copies of /dev/null and /dev/full made with mknod when
# root; /dev/null itself otherwise), a directory, a dangling symbolic link and
# a link to a FIFO: a non-zero exit, a message naming the flag and the path,
# the node still the same node (stat's type, device numbers and inode), no
# temporary file beside it. An empty path is refused at parse time. Each
# reader (chapter 6's --init, --resume, --data, --test-data, the other
# chapters' --data, tensordiff's two files) against a FIFO, a device and a
# directory: a non-zero exit within 10 s that names the flag and the file. A full disk (a small tmpfs, root only) and a file-size limit
# (ulimit -f): an error that says which, the last good checkpoint whole, no
# temporary file. And the temporary files a killed writer left (a pid that no
# longer runs) are swept by the next run of each writer, and by --resume.
. "$(dirname "$0")/../harness/lib.sh"
P1=$BUILD/chapter-1
P2=$BUILD/chapter-2
P3=$BUILD/chapter-3
P4=$BUILD/chapter-4
P5=$BUILD/chapter-5
P6=$BUILD/chapter-6
TD=$BUILD/tools/tensordiff
root=0
[ "$(id -u)" = 0 ] && root=1
# a small run: 256 synthetic records, a 784-16-10 model (its checkpoint: 154 KB)
S=(--data=synthetic --train-size=256 --test-data=none --batch=32 --epochs=1 --hidden=16)

# make_node KIND PATH: PATH becomes a node of that kind
make_node() {
    case $1 in
    fifo) mkfifo "$2" ;;
    directory) mkdir "$2" ;;
    file) : > "$2" ;;
    dangling) ln -s nowhere "$2" ;;
    link-to-fifo) mkfifo "$2.target" && ln -s "$(basename "$2").target" "$2" ;;
    null) mknod "$2" c 1 3 ;;
    full) mknod "$2" c 1 7 ;;
    zero) mknod "$2" c 1 5 ;;
    esac
}
devices=()
[ $root = 1 ] && devices=(null full)
file_kinds=(fifo directory dangling link-to-fifo "${devices[@]}") # what --save and the like refuse
dir_kinds=(fifo file dangling link-to-fifo "${devices[@]}")        # what --out and --checkpoint refuse
[ $root = 1 ] || t_skip device_copies "mknod needs root: /dev/null itself stands for the devices"

node_id() { stat -c '%F %t %T %i' "$1" 2>&1; }

# refused NAME FLAG NODE CMD...: CMD exits non-zero (not a hang, not a crash)
# with a message naming FLAG and NODE; NODE is the same node after; no
# temporary file is left beside it; and when NOT_AFTER is set, the output
# lacks it: what the run prints once it has started its work (the refusal
# comes first).
refused() {
    local name=$1 flag=$2 node=$3 before after left
    shift 3
    before=$(node_id "$node")
    T_TIMEOUT=20 t_run "$@"
    after=$(node_id "$node")
    left=$(compgen -G "$(dirname "$node")/*.tmp-*" || true)
    if [ "$T_STATUS" = 124 ] || [ "$T_STATUS" = 137 ]; then t_failed "$name" "hung: $*"
    elif [ "$T_STATUS" = 0 ]; then t_failed "$name" "exit 0 from: $*"
    elif [ "$T_STATUS" -ge 128 ]; then t_failed "$name" "crashed (status $T_STATUS): $(tail -n 2 <<<"$T_OUT")"
    elif ! grep -qF -- "$flag" <<<"$T_OUT" || ! grep -qF -- "$node" <<<"$T_OUT"; then
        t_failed "$name" "the message does not name $flag and $node: $(tail -n 2 <<<"$T_OUT")"
    elif [ -n "${NOT_AFTER:-}" ] && grep -qF -- "$NOT_AFTER" <<<"$T_OUT"; then
        t_failed "$name" "refused only after the run's work ('$NOT_AFTER' was printed)"
    elif [ "$after" != "$before" ]; then t_failed "$name" "$node was replaced: it was $before, it is $after"
    elif [ -n "$left" ]; then t_failed "$name" "left behind: $left"
    else t_pass "$name"; fi
}

# unreadable NAME FLAG NODE CMD...: CMD, reading NODE, exits non-zero within 10 s
# with a message naming FLAG and NODE together ("--init: NODE"; FLAG "" for a
# file given without a flag). A FIFO opened for reading waits for a writer
# forever.
unreadable() {
    local name=$1 flag=$2 node=$3
    shift 3
    T_TIMEOUT=10 t_run "$@"
    if [ "$T_STATUS" = 124 ] || [ "$T_STATUS" = 137 ]; then t_failed "$name" "hung on $node: $*"
    elif [ "$T_STATUS" = 0 ] || [ "$T_STATUS" -ge 128 ]; then t_failed "$name" "status $T_STATUS from: $*"
    elif ! grep -qF -- "$flag${flag:+: }$node" <<<"$T_OUT"; then
        t_failed "$name" "the message does not name ${flag:+$flag and }$node: $(tail -n 2 <<<"$T_OUT")"
    else t_pass "$name"; fi
}

# ---- chapter 6's outputs: every one refused before training ---------------------------
NOT_AFTER="samples/s" # the header of the epochs' table
for k in "${file_kinds[@]}"; do
    d=$T_TMP/w6-$k
    mkdir -p "$d/ck" "$d/out-epochs" "$d/out-gantt"
    make_node "$k" "$d/$k"
    refused "save_$k" --save "$d/$k" $P6 "${S[@]}" --out="$d/out" --save="$d/$k"
    refused "trace_$k" --trace "$d/$k" $P6 "${S[@]}" --out="$d/out" --trace="$d/$k"
    make_node "$k" "$d/ck/checkpoint.safetensors"
    refused "checkpoint_file_$k" --checkpoint "$d/ck/checkpoint.safetensors" $P6 "${S[@]}" --out="$d/out" \
        --checkpoint="$d/ck"
    make_node "$k" "$d/out-epochs/epochs.csv"
    refused "out_epochs_csv_$k" --out "$d/out-epochs/epochs.csv" $P6 "${S[@]}" --out="$d/out-epochs"
    make_node "$k" "$d/out-gantt/gantt.png"
    refused "out_gantt_png_$k" --out "$d/out-gantt/gantt.png" $P6 "${S[@]}" --out="$d/out-gantt"
done
if [ $root = 0 ]; then # a user cannot replace /dev/null: this shows the refusal names the flag
    refused save_dev_null --save /dev/null $P6 "${S[@]}" --out="$T_TMP/out" --save=/dev/null
    refused trace_dev_null --trace /dev/null $P6 "${S[@]}" --out="$T_TMP/out" --trace=/dev/null
fi
for k in "${dir_kinds[@]}"; do
    d=$T_TMP/d6-$k
    mkdir -p "$d"
    make_node "$k" "$d/$k"
    refused "checkpoint_dir_$k" --checkpoint "$d/$k" $P6 "${S[@]}" --out="$d/out" --checkpoint="$d/$k"
    refused "out_dir_$k" --out "$d/$k" $P6 "${S[@]}" --out="$d/$k"
done
NOT_AFTER=
t_fail empty_save 2 "--save: expected a file, got an empty value" $P6 "${S[@]}" --out="$T_TMP/out" --save=
t_fail empty_trace 2 "--trace: expected a file, got an empty value" $P6 "${S[@]}" --out="$T_TMP/out" --trace=
t_fail empty_checkpoint 2 "--checkpoint: expected a directory, got an empty value" $P6 "${S[@]}" --out="$T_TMP/out" \
    --checkpoint=
t_fail empty_out 2 "--out: expected a directory, got an empty value" $P6 "${S[@]}" --out= \
    --init="$T_TMP/none.safetensors" # (were it taken, the run would stop before writing anything)

# ---- the other chapters' --out, and a file in it -------------------------------------
for k in "${dir_kinds[@]}"; do
    d=$T_TMP/dn-$k
    mkdir -p "$d"
    make_node "$k" "$d/$k"
    refused "chapter1_out_$k" --out "$d/$k" $P1 --experiment --lines=1000 --out="$d/$k"
    refused "chapter2_out_$k" --out "$d/$k" $P2 --plot --out="$d/$k"
    refused "chapter3_out_$k" --out "$d/$k" $P3 --workers=1 --work-us=0 --batches=2 --step-ms=0 --out="$d/$k"
    refused "chapter4_out_$k" --out "$d/$k" $P4 --only=sweep --min-bytes=64K --max-bytes=64K --out="$d/$k"
    refused "chapter5_out_$k" --out "$d/$k" $P5 --plot --world=2 --min-bytes=1K --max-bytes=1K --iters=1 --warmup=0 \
        --out="$d/$k"
done
for k in fifo "${devices[@]}"; do
    d=$T_TMP/fn-$k
    mkdir -p "$d/1" "$d/2" "$d/3" "$d/4" "$d/5"
    make_node "$k" "$d/1/jsonl_strategies.png"
    NOT_AFTER="peak RSS" refused "chapter1_plot_$k" --out "$d/1/jsonl_strategies.png" \
        $P1 --experiment --lines=1000 --out="$d/1"
    make_node "$k" "$d/2/padding.csv"
    refused "chapter2_csv_$k" --out "$d/2/padding.csv" $P2 --plot --out="$d/2"
    make_node "$k" "$d/3/loader_sweep.csv"
    refused "chapter3_csv_$k" --out "$d/3/loader_sweep.csv" $P3 --workers=1 --work-us=0 --batches=2 --step-ms=0 \
        --out="$d/3"
    make_node "$k" "$d/4/bandwidth.csv"
    refused "chapter4_csv_$k" --out "$d/4/bandwidth.csv" $P4 --only=sweep --min-bytes=64K --max-bytes=64K \
        --out="$d/4"
    make_node "$k" "$d/5/allreduce-sim.csv"
    refused "chapter5_csv_$k" --out "$d/5/allreduce-sim.csv" $P5 --plot --world=2 --min-bytes=1K --max-bytes=1K \
        --iters=1 --warmup=0 --out="$d/5"
    if command -v gnuplot > /dev/null; then # gnuplot opens its pictures itself: never at a FIFO
        mkdir -p "$d/4svg"
        make_node "$k" "$d/4svg/bandwidth.svg"
        refused "chapter4_svg_$k" --out "$d/4svg/bandwidth.svg" $P4 --only=sweep --min-bytes=64K --max-bytes=64K \
            --out="$d/4svg"
    fi
done

# ---- inputs: refused at once, never waited on ----------------------------------------
good=$T_TMP/good.safetensors
t_ok input_model_saved $P6 "${S[@]}" --world=1 --out="$T_TMP/out-good" --save="$good"
in_kinds=(fifo directory)
[ $root = 1 ] && in_kinds+=(zero)
[ $root = 1 ] || in_kinds+=(dev-zero)
for k in "${in_kinds[@]}"; do
    d=$T_TMP/in-$k
    mkdir -p "$d/ck"
    if [ "$k" = dev-zero ]; then node=/dev/zero; else node=$d/$k; make_node "$k" "$node"; fi
    [ "$k" = dev-zero ] || make_node "$k" "$d/ck/checkpoint.safetensors"
    unreadable "init_$k" --init "$node" $P6 "${S[@]}" --out="$d/out" --init="$node"
    [ "$k" = directory ] || unreadable "resume_file_$k" --resume "$node" $P6 "${S[@]}" --out="$d/out" --resume="$node"
    [ "$k" = dev-zero ] || unreadable "resume_dir_$k" --resume "$d/ck/checkpoint.safetensors" $P6 "${S[@]}" \
        --out="$d/out" --resume="$d/ck"
    unreadable "data_$k" --data "$node" $P6 --data="$node" --epochs=1 --out="$d/out"
    unreadable "test_data_$k" --test-data "$node" $P6 "${S[@]}" --test-data="$node" --out="$d/out"
    unreadable "chapter1_data_$k" --data "$node" $P1 --data="$node" --check
    unreadable "chapter2_data_$k" --data "$node" $P2 --data="$node"
    unreadable "chapter3_data_$k" --data "$node" $P3 --bench --data="$node"
    unreadable "chapter4_data_$k" --data "$node" $P4 --data="$node" --out="$d/out4"
    unreadable "tensordiff_a_$k" "" "$node" $TD "$node" "$good"
    unreadable "tensordiff_b_$k" "" "$node" $TD "$good" "$node"
done

# ---- a file-size limit: an error that says so, the last good checkpoint kept ---------
limited=(bash -c 'ulimit -f "$0"; exec "$@"') # then: KIB CMD...
ck=$T_TMP/ck-limit
if ! $P6 "${S[@]}" --world=1 --out="$T_TMP/out-limit" --steps=2 --checkpoint="$ck" > "$T_TMP/log" 2>&1; then
    t_failed ulimit_checkpoint "the run that writes the first checkpoint failed: $(tail -n 2 "$T_TMP/log")"
else
    cp "$ck/checkpoint.safetensors" "$T_TMP/last-good.safetensors"
    t_fail ulimit_checkpoint 1 "file size limit (ulimit -f) reached writing $ck/checkpoint.safetensors" \
        "${limited[@]}" 100 $P6 "${S[@]}" --world=1 --out="$T_TMP/out-limit" --steps=4 --resume="$ck" --checkpoint="$ck"
    if ! cmp -s "$ck/checkpoint.safetensors" "$T_TMP/last-good.safetensors"; then
        t_failed ulimit_keeps_last_checkpoint "the checkpoint changed"
    elif compgen -G "$ck/*.tmp-*" > /dev/null; then t_failed ulimit_keeps_last_checkpoint "left: $(ls "$ck")"
    else t_pass ulimit_keeps_last_checkpoint; fi
fi
t_fail ulimit_save 1 "--save=$T_TMP/limited.safetensors: file size limit (ulimit -f) reached writing" \
    "${limited[@]}" 20 $P6 "${S[@]}" --world=1 --out="$T_TMP/out-limit" --save="$T_TMP/limited.safetensors"
if compgen -G "$T_TMP/limited.safetensors*" > /dev/null; then t_failed ulimit_save_leaves_nothing "$(ls "$T_TMP")"
else t_pass ulimit_save_leaves_nothing; fi
if command -v gnuplot > /dev/null; then # gnuplot too: the limit ends it, and no cut picture is kept
    t_fail ulimit_plot 1 "file size limit (ulimit -f) reached writing its pictures" \
        "${limited[@]}" 8 $P6 "${S[@]}" --world=1 --out="$T_TMP/out-plot-limit"
    if compgen -G "$T_TMP/out-plot-limit/gantt*.png" > /dev/null || compgen -G "$T_TMP/out-plot-limit/*.tmp-*" > /dev/null; then
        t_failed ulimit_plot_leaves_nothing "$(ls "$T_TMP/out-plot-limit")"
    else t_pass ulimit_plot_leaves_nothing; fi
else t_skip ulimit_plot "gnuplot is not installed"; fi

# ---- a full disk: a tmpfs of 256 KiB holds one checkpoint, not a second beside it ----
disk=$T_TMP/disk
mkdir -p "$disk"
if [ $root = 0 ] || ! mount -t tmpfs -o size=256k tmpfs "$disk" 2>/dev/null; then
    t_skip full_disk "mounting a small tmpfs needs root and a kernel that lets this container mount"
else
    trap 'umount "$disk" 2>/dev/null || true; rm -rf "$T_TMP"' EXIT
    t_fail full_disk_checkpoint 1 "the disk is full writing $disk/ck/checkpoint.safetensors" \
        $P6 "${S[@]}" --world=1 --out="$T_TMP/out-disk" --steps=3 --checkpoint-every=1 --checkpoint="$disk/ck"
    if compgen -G "$disk/ck/*.tmp-*" > /dev/null; then t_failed full_disk_leaves_no_tmp "left: $(ls "$disk/ck")"
    else t_pass full_disk_leaves_no_tmp; fi
    # the checkpoint of step 1, the last that fitted, is whole: the run resumes from it
    t_out full_disk_keeps_last_checkpoint "after step 1" \
        $P6 "${S[@]}" --world=1 --out="$T_TMP/out-disk" --steps=2 --resume="$disk/ck"
    rm -rf "$disk/ck"
    head -c 220k /dev/zero > "$disk/filler" # 36 KiB left: the 51 KB model does not fit
    t_fail full_disk_save 1 "--save=$disk/model.safetensors: the disk is full writing" \
        $P6 "${S[@]}" --world=1 --out="$T_TMP/out-disk" --save="$disk/model.safetensors"
    if compgen -G "$disk/model.safetensors*" > /dev/null; then t_failed full_disk_save_leaves_nothing "$(ls "$disk")"
    else t_pass full_disk_save_leaves_nothing; fi
    umount "$disk"
fi

# ---- a killed writer's temporary files are swept by the next writer, and by --resume --
# A temporary file is named <final>.tmp-<host>-<pid>-<n>. A stand-in gnuplot that
# says what it was given and fails shows this machine's <host> tag and a pid
# that no longer runs (the chapter-6 process, exited): names a SIGKILL leaves.
mkdir -p "$T_TMP/fakebin"
printf '#!/bin/sh\nprintf "%%s\\n" "$2" > "%s"\nexit 1\n' "$T_TMP/gnuplot-was-given" > "$T_TMP/fakebin/gnuplot"
chmod +x "$T_TMP/fakebin/gnuplot"
t_fail failed_plot 1 "gnuplot chapters/06-ddp/plot.gp failed" \
    env PATH="$T_TMP/fakebin:$PATH" $P6 "${S[@]}" --world=1 --out="$T_TMP/out-fake"
if compgen -G "$T_TMP/out-fake/gantt.[ps][nv]g" > /dev/null || compgen -G "$T_TMP/out-fake/*.tmp-*" > /dev/null; then
    t_failed failed_plot_leaves_nothing "$(ls "$T_TMP/out-fake")"
else t_pass failed_plot_leaves_nothing; fi
stem=$(sed -n "s/.*out='\([^']*\)'.*/\1/p" "$T_TMP/gnuplot-was-given" 2>/dev/null)
if [[ ! $stem =~ \.tmp-([0-9a-f]{8})-([0-9]+)-[0-9]+$ ]]; then
    t_failed sweep "no temporary name in what gnuplot was given: $(cat "$T_TMP/gnuplot-was-given" 2>&1)"
else
    tag=${BASH_REMATCH[1]}-${BASH_REMATCH[2]}
    sw=$T_TMP/sweep
    if ! $P6 "${S[@]}" --world=1 --out="$sw/out" --steps=1 --checkpoint="$sw/ck" > "$T_TMP/log" 2>&1; then
        t_failed sweep "the run that writes a checkpoint failed: $(tail -n 2 "$T_TMP/log")"
    else
        : > "$sw/ck/checkpoint.safetensors.tmp-$tag-0"
        t_ok resume_runs $P6 "${S[@]}" --world=1 --out="$T_TMP/out-resume" --steps=2 --resume="$sw/ck"
        if [ -e "$sw/ck/checkpoint.safetensors.tmp-$tag-0" ]; then t_failed resume_sweeps "still there"
        else t_pass resume_sweeps; fi
        stale=("$sw/model.safetensors.tmp-$tag-0" "$sw/trace.json.tmp-$tag-0" "$sw/ck/checkpoint.safetensors.tmp-$tag-1"
               "$sw/out/epochs.csv.tmp-$tag-0" "$sw/out/gantt.csv.tmp-$tag-0")
        command -v gnuplot > /dev/null && stale+=("$sw/out/gantt.tmp-$tag-0.png")
        for f in "${stale[@]}"; do : > "$f"; done
        t_ok writers_run $P6 "${S[@]}" --world=1 --out="$sw/out" --steps=2 --resume="$sw/ck" --checkpoint="$sw/ck" \
            --save="$sw/model.safetensors" --trace="$sw/trace.json"
        for f in "${stale[@]}"; do
            if [ -e "$f" ]; then t_failed "sweeps_$(basename "${f%%.tmp-*}")" "$f is still there"
            else t_pass "sweeps_$(basename "${f%%.tmp-*}")"; fi
        done
    fi
fi

# ---- a signal while gnuplot draws: gnuplot ends with the program -------------------
# A stand-in gnuplot that says it started, then writes its pictures half a
# second later. SIGINT, SIGTERM or SIGHUP meanwhile ends the program, which
# must end gnuplot before it removes the pictures' temporary names: a gnuplot
# left running would write them after the removal, beside --out for good.
mkdir -p "$T_TMP/slowbin"
cat > "$T_TMP/slowbin/gnuplot" <<'EOF'
#!/bin/sh
: > "$GNUPLOT_STARTED"
stem=$(printf '%s\n' "$2" | sed -n "s/.*out='\([^']*\)'.*/\1/p")
sleep 0.5
echo png > "$stem.png"
echo svg > "$stem.svg"
EOF
chmod +x "$T_TMP/slowbin/gnuplot"
for sig in INT TERM HUP; do
    rm -rf "$T_TMP/out-slow" "$T_TMP/gnuplot-started"
    # env: a script's background job starts with SIGINT ignored; give it the default back
    GNUPLOT_STARTED="$T_TMP/gnuplot-started" PATH="$T_TMP/slowbin:$PATH" \
        env --default-signal=INT $P2 --plot --out="$T_TMP/out-slow" > /dev/null 2>&1 &
    pid=$! tries=0
    until [ -e "$T_TMP/gnuplot-started" ] || [ $tries -ge 600 ]; do sleep 0.05; tries=$((tries + 1)); done
    kill -$sig $pid 2>/dev/null
    { wait $pid; } 2>/dev/null && status=0 || status=$?
    sleep 1 # past the stand-in's half second: what it would write is there by now
    left=$(compgen -G "$T_TMP/out-slow/*.tmp-*" || true)
    if [ ! -e "$T_TMP/gnuplot-started" ]; then t_failed "plot_sig$sig" "gnuplot never started"
    elif [ "$status" -lt 128 ]; then t_failed "plot_sig$sig" "expected death by the signal, got status $status"
    elif [ -n "$left" ]; then t_failed "plot_sig$sig" "status $status, left behind: $left"
    else t_pass "plot_sig$sig"; fi
done
