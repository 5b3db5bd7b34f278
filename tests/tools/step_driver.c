/* step_driver: runs a JSON script of steps through a worker backend, so that
 * Python tests can compare the C logits and tokens with the references.
 *
 *     step_driver [SCRIPT.json | -] [LOGITS.bin]
 *
 * The script:
 *   {"model": DIR, "backend": "cpu" (or "cpu-ref", the f32 reference), "max_seqs": 8,
 * "max_num_tokens": 256, "num_kv_blocks": 64, "threads": 1, "launch_ahead": false, "enforce_eager":
 * false, "tensor_parallel_size": 1, "gpu_memory_utilization": 0.5, "quantization": "none" (or
 * "fp8"), "kv_cache_dtype": "auto" (or "fp8"), "steps": [[{"slot": 0, "tokens":
 * [1, 2, 3], "context_len": 3, "block_table": [5], "sample": true, "output_index": 0,
 *                "temperature": 0, "top_k": 0, "top_p": 1, "min_p": 0,
 *                "seed": 0, "num_logprobs": 0, "repetition_penalty": 1,
 *                "frequency_penalty": 0, "presence_penalty": 0,
 *                "logit_bias": [[token, value], ...],
 *                "allowed": [token, ...], "num_draft": 0}, ...], ...],
 *  "num_speculative_tokens": 0}
 * (a logit_bias value null is -inf, a ban; "allowed": a structured output's
 * mask, the only tokens the sequence may sample; "num_draft": the last that
 * many tokens are drafts, sampled at each of the last 1 + num_draft positions
 * (speculative decoding's verify step); "num_speculative_tokens": the backend
 * option that shapes the CUDA backend's verify graphs).
 * A token -1 is FOLIO_TOKEN_FROM_PREV. With launch_ahead, step N+1 is launched
 * before step N is collected (the scheduler's pipeline). With "masks_later", a
 * step's masks are handed over after its launch (sample_masked), as the worker
 * does on a backend that takes them so.
 *
 * Output: one JSON line per step on stdout,
 *   {"step": N, "token_ids": [...], "logprobs": [...], "top_ids": [[...]],
 *    "top_logprobs": [[...]], "draft_token_ids": [...], "draft_logprobs": [...],
 *    "draft_top_ids": [[...]], "draft_top_logprobs": [[...]]}
 * (the draft rows: each sequence's num_draft, in batch order) and, when LOGITS.bin is given,
 * the float32 logits (with their logit bias) of every sampling sequence of every step, in
 * order, 1 + num_draft rows each, appended to it. Errors go to stderr with
 * the step number, and the exit status is 1. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "model.h"

struct parsed_step {
    struct folio_step_batch batch;
    struct folio_step_seq *seqs;
    int32_t *tokens;
    int32_t **tables;
    struct folio_logit_bias **bias;
    uint32_t **allowed;
};

static int int_field(json_t *obj, const char *key, long long def, long long *out)
{
    json_t *v = json_object_get(obj, key);
    if (!v) {
        *out = def;
        return 0;
    }
    if (!json_is_integer(v))
        return -1;
    *out = json_integer_value(v);
    return 0;
}

static int num_field(json_t *obj, const char *key, double def, double *out)
{
    json_t *v = json_object_get(obj, key);
    if (!v) {
        *out = def;
        return 0;
    }
    if (!json_is_number(v))
        return -1;
    *out = json_number_value(v);
    return 0;
}

static int32_t *int_array(json_t *arr, int32_t *n)
{
    if (!json_is_array(arr))
        return NULL;
    *n = (int32_t)json_array_size(arr);
    int32_t *out = malloc(((size_t)*n + 1) * sizeof *out);
    for (size_t i = 0; out && i < json_array_size(arr); i++) {
        json_t *v = json_array_get(arr, i);
        if (!json_is_integer(v)) {
            free(out);
            return NULL;
        }
        out[i] = (int32_t)json_integer_value(v);
    }
    return out;
}

static void free_step(struct parsed_step *p)
{
    if (p->tables)
        for (int32_t i = 0; i < p->batch.num_seqs; i++)
            free(p->tables[i]);
    free(p->tables);
    if (p->bias)
        for (int32_t i = 0; i < p->batch.num_seqs; i++)
            free(p->bias[i]);
    free(p->bias);
    if (p->allowed)
        for (int32_t i = 0; i < p->batch.num_seqs; i++)
            free(p->allowed[i]);
    free(p->allowed);
    free(p->seqs);
    free(p->tokens);
}

/* "logit_bias": [[token, value], ...] (a value of null is -inf: a ban). */
static int parse_bias(json_t *js, struct folio_step_seq *s, struct folio_logit_bias **out)
{
    json_t *a = json_object_get(js, "logit_bias");
    if (!a)
        return 0;
    if (!json_is_array(a))
        return -1;
    size_t n = json_array_size(a);
    *out = calloc(n + 1, sizeof **out);
    if (!*out)
        return -1;
    for (size_t k = 0; k < n; k++) {
        json_t *e = json_array_get(a, k);
        json_t *tok = json_array_get(e, 0), *val = json_array_get(e, 1);
        if (!json_is_integer(tok) || !(json_is_number(val) || json_is_null(val)))
            return -1;
        (*out)[k] = (struct folio_logit_bias){(int32_t)json_integer_value(tok),
                                              json_is_null(val) ? -INFINITY
                                                                : (float)json_number_value(val)};
    }
    s->bias = *out;
    s->num_bias = (int32_t)n;
    return 0;
}

