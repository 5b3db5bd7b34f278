/* One sequence on a worker backend in this process: prefill in chunks, then
 * one decode step per token, streaming whole UTF-8 text. The tokens already
 * in the KV cache are remembered so that the next call (a chat's next turn)
 * prefills only from where its prompt departs from them. */
#include "local_session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "model.h"

/* Prefill chunk: bounds the step's scratch memory on long prompts. */
#define SESSION_PREFILL_CHUNK 512
#define SESSION_DEFAULT_CONTEXT 4096

struct folio_session {
    struct folio_model *model;
    struct folio_tokenizer *tok;
    struct folio_chat_template *tmpl;
    struct folio_backend *backend;
    int max_context;
    int32_t *blocks; /* the sequence's block table: block i is physical block i */
    int32_t *fed;    /* [max_context]: the tokens whose KV is in the cache, by position */
    size_t num_fed;
};

static int create_backend(const char *name, const struct folio_model *m,
                          const struct folio_backend_options *opt, struct folio_backend **out,
                          char *err, size_t errlen)
{
    if (!strcmp(name, "cuda")) {
#ifdef FOLIO_HAVE_CUDA
        return folio_cuda_backend_create(m, opt, out, err, errlen);
#else
        snprintf(err, errlen,
                 "--backend cuda: this folio was not built with CUDA (nvcc was not found at build "
                 "time); use --backend cpu");
        return -1;
#endif
    }
    if (strcmp(name, "cpu") != 0 && strcmp(name, "cpu-ref") != 0) {
        snprintf(err, errlen, "--backend must be cpu, cpu-ref or cuda, got '%s'", name);
        return -1;
    }
    struct folio_backend_options o = *opt;
    o.cpu_reference = !strcmp(name, "cpu-ref");
    return folio_cpu_backend_create(m, &o, out, err, errlen);
}

int folio_session_open(const struct folio_session_options *o, struct folio_session **out, char *err,
                       size_t errlen)
{
    *out = NULL;
    struct folio_session *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    unsigned flags = !strcmp(o->backend, "cpu") ? FOLIO_CHECKPOINT_KEEP_BLOCKS : 0;
    if (folio_model_open_flags(o->model_dir, flags, &s->model, err, errlen) != 0 ||
        folio_tokenizer_load(o->model_dir, &s->tok, err, errlen) != 0)
        goto fail;
    const char *src = folio_tokenizer_chat_template(s->tok);
    if (src && folio_chat_template_compile(src, &s->tmpl, err, errlen) != 0) {
        size_t len = strlen(err);
        snprintf(err + len, errlen - len, " (the model's chat template)");
        goto fail;
    }
    const struct folio_model_config *cfg = &s->model->config;
    s->max_context = o->max_context > 0 ? o->max_context : SESSION_DEFAULT_CONTEXT;
    if (s->max_context > cfg->max_position_embeddings)
        s->max_context = cfg->max_position_embeddings;
    if (folio_model_config_check_context(cfg, s->max_context, err, errlen) != 0)
        goto fail;
    int32_t num_blocks = (s->max_context + FOLIO_KV_BLOCK_SIZE - 1) / FOLIO_KV_BLOCK_SIZE;
    struct folio_backend_options opt = {
        .max_seqs = 1,
        .max_num_tokens = SESSION_PREFILL_CHUNK,
        .num_kv_blocks = num_blocks,
        .num_threads = o->threads,
    };
    if (create_backend(o->backend, s->model, &opt, &s->backend, err, errlen) != 0)
        goto fail;
    s->blocks = malloc((size_t)num_blocks * sizeof *s->blocks);
    s->fed = malloc((size_t)s->max_context * sizeof *s->fed);
    if (!s->blocks || !s->fed) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    for (int32_t i = 0; i < num_blocks; i++)
        s->blocks[i] = i;
    *out = s;
    return 0;
fail:
    folio_session_close(s);
    return -1;
}

void folio_session_close(struct folio_session *s)
{
    if (!s)
        return;
    if (s->backend)
        s->backend->ops->destroy(s->backend);
    free(s->blocks);
    free(s->fed);
    folio_chat_template_free(s->tmpl);
    folio_tokenizer_free(s->tok);
    folio_model_close(s->model);
    free(s);
}

