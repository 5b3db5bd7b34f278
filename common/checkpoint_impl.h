/* The insides of a checkpoint, shared by the two formats that fill one
 * (safetensors.c, checkpoint_gguf.c); nothing else includes this. */
#ifndef FOLIO_CHECKPOINT_IMPL_H
#define FOLIO_CHECKPOINT_IMPL_H

#include "safetensors.h"

#include <stdbool.h>

struct folio_gguf;

struct shard {
    char *path;
    const unsigned char *map; /* whole file, PROT_READ */
    size_t size;
};

struct folio_checkpoint {
    char *source; /* model.safetensors, model.safetensors.index.json or the .gguf file */
    struct shard *shards;
    size_t num_shards;
    struct folio_tensor *tensors; /* sorted by name once every file is read */
    size_t num_tensors, cap_tensors;
    /* Buffers the checkpoint frees on close: copies of tensors whose bytes
     * were not aligned in the file, and GGUF tensors dequantized at load. */
    void **owned;
    size_t num_owned;
    struct folio_gguf *gguf; /* the open GGUF file the tensors point into, or NULL */
    unsigned flags;          /* FOLIO_CHECKPOINT_KEEP_BLOCKS */
};

/* Appends a tensor (its name is then the checkpoint's to free). -1: out of memory. */
int folio_checkpoint_push(struct folio_checkpoint *ck, const struct folio_tensor *t);
/* Hands buf to the checkpoint (freed on close); -1 (buf freed) when out of memory. */
int folio_checkpoint_own(struct folio_checkpoint *ck, void *buf);

/* Opens ck->source as a GGUF file and pushes its tensors under their Hugging
 * Face names, quantized ones dequantized to f32 and Q/K rows in Hugging Face's
 * order (checkpoint_gguf.c). */
int folio_checkpoint_load_gguf(struct folio_checkpoint *ck, char *err, size_t errlen);

/* Gives every F8_E4M3 tensor its scales from the tensor NAME_scale beside it, once the tensors
 * are sorted (checkpoint_fp8.c); -1 with a message naming both where one is missing or of a
 * shape Folio does not take (block-wise scales included). */
int folio_checkpoint_bind_fp8_scales(struct folio_checkpoint *ck, char *err, size_t errlen);

#endif
