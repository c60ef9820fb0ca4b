#define _GNU_SOURCE
#include "record.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsutil.h"
#include "state.h"
#include "util.h"

/* Opened from the verified .probe fd without following symlinks, like the
 * data tree: a link planted at .probe/records must not lead the log
 * outside. The name is new for every attach (pid, start_ns), so O_EXCL:
 * a file planted under it is never appended to. */
int msp_rec_open(const char *dump_root, uint64_t pid, uint64_t start_ns)
{
    int probe = msp_probe_dir_open(dump_root, 1, NULL, 0);
    if (probe < 0)
        return -1;
    int dir = msp_open_dir_at(probe, "records", 1);
    int saved = errno;
    close(probe);
    if (dir < 0) {
        errno = saved;
        return -1;
    }
    char name[64];
    snprintf(name, sizeof name, "%llu-%llu.jsonl", (unsigned long long)pid,
             (unsigned long long)start_ns);
    int fd = openat(dir, name, O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
                    0640);
    saved = errno;
    close(dir);
    errno = saved;
    return fd;
}

void msp_rec_begin(struct jbuf *b, const char *kind)
{
    jb_init(b, 256);
    jb_open(b, '{');
    jb_kcstr(b, "k", kind);
    jb_ku64(b, "t", msp_now_ns());
}

int msp_rec_commit(struct jbuf *b)
{
    jb_raw(b, "}\n", 2);
    int rc = -1;
    int fd = __atomic_load_n(&g_msp.rec_fd, __ATOMIC_ACQUIRE);
    if (b->oom) {
        msp_log_error("out of memory building a record; it is lost");
    } else if (fd >= 0) {
        /* O_APPEND: the kernel appends each write whole; a short write
         * (disk full) is finished by the loop so the line stays intact. */
        const char *p = b->p;
        size_t left = b->len;
        while (left) {
            ssize_t w = write(fd, p, left);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0) {
                msp_log_error("cannot append to the record log: %s", strerror(errno));
                break;
            }
            p += w;
            left -= (size_t)w;
        }
        if (!left) {
            rc = 0;
            MSP_COUNT(records, 1);
            __atomic_store_n(&msp_proc_now()->last_activity_ns, msp_now_ns(), __ATOMIC_RELAXED);
        }
    }
    jb_free(b);
    return rc;
}
