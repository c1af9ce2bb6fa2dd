#!/usr/bin/python3
"""Collectives through mpi4py as a Python user makes them (issue 37).

Debian's python3-mpi4py initialises MPI at MPI_THREAD_MULTIPLE unless told
otherwise (mpi4py.rc.thread_level), so this is the level coll rdma must serve
for Python programs. Each rank runs barrier, bcast/Bcast, allreduce/Allreduce
and reduce/Reduce on MPI_COMM_WORLD and on two communicators made by
Comm.Split (every rank in reverse order; ranks split by parity), with every
root in turn and buffers of 8 B to 1 MiB, and compares every result with the
value worked out locally from the same formula (integers held exactly in
float64, so the sums are exact whatever order they are folded in).
Buffers are numpy arrays where numpy is installed, array('d') otherwise.

Output on stdout, per rank (ci/mpi-tests.sh reads it):
  thread level: provided MPI_THREAD_... (mpi4py.rc.thread_level ...)
  FAIL: ...                                  one line per wrong result
  result: rank R failures F barriers B
Exit status 1 when any result was wrong.
"""
import sys
from array import array

import mpi4py
from mpi4py import MPI

try:
    import numpy
except ImportError:
    numpy = None

# Buffer lengths in float64 elements: 8 B, 4 KiB, 128 KiB (above coll rdma's
# single-copy bcast and parallel reduction thresholds), 1 MiB.
LENGTHS = (1, 512, 16384, 131072)
LEVEL_NAMES = {
    MPI.THREAD_SINGLE: "MPI_THREAD_SINGLE",
    MPI.THREAD_FUNNELED: "MPI_THREAD_FUNNELED",
    MPI.THREAD_SERIALIZED: "MPI_THREAD_SERIALIZED",
    MPI.THREAD_MULTIPLE: "MPI_THREAD_MULTIPLE",
}

world = MPI.COMM_WORLD
world_rank = world.Get_rank()
failures = 0
barriers = 0


def expect(what, got, want):
    global failures
    if got != want:
        failures += 1
        print(f"FAIL: rank {world_rank}: {what}: got {got!r:.200}, want {want!r:.200}", flush=True)


def vector(values):
    """A float64 buffer holding values (numpy if present, else array('d'))."""
    if numpy is not None:
        return numpy.array(values, dtype=numpy.float64)
    return array("d", values)


def as_list(buffer):
    return [float(x) for x in buffer]


def contribution(rank, length):
    """What rank adds to a reduction: (rank + 1) * (i % 97 + 1) at index i."""
    return [float((rank + 1) * (i % 97 + 1)) for i in range(length)]


def reduced(size, length, op):
    """The reduction of every rank's contribution, worked out here."""
    if op == MPI.SUM:
        total = size * (size + 1) // 2
        return [float(total * (i % 97 + 1)) for i in range(length)]
    return [float(size * (i % 97 + 1)) for i in range(length)]  # MPI.MAX: the last rank's


def broadcast_value(root, length):
    """Root's bcast payload, different for every root and index."""
    return [float(root * 1_000_003 + i) for i in range(length)]


def exercise(comm, label):
    global barriers
    rank, size = comm.Get_rank(), comm.Get_size()
    where = f"{label} (rank {rank} of {size})"

    comm.barrier()
    comm.Barrier()
    barriers += 2

    for root in range(size):
        sent = {"root": root, "items": list(range(root, root + 40))} if rank == root else None
        expect(f"{where}: bcast of an object from root {root}",
               comm.bcast(sent, root=root), {"root": root, "items": list(range(root, root + 40))})
        for length in LENGTHS:
            want = broadcast_value(root, length)
            buffer = vector(want if rank == root else [-1.0] * length)
            comm.Bcast(buffer, root=root)
            expect(f"{where}: Bcast of {8 * length} B from root {root}", as_list(buffer), want)

    expect(f"{where}: allreduce of an int", comm.allreduce(rank + 1, op=MPI.SUM), size * (size + 1) // 2)
    for root in range(size):
        got = comm.reduce(rank + 1, op=MPI.MAX, root=root)
        expect(f"{where}: reduce (max) of an int to root {root}", got, size if rank == root else None)

    for op, op_name in ((MPI.SUM, "sum"), (MPI.MAX, "max")):
        for length in LENGTHS:
            mine = vector(contribution(rank, length))
            result = vector([-1.0] * length)
            comm.Allreduce(mine, result, op=op)
            expect(f"{where}: Allreduce ({op_name}) of {8 * length} B", as_list(result), reduced(size, length, op))
            in_place = vector(contribution(rank, length))
            comm.Allreduce(MPI.IN_PLACE, in_place, op=op)
            expect(f"{where}: Allreduce in place ({op_name}) of {8 * length} B",
                   as_list(in_place), reduced(size, length, op))
            for root in range(size):
                result = vector([-1.0] * length)
                comm.Reduce(mine, result, op=op, root=root)
                if rank == root:
                    expect(f"{where}: Reduce ({op_name}) of {8 * length} B to root {root}",
                           as_list(result), reduced(size, length, op))
    comm.Barrier()
    barriers += 1


def main():
    provided = MPI.Query_thread()
    print(f"thread level: provided {LEVEL_NAMES.get(provided, provided)} "
          f"(mpi4py.rc.thread_level {mpi4py.rc.thread_level}, mpi4py {mpi4py.__version__}, "
          f"buffers {'numpy' if numpy is not None else 'array'})", flush=True)
    # mpi4py's default; a different level would mean this test measures
    # something other than what users run
    expect("thread level provided (mpi4py asks for MPI_THREAD_MULTIPLE)",
           LEVEL_NAMES.get(provided, provided), "MPI_THREAD_MULTIPLE")

    size = world.Get_size()
    exercise(world, "MPI_COMM_WORLD")
    reversed_comm = world.Split(color=0, key=size - 1 - world_rank)
    expect("Split in reverse order: my rank there", reversed_comm.Get_rank(), size - 1 - world_rank)
    exercise(reversed_comm, "Split, reverse order")
    parity_comm = world.Split(color=world_rank % 2, key=world_rank)
    exercise(parity_comm, f"Split by parity {world_rank % 2}")
    parity_comm.Free()
    reversed_comm.Free()

    print(f"result: rank {world_rank} failures {failures} barriers {barriers}", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
