# coll rdma: top-level targets. `make help` lists them.

CARGO ?= cargo
# rustup installs into ~/.cargo/bin, which non-login shells may not have on PATH
ifneq ($(wildcard $(HOME)/.cargo/bin/cargo),)
export PATH := $(HOME)/.cargo/bin:$(PATH)
endif
# mpirun refuses to run as root without these (CI runs as root)
ifeq ($(shell id -u),0)
export OMPI_ALLOW_RUN_AS_ROOT := 1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM := 1
endif

BUILD      := build
COMPDIR    := $(BUILD)/components
COMPONENT  := $(COMPDIR)/mca_coll_rdma.so
# cargo's output follows CARGO_TARGET_DIR (make check-noheaders builds apart)
CARGO_OUT  := $(or $(CARGO_TARGET_DIR),target)/release
INSTALLDIR := $(if $(DESTDIR),$(DESTDIR),$(HOME)/.openmpi/components)
# Written by make install where mpirun replaces the ranks' component path
# (Open MPI 5): the exports that make the ranks search INSTALLDIR
ENVFILE    := $(HOME)/.openmpi/coll-rdma-env.sh
# SELFCHECK=0: make install skips the 2-rank self-check job (the default
# with DESTDIR, a staging directory that mpirun does not search)
SELFCHECK  ?= $(if $(DESTDIR),0,1)
# fbcast (coll-rdma/fbcast): the command, its library and header
FBCAST_SRC := coll-rdma/fbcast
PREFIX     ?= $(HOME)/.local

.PHONY: all build build-fbcast setup install check check-udp test-udp test-fbcast test-rust test-mpi tune test-tune test-scale soak fuzz-settings sim params-doc check-rxe test-rxe check-ompi5 check-ompi5-source check-noheaders check-intree bench bench-udp bench-ompi5 clean help

all: build

