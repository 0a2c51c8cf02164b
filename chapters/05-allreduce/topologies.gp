# topologies.gp: chapter 5's modelled bus bandwidth against message size on
# H100 SXM clusters of 1x8, 2x8 and 8x8 GPUs (NVLink through NVSwitch in a
# node, 8 InfiniBand NDR ports a node between), one colour a topology, one
# line style an algorithm, beside nccl-tests' published ring busbw on 8 H100
# (370 GB/s at large sizes, NVIDIA/nccl-tests#212). From the CSV
# plots.sh writes: topology, then chapter 5's columns (algo = 3, bytes = 5,
# busbw = 9).
# gnuplot -e "csv='...'; out='...'" topologies.gp  ->  out.png and out.svg
set datafile separator ","
set key bottom right font ",9" spacing 0.9
set logscale x 2
set logscale y 10
set format x "%.0b %BB"
set xlabel "message size"
set ylabel "bus bandwidth (GB/s, modelled)"
set title "all-reduce on modelled H100 SXM clusters: nodes x GPUs (busbw = algbw x 2(W-1)/W)"
set grid
topos = "1x8 2x8 8x8"
algos = "ring hier tree"
sel(t, a, v) = strcol(1) eq t && strcol(3) eq a ? v : 1/0
do for [term in "png svg"] {
    if (term eq "png") { set terminal pngcairo size 1000,600; set output out.".png" } \
    else { set terminal svg size 1000,600; set output out.".svg" }
    plot for [t=1:3] for [a=1:3] csv every ::1 using 5:(sel(word(topos, t), word(algos, a), $9)) \
             with linespoints lc t dt a pt (6 + a) title word(topos, t)." ".word(algos, a), \
         370 with lines lc "black" dt 3 title "nccl-tests, 8x H100, ring: 370 GB/s (NVIDIA/nccl-tests#212)"
}
