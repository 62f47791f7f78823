# Plots of bench/results/latest.json (data from report.py plot-data).
#   gnuplot -e "dir='bench/results'" bench/plot.gp
if (!exists("dir")) dir = "bench/results"
load dir . "/plot.vars"   # title, ncol
set datafile missing "-"
set key top left
set grid ytics

# Scalability (seed 002): WALL and per-call cost against the thread count.
set terminal pngcairo noenhanced size 1200,500 font ",10"
set output dir . "/scaling.png"
set multiplot layout 1,2 title "1M clock_gettime(CLOCK_MONOTONIC) calls per thread\n" . title
set logscale x 2
set xlabel "threads"
set ylabel "WALL (s)"
plot dir . "/scaling.dat" using 1:2 with linespoints title "vdso", \
     "" using 1:4 with linespoints title "timehands", \
     "" using 1:6 with linespoints title "naive global CAS"
set ylabel "ns per call (thread CPU time)"
set yrange [0:*]
plot dir . "/scaling.dat" using 1:3 with linespoints title "vdso", \
     "" using 1:5 with linespoints title "timehands", \
     "" using 1:7 with linespoints title "naive global CAS"
unset multiplot
unset logscale x
set yrange [*:*]

# Per-call cost of every operation (the system call is off the scale and
# left out; see the table).
set output dir . "/percall.png"
set terminal pngcairo noenhanced size 1400,600 font ",10"
set title "median ns per call (system call left out)\n" . title
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set xtics rotate by -35 scale 0
set ylabel "ns per call"
set xlabel ""
set key top right autotitle columnhead
plot for [i=2:ncol] dir . "/percall.dat" using i:xtic(1)
set output
