/* grammar_walk: random token walks through grammars, for tests/test_grammar.py.
 *
 *   grammar_walk MODEL [--threads N] < requests.jsonl > results.jsonl
 *
 * MODEL is a tokenizer.json folder or a GGUF file (Folio's text/ reads it).
 * Each input line is {"kind": "json_schema"|..., "text": "...", "walks": N,
 * "seed": S, "max_tokens": M}; each output line, in the same order, is
 * {"error": "..."} when the grammar is refused, else {"walks": [{"text": ...,
 * "finished": bool, "tokens": n, "mask_us": time filling masks}, ...]}, or {"error": ...,
 * "walk_error": ...} when a mask or a commit fails mid-walk (which a test counts as a failure).
 *
 * A walk is what the worker will do, on the CPU: fill the grammar's mask, set
 * logits so the draw is a mixture of uniform choices among the allowed
 * tokens (all of them; the one-byte ones; those made only of JSON's
 * structural bytes "{}[],: so that strings and arrays close), apply the mask
 * with folio_logits_apply_mask, sample with folio_sample, commit. When an
 * EOS is allowed it gets half the mass, so walks end. A walk finishes at an
 * EOS or when the grammar says nothing can follow; it gives up at max_tokens.
 * Lines are spread over --threads threads sharing one vocab and one cache. */
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grammar.h"
#include "sampler.h"
#include "tokenizer.h"

enum { CLASS_BYTE = 1, CLASS_STRUCT = 2 };

static const struct folio_tokenizer *g_tok;
static struct folio_grammar_vocab *g_vocab;
static struct folio_grammar_cache *g_cache;
static int32_t g_n;      /* vocabulary size */
static uint8_t *g_class; /* CLASS_* bits per id */
static uint8_t *g_eos;   /* 1 for an end-of-sequence id */
static char **g_lines;   /* input */
static char **g_out;     /* output, per line */
static size_t g_n_lines, g_next;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

static void classify(void)
{
    g_class = calloc((size_t)g_n, 1);
    g_eos = calloc((size_t)g_n, 1);
    for (int32_t id = 0; id < g_n; id++) {
        char *s;
        size_t len;
        if (folio_tokenizer_is_special(g_tok, id) ||
            folio_tokenizer_token_bytes(g_tok, id, &s, &len))
            continue;
        bool structural = len > 0;
        for (size_t i = 0; i < len; i++)
            structural = structural && strchr("\"{}[],:", s[i]) && s[i];
        g_class[id] = (uint8_t)((len == 1 ? CLASS_BYTE : 0) | (structural ? CLASS_STRUCT : 0));
        free(s);
    }
    g_eos[folio_tokenizer_eos_id(g_tok)] = 1;
}

/* One walk; appends its result to walks. Returns 0, or -1 with err set. */
static int walk(enum folio_grammar_kind kind, const char *text, uint64_t seed, int max_tokens,
                struct folio_sampler *sampler, json_t *walks, char *err, size_t errlen)
{
    size_t words = folio_grammar_mask_words(g_vocab);
    uint32_t *mask = malloc(words * sizeof *mask);
    float *logits = malloc((size_t)g_n * sizeof *logits);
    int32_t *ids = malloc((size_t)(max_tokens + 1) * sizeof *ids);
    struct folio_grammar_matcher *m = NULL;
    int rc = -1, n = 0;
    bool finished = false;
    double mask_us = 0; /* time in folio_grammar_fill_mask */
    if (!mask || !logits || !ids) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    if (folio_grammar_matcher_new(g_cache, kind, text, strlen(text), &m, err, errlen))
        goto out;
    struct folio_sampling_params p = {
        .temperature = 1, .top_p = 1, .repetition_penalty = 1, .seed = seed};
    for (int step = 0; step < max_tokens; step++) {
        if (folio_grammar_is_finished(m)) {
            finished = true;
            break;
        }
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        if (folio_grammar_fill_mask(m, mask, words, err, errlen))
            goto out;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        mask_us += (double)(t1.tv_sec - t0.tv_sec) * 1e6 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e3;
        size_t n_all = 0, n_byte = 0, n_struct = 0;
        bool eos_ok = false;
        for (int32_t i = 0; i < g_n; i++)
            if (mask[i >> 5] >> (i & 31) & 1u) {
                n_all++;
                n_byte += (g_class[i] & CLASS_BYTE) != 0;
                n_struct += (g_class[i] & CLASS_STRUCT) != 0;
                eos_ok = eos_ok || g_eos[i];
            }
        if (!n_all) {
            snprintf(err, errlen, "the mask allows no token at step %d", step);
            goto out;
        }
        /* Half the mass to EOS when allowed; the rest shared by the non-empty classes. */
        double rest = eos_ok ? 0.5 : 1.0;
        int classes = 1 + (n_byte > 0) + (n_struct > 0);
        double w_all = rest / classes / (double)n_all;
        double w_byte = n_byte ? rest / classes / (double)n_byte : 0;
        double w_struct = n_struct ? rest / classes / (double)n_struct : 0;
        /* A logit per class combination (refused ids get -inf below). */
        float by_class[4];
        for (int c = 0; c < 4; c++)
            by_class[c] = (float)log(w_all + ((c & CLASS_BYTE) ? w_byte : 0) +
                                     ((c & CLASS_STRUCT) ? w_struct : 0));
        for (int32_t i = 0; i < g_n; i++)
            logits[i] = g_eos[i] ? (float)log(w_all + 0.5) : by_class[g_class[i]];
        folio_logits_apply_mask(logits, g_n, mask);
        struct folio_sample_result r;
        if (folio_sample(sampler, logits, &p, (uint32_t)step, NULL, &r, err, errlen))
            goto out;
        if (!(mask[r.token >> 5] >> (r.token & 31) & 1u)) {
            snprintf(err, errlen, "sampled token %d, which the mask refuses", (int)r.token);
            goto out;
        }
        if (folio_grammar_commit(m, r.token, err, errlen))
            goto out;
        if (g_eos[r.token]) {
            finished = true;
            break;
        }
        ids[n++] = r.token;
    }
    finished = finished || folio_grammar_is_finished(m);
    size_t len;
    char *out = folio_tokenizer_decode(g_tok, ids, (size_t)n, true, &len);
    if (!out) {
        snprintf(err, errlen, "decode failed");
        goto out;
    }
    json_array_append_new(walks, json_pack("{s:s%,s:b,s:i,s:f}", "text", out, len, "finished",
                                           finished, "tokens", n, "mask_us", mask_us));
    free(out);
    rc = 0;
out:
    folio_grammar_matcher_free(m);
    free(mask);
    free(logits);
    free(ids);
    return rc;
}

