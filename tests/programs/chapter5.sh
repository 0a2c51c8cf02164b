# chapter5.sh: build/chapter-5 as a user drives it: --help, bad flags, small
# tables for every algorithm, and each fault demo ending non-zero with the
# diagnosis that names the rank at fault.
. "$(dirname "$0")/../harness/lib.sh"
P=$BUILD/chapter-5

t_out help "--min-bytes" $P --help
t_fail bad_flag 2 "chapter-5: unrecognized option '--frobnicate'" $P --frobnicate
# the program's name, not the path it was run by
t_run ./$P --frobnicate
if grep -q 'build/chapter-5:' <<<"$T_OUT"; then t_failed no_path_prefix "a path in the message: $T_OUT"
else t_pass no_path_prefix; fi
t_fail missing_value 2 "option '--world' needs a value" $P --world
# getopt's own message used to come first, then an empty "chapter-5: " line
t_run $P --frobnicate
if grep -q 'chapter-5: *$' <<<"$T_OUT"; then t_failed bad_flag_no_empty_message "an empty message line: $T_OUT"
else t_pass bad_flag_no_empty_message; fi
t_fail bad_world 2 "--world" $P --world=0
t_fail bad_algo 2 "--algo: unknown value 'hypercube' (ring, tree, naive, hier or all)" $P --algo=hypercube
t_fail too_big 2 "more than this machine" $P --max-bytes=1024G
# a watchdog under 10 ms blames ranks that only wait for a core: refused (1e-300 s once rounded to "now")
t_fail timeout_too_short 2 "--timeout: 0 (no watchdog) or 0.01 to 1e+06 seconds, got '1e-300'" $P --timeout=1e-300
t_fail launch_check_timeout_too_short 2 "--timeout: 0 (no watchdog) or 0.01" $P --launch-check --timeout=0.001
# a flag the chosen run would ignore is refused, naming it
t_fail launch_check_takes_only_timeout 2 "--world does nothing with --launch-check" $P --launch-check --world=2
t_fail ifname_needs_launch_check 2 "--ifname does nothing without --launch-check" $P --ifname=lo
# an interface rank 0 does not have is named with the ones it has (lo has 127.0.0.1 everywhere)
t_fail ifname_unknown 1 "no interface 'no-such-if0' with an address here; the interfaces with an IPv4 address are: lo (127.0.0.1)" \
    env RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29400 $P --launch-check --ifname=no-such-if0 --timeout=1
t_fail demo_sets_its_own_world 2 "--world does nothing with --demo" $P --demo=crash --world=8
t_fail fault_has_no_table 2 "--max-bytes does nothing with --demo or --fault" $P --fault=kill:1@2 --max-bytes=1K
t_fail demo_and_fault_together 2 "--fault does nothing with --demo" $P --demo=crash --fault=kill:1@2
t_fail out_needs_plot 2 "--out does nothing without --plot" $P --out="$T_TMP/unused" --max-bytes=4K
t_fail memory_bound_is_the_ring 2 "--algo does nothing with --memory-bound" $P --memory-bound --algo=tree
t_fail bad_sizes 2 "larger than --max-bytes" $P --min-bytes=1M --max-bytes=1K
t_fail simulator_under_a_launcher 2 "--backend=sim: a launcher (torchrun) started this process as one of 2" \
    env RANK=1 WORLD_SIZE=2 $P --max-bytes=4K --iters=1 --warmup=0
# launcher variables that cannot say where this process sits are refused, naming them: a stray RANK=1
# once made the simulator's run exit 0 without its --plot files (rank 1 does not write them)
t_fail stray_rank 2 "RANK=1 is set but WORLD_SIZE is not (torchrun sets both)" \
    env -u WORLD_SIZE RANK=1 $P --plot --out="$T_TMP/stray" --world=2 --min-bytes=4K --max-bytes=8K --iters=1 --warmup=0
t_fail rank_past_the_world 2 "RANK=1 is not below WORLD_SIZE=1" \
    env RANK=1 WORLD_SIZE=1 $P --world=2 --min-bytes=4K --max-bytes=8K --iters=1 --warmup=0
