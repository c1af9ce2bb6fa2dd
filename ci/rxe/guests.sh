#!/usr/bin/env bash
# Soft-RoCE test bed: boots qemu guests (software emulation) that run Debian's
# own 6.1 kernel with the rdma_rxe module, so real verbs traffic (RC, UD, UD
# multicast, rdma_cm) can be exercised on a machine without RDMA hardware.
#
#   ci/rxe/guests.sh prepare
#   ci/rxe/guests.sh run [--guests N] [--loss PCT] [--loss-scope mcast|all]
#                        [--netem "SPEC"] [--timeout SECONDS] [--primary]
#                        -- COMMAND [ARGS...]
#   ci/rxe/guests.sh session start [--guests N] [--timeout SECONDS]  (prints DIR)
#   ci/rxe/guests.sh session exec DIR [--all|--guest I] [--timeout SECONDS] -- COMMAND [ARGS...]
#   ci/rxe/guests.sh session alive|stop DIR
#   (environment: RXE_BOOT_TIMEOUT, RXE_MTU, RXE_MEM, RXE_SMP, RXE_VERBOSE)
#
# See docs/testbed.md. Exit status of 'run': 0 when COMMAND exited 0 in every
# guest (with --primary: in guest 0), 1 otherwise, 77 ("SKIPPED: ...") when the
# test bed cannot run on this machine, 2 for a usage error.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BUILD=${RXE_BUILD_DIR:-$REPO/build/rxe}

PACKAGES=(qemu-system-x86 busybox-static ibverbs-utils ibverbs-providers
          rdmacm-utils perftest iproute2 dropbear-bin xz-utils iputils-ping)
# Kernel modules loaded in the guest, in this order (dependencies come along).
MODULES=(virtio_pci virtio_net 9pnet_virtio 9p overlay crc32_generic
         rdma_rxe rdma_ucm ib_umad sch_netem sch_prio cls_u32)

say()  { printf 'rxe: %s\n' "$*" >&2; }
die()  { printf 'rxe: error: %s\n' "$*" >&2; exit 1; }
skip() { printf 'SKIPPED: %s\n' "$*" >&2; exit 77; }

installed() {
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q '^install ok installed$'
}

# ---------------------------------------------------------------- prepare ---

