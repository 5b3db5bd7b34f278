/* grammar/ with the real SmolLM2 tokenizer (models/smollm2, byte-level BPE)
 * and the Llama-2 one (assets/, SentencePiece with byte fallback): each
 * id's bytes, the vocab's checks, compile errors that name the problem, a
 * pathological schema refused at once, masks and commits (a refused token,
 * EOS only where the grammar accepts, a finished grammar), special tokens
 * that no grammar text can spell, the mask applied to logits, and several
 * threads walking grammars from one cache as one thread does.
 * tests/test_grammar.py checks walks' texts against their schemas. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "grammar.h"
#include "sampler.h"
#include "tokenizer.h"

#define SMOLLM2 "models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"

static struct folio_tokenizer *tok;
static struct folio_grammar_vocab *vocab;
static struct folio_grammar_cache *cache;
static int32_t n_vocab, eos;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static bool allowed(const uint32_t *mask, int32_t id)
{
    if (id < 0) { /* a one_token that was not one token */
        CHECK(id >= 0);
        return false;
    }
    return mask[id >> 5] >> (id & 31) & 1u;
}

static int32_t count_allowed(const uint32_t *mask)
{
    int32_t n = 0;
    for (int32_t i = 0; i < n_vocab; i++)
        n += allowed(mask, i);
    return n;
}

/* The one id that encodes s, or -1. */
static int32_t one_token(const char *s)
{
    size_t n;
    int32_t *ids = folio_tokenizer_encode(tok, s, strlen(s), false, &n);
    int32_t id = ids && n == 1 ? ids[0] : -1;
    free(ids);
    return id;
}

/* What the first mask allows, a fresh matcher commits: the number of such
 * tokens, each checked. */
static int32_t first_mask_commits(struct folio_grammar_cache *c, int32_t vocab,
                                  enum folio_grammar_kind kind, const char *text)
{
    char err[512];
    struct folio_grammar_matcher *m;
    uint32_t *mask = calloc(((size_t)vocab + 31) / 32, sizeof *mask);
    int32_t n = 0;
    CHECK(folio_grammar_matcher_new(c, kind, text, strlen(text), &m, err, sizeof err) == 0);
    CHECK(folio_grammar_fill_mask(m, mask, ((size_t)vocab + 31) / 32, err, sizeof err) == 0);
    folio_grammar_matcher_free(m);
    for (int32_t id = 0; id < vocab; id++) {
        if (!(mask[id >> 5] >> (id & 31) & 1u))
            continue;
        n++;
        CHECK(folio_grammar_matcher_new(c, kind, text, strlen(text), &m, err, sizeof err) == 0);
        int rc = folio_grammar_commit(m, id, err, sizeof err);
        CHECK(rc == 0);
        if (rc)
            fprintf(stderr, "  %s %s: token %d allowed, commit: %s\n",
                    folio_grammar_kind_name(kind), text, (int)id, err);
        folio_grammar_matcher_free(m);
    }
    free(mask);
    return n;
}

/* Every token's bytes, joined, are the text (a character split across tokens
 * included), for the byte-level SmolLM2 and the SentencePiece Llama-2. */
static void check_token_bytes(const struct folio_tokenizer *t, const char *text, size_t skip)
{
    size_t n;
    int32_t *ids = folio_tokenizer_encode(t, text, strlen(text), false, &n);
    char joined[512] = "";
    size_t len = 0;
    for (size_t i = 0; ids && i < n; i++) {
        char *s;
        size_t sl;
        CHECK(folio_tokenizer_token_bytes(t, ids[i], &s, &sl) == 0);
        if (len + sl < sizeof joined) {
            memcpy(joined + len, s, sl);
            len += sl;
        }
        free(s);
    }
    /* skip: the leading space that the Llama-2 normalizer prepends. */
    CHECK(len == strlen(text) + skip && !memcmp(joined + skip, text, strlen(text)));
    free(ids);
}

