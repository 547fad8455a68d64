// One zstd decompression context per thread, kept for the thread's life: making one costs more than
// decompressing a small cubin (12 against 4 µs for the CUB example's: docs/facts.md, "Embedded binaries
// and loads"), and the embedded
// tier, the disk tier and the remote tier each decompress one frame per unit they serve.
#pragma once

#include <zstd.h>

namespace kiln::detail {

// This thread's context (made on first use; throws std::bad_alloc when it cannot be). Each
// ZSTD_decompressDCtx call starts a new frame, so a context a failed frame left is fine for the next.
ZSTD_DCtx* thread_zstd_dctx();

}  // namespace kiln::detail
