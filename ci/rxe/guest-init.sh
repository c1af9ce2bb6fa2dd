#!/bin/sh
# PID 1 of a test-bed guest (started by the initramfs of ci/rxe/guests.sh).
# The root is the host's / (read-only 9p) under a tmpfs overlay; /run/rxe is
# the run's writable control share (config, cmd, keys, rc.I, ready.I files).
# Sets up the network and Soft-RoCE, starts an ssh server, waits until every
# guest is ready, runs the command, records its status and powers off.

CTL=/run/rxe
. $CTL/config
I=0
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# Every exec of a dynamically linked program costs a lot under emulation: the
# simple steps use the static busybox of the host (package busybox-static).
BB=/bin/busybox

$BB mount -t proc proc /proc
$BB mount -t sysfs sysfs /sys
$BB mount -t devtmpfs devtmpfs /dev
$BB mkdir -p /dev/pts /dev/shm
$BB mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts /dev/pts
$BB mount -t tmpfs -o mode=1777 tmpfs /dev/shm
# bash process substitution and /dev/stdin need these (udev makes them on a host)
$BB ln -sf /proc/self/fd /dev/fd
$BB ln -sf /proc/self/fd/0 /dev/stdin
$BB ln -sf /proc/self/fd/1 /dev/stdout
$BB ln -sf /proc/self/fd/2 /dev/stderr
[ -e /dev/ptmx ] || $BB ln -s pts/ptmx /dev/ptmx

