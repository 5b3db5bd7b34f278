/* sched_client: a frontend without HTTP, for testing folio-scheduler alone.
 * Registers as frontend --id, creates its token-event ring, submits
 * --requests prompts (all at once), reads the events until every request has
 * finished, and prints one JSON line per request:
 *   {"id": "0001000000000003", "finish": "length", "status": 0, "tokens": [..],
 *    "completion_tokens": 16, "cached_tokens": 0, "events": 16, "message": ""}
 * then a summary line {"summary": ...}. --status prints the StatusReply as
 * JSON and exits; --wait-ready first waits until the worker is ready.
 * Exit status: 0 when every request finished exactly once (any reason), 1 on
 * a protocol violation or the timeout. */
#include <inttypes.h>
#include <nng/nng.h>
#include <nng/protocol/pipeline0/push.h>
#include <nng/protocol/reqrep0/req.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "folio.pb-c.h"
#include "grammar_kind.h"
#include "ipc_records.h"
#include "shm_ring.h"

struct req {
    uint64_t id;
    int32_t *tokens;
    int num_tokens, cap;
    int events, finishes;
    uint32_t finish, status, completion, cached;
    char message[256];
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static const char *finish_name(uint32_t f)
{
    static const char *names[] = {"none", "stop", "length", "abort", "error", "rejected"};
    return f <= FOLIO_FINISH_REJECTED ? names[f] : "?";
}

static Folio__Envelope *request(nng_socket s, Folio__Envelope *env)
{
    size_t n = folio__envelope__get_packed_size(env);
    uint8_t *buf = malloc(n ? n : 1);
    folio__envelope__pack(env, buf);
    int rv = nng_send(s, buf, n, 0);
    free(buf);
    if (rv != 0)
        return NULL;
    char *rep;
    size_t len;
    if (nng_recv(s, &rep, &len, NNG_FLAG_ALLOC) != 0)
        return NULL;
    Folio__Envelope *out = folio__envelope__unpack(NULL, len, (uint8_t *)rep);
    nng_free(rep, len);
    return out;
}

static Folio__StatusReply *status(nng_socket ctl, Folio__Envelope **holder)
{
    Folio__StatusRequest sr = FOLIO__STATUS_REQUEST__INIT;
    Folio__Envelope env = FOLIO__ENVELOPE__INIT;
    env.body_case = FOLIO__ENVELOPE__BODY_STATUS_REQUEST;
    env.status_request = &sr;
    *holder = request(ctl, &env);
    if (!*holder || (*holder)->body_case != FOLIO__ENVELOPE__BODY_STATUS_REPLY)
        return NULL;
    return (*holder)->status_reply;
}

int main(int argc, char **argv)
{
    const char *run_dir = NULL, *instance = NULL, *prompt_arg = NULL, *regex = NULL;
    int id = 1, nreq = 1, prompt_len = 8, max_tokens = 16, min_tokens = 0, abort_after = -1;
    double timeout = 60, temperature = 0;
    bool ignore_eos = false, quiet = false, only_status = false, wait_ready = false;
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(k, "--ignore-eos")) {
            ignore_eos = true;
            continue;
        } else if (!strcmp(k, "--quiet")) {
            quiet = true;
            continue;
        } else if (!strcmp(k, "--status")) {
            only_status = true;
            continue;
        } else if (!strcmp(k, "--wait-ready")) {
            wait_ready = true;
            continue;
        }
        i++;
        if (!strcmp(k, "--run-dir"))
            run_dir = v;
        else if (!strcmp(k, "--instance"))
            instance = v;
        else if (!strcmp(k, "--id"))
            id = atoi(v);
        else if (!strcmp(k, "--requests"))
            nreq = atoi(v);
        else if (!strcmp(k, "--prompt-len"))
            prompt_len = atoi(v);
        else if (!strcmp(k, "--prompt"))
            prompt_arg = v;
        else if (!strcmp(k, "--max-tokens"))
            max_tokens = atoi(v);
        else if (!strcmp(k, "--min-tokens"))
            min_tokens = atoi(v);
        else if (!strcmp(k, "--temperature"))
            temperature = strtod(v, NULL);
        else if (!strcmp(k, "--timeout"))
            timeout = strtod(v, NULL);
        else if (!strcmp(k, "--regex"))
            regex = v; /* every request's output constrained to match it */
        else if (!strcmp(k, "--abort-after"))
            abort_after = atoi(v); /* abort request 0 after this many of its tokens */
        else {
            fprintf(stderr, "sched_client: unknown option %s\n", k);
            return 2;
        }
    }
    if (!run_dir || !instance) {
        fprintf(stderr, "usage: sched_client --run-dir DIR --instance NAME [--id N] "
                        "[--requests N] [--prompt-len N | --prompt 1,2,3] [--max-tokens N]\n"
                        "       [--min-tokens N] [--ignore-eos] [--temperature F] "
                        "[--abort-after N] [--timeout S] [--quiet] [--status] [--wait-ready]\n"
                        "       [--regex RE]\n");
        return 2;
    }
    char url[4200];
    nng_socket ctl, push;
    snprintf(url, sizeof url, "ipc://%s/scheduler-ctl.ipc", run_dir);
    if (nng_req0_open(&ctl) != 0 || nng_dial(ctl, url, NULL, NNG_FLAG_NONBLOCK) != 0) {
        fprintf(stderr, "sched_client: cannot dial %s\n", url);
        return 1;
    }
    nng_socket_set_ms(ctl, NNG_OPT_RECVTIMEO, 5000);
    double t_end = now_s() + timeout;
    if (wait_ready || only_status) {
        for (;;) {
            Folio__Envelope *h;
            Folio__StatusReply *st = status(ctl, &h);
            if (st && (only_status || st->worker_ready)) {
                if (only_status)
                    printf("{\"worker_ready\": %s, \"worker_state\": \"%s\", \"num_waiting\": %u, "
                           "\"num_running\": %u, \"kv_blocks_total\": %u, \"kv_blocks_used\": "
                           "%u, \"prefix_cache_queries\": %" PRIu64
                           ", \"prefix_cache_hits\": %" PRIu64 ", \"num_preemptions\": %" PRIu64
                           ", \"steps\": %" PRIu64 ", \"plan_s\": %g, \"backend_s\": %g, "
                           "\"ipc_s\": %g, \"worker_restarts\": %u, \"requests_finished\": %" PRIu64
                           ", \"requests_rejected\": %" PRIu64 ", \"generation_tokens\": %" PRIu64
                           "}\n",
                           st->worker_ready ? "true" : "false", st->worker_state, st->num_waiting,
                           st->num_running, st->kv_blocks_total, st->kv_blocks_used,
                           st->prefix_cache_queries, st->prefix_cache_hits, st->num_preemptions,
                           st->steps, st->step_plan_seconds_total, st->step_gpu_seconds_total,
                           st->step_ipc_seconds_total, st->worker_restarts, st->requests_finished,
                           st->requests_rejected, st->generation_tokens_total);
                folio__envelope__free_unpacked(h, NULL);
                break;
            }
            if (h)
                folio__envelope__free_unpacked(h, NULL);
            if (now_s() > t_end) {
                fprintf(stderr, "sched_client: the worker did not become ready\n");
                return 1;
            }
            usleep(50 * 1000);
        }
        if (only_status)
            return 0;
    }

    char ring_name[256], err[512];
    snprintf(ring_name, sizeof ring_name, "/%s-events-fe%d", instance, id);
    folio_ring_unlink(ring_name, err, sizeof err);
    struct folio_ring *owner, *reader;
    if (folio_ring_create(ring_name, 1 << 20, &owner, err, sizeof err) != 0 ||
        folio_ring_attach_reader(ring_name, &reader, err, sizeof err) != 0) {
        fprintf(stderr, "sched_client: %s\n", err);
        return 1;
    }
    Folio__Register reg = FOLIO__REGISTER__INIT;
    reg.role = FOLIO__REGISTER__ROLE__FRONTEND;
    reg.id = (uint32_t)id;
    reg.pid = (uint32_t)getpid();
    reg.version = FOLIO_VERSION;
    reg.ring_name = ring_name;
    Folio__Envelope env = FOLIO__ENVELOPE__INIT;
    env.body_case = FOLIO__ENVELOPE__BODY_REGISTER;
    env.register_ = &reg;
    Folio__Envelope *rep = request(ctl, &env);
    if (!rep || rep->body_case != FOLIO__ENVELOPE__BODY_REGISTER_REPLY ||
        !rep->register_reply->ok) {
        fprintf(stderr, "sched_client: register failed: %s\n",
                rep && rep->body_case == FOLIO__ENVELOPE__BODY_REGISTER_REPLY
                    ? rep->register_reply->error
                    : "no reply");
        return 1;
    }
    folio__envelope__free_unpacked(rep, NULL);

    snprintf(url, sizeof url, "ipc://%s/scheduler-submit.ipc", run_dir);
    if (nng_push0_open(&push) != 0 || nng_dial(push, url, NULL, 0) != 0) {
        fprintf(stderr, "sched_client: cannot dial %s\n", url);
        return 1;
    }
    int32_t prompt[8192];
    int n_prompt = 0;
    if (prompt_arg) {
        for (const char *p = prompt_arg; *p && n_prompt < 8192;) {
            prompt[n_prompt++] = (int32_t)strtol(p, (char **)&p, 10);
            if (*p == ',')
                p++;
        }
    }
    struct req *reqs = calloc((size_t)nreq, sizeof *reqs);
    double t0 = now_s(), first_token = 0; /* the clock includes submitting */
    for (int r = 0; r < nreq; r++) {
        reqs[r].id = ((uint64_t)id << 48) | (uint64_t)(r + 1);
        if (!prompt_arg) {
            n_prompt = prompt_len;
            for (int i = 0; i < n_prompt; i++)
                prompt[i] = 100 + (r * 131 + i * 7) % 20000;
        }
        Folio__SamplingParams sp = FOLIO__SAMPLING_PARAMS__INIT;
        sp.temperature = (float)temperature;
        sp.top_p = 1;
        sp.repetition_penalty = 1;
        Folio__Submit sub = FOLIO__SUBMIT__INIT;
        sub.request_id = reqs[r].id;
        sub.frontend_id = (uint32_t)id;
        sub.n_prompt_token_ids = (size_t)n_prompt;
        sub.prompt_token_ids = prompt;
        sub.sampling = &sp;
        sub.max_tokens = max_tokens;
        sub.min_tokens = min_tokens;
        sub.ignore_eos = ignore_eos;
        Folio__Grammar g = FOLIO__GRAMMAR__INIT;
        if (regex) {
            g.kind = FOLIO_GRAMMAR_REGEX;
            g.text.data = (uint8_t *)regex;
            g.text.len = strlen(regex);
            sub.grammar = &g;
        }
        Folio__Envelope e = FOLIO__ENVELOPE__INIT;
        e.body_case = FOLIO__ENVELOPE__BODY_SUBMIT;
        e.submit = &sub;
        size_t n = folio__envelope__get_packed_size(&e);
        uint8_t *buf = malloc(n);
        folio__envelope__pack(&e, buf);
        nng_send(push, buf, n, 0);
        free(buf);
    }
    int finished = 0, violations = 0;
    bool abort_sent = false;
    while (finished < nreq && now_s() < t_end) {
        if (folio_ring_wait(reader, 100 * 1000000ll, err, sizeof err) <= 0)
            continue;
        struct folio_ring_record rec;
        while (folio_ring_peek(reader, &rec, err, sizeof err) == 1) {
            struct folio_event_view v;
            if (folio_event_decode(rec.data, rec.len, &v, err, sizeof err) != 0) {
                fprintf(stderr, "sched_client: %s\n", err);
                violations++;
                folio_ring_release(reader);
                continue;
            }
            uint64_t low = v.hdr->request_id & 0xffffffffffffull;
            if (v.hdr->request_id >> 48 != (uint64_t)id || low == 0 || low > (uint64_t)nreq) {
                violations++;
                folio_ring_release(reader);
                continue;
            }
            struct req *q = &reqs[low - 1];
            if (q->finishes) {
                fprintf(stderr, "sched_client: event after the finish of %016" PRIx64 "\n", q->id);
                violations++;
            }
            q->events++;
            if (!first_token && v.hdr->num_tokens)
                first_token = now_s();
            for (uint32_t i = 0; i < v.hdr->num_tokens; i++) {
                if (q->num_tokens == q->cap) {
                    q->cap = q->cap ? q->cap * 2 : 64;
                    q->tokens = realloc(q->tokens, (size_t)q->cap * sizeof *q->tokens);
                }
                q->tokens[q->num_tokens++] = v.token_ids[i];
            }
            if (v.hdr->num_tokens && v.hdr->completion_tokens != (uint32_t)q->num_tokens)
                violations++;
            q->completion = v.hdr->completion_tokens;
            q->cached = v.hdr->cached_tokens;
            if (v.hdr->finish_reason != FOLIO_FINISH_NONE) {
                q->finishes++;
                q->finish = v.hdr->finish_reason;
                q->status = v.hdr->status;
                int ml = (int)v.hdr->message_len < 255 ? (int)v.hdr->message_len : 255;
                memcpy(q->message, v.message, (size_t)ml);
                q->message[ml] = 0;
                finished++;
            }
            folio_ring_release(reader);
            if (abort_after >= 0 && !abort_sent && reqs[0].num_tokens >= abort_after) {
                Folio__Abort ab = FOLIO__ABORT__INIT;
                ab.request_id = reqs[0].id;
                ab.frontend_id = (uint32_t)id;
                Folio__Envelope e = FOLIO__ENVELOPE__INIT;
                e.body_case = FOLIO__ENVELOPE__BODY_ABORT;
                e.abort = &ab;
                uint8_t buf[64];
                size_t n = folio__envelope__pack(&e, buf);
                nng_send(push, buf, n, 0);
                abort_sent = true;
            }
        }
    }
    double wall = now_s() - t0;
    long total_tokens = 0;
    for (int r = 0; r < nreq; r++) {
        struct req *q = &reqs[r];
        total_tokens += q->num_tokens;
        if (q->finishes != 1)
            violations++;
        if (quiet)
            continue;
        printf("{\"id\": \"%016" PRIx64 "\", \"finish\": \"%s\", \"status\": %u, "
               "\"completion_tokens\": %u, \"cached_tokens\": %u, \"events\": %d, \"tokens\": [",
               q->id, q->finishes ? finish_name(q->finish) : "none", q->status, q->completion,
               q->cached, q->events);
        for (int i = 0; i < q->num_tokens; i++)
            printf(i ? ", %d" : "%d", q->tokens[i]);
        printf("], \"message\": \"");
        for (const char *c = q->message; *c; c++)
            if (*c != '"' && *c != '\\')
                putchar(*c);
        printf("\"}\n");
    }
    printf(
        "{\"summary\": {\"requests\": %d, \"finished\": %d, \"violations\": %d, \"tokens\": %ld, "
        "\"wall_s\": %.3f, \"ttft_s\": %.4f, \"tokens_per_s\": %.1f}}\n",
        nreq, finished, violations, total_tokens, wall, first_token ? first_token - t0 : -1,
        wall > 0 ? total_tokens / wall : 0);
    fflush(stdout);
    for (int r = 0; r < nreq; r++)
        free(reqs[r].tokens);
    free(reqs);
    folio_ring_close(reader);
    folio_ring_close(owner);
    nng_close(push);
    nng_close(ctl);
    return (finished == nreq && violations == 0) ? 0 : 1;
}
