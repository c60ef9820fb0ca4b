/* Re-attach after the dump root or its data/ was removed while the process
 * runs: attaches to the fresh tree, or opens data/ again (reattach.h). */
#define _GNU_SOURCE
#include "reattach.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "join.h"
#include "daemon.h"
#include "fsutil.h"
#include "models.h"
#include "record.h"
#include "snapshot.h"
#include "util.h"
#include "datadir.h"

static int unlinked(int fd)
{
    struct stat st;
    return fd >= 0 && fstat(fd, &st) == 0 && st.st_nlink == 0;
}

/* Points the fd number *fdp at newfd's file. dup3 keeps the number, so a
 * thread that loaded it before the swap reaches the new file, never an
 * unrelated one that reused a closed number. */
static void swap_fd(int *fdp, int newfd)
{
    int old = __atomic_load_n(fdp, __ATOMIC_ACQUIRE);
    if (newfd < 0)
        return;
    if (old < 0) {
        __atomic_store_n(fdp, newfd, __ATOMIC_RELEASE);
        return;
    }
    if (dup3(newfd, old, O_CLOEXEC) < 0)
        __atomic_store_n(fdp, newfd, __ATOMIC_RELEASE); /* the old number leaks: harmless */
    else
        close(newfd);
}

/* Moves the queue gauges (exact, not restarting like the counters) to the
 * new slot. A hook that loaded the old slot just before the swap may still
 * count there once: the gauges are then off by that one item. */
static void move_gauges(struct msp_proc *from, struct msp_proc *to)
{
    if (from == to)
        return;
    uint64_t depth = __atomic_exchange_n(&from->queue_depth, 0, __ATOMIC_RELAXED);
    uint64_t bytes = __atomic_exchange_n(&from->queue_bytes, 0, __ATOMIC_RELAXED);
    __atomic_fetch_add(&to->queue_depth, depth, __ATOMIC_RELAXED);
    __atomic_fetch_add(&to->queue_bytes, bytes, __ATOMIC_RELAXED);
}

/* data_fd names a new data/ tree: the writers drop their cached dirs. */
static void swap_data_fd(int data)
{
    swap_fd(&msp_data_fd, data);
    __atomic_fetch_add(&msp_tree_epoch, 1, __ATOMIC_RELEASE);
}

/* Only data/ was removed: the block and record log are still good. */
static void reopen_data(void)
{
    char path[MSP_PATH_LEN + 16];
    int data = msp_data_dir_open(path, sizeof path);
    if (data < 0)
        return; /* retried next tick; the tensors meanwhile are lost and logged */
    swap_data_fd(data);
    msp_log("%s was removed; dumping into a fresh one", path);
}

/* Opens everything of a fresh tree first and swaps only if all of it
 * opened, so a failed try (retried next tick) leaves nothing claimed. */
int msp_reattach_if_removed(void)
{
    static int failing;
    if (!g_msp.active)
        return 0;
    if (!unlinked(msp_rec_fd)) {
        if (unlinked(__atomic_load_n(&msp_data_fd, __ATOMIC_ACQUIRE)))
            reopen_data();
        return 0;
    }
    char err[MSP_PATH_LEN + 256] = "", data_path[MSP_PATH_LEN + 16];
    struct msp_control *ctl = NULL;
    int rec = -1, data = -1;
    if (msp_mkdir_p(g_msp.out, 0750) != 0 ||
        msp_ctl_open(g_msp.dump_root, 1, &ctl, err, sizeof err) != 0)
        goto fail;
    rec = msp_rec_open(g_msp.dump_root, msp_slot.pid, msp_slot.start_ns);
    if (rec < 0) {
        snprintf(err, sizeof err, "cannot open the record log under %s/.probe/records: %s",
                 g_msp.dump_root, strerror(errno));
        goto fail;
    }
    if (__atomic_load_n(&g_msp.awake_seen, __ATOMIC_ACQUIRE)) {
        data = msp_data_dir_open(data_path, sizeof data_path);
        if (data < 0) {
            snprintf(err, sizeof err, "cannot open %s: %s", data_path, strerror(errno));
            goto fail;
        }
    }
    failing = 0;
    struct msp_proc *old_proc = msp_slot.proc;
    int slot;
    struct msp_proc *p = msp_join_slot(ctl, &slot);
    if (__atomic_load_n(&g_msp.awake_seen, __ATOMIC_ACQUIRE))
        __atomic_fetch_or(&p->flags, (uint32_t)MSP_PROC_AWAKE_SEEN, __ATOMIC_RELAXED);
    __atomic_store_n(&p->device, __atomic_load_n(&old_proc->device, __ATOMIC_RELAXED),
                     __ATOMIC_RELAXED);
    if (msp_slot.index >= 0)
        msp_ctl_release_proc(msp_slot.ctl, msp_slot.index);
    /* The old block stays mapped: a hook may still read it through a
     * pointer loaded before the swap (56 KiB of address space per removal). */
    __atomic_store_n(&msp_slot.proc, p, __ATOMIC_RELEASE);
    move_gauges(old_proc, p);
    msp_queue_show(&g_msp.q); /* the writers' heads, which go on from here */
    msp_models_to_slot(p);
    msp_slot.index = slot;
    __atomic_store_n(&msp_slot.ctl, ctl, __ATOMIC_RELEASE);
    swap_fd(&msp_rec_fd, rec);
    swap_data_fd(data);
    msp_join_record();
    msp_log("%s was removed; dumping into a fresh one", g_msp.dump_root);
    /* the old daemon serves the removed tree and exits; no back-off for
     * the new one (a pending one was for the old tree) */
    msp_daemon_reset();
    msp_ensure_daemon();
    msp_snap_refresh(); /* asleep until the new daemon publishes */
    return 1;
fail:
    if (!failing++)
        msp_log("%s was removed and cannot be created again (%s); selected tensors are lost "
                "until it can", g_msp.dump_root, err[0] ? err : strerror(errno));
    if (rec >= 0)
        close(rec);
    msp_ctl_close(ctl);
    return 0;
}