/* "allowed": [token, ...] as a mask of (vocab + 31) / 32 words; absent: none. */
static int parse_allowed(json_t *js, int vocab, uint32_t **out)
{
    json_t *a = json_object_get(js, "allowed");
    if (!a)
        return 0;
    if (!json_is_array(a) || !(*out = calloc(((size_t)vocab + 31) / 32, sizeof **out)))
        return -1;
    size_t k;
    json_t *v;
    json_array_foreach(a, k, v)
    {
        json_int_t id = json_integer_value(v);
        if (!json_is_integer(v) || id < 0 || id >= vocab)
            return -1;
        (*out)[id / 32] |= 1u << (id % 32);
    }
    return 0;
}

static int parse_step(json_t *jstep, struct parsed_step *p, int vocab, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    if (!json_is_array(jstep)) {
        snprintf(err, errlen, "a step must be a list of sequences");
        return -1;
    }
    int32_t nseq = (int32_t)json_array_size(jstep);
    p->batch.num_seqs = nseq;
    p->seqs = calloc((size_t)nseq + 1, sizeof *p->seqs);
    p->tables = calloc((size_t)nseq + 1, sizeof *p->tables);
    p->bias = calloc((size_t)nseq + 1, sizeof *p->bias);
    p->allowed = calloc((size_t)nseq + 1, sizeof *p->allowed);
    size_t total = 0;
    for (int32_t i = 0; i < nseq; i++)
        total += json_array_size(json_object_get(json_array_get(jstep, (size_t)i), "tokens"));
    p->tokens = malloc((total + 1) * sizeof *p->tokens);
    if (!p->seqs || !p->tables || !p->bias || !p->allowed || !p->tokens) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    size_t t = 0;
    for (int32_t i = 0; i < nseq; i++) {
        json_t *js = json_array_get(jstep, (size_t)i);
        struct folio_step_seq *s = &p->seqs[i];
        int32_t ntok = 0;
        int32_t *toks = int_array(json_object_get(js, "tokens"), &ntok);
        p->tables[i] = int_array(json_object_get(js, "block_table"), &s->num_blocks);
        if (!toks || !p->tables[i]) {
            free(toks);
            snprintf(err, errlen, "seq %d: tokens and block_table must be integer lists", i);
            return -1;
        }
        memcpy(p->tokens + t, toks, (size_t)ntok * sizeof *toks);
        free(toks);
        t += (size_t)ntok;
        long long slot, ctx, out_idx, top_k, seed, nlp, ndraft;
        double temp, top_p, min_p, rep_pen, freq_pen, pres_pen;
        if (int_field(js, "slot", -1, &slot) || int_field(js, "context_len", -1, &ctx) ||
            int_field(js, "output_index", 0, &out_idx) || int_field(js, "top_k", 0, &top_k) ||
            int_field(js, "seed", 0, &seed) || int_field(js, "num_logprobs", 0, &nlp) ||
            int_field(js, "num_draft", 0, &ndraft) || num_field(js, "temperature", 0, &temp) ||
            num_field(js, "top_p", 1, &top_p) || num_field(js, "min_p", 0, &min_p) ||
            num_field(js, "repetition_penalty", 1, &rep_pen) ||
            num_field(js, "frequency_penalty", 0, &freq_pen) ||
            num_field(js, "presence_penalty", 0, &pres_pen)) {
            snprintf(err, errlen, "seq %d: a field has the wrong type", i);
            return -1;
        }
        json_t *jsample = json_object_get(js, "sample");
        s->slot = (int32_t)slot;
        s->num_new_tokens = ntok;
        s->context_len = (int32_t)ctx;
        s->block_table = p->tables[i];
        s->sample = jsample ? json_is_true(jsample) : true;
        s->output_index = (int32_t)out_idx;
        s->num_draft = (int32_t)ndraft;
        s->sampling = (struct folio_sampling_params){
            .temperature = (float)temp,
            .top_k = (int32_t)top_k,
            .top_p = (float)top_p,
            .min_p = (float)min_p,
            .repetition_penalty = (float)rep_pen,
            .frequency_penalty = (float)freq_pen,
            .presence_penalty = (float)pres_pen,
            .seed = (uint64_t)seed,
            .num_logprobs = (int32_t)nlp,
        };
        if (parse_bias(js, s, &p->bias[i]) != 0) {
            snprintf(err, errlen, "seq %d: logit_bias must be a list of [token, value]", i);
            return -1;
        }
        if (parse_allowed(js, vocab, &p->allowed[i]) != 0) {
            snprintf(err, errlen, "seq %d: allowed must be a list of token ids below %d", i, vocab);
            return -1;
        }
        s->allowed = p->allowed[i];
    }
    p->batch.num_tokens = (int32_t)t;
    p->batch.token_ids = p->tokens;
    p->batch.seqs = p->seqs;
    return 0;
}

