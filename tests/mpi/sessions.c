/*
 * MPI 4 sessions and re-initialisation in one process: two sessions, one
 * after the other, each making a communicator from the "mpi://WORLD" process
 * set and a dup of it, then MPI_Init and the same on MPI_COMM_WORLD. On each
 * of the six communicators barrier, bcast, allreduce and reduce run at a few
 * lengths and every result is compared with the value computed locally from
 * the ranks' formulas. Open MPI initialises and finalises its frameworks
 * (and so every coll component's open, close and parameter registration)
 * once per session here, which is what the program exercises.
 *
 * usage: sessions [-r] [-m] [-k] [-n] [-s N] [-d SECONDS]
 *   -s N  N sessions one after the other before MPI_Init (default 2)
 *   -d SECONDS  rank 1 sleeps this long before the first session's
 *       collectives, so that rank 0 waits inside them: a hang in coll rdma
 *       made to order, for ci/ompi5/user-tests.sh's check that such a hang
 *       is reported, not run again
 *   -r  also require that coll rdma serves the four collectives on every
 *       communicator (each function pointer Open MPI installed is looked up
 *       with dladdr and must lie in mca_coll_rdma.so)
 *   -m  change coll rdma's settings between sessions, as a user may between
 *       MPI_Session_finalize and the next MPI_Session_init, and check that
 *       each session runs with the values set before it: session 2 sets
 *       OMPI_MCA_coll_rdma_priority=-1 (coll rdma must serve nothing),
 *       session 3 sets 77, sessions after that repeat the cycle, and
 *       MPI_Init runs with the priority unset again. After each session
 *       this rank's coll rdma events (docs/events.md) written during it
 *       must hold a comm_claimed with that priority, or for -1 a
 *       comm_not_claimed with it: the events file has to survive the
 *       re-initialisations. The events go where
 *       OMPI_MCA_coll_rdma_events_file says (the caller's file, which the
 *       program only reads), else to a directory of the program's own
 *       under TMPDIR, removed at the end. Each session's stderr is
 *       captured (then passed on) and must hold some coll rdma output
 *       (its "coll:rdma: " prefix; the wording is not read): verbose output
 *       has to survive the re-initialisations too. Sets
 *       OMPI_MCA_coll_rdma_verbose=2 itself (every rank's detail).
 *   -k  keep coll rdma's library loaded from the first communicator it
 *       serves to the end of the process (dlopen with RTLD_NODELETE), as
 *       glibc does by itself once a thread-local destructor is registered
 *       in it. Open MPI unloads each component at every finalisation and
 *       loads it afresh at the next initialisation, which otherwise gives
 *       every session new copies of the component's process-wide state;
 *       with -k that state lives on across sessions, as it must be able to.
 *   -n  end after the sessions, without MPI_Init (Open MPI 5.0.7's tcp btl
 *       now and then refuses a connection in an MPI_Init that follows
 *       several sessions; see ci/ompi5/user-tests.sh)
 *
 * Output (stdout): at each phase boundary
 *   "sessions: phase <phase> begin|done rank R"
 * (phases: session<k>-init, session<k>-collectives, session<k>-finalize,
 * mpi-init, world-collectives, mpi-finalize; R is the launcher's rank, from
 * PMIX_RANK, before any communicator exists), so that a job that outlived
 * its limit says where each rank was; per communicator and collective
 *   "sessions: served <phase> <collective> by <library basename>",
 * "sessions: FAIL ..." for each wrong result or missing event or output, and a last line
 * "sessions: rank R ok" or "sessions: rank R failed N". Exit status 0 only
 * when every check passed. Under an MPI without sessions (before MPI 4.0
 * and Open MPI 5.0) it
 * prints "SKIPPED" and exits 0.
 *
 * Not built on common.h: its t_init() calls MPI_Init, which must come last
 * here.
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Open MPI 5.0 provides sessions while it still reports MPI 3.1. */
#if MPI_VERSION >= 4 || (defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5)
#define HAVE_SESSIONS 1
#endif

#ifdef HAVE_SESSIONS
#include <dlfcn.h>
/* Open MPI's internal headers (the component's build needs them anyway):
 * only to read which functions the coll framework installed. */
#include "ompi_config.h"
#include "ompi/communicator/communicator.h"
#include "ompi/mca/coll/coll.h"

static int failures;
static int require_rdma;
static int change_settings;
static int keep_loaded;
static int skip_mpi_init;
static void *kept_library;
/* Whether coll rdma should serve the communicators of the current phase
 * (only -m makes it decline some). */
