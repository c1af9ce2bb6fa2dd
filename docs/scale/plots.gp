# gnuplot script written by coll-rdma-sim; run in this directory
set terminal pngcairo size 900,600 noenhanced
set logscale xy
set xlabel 'nodes'
set ylabel 'latency (us)'
set key top left
set grid
set output 'barrier-1ppn.png'
set title "MPI_Barrier, 1 rank(s) per node"
plot 'barrier-1ppn.dat' using 1:2 with linespoints title columnheader(2), \
     'barrier-1ppn.dat' using 1:3 with linespoints title columnheader(3), \
     'barrier-1ppn.dat' using 1:4 with linespoints title columnheader(4), \
     'barrier-1ppn.dat' using 1:5 with linespoints title columnheader(5)
set output 'allreduce-8B-1ppn.png'
set title "MPI_Allreduce of 8 bytes, 1 rank(s) per node"
plot 'allreduce-8B-1ppn.dat' using 1:2 with linespoints title columnheader(2), \
     'allreduce-8B-1ppn.dat' using 1:3 with linespoints title columnheader(3), \
     'allreduce-8B-1ppn.dat' using 1:4 with linespoints title columnheader(4)
set output 'allreduce-64KiB-1ppn.png'
set title "MPI_Allreduce of 64 KiB, 1 rank(s) per node"
plot 'allreduce-64KiB-1ppn.dat' using 1:2 with linespoints title columnheader(2), \
     'allreduce-64KiB-1ppn.dat' using 1:3 with linespoints title columnheader(3), \
     'allreduce-64KiB-1ppn.dat' using 1:4 with linespoints title columnheader(4)
set output 'bcast-8B-1ppn.png'
set title "MPI_Bcast of 8 bytes, 1 rank(s) per node"
plot 'bcast-8B-1ppn.dat' using 1:2 with linespoints title columnheader(2), \
     'bcast-8B-1ppn.dat' using 1:3 with linespoints title columnheader(3), \
     'bcast-8B-1ppn.dat' using 1:4 with linespoints title columnheader(4), \
     'bcast-8B-1ppn.dat' using 1:5 with linespoints title columnheader(5)
set output 'bcast-64KiB-1ppn.png'
set title "MPI_Bcast of 64 KiB, 1 rank(s) per node"
plot 'bcast-64KiB-1ppn.dat' using 1:2 with linespoints title columnheader(2), \
     'bcast-64KiB-1ppn.dat' using 1:3 with linespoints title columnheader(3), \
     'bcast-64KiB-1ppn.dat' using 1:4 with linespoints title columnheader(4), \
     'bcast-64KiB-1ppn.dat' using 1:5 with linespoints title columnheader(5)
set output 'barrier-32ppn.png'
set title "MPI_Barrier, 32 rank(s) per node"
plot 'barrier-32ppn.dat' using 1:2 with linespoints title columnheader(2), \
     'barrier-32ppn.dat' using 1:3 with linespoints title columnheader(3), \
     'barrier-32ppn.dat' using 1:4 with linespoints title columnheader(4), \
     'barrier-32ppn.dat' using 1:5 with linespoints title columnheader(5)
set output 'allreduce-8B-32ppn.png'
set title "MPI_Allreduce of 8 bytes, 32 rank(s) per node"
plot 'allreduce-8B-32ppn.dat' using 1:2 with linespoints title columnheader(2), \
     'allreduce-8B-32ppn.dat' using 1:3 with linespoints title columnheader(3), \
     'allreduce-8B-32ppn.dat' using 1:4 with linespoints title columnheader(4)
set output 'allreduce-64KiB-32ppn.png'
set title "MPI_Allreduce of 64 KiB, 32 rank(s) per node"
plot 'allreduce-64KiB-32ppn.dat' using 1:2 with linespoints title columnheader(2), \
     'allreduce-64KiB-32ppn.dat' using 1:3 with linespoints title columnheader(3), \
     'allreduce-64KiB-32ppn.dat' using 1:4 with linespoints title columnheader(4)
set output 'bcast-8B-32ppn.png'
set title "MPI_Bcast of 8 bytes, 32 rank(s) per node"
plot 'bcast-8B-32ppn.dat' using 1:2 with linespoints title columnheader(2), \
     'bcast-8B-32ppn.dat' using 1:3 with linespoints title columnheader(3), \
     'bcast-8B-32ppn.dat' using 1:4 with linespoints title columnheader(4), \
     'bcast-8B-32ppn.dat' using 1:5 with linespoints title columnheader(5)
set output 'bcast-64KiB-32ppn.png'
set title "MPI_Bcast of 64 KiB, 32 rank(s) per node"
plot 'bcast-64KiB-32ppn.dat' using 1:2 with linespoints title columnheader(2), \
     'bcast-64KiB-32ppn.dat' using 1:3 with linespoints title columnheader(3), \
     'bcast-64KiB-32ppn.dat' using 1:4 with linespoints title columnheader(4), \
     'bcast-64KiB-32ppn.dat' using 1:5 with linespoints title columnheader(5)
set output 'barrier-128ppn.png'
set title "MPI_Barrier, 128 rank(s) per node"
plot 'barrier-128ppn.dat' using 1:2 with linespoints title columnheader(2), \
     'barrier-128ppn.dat' using 1:3 with linespoints title columnheader(3), \
     'barrier-128ppn.dat' using 1:4 with linespoints title columnheader(4), \
     'barrier-128ppn.dat' using 1:5 with linespoints title columnheader(5)
set output 'allreduce-8B-128ppn.png'
set title "MPI_Allreduce of 8 bytes, 128 rank(s) per node"
plot 'allreduce-8B-128ppn.dat' using 1:2 with linespoints title columnheader(2), \
     'allreduce-8B-128ppn.dat' using 1:3 with linespoints title columnheader(3), \
     'allreduce-8B-128ppn.dat' using 1:4 with linespoints title columnheader(4)
set output 'allreduce-64KiB-128ppn.png'
set title "MPI_Allreduce of 64 KiB, 128 rank(s) per node"
plot 'allreduce-64KiB-128ppn.dat' using 1:2 with linespoints title columnheader(2), \
     'allreduce-64KiB-128ppn.dat' using 1:3 with linespoints title columnheader(3), \
     'allreduce-64KiB-128ppn.dat' using 1:4 with linespoints title columnheader(4)
set output 'bcast-8B-128ppn.png'
set title "MPI_Bcast of 8 bytes, 128 rank(s) per node"
plot 'bcast-8B-128ppn.dat' using 1:2 with linespoints title columnheader(2), \
     'bcast-8B-128ppn.dat' using 1:3 with linespoints title columnheader(3), \
     'bcast-8B-128ppn.dat' using 1:4 with linespoints title columnheader(4), \
     'bcast-8B-128ppn.dat' using 1:5 with linespoints title columnheader(5)
set output 'bcast-64KiB-128ppn.png'
set title "MPI_Bcast of 64 KiB, 128 rank(s) per node"
plot 'bcast-64KiB-128ppn.dat' using 1:2 with linespoints title columnheader(2), \
     'bcast-64KiB-128ppn.dat' using 1:3 with linespoints title columnheader(3), \
     'bcast-64KiB-128ppn.dat' using 1:4 with linespoints title columnheader(4), \
     'bcast-64KiB-128ppn.dat' using 1:5 with linespoints title columnheader(5)
