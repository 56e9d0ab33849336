/* locksim's shim: a real process's clocks and disk as locksim's model has them, moved by the
 * nemesis while the process runs.
 *
 * Loaded with LD_PRELOAD into a real server (redis-server), it answers the process's
 * clock_gettime, gettimeofday and time from the real clocks plus what the file named by
 * $LOCKSIM_SHIM says, which live mode's parent rewrites at each fault:
 *
 *   monotonic = real monotonic + mono_offset + drift
 *   wall      = real wall      + wall_offset + drift
 *   drift     = (real monotonic - anchor) * drift_ppm / 1e6
 *
 * as the simulator's clocks (sim/src/clock.rs): the monotonic clock runs at 1 + drift_ppm
 * times true speed and never jumps (the parent re-anchors it when the drift changes); the
 * wall clock is stepped by a `clock_jump`. CPU-time clocks pass through.
 *
 * Why not libfaketime: Debian's redis-server (jemalloc) recurses into clock_gettime while
 * libfaketime initialises and never starts. This shim never allocates, reads the real clocks
 * by the raw system call and calls dlsym only from a semaphore wait (for glibc's own), so its
 * clocks are safe to read from any point of a process, its allocator's start included.
 *
 * Its waits, while its clock drifts: a relative timeout (epoll_wait, epoll_pwait, poll,
 * select, nanosleep, a relative clock_nanosleep) is a length of the process's clock, which the
 * shim turns into the machine's (length * 1e6 / (1e6 + drift_ppm), rounded up); an absolute
 * deadline on a moved clock (clock_nanosleep with TIMER_ABSTIME, sem_clockwait,
 * sem_timedwait) becomes the machine's: now plus what is left of it by the process's clock,
 * in the machine's time. So a drifting process's timers fire when its own clock says, fast or
 * slow, as in the model: redis-server's and Node's event loops (epoll), Python's sleeps
 * (clock_nanosleep), lock and event timeouts (sem_clockwait) and select/poll. A wait already
 * under way keeps its length when the drift changes. A condition variable's timed wait
 * (pthread_cond_timedwait: a JVM's sleeps, parks and timed waits) is a deadline on the
 * variable's own clock, which the shim learns when the variable is made: pthread_cond_init
 * with an attribute whose clock (pthread_condattr_getclock) is monotonic puts the variable
 * in a table, pthread_cond_destroy takes it out, and a variable not in it waits on the wall
 * clock (the default, and PTHREAD_COND_INITIALIZER's). A deadline on a clock moved only by a
 * step or an offset (no drift) is translated too: the process computed it on its moved
 * clock. On a clock nothing moves every wait passes through unchanged.
 *
 * Its disk: fsync and fdatasync wait while the file's fsync_held_until_ns (on the machine's
 * monotonic clock) is ahead (`fsync_stall`: a device that does not complete them), and each
 * one that completes on a regular file appends "SIZE NS PATH" to the file named by
 * $LOCKSIM_SYNCED: what a power loss would keep of it. At a crash, live mode cuts a Redis
 * server's append-only increments back to their last synced size, as the simulator's crash
 * keeps only what was synced (a SIGKILL alone keeps what the kernel has).
 *
 * The file is six little-endian 64-bit words, written by the parent under a sequence lock
 * (seq odd while it writes): seq, wall_offset_ns, mono_offset_ns, anchor_ns, drift_ppm,
 * fsync_held_until_ns. */

#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

struct shared {
    volatile int64_t seq, wall_offset_ns, mono_offset_ns, anchor_ns, drift_ppm;
    volatile int64_t fsync_held_until_ns;
};

/* The mapped shim file, mapped at the first call (from whichever thread: two that race
 * both map it, and one mapping is left unused). NULL without $LOCKSIM_SHIM. */