t_fail malformed_world_size 2 "torchrun's variables: WORLD_SIZE='2abc': expected 1 to 1073741824" \
    env RANK=1 WORLD_SIZE=2abc $P --world=2 --min-bytes=4K --max-bytes=8K --iters=1 --warmup=0
t_fail two_launchers_disagree 2 "OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=1 (mpirun) and RANK=1 WORLD_SIZE=2 (torchrun) disagree" \
    env OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=1 RANK=1 WORLD_SIZE=2 $P --world=2 --min-bytes=4K --max-bytes=8K --iters=1 --warmup=0
t_out world_of_one_launched "# Out of bounds values : 0 OK" \
    env RANK=0 WORLD_SIZE=1 $P --world=2 --min-bytes=4K --max-bytes=8K --iters=1 --warmup=0
# sizes that used to loop forever (0 x factor is 0) or print an empty table:
# refused at once (the short time limit turns a hang into a FAIL)
T_TIMEOUT=30 t_fail zero_bytes 2 "--min-bytes: must be at least 4 (one float32 element), got 0" \
    $P --min-bytes=0 --max-bytes=0 --world=1
T_TIMEOUT=30 t_fail less_than_an_element 2 "--min-bytes: must be at least 4" $P --min-bytes=3 --max-bytes=3
# the table written into a full disk is an error, not exit 0
t_fail table_into_a_full_disk 1 "chapter-5: writing the output failed" \
    bash -c 'exec "$0" "$@" > /dev/full' "$P" --world=2 --min-bytes=4K --max-bytes=8K --iters=1 --warmup=0
t_fail step_factor_one 2 "--step-factor: expected 2 to 18446744073709551615, got '1'" $P --step-factor=1
t_fail plot_min_past_its_max 2 "--min-bytes (33554432) is larger than --max-bytes (16777216)" \
    $P --plot --min-bytes=32M --out="$T_TMP/plot"
# a factor so large that size x factor wraps around 2^64: one row, then stop
T_TIMEOUT=60 t_out huge_step_factor "# Out of bounds values : 0 OK" \
    $P --world=2 --min-bytes=4K --max-bytes=8K --step-factor=18446744073709551615 --iters=1 --warmup=0
t_out odd_sizes_are_whole_elements "           4             1     float" \
    $P --world=2 --min-bytes=5 --max-bytes=7 --iters=1 --warmup=0
t_fail huge_timeout 2 "--timeout: expected 0 to 1e+06, got '1e300'" $P --timeout=1e300
t_fail nan_timeout 2 "--timeout: expected 0 to 1e+06, got 'nan'" $P --timeout=nan
t_fail untimed_sim 2 "--timeout=0 (no watchdog) is for --backend=mpi only" $P --timeout=0
# every --fault error names the fault's form, the piece at fault and what it can be: R is a rank of
# this world (--world), K counts from 1, MS is bounded
t_fail empty_fault 2 "--fault: empty; give KIND:R@K[:MS]" $P --fault=
t_fail empty_fault_part 2 "--fault: 'kill:1@2,,': part 2 is empty" $P --fault=kill:1@2,,
t_fail fault_not_the_form 2 "--fault=KIND:R@K[:MS]: 'kill12' is not of this form" $P --fault=kill12
t_fail bad_fault 2 "--fault=KIND:R@K[:MS]: unknown kind 'explode' in 'explode:1@1' (kill, delay, skip or flip)" \
    $P --fault=explode:1@1
t_fail fault_rank_out_of_world 2 "--fault=kill:R@K: rank R must be 0 to 3 (the world has 4 ranks), got '7' in 'kill:7@1'" \
    $P --fault=kill:7@1
t_fail fault_rank_of_the_world_given 2 "--fault=skip:R@K: rank R must be 0 to 1 (the world has 2 ranks), got '2'" \
    $P --world=2 --fault=skip:2@1
t_fail fault_rank_junk 2 "--fault=flip:R@K: rank R must be 0 to 3 (the world has 4 ranks), got ' 1' in 'flip: 1@2'" \
    $P "--fault=flip: 1@2"
t_fail fault_rank_past_2_64 2 "rank R must be 0 to 3 (the world has 4 ranks), got '18446744073709551616'" \
    $P --fault=kill:18446744073709551616@1
