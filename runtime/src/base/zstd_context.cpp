// thread_zstd_dctx: a per-thread ZSTD_DCtx, freed when the thread ends.
#include "base/zstd_context.hpp"

#include <memory>
#include <new>

namespace kiln::detail {

namespace {

struct DCtxDeleter {
  void operator()(ZSTD_DCtx* d) const noexcept { ZSTD_freeDCtx(d); }
};

}  // namespace

ZSTD_DCtx* thread_zstd_dctx() {
  thread_local const std::unique_ptr<ZSTD_DCtx, DCtxDeleter> dctx(ZSTD_createDCtx());
  if (!dctx) throw std::bad_alloc();
  return dctx.get();
}

}  // namespace kiln::detail
