#!/usr/bin/env bash
# An rsh agent for mpirun across the hosts of a bed (ci/netns/lib.sh):
#   mpirun --mca plm_rsh_agent /path/to/ci/netns/rsh.sh --host crn-ID-h0,...
# or OMPI_MCA_plm_rsh_agent=/path/to/ci/netns/rsh.sh in the environment (so
# that programs which run mpirun themselves, like fbcast --hosts, use it).
# usage, as mpirun calls it: rsh.sh [-OPTION...] HOST COMMAND...
# Like ssh, it joins COMMAND's words with spaces and has a shell run the
# result, here as HOST (ci/netns/enter.sh: its network, hostname and private
# directory). Options before HOST (ssh's, such as -x) are ignored.
set -eu
while [ $# -gt 0 ]; do
    case $1 in
        -[1246AaCfGgKkMNnqsTtVvXxYy]) shift ;;
        -*) shift; [ $# -gt 0 ] && shift ;;   # an option with a value (-o X, -p N)
        *) break ;;
    esac
done
[ $# -ge 2 ] || { echo "rsh.sh: usage: rsh.sh [options] HOST COMMAND..." >&2; exit 255; }
host=$1
shift
exec "$(dirname "${BASH_SOURCE[0]}")/enter.sh" "$host" /bin/sh -c "$*"
