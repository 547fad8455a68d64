// On a GPU: point-in-polygon from the consumer's geo registry against a CPU reference, translate, the
// bounding box (CUB, the project's own headers), and the two vector_add kernels (stats' and kiln's
// examples') side by side in one process; geo's kernels through their typed handles, first from the
// embedded tier, then from the JIT tier (embedded binaries off: compiled, or read back from the disk
// cache KILN_CACHE_DIR). Exits 77 (skipped) where kiln::driver() finds no CUDA driver or GPU.
#include <kiln/kiln.hpp>

#include "check.hpp"
#include "gpu_main.hpp"
#include "device_array.hpp"
#include "examples_catalog.hpp"
#include "geo_catalog.hpp"
#include "stats_catalog.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numbers>
#include <random>
#include <string>
#include <vector>

using consumer::DeviceArray;
using consumer::check_source;

namespace {

template <typename T>
struct Points {
  std::vector<T> x, y;
};

// A flower-shaped (concave) polygon of `vertices` vertices around the origin.
template <typename T>
Points<T> flower(int vertices, int petals) {
  Points<T> p;
  for (int k = 0; k < vertices; ++k) {
    double angle = 2 * std::numbers::pi * k / vertices, radius = 1.0 + 0.35 * std::sin(petals * angle);
    p.x.push_back(static_cast<T>(radius * std::cos(angle)));
    p.y.push_back(static_cast<T>(radius * std::sin(angle)));
  }
  return p;
}

template <typename T>
Points<T> random_points(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> coordinate(-1.5, 1.5);
  Points<T> p;
  for (int i = 0; i < n; ++i) {
    p.x.push_back(static_cast<T>(coordinate(rng)));
    p.y.push_back(static_cast<T>(coordinate(rng)));
  }
  return p;
}

// The even-odd rule, with the kernel's arithmetic in the kernel's order (the unit is built with
// --fmad=false, so both round alike).
template <typename T>
bool inside_cpu(T x, T y, const Points<T>& polygon) {
  bool in = false;
  const std::size_t n = polygon.x.size();
  for (std::size_t j = 0; j < n; ++j) {
    const T x0 = polygon.x[j], y0 = polygon.y[j], x1 = polygon.x[(j + 1) % n], y1 = polygon.y[(j + 1) % n];
    if ((y0 > y) != (y1 > y) && x < (x1 - x0) * (y - y0) / (y1 - y0) + x0) in = !in;
  }
  return in;
}

unsigned blocks_for(int n) { return static_cast<unsigned>((n + 255) / 256); }

template <typename T, typename Handle>
void check_point_in_polygon(kiln::Registry& geo, bool embedded, const Handle& handle, int vertices, int n) {
  const auto k = geo.get(handle);  // a TypedKernel: launch takes the kernel's parameter types
  check_source(k, embedded);
  Points<T> points = random_points<T>(n, 7), polygon = flower<T>(vertices, 7);
  DeviceArray<T> px(points.x), py(points.y), vx(polygon.x), vy(polygon.y);
  DeviceArray<unsigned char> inside{std::vector<unsigned char>(n, 2)};
  k.launch({blocks_for(n)}, {256}, 0, nullptr, px.ptr(), py.ptr(), n, vx.ptr(), vy.ptr(), vertices, inside.ptr());
  const std::vector<unsigned char> got = inside.to_host();
  int wrong = 0, in = 0;
  for (int i = 0; i < n; ++i) {
    wrong += got[i] != inside_cpu(points.x[i], points.y[i], polygon);
    in += got[i] == 1;
  }
  std::printf("%s (%s), %d vertices: %d of %d points inside, %d differ from the CPU\n", std::string(handle.name).c_str(),
              std::string(kiln::to_string(k.provenance.source)).c_str(), vertices, in, n, wrong);
  CHECK(wrong == 0);
  CHECK(in > n / 4);  // the flower covers about a third of the square
  CHECK(in < n / 2);
}

void check_geo(kiln::Registry& geo, bool embedded) {
  namespace kernels = consumer::geo::kernels;
  // Points x vertices stays near 10^7 per case: the CPU reference runs unoptimised in a debug build.
  check_point_in_polygon<float>(geo, embedded, kernels::point_in_polygon_f32, 12, 1 << 20);    // one shared-memory tile
  check_point_in_polygon<float>(geo, embedded, kernels::point_in_polygon_f32, 1000, 1 << 14);  // four tiles
  check_point_in_polygon<double>(geo, embedded, kernels::point_in_polygon_f64, 1000, 1 << 14);

  {
    const int n = 100'000;
    Points<float> points = random_points<float>(n, 3);
    DeviceArray<float> x(points.x), y(points.y);
    const auto translate = geo.get(kernels::translate_f32);
    check_source(translate, embedded);
    translate.launch({64}, {256}, 0, nullptr, x.ptr(), y.ptr(), 0.5f, -2.0f, n);  // values, as declared
    std::vector<float> gx = x.to_host(), gy = y.to_host();
    int wrong = 0;
    for (int i = 0; i < n; ++i) wrong += gx[i] != points.x[i] + 0.5f || gy[i] != points.y[i] - 2.0f;
    CHECK(wrong == 0);
  }

  {  // CUB's BlockReduce over the project's Box: one box per block, merged here.
    const int n = 300'001, blocks = 40;
    Points<float> points = random_points<float>(n, 11);
    DeviceArray<float> x(points.x), y(points.y), boxes{std::vector<float>(4 * blocks)};
    const auto bounds = geo.get(kernels::bounds_f32);
    check_source(bounds, embedded);
    bounds.launch({blocks}, {256}, 0, nullptr, x.ptr(), y.ptr(), n, boxes.ptr());
    const std::vector<float> got = boxes.to_host();
    float x0 = got[0], y0 = got[1], x1 = got[2], y1 = got[3];
    for (int b = 1; b < blocks; ++b) {
      x0 = std::min(x0, got[4 * b]), y0 = std::min(y0, got[4 * b + 1]);
      x1 = std::max(x1, got[4 * b + 2]), y1 = std::max(y1, got[4 * b + 3]);
    }
    CHECK(x0 == *std::min_element(points.x.begin(), points.x.end()));
    CHECK(y0 == *std::min_element(points.y.begin(), points.y.end()));
    CHECK(x1 == *std::max_element(points.x.begin(), points.x.end()));
    CHECK(y1 == *std::max_element(points.y.begin(), points.y.end()));
  }
}

void run_checks() {
  kiln::Registry geo(consumer::geo::catalog()), stats(consumer::stats::catalog()),
      examples(kiln::examples::catalog());
  // The JIT tier for the same kernels: no embedded binary, no PTX (compiled by NVRTC, or on a later run
  // read back from the disk cache the first run filled).
  kiln::Registry geo_jit(consumer::geo::catalog(), 0, {.allow_ptx = false, .use_embedded = false});
  CUcontext context = geo.context();  // every registry of device 0 uses its primary context
  kiln::check(kiln::driver().cuCtxPushCurrent(context), "cuCtxPushCurrent");  // for cuMemAlloc

  check_geo(geo, true);
  check_geo(geo_jit, false);

  {  // One name in two registries: each launches its own kernel.
    const int n = 10'000;
    std::vector<double> a(n, 0.25), b(n, 1e-10);  // a + b is exact in double, not in float
    DeviceArray<double> da(a), db(b), dc{std::vector<double>(n)};
    kiln::launch(stats.get("vector_add"), {blocks_for(n)}, {256}, 0, nullptr, da.ptr(), db.ptr(), dc.ptr(), n);
    CHECK(dc.to_host() == std::vector<double>(n, 0.25 + 1e-10));

    std::vector<float> fa(n, 1.5f), fb(n, 2.0f);
    DeviceArray<float> fda(fa), fdb(fb), fdc{std::vector<float>(n)};
    kiln::launch(examples.get("vector_add"), {blocks_for(n)}, {256}, 0, nullptr, fda.ptr(), fdb.ptr(), fdc.ptr(), n);
    CHECK(fdc.to_host() == std::vector<float>(n, 3.5f));
  }

  CUcontext popped;
  kiln::driver().cuCtxPopCurrent(&popped);
}

}  // namespace

int main() { return consumer::gpu_main("consumer gpu checks", run_checks); }
