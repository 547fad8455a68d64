// Which embedded binary of a unit runs on a device: pure functions, no CUDA calls.
#pragma once

#include <kiln/config.hpp>  // C++20, checked first

#include <kiln/catalog.hpp>

#include <string>

namespace kiln {

// arch numbers are SM numbers: compute capability 9.0 -> 90, 12.0 -> 120.
constexpr unsigned arch_of(int cc_major, int cc_minor) noexcept {
  return static_cast<unsigned>(cc_major * 10 + cc_minor);
}

// The binary of `unit` to load on a device of architecture `device_arch`:
//  1. the cubin built for exactly that architecture;
//  2. else the cubin of the same major version with the highest lower minor (sm_80 runs on sm_86);
//  3. else, only if allow_ptx, the PTX of the highest architecture not above the device's
//     (the PTX tier assembles it);
//  4. else nullptr.
const BinaryEntry* select_binary(const Catalog& catalog, const UnitEntry& unit, unsigned device_arch,
                                 bool allow_ptx) noexcept;

// The embedded PTX of the highest architecture not above the device's, or nullptr: what the PTX tier
// assembles, whether or not a cubin for the device is embedded too (the embedded tier may be off).
const BinaryEntry* select_ptx(const Catalog& catalog, const UnitEntry& unit, unsigned device_arch) noexcept;

// A linked unit's embedded LTO-IR to link on a device of `device_arch`: the highest architecture not
// above the device's (nvJitLink links lto_80 for sm_90, never lto_90 for sm_80), or nullptr.
const BinaryEntry* select_lto_ir(const Catalog& catalog, const UnitEntry& unit, unsigned device_arch) noexcept;

// The message of the error raised when select_binary finds nothing: the kernel, the device's
// architecture, what is embedded, and what to do about it.
std::string no_binary_message(const Catalog& catalog, const KernelEntry& kernel, unsigned device_arch,
                              bool allow_ptx);

// The message for an unknown kernel name: the name, the catalog, and up to three closest known names.
std::string unknown_kernel_message(const Catalog& catalog, std::string_view name);

// The message for a kernel of a linked unit asked for without the code linked into it (Registry::get
// without a LinkedSource, warm-up, precompile): what the unit is and how to get its kernels.
std::string linked_unit_message(const Catalog& catalog, const KernelEntry& kernel);

// "sm_90" / "compute_90" / "lto_90"
std::string binary_label(const BinaryEntry& binary);
std::string binary_label(BinaryKind kind, unsigned arch);

// The labels of every binary embedded for `unit`, space-separated: "sm_75 sm_80 compute_120"; "" if none.
std::string embedded_labels(const Catalog& catalog, const UnitEntry& unit);

}  // namespace kiln
