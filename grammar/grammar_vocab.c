/* The engine's tokenizer, made once per model from Folio's: every id's bytes
 * in one buffer, special tokens behind llguidance's marker byte 0xFF (which
 * no UTF-8 text holds, so a grammar's literal "<|im_end|>" is spelled with
 * ordinary tokens and never matches the special one), and Folio's encoder as
 * the tokenize function the engine uses on text a grammar forces (where it
 * spells its input exactly; see spells_exactly). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar_internal.h"
#include "tokenizer.h"

/* llguidance's mark of a special token's bytes. */
#define SPECIAL_MARKER 0xFF

/* LlgTokenizeFn over Folio's encoder (thread-safe: a tokenizer is read-only).
 * No BOS: the engine tokenizes fragments of the output. */
static size_t tokenize(const void *user, const uint8_t *bytes, size_t len, uint32_t *out,
                       size_t cap)
{
    size_t n = 0;
    int32_t *ids = folio_tokenizer_encode(user, (const char *)bytes, len, false, &n);
    if (!ids)
        return 0;
    for (size_t i = 0; i < n && i < cap; i++)
        out[i] = (uint32_t)ids[i];
    free(ids);
    return n;
}

/* llguidance asks of a tokenize function that its tokens spell exactly the
 * bytes given: no BOS, no space prepended. A SentencePiece tokenizer with a
 * Prepend normalizer (Llama-2) adds "▁", and llguidance, trusting the
 * function for text the grammar forces, would then put a token in the mask
 * that its commit refuses. Such a tokenizer is replaced by llguidance's
 * greedy tokenization over the vocab, which spells the bytes exactly (masks
 * are exact either way: they come from the tokens' bytes). */
static bool spells_exactly(const struct folio_tokenizer *t)
{
    static const char *const probes[] = {"Hello", " world", "{\"a\": [1, 2.5]}", "x\ny", "é"};
    for (size_t p = 0; p < sizeof probes / sizeof probes[0]; p++) {
        size_t n, len = 0, want = strlen(probes[p]);
        int32_t *ids = folio_tokenizer_encode(t, probes[p], want, false, &n);
        bool same = ids != NULL;
        for (size_t i = 0; same && i < n; i++) {
            char *s;
            size_t sl;
            same = !folio_tokenizer_token_bytes(t, ids[i], &s, &sl) && len + sl <= want &&
                   !memcmp(probes[p] + len, s, sl);
            len += sl;
            free(s);
        }
        free(ids);
        if (!same || len != want)
            return false;
    }
    return true;
}

/* Fills lens[vocab] and *bytes (malloc'ed) with every id's bytes. */
static int gather_bytes(const struct folio_tokenizer *t, int32_t vocab, uint32_t *lens,
                        uint8_t **bytes, char *err, size_t errlen)
{
    int32_t n_tok = folio_tokenizer_vocab_size(t);
    size_t cap = 1 << 20, used = 0;
    uint8_t *buf = malloc(cap);
    if (!buf)
        goto oom;
    for (int32_t id = 0; id < vocab; id++) {
        char *s = NULL;
        size_t len = 0;
        lens[id] = 0;
        /* Ids past the tokenizer's (a padded embedding) and holes have no bytes:
         * the engine never allows an empty token. */
        if (id >= n_tok || folio_tokenizer_token_bytes(t, id, &s, &len))
            continue;
        bool special = folio_tokenizer_is_special(t, id);
        size_t need = used + len + 1;
        if (need > cap) {
            while (cap < need)
                cap *= 2;
            uint8_t *b = realloc(buf, cap);
            if (!b) {
                free(s);
                goto oom;
            }
            buf = b;
        }
        if (special)
            buf[used++] = SPECIAL_MARKER;
        memcpy(buf + used, s, len);
        used += len;
        lens[id] = (uint32_t)(len + special);
        free(s);
    }
    *bytes = buf;
    return 0;
oom:
    free(buf);
    snprintf(err, errlen, "grammar vocab: out of memory");
    return -1;
}