static int expect_rdma = 1;
static int rank1_delay_seconds;
static int my_world_rank = -1;

/* Where each rank is: printed line-buffered, so that the launcher's output
 * shows the last boundary a rank passed even when the job is killed. */
static void mark_phase(const char *name, const char *edge)
{
    printf("sessions: phase %s %s rank %d\n", name, edge, my_world_rank);
}

#define FAIL(...)                                                        \
    do {                                                                 \
        printf("sessions: FAIL rank %d: ", my_world_rank);               \
        printf(__VA_ARGS__);                                             \
        printf("\n");                                                    \
        failures++;                                                      \
    } while (0)

static const char *library_of(void (*fn)(void))
{
    Dl_info info;
    if (fn == NULL) {
        return "(none)";
    }
    if (dladdr((void *)fn, &info) == 0 || info.dli_fname == NULL) {
        return "(unknown)";
    }
    const char *slash = strrchr(info.dli_fname, '/');
    return slash ? slash + 1 : info.dli_fname;
}

/* -k: from now on the library that holds fn stays loaded. */
static void keep_library_of(void (*fn)(void))
{
    Dl_info info;
    if (dladdr((void *)fn, &info) == 0 || info.dli_fname == NULL) {
        FAIL("cannot find coll rdma's library to keep it loaded");
        return;
    }
    kept_library = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
    if (kept_library == NULL) {
        FAIL("cannot keep %s loaded: %s", info.dli_fname, dlerror());
        return;
    }
    printf("sessions: %s kept loaded from now on\n", info.dli_fname);
}

static void report_server(const char *phase, const char *collective, void (*fn)(void))
{
    const char *lib = library_of(fn);
    int by_rdma = strcmp(lib, "mca_coll_rdma.so") == 0;
    printf("sessions: served %s %s by %s\n", phase, collective, lib);
    if (keep_loaded && by_rdma && kept_library == NULL) {
        keep_library_of(fn);
    }
    if (require_rdma && expect_rdma && !by_rdma) {
        FAIL("%s %s is served by %s, not coll rdma", phase, collective, lib);
    }
    if (!expect_rdma && by_rdma) {
        FAIL("%s %s is served by coll rdma, which the priority set for this session excludes", phase, collective);
    }
}

static void report_servers(const char *phase, MPI_Comm comm)
{
    mca_coll_base_comm_coll_t *coll = ((ompi_communicator_t *)comm)->c_coll;
    report_server(phase, "barrier", (void (*)(void))coll->coll_barrier);
    report_server(phase, "bcast", (void (*)(void))coll->coll_bcast);
    report_server(phase, "allreduce", (void (*)(void))coll->coll_allreduce);
    report_server(phase, "reduce", (void (*)(void))coll->coll_reduce);
}

/* Rank r's i-th element in a reduction: distinct per rank and index, so a
 * dropped or doubled contribution changes the sum. */
static long long contribution(int rank, int i)
{
    return (long long)(rank + 1) * 1000003LL + i;
}

static void check_collectives(const char *phase, MPI_Comm comm)
{
    static const int counts[] = {1, 1000, 70000};
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    report_servers(phase, comm);

    for (int k = 0; k < 3; k++) {
        if (MPI_Barrier(comm) != MPI_SUCCESS) {
            FAIL("%s barrier returned an error", phase);
        }
    }
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        int count = counts[c];
        long long *in = malloc(sizeof(long long) * count);
        long long *out = malloc(sizeof(long long) * count);
        if (!in || !out) {
            FAIL("%s out of memory for %d elements", phase, count);
            free(in);
            free(out);
            return;
        }
        long long sum_of_ranks_term = (long long)size * (size + 1) / 2 * 1000003LL;
        int bad;

        int root = size - 1;
        for (int i = 0; i < count; i++) {
            in[i] = rank == root ? 7LL * i + count : -1;
        }
        MPI_Bcast(in, count, MPI_LONG_LONG, root, comm);
        bad = 0;
        for (int i = 0; i < count; i++) {
            bad += in[i] != 7LL * i + count;
        }
        if (bad) {
            FAIL("%s bcast of %d from %d: %d elements wrong", phase, count, root, bad);
        }

        for (int i = 0; i < count; i++) {
            in[i] = contribution(rank, i);
            out[i] = 0;
        }
        MPI_Allreduce(in, out, count, MPI_LONG_LONG, MPI_SUM, comm);
        bad = 0;
        for (int i = 0; i < count; i++) {
            bad += out[i] != sum_of_ranks_term + (long long)size * i;
        }
        if (bad) {
            FAIL("%s allreduce sum of %d: %d elements wrong", phase, count, bad);
        }

        for (int i = 0; i < count; i++) {
            out[i] = -1;
        }
        MPI_Reduce(in, out, count, MPI_LONG_LONG, MPI_MAX, 0, comm);
        if (rank == 0) {
            bad = 0;
            for (int i = 0; i < count; i++) {
                bad += out[i] != contribution(size - 1, i);
            }
            if (bad) {
                FAIL("%s reduce max of %d: %d elements wrong", phase, count, bad);
            }
        }
        free(in);
        free(out);
    }
}