t_fail fault_k_from_1 2 "--fault=kill:R@K: K must be 1 to 18446744073709551615 (K counts from 1: collective K, or for \
chapter 6's flip optimizer step K), got '0' in 'kill:1@0'" $P --fault=kill:1@0
t_fail fault_k_junk 2 "--fault=delay:R@K:MS: K must be 1 to 18446744073709551615" $P --fault=delay:1@x:5
t_fail fault_delay_needs_ms 2 "--fault=delay:R@K:MS: 'delay:1@2' has no :MS, the delay in milliseconds" \
    $P --fault=delay:1@2
t_fail fault_only_delay_takes_ms 2 "--fault=kill:R@K: 'kill:1@2:5' ends with :5, but only delay takes :MS" \
    $P --fault=kill:1@2:5
# ranks flipped at one K differ from each other, as independent faults do: two of three flipped is no
# majority (the healthy rank 0 is not blamed), two of five are both named; one flip given twice is refused
t_fail fault_two_flips_of_three 1 "rank 1's result differs from rank 0's (" $P --world=3 --fault=flip:1@2,flip:2@2 --check \
    --timeout=5
t_said fault_two_flips_of_three_no_majority "no result is shared by a majority of the 3 ranks, so none can be called \
the wrong one"
t_fail fault_two_flips_of_five 1 "after collective #2 (allreduce avg, 1024 x float32), ranks 1 and 3 hold results that \
differ from the one the other 3 ranks agree on" $P --world=5 --fault=flip:1@2,flip:3@2 --check --timeout=5
t_fail fault_one_flip_twice 2 "--fault=flip:R@K: 'flip:1@2' is given twice: one flip per rank and K" \
    $P --fault=flip:1@2,kill:0@9,flip:1@2 --check --timeout=5
t_fail fault_flips_at_two_ks 1 "after collective #2 (allreduce avg, 1024 x float32), rank 1's result differs from the \
other 2 ranks'" $P --world=3 --fault=flip:1@2,flip:2@3 --check --timeout=5
t_fail bad_demo 2 "--demo: unknown value 'meteor' (timeout, crash, uneven, mismatch, flip or all)" $P --demo=meteor
t_fail unknown_backend 2 "--backend: unknown value 'carrier-pigeon' (sim, mpi or nccl)" $P --backend=carrier-pigeon --max-bytes=1K

for algo in ring tree naive; do
    t_out "table_$algo" "# Avg bus bandwidth" $P --world=3 --algo=$algo --min-bytes=1K --max-bytes=300K \
        --step-factor=8 --iters=2 --warmup=1 --check
done
# --topology=NODESxGPUS and hierarchical all-reduce: the bits are checked (#wrong exact, --check across
# ranks) on even and uneven topologies and counts (7 and 1029 floats on 3x2); times are not
t_fail topology_not_the_form 2 "--topology: topology '2x': expected NODESxGPUS" $P --topology=2x
t_fail topology_zero_gpus 2 "--topology: topology '4x0': expected NODESxGPUS, two whole numbers from 1" $P --topology=4x0
t_fail topology_conflicts_with_world 2 "--world=4 conflicts with --topology=3x2 (6 ranks)" $P --topology=3x2 --world=4
t_fail topology_past_the_largest_world 2 "--topology: topology '9x8': 72 ranks, more than --world's 64" $P --topology=9x8
t_fail topology_not_with_demos 2 "--topology does nothing with --demo" $P --demo=crash --topology=2x2
for topo in 2x2 3x2 2x3; do
    t_out "table_hier_$topo" "# Out of bounds values : 0 OK" $P --topology=$topo --algo=hier --min-bytes=28 \
        --max-bytes=300K --step-factor=147 --iters=1 --warmup=0 --check
    t_said "table_hier_${topo}_header" "topology $topo  algo hier"
done
t_out topology_and_its_world_agree "# backend sim  world 6  topology 3x2  algo ring" $P --topology=3x2 --world=6 \
    --max-bytes=1K --iters=1 --warmup=0
