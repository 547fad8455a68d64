// What the registry does without touching a GPU: construction, unknown names, names.
#include <kiln/catalog.hpp>
#include <kiln/driver.hpp>
#include <kiln/kiln.hpp>

#include <doctest/doctest.h>

#include "catalog_builder.hpp"

#include <thread>

using kiln::test::CatalogBuilder;
using kiln::test::sm;

namespace {

kiln::Errc code_of(auto&& call) {
  try {
    call();
  } catch (const kiln::Error& e) {
    return e.code();
  }
  FAIL("no kiln::Error thrown");
  return {};
}

}  // namespace

TEST_CASE("a Registry is constructed without CUDA, and unknown names throw unknown_kernel") {
  CatalogBuilder builder;
  builder.kernel("scale_f32", builder.unit("scale", {sm(90)}));
  const kiln::Catalog catalog = builder.build("examples");
  kiln::Registry registry(catalog);
  CHECK(&registry.catalog() == &catalog);
  CHECK(registry.stats().unit_loads == 0);
  CHECK(registry.stats().kernel_loads == 0);

  CHECK(code_of([&] { registry.plan("scal_f32"); }) == kiln::Errc::unknown_kernel);
  CHECK(code_of([&] { registry.get("scal_f32"); }) == kiln::Errc::unknown_kernel);
  CHECK_THROWS_WITH_AS(registry.get("scal_f32"),
                       "kiln: no kernel 'scal_f32' in registry 'examples'; closest: scale_f32", kiln::Error);
}

TEST_CASE("without a driver, plan says why and get throws no_driver, every time") {
  if (kiln::driver_available()) {
    MESSAGE("a CUDA driver is present: the no-driver behaviour cannot be checked here");
    return;
  }
  CatalogBuilder builder;
  builder.kernel("scale_f32", builder.unit("scale", {sm(90)}));
  const kiln::Catalog catalog = builder.build("examples");
  kiln::Registry registry(catalog);
  for (int attempt = 0; attempt < 2; ++attempt) {
    CAPTURE(attempt);
    const kiln::LoadPlan plan = registry.plan("scale_f32");
    CHECK_FALSE(plan.available);
    CHECK(plan.reason.message.find("kiln: no ") == 0);
    const kiln::Errc code = code_of([&] { registry.get("scale_f32"); });
    CHECK((code == kiln::Errc::no_driver || code == kiln::Errc::no_device));
    CHECK(plan.reason.code == code);  // as get() throws it
    CHECK(code_of([&] { registry.device(); }) == code);
  }
  CHECK(registry.stats().kernel_loads == 0);
}

TEST_CASE("to_string names every error code and tier") {
  CHECK(kiln::to_string(kiln::Errc::unknown_kernel) == "unknown_kernel");
  CHECK(kiln::to_string(kiln::Errc::no_driver) == "no_driver");
  CHECK(kiln::to_string(kiln::Errc::no_device) == "no_device");
  CHECK(kiln::to_string(kiln::Errc::no_binary) == "no_binary");
  CHECK(kiln::to_string(kiln::Errc::driver) == "driver");
  CHECK(kiln::to_string(kiln::Tier::memory) == "memory");
  CHECK(kiln::to_string(kiln::Tier::embedded) == "embedded");
}

TEST_CASE("to_string names the newer error codes and tiers") {
  CHECK(kiln::to_string(kiln::Errc::no_compiler) == "no_compiler");
  CHECK(kiln::to_string(kiln::Errc::compile) == "compile");
  CHECK(kiln::to_string(kiln::Tier::disk) == "disk");
  CHECK(kiln::to_string(kiln::Tier::jit) == "jit");
  CHECK(kiln::to_string(kiln::Tier::remote) == "remote");
  CHECK(kiln::to_string(kiln::Errc::remote) == "remote");
}

TEST_CASE("warm-up without a GPU costs nothing: returns at once, nothing pending, every name still cold") {
  if (kiln::driver_available()) return;  // this case is about machines without a driver
  kiln::test::CatalogBuilder builder;
  const std::uint32_t unit = builder.unit("u", {{90, kiln::BinaryKind::cubin}});
  builder.kernel("scale_f32", unit);
  builder.kernel("scale_f64", unit);
  const kiln::Catalog catalog = builder.build("nogpu");
  kiln::Registry registry(catalog);
  registry.request_warmup({"scale_f32", "scale_f64"});
  registry.precompile_all();
  const auto cold = registry.ensure_warm({"scale_f32"}, std::chrono::milliseconds(0));
  CHECK(cold == std::vector<std::string>{"scale_f32"});
  const auto s = registry.status();
  CHECK(s.submitted == 0);
  CHECK(s.pending == 0);
  CHECK(s.kernels.empty());
  CHECK(registry.stats().unit_loads == 0);
  // An unknown name is still the caller's mistake, GPU or not.
  CHECK_THROWS_AS(registry.request_warmup({"scale_f16"}), kiln::Error);
}

TEST_CASE("context_device and stream_device: -1 where nothing can be told") {
  CHECK(kiln::context_device(nullptr) == -1);
  // A new thread has no current context (and without a driver, nothing can be asked at all).
  int device = 0;
  std::thread([&] { device = kiln::stream_device(nullptr); }).join();
  CHECK(device == -1);
}
