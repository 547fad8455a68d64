// Making directories 0700 and vetting them against the one rule of base/private_dir.hpp.
#include "base/private_dir.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

namespace kiln::detail {

namespace {

std::string octal_mode(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

}  // namespace

Status make_private_dirs(const std::filesystem::path& dir) {
  std::filesystem::path partial;
  for (const auto& part : dir) {
    partial /= part;
    if (::mkdir(partial.c_str(), 0700) == 0) continue;
    const int error = errno;
    struct stat st {};
    if (error == EEXIST || (::stat(partial.c_str(), &st) == 0 && S_ISDIR(st.st_mode))) continue;
    return fail("cannot create " + partial.string() + ": " + std::strerror(error));
  }
  return ok();
}

Status vet_private_dir(const std::filesystem::path& dir, std::string_view elsewhere) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return fail("cannot use " + dir.string() + ": " + std::strerror(errno));
  if (!S_ISDIR(st.st_mode)) return fail("cannot use " + dir.string() + ": it is not a directory");
  if (st.st_uid != ::geteuid())
    return fail("refusing " + dir.string() + ": it is owned by uid " + std::to_string(st.st_uid) +
                ", not by this user (uid " + std::to_string(::geteuid()) + "); " + std::string(elsewhere));
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    return fail("refusing " + dir.string() + ": group or others can write it (mode " + octal_mode(st.st_mode) +
                "); run `chmod go-w " + dir.string() + "`, or " + std::string(elsewhere));
  return ok();
}

}  // namespace kiln::detail
