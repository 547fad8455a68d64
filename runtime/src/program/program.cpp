// A program given at run time as a unit source (chain/unit_source.hpp), and the catalog of its one unit
// that its registry names its kernels by: the registry and the tiers then serve it as they serve a table's
// unit (docs/DESIGN.md, "Programs given at run time").
#include <kiln/program.hpp>

#include "chain/key.hpp"  // sha256_hex
#include "chain/unit_source.hpp"
#include "jit/request.hpp"  // source_estimate_ms
#include "jit/compile_history.hpp"
#include "program/program_cache.hpp"  // has_content
#include "program/program_check.hpp"
#include "program/program_key.hpp"
#include "registry/demand_record.hpp"  // record_program
#include "registry/query.hpp"  // make_chain
#include "registry/registry_impl.hpp"

#include <kiln/cache.hpp>
#include <kiln/catalog.hpp>
#include <kiln/error.hpp>
#include <kiln/precompile.hpp>

#include <algorithm>
#include <chrono>

namespace kiln {

// The program's unit source, the one copy of its text, and the catalog its registry names kernels by:
// the unit's name and digest, and its kernels by name expression (no source, no headers: those are the
// unit source's).
struct Program::Tables {
  std::string label;
  std::string digest;
  RegistryOptions options;
  std::shared_ptr<const detail::UnitSource> unit;
  std::size_t given_options = 0;  // unit->options' first ones are the program's; the toolkit's -I follows
  std::string strings;
  std::string cccl_version;
  std::vector<UnitEntry> units;
  std::vector<KernelEntry> kernels;
  Catalog catalog{};
  // Last, so that it ends first: it reads the catalog and the unit source until it ends. It lives as long
  // as the program, or longer, while a Kernel it handed out does (Kernel::keeps_loaded).
  std::unique_ptr<Registry> registry;

  StrRef add(std::string_view s) {
    const StrRef r{static_cast<std::uint32_t>(strings.size()), static_cast<std::uint32_t>(s.size())};
    strings += s;
    return r;
  }
};

namespace {

// SHA-256 (hex) of the headers given in memory, each name and bytes length-prefixed: what a PCH of the
// program's includes is keyed by (empty where it gives none).
std::string headers_digest(const std::vector<detail::Header>& headers) {
  if (headers.empty()) return {};
  std::string text;
  for (const detail::Header& h : headers) {
    detail::append_field(text, "header", h.name);
    detail::append_field(text, "bytes", h.content);
  }
  return detail::sha256_hex(text);
}

std::unique_ptr<Program::Tables> make_tables(const ProgramSource& source) {
  if (source.name_expressions.empty())
    throw Error(Errc::invalid_argument, "kiln: program '" + source.label + "' names no kernel: give name_expressions");
  auto t = std::make_unique<Program::Tables>();
  t->label = source.label.empty() ? "program" : source.label;
  // Its input is untrusted: options from the allowlist, sizes within the caps, and nothing included
  // that the key cannot hold, all checked before a byte of an include directory is read.
  detail::check_program(source, t->label);
  detail::check_program_includes(source, t->label);
  t->digest = detail::program_digest(source);
  const detail::ToolkitHeaders& toolkit = detail::toolkit_headers();
  t->cccl_version = toolkit.cccl_version.empty() ? "none" : toolkit.cccl_version;
  std::vector<std::string> names = source.name_expressions;
  std::sort(names.begin(), names.end());
  if (std::adjacent_find(names.begin(), names.end()) != names.end())
    throw Error(Errc::invalid_argument, "kiln: program '" + t->label + "' names a kernel twice");

  // The unit source: the text as given, the options as NVRTC gets them (the program's, then the
  // toolkit's CCCL), the headers in memory; one unit named by its digest, the label out of its key.
  auto unit = std::make_shared<detail::UnitSource>();
  unit->registry = detail::kProgramRegistry;
  unit->unit = std::string(detail::kProgramRegistry) + "_" + t->digest.substr(0, 16);
  unit->source_name = t->label + ".cu";
  unit->source = source.source;
  unit->options = source.options;
  t->given_options = source.options.size();
  if (!toolkit.include_dir.empty()) unit->options.push_back("-I" + toolkit.include_dir);
  for (const ProgramHeader& h : source.headers) unit->headers.push_back({h.name, h.source});
  unit->headers_digest = headers_digest(unit->headers);
  // Its kernels by their name expressions; lowered names are NVRTC's, learnt when it first compiles them
  // (the cache entry records them).
  for (const std::string& e : source.name_expressions) {
    unit->kernels.push_back({e, ""});
    unit->expressions.push_back(e);
  }

  UnitEntry entry{};
  entry.name = t->add(unit->unit);
  entry.digest = t->add(t->digest);
  entry.source_name = t->add(unit->source_name);
  t->units.push_back(entry);
  // Sorted as Catalog::find expects.
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
  t->unit = std::move(unit);
  return t;
}

}  // namespace

Program::Program(const ProgramSource& source, int device, RegistryOptions options) : tables_(make_tables(source)) {
  tables_->options = options;
  auto impl = std::make_unique<Registry::Impl>(tables_->catalog, device, options, tables_->unit);
  impl->kept_by(std::shared_ptr<const void>(tables_));
  tables_->registry.reset(new Registry(std::move(impl)));
}

Program::~Program() = default;

Kernel Program::get(std::string_view name_expression) {
  Kernel k = tables_->registry->get(name_expression);
  // The first get() of its unit: what it compiled (or found) goes into the demand record, if one is kept.
  if (k.provenance.tier != Tier::memory) {
    const std::vector<std::string>& options = tables_->unit->options;
    detail::record_program(tables_->label, *tables_->unit, {options.data(), tables_->given_options});
  }
  return k;
}
LoadPlan Program::plan(std::string_view name_expression) { return tables_->registry->plan(name_expression); }
double Program::estimate_ms() const {
  const DiskCache& cache = tables_->options.cache != nullptr ? *tables_->options.cache : default_cache();
  const std::filesystem::path root = cache.usable() ? cache.config().dir : std::filesystem::path{};
  return detail::compile_history(root).lookup(tables_->digest).value_or(detail::source_estimate_ms(*tables_->unit));
}
const std::string& Program::label() const noexcept { return tables_->label; }
const std::string& Program::digest() const noexcept { return tables_->digest; }
Registry& Program::registry() noexcept { return *tables_->registry; }
const Catalog& Program::catalog() const noexcept { return tables_->catalog; }

PrecompileResult Program::precompile(unsigned arch) {
  // The chain for `arch`, as kiln::precompile walks it: the disk cache, the fleet's, then the JIT.
  RegistryOptions options = tables_->options;
  options.use_embedded = false;
  options.allow_ptx = false;
  options.use_jit = true;
  const auto start = std::chrono::steady_clock::now();
  PrecompileResult r = detail::make_chain(tables_->catalog, options, tables_->unit).precompile(0, arch).result;
  r.unit = tables_->label;
  r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return r;
}

namespace detail {

bool has_content(const Program& program, const ProgramSource& source) {
  const Program::Tables& t = *program.tables_;
  const UnitSource& u = *t.unit;
  const auto header_equal = [](const Header& x, const ProgramHeader& y) { return x.name == y.name && x.content == y.source; };
  return u.source == source.source && t.given_options == source.options.size() &&
         std::equal(source.options.begin(), source.options.end(), u.options.begin()) &&
         u.expressions == source.name_expressions &&
         std::equal(u.headers.begin(), u.headers.end(), source.headers.begin(), source.headers.end(), header_equal);
}

}  // namespace detail
}  // namespace kiln
