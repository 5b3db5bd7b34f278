/* grammar_bench: what a new structured-output grammar costs before its first
 * token, on the host, as the request path pays it: the frontend's compile (a
 * cache miss, how it validates), the worker's own compile (another process,
 * another cache) and the first mask; then a mask a token as a stream goes on.
 *
 *   grammar_bench MODEL [--rounds N] < requests.jsonl
 *
 * MODEL is a tokenizer.json folder or a GGUF file. Each input line is
 * {"kind": "json_schema"|"regex"|"choice"|"lark"|"json_object", "text": "..."}
 * (tests/fixtures/grammar_schemas.py's suite is what bench/structured_output_bench.py
 * and the tests use). Each grammar is compiled in a fresh cache every round,
 * so every compile is a miss. Prints p50, p99 and max in microseconds of:
 * compile, first mask, the first token's overhead (2 compiles + first mask),
 * and masks after committing a token the grammar allows (16 per grammar). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grammar.h"
#include "tokenizer.h"

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void row(const char *name, double *v, size_t n)
{
    if (!n) {
        printf("%-34s %10s\n", name, "-");
        return;
    }
    qsort(v, n, sizeof *v, cmp_double);
    size_t p99 = (size_t)((double)(n - 1) * 0.99 + 0.5);
    printf("%-34s %10.1f %10.1f %10.1f %8zu\n", name, v[(n - 1) / 2], v[p99], v[n - 1], n);
}

/* The lowest allowed id that is not an EOS, or -1 where only EOS (or nothing) is left. */
static int32_t first_allowed(const uint32_t *mask, size_t words, const uint8_t *eos, int32_t n)
{
    for (size_t w = 0; w < words; w++)
        for (uint32_t bits = mask[w]; bits; bits &= bits - 1) {
            int32_t id = (int32_t)(w * 32 + (size_t)__builtin_ctz(bits));
            if (id < n && !eos[id])
                return id;
        }
    return -1;
}

int main(int argc, char **argv)
{
    int rounds = 5;
    if (argc == 4 && !strcmp(argv[2], "--rounds"))
        rounds = atoi(argv[3]);
    if ((argc != 2 && argc != 4) || rounds < 1) {
        fprintf(stderr, "usage: grammar_bench MODEL [--rounds N] < requests.jsonl\n");
        return 2;
    }
    char err[1024];
    struct folio_tokenizer *tok;
    if (folio_tokenizer_load(argv[1], &tok, err, sizeof err)) {
        fprintf(stderr, "grammar_bench: %s\n", err);
        return 1;
    }
    int32_t n = folio_tokenizer_vocab_size(tok), eos_id = folio_tokenizer_eos_id(tok);
    double t0 = now_us();
    struct folio_grammar_vocab *vocab;
    if (folio_grammar_vocab_new(tok, n, &eos_id, 1, &vocab, err, sizeof err)) {
        fprintf(stderr, "grammar_bench: %s\n", err);
        return 1;
    }
    double vocab_us = now_us() - t0;
    uint8_t *eos = calloc((size_t)n, 1);
    eos[eos_id] = 1;

    size_t cap = 0, count = 0;
    enum folio_grammar_kind *kinds = NULL;
    char **texts = NULL;
    char *line = NULL;
    size_t line_cap = 0;
    while (getline(&line, &line_cap, stdin) > 0) {
        json_error_t jerr;
        json_t *o = json_loads(line, 0, &jerr);
        const char *k = json_string_value(json_object_get(o, "kind"));
        const char *text = json_string_value(json_object_get(o, "text"));
        enum folio_grammar_kind kind;
        if (!k || folio_grammar_kind_parse(k, &kind)) {
            fprintf(stderr, "grammar_bench: line %zu: no known \"kind\"\n", count + 1);
            return 1;
        }
        if (count == cap) {
            cap = cap ? 2 * cap : 64;
            kinds = realloc(kinds, cap * sizeof *kinds);
            texts = realloc(texts, cap * sizeof *texts);
        }
        kinds[count] = kind;
        texts[count++] = strdup(text ? text : "");
        json_decref(o);
    }
    free(line);

    size_t words = folio_grammar_mask_words(vocab), total = count * (size_t)rounds;
    uint32_t *mask = malloc(words * sizeof *mask);
    double *compile = calloc(total * 2, sizeof *compile), *first = calloc(total, sizeof *first),
           *overhead = calloc(total, sizeof *overhead), *later = calloc(total * 16, sizeof *later);
    size_t nc = 0, nf = 0, nl = 0;
    for (int r = 0; r < rounds; r++)
        for (size_t i = 0; i < count; i++) {
            double c[2];
            struct folio_grammar_matcher *m = NULL;
            for (int side = 0; side < 2; side++) { /* the frontend's, then the worker's */
                struct folio_grammar_cache *cache = folio_grammar_cache_new(vocab, 4);
                size_t len = strlen(texts[i]);
                double a = now_us();
                int rc = side == 0 ? folio_grammar_compile(cache, kinds[i], texts[i], len, err,
                                                           sizeof err)
                                   : folio_grammar_matcher_new(cache, kinds[i], texts[i], len, &m,
                                                               err, sizeof err);
                c[side] = now_us() - a;
                folio_grammar_cache_free(cache); /* the matcher holds its own reference */
                if (rc) {
                    fprintf(stderr, "grammar_bench: grammar %zu: %s\n", i + 1, err);
                    return 1;
                }
                compile[nc++] = c[side];
            }
            double a = now_us();
            if (folio_grammar_fill_mask(m, mask, words, err, sizeof err)) {
                fprintf(stderr, "grammar_bench: grammar %zu: %s\n", i + 1, err);
                return 1;
            }
            first[nf++] = now_us() - a;
            overhead[i + count * (size_t)r] = c[0] + c[1] + first[nf - 1];
            for (int t = 0; t < 16; t++) {
                int32_t id = first_allowed(mask, words, eos, n);
                if (id < 0 || folio_grammar_commit(m, id, err, sizeof err))
                    break;
                a = now_us();
                if (folio_grammar_fill_mask(m, mask, words, err, sizeof err))
                    break;
                later[nl++] = now_us() - a;
            }
            folio_grammar_matcher_free(m);
        }
    printf("grammars %zu, rounds %d, vocab %d ids (built once in %.1f ms)\n", count, rounds, n,
           vocab_us / 1e3);
    printf("%-34s %10s %10s %10s %8s\n", "us", "p50", "p99", "max", "n");
    row("compile (cache miss)", compile, nc);
    row("first mask", first, nf);
    row("new grammar's first-token overhead", overhead, total);
    row("mask a token after", later, nl);
    for (size_t i = 0; i < count; i++)
        free(texts[i]);
    free(texts);
    free(kinds);
    free(compile);
    free(first);
    free(overhead);
    free(later);
    free(mask);
    free(eos);
    folio_grammar_vocab_free(vocab);
    folio_tokenizer_free(tok);
    return 0;
}
