// The command line's commands, each over the registries it was given (cli.cpp dispatches to them).
#pragma once

#include <kiln/cache.hpp>
#include <kiln/catalog.hpp>
#include <kiln/registry.hpp>
#include <kiln/remote.hpp>

#include "cli/output.hpp"
#include "disk/inventory.hpp"

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::cli {

// What every command knows: its program's name (for messages), its registries, and its arguments after
// the command's own name (`--json` taken out; json says whether it was there).
struct Invocation {
  std::string program;                          // "kiln", "geo-kiln": argv[0]'s file name
  std::span<const Catalog* const> registries;
  std::vector<std::string_view> args;
  bool json = false;
};

int list(const Invocation& in);
int info(const Invocation& in);
int status(const Invocation& in);
int precompile(const Invocation& in);
int cache(const Invocation& in);  // args[0]: stats, list, show, verify, prune, clear, export, import, push
int why(const Invocation& in);

// The disk cache's location and state, one line.
void print_cache_line(const DiskCache& cache);
// What the disk cache holds per registry and architecture (entries, bytes), the precompiled headers on a
// line of their own, and the entry files that do not check out: a table for people, or fields of the
// open JSON object `j`.
void print_breakdown(const detail::Inventory& inventory, std::string_view indent);
void json_breakdown(Json& j, const detail::Inventory& inventory);
// The architectures `inventory` holds entries of `registry`'s `unit` for, ascending, each once.
std::vector<unsigned> archs_on_disk(const detail::Inventory& inventory, std::string_view registry, std::string_view unit);
// The remote cache's configuration (and with `ping`, whether it answers), then this process's counters.
void print_remote(RemoteCache& remote, bool ping);

// `program command: why` on stderr, and the status for an argument the command does not understand.
int refuse(const Invocation& in, std::string_view command, std::string_view why);

// Whether each of `names` is a kernel of some registry; if not, says so on stderr, with close names.
bool all_known(const Invocation& in, const std::vector<std::string>& names);
// This machine's GPU's architecture, as `catalog`'s registry sees it; without one, nothing, and on stderr
// why and "PROGRAM COMMAND: no GPU to WHAT: pass --arch sm_XX". Other errors propagate.
std::optional<unsigned> device_arch(const Invocation& in, const Catalog& catalog, std::string_view command,
                                    std::string_view what);
// Every visible device, as registries of `catalog` see them (KILN_DEVICE_ARCH applied); without a GPU,
// nothing, and on stderr what device_arch says.
std::optional<std::vector<DeviceInfo>> every_device(const Invocation& in, const Catalog& catalog, std::string_view command,
                                                    std::string_view what);

}  // namespace kiln::cli
