#define _GNU_SOURCE
#include "record.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "state.h"
#include "util.h"

int msp_rec_open(const char *dump_root, uint64_t pid, uint64_t start_ns)
{
    char path[MSP_PATH_LEN + 96];
    snprintf(path, sizeof path, "%s/.probe/records", dump_root);
    if (mkdir(path, 0750) != 0 && errno != EEXIST)
        return -1;
    snprintf(path, sizeof path, "%s/.probe/records/%llu-%llu.jsonl", dump_root,
             (unsigned long long)pid, (unsigned long long)start_ns);
    return open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0640);
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
            __atomic_store_n(&g_msp.proc->last_activity_ns, msp_now_ns(), __ATOMIC_RELAXED);
        }
    }
    jb_free(b);
    return rc;
}
