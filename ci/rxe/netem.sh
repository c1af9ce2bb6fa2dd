#!/bin/sh
# Sets the impairment of eth0's egress in the guest it runs in (Soft-RoCE test
# bed, docs/testbed.md): called by guest-init.sh at boot and, in a session of
# ci/rxe/guests.sh, by a job on every guest between steps. Each call replaces
# what the previous one set, so the result never depends on the order of the
# steps.
#
# usage: netem.sh [--mtu BYTES] none
#        netem.sh [--mtu BYTES] mcast PCT   (drop PCT % of IPv4 multicast only)
#        netem.sh [--mtu BYTES] all PCT     (drop PCT % of every packet)
#        netem.sh [--mtu BYTES] spec "SPEC" (tc netem SPEC on every packet)
# --mtu: eth0's MTU as well (rxe's path MTU follows it: 9000 gives 4096).
set -u
BB=/bin/busybox
mtu=
if [ "${1:-}" = --mtu ]; then mtu=$2; shift 2; fi
mode=${1:?usage: netem.sh [--mtu BYTES] none|mcast PCT|all PCT|spec SPEC}
arg=${2:-}
host=$($BB hostname)
fail() { echo "netem.sh: $host: $*" >&2; exit 1; }

if [ -n "$mtu" ] && [ "$(cat /sys/class/net/eth0/mtu)" != "$mtu" ]; then
    $BB ip link set eth0 mtu "$mtu" || fail "cannot set the MTU of eth0 to $mtu"
fi
# No root qdisc of ours yet is not an error.
tc qdisc del dev eth0 root 2>/dev/null || true
case $mode in
    none) ;;
    spec)
        [ -n "$arg" ] || fail "spec needs a netem SPEC"
        tc qdisc add dev eth0 root netem $arg || fail "tc netem $arg failed"
        echo "netem.sh: $host: netem on eth0: $arg" ;;
    all)
        [ -n "$arg" ] || fail "all needs a percentage"
        tc qdisc add dev eth0 root netem loss "$arg%" || fail "tc netem loss $arg% failed" ;;
    mcast)
        [ -n "$arg" ] || fail "mcast needs a percentage"
        # Only IPv4 multicast destinations (224.0.0.0/4) go to the lossy band.
        tc qdisc add dev eth0 root handle 1: prio bands 4 \
            priomap 1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1 &&
        tc qdisc add dev eth0 parent 1:4 handle 40: netem loss "$arg%" &&
        tc filter add dev eth0 parent 1: protocol ip prio 1 u32 \
            match ip dst 224.0.0.0/4 flowid 1:4 || fail "tc prio/netem/u32 setup failed" ;;
    *) fail "unknown mode $mode (none, mcast, all or spec)" ;;
esac
exit 0
