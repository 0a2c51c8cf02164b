# chapter4.sh: build/chapter-4 as a user drives it: --help, bad flags (each a
# usage error naming the flag), a size of 0 or past the pinned pool, an
# unknown link profile, a flag --demo=race, --bench or --only would ignore,
# --backend=cuda without a GPU, the pool running out at run time, a bad
# --data before any benchmark, and small runs of each section whose numbers
# are checked against what they must be: async pinned copies equal the link
# model, the sweep's and the loop's outputs are the same bytes quietly and
# under load (virtual time), the copies per batch are 3 for the pageable rings
# and 2 for the pinned one, and the race demo is caught and fixed.
. "$(dirname "$0")/../harness/lib.sh"
P=$BUILD/chapter-4
OUT=$T_TMP/out
small_loop=(--only=loop --steps=8 --warmup=2 --batch=256 --out="$OUT")
# the tables written into a full disk are an error, not exit 0
t_fail tables_into_a_full_disk 1 "chapter-4: writing the output failed" \
    bash -c 'exec "$0" "$@" > /dev/full' "$P" --only=pinning --out="$OUT"

t_out help "--demo=race" $P --help
t_fail bad_flag 2 "chapter-4: unrecognized option '--frobnicate'" $P --frobnicate
t_fail missing_value 2 "option '--link' needs a value" $P --link
t_fail unknown_link 2 "--link: unknown link profile 'pcie9' (known: pcie3, pcie4, pcie5)" $P --link=pcie9
t_fail zero_gbps 2 "--link-gbps: expected 0.001 to 10000, got '0'" $P --link-gbps=0
t_fail nan_latency 2 "--link-latency-us: expected 0 to 1e+06, got 'nan'" $P --link-latency-us=nan
t_fail zero_size 2 "--min-bytes: a copy of 0 bytes moves nothing" $P --min-bytes=0
t_fail sizes_reversed 2 "--max-bytes (1024) is smaller than --min-bytes (2048)" $P --min-bytes=2K --max-bytes=1K
t_fail one_past_the_pool 2 "--max-bytes: 1048577 bytes do not fit in the pinned pool of 1048576 bytes (--pool=1 MiB)" \
    $P --max-bytes=1048577 --pool=1M
t_fail zero_pool 2 "--pool: a pinned pool of 0 bytes holds nothing" $P --pool=0
t_fail huge_pool 2 "more than half this machine's memory" $P --pool=16777216G
t_fail bad_backend 2 "--backend: unknown value 'tpu' (sim or cuda)" $P --backend=tpu
t_fail bad_demo 2 "--demo: unknown value 'meteor' (race)" $P --demo=meteor
t_fail bad_only 2 "--only: unknown value 'everything' (sweep, pinning or loop)" $P --only=everything
t_fail two_modes 2 "--demo, --bench and --only each choose what runs" $P --bench --only=loop
t_fail zero_batch 2 "--batch: expected 1 to" $P --batch=0
touch "$T_TMP/a-file"
t_fail out_under_a_file 2 "--out: $T_TMP/a-file/sub: $T_TMP/a-file is a regular file, not a directory" \
    $P --only=sweep --out="$T_TMP/a-file/sub"
t_fail race_takes_no_loop_flags 2 "--data does nothing with --demo=race" $P --demo=race --data=/nonexistent/images
t_fail bench_takes_no_sizes 2 "--max-bytes does nothing with --bench" $P --bench --max-bytes=1M
t_fail pool_below_min_bytes 2 "--pool: 1024 bytes hold no copy of --min-bytes (65536)" $P --pool=1K
t_fail pool_in_whole_pages 2 "--max-bytes: 5000 bytes do not fit in the pinned pool of 5000 bytes" \
    $P --only=sweep --pool=5000 --min-bytes=5000 --max-bytes=5000 --out="$T_TMP/pages"
t_fail sweep_takes_no_loop_flags 2 "--data does nothing with --only=sweep (only the training loop reads it" \
    $P --only=sweep --data=/nonexistent/images --out="$T_TMP/sections"
