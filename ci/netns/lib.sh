# Network namespaces as hosts: a bed of N "hosts" on one machine (sourced
# by ci/netns/*.sh and by the scripts that use the bed; needs root).
#
# A bed has a run id ID (6 hex digits) and consists of
#   - namespaces crn-ID-h0 .. crn-ID-h<N-1>, the hosts: lo up, eth0 (one end
#     of a veth pair) with 10.78.0.<i+1>/24 and a route for 224.0.0.0/4, so
#     that multicast leaves through it
#   - namespace crn-ID-br holding the bridge br0 and the other veth ends
#     (multicast snooping off: every group's datagrams reach every port), so
#     the machine's own network namespace is not touched
#   - /etc/netns/crn-ID-h<i>/hosts, which `ip netns exec` bind-mounts over
#     /etc/hosts: every host's name resolves to its address in every host
#   - $NETNS_OWNERS/crn-ID, the bed's record: the pid and start time of the
#     process it belongs to and its state directory; a bed whose owner is
#     gone is a leftover, which the next bed's setup removes (a bed without
#     a record is not this code's: it is left alone but for down.sh --all)
#   - the state directory $NETNS_STATE_ROOT/crn-ID: "hosts" (one name a line),
#     "env" (the variables below, for a shell to source), and for each host
#     a private directory homes/<name>/, which a command run as that host
#     (ci/netns/enter.sh) sees at the common path here/
# A host's name (its UTS hostname inside enter.sh) is its namespace's name.
#
# Variables a bed's "env" file sets (and netns_up sets in the caller):
#   NETNS_ID      the run id
#   NETNS_HOSTS   the hosts' names, comma-separated (for mpirun --host)
#   NETNS_STATE   the state directory
#   NETNS_HOME    the common path of each host's private directory
#   NETNS_RSH     the rsh agent (mpirun --mca plm_rsh_agent, or
#                 OMPI_MCA_plm_rsh_agent in the environment)
#   NETNS_ENTER   ci/netns/enter.sh (run a command as a host)

NETNS_PREFIX=crn
NETNS_STATE_ROOT=${NETNS_STATE_ROOT:-/tmp/coll-rdma-netns}
# one place on the machine, whatever state directory each bed uses
NETNS_OWNERS=/run/coll-rdma-netns
NETNS_SUBNET=10.78.0
NETNS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

netns_say() { printf 'netns: %s\n' "$*" >&2; }

# the start time of PID (field 22 of /proc/PID/stat), empty when it is gone
netns_start_time() { awk '{ sub(/^.*\) /, ""); print $20 }' "/proc/$1/stat" 2>/dev/null; }

# netns_ids: the run ids of every bed on this machine (namespaces, /etc/netns
# entries or state directories left by any run, live or dead)
netns_ids() {
    {
        ip netns list 2>/dev/null | awk '{ print $1 }'
        ls -1 /etc/netns 2>/dev/null
        ls -1 "$NETNS_STATE_ROOT" "$NETNS_OWNERS" 2>/dev/null
    } | sed -n "s/^$NETNS_PREFIX-\([0-9a-f]\{6\}\)\(-.*\)\?\$/\1/p" | sort -u
}

# netns_owner ID: status 0 when the process that made bed ID still runs, 1
# when it is gone, 2 when the bed has no record (not made by this code)
netns_owner() {
    local pid start state
    read -r pid start state 2>/dev/null <"$NETNS_OWNERS/$NETNS_PREFIX-$1" || return 2
    [ -n "$pid" ] && [ "$(netns_start_time "$pid")" = "$start" ]
}

# netns_state ID: bed ID's state directory (from its record, else the default)
netns_state() {
    local pid start state
    read -r pid start state 2>/dev/null <"$NETNS_OWNERS/$NETNS_PREFIX-$1"
    echo "${state:-$NETNS_STATE_ROOT/$NETNS_PREFIX-$1}"
}

# netns_down ID: removes bed ID: ends the processes inside its namespaces
# (mpirun, its daemons and ranks: all started by the bed's user), deletes
# the namespaces (with them the veths and the bridge), the /etc/netns entries
# and the state directory (after unmounting anything mounted below it)
netns_down() {
    local id=$1 ns pids=() p m tries
    [[ $id =~ ^[0-9a-f]{6}$ ]] || { netns_say "not a run id: '$id'"; return 1; }
    local names
    names=$(ip netns list 2>/dev/null | awk -v p="$NETNS_PREFIX-$id-" 'index($1, p) == 1 { print $1 }')
    for ns in $names; do
        for p in $(ip netns pids "$ns" 2>/dev/null); do [ "$p" != $$ ] && pids+=("$p"); done
    done
    if [ "${#pids[@]}" -gt 0 ]; then
        kill -TERM "${pids[@]}" 2>/dev/null
        for tries in 1 2 3 4 5 6 7 8 9 10; do
            for p in "${pids[@]}"; do [ -d "/proc/$p" ] && break; p=; done
            [ -z "$p" ] && break
            sleep 0.2
        done
        kill -KILL "${pids[@]}" 2>/dev/null
    fi
    for ns in $names; do ip netns delete "$ns" 2>/dev/null || netns_say "cannot delete namespace $ns"; done
    rm -rf /etc/netns/"$NETNS_PREFIX-$id"-*
    local state
    state=$(netns_state "$id")
    if [ -d "$state" ]; then
        # deepest first (a read-only tmpfs a test put on a host's directory)
        for m in $(awk -v s="$state/" 'index($2, s) == 1 { print $2 }' /proc/mounts | sort -r); do
            umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null
        done
        chattr -R -i "$state" 2>/dev/null
        rm -rf "$state"
    fi
    rm -f "$NETNS_OWNERS/$NETNS_PREFIX-$id"
    return 0
}