static void test_token_bytes(void)
{
    check_token_bytes(tok, "{\"name\": \"Zoë\", \"emoji\": \"🦙🦙\", \"cjk\": \"漢字\"}", 0);
    check_token_bytes(tok, "  two spaces\n\ttab", 0);
    char *s = NULL;
    size_t len;
    /* 🦙 is F0 9F A6 99: byte-level tokens hold halves of it, which stay halves. */
    int32_t half = folio_tokenizer_token_id(tok, "ðŁ");
    CHECK(half >= 0 && folio_tokenizer_token_bytes(tok, half, &s, &len) == 0 && len == 2 &&
          !memcmp(s, "\xF0\x9F", 2));
    free(s);
    CHECK(folio_tokenizer_token_bytes(tok, eos, &s, &len) == 0 && !strcmp(s, "<|im_end|>"));
    free(s);
    CHECK(folio_tokenizer_token_bytes(tok, -1, &s, &len) == -1 && !s);
    CHECK(folio_tokenizer_token_bytes(tok, n_vocab, &s, &len) == -1);

    const char *dir = "assets/models/llama2-tokenizer"; /* ctest runs in the source folder */
    char err[512];
    struct folio_tokenizer *llama;
    if (folio_tokenizer_load(dir, &llama, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        CHECK(0);
        return;
    }
    check_token_bytes(llama, "Hello, world: Zoë 🦙 漢字", 1);
    CHECK(folio_tokenizer_token_bytes(llama, 15043, &s, &len) == 0 && !strcmp(s, " Hello"));
    free(s);
    int32_t byte_a = folio_tokenizer_token_id(llama, "<0x41>");
    CHECK(folio_tokenizer_token_bytes(llama, byte_a, &s, &len) == 0 && len == 1 && s[0] == 'A');
    free(s);
    int32_t byte_f0 = folio_tokenizer_token_id(llama, "<0xF0>");
    CHECK(folio_tokenizer_token_bytes(llama, byte_f0, &s, &len) == 0 && len == 1 &&
          (unsigned char)s[0] == 0xF0);
    free(s);

    /* A grammar vocab from the SentencePiece tokenizer works too. Its encoder
     * prepends "▁", so llguidance tokenizes forced text itself: the mask at a
     * forced "Hello" holds "Hello" and not "▁Hello" (" Hello"), and what the
     * mask allows, commit takes. */
    struct folio_grammar_vocab *v;
    int32_t llama_eos = folio_tokenizer_eos_id(llama);
    CHECK(folio_grammar_vocab_new(llama, 32000, &llama_eos, 1, &v, err, sizeof err) == 0);
    struct folio_grammar_cache *c = folio_grammar_cache_new(v, 4);
    struct folio_grammar_matcher *m;
    CHECK(folio_grammar_matcher_new(c, FOLIO_GRAMMAR_REGEX, "Hello", 5, &m, err, sizeof err) == 0);
    uint32_t mask[1000];
    CHECK(folio_grammar_fill_mask(m, mask, 1000, err, sizeof err) == 0);
    int32_t hello = folio_tokenizer_token_id(llama, "Hello");
    CHECK(hello >= 0 && allowed(mask, hello) && !allowed(mask, 15043) && !allowed(mask, llama_eos));
    CHECK(folio_grammar_commit(m, hello, err, sizeof err) == 0 && folio_grammar_is_accepting(m));
    CHECK(first_mask_commits(c, 32000, FOLIO_GRAMMAR_REGEX, "Hello") >= 2); /* "H", ..., "Hello" */
    folio_grammar_matcher_free(m);
    folio_grammar_cache_free(c);
    folio_grammar_vocab_free(v);
    folio_tokenizer_free(llama);
}

static void test_vocab_checks(void)
{
    char err[512] = "";
    struct folio_grammar_vocab *v = NULL;
    CHECK(folio_grammar_vocab_new(tok, n_vocab - 1, &eos, 1, &v, err, sizeof err) == -1 && !v &&
          strstr(err, "smaller than the tokenizer's"));
    int32_t bad = n_vocab + 5;
    CHECK(folio_grammar_vocab_new(tok, n_vocab, &bad, 1, &v, err, sizeof err) == -1 &&
          strstr(err, "outside the vocabulary"));
    CHECK(folio_grammar_vocab_new(tok, n_vocab, &eos, 0, &v, err, sizeof err) == -1 &&
          strstr(err, "no end-of-sequence id"));
    /* A model with more logits than tokens (a padded embedding): those ids are never allowed. */
    int32_t two[2] = {eos, 0};
    CHECK(folio_grammar_vocab_new(tok, n_vocab + 40, two, 2, &v, err, sizeof err) == 0);
    CHECK(folio_grammar_mask_words(v) == (size_t)(n_vocab + 40 + 31) / 32);
    struct folio_grammar_cache *c = folio_grammar_cache_new(v, 2);
    struct folio_grammar_matcher *m;
    uint32_t mask[2000];
    size_t words = folio_grammar_mask_words(v);
    CHECK(folio_grammar_matcher_new(c, FOLIO_GRAMMAR_REGEX, "[a-z]+", 6, &m, err, sizeof err) == 0);
    CHECK(folio_grammar_fill_mask(m, mask, words, err, sizeof err) == 0);
    for (int32_t i = n_vocab; i < n_vocab + 40; i++)
        CHECK(!allowed(mask, i));
    CHECK(folio_grammar_commit(m, one_token("abc"), err, sizeof err) == 0);
    CHECK(folio_grammar_fill_mask(m, mask, words, err, sizeof err) == 0);
    CHECK(allowed(mask, eos) && allowed(mask, 0)); /* both EOS ids */
    folio_grammar_matcher_free(m);
    folio_grammar_cache_free(c);
    folio_grammar_vocab_free(v);
}

static void test_kinds(void)
{
    enum folio_grammar_kind k;
    const char *names[] = {"json_object", "json_schema", "regex", "choice", "lark"};
    for (int i = 0; i < 5; i++)
        CHECK(folio_grammar_kind_parse(names[i], &k) == 0 && (int)k == i &&
              !strcmp(folio_grammar_kind_name(k), names[i]));
    CHECK(folio_grammar_kind_parse("ebnf", &k) == -1);
}

static void refused(enum folio_grammar_kind kind, const char *text, const char *want)
{
    char err[2048] = "";
    int rc = folio_grammar_compile(cache, kind, text, strlen(text), err, sizeof err);
    CHECK(rc == -1 && strstr(err, want));
    if (rc != -1 || !strstr(err, want))
        fprintf(stderr, "  %s %s: got \"%s\", want \"%s\"\n", folio_grammar_kind_name(kind), text,
                err, want);
}

static void test_compile_errors(void)
{
    refused(FOLIO_GRAMMAR_JSON_SCHEMA, "{\"type\": \"object\",", "invalid json_schema: ");
    refused(FOLIO_GRAMMAR_JSON_SCHEMA, "{\"type\": \"strin\"}", "strin");
    refused(FOLIO_GRAMMAR_JSON_SCHEMA, "{\"type\": \"string\", \"format\": \"credit-card\"}",
            "credit-card");
    refused(FOLIO_GRAMMAR_JSON_SCHEMA, "{\"$ref\": \"#/$defs/missing\"}", "missing");
    refused(FOLIO_GRAMMAR_JSON_SCHEMA, "{\"type\": \"integer\", \"minimum\": 5, \"maximum\": 1}",
            "invalid json_schema: ");
    refused(FOLIO_GRAMMAR_REGEX, "(abc", "unclosed group");
    refused(FOLIO_GRAMMAR_REGEX, "a{2,1}", "invalid regex: ");
    refused(FOLIO_GRAMMAR_LARK, "start: foo", "unknown name: \"foo\"");
    refused(FOLIO_GRAMMAR_LARK, "start: \"a\" (", "invalid lark: ");
    refused(FOLIO_GRAMMAR_LARK, "rule: \"a\"", "start");
    refused(FOLIO_GRAMMAR_CHOICE, "[]", "invalid choice: not a non-empty JSON array of strings");
    refused(FOLIO_GRAMMAR_CHOICE, "[\"a\", 2]", "invalid choice: item 1 is not a string");
    refused(FOLIO_GRAMMAR_CHOICE, "[\"a\"", "invalid choice: ");
    char nul[] = "abc\0def";
    char err[512] = "";
    CHECK(folio_grammar_compile(cache, FOLIO_GRAMMAR_REGEX, nul, 7, err, sizeof err) == -1 &&
          strstr(err, "NUL byte"));
    /* The message is the grammar's problem only: no backtrace, no marker. */
    refused(FOLIO_GRAMMAR_REGEX, "(abc", "invalid regex: ");
    CHECK(!strstr(err, "<non-verbose/>") && !strstr(err, "backtrace"));
}

/* llguidance builds an array grammar item by item: without the precheck,
 * maxItems 10^9 compiles for minutes. Refused at once, and again from the
 * cache; the limit itself compiles. */
static void test_pathological(void)
{
    char err[512];
    const char *huge[] = {
        "{\"type\": \"array\", \"items\": {\"type\": \"integer\"}, \"maxItems\": 1000000000}",
        "{\"properties\": {\"a\": {\"type\": \"array\", \"minItems\": 1e12}}}",
        "{\"type\": \"array\", \"minItems\": 99999999999999999999999}",
    };
    for (int i = 0; i < 3; i++) {
        double t0 = now();
        int rc = folio_grammar_compile(cache, FOLIO_GRAMMAR_JSON_SCHEMA, huge[i], strlen(huge[i]),
                                       err, sizeof err);
        double dt = now() - t0;
        CHECK(rc == -1 && strstr(err, "over the limit of 10000") && dt < 1.0);
        if (dt >= 1.0)
            fprintf(stderr, "  pathological schema %d: %.2f s\n", i, dt);
    }
    const char *lark = "start: \"x\" %json {\"type\": \"array\", \"maxItems\": 1000000000}";
    refused(FOLIO_GRAMMAR_LARK, lark, "maxItems 1e+09 is over the limit of 10000");
    const char *ok =
        "{\"type\": \"array\", \"items\": {\"type\": \"integer\"}, \"maxItems\": 10000}";
    CHECK(folio_grammar_compile(cache, FOLIO_GRAMMAR_JSON_SCHEMA, ok, strlen(ok), err,
                                sizeof err) == 0);
    /* Past llguidance's own limits: refused by them, with a message. */
    char *deep = malloc(20000);
    size_t n = 0;
    for (int i = 0; i < 300; i++)
        n += (size_t)sprintf(deep + n, "{\"type\":\"array\",\"items\":");
    n += (size_t)sprintf(deep + n, "{\"type\":\"integer\"}");
    for (int i = 0; i < 300; i++)
        deep[n++] = '}';
    deep[n] = 0;
    refused(FOLIO_GRAMMAR_JSON_SCHEMA, deep, "recursion limit exceeded");
    free(deep);
}

/* Walks ids through m, checking each is allowed first; 0 or -1. */
static int commit_all(struct folio_grammar_matcher *m, const int32_t *ids, size_t n)
{
    uint32_t *mask = malloc(folio_grammar_mask_words(vocab) * sizeof *mask);
    char err[512];
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        rc = folio_grammar_fill_mask(m, mask, folio_grammar_mask_words(vocab), err, sizeof err);
        rc = rc || !allowed(mask, ids[i]) || folio_grammar_commit(m, ids[i], err, sizeof err);
    }
    free(mask);
    return rc ? -1 : 0;
}