static bool has_masks(const struct folio_step_batch *b)
{
    for (int i = 0; i < b->num_seqs; i++)
        if (b->seqs[i].allowed)
            return true;
    return false;
}

/* "name": [...] of rows [first, first + n) of r: tokens, logprobs, or the top logprobs' ids or
 * values (num_logprobs[k] of row first + k). */
static void print_rows(const char *name, const struct folio_step_result *r, int first, int n,
                       int what, const int *num_logprobs)
{
    printf(", \"%s\": [", name);
    for (int32_t i = 0; i < n; i++) {
        int32_t row = first + i;
        if (what == 0)
            printf("%s%d", i ? ", " : "", r->token_ids[row]);
        else if (what == 1)
            printf("%s%.9g", i ? ", " : "", (double)r->logprobs[row]);
        else
            printf("%s[", i ? ", " : "");
        for (int32_t j = 0; what > 1 && j < num_logprobs[i]; j++) {
            size_t o = (size_t)row * FOLIO_MAX_LOGPROBS + j;
            if (what == 2)
                printf("%s%d", j ? ", " : "", r->top_ids[o]);
            else
                printf("%s%.9g", j ? ", " : "", (double)r->top_logprobs[o]);
        }
        if (what > 1)
            printf("]");
    }
    printf("]");
}

