/*
 * reduce_ops: MPI_Allreduce and MPI_Reduce, every predefined op on every
 * predefined datatype MPI allows it on, user-defined ops (commutative and
 * not), contiguous and non-contiguous derived datatypes, MPI_IN_PLACE, all
 * roots, on MPI_COMM_WORLD, a split (ranks reversed) and a dup, and the
 * calls interleaved with each other and with barriers.
 *
 * Checking. Every rank generates the input of every rank of the
 * communicator from (rank in that communicator, element index, case), so it
 * computes the expected result itself, combining in rank order 0, 1, ...,
 * n-1 (the canonical order MPI requires for non-commutative ops). Values are
 * chosen so that every result is exact whatever the association: small
 * integers and quarters for SUM, powers of two and a few Gaussian integers
 * for PROD, no overflow (except where wrapping is the defined semantics, in
 * unsigned user ops). Results are compared exactly, element by element
 * (value fields only: padding inside predefined pair types and long double
 * is not compared). Also checked: the send buffer is not modified; with
 * count 0 the receive buffer is not touched; with non-contiguous datatypes
 * the bytes between the data (the user's gaps) keep what they held.
 *
 * Cases (each at counts 0, 1, 7, 1000, and 100000 for a few; each count in
 * four calls: allreduce, allreduce MPI_IN_PLACE, reduce to one root (non-
 * roots pass recvbuf NULL every other time), reduce MPI_IN_PLACE at another
 * root; roots move from case to case):
 *   MAX MIN SUM PROD LAND LOR LXOR BAND BOR BXOR on the C integer types
 *     (signed/unsigned char, short, int, long, long long and the fixed-width
 *     int8..uint64); the same minus the logical ops on the Fortran integers
 *     (INTEGER, INTEGER1..8) and on MPI_AINT, MPI_OFFSET, MPI_COUNT;
 *   MAX MIN SUM PROD on float, double, long double, REAL, DOUBLE PRECISION,
 *     REAL4, REAL8;  SUM PROD on the C and Fortran complex types;
 *   LAND LOR LXOR on MPI_C_BOOL and MPI_LOGICAL;  BAND BOR BXOR on MPI_BYTE;
 *   MAXLOC MINLOC on MPI_2INT, MPI_SHORT_INT, MPI_LONG_INT, MPI_FLOAT_INT,
 *     MPI_DOUBLE_INT, MPI_LONG_DOUBLE_INT, MPI_2INTEGER, MPI_2REAL,
 *     MPI_2DOUBLE_PRECISION (values with many ties: the lower index wins);
 *   user ops: 2x2 matrix product of uint32 (wrapping, NON-commutative) on a
 *     contiguous 16-byte type; a Heisenberg group product (non-commutative)
 *     on a contiguous 12-byte type (does not divide segment sizes) and on the
 *     same type resized to 16 bytes (gap of 4 at the end: non-contiguous);
 *     a commutative a+b+1 on MPI_UINT64_T (shows an op applied once too
 *     often or with a made-up identity); a commutative add on
 *     MPI_Type_vector(3, 2, 3, MPI_INT32_T) (gaps between the blocks).
 * Predefined ops cannot be used on derived datatypes in Open MPI (it
 * rejects them before any coll component sees the call), hence user ops.
 *
 * Then -x iterations of back-to-back reductions on the three communicators,
 * with changing sizes, roots and ops, barriers in between now and then, and
 * one rank delayed a little each time so that ranks run ahead into the next
 * call.
 *
 * Which calls coll rdma must serve and which it must hand to the module
 * underneath is counted by common.h (expect-reduction lines).
 *
 * Options: -m <max count> (default 100000; 1000 skips the large messages),
 *          -x <interleaved iterations> (default 150),
 *          -k <K> (default 1: every case at every count): a predefined op/type
 *          pair runs only at the counts whose index k (0, 1, 7, 1000, ... are
 *          0, 1, 2, 3, ...) has (pair's index + k) % K == 0, so each count
 *          takes every K-th pair and each pair one count in K, rotating along
 *          the table; the user ops and derived datatypes keep every count
 *          (the Soft-RoCE guests, where each call is emulated, run -k 4: the
 *          op code is the same whatever carries the bytes, and the host runs
 *          every pair at every count),
 *          -L <count> (default 0: none): one more count, for the cases that
 *          run the largest count, whatever -m (e.g. 2000000: 16 MiB of
 *          doubles, 32 MiB of 2x2 matrices).
 */
#include "common.h"
#include <complex.h>
#include <math.h>
#include <stdbool.h>

enum {
    O_MAX, O_MIN, O_SUM, O_PROD, O_LAND, O_BAND, O_LOR, O_BOR, O_LXOR, O_BXOR,
    O_MAXLOC, O_MINLOC, O_NPRE,
    U_MAT2 = 100, U_HEIS, U_VECADD, U_ADDONE
};
static const char *const op_names[O_NPRE] = {
    "MAX", "MIN", "SUM", "PROD", "LAND", "BAND", "LOR", "BOR", "LXOR", "BXOR", "MAXLOC", "MINLOC"};

static MPI_Op predefined_op(int o)
{
    switch (o) {
    case O_MAX: return MPI_MAX;
    case O_MIN: return MPI_MIN;
    case O_SUM: return MPI_SUM;
    case O_PROD: return MPI_PROD;
    case O_LAND: return MPI_LAND;
    case O_BAND: return MPI_BAND;
    case O_LOR: return MPI_LOR;
    case O_BOR: return MPI_BOR;
    case O_LXOR: return MPI_LXOR;
    case O_BXOR: return MPI_BXOR;
    case O_MAXLOC: return MPI_MAXLOC;
    default: return MPI_MINLOC;
    }
}

#define B(o) (1u << (o))
#define OPS_CINT  (B(O_MAX) | B(O_MIN) | B(O_SUM) | B(O_PROD) | B(O_LAND) | B(O_LOR) | B(O_LXOR) | \
                   B(O_BAND) | B(O_BOR) | B(O_BXOR))
#define OPS_FINT  (B(O_MAX) | B(O_MIN) | B(O_SUM) | B(O_PROD) | B(O_BAND) | B(O_BOR) | B(O_BXOR))
#define OPS_FLOAT (B(O_MAX) | B(O_MIN) | B(O_SUM) | B(O_PROD))
#define OPS_CPLX  (B(O_SUM) | B(O_PROD))
#define OPS_LOGIC (B(O_LAND) | B(O_LOR) | B(O_LXOR))
#define OPS_BYTE  (B(O_BAND) | B(O_BOR) | B(O_BXOR))
#define OPS_PAIR  (B(O_MAXLOC) | B(O_MINLOC))

