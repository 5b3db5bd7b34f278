#include "metrics.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "kv_block.h"
#include "process_rss.h"

/* jemalloc's mallctl, when jemalloc is the allocator (the sanitizer build
 * keeps ASan's): weak, so the frontend links and runs either way. */
extern int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen)
    __attribute__((weak));

static const int statuses[FOLIO_METRICS_STATUSES - 1] = {200, 400, 401, 404, 405,
                                                         413, 429, 500, 503, 504};

static void hist_init(struct folio_histogram *h, const char *name, const char *help,
                      const double *bounds, int n)
{
    memset(h, 0, sizeof *h);
    h->name = name;
    h->help = help;
    h->num_bounds = n;
    memcpy(h->bounds, bounds, (size_t)n * sizeof *bounds);
}

void folio_metrics_init(struct folio_metrics *m, uint32_t frontend_id)
{
    memset(m, 0, sizeof *m);
    m->frontend_id = frontend_id;
    /* vLLM's buckets, so dashboards built for it read these too. */
    static const double ttft[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25, 0.5,
                                  0.75,  1.0,   2.5,  5.0,  7.5,  10.0, 20.0, 40.0, 80.0};
    static const double itl[] = {0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03,
                                 0.04,  0.05,   0.075, 0.1,  0.15,  0.2,  0.3,   0.4,
                                 0.5,   0.75,   1.0,   2.5,  5.0,   7.5,  10.0,  20.0};
    static const double e2e[] = {0.3,  0.5,  0.8,  1.0,  1.5,  2.0,  2.5,   5.0,   10.0,
                                 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0};
    hist_init(&m->ttft, "folio_time_to_first_token_seconds",
              "Time from request arrival to its first token", ttft,
              (int)(sizeof ttft / sizeof *ttft));
    hist_init(&m->itl, "folio_inter_token_latency_seconds", "Time between streamed tokens", itl,
              (int)(sizeof itl / sizeof *itl));
    hist_init(&m->e2e, "folio_e2e_request_latency_seconds", "Time from request arrival to its end",
              e2e, (int)(sizeof e2e / sizeof *e2e));
    hist_init(&m->queue, "folio_request_first_event_seconds",
              "Time from the request's arrival to the scheduler's first answer", ttft,
              (int)(sizeof ttft / sizeof *ttft));
    static const double tokens[] = {1,     2,      5,      10,     20,     50,    100,
                                    200,   500,    1000,   2000,   5000,   10000, 20000,
                                    50000, 100000, 200000, 500000, 1000000};
    hist_init(&m->request_prompt_tokens, "folio_request_prompt_tokens",
              "Prompt tokens of each finished request", tokens,
              (int)(sizeof tokens / sizeof *tokens));
    hist_init(&m->request_generation_tokens, "folio_request_generation_tokens",
              "Generated tokens of each finished request", tokens,
              (int)(sizeof tokens / sizeof *tokens));
}

void folio_metrics_request_finished(struct folio_metrics *m, const char *reason, double e2e,
                                    uint32_t prompt_tokens, uint32_t generation_tokens)
{
    m->finished_stop += reason[0] == 's' || reason[0] == 't'; /* "tool_calls" is a stop too */
    m->finished_length += reason[0] == 'l';
    folio_histogram_observe(&m->e2e, e2e);
    folio_histogram_observe(&m->request_prompt_tokens, prompt_tokens);
    folio_histogram_observe(&m->request_generation_tokens, generation_tokens);
}

void folio_metrics_count_response(struct folio_metrics *m, int status)
{
    for (int i = 0; i < FOLIO_METRICS_STATUSES - 1; i++)
        if (statuses[i] == status) {
            m->responses[i]++;
            return;
        }
    m->responses[FOLIO_METRICS_STATUSES - 1]++;
}

void folio_histogram_observe(struct folio_histogram *h, double seconds)
{
    int i = 0;
    while (i < h->num_bounds && seconds > h->bounds[i])
        i++;
    h->counts[i]++;
    h->sum += seconds;
    h->count++;
}

