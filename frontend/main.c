/* folio-frontend: the OpenAI-compatible HTTP front of Folio. Loads the
 * tokenizer and chat template of the model directory, registers with the
 * scheduler and serves until SIGTERM. Usually started by `folio serve`; runs
 * alone with the same flags (e.g. one container per frontend). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chat_template.h"
#include "gguf.h"
#include "http_server.h"
#include "log.h"
#include "options.h"
#include "program_flags.h"
#include "model_config.h"
#include "tokenizer.h"
#include "grammar.h"

#define EXIT_USAGE 2 /* folio serve does not restart a misconfigured child */
/* Compiled constraints kept for validation: the schemas a busy server sees again. */
#define GRAMMAR_CACHE_ENTRIES 64

/* Says at start which sampling settings a request that leaves them out gets,
 * as vLLM does when the model's generation config changes its defaults. */
static void log_sampling_defaults(const char *model, const struct folio_sampling_defaults *d)
{
    char desc[256], path[4096], err[256];
    folio_sampling_defaults_describe(d, desc, sizeof desc);
    if (!desc[0]) {
        folio_log_info(0, "the model recommends no sampling settings: a request that leaves them "
                          "out gets OpenAI's defaults (temperature 1, top_p 1)");
        return;
    }
    bool gguf = folio_gguf_resolve(model, path, sizeof path, err, sizeof err) == 1;
    folio_log_info(0,
                   "sampling defaults from the model's %s: %s; a request's own values win, "
                   "OpenAI's defaults fill the rest",
                   gguf ? "GGUF metadata (general.sampling.*)" : "generation_config.json", desc);
}

/* The chat template: --chat-template FILE when given, else the one of
 * tokenizer_config.json (NULL when neither: chat requests get 400). */
static int load_template(const char *prog, const char *model, const char *file,
                         const struct folio_tokenizer *tok, struct folio_chat_template **out)
{
    char err[1024];
    char *text = NULL;
    const char *src = folio_tokenizer_chat_template(tok);
    errno = 0;
    if (file) {
        FILE *f = fopen(file, "rb");
        long n = -1;
        if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
            (text = malloc((size_t)n + 1)) && fread(text, 1, (size_t)n, f) == (size_t)n)
            text[n] = 0;
        else {
            fprintf(stderr, "%s: --chat-template %s: %s\n", prog, file,
                    errno ? strerror(errno) : "cannot read it");
            free(text);
            if (f)
                fclose(f);
            return -1;
        }
        fclose(f);
        src = text;
    }
    int rc = 0;
    if (src && folio_chat_template_compile(src, out, err, sizeof err) != 0) {
        if (file)
            fprintf(stderr, "%s: --chat-template %s: %s\n", prog, file, err);
        else
            fprintf(stderr, "%s: %s/tokenizer_config.json: chat_template: %s\n", prog, model, err);
        rc = -1;
    }
    free(text);
    return rc;
}

