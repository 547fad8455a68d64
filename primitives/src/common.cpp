// The primitives' registry (kiln's own table, kernels/primitives.toml).
#include <kiln/prim/common.hpp>

#include "primitives_catalog.hpp"

namespace kiln::prim {

Registry& registry() {
  static Registry instance(kiln::prim::catalog());
  return instance;
}

}  // namespace kiln::prim