help:
	@echo "make / make build  set up (ci/setup.sh), cargo build --release -p coll-rdma,"
	@echo "                   copy the component to $(COMPONENT); then build-fbcast"
	@echo "make build-fbcast  cargo build --release -p coll-rdma -p coll-rdma-fbcast: fbcast to $(BUILD)/bin/,"
	@echo "                   its library to $(BUILD)/lib/, its header to $(BUILD)/include/"
	@echo "                   (a failure here is a warning: the component stays built)"
	@echo "make build OMPI_SOURCE=/path/to/openmpi-X.Y.Z"
	@echo "                   build against a configured Open MPI source tree of the"
	@echo "                   installed version, for an Open MPI installed without its"
	@echo "                   internal headers (ompi-patches/README.md)"
	@echo "make install       copy it to \$$DESTDIR if set, else ~/.openmpi/components/"
	@echo "                   (Open MPI 5: also writes ~/.openmpi/coll-rdma-env.sh to source, since"
	@echo "                   its mpirun replaces the ranks' component path), coll-rdma-selfcheck,"
	@echo "                   and fbcast, libcoll_rdma_fbcast.so, coll_rdma_fbcast.h to"
	@echo "                   \$$PREFIX/bin, lib, include (PREFIX default ~/.local); then runs"
	@echo "                   coll-rdma-selfcheck (a 2-rank mpirun job; SELFCHECK=0 skips it, the default"
	@echo "                   with DESTDIR): only wrong results or a failing job fail the install; a"
	@echo "                   check that cannot run is a note, a component not serving a warning"
	@echo "make check         build (the test beds' one-time preparation starts beside it, ci/check-prepare.sh),"
	@echo "                   ci/core-deps-check.sh, ci/cargo-units-check.sh, cargo test --profile release-tests --workspace, ci/mpi-tests.sh,"
	@echo "                   ci/tune-tests.sh, ci/fbcast-tests.sh, ci/udp-tests.sh (SKIP_UDP=1 leaves it out),"
	@echo "                   ci/rxe-tests.sh (verbs on Soft-RoCE in qemu guests),"
	@echo "                   check-noheaders, check-ompi5; ends with each stage's seconds"
	@echo "                   (ci/stage.sh, table in $(BUILD)/check-times.tsv)"
	@echo "make test-rust     only the cargo tests: cargo test --profile release-tests --workspace (release's"
	@echo "                   optimisation without its LTO, in target/release-tests; Cargo.toml says why)"
	@echo "                   (cargo test -p coll-rdma-core needs no Open MPI: the collectives' fabric tests)"
	@echo "make test-mpi      only the MPI tests (ci/mpi-tests.sh), dealt to MPI_TESTS_JOBS instances side by"
	@echo "                   side (ci/mpi-tests-jobs.sh; default auto: 2 on a machine with room, else 1)"
	@echo "make test-fbcast   only fbcast's MPI tests (ci/fbcast-tests.sh; part of make check)"
	@echo "make tune          build, then coll-rdma-tune at np=2, quick mode (ci/tune.sh): short paired"
	@echo "                   sweeps of the parameters that matter here; writes $(BUILD)/mca-params.conf"
	@echo "                   (docs/tuning.md). TUNE_ARGS=... more options (--full, --np 2,4)"
	@echo "make test-tune     the tuner's test (ci/tune-tests.sh; part of make check): smoke run,"
	@echo "                   ompi_info reads its file, MPI tests pass with it"
	@echo "make check-udp     build, then the udp tests (ci/udp-tests.sh): 4 network-namespace hosts"
	@echo "                   on a bridge, the MPI tests over udp across them with and without"
	@echo "                   5 % injected loss, fbcast of 64 MiB to every host and its failure"
	@echo "                   cases; needs root, removes the namespaces afterwards (about 5 min"
	@echo "                   on 2 cores, see docs/tests.md); make check runs it (test-udp);"
	@echo "                   SKIP_UDP=1 leaves it out"
	@echo "make test-scale    only the scale tests: every collective at 64, 256 and 1024"
	@echo "                   ranks on the in-process fabric (part of make check, about 1 min)"
	@echo "make soak          the scale tests' long runs: more calls, 30 % multicast loss"
	@echo "                   (about 6 minutes on 2 cores, SOAK_ROUNDS=n for more seeds;"
	@echo "                   not part of make check)"
	@echo "make fuzz-settings random legal coll rdma settings against the MPI test programs"
	@echo "                   (ci/settings-fuzz.sh: FUZZ_ARGS='--iterations N --seed S"
	@echo "                   --transport udp' for 4 namespace hosts; not part of make check)"
	@echo "make sim           coll-rdma-sim (tuning/sim/): coll rdma's barrier, allreduce and bcast"
	@echo "                   schedules at 2-16384 nodes of 1-128 ranks over a calibrated"
	@echo "                   LogGP network, flat vs two-level vs Open MPI's; validation"
	@echo "                   against the seeds and make bench's np=2/4 ratios; tables and PNG"
	@echo "                   plots into docs/scale/ (installs gnuplot-nox if missing); uses"
	@echo "                   bench/results/latest-calibration.conf when make bench wrote one"
	@echo "                   (SIM_SHM_CALIBRATION=FILE overrides, ci/sim.sh says how to redo docs/scale)"
	@echo "make check-rxe     build, then the benches' sample on this host (ci/rxe/bench-sample-test.sh)"
	@echo "                   and the Soft-RoCE tests (ci/rxe-tests.sh)"
	@echo "make check-ompi5   the MPI tests and fbcast's against Open MPI 5.0 in a Debian 13 chroot"
	@echo "                   (ci/ompi5/chroot.sh prepare, then ci/ompi5/check.sh inside;"
	@echo "                   needs root; logs under $(BUILD)/ompi5/). make check runs it"
	@echo "                   last; SKIP_OMPI5=1 leaves it out"
	@echo "make check-ompi5-source  make install and plain mpirun with an Open MPI 5.0 built from"
	@echo "                   source into /opt in the chroot (ci/ompi5/source-build.sh; SKIPPED"
	@echo "                   unless its build step was run; not part of make check)"
	@echo "make check-noheaders  build against Debian's configured Open MPI source tree"
	@echo "                   (cached in /var/cache/coll-rdma) with the system's internal"
	@echo "                   headers hidden, then a few MPI tests with that build;"
	@echo "                   make check runs it; SKIP_NOHEADERS=1 leaves it out"
	@echo "make check-intree  coll rdma as an in-tree component of Debian's Open MPI"
	@echo "                   source: autogen, configure, build, MPI tests (long;"
	@echo "                   not part of make check)"
	@echo "make bench         build, then ci/bench.sh: stock Open MPI vs coll rdma in paired"
	@echo "                   samples (barrier, allreduce, reduce, bcast, 4 B-64 MiB, np 2 and 4;"
	@echo "                   ratio, spread, floor, settled; PNG plots), the same at"
	@echo "                   MPI_THREAD_MULTIPLE with one thread and 2 threads on 2 communicators"
	@echo "                   (np 2; BENCH_MT_*), tables and plots in"
	@echo "                   bench/results/; then bench-ompi5 unless SKIP_OMPI5=1. Knobs:"
	@echo "                   BENCH_PAIRS, BENCH_SAMPLE_MS, BENCH_PAIR_SIZES, BENCH_PAIR_NPS,"
	@echo "                   BENCH_PAIR_COLLS, ... (ci/bench.sh --help, ci/bench-pairs.sh)"
	@echo "make bench-udp     coll rdma over udp vs stock Open MPI over TCP across 2, 4 and 8"
	@echo "                   network-namespace hosts: MPI_Bcast, MPI_Bcast's latency per call"
	@echo "                   under 5 % injected loss at 4 hosts, and files of 1 MiB, 64 MiB,"
	@echo "                   1 GiB by fbcast and by parallel scp (ci/bench-udp.sh; root)"
	@echo "make bench-ompi5   the same paired bench at np=2 against Open MPI 5.0 in the Debian 13"
	@echo "                   chroot, coll rdma vs stock tuned and vs stock han (needs root;"
	@echo "                   results in bench/results/ompi5/)"
	@echo "make params-doc    rewrite docs/parameters.md from the parameter table"
	@echo "                   (coll-rdma/src/glue/params/); make check fails while it is stale"
	@echo "make clean         remove $(BUILD)/ and cargo's target/"