static int is_logical(int o) { return o == O_LAND || o == O_LOR || o == O_LXOR; }

/* --------------------------------------------------- per-C-type functions
 * gen:  the element of `rank` at `idx` (h: a hash of rank, idx and case)
 * comb: acc = acc op x (acc holds the lower ranks)
 * eq:   got equals want (logical results compare as truth values)
 * show: text of an element for messages */
typedef void (*gen_fn)(int op, uint64_t h, int rank, long idx, void *dst);
typedef void (*comb_fn)(int op, void *acc, const void *x);
typedef int (*eq_fn)(int op, const void *got, const void *want);
typedef void (*show_fn)(const void *e, char *buf, size_t n);

#define DEF_INT(tag, T, SIGNED)                                                              \
    static void gen_##tag(int op, uint64_t h, int rank, long idx, void *d)                   \
    {                                                                                        \
        T v;                                                                                 \
        switch (op) {                                                                        \
        case O_SUM: v = (T)(SIGNED ? (long long)(h % 11) - 5 : (long long)(h % 11)); break;  \
        case O_PROD: /* at most ceil(n/4) factors 2: no overflow even in 8 bits */           \
            v = ((rank + idx) % 4 == 0) ? (T)2 : (T)((SIGNED && h % 3 == 0) ? -1 : 1); break; \
        case O_LAND: v = (T)(h % 8 == 0 ? 0 : 1 + (h >> 8) % 100); break;                   \
        case O_LOR: v = (T)(h % 8 != 0 ? 0 : 1 + (h >> 8) % 100); break;                    \
        case O_LXOR: v = (T)(h % 2 == 0 ? 0 : 1 + (h >> 8) % 100); break;                   \
        case O_BAND: v = (T)~(h & (h >> 21) & (h >> 42)); break;                             \
        case O_BOR: v = (T)(h & (h >> 21) & (h >> 42)); break;                               \
        default: v = (T)h; break; /* MAX, MIN, BXOR: the whole range */                      \
        }                                                                                    \
        memcpy(d, &v, sizeof v);                                                             \
    }                                                                                        \
    static void comb_##tag(int op, void *acc, const void *x)                                 \
    {                                                                                        \
        T a, b;                                                                              \
        memcpy(&a, acc, sizeof a);                                                           \
        memcpy(&b, x, sizeof b);                                                             \
        switch (op) {                                                                        \
        case O_MAX: a = a > b ? a : b; break;                                                \
        case O_MIN: a = a < b ? a : b; break;                                                \
        case O_SUM: a = (T)(a + b); break;                                                   \
        case O_PROD: a = (T)(a * b); break;                                                  \
        case O_LAND: a = (T)(a && b); break;                                                 \
        case O_LOR: a = (T)(a || b); break;                                                  \
        case O_LXOR: a = (T)(!a != !b); break;                                               \
        case O_BAND: a = (T)(a & b); break;                                                  \
        case O_BOR: a = (T)(a | b); break;                                                   \
        case O_BXOR: a = (T)(a ^ b); break;                                                  \
        }                                                                                    \
        memcpy(acc, &a, sizeof a);                                                           \
    }                                                                                        \
    static int eq_##tag(int op, const void *g, const void *w)                                \
    {                                                                                        \
        T a, b;                                                                              \
        memcpy(&a, g, sizeof a);                                                             \
        memcpy(&b, w, sizeof b);                                                             \
        return is_logical(op) ? (!a == !b) : (a == b);                                       \
    }                                                                                        \
    static void show_##tag(const void *e, char *buf, size_t n)                               \
    {                                                                                        \
        T a;                                                                                 \
        memcpy(&a, e, sizeof a);                                                             \
        if (SIGNED) snprintf(buf, n, "%lld", (long long)a);                                  \
        else snprintf(buf, n, "%llu", (unsigned long long)a);                                \
    }

#define DEF_FLOAT(tag, T)                                                                    \
    static void gen_##tag(int op, uint64_t h, int rank, long idx, void *d)                   \
    {                                                                                        \
        T v;                                                                                 \
        (void)rank; (void)idx;                                                               \
        switch (op) {                                                                        \
        case O_SUM: v = (T)((long long)(h % 33) - 16) / 4; break;                            \
        case O_PROD: v = (T)ldexp((h & 64) ? -1.0 : 1.0, (int)(h % 7) - 3); break;           \
        default: v = (T)((long long)(h % 2000001) - 1000000) / 8; break;                     \
        }                                                                                    \
        memcpy(d, &v, sizeof v);                                                             \
    }                                                                                        \
    static void comb_##tag(int op, void *acc, const void *x)                                 \
    {                                                                                        \
        T a, b;                                                                              \
        memcpy(&a, acc, sizeof a);                                                           \
        memcpy(&b, x, sizeof b);                                                             \
        switch (op) {                                                                        \
        case O_MAX: a = a > b ? a : b; break;                                                \
        case O_MIN: a = a < b ? a : b; break;                                                \
        case O_SUM: a = a + b; break;                                                        \
        case O_PROD: a = a * b; break;                                                       \
        }                                                                                    \
        memcpy(acc, &a, sizeof a);                                                           \
    }                                                                                        \
    static int eq_##tag(int op, const void *g, const void *w)                                \
    {                                                                                        \
        T a, b;                                                                              \
        (void)op;                                                                            \
        memcpy(&a, g, sizeof a);                                                             \
        memcpy(&b, w, sizeof b);                                                             \
        return a == b;                                                                       \
    }                                                                                        \
    static void show_##tag(const void *e, char *buf, size_t n)                               \
    {                                                                                        \
        T a;                                                                                 \
        memcpy(&a, e, sizeof a);                                                             \
        snprintf(buf, n, "%.21Lg", (long double)a);                                          \
    }

/* Gaussian integers of modulus <= 2: a product of n of them has parts of at
 * most 2^n, exact in every floating type for the sizes tested. */
static const double cplx_re[8] = {1, -1, 0, 0, 1, 1, -1, 2};
static const double cplx_im[8] = {0, 0, 1, -1, 1, -1, 1, 0};

