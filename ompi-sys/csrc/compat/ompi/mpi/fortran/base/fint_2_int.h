/* Stand-in for a header Debian's libopenmpi-dev does not ship but
 * ompi/op/op.h includes. op.h only converts a C int to a Fortran INTEGER
 * (for user ops written in Fortran); on this build both are 4 bytes, which
 * the check below makes a compile-time fact rather than an assumption. */
#ifndef COLL_RDMA_COMPAT_FINT_2_INT_H
#define COLL_RDMA_COMPAT_FINT_2_INT_H

#include "ompi_config.h"

/* 0: configured without Fortran (a source tree, ompi-patches/), where
 * MPI_Fint is a C int. */
_Static_assert(OMPI_SIZEOF_FORTRAN_INTEGER == SIZEOF_INT || OMPI_SIZEOF_FORTRAN_INTEGER == 0,
               "this stand-in assumes a Fortran INTEGER is a C int");

#define OMPI_INT_2_FINT(a) ((MPI_Fint) (a))
#define OMPI_FINT_2_INT(a) ((int) (a))

#endif
