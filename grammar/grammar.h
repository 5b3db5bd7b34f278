/* Structured outputs: a sequence's next token restricted to those that keep
 * its text inside a JSON schema, a regular expression, a list of choices or
 * a Lark grammar. The engine is llguidance (its C interface, llg_abi.h);
 * this is Folio's face of it:
 *
 *  - a vocab, built once per model from Folio's tokenizer: each id's bytes
 *    (folio_tokenizer_token_bytes), special tokens marked as such so that no
 *    grammar's text can spell them, and the model's end-of-sequence ids;
 *  - a cache of compiled grammars keyed by (kind, text), so a schema that
 *    many requests share compiles once; compiling is also how a frontend
 *    validates a request, with an error that names what is wrong;
 *  - a matcher per sequence: the bitmask of allowed tokens for the next
 *    step, the commit of the sampled token, and whether the text may end
 *    (EOS is in the mask exactly then) or must end.
 *
 * Masks are uint32 words, bit i of word i / 32 set when token i is allowed,
 * over the model's vocabulary padded to 32 (folio_logits_apply_mask in
 * worker/sampler.h applies one). Compile time and the work of one mask are
 * bounded by llguidance's limits (grammar_cache.c says which): a grammar
 * past them is refused with a message, never run for long.
 *
 * Threads: a vocab is read-only once built, a cache takes a lock, and each
 * matcher is used by one thread at a time; so several threads may compute
 * masks for different sequences at once. */
#ifndef FOLIO_GRAMMAR_H
#define FOLIO_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grammar_kind.h" /* enum folio_grammar_kind */

struct folio_tokenizer;

/* The largest minItems or maxItems of an array a JSON schema may ask for
 * (grammar_precheck.c says why). */
#define FOLIO_GRAMMAR_MAX_ARRAY_ITEMS 10000

/* "json_object", "json_schema", "regex", "choice", "lark". */
const char *folio_grammar_kind_name(enum folio_grammar_kind kind);
/* The kind of such a name: 0, or -1 for an unknown one. */
int folio_grammar_kind_parse(const char *name, enum folio_grammar_kind *out);

struct folio_grammar_vocab;

/* The engine's view of a model's vocabulary. vocab_size is the model's (its
 * logits), at least the tokenizer's; eos_ids (n_eos >= 1) are the ids that
 * end a sequence, allowed only where the grammar accepts. t must outlive
 * the vocab (the engine tokenizes with it). 0, or -1 with a message. */
int folio_grammar_vocab_new(const struct folio_tokenizer *t, int32_t vocab_size,
                            const int32_t *eos_ids, int n_eos, struct folio_grammar_vocab **out,
                            char *err, size_t errlen);
void folio_grammar_vocab_free(struct folio_grammar_vocab *v);
int32_t folio_grammar_vocab_size(const struct folio_grammar_vocab *v);
/* (vocab_size + 31) / 32: the words of every mask. */
size_t folio_grammar_mask_words(const struct folio_grammar_vocab *v);

struct folio_grammar_cache;

/* Holds up to capacity compiled grammars (and refusals, so a bad schema sent
 * again costs a look-up), dropping the least recently used. NULL when out of
 * memory. v must outlive the cache and its matchers. */
struct folio_grammar_cache *folio_grammar_cache_new(const struct folio_grammar_vocab *v,
                                                    size_t capacity);
void folio_grammar_cache_free(struct folio_grammar_cache *c);

/* Compiles text[0..len) as kind, or finds it compiled: 0, or -1 with a
 * message that starts with the kind ("invalid json_schema: ..."). */
int folio_grammar_compile(struct folio_grammar_cache *c, enum folio_grammar_kind kind,
                          const char *text, size_t len, char *err, size_t errlen);

struct folio_grammar_matcher;

/* A sequence's matcher at the start of the grammar (compiling it first when
 * the cache lacks it): 0, or -1 with folio_grammar_compile's message. */
int folio_grammar_matcher_new(struct folio_grammar_cache *c, enum folio_grammar_kind kind,
                              const char *text, size_t len, struct folio_grammar_matcher **out,
                              char *err, size_t errlen);
void folio_grammar_matcher_free(struct folio_grammar_matcher *m);

/* Writes the allowed tokens of the next step to mask[words] (words =
 * folio_grammar_mask_words). Once the matcher is finished only the EOS ids
 * are set. 0, or -1 with a message (a step past the limits, a matcher whose
 * commit failed): the sequence cannot go on. */
int folio_grammar_fill_mask(struct folio_grammar_matcher *m, uint32_t *mask, size_t words,
                            char *err, size_t errlen);
/* Advances by the sampled token. 0, or -1 with a message when the grammar
 * does not allow it; the matcher is then unusable (later calls fail). */
int folio_grammar_commit(struct folio_grammar_matcher *m, int32_t token, char *err, size_t errlen);
/* The text so far is complete: an EOS id may come now. */
bool folio_grammar_is_accepting(struct folio_grammar_matcher *m);
/* Nothing but EOS can follow (the grammar is complete and cannot grow, an
 * EOS was committed, or the matcher failed): the sequence stops here. */
bool folio_grammar_is_finished(const struct folio_grammar_matcher *m);

#endif