#define DEF_CPLX(tag, T, RT)                                                                 \
    static void gen_##tag(int op, uint64_t h, int rank, long idx, void *d)                   \
    {                                                                                        \
        RT p[2];                                                                             \
        (void)rank; (void)idx;                                                               \
        if (op == O_SUM) {                                                                   \
            p[0] = (RT)((long long)(h % 33) - 16) / 4;                                       \
            p[1] = (RT)((long long)((h >> 16) % 33) - 16) / 4;                               \
        } else {                                                                             \
            p[0] = (RT)cplx_re[h % 8];                                                       \
            p[1] = (RT)cplx_im[h % 8];                                                       \
        }                                                                                    \
        memcpy(d, p, sizeof p); /* C11: a complex is laid out as RT[2] */                   \
    }                                                                                        \
    static void comb_##tag(int op, void *acc, const void *x)                                 \
    {                                                                                        \
        T a, b;                                                                              \
        memcpy(&a, acc, sizeof a);                                                           \
        memcpy(&b, x, sizeof b);                                                             \
        a = (op == O_SUM) ? a + b : a * b;                                                   \
        memcpy(acc, &a, sizeof a);                                                           \
    }                                                                                        \
    static int eq_##tag(int op, const void *g, const void *w)                                \
    {                                                                                        \
        RT a[2], b[2];                                                                       \
        (void)op;                                                                            \
        memcpy(a, g, sizeof a);                                                              \
        memcpy(b, w, sizeof b);                                                              \
        return a[0] == b[0] && a[1] == b[1];                                                 \
    }                                                                                        \
    static void show_##tag(const void *e, char *buf, size_t n)                               \
    {                                                                                        \
        RT a[2];                                                                             \
        memcpy(a, e, sizeof a);                                                              \
        snprintf(buf, n, "(%.21Lg, %.21Lg)", (long double)a[0], (long double)a[1]);          \
    }

#define DEF_LOGIC(tag, T)                                                                    \
    static void gen_##tag(int op, uint64_t h, int rank, long idx, void *d)                   \
    {                                                                                        \
        T v;                                                                                 \
        (void)rank; (void)idx;                                                               \
        if (op == O_LAND) v = (T)(h % 8 != 0);                                               \
        else if (op == O_LOR) v = (T)(h % 8 == 0);                                           \
        else v = (T)(h % 2);                                                                 \
        memcpy(d, &v, sizeof v);                                                             \
    }                                                                                        \
    static void comb_##tag(int op, void *acc, const void *x)                                 \
    {                                                                                        \
        T a, b;                                                                              \
        memcpy(&a, acc, sizeof a);                                                           \
        memcpy(&b, x, sizeof b);                                                             \
        if (op == O_LAND) a = (T)(a && b);                                                   \
        else if (op == O_LOR) a = (T)(a || b);                                               \
        else a = (T)(!a != !b);                                                              \
        memcpy(acc, &a, sizeof a);                                                           \
    }                                                                                        \
    static int eq_##tag(int op, const void *g, const void *w)                                \
    {                                                                                        \
        T a, b;                                                                              \
        (void)op;                                                                            \
        memcpy(&a, g, sizeof a);                                                             \
        memcpy(&b, w, sizeof b);                                                             \
        return !a == !b;                                                                     \
    }                                                                                        \
    static void show_##tag(const void *e, char *buf, size_t n)                               \
    {                                                                                        \
        T a;                                                                                 \
        memcpy(&a, e, sizeof a);                                                             \
        snprintf(buf, n, "%lld", (long long)a);                                              \
    }

#define DEF_PAIR(tag, VT, IT)                                                                \
    typedef struct { VT v; IT i; } pair_##tag;                                               \
    static void gen_##tag(int op, uint64_t h, int rank, long idx, void *d)                   \
    {                                                                                        \
        pair_##tag p;                                                                        \
        (void)op; (void)rank; (void)idx;                                                     \
        memset(&p, 0, sizeof p);                                                             \
        p.v = (VT)((long long)(h % 5) - 2); /* few values: many ties */                      \
        p.i = (IT)((h >> 8) % 1000);                                                         \
        memcpy(d, &p, sizeof p);                                                             \
    }                                                                                        \
    static void comb_##tag(int op, void *acc, const void *x)                                 \
    {                                                                                        \
        pair_##tag a, b;                                                                     \
        memcpy(&a, acc, sizeof a);                                                           \
        memcpy(&b, x, sizeof b);                                                             \
        int better = op == O_MAXLOC ? b.v > a.v : b.v < a.v;                                 \
        if (better) a = b;                                                                   \
        else if (b.v == a.v && b.i < a.i) a.i = b.i;                                         \
        memcpy(acc, &a, sizeof a);                                                           \
    }                                                                                        \
    static int eq_##tag(int op, const void *g, const void *w)                                \
    {                                                                                        \
        pair_##tag a, b;                                                                     \
        (void)op;                                                                            \
        memcpy(&a, g, sizeof a);                                                             \
        memcpy(&b, w, sizeof b);                                                             \
        return a.v == b.v && a.i == b.i;                                                     \
    }                                                                                        \
    static void show_##tag(const void *e, char *buf, size_t n)                               \
    {                                                                                        \
        pair_##tag a;                                                                        \
        memcpy(&a, e, sizeof a);                                                             \
        snprintf(buf, n, "(%.21Lg, %.21Lg)", (long double)a.v, (long double)a.i);            \
    }

DEF_INT(schar, signed char, 1)
DEF_INT(uchar, unsigned char, 0)
DEF_INT(short, short, 1)
DEF_INT(ushort, unsigned short, 0)
DEF_INT(int, int, 1)
DEF_INT(uint, unsigned, 0)
DEF_INT(long, long, 1)
DEF_INT(ulong, unsigned long, 0)
DEF_INT(llong, long long, 1)
DEF_INT(ullong, unsigned long long, 0)
DEF_INT(i8, int8_t, 1)
DEF_INT(i16, int16_t, 1)
DEF_INT(i32, int32_t, 1)
DEF_INT(i64, int64_t, 1)
DEF_INT(u8, uint8_t, 0)
DEF_INT(u16, uint16_t, 0)
DEF_INT(u32, uint32_t, 0)
DEF_INT(u64, uint64_t, 0)
DEF_INT(aint, MPI_Aint, 1)
DEF_INT(offset, MPI_Offset, 1)
DEF_INT(count, MPI_Count, 1)
DEF_FLOAT(float, float)
DEF_FLOAT(double, double)
DEF_FLOAT(ldouble, long double)
DEF_CPLX(cfloat, float _Complex, float)
DEF_CPLX(cdouble, double _Complex, double)
DEF_CPLX(cldouble, long double _Complex, long double)
DEF_LOGIC(bool, bool)
DEF_LOGIC(flogical, int)
DEF_PAIR(p2int, int, int)
DEF_PAIR(pshort, short, int)
DEF_PAIR(plong, long, int)
DEF_PAIR(pfloat, float, int)
DEF_PAIR(pdouble, double, int)
DEF_PAIR(pldouble, long double, int)
DEF_PAIR(p2float, float, float)
DEF_PAIR(p2double, double, double)

typedef struct {
    const char *name;
    MPI_Datatype dt;
    size_t csize;     /* sizeof the C type: must equal the MPI extent */
    unsigned ops;     /* allowed predefined ops */
    unsigned bigops;  /* ops also run with the largest count */
    gen_fn gen;
    comb_fn comb;
    eq_fn eq;
    show_fn show;
} tdesc_t;

