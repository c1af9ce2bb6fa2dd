#!/usr/bin/env bash
# usage: ci/netns/enter.sh HOST COMMAND [ARGS...]
# Runs COMMAND as host HOST of a bed made by ci/netns/up.sh (or netns_up in
# ci/netns/lib.sh): in HOST's network namespace (where /etc/hosts names
# every host of the bed), in a UTS namespace of its own with HOST as its
# hostname (Open MPI and coll rdma tell nodes apart by hostname and boot id:
# the boot id is the machine's, so the name must differ), and in a mount
# namespace where the bed's common path (NETNS_HOME, <state>/here) is HOST's
# private directory (<state>/homes/HOST), so that files a host writes there
# are that host's alone. Everything COMMAND starts stays in these
# namespaces; the environment is passed on unchanged.
set -eu
[ $# -ge 2 ] || { echo "usage: $0 HOST COMMAND [ARGS...]" >&2; exit 2; }
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
host=$1
shift
state=$(netns_state_of_host "$host") || { netns_say "'$host' is not a host name of a bed ($NETNS_PREFIX-ID-hN)"; exit 2; }
[ -d "$state/homes/$host" ] || { netns_say "no bed holds host $host (no $state/homes/$host)"; exit 2; }
# `ip netns exec` makes a mount namespace of its own (/ a slave of the
# machine's: mounts made here do not leak out) and binds /etc/netns/HOST/hosts
exec ip netns exec "$host" unshare --uts -- /bin/sh -c '
    hostname "$1" && mount --bind "$2" "$3" || exit 125
    shift 3
    exec "$@"' enter "$host" "$state/homes/$host" "$state/here" "$@"