static void header(struct folio_jw *b, const char *name, const char *type, const char *help)
{
    folio_jw_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void metric_u(struct folio_jw *b, const char *name, const char *type, const char *help,
                     uint64_t v)
{
    header(b, name, type, help);
    folio_jw_printf(b, "%s %llu\n", name, (unsigned long long)v);
}

static void metric_d(struct folio_jw *b, const char *name, const char *type, const char *help,
                     double v)
{
    header(b, name, type, help);
    folio_jw_printf(b, "%s %.9g\n", name, v);
}

/* labels: "" or a label set without braces (model_name="...") */
static void render_hist_as(struct folio_jw *b, const struct folio_histogram *h, const char *name,
                           const char *labels)
{
    header(b, name, "histogram", h->help);
    const char *sep = *labels ? "," : "";
    uint64_t cum = 0;
    for (int i = 0; i < h->num_bounds; i++) {
        cum += h->counts[i];
        folio_jw_printf(b, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, sep, h->bounds[i],
                        (unsigned long long)cum);
    }
    cum += h->counts[h->num_bounds];
    folio_jw_printf(b, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, sep,
                    (unsigned long long)cum);
    if (*labels)
        folio_jw_printf(b, "%s_sum{%s} %.9g\n%s_count{%s} %llu\n", name, labels, h->sum, name,
                        labels, (unsigned long long)h->count);
    else
        folio_jw_printf(b, "%s_sum %.9g\n%s_count %llu\n", name, h->sum, name,
                        (unsigned long long)h->count);
}

static void render_hist(struct folio_jw *b, const struct folio_histogram *h)
{
    render_hist_as(b, h, h->name, "");
}

static void vllm_u(struct folio_jw *b, const char *name, const char *type, const char *help,
                   const char *labels, uint64_t v)
{
    header(b, name, type, help);
    folio_jw_printf(b, "%s{%s} %llu\n", name, labels, (unsigned long long)v);
}

static void vllm_d(struct folio_jw *b, const char *name, const char *type, const char *help,
                   const char *labels, double v)
{
    header(b, name, type, help);
    folio_jw_printf(b, "%s{%s} %.9g\n", name, labels, v);
}

/* model_name="NAME", with Prometheus' escapes (backslash, quote, newline). */
static void model_label(const char *model, char *out, size_t len)
{
    size_t o = (size_t)snprintf(out, len, "model_name=\"");
    for (const char *p = model; *p && o + 4 < len; p++) {
        if (*p == '\\' || *p == '"')
            out[o++] = '\\', out[o++] = *p;
        else if (*p == '\n')
            out[o++] = '\\', out[o++] = 'n';
        else
            out[o++] = *p;
    }
    snprintf(out + o, len - o, "\"");
}

/* vLLM's names and label for the series a vLLM dashboard reads. */
static void render_vllm(const struct folio_metrics *m, const struct folio_link_status *s,
                        const char *model, struct folio_jw *b)
{
    char l[400], l2[480];
    model_label(model, l, sizeof l);
    render_hist_as(b, &m->ttft, "vllm:time_to_first_token_seconds", l);
    render_hist_as(b, &m->itl, "vllm:inter_token_latency_seconds", l);
    render_hist_as(b, &m->itl, "vllm:time_per_output_token_seconds", l); /* its older name */
    render_hist_as(b, &m->e2e, "vllm:e2e_request_latency_seconds", l);
    render_hist_as(b, &m->request_prompt_tokens, "vllm:request_prompt_tokens", l);
    render_hist_as(b, &m->request_generation_tokens, "vllm:request_generation_tokens", l);
    if (s->valid) {
        /* the scheduler's: from submit to first admission, all frontends */
        struct folio_histogram q;
        hist_init(&q, NULL, "Time requests waited for their first admission",
                  folio_queue_time_bounds, FOLIO_QUEUE_TIME_BUCKETS);
        for (int i = 0; i <= FOLIO_QUEUE_TIME_BUCKETS; i++) {
            q.counts[i] = s->queue_time_counts[i];
            q.count += q.counts[i];
        }
        q.sum = s->queue_time_sum;
        render_hist_as(b, &q, "vllm:request_queue_time_seconds", l);
    }
    vllm_u(b, "vllm:prompt_tokens_total", "counter", "Prompt tokens of all requests", l,
           m->prompt_tokens);
    vllm_u(b, "vllm:generation_tokens_total", "counter", "Tokens generated for all requests", l,
           m->generation_tokens);
    header(b, "vllm:request_success_total", "counter", "Finished requests by finish reason");
    const char *reasons[] = {"stop", "length", "abort"};
    const uint64_t counts[] = {m->finished_stop, m->finished_length, m->finished_abort};
    for (int i = 0; i < 3; i++) {
        snprintf(l2, sizeof l2, "%s,finished_reason=\"%s\"", l, reasons[i]);
        folio_jw_printf(b, "vllm:request_success_total{%s} %llu\n", l2,
                        (unsigned long long)counts[i]);
    }
    if (!s->valid)
        return;
    /* vLLM's CacheConfig as an info gauge: the labels carry the values, the value is 1. */
    header(b, "vllm:cache_config_info", "gauge", "Information of the LLMEngine CacheConfig");
    folio_jw_printf(b,
                    "vllm:cache_config_info{block_size=\"%d\",cache_dtype=\"%s\","
                    "num_gpu_blocks=\"%u\"} 1\n",
                    FOLIO_KV_BLOCK_SIZE, s->kv_cache_dtype, s->kv_blocks_total);
    double usage = s->kv_blocks_total ? (double)s->kv_blocks_used / s->kv_blocks_total : 0.0;
    vllm_u(b, "vllm:num_requests_running", "gauge", "Requests being generated", l, s->num_running);
    vllm_u(b, "vllm:num_requests_waiting", "gauge", "Requests waiting for admission", l,
           s->num_waiting);
    vllm_d(b, "vllm:kv_cache_usage_perc", "gauge", "Fraction of KV cache blocks in use (0-1)", l,
           usage);
    vllm_d(b, "vllm:gpu_cache_usage_perc", "gauge", "Fraction of KV cache blocks in use (0-1)", l,
           usage);
    vllm_u(b, "vllm:prefix_cache_queries_total", "counter",
           "Prompt tokens looked up in the prefix cache", l, s->prefix_cache_queries);
    vllm_u(b, "vllm:prefix_cache_hits_total", "counter", "Prompt tokens found in the prefix cache",
           l, s->prefix_cache_hits);
    vllm_u(b, "vllm:num_preemptions_total", "counter", "Sequences preempted", l,
           s->num_preemptions);
    vllm_u(b, "vllm:spec_decode_num_drafts_total", "counter",
           "Speculative decoding: sequences verified with drafts", l, s->spec_num_drafts);
    vllm_u(b, "vllm:spec_decode_num_draft_tokens_total", "counter",
           "Speculative decoding: draft tokens proposed", l, s->spec_num_draft_tokens);
    vllm_u(b, "vllm:spec_decode_num_accepted_tokens_total", "counter",
           "Speculative decoding: draft tokens accepted", l, s->spec_num_accepted_tokens);
    header(b, "vllm:spec_decode_num_accepted_tokens_per_pos", "counter",
           "Speculative decoding: draft tokens accepted at each draft position");
    for (int i = 0; i < s->num_spec_pos; i++)
        folio_jw_printf(b,
                        "vllm:spec_decode_num_accepted_tokens_per_pos{%s,position=\"%d\"} %llu\n",
                        l, i, (unsigned long long)s->spec_accepted_per_pos[i]);
}

static void render_jemalloc(struct folio_jw *b)
{
    if (!mallctl)
        return;
    uint64_t epoch = 1;
    size_t sz = sizeof epoch;
    /* Writing the epoch refreshes the cached statistics. */
    if (mallctl("epoch", &epoch, &sz, &epoch, sz) != 0)
        return;
    static const char *const names[] = {"allocated", "active", "metadata",
                                        "resident",  "mapped", "retained"};
    header(b, "folio_jemalloc_bytes", "gauge", "jemalloc's stats.* of this process");
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char key[64];
        size_t v = 0;
        sz = sizeof v;
        snprintf(key, sizeof key, "stats.%s", names[i]);
        if (mallctl(key, &v, &sz, NULL, 0) == 0)
            folio_jw_printf(b, "folio_jemalloc_bytes{stat=\"%s\"} %zu\n", names[i], v);
    }
}