static int print_result(int step, const struct parsed_step *p, const struct folio_step_result *r,
                        FILE *logits_out, int vocab, int *num_logprobs)
{
    int32_t n = p->batch.num_seqs, nlogits = 0, ndraft = 0;
    for (int32_t i = 0; i < n; i++) {
        num_logprobs[i] = p->seqs[i].sampling.num_logprobs;
        nlogits += p->seqs[i].sample ? 1 + p->seqs[i].num_draft : 0;
    }
    for (int32_t i = 0; i < n; i++) /* a draft row has its sequence's top logprobs */
        for (int32_t k = 0; k < p->seqs[i].num_draft; k++)
            num_logprobs[n + ndraft++] = p->seqs[i].sampling.num_logprobs;
    printf("{\"step\": %d", step);
    const char *names[] = {"token_ids", "logprobs", "top_ids", "top_logprobs"};
    for (int what = 0; what < 4; what++)
        print_rows(names[what], r, 0, n, what, num_logprobs);
    char name[32];
    for (int what = 0; what < 4; what++) {
        snprintf(name, sizeof name, "draft_%s", names[what]);
        print_rows(name, r, n, ndraft, what, num_logprobs + n);
    }
    printf("}\n");
    fflush(stdout);
    if (logits_out && nlogits &&
        fwrite(r->logits, sizeof(float) * (size_t)vocab, (size_t)nlogits, logits_out) !=
            (size_t)nlogits) {
        fprintf(stderr, "step_driver: writing logits failed\n");
        return -1;
    }
    return 0;
}

static int create_backend(const char *name, const struct folio_model *m,
                          const struct folio_backend_options *opt, struct folio_backend **out,
                          char *err, size_t errlen)
{
    if (!name || !strcmp(name, "cpu") || !strcmp(name, "cpu-ref")) {
        struct folio_backend_options o = *opt;
        o.cpu_reference = name && !strcmp(name, "cpu-ref");
        return folio_cpu_backend_create(m, &o, out, err, errlen);
    }
    if (!strcmp(name, "cuda")) {
#ifdef FOLIO_HAVE_CUDA
        return folio_cuda_backend_create(m, opt, out, err, errlen);
#else
        snprintf(err, errlen, "backend \"cuda\": not built with CUDA");
        return -1;
#endif
    }
    snprintf(err, errlen, "backend \"%s\": must be \"cpu\", \"cpu-ref\" or \"cuda\"", name);
    return -1;
}