static void check_with_dup(const char *phase, MPI_Comm comm)
{
    char label[64];
    MPI_Comm dup;
    check_collectives(phase, comm);
    MPI_Comm_dup(comm, &dup);
    snprintf(label, sizeof label, "%s-dup", phase);
    check_collectives(label, dup);
    MPI_Comm_free(&dup);
}

/* -m: what each session sets before it starts, and the event about its
 * communicators each rank must record during it. */
struct session_settings {
    const char *priority; /* NULL: unset */
    int expect_rdma;
    const char *event; /* comm_claimed or comm_not_claimed */
    long event_priority; /* the event's "priority" */
};
static const struct session_settings settings_cycle[] = {
    {NULL, 1, "comm_claimed", 40},
    {"-1", 0, "comm_not_claimed", -1},
    {"77", 1, "comm_claimed", 77},
};

/* -m: this process's coll rdma events file, and how much of it the
 * sessions before the current one wrote. */
static char events_path[512];
static long events_seen_bytes;
static char own_events_dir[256]; /* made here when the caller gave no file */

/* The file coll rdma writes for PATTERN (coll_rdma_events_file's
 * placeholders, docs/events.md): %r this process's rank in
 * MPI_COMM_WORLD as the launcher gives it, %p its pid, %% a %; without %r
 * ".<rank>" is appended. */
static void expand_events_pattern(const char *pattern, char *path, size_t room)
{
    const char *launcher = getenv("OMPI_COMM_WORLD_RANK");
    char rank[32], pid[32];
    int has_rank = 0;
    size_t used = 0;
    if (launcher != NULL && *launcher != '\0' && strspn(launcher, "0123456789") == strlen(launcher)) {
        snprintf(rank, sizeof rank, "%s", launcher);
    } else {
        snprintf(rank, sizeof rank, "pid%ld", (long)getpid());
    }
    snprintf(pid, sizeof pid, "%ld", (long)getpid());
    path[0] = '\0';
    for (const char *c = pattern; *c != '\0' && used + 1 < room; c++) {
        const char *piece = NULL;
        if (c[0] == '%' && c[1] == 'r') {
            piece = rank;
            has_rank = 1;
        } else if (c[0] == '%' && c[1] == 'p') {
            piece = pid;
        } else if (c[0] == '%' && c[1] == '%') {
            piece = "%";
        }
        if (piece != NULL) {
            c++;
        } else {
            path[used] = *c;
            path[++used] = '\0';
            continue;
        }
        used += (size_t)snprintf(path + used, room - used, "%s", piece);
    }
    if (!has_rank && used < room) {
        snprintf(path + used, room - used, ".%s", rank);
    }
}

/* Where coll rdma writes this process's events: the caller's
 * coll_rdma_events_file, else a file in a fresh directory of our own. Set
 * before the first session opens the component. */
static int locate_events_file(void)
{
    const char *pattern = getenv("OMPI_MCA_coll_rdma_events_file");
    char own_pattern[300];
    if (pattern == NULL || *pattern == '\0') {
        const char *dir = getenv("TMPDIR");
        snprintf(own_events_dir, sizeof own_events_dir, "%s/coll-rdma-sessions-events.XXXXXX", dir && *dir ? dir : "/tmp");
        if (mkdtemp(own_events_dir) == NULL) {
            own_events_dir[0] = '\0';
            return -1;
        }
        snprintf(own_pattern, sizeof own_pattern, "%s/events-%%r.jsonl", own_events_dir);
        setenv("OMPI_MCA_coll_rdma_events_file", own_pattern, 1);
        pattern = own_pattern;
    }
    expand_events_pattern(pattern, events_path, sizeof events_path);
    return 0;
}

static void remove_own_events_file(void)
{
    if (own_events_dir[0] != '\0') {
        unlink(events_path);
        rmdir(own_events_dir);
    }
}

