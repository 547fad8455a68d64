// The demand record's writer: what the registry and programs append as they load (kiln/record.hpp; the
// format is program/record.cpp's, which reads it back).
#include <kiln/record.hpp>

#include "base/field.hpp"     // append_field
#include "base/settings.hpp"  // KILN_RECORD
#include "chain/key.hpp"  // sha256_hex
#include "registry/demand_record.hpp"

#include <kiln/error.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <set>

namespace kiln {
namespace {

// The open record, if any: KILN_RECORD's from the first load, or record_demand's.
class Recorder {
 public:
  static Recorder& instance() {
    // Leaked on purpose: loads may happen during static destruction.
    static Recorder& r = *new Recorder;
    return r;
  }

  void open(const std::string& path) {
    const std::lock_guard lock(mutex_);
    open_locked(path, true);
  }

  void write(const std::string& key, const std::string& text) {
    const std::lock_guard lock(mutex_);
    if (!env_checked_) {
      env_checked_ = true;
      const std::string path = detail::setting("KILN_RECORD");
      if (fd_ < 0 && !path.empty()) open_locked(path, false);
    }
    if (fd_ < 0 || !written_.insert(key).second) return;
    // One write per entry: O_APPEND keeps processes sharing a record from interleaving within one.
    const ssize_t n = ::write(fd_, text.data(), text.size());
    if (n != static_cast<ssize_t>(text.size()))
      std::cerr << "kiln: warning: cannot append to the demand record " << path_ << ": " << std::strerror(errno) << "\n";
  }

 private:
  void open_locked(const std::string& path, bool throw_on_failure) {
    // Never blocks (a FIFO is refused), never follows a link, created private.
    const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
    struct stat st {};
    std::string why;
    if (fd < 0) {
      why = std::strerror(errno);
    } else if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      why = "not a regular file";
    }
    if (!why.empty()) {
      if (fd >= 0) ::close(fd);
      const std::string message = "kiln: cannot record demand to " + path + ": " + why;
      if (throw_on_failure) throw Error(Errc::invalid_argument, message);
      std::cerr << "kiln: warning: " << message.substr(6) << " (KILN_RECORD); recording nothing\n";
      return;
    }
    if (st.st_size == 0 && ::write(fd, detail::kRecordHeader.data(), detail::kRecordHeader.size()) != static_cast<ssize_t>(detail::kRecordHeader.size())) {
      ::close(fd);
      if (throw_on_failure) throw Error(Errc::invalid_argument, "kiln: cannot write to the demand record " + path);
      return;
    }
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
    path_ = path;
    written_.clear();
  }

  std::mutex mutex_;
  int fd_ = -1;
  std::string path_;
  bool env_checked_ = false;
  std::set<std::string> written_;
};

}  // namespace

namespace detail {

void record_kernel(std::string_view registry, std::string_view kernel, unsigned arch) {
  std::string text = "table\n";
  append_field(text, "registry", registry);
  append_field(text, "kernel", kernel);
  text += "arch " + std::to_string(arch) + "\nend\n";
  Recorder::instance().write(text, text);
}

void record_program(std::string_view label, const UnitSource& unit, std::span<const std::string> options) {
  std::string text = "program\n";
  append_field(text, "label", label);
  append_field(text, "source", unit.source);
  for (const Header& h : unit.headers) {
    append_field(text, "header", h.name);
    append_field(text, "bytes", h.content);
  }
  for (const std::string& o : options) append_field(text, "option", o);
  for (const std::string& e : unit.expressions) append_field(text, "kernel", e);
  text += "end\n";
  // Remembered by its digest, not its text: a process that records many programs keeps no copy of them.
  Recorder::instance().write(sha256_hex(text), text);
}

}  // namespace detail

void record_demand(const std::string& path) { Recorder::instance().open(path); }

}  // namespace kiln
