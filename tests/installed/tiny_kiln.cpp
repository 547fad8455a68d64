// tiny-kiln: kiln's command line over the tiny registry (README, "Your registries in kiln's command line").
#include <kiln/cli.hpp>

#include "tiny_catalog.hpp"

int main(int argc, char** argv) { return kiln::cli_main(argc, argv, {&tiny::catalog()}); }
