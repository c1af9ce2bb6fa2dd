# shellcheck shell=bash
# Sourced by ci/rxe/guests.sh: `prepare`, the test bed's one-time set-up in
# $BUILD (build/rxe): the Debian packages the host needs, Debian's 6.1
# kernel (downloaded, never installed) as vmlinux, an initramfs with the
# modules rxe needs, and the ssh keys the guests share. Idempotent: a stamp
# of the initramfs's /init and module list says when the kernel files are
# current; a lock keeps concurrent prepares (worktrees, steps) from racing.

PACKAGES=(qemu-system-x86 busybox-static ibverbs-utils ibverbs-providers
          rdmacm-utils perftest iproute2 dropbear-bin xz-utils iputils-ping)
# Kernel modules loaded in the guest, in this order (dependencies come along).
MODULES=(virtio_pci virtio_net 9pnet_virtio 9p overlay crc32_generic
         rdma_rxe rdma_ucm ib_umad sch_netem sch_prio cls_u32)

installed() {
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q '^install ok installed$'
}

ensure_packages() {
    command -v dpkg-query >/dev/null || skip "not a Debian system (no dpkg-query)"
    local missing=() p
    for p in "${PACKAGES[@]}"; do installed "$p" || missing+=("$p"); done
    [ ${#missing[@]} -eq 0 ] && return 0
    [ "$(id -u)" = 0 ] || skip "not root and packages missing: ${missing[*]}"
    say "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    # (dpkg serves one installer at a time: wait for another, e.g. the
    # Open MPI 5 chroot's preparation installing debootstrap, rather than
    # skip the whole test bed)
    local wait=(-o DPkg::Lock::Timeout=600)
    if ! apt-get "${wait[@]}" install -y -q --no-install-recommends "${missing[@]}" >"$BUILD/apt.log" 2>&1; then
        apt-get "${wait[@]}" update -q >>"$BUILD/apt.log" 2>&1 || true
        apt-get "${wait[@]}" install -y -q --no-install-recommends "${missing[@]}" >>"$BUILD/apt.log" 2>&1 ||
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
