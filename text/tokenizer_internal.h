/* The parts of struct folio_tokenizer that tokenizer*.c share: the loaded
 * tables and pipeline descriptions. Nothing outside text/tokenizer*.c
 * includes this; the public interface is tokenizer.h. */
#ifndef FOLIO_TOKENIZER_INTERNAL_H
#define FOLIO_TOKENIZER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "tokenizer.h"

/* ---- string -> id hash table (open addressing, keys owned by the table) */
struct tok_strmap {
    struct tok_strmap_slot {
        const char *key; /* NULL: empty slot */
        uint32_t len;
        int32_t id;
    } * slots;
    size_t mask; /* capacity - 1, capacity a power of two */
    size_t count;
};
int tok_strmap_init(struct tok_strmap *m, size_t expected);
void tok_strmap_free(struct tok_strmap *m);
/* Inserts or overwrites; key must outlive the map. Returns -1 on allocation failure. */
int tok_strmap_put(struct tok_strmap *m, const char *key, size_t len, int32_t id);
int32_t tok_strmap_get(const struct tok_strmap *m, const char *key, size_t len); /* -1 */

/* ---- the BPE model */
struct tok_merge_slot {
    uint64_t pair; /* (left id << 32) | right id; UINT64_MAX: empty */
    uint32_t rank;
    int32_t new_id;
};

struct tok_bpe {
    struct tok_strmap vocab; /* model vocab, keys point into id_str */
    int32_t *bmp_id;         /* id of the one-character token per BMP code point, -1 */
    int32_t byte_id[256];    /* <0xXX> tokens, -1 when absent */
    struct tok_merge_slot *merges;
    size_t merge_mask;
    int32_t unk_id; /* -1: no unk token */
    bool byte_fallback, fuse_unk, ignore_merges;
    char *subword_prefix, *word_suffix; /* continuing_subword_prefix, end_of_word_suffix */
    /* Splitting a word before every metaspace that follows another character
     * cannot change the result (no merge joins "x" + "▁..."): checked at load. */
    bool split_at_metaspace;
    /* self_word[id]: the BPE of the token's own text is just that token, so
     * a word found in the vocab with this flag needs no merging. Computed at
     * load by the same BPE, so the shortcut cannot change a result. */
    uint8_t *self_word;
    int32_t n_self;
    char metaspace[5];
    size_t metaspace_len;
};

/* Scratch space that one encode call reuses across words. */
struct tok_bpe_scratch {
    struct tok_symbol {
        int32_t id;
        int32_t prev, next;
        uint32_t len;
    } * sym;
    size_t sym_cap;
    struct tok_heap_item {
        uint64_t key; /* rank << 32 | pos: a min-heap on (rank, pos) */
        int32_t new_id;
    } * heap;
    size_t heap_cap;
    char *buf; /* a word with prefix/suffix, for models that have them */
    size_t buf_cap;
};

/* Appends the ids of one pre-tokenized word (valid UTF-8, non-empty). */
/* Home slot of a merge pair (splitmix64's finalizer: pair ids are dense). */
/* Grows *p (an array of *cap elements of elem bytes) to hold at least need
 * elements, doubling; 0, or -1 when out of memory (*p is then unchanged). */
static inline int tok_grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q)
        return -1;
    *p = q;
    *cap = c;
    return 0;
}

/* A NUL-terminated copy of len bytes (which may hold NULs); NULL when out of memory. */
static inline char *tok_dup_bytes(const char *s, size_t len)
{
    char *p = malloc(len + 1);
    if (p) {
        memcpy(p, s, len);
        p[len] = 0;
    }
    return p;
}

static inline size_t tok_pair_slot(uint64_t pair, size_t mask)
{
    uint64_t h = pair;
    h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull;
    h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
    return (size_t)(h ^ (h >> 31)) & mask;
}

int tok_bpe_word(const struct tok_bpe *bpe, struct tok_bpe_scratch *s, const char *w, size_t len,
                 int32_t **ids, size_t *n, size_t *cap);
/* Fills bpe->self_word for ids [0, n) whose text is strs[id] (NULL: hole). */
int tok_bpe_mark_self(struct tok_bpe *bpe, char *const *strs, const uint32_t *lens, int32_t n);
void tok_bpe_scratch_free(struct tok_bpe_scratch *s);
const struct tok_merge_slot *tok_bpe_merge(const struct tok_bpe *bpe, int32_t a, int32_t b);

/* ---- added tokens */
struct tok_added {
    char *content;
    size_t len;
    char *pattern; /* what is matched: content, or its normalized form when normalized */
    size_t pattern_len;
    int32_t id;
    bool single_word, lstrip, rstrip, normalized, special;
};