int folio_grammar_vocab_new(const struct folio_tokenizer *t, int32_t vocab_size,
                            const int32_t *eos_ids, int n_eos, struct folio_grammar_vocab **out,
                            char *err, size_t errlen)
{
    *out = NULL;
    const char *version = llg_get_version();
    char want[32];
    snprintf(want, sizeof want, "llguidance@%s", FOLIO_LLG_VERSION);
    /* "llguidance@1.8.0" followed by a space or the end, not "@1.8.01". */
    if (!version || strncmp(version, want, strlen(want)) ||
        (version[strlen(want)] && version[strlen(want)] != ' ')) {
        snprintf(err, errlen, "grammar vocab: llguidance %s is loaded, Folio is built for %s",
                 version ? version : "(unknown)", FOLIO_LLG_VERSION);
        return -1;
    }
    int32_t n_tok = folio_tokenizer_vocab_size(t);
    if (vocab_size < n_tok || vocab_size <= 0) {
        snprintf(err, errlen,
                 "grammar vocab: the model's vocabulary (%d) is smaller than the "
                 "tokenizer's (%d)",
                 (int)vocab_size, (int)n_tok);
        return -1;
    }
    if (n_eos < 1) {
        snprintf(err, errlen, "grammar vocab: no end-of-sequence id");
        return -1;
    }
    for (int i = 0; i < n_eos; i++)
        if (eos_ids[i] < 0 || eos_ids[i] >= vocab_size) {
            snprintf(err, errlen, "grammar vocab: end-of-sequence id %d is outside the vocabulary",
                     (int)eos_ids[i]);
            return -1;
        }
    struct folio_grammar_vocab *v = calloc(1, sizeof *v);
    uint32_t *lens = malloc((size_t)vocab_size * sizeof *lens);
    uint32_t *extra = malloc((size_t)n_eos * sizeof *extra);
    uint8_t *bytes = NULL;
    if (!v || !lens || !extra) {
        snprintf(err, errlen, "grammar vocab: out of memory");
        goto fail;
    }
    if (gather_bytes(t, vocab_size, lens, &bytes, err, errlen))
        goto fail;
    for (int i = 1; i < n_eos; i++)
        extra[i - 1] = (uint32_t)eos_ids[i];
    struct LlgTokenizerInitV2 init;
    memset(&init, 0, sizeof init);
    init.struct_size = sizeof init;
    init.vocab_size = (uint32_t)vocab_size;
    init.tok_eos = (uint32_t)eos_ids[0];
    init.token_lens = lens;
    init.token_bytes = bytes;
    if (spells_exactly(t)) {
        /* Folio's encoder repairs invalid UTF-8 before encoding (tokenizer.c):
         * the engine then gives it only whole characters. */
        init.tokenize_assumes_string = true;
        init.tokenize_fn = tokenize;
        init.tokenize_user_data = t;
    } else {
        init.use_approximate_greedy_tokenize_fn = true;
    }
    init.tok_eos_extra = n_eos > 1 ? extra : NULL;
    init.tok_eos_extra_count = (uint32_t)(n_eos - 1);
    char msg[512] = "";
    v->llg = llg_new_tokenizer_v2(&init, msg, sizeof msg);
    if (!v->llg) {
        snprintf(err, errlen, "grammar vocab: %s", msg[0] ? msg : "llguidance refused the vocab");
        goto fail;
    }
    v->vocab_size = vocab_size;
    v->mask_words = ((size_t)vocab_size + 31) / 32;
    free(lens);
    free(extra);
    free(bytes);
    *out = v;
    return 0;
fail:
    free(v);
    free(lens);
    free(extra);
    free(bytes);
    return -1;
}

void folio_grammar_vocab_free(struct folio_grammar_vocab *v)
{
    if (!v)
        return;
    llg_free_tokenizer(v->llg);
    free(v);
}

int32_t folio_grammar_vocab_size(const struct folio_grammar_vocab *v)
{
    return v->vocab_size;
}

size_t folio_grammar_mask_words(const struct folio_grammar_vocab *v)
{
    return v->mask_words;
}
