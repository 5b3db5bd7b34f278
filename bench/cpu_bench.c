/* cpu_bench: in-process speed of the CPU backend on one model, the figures issue 58 is judged by.
 *
 *     cpu_bench [--backend cpu|cpu-ref] [--threads N] [--prompt TOKENS] [--decode STEPS]
 *               [--repeats R] MODEL
 *
 * load: the model opened and the backend created (weights packed), as a worker starts; open:
 * the model opened alone (the file mapped, its metadata read).
 * prefill: one sequence's prompt of TOKENS new tokens in one step, fresh each repeat; the
 * median over R repeats, as tokens per second.
 * decode: after that prompt, STEPS decode steps of one sequence (batch 1, greedy, the context
 * growing a token a step), as the worker runs them; tokens per second over all of them, the
 * median over R repeats.
 * Token ids are drawn from a fixed seed over the vocabulary, so every run sees the same work.
 * One line of results:
 *     RESULT backend=cpu threads=2 load_ms=... open_ms=... prefill_tokens=128 prefill_tok_s=...
 *            decode_steps=128 decode_tok_s=... */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "model.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int usage(void)
{
    fprintf(stderr, "usage: cpu_bench [--backend cpu|cpu-ref] [--threads N] [--prompt TOKENS] "
                    "[--decode STEPS] [--repeats R] MODEL\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *backend = "cpu", *model_dir = NULL;
    int threads = 0, prompt = 128, steps = 128, repeats = 3;
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && !strcmp(argv[i], "--backend"))
            backend = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--threads"))
            threads = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--prompt"))
            prompt = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--decode"))
            steps = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--repeats"))
            repeats = atoi(argv[++i]);
        else if (argv[i][0] != '-' && !model_dir)
            model_dir = argv[i];
        else
            return usage();
    }
    bool reference = !strcmp(backend, "cpu-ref");
    if (!model_dir || (!reference && strcmp(backend, "cpu")) || prompt < 1 || steps < 1 ||
        repeats < 1)
        return usage();

    char err[512];
    double t0 = now_ms();
    struct folio_model *m;
    if (folio_model_open_flags(model_dir, reference ? 0 : FOLIO_CHECKPOINT_KEEP_BLOCKS, &m, err,
                               sizeof err) != 0) {
        fprintf(stderr, "cpu_bench: %s\n", err);
        return 1;
    }
    double open_ms = now_ms() - t0;
    int ctx = prompt + steps + 1;
    int nblocks = (ctx + FOLIO_KV_BLOCK_SIZE - 1) / FOLIO_KV_BLOCK_SIZE;
    struct folio_backend_options opt = {.max_seqs = 1,
                                        .max_num_tokens = prompt,
                                        .num_kv_blocks = nblocks,
                                        .num_threads = threads,
                                        .cpu_reference = reference};
    struct folio_backend *b;
    if (folio_cpu_backend_create(m, &opt, &b, err, sizeof err) != 0) {
        fprintf(stderr, "cpu_bench: %s\n", err);
        return 1;
    }
    double load_ms = now_ms() - t0;

    int vocab = m->config.vocab_size;
    int32_t *ids = malloc((size_t)prompt * sizeof *ids), *blocks = malloc(nblocks * sizeof *blocks);
    double *pre = malloc(repeats * sizeof *pre), *dec = malloc(repeats * sizeof *dec);
    if (!ids || !blocks || !pre || !dec)
        return 1;
    unsigned seed = 12345;
    for (int i = 0; i < prompt; i++)
        ids[i] = (int32_t)((seed = seed * 1103515245u + 12345u) >> 8) % vocab;
    for (int i = 0; i < nblocks; i++)
        blocks[i] = i;
    int32_t token;
    float lp;
    int32_t top_ids[FOLIO_MAX_LOGPROBS];
    float top_lps[FOLIO_MAX_LOGPROBS];
    struct folio_step_result res = {
        .token_ids = &token, .logprobs = &lp, .top_ids = top_ids, .top_logprobs = top_lps};
    for (int r = 0; r < repeats; r++) {
        struct folio_step_seq seq = {.slot = 0,
                                     .num_new_tokens = prompt,
                                     .context_len = prompt,
                                     .num_blocks = nblocks,
                                     .block_table = blocks,
                                     .sample = true};
        seq.sampling = (struct folio_sampling_params){.top_p = 1.0f, .repetition_penalty = 1.0f};
        struct folio_step_batch batch = {
            .num_seqs = 1, .num_tokens = prompt, .token_ids = ids, .seqs = &seq};
        double t = now_ms();
        if (folio_backend_step(b, &batch, &res, err, sizeof err) != 0) {
            fprintf(stderr, "cpu_bench: prefill: %s\n", err);
            return 1;
        }
        pre[r] = prompt / ((now_ms() - t) / 1e3);
        t = now_ms();
        for (int s = 0; s < steps; s++) {
            int32_t next = FOLIO_TOKEN_FROM_PREV;
            seq.num_new_tokens = 1;
            seq.context_len = prompt + s + 1;
            seq.output_index = s + 1;
            batch.num_tokens = 1;
            batch.token_ids = &next;
            if (folio_backend_step(b, &batch, &res, err, sizeof err) != 0) {
                fprintf(stderr, "cpu_bench: decode: %s\n", err);
                return 1;
            }
        }
        dec[r] = steps / ((now_ms() - t) / 1e3);
    }
    qsort(pre, repeats, sizeof *pre, cmp_double);
    qsort(dec, repeats, sizeof *dec, cmp_double);
    printf("RESULT backend=%s threads=%d load_ms=%.0f open_ms=%.0f prefill_tokens=%d "
           "prefill_tok_s=%.1f "
           "decode_steps=%d decode_tok_s=%.1f\n",
           backend, threads, load_ms, open_ms, prompt, pre[repeats / 2], steps, dec[repeats / 2]);
    b->ops->destroy(b);
    folio_model_close(m);
    free(ids);
    free(blocks);
    free(pre);
    free(dec);
    return 0;
}