ensure_packages() {
    command -v dpkg-query >/dev/null || skip "not a Debian system (no dpkg-query)"
    local missing=() p
    for p in "${PACKAGES[@]}"; do installed "$p" || missing+=("$p"); done
    [ ${#missing[@]} -eq 0 ] && return 0
    [ "$(id -u)" = 0 ] || skip "not root and packages missing: ${missing[*]}"
    say "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -q --no-install-recommends "${missing[@]}" >"$BUILD/apt.log" 2>&1; then
        apt-get update -q >>"$BUILD/apt.log" 2>&1 || true
        apt-get install -y -q --no-install-recommends "${missing[@]}" >>"$BUILD/apt.log" 2>&1 ||
            skip "cannot install ${missing[*]} (see $BUILD/apt.log)"
    fi
}

# Newest linux-image-6.1.0-N-amd64 (not cloud, not rt) that apt can fetch.
pick_kernel_package() {
    local p
    for p in $(apt-cache pkgnames linux-image-6.1.0- 2>/dev/null |
               grep -E '^linux-image-6\.1\.0-[0-9]+-amd64$' | sort -V -r); do
        if apt-cache policy "$p" 2>/dev/null | grep 'Candidate: [0-9]' >/dev/null; then
            echo "$p"; return 0
        fi
    done
    return 1
}

ensure_kernel_deb() {
    local deb
    deb=$(ls "$BUILD"/dl/linux-image-6.1.0-*-amd64_*.deb 2>/dev/null | head -n1 || true)
    if [ -n "$deb" ]; then echo "$deb"; return 0; fi
    mkdir -p "$BUILD/dl"
    local pkg
    pkg=$(pick_kernel_package) || {
        apt-get update -q >/dev/null 2>&1 || true
        pkg=$(pick_kernel_package) || skip "no linux-image-6.1.0-*-amd64 package known to apt"
    }
    say "downloading $pkg"
    # apt-get download warns (harmlessly) that _apt cannot write here as root.
    (cd "$BUILD/dl" && apt-get download "$pkg" >/dev/null 2>&1) || {
        apt-get update -q >/dev/null 2>&1 || true
        (cd "$BUILD/dl" && apt-get download "$pkg" >/dev/null 2>&1) ||
            skip "apt-get download $pkg failed"
    }
    ls "$BUILD"/dl/linux-image-6.1.0-*-amd64_*.deb | head -n1
}

# The initramfs /init: loads the modules, mounts the host root read-only
# (9p) under a tmpfs overlay and hands over to ci/rxe/guest-init.sh.
initramfs_init() {
    cat <<EOF
#!/bin/busybox sh
/bin/busybox mkdir -p /proc /sys /dev /sbin /usr/bin /usr/sbin
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
for m in ${MODULES[*]}; do
    modprobe \$m || echo "initramfs: modprobe \$m failed"
done
mkdir -p /lower /rw /newroot
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144,cache=loose hostroot /lower ||
    { echo "initramfs: cannot mount host root"; poweroff -f; }
mount -t tmpfs -o mode=0755 tmpfs /rw
mkdir -p /rw/upper /rw/work
mount -t overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work overlay /newroot ||
    { echo "initramfs: cannot mount overlay"; poweroff -f; }
mkdir -p /newroot/run
mount -t tmpfs -o mode=0755 tmpfs /newroot/run
mkdir -p /newroot/run/rxe
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 rxectl /newroot/run/rxe ||
    { echo "initramfs: cannot mount control share"; poweroff -f; }
umount /proc /sys
umount /dev
exec switch_root /newroot /bin/sh /run/rxe/guest-init.sh
EOF
}

build_initramfs() {
    local kroot=$1 kver=$2 out=$3
    local ird="$BUILD/initramfs.d"
    rm -rf "$ird"
    mkdir -p "$ird/bin" "$ird/lib/modules/$kver"
    cp /bin/busybox "$ird/bin/busybox"
    initramfs_init >"$ird/init"
    chmod 755 "$ird/init"
    # Copy the wanted modules and everything they depend on (modules.dep).
    local mdir="$kroot/lib/modules/$kver"
    local files
    files=$(awk -v want="${MODULES[*]}" '
        BEGIN { n = split(want, w, " "); for (i = 1; i <= n; i++) { m = w[i]; gsub("-", "_", m); wanted[m] = 1 } }
        {
            key = $1; sub(":$", "", key); deps[key] = $0
            name = key; sub(".*/", "", name); sub("\\.ko.*$", "", name); gsub("-", "_", name)
            if (name in wanted) todo[key] = 1
        }
        END {
            for (k in todo) { print k; m = split(deps[k], d, " "); for (i = 2; i <= m; i++) print d[i] }
        }' "$mdir/modules.dep" | sort -u)
    local f
    for f in $files; do
        mkdir -p "$ird/lib/modules/$kver/$(dirname "$f")"
        cp "$mdir/$f" "$ird/lib/modules/$kver/$f"
    done
    cp "$mdir"/modules.order "$mdir"/modules.builtin "$ird/lib/modules/$kver/" 2>/dev/null || true
    busybox depmod -b "$ird" "$kver"
    (cd "$ird" && find . | busybox cpio -o -H newc 2>/dev/null | gzip -1) >"$out.tmp"
    mv "$out.tmp" "$out"
    rm -rf "$ird"
}

extract_vmlinux() {
    local vmlinuz=$1 out=$2 off
    off=$(perl -0777 -ne 'print index($_, "\xfd7zXZ\x00")' "$vmlinuz")
    [ "$off" -ge 0 ] || die "no xz payload in $vmlinuz"
    tail -c +$((off + 1)) "$vmlinuz" | xz -dc --single-stream >"$out.tmp" 2>/dev/null || true
    [ "$(head -c 4 "$out.tmp" | od -An -c | tr -d ' ')" = '177ELF' ] ||
        die "could not extract an ELF vmlinux from $vmlinuz"
    mv "$out.tmp" "$out"
}

ensure_ssh_keys() {
    local d="$BUILD/ssh"
    [ -s "$d/authorized_keys" ] && [ -s "$d/host_ed25519.pub" ] && [ -s "$d/id_ed25519" ] && return 0
    rm -rf "$d"; mkdir -p "$d"; chmod 700 "$d"
    dropbearkey -t ed25519 -f "$d/host_ed25519" >/dev/null 2>&1
    dropbearkey -t ed25519 -f "$d/id_ed25519" >/dev/null 2>&1
    dropbearkey -y -f "$d/id_ed25519" 2>/dev/null | grep '^ssh-' >"$d/authorized_keys"
    dropbearkey -y -f "$d/host_ed25519" 2>/dev/null | grep '^ssh-' | cut -d' ' -f1,2 >"$d/host_ed25519.pub"
    [ -s "$d/authorized_keys" ] && [ -s "$d/host_ed25519.pub" ] || die "dropbearkey failed"
}

prepare() {
    mkdir -p "$BUILD"
    exec 9>"$BUILD/.prepare.lock"
    flock 9
    prepare_locked
    flock -u 9
    exec 9>&-
}

prepare_locked() {
    ensure_packages
    command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 not available"
    [ -x /bin/busybox ] || skip "busybox not available"
    local stamp_want
    stamp_want=$( { initramfs_init; echo "${MODULES[*]}"; } | sha256sum | cut -c1-16)
    if [ -s "$BUILD/vmlinux" ] && [ -s "$BUILD/initramfs.gz" ] &&
       [ "$(cat "$BUILD/stamp" 2>/dev/null)" = "$stamp_want" ]; then
        ensure_ssh_keys
        return 0
    fi
    local deb kroot="$BUILD/kroot" kver
    deb=$(ensure_kernel_deb)
    say "unpacking $(basename "$deb")"
    rm -rf "$kroot"
    dpkg -x "$deb" "$kroot"
    kver=$(ls "$kroot/lib/modules" | head -n1)
    [ -n "$kver" ] || die "no modules in $deb"
    busybox depmod -b "$kroot" "$kver"
    extract_vmlinux "$kroot/boot/vmlinuz-$kver" "$BUILD/vmlinux"
    build_initramfs "$kroot" "$kver" "$BUILD/initramfs.gz"
    echo "$kver" >"$BUILD/kernel-version"
    rm -rf "$kroot"
    ensure_ssh_keys
    echo "$stamp_want" >"$BUILD/stamp"
    say "prepared kernel $kver in $BUILD"
}

# -------------------------------------------------------------------- run ---

usage() {
    sed -n '6,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,3\}//' >&2
    exit 2
}

# A fresh run directory. Keeps the last 20, but never one changed in the last
# 30 minutes: a running guest's directory changes every half second (its
# host-loadavg), so another run's guests never lose theirs.
new_run_dir() {
    mkdir -p "$BUILD/runs"
    local old
    { ls -1dt "$BUILD"/runs/*/ 2>/dev/null || true; } | tail -n +21 |
        while IFS= read -r old; do
            [ -z "$(find "$old" -maxdepth 0 -mmin -30)" ] && rm -rf "$old"
        done
    mktemp -d "$BUILD/runs/$(date +%Y%m%d-%H%M%S)-XXXX"
}

# Host load per core as a slow-down factor, 1 to 6: timeouts are spent at
# that rate, since TCG guests slow down with the host without their own
# load average showing it.
load_factor_awk='{ f = $1 / cores; if (f < 1) f = 1; if (f > 6) f = 6 }'
# spent_after MS_SO_FAR MS_ELAPSED: milliseconds of timeout spent
spent_after() {
    awk -v s="$1" -v d="$2" -v cores="$(nproc)" "$load_factor_awk"' { printf "%d\n", s + d / f }' /proc/loadavg
}

# qemu and kernel lines that are no output of COMMAND.
NOISE='hub 0 is not connected to host network|terminating on signal|sysrq: Power Off|reboot: Power down'

RUN_PIDS=()
SOCK_DIR=
RUN_DIR=
cleanup() {
    local p
    for p in "${RUN_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    if [ -n "$SOCK_DIR" ]; then
        rm -f "$SOCK_DIR"/*.sock
        [ "$SOCK_DIR" = "$RUN_DIR" ] || rmdir "$SOCK_DIR" 2>/dev/null || true
    fi
}

alive() { kill -0 "$1" 2>/dev/null; }

# Quotes a word for /bin/sh (the guests' dash): 'it'\''s'.
shq() { printf "'%s'" "${1//\'/\'\\\'\'}"; }

run() {
    local n=1 loss= scope=${RXE_LOSS_SCOPE:-mcast} netem= timeout=600 primary=0
    while [ $# -gt 0 ]; do
        case $1 in
            --guests) n=$2; shift 2 ;;
            --guests=*) n=${1#*=}; shift ;;
            --loss) loss=$2; shift 2 ;;
            --loss=*) loss=${1#*=}; shift ;;
            --loss-scope) scope=$2; shift 2 ;;
            --loss-scope=*) scope=${1#*=}; shift ;;
            --netem) netem=$2; shift 2 ;;
            --netem=*) netem=${1#*=}; shift ;;
            --timeout) timeout=$2; shift 2 ;;
            --timeout=*) timeout=${1#*=}; shift ;;
            --primary) primary=1; shift ;;
            --) shift; break ;;
            *) echo "rxe: unknown option $1" >&2; usage ;;
        esac
    done
    [ $# -gt 0 ] || usage
    [[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 8 ] || die "--guests must be 1..8"
    [[ $timeout =~ ^[0-9]+$ ]] || die "--timeout must be a number of seconds"
    [ -z "$loss" ] || [[ $loss =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "--loss must be a percentage"
    case $scope in mcast|all) ;; *) die "--loss-scope must be mcast or all" ;; esac
    [ -z "$netem" ] || [ -z "$loss" ] || die "--netem and --loss exclude each other"
    [ -z "$netem" ] || [[ $netem =~ ^[a-z0-9.%\ ]+$ ]] || die "--netem: only netem words, numbers, units and % (e.g. \"loss 5% duplicate 1% delay 1ms 1ms\")"

    prepare

    if [ -n "${RXE_RUN_DIR:-}" ]; then
        RUN_DIR=$RXE_RUN_DIR   # made by 'session start'
    else
        RUN_DIR=$(new_run_dir)
    fi
    trap cleanup EXIT
    trap 'exit 130' INT TERM

    # Everything the guests need, in the writable control share.
    cp "$HERE/guest-init.sh" "$RUN_DIR/guest-init.sh"
    cp "$BUILD/ssh/host_ed25519" "$BUILD/ssh/host_ed25519.pub" "$BUILD/ssh/id_ed25519" \
       "$BUILD/ssh/authorized_keys" "$RUN_DIR/"
    {
        echo "RXE_N=$n"
        echo "RXE_PRIMARY=$primary"
        echo "RXE_LOSS=$loss"
        echo "RXE_LOSS_SCOPE=$scope"
        echo "RXE_NETEM=$(shq "$netem")"
        echo "RXE_MTU=$(shq "${RXE_MTU:-}")"
        echo "RXE_CWD=$(shq "$PWD")"
        echo "RXE_AGENT=$(shq "$HERE/rsh-agent")"
        echo "RXE_DIR=$(shq "$HERE")"
        echo "RXE_VERBOSE=$(shq "${RXE_VERBOSE:-}")"
    } >"$RUN_DIR/config"
    cp /proc/loadavg "$RUN_DIR/host-loadavg"
    # COMMAND for /bin/sh: every argument in single quotes.
    local a
    {
        printf 'exec'
        for a in "$@"; do printf ' %s' "$(shq "$a")"; done
        printf '\n'
    } >"$RUN_DIR/cmd"

    local mem=${RXE_MEM:-1024} smp=${RXE_SMP:-2} kquiet="quiet loglevel=3"
    [ -n "${RXE_VERBOSE:-}" ] && kquiet=
    local kver; kver=$(cat "$BUILD/kernel-version")

    # Network: one guest: a user-mode (slirp) link, isolated; two guests: a
    # direct datagram link over Unix sockets; more: a hub process on the host.
    # Unix socket paths are limited to 107 bytes.
    SOCK_DIR=$RUN_DIR
    [ ${#SOCK_DIR} -le 90 ] || SOCK_DIR=$(mktemp -d /tmp/rxe-sock.XXXXXX)
    local hub_sock="$SOCK_DIR/hub.sock"
    if [ "$n" -ge 3 ]; then
        perl "$HERE/hub.pl" "$hub_sock" "$n" "$SOCK_DIR" &
        RUN_PIDS+=($!)
        local t
        for t in $(seq 50); do [ -S "$hub_sock" ] && break; sleep 0.1; done
        [ -S "$hub_sock" ] || die "hub did not start"
    fi

    # A guest that never reaches the start barrier (its ready.I file) has
    # run nothing of the product yet: that is the test bed failing (once in
    # CI a TCG guest printed nothing at all for 1100 s while the other
    # waited at the barrier), so all guests are booted again, once, after
    # RXE_BOOT_TIMEOUT seconds (spent at the load rate, as the timeout is).
    local boot_timeout=${RXE_BOOT_TIMEOUT:-240} attempt=1 boot_stuck
    [[ $boot_timeout =~ ^[0-9]+$ ]] || die "RXE_BOOT_TIMEOUT must be a number of seconds"
    local start=$SECONDS i net mac
    local qpids=()
    local spent_ms last_ms now_ms timed_out running g0_end ready
    local -a crashed
  while :; do
    say "booting $n guest(s) (kernel $kver, run dir ${RUN_DIR#$REPO/}$([ $attempt = 1 ] || echo ", attempt $attempt"))"
    qpids=()
    for ((i = 0; i < n; i++)); do
        mac=$(printf '52:54:00:77:00:%02x' $((i + 1)))
        if [ "$n" -eq 1 ]; then
            # A link with a peer that drains it: on a hub port with nothing
            # else attached, the transmit queue stalls once multicast frames
            # (rxe sends them out of eth0) fill it, and all rxe traffic stops.
            # restrict=on keeps the guest off the host's network.
            net="user,id=n0,restrict=on"
        elif [ "$n" -eq 2 ]; then
            net="dgram,id=n0,local.type=unix,local.path=$SOCK_DIR/g$i.sock,remote.type=unix,remote.path=$SOCK_DIR/g$((1 - i)).sock"
        else
            net="dgram,id=n0,local.type=unix,local.path=$SOCK_DIR/g$i.sock,remote.type=unix,remote.path=$hub_sock"
        fi
        qemu-system-x86_64 \
            -accel tcg,thread=multi -cpu max -smp "$smp" -m "$mem" \
            -nodefaults -no-user-config -display none -monitor none \
            -serial stdio -no-reboot \
            -kernel "$BUILD/vmlinux" -initrd "$BUILD/initramfs.gz" \
            -append "console=ttyS0 $kquiet panic=-1 mitigations=off audit=0 no_timer_check ${RXE_KERNEL_ARGS:-} rxe_idx=$i" \
            -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
            -virtfs "local,path=$RUN_DIR,mount_tag=rxectl,security_model=none" \
            -netdev "$net" -device "virtio-net-pci,netdev=n0,mac=$mac,romfile=" \
            </dev/null > >(tee "$RUN_DIR/g$i.log" | awk -v p="[g$i] " '
                /@@rxe-poweroff@@/ { done = 1 }
                done || /'"$NOISE"'/ { next }
                { sub(/\r+$/, ""); print p $0; fflush() }') 2>&1 &
        qpids+=($!)
        RUN_PIDS+=($!)
    done

    # Wait for the guests, enforcing the timeout. The guests run under TCG:
    # when the host is busy they slow down without their own load average
    # showing it. So the host's /proc/loadavg is mirrored into the control
    # share (host-loadavg: ci/mpi-tests.sh in a guest scales its per-test
    # timeouts by it), and the timeout is spent at the rate of the host's
    # load per core, from 1 up to 6 times slower, as those timeouts are.
    spent_ms=0 timed_out=0 g0_end= boot_stuck=0
    last_ms=$(date +%s%3N)
    crashed=()
    while :; do
        running=0
        for ((i = 0; i < n; i++)); do
            if alive "${qpids[$i]}"; then
                running=$((running + 1))
                # A kernel panic: the guest never gets anywhere.
                if [ -z "${crashed[$i]:-}" ] && grep -aq 'Kernel panic' "$RUN_DIR/g$i.log" 2>/dev/null; then
                    crashed[$i]=1
                    sleep 1
                    kill "${qpids[$i]}" 2>/dev/null || true
                fi
            elif [ -z "${crashed[$i]:-}" ] && [ ! -e "$RUN_DIR/rc.$i" ] &&
                 ! { [ "$primary" = 1 ] && [ -e "$RUN_DIR/rc.0" ]; }; then
                crashed[$i]=1   # gone without a result
            fi
        done
        [ $running -eq 0 ] && break
        if [ ${#crashed[@]} -gt 0 ]; then
            # The others would wait for it forever (start barrier, ssh peer).
            for ((i = 0; i < n; i++)); do kill "${qpids[$i]}" 2>/dev/null || true; done
            sleep 1
            for ((i = 0; i < n; i++)); do kill -9 "${qpids[$i]}" 2>/dev/null || true; done
            break
        fi
        if [ "$primary" = 1 ] && ! alive "${qpids[0]}"; then
            # Guest 0 is done: the others only served it and power off by
            # themselves; stop those that have not within 5 s.
            [ -n "$g0_end" ] || g0_end=$SECONDS
            if [ $((SECONDS - g0_end)) -ge 5 ]; then
                for ((i = 1; i < n; i++)); do kill "${qpids[$i]}" 2>/dev/null || true; done
            fi
        fi
        cp /proc/loadavg "$RUN_DIR/host-loadavg.new" && mv -f "$RUN_DIR/host-loadavg.new" "$RUN_DIR/host-loadavg"
        now_ms=$(date +%s%3N)
        spent_ms=$(spent_after "$spent_ms" $((now_ms - last_ms)))
        last_ms=$now_ms
        ready=0
        for ((i = 0; i < n; i++)); do
            [ -e "$RUN_DIR/ready.$i" ] || [ -e "$RUN_DIR/rc.$i" ] || break
            ready=$((ready + 1))
        done
        if [ $ready -lt $n ] && [ "$spent_ms" -ge $((boot_timeout * 1000)) ]; then
            boot_stuck=1
        fi
        if [ "$spent_ms" -ge $((timeout * 1000)) ] || [ $boot_stuck = 1 ]; then
            [ $boot_stuck = 1 ] || timed_out=1
            for ((i = 0; i < n; i++)); do kill "${qpids[$i]}" 2>/dev/null || true; done
            sleep 1
            for ((i = 0; i < n; i++)); do kill -9 "${qpids[$i]}" 2>/dev/null || true; done
            break
        fi
        sleep 0.5
    done
    wait "${qpids[@]}" 2>/dev/null || true
    sleep 0.2   # let the output filters drain
    [ $boot_stuck = 1 ] || break
    for ((i = 0; i < n; i++)); do
        [ -e "$RUN_DIR/ready.$i" ] && continue
        echo "[g$i] *** did not finish booting within ${boot_timeout}s (spent at the rate of the host's load per core); last output:"
        tr -d '\r' <"$RUN_DIR/g$i.log" | { grep -avE "$NOISE" || true; } | tail -n 15 | sed "s/^/[g$i] | /"
    done
    [ $attempt -lt 2 ] || break
    say "the test bed failed before any guest ran the command: booting every guest again"
    for ((i = 0; i < n; i++)); do
        mv -f "$RUN_DIR/g$i.log" "$RUN_DIR/g$i.attempt$attempt.log" 2>/dev/null || true
    done
    rm -f "$RUN_DIR"/ready.* "$RUN_DIR"/rc.*
    attempt=$((attempt + 1))
  done

    local status=0 rc last=$((primary == 1 ? 1 : n))
    for ((i = 0; i < last; i++)); do
        rc=$(cat "$RUN_DIR/rc.$i" 2>/dev/null || true)
        if [ "$rc" = 0 ]; then
            continue
        fi
        status=1
        if [ -n "$rc" ]; then
            echo "[g$i] *** COMMAND exited with status $rc"
        else
            if [ -n "${crashed[$i]:-}" ]; then
                echo "[g$i] *** guest crashed; last output:"
            elif [ -n "${crashed[*]}" ]; then
                echo "[g$i] *** stopped because another guest crashed; last output:"
            elif [ $boot_stuck = 1 ]; then
                echo "[g$i] *** the test bed did not boot every guest, in $attempt attempts"
                continue
            elif [ $timed_out = 1 ]; then
                echo "[g$i] *** TIMEOUT: killed after ${timeout}s (spent at the rate of the host's load per core); last output:"
            else
                echo "[g$i] *** guest stopped without a result; last output:"
            fi
            tr -d '\r' <"$RUN_DIR/g$i.log" | { grep -avE "$NOISE" || true; } | tail -n 15 | sed "s/^/[g$i] | /"
        fi
    done
    say "$n guest(s) finished in $((SECONDS - start)) s: $([ $status = 0 ] && echo ok || echo FAILED)"
    return $status
}

# ---------------------------------------------------------------- session ---
# One boot of the guests for many commands: 'session start' boots them with
# ci/rxe/serve.sh as every guest's COMMAND and prints the run directory, which
# names the session; 'session exec' posts a job there and waits for it
# (the job runs in guest 0, in every guest with --all, in guest I with
# --guest I); 'session stop' lets the guests power off. Each guest runs its
# jobs one after another in posting order; jobs for different guests, posted
# by 'session exec' calls running side by side, run side by side. The run
# directory is unique per session (mktemp) and holds its sockets, so sessions
# and runs of several worktrees or users never meet.

session_start() {
    local n=2 timeout=14400
    while [ $# -gt 0 ]; do
        case $1 in
            --guests) n=$2; shift 2 ;;
            --timeout) timeout=$2; shift 2 ;;
            *) echo "rxe: unknown option $1" >&2; usage ;;
        esac
    done
    prepare
    local dir pid ready i
    dir=$(new_run_dir)
    RXE_RUN_DIR=$dir setsid "$HERE/guests.sh" run --guests "$n" --timeout "$timeout" -- \
        /bin/sh "$HERE/serve.sh" >"$dir/session.log" 2>&1 </dev/null &
    pid=$!
    echo "$pid" >"$dir/session.pid"
    # run's own boot timeout (and its one retry) bounds this wait.
    while :; do
        ready=0
        for ((i = 0; i < n; i++)); do [ -e "$dir/ready.$i" ] && ready=$((ready + 1)); done
        [ "$ready" -lt "$n" ] || break
        if ! alive "$pid"; then
            sed 's/^/  session: /' "$dir/session.log" | tail -20 >&2
            die "the guests of the session did not boot (log: $dir/session.log)"
        fi
        sleep 0.3
    done
    say "session of $n guest(s) ready: $dir"
    echo "$dir"
}

session_dir_check() {
    [ -f "$1/session.pid" ] && [ -f "$1/config" ] || die "no session in '$1' (give the directory 'session start' printed)"
}

session_exec() {
    local dir=${1:-} where=0 timeout=600
    shift || true
    session_dir_check "$dir"
    while [ $# -gt 0 ]; do
        case $1 in
            --all) where=all; shift ;;
            --guest) where=$2; shift 2 ;;
            --timeout) timeout=$2; shift 2 ;;
            --) shift; break ;;
            *) echo "rxe: unknown option $1" >&2; usage ;;
        esac
    done
    [ $# -gt 0 ] || usage
    [[ $timeout =~ ^[0-9]+$ ]] || die "--timeout must be a number of seconds"
    local pid n k a i
    pid=$(cat "$dir/session.pid")
    n=$(sed -n 's/^RXE_N=//p' "$dir/config")
    [ "$where" = all ] || { [[ $where =~ ^[0-9]+$ ]] && [ "$where" -lt "$n" ]; } ||
        die "--guest must be a guest of the session, 0 to $((n - 1)), not '$where'"
    # Jobs are numbered in posting order, one poster at a time; the lock is
    # let go once the job is posted, so that a job for another guest can be
    # posted while this one runs (each guest still runs its jobs in order).
    exec 8>"$dir/.exec.lock"
    flock 8
    k=$(( $(cat "$dir/job-count" 2>/dev/null || echo 0) + 1 ))
    echo "$k" >"$dir/job-count"
    echo "$where" >"$dir/job.$k.where"
    {
        printf 'exec'
        for a in "$@"; do printf ' %s' "$(shq "$a")"; done
        printf '\n'
    } >"$dir/job.$k.tmp"
    mv "$dir/job.$k.tmp" "$dir/job.$k"
    exec 8>&-
    local guests=("$where")
    [ "$where" = all ] && guests=($(seq 0 $((n - 1))))

    local spent_ms=0 last_ms now_ms done_count status=0 gone=0 cancelled=0 cancel_wait=0
    last_ms=$(date +%s%3N)
    while :; do
        done_count=0
        for i in "${guests[@]}"; do [ -e "$dir/job-rc.$k.$i" ] && done_count=$((done_count + 1)); done
        [ "$done_count" -lt "${#guests[@]}" ] || break
        if ! alive "$pid"; then gone=1; break; fi
        now_ms=$(date +%s%3N)
        spent_ms=$(spent_after "$spent_ms" $((now_ms - last_ms)))
        last_ms=$now_ms
        if [ $cancelled = 0 ] && [ "$spent_ms" -ge $((timeout * 1000)) ]; then
            cancelled=1
            : >"$dir/job-cancel.$k"
        fi
        # serve.sh kills a cancelled job within seconds; a guest that does
        # not is stuck, and so is the session
        if [ $cancelled = 1 ]; then
            cancel_wait=$((cancel_wait + 1))
            [ $cancel_wait -lt 120 ] || { gone=1; break; }
        fi
        sleep 0.5
    done
    local rc
    for i in "${guests[@]}"; do
        sed "s/^/[g$i] /" "$dir/job-out.$k.$i" 2>/dev/null || true
        rc=$(cat "$dir/job-rc.$k.$i" 2>/dev/null || true)
        if [ "$rc" = 0 ]; then continue; fi
        status=1
        if [ $cancelled = 1 ]; then
            echo "[g$i] *** TIMEOUT: killed after ${timeout}s (spent at the rate of the host's load per core)"
        elif [ -n "$rc" ]; then
            echo "[g$i] *** COMMAND exited with status $rc"
        fi
    done
    if [ $gone = 1 ]; then
        echo "rxe: *** the session's guests stopped during job $k; last lines of its log:"
        tail -n 15 "$dir/session.log" | sed 's/^/rxe: | /'
        for ((i = 0; i < n; i++)); do
            tr -d '\r' <"$dir/g$i.log" 2>/dev/null | { grep -avE "$NOISE" || true; } | tail -n 5 | sed "s/^/[g$i] | /"
        done
        status=1
    fi
    return $status
}

session_alive() {
    session_dir_check "${1:-}"
    alive "$(cat "$1/session.pid")"
}

session_stop() {
    local dir=${1:-} pid t
    session_dir_check "$dir"
    pid=$(cat "$dir/session.pid")
    : >"$dir/stop"
    for t in $(seq 120); do alive "$pid" || break; sleep 0.5; done
    # run's own cleanup stops the guests
    if alive "$pid"; then kill "$pid" 2>/dev/null || true; sleep 1; fi
    tail -n 1 "$dir/session.log" >&2
}

session() {
    case ${1:-} in
        start) shift; session_start "$@" ;;
        exec) shift; session_exec "$@" ;;
        alive) shift; session_alive "$@" ;;
        stop) shift; session_stop "$@" ;;
        *) usage ;;
    esac
}

case ${1:-} in
    prepare) shift; prepare ;;
    run) shift; run "$@" ;;
    session) shift; session "$@" ;;
    *) usage ;;
esac
