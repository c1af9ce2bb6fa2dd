/*
 * coll_rdma_fbcast.h: distribute a file (or a directory tree) from one rank
 * to every other rank of a communicator over MPI_Bcast.
 *
 * Link with -lcoll_rdma_fbcast (libcoll_rdma_fbcast.so, installed by
 * `make install`), never with mca_coll_rdma.so: Open MPI loads that
 * component itself. The library calls only the public MPI API, so whatever
 * serves MPI_Bcast on the communicator (coll rdma, or Open MPI's own
 * components) carries the data. Built for Open MPI (MPI_Comm is a pointer).
 *
 * Protocol, for each item: the root broadcasts a status record (path, size,
 * mode, mtime, BLAKE3 content hash, overwrite policy, flags, and its error
 * if it failed); every rank checks its destination and prepares a
 * temporary file; an MPI_Allreduce(MAX) of [error, data needed] makes the
 * decision common; the data follow in chunks (one MPI_Bcast each, at most
 * chunk_bytes), written to the temporary and hashed as they arrive; a
 * second agreement precedes the renames, a third follows them.
 */
#ifndef COLL_RDMA_FBCAST_H
#define COLL_RDMA_FBCAST_H

#include <stddef.h>
#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Flags. The overwrite policy takes the two low bits. The root's policy,
 * fsync flag and chunk size apply on every rank; pass the same flags
 * everywhere (as for any MPI collective). */
#define COLL_RDMA_BCAST_FILE_IF_DIFFERENT 0 /* write unless the destination holds the same contents (default) */
#define COLL_RDMA_BCAST_FILE_NEVER        1 /* never replace an existing file: COLL_RDMA_BCAST_FILE_ERR_EXISTS
                                               where it holds other contents (identical contents: success) */
#define COLL_RDMA_BCAST_FILE_ALWAYS       2 /* write even over identical contents */
#define COLL_RDMA_BCAST_FILE_POLICY_MASK  3
#define COLL_RDMA_BCAST_FILE_RECURSIVE    4 /* a directory source is sent with everything below it, file by file
                                               (without this flag it is COLL_RDMA_BCAST_FILE_ERR_SOURCE) */
#define COLL_RDMA_BCAST_FILE_FSYNC        8 /* fsync each file before it is renamed into place */

/* Return codes: the same on every rank (the largest any rank saw), except
 * COLL_RDMA_BCAST_FILE_ERR_MPI. When several ranks fail differently, the
 * larger code is returned everywhere. */
#define COLL_RDMA_BCAST_FILE_OK           0
#define COLL_RDMA_BCAST_FILE_ERR_ARG      1 /* invalid argument: root out of range (returned at once, without
                                               communicating: MPI requires the same root on every rank),
                                               NULL src on the root or dst elsewhere, unknown flag bits,
                                               chunk size out of range */
#define COLL_RDMA_BCAST_FILE_ERR_SOURCE   2 /* source missing or unreadable, not a regular file (or a directory
                                               without COLL_RDMA_BCAST_FILE_RECURSIVE), changed while sent */
#define COLL_RDMA_BCAST_FILE_ERR_EXISTS   3 /* destination exists with other contents, policy NEVER */
#define COLL_RDMA_BCAST_FILE_ERR_DEST     4 /* destination cannot be written: no temporary file can be created in
                                               its directory, a path component is not a directory, a directory
                                               another user could redirect (see below), rename failed */
#define COLL_RDMA_BCAST_FILE_ERR_NOSPACE  5 /* no space left (ENOSPC, EDQUOT) on a destination */
#define COLL_RDMA_BCAST_FILE_ERR_IO       6 /* another I/O error while writing */
#define COLL_RDMA_BCAST_FILE_ERR_CORRUPT  7 /* the data received do not match the announced content hash */
#define COLL_RDMA_BCAST_FILE_ERR_PROTOCOL 8 /* a status record could not be decoded (different library versions) */
#define COLL_RDMA_BCAST_FILE_ERR_MPI      9 /* an MPI call failed (only with MPI_ERRORS_RETURN on comm; then the
                                               ranks may return different codes) */

/*
 * Collective over the intracommunicator comm: the root reads src and every
 * other rank writes dst (its own path; dst is not used on the root, src
 * only there; either may be NULL where it is not used). A file sent to an
 * existing directory goes inside it under the source's name (as with cp);
 * a directory (COLL_RDMA_BCAST_FILE_RECURSIVE) becomes dst itself, merged
 * into dst when that directory exists.
 *
 * - A destination that already holds the same contents (same size and
 *   hash) is not written (policies IF_DIFFERENT and NEVER) but its rank
 *   still takes part; if no rank needs the data, none are sent.
 * - Data go to a temporary ".NAME.fbcast-XXXXXXXX" in the destination's
 *   directory, renamed into place only when the whole file arrived and its
 *   hash matched: no rank ever sees a partial file under the final name.
 *   On any error the temporaries are removed and every rank returns the
 *   same code. A rank killed by SIGKILL may leave its temporary behind.
 * - The file's mode and mtime are the root's, the mode less the writing
 *   process's umask (as cp without -p gives a new file). An existing file
 *   is replaced by a new one renamed over it, which gets that mode too
 *   (cp would keep the old file's mode and inode). Directories are created
 *   with the root's modes less the umask; existing directories are kept as
 *   they are.
 * - A rank refuses (ERR_DEST on every rank, nothing written) to write into
 *   a directory (dst's, or one inside a tree's dst) that is not its
 *   effective user's (root's sticky ones such as /tmp excepted), or that
 *   others can write without the sticky bit, or to reach it through a
 *   directory others can write without the sticky bit. Directories above
 *   it may belong to anyone (root, seen as uid 65534 in a rootless user
 *   namespace; a project leader's directory). Links in dst's path are
 *   followed, except another user's link in a directory others can write
 *   (as /tmp); links inside a tree's dst never. Files and directories are
 *   created, renamed and given their modes through directory descriptors,
 *   never by path afterwards.
 * - The root opens each planned file without following a link or blocking
 *   on a FIFO and sends it only if it is still the regular file planned
 *   (same device and inode): otherwise ERR_SOURCE on every rank.
 * - Ranks of one machine whose dst names the same file: the lowest writes
 *   it, the others take part without writing.
 * - Once renames have begun an error (rename failing on one rank) cannot
 *   be undone elsewhere: those ranks hold the complete new file; the code
 *   is still the same everywhere. Within a tree, files completed before an
 *   error stay.
 * - Symbolic links, devices, sockets and FIFOs inside a tree are not sent.
 */
int coll_rdma_bcast_file(MPI_Comm comm, int root, const char *src, const char *dst, int flags);

/* The same with the bytes per MPI_Bcast (0: 4 MiB; 4096..INT_MAX). */
int coll_rdma_bcast_file_chunked(MPI_Comm comm, int root, const char *src, const char *dst, int flags,
                                 size_t chunk_bytes);

/* A static description of a return code. */
const char *coll_rdma_bcast_file_strerror(int code);

#ifdef __cplusplus
}
#endif

#endif /* COLL_RDMA_FBCAST_H */
