# shellcheck shell=bash
# Sourced by ci/rxe/guests.sh: `run`, one boot of N qemu guests (TCG) that
# run COMMAND and power off. Owns the guests' lifetime: the network between
# them (user link, direct socket pair, or hub.pl), the control share
# ($RUN_DIR: config, cmd, ready.I, rc.I), a boot that never reaches the
# start barrier retried once, a crashed guest stopping the others, and the
# timeout spent at the rate of the host's load. Every qemu it starts is
# killed on exit (cleanup).

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
