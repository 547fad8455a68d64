// A small file holding a secret (the fleet key, a store's token or keys): read without blocking (a FIFO
// is refused, not waited on), refused when it is not the user's or others can write it (whoever replaces
// it chooses what this process trusts or whom it speaks as), used with a warning when others can read it.
#pragma once

#include "base/result.hpp"

#include <string>

namespace kiln::detail {

struct SecretText {
  std::string text;     // the file's bytes
  std::string warning;  // empty, or one line saying to chmod 600 it
};

// `origin` names the file in messages ("the fleet key file /x (KILN_REMOTE_KEY_FILE)"); `use` says what
// a reader could do with it ("publish kernels the fleet runs"). Files over `max_bytes` are refused.
Result<SecretText> read_secret_file(const std::string& path, const std::string& origin, const std::string& use,
                                    std::size_t max_bytes);

}  // namespace kiln::detail
