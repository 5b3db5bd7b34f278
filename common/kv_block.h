/* The KV cache's block size: tokens per block of the paged KV pool. The one
 * definition the scheduler's block manager, the backends' caches and the CUDA
 * kernels' paging share (the kernels hold it as a compile-time constant and
 * assert the value their tile code is written for). */
#ifndef FOLIO_KV_BLOCK_H
#define FOLIO_KV_BLOCK_H

#define FOLIO_KV_BLOCK_SIZE 16

#endif
