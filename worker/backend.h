/* The step interface every worker backend implements (CPU, CUDA, the simulation).
 *
 * One step is one flattened token batch with no padding: the prefill chunks
 * and decode tokens of all scheduled sequences side by side. Each sequence
 * brings its range of new tokens, its context length after the step and its
 * KV block table; the backend writes the new tokens' K/V into those blocks,
 * attends over the whole context and, where asked, samples one token from the
 * logits of the sequence's last new token.
 *
 * launch() and collect() are split so that a GPU backend can queue step N+1
 * before step N's results reach the host (DESIGN.md, "The hot path"): a token
 * given as FOLIO_TOKEN_FROM_PREV is the one that sequence's slot sampled in
 * the latest step that sampled it, read where it already is (on the GPU). */
#ifndef FOLIO_WORKER_BACKEND_H
#define FOLIO_WORKER_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fp8.h"         /* enum folio_quantization */
#include "ipc_records.h" /* FOLIO_TOKEN_FROM_PREV */
#include "kv_block.h"
#include "model.h"
#include "sampling_params.h"
struct folio_step_seq {
    int32_t slot;               /* the sequence's slot, stable while it runs: [0, max_seqs) */
    int32_t num_new_tokens;     /* a prefill chunk, or 1 for a decode token */
    int32_t context_len;        /* tokens in the KV cache after this step, the new ones included */
    int32_t num_blocks;         /* entries in block_table: >= ceil(context_len / 16) */
    const int32_t *block_table; /* physical KV block of each logical 16-token block */
    bool sample;                /* false for a prefill chunk that does not end the prompt */
    int32_t output_index;       /* tokens sampled so far for this sequence: the RNG's counter */
    struct folio_sampling_params sampling;
    int32_t num_bias;                    /* logit bias entries, applied when it samples */
    const struct folio_logit_bias *bias; /* [num_bias]; NULL when 0 */
    /* Prompt logprobs (echo with logprobs): at each of the first
     * num_prompt_logprobs new positions, the logprob of the token that follows
     * (the next new token; after the last new one, next_prompt_token) and the
     * top sampling.num_logprobs. 0: none (the CUDA backend refuses them). */
    int32_t num_prompt_logprobs;
    int32_t next_prompt_token;
    /* Structured output: the tokens its grammar allows at this sample, bit i % 32 of word i / 32
     * for token i (grammar/grammar.h's masks, (vocab_size + 31) / 32 words), applied to the
     * logits after the bias, before sampling, so the reported logprobs include it. NULL: no
     * constraint. Only where the backend's caps.grammar says it applies them. */
    const uint32_t *allowed;
    /* Speculative decoding (where caps.verify_drafts): the last num_draft new tokens are drafts,
     * and each of the last 1 + num_draft positions samples, position j with RNG counter
     * output_index + j; the sample at the first of them is the sequence's row, the others its
     * draft rows. No bias, mask, penalties or prompt logprobs with drafts. 0: none. */
    int32_t num_draft;
};

struct folio_step_batch {
    int32_t num_seqs;
    int32_t num_tokens;       /* sum of num_new_tokens */
    const int32_t *token_ids; /* [num_tokens], sequence after sequence */
    const struct folio_step_seq *seqs;
    /* The grammar masks come after launch, through sample_masked (where the backend has it):
     * launch queues the forward, every `allowed` still NULL. */
    bool masks_later;
};

/* Rows: one per sequence, in batch order, then the draft rows (num_draft of each sequence that
 * has drafts, in batch order): the arrays below hold num_seqs + FOLIO_MAX_DRAFT_ROWS rows. */
struct folio_step_result {
    int32_t *token_ids;  /* [num_seqs]; -1 where the sequence did not sample */
    float *logprobs;     /* [num_seqs] logprob of the sampled token under the
                            unmodified distribution (as OpenAI/vLLM report it) */
    int32_t *top_ids;    /* [num_seqs * FOLIO_MAX_LOGPROBS], -1 padded */
    float *top_logprobs; /* [num_seqs * FOLIO_MAX_LOGPROBS] */
    float *logits;       /* optional, NULL to skip: [num_sampling_seqs * vocab]
                            final logits of each sampling sequence, in order, with
                            its logit bias and grammar mask applied (nothing else);
                            tests compare them with the references */
    /* Prompt logprobs, the sequences' entries one after another in batch order
     * (NULL to skip when no sequence asks): the token each one is for, its
     * logprob, and the top num_logprobs of each entry at stride
     * FOLIO_MAX_LOGPROBS. [max_num_tokens] and [max_num_tokens * FOLIO_MAX_LOGPROBS]. */
    int32_t *prompt_ids;
    float *prompt_logprobs;
    int32_t *prompt_top_ids;
    float *prompt_top_logprobs;
};

/* Kernel paths a test forces on the CUDA backend so that it can compare them on one batch
 * (tests/tools/step_driver's "cuda_paths"); all zero is the engine's own choice. */
struct folio_cuda_paths {
    int gemv_max_rows;    /* steps of up to this many rows take the GEMV path (0: 2, -1: none) */
    int splitk_o;         /* K slices of O on the cuBLASLt path, 1-8 (0: by rows) */
    int splitk_down;      /* K slices of down on the cuBLASLt path, 1-8 (0: by rows) */
    bool no_tma_gemm;     /* steps of 3-64 rows on cuBLASLt instead of the TMA GEMM */
    bool one_cta_sampler; /* every row sampled by the one-CTA-a-row kernel */
    bool keep_logits;     /* a step's logits stay readable after the next launch */
    bool gguf_bf16;       /* a GGUF's weights as a bf16 copy, not packed (the packed path's
                             yardstick) */
};