#define TD(name, dt, tag, ctype, ops, big) \
    { name, dt, sizeof(ctype), ops, big, gen_##tag, comb_##tag, eq_##tag, show_##tag }

/* --------------------------------------------------------------- user ops */
static MPI_Datatype t_mat2, t_heis, t_heis_r, t_vec;
static MPI_Op op_mat2, op_heis, op_vecadd, op_addone;
static long user_calls_bad_type; /* user fn called with a datatype it does not know */

static size_t heis_stride(MPI_Datatype dt)
{
    if (dt == t_heis) return 12;
    if (dt == t_heis_r) return 16;
    user_calls_bad_type++;
    return 12;
}

/* inout = in * inout: `in` is the lower ranks' partial, the left factor */
static void mat2_fn(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    if (*dt != t_mat2) user_calls_bad_type++;
    uint32_t *x = in, *y = inout;
    for (int i = 0; i < *len; i++, x += 4, y += 4) {
        uint32_t r[4] = {x[0] * y[0] + x[1] * y[2], x[0] * y[1] + x[1] * y[3],
                         x[2] * y[0] + x[3] * y[2], x[2] * y[1] + x[3] * y[3]};
        memcpy(y, r, sizeof r);
    }
}

/* (a, b, c) stands for [[1, a, c], [0, 1, b], [0, 0, 1]] mod 2^32 */
static void heis_mul(const uint32_t *x, uint32_t *y)
{
    uint32_t r[3] = {x[0] + y[0], x[1] + y[1], x[2] + y[2] + x[0] * y[1]};
    memcpy(y, r, sizeof r);
}

static void heis_fn(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    size_t stride = heis_stride(*dt);
    for (int i = 0; i < *len; i++)
        heis_mul((const uint32_t *)((char *)in + (size_t)i * stride),
                 (uint32_t *)((char *)inout + (size_t)i * stride));
}

/* MPI_Type_vector(3, 2, 3, MPI_INT32_T): ints 0 1 _ 3 4 _ 6 7 of 8 */
static const int vec_pos[6] = {0, 1, 3, 4, 6, 7};

static void vecadd_fn(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    if (*dt != t_vec) user_calls_bad_type++;
    for (int i = 0; i < *len; i++)
        for (int k = 0; k < 6; k++) {
            uint32_t a, b;
            char *pa = (char *)in + (size_t)i * 32 + (size_t)vec_pos[k] * 4;
            char *pb = (char *)inout + (size_t)i * 32 + (size_t)vec_pos[k] * 4;
            memcpy(&a, pa, 4);
            memcpy(&b, pb, 4);
            b += a;
            memcpy(pb, &b, 4);
        }
}

/* commutative and associative: a + b + 1 (mod 2^64) */
static void addone_fn(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    if (*dt != MPI_UINT64_T) user_calls_bad_type++;
    uint64_t *x = in, *y = inout;
    for (int i = 0; i < *len; i++) y[i] = x[i] + y[i] + 1;
}

/* ------------------------------------------------------------------ cases */
typedef struct {
    char name[64];
    MPI_Datatype dt;
    MPI_Op op;
    int opcode;
    size_t ext;                 /* bytes per element in the buffers */
    const tdesc_t *td;          /* predefined op: the type's functions */
    const unsigned char *gap;   /* ext bytes, 1 = not data (must stay); NULL: none */
    int big;                    /* also the largest count */
    int local_ref;              /* expected result from MPI_Reduce_local (see op_self_check) */
    uint64_t seed;
} tcase_t;

static unsigned char heis_r_gap[16], vec_gap[32];

static void case_gen(const tcase_t *c, int rank, long idx, void *e)
{
    uint64_t h = t_mix(t_mix(c->seed * 0x9e3779b97f4a7c15ull + (uint64_t)rank) ^
                       ((uint64_t)idx * 0xd6e8feb86659fd93ull));
    if (c->td) {
        c->td->gen(c->opcode, h, rank, idx, e);
        return;
    }
    switch (c->opcode) {
    case U_MAT2: {
        uint32_t m[4] = {(uint32_t)h, (uint32_t)(h >> 32), (uint32_t)t_mix(h), (uint32_t)(t_mix(h) >> 32)};
        memcpy(e, m, sizeof m);
        break;
    }
    case U_HEIS: {
        uint32_t m[3] = {(uint32_t)h, (uint32_t)(h >> 32), (uint32_t)t_mix(h)};
        memcpy(e, m, sizeof m); /* the resized type's 4 gap bytes are left alone */
        break;
    }
    case U_VECADD:
        for (int k = 0; k < 6; k++) {
            uint32_t v = (uint32_t)(h >> (k * 8)) * 2654435761u + (uint32_t)k;
            memcpy((char *)e + vec_pos[k] * 4, &v, 4);
        }
        break;
    case U_ADDONE:
        memcpy(e, &h, 8);
        break;
    }
}

static void case_comb(const tcase_t *c, void *acc, const void *x)
{
    int one = 1;
    MPI_Datatype dt = c->dt;
    if (c->td) {
        c->td->comb(c->opcode, acc, x);
        return;
    }
    switch (c->opcode) {
    case U_MAT2: { /* acc = acc * x: acc is the left factor */
        uint32_t a[4], b[4];
        memcpy(a, acc, 16);
        memcpy(b, x, 16);
        uint32_t r[4] = {a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3],
                         a[2] * b[0] + a[3] * b[2], a[2] * b[1] + a[3] * b[3]};
        memcpy(acc, r, 16);
        break;
    }
    case U_HEIS: {
        uint32_t a[3], b[3];
        memcpy(a, acc, 12);
        memcpy(b, x, 12);
        heis_mul(a, b);  /* b = a * b */
        memcpy(acc, b, 12);
        break;
    }
    case U_VECADD:
        vecadd_fn((void *)x, acc, &one, &dt);
        break;
    case U_ADDONE: {
        uint64_t a, b;
        memcpy(&a, acc, 8);
        memcpy(&b, x, 8);
        a = a + b + 1;
        memcpy(acc, &a, 8);
        break;
    }
    }
}

static int case_eq(const tcase_t *c, const void *g, const void *w)
{
    if (c->td) return c->td->eq(c->opcode, g, w);
    if (c->opcode == U_VECADD) {
        for (int k = 0; k < 6; k++)
            if (memcmp((const char *)g + vec_pos[k] * 4, (const char *)w + vec_pos[k] * 4, 4))
                return 0;
        return 1;
    }
    size_t data = c->opcode == U_MAT2 ? 16 : c->opcode == U_HEIS ? 12 : 8;
    return memcmp(g, w, data) == 0;
}

