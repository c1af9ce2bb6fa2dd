#!/usr/bin/env bash
# usage: ci/netns/down.sh ID... | --stale | --all
# Removes beds of network-namespace hosts (ci/netns/lib.sh): those with the
# given run ids, those whose owner is gone (--stale), or every one (--all,
# also those of runs still going). Ends the processes inside their
# namespaces first. Prints what is left afterwards (nothing when all went).
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[ $# -ge 1 ] || { echo "usage: $0 ID... | --stale | --all" >&2; exit 2; }
case $1 in
    --all) for id in $(netns_ids); do netns_down "$id"; done ;;
    --stale) netns_reap ;;
    *) for id in "$@"; do netns_down "$id"; done ;;
esac
left=$(netns_ids | tr '\n' ' ')
[ -z "$left" ] || { netns_say "beds still there: $left"; [ "$1" != --all ] || exit 1; }
exit 0
