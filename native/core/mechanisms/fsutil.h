/* Safe file system access below the dump root: names from the model are
 * never trusted as paths (docs/contracts.md §2). */
#ifndef MSP_FSUTIL_H
#define MSP_FSUTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define MSP_NAME_MAX 255

/* NULL if `rel` (len bytes, not NUL-terminated) is an acceptable relative
 * path: not absolute, every component non-empty, not "." or "..", at most
 * 255 bytes, no control characters (NUL included), total below
 * MSP_PATH_LEN. Otherwise a static reason for the log and the record. */
const char *msp_path_check(const char *rel, size_t len);

/* NULL unless the round-level component of a checked path (the third:
 * {dev}_{pid}/{exec}/<here>) is a name the control plane derives there
 * (statistic.csv, ...) or starts with '.'; else a static reason. */
const char *msp_path_reserved(const char *rel, size_t len);

/* Opens directory `rel_dir` (NUL-terminated, already checked) below
 * `rootfd`, one component at a time with openat(O_NOFOLLOW|O_DIRECTORY);
 * with create, missing components are made with mkdirat(0750). Returns a
 * new fd or -1 with errno. rel_dir "" returns a dup of rootfd. */
int msp_open_dir_at(int rootfd, const char *rel_dir, int create);

#define MSP_WRITE_IOV_MAX 4

/* Creates `name` in dirfd from iov (at most MSP_WRITE_IOV_MAX parts, written
 * with one writev): a temporary `.<name>.<pid>.<tid>.tmp`
 * (O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC, 0640), every write checked, then
 * renameat into place. On failure the temporary is removed and -errno is
 * returned; a partial file is never left under `name`. */
int msp_write_file_at(int dirfd, const char *name, const struct iovec *iov, int iovcnt);

/* The alignment of a buffer written with O_DIRECT (a page: every block
 * size up to 4 KiB divides it). */
#define MSP_DIO_ALIGN 4096
/* What the caller of an aligned write hears (each NULL: nothing): `ahead`
 * that bytes [off, end) of the buffer are about to be written (it may read
 * them first: the writer scans them while they go), `written` that the first
 * `done` bytes are in the file (on the device: it may reuse their memory). */
struct msp_write_hooks {
    void (*ahead)(void *arg, size_t off, size_t end);
    void (*written)(void *arg, size_t done);
    void *arg;
};
/* The same for n bytes at buf, which is MSP_DIO_ALIGN-aligned: its whole
 * blocks are written with O_DIRECT where the file system allows, a piece at a
 * time, `written` after each O_DIRECT write. */
int msp_write_aligned_file_at(int dirfd, const char *name, const void *buf, size_t n,
                              const struct msp_write_hooks *hooks);

/* If `path` (cap bytes) is a symlink, replaces it with its resolved target
 * and returns 1; 0 if it is not a link (or does not exist); -1 if the link
 * cannot be resolved (dangling, a loop, too long). */
int msp_resolve_link(char *path, size_t cap);

/* Makes `name` in dirfd one more name (a hard link) of `src_name` in
 * src_dirfd, replacing what `name` was: linked under the temporary name,
 * then renamed into place. 0 or -errno (EPERM, EXDEV, EOPNOTSUPP: the file
 * system refuses links; EMLINK: the file has too many; the caller falls back). */
int msp_link_file_at(int src_dirfd, const char *src_name, int dirfd, const char *name);

/* mkdir -p of an absolute path (the user's output root). 0 or -1/errno. */
int msp_mkdir_p(const char *path, unsigned mode);

#endif