setup:
	@echo "== setup"
	@bash ci/setup.sh

# With OMPI_SOURCE, the shell words that export OMPI_INCLUDE_DIRS (the
# configured tree's headers) to the cargo builds after them, or fail: both
# cargo builds of make build need them, or the second would rebuild ompi-sys
# (its build script reads OMPI_INCLUDE_DIRS) against the system's headers.
OMPI_SOURCE_ENV = if [ -n "$(OMPI_SOURCE)" ]; then \
	    dirs=$$(bash ompi-patches/source-tree-include-dirs.sh "$(OMPI_SOURCE)") || exit 1; \
	    echo "   OMPI_INCLUDE_DIRS=$$dirs"; export OMPI_INCLUDE_DIRS="$$dirs"; \
	fi;

# Cargo decides what to rebuild, so this always asks it.
build: setup
	@echo "== cargo build --release -p coll-rdma$(if $(OMPI_SOURCE), (headers from $(OMPI_SOURCE)))"
	@$(OMPI_SOURCE_ENV) \
	$(CARGO) build --release -p coll-rdma
	@so=$(CARGO_OUT)/libmca_coll_rdma.so; \
	if [ ! -f "$$so" ] && [ -f $(CARGO_OUT)/libcoll_rdma.so ]; then \
	    so=$(CARGO_OUT)/libcoll_rdma.so; \
	    echo "note: using $$so (the cdylib is expected as libmca_coll_rdma.so)"; \
	fi; \
	[ -f "$$so" ] || { echo "error: cargo produced no $(CARGO_OUT)/libmca_coll_rdma.so" >&2; exit 1; }; \
	mkdir -p $(COMPDIR); \
	install -m 0755 "$$so" $(COMPONENT).tmp && mv -f $(COMPONENT).tmp $(COMPONENT); \
	echo "== built $(COMPONENT) from $$so"
	@OMPI_MCA_mca_base_component_path="SYS_DEFAULT:$(abspath $(COMPDIR))" ompi_info 2>&1 \
	    | grep -E 'MCA coll: rdma' \
	    || echo "warning: ompi_info does not list coll rdma from $(COMPDIR)" >&2
	@$(MAKE) --no-print-directory build-fbcast

