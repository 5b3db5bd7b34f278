/* The real Llama-2 tokenizer for the fuzz targets that need one, from
 * the repository's assets/models/llama2-tokenizer: loaded once in
 * LLVMFuzzerInitialize; a target that cannot load it exits, since it would
 * test nothing. Header-only so each target stays one file plus this. */
#ifndef FOLIO_FUZZ_LLAMA2_TOKENIZER_H
#define FOLIO_FUZZ_LLAMA2_TOKENIZER_H

#include <stdio.h>
#include <stdlib.h>

#include "tokenizer.h"

static struct folio_tokenizer *fuzz_load_llama2_tokenizer(const char *target)
{
    const char *dir = "assets/models/llama2-tokenizer"; /* fuzzers run in the source folder */
    char err[512];
    struct folio_tokenizer *t = NULL;
    if (folio_tokenizer_load(dir, &t, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", target, err);
        exit(1);
    }
    return t;
}

#endif
