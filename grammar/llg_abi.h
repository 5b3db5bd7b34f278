/* The part of llguidance's C interface that grammar/ calls, declared here
 * because its Python wheel (where the library comes from, deploy/setup.sh)
 * ships the shared object without the header. The layouts are those of
 * llguidance 1.8.0 (parser/llguidance.h there); CMake refuses another
 * version and grammar_vocab.c checks llg_get_version() at run time, since a
 * changed struct would be read wrongly rather than refused. */
#ifndef FOLIO_LLG_ABI_H
#define FOLIO_LLG_ABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FOLIO_LLG_VERSION "1.8.0"

struct LlgTokenizer;
struct LlgMatcher;

/* Bounds on the work of compiling a grammar and of one mask; 0 = the default. */
struct LlgParserLimits {
    size_t max_items_in_row;     /* Earley items in one row (the grammar's branching) */
    uint64_t initial_lexer_fuel; /* lexer work while compiling */
    uint64_t step_lexer_fuel;    /* lexer work for one mask */
    size_t step_max_items;       /* Earley items for one mask */
    size_t max_lexer_states;     /* lexer states (memory) */
    size_t max_grammar_size;     /* symbols in the productions */
    bool precompute_large_lexemes;
    bool verbose_errors; /* parser state and grammar in error messages */
};

struct LlgConstraintInit {
    const struct LlgTokenizer *tokenizer;
    uint32_t log_buffer_level;
    uint32_t log_stderr_level;
    bool ff_tokens_ok;
    bool backtrack_ok;
    struct LlgParserLimits limits;
};

/* Writes at most out_cap ids of bytes' tokens; returns how many there are. Thread-safe. */
typedef size_t (*LlgTokenizeFn)(const void *user_data, const uint8_t *bytes, size_t len,
                                uint32_t *out, size_t out_cap);

/* Zero it, then set struct_size = sizeof: the library reads that many bytes. */
struct LlgTokenizerInitV2 {
    size_t struct_size;
    uint32_t vocab_size;
    uint32_t tok_eos;
    const uint32_t *token_lens;   /* vocab_size lengths */
    const uint8_t *token_bytes;   /* the tokens' bytes, one after another */
    const char *tokenizer_json;   /* instead of the two above */
    bool tokenize_assumes_string; /* tokenize_fn takes only valid UTF-8 */
    LlgTokenizeFn tokenize_fn;
    bool use_approximate_greedy_tokenize_fn;
    const void *tokenize_user_data;
    const char *const *slices; /* NULL: the library's default partition */
    const uint32_t *tok_eos_extra;
    uint32_t tok_eos_extra_count;
};

/* NULL with a message in err on failure. */
struct LlgTokenizer *llg_new_tokenizer_v2(const struct LlgTokenizerInitV2 *init, char *err,
                                          size_t errlen);
void llg_free_tokenizer(struct LlgTokenizer *tok);
void llg_constraint_init_set_defaults(struct LlgConstraintInit *init,
                                      const struct LlgTokenizer *tok);
/* Never NULL: a failed compile is a matcher in the error state. */
struct LlgMatcher *llg_new_matcher(const struct LlgConstraintInit *init, const char *type,
                                   const char *data);
struct LlgMatcher *llg_clone_matcher(const struct LlgMatcher *m);
void llg_free_matcher(struct LlgMatcher *m);
const char *llg_matcher_get_error(struct LlgMatcher *m);
bool llg_matcher_is_error(const struct LlgMatcher *m);
/* 0, or -1 (the matcher is then in the error state). */
int32_t llg_matcher_compute_mask_into(struct LlgMatcher *m, uint32_t *mask, size_t mask_bytes);
int32_t llg_matcher_consume_token(struct LlgMatcher *m, uint32_t token);
bool llg_matcher_is_accepting(struct LlgMatcher *m);
bool llg_matcher_is_stopped(const struct LlgMatcher *m);
const char *llg_get_version(void);

#endif