# --hw with --topology prices the hops across nodes from the profile's network (h100-sxm: 8 NDR ports a
# node, 50 GB/s and 14 us each). 1 MiB on 2x8, by hand: ring 30 x (14 us + 64 KiB / 50 GB/s) + 15 x 64 KiB
# x 3 / 3350 GB/s = 460.2 us; hier 14 x (3.4 us + 128 KiB / 450 GB/s) + 2 x (14 us + 64 KiB / 50 GB/s)
# + (7 + 0.5) x 128 KiB x 3 / 3350 GB/s = 83.2 us
t_out hw_topology_network_named "# model: across nodes, 8x InfiniBand NDR: 50.0 GB/s a port, 14.0 us a hop" \
    $P --topology=2x8 --hw=h100-sxm --algo=hier --min-bytes=1M --max-bytes=1M --iters=1 --warmup=0
t_lines hw_topology_hier_model "     1048576" '.* 83\.2 +23\.64'
t_out hw_topology_ring_model "across nodes alpha 14.00 us, beta 50.000 GB/s a port" \
    $P --topology=2x8 --hw=h100-sxm --algo=ring --min-bytes=1M --max-bytes=1M --iters=1 --warmup=0
t_lines hw_topology_ring_model_row "     1048576" '.* 460\.2 +4\.27'
# --algo=all adds hier only where it differs from the ring: several nodes of several ranks
t_out all_has_hier_on_2x2 "topology 2x2  algo hier" $P --topology=2x2 --algo=all --max-bytes=1K --iters=1 --warmup=0
t_run $P --topology=1x4 --algo=all --max-bytes=1K --iters=1 --warmup=0
if [ "$T_STATUS" = 0 ] && ! grep -q "algo hier" <<<"$T_OUT" && grep -q "algo naive" <<<"$T_OUT"; then
    t_pass all_has_no_hier_on_one_node
else t_failed all_has_no_hier_on_one_node "exit $T_STATUS: $(grep '^# backend' <<<"$T_OUT")"; fi

# --links: which link is busy when in one modelled all-reduce (the cost model's spans; nothing runs).
# 2x8 H100 SXM, 256 MiB: the flat ring's 30 steps keep 1 of a node's 8 NDR ports busy, NVLink a ninth
# of each step; hier's 7 + 7 NVLink steps surround 2 steps on all 8 ports, 5.3 times faster.
t_out links_2x8_ring "ring: 10.712 ms (busbw 47.0 GB/s)" \
    $P --hw=h100-sxm --topology=2x8 --links=256M --out="$T_TMP/links"
t_said links_2x8_hier "hier: 2.016 ms (busbw 249.7 GB/s)"
t_lines links_2x8_ring_one_port "    0.000 -   5.469 ms  reduce-scatter " '.*15 steps of 16 MiB .*NVLink 11 %, 7 of 8 GPUs. links  InfiniBand NDR 96 %, 1 of 8 ports .*'
t_lines links_2x8_hier_every_port "    0.756 -   1.470 ms  all-reduce across nodes" '.* 2 steps of 16 MiB .*InfiniBand NDR 98 %, 8 of 8 ports .*'
# the CSV: 75 spans of ring (30 steps on two link classes, 15 additions) and 24 of hier, each inside
# the all-reduce's time, its share of the links in (0, 1]
csv=$T_TMP/links/links.csv
if [ "$(head -n 1 "$csv" 2>/dev/null)" = "algo,row,label,lane,phase,step,bytes,start_ms,end_ms,share" ] &&
    [ "$(grep -c '^ring,' "$csv" || true)" = 75 ] && [ "$(grep -c '^hier,' "$csv" || true)" = 24 ] &&
    awk -F, 'NR > 1 && !($9 >= $8 && $8 >= 0 && $10 > 0 && $10 <= 1 && $9 <= 10.713) { bad = 1 } END { exit bad }' "$csv"
then t_pass links_csv
else t_failed links_csv "$(head -n 3 "$csv" 2>/dev/null)"; fi
# one node: the ring alone (hier is the same), on the simulator's default profile
t_out links_one_node "ring: " $P --links=1M --out="$T_TMP/links1"
if grep -q "^hier" <<<"$T_OUT" || grep -q "ports" <<<"$T_OUT"; then
    t_failed links_one_node_has_no_network "$T_OUT"