static void test_masks_and_commits(void)
{
    size_t words = folio_grammar_mask_words(vocab);
    uint32_t *mask = malloc(words * sizeof *mask);
    char err[1024];
    struct folio_grammar_matcher *m;
    const char *re = "ab(c|d)e";
    CHECK(folio_grammar_matcher_new(cache, FOLIO_GRAMMAR_REGEX, re, strlen(re), &m, err,
                                    sizeof err) == 0);
    CHECK(folio_grammar_fill_mask(m, mask, words, err, sizeof err) == 0);
    int32_t a = one_token("a"), ab = one_token("ab"), b = one_token("b");
    CHECK(a >= 0 && ab >= 0 && b >= 0);
    CHECK(allowed(mask, a) && allowed(mask, ab) && !allowed(mask, b) && !allowed(mask, eos));
    CHECK(!folio_grammar_is_accepting(m) && !folio_grammar_is_finished(m));
    /* Forced text (a literal, a choice): every allowed token commits. With a
     * tokenizer that spells exactly, llguidance allows only the canonical
     * tokenization of text the grammar forces ("Hello" of "Hello, world"). */
    CHECK(first_mask_commits(cache, n_vocab, FOLIO_GRAMMAR_REGEX, "Hello, world") == 1);
    CHECK(first_mask_commits(cache, n_vocab, FOLIO_GRAMMAR_CHOICE, "[\"yes\", \"yesterday\"]") >=
          2);
    CHECK(first_mask_commits(cache, n_vocab, FOLIO_GRAMMAR_JSON_SCHEMA,
                             "{\"const\": {\"status\": \"ok\"}}") >= 1);
    /* The wrong size of mask is an error, not a write past its end. */
    CHECK(folio_grammar_fill_mask(m, mask, words - 1, err, sizeof err) == -1 &&
          strstr(err, "words"));
    CHECK(folio_grammar_commit(m, -3, err, sizeof err) == -1 && strstr(err, "outside"));
    CHECK(folio_grammar_commit(m, ab, err, sizeof err) == 0);
    CHECK(folio_grammar_fill_mask(m, mask, words, err, sizeof err) == 0);
    int32_t c = one_token("c"), d = one_token("d"), ce = one_token("ce");
    CHECK(allowed(mask, c) && allowed(mask, d) && !allowed(mask, a) && !allowed(mask, eos));
    if (ce >= 0)
        CHECK(allowed(mask, ce));
    /* A refused token: an error naming it, and the matcher is done. */
    CHECK(folio_grammar_commit(m, a, err, sizeof err) == -1 && strstr(err, "grammar: commit"));
    CHECK(folio_grammar_fill_mask(m, mask, words, err, sizeof err) == -1);
    CHECK(folio_grammar_is_finished(m));
    folio_grammar_matcher_free(m);

    /* Accepting: EOS joins the mask exactly then; after EOS the matcher is finished. */
    CHECK(folio_grammar_matcher_new(cache, FOLIO_GRAMMAR_REGEX, "[0-9]+", 6, &m, err, sizeof err) ==
          0);
    CHECK(folio_grammar_fill_mask(m, mask, words, err, sizeof err) == 0 && !allowed(mask, eos));
    int32_t seven = one_token("7");
    CHECK(folio_grammar_commit(m, seven, err, sizeof err) == 0 && folio_grammar_is_accepting(m));
    CHECK(folio_grammar_fill_mask(m, mask, words, err, sizeof err) == 0 && allowed(mask, eos) &&
          allowed(mask, seven) && !folio_grammar_is_finished(m));
    CHECK(folio_grammar_commit(m, eos, err, sizeof err) == 0 && folio_grammar_is_finished(m));
    CHECK(folio_grammar_fill_mask(m, mask, words, err, sizeof err) == 0 && allowed(mask, eos) &&
          count_allowed(mask) == 1);
    folio_grammar_matcher_free(m);

    /* A complete choice cannot grow: finished, only EOS in the mask. */
    const char *ch = "[\"yes\", \"no\", \"maybe so\"]";
    CHECK(folio_grammar_matcher_new(cache, FOLIO_GRAMMAR_CHOICE, ch, strlen(ch), &m, err,
                                    sizeof err) == 0);
    CHECK(folio_grammar_fill_mask(m, mask, words, err, sizeof err) == 0);
    int32_t yes = one_token("yes");
    CHECK(allowed(mask, yes) && !allowed(mask, one_token("x")) && !allowed(mask, eos));
    CHECK(folio_grammar_commit(m, yes, err, sizeof err) == 0);
    CHECK(folio_grammar_is_accepting(m) && folio_grammar_is_finished(m));
    CHECK(folio_grammar_fill_mask(m, mask, words, err, sizeof err) == 0 && allowed(mask, eos) &&
          count_allowed(mask) == 1);
    folio_grammar_matcher_free(m);

    /* json_object: "{" first, never EOS before the object closes. */
    CHECK(folio_grammar_matcher_new(cache, FOLIO_GRAMMAR_JSON_OBJECT, "", 0, &m, err, sizeof err) ==
          0);
    CHECK(folio_grammar_fill_mask(m, mask, words, err, sizeof err) == 0);
    CHECK(allowed(mask, one_token("{")) && !allowed(mask, one_token("[")) && !allowed(mask, eos));
    size_t n;
    int32_t *ids = folio_tokenizer_encode(tok, "{\"a\": [1, 2]}", 13, false, &n);
    CHECK(commit_all(m, ids, n) == 0 && folio_grammar_is_accepting(m));
    free(ids);
    folio_grammar_matcher_free(m);
    free(mask);
}

