# -*- shell-script -*-
# coll rdma as an in-tree Open MPI component: the component itself is Rust,
# built by cargo from the coll-rdma repository (see README in this directory).

# Always a DSO: the library is cargo's cdylib, which cannot be linked into
# libmpi the way static components are.
AC_DEFUN([MCA_ompi_coll_rdma_COMPILE_MODE], [
    AC_MSG_CHECKING([for MCA component $2:$3 compile mode])
    $4="dso"
    # Open MPI 5.0 (config/opal_mca.m4, seen in 5.0.7) copies the result
    # from the variable *named* by it (AS_VAR_COPY with $4's value), so
    # without this an override always ends up static there. 4.1 reads $4.
    dso="dso"
    AC_MSG_RESULT([$$4 (cargo cdylib)])
])

# MCA_ompi_coll_rdma_CONFIG([action-if-can-compile], [action-if-cant-compile])
AC_DEFUN([MCA_ompi_coll_rdma_CONFIG], [
    AC_CONFIG_FILES([ompi/mca/coll/rdma/Makefile])

    AC_ARG_WITH([coll-rdma],
        [AS_HELP_STRING([--with-coll-rdma=DIR],
            [coll rdma's repository (a checkout of coll-rdma, built with cargo);
             default: the one recorded by ompi-patches/apply.sh.
             --without-coll-rdma leaves the component out])])

    coll_rdma_happy=yes
    AS_IF([test "$with_coll_rdma" = "no"],
          [AC_MSG_NOTICE([coll rdma disabled (--without-coll-rdma)])
           coll_rdma_happy=no])

    # Where the crates are: --with-coll-rdma=DIR, else apply.sh's record.
    AS_IF([test "$coll_rdma_happy" = "yes"],
          [AC_MSG_CHECKING([for the coll-rdma repository])
           AS_IF([test -n "$with_coll_rdma" && test "$with_coll_rdma" != "yes"],
                 [COLL_RDMA_SOURCE=$with_coll_rdma],
                 [test -f "$srcdir/ompi/mca/coll/rdma/source-dir"],
                 [COLL_RDMA_SOURCE=`cat "$srcdir/ompi/mca/coll/rdma/source-dir"`],
                 [COLL_RDMA_SOURCE=])
           AS_IF([test -n "$COLL_RDMA_SOURCE" && test -f "$COLL_RDMA_SOURCE/coll-rdma/Cargo.toml"],
                 [AC_MSG_RESULT([$COLL_RDMA_SOURCE])],
                 [AC_MSG_RESULT([not found (${COLL_RDMA_SOURCE:-none given})])
                  coll_rdma_happy=no])])

    # cargo and rustc, also from rustup's default place, which non-login
    # shells often lack on PATH.
    AS_IF([test "$coll_rdma_happy" = "yes"],
          [AC_PATH_PROG([COLL_RDMA_CARGO], [cargo], [], [$PATH:$HOME/.cargo/bin])
           AC_PATH_PROG([COLL_RDMA_RUSTC], [rustc], [], [$PATH:$HOME/.cargo/bin])
           AS_IF([test -z "$COLL_RDMA_CARGO" || test -z "$COLL_RDMA_RUSTC"],
                 [AC_MSG_WARN([coll rdma needs cargo and rustc (https://rustup.rs or Debian's cargo); not building it])
                  coll_rdma_happy=no],
                 [coll_rdma_rustc_version=`"$COLL_RDMA_RUSTC" --version 2>/dev/null`
                  AC_MSG_NOTICE([coll rdma: $coll_rdma_rustc_version])])])

    AS_IF([test "$coll_rdma_happy" = "no" && test -n "$with_coll_rdma" && test "$with_coll_rdma" != "no"],
          [AC_MSG_ERROR([--with-coll-rdma was given but coll rdma cannot be built (see above)])])

    AC_SUBST([COLL_RDMA_SOURCE])
    AS_IF([test "$coll_rdma_happy" = "yes"], [$1], [$2])
])dnl