# fbcast apart from the component, after it: a failure here (e.g. blake3's C
# code, mpicc) leaves the component built and installable; the stale fbcast
# files are removed, so that make test-fbcast (and make check) fail on it.
# Cargo is asked for both packages, not fbcast's alone: it resolves the
# features of shared dependencies over the packages it is asked for, and
# fbcast alone gets bindgen's build-time dependencies (regex and the crates
# under it) with fewer features than the component, so it compiled bindgen,
# regex, regex-automata, regex-syntax, itertools, log, either and bitflags
# a second time (8 of its 23 units; cargo --unit-graph shows it). With both,
# every unit of the component's build is reused as it is and only fbcast's
# own are compiled (issue 34).
build-fbcast:
	@echo "== cargo build --release -p coll-rdma -p coll-rdma-fbcast (the component is built already)"
	@mkdir -p $(BUILD)/bin $(BUILD)/lib $(BUILD)/include
	@$(OMPI_SOURCE_ENV) \
	if $(CARGO) build --release -p coll-rdma -p coll-rdma-fbcast \
	    && install -m 0755 $(CARGO_OUT)/fbcast $(BUILD)/bin/fbcast.tmp && mv -f $(BUILD)/bin/fbcast.tmp $(BUILD)/bin/fbcast \
	    && install -m 0755 $(CARGO_OUT)/libcoll_rdma_fbcast.so $(BUILD)/lib/libcoll_rdma_fbcast.so.tmp \
	    && mv -f $(BUILD)/lib/libcoll_rdma_fbcast.so.tmp $(BUILD)/lib/libcoll_rdma_fbcast.so \
	    && install -m 0644 $(FBCAST_SRC)/include/coll_rdma_fbcast.h $(BUILD)/include/coll_rdma_fbcast.h; then \
	    echo "== built $(BUILD)/bin/fbcast, $(BUILD)/lib/libcoll_rdma_fbcast.so, $(BUILD)/include/coll_rdma_fbcast.h"; \
	else \
	    rm -f $(BUILD)/bin/fbcast $(BUILD)/lib/libcoll_rdma_fbcast.so $(BUILD)/include/coll_rdma_fbcast.h; \
	    echo "warning: fbcast (coll-rdma/fbcast) failed to build; the component $(COMPONENT) is built" >&2; \
	fi

install: build
	@mkdir -p "$(INSTALLDIR)"
	@install -m 0755 $(COMPONENT) "$(INSTALLDIR)/mca_coll_rdma.so.tmp"
	@mv -f "$(INSTALLDIR)/mca_coll_rdma.so.tmp" "$(INSTALLDIR)/mca_coll_rdma.so"
	@echo "== installed $(INSTALLDIR)/mca_coll_rdma.so"
	@bash coll-rdma/install/component-path-env.sh "$(INSTALLDIR)" "$(ENVFILE)"
	@mkdir -p "$(PREFIX)/bin"
	@sed 's|^INSTALLED_DIR=@COMPONENT_DIR@$$|INSTALLED_DIR="$(INSTALLDIR)"|' coll-rdma/install/coll-rdma-selfcheck > "$(PREFIX)/bin/coll-rdma-selfcheck.tmp"
	@chmod 0755 "$(PREFIX)/bin/coll-rdma-selfcheck.tmp" && mv -f "$(PREFIX)/bin/coll-rdma-selfcheck.tmp" "$(PREFIX)/bin/coll-rdma-selfcheck"
	@echo "== installed $(PREFIX)/bin/coll-rdma-selfcheck (a 2-rank job under plain mpirun: does coll rdma serve it?)"
	@if [ ! -x $(BUILD)/bin/fbcast ]; then \
	    echo "warning: $(BUILD)/bin/fbcast was not built (see make build): fbcast not installed" >&2; exit 0; \
	fi; \
	mkdir -p "$(PREFIX)/bin" "$(PREFIX)/lib" "$(PREFIX)/include" \
	&& install -m 0755 $(BUILD)/bin/fbcast "$(PREFIX)/bin/fbcast.tmp" && mv -f "$(PREFIX)/bin/fbcast.tmp" "$(PREFIX)/bin/fbcast" \
	&& install -m 0755 $(BUILD)/lib/libcoll_rdma_fbcast.so "$(PREFIX)/lib/libcoll_rdma_fbcast.so.tmp" \
	&& mv -f "$(PREFIX)/lib/libcoll_rdma_fbcast.so.tmp" "$(PREFIX)/lib/libcoll_rdma_fbcast.so" \
	&& install -m 0644 $(BUILD)/include/coll_rdma_fbcast.h "$(PREFIX)/include/coll_rdma_fbcast.h" \
	&& echo "== installed $(PREFIX)/bin/fbcast, $(PREFIX)/lib/libcoll_rdma_fbcast.so, $(PREFIX)/include/coll_rdma_fbcast.h" \
	&& case ":$$PATH:" in *":$(PREFIX)/bin:"*) ;; \
	    *) echo "   $(PREFIX)/bin is not on PATH: add it (e.g. export PATH=\"$(PREFIX)/bin:\$$PATH\")";; esac \
	&& echo "   C programs: mpicc -I$(PREFIX)/include prog.c -L$(PREFIX)/lib -Wl,-rpath,$(PREFIX)/lib -lcoll_rdma_fbcast"
	@if [ "$(SELFCHECK)" != 0 ]; then \
	    if [ -f "$(ENVFILE)" ]; then echo "== coll-rdma-selfcheck, with $(ENVFILE) sourced"; . "$(ENVFILE)"; \
	    else echo "== coll-rdma-selfcheck"; fi; \
	    "$(PREFIX)/bin/coll-rdma-selfcheck"; status=$$?; \
	    case $$status in \
	    0) ;; \
	    2) echo "note: the self-check could not run (above); the install is done: run coll-rdma-selfcheck where mpirun can start 2 ranks";; \
	    3) echo "WARNING: coll rdma is installed but did NOT serve plain mpirun's job: see the reason above" >&2;; \
	    *) echo "make install: coll-rdma-selfcheck found wrong results or a failing job (exit status $$status)" >&2; exit 1;; \
	    esac; \
	fi

