/* Fuzzes text/tokenizer.h with the real Llama-2 tokenizer
 * (assets/models/llama2-tokenizer): arbitrary bytes
 * are encoded, every id is in the vocabulary, the ids decode, and streaming
 * detokenization (one id at a time, then finish) gives exactly the one-shot
 * decode, with and without skip_special. For valid UTF-8 without the text of
 * a special token and without U+2581 (the Metaspace character, which decodes
 * as a space), decode(encode(x)) == x, as tokenizer.c documents. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"

#define MAX_INPUT (16 << 10)

static struct folio_tokenizer *tok;

static void fail(const char *what, size_t size)
{
    fprintf(stderr, "fuzz_tokenizer: %s (input of %zu bytes)\n", what, size);
    abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    const char *dir = "assets/models/llama2-tokenizer"; /* fuzzers run in the source folder */
    char err[512];
    if (folio_tokenizer_load(dir, &tok, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz_tokenizer: %s\n", err);
        exit(1);
    }
    return 0;
}

/* Decodes ids by pushing them one at a time; NULL on an error. */
static char *stream_decode(const int32_t *ids, size_t n, bool skip_special, size_t *len)
{
    struct folio_detok *d = folio_detok_new(tok, skip_special);
    if (!d)
        return NULL;
    char *all = malloc(1);
    size_t total = 0;
    if (!all) {
        folio_detok_free(d);
        return NULL;
    }
    all[0] = '\0';
    for (size_t i = 0; i <= n; i++) {
        char *piece = NULL;
        size_t plen = 0;
        int rc = i < n ? folio_detok_push(d, ids[i], &piece, &plen)
                       : folio_detok_finish(d, &piece, &plen);
        if (rc != 0 || !piece || strlen(piece) > plen) {
            free(piece);
            free(all);
            folio_detok_free(d);
            return NULL;
        }
        char *grown = realloc(all, total + plen + 1);
        if (!grown) {
            free(piece);
            free(all);
            folio_detok_free(d);
            return NULL;
        }
        all = grown;
        memcpy(all + total, piece, plen);
        total += plen;
        all[total] = '\0';
        free(piece);
    }
    folio_detok_free(d);
    *len = total;
    return all;
}

/* Whether s is valid UTF-8 (shortest forms, no surrogates, at most U+10FFFF). */
static bool valid_utf8(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        size_t k;
        uint32_t cp, min;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xe0) == 0xc0) {
            k = 1, cp = c & 0x1f, min = 0x80;
        } else if ((c & 0xf0) == 0xe0) {
            k = 2, cp = c & 0x0f, min = 0x800;
        } else if ((c & 0xf8) == 0xf0) {
            k = 3, cp = c & 0x07, min = 0x10000;
        } else {
            return false;
        }
        if (i + k >= n) /* truncated sequence */
            return false;
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xc0) != 0x80)
                return false;
            cp = (cp << 6) | (s[i + j] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        i += k + 1;
    }
    return true;
}

static bool contains(const uint8_t *s, size_t n, const char *needle)
{
    size_t m = strlen(needle);
    for (size_t i = 0; i + m <= n; i++)
        if (memcmp(s + i, needle, m) == 0)
            return true;
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > MAX_INPUT)
        return 0;
    bool add_special = size > 0 && (data[0] & 1);
    size_t n = 0;
    int32_t *ids = folio_tokenizer_encode(tok, (const char *)data, size, add_special, &n);
    if (!ids)
        fail("encode returned NULL", size);
    int32_t vocab = folio_tokenizer_vocab_size(tok);
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= vocab)
            fail("encode gave an id outside the vocabulary", size);

    for (int skip = 0; skip < 2; skip++) {
        size_t len = 0, slen = 0;
        char *text = folio_tokenizer_decode(tok, ids, n, skip, &len);
        if (!text || strlen(text) > len || text[len] != '\0')
            fail("decode of encode's ids failed", size);
        char *streamed = stream_decode(ids, n, skip, &slen);
        if (!streamed)
            fail("streaming decode failed", size);
        if (slen != len || memcmp(streamed, text, len) != 0)
            fail("streaming detokenization differs from the one-shot decode", size);
        if (skip && valid_utf8(data, size) && !contains(data, size, "<s>") &&
            !contains(data, size, "</s>") && !contains(data, size, "<unk>") &&
            !contains(data, size, "\xe2\x96\x81") && (len != size || memcmp(text, data, size)))
            fail("decode(encode(x)) != x for valid UTF-8 x", size);
        free(streamed);
        free(text);
    }
    free(ids);
    return 0;
}