/* A byte trie over added-token patterns for leftmost-longest matching. */
struct tok_trie {
    struct tok_trie_node {
        int32_t first_child, next_sibling;
        int32_t token; /* index into added[], -1 */
        uint8_t byte;
    } * nodes;
    size_t n, cap;
    uint8_t first_byte[32]; /* bitmap of the bytes a pattern starts with */
};

/* tokenizer_added.c: added tokens from tokenizer.json, or one at a time
 * (GGUF) followed by tok_added_finish, which builds the matchers, gives each
 * id its text and marks the special ones. */
int tok_added_tokens_parse(struct folio_tokenizer *t, const void *json_root, char *err,
                           size_t errlen);
int tok_added_push(struct folio_tokenizer *t, struct tok_added a, const char *content, size_t len);
int tok_added_finish(struct folio_tokenizer *t);
/* Sets the text that id decodes from. */
int tok_set_id_str(struct folio_tokenizer *t, int32_t id, const char *s, size_t len);

/* ---- normalizer, pre-tokenizer, decoder descriptions */
enum tok_norm_kind { TOK_NORM_PREPEND, TOK_NORM_REPLACE, TOK_NORM_NFC };
struct tok_norm_op {
    enum tok_norm_kind kind;
    char *a; /* prepend string, or pattern */
    size_t a_len;
    char *b; /* replacement content */
    size_t b_len;
};

enum tok_prepend_scheme { TOK_PREPEND_ALWAYS, TOK_PREPEND_FIRST, TOK_PREPEND_NEVER };
struct tok_metaspace {
    char repl[5];
    size_t repl_len;
    enum tok_prepend_scheme scheme;
    bool split;
};

/* Split (and Digits, which is a Split on \p{N}) and ByteLevel. */
enum tok_split_behavior {
    TOK_SPLIT_REMOVED,
    TOK_SPLIT_ISOLATED,
    TOK_SPLIT_MERGED_PREV,
    TOK_SPLIT_MERGED_NEXT,
    TOK_SPLIT_CONTIGUOUS,
};
enum tok_pre_kind { TOK_PRE_SPLIT, TOK_PRE_BYTELEVEL };
struct tok_pre_op {
    enum tok_pre_kind kind;
    pcre2_code *re; /* Split: its pattern; ByteLevel: the GPT-2 regex, or NULL without use_regex */
    enum tok_split_behavior behavior;
    bool invert;
    bool add_prefix_space; /* ByteLevel */
};

enum tok_dec_kind {
    TOK_DEC_REPLACE,
    TOK_DEC_BYTE_FALLBACK,
    TOK_DEC_FUSE,
    TOK_DEC_STRIP,
    TOK_DEC_METASPACE,
    TOK_DEC_BYTE_LEVEL,
    TOK_DEC_JOIN_SPACE, /* no decoder: Hugging Face joins the tokens with " " */
};
struct tok_dec_op {
    enum tok_dec_kind kind;
    char *a; /* Replace pattern; Strip content char; Metaspace replacement */
    size_t a_len;
    char *b; /* Replace content */
    size_t b_len;
    size_t start, stop;    /* Strip */
    bool metaspace_strips; /* Metaspace: prepend_scheme != never */
};

struct folio_tokenizer {
    struct tok_bpe bpe;
    int32_t n_ids; /* 1 + the largest id */
    char **id_str; /* the string each id decodes from; NULL for holes */
    uint32_t *id_len;
    uint8_t *id_special; /* skipped by skip_special */
    char **retired;      /* id strings replaced while the vocab's keys still point at them */
    size_t n_retired;

    struct tok_added *added;
    size_t n_added;
    struct tok_trie raw_trie, norm_trie; /* normalized=false / normalized=true tokens */

    struct tok_norm_op *norm;
    size_t n_norm;
    bool has_metaspace;
    struct tok_metaspace metaspace;
    struct tok_pre_op *pre; /* the other pre-tokenizers, in order; ByteLevel only last */
    size_t n_pre;
    /* GPT-2's map of bytes to printable characters (ByteLevel) and back:
     * byte_char[b] is a code point, char_byte[cp] a byte or -1. */
    uint16_t byte_char[256];
    int16_t char_byte[0x144];

    int32_t *prefix_ids, *suffix_ids; /* post-processor, for one sequence */
    size_t n_prefix, n_suffix;

    struct tok_dec_op *dec;
    size_t n_dec;

    char *chat_template, *bos_token, *eos_token;
    int32_t bos_id, eos_id;
};

/* ---- Unicode helpers (tokenizer_unicode.c) */
/* Decodes one code point of valid UTF-8 at s; returns its length. */
size_t tok_utf8_decode(const char *s, uint32_t *cp);
size_t tok_utf8_encode(uint32_t cp, char out[4]);
/* Length of the character that starts with byte b (valid UTF-8). */
static inline size_t tok_utf8_len(unsigned char b)
{
    return b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
}
/* Returns 0 when s is valid UTF-8. Otherwise a malloc'ed copy with each
 * maximal invalid subsequence replaced by U+FFFD (Rust's from_utf8_lossy,
 * Python's errors="replace") in *out, -1 on allocation failure. */