struct folio_backend_options {
    int max_seqs;                 /* slots */
    int max_num_tokens;           /* largest num_tokens of one step */
    int num_kv_blocks;            /* 0: size the pool from memory */
    float gpu_memory_utilization; /* CUDA: fraction of the card the worker may use */
    size_t cpu_kv_bytes;          /* CPU: KV pool size when num_kv_blocks is 0 */
    int num_threads;              /* CPU: 0 = all cores */
    bool cpu_reference;           /* CPU: the f32 reference path (the oracle, --backend cpu-ref)
                                     instead of the packed weights and SIMD kernels */
    bool logits_unread;           /* collect() is never asked for logits (the worker): the CUDA
                                     backend may drop them from the L2 once sampled */
    bool enforce_eager;           /* CUDA: decode steps never replayed as graphs (the yardstick
                                     graphs are held to, and --enforce-eager) */
    int tensor_parallel_size;     /* ranks the model is sharded over (0 or 1: none); the CPU
                                     backend emulates them in this process */
    int num_speculative_tokens;   /* CUDA: drafts a sequence brings to a verify step
                                     (--speculative-config), the shape of the verify graphs
                                     captured at start; 0: none (verify steps run eagerly) */
    enum folio_quantization quantization;     /* --quantization: fp8 quantizes the linear layers at
                                                 load (common/fp8.h); CUDA needs FP8 tensor cores */
    enum folio_kv_cache_dtype kv_cache_dtype; /* --kv-cache-dtype: fp8 keeps K and V as e4m3
                                                 codes (common/fp8.h), half the bytes a token */
    struct folio_cuda_paths cuda_paths;
};

struct folio_backend;

struct folio_backend_ops {
    const char *name;
    /* Queue one step. Its buffers may be reused as soon as launch returns. */
    int (*launch)(struct folio_backend *b, const struct folio_step_batch *batch, char *err,
                  size_t errlen);
    /* For the latest step, launched with masks_later: the same batch with its grammar masks
     * filled in; queues its sampling behind its forward. NULL where the backend cannot take
     * masks after launch (then a constrained step's masks come with it). */
    int (*sample_masked)(struct folio_backend *b, const struct folio_step_batch *batch, char *err,
                         size_t errlen);
    /* Whether the oldest launched step's results are in: 1, 0 not yet, -1 on error (collect
     * then says which). NULL where launch runs the step whole. */
    int (*ready)(struct folio_backend *b);
    /* Wait for the oldest launched step and write its results. */
    int (*collect)(struct folio_backend *b, struct folio_step_result *res, char *err,
                   size_t errlen);
    void (*destroy)(struct folio_backend *b);
};

/* What a backend can do, which the worker's LoadReply tells the scheduler, so that no process
 * decides by a backend's name. */
struct folio_backend_caps {
    int pipeline_depth;   /* steps worth launching before the oldest is collected: 1 where
                             launch() runs the step whole (the CPU), 2 where it only queues it */
    bool prompt_logprobs; /* computes the prompt tokens' logprobs (echo with logprobs) */
    bool grammar;         /* applies a sequence's allowed-token mask (structured outputs) */
    bool host_cores;      /* computes on the host's cores: the worker's own work (grammar masks)
                             stays on its one thread, off the cores the backend computes on */
    bool verify_drafts;   /* samples at several positions of one sequence (num_draft > 0):
                             speculative decoding's verify steps */
};

struct folio_backend {
    const struct folio_backend_ops *ops;
    const struct folio_model *model;
    int num_kv_blocks; /* the pool the scheduler hands out, fixed at creation */
    int max_seqs;
    int max_num_tokens;
    int vocab_size;
    int max_blocks_per_seq; /* the longest block table a sequence may bring; 0: no bound */
    struct folio_backend_caps caps;
    uint32_t *slot_seen; /* folio_step_batch_check's: the check that stamped each slot last */
    uint32_t check_stamp;
};

/* The one check of a step batch against the backend that is to run it, before anything is
 * touched: counts, slots (each once), block tables, token ids, prompt logprobs (where the
 * backend computes them), grammar masks (where it applies them, on sampling sequences),
 * sampling parameters and logit biases. Every backend's launch() calls
 * it first, so the worker's plans and the test drivers' scripts pass the same gate. 0, or -1
 * with a message naming the sequence and the field. */
int folio_step_batch_check(struct folio_backend *b, const struct folio_step_batch *batch, char *err,
                           size_t errlen);
/* sample_masked's check of the masks a batch brings after its launch (the rest was checked at
 * launch): only on sampling sequences, where the backend applies them. */
int folio_backend_masks_check(const struct folio_backend *b, const struct folio_step_batch *batch,
                              char *err, size_t errlen);
/* Frees what the check keeps (a backend's destroy calls it). */
void folio_backend_base_free(struct folio_backend *b);

/* launch + collect: for callers without a pipeline (generate, tests). */
int folio_backend_step(struct folio_backend *b, const struct folio_step_batch *batch,
                       struct folio_step_result *res, char *err, size_t errlen);

/* The quantization a backend serves m with (backend_quant.c): `asked` (--quantization), or fp8
 * where m is an FP8 checkpoint, whatever was asked (said in the log). */
enum folio_quantization folio_backend_quantization(const struct folio_model *m,
                                                   enum folio_quantization asked);
/* Whether m is an FP8 checkpoint (its quantization_config, or F8_E4M3 layer weights). */
bool folio_model_is_fp8(const struct folio_model *m);

int folio_cpu_backend_create(const struct folio_model *m, const struct folio_backend_options *opt,
                             struct folio_backend **out, char *err, size_t errlen);
#ifdef FOLIO_HAVE_CUDA
int folio_cuda_backend_create(const struct folio_model *m, const struct folio_backend_options *opt,
                              struct folio_backend **out, char *err, size_t errlen);
#endif

#endif
