# chapter5.sh: build/chapter-5 as a user drives it: --help, bad flags, small
# tables for every algorithm, and each fault demo ending non-zero with the
# diagnosis that names the rank at fault.
source tests/lib.sh
P=$BUILD/chapter-5

t_out help "--min-bytes" $P --help
t_fail bad_flag 2 "unrecognized option" $P --frobnicate
t_fail bad_world 2 "--world" $P --world=0
t_fail bad_algo 2 "unknown algorithm 'hypercube'" $P --algo=hypercube
t_fail bad_sizes 2 "larger than --max-bytes" $P --min-bytes=1M --max-bytes=1K
t_fail bad_fault 2 "unknown kind 'explode'" $P --fault=explode:1@1
t_fail fault_rank_out_of_world 2 "rank 7 is not in a world of 4" $P --fault=kill:7@1
t_fail bad_demo 2 "unknown demo 'meteor'" $P --demo=meteor
t_fail unknown_backend 1 "unknown backend 'carrier-pigeon'" $P --backend=carrier-pigeon --max-bytes=1K

for algo in ring tree naive; do
    t_out "table_$algo" "# Avg bus bandwidth" $P --world=3 --algo=$algo --min-bytes=1K --max-bytes=300K \
        --step-factor=8 --iters=2 --warmup=1 --check
done
t_out table_has_nccl_tests_columns "#wrong     time   algbw   busbw" $P --world=2 --max-bytes=4K --iters=1 --warmup=0
t_out table_no_wrong_elements "# Wrong elements       : 0 OK" $P --world=5 --max-bytes=64K --step-factor=16 --iters=1 --op=avg

t_fail demo_timeout 1 "rank 1: sleeping in an injected delay" $P --demo=timeout
t_fail demo_crash 1 "rank 2: killed by --fault=kill:2@3 before collective #3" $P --demo=crash
t_fail demo_uneven 1 "rank 3: exited (closed its communicator); last completed collective #5" $P --demo=uneven
t_fail demo_mismatch 1 "(differs: count)" $P --demo=mismatch
t_fail demo_flip 1 "rank 1's result differs from rank 0's" $P --demo=flip
t_fail fault_kill 1 "arrived: ranks 0, 2" $P --world=3 --fault=kill:1@2 --timeout=1
t_out fault_flip_unchecked_goes_unnoticed "the job finished" $P --fault=flip:1@2 --timeout=1
t_out memory_bound_prints_the_ratio "ratio" $P --memory-bound --max-bytes=1M
t_out lesson_exits_zero "every fault demo failed the way it should" $P