# Each suite is a stage of ci/stage.sh, which times it into
# $(CHECK_TIMES); the last step prints the table (a failing stage prints it
# before make stops).
CHECK_TIMES := $(BUILD)/check-times.tsv
STAGE      := CHECK_TIMES=$(CHECK_TIMES) bash ci/stage.sh

check:
	@$(STAGE) start
	@$(STAGE) run build -- sh -c '$(MAKE) --no-print-directory setup \
	    && SKIP_OMPI5=$(SKIP_OMPI5) SKIP_NOHEADERS=$(SKIP_NOHEADERS) bash ci/check-prepare.sh start \
	    && $(MAKE) --no-print-directory build'
	@echo "== check scripts: the core crate's dependency tree, no cargo unit built twice, the stage timer, the background preparation, the MPI tests' dealing, the Open MPI 5 run's cases"
	@$(STAGE) run "check scripts" -- sh -c 'bash ci/core-deps-check.sh && bash ci/cargo-units-check.sh && bash ci/stage.sh --self-test && bash ci/check-prepare.sh --self-test && bash ci/mpi-tests-deal.sh --self-test && bash ci/ompi5/cases-on-5.sh --self-test'
	@$(STAGE) run "cargo tests" -- $(MAKE) --no-print-directory test-rust
	@$(STAGE) run "MPI tests 4.1" -- $(MAKE) --no-print-directory test-mpi
	@$(STAGE) run tuner -- $(MAKE) --no-print-directory test-tune
	@echo "== the paired benchmark table's arithmetic, the comparison of two runs and coll_pairs' span figures (made-up samples)"
	@$(STAGE) run "bench self-tests" -- sh -c 'bash ci/bench-pairs.sh --self-test \
	    && bash ci/bench-compare.sh --self-test \
	    && mkdir -p build/bench && mpicc -O2 -Wall -o build/bench/coll_pairs bench/coll_pairs.c && build/bench/coll_pairs --self-test'
	@$(STAGE) run fbcast -- $(MAKE) --no-print-directory test-fbcast
	@if [ "$(SKIP_UDP)" = 1 ]; then echo "== udp tests skipped (SKIP_UDP=1)"; $(STAGE) skip udp "SKIP_UDP=1"; \
	else $(STAGE) run udp -- $(MAKE) --no-print-directory test-udp; fi
	@$(STAGE) run Soft-RoCE -- $(MAKE) --no-print-directory test-rxe
	@if [ "$(SKIP_NOHEADERS)" = 1 ]; then echo "== no-headers build test skipped (SKIP_NOHEADERS=1)"; $(STAGE) skip no-headers "SKIP_NOHEADERS=1"; \
	else $(STAGE) run no-headers -- $(MAKE) --no-print-directory check-noheaders; fi
	@if [ "$(SKIP_OMPI5)" = 1 ]; then echo "== Open MPI 5 tests skipped (SKIP_OMPI5=1)"; $(STAGE) skip "Open MPI 5" "SKIP_OMPI5=1"; \
	else $(STAGE) run "Open MPI 5" -- $(MAKE) --no-print-directory check-ompi5; fi
	@$(STAGE) report

