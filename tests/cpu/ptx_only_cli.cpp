// The kiln command over ptx_only_catalog(): what `kiln why` says of a unit whose embedded code is older
// than the device (tests/cpu/test_cli_inspect.cpp).
#include <kiln/cli.hpp>

#include "ptx_only_catalog.hpp"

int main(int argc, char** argv) { return kiln::cli_main(argc, argv, {&kiln::test::ptx_only_catalog()}); }
