// consumer-kiln: kiln's command line over this project's registries (docs/command-line.md): list, info,
// precompile --arch sm_XX, status, cache.
#include <kiln/cli.hpp>

#include "examples_catalog.hpp"
#include "geo_catalog.hpp"
#include "stats_catalog.hpp"

int main(int argc, char** argv) {
  return kiln::cli_main(argc, argv, {&consumer::geo::catalog(), &consumer::stats::catalog(), &kiln::examples::catalog()});
}
