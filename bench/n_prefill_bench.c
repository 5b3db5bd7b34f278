/* Prefill work of n samples of one prompt: the scheduler's policy plans the
 * steps, the simulated worker runs them (it checks that every KV position a
 * step attends to holds this very sequence's tokens, so a wrongly shared
 * block is an error), and the bench counts the prompt tokens the worker
 * computed. The frontend submits a request's n samples as n requests with
 * the same prompt, side by side; the later ones take the first one's full
 * prompt blocks from the prefix cache in the same step and compute only the
 * last partial block themselves.
 *
 *   n_prefill_bench [prompt_tokens] [n] [budget]   (defaults 1000, 8, 8192)
 *
 * budget is --max-num-batched-tokens: below the prompt length the prompt is
 * prefilled in chunks, and a sample admitted after the first chunk shares
 * what the first sample computed by then. Prints the prompt tokens computed for n = 1 and for n,
 * and their ratio. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipc_records.h"
#include "policy.h"
#include "sim_backend.h"
#include "step_io.h"

#define MAX_SEQS 64

struct run {
    struct folio_policy *policy;
    struct folio_backend *worker;
    struct folio_step_io io;
    int prompt_len;
    long long prompt_tokens_run; /* counted from the batches the worker ran */
    int finished;
};

static void on_event(void *ctx, const struct folio_token_event *ev)
{
    struct run *r = ctx;
    if (ev->finish == FOLIO_FINISH_REJECTED || ev->finish == FOLIO_FINISH_ERROR) {
        fprintf(stderr, "request %llx ended with %d: %s\n", (unsigned long long)ev->request_id,
                ev->finish, ev->message ? ev->message : "");
        exit(1);
    }
    r->finished += ev->finish != FOLIO_FINISH_NONE;
}

/* One step through the worker: plan, run, apply. 0 when nothing was planned. */
static int step(struct run *r)
{
    const void *rec;
    size_t len;
    if (folio_policy_plan(r->policy, 0, &rec, &len) == 0)
        return 0;
    char err[512];
    struct folio_plan_view v;
    struct folio_step_batch batch;
    struct folio_step_result res = r->io.res;
    if (folio_plan_decode(rec, len, &v, err, sizeof err) != 0 ||
        folio_step_io_batch(&r->io, &v, NULL, false, &batch, err, sizeof err) != 0 ||
        folio_backend_step(r->worker, &batch, &res, err, sizeof err) != 0) {
        fprintf(stderr, "step: %s\n", err);
        exit(1);
    }
    for (int i = 0; i < batch.num_seqs; i++) {
        const struct folio_step_seq *q = &batch.seqs[i];
        int start = q->context_len - q->num_new_tokens, end = q->context_len;
        if (end > r->prompt_len)
            end = r->prompt_len;
        if (end > start)
            r->prompt_tokens_run += end - start;
    }
    size_t n = folio_step_io_encode_result(&r->io, NULL, v.hdr, batch.num_seqs, r->io.num_logprobs,
                                           NULL, 0);
    struct folio_result_view rv;
    if (folio_result_decode(r->io.result_buf, n, &rv, err, sizeof err) != 0 ||
        folio_policy_apply_result(r->policy, &rv, err, sizeof err) != 0) {
        fprintf(stderr, "result: %s\n", err);
        exit(1);
    }
    return 1;
}

/* The prompt tokens the worker computed for n samples of one prompt. */
static long long prefill_work(int prompt_len, int n, int budget)
{
    struct run r = {.prompt_len = prompt_len};
    struct folio_policy_config cfg = {.max_num_seqs = MAX_SEQS,
                                      .max_num_batched_tokens = budget,
                                      .num_kv_blocks = 4096,
                                      .max_model_len = 4096,
                                      .vocab_size = 32000,
                                      .max_waiting_requests = 256,
                                      .max_pending_prompt_tokens = 1 << 20,
                                      .eos_ids = {2},
                                      .num_eos_ids = 1,
                                      .seed = 1};
    struct folio_backend_options bo = {
        .max_seqs = MAX_SEQS, .max_num_tokens = budget, .num_kv_blocks = 4096};
    struct folio_sim_options so;
    folio_sim_options_default(&so);
    so.vocab_size = 32000;
    so.eos_id = -1;
    so.time_scale = 0;
    char err[512];
    if (folio_policy_create(&cfg, on_event, &r, &r.policy, err, sizeof err) != 0 ||
        folio_sim_backend_create(&bo, &so, &r.worker, err, sizeof err) != 0 ||
        folio_step_io_init(&r.io, MAX_SEQS, budget, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        exit(1);
    }
    int32_t *prompt = malloc((size_t)prompt_len * sizeof *prompt);
    for (int i = 0; i < prompt_len; i++)
        prompt[i] = 100 + (i * 7919) % 30000;
    for (int j = 0; j < n; j++) {
        struct folio_request q = {.request_id = 1 + (uint64_t)j,
                                  .frontend_id = 1,
                                  .prompt = prompt,
                                  .num_prompt = prompt_len,
                                  .params = {.max_tokens = 16, .has_seed = true}};
        q.params.sampling.top_p = 1;
        q.params.sampling.repetition_penalty = 1;
        q.params.sampling.temperature = 1;
        q.params.sampling.seed = 42 + (uint64_t)j;
        folio_policy_submit(r.policy, &q);
    }
    while (r.finished < n)
        if (!step(&r)) {
            fprintf(stderr, "no step could be planned with %d of %d finished\n", r.finished, n);
            exit(1);
        }
    char why[256];
    if (folio_policy_check(r.policy, why, sizeof why) != 0) {
        fprintf(stderr, "%s\n", why);
        exit(1);
    }
    struct folio_policy_stats st;
    folio_policy_stats(r.policy, &st);
    if ((long long)st.prompt_tokens_computed != r.prompt_tokens_run) {
        fprintf(stderr, "the policy counted %llu prompt tokens, the worker ran %lld\n",
                (unsigned long long)st.prompt_tokens_computed, r.prompt_tokens_run);
        exit(1);
    }
    free(prompt);
    folio_step_io_free(&r.io);
    r.worker->ops->destroy(r.worker);
    folio_policy_destroy(r.policy);
    return r.prompt_tokens_run;
}

int main(int argc, char **argv)
{
    int prompt_len = argc > 1 ? atoi(argv[1]) : 1000;
    int n = argc > 2 ? atoi(argv[2]) : 8;
    int budget = argc > 3 ? atoi(argv[3]) : 8192;
    if (prompt_len < 2 || prompt_len > 4000 || n < 1 || n > MAX_SEQS || budget < MAX_SEQS) {
        fprintf(stderr, "usage: n_prefill_bench [prompt_tokens 2..4000] [n 1..%d] [budget >= %d]\n",
                MAX_SEQS, MAX_SEQS);
        return 2;
    }
    long long one = prefill_work(prompt_len, 1, budget), many = prefill_work(prompt_len, n, budget);
    printf(
        "budget %d, prompt %d tokens: n=1 computes %lld prompt tokens, n=%d computes %lld: %.3fx "
        "(%d separate requests without sharing: %dx)\n",
        budget, prompt_len, one, n, many, (double)many / (double)one, n, n);
    return 0;
}