const struct folio_tokenizer *folio_session_tokenizer(const struct folio_session *s)
{
    return s->tok;
}

int folio_session_max_context(const struct folio_session *s)
{
    return s->max_context;
}

/* Tokenizes and checks the ids against the model's vocabulary. */
static int32_t *encode_checked(const struct folio_session *s, const char *text, size_t len,
                               bool add_special, size_t *n, char *err, size_t errlen)
{
    int32_t *ids = folio_tokenizer_encode(s->tok, text, len, add_special, n);
    if (!ids) {
        snprintf(err, errlen, "out of memory tokenizing the prompt");
        return NULL;
    }
    for (size_t i = 0; i < *n; i++) {
        if (ids[i] < 0 || ids[i] >= s->model->config.vocab_size) {
            snprintf(err, errlen,
                     "the tokenizer gave id %d, outside the model's vocab of %d: the tokenizer "
                     "does not match the model",
                     ids[i], s->model->config.vocab_size);
            free(ids);
            return NULL;
        }
    }
    return ids;
}

int32_t *folio_session_encode(const struct folio_session *s, const char *text, size_t *n, char *err,
                              size_t errlen)
{
    return encode_checked(s, text, strlen(text), true, n, err, errlen);
}

int32_t *folio_session_chat_prompt(const struct folio_session *s,
                                   const struct folio_chat_message *msgs, size_t n_msgs, size_t *n,
                                   char *err, size_t errlen)
{
    if (!s->tmpl) {
        snprintf(err, errlen,
                 "the model has no chat template (tokenizer_config.json has no "
                 "chat_template)");
        return NULL;
    }
    const char *bos = folio_tokenizer_bos_token(s->tok);
    char *text = NULL;
    size_t len = 0;
    if (folio_chat_template_render(s->tmpl, msgs, n_msgs, true, bos,
                                   folio_tokenizer_eos_token(s->tok), &text, &len, err,
                                   errlen) != 0)
        return NULL;
    bool has_bos = bos && *bos && len >= strlen(bos) && !memcmp(text, bos, strlen(bos));
    int32_t *ids = encode_checked(s, text, len, !has_bos, n, err, errlen);
    free(text);
    return ids;
}

static bool is_eos(const struct folio_session *s, int32_t id)
{
    const struct folio_model_config *c = &s->model->config;
    if (id == folio_tokenizer_eos_id(s->tok))
        return true;
    for (int i = 0; i < c->num_eos_token_ids; i++)
        if (c->eos_token_ids[i] == id)
            return true;
    return false;
}

struct reply {
    char *text;
    size_t len, cap;
    folio_session_text_fn on_text;
    void *arg;
};

static int reply_add(struct reply *r, const char *piece, size_t n)
{
    if (r->len + n + 1 > r->cap) {
        size_t cap = r->cap ? r->cap : 256;
        while (cap < r->len + n + 1)
            cap *= 2;
        char *t = realloc(r->text, cap);
        if (!t)
            return -1;
        r->text = t;
        r->cap = cap;
    }
    memcpy(r->text + r->len, piece, n);
    r->len += n;
    r->text[r->len] = '\0';
    if (n && r->on_text)
        r->on_text(piece, n, r->arg);
    return 0;
}

/* Feeds ids[from, n) after the KV of ids[0, from); the last chunk samples. */
static int prefill(struct folio_session *s, struct folio_step_seq *seq, const int32_t *ids,
                   size_t from, size_t n, struct folio_step_result *res, char *err, size_t errlen)
{
    struct folio_step_batch batch = {.num_seqs = 1, .seqs = seq};
    for (size_t done = from; done < n;) {
        size_t chunk = n - done < SESSION_PREFILL_CHUNK ? n - done : SESSION_PREFILL_CHUNK;
        done += chunk;
        seq->num_new_tokens = (int32_t)chunk;
        seq->context_len = (int32_t)done;
        seq->sample = done == n;
        batch.num_tokens = (int32_t)chunk;
        batch.token_ids = ids + done - chunk;
        if (folio_backend_step(s->backend, &batch, res, err, errlen) != 0)
            return -1;
    }
    return 0;
}