/* A special token is not its text: the grammar's literal "<|im_end|>" is
 * spelled with ordinary tokens, and the special id is never allowed by it. */
static void test_special_tokens(void)
{
    size_t words = folio_grammar_mask_words(vocab);
    uint32_t *mask = malloc(words * sizeof *mask);
    char err[512];
    struct folio_grammar_matcher *m;
    const char *g = "start: \"<|im_end|>\" | \"<|im_start|>\"";
    CHECK(folio_grammar_matcher_new(cache, FOLIO_GRAMMAR_LARK, g, strlen(g), &m, err, sizeof err) ==
          0);
    CHECK(folio_grammar_fill_mask(m, mask, words, err, sizeof err) == 0);
    int32_t special = folio_tokenizer_token_id(tok, "<|im_start|>");
    CHECK(special >= 0 && folio_tokenizer_is_special(tok, special));
    CHECK(!allowed(mask, special) && !allowed(mask, eos) && allowed(mask, one_token("<")));
    CHECK(folio_grammar_commit(m, special, err, sizeof err) == -1);
    folio_grammar_matcher_free(m);
    free(mask);
}

/* The mask on logits, then the CPU sampler: only allowed ids come out, even
 * where the best logit is refused. */
static void test_apply_mask(void)
{
    size_t words = folio_grammar_mask_words(vocab);
    uint32_t *mask = malloc(words * sizeof *mask);
    float *logits = malloc((size_t)n_vocab * sizeof *logits);
    char err[512];
    struct folio_grammar_matcher *m;
    CHECK(folio_grammar_matcher_new(cache, FOLIO_GRAMMAR_REGEX, "(true|false)", 12, &m, err,
                                    sizeof err) == 0);
    CHECK(folio_grammar_fill_mask(m, mask, words, err, sizeof err) == 0);
    struct folio_sampler *s = folio_sampler_new(n_vocab);
    for (uint64_t seed = 0; seed < 20; seed++) {
        for (int32_t i = 0; i < n_vocab; i++)
            logits[i] = (float)((i * 2654435761u + seed * 40503u) % 1000) / 100.0f;
        logits[one_token("maybe")] = 50; /* the favourite, refused */
        folio_logits_apply_mask(logits, n_vocab, mask);
        struct folio_sampling_params p = {.temperature = seed % 2 ? 1.0f : 0.0f,
                                          .top_p = 1,
                                          .repetition_penalty = 1,
                                          .seed = seed};
        struct folio_sample_result r;
        CHECK(folio_sample(s, logits, &p, 0, NULL, &r, err, sizeof err) == 0);
        CHECK(allowed(mask, r.token));
    }
    int32_t kept = 0;
    for (int32_t i = 0; i < n_vocab; i++)
        kept += logits[i] > -1e30f;
    CHECK(kept == count_allowed(mask) && kept > 0);
    folio_sampler_free(s);
    folio_grammar_matcher_free(m);
    free(mask);
    free(logits);
}

