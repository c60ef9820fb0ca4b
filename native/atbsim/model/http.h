// Just enough HTTP/1.1 for `atbsim serve`: one request per connection,
// Content-Length bodies, `Connection: close` replies.
#pragma once

#include <string>

namespace atbsim_lm {

struct HttpRequest {
    std::string method;
    std::string path;  // without the query string
    std::string body;
};

// Reads one request from a connected socket. 0 on success, otherwise the HTTP
// status to answer with (400, 408, 411, 413) and *err says why.
int http_read_request(int fd, HttpRequest *req, std::string *err);

// Sends a complete response; errors (peer gone) are ignored.
void http_respond(int fd, int status, const std::string &content_type, const std::string &body);

}  // namespace atbsim_lm