else t_pass links_one_node_has_no_network; fi
t_out links_hier_alone "8 of 8 ports" $P --hw=h100-sxm --topology=2x8 --algo=hier --links=1G --out="$T_TMP/links"
if grep -q "^ring" <<<"$T_OUT"; then t_failed links_hier_alone_no_ring "$T_OUT"; else t_pass links_hier_alone_no_ring; fi
t_fail links_not_tree 2 "--links draws ring and hier (--algo=ring, hier or all), not tree" \
    $P --topology=2x2 --algo=tree --links=1M
t_fail links_one_rank 2 "--links: one rank moves nothing" $P --world=1 --links=1M
t_fail links_runs_no_table 2 "--max-bytes does nothing with --links" $P --links=1M --max-bytes=1M
mkdir -p "$T_TMP/fifo" && mkfifo "$T_TMP/fifo/links.csv"
T_TIMEOUT=30 t_fail links_fifo_refused 1 "links.csv" $P --links=1M --out="$T_TMP/fifo"
ln -s nowhere "$T_TMP/dangling"
t_fail links_out_checked_first 2 "--out: $T_TMP/dangling: a symbolic link to 'nowhere', which cannot be reached" \
    $P --links=1M --out="$T_TMP/dangling"
t_out table_has_nccl_tests_columns "#wrong     time   algbw   busbw" $P --world=2 --max-bytes=4K --iters=1 --warmup=0
t_out table_no_wrong_elements "# Out of bounds values : 0 OK" $P --world=5 --max-bytes=64K --step-factor=16 --iters=1 --op=avg

# The bandwidth columns, recomputed from a printed row: algbw = size / time
# (GB/s, 1e9 bytes) and busbw = algbw x 2(W-1)/W, within the printed rounding
# (2 decimals for bandwidths; time to 0.05 us or better).
bw_check() { # NAME W
    local name=$1 W=$2
    t_run $P --world="$W" --min-bytes=4M --max-bytes=4M --iters=2 --warmup=1
    local why
    why=$(awk -v W="$W" '!/^#/ && NF >= 13 {
        size = $1; rows++
        for (k = 0; k < 2; k++) {
            t = $(6 + 4 * k); alg = $(7 + 4 * k); bus = $(8 + 4 * k)
            want_alg = size / (t * 1e-6) / 1e9
            if (alg - want_alg > 0.006 + want_alg * 1e-3 || want_alg - alg > 0.006 + want_alg * 1e-3)
                printf "algbw %s, but size / time = %g; ", alg, want_alg
            want_bus = alg * 2 * (W - 1) / W
            if (bus - want_bus > 0.011 || want_bus - bus > 0.011)
                printf "busbw %s, but algbw x 2(W-1)/W = %g; ", bus, want_bus
        }
    } END { if (rows != 1) printf "expected 1 row, got %d", rows }' <<<"$T_OUT")
    if [ "$T_STATUS" != 0 ]; then t_failed "$name" "exit $T_STATUS: $(tail -n 3 <<<"$T_OUT")"
    elif [ -n "$why" ]; then t_failed "$name" "$why"
    else t_pass "$name"; fi
}
bw_check busbw_is_algbw_times_2_w_minus_1_over_w.world4 4
bw_check busbw_is_algbw_times_2_w_minus_1_over_w.world3 3

# The fault demos: their watchdogs are modelled (a 1 s timeout, decided at
# once, with no wall-clock wait), so a minute is plenty; a hang fails here
# instead of holding the suite for T_TIMEOUT.
T_TIMEOUT=60
t_fail demo_timeout_states_its_timeout 1 "timed out after 1 s on rank" $P --demo=timeout
t_fail demo_timeout 1 "rank 1: sleeping in an injected delay" $P --demo=timeout
t_fail demo_crash 1 "rank 2: killed by --fault=kill:2@3 before collective #3" $P --demo=crash
t_fail demo_uneven 1 "rank 3: exited (closed its communicator); last completed collective #5" $P --demo=uneven
t_fail demo_mismatch 1 "(differs: count)" $P --demo=mismatch
t_fail demo_flip 1 "rank 1's result differs from the other 3 ranks', which agree" $P --demo=flip
# the demos' diagnoses are decided on modelled time: whose watchdog fires, who
# arrived, what each missing rank was doing, the same bytes beside two busy
# processes (--demo=all exits 1: every story ends in its diagnosis)
t_same_under_load demos_same_bytes_under_load "" bash -c '"$1" --demo=all; [ $? = 1 ]' _ "$P"
# the majority names the rank that differs, rank 0 included; two ranks cannot say which
t_fail flip_on_rank_0_is_rank_0s 1 "rank 0's result differs from the other 7 ranks', which agree" \
    $P --world=8 --fault=flip:0@2 --check --timeout=5