int tok_utf8_lossy(const char *s, size_t len, char **out, size_t *out_len);
bool tok_is_word_char(uint32_t cp);  /* Rust regex \w */
bool tok_is_whitespace(uint32_t cp); /* Rust regex \s: White_Space */

/* Length of the valid but unfinished UTF-8 sequence that ends b[0..n), 0-3:
 * bytes a streaming decoder must hold until the next ones arrive. */
size_t tok_utf8_unfinished_tail(const unsigned char *b, size_t n);

/* ---- one encode call's state (tokenizer_encode.c) */
struct tok_span {
    size_t start, stop;
    int32_t token; /* added tokens: index into t->added, -1 for text */
    bool match;    /* Split: the piece is a match of the pattern */
};
struct tok_span_vec {
    struct tok_span *v;
    size_t n, cap;
};
int tok_span_push(struct tok_span_vec *v, struct tok_span s);

struct tok_encoder {
    const struct folio_tokenizer *t;
    struct tok_bpe_scratch bpe;
    int32_t *ids;
    size_t n, cap;
    char *norm, *pre; /* normalized piece, pre-tokenized piece */
    size_t norm_cap, pre_cap;
    struct tok_span_vec words, next, found; /* Split pre-tokenizers' pieces */
    char *prefixed, *mapped;                /* ByteLevel: prefix space added, bytes mapped */
    size_t prefixed_cap, mapped_cap;
    pcre2_match_data *md;
};

/* ---- normalizers (tokenizer_normalize.c) */
int tok_normalizer_parse(struct folio_tokenizer *t, const void *json_normalizer, char *err,
                         size_t errlen);
/* Runs the normalizer over s[0..len) into *buf (*tmp is scratch); both
 * buffers grow as needed and stay the caller's. */
int tok_normalize(const struct folio_tokenizer *t, const char *s, size_t len, char **buf,
                  size_t *cap, char **tmp, size_t *tmp_cap, size_t *out_len);

/* ---- pre-tokenizers (tokenizer_pretok.c) */
int tok_pre_tokenizer_parse(struct folio_tokenizer *t, const void *json_pre_tokenizer, char *err,
                            size_t errlen);
/* Appends a Split on a regex (PCRE2 syntax as Hugging Face's Oniguruma reads
 * it) or, when literal, on a plain string. */
int tok_pre_add_split(struct folio_tokenizer *t, const char *pattern, size_t len, bool literal,
                      enum tok_split_behavior behavior, bool invert, char *err, size_t errlen);
int tok_pre_add_byte_level(struct folio_tokenizer *t, bool add_prefix_space, bool use_regex,
                           char *err, size_t errlen);
void tok_pre_free(struct folio_tokenizer *t);
/* Pre-tokenizes one normalized piece and appends the ids of its words. */
int tok_pretokenize_and_model(struct tok_encoder *e, const char *s, size_t len, bool at_origin);

/* ---- byte-level BPE (tokenizer_bytelevel.c) */
void tok_byte_level_init(struct folio_tokenizer *t);
/* Maps each byte of s to its printable character; out holds 2 * len bytes. */
size_t tok_byte_level_map(const struct folio_tokenizer *t, const char *s, size_t len, char *out);
/* The bytes a token's text stands for: each character mapped back, or the
 * text itself when a character is not in the map (as Hugging Face's ByteLevel
 * decoder does per token); out holds len bytes. */
size_t tok_byte_level_unmap(const struct folio_tokenizer *t, const char *s, size_t len, char *out);

/* ---- loading (tokenizer.c, tokenizer_gguf.c) */
/* A tokenizer from a parsed tokenizer.json (a jansson object). */
int tok_from_json(const void *json_root, struct folio_tokenizer **out, char *err, size_t errlen);
/* bos_id/eos_id from bos_token/eos_token, or BOS from the post-processor. */
void tok_set_special_ids(struct folio_tokenizer *t);
/* A tokenizer from a GGUF file's metadata (tokenizer.ggml.*). */
int tok_load_gguf(const char *path, struct folio_tokenizer **out, char *err, size_t errlen);

/* ---- decoding (tokenizer_decode.c) */
int tok_decoder_parse(struct folio_tokenizer *t, const void *json_decoder, char *err,
                      size_t errlen);

/* A ByteFallback token <0xXX> and its byte (tokenizer_decode.c): 1, or 0 for any other. */
int folio_tok_byte_token(const char *s, size_t len, unsigned char *byte);

#endif
