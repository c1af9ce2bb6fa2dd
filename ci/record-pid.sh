#!/bin/sh
# usage: ci/record-pid.sh FILE PROGRAM [ARGS...]
# Appends this process's pid to FILE, then becomes PROGRAM (exec keeps the
# pid). ci/mpi-tests.sh runs every rank through it, so that a segment left in
# /dev/shm, whose name carries its creator's pid, is blamed on the test whose
# rank made it, and not on a concurrent job's (issue 9: tests pass on a busy
# machine, where other jobs may also leave or reap segments).
file=$1
shift
echo $$ >>"$file"
exec "$@"