static char *run_line(const char *line, struct folio_sampler *sampler)
{
    char err[2048] = "";
    json_error_t jerr;
    json_t *req = json_loads(line, 0, &jerr), *res = json_object();
    const char *kind_name = json_string_value(json_object_get(req, "kind"));
    const char *text = json_string_value(json_object_get(req, "text"));
    json_int_t n_walks = json_integer_value(json_object_get(req, "walks"));
    json_int_t seed = json_integer_value(json_object_get(req, "seed"));
    json_int_t max_tokens = json_integer_value(json_object_get(req, "max_tokens"));
    enum folio_grammar_kind kind;
    if (!req || !kind_name || !text || folio_grammar_kind_parse(kind_name, &kind) ||
        max_tokens <= 0) {
        json_object_set_new(res, "walk_error", json_string("bad request line"));
    } else if (folio_grammar_compile(g_cache, kind, text, strlen(text), err, sizeof err)) {
        json_object_set_new(res, "error", json_string(err));
    } else {
        json_t *walks = json_array();
        json_object_set_new(res, "walks", walks);
        for (json_int_t w = 0; w < n_walks; w++)
            if (walk(kind, text, (uint64_t)(seed * 1000003 + w), (int)max_tokens, sampler, walks,
                     err, sizeof err)) {
                json_object_set_new(res, "walk_error", json_string(err));
                break;
            }
    }
    char *s = json_dumps(res, JSON_COMPACT);
    json_decref(req);
    json_decref(res);
    return s;
}

static void *worker(void *arg)
{
    (void)arg;
    struct folio_sampler *sampler = folio_sampler_new(g_n);
    for (;;) {
        pthread_mutex_lock(&g_lock);
        size_t i = g_next++;
        pthread_mutex_unlock(&g_lock);
        if (i >= g_n_lines)
            break;
        g_out[i] = run_line(g_lines[i], sampler);
    }
    folio_sampler_free(sampler);
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = 1;
    if (argc == 4 && !strcmp(argv[2], "--threads"))
        threads = atoi(argv[3]);
    if ((argc != 2 && argc != 4) || threads < 1 || threads > 64) {
        fprintf(stderr, "usage: grammar_walk MODEL [--threads N] < requests.jsonl\n");
        return 2;
    }
    char err[1024];
    struct folio_tokenizer *tok;
    if (folio_tokenizer_load(argv[1], &tok, err, sizeof err)) {
        fprintf(stderr, "grammar_walk: %s\n", err);
        return 1;
    }
    g_tok = tok;
    g_n = folio_tokenizer_vocab_size(tok);
    int32_t eos = folio_tokenizer_eos_id(tok);
    if (folio_grammar_vocab_new(tok, g_n, &eos, 1, &g_vocab, err, sizeof err)) {
        fprintf(stderr, "grammar_walk: %s\n", err);
        return 1;
    }
    g_cache = folio_grammar_cache_new(g_vocab, 64);
    classify();

    size_t cap = 0;
    char *line = NULL;
    size_t line_cap = 0;
    while (getline(&line, &line_cap, stdin) > 0) {
        if (g_n_lines == cap) {
            cap = cap ? 2 * cap : 64;
            g_lines = realloc(g_lines, cap * sizeof *g_lines);
        }
        g_lines[g_n_lines++] = strdup(line);
    }
    free(line);
    g_out = calloc(g_n_lines + 1, sizeof *g_out);
    pthread_t th[64];
    for (int t = 0; t < threads; t++)
        pthread_create(&th[t], NULL, worker, NULL);
    for (int t = 0; t < threads; t++)
        pthread_join(th[t], NULL);
    for (size_t i = 0; i < g_n_lines; i++) {
        printf("%s\n", g_out[i]);
        free(g_out[i]);
        free(g_lines[i]);
    }
    free(g_out);
    free(g_lines);
    free(g_class);
    free(g_eos);
    folio_grammar_cache_free(g_cache);
    folio_grammar_vocab_free(g_vocab);
    folio_tokenizer_free(tok);
    return 0;
}