t_fail flip_at_world_2_blames_nobody 1 "with two ranks there is no majority to tell which one is wrong" \
    $P --world=2 --fault=flip:0@2 --check --timeout=5
t_fail fault_kill 1 "arrived: ranks 0, 2" $P --world=3 --fault=kill:1@2 --timeout=1
# a ten-minute straggler and a 1 s watchdog: the delay is modelled (no real
# sleep), so this is done within T_TIMEOUT only if the modelled deadline
# fires (a wall-clock watchdog would wait out its 60 s safety net)
t_fail fault_delay_ends_with_the_watchdog 1 "rank 1: sleeping in an injected delay of 600000 ms" \
    $P --world=3 --fault=delay:1@2:600000 --timeout=1
# the longest delay: its nanoseconds fit 64 bits and the delay lasts, not wraps into the past and
# vanishes; one millisecond more is refused, not cut short
t_fail fault_longest_delay_still_delays 1 "rank 1: sleeping in an injected delay of 18446744073709 ms" \
    $P --world=3 --fault=delay:1@2:18446744073709 --timeout=1
t_fail fault_delay_past_the_longest 2 "--fault=delay:R@K:MS: MS must be 0 to 18446744073709 milliseconds, got \
'18446744073710' in 'delay:1@2:18446744073710'" \
    $P --world=3 --fault=delay:1@2:18446744073710 --timeout=1
t_out fault_flip_unchecked_goes_unnoticed "the job finished" $P --fault=flip:1@2 --timeout=1
t_out fault_past_the_loop_is_named "note: kill:1@9 never fires: the loop runs collectives #1 .. #6" \
    $P --fault=kill:1@9 --timeout=1
t_out memory_bound_prints_the_ratio "ratio" $P --memory-bound --max-bytes=1M
# no gnuplot on PATH (a directory of that name is none): the CSV, a note on stderr, exit 0; a
# gnuplot found on PATH is run (a stand-in that says so)
mkdir -p "$T_TMP/nognuplot/gnuplot" "$T_TMP/standin"
t_out plot_without_gnuplot "gnuplot is not installed: $T_TMP/no-gnuplot/busbw-sim not rendered" \
    env PATH="$T_TMP/nognuplot" $P --plot --max-bytes=4K --iters=1 --warmup=0 --out="$T_TMP/no-gnuplot"
printf '#!/bin/sh\necho "stand-in gnuplot ran" >&2\nexit 1\n' > "$T_TMP/standin/gnuplot" && chmod +x "$T_TMP/standin/gnuplot"
t_fail plot_with_the_gnuplot_on_path 1 "stand-in gnuplot ran" \
    env PATH="$T_TMP/nognuplot:$T_TMP/standin" $P --plot --max-bytes=4K --iters=1 --warmup=0 --out="$T_TMP/standin-out"
# --plot away from the repository root: the scripts are found in the program's repository; a copy of
# the program outside any repository names the script, not a gnuplot error
if command -v gnuplot >/dev/null 2>&1; then
    t_ok plot_outside_the_repository \
        sh -c 'cd "$1" && exec "$2" --plot --out=out --max-bytes=4K --iters=1 --warmup=0 --algo=ring' sh \
        "$T_TMP" "$(cd "$(dirname "$P")" && pwd)/chapter-5"
    mkdir -p "$T_TMP/elsewhere" && cp "$P" "$T_TMP/elsewhere/chapter-5"
    t_fail plot_script_nowhere 1 "chapters/05-allreduce/plot.gp: cannot read the plot script" \
        sh -c 'cd "$1" && exec "$1/chapter-5" --plot --out=out --max-bytes=4K --iters=1 --warmup=0 --algo=ring' sh \
        "$T_TMP/elsewhere"
    # one size: a figure of one point, without gnuplot's warning of an empty range on stderr
    t_run $P --plot --min-bytes=4K --max-bytes=4K --iters=1 --warmup=0 --out="$T_TMP/one-size"
    if [ "$T_STATUS" != 0 ] || grep -q "Warning" <<<"$T_OUT"; then t_failed plot_one_size_quietly "$T_OUT"
    else t_pass plot_one_size_quietly; fi
