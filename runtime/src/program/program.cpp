// A program given at run time as a catalog of one unit, made in memory: the registry and the tiers then
// serve it as they serve a table's unit (docs/DESIGN.md, "Programs given at run time").
#include <kiln/program.hpp>

#include "chain/key.hpp"  // sha256_hex
#include "registry/query.hpp"  // make_chain
#include "jit/request.hpp"  // unit_estimate_ms
#include "program/program_check.hpp"
#include "program/program_key.hpp"
#include "registry/demand_record.hpp"  // record_program

#include <kiln/cache.hpp>
#include <kiln/catalog.hpp>
#include <kiln/error.hpp>
#include <kiln/precompile.hpp>

#include <zstd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

namespace kiln {

// The catalog's tables and the bytes they point into, owned for the program's life.
struct Program::Tables {
  ProgramSource source;
  std::string label;
  std::string digest;
  RegistryOptions options;
  std::string strings;
  std::string cccl_version;
  std::string bundle;         // the headers, one zstd frame
  std::string bundle_digest;  // SHA-256 (hex) of `bundle`: the PCH family of its includes
  std::vector<UnitEntry> units;
  std::vector<KernelEntry> kernels;
  std::vector<HeaderEntry> headers;
  std::vector<std::uint32_t> unit_headers;
  std::size_t raw_headers = 0;
  Catalog catalog{};

  StrRef add(std::string_view s) {
    const StrRef r{static_cast<std::uint32_t>(strings.size()), static_cast<std::uint32_t>(s.size())};
    strings += s;
    return r;
  }
};

namespace {

std::unique_ptr<Program::Tables> make_tables(const ProgramSource& source);

}  // namespace

Program::Program(const ProgramSource& source, int device, RegistryOptions options)
    : tables_(make_tables(source)), registry_(std::make_unique<Registry>(tables_->catalog, device, options)) {
  tables_->options = options;
}

Program::~Program() = default;

Kernel Program::get(std::string_view name_expression) {
  Kernel k = registry_->get(name_expression);
  // The first get() of its unit: what it compiled (or found) goes into the demand record, if one is kept.
  if (k.provenance.tier != Tier::memory) detail::record_program(tables_->source);
  return k;
}
Plan Program::plan(std::string_view name_expression) { return registry_->plan(name_expression); }
double Program::estimate_ms() const {
  const DiskCache& cache = tables_->options.cache != nullptr ? *tables_->options.cache : default_cache();
  return detail::unit_estimate_ms(tables_->catalog, 0, cache.usable() ? cache.config().dir : std::filesystem::path{});
}
const std::string& Program::label() const noexcept { return tables_->label; }
const std::string& Program::digest() const noexcept { return tables_->digest; }
Registry& Program::registry() noexcept { return *registry_; }
const Catalog& Program::catalog() const noexcept { return tables_->catalog; }

PrecompileResult Program::precompile(unsigned arch) {
  // The chain for `arch`, as kiln::precompile walks it: the disk cache, the fleet's, then the JIT.
  RegistryOptions options = tables_->options;
  options.use_embedded = false;
  options.allow_ptx = false;
  options.use_jit = true;
  const auto start = std::chrono::steady_clock::now();
  PrecompileResult r = detail::make_chain(tables_->catalog, options).precompile(0, arch).result;
  r.unit = tables_->label;
  r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return r;
}

namespace {

std::unique_ptr<Program::Tables> make_tables(const ProgramSource& source) {
  if (source.name_expressions.empty())
    throw Error(Errc::invalid_argument, "kiln: program '" + source.label + "' names no kernel: give name_expressions");
  auto t = std::make_unique<Program::Tables>();
  t->label = source.label.empty() ? "program" : source.label;
  // Its input is untrusted: options from the allowlist, sizes within the caps, and nothing included
  // that the key cannot hold, all checked before a byte of an include directory is read.
  detail::check_program(source, t->label);
  detail::check_program_includes(source, t->label);
  t->source = source;
  t->digest = detail::program_digest(source);
  const detail::ToolkitHeaders& toolkit = detail::toolkit_headers();
  t->cccl_version = toolkit.cccl_version.empty() ? "none" : toolkit.cccl_version;

  // The options as the JIT hands them to NVRTC, one per line: the program's, then the toolkit's CCCL.
  std::string options;
  for (const std::string& o : source.options) options += (options.empty() ? "" : "\n") + o;
  if (!toolkit.include_dir.empty()) options += (options.empty() ? "-I" : "\n-I") + toolkit.include_dir;

  // The headers, back to back, compressed as a catalog's bundle is.
  std::string raw;
  for (const ProgramHeader& h : source.headers) {
    t->headers.push_back({t->add(h.name), static_cast<std::uint32_t>(raw.size()), static_cast<std::uint32_t>(h.source.size())});
    t->unit_headers.push_back(static_cast<std::uint32_t>(t->unit_headers.size()));
    raw += h.source;
  }
  t->raw_headers = raw.size();
  if (!raw.empty()) {
    t->bundle.resize(ZSTD_compressBound(raw.size()));
    const std::size_t size = ZSTD_compress(t->bundle.data(), t->bundle.size(), raw.data(), raw.size(), 1);
    if (ZSTD_isError(size)) throw Error(Errc::catalog, "kiln: program '" + t->label + "': zstd: " + ZSTD_getErrorName(size));
    t->bundle.resize(size);
    t->bundle_digest = detail::sha256_hex(t->bundle);
  }

  // One unit, named by its digest: the label stays out of the key.
  UnitEntry unit{};
  unit.name = t->add(std::string(detail::kProgramRegistry) + "_" + t->digest.substr(0, 16));
  unit.options = t->add(options);
  unit.digest = t->add(t->digest);
  unit.source = t->add(source.source);
  unit.source_name = t->add(t->label + ".cu");
  unit.first_header = 0;
  unit.header_count = static_cast<std::uint32_t>(t->headers.size());
  t->units.push_back(unit);

  // Its kernels by their name expressions, sorted as Catalog::find expects; lowered names are NVRTC's,
  // learnt when it first compiles them (the cache entry records them).
  std::vector<std::string> names = source.name_expressions;
  std::sort(names.begin(), names.end());
  if (std::adjacent_find(names.begin(), names.end()) != names.end())
    throw Error(Errc::invalid_argument, "kiln: program '" + t->label + "' names a kernel twice");
  for (const std::string& n : names) {
    const StrRef name = t->add(n);
    t->kernels.push_back({name, name, t->add(""), 0});
  }

  Catalog& c = t->catalog;
  c.name = detail::kProgramRegistry;
  c.units = t->units;
  c.kernels = t->kernels;
  c.strings = t->strings.data();
  c.cccl_version = t->cccl_version;
  c.headers = t->headers;
  c.unit_headers = t->unit_headers;
  c.header_bundle = reinterpret_cast<const unsigned char*>(t->bundle.data());
  c.header_bundle_size = t->bundle.size();
  c.header_bundle_raw_size = t->raw_headers;
  c.header_bundle_digest = t->bundle_digest;
  return t;
}

}  // namespace

}  // namespace kiln
