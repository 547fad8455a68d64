// PCH families and their files in the cache: keys, publishing (worker) and verification (host).
#include "jit/pch_store.hpp"

#include "chain/key.hpp"  // sha256
#include "base/summed_file.hpp"
#include "jit/pch_pack.hpp"

#include <cuda.h>
#include <fcntl.h>
#include <sys/stat.h>

namespace kiln::detail {

namespace {

std::string_view trimmed(std::string_view s) {
  constexpr std::string_view space = " \t\r\f\v";
  const std::size_t first = s.find_first_not_of(space);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(space) - first + 1);
}

bool is_line_directive(std::string_view directive) {
  directive.remove_prefix(1);
  directive = trimmed(directive);
  return directive.starts_with("line") || (!directive.empty() && directive.front() >= '0' && directive.front() <= '9');
}

// Appends `s` so that no two field lists give the same key.
void field(std::string& key, std::string_view s) {
  key += std::to_string(s.size());
  key += ':';
  key += s;
}

}  // namespace

std::string leading_directives(std::string_view source) {
  std::string out, directive;
  bool in_comment = false, continued = false;
  while (!source.empty()) {
    const std::size_t eol = source.find('\n');
    const std::string_view line = source.substr(0, eol);
    source = eol == std::string_view::npos ? std::string_view{} : source.substr(eol + 1);
    std::string code;  // the line without its comments
    for (std::size_t i = 0; i < line.size();) {
      if (in_comment) {
        const std::size_t end = line.find("*/", i);
        if (end == std::string_view::npos) break;
        in_comment = false;
        i = end + 2;
        code += ' ';
      } else if (line.compare(i, 2, "//") == 0) {
        break;
      } else if (line.compare(i, 2, "/*") == 0) {
        in_comment = true;
        i += 2;
      } else {
        code += line[i++];
      }
    }
    std::string_view text = trimmed(code);
    if (!continued) {
      if (text.empty()) continue;
      if (text.front() != '#' || is_line_directive(text)) break;
      directive.clear();
    }
    continued = !text.empty() && text.back() == '\\';
    if (continued) text.remove_suffix(1);
    if (!directive.empty() && !text.empty()) directive += ' ';
    directive += trimmed(text);
    if (!continued) {
      out += directive;
      out += '\n';
    }
  }
  return out;
}

std::string pch_family(const CompileRequest& request, std::string_view headers_digest, std::string_view worker_tunables) {
  if (!request.ptx.empty()) return {};
  const std::string prefix = leading_directives(request.source);
  if (prefix.find("include") == std::string::npos) return {};
  std::string key = "kiln pch 3\n";  // 3: files packed (jit/pch_pack.hpp)
  field(key, std::to_string(CUDA_VERSION));
  field(key, std::to_string(request.arch));
  key += "options ";
  for (const std::string& option : request.options) field(key, option);
  key += "prefix ";
  field(key, prefix);
  field(key, headers_digest);
  key += "tunables ";
  field(key, worker_tunables);
  return sha256_hex(key);
}

std::filesystem::path pch_path(const std::filesystem::path& entries, std::string_view family) {
  return entries / (std::string(family) + ".pch");
}

std::string pch_write_failure(std::string_view log, std::string_view path) {
  constexpr std::string_view kWriting = "error while writing PCH file: ";
  const std::size_t at = log.find(kWriting);
  if (at == std::string_view::npos) return {};
  std::string why(trimmed(log.substr(at + kWriting.size(), log.find('\n', at) - at - kWriting.size())));
  if (why.empty()) why = "NVRTC says no more";
  // strerror's text ("No space left on device") within a sentence.
  if (why.size() > 1 && why[0] >= 'A' && why[0] <= 'Z' && why[1] >= 'a' && why[1] <= 'z') why[0] = static_cast<char>(why[0] - 'A' + 'a');
  return "kiln: the precompiled header " + std::string(path) + " could not be written: " + why;
}

std::filesystem::path pch_temp_path(const std::filesystem::path& final_path) { return summed_temp_path(final_path); }

Status publish_pch(const std::filesystem::path& raw, const std::filesystem::path& final_path) {
  if (!std::filesystem::exists(raw)) return fail("NVRTC wrote no PCH file " + raw.string());
  const std::filesystem::path packed = pch_temp_path(final_path);
  const Status made = pack_pch(raw, packed, pch_threads());
  std::error_code ignored;
  std::filesystem::remove(raw, ignored);
  if (!made) return made;
  return publish_summed(packed, final_path);
}

Status verify_pch(const std::filesystem::path& path) { return verify_summed(path); }

void touch_pch(const std::filesystem::path& path) {
  const struct timespec times[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
  ::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW);  // best effort, as for entries
}

}  // namespace kiln::detail