else
    t_skip plot_outside_the_repository "gnuplot is not installed"
fi
# --hw: the cost model priced from a modelled GPU system instead of this machine. A ring of 4 GPUs,
# 1 MiB: 6 x 3.4 us + 1.5 MiB / 450 GB/s + 0.75 MiB x 3 / 3350 GB/s = 24.6 us on h100-sxm's NVLink;
# 6 x 5.7 us + 1.5 MiB / 28.81 GB/s + 0.75 MiB x 3 / 1008 GB/s = 91.1 us on rtx4090's PCIe
M=(--min-bytes=1M --max-bytes=1M --iters=1 --warmup=0)
t_out hw_modelled "# model: modelled, H100 SXM5 80GB, NVLink 4 through NVSwitch: 450.0 GB/s a way, 3.4 us a hop" \
    $P --hw=h100-sxm "${M[@]}"
t_said hw_model_figures "# model: alpha 3.40 us/message, beta 450.000 GB/s per link, gamma 1116.667 GB/s, segment 0 KiB, a GPU each (--hw)"
t_lines hw_model_nvlink "     1048576 " ' +1048576 .* 24\.6 +63\.94'
t_run $P --hw=rtx4090 "${M[@]}"
t_lines hw_model_pcie "     1048576 " ' +1048576 .* 91\.1 +17\.26'
t_out hw_flags_override "# model: alpha 10.00 us/message, beta 100.000 GB/s per link, gamma 1116.667 GB/s" \
    $P --hw=h100-sxm --alpha-us=10 --beta-gbps=100 "${M[@]}"
t_out hw_list "rtx4090    GeForce RTX 4090: FP32 82.6 TFLOP/s peak (GEMMs at 58 % of it), GDDR6X 1008 GB/s" $P --hw=list
t_fail unknown_hw 2 "chapter-5: --hw: unknown hardware profile 'h200' (known: h100-sxm, h100-pcie, a100, rtx4090)" \
    $P --hw=h200
t_fail hw_with_cores 2 "--cores does nothing with --hw" $P --hw=a100 --cores=2
t_fail hw_with_demo 2 "--hw does nothing with --demo or --fault" $P --hw=a100 --demo=crash
# the table's time: on the simulator, modelled (each all-reduce's modelled end on the --hw profile), so
# the out-of-place time is the model's 24.6 us to the hundredth; --wall-clock measures this host instead
t_out time_modelled_header "# time: modelled on H100 SXM5 80GB: each all-reduce ends at its last arrival + the cost model" \
    $P --hw=h100-sxm "${M[@]}"
t_lines time_modelled_is_the_model "     1048576 " ' +1048576 +262144 +float +sum +-1 +24\.60 +42\.63 +63\.94 +0 +24\.60 .* 24\.6 +63\.94'
t_out time_default_profile_named "# time: modelled on A100 SXM4 80GB (the default profile; --hw picks another)" \
    $P --max-bytes=1K --iters=1 --warmup=0
t_out wall_clock_measured "# time: measured on this host (wall clock)" $P --wall-clock --max-bytes=1K --iters=1 --warmup=0
t_fail wall_clock_not_with_mpi 2 "--wall-clock does nothing with --backend=mpi: its times are measured already" \
    $P --backend=mpi --wall-clock
t_fail wall_clock_not_with_demo 2 "--wall-clock does nothing with --demo or --fault" $P --wall-clock --demo=crash
# virtual time (DESIGN.md): the same flags write the same table and CSV, quietly and beside two
# processes that keep both cores busy (the #wrong columns still check the real bits)
t_same_under_load sweep_same_bytes_under_load allreduce-sim.csv $P --plot --out="$T_TMP/vt" --hw=h100-sxm \
    --topology=2x4 --max-bytes=64K --iters=2 --warmup=1
t_out lesson_exits_zero "every fault demo failed the way it should" $P