/* ---- threads: the same walks from several threads sharing one cache */

static const char *const walk_grammars[][2] = {
    {"json_schema", "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"},"
                    "\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"b\"]},"
                    "\"maxItems\":3}},\"required\":[\"id\",\"tags\"],"
                    "\"additionalProperties\":false}"},
    {"regex", "[a-f0-9]{8}-[a-f0-9]{4}"},
    {"choice", "[\"red\", \"green\", \"blue\"]"},
    {"lark",
     "start: expr\nexpr: NUMBER | expr \"+\" expr | \"(\" expr \")\"\nNUMBER: /[0-9]{1,3}/"},
    {"json_object", ""},
};
#define N_GRAMMARS 5
#define N_WALKS 6
#define WALK_STEPS 40

/* A deterministic walk: at each step the k-th allowed token, k from an LCG.
 * Its trace is the ids, folded into a hash. */
static uint64_t walk_trace(int g, int w)
{
    enum folio_grammar_kind kind;
    folio_grammar_kind_parse(walk_grammars[g][0], &kind);
    const char *text = walk_grammars[g][1];
    struct folio_grammar_matcher *m;
    char err[512];
    if (folio_grammar_matcher_new(cache, kind, text, strlen(text), &m, err, sizeof err))
        return 1;
    size_t words = folio_grammar_mask_words(vocab);
    uint32_t *mask = malloc(words * sizeof *mask);
    uint64_t rng = (uint64_t)(g * 977 + w * 131 + 7), h = 1469598103934665603ull;
    for (int step = 0; step < WALK_STEPS && !folio_grammar_is_finished(m); step++) {
        if (folio_grammar_fill_mask(m, mask, words, err, sizeof err)) {
            h = 2;
            break;
        }
        int32_t n = count_allowed(mask), pick = -1;
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        int32_t k = (int32_t)((rng >> 33) % (uint64_t)n);
        for (int32_t i = 0; i < n_vocab && pick < 0; i++)
            if (allowed(mask, i) && k-- == 0)
                pick = i;
        if (folio_grammar_commit(m, pick, err, sizeof err)) {
            h = 3;
            break;
        }
        h = (h ^ (uint64_t)pick) * 1099511628211ull;
    }
    free(mask);
    folio_grammar_matcher_free(m);
    return h;
}

