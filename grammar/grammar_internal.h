/* What grammar_*.c share: the structs behind grammar.h's handles. */
#ifndef FOLIO_GRAMMAR_INTERNAL_H
#define FOLIO_GRAMMAR_INTERNAL_H

#include "grammar.h"
#include "llg_abi.h"

struct folio_grammar_vocab {
    struct LlgTokenizer *llg;
    int32_t vocab_size;
    size_t mask_words;
};

struct folio_grammar_matcher {
    struct LlgMatcher *llg;
    const struct folio_grammar_vocab *v;
};

/* A fresh matcher for (kind, text), from the cache (grammar_cache.c): 0, or
 * -1 with the compile error. */
int grammar_cache_clone(struct folio_grammar_cache *c, enum folio_grammar_kind kind,
                        const char *text, size_t len, struct LlgMatcher **out, char *err,
                        size_t errlen);

/* Refuses what llguidance's limits do not bound (grammar_precheck.c): 0, or
 * -1 with a message. */
int grammar_precheck(enum folio_grammar_kind kind, const char *text, size_t len, char *err,
                     size_t errlen);

/* Cuts what an llguidance message adds past its point (a backtrace, a marker). */
void grammar_trim_error(char *msg);

const struct folio_grammar_vocab *grammar_cache_vocab(const struct folio_grammar_cache *c);

#endif