int main(int argc, char **argv)
{
    folio_log_init("folio-frontend");
    const char *prog = folio_opts_prog("folio-frontend");
    struct folio_common_flags cf = {0};
    struct folio_http_flags hf = {0};
    struct folio_frontend_internal_flags ff = {0};
    struct folio_opt_group groups[] = {
        {NULL, folio_common_flag_table, folio_common_flag_count, &cf, NULL},
        {NULL, folio_http_flag_table, folio_http_flag_count, &hf, NULL},
        {"set by folio serve", folio_frontend_internal_flag_table,
         folio_frontend_internal_flag_count, &ff, NULL},
    };
    int prc = folio_opts_parse(prog,
                               "usage: folio-frontend --model DIR [options]\n\n"
                               "Serves /v1/completions, /v1/chat/completions, /v1/models, "
                               "/tokenize, /detokenize,\n/version, /ping, /health and /metrics.",
                               groups, sizeof groups / sizeof *groups, argc, argv);
    if (prc != 0)
        return prc > 0 ? 0 : EXIT_USAGE;
    const char *model = cf.model, *run_dir = ff.run_dir, *instance = ff.instance;
    const char *served = hf.served_model_name, *submit_url = ff.scheduler_url,
               *ctl_url = ff.scheduler_ctl_url;
    long long id = ff.frontend_id;
    if (!model) {
        fprintf(stderr, "%s: --model DIR is required\n", prog);
        return EXIT_USAGE;
    }
    if (!hf.tls_cert != !hf.tls_key) {
        fprintf(stderr, "%s: --tls-cert and --tls-key go together\n", prog);
        return EXIT_USAGE;
    }
    if (hf.enable_auto_tool_choice && !hf.tool_call_parser) {
        fprintf(stderr, "%s: --enable-auto-tool-choice needs --tool-call-parser\n", prog);
        return EXIT_USAGE;
    }
    enum folio_reasoning_kind reasoning;
    if (folio_reasoning_kind_parse(hf.reasoning_parser, &reasoning) != 0) {
        fprintf(stderr, "%s: --reasoning-parser %s is unknown\n", prog, hf.reasoning_parser);
        return EXIT_USAGE;
    }
    char err[1024];
    struct folio_api_keys keys;
    if (folio_api_keys_init(&keys, hf.api_key.v, (size_t)hf.api_key.n, getenv("FOLIO_API_KEY"), err,
                            sizeof err) != 0) {
        fprintf(stderr, "%s: --api-key: %s\n", prog, err);
        return EXIT_USAGE;
    }
    struct folio_model_config mc;
    if (folio_model_config_load(model, &mc, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", prog, err);
        return EXIT_USAGE;
    }
    struct folio_tokenizer *tok = NULL;
    if (folio_tokenizer_load(model, &tok, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", prog, err);
        return EXIT_USAGE;
    }
    struct folio_chat_template *tmpl = NULL;
    if (load_template(prog, model, hf.chat_template, tok, &tmpl) != 0) {
        folio_tokenizer_free(tok);
        return EXIT_USAGE;
    }
    /* Structured outputs: requests' constraints are compiled here to be checked, over the
     * model's vocab; a model whose vocab the engine refuses serves without them. */
    char grammar_error[512] = "";
    struct folio_grammar_vocab *gvocab = NULL;
    struct folio_grammar_cache *gcache = NULL;
    if (folio_grammar_vocab_new(tok, mc.vocab_size, mc.eos_token_ids, mc.num_eos_token_ids, &gvocab,
                                grammar_error, sizeof grammar_error) != 0)
        fprintf(stderr, "%s: structured outputs are off: %s\n", prog, grammar_error);
    else if (!(gcache = folio_grammar_cache_new(gvocab, GRAMMAR_CACHE_ENTRIES)))
        snprintf(grammar_error, sizeof grammar_error, "out of memory");

    char default_run_dir[64], default_instance[64], ring[300], metrics_shm[300], sub[PATH_MAX + 32],
        ctl[PATH_MAX + 32], base[PATH_MAX];
    snprintf(default_run_dir, sizeof default_run_dir, "/tmp/folio-%d", (int)getuid());
    snprintf(default_instance, sizeof default_instance, "folio-%d", (int)getuid());
    if (!run_dir)
        run_dir = default_run_dir;
    if (!instance)
        instance = default_instance;
    snprintf(ring, sizeof ring, "/%s-events-fe%lld", instance, id);
    snprintf(metrics_shm, sizeof metrics_shm, "/%s-metrics", instance);
    if (!submit_url) {
        snprintf(sub, sizeof sub, "ipc://%s/scheduler-submit.ipc", run_dir);
        submit_url = sub;
    }
    if (!ctl_url) {
        snprintf(ctl, sizeof ctl, "ipc://%s/scheduler-ctl.ipc", run_dir);
        ctl_url = ctl;
    }
    if (!served) {
        /* vLLM's default is the --model argument; the directory's name reads better. */
        snprintf(base, sizeof base, "%s", model);
        size_t n = strlen(base);
        while (n > 1 && base[n - 1] == '/')
            base[--n] = 0;
        const char *slash = strrchr(base, '/');
        served = slash ? slash + 1 : base;
    }

    struct folio_server_config cfg = {
        .host = hf.host,
        .port = (int)hf.port,
        .tls_cert = hf.tls_cert,
        .tls_key = hf.tls_key,
        .served_model_name = served,
        .model_dir = model,
        .max_model_len = mc.max_position_embeddings,
        .frontend_id = (uint32_t)id,
        .submit_url = submit_url,
        .ctl_url = ctl_url,
        .ring_name = ring,
        .ring_bytes = (size_t)hf.event_ring_bytes,
        .max_body_bytes = (size_t)hf.max_body_bytes,
        .drain_seconds = cf.drain_seconds,
        .tokenizer = tok,
        .chat_template = tmpl,
        .api_keys = &keys,
        .metrics_require_key = hf.metrics_require_key,
        .metrics_shm_name = metrics_shm,
        .max_logprobs = (int32_t)hf.max_logprobs,
        .sampling_defaults = &mc.sampling_defaults,
        .log_requests = !hf.disable_log_requests,
        .grammar = gcache,
        .grammar_error = grammar_error,
        .tool_parser = folio_tool_parser_find(hf.tool_call_parser),
        .enable_auto_tool_choice = hf.enable_auto_tool_choice,
        .reasoning = reasoning,
    };
    log_sampling_defaults(model, &mc.sampling_defaults);
    int rc = folio_server_run(&cfg, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, "%s: %s\n", prog, err);
    folio_chat_template_free(tmpl);
    folio_grammar_cache_free(gcache);
    folio_grammar_vocab_free(gvocab);
    folio_tokenizer_free(tok);
    return rc == 0 ? 0 : 1;
}