/* The value of top-level KEY in one event's line (compact JSON as coll
 * rdma writes it: "key":value), copied into VALUE without quotes; 0 when
 * absent. Keys are matched with their quotes, so a key's name inside a
 * string value (escaped quotes there) never matches. */
static int event_field(const char *line, const char *key, char *value, size_t room)
{
    char quoted[64];
    snprintf(quoted, sizeof quoted, "\"%s\":", key);
    const char *at = strstr(line, quoted);
    if (at == NULL || room == 0) {
        return 0;
    }
    at += strlen(quoted);
    int in_string = *at == '"';
    at += in_string;
    size_t length = in_string ? strcspn(at, "\"") : strcspn(at, ",}");
    if (length >= room) {
        length = room - 1;
    }
    memcpy(value, at, length);
    value[length] = '\0';
    return 1;
}

/* Whether the events written since the last call hold EVENT with
 * "priority" PRIORITY; what was read is not read again. -1 when the file
 * cannot be read. */
static int new_events_hold(const char *event, long priority)
{
    FILE *file = fopen(events_path, "r");
    if (file == NULL || fseek(file, events_seen_bytes, SEEK_SET) != 0) {
        if (file != NULL) {
            fclose(file);
        }
        return -1;
    }
    char line[8192], name[64], value[32];
    int found = 0;
    while (fgets(line, sizeof line, file) != NULL) {
        if (event_field(line, "event", name, sizeof name) && strcmp(name, event) == 0 &&
            event_field(line, "priority", value, sizeof value) && strtol(value, NULL, 10) == priority) {
            found = 1;
        }
    }
    events_seen_bytes = ftell(file);
    fclose(file);
    return found;
}

/* stderr redirected to a file for the length of one session */
struct stderr_capture {
    int saved_fd;
    char path[256];
};

static int capture_stderr(struct stderr_capture *capture)
{
    const char *dir = getenv("TMPDIR");
    snprintf(capture->path, sizeof capture->path, "%s/coll-rdma-sessions.XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(capture->path);
    if (fd < 0) {
        return -1;
    }
    fflush(stderr);
    capture->saved_fd = dup(STDERR_FILENO);
    if (capture->saved_fd < 0 || dup2(fd, STDERR_FILENO) < 0) {
        close(fd);
        unlink(capture->path);
        return -1;
    }
    close(fd);
    return 0;
}

/* Restores stderr, passes on what the session wrote to it and returns that
 * text (NUL-terminated, to be freed; NULL if it cannot be read). */
static char *release_stderr(struct stderr_capture *capture)
{
    fflush(stderr);
    dup2(capture->saved_fd, STDERR_FILENO);
    close(capture->saved_fd);
    char *text = NULL;
    FILE *file = fopen(capture->path, "r");
    unlink(capture->path);
    if (file != NULL) {
        fseek(file, 0, SEEK_END);
        long length = ftell(file);
        rewind(file);
        text = length >= 0 ? malloc((size_t)length + 1) : NULL;
        if (text != NULL) {
            size_t got = fread(text, 1, (size_t)length, file);
            text[got] = '\0';
            fwrite(text, 1, got, stderr);
        }
        fclose(file);
    }
    return text;
}

static void set_priority(const char *priority)
{
    if (priority != NULL) {
        setenv("OMPI_MCA_coll_rdma_priority", priority, 1);
    } else {
        unsetenv("OMPI_MCA_coll_rdma_priority");
    }
}

static void one_session(const char *name)
{
    char label[64];
    MPI_Session session;
    MPI_Group group;
    MPI_Comm comm;
    snprintf(label, sizeof label, "%s-init", name);
    mark_phase(label, "begin");
    if (MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &session) != MPI_SUCCESS) {
        FAIL("%s MPI_Session_init failed", name);
        return;
    }
    char tag[64];
    MPI_Group_from_session_pset(session, "mpi://WORLD", &group);
    /* A tag of its own per session: PMIx names the group after it. */
    snprintf(tag, sizeof tag, "coll-rdma.sessions.%s", name);
    MPI_Comm_create_from_group(group, tag, MPI_INFO_NULL, MPI_ERRORS_RETURN, &comm);
    MPI_Group_free(&group);
    MPI_Comm_rank(comm, &my_world_rank);
    mark_phase(label, "done");
    snprintf(label, sizeof label, "%s-collectives", name);
    mark_phase(label, "begin");
    if (rank1_delay_seconds > 0 && my_world_rank == 1 && strcmp(name, "session1") == 0) {
        sleep((unsigned)rank1_delay_seconds);
    }
    check_with_dup(name, comm);
    MPI_Comm_free(&comm);
    mark_phase(label, "done");
    snprintf(label, sizeof label, "%s-finalize", name);
    mark_phase(label, "begin");
    if (MPI_Session_finalize(&session) != MPI_SUCCESS) {
        FAIL("%s MPI_Session_finalize failed", name);
    }
    mark_phase(label, "done");
}

