// Sealing and opening a remote cache's values (remote/sealed_entry.hpp has the layout).
#include "remote/sealed_entry.hpp"

#include "remote/hmac.hpp"

#include <algorithm>

namespace kiln::detail {

namespace {

// What the tag covers besides the entry: a value of another kind or version can never verify as this one.
constexpr std::string_view kTagLabel{"kiln remote entry 1\n"};
constexpr std::string_view kKeyIdLabel{"kiln fleet key id 1\n"};

}  // namespace

FleetKey::FleetKey(std::string key) : key_(std::move(key)) {
  const Sha256Digest d = hmac_sha256(key_, {kKeyIdLabel});
  std::copy_n(d.begin(), id_.size(), id_.begin());
}

std::string FleetKey::id_hex() const { return to_hex(id_.data(), id_.size()); }

std::string seal_entry(const FleetKey& key, std::string_view entry_file) {
  const Sha256Digest tag = hmac_sha256(key.key(), {kTagLabel, entry_file});
  std::string value;
  value.reserve(kSealOverhead + entry_file.size());
  value += kSealMagic;
  value.append(reinterpret_cast<const char*>(key.id().data()), key.id().size());
  value.append(reinterpret_cast<const char*>(tag.data()), tag.size());
  value += entry_file;
  return value;
}

Result<std::string_view> open_entry(const FleetKey& key, std::string_view value) {
  if (value.size() < kSealOverhead || !value.starts_with(kSealMagic))
    return fail("it carries no authentication tag (not a kiln remote entry, or one written without a fleet key)");
  const auto* id = reinterpret_cast<const unsigned char*>(value.data() + kSealMagic.size());
  if (!std::equal(key.id().begin(), key.id().end(), id))
    return fail("it is tagged with another fleet key (id " + to_hex(id, kKeyIdSize) + "; this process's key is " +
                key.id_hex() + ")");
  const std::string_view file = value.substr(kSealOverhead);
  const Sha256Digest tag = hmac_sha256(key.key(), {kTagLabel, file});
  if (!same_digest(tag.data(), reinterpret_cast<const unsigned char*>(value.data() + kSealMagic.size() + kKeyIdSize),
                   kTagSize))
    return fail("its authentication tag does not verify (the entry was altered in the store)");
  return file;
}

}  // namespace kiln::detail