read -r cmdline </proc/cmdline
for a in $cmdline; do
    case $a in rxe_idx=*) I=${a#rxe_idx=} ;; esac
done

stage() {
    if [ -n "$RXE_VERBOSE" ]; then
        read -r up _ </proc/uptime
        echo "guest-init: $up s: $*"
    fi
    return 0
}

# Programs killed by a fault: the kernel's "traps: ... invalid opcode ip:...
# in LIB[base+size]" and "segfault at" lines name the instruction's library.
report_faults() {
    $BB dmesg 2>/dev/null | $BB grep -E 'traps:|segfault at|general protection|invalid opcode' |
        $BB sed "s/^/guest-init: g$I kernel: /" | $BB head -n 20
}

off() {
    report_faults
    $BB sleep 0.5   # let the serial console drain the command's last output
    echo "@@rxe-poweroff@@" >/dev/console
    $BB sleep 0.2
    echo o >/proc/sysrq-trigger
    $BB sleep 30
}

fail() {
    echo "guest-init: $*"
    echo "init: $*" >$CTL/rc.$I
    off
}

stage "started"
$BB hostname g$I
echo g$I >/etc/hostname
{
    echo "127.0.0.1 localhost"
    echo "::1 localhost ip6-localhost ip6-loopback"
    j=0
    while [ $j -lt $RXE_N ]; do
        echo "10.77.0.$((j + 1)) g$j"
        j=$((j + 1))
    done
} >/etc/hosts

ulimit -l unlimited
ulimit -n 65536 2>/dev/null || true

$BB ip link set lo up
# RXE_MTU: eth0's MTU; rxe's path MTU follows it (9000 gives 4096).
[ -z "$RXE_MTU" ] || $BB ip link set eth0 mtu "$RXE_MTU" || fail "cannot set the MTU of eth0 to $RXE_MTU"
$BB ip link set eth0 up || fail "no eth0"
$BB ip addr add 10.77.0.$((I + 1))/24 dev eth0
$BB ip route add 224.0.0.0/4 dev eth0   # IP multicast sockets work without a default route
rdma link add rxe0 type rxe netdev eth0 || fail "rdma link add rxe0 failed"
# Answer pings to multicast/broadcast addresses too (handy for loss checks).
echo 0 >/proc/sys/net/ipv4/icmp_echo_ignore_broadcasts

# Packet loss on the egress of eth0 (a session's jobs change it later).
if [ -n "$RXE_NETEM" ]; then
    # Every packet (RC, UD, multicast, TCP) under the given netem spec.
    /bin/sh "$RXE_DIR/netem.sh" spec "$RXE_NETEM" || fail "tc netem $RXE_NETEM failed"
elif [ -n "$RXE_LOSS" ]; then
    /bin/sh "$RXE_DIR/netem.sh" "$RXE_LOSS_SCOPE" "$RXE_LOSS" || fail "tc netem loss $RXE_LOSS% ($RXE_LOSS_SCOPE) failed"
fi

# ssh server for Open MPI's launcher (key pair made by 'guests.sh prepare').
$BB mkdir -p /root/.ssh /etc/dropbear
$BB chmod 700 /root/.ssh
$BB cp $CTL/authorized_keys /root/.ssh/authorized_keys
$BB cp $CTL/id_ed25519 /root/.ssh/id_dropbear
$BB cp $CTL/host_ed25519 /etc/dropbear/host_ed25519
read -r hostkey <$CTL/host_ed25519.pub
j=0
while [ $j -lt $RXE_N ]; do
    echo "g$j $hostkey"
    echo "10.77.0.$((j + 1)) $hostkey"
    j=$((j + 1))
done >/root/.ssh/known_hosts
$BB chmod 600 /root/.ssh/authorized_keys /root/.ssh/id_dropbear /etc/dropbear/host_ed25519
# root's login shell in this guest (its /etc/passwd is the overlay's copy):
# /bin/sh, so that an ssh session (mpirun's launch of orted on another
# guest) reads none of the host user's bash start-up files. Bash reads
# ~/.bashrc even for `ssh HOST COMMAND`, and the host's may run slow tools
# (on the CI machines `pyenv init`: 8-11 s of every mpirun across the guests
# under emulation, against 2 s for the session itself).
$BB sed -i 's|^\(root:[^:]*:0:0:[^:]*:[^:]*:\).*|\1/bin/sh|' /etc/passwd || fail "cannot set root's shell"
dropbear -r /etc/dropbear/host_ed25519 -s -p 22 -P /run/dropbear.pid || fail "dropbear failed"

# Open MPI inside the guests: launcher and interfaces.
$BB mkdir -p /etc/openmpi
{
    echo "plm_rsh_agent = $RXE_AGENT"
    echo "btl_tcp_if_include = eth0"
    echo "oob_tcp_if_include = eth0"
} >>/etc/openmpi/openmpi-mca-params.conf

stage "set up"
# Start barrier: every guest booted and set up.
: >$CTL/ready.$I
count() { set -- $CTL/$1; [ -e "$1" ] && echo $# || echo 0; }
while [ "$(count 'ready.*')" -lt "$RXE_N" ]; do $BB sleep 0.2; done

if [ "$RXE_PRIMARY" = 1 ] && [ "$I" != 0 ]; then
    # Serve guest 0 until its command has finished.
    while [ ! -e $CTL/rc.0 ]; do $BB sleep 0.5; done
    off
fi

stage "all guests ready"
cd "$RXE_CWD" || fail "cannot cd to $RXE_CWD"
env -i \
    PATH="$PATH" HOME=/root USER=root LOGNAME=root SHELL=/bin/bash TERM=dumb \
    LANG=C.UTF-8 \
    GUEST_INDEX=$I GUEST_COUNT=$RXE_N RXE_BARRIER="$RXE_DIR/barrier" \
    OMPI_MCA_plm_rsh_agent="$RXE_AGENT" \
    OMPI_MCA_btl_tcp_if_include=eth0 OMPI_MCA_oob_tcp_if_include=eth0 \
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    /bin/sh $CTL/cmd </dev/null >/dev/console 2>&1
echo $? >$CTL/rc.$I.tmp
$BB mv $CTL/rc.$I.tmp $CTL/rc.$I

# Keep serving the others (ssh, verbs peers) until every guest is done.
[ "$RXE_PRIMARY" = 1 ] && off
while [ "$(count 'rc.[0-9]')" -lt "$RXE_N" ]; do $BB sleep 0.3; done
off
