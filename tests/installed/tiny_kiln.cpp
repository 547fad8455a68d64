// tiny-kiln: kiln's command line (list, info, precompile, status, cache) over the tiny registry.
#include <kiln/cli.hpp>
#include "tiny_catalog.hpp"
int main(int argc, char** argv) { return kiln::cli_main(argc, argv, {&tiny::catalog()}); }
