#!/usr/bin/env bash
# Prints the Debian archive this machine's apt uses: the first archive URI
# (not -security) in /etc/apt, deb822 (.sources) or one-line (.list) format.
# The Open MPI 5 chroot and the no-headers source download take Debian's
# packages from there, never from another site.
set -euo pipefail
uri=$( { cat /etc/apt/sources.list.d/*.sources 2>/dev/null \
            | awk 'tolower($1)=="uris:" {for (i=2;i<=NF;i++) print $i}';
         cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
            | awk '$1=="deb" {for (i=2;i<=NF;i++) if ($i ~ /^[a-z]+:\/\//) {print $i; break}}';
       } | grep -E '/debian/?$' | head -n1 || true)
[ -n "$uri" ] || { echo "no Debian archive URI found in /etc/apt" >&2; exit 1; }
echo "${uri%/}"