static uint64_t serial[N_GRAMMARS][N_WALKS];
static int thread_mismatches;
static pthread_mutex_t mismatch_lock = PTHREAD_MUTEX_INITIALIZER;

static void *walker(void *arg)
{
    int t = (int)(intptr_t)arg, bad = 0;
    /* Each thread in its own order, so that different grammars run at once. */
    for (int j = 0; j < N_GRAMMARS * N_WALKS; j++) {
        int idx = (j * 7 + t * 11) % (N_GRAMMARS * N_WALKS);
        int g = idx / N_WALKS, w = idx % N_WALKS;
        bad += walk_trace(g, w) != serial[g][w];
    }
    pthread_mutex_lock(&mismatch_lock);
    thread_mismatches += bad;
    pthread_mutex_unlock(&mismatch_lock);
    return NULL;
}

static void test_threads(void)
{
    for (int g = 0; g < N_GRAMMARS; g++)
        for (int w = 0; w < N_WALKS; w++) {
            serial[g][w] = walk_trace(g, w);
            CHECK(serial[g][w] > 3);
        }
    /* A fresh cache: the threads race to compile too. */
    folio_grammar_cache_free(cache);
    cache = folio_grammar_cache_new(vocab, 3); /* smaller than the grammars: evictions too */
    pthread_t th[4];
    for (int t = 0; t < 4; t++)
        pthread_create(&th[t], NULL, walker, (void *)(intptr_t)t);
    for (int t = 0; t < 4; t++)
        pthread_join(th[t], NULL);
    CHECK(thread_mismatches == 0);
}

