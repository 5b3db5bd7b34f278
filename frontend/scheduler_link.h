/* The frontend's side of the IPC with the scheduler (see /work/notes/ipc.md):
 *
 * - Submit and Abort go out on an nng PUSH socket (one-way, never blocks the
 *   HTTP loop: a full queue or a missing scheduler is an error the caller
 *   turns into 503).
 * - A control thread owns the REQ socket: it Registers (our event ring's
 *   name, pid, epoch), then asks for a StatusReply every status_interval_ms
 *   and keeps the latest one for /health and /metrics. When the scheduler
 *   stops answering it Registers again once it is back (nng redials by
 *   itself), and tells the loop, which fails the requests the old scheduler
 *   had: they will never get events.
 * - A reader thread owns the token-event ring (this frontend creates it and
 *   unlinks it on exit), sleeps on its futex, and hands batches of records to
 *   the loop through the deliver callback.
 *
 * The deliver callback runs on the link's threads: it must only queue the
 * message for the loop (e.g. h2o_multithread_send_message) and return. */
#ifndef FOLIO_SCHEDULER_LINK_H
#define FOLIO_SCHEDULER_LINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "seq_params.h"
#include "loop_phase.h"
#include "queue_time.h"
#include "ipc_records.h"

enum folio_link_msg_kind {
    FOLIO_LINK_EVENTS,     /* records from the event ring */
    FOLIO_LINK_REGISTERED, /* (re)registered; scheduler_epoch says with whom */
    FOLIO_LINK_LOST,       /* the scheduler stopped answering */
};

/* A batch of token-event records, each stored as u32 length + payload padded
 * to 8 bytes (records are 8-byte aligned for folio_event_decode). */
struct folio_link_msg {
    void *loop_link[2]; /* room for the receiver's intrusive list node */
    enum folio_link_msg_kind kind;
    uint32_t scheduler_epoch;
    uint32_t num_records;
    size_t bytes;
    struct folio_link *link; /* for folio_link_msg_free's accounting */
    unsigned char data[];    /* records */
};

/* Iterates the records of a batch: returns 1 with rec/len set, 0 at the end. */
int folio_link_msg_next(const struct folio_link_msg *m, size_t *pos, const void **rec,
                        uint32_t *len);
void folio_link_msg_free(struct folio_link_msg *m);

struct folio_link_status {
    bool valid; /* a StatusReply came within the last second */
    bool registered;
    bool worker_ready;
    char worker_state[96];
    uint32_t num_waiting, num_running;
    uint32_t kv_blocks_total, kv_blocks_used;
    char kv_cache_dtype[16]; /* the worker's --kv-cache-dtype: "auto" or "fp8" */
    uint64_t prefix_cache_queries, prefix_cache_hits, num_preemptions, steps;
    double step_plan_seconds_total, step_gpu_seconds_total, step_ipc_seconds_total;
    double loop_seconds_total[FOLIO_LOOP_PHASES]; /* the scheduler loop's phases */
    uint32_t worker_restarts;
    uint64_t requests_finished, requests_rejected;
    uint64_t prompt_tokens_total, generation_tokens_total;
    uint64_t queue_time_counts[FOLIO_QUEUE_TIME_BUCKETS + 1]; /* submit to admission */
    double queue_time_sum;
    /* speculative decoding: vLLM's counters, accepted drafts per position (num_spec_pos of
     * them, 0 when off), and the self-disablings */
    uint64_t spec_num_drafts, spec_num_draft_tokens, spec_num_accepted_tokens;
    uint64_t spec_accepted_per_pos[FOLIO_MAX_DRAFT_TOKENS];
    int num_spec_pos;
    uint64_t spec_seqs_disabled, spec_steps_batch_off;
    /* which reply these figures are (0: none yet): the scheduler's epoch and its count of
     * StatusReplies, so that the newest of several frontends' statuses can be told */
    uint32_t status_epoch;
    uint64_t status_seq;
    uint64_t scheduler_rss_bytes, worker_rss_bytes;
    /* from RegisterReply */
    uint32_t scheduler_epoch;
    char model_name[128];
    int32_t max_model_len;
    int32_t vocab_size;
};

struct folio_link_config {
    uint32_t frontend_id;
    const char *submit_url; /* ipc://RUN_DIR/scheduler-submit.ipc */
    const char *ctl_url;    /* ipc://RUN_DIR/scheduler-ctl.ipc */
    const char *ring_name;  /* /INSTANCE-events-feID */
    size_t ring_bytes;
    int status_interval_ms;   /* default 100 */
    int lost_after_ms;        /* no reply this long: LOST; default 5000 */
    size_t max_pending_bytes; /* delivered but not yet freed; reading pauses above */
    void (*deliver)(void *arg, struct folio_link_msg *m);
    void *deliver_arg;
};

struct folio_link;

/* Creates the event ring (replacing a leftover of a crashed predecessor),
 * opens and dials the sockets, starts both threads. */
int folio_link_start(const struct folio_link_config *cfg, struct folio_link **out, char *err,
                     size_t errlen);
/* Stops the threads, closes the sockets, unlinks the ring. */
void folio_link_stop(struct folio_link *l);

/* From the loop thread: one choice of a validated request, already
 * tokenized, and what it asks of the engine. Returns 0, or -1 when the
 * scheduler cannot be reached (queue full, not connected). */
int folio_link_submit(struct folio_link *l, uint64_t request_id, const int32_t *prompt_ids,
                      size_t num_prompt_ids, const struct folio_seq_params *p, char *err,
                      size_t errlen);
int folio_link_abort(struct folio_link *l, uint64_t request_id);

/* A copy of the latest status (thread-safe). */
void folio_link_get_status(struct folio_link *l, struct folio_link_status *s);

#endif