static void case_show(const tcase_t *c, const void *e, char *buf, size_t n)
{
    if (c->td) {
        c->td->show(e, buf, n);
        return;
    }
    uint32_t u[8];
    uint64_t v;
    switch (c->opcode) {
    case U_MAT2: memcpy(u, e, 16); snprintf(buf, n, "[%u %u; %u %u]", u[0], u[1], u[2], u[3]); break;
    case U_HEIS: memcpy(u, e, 12); snprintf(buf, n, "(%u, %u, %u)", u[0], u[1], u[2]); break;
    case U_VECADD:
        memcpy(u, e, 32);
        snprintf(buf, n, "{%u %u . %u %u . %u %u}", u[0], u[1], u[3], u[4], u[6], u[7]);
        break;
    default: memcpy(&v, e, 8); snprintf(buf, n, "%llu", (unsigned long long)v); break;
    }
}

#define MAX_CASES 512
static tcase_t cases[MAX_CASES];
static int ncases;
static tdesc_t types[64];
static int ntypes;

static void add_type(tdesc_t td)
{
    int size = 0;
    MPI_Aint lb = 0, ext = 0;
    if (td.dt == MPI_DATATYPE_NULL) {
        if (t_wrank == 0) printf("info: %s not available, skipped\n", td.name);
        return;
    }
    MPI_Type_size(td.dt, &size);
    MPI_Type_get_extent(td.dt, &lb, &ext);
    if (size <= 0 || (size_t)ext != td.csize) {
        if (t_wrank == 0)
            printf("info: %s has size %d extent %ld, the test's C type %zu bytes: skipped\n",
                   td.name, size, (long)ext, td.csize);
        return;
    }
    types[ntypes++] = td;
}

static tcase_t *new_case(const char *name, MPI_Datatype dt, MPI_Op op, int opcode, size_t ext,
                         int big)
{
    tcase_t *c = &cases[ncases];
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", name);
    c->dt = dt;
    c->op = op;
    c->opcode = opcode;
    c->ext = ext;
    c->big = big;
    c->seed = (uint64_t)ncases + 1;
    ncases++;
    return c;
}

static void build_cases(void)
{
    const unsigned CI = OPS_CINT, FI = OPS_FINT;
    tdesc_t all[] = {
        TD("MPI_SIGNED_CHAR", MPI_SIGNED_CHAR, schar, signed char, CI, 0),
        TD("MPI_UNSIGNED_CHAR", MPI_UNSIGNED_CHAR, uchar, unsigned char, CI, 0),
        TD("MPI_SHORT", MPI_SHORT, short, short, CI, 0),
        TD("MPI_UNSIGNED_SHORT", MPI_UNSIGNED_SHORT, ushort, unsigned short, CI, 0),
        TD("MPI_INT", MPI_INT, int, int, CI, 0),
        TD("MPI_UNSIGNED", MPI_UNSIGNED, uint, unsigned, CI, 0),
        TD("MPI_LONG", MPI_LONG, long, long, CI, 0),
        TD("MPI_UNSIGNED_LONG", MPI_UNSIGNED_LONG, ulong, unsigned long, CI, 0),
        TD("MPI_LONG_LONG", MPI_LONG_LONG, llong, long long, CI, 0),
        TD("MPI_LONG_LONG_INT", MPI_LONG_LONG_INT, llong, long long, CI, 0),
        TD("MPI_UNSIGNED_LONG_LONG", MPI_UNSIGNED_LONG_LONG, ullong, unsigned long long, CI, 0),
        TD("MPI_INT8_T", MPI_INT8_T, i8, int8_t, CI, 0),
        TD("MPI_INT16_T", MPI_INT16_T, i16, int16_t, CI, 0),
        TD("MPI_INT32_T", MPI_INT32_T, i32, int32_t, CI, B(O_SUM)),
        TD("MPI_INT64_T", MPI_INT64_T, i64, int64_t, CI, B(O_MIN)),
        TD("MPI_UINT8_T", MPI_UINT8_T, u8, uint8_t, CI, B(O_BXOR)),
        TD("MPI_UINT16_T", MPI_UINT16_T, u16, uint16_t, CI, 0),
        TD("MPI_UINT32_T", MPI_UINT32_T, u32, uint32_t, CI, 0),
        TD("MPI_UINT64_T", MPI_UINT64_T, u64, uint64_t, CI, B(O_BAND)),
        TD("MPI_AINT", MPI_AINT, aint, MPI_Aint, FI, 0),
        TD("MPI_OFFSET", MPI_OFFSET, offset, MPI_Offset, FI, 0),
        TD("MPI_COUNT", MPI_COUNT, count, MPI_Count, FI, 0),
        TD("MPI_INTEGER", MPI_INTEGER, int, int, FI, 0),
        TD("MPI_INTEGER1", MPI_INTEGER1, i8, int8_t, FI, 0),
        TD("MPI_INTEGER2", MPI_INTEGER2, i16, int16_t, FI, 0),
        TD("MPI_INTEGER4", MPI_INTEGER4, i32, int32_t, FI, 0),
        TD("MPI_INTEGER8", MPI_INTEGER8, i64, int64_t, FI, 0),
        TD("MPI_FLOAT", MPI_FLOAT, float, float, OPS_FLOAT, B(O_PROD)),
        TD("MPI_DOUBLE", MPI_DOUBLE, double, double, OPS_FLOAT, B(O_SUM)),
        TD("MPI_LONG_DOUBLE", MPI_LONG_DOUBLE, ldouble, long double, OPS_FLOAT, B(O_MAX)),
        TD("MPI_REAL", MPI_REAL, float, float, OPS_FLOAT, 0),
        TD("MPI_DOUBLE_PRECISION", MPI_DOUBLE_PRECISION, double, double, OPS_FLOAT, 0),
        TD("MPI_REAL4", MPI_REAL4, float, float, OPS_FLOAT, 0),
        TD("MPI_REAL8", MPI_REAL8, double, double, OPS_FLOAT, 0),
        TD("MPI_C_COMPLEX", MPI_C_COMPLEX, cfloat, float _Complex, OPS_CPLX, 0),
        TD("MPI_C_FLOAT_COMPLEX", MPI_C_FLOAT_COMPLEX, cfloat, float _Complex, OPS_CPLX, 0),
        TD("MPI_C_DOUBLE_COMPLEX", MPI_C_DOUBLE_COMPLEX, cdouble, double _Complex, OPS_CPLX, B(O_PROD)),
        TD("MPI_C_LONG_DOUBLE_COMPLEX", MPI_C_LONG_DOUBLE_COMPLEX, cldouble, long double _Complex, OPS_CPLX, 0),
        TD("MPI_COMPLEX", MPI_COMPLEX, cfloat, float _Complex, OPS_CPLX, 0),
        TD("MPI_DOUBLE_COMPLEX", MPI_DOUBLE_COMPLEX, cdouble, double _Complex, OPS_CPLX, 0),
        TD("MPI_C_BOOL", MPI_C_BOOL, bool, bool, OPS_LOGIC, B(O_LXOR)),
        TD("MPI_LOGICAL", MPI_LOGICAL, flogical, int, OPS_LOGIC, 0),
        TD("MPI_BYTE", MPI_BYTE, u8, uint8_t, OPS_BYTE, 0),
        TD("MPI_2INT", MPI_2INT, p2int, pair_p2int, OPS_PAIR, B(O_MAXLOC)),
        TD("MPI_SHORT_INT", MPI_SHORT_INT, pshort, pair_pshort, OPS_PAIR, 0),
        TD("MPI_LONG_INT", MPI_LONG_INT, plong, pair_plong, OPS_PAIR, 0),
        TD("MPI_FLOAT_INT", MPI_FLOAT_INT, pfloat, pair_pfloat, OPS_PAIR, 0),
        TD("MPI_DOUBLE_INT", MPI_DOUBLE_INT, pdouble, pair_pdouble, OPS_PAIR, B(O_MINLOC)),
        TD("MPI_LONG_DOUBLE_INT", MPI_LONG_DOUBLE_INT, pldouble, pair_pldouble, OPS_PAIR, 0),
        TD("MPI_2INTEGER", MPI_2INTEGER, p2int, pair_p2int, OPS_PAIR, 0),
        TD("MPI_2REAL", MPI_2REAL, p2float, pair_p2float, OPS_PAIR, 0),
        TD("MPI_2DOUBLE_PRECISION", MPI_2DOUBLE_PRECISION, p2double, pair_p2double, OPS_PAIR, 0),
    };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) add_type(all[i]);
    for (int t = 0; t < ntypes; t++)
        for (int o = 0; o < O_NPRE; o++) {
            if (!(types[t].ops & B(o))) continue;
            char name[64];
            snprintf(name, sizeof name, "%s/MPI_%s", types[t].name, op_names[o]);
            tcase_t *c = new_case(name, types[t].dt, predefined_op(o), o, types[t].csize,
                                  (types[t].bigops & B(o)) != 0);
            c->td = &types[t];
        }

    /* user-defined ops and derived datatypes */
    T_MPI(MPI_Type_contiguous(4, MPI_UINT32_T, &t_mat2));
    T_MPI(MPI_Type_commit(&t_mat2));
    T_MPI(MPI_Type_contiguous(3, MPI_UINT32_T, &t_heis));
    T_MPI(MPI_Type_commit(&t_heis));
    T_MPI(MPI_Type_create_resized(t_heis, 0, 16, &t_heis_r));
    T_MPI(MPI_Type_commit(&t_heis_r));
    T_MPI(MPI_Type_vector(3, 2, 3, MPI_INT32_T, &t_vec));
    T_MPI(MPI_Type_commit(&t_vec));
    T_MPI(MPI_Op_create(mat2_fn, 0, &op_mat2));
    T_MPI(MPI_Op_create(heis_fn, 0, &op_heis));
    T_MPI(MPI_Op_create(vecadd_fn, 1, &op_vecadd));
    T_MPI(MPI_Op_create(addone_fn, 1, &op_addone));
    memset(heis_r_gap + 12, 1, 4);
    vec_gap[8] = vec_gap[9] = vec_gap[10] = vec_gap[11] = 1;
    vec_gap[20] = vec_gap[21] = vec_gap[22] = vec_gap[23] = 1;

    new_case("mat2x2 uint32 (contiguous)/user non-commutative product", t_mat2, op_mat2, U_MAT2, 16, 1);
    new_case("heisenberg 12 B (contiguous)/user non-commutative", t_heis, op_heis, U_HEIS, 12, 0);
    tcase_t *c = new_case("heisenberg resized to 16 B (gap)/user non-commutative", t_heis_r, op_heis,
                          U_HEIS, 16, 0);
    c->gap = heis_r_gap;
    c = new_case("vector(3,2,3) int32 (gaps)/user commutative add", t_vec, op_vecadd, U_VECADD, 32, 0);
    c->gap = vec_gap;
    new_case("MPI_UINT64_T/user commutative a+b+1", MPI_UINT64_T, op_addone, U_ADDONE, 8, 0);
}

