/* The records that travel on the shared-memory rings (the data plane).
 *
 * Rings carry raw records, not protobuf: the two ends are processes of the
 * same build on one host (Register checks the version), and the hot path
 * should not allocate. Every record is validated on decode against its own
 * length, so a corrupt or hostile record is an error, never an overread.
 *
 *   scheduler -> worker    step plan     (folio_plan_*)
 *   worker -> scheduler    step result   (folio_result_*)
 *   scheduler -> frontend  token events  (folio_event_*)
 */
#ifndef FOLIO_IPC_RECORDS_H
#define FOLIO_IPC_RECORDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sampling_params.h"

#define FOLIO_VERSION "0.1.0"

/* ---- step plan ---------------------------------------------------------- */

/* A plan's token that is not known when the plan is written: the one its
 * sequence's slot samples in the step before (taken where it already is). */
#define FOLIO_TOKEN_FROM_PREV (-1)

/* Speculative decoding: the most draft tokens one sequence brings to a step, and the most draft
 * positions one step samples (the backends size their sampling rows for it). */
#define FOLIO_MAX_DRAFT_TOKENS 16
#define FOLIO_MAX_DRAFT_ROWS 64

struct folio_plan_seq {
    uint64_t request_id; /* for logs */
    int32_t slot;
    int32_t num_new_tokens;
    int32_t context_len;
    int32_t num_blocks;
    int32_t output_index;
    int32_t sample; /* 0 or 1 */
    struct folio_sampling_params sampling;
    int32_t num_bias;    /* logit bias entries of this sequence (only when it samples) */
    int32_t bias_offset; /* its first entry in the plan's bias array */
    /* Prompt logprobs (echo with logprobs): the logprob of the next prompt
     * token at each of the first num_prompt_lp new positions, with the top
     * num_logprobs; next_prompt_token is the prompt token after this chunk
     * (-1 when the chunk reaches the prompt's end). */
    int32_t num_prompt_lp;
    int32_t next_prompt_token;
    /* Structured output: grammar_kind is -1 for none, else the sequence's enum
     * folio_grammar_kind (common/grammar_kind.h), and the worker's matcher for
     * this slot masks its samples. The sequence's first sampling step on a
     * slot has grammar_new 1 and brings the grammar's text (grammar_len bytes
     * from grammar_offset in the plan's text area) and the tokens the sequence
     * generated before (num_replay ids from replay_offset: a recompute after
     * preemption), which the worker's new matcher replays. */
    int32_t grammar_kind;
    int32_t grammar_new;
    int32_t grammar_offset;
    int32_t grammar_len;
    int32_t replay_offset;
    int32_t num_replay;
    /* Speculative decoding: the last num_draft new tokens are drafts (the token before them is
     * the sequence's last known one), and every one of the last 1 + num_draft positions samples,
     * position j with RNG counter output_index + j. 0: one sample, at the last position. */
    int32_t num_draft;
    int32_t reserved;
};

/* Layout: header, seqs[num_seqs], token_ids[num_tokens], block_ids[sum num_blocks],
 * bias[num_bias] (struct folio_logit_bias, common/sampling_params.h),
 * replay[num_replay], grammar_text[num_grammar_bytes]. */
struct folio_plan_header {
    uint32_t magic; /* FOLIO_PLAN_MAGIC */
    int32_t num_seqs;
    int32_t num_tokens;
    int32_t num_block_ids;
    int32_t num_bias;
    int32_t num_replay;
    int32_t num_grammar_bytes;
    int32_t reserved; /* 0; keeps the header a multiple of 8 bytes */
    uint64_t step_id;
    uint64_t plan_unix_ns; /* when the scheduler wrote it: IPC timing */
};
#define FOLIO_PLAN_MAGIC 0x504c414eu /* "PLAN" */

/* A decoded view into a plan record (pointers into the record). */
struct folio_plan_view {
    const struct folio_plan_header *hdr;
    const struct folio_plan_seq *seqs;
    const int32_t *token_ids;
    const int32_t *block_ids;
    const struct folio_logit_bias *bias;
    const int32_t *replay;
    const char *grammar_text;
};

size_t folio_plan_size(int32_t num_seqs, int32_t num_tokens, int32_t num_block_ids,
                       int32_t num_bias, int32_t num_replay, int32_t num_grammar_bytes);
/* Checks magic, counts and that every array lies inside len bytes, that the
 * per-sequence counts add up, and that each grammar's kind, text and replay
 * lie inside the plan. */
int folio_plan_decode(const void *rec, size_t len, struct folio_plan_view *v, char *err,
                      size_t errlen);

/* ---- step result -------------------------------------------------------- */

