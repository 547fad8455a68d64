// One row of the primitives' throughput table: the same algorithm run through a kiln
// plan and through nvcc-compiled cub::Device*, on the same data, timed side by side.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace kiln::bench {

struct Row {
  std::string family;  // "exclusive_scan"
  std::string type;    // "i32"
  std::size_t n = 0;
  // What one run moves, for the rate column: bytes (GB/s) when `bytes` is set, else items (G items/s).
  double bytes = 0;
  // Each runs the algorithm once on `stream` (enqueue only); inputs are prepared by the family's setup.
  std::function<void(CUstream)> kiln;
  std::function<void(CUstream)> cub;
  // Called before each timed run of either side (e.g. to restore keys a sort overwrote); not timed.
  std::function<void(CUstream)> reset;
  // Frees what setup allocated; runs after the row is measured.
  std::function<void()> release;
};

// A family's rows for n items: allocates inputs on the current device, returns closures.
using RowMaker = std::function<std::vector<Row>(std::size_t n)>;

// Each family's bench file defines one of these (prim_bench_<family>.cu), listed in prim_throughput.cpp.
std::vector<Row> scan_rows(std::size_t n);
std::vector<Row> reduce_rows(std::size_t n);  // reduce (sum) and segmented_reduce
std::vector<Row> merge_sort_rows(std::size_t n);
std::vector<Row> unique_by_key_rows(std::size_t n);
std::vector<Row> segmented_sort_rows(std::size_t n);
std::vector<Row> radix_sort_rows(std::size_t n);
std::vector<Row> select_rows(std::size_t n);
std::vector<Row> search_rows(std::size_t n);
std::vector<Row> operator_rows(std::size_t n);  // operators given at run time (kiln/prim/operator.hpp)
std::vector<Row> lazy_rows(std::size_t n);      // lazy inputs on a project's own kiln.* rows (lazy_units.toml)

}  // namespace kiln::bench