/* A schema compiles once: looking it up again costs far less than compiling. */
static void test_cache(void)
{
    char *schema = malloc(200000);
    size_t n = (size_t)sprintf(schema, "{\"type\":\"object\",\"properties\":{");
    for (int i = 0; i < 2000; i++)
        n += (size_t)sprintf(schema + n, "%s\"field_%d\":{\"type\":\"string\",\"maxLength\":%d}",
                             i ? "," : "", i, 5 + i % 20);
    sprintf(schema + n, "}}");
    char err[512];
    double t0 = now();
    CHECK(folio_grammar_compile(cache, FOLIO_GRAMMAR_JSON_SCHEMA, schema, strlen(schema), err,
                                sizeof err) == 0);
    double first = now() - t0;
    t0 = now();
    for (int i = 0; i < 10; i++)
        CHECK(folio_grammar_compile(cache, FOLIO_GRAMMAR_JSON_SCHEMA, schema, strlen(schema), err,
                                    sizeof err) == 0);
    double again = (now() - t0) / 10;
    CHECK(again < first / 5);
    printf("cache: first compile %.1f ms, again %.2f ms\n", first * 1e3, again * 1e3);
    free(schema);
}

int main(void)
{
    char err[512];
    if (folio_tokenizer_load(SMOLLM2, &tok, err, sizeof err)) {
        fprintf(stderr, "%s (deploy/fetch_smollm2.sh fetches it)\n", err);
        return 1;
    }
    n_vocab = folio_tokenizer_vocab_size(tok);
    eos = folio_tokenizer_eos_id(tok);
    double t0 = now();
    if (folio_grammar_vocab_new(tok, n_vocab, &eos, 1, &vocab, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    printf("vocab of %d ids built in %.0f ms\n", (int)n_vocab, (now() - t0) * 1e3);
    cache = folio_grammar_cache_new(vocab, 16);
    test_token_bytes();
    test_vocab_checks();
    test_kinds();
    test_compile_errors();
    test_pathological();
    test_masks_and_commits();
    test_special_tokens();
    test_apply_mask();
    test_threads();
    test_cache();
    folio_grammar_cache_free(cache);
    folio_grammar_vocab_free(vocab);
    folio_tokenizer_free(tok);
    return check_report();
}
