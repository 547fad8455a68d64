// Opening private directories component by component under the one rule of base/private_dir.hpp.
#include "base/private_dir.hpp"

#include <fcntl.h>
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

bool others_can_write(mode_t mode) { return (mode & (S_IWGRP | S_IWOTH)) != 0; }

std::string this_user() { return "this user (uid " + std::to_string(::geteuid()) + ")"; }

// The rule for the private directory itself.
Status vet_private(const struct stat& st, const std::filesystem::path& shown, std::string_view elsewhere) {
  if (!S_ISDIR(st.st_mode)) return fail("cannot use " + shown.string() + ": it is not a directory");
  if (st.st_uid != ::geteuid())
    return fail("refusing " + shown.string() + ": it is owned by uid " + std::to_string(st.st_uid) + ", not by " +
                this_user() + "; " + std::string(elsewhere));
  if (others_can_write(st.st_mode))
    return fail("refusing " + shown.string() + ": group or others can write it (mode " + octal_mode(st.st_mode) +
                "); run `chmod go-w " + shown.string() + "`, or " + std::string(elsewhere));
  return ok();
}

// The rule for a directory above it: whoever can rename entries of `shown` can swap `below` for their own.
Status vet_above(const struct stat& st, const std::filesystem::path& shown, const std::filesystem::path& below,
                 std::string_view elsewhere) {
  if (st.st_uid != 0 && st.st_uid != ::geteuid())
    return fail("refusing " + below.string() + ": the directory above it, " + shown.string() + ", is owned by uid " +
                std::to_string(st.st_uid) + ", neither root nor " + this_user() + ", so its owner could swap " +
                below.string() + " for their own; " + std::string(elsewhere));
  if (others_can_write(st.st_mode) && (st.st_mode & S_ISVTX) == 0)
    return fail("refusing " + shown.string() + ": group or others can write it and it has no sticky bit (mode " +
                octal_mode(st.st_mode) + "), so they could swap " + below.string() + " for their own; run `chmod go-w " +
                shown.string() + "` (or `chmod +t`, as /tmp has), or " + std::string(elsewhere));
  return ok();
}

// Why `name` in `dir` could not be opened as a directory: a symlink, something else, or errno's reason.
std::string not_openable(int dir, const char* name, const std::filesystem::path& shown, int error) {
  struct stat st {};
  if ((error == ENOTDIR || error == ELOOP) && ::fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (S_ISLNK(st.st_mode))
      return "refusing " + shown.string() + ": it is a symlink where kiln expects a directory (it was replaced since " +
             "kiln resolved the path, or kiln did not make it); remove the link";
    if (!S_ISDIR(st.st_mode)) return "cannot use " + shown.string() + ": it is not a directory";
  }
  return "cannot use " + shown.string() + ": " + std::strerror(error);
}

// Opens the directory `name` in `dir` without following a symlink, making it 0700 first when missing and
// `create`; -1 with errno otherwise (ENOENT: missing and not to be made).
int open_directory(int dir, const char* name, int flags, bool create) {
  const int how = flags | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
  int fd = ::openat(dir, name, how);
  if (fd < 0 && errno == ENOENT && create) {
    if (::mkdirat(dir, name, 0700) != 0 && errno != EEXIST) return -1;
    fd = ::openat(dir, name, how);
  }
  return fd;
}

}  // namespace

Result<std::optional<PrivateDir>> open_private_dir(const std::filesystem::path& dir, std::string_view elsewhere,
                                                   bool create) {
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(dir, ec);
  if (ec) return fail("cannot use " + dir.string() + ": " + ec.message());
  // Symlinks the user configured (~/.cache -> /data/cache) are followed once, here; the walk follows none.
  std::filesystem::path resolved = std::filesystem::weakly_canonical(absolute, ec);
  if (ec) resolved = absolute.lexically_normal();
  // Components may be made below; ancestors are checked first, so nothing is made inside a refused one.
  std::filesystem::path at = "/";
  UniqueFd current(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!current.valid()) return fail("cannot use " + dir.string() + ": opening /: " + std::strerror(errno));
  for (const auto& part : resolved.relative_path()) {
    if (part.empty() || part == ".") continue;
    struct stat st {};
    if (::fstat(current.get(), &st) != 0) return fail("cannot use " + at.string() + ": " + std::strerror(errno));
    if (Status safe = vet_above(st, at, resolved, elsewhere); !safe) return fail(safe.error());
    const std::filesystem::path next = at / part;
    const int fd = open_directory(current.get(), part.c_str(), O_PATH, create);
    if (fd < 0) {
      const int error = errno;
      if (error == ENOENT && !create) return std::optional<PrivateDir>{};
      if (create && error != ENOENT && error != ENOTDIR && error != ELOOP)
        return fail("cannot create " + next.string() + ": " + std::strerror(error));
      return fail(not_openable(current.get(), part.c_str(), next, error));
    }
    current = UniqueFd(fd);
    at = next;
  }
  // The directory itself, for reading (scans) and as the base of every openat: what is checked is what is used.
  PrivateDir opened{UniqueFd(::openat(current.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)), at};
  if (!opened.fd.valid()) return fail("cannot use " + at.string() + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(opened.fd.get(), &st) != 0) return fail("cannot use " + at.string() + ": " + std::strerror(errno));
  if (Status vetted = vet_private(st, at, elsewhere); !vetted) return fail(vetted.error());
  return std::optional<PrivateDir>(std::move(opened));
}

