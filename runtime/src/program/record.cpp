// The demand record read back, for precompile (kiln-gen reads it too); registry/demand_record.cpp appends it.
//
// Format (text, every value length-prefixed so that any bytes survive; kiln-gen reads it too):
//   kiln record 1
//   program                       then: label N, source N, (header N, bytes N)*, option N*, kernel N*, end
//   table N <registry> / kernel N <name> / arch <sm>    (one line each, then end)
// where "label N" is followed by a newline, N bytes and a newline.
#include <kiln/record.hpp>

#include "base/plain_file.hpp"       // open_regular: a record that cannot block its reader
#include "registry/demand_record.hpp"  // kRecordHeader

#include <kiln/catalog.hpp>
#include <kiln/error.hpp>
#include <kiln/precompile.hpp>
#include <kiln/select.hpp>  // unknown_kernel_message, linked_unit_message

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <mutex>
#include <set>

namespace kiln {
namespace {

// What a record may hold: programs' sources and headers take far less; more is not a record to read into
// memory (kiln-gen's reader, codegen/demand_record.py, has the same bound).
constexpr std::size_t kMaxRecordBytes = std::size_t{256} << 20;

// The bytes of the record at `path`: a regular file (opened without blocking: a FIFO or a device is
// refused, never waited on), at most kMaxRecordBytes.
std::string read_record_file(const std::string& path) {
  const auto refuse = [&](const std::string& why) -> Error {
    return Error(Errc::invalid_argument, "kiln: cannot read the demand record " + path + ": " + why);
  };
  auto fd = detail::open_regular(path, O_RDONLY);
  if (!fd) throw Error(Errc::invalid_argument, "kiln: cannot read the demand record: " + fd.error());
  struct stat st {};
  if (::fstat(fd->get(), &st) != 0) throw refuse(std::strerror(errno));
  const auto too_large = [&] {
    return refuse("larger than " + std::to_string(kMaxRecordBytes >> 20) + " MiB, more than a demand record holds");
  };
  if (static_cast<std::uint64_t>(st.st_size) > kMaxRecordBytes) throw too_large();
  std::string text;
  text.reserve(static_cast<std::size_t>(st.st_size));
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(fd->get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw refuse(std::strerror(errno));
    if (n == 0) return text;
    text.append(buffer, static_cast<std::size_t>(n));
    if (text.size() > kMaxRecordBytes) throw too_large();  // it grew while read
  }
}

// A record's reader: one field at a time, naming the line of what is wrong.
class Reader {
 public:
  Reader(std::string text, std::string path) : text_(std::move(text)), path_(std::move(path)) {}

  bool done() const noexcept { return pos_ >= text_.size(); }

  std::string line() {
    const std::size_t end = text_.find('\n', pos_);
    last_ = ++line_;
    if (end == std::string::npos) wrong("an unterminated line");
    std::string l = text_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return l;
  }

  // "kind N\n<N bytes>\n": the bytes.
  std::string value(std::string_view kind) {
    const std::string head = line();
    const std::string expected = std::string(kind) + " ";
    if (!head.starts_with(expected)) wrong("'" + std::string(kind) + "' expected, found '" + head.substr(0, 40) + "'");
    char* end = nullptr;
    const unsigned long long n = std::strtoull(head.c_str() + expected.size(), &end, 10);
    if (end == head.c_str() + expected.size() || *end != '\0' || n > text_.size() - pos_) wrong("a bad length");
    std::string v = text_.substr(pos_, n);
    pos_ += n;
    for (char c : v) line_ += c == '\n';
    if (pos_ >= text_.size() || text_[pos_] != '\n') wrong("no line break after a value");
    ++pos_;
    ++line_;
    return v;
  }

  std::string peek_kind() const {
    const std::size_t end = text_.find_first_of(" \n", pos_);
    return text_.substr(pos_, end == std::string::npos ? std::string::npos : end - pos_);
  }

  [[noreturn]] void wrong(const std::string& what) const {
    throw Error(Errc::invalid_argument, "kiln: " + path_ + ":" + std::to_string(last_ == 0 ? 1 : last_) +
                                            ": not a kiln demand record: " + what);
  }

