// kiln's command line over the corpus as a spec table (bench/corpus_table.py, -Dcorpus_table=N):
// bench/corpus.py times `bench_corpus_kiln precompile --arch sm_XX` in a new cache directory.
#include <kiln/cli.hpp>

#include "corpus_catalog.hpp"

int main(int argc, char** argv) { return kiln::cli_main(argc, argv, {&kiln::bench_corpus::catalog()}); }