# Every crate's tests (the core's fabric tests, the transports', the
# tuner's, glue's unit tests), optimised as release is but without its LTO
# (the profile release-tests in Cargo.toml), as make check runs them.
test-rust:
	@echo "== cargo test --profile release-tests --workspace"
	@$(CARGO) test --profile release-tests --workspace

test-mpi:
	@echo "== MPI tests"
	@bash ci/mpi-tests-jobs.sh

# coll-rdma-tune on this machine (tuning/src/bin/coll-rdma-tune): the site's
# parameter file, build/mca-params.conf.
tune: build
	@echo "== tune (coll-rdma-tune at np=2, quick mode)"
	@bash ci/tune.sh $(TUNE_ARGS)

# The tuner's smoke run, its file read by ompi_info, MPI tests with the file.
test-tune:
	@echo "== tuner test"
	@bash ci/tune-tests.sh

# fbcast under mpirun, with coll rdma and stock Open MPI (needs make build).
test-fbcast:
	@echo "== fbcast tests"
	@bash ci/fbcast-tests.sh

# coll rdma over udp across network namespaces on this machine (needs root;
# ci/netns/ makes and removes them).
check-udp: build
	@$(MAKE) --no-print-directory test-udp

test-udp:
	@echo "== bench-udp's arguments (coll_latency, one rank)"
	@bash ci/bench-udp-args-test.sh
	@echo "== udp tests (network-namespace hosts)"
	@bash ci/udp-tests.sh

# cargo test --workspace (make check) runs these too; these targets run them alone.
test-scale:
	@echo "== scale tests (fabric, 64/256/1024 ranks; flat and in node groups over shm rings)"
	@$(CARGO) test --profile release-tests -p coll-rdma-core --test scale -- --nocapture

# Longer runs of what make check runs briefly: more calls, seeds, loss and
# node group shapes at 64 to 1024 ranks.
soak:
	@echo "== soak (fabric, 64/256/1024 ranks, long runs)"
	@$(CARGO) test --profile release-tests -p coll-rdma-core --test scale -- scale_fabric:: --ignored --nocapture --test-threads 1
	@COLL_RDMA_SOAK=1 $(CARGO) test --profile release-tests -p coll-rdma-core --test scale -- scale_hybrid_fabric:: --nocapture --test-threads 1

# Unusual but legal settings (ci/settings-fuzz.sh): the programs of
# make test-mpi under random edges of the tuner's parameters.
fuzz-settings: build
	@echo "== settings fuzz"
	@bash ci/settings-fuzz.sh $(FUZZ_ARGS)

# docs/parameters.md is rendered from the parameter table; the unit test
# parameter_reference_is_current compares it (make check runs it) and,
# with UPDATE_PARAMETER_REFERENCE=1, writes it.
params-doc:
	@UPDATE_PARAMETER_REFERENCE=1 $(CARGO) test -p coll-rdma --lib parameter_reference_is_current
	@echo "== docs/parameters.md rewritten from coll-rdma/src/glue/params/table.rs"

# The simulator (tuning/sim/): coll rdma's schedules at 2-16384 nodes, validated
# against the seeds; tables and plots into docs/scale/. No Open MPI needed.
sim:
	@bash ci/sim.sh

# The verbs transport on Soft-RoCE in qemu guests (docs/testbed.md).
check-rxe: build
	@$(MAKE) --no-print-directory test-rxe

