// The extern "C" catalog stamp a project may add to its catalog library for kiln.Registry.load
// (test_registries.py), beside the one kiln-gen generates in the registry's namespace.
#include "examples_catalog.hpp"

extern "C" constinit const kiln::CatalogStamp kiln_test_examples_catalog = kiln::catalog_stamp_of(&kiln::examples::catalog);

// A function of the same library: not a stamp, and never called by Registry.load.
extern "C" const kiln::Catalog* kiln_test_examples_function() { return &kiln::examples::catalog(); }
