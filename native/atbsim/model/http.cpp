#include "http.h"

#include <sys/socket.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <sstream>

namespace atbsim_lm {

namespace {

constexpr size_t kMaxHeader = 64 * 1024;
constexpr size_t kMaxBody = 4 * 1024 * 1024;

std::string lower(std::string s) {
    for (char &c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

// Appends what recv() gives; false on EOF, error or timeout (SO_RCVTIMEO).
bool recv_more(int fd, std::string *buf, bool *timed_out) {
    char chunk[8192];
    for (;;) {
        ssize_t n = recv(fd, chunk, sizeof chunk, 0);
        if (n > 0) {
            buf->append(chunk, static_cast<size_t>(n));
            return true;
        }
        if (n < 0 && errno == EINTR) continue;
        *timed_out = n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
        return false;
    }
}

const char *reason(int status) {
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Payload Too Large";
    case 503: return "Service Unavailable";
    default: return "Internal Server Error";
    }
}

}  // namespace

int http_read_request(int fd, HttpRequest *req, std::string *err) {
    std::string buf;
    size_t end;
    bool timed_out = false;
    while ((end = buf.find("\r\n\r\n")) == std::string::npos) {
        if (buf.size() > kMaxHeader) return *err = "request header larger than 64 KiB", 413;
        if (!recv_more(fd, &buf, &timed_out))
            return *err = timed_out ? "timed out reading the request" : "connection closed mid-request", timed_out ? 408 : 400;
    }
    std::istringstream head(buf.substr(0, end));
    std::string line, version;
    std::getline(head, line);
    std::istringstream first(line);
    if (!(first >> req->method >> req->path >> version) || version.rfind("HTTP/1.", 0) != 0)
        return *err = "malformed request line", 400;
    req->path = req->path.substr(0, req->path.find('?'));
    long length = -1;
    while (std::getline(head, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        size_t colon = line.find(':');
        if (colon == std::string::npos) continue;
        std::string name = lower(line.substr(0, colon)), value = line.substr(colon + 1);
        value.erase(0, value.find_first_not_of(" \t"));
        if (name == "content-length") {
            char *stop = nullptr;
            length = std::strtol(value.c_str(), &stop, 10);
            if (value.empty() || *stop || length < 0) return *err = "bad Content-Length '" + value + "'", 400;
        } else if (name == "transfer-encoding" && lower(value) != "identity") {
            return *err = "chunked bodies are not supported; send Content-Length", 411;
        }
    }
    req->body = buf.substr(end + 4);
    if (length < 0) length = 0;
    if (static_cast<size_t>(length) > kMaxBody) return *err = "body larger than 4 MiB", 413;
    while (req->body.size() < static_cast<size_t>(length))
        if (!recv_more(fd, &req->body, &timed_out))
            return *err = "body shorter than Content-Length", timed_out ? 408 : 400;
    req->body.resize(static_cast<size_t>(length));
    return 0;
}

void http_respond(int fd, int status, const std::string &content_type, const std::string &body) {
    std::ostringstream os;
    os << "HTTP/1.1 " << status << ' ' << reason(status) << "\r\nContent-Type: " << content_type
       << "\r\nContent-Length: " << body.size() << "\r\nConnection: close\r\n\r\n" << body;
    std::string out = os.str();
    size_t off = 0;
    while (off < out.size()) {
        ssize_t n = send(fd, out.data() + off, out.size() - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        off += static_cast<size_t>(n);
    }
}

}  // namespace atbsim_lm
