// build_unit, step by step: claim the stores, compile, check, publish.
#include "jit/build.hpp"

#include "base/fatbin.hpp"
#include "chain/key.hpp"  // describe_key
#include "chain/key_parts.hpp"
#include "jit/compile_history.hpp"
#include "jit/jit_pool.hpp"
#include "jit/request.hpp"

#include <kiln/error.hpp>
#include <kiln/select.hpp>

#include <memory>
#include <optional>
#include <vector>

namespace kiln::detail {
namespace {

// The holds a build has taken, fastest store first (null where a store held nothing), released the
// slowest first, as they nest: the disk cache's lock is let go last.
class Holds {
 public:
  ~Holds() {
    while (!held_.empty()) held_.pop_back();
  }
  void add(Claim& claim) {
    if (held_.empty()) first_ = claim.held;
    held_.push_back(std::move(claim.hold));
  }
  // Publishes `entry` to every store held and releases it; what the first store (the disk cache) said.
  Status publish(const CacheEntry& entry) {
    Status first = first_;
    for (std::size_t i = held_.size(); i-- > 0;) {
      if (!held_[i]) continue;
      Status published = held_[i]->publish(entry);
      if (i == 0) first = std::move(published);
    }
    held_.clear();
    return first;
  }

 private:
  std::vector<std::unique_ptr<StoreHold>> held_;
  Status first_ = ok();
};

// 1. Claim: each store, fastest first. The first that has the entry serves it, and the stores held
// before it keep a copy (the next process here needs no network).
std::optional<UnitImage> claim_stores(const UnitQuery& q, const CacheKey& key, Holds& holds) {
  const EntryCheck check = [&](const CacheEntry& e) { return entry_serves_unit(q.catalog, q.unit_index(), e); };
  for (const auto& store : q.stores()) {
    Claim claim = store->claim(key, check);
    if (claim.found) {
      UnitImage image;
      image.source = store->tier();
      image.stored = holds.publish(*claim.found);
      image.take(std::move(*claim.found));
      return image;
    }
    holds.add(claim);
  }
  return std::nullopt;
}

// What a compile made, how long the compilers took (one thread's time where none was given more), and
// the key parts of the unit it compiled.
struct Built {
  CacheEntry entry;
  double ms = 0;
  std::vector<KeyPart> parts;
};

// An outcome's entry, or Error(compile) with its error line and the compiler's full log.
Built built_of(CompileOutcome outcome, std::vector<KeyPart> parts) {
  if (!outcome.entry) throw Error(Errc::compile, outcome.entry.error() + "\n" + outcome.log);
  return {std::move(outcome.entry).value(), outcome.nvrtc_ms + outcome.link_ms, std::move(parts)};
}

// The unit's source as it was given (a program's), else its catalog's.
UnitSource source_of(const UnitQuery& q) {
  if (const UnitSource* given = q.given()) return *given;
  return unit_source(q.catalog, q.unit_index());
}

// How long the unit's compile took last (any architecture, this cache directory's history), else the
// model's estimate.
double estimate_of(const UnitQuery& q, const std::filesystem::path& root) {
  if (const UnitSource* given = q.given())
    return compile_history(root).lookup(q.catalog.str(q.unit().digest)).value_or(source_estimate_ms(*given));
  return unit_estimate_ms(q.catalog, q.unit_index(), root);
}

// 2. Compile: the unit's request on the process-wide pool, the PCH family of its includes with it, with
// its estimate: the time its last compile took (any architecture, this cache directory's history), else
// the model's (compile_estimate_ms). What it took now goes into the history and the entry.
Built compile(const UnitQuery& q, const BuildInput& in) {
  UnitSource source = source_of(q);
  std::vector<KeyPart> parts = key_parts(source);  // what `kiln why` compares later
  const std::string headers_digest = std::move(source.headers_digest);
  CompileRequest request = make_request(std::move(source), q.arch);
  if (!in.ptx.empty()) {
    request.ptx.assign(in.ptx.substr(0, in.ptx.find('\0')));
    request.headers.clear();
    return built_of(jit_compile(request, {}, compile_estimate_ms(q.catalog, q.unit_index(), true)), std::move(parts));
  }
  if (q.link != nullptr) {
    // The unit's kernels as the binary embeds them (LTO-IR) for the device or an older architecture: then
    // the code, CUB's policies included, is that architecture's, and the key says so (UnitQuery::key).
    if (const BinaryEntry* lto_ir = select_lto_ir(q.catalog, q.unit(), q.arch)) {
      request.code_arch = lto_ir->arch;
      // A damaged image is compiled from the unit's source instead, for the same architecture.
      if (auto image = embedded_image_fatbin(q.catalog, *lto_ir)) request.unit_lto_ir = std::move(*image);
    }
    request.link_source = q.link->source;
    request.link_source_name = q.link->name.empty() ? "linked source" : q.link->name;
    request.link_lto_ir = q.link->lto_ir;
    return built_of(jit_compile(request), std::move(parts));
  }
  PchFamily family = request_family(request, headers_digest, q.cache());
  UnitSplit split{q.unit().splittable, compile_shared_ms(q.catalog, q.unit_index())};
  if (split.splittable) split.kernel_shares = kernel_code_shares(q.catalog, q.unit_index());
  const std::filesystem::path root = q.cache().usable() ? q.cache().config().dir : std::filesystem::path{};
  const double estimate = estimate_of(q, root);
  Built built = built_of(jit_compile(request, std::move(family), estimate, split), std::move(parts));
  compile_history(root).record(q.catalog.str(q.unit().digest), built.ms);
  return built;
}

// 3. Check: an entry that does not name every kernel of the unit would be foreign to every later reader.
void check_built(const UnitQuery& q, const CacheKey& key, const CacheEntry& entry) {
  if (const Status fits = entry_serves_unit(q.catalog, q.unit_index(), entry); !fits)
    throw Error(Errc::compile, "kiln: the entry built for " + describe_key(key) + " cannot serve it: " + fits.error());
}

}  // namespace

UnitImage build_unit(const UnitQuery& q, const BuildInput& in) {
  const CacheKey key = q.key(in.ptx.empty() ? 0 : in.ptx_arch);
  Holds holds;
  std::optional<UnitImage> image = claim_stores(q, key, holds);  // 1
  if (!image) {
    auto [entry, ms, parts] = compile(q, in);                    // 2
    check_built(q, key, entry);                                  // 3
    record_key_parts(entry, parts, ms);
    image.emplace();
    image->source = in.tier;
    image->stored = holds.publish(entry);                        // 4
    image->take(std::move(entry));
  }
  image->cache_key = key.hex;
  return std::move(*image);
}

}  // namespace kiln::detail
