#!/usr/bin/env bash
# usage: ci/netns/up.sh N
# Makes a bed of N hosts (network namespaces on one bridge: ci/netns/lib.sh
# says what exactly) for interactive use and prints the path of its "env"
# file; removes beds of earlier runs that are no longer owned (their owner,
# here the shell that ran up.sh, is gone). Remove it with ci/netns/down.sh
# ID. A failure while setting up removes what was made. Scripts use
# netns_up from ci/netns/lib.sh instead, which removes the bed when the
# script exits, fails or is interrupted.
# Example:
#   env=$(ci/netns/up.sh 4) && . "$env"
#   OMPI_MCA_plm_rsh_agent=$NETNS_RSH ci/netns/enter.sh "${NETNS_HOSTS%%,*}" \
#       mpirun --host "$NETNS_HOSTS" hostname
#   ci/netns/down.sh "$NETNS_ID"
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[ $# = 1 ] || { echo "usage: $0 N" >&2; exit 2; }
trap 'netns_down "${NETNS_ID:-none}" 2>/dev/null; exit 130' INT TERM
netns_create "$1" "$PPID" || exit 1
trap - INT TERM
echo "$NETNS_STATE/env"
