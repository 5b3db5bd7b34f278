/* The frontend's /metrics in the Prometheus text format: the request
 * counters and latency histograms (of every frontend, summed through
 * metrics_shared.h), the scheduler's and worker's figures from the newest
 * StatusReply any frontend got (also through metrics_shared.h), and the
 * process's memory (RSS and jemalloc's statistics).
 * Each series is written under Folio's name (folio_*) and, where vLLM has
 * the same series, under vLLM's name and model_name label as well, so that
 * dashboards built for vLLM read Folio unchanged. Updated and rendered on the
 * HTTP loop thread only. */
#ifndef FOLIO_METRICS_H
#define FOLIO_METRICS_H

#include <stdint.h>

#include "json_writer.h"
#include "scheduler_link.h"

#define FOLIO_HIST_MAX_BUCKETS 24

struct folio_histogram {
    const char *name, *help;
    int num_bounds;
    double bounds[FOLIO_HIST_MAX_BUCKETS];
    uint64_t counts[FOLIO_HIST_MAX_BUCKETS + 1]; /* the last is +Inf */
    double sum;
    uint64_t count;
};

#define FOLIO_METRICS_STATUSES 11

struct folio_metrics {
    uint32_t frontend_id;
    /* responses by HTTP status (the last slot counts any other) */
    uint64_t responses[FOLIO_METRICS_STATUSES];
    uint64_t requests_submitted; /* handed to the scheduler; each ends in one finished_* */
    uint64_t finished_stop, finished_length, finished_abort, finished_error, finished_rejected;
    uint64_t prompt_tokens, generation_tokens;
    uint64_t client_disconnects;
    int64_t requests_in_flight;
    struct folio_histogram ttft, itl, e2e, queue;
    struct folio_histogram request_prompt_tokens, request_generation_tokens;
    /* Where a frontend's time goes, so that a token's time budget can name
     * it: the HTTP loop's seconds admitting generation requests (parse,
     * chat template, tokenization, submit) and handling token events
     * (detokenization, the SSE and JSON writing, handing bytes to h2o), and
     * the process's CPU seconds on all its threads (HTTP parsing, socket
     * I/O and the scheduler link are the rest). */
    double admit_seconds, events_seconds, cpu_seconds;
    /* The latest StatusReply this frontend got: published with the counters
     * so that a scrape of any frontend renders the newest (metrics_shared.h). */
    struct folio_link_status sched;
};

void folio_metrics_init(struct folio_metrics *m, uint32_t frontend_id);
void folio_metrics_count_response(struct folio_metrics *m, int status);
void folio_histogram_observe(struct folio_histogram *h, double seconds);
/* A generation request ended: reason "stop" or "length", its end-to-end
 * seconds, prompt and generated tokens. */
void folio_metrics_request_finished(struct folio_metrics *m, const char *reason, double e2e,
                                    uint32_t prompt_tokens, uint32_t generation_tokens);
/* Appends the whole exposition to b, the scheduler's series from m->sched
 * (when valid); model_name labels vLLM's series. */
void folio_metrics_render(const struct folio_metrics *m, const char *model_name,
                          struct folio_jw *b);

#endif