# netns_reap: removes the beds whose owner is gone (leftovers of a run that
# was killed before it could clean up); beds of live runs stay, and so do
# beds without a record
netns_reap() {
    local id
    for id in $(netns_ids); do
        netns_owner "$id"
        [ $? = 1 ] || continue
        netns_say "removing leftovers of an earlier run ($NETNS_PREFIX-$id)"
        netns_down "$id"
    done
}

# netns_create N OWNER_PID: makes a bed of N hosts owned by OWNER_PID, sets
# the NETNS_* variables; on any failure removes what it made and returns 1
netns_create() {
    local n=$1 owner=$2 i
    [[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 200 ] || { netns_say "host count must be 1..200, not '$n'"; return 1; }
    [ "$(id -u)" = 0 ] || { netns_say "needs root (ip netns, mount)"; return 1; }
    local tool
    for tool in ip unshare mount hostname; do
        command -v "$tool" >/dev/null || { netns_say "$tool not found"; return 1; }
    done
    netns_reap
    NETNS_ID=$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
    local pfx=$NETNS_PREFIX-$NETNS_ID
    NETNS_STATE=$NETNS_STATE_ROOT/$pfx
    NETNS_HOME=$NETNS_STATE/here
    NETNS_RSH=$NETNS_DIR/rsh.sh
    NETNS_ENTER=$NETNS_DIR/enter.sh
    mkdir -p "$NETNS_OWNERS" "$NETNS_STATE/homes" "$NETNS_HOME" || return 1
    echo "$owner $(netns_start_time "$owner") $NETNS_STATE" >"$NETNS_OWNERS/$pfx"
    local names=()
    for ((i = 0; i < n; i++)); do names+=("$pfx-h$i"); done
    NETNS_HOSTS=$(IFS=,; echo "${names[*]}")
    if ! netns_build "$pfx" "${names[@]}"; then
        netns_say "setting up $pfx failed; removing it"
        netns_down "$NETNS_ID"
        return 1
    fi
    printf '%s\n' "${names[@]}" >"$NETNS_STATE/hosts"
    {
        echo "NETNS_ID=$NETNS_ID"
        echo "NETNS_HOSTS=$NETNS_HOSTS"
        echo "NETNS_STATE=$NETNS_STATE"
        echo "NETNS_HOME=$NETNS_HOME"
        echo "NETNS_RSH=$NETNS_RSH"
        echo "NETNS_ENTER=$NETNS_ENTER"
    } >"$NETNS_STATE/env"
}

netns_build() {  # netns_build PREFIX HOST...
    local pfx=$1 br=$1-br i=0 name
    shift
    ip netns add "$br" || return 1
    ip -n "$br" link set lo up || return 1
    ip -n "$br" link add br0 type bridge mcast_snooping 0 || return 1
    ip -n "$br" link set br0 up || return 1
    local hosts_file
    hosts_file=$(printf '127.0.0.1 localhost\n'; for name in "$@"; do printf '%s.%d %s\n' "$NETNS_SUBNET" $((i + 1)) "$name"; i=$((i + 1)); done)
    i=0
    for name in "$@"; do
        ip netns add "$name" || return 1
        mkdir -p "/etc/netns/$name" "$NETNS_STATE/homes/$name" || return 1
        printf '%s\n' "$hosts_file" >"/etc/netns/$name/hosts"
        ip -n "$br" link add "p$i" type veth peer name eth0 netns "$name" || return 1
        ip -n "$br" link set "p$i" master br0 up || return 1
        ip -n "$name" link set lo up || return 1
        ip -n "$name" addr add "$NETNS_SUBNET.$((i + 1))/24" dev eth0 || return 1
        ip -n "$name" link set eth0 up || return 1
        ip -n "$name" route add 224.0.0.0/4 dev eth0 || return 1
        i=$((i + 1))
    done
}

# netns_up N: netns_create for the calling shell, which owns the bed and
# removes it when it exits, however it exits (EXIT trap; INT and TERM end
# the shell through it). The caller's own EXIT/INT/TERM traps are replaced:
# a caller with cleanup of its own runs it before netns_down in NETNS_ON_EXIT.
netns_up() {
    netns_create "$1" "$$" || return 1
    trap 'eval "${NETNS_ON_EXIT:-:}"; netns_down "$NETNS_ID"' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    netns_say "$1 hosts up: $NETNS_HOSTS (state $NETNS_STATE)"
}

# the state directory of the bed a host name belongs to
netns_state_of_host() {
    local id
    id=$(sed -n "s/^$NETNS_PREFIX-\([0-9a-f]\{6\}\)-h[0-9]\+\$/\1/p" <<<"$1")
    [ -n "$id" ] || return 1
    netns_state "$id"
}
