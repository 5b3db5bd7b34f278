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
#include "http_server.h"
#include "log.h"
#include "model_config.h"
#include "tokenizer.h"

#define EXIT_USAGE 2 /* folio serve does not restart a misconfigured child */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: folio-frontend --model DIR [--host ADDR] [--port 8000] [--frontend-id N]\n"
            "                      [--run-dir DIR] [--instance NAME] [--served-model-name NAME]\n"
            "                      [--tls-cert FILE --tls-key FILE] [--scheduler-url URL]\n"
            "                      [--scheduler-ctl-url URL] [--max-body-bytes N]\n"
            "                      [--event-ring-bytes N] [--drain-seconds S]\n"
            "\n"
            "Serves /v1/completions, /v1/chat/completions, /v1/models, /health and /metrics.\n"
            "--run-dir holds the scheduler's ipc sockets (default /tmp/folio-UID); --instance\n"
            "prefixes the shared-memory names (default folio-UID). --scheduler-url and\n"
            "--scheduler-ctl-url replace the ipc:// defaults (e.g. tcp://host:port).\n");
}

static int parse_size(const char *flag, const char *v, long long lo, long long hi, long long *out)
{
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || *end || end == v || x < lo || x > hi) {
        fprintf(stderr, "folio-frontend: %s must be an integer in [%lld, %lld], got '%s'\n", flag,
                lo, hi, v);
        return -1;
    }
    *out = x;
    return 0;
}

int main(int argc, char **argv)
{
    folio_log_init("folio-frontend");
    const char *model = NULL, *host = NULL, *run_dir = NULL, *instance = NULL;
    const char *served = NULL, *cert = NULL, *key = NULL, *submit_url = NULL, *ctl_url = NULL;
    long long port = 8000, id = 0, max_body = 16ll << 20, ring_bytes = 8ll << 20, drain = 30;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (strncmp(a, "--", 2) != 0 || i + 1 >= argc) {
            fprintf(stderr, "folio-frontend: expected --flag VALUE, got '%s'\n", a);
            usage(stderr);
            return EXIT_USAGE;
        }
        const char *v = argv[++i];
        int bad = 0;
        if (!strcmp(a, "--model"))
            model = v;
        else if (!strcmp(a, "--host"))
            host = v;
        else if (!strcmp(a, "--port"))
            bad = parse_size(a, v, 0, 65535, &port);
        else if (!strcmp(a, "--frontend-id"))
            bad = parse_size(a, v, 0, 65535, &id);
        else if (!strcmp(a, "--run-dir"))
            run_dir = v;
        else if (!strcmp(a, "--instance"))
            instance = v;
        else if (!strcmp(a, "--served-model-name"))
            served = v;
        else if (!strcmp(a, "--tls-cert"))
            cert = v;
        else if (!strcmp(a, "--tls-key"))
            key = v;
        else if (!strcmp(a, "--scheduler-url"))
            submit_url = v;
        else if (!strcmp(a, "--scheduler-ctl-url"))
            ctl_url = v;
        else if (!strcmp(a, "--max-body-bytes"))
            bad = parse_size(a, v, 1024, 1ll << 30, &max_body);
        else if (!strcmp(a, "--event-ring-bytes"))
            bad = parse_size(a, v, 1 << 16, 1ll << 30, &ring_bytes);
        else if (!strcmp(a, "--drain-seconds"))
            bad = parse_size(a, v, 0, 3600, &drain);
        else {
            fprintf(stderr, "folio-frontend: unknown flag '%s'\n", a);
            usage(stderr);
            return EXIT_USAGE;
        }
        if (bad)
            return EXIT_USAGE;
    }
    if (!model) {
        fprintf(stderr, "folio-frontend: --model DIR is required\n");
        usage(stderr);
        return EXIT_USAGE;
    }
    if (!cert != !key) {
        fprintf(stderr, "folio-frontend: --tls-cert and --tls-key go together\n");
        return EXIT_USAGE;
    }

    char err[1024];
    struct folio_model_config mc;
    if (folio_model_config_load(model, &mc, err, sizeof err) != 0) {
        fprintf(stderr, "folio-frontend: %s\n", err);
        return EXIT_USAGE;
    }
    struct folio_tokenizer *tok = NULL;
    if (folio_tokenizer_load(model, &tok, err, sizeof err) != 0) {
        fprintf(stderr, "folio-frontend: %s\n", err);
        return EXIT_USAGE;
    }
    struct folio_chat_template *tmpl = NULL;
    const char *src = folio_tokenizer_chat_template(tok);
    if (src && folio_chat_template_compile(src, &tmpl, err, sizeof err) != 0) {
        fprintf(stderr, "folio-frontend: %s/tokenizer_config.json: chat_template: %s\n", model,
                err);
        folio_tokenizer_free(tok);
        return EXIT_USAGE;
    }

    char default_run_dir[64], default_instance[64], ring[300], sub[PATH_MAX + 32],
        ctl[PATH_MAX + 32], base[PATH_MAX];
    snprintf(default_run_dir, sizeof default_run_dir, "/tmp/folio-%d", (int)getuid());
    snprintf(default_instance, sizeof default_instance, "folio-%d", (int)getuid());
    if (!run_dir)
        run_dir = default_run_dir;
    if (!instance)
        instance = default_instance;
    snprintf(ring, sizeof ring, "/%s-events-fe%lld", instance, id);
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
        .host = host,
        .port = (int)port,
        .tls_cert = cert,
        .tls_key = key,
        .served_model_name = served,
        .model_dir = model,
        .max_model_len = mc.max_position_embeddings,
        .frontend_id = (uint32_t)id,
        .submit_url = submit_url,
        .ctl_url = ctl_url,
        .ring_name = ring,
        .ring_bytes = (size_t)ring_bytes,
        .max_body_bytes = (size_t)max_body,
        .drain_seconds = (double)drain,
        .tokenizer = tok,
        .chat_template = tmpl,
    };
    int rc = folio_server_run(&cfg, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, "folio-frontend: %s\n", err);
    folio_chat_template_free(tmpl);
    folio_tokenizer_free(tok);
    return rc == 0 ? 0 : 1;
}
