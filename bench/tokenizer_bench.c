/* Encode throughput of the tokenizer on the ShareGPT first-turn prompts, one
 * thread: `tokenizer_bench MODEL_DIR PROMPTS.json [ROUNDS]` encodes every
 * prompt ROUNDS times (with BOS) and prints MB/s of prompt text and
 * tokens/s. bench/tokenizer_bench.py runs it beside Hugging Face tokenizers. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tokenizer.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: tokenizer_bench MODEL_DIR PROMPTS.json [ROUNDS]\n");
        return 2;
    }
    int rounds = argc > 3 ? atoi(argv[3]) : 5;
    char err[512];
    struct folio_tokenizer *t;
    if (folio_tokenizer_load(argv[1], &t, err, sizeof err)) {
        fprintf(stderr, "tokenizer_bench: %s\n", err);
        return 1;
    }
    json_error_t je;
    json_t *root = json_load_file(argv[2], 0, &je);
    if (!json_is_array(root)) {
        fprintf(stderr, "tokenizer_bench: %s:%d: %s\n", argv[2], je.line,
                root ? "not a list" : je.text);
        return 1;
    }
    size_t n = json_array_size(root), bytes = 0, tokens = 0;
    const char **text = calloc(n, sizeof *text);
    size_t *len = calloc(n, sizeof *len);
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_object_get(
            json_array_get(json_object_get(json_array_get(root, i), "conversations"), 0), "value");
        text[i] = json_is_string(v) ? json_string_value(v) : "";
        len[i] = json_is_string(v) ? json_string_length(v) : 0;
        bytes += len[i];
    }
    double best = 1e30;
    for (int r = 0; r < rounds; r++) {
        double t0 = now();
        size_t round_tokens = 0;
        for (size_t i = 0; i < n; i++) {
            size_t k;
            int32_t *ids = folio_tokenizer_encode(t, text[i], len[i], true, &k);
            if (!ids) {
                fprintf(stderr, "tokenizer_bench: out of memory\n");
                return 1;
            }
            round_tokens += k;
            free(ids);
        }
        double dt = now() - t0;
        if (dt < best)
            best = dt;
        tokens = round_tokens;
    }
    printf("{\"prompts\": %zu, \"bytes\": %zu, \"tokens\": %zu, \"best_s\": %.6f, "
           "\"mb_per_s\": %.2f, \"tokens_per_s\": %.0f}\n",
           n, bytes, tokens, best, (double)bytes / best / 1e6, (double)tokens / best);
    free(text);
    free(len);
    json_decref(root);
    folio_tokenizer_free(t);
    return 0;
}
