// kiln-settings-page PAGE: rewrites the table of environment variables in PAGE (docs/configuration.md)
// from the settings table (base/settings.hpp), and leaves the rest of the page as it is. An unchanged
// page is not written, so nothing that depends on it rebuilds.
#include "base/settings_page.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: kiln-settings-page PAGE.md\n";
    return 2;
  }
  const std::string path = argv[1];
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::cerr << "kiln-settings-page: cannot read " << path << ": " << std::strerror(errno) << "\n";
    return 1;
  }
  std::ostringstream text;
  text << in.rdbuf();
  const auto page = kiln::detail::with_settings_table(text.str());
  if (!page) {
    std::cerr << "kiln-settings-page: " << path << ": " << page.error() << "\n";
    return 1;
  }
  if (*page == text.str()) return 0;
  const std::string temporary = path + ".tmp";
  std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
  out << *page;
  out.close();
  if (!out || std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::cerr << "kiln-settings-page: cannot write " << path << ": " << std::strerror(errno) << "\n";
    std::remove(temporary.c_str());
    return 1;
  }
  std::cout << "kiln-settings-page: rewrote " << path << "\n";
  return 0;
}