/* A session with -m: the settings of its place in the cycle; then its
 * events must show them, and its stderr some coll rdma output. */
static void session_with_changed_settings(const char *name, int k)
{
    const struct session_settings *settings = &settings_cycle[(k - 1) % 3];
    struct stderr_capture capture;
    set_priority(settings->priority);
    expect_rdma = settings->expect_rdma;
    if (capture_stderr(&capture) != 0) {
        FAIL("%s: cannot capture stderr", name);
        one_session(name);
        return;
    }
    one_session(name);
    char *text = release_stderr(&capture);
    if (text == NULL) {
        FAIL("%s: cannot read the captured stderr", name);
    } else if (strstr(text, "coll:rdma: ") == NULL) {
        FAIL("%s: coll rdma printed nothing during this session (coll_rdma_verbose 2)", name);
    }
    free(text);
    int held = new_events_hold(settings->event, settings->event_priority);
    if (held < 0) {
        FAIL("%s: cannot read coll rdma's events file %s", name, events_path);
    } else if (!held) {
        FAIL("%s: coll_rdma_priority %s: no %s event with priority %ld among this rank's events of the session (%s)",
             name, settings->priority ? settings->priority : "unset", settings->event, settings->event_priority,
             events_path);
    }
    set_priority(NULL);
    expect_rdma = 1;
}

int main(int argc, char **argv)
{
    int opt, sessions = 2;
    while ((opt = getopt(argc, argv, "rmkns:d:")) != -1) {
        if (opt == 'r') {
            require_rdma = 1;
        } else if (opt == 'm') {
            change_settings = 1;
        } else if (opt == 'k') {
            keep_loaded = 1;
        } else if (opt == 'n') {
            skip_mpi_init = 1;
        } else if (opt == 's' && atoi(optarg) >= 0) {
            sessions = atoi(optarg);
        } else if (opt == 'd' && atoi(optarg) >= 0) {
            rank1_delay_seconds = atoi(optarg);
        } else {
            fprintf(stderr, "usage: %s [-r] [-m] [-k] [-n] [-s SESSIONS] [-d SECONDS]\n", argv[0]);
            return 2;
        }
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *launcher_rank = getenv("PMIX_RANK");
    if (launcher_rank != NULL) {
        my_world_rank = atoi(launcher_rank);
    }

    if (change_settings && locate_events_file() != 0) {
        FAIL("cannot make a directory for coll rdma's events under TMPDIR");
        change_settings = 0;
    }
    for (int k = 1; k <= sessions; k++) {
        char phase[32];
        snprintf(phase, sizeof phase, "session%d", k);
        if (change_settings) {
            setenv("OMPI_MCA_coll_rdma_verbose", "2", 1);
            session_with_changed_settings(phase, k);
        } else {
            one_session(phase);
        }
    }

    if (skip_mpi_init) {
        remove_own_events_file();
        /* each rank's own verdict: mpirun fails the job if any rank does */
        printf("sessions: rank %d %s", my_world_rank, failures ? "failed" : "ok");
        printf(failures ? " %d\n" : "\n", failures);
        return failures ? 1 : 0;
    }
    mark_phase("mpi-init", "begin");
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &my_world_rank);
    mark_phase("mpi-init", "done");
    mark_phase("world-collectives", "begin");
    check_with_dup("world", MPI_COMM_WORLD);
    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    mark_phase("world-collectives", "done");
    mark_phase("mpi-finalize", "begin");
    MPI_Finalize();
    mark_phase("mpi-finalize", "done");
    remove_own_events_file();
    if (failures) {
        printf("sessions: rank %d failed %d\n", my_world_rank, failures);
    } else {
        printf("sessions: rank %d ok\n", my_world_rank);
    }
    return total ? 1 : 0;
}

#else /* no sessions */

int main(void)
{
    printf("SKIPPED: this MPI has no sessions (MPI %d.%d)\n", MPI_VERSION, MPI_SUBVERSION);
    return 0;
}

#endif