test-rxe:
	@echo "== the Soft-RoCE benches' sample, on this host (ci/rxe/bench-sample-test.sh)"
	@bash ci/rxe/bench-sample-test.sh
	@echo "== Soft-RoCE tests (verbs transport)"
	@bash ci/rxe-tests.sh

# The same source against Open MPI 5.0 (Debian 13 chroot, docs/ompi5-port.md).
# Independent of the host's build: cargo's target and everything else go to
# $(BUILD)/ompi5/.
check-ompi5:
	@echo "== Open MPI 5 tests (Debian 13 chroot)"
	@bash ci/ompi5/chroot.sh prepare
	@mkdir -p $(BUILD)/ompi5
	@bash -o pipefail -c 'bash ci/ompi5/chroot.sh run -- bash ci/ompi5/check.sh 2>&1 | tee $(BUILD)/ompi5/check.log'

# coll rdma with an Open MPI 5.0 built from source (--prefix, DSO components)
# in the same chroot: make install and plain mpirun. SKIPPED until
# `ci/ompi5/chroot.sh run -- bash ci/ompi5/source-build.sh build` has built
# one (30 to 60 minutes), so not part of make check.
check-ompi5-source:
	@echo "== coll rdma with Open MPI 5.0 built from source (Debian 13 chroot)"
	@chroot_dir=$${OMPI5_CHROOT:-/var/tmp/coll-rdma-ompi5-trixie}; \
	if [ "$$(id -u)" != 0 ] || [ ! -f "$$chroot_dir/.coll-rdma-prepared" ]; then \
	    echo "SKIPPED: needs root and the chroot of make check-ompi5 ($$chroot_dir)"; \
	else bash ci/ompi5/chroot.sh run -- bash ci/ompi5/source-build.sh test; fi

# Open MPI without its internal headers: build against Debian's configured
# source tree with the system's hidden (ompi-patches/README.md).
check-noheaders:
	@echo "== no-headers build (Open MPI source tree, system internal headers hidden)"
	@bash ompi-patches/check-noheaders.sh

# coll rdma as an in-tree component of Debian's Open MPI source: a whole
# Open MPI build, so not part of make check (ompi-patches/README.md).
check-intree:
	@echo "== in-tree component (apply.sh, autogen.pl, configure, make, MPI tests)"
	@bash ompi-patches/check-intree.sh

bench: build
	@echo "== benchmark"
	@bash ci/bench.sh
	@if [ "$(SKIP_OMPI5)" = 1 ]; then echo "== Open MPI 5 bench skipped (SKIP_OMPI5=1)"; \
	else $(MAKE) --no-print-directory bench-ompi5; fi

# coll rdma over udp across network-namespace hosts against stock Open MPI
# over TCP and a parallel scp (issue 13); needs root, not part of make bench.
bench-udp: build
	@echo "== benchmark over udp across network-namespace hosts"
	@bash ci/bench-udp.sh $(BENCH_UDP_ARGS)

# The paired bench against Open MPI 5.0 (ci/ompi5/bench.sh in the chroot).
# The chroot starts with an empty environment: the BENCH_* knobs go through a
# file. Then the np=2 ratios of both versions side by side.
bench-ompi5:
	@echo "== benchmark against Open MPI 5 (Debian 13 chroot)"
	@bash ci/ompi5/chroot.sh prepare
	@mkdir -p $(BUILD)/ompi5
	@env | grep '^BENCH_' | grep -v '^BENCH_RESULTS_DIR=' > $(BUILD)/ompi5/bench.env || true
	@bash -o pipefail -c 'bash ci/ompi5/chroot.sh run -- bash ci/ompi5/bench.sh 2>&1 | tee $(BUILD)/ompi5/bench.log'
	@if [ -f bench/results/latest-pairs.txt ] && [ -f bench/results/ompi5/latest-pairs.txt ]; then \
	    bash ci/bench-side-by-side.sh --np 2 4.1=bench/results/latest-pairs.txt \
	        5.0=bench/results/ompi5/latest-pairs.txt | tee bench/results/np2-ompi41-ompi50.txt; \
	    echo "== np=2 ratios, Open MPI 4.1 and 5.0 side by side: bench/results/np2-ompi41-ompi50.txt"; fi

clean:
	rm -rf $(BUILD)
	$(CARGO) clean
