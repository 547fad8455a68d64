// The typed kernel handles a generated catalog header declares (kernels::NAME): their types come from the
// kernels' declarations, a launch takes values converted without narrowing, and a handle belongs to one
// registry. Compile-time checks are static_asserts; nothing here needs a GPU.
#include <kiln/catalog.hpp>
#include <kiln/kiln.hpp>

#include <doctest/doctest.h>

#include "catalog_builder.hpp"
#include "examples_catalog.hpp"

#include <type_traits>

namespace examples = kiln::examples::kernels;

// The parameter types of kernels/scale.cu and vector_add.cu, from the generator (NVRTC's mangled names).
static_assert(std::is_same_v<decltype(examples::scale_f32), const kiln::KernelRef<void(float const*, float*, float, int)>>);
static_assert(std::is_same_v<decltype(examples::scale_f64), const kiln::KernelRef<void(double const*, double*, double, int)>>);
static_assert(std::is_same_v<decltype(examples::vector_add),
                             const kiln::KernelRef<void(float const*, float const*, float*, int)>>);

using Scale = kiln::TypedKernel<void(float const*, float*, float, int)>;

template <typename... Args>
constexpr bool launches_with = requires(const Scale& k, Args... args) { k.launch({1}, {1}, 0u, nullptr, args...); };

// Values (rvalues too), pointers, a CUdeviceptr for a pointer; not a double for a float, not a std::size_t
// for an int, not too few arguments.
static_assert(launches_with<const float*, float*, float, int>);
static_assert(launches_with<float*, float*, float, int>);
static_assert(launches_with<CUdeviceptr, CUdeviceptr, float, int>);
static_assert(!launches_with<const float*, float*, double, int>);
static_assert(!launches_with<const float*, float*, float, std::size_t>);
static_assert(!launches_with<const float*, float*, float>);
static_assert(!launches_with<const float*, const float*, float, int>, "a const pointer for a non-const one");
static_assert(requires(const Scale& k, const float* x, float* y, int n) { k.launch({1}, {1}, 0u, nullptr, x, y, 2.0f, n); });

// kiln::launch of a plain Kernel takes values too (2.0f, n + 1): the caller's types, as they are.
static_assert(requires(const kiln::Kernel& k, CUdeviceptr x, int n) { kiln::launch(k, {1}, {1}, 0u, nullptr, x, 2.0f, n + 1); });

TEST_CASE("a kernel handle names its registry's kernel, and another registry refuses it") {
  CHECK(examples::scale_f32.name == "scale_f32");
  CHECK(&examples::scale_f32.catalog() == &kiln::examples::catalog());
  CHECK(kiln::examples::catalog().find(examples::block_sum_f32.name) != nullptr);

  kiln::test::CatalogBuilder builder;
  builder.kernel("scale_f32", builder.unit("scale", {kiln::test::sm(90)}));
  const kiln::Catalog other = builder.build("other");
  kiln::Registry registry(other);
  try {
    registry.get(examples::scale_f32);
    FAIL("another registry's handle was accepted");
  } catch (const kiln::Error& e) {
    CHECK(e.code() == kiln::Errc::unknown_kernel);
    CHECK(std::string(e.what()) == "kiln: kernel 'scale_f32' is registry 'examples''s; this registry is 'other': get it "
                                   "from a Registry of its own catalog");
  }
}
