# plots.sh: chapter 5's figures, for `make plots` and `make report`. Sourced
# by tools/plots.sh, which gives $BUILD, $out (this chapter's folder) and
# plot_run (see there).
#
#   busbw-sim         every algorithm on this machine's 4 simulated ranks
#                     (build/chapter-5 --plot), the cost model beside it
#   busbw-topologies  ring, tree, naive and hier on modelled H100 SXM
#                     clusters of 1x8, 2x8 and 8x8 GPUs (--hw=h100-sxm
#                     --topology=...; modelled time, one iteration a size, as
#                     the times do not vary; up to 256, 64 and 16 MiB, what
#                     the ranks' buffers allow), beside nccl-tests' published
#                     ring busbw for 8 H100 (370 GB/s, NVIDIA/nccl-tests#212)
#   links             which link is busy when during one 256 MiB all-reduce on
#                     2x8 H100 SXM, flat ring against hier (--links: the cost
#                     model's steps, drawn by links.gp; nothing runs)
plot_run "$BUILD/chapter-5" --plot --out="$out" || return 1
plot_run "$BUILD/chapter-5" --hw=h100-sxm --topology=2x8 --links=256M --out="$out" || return 1
printf 'topology,' > "$out/allreduce-topologies.csv"
head -n 1 "$out/allreduce-sim.csv" >> "$out/allreduce-topologies.csv"
for run in 1x8:256M 2x8:64M 8x8:16M; do # the largest size each: W ranks x 3 buffers, 3 to 6 GiB
    topo=${run%:*}
    plot_run "$BUILD/chapter-5" --plot --hw=h100-sxm --topology="$topo" --algo=all --iters=1 --warmup=0 \
        --max-bytes="${run#*:}" --out="$out/$topo" || return 1
    sed "1d; s/^/$topo,/" "$out/$topo/allreduce-sim.csv" >> "$out/allreduce-topologies.csv"
    rm -rf "${out:?}/$topo"
done
if command -v gnuplot >/dev/null 2>&1; then
    quoted=${out//\'/\'\'} # in gnuplot's single quotes, a quote is written twice
    gnuplot -e "csv='$quoted/allreduce-topologies.csv'; out='$quoted/busbw-topologies'" chapters/05-allreduce/topologies.gp ||
        { echo "plots: gnuplot chapters/05-allreduce/topologies.gp failed" >&2; return 1; }
    echo "plots: $out/busbw-topologies.png and .svg"
else
    echo "plots: gnuplot is not installed: $out/allreduce-topologies.csv not drawn"
fi