t_fail loop_takes_no_sizes 2 "--max-bytes does nothing with --only=loop (only the size sweep reads it" \
    $P --only=loop --max-bytes=1M --out="$T_TMP/sections"
t_fail bench_checks_data_first 1 "/nonexistent/images: cannot open" $P --bench --data=/nonexistent/images
if grep -q "^bench: " <<<"$T_OUT"; then t_failed bench_no_verdict_before_bad_data "$T_OUT"
else t_pass bench_no_verdict_before_bad_data; fi

# --hw: a modelled GPU system's host link; --link names a link too, so the two are refused together,
# and --link-gbps replaces the profile's figure as it does --link's
t_out hw_list "h100-sxm   H100 SXM5 80GB: FP32 67.0 TFLOP/s peak (GEMMs at 75 % of it), HBM3 3350 GB/s" $P --hw=list
t_fail unknown_hw 2 "chapter-4: --hw: unknown hardware profile 'h200' (known: h100-sxm, h100-pcie, a100, rtx4090)" \
    $P --hw=h200
t_fail hw_with_link 2 "--hw=a100 and --link both choose the link (the A100 SXM4 80GB sits on PCIe Gen4 x16" \
    $P --link=pcie3 --hw=a100 --out="$OUT"
# one size: a figure of one point, without gnuplot's warning of an empty range on stderr
if command -v gnuplot >/dev/null 2>&1; then
    t_run $P --only=sweep --min-bytes=64K --max-bytes=64K --out="$T_TMP/one-size"
    if [ "$T_STATUS" != 0 ] || grep -q "Warning" <<<"$T_OUT"; then t_failed sweep_one_size_quietly "$T_OUT"
    else t_pass sweep_one_size_quietly; fi
else
    t_skip sweep_one_size_quietly "gnuplot is not installed"
fi
t_out default_link "simulated device on PCIe Gen4 x16 (modelled: 28.81 GB/s, 5.0 us per copy" \
    $P --only=sweep --max-bytes=64K --out="$OUT"
t_out hw_link "simulated device on PCIe Gen5 x16 (H100 SXM5 80GB) (modelled: 57.61 GB/s, 5.0 us per copy" \
    $P --only=sweep --max-bytes=64K --out="$OUT" --hw=h100-sxm
t_out hw_link_gbps "simulated device on a 10 GB/s link (modelled: 10.00 GB/s, 5.0 us per copy" \
    $P --only=sweep --max-bytes=64K --out="$OUT" --hw=rtx4090 --link-gbps=10

# --topology and --host-links: a node's GPUs copying at once through shared host links
t_fail topology_bad 2 "chapter-4: --topology: topology '2y8': expected NODESxGPUS" $P --topology=2y8
t_fail host_links_alone 2 "chapter-4: --host-links: the links the GPUs of a node share; give --topology" \
    $P --host-links=2
t_fail host_links_not_a_divisor 2 "chapter-4: --host-links: 8 GPUs on 3 host links: each link carries as many" \
    $P --topology=2x8 --host-links=3
t_fail host_links_too_many 2 "chapter-4: --host-links: 8 GPUs on 9 host links" $P --topology=1x8 --host-links=9
t_fail topology_on_cuda 2 "chapter-4: --topology models GPUs sharing their host links on the simulated device" \
    $P --topology=1x8 --backend=cuda
t_out topology_shares_the_link "PCIe Gen3 x16, shared by 4 GPUs (modelled: 3.60 GB/s, 5.0 us per copy; the wire's limit 3.94 GB/s)" \
    $P --only=sweep --max-bytes=64K --out="$T_TMP/share" --link=pcie3 --topology=2x8 --host-links=2