struct folio_result_seq {
    int32_t token_id; /* -1 when the sequence did not sample */
    float logprob;
    int32_t num_top; /* top logprobs that follow in the top arrays */
    int32_t top_offset;
    /* Prompt logprobs: num_prompt_lp entries from prompt_lp_offset in the
     * prompt arrays, each with prompt_num_top top logprobs, from
     * prompt_top_offset in the top arrays. */
    int32_t num_prompt_lp;
    int32_t prompt_lp_offset;
    int32_t prompt_top_offset;
    int32_t prompt_num_top;
    /* 1: the sequence's grammar cannot go on (a mask past the engine's limits,
     * a token it refused; the worker's log says which): the scheduler ends the
     * sequence with an error and drops token_id. */
    int32_t grammar_failed;
    /* Speculative decoding: the samples at the sequence's num_draft draft positions, in order,
     * are the rows draft_offset.. of the draft rows (token_id, logprob, num_top, top_offset
     * used); token_id above is the sample at the position before the first draft. */
    int32_t num_draft;
    int32_t draft_offset;
    int32_t reserved;
};

/* Layout: header, seqs[num_seqs], draft rows[num_draft_rows] (struct folio_result_seq),
 * top_ids[num_top], top_logprobs[num_top],
 * prompt_ids[num_prompt_lp], prompt_logprobs[num_prompt_lp]. */
struct folio_result_header {
    uint32_t magic; /* FOLIO_RESULT_MAGIC */
    int32_t num_seqs;
    int32_t num_top;
    int32_t status; /* 0, or -1: the step failed; message follows the arrays */
    int32_t num_prompt_lp;
    int32_t num_draft_rows;
    uint64_t step_id;
    uint64_t backend_ns;   /* time inside launch+collect */
    uint64_t plan_unix_ns; /* echoed from the plan */
};
#define FOLIO_RESULT_MAGIC 0x52534c54u /* "RSLT" */

struct folio_result_view {
    const struct folio_result_header *hdr;
    const struct folio_result_seq *seqs;
    const struct folio_result_seq *draft_rows;
    const int32_t *top_ids;
    const float *top_logprobs;
    const int32_t *prompt_ids;
    const float *prompt_logprobs;
};

/* num_rows: the sequences and the draft rows together. */
size_t folio_result_size(int32_t num_rows, int32_t num_top, int32_t num_prompt_lp);
int folio_result_decode(const void *rec, size_t len, struct folio_result_view *v, char *err,
                        size_t errlen);

/* ---- token events ------------------------------------------------------- */

enum folio_finish_reason {
    FOLIO_FINISH_NONE = 0, /* more tokens follow */
    FOLIO_FINISH_STOP,     /* EOS or a stop token id */
    FOLIO_FINISH_LENGTH,   /* max_tokens or the model's context */
    FOLIO_FINISH_ABORT,    /* the frontend asked */
    FOLIO_FINISH_ERROR,    /* message holds why (e.g. the worker died) */
    FOLIO_FINISH_REJECTED, /* never admitted: status holds 429/400/503 */
};

/* Layout: header, token_ids[num_tokens], logprobs[num_tokens],
 * top_ids[num_tokens*num_top], top_logprobs[num_tokens*num_top], the same
 * four arrays for num_prompt_lp prompt logprobs (the next prompt tokens, in
 * order, each once), message[message_len] (not NUL-terminated). */
struct folio_event_header {
    uint32_t magic; /* FOLIO_EVENT_MAGIC */
    uint32_t num_tokens;
    uint64_t request_id;
    uint32_t finish_reason; /* enum folio_finish_reason */
    uint32_t status;        /* HTTP status for REJECTED/ERROR, else 0 */
    uint32_t prompt_tokens;
    uint32_t completion_tokens; /* so far, these included */
    uint32_t cached_tokens;     /* prompt tokens served from the prefix cache */
    uint32_t num_top;           /* top logprobs per token */
    uint32_t message_len;
    uint32_t retry_after_s; /* for 429 */
    uint32_t num_prompt_lp;
    uint32_t reserved;
};
#define FOLIO_EVENT_MAGIC 0x45564e54u /* "EVNT" */

struct folio_event_view {
    const struct folio_event_header *hdr;
    const int32_t *token_ids;
    const float *logprobs;
    const int32_t *top_ids;
    const float *top_logprobs;
    const int32_t *prompt_ids;
    const float *prompt_logprobs;
    const int32_t *prompt_top_ids;
    const float *prompt_top_logprobs;
    const char *message;
};

size_t folio_event_size(uint32_t num_tokens, uint32_t num_top, uint32_t num_prompt_lp,
                        uint32_t message_len);
int folio_event_decode(const void *rec, size_t len, struct folio_event_view *v, char *err,
                       size_t errlen);

#endif
