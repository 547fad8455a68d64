// The gpu suite's own executable run again as a child (`test_gpu FLAG ARG`, dispatched in main.cpp): what
// a new process sees of the disk cache.
#pragma once

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

extern char** environ;

namespace kiln::test {

// The child's exit status (0 when it said its part worked); -1 when it could not be started or waited for.
inline int run_self(const char* flag, const std::string& arg) {
  char self[4096] = {};
  if (readlink("/proc/self/exe", self, sizeof self - 1) <= 0) return -1;
  char* argv[] = {self, const_cast<char*>(flag), const_cast<char*>(arg.c_str()), nullptr};
  pid_t pid = 0;
  if (posix_spawn(&pid, self, nullptr, nullptr, argv, environ) != 0) return -1;
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace kiln::test
