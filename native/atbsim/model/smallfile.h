// Reading a small file a checkpoint names (config.json, the shards' index) whole:
// a regular file only, opened without blocking (a FIFO or a device in its place is
// refused by name, never waited on), and at most `limit` bytes.
#pragma once

#include <cstddef>
#include <string>

namespace atbsim_lm {

// Opens `path` read-only without blocking; -1 with *why ("is a FIFO, not a regular
// file", or the system's error) when it cannot be opened or is not a regular file.
int open_regular(const std::string &path, std::string *why);

// The whole file into *out; false with *why saying the problem (not the path).
bool read_small_file(const std::string &path, size_t limit, std::string *out, std::string *why);

}  // namespace atbsim_lm