 private:
  std::string text_;
  std::string path_;
  std::size_t pos_ = 0;
  std::size_t line_ = 0;  // lines consumed
  std::size_t last_ = 0;  // the line a field began on: what an error names
};

}  // namespace


DemandRecord read_record(const std::string& path) {
  Reader r(read_record_file(path), path);
  if (r.done() || r.line() + "\n" != detail::kRecordHeader) r.wrong("no 'kiln record 1' line");
  DemandRecord record;
  while (!r.done()) {
    const std::string kind = r.line();
    if (kind == "program") {
      ProgramSource p;
      p.label = r.value("label");
      p.source = r.value("source");
      while (r.peek_kind() == "header") {
        ProgramHeader h;
        h.name = r.value("header");
        h.source = r.value("bytes");
        p.headers.push_back(std::move(h));
      }
      while (r.peek_kind() == "option") p.options.push_back(r.value("option"));
      while (r.peek_kind() == "kernel") p.name_expressions.push_back(r.value("kernel"));
      if (r.line() != "end") r.wrong("'end' expected after a program");
      record.programs.push_back(std::move(p));
    } else if (kind == "table") {
      RecordedKernel k;
      k.registry = r.value("registry");
      k.kernel = r.value("kernel");
      const std::string arch = r.line();
      if (!arch.starts_with("arch ")) r.wrong("'arch' expected");
      k.arch = static_cast<unsigned>(std::strtoul(arch.c_str() + 5, nullptr, 10));
      if (r.line() != "end") r.wrong("'end' expected after a kernel");
      record.kernels.push_back(std::move(k));
    } else {
      r.wrong("'program' or 'table' expected, found '" + kind.substr(0, 40) + "'");
    }
  }
  return record;
}

std::vector<PrecompileResult> precompile_record(const DemandRecord& record, unsigned arch,
                                                const std::vector<const Catalog*>& catalogs) {
  std::vector<PrecompileResult> results;
  for (const ProgramSource& source : record.programs) {
    try {
      Program program(source);
      results.push_back(program.precompile(arch));
    } catch (const Error& e) {
      PrecompileResult r;
      r.unit = source.label;
      r.error = {e.code(), e.what()};
      results.push_back(std::move(r));
    }
  }
  // Each registry's kernels at once, so that its units compile side by side.
  std::map<std::string, std::vector<std::string>> by_registry;
  for (const RecordedKernel& k : record.kernels) by_registry[k.registry].push_back(k.kernel);
  for (auto& [registry, kernels] : by_registry) {
    const Catalog* catalog = nullptr;
    for (const Catalog* c : catalogs)
      if (c != nullptr && c->name == registry) catalog = c;
    if (catalog == nullptr) {
      PrecompileResult r;
      r.unit = registry;
      r.error = {Errc::unknown_kernel, "kiln: the record names registry '" + registry + "', which this program does not have"};
      results.push_back(std::move(r));
      continue;
    }
    std::sort(kernels.begin(), kernels.end());
    kernels.erase(std::unique(kernels.begin(), kernels.end()), kernels.end());
    // A kernel the registry no longer has (renamed since the run), or builds only with an operator, is a
    // result of its own: the record's other entries still compile.
    std::vector<std::string> known;
    for (const std::string& k : kernels) {
      const KernelEntry* entry = catalog->find(k);
      if (entry != nullptr && !catalog->units[entry->unit].linked) {
        known.push_back(k);
        continue;
      }
      PrecompileResult r;
      r.unit = registry + "." + k;
      r.error = entry == nullptr ? Reason{Errc::unknown_kernel, unknown_kernel_message(*catalog, k)}
                                 : Reason{Errc::no_binary, linked_unit_message(*catalog, *entry)};
      results.push_back(std::move(r));
    }
    if (known.empty()) continue;  // an empty list would mean every unit
    for (PrecompileResult& r : precompile(*catalog, arch, known)) results.push_back(std::move(r));
  }
  return results;
}

}  // namespace kiln