void folio_metrics_render(const struct folio_metrics *m, const char *model_name, struct folio_jw *b)
{
    const struct folio_link_status *s = &m->sched;
    header(b, "folio_http_responses_total", "counter", "HTTP responses of all frontends by status");
    for (int i = 0; i < FOLIO_METRICS_STATUSES; i++) {
        if (i < FOLIO_METRICS_STATUSES - 1)
            folio_jw_printf(b, "folio_http_responses_total{code=\"%d\"} %llu\n", statuses[i],
                            (unsigned long long)m->responses[i]);
        else
            folio_jw_printf(b, "folio_http_responses_total{code=\"other\"} %llu\n",
                            (unsigned long long)m->responses[i]);
    }
    metric_u(b, "folio_requests_submitted_total", "counter",
             "Generation requests the frontends handed to the scheduler", m->requests_submitted);
    header(b, "folio_requests_finished_total", "counter",
           "Generation requests of all frontends by finish reason");
    folio_jw_printf(b,
                    "folio_requests_finished_total{reason=\"stop\"} %llu\n"
                    "folio_requests_finished_total{reason=\"length\"} %llu\n"
                    "folio_requests_finished_total{reason=\"abort\"} %llu\n"
                    "folio_requests_finished_total{reason=\"error\"} %llu\n"
                    "folio_requests_finished_total{reason=\"rejected\"} %llu\n",
                    (unsigned long long)m->finished_stop, (unsigned long long)m->finished_length,
                    (unsigned long long)m->finished_abort, (unsigned long long)m->finished_error,
                    (unsigned long long)m->finished_rejected);
    metric_u(b, "folio_client_disconnects_total", "counter",
             "Requests whose client went away before the end (aborted)", m->client_disconnects);
    metric_u(b, "folio_requests_in_flight", "gauge", "Generation requests open on all frontends",
             (uint64_t)(m->requests_in_flight < 0 ? 0 : m->requests_in_flight));
    metric_u(b, "folio_prompt_tokens_total", "counter", "Prompt tokens of all requests",
             m->prompt_tokens);
    metric_u(b, "folio_generation_tokens_total", "counter", "Tokens generated for all requests",
             m->generation_tokens);
    header(b, "folio_frontend_seconds_total", "counter",
           "The frontends' HTTP loop time admitting requests and handling token events");
    folio_jw_printf(b,
                    "folio_frontend_seconds_total{phase=\"admit\"} %.9g\n"
                    "folio_frontend_seconds_total{phase=\"events\"} %.9g\n",
                    m->admit_seconds, m->events_seconds);
    metric_d(b, "folio_frontend_cpu_seconds_total", "counter",
             "CPU time of the frontend processes, all threads", m->cpu_seconds);
    render_hist(b, &m->ttft);
    render_hist(b, &m->itl);
    render_hist(b, &m->e2e);
    render_hist(b, &m->queue);
    render_hist(b, &m->request_prompt_tokens);
    render_hist(b, &m->request_generation_tokens);
    render_vllm(m, s, model_name, b);

    /* The scheduler's view, from the newest StatusReply of any frontend. */
    metric_u(b, "folio_scheduler_up", "gauge", "1 when the scheduler answered within 1 s",
             s->valid);
    metric_u(b, "folio_worker_ready", "gauge", "1 when the scheduler reports its worker ready",
             s->valid && s->worker_ready);
    if (s->valid) {
        metric_u(b, "folio_num_requests_waiting", "gauge", "Requests waiting for admission",
                 s->num_waiting);
        metric_u(b, "folio_num_requests_running", "gauge", "Requests being generated",
                 s->num_running);
        metric_u(b, "folio_kv_blocks_total", "gauge", "KV cache blocks of the worker",
                 s->kv_blocks_total);
        metric_u(b, "folio_kv_blocks_used", "gauge", "KV cache blocks in use", s->kv_blocks_used);
        header(b, "folio_kv_cache_info", "gauge",
               "The KV cache's element type (--kv-cache-dtype) and block size, as labels");
        folio_jw_printf(b, "folio_kv_cache_info{cache_dtype=\"%s\",block_size=\"%d\"} 1\n",
                        s->kv_cache_dtype, FOLIO_KV_BLOCK_SIZE);
        metric_d(b, "folio_kv_cache_usage_perc", "gauge", "Fraction of KV cache blocks in use",
                 s->kv_blocks_total ? (double)s->kv_blocks_used / s->kv_blocks_total : 0.0);
        metric_u(b, "folio_prefix_cache_queries_total", "counter",
                 "Prompt blocks looked up in the prefix cache", s->prefix_cache_queries);
        metric_u(b, "folio_prefix_cache_hits_total", "counter",
                 "Prompt blocks found in the prefix cache", s->prefix_cache_hits);
        metric_u(b, "folio_num_preemptions_total", "counter", "Sequences preempted",
                 s->num_preemptions);
        metric_u(b, "folio_steps_total", "counter", "Engine steps run", s->steps);
        metric_u(b, "folio_spec_decode_seqs_disabled_total", "counter",
                 "Sequences whose low draft acceptance turned speculative decoding off",
                 s->spec_seqs_disabled);
        metric_u(b, "folio_spec_decode_steps_batch_off_total", "counter",
                 "Steps planned without drafts because the decoding batch was too large",
                 s->spec_steps_batch_off);
        metric_d(b, "folio_step_plan_seconds_total", "counter", "Scheduler time planning steps",
                 s->step_plan_seconds_total);
        metric_d(b, "folio_step_backend_seconds_total", "counter",
                 "Worker time inside the backend (GPU step)", s->step_gpu_seconds_total);
        metric_d(b, "folio_step_ipc_seconds_total", "counter",
                 "Step round trips minus planning and backend time", s->step_ipc_seconds_total);
        header(b, "folio_scheduler_loop_seconds_total", "counter",
               "The scheduler loop's time by phase (common/loop_phase.h)");
        for (int i = 0; i < FOLIO_LOOP_PHASES; i++)
            folio_jw_printf(b, "folio_scheduler_loop_seconds_total{phase=\"%s\"} %.9g\n",
                            folio_loop_phase_name(i), s->loop_seconds_total[i]);
        metric_u(b, "folio_worker_restarts_total", "counter", "Workers restarted",
                 s->worker_restarts);
        metric_u(b, "folio_scheduler_requests_finished_total", "counter",
                 "Requests finished by the scheduler (all frontends)", s->requests_finished);
        metric_u(b, "folio_scheduler_requests_rejected_total", "counter",
                 "Requests rejected by admission control (all frontends)", s->requests_rejected);
        metric_u(b, "folio_scheduler_prompt_tokens_total", "counter",
                 "Prompt tokens processed (all frontends)", s->prompt_tokens_total);
        metric_u(b, "folio_scheduler_generation_tokens_total", "counter",
                 "Tokens generated (all frontends)", s->generation_tokens_total);
    }
    metric_u(b, "process_resident_memory_bytes", "gauge", "Resident memory of this frontend",
             folio_process_rss_bytes());
    if (s->valid) {
        header(b, "folio_resident_memory_bytes", "gauge",
               "Resident memory of the scheduler and of its worker (from its last heartbeat)");
        folio_jw_printf(b,
                        "folio_resident_memory_bytes{process=\"scheduler\"} %llu\n"
                        "folio_resident_memory_bytes{process=\"worker\"} %llu\n",
                        (unsigned long long)s->scheduler_rss_bytes,
                        (unsigned long long)s->worker_rss_bytes);
    }
    render_jemalloc(b);
}