/* Decodes after the first sampled token until EOS or max_tokens. */
static int decode(struct folio_session *s, struct folio_step_seq *seq, size_t n_prompt,
                  long max_tokens, bool ignore_eos, struct folio_step_result *res,
                  struct reply *reply, struct folio_generation *out, char *err, size_t errlen)
{
    struct folio_detok *detok = folio_detok_new(s->tok, true);
    if (!detok) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    struct folio_step_batch batch = {.num_seqs = 1, .num_tokens = 1, .seqs = seq};
    int rc = -1;
    for (;;) {
        int32_t sampled = res->token_ids[0];
        out->generated++;
        out->stopped = !ignore_eos && is_eos(s, sampled);
        if (!out->stopped) {
            char *text = NULL;
            size_t len = 0;
            int prc = folio_detok_push(detok, sampled, &text, &len);
            int arc = prc == 0 ? reply_add(reply, text, len) : 0;
            free(text);
            if (prc != 0 || arc != 0) {
                snprintf(err, errlen,
                         prc ? "token %d is outside the tokenizer's vocab"
                             : "out of memory for the reply (token %d)",
                         sampled);
                goto done;
            }
        }
        if (out->stopped || out->generated == max_tokens)
            break;
        /* The token goes into the KV cache at the next position. */
        s->fed[s->num_fed++] = sampled;
        seq->num_new_tokens = 1;
        seq->context_len = (int32_t)(n_prompt + (size_t)out->generated);
        seq->sample = true;
        seq->output_index = (int32_t)out->generated;
        batch.token_ids = &sampled; /* read by launch before it writes the new one */
        if (folio_backend_step(s->backend, &batch, res, err, errlen) != 0)
            goto done;
    }
    char *tail = NULL;
    size_t tail_len = 0;
    rc = folio_detok_finish(detok, &tail, &tail_len) == 0 ? reply_add(reply, tail, tail_len) : 0;
    free(tail);
    if (rc != 0)
        snprintf(err, errlen, "out of memory for the reply");
done:
    folio_detok_free(detok);
    return rc;
}

int folio_session_generate(struct folio_session *s, const int32_t *ids, size_t n, long max_tokens,
                           const struct folio_sampling_params *sampling, bool ignore_eos,
                           folio_session_text_fn on_text, void *arg, struct folio_generation *out,
                           char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (n == 0 || max_tokens < 1) {
        snprintf(err, errlen, "nothing to generate: %zu prompt tokens, %ld max tokens", n,
                 max_tokens);
        return -1;
    }
    if ((long)n + max_tokens > s->max_context) {
        bool model_limit = s->max_context == s->model->config.max_position_embeddings;
        snprintf(err, errlen, "the prompt (%zu tokens) and %ld tokens to generate exceed %s %d", n,
                 max_tokens,
                 model_limit ? "the model's max_position_embeddings" : "the context, in tokens,",
                 s->max_context);
        return -1;
    }
    /* The cache keeps the common prefix; at least one token is fed, to sample from. */
    size_t keep = 0;
    while (keep < s->num_fed && keep < n && s->fed[keep] == ids[keep])
        keep++;
    if (keep == n)
        keep = n - 1;
    memcpy(s->fed, ids, n * sizeof *ids);
    s->num_fed = keep; /* until the prefill below succeeds */

    int32_t sampled = -1;
    float logprob;
    struct folio_step_result res = {.token_ids = &sampled, .logprobs = &logprob};
    struct folio_step_seq seq = {
        .slot = 0,
        .num_blocks = (s->max_context + FOLIO_KV_BLOCK_SIZE - 1) / FOLIO_KV_BLOCK_SIZE,
        .block_table = s->blocks,
        .sampling = *sampling,
    };
    struct reply reply = {.on_text = on_text, .arg = arg};
    out->prompt_tokens = n;
    out->reused_tokens = keep;
    double t0 = folio_mono_s();
    if (prefill(s, &seq, ids, keep, n, &res, err, errlen) != 0)
        return -1;
    s->num_fed = n;
    double t1 = folio_mono_s();
    int rc = decode(s, &seq, n, max_tokens, ignore_eos, &res, &reply, out, err, errlen);
    out->prefill_s = t1 - t0;
    out->decode_s = folio_mono_s() - t1;
    if (rc == 0 && !reply.text)
        rc = reply_add(&reply, "", 0);
    if (rc != 0) {
        free(reply.text);
        return -1;
    }
    out->text = reply.text;
    return 0;
}