Result<std::optional<PrivateDir>> open_private_subdir(const PrivateDir& parent, std::string_view name,
                                                      std::string_view elsewhere, bool create) {
  const std::string part(name);
  const std::filesystem::path shown = parent.path / part;
  PrivateDir opened{UniqueFd(open_directory(parent.fd.get(), part.c_str(), O_RDONLY, create)), shown};
  if (!opened.fd.valid()) {
    const int error = errno;
    if (error == ENOENT && !create) return std::optional<PrivateDir>{};
    if (create && error != ENOENT && error != ENOTDIR && error != ELOOP)
      return fail("cannot create " + shown.string() + ": " + std::strerror(error));
    return fail(not_openable(parent.fd.get(), part.c_str(), shown, error));
  }
  struct stat st {};
  if (::fstat(opened.fd.get(), &st) != 0) return fail("cannot use " + shown.string() + ": " + std::strerror(errno));
  if (Status vetted = vet_private(st, shown, elsewhere); !vetted) return fail(vetted.error());
  return std::optional<PrivateDir>(std::move(opened));
}

Status make_private_dirs(const std::filesystem::path& dir) {
  const auto made = open_private_dir(dir, "use a directory of your own", true);
  if (!made) return fail(made.error());
  return ok();
}

Status vet_private_dir(const std::filesystem::path& dir, std::string_view elsewhere) {
  const auto opened = open_private_dir(dir, elsewhere, false);
  if (!opened) return fail(opened.error());
  if (!*opened) return fail("cannot use " + dir.string() + ": " + std::strerror(ENOENT));
  return ok();
}

Status vet_private_dir(const struct stat& st, const std::filesystem::path& shown, std::string_view elsewhere) {
  if (st.st_nlink == 0) return fail(shown.string() + " was deleted");
  return vet_private(st, shown, elsewhere);
}

Status vet_directory_of(const std::filesystem::path& file) {
  const std::filesystem::path named = file.has_parent_path() ? file.parent_path() : std::filesystem::path(".");
  std::error_code failed;
  const std::filesystem::path resolved = std::filesystem::canonical(file, failed).parent_path();
  for (const auto& dir : {named, resolved}) {
    struct stat st {};
    if (dir.empty() || ::stat(dir.c_str(), &st) != 0) continue;  // what cannot be looked at, the open says
    if (st.st_uid != 0 && st.st_uid != ::geteuid())
      return fail("its directory " + dir.string() + " is owned by uid " + std::to_string(st.st_uid) + ", neither root nor " +
                  this_user() + ", so its owner could put another file in place of " + file.string());
    if (others_can_write(st.st_mode) && (st.st_mode & S_ISVTX) == 0)
      return fail("its directory " + dir.string() + " can be written by group or others and has no sticky bit (mode " +
                  octal_mode(st.st_mode) + "), so they could put another file in place of " + file.string() +
                  "; run `chmod go-w " + dir.string() + "` (or `chmod +t`, as /tmp has), or move the file");
  }
  return ok();
}

Status vet_private_file(const struct stat& st, const std::filesystem::path& shown) {
  if (st.st_uid != ::geteuid())
    return fail("refusing " + shown.string() + ": it is owned by uid " + std::to_string(st.st_uid) + ", not by " +
                this_user());
  if (others_can_write(st.st_mode))
    return fail("refusing " + shown.string() + ": group or others can write it (mode " + octal_mode(st.st_mode) + ")");
  return ok();
}

}  // namespace kiln::detail
