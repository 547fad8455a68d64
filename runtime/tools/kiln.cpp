// The `kiln` command: kiln's command line (kiln::cli_main, runtime/src/cli/) over the registries kiln
// ships, the examples and (when built) the primitives. A project's own tool is the same few lines over its
// registries (docs/command-line.md).
#include <kiln/cli.hpp>

#include "examples_catalog.hpp"
#ifdef KILN_WITH_PRIMITIVES
#  include "primitives_catalog.hpp"
#endif

int main(int argc, char** argv) {
  return kiln::cli_main(argc, argv, {
                                        &kiln::examples::catalog(),
#ifdef KILN_WITH_PRIMITIVES
                                        &kiln::prim::catalog(),
#endif
                                    });
}
