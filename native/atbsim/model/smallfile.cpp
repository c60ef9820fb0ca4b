#include "smallfile.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace atbsim_lm {

namespace {

const char *kind_of(mode_t mode) {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    return "not a regular file";
}

}  // namespace

int open_regular(const std::string &path, std::string *why) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return *why = std::strerror(errno), -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        *why = "is " + std::string(kind_of(st.st_mode)) + ", not a regular file";
        ::close(fd);
        return -1;
    }
    return fd;
}

bool read_small_file(const std::string &path, size_t limit, std::string *out, std::string *why) {
    int fd = open_regular(path, why);
    if (fd < 0) return false;
    out->clear();
    char buf[65536];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0 && out->size() <= limit) out->append(buf, static_cast<size_t>(n));
    int saved = errno;
    ::close(fd);
    if (n < 0) return *why = std::strerror(saved), false;
    if (out->size() > limit)
        return *why = "larger than the " + std::to_string(limit) + " bytes such a file can be; refused", false;
    return true;
}

}  // namespace atbsim_lm
