/* A sequence's place in its grammar: llguidance's matcher, one per sequence,
 * used by one thread at a time. */
#include <stdio.h>
#include <stdlib.h>

#include "grammar_internal.h"

int folio_grammar_matcher_new(struct folio_grammar_cache *c, enum folio_grammar_kind kind,
                              const char *text, size_t len, struct folio_grammar_matcher **out,
                              char *err, size_t errlen)
{
    *out = NULL;
    struct folio_grammar_matcher *m = calloc(1, sizeof *m);
    if (!m) {
        snprintf(err, errlen, "grammar: out of memory");
        return -1;
    }
    if (grammar_cache_clone(c, kind, text, len, &m->llg, err, errlen)) {
        free(m);
        return -1;
    }
    m->v = grammar_cache_vocab(c);
    *out = m;
    return 0;
}

void folio_grammar_matcher_free(struct folio_grammar_matcher *m)
{
    if (!m)
        return;
    llg_free_matcher(m->llg);
    free(m);
}

static void matcher_error(struct folio_grammar_matcher *m, const char *what, char *err,
                          size_t errlen)
{
    const char *e = llg_matcher_get_error(m->llg);
    snprintf(err, errlen, "grammar: %s: %s", what, e ? e : "failed");
    grammar_trim_error(err);
}

int folio_grammar_fill_mask(struct folio_grammar_matcher *m, uint32_t *mask, size_t words,
                            char *err, size_t errlen)
{
    if (words != m->v->mask_words) {
        snprintf(err, errlen, "grammar: a mask of %zu words, the vocabulary needs %zu", words,
                 m->v->mask_words);
        return -1;
    }
    if (llg_matcher_compute_mask_into(m->llg, mask, words * sizeof *mask)) {
        matcher_error(m, "mask", err, errlen);
        return -1;
    }
    return 0;
}

int folio_grammar_commit(struct folio_grammar_matcher *m, int32_t token, char *err, size_t errlen)
{
    if (token < 0 || token >= m->v->vocab_size) {
        snprintf(err, errlen, "grammar: token %d is outside the vocabulary", (int)token);
        return -1;
    }
    if (llg_matcher_consume_token(m->llg, (uint32_t)token)) {
        matcher_error(m, "commit", err, errlen);
        return -1;
    }
    return 0;
}

bool folio_grammar_is_accepting(struct folio_grammar_matcher *m)
{
    return llg_matcher_is_accepting(m->llg);
}

bool folio_grammar_is_finished(const struct folio_grammar_matcher *m)
{
    return llg_matcher_is_stopped(m->llg);
}
