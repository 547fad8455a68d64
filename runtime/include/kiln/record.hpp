// Recorded demand: what a run compiled at run time, written down so that `kiln precompile --record` can
// compile it for another architecture (CI for a new GPU, without one) and kiln-gen can turn it into a
// spec table to embed next release.
//
// A record holds, for each program given at run time that a run loaded from a tier other than memory,
// its label, source, headers, options and name expressions; and for each kernel of a table that no
// embedded binary served, its registry, name and the architecture it was wanted for. Nothing secret: no
// key, no environment, no path but those the program's own options name.
#pragma once

#include <kiln/config.hpp>  // C++20, checked first

#include <kiln/program.hpp>

#include <string>
#include <vector>

namespace kiln {

struct Catalog;
struct PrecompileResult;

// A kernel of a table that the run had to take from a tier after the embedded one.
struct RecordedKernel {
  std::string registry;
  std::string kernel;
  unsigned arch = 0;
};

struct DemandRecord {
  std::vector<ProgramSource> programs;
  std::vector<RecordedKernel> kernels;
};

// Appends what this process demands from now on to `path` (a regular file, created 0600; what
// KILN_RECORD=path does from the process's start). Each program and kernel is written once per process.
// Throws kiln::Error(invalid_argument) naming the path when it cannot be opened for appending.
void record_demand(const std::string& path);

// The record at `path`: a regular file of at most 256 MiB (a FIFO or a device is refused, never waited on).
// Throws kiln::Error(invalid_argument) naming the file, and the line of what is not a record.
DemandRecord read_record(const std::string& path);

// Everything `record` names compiled for `arch` into the disk cache (and the remote cache): its programs,
// and its kernels of the registries in `catalogs`. Each entry that cannot be (a registry not in `catalogs`,
// a kernel its registry no longer has) is a failed result naming it; the others compile all the same.
std::vector<PrecompileResult> precompile_record(const DemandRecord& record, unsigned arch,
                                                const std::vector<const Catalog*>& catalogs);

}  // namespace kiln
