// kiln's command line over any set of registries: `kiln` is this with kiln's own, and a project's tool is
// this with its own (docs/command-line.md).
#pragma once

#include <kiln/config.hpp>  // C++20, checked first

#include <kiln/catalog.hpp>

#include <initializer_list>
#include <span>

namespace kiln {

// Runs the command in argv (list, info, precompile, status, cache ...; `--help` lists them) over
// `registries`, printing to stdout and stderr; returns the exit status: 0 when the command did what was
// asked, 1 when it could not, 2 for arguments it does not understand. Registry names must differ.
//
//   #include <kiln/cli.hpp>
//   #include "geo_catalog.hpp"
//   int main(int argc, char** argv) { return kiln::cli_main(argc, argv, {&my::geo::catalog()}); }
int cli_main(int argc, char** argv, std::span<const Catalog* const> registries);
int cli_main(int argc, char** argv, std::initializer_list<const Catalog*> registries);

}  // namespace kiln