static struct shared *state(void) {
    static struct shared *mapped;
    static int tried;
    if (__atomic_load_n(&tried, __ATOMIC_ACQUIRE)) return __atomic_load_n(&mapped, __ATOMIC_ACQUIRE);
    const char *path = getenv("LOCKSIM_SHIM");
    int fd = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    if (fd >= 0) {
        void *p = mmap(0, sizeof(struct shared), PROT_READ, MAP_SHARED, fd, 0);
        close(fd);
        if (p != MAP_FAILED) __atomic_store_n(&mapped, (struct shared *)p, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&tried, 1, __ATOMIC_RELEASE);
    return __atomic_load_n(&mapped, __ATOMIC_ACQUIRE);
}

static int real(clockid_t id, struct timespec *ts) {
    return (int)syscall(SYS_clock_gettime, id, ts);
}

static int64_t ns(const struct timespec *ts) {
    return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

/* A consistent copy of the shared words (all zero without a file). */
static struct shared snapshot(void) {
    struct shared copy = {0, 0, 0, 0, 0, 0};
    struct shared *s = state();
    if (!s) return copy;
    for (;;) {
        int64_t seq = s->seq;
        __sync_synchronize();
        copy.wall_offset_ns = s->wall_offset_ns;
        copy.mono_offset_ns = s->mono_offset_ns;
        copy.anchor_ns = s->anchor_ns;
        copy.drift_ppm = s->drift_ppm;
        copy.fsync_held_until_ns = s->fsync_held_until_ns;
        __sync_synchronize();
        if (!(seq & 1) && seq == s->seq) return copy;
    }
}

/* What to add to clock `wall` (or the monotonic ones) now. */
static int64_t shift(int wall) {
    struct shared s = snapshot();
    struct timespec mono;
    real(CLOCK_MONOTONIC, &mono);
    int64_t drift = (int64_t)((__int128)(ns(&mono) - s.anchor_ns) * s.drift_ppm / 1000000);
    return (wall ? s.wall_offset_ns : s.mono_offset_ns) + drift;
}

static int is_wall(clockid_t id) {
    return id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE || id == CLOCK_TAI;
}

static int is_monotonic(clockid_t id) {
    return id == CLOCK_MONOTONIC || id == CLOCK_MONOTONIC_COARSE ||
           id == CLOCK_MONOTONIC_RAW || id == CLOCK_BOOTTIME;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
    int rc = real(id, ts);
    if (rc != 0 || !(is_wall(id) || is_monotonic(id))) return rc;
    int64_t t = ns(ts) + shift(is_wall(id));
    ts->tv_sec = t / 1000000000;
    ts->tv_nsec = t % 1000000000;
    return 0;
}

#pragma GCC diagnostic ignored "-Wnonnull-compare"
int gettimeofday(struct timeval *tv, void *tz) {
    (void)tz;
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return -1;
    if (tv) {
        tv->tv_sec = ts.tv_sec;
        tv->tv_usec = ts.tv_nsec / 1000;
    }
    return 0;
}

time_t time(time_t *out) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (out) *out = ts.tv_sec;
    return ts.tv_sec;
}

/* The machine's length of `process_ns` of this process's clock: its clock gains drift_ppm
 * per million, so each of its ns lasts 1e6 / (1e6 + drift_ppm) real ones. Rounded up, so a
 * wait never ends before the process's clock has moved `process_ns`. Scenarios bound
 * drift_ppm to +-500000, so the rate is positive. */
static int64_t real_ns(int64_t process_ns) {
    int64_t rate = 1000000 + snapshot().drift_ppm;
    if (process_ns <= 0 || rate == 1000000 || rate <= 0) return process_ns;
    return (int64_t)(((__int128)process_ns * 1000000 + rate - 1) / rate);
}

/* A relative timeout in ms, as real_ns; forever (-1) and at once (0) stay. */
static int real_ms(int ms) {
    if (ms <= 0) return ms;
    int64_t real_wait_ms = (real_ns((int64_t)ms * 1000000) + 999999) / 1000000;
    return real_wait_ms > INT_MAX ? INT_MAX : (int)real_wait_ms;
}

static struct timespec timespec_of(int64_t t) {
    struct timespec ts = {t / 1000000000, t % 1000000000};
    return ts;
}

/* The machine's deadline on clock `id` for the process's `deadline` on its moved clock: now,
 * plus what is left of it by the process's clock in the machine's time. Unchanged on a clock
 * the shim does not move, or has not moved. */
static struct timespec real_deadline(clockid_t id, const struct timespec *deadline) {
    if (!(is_wall(id) || is_monotonic(id))) return *deadline;
    int64_t moved = shift(is_wall(id));
    if (moved == 0 && snapshot().drift_ppm == 0) return *deadline;
    struct timespec now;
    real(id, &now);
    int64_t left = ns(deadline) - (ns(&now) + moved);
    return timespec_of(ns(&now) + (left > 0 ? real_ns(left) : 0));
}

/* glibc's own `name` (the semaphores' waits are its code, not a system call), looked up at
 * the first wait into `slot`, never from an allocator. */
static void *glibc(void **slot, const char *name) {
    void *fn = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (!fn) {
        fn = dlsym(RTLD_NEXT, name);
        __atomic_store_n(slot, fn, __ATOMIC_RELEASE);
    }
    return fn;
}

/* The waits below make the raw system call, as the clocks are read: no dlsym but for the
 * semaphores (glibc above). 8 bytes is the kernel's signal set (glibc passes the same). */
int epoll_pwait(int epfd, struct epoll_event *events, int max, int timeout, const sigset_t *mask) {
    return (int)syscall(SYS_epoll_pwait, epfd, events, max, real_ms(timeout), mask, 8);
}

int epoll_wait(int epfd, struct epoll_event *events, int max, int timeout) {
    return epoll_pwait(epfd, events, max, timeout, NULL);
}

int poll(struct pollfd *fds, nfds_t count, int timeout) {
    return (int)syscall(SYS_poll, fds, count, real_ms(timeout));
}

/* The caller's timeval is left as it was (Linux's select writes the time left into it). */
int select(int count, fd_set *reads, fd_set *writes, fd_set *errors, struct timeval *timeout) {
    if (!timeout || snapshot().drift_ppm == 0)
        return (int)syscall(SYS_select, count, reads, writes, errors, timeout);
    int64_t wait_ns = real_ns((int64_t)timeout->tv_sec * 1000000000 + timeout->tv_usec * 1000);
    int64_t wait_us = (wait_ns + 999) / 1000;
    struct timeval wait = {wait_us / 1000000, wait_us % 1000000};
    return (int)syscall(SYS_select, count, reads, writes, errors, &wait);
}

/* `rem`, after a signal, is what was left in the machine's time. */
int nanosleep(const struct timespec *req, struct timespec *rem) {
    if (snapshot().drift_ppm == 0) return (int)syscall(SYS_nanosleep, req, rem);
    struct timespec wait = timespec_of(real_ns(ns(req)));
    return (int)syscall(SYS_nanosleep, &wait, rem);
}

/* Returns the error number, as glibc's does. */
int clock_nanosleep(clockid_t id, int flags, const struct timespec *req, struct timespec *rem) {
    int drifts = (is_wall(id) || is_monotonic(id)) && snapshot().drift_ppm != 0;
    struct timespec wait = flags & TIMER_ABSTIME ? real_deadline(id, req)
                           : drifts              ? timespec_of(real_ns(ns(req)))
                                                 : *req;
    return syscall(SYS_clock_nanosleep, id, flags, &wait, rem) == 0 ? 0 : errno;
}

int sem_clockwait(sem_t *sem, clockid_t id, const struct timespec *deadline) {
    static void *next;
    int (*wait)(sem_t *, clockid_t, const struct timespec *) = glibc(&next, "sem_clockwait");
    struct timespec at = real_deadline(id, deadline);
    return wait(sem, id, &at);
}

int sem_timedwait(sem_t *sem, const struct timespec *deadline) {
    static void *next;
    int (*wait)(sem_t *, const struct timespec *) = glibc(&next, "sem_timedwait");
    struct timespec at = real_deadline(CLOCK_REALTIME, deadline);
    return wait(sem, &at);
}

/* The condition variables made with a monotonic clock, by address: open addressing, each
 * slot empty (0), a variable, or one destroyed (GONE, passed over by a lookup, reused by an
 * insert). Made and destroyed by any thread, so slots change by compare-and-swap only. A
 * full table keeps no more (their waits are then taken for the wall clock's). */
#define CONDS 16384 /* a power of two */
#define GONE ((pthread_cond_t *)1)
static pthread_cond_t *monotonic_conds[CONDS];

static size_t cond_slot(const pthread_cond_t *cond) {
    return (size_t)(((uintptr_t)cond >> 3) * 0x9E3779B97F4A7C15ull >> 50) & (CONDS - 1);
}

/* The slot holding `cond`, or -1. */
static long cond_find(const pthread_cond_t *cond) {
    size_t s = cond_slot(cond);
    for (size_t i = 0; i < CONDS; i++, s = (s + 1) & (CONDS - 1)) {
        pthread_cond_t *seen = __atomic_load_n(&monotonic_conds[s], __ATOMIC_ACQUIRE);
        if (seen == cond) return (long)s;
        if (!seen) return -1;
    }
    return -1;
}

static void cond_forget(pthread_cond_t *cond) {
    long s = cond_find(cond);
    if (s >= 0) __sync_bool_compare_and_swap(&monotonic_conds[s], cond, GONE);
}

static void cond_remember(pthread_cond_t *cond) {
    if (cond_find(cond) >= 0) return;
    size_t s = cond_slot(cond);
    for (size_t i = 0; i < CONDS; i++, s = (s + 1) & (CONDS - 1)) {
        pthread_cond_t *seen = __atomic_load_n(&monotonic_conds[s], __ATOMIC_ACQUIRE);
        int free = !seen || seen == GONE;
        if (free && __sync_bool_compare_and_swap(&monotonic_conds[s], seen, cond)) return;
    }
}

int pthread_cond_init(pthread_cond_t *cond, const pthread_condattr_t *attr) {
    static void *next;
    int (*init)(pthread_cond_t *, const pthread_condattr_t *) = glibc(&next, "pthread_cond_init");
    int rc = init(cond, attr);
    clockid_t id = CLOCK_REALTIME;
    if (rc == 0 && attr) pthread_condattr_getclock(attr, &id);
    /* Forgotten first: the memory may have held a variable never destroyed. */
    cond_forget(cond);
    if (rc == 0 && is_monotonic(id)) cond_remember(cond);
    return rc;
}

int pthread_cond_destroy(pthread_cond_t *cond) {
    static void *next;
    int (*destroy)(pthread_cond_t *) = glibc(&next, "pthread_cond_destroy");
    cond_forget(cond);
    return destroy(cond);
}

int pthread_cond_timedwait(pthread_cond_t *cond, pthread_mutex_t *mutex,
                           const struct timespec *deadline) {
    static void *next;
    int (*wait)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *) =
        glibc(&next, "pthread_cond_timedwait");
    struct shared now = snapshot();
    /* Nothing moved (or no shim file): no lookup, which a table full of destroyed variables
     * would make long. */
    if (!now.wall_offset_ns && !now.mono_offset_ns && !now.drift_ppm)
        return wait(cond, mutex, deadline);
    clockid_t id = cond_find(cond) >= 0 ? CLOCK_MONOTONIC : CLOCK_REALTIME;
    struct timespec at = real_deadline(id, deadline);
    return wait(cond, mutex, &at);
}

