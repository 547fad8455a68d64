// The entry point of the HTTP and S3 stores' tests: a suite whose server's program is not installed exits
// 77 (skipped), naming it; scripts/setup.sh installs them, so CI runs both.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "http_servers.hpp"

#include <cstdio>
#include <string_view>

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "-ts=remote_http" && (kiln::test::nginx_path().empty() || kiln::test::openssl_path().empty())) {
      std::puts("skipped: nginx or openssl is not installed (scripts/setup.sh installs them)");
      return 77;
    }
    if (arg == "-ts=remote_object" && kiln::test::python_path().empty()) {
      std::puts("skipped: python3 is not installed");
      return 77;
    }
  }
  doctest::Context context(argc, argv);
  return context.run();
}