# a link per GPU shares nothing: the loop writes the bytes it writes without --topology
t_run $P "${small_loop[@]}" --out="$T_TMP/alone"
t_run $P "${small_loop[@]}" --out="$T_TMP/own_links" --topology=1x8
if cmp -s "$T_TMP/alone/loop.csv" "$T_TMP/own_links/loop.csv"; then t_pass topology_own_links_same_bytes
else t_failed topology_own_links_same_bytes "$(diff "$T_TMP/alone/loop.csv" "$T_TMP/own_links/loop.csv" | head -5)"; fi
# 8 GPUs on 2 links: each copy's bytes take 4 times as long (its fixed 5 us does not), the compute stays one
# batch's copy on a link of its own, and double buffering can hide no more than the compute
t_run $P "${small_loop[@]}" --out="$T_TMP/shared" --topology=1x8 --host-links=2
why=$(awk -F, 'FNR == 1 { next } NR == FNR { alone[$1 "," $2] = $0; compute[$1 "," $2] = $7; dma[$1 "," $2] = $5; next }
               { k = $1 "," $2; rows++
                 if ($7 != compute[k]) printf "%s: compute %s ms, %s alone; ", k, $7, compute[k]
                 if ($5 < 3.8 * dma[k] || $5 > 4.0 * dma[k]) printf "%s: dma %s ms, not about 4 x %s; ", k, $5, dma[k]
                 if ($1 == "pinned ring" && $2 == 2 && ($8 < $5 * 0.999 || $8 > $5 * 1.001))
                     printf "double-buffered step %s ms, not the copy'"'"'s %s ms; ", $8, $5 }
               END { if (rows != 4) printf "expected 4 rows, got %d", rows }' "$T_TMP/alone/loop.csv" "$T_TMP/shared/loop.csv")
if [ -n "$why" ]; then t_failed topology_shared_links_loop "$why"; else t_pass topology_shared_links_loop; fi

# --algo: each loop step ends with the gradients' all-reduce, and its bytes across this GPU's host link
t_fail algo_unknown 2 "chapter-4: --algo: unknown value 'mesh' (ring, tree, naive or hier)" $P --algo=mesh --topology=1x8
t_fail algo_needs_gpus 2 "chapter-4: --algo: an all-reduce needs more than one GPU; give --topology=NODESxGPUS" \
    $P --algo=ring
t_fail algo_one_gpu 2 "chapter-4: --algo: --topology=1x1 is one GPU, which has no one to all-reduce with" \
    $P --algo=ring --topology=1x1
t_fail grad_bytes_alone 2 "chapter-4: --grad-bytes: the size of the all-reduce that --algo adds to each step" \
    $P --grad-bytes=1M --topology=1x8
t_fail grad_bytes_zero 2 "chapter-4: --grad-bytes: " $P --grad-bytes=0 --algo=ring --topology=1x8
t_fail algo_not_with_sweep 2 "--algo does nothing with --only=sweep (only the training loop reads it" \
    $P --only=sweep --algo=ring --topology=1x8 --out="$T_TMP/sections"
t_fail algo_not_with_bench 2 "--algo does nothing with --bench" $P --bench --algo=ring --topology=1x8
# the bytes are copied for real: naive on 64 GPUs with 256M of gradients (63 x 256 MiB a step) is refused at once
t_fail algo_traffic_capped 1 "chapter-4: --algo=naive on 64x1 with 256 MiB of gradients (--grad-bytes, else a batch): this GPU's host link would carry 15.8 GiB of it each step" \
    $P --only=loop --topology=64x1 --algo=naive --grad-bytes=256M --out="$T_TMP/capped"
if [ -e "$T_TMP/capped" ]; then t_failed algo_traffic_capped_writes_nothing "$(ls "$T_TMP/capped")"
else t_pass algo_traffic_capped_writes_nothing; fi
# 1x8 over PCIe, ring: 2(W-1)/W = 1.75 batches each way, at the loop's 1 GB/s, in copies that go round the
# gradients (one batch, 196 KiB: 5 us + 200704 B, then 5 us + 150528 B); the batches' own copies and counts
# as without --algo
t_run $P "${small_loop[@]}" --out="$T_TMP/ar_ring" --topology=1x8 --algo=ring --compute-ms=0.1
why=$(awk -F, 'FNR == 1 { next } NR == FNR { dma[$1 "," $2] = $5; copies[$1 "," $2] = $3; next }
               { k = $1 "," $2; rows++
                 if ($11 < 0.36115 || $11 > 0.36125) printf "%s: all-reduce %s ms, want 0.3612; ", k, $11
                 if ($5 != dma[k] || $3 != copies[k]) printf "%s: dma %s, copies %s, alone %s, %s; ", k, $5, $3, dma[k], copies[k]
                 if ($8 < $7 + $11) printf "%s: step %s ms is less than compute + all-reduce; ", k, $8 }
               END { if (rows != 4) printf "expected 4 rows, got %d", rows }' "$T_TMP/alone/loop.csv" "$T_TMP/ar_ring/loop.csv")
if [ "$T_STATUS" != 0 ]; then t_failed algo_ring_over_pcie "exit $T_STATUS: $(tail -n 3 <<<"$T_OUT")"
elif [ -n "$why" ]; then t_failed algo_ring_over_pcie "$why"
else t_pass algo_ring_over_pcie; fi
t_said algo_says_its_bytes "this GPU's host link carries 343 KiB of it in and 343 KiB out each step: the GPUs talk over"
# the all-reduce's copies into the GPU share the link with the batches': double buffering hides less of the copy
why=$(awk -F, '$1 == "pinned ring" && $2 == 2 { if ($10 > 0.9) printf "hidden %s with the all-reduce on the link", $10 }' \
      "$T_TMP/ar_ring/loop.csv")
if [ -n "$why" ]; then t_failed algo_shares_the_link "$why"; else t_pass algo_shares_the_link; fi
if grep -q ',allreduce,' "$T_TMP/ar_ring/timeline.csv" 2>/dev/null; then t_pass algo_on_the_timeline
else t_failed algo_on_the_timeline "no allreduce span in $T_TMP/ar_ring/timeline.csv"; fi
# NVLink on one node: nothing crosses the host link, so the loop is the one without --algo, to the byte
t_run $P "${small_loop[@]}" --out="$T_TMP/ar_nvlink" --topology=1x8 --algo=ring --hw=h100-sxm
t_run $P "${small_loop[@]}" --out="$T_TMP/nvlink_alone" --topology=1x8 --hw=h100-sxm
if [ "$(cut -d, -f1-10 "$T_TMP/ar_nvlink/loop.csv")" = "$(cat "$T_TMP/nvlink_alone/loop.csv")" ] &&
   grep -q ',0.0000$' "$T_TMP/ar_nvlink/loop.csv"; then t_pass algo_nvlink_one_node_crosses_nothing
else t_failed algo_nvlink_one_node_crosses_nothing "$(diff "$T_TMP/nvlink_alone/loop.csv" "$T_TMP/ar_nvlink/loop.csv")"; fi
# 2x8 with NVLink: a flat ring pulls 2(W-1)/W = 1.875 batches into rank 0 from the network, hier n/G(2(N-1)/N) = 1/8
t_out algo_flat_ring_across_nodes "host link carries 367.5 KiB of it in and 0 B out each step: the GPUs of a node talk over" \
    $P "${small_loop[@]}" --out="$T_TMP/ar_2x8" --topology=2x8 --algo=ring --hw=h100-sxm
t_out algo_hier_across_nodes "host link carries 24.5 KiB of it in and 24.5 KiB out each step" \
    $P "${small_loop[@]}" --out="$T_TMP/ar_2x8" --topology=2x8 --algo=hier --hw=h100-sxm

# where the CUDA toolkit was found, the device's CUDA backend is built (it needs CUDA only, not NCCL)
if [ "${SUITE:-plain}" != plain ]; then
    t_skip cuda_backend_built "the $SUITE suite is built without CUDA"
elif grep -q 'HAVE_CUDA := 1' "$BUILD/config.mk" 2>/dev/null; then
    if ar t "$BUILD/libddp.a" 2>/dev/null | grep -qx device_cuda.o; then t_pass cuda_backend_built
    else t_failed cuda_backend_built "HAVE_CUDA := 1, but $BUILD/libddp.a has no device_cuda.o"; fi
else
    t_skip cuda_backend_built "no CUDA toolkit was found at build time"
fi

# --backend=cuda where it cannot run: a clear error, exit 1, before any table
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    t_skip cuda_without_gpu "this machine has a GPU: make test-gpu runs tests/gpu/transfer.sh"
elif grep -q 'HAVE_CUDA := 1' "$BUILD/config.mk" 2>/dev/null; then
    t_fail cuda_without_gpu 1 "device: --backend=cuda: no CUDA device found" \
        $P --backend=cuda --only=sweep --max-bytes=64K --out="$OUT"
else
    t_fail cuda_without_gpu 1 "device: this build has no CUDA support" \
        $P --backend=cuda --only=sweep --max-bytes=64K --out="$OUT"
fi
# a bad --data stops the run before any section writes a file
mkdir -p "$T_TMP/none"
t_fail bad_data 1 "/nonexistent/images: cannot open" $P --data=/nonexistent/images --out="$T_TMP/none"
if [ -z "$(ls -A "$T_TMP/none")" ]; then t_pass bad_data_writes_nothing
else t_failed bad_data_writes_nothing "a failed run wrote $(ls "$T_TMP/none")"; fi
# records of 1 byte (an IDX label file): the batch's labels outweigh its data
printf '\0\0\10\1\0\0\4\0' > "$T_TMP/bytes.idx"
head -c 1024 /dev/zero >> "$T_TMP/bytes.idx"
t_run $P --only=loop --steps=4 --warmup=1 --batch=256 --data="$T_TMP/bytes.idx" --out="$T_TMP/bytes"
if [ "$T_STATUS" != 0 ]; then t_failed one_byte_records "exit $T_STATUS: $(tail -n 3 <<<"$T_OUT")"
elif [ "$(awk -F, 'NR > 1' "$T_TMP/bytes/loop.csv" 2>/dev/null | wc -l)" != 4 ]; then
    t_failed one_byte_records "expected the loop's 4 rings in $T_TMP/bytes/loop.csv: $(ls "$T_TMP/bytes" 2>&1)"
else t_pass one_byte_records; fi

# the pinned pool too small for the loader's ring: the pool's reason, at run time
t_fail pool_runs_out 1 "pinned pool: " $P "${small_loop[@]}" --pool=64K
# ... and for the whole lesson before its sweep: the flags named, no file written
t_fail batch_past_the_pool 1 "chapter-4: --batch=4096 with --pool=1048576 bytes: the training loop" \
    $P --batch=4096 --pool=1M --out="$T_TMP/past-the-pool"
if [ -e "$T_TMP/past-the-pool" ]; then t_failed batch_past_the_pool_writes_nothing "$(ls "$T_TMP/past-the-pool")"
else t_pass batch_past_the_pool_writes_nothing; fi

# the size sweep: pinned async copies are the link's model exactly (device time)
t_run $P --only=sweep --min-bytes=64K --max-bytes=4M --backend=sim --out="$OUT"
if [ "$T_STATUS" != 0 ]; then t_failed sweep "exit $T_STATUS: $(tail -n 3 <<<"$T_OUT")"
elif ! grep -q "latency dominates below 140.7 KiB" <<<"$T_OUT"; then
    t_failed sweep "no latency size (alpha x B of PCIe Gen4 x16 is 140.7 KiB): $(tail -n 5 <<<"$T_OUT")"
else
    why=$(awk -F, 'NR > 1 { rows++; if ($4 < $7 * 0.999 || $4 > $7 * 1.001) printf "%s bytes: async %s GB/s, model %s; ", $1, $4, $7 }
                   END { if (rows != 4) printf "expected 4 rows, got %d", rows }' "$OUT/bandwidth.csv")
    if [ -n "$why" ]; then t_failed sweep_async_is_the_model "$why"; else t_pass sweep_async_is_the_model; fi
fi

# virtual time (DESIGN.md): every figure is modelled, so the same flags write the same bytes, stdout
# and the files named, quietly and beside two processes that keep both cores busy.
t_same_under_load sweep_same_bytes_under_load bandwidth.csv $P \
    --only=sweep --min-bytes=64K --max-bytes=4M --backend=sim --out="$T_TMP/vt"
# the loop: the loader's collate, the data-wait, the pin copy and the host's step are modelled too;
# two workers, so that which thread claims a batch must not matter
t_same_under_load loop_same_bytes_under_load "loop.csv timeline.csv" $P \
    --only=loop --steps=8 --warmup=2 --batch=256 --workers=2 --backend=sim --out="$T_TMP/vt"
# ... and with the all-reduce's copies sharing the link
t_same_under_load loop_allreduce_same_bytes_under_load "loop.csv timeline.csv" $P \
    --only=loop --steps=8 --warmup=2 --batch=256 --workers=2 --topology=2x4 --algo=tree --out="$T_TMP/vt"

# the cost of pinning: one row per batch size the pool holds (a 2M pool: 1 MiB only), each pinned once
t_run $P --only=pinning --pool=2M --out="$OUT"
rows=$(grep -cE '^ +[0-9]+ MiB +[0-9.]+ ms' <<<"$T_OUT" || true)
if [ "$T_STATUS" != 0 ]; then t_failed pinning "exit $T_STATUS: $(tail -n 3 <<<"$T_OUT")"
elif [ "$rows" != 1 ] || ! grep -qE '^ +1 MiB ' <<<"$T_OUT"; then t_failed pinning "expected one row, 1 MiB; got $rows: $T_OUT"
elif grep -q "the pool pinned" <<<"$T_OUT"; then t_failed pinning "$(grep 'the pool pinned' <<<"$T_OUT")"
else t_pass pinning; fi
t_said pinning_says_what_it_left_out "(batches of 16 MiB and more do not fit the pinned pool of 2 MiB (--pool): not measured)"
t_out pinning_past_the_pool "(batches of 1 MiB and more do not fit the pinned pool of 512 KiB (--pool): not measured)" \
    $P --only=pinning --pool=512K --out="$OUT"

# the training loop: copies per batch counted, 3 on the pageable rings and 2 on the pinned one
t_run $P "${small_loop[@]}"
if [ "$T_STATUS" != 0 ]; then t_failed loop "exit $T_STATUS: $(tail -n 3 <<<"$T_OUT")"
else
    why=$(awk -F, 'NR > 1 { rows++; want = ($1 == "pinned ring") ? 2 : 3
                            if ($3 < want - 0.05 || $3 > want + 0.05) printf "%s: %s copies per batch, want %d; ", $1, $3, want }
                   END { if (rows != 4) printf "expected 4 rows, got %d", rows }' "$OUT/loop.csv")
    if [ -n "$why" ]; then t_failed loop_copies_per_batch "$why"; else t_pass loop_copies_per_batch; fi
    if grep -q "double buffering: .* a step against .* with one buffer" <<<"$T_OUT"; then t_pass loop_verdict
    else t_failed loop_verdict "no double-buffering line: $(tail -n 5 <<<"$T_OUT")"; fi
fi

# the race demo: the early release is caught, naming the slot, the copy, the stream and the batch; the fix runs clean
t_run $P --demo=race
if [ "$T_STATUS" != 0 ]; then t_failed demo_race "exit $T_STATUS: $(tail -n 3 <<<"$T_OUT")"
elif ! grep -q "host write while in flight: the host (thread [0-9]*) wrote byte [0-9]* of the source of copy #[0-9]* (H2D of 196 KiB from pinned 'loader slot [0-9]' to 'batch buffer [01]', batch [0-9]*) on stream 'copy'" <<<"$T_OUT"; then
    t_failed demo_race "the detector's message is missing or incomplete: $(grep -m1 'detector' -A1 <<<"$T_OUT")"
elif ! grep -q "^fixed: 6 batches, no hazard" <<<"$T_OUT"; then t_failed demo_race "the fixed loop did not run clean"
else t_pass demo_race; fi

# the benchmarks print a verdict each, in the shared shape, and say when a GPU is missing
t_run $P --bench --backend=sim
n=$(grep -cE '^bench: .*\| ratio [0-9.]+ \| target (<=|>=) [0-9.]+ \| (PASS|MISS)$' <<<"$T_OUT")
if [ "$T_STATUS" != 0 ] || [ "$n" != 3 ]; then t_failed bench_verdicts "exit $T_STATUS, $n verdict lines: $T_OUT"
elif [ "$(grep -c '| not run: --backend=sim$' <<<"$T_OUT")" != 2 ]; then t_failed bench_verdicts "GPU lines: $T_OUT"
else t_pass bench_verdicts; fi

# the plots; run from elsewhere, the program finds its scripts in its repository, and a copy of it
# outside any repository names the script it lacks
if command -v gnuplot >/dev/null 2>&1; then
    if [ -s "$OUT/bandwidth.png" ] && [ -s "$OUT/bandwidth.svg" ] && [ -s "$OUT/timeline.png" ] && [ -s "$OUT/timeline.svg" ]
    then t_pass plots_written; else t_failed plots_written "missing in $OUT: $(ls "$OUT")"; fi
    t_ok plot_outside_the_repository sh -c 'cd "$1" && exec "$2" --only=sweep --max-bytes=64K --out=out' sh \
        "$T_TMP" "$(cd "$(dirname "$P")" && pwd)/chapter-4"
    if [ -s "$T_TMP/out/bandwidth.png" ]; then t_pass plot_outside_the_repository_drawn
    else t_failed plot_outside_the_repository_drawn "no $T_TMP/out/bandwidth.png: $(ls "$T_TMP/out" 2>&1)"; fi
    mkdir -p "$T_TMP/elsewhere" && cp "$P" "$T_TMP/elsewhere/chapter-4"
    t_fail plot_script_nowhere 1 "chapters/04-transfer/plot.gp: cannot read the plot script" \
        sh -c 'cd "$1" && exec "$1/chapter-4" --only=sweep --max-bytes=64K --out=out' sh "$T_TMP/elsewhere"
    # the bandwidth plot says what the copies ran on, and its seven series stay apart where their
    # numbers coincide (on the simulator pinned async, write-combined, registered and the model do):
    # no two series share both a marker and a dash style
    if ! grep -q '>simulated device, PCIe Gen4 x16<' "$OUT/bandwidth.svg"; then
        t_failed bandwidth_plot_says_the_device "no 'simulated device, PCIe Gen4 x16' in $OUT/bandwidth.svg's title"
    else t_pass bandwidth_plot_says_the_device; fi
    styles=$(awk '/<g id="gnuplot_plot_/ { if (n++) print pt, dash; pt = dash = "none" }
                  pt == "none" && match($0, /#gpPt[0-9]+/) { pt = substr($0, RSTART, RLENGTH) }
                  dash == "none" && match($0, /stroke-dasharray=.[^\047]*/) { dash = substr($0, RSTART, RLENGTH) }
                  END { if (n) print pt, dash }' "$OUT/bandwidth.svg")
    if [ "$(wc -l <<<"$styles")" != 7 ] || [ -n "$(sort <<<"$styles" | uniq -d)" ]; then
        t_failed bandwidth_plot_series_apart "expected 7 series, no two with the same marker and dashes: $(tr '\n' ';' <<<"$styles")"
    else t_pass bandwidth_plot_series_apart; fi
else
    t_skip plots_written "gnuplot is not installed"
fi
