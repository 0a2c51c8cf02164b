# scaling.gp: chapter 6's scaling figure, from the CSV build/chapter-6
# --bench=scaling writes (sweep,gpus,nodes,algo,overlap,bucket_cap_mb,
# step_us,exposed_comm_us,efficiency,host_cpu_ms_per_step,...). Left: DDP's
# weak-scaling efficiency (1 GPU's step / the step, the per-GPU batch fixed)
# against the modelled GPUs, flat ring and hierarchical, with and without
# overlap; right: the step against the bucket cap at 16 GPUs. Every time
# drawn is modelled.
# gnuplot -e "csv='...'; out='...'" scaling.gp  ->  out.png and out.svg
set datafile separator ","
row(s, a, o) = strcol(1) eq s && strcol(4) eq a && $5 == o
gpus(a, o) = row("gpus", a, o) || ($2 == 1 && strcol(1) eq "gpus") ? $9 * 100 : 1/0
caps(x) = strcol(1) eq "buckets" ? x : 1/0
do for [term in "png svg"] {
    if (term eq "png") { set terminal pngcairo size 1200,500; set output out.".png" } \
    else { set terminal svg size 1200,500; set output out.".svg" }
    set multiplot layout 1,2 title "DDP on modelled H100 SXM nodes of 8 GPUs (NVLink inside, InfiniBand NDR between)"
    set logscale x 2
    set xlabel "GPUs (nodes of 8)"
    set ylabel "scaling efficiency (%): 1 GPU's step / the step"
    set yrange [0:105]
    set grid
    set key bottom left
    plot csv every ::1 using 2:(gpus("ring", 1)) with linespoints pt 7 lc 1 title "flat ring, overlap", \
         csv every ::1 using 2:(gpus("ring", 0)) with linespoints pt 6 dt 2 lc 1 title "flat ring, after backward", \
         csv every ::1 using 2:(gpus("hier", 1)) with linespoints pt 7 lc 2 title "hierarchical, overlap", \
         csv every ::1 using 2:(gpus("hier", 0)) with linespoints pt 6 dt 2 lc 2 title "hierarchical, after backward"
    set xlabel "bucket cap (MB)"
    set ylabel "step (us, modelled)"
    set autoscale y
    set yrange [0:*]
    set key top right
    plot csv every ::1 using (caps($6)):7 with linespoints pt 7 lc 3 title "16 GPUs, hierarchical, overlap: step", \
         csv every ::1 using (caps($6)):8 with linespoints pt 6 lc 4 title "its exposed communication"
    unset multiplot
}
