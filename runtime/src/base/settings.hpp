// Every environment variable kiln reads, one row each, and this process's one reading of them.
#pragma once

#include <cstddef>
#include <iterator>
#include <string>
#include <string_view>

namespace kiln::detail {

// What a setting's value is. On/off values take on/1/true/yes or off/0/false/no, and sizes a number of
// bytes or one with a binary suffix (base/parse.hpp).
enum class SettingType { on_off, size, seconds, count, mode, path, url, text };

struct SettingRow {
  std::string_view name;
  SettingType type;
  std::string_view default_value;  // what holds while it is unset or empty, as the page says it
  std::string_view readers;        // which of kiln's programs read it
  std::string_view doc;            // its line on docs/configuration.md (Markdown)
};

// The table docs/configuration.md's list of environment variables is generated from (kiln-settings-page;
// a test fails while they differ). A new setting is a new row; SettingName refuses, at compile time, a
// name that has none. The rows of other programs' variables are those kiln reads for its own purposes.
inline constexpr SettingRow kSettings[] = {
    {"KILN_CACHE", SettingType::on_off, "on", "libkiln", "`off` disables the disk cache"},
    {"KILN_CACHE_DIR", SettingType::path, "`$XDG_CACHE_HOME/kiln`, else `~/.cache/kiln`", "libkiln",
     "the disk cache's directory"},
    {"KILN_CACHE_MAX_BYTES", SettingType::size, "1 GiB", "libkiln", "the disk cache's size cap (`512M`, `2G`; `0`: no cap)"},
    {"KILN_CACHE_LOCK_TIMEOUT", SettingType::seconds, "300", "libkiln",
     "how long a process waits for another one building the same cache entry before building it too, with a "
     "warning (at least the longest compile)"},
    {"KILN_TOOLKIT", SettingType::path, "`/usr/local/cuda`", "libkiln, `scripts/setup.sh`, `kiln-gen`",
     "the CUDA toolkit. libkiln takes the CCCL headers of programs given at run time from it (and their version "
     "into each program's key); `kiln-gen` uses it only when run as `codegen/kiln_gen.py`, since the configured "
     "launcher names its toolkit"},
    {"KILN_JIT_WORKERS", SettingType::count, "the cores, at most 16", "libkiln",
     "how many `kiln-jitd` worker processes compile at once (1 to 256); from 8 up, a table's tail may run on "
     "one in eight more"},
    {"KILN_JIT_MACHINE_SLOTS", SettingType::count, "the machine's cores, and at least one process's workers", "libkiln",
     "how many compiles the processes sharing a cache directory run at once, machine-wide: each compile holds "
     "one of this many slot lock files in `<cache dir>/jit-slots/` (1 to 4096; no budget where the disk cache "
     "is off). A compile waits for a slot at most `KILN_JIT_TIMEOUT`, then runs beyond the budget with a "
     "warning ([multi-gpu.md](multi-gpu.md))"},
    {"KILN_JITD", SettingType::path, "next to libkiln, then `libexecdir/kiln`", "libkiln",
     "the worker executable to use"},
    {"KILN_JITD_HOST", SettingType::text, "none", "`kiln-jitd`",
     "set by libkiln for each worker it starts, to its own pid: the worker dies with its host. Not for users"},
    {"KILN_JIT_PCH", SettingType::on_off, "on", "libkiln, `kiln-jitd`",
     "`off`: no precompiled-header files across processes (and JIT workers keep ASLR on)"},
    {"KILN_JIT_MEMORY", SettingType::size, "8 GiB", "libkiln, `kiln-jitd`",
     "the most memory one `kiln-jitd` worker may allocate, as its `RLIMIT_DATA` (`512M`, `16G`; `0`: no "
     "limit). The largest units take ~0.5 GB; a compile beyond it fails alone, with an error naming the limit "
     "([programs.md](programs.md))"},
    {"KILN_JIT_SPLIT", SettingType::mode, "`auto`", "libkiln",
     "`auto`: a unit on a table's critical path that may be split is compiled in parts on several workers (its "
     "entry one cubin per part) only where the cost model says the parts end clearly sooner than the unit "
     "whole (docs/DESIGN.md, \"A unit's kernels over several workers\"); `0`: every unit whole; `1`: every "
     "unit that may be split, whatever the model says"},
    {"KILN_JIT_TIMEOUT", SettingType::seconds, "600", "libkiln",
     "how long a JIT worker may take for one unit before it is killed and the unit retried once (1 to 86400); "
     "it also bounds a worker's start (its hello, at most 30 s)"},
    {"KILN_JIT_TRACE", SettingType::path, "none", "libkiln",
     "a file to append the JIT pool's trace to: one JSON line per worker started and per unit compiled, a "
     "unit compiled in parts one per part (`\"part\":\"1/5\"`)"},
    {"KILN_RECORD", SettingType::path, "none", "libkiln",
     "a file to append the demand record to: each program given at run time a tier after memory served, each "
     "table kernel no embedded binary served ([programs.md](programs.md))"},
    {"KILN_PROGRAM_CACHE", SettingType::count, "1024", "libkiln",
     "how many programs given at run time `kiln::program()` keeps to find again by their content, and how many "
     "header bundles the JIT keeps unpacked: beyond it, the least recently used that nobody holds is forgotten "
     "first (a program still held stays valid; it is only not found by its content any more, and a `Kernel` "
     "of it keeps its module loaded by itself). `0`: no limit ([programs.md](programs.md))"},
    {"KILN_DEVICE_ARCH", SettingType::text, "none", "libkiln, `kiln`",
     "`DEVICE:ARCH,...` (`1:80` or `1:sm_80`): the registries of that device (the primitives' too) select that "
     "architecture's binaries, to test a server of mixed GPUs on one of a kind; `kiln info` and `status` show "
     "it. A value that does not parse, or names a device twice (`0:80,0:90`), is ignored whole with a warning "
     "saying which"},
    {"KILN_PRECOMPILE", SettingType::on_off, "on", "libkiln", "`off` turns off background warm-up compiles"},
    {"KILN_REMOTE_CACHE", SettingType::url, "off", "libkiln",
     "the remote cache: `redis://[[user]:password@]host[:port][/db][?mode=ro&timeout_ms=N&...]`, "
     "`https://host[:port]/path[?ca_file=PEM&...]` (or `http://`: a WebDAV-style tree, nginx's `dav_methods "
     "PUT DELETE`), `s3://bucket[/prefix][?region=R&endpoint=https://host:port&...]`, or a `redis://` URL and "
     "an `https://` or `s3://` one separated by a space (leases on Redis, entries read through it); `off`: "
     "none ([tiers.md](tiers.md), tier 4)"},
    {"KILN_REMOTE_AUTH_FILE", SettingType::path, "none", "libkiln",
     "the HTTP(S) store's credential, a file of yours (`chmod 600`; refused if others can write it, one warning "
     "if they can read it): `Bearer TOKEN`, `Basic USER:PASSWORD` or a bare token on its first line; for an S3 "
     "store, its keys in the AWS credentials file's format (`aws_access_key_id = ...`, `aws_secret_access_key "
     "= ...`, `aws_session_token = ...`) where `AWS_ACCESS_KEY_ID` is unset"},
    {"KILN_REMOTE_KEY_FILE", SettingType::path, "none", "libkiln",
     "a file (yours, `chmod 600`) holding the fleet key that tags and verifies remote entries (at least 16 "
     "bytes); one others can write is refused; one others can read, or one in a directory others could put "
     "another file into its place (writable by group or others without the sticky bit, or another user's), is "
     "used with a warning"},
    {"KILN_REMOTE_KEY", SettingType::text, "none", "libkiln", "the fleet key itself, instead of the file"},
    {"KILN_PTX_STRIP", SettingType::path, "none", "`kiln-gen`",
     "the `kiln-ptx-strip` build tool, when `kiln-gen` is run as `codegen/kiln_gen.py` (Meson's `kiln_gen` "
     "and the installed launcher name their own)"},
    {"KILN_UPDATE_GOLDEN", SettingType::text, "none", "the codegen and cpu tests", "`1` rewrites the golden files"},
    {"GLIBC_TUNABLES", SettingType::text, "none", "libkiln (for its JIT workers)",
     "kept for the workers, with `glibc.malloc.hugetlb=1` added unless it sets `glibc.malloc.hugetlb` itself "
     "(`=0`: workers on 4 KiB pages)"},
    {"AWS_ACCESS_KEY_ID", SettingType::text, "none", "libkiln",
     "an S3 store's access key id (each request signed with SigV4), before `KILN_REMOTE_AUTH_FILE`"},
    {"AWS_SECRET_ACCESS_KEY", SettingType::text, "none", "libkiln", "that key's secret"},
    {"AWS_SESSION_TOKEN", SettingType::text, "none", "libkiln", "that key's session token, where it has one"},
    {"AWS_REGION", SettingType::text, "none", "libkiln", "an S3 store's region where its URL has no `region=`"},
    {"AWS_DEFAULT_REGION", SettingType::text, "none", "libkiln", "the same, where `AWS_REGION` is unset"},
};
inline constexpr std::size_t kSettingCount = std::size(kSettings);

// A row of kSettings, found by its name at compile time.
class SettingName {
 public:
  // NOLINTNEXTLINE(google-explicit-constructor): settings are named by their variable, setting("KILN_CACHE").
  consteval SettingName(const char* name) : index_(index_of(name)) {}
  constexpr std::size_t index() const { return index_; }
  constexpr const SettingRow& row() const { return kSettings[index_]; }

 private:
  static consteval std::size_t index_of(std::string_view name) {
    for (std::size_t i = 0; i < kSettingCount; ++i)
      if (kSettings[i].name == name) return i;
    throw "no row of kSettings has this name";  // not a constant expression: the call does not compile
  }
  std::size_t index_;
};

// The setting's value as this process read its environment, once, at the first call; empty where unset
// (kiln takes an empty value as unset). Thread-safe.
std::string setting(SettingName name);

// Reads every setting from the environment again: for a program (a test, a benchmark) that changes a
// setting with setenv after kiln read them. What was built from the earlier values keeps them.
void reread_settings();

}  // namespace kiln::detail