/* ---------------------------------------------------------------- running */
static long max_count = 100000;
static long large_count = 0;
/* -k: each predefined op/type pair at one count in `pair_count_stride` */
static long pair_count_stride = 1;
static long total_calls;
static const unsigned char SEND_FILL = 0x5a, RECV_FILL = 0xa5;

typedef struct {
    size_t cap;
    unsigned char *send, *recv, *pristine, *pre, *want, *tmp, *part;
} bufs_t;
static bufs_t B_;

static void ensure(size_t bytes)
{
    if (bytes <= B_.cap) return;
    free(B_.send); free(B_.recv); free(B_.pristine); free(B_.pre); free(B_.want); free(B_.tmp);
    free(B_.part);
    B_.cap = bytes;
    B_.send = malloc(bytes); B_.recv = malloc(bytes); B_.pristine = malloc(bytes);
    B_.pre = malloc(bytes); B_.want = malloc(bytes); B_.tmp = malloc(64); B_.part = malloc(bytes);
    if (!B_.send || !B_.recv || !B_.pristine || !B_.pre || !B_.want || !B_.tmp || !B_.part) {
        fprintf(stderr, "rank %d: out of memory (%zu bytes)\n", t_wrank, bytes);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

static void fill_input(const tcase_t *c, int rank, long count, unsigned char *buf)
{
    memset(buf, SEND_FILL, c->ext * (size_t)count);
    for (long j = 0; j < count; j++) case_gen(c, rank, j, buf + (size_t)j * c->ext);
}

/* want = x_0 op x_1 op ... op x_{n-1}, element by element, in rank order */
static void expected(const tcase_t *c, int n, long count, unsigned char *want)
{
    fill_input(c, 0, count, want);
    if (c->local_ref) {
        /* Open MPI's own op, applied locally: MPI_Reduce_local(in, inout)
         * computes inout = in op inout, so in = the lower ranks' partial */
        for (int r = 1; r < n && count > 0; r++) {
            fill_input(c, r, count, B_.part);
            T_MPI(MPI_Reduce_local(want, B_.part, (int)count, c->dt, c->op));
            memcpy(want, B_.part, c->ext * (size_t)count);
        }
        return;
    }
    for (long j = 0; j < count; j++) {
        unsigned char *acc = want + (size_t)j * c->ext;
        for (int r = 1; r < n; r++) {
            case_gen(c, r, j, B_.tmp);
            case_comb(c, acc, B_.tmp);
        }
    }
}

static void check_result(const tcase_t *c, tcomm_t *t, const char *what, int root, long count,
                         const unsigned char *got, const unsigned char *pre,
                         const unsigned char *want)
{
    long bad = 0, first = -1, gapbad = 0, firstgap = -1;
    for (long j = 0; j < count; j++) {
        const unsigned char *g = got + (size_t)j * c->ext;
        if (!case_eq(c, g, want + (size_t)j * c->ext)) {
            if (first < 0) first = j;
            bad++;
        }
        if (c->gap)
            for (size_t b = 0; b < c->ext; b++)
                if (c->gap[b] && g[b] != pre[(size_t)j * c->ext + b]) {
                    if (firstgap < 0) firstgap = j * (long)c->ext + (long)b;
                    gapbad++;
                }
    }
    if (bad) {
        char gs[160], ws[160];
        case_show(c, got + (size_t)first * c->ext, gs, sizeof gs);
        case_show(c, want + (size_t)first * c->ext, ws, sizeof ws);
        T_FAIL("%s %s comm %d (size %d) count %ld root %d: %ld of %ld element(s) wrong, first "
               "[%ld] = %s, expected %s", what, c->name, t->cid, t->size, count, root, bad, count,
               first, gs, ws);
    }
    if (gapbad)
        T_FAIL("%s %s comm %d count %ld root %d: %ld gap byte(s) of the receive buffer changed, "
               "first at byte %ld (0x%02x, was 0x%02x)", what, c->name, t->cid, count, root,
               gapbad, firstgap, got[firstgap], pre[firstgap]);
    if (count == 0 && memcmp(got, pre, 64) != 0)
        T_FAIL("%s %s comm %d: count 0 wrote into the receive buffer", what, c->name, t->cid);
}

static void check_send(const tcase_t *c, tcomm_t *t, const char *what, long count)
{
    size_t bytes = c->ext * (size_t)count;
    if (memcmp(B_.send, B_.pristine, bytes) != 0)
        T_FAIL("%s %s comm %d count %ld: the send buffer was modified", what, c->name, t->cid,
               count);
}

/* Does Open MPI's op itself compute what the test computes? MPI_Reduce_local
 * on 256 elements of ranks 0..3, compared with the test's serial reduction.
 * Open MPI 4.1.2 to 4.1.4 get MIN/MAX on MPI_UNSIGNED_LONG wrong (compared
 * as signed; open-mpi/ompi#10525, #10648), and MIN/MAX on MPI_OFFSET too
 * (compared as unsigned). A coll component that calls Open MPI's op
 * inherits that, so for such a pair the expected result of the collective
 * is computed with MPI_Reduce_local instead, and the pair is listed in an
 * info line: the test still checks that the collective combines exactly
 * what it should, in the right order, with the op as Open MPI has it.
 * Only predefined ops may be switched; for user ops a difference is a bug
 * in the test's reference. */
static void op_self_check(void)
{
    const long count = 256;
    const int ranks = 4;
    int defective = 0;
    char list[2048] = "";
    for (int i = 0; i < ncases; i++) {
        tcase_t *c = &cases[i];
        ensure(c->ext * (size_t)count + 64);
        expected(c, ranks, count, B_.want);
        c->local_ref = 1;
        expected(c, ranks, count, B_.recv);
        c->local_ref = 0;
        for (long j = 0; j < count; j++)
            if (!case_eq(c, B_.recv + (size_t)j * c->ext, B_.want + (size_t)j * c->ext)) {
                c->local_ref = 1;
                break;
            }
        if (c->local_ref && !c->td) {
            /* a user op: the test's reference and its own function disagree */
            T_FAIL("%s: the test's serial reference differs from MPI_Reduce_local with the "
                   "same user function (a bug in the test)", c->name);
            c->local_ref = 0;
        }
        if (c->local_ref) {
            defective++;
            size_t len = strlen(list);
            if (len + strlen(c->name) + 3 < sizeof list) {
                if (len) strcat(list, ", ");
                strcat(list, c->name);
            }
        }
    }
    if (t_wrank == 0 && defective)
        printf("info: Open MPI's own op differs from the C semantics for %d pair(s), "
               "compared with MPI_Reduce_local instead: %s\n", defective, list);
}

enum { V_ALLREDUCE, V_ALLREDUCE_IN_PLACE, V_REDUCE, V_REDUCE_IN_PLACE };
static const char *const v_names[] = {"allreduce", "allreduce(in place)", "reduce",
                                      "reduce(in place at root)"};

/* One call of variant v; `want` must hold the expected result. */
static void run_variant(const tcase_t *c, tcomm_t *t, long count, int v, int root, int null_recv)
{
    MPI_Comm comm = t->comm;
    int me = t->rank;
    size_t bytes = c->ext * (size_t)count, area = bytes > 64 ? bytes : 64;
    int icount = (int)count, rc;
    const char *what = v_names[v];
    total_calls++;
    switch (v) {
    case V_ALLREDUCE:
        fill_input(c, me, count, B_.send);
        memcpy(B_.pristine, B_.send, bytes);
        memset(B_.recv, RECV_FILL, area);
        memcpy(B_.pre, B_.recv, area);
        rc = MPI_Allreduce(B_.send, B_.recv, icount, c->dt, c->op, comm);
        if (rc != MPI_SUCCESS) { T_FAIL("%s %s: error %d", what, c->name, rc); return; }
        check_result(c, t, what, -1, count, B_.recv, B_.pre, B_.want);
        check_send(c, t, what, count);
        break;
    case V_ALLREDUCE_IN_PLACE:
        memset(B_.recv, RECV_FILL, area);
        fill_input(c, me, count, B_.recv);
        memcpy(B_.pre, B_.recv, area);
        rc = MPI_Allreduce(MPI_IN_PLACE, B_.recv, icount, c->dt, c->op, comm);
        if (rc != MPI_SUCCESS) { T_FAIL("%s %s: error %d", what, c->name, rc); return; }
        check_result(c, t, what, -1, count, B_.recv, B_.pre, B_.want);
        break;
    case V_REDUCE:
        fill_input(c, me, count, B_.send);
        memcpy(B_.pristine, B_.send, bytes);
        memset(B_.recv, RECV_FILL, area);
        memcpy(B_.pre, B_.recv, area);
        rc = MPI_Reduce(B_.send, (me == root || !null_recv) ? B_.recv : NULL, icount, c->dt,
                        c->op, root, comm);
        if (rc != MPI_SUCCESS) { T_FAIL("%s %s: error %d", what, c->name, rc); return; }
        if (me == root) check_result(c, t, what, root, count, B_.recv, B_.pre, B_.want);
        check_send(c, t, what, count);
        break;
    case V_REDUCE_IN_PLACE:
        if (me == root) {
            memset(B_.recv, RECV_FILL, area);
            fill_input(c, me, count, B_.recv);
            memcpy(B_.pre, B_.recv, area);
            rc = MPI_Reduce(MPI_IN_PLACE, B_.recv, icount, c->dt, c->op, root, comm);
            if (rc != MPI_SUCCESS) { T_FAIL("%s %s: error %d", what, c->name, rc); return; }
            check_result(c, t, what, root, count, B_.recv, B_.pre, B_.want);
        } else {
            fill_input(c, me, count, B_.send);
            memcpy(B_.pristine, B_.send, bytes);
            rc = MPI_Reduce(B_.send, null_recv ? NULL : B_.recv, icount, c->dt, c->op, root, comm);
            if (rc != MPI_SUCCESS) { T_FAIL("%s %s: error %d", what, c->name, rc); return; }
            check_send(c, t, what, count);
        }
        break;
    }
}

/* All four variants of one case at one count. */
static void run_case(const tcase_t *c, tcomm_t *t, long count, long seq)
{
    if (t->comm == MPI_COMM_NULL) return;
    int n = t->size;
    ensure(c->ext * (size_t)count + 64);
    expected(c, n, count, B_.want);
    int root_a = (int)(seq % n), root_b = (int)((seq * 7 + 3) % n);
    run_variant(c, t, count, V_ALLREDUCE, -1, 0);
    run_variant(c, t, count, V_ALLREDUCE_IN_PLACE, -1, 0);
    run_variant(c, t, count, V_REDUCE, root_a, (int)(seq & 1));
    run_variant(c, t, count, V_REDUCE_IN_PLACE, root_b, (int)((seq >> 1) & 1));
}

static long seq_no;

static void all_cases(tcomm_t *t)
{
    const long counts[] = {0, 1, 7, 1000, 100000, large_count};
    const size_t last = sizeof counts / sizeof counts[0] - 1;
    for (int i = 0; i < ncases; i++)
        for (size_t k = 0; k <= last; k++) {
            long count = counts[k];
            if (k == last ? count <= 0 : count > max_count) continue;
            if (count >= 100000 && !cases[i].big) continue;
            if (cases[i].td && (i + (long)k) % pair_count_stride != 0) continue;
            run_case(&cases[i], t, count, seq_no++);
        }
}

/* Back-to-back reductions on several communicators, changing sizes, roots
 * and ops, a barrier now and then, one rank a little late each time. The
 * sequence depends only on the iteration and the communicator's size, so
 * every member makes the same calls. */
static void interleave(tcomm_t **comms, int ncomms, long iters)
{
    static const long sizes[] = {1, 3, 64, 513, 4096, 20000, 2, 1000};
    const int nsizes = (int)(sizeof sizes / sizeof sizes[0]);
    int pick[5];
    int npick = 0;
    for (int i = 0; i < ncases && npick < 5; i++) {
        const char *nm = cases[i].name;
        if (!strcmp(nm, "MPI_INT64_T/MPI_SUM") || !strcmp(nm, "MPI_DOUBLE/MPI_MAX") ||
            !strcmp(nm, "MPI_UINT8_T/MPI_BXOR") || cases[i].opcode == U_MAT2 ||
            cases[i].opcode == U_VECADD)
            pick[npick++] = i;
    }
    for (long it = 0; it < iters; it++) {
        for (int k = 0; k < ncomms; k++) {
            tcomm_t *t = comms[(it + k) % ncomms];
            if (t->comm == MPI_COMM_NULL) continue;
            int n = t->size;
            const tcase_t *c = &cases[pick[(it + k) % npick]];
            long count = sizes[(it * 3 + k) % nsizes];
            if (count > max_count) count = max_count;
            if (c->opcode == U_VECADD && count > 1000) count = 1000;
            if (t->rank == (int)(it % n) && it % 3 == 0) usleep(50 * (unsigned)(it % 4));
            ensure(c->ext * (size_t)count + 64);
            expected(c, n, count, B_.want);
            int v = (int)((it + k) % 4);
            int root = (int)((it * 5 + k) % n);
            run_variant(c, t, count, v, root, (int)(it & 1));
            /* the same case straight away with another root / variant */
            run_variant(c, t, count, (v + 2) % 4, (root + 1) % n, 0);
            if ((it + k) % 5 == 0) t_barrier(t);
        }
        if (it % 7 == 0) t_barrier(comms[0]);
    }
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    max_count = t_opt(argc, argv, "-m", 100000);
    large_count = t_opt(argc, argv, "-L", 0);
    long iters = t_opt(argc, argv, "-x", 150);
    pair_count_stride = t_opt(argc, argv, "-k", 1);
    if (pair_count_stride < 1) pair_count_stride = 1;
    build_cases();
    op_self_check();
    if (t_wrank == 0)
        printf("info: %d datatypes, %d cases, counts up to %ld, each op/type pair at 1 count in %ld\n",
               ntypes, ncases, max_count, pair_count_stride);

    MPI_Comm c;
    tcomm_t sub, dupw;
    /* even and odd world ranks, each in reverse order: canonical order differs
     * from world order */
    T_MPI(MPI_Comm_split(MPI_COMM_WORLD, t_wrank % 2, -t_wrank, &c));
    t_derive(&t_world, c, &sub);
    T_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    t_derive(&t_world, c, &dupw);

    double t0 = MPI_Wtime();
    all_cases(&t_world);
    double t1 = MPI_Wtime();
    t_barrier(&t_world);
    all_cases(&sub);
    double t2 = MPI_Wtime();
    t_barrier(&t_world);
    tcomm_t *comms[3] = {&t_world, &sub, &dupw};
    interleave(comms, 3, iters);
    double t3 = MPI_Wtime();

    if (user_calls_bad_type)
        T_FAIL("user op functions were called %ld time(s) with a datatype other than the one "
               "of the call", user_calls_bad_type);
    if (t_wrank == 0)
        printf("info: reduce_ops: %ld calls; world %.2f s, split %.2f s, interleaved %.2f s\n",
               total_calls, t1 - t0, t2 - t1, t3 - t2);

    t_free(&sub);
    t_free(&dupw);
    MPI_Op_free(&op_mat2);
    MPI_Op_free(&op_heis);
    MPI_Op_free(&op_vecadd);
    MPI_Op_free(&op_addone);
    MPI_Type_free(&t_mat2);
    MPI_Type_free(&t_heis_r);
    MPI_Type_free(&t_heis);
    MPI_Type_free(&t_vec);
    return t_finish("reduce_ops");
}
