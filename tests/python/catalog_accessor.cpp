// The extern "C" accessor a project may add to its catalog library for kiln.Registry.load (test_registries.py).
#include "examples_catalog.hpp"

extern "C" const kiln::Catalog* kiln_test_examples_catalog() { return &kiln::examples::catalog(); }
