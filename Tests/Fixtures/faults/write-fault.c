// A disk that fills up at a chosen moment, for scripts/soak/io-faults.sh: loaded with LD_PRELOAD,
// it makes the Nth write(2) of this process to a regular file under LANYARD_FAULT_DIR fail with
// ENOSPC (N = LANYARD_FAULT_WHEN), and appends one line to LANYARD_FAULT_LOG when it does.
// Writes to anything else (pipes, sockets, eventfds, terminals) pass through untouched: a full
// disk never fails those, and failing a wake-up would only hang the program for a reason that
// cannot happen outside the test.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static ssize_t (*real_write)(int, const void *, size_t);
static long file_writes;

// The file `fd` writes to when it is a regular file under `dir` (into `path`), else 0.
static int under_fault_dir(int fd, const char *dir, char *path, size_t size) {
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t length = readlink(link, path, size - 1);
    if (length <= 0) return 0;
    path[length] = 0;
    return strncmp(path, dir, strlen(dir)) == 0;
}

ssize_t write(int fd, const void *buffer, size_t count) {
    if (!real_write) real_write = (ssize_t (*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    const char *dir = getenv("LANYARD_FAULT_DIR"), *when = getenv("LANYARD_FAULT_WHEN");
    char path[4096];
    if (dir && when && under_fault_dir(fd, dir, path, sizeof path)) {
        long n = __atomic_add_fetch(&file_writes, 1, __ATOMIC_SEQ_CST);
        if (n == atol(when)) {
            const char *log = getenv("LANYARD_FAULT_LOG");
            int saved = errno;
            int out = log ? open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600) : -1;
            if (out >= 0) {
                char line[4200];
                int length = snprintf(line, sizeof line, "%d write #%ld %s\n", (int)getpid(), n, path + strlen(dir));
                real_write(out, line, (size_t)length);
                close(out);
            }
            (void)saved;
            errno = ENOSPC;
            return -1;
        }
    }
    return real_write(fd, buffer, count);
}