/* The script's "cuda_paths" object: the kernel paths a GPU check forces (absent: the engine's). */
static int cuda_paths(json_t *obj, struct folio_cuda_paths *p)
{
    memset(p, 0, sizeof *p);
    if (!obj)
        return 0;
    long long gemv, so, sd;
    if (!json_is_object(obj) || int_field(obj, "gemv_max_rows", 0, &gemv) ||
        int_field(obj, "splitk_o", 0, &so) || int_field(obj, "splitk_down", 0, &sd) || gemv < -1 ||
        gemv > 8)
        return -1;
    for (long long v = so, i = 0; i < 2; v = sd, i++)
        if (v != 0 && v != 1 && v != 2 && v != 4 && v != 8)
            return -1;
    const char *known[] = {"gemv_max_rows",   "splitk_o",    "splitk_down", "no_tma_gemm",
                           "one_cta_sampler", "keep_logits", "gguf_bf16"};
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v)
    {
        bool found = false;
        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
            if (!strcmp(key, known[i]))
                found = true;
        if (!found || (!json_is_integer(v) && !json_is_boolean(v)))
            return -1;
    }
    p->gemv_max_rows = (int)gemv;
    p->splitk_o = (int)so;
    p->splitk_down = (int)sd;
    p->no_tma_gemm = json_is_true(json_object_get(obj, "no_tma_gemm"));
    p->one_cta_sampler = json_is_true(json_object_get(obj, "one_cta_sampler"));
    p->keep_logits = json_is_true(json_object_get(obj, "keep_logits"));
    p->gguf_bf16 = json_is_true(json_object_get(obj, "gguf_bf16"));
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 3 || (argc > 1 && !strcmp(argv[1], "--help"))) {
        fprintf(stderr, "usage: step_driver [SCRIPT.json | -] [LOGITS.bin]\n");
        return 2;
    }
    json_error_t jerr;
    json_t *script = argc > 1 && strcmp(argv[1], "-") ? json_load_file(argv[1], 0, &jerr)
                                                      : json_loadf(stdin, 0, &jerr);
    if (!script) {
        fprintf(stderr, "step_driver: %s: line %d: %s\n", argc > 1 ? argv[1] : "stdin", jerr.line,
                jerr.text);
        return 1;
    }
    const char *model_dir = json_string_value(json_object_get(script, "model"));
    json_t *jsteps = json_object_get(script, "steps");
    long long max_seqs, max_tokens, kv_blocks, threads;
    if (!model_dir || !json_is_array(jsteps) || int_field(script, "max_seqs", 8, &max_seqs) ||
        int_field(script, "max_num_tokens", 256, &max_tokens) ||
        int_field(script, "num_kv_blocks", 64, &kv_blocks) ||
        int_field(script, "threads", 1, &threads)) {
        fprintf(stderr, "step_driver: the script needs \"model\" (a string), \"steps\" (a list) "
                        "and integer options\n");
        json_decref(script);
        return 1;
    }
    bool launch_ahead = json_is_true(json_object_get(script, "launch_ahead"));
    bool masks_later = json_is_true(json_object_get(script, "masks_later"));
    const char *backend = json_string_value(json_object_get(script, "backend"));
    double gpu_util;
    if (num_field(script, "gpu_memory_utilization", 0.5, &gpu_util) != 0) {
        fprintf(stderr, "step_driver: \"gpu_memory_utilization\" must be a number\n");
        json_decref(script);
        return 1;
    }

    enum folio_quantization quant;
    if (folio_quantization_parse(json_string_value(json_object_get(script, "quantization")),
                                 &quant) != 0) {
        fprintf(stderr, "step_driver: \"quantization\" is \"none\" or \"fp8\"\n");
        json_decref(script);
        return 1;
    }
    enum folio_kv_cache_dtype kv_dtype;
    if (folio_kv_cache_dtype_parse(json_string_value(json_object_get(script, "kv_cache_dtype")),
                                   &kv_dtype) != 0) {
        fprintf(stderr, "step_driver: \"kv_cache_dtype\" is \"auto\", \"fp8\" or \"fp8_e4m3\"\n");
        json_decref(script);
        return 1;
    }
    struct folio_cuda_paths paths;
    if (cuda_paths(json_object_get(script, "cuda_paths"), &paths) != 0) {
        fprintf(stderr, "step_driver: \"cuda_paths\" takes gemv_max_rows (-1-8), splitk_o and "
                        "splitk_down (0, 1, 2, 4 or 8), no_tma_gemm, one_cta_sampler, "
                        "keep_logits and gguf_bf16 (booleans)\n");
        json_decref(script);
        return 1;
    }

    char err[512];
    struct folio_model *model = NULL;
    struct folio_backend *be = NULL;
    FILE *logits_out = NULL;
    struct parsed_step *steps = NULL;
    size_t nsteps = json_array_size(jsteps);
    int rc = 1;
    unsigned flags = !backend || !strcmp(backend, "cpu") ? FOLIO_CHECKPOINT_KEEP_BLOCKS : 0;
    if (folio_model_open_flags(model_dir, flags, &model, err, sizeof err) != 0) {
        fprintf(stderr, "step_driver: %s\n", err);
        goto done;
    }
    struct folio_backend_options opt = {
        .max_seqs = (int)max_seqs,
        .max_num_tokens = (int)max_tokens,
        .num_kv_blocks = (int)kv_blocks,
        .num_threads = (int)threads,
        .gpu_memory_utilization = (float)gpu_util,
        .enforce_eager = json_is_true(json_object_get(script, "enforce_eager")),
        .tensor_parallel_size =
            (int)json_integer_value(json_object_get(script, "tensor_parallel_size")),
        .num_speculative_tokens =
            (int)json_integer_value(json_object_get(script, "num_speculative_tokens")),
        .quantization = quant,
        .kv_cache_dtype = kv_dtype,
        .cuda_paths = paths,
    };
    if (create_backend(backend, model, &opt, &be, err, sizeof err) != 0) {
        fprintf(stderr, "step_driver: %s\n", err);
        goto done;
    }
    /* The pool the backend built (num_kv_blocks 0: sized from memory), for the GPU checks. */
    fprintf(stderr, "step_driver: %d KV blocks\n", be->num_kv_blocks);
    if (argc > 2 && !(logits_out = fopen(argv[2], "wb"))) {
        perror(argv[2]);
        goto done;
    }
    steps = calloc(nsteps + 1, sizeof *steps);
    for (size_t i = 0; steps && i < nsteps; i++) {
        if (parse_step(json_array_get(jsteps, i), &steps[i], model->config.vocab_size, err,
                       sizeof err) != 0) {
            fprintf(stderr, "step_driver: step %zu: %s\n", i, err);
            goto done;
        }
    }
    int vocab = model->config.vocab_size;
    /* backend.h's result rows: a row per sequence, then the draft rows. */
    size_t S = ((size_t)max_seqs > 0 ? (size_t)max_seqs : 1) + FOLIO_MAX_DRAFT_ROWS;
    int *num_logprobs = malloc(S * sizeof(int));
    struct folio_step_result res = {
        .token_ids = malloc(S * sizeof(int32_t)),
        .logprobs = malloc(S * sizeof(float)),
        .top_ids = malloc(S * FOLIO_MAX_LOGPROBS * sizeof(int32_t)),
        .top_logprobs = malloc(S * FOLIO_MAX_LOGPROBS * sizeof(float)),
        .logits = malloc(S * (size_t)vocab * sizeof(float)),
    };
    struct folio_step_seq *bare = malloc(S * sizeof *bare); /* a batch's entries without masks */
    if (!steps || !res.token_ids || !res.logprobs || !res.top_ids || !res.top_logprobs ||
        !res.logits || !bare || !num_logprobs) {
        fprintf(stderr, "step_driver: out of memory\n");
        goto free_res;
    }
    /* launched counts steps launched, collected those collected; with
     * launch_ahead one more step is in flight than without. With masks_later a
     * step with masks is launched without them and gets them as the worker
     * hands them over: after the step before it is collected. */
    size_t launched = 0, collected = 0, depth = launch_ahead ? 2 : 1;
    bool awaiting = false;
    while (collected < nsteps) {
        while (!awaiting && launched < nsteps && launched - collected < depth) {
            struct folio_step_batch b = steps[launched].batch;
            if (masks_later && has_masks(&b)) {
                memcpy(bare, b.seqs, (size_t)b.num_seqs * sizeof *bare);
                for (int i = 0; i < b.num_seqs; i++)
                    bare[i].allowed = NULL;
                b.seqs = bare;
                b.masks_later = awaiting = true;
            }
            if (be->ops->launch(be, &b, err, sizeof err) != 0) {
                fprintf(stderr, "step_driver: step %zu: %s\n", launched, err);
                goto free_res;
            }
            launched++;
        }
        /* Nothing before it to collect: its masks go at once. */
        if (awaiting && launched - collected == 1) {
            if (be->ops->sample_masked(be, &steps[launched - 1].batch, err, sizeof err) != 0) {
                fprintf(stderr, "step_driver: step %zu: %s\n", launched - 1, err);
                goto free_res;
            }
            awaiting = false;
        }
        if (be->ops->collect(be, &res, err, sizeof err) != 0) {
            fprintf(stderr, "step_driver: step %zu: %s\n", collected, err);
            goto free_res;
        }
        if (awaiting) {
            if (be->ops->sample_masked(be, &steps[launched - 1].batch, err, sizeof err) != 0) {
                fprintf(stderr, "step_driver: step %zu: %s\n", launched - 1, err);
                goto free_res;
            }
            awaiting = false;
        }
        if (print_result((int)collected, &steps[collected], &res, logits_out, vocab,
                         num_logprobs) != 0)
            goto free_res;
        collected++;
    }
    rc = 0;
free_res:
    free(num_logprobs);
    free(bare);
    free(res.token_ids);
    free(res.logprobs);
    free(res.top_ids);
    free(res.top_logprobs);
    free(res.logits);
done:
    if (logits_out && fclose(logits_out) != 0 && rc == 0) {
        perror("step_driver: logits file");
        rc = 1;
    }
    if (steps)
        for (size_t i = 0; i < nsteps; i++)
            free_step(&steps[i]);
    free(steps);
    if (be)
        be->ops->destroy(be);
    folio_model_close(model);
    json_decref(script);
    return rc;
}