int pthread_cond_clockwait(pthread_cond_t *cond, pthread_mutex_t *mutex, clockid_t id,
                           const struct timespec *deadline) {
    static void *next;
    int (*wait)(pthread_cond_t *, pthread_mutex_t *, clockid_t, const struct timespec *) =
        glibc(&next, "pthread_cond_clockwait");
    struct timespec at = real_deadline(id, deadline);
    return wait(cond, mutex, id, &at);
}

/* Waits while the parent holds this process's fsyncs. */
static void hold_fsync(void) {
    for (;;) {
        struct timespec mono;
        real(CLOCK_MONOTONIC, &mono);
        int64_t left = snapshot().fsync_held_until_ns - ns(&mono);
        if (left <= 0) return;
        if (left > 10000000) left = 10000000; /* look again every 10 ms: a stall may end early */
        struct timespec wait = {0, (long)left};
        syscall(SYS_nanosleep, &wait, 0);
    }
}

/* Appends the decimal digits of `n` to `out`; the new end. */
static char *digits(char *out, int64_t n) {
    char tmp[24];
    int len = 0;
    do tmp[len++] = (char)('0' + n % 10); while ((n /= 10) > 0);
    while (len > 0) *out++ = tmp[--len];
    return out;
}

/* Records that regular file `fd` is synced at its present size: "SIZE NS PATH\n", NS the
 * machine's monotonic clock when the sync completed. */
static void record_synced(int fd) {
    static int synced_log = -2; /* two threads that race both open it: one fd unused */
    if (synced_log == -2) {
        const char *path = getenv("LOCKSIM_SYNCED");
        synced_log = path ? open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644) : -1;
    }
    struct stat st;
    if (synced_log < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return;
    struct timespec mono;
    real(CLOCK_MONOTONIC, &mono);
    char link[32] = "/proc/self/fd/", line[4200], *end = digits(link + 14, fd);
    *end = 0;
    end = digits(line, st.st_size);
    *end++ = ' ';
    end = digits(end, ns(&mono));
    *end++ = ' ';
    ssize_t n = readlink(link, end, line + sizeof line - end - 1);
    if (n <= 0) return;
    end += n;
    *end++ = '\n';
    if (write(synced_log, line, (size_t)(end - line)) < 0) return;
}

int fsync(int fd) {
    hold_fsync();
    int rc = (int)syscall(SYS_fsync, fd);
    if (rc == 0) record_synced(fd);
    return rc;
}

int fdatasync(int fd) {
    hold_fsync();
    int rc = (int)syscall(SYS_fdatasync, fd);
    if (rc == 0) record_synced(fd);
    return rc;
}
