#include "program_flags.h"

#include <stddef.h>

#define N(a) (sizeof a / sizeof *a)

#define C(f) FOLIO_OPT_FIELD(struct folio_common_flags, f)
const struct folio_opt folio_common_flag_table[] = {
    {"--model", FOLIO_OPT_STR, C(model), NULL, 0, 0, NULL,
     "Hugging Face model directory (config.json, tokenizer.json, weights), or a .gguf file "
     "(or a folder holding one)"},
    {"--drain-seconds", FOLIO_OPT_NUM, C(drain_seconds), "30", 0, 3600, NULL,
     "on SIGTERM, time left to open requests"},
};
const size_t folio_common_flag_count = N(folio_common_flag_table);

#define E(f) FOLIO_OPT_FIELD(struct folio_engine_flags, f)
const struct folio_opt folio_engine_flag_table[] = {
    {"--backend", FOLIO_OPT_CHOICE, E(backend), "cpu", 0, 0, "cpu|cpu-ref|cuda",
     "worker backend (cpu-ref: the CPU backend's f32 reference, the oracle the fast path is "
     "tested against; slower)"},
    {"--dtype", FOLIO_OPT_CHOICE, E(dtype), "auto", 0, 0, "auto|bfloat16",
     "weights and KV cache: bfloat16 on cuda; the cpu backend keeps GGUF's Q4_0/Q4_1/Q8_0 "
     "blocks and bfloat16/float16 weights as they are, with a float16 KV cache (cpu-ref widens "
     "everything to float32) (auto is bfloat16)"},
    {"--quantization", FOLIO_OPT_CHOICE, E(quantization), NULL, 0, 0, "none|fp8",
     "fp8 (vLLM's W8A8): the layers' linear weights quantized at load to float8 e4m3 with a "
     "scale per output channel, activations per token before each product; embedding, norms "
     "and LM head stay bf16; cuda needs FP8 tensor cores (compute capability 8.9+); the cpu "
     "backends emulate it (default: none)"},
    {"--kv-cache-dtype", FOLIO_OPT_CHOICE, E(kv_cache_dtype), "auto", 0, 0, "auto|fp8|fp8_e4m3",
     "fp8 (or fp8_e4m3, vLLM's names): K and V stored in the paged cache as float8 e4m3 with a "
     "scale per layer for each (1.0, values past 448 saturate), twice the tokens in the same "
     "memory; attention reads them back; the cpu backends emulate it (auto: the backend's own, "
     "bfloat16 on cuda)"},
    {"--max-num-seqs", FOLIO_OPT_INT, E(max_num_seqs), NULL, 1, 4096, NULL,
     "sequences per step (default 64 cpu; 1024 cuda, vLLM's default on large GPUs; the KV pool "
     "still bounds what runs)"},
    {"--max-num-batched-tokens", FOLIO_OPT_INT, E(max_num_batched_tokens), NULL, 16, 1 << 20, NULL,
     "token budget per step (default 2048 cpu, 8192 cuda); prompt chunks are also kept to about "
     "half a second of the worker's measured speed"},
    {"--num-kv-blocks", FOLIO_OPT_INT, E(num_kv_blocks), "0", 0, 1 << 24, NULL,
     "KV pool in 16-token blocks (0: the worker sizes it)"},
    {"--max-model-len", FOLIO_OPT_INT, E(max_model_len), NULL, 16, 1 << 24, NULL,
     "prompt + output tokens of a request, at most the model's context (default: the "
     "model's)"},
    {"--gpu-memory-utilization", FOLIO_OPT_NUM, E(gpu_memory_utilization), "0.9", 0.05, 1, NULL,
     "cuda: share of the GPU's memory for the worker"},
    {"--cpu-kv-bytes", FOLIO_OPT_INT, E(cpu_kv_bytes), "1073741824", 1 << 20, 1ll << 40, NULL,
     "cpu: KV pool bytes when --num-kv-blocks is 0"},
    {"--threads", FOLIO_OPT_INT, E(threads), "0", 0, 1024, NULL,
     "cpu worker threads (0: all cores)"},
    {"--max-waiting-requests", FOLIO_OPT_INT, E(max_waiting_requests), "4096", 1, 1 << 24, NULL,
     "waiting requests beyond which new ones get 429"},
    {"--max-pending-prompt-tokens", FOLIO_OPT_INT, E(max_pending_prompt_tokens), "4194304", 1,
     1ll << 40, NULL, "waiting prompt tokens beyond which new requests get 429"},
    {"--enable-prefix-caching", FOLIO_OPT_BOOL, E(enable_prefix_caching), "true", 0, 0, NULL,
     "reuse the KV blocks of prompts' common prefixes"},
    {"--enable-chunked-prefill", FOLIO_OPT_BOOL, E(enable_chunked_prefill), "true", 0, 0, NULL,
     "prompts run in chunks that share steps with decodes; off: each prompt runs whole in one "
     "step, so --max-num-batched-tokens must hold the longest (its default then does)"},
    {"--async-scheduling", FOLIO_OPT_BOOL, E(async_scheduling), "true", 0, 0, NULL,
     "plan the next step while the worker runs this one (two steps in flight); off: each step "
     "is planned after the last one's tokens are back"},
    {"--enforce-eager", FOLIO_OPT_BOOL, E(enforce_eager), "false", 0, 0, NULL,
     "cuda: decode steps run eagerly, never replayed as CUDA graphs (slower; for comparison)"},
    {"--tensor-parallel-size", FOLIO_OPT_INT, E(tensor_parallel_size), "1", 1, 8, NULL,
     "ranks the model's heads, MLP and vocabulary are sharded over; cpu: emulated in the "
     "worker process; cuda: not built yet (one GPU per worker)"},
    {"--heartbeat-timeout", FOLIO_OPT_NUM, E(heartbeat_timeout), "5", 0.5, 3600, NULL,
     "a worker silent this long (s) is killed and restarted"},
    {"--step-timeout", FOLIO_OPT_NUM, E(step_timeout), NULL, 0, 86400, NULL,
     "a step running longer (s) is a hung worker (default 300 cuda, 0 = none on cpu)"},
    {"--seed", FOLIO_OPT_INT, E(seed), NULL, 0, 9e18, NULL,
     "draws the seeds of requests that bring none (default: the clock)"},
    {"--simulate", FOLIO_OPT_BOOL, E(simulate), "false", 0, 0, NULL,
     "a simulated worker (a cost model, no weights)"},
    {"--sim-time-scale", FOLIO_OPT_NUM, E(sim_time_scale), "0", 0, 1e9, NULL,
     "--simulate: 1 sleeps the modelled step time, 0 none"},
    {"--sim-eos-probability", FOLIO_OPT_NUM, E(sim_eos_probability), "0.01", 0, 1, NULL,
     "--simulate: chance that a sampled token is EOS"},
    {"--speculative-config", FOLIO_OPT_STR, E(speculative_config), NULL, 0, 0, NULL,
     "speculative decoding, vLLM's JSON: {\"method\": \"ngram\", \"num_speculative_tokens\": "
     "K, \"prompt_lookup_max\": N, \"prompt_lookup_min\": M} (n-gram drafts from the "
     "sequence's own tokens; the worker's backend must verify drafts: cpu does)"},
};
const size_t folio_engine_flag_count = N(folio_engine_flag_table);

#define SI(f) FOLIO_OPT_FIELD(struct folio_scheduler_internal_flags, f)
const struct folio_opt folio_scheduler_internal_flag_table[] = {
    {"--run-dir", FOLIO_OPT_STR, SI(run_dir), NULL, 0, 0, NULL,
     "ipc socket files (default /tmp/folio-UID)"},
    {"--instance", FOLIO_OPT_STR, SI(instance), NULL, 0, 0, NULL,
     "prefix of shared-memory names (default folio-PID)"},
    {"--worker-bin", FOLIO_OPT_STR, SI(worker_bin), NULL, 0, 0, NULL,
     "folio-worker (default: beside this program)"},
    {"--submit-url", FOLIO_OPT_STR, SI(submit_url), NULL, 0, 0, NULL,
     "nng address for Submit (default ipc://RUN_DIR/scheduler-submit.ipc)"},
    {"--ctl-url", FOLIO_OPT_STR, SI(ctl_url), NULL, 0, 0, NULL,
     "nng address for control (default ipc://RUN_DIR/scheduler-ctl.ipc)"},
    {"--worker-url", FOLIO_OPT_STR, SI(worker_url), NULL, 0, 0, NULL,
     "nng address of the worker (default ipc://RUN_DIR/worker-ctl.ipc)"},
    {"--external-worker", FOLIO_OPT_BOOL, SI(external_worker), NULL, 0, 0, NULL,
     "do not start the worker: one started elsewhere (its own container) runs "
     "folio-worker --args-file RUN_DIR/worker.args; heartbeats tell it lives"},
};
const size_t folio_scheduler_internal_flag_count = N(folio_scheduler_internal_flag_table);

#define H(f) FOLIO_OPT_FIELD(struct folio_http_flags, f)
const struct folio_opt folio_http_flag_table[] = {
    {"--host", FOLIO_OPT_STR, H(host), "0.0.0.0", 0, 0, NULL,
     "address to listen on (0.0.0.0: every interface; 127.0.0.1: this machine only)"},
    {"--port", FOLIO_OPT_INT, H(port), "8000", 0, 65535, NULL, "port to listen on"},
    {"--served-model-name", FOLIO_OPT_STR, H(served_model_name), NULL, 0, 0, NULL,
     "the model's name in the API (default: the model directory's name)"},
    {"--tls-cert", FOLIO_OPT_STR, H(tls_cert), NULL, 0, 0, NULL,
     "PEM certificate chain: HTTPS with HTTP/2 by ALPN (with --tls-key)"},
    {"--tls-key", FOLIO_OPT_STR, H(tls_key), NULL, 0, 0, NULL, "PEM private key"},
    {"--api-key", FOLIO_OPT_LIST, H(api_key), NULL, 0, 0, NULL,
     "a key clients must send as 'Authorization: Bearer KEY' (repeatable; also "
     "FOLIO_API_KEY)"},
    {"--metrics-require-key", FOLIO_OPT_BOOL, H(metrics_require_key), "false", 0, 0, NULL,
     "with API keys, /metrics needs one too"},
    {"--chat-template", FOLIO_OPT_STR, H(chat_template), NULL, 0, 0, NULL,
     "a Jinja chat template file (default: tokenizer_config.json's); "
     "assets/templates/ has tool-calling ones"},
    {"--enable-auto-tool-choice", FOLIO_OPT_BOOL, H(enable_auto_tool_choice), "false", 0, 0, NULL,
     "tool_choice \"auto\" (the default with tools): the model decides, --tool-call-parser "
     "reads its calls"},
    {"--tool-call-parser", FOLIO_OPT_CHOICE, H(tool_call_parser), NULL, 0, 0,
     "hermes|llama3_json|mistral", "how the model writes tool calls (vLLM's names)"},
    {"--reasoning-parser", FOLIO_OPT_CHOICE, H(reasoning_parser), NULL, 0, 0, "deepseek_r1|qwen3",
     "<think>...</think> text goes to reasoning_content"},
    {"--max-logprobs", FOLIO_OPT_INT, H(max_logprobs), "20", 0, 20, NULL,
     "the most top logprobs a request may ask for"},
    {"--disable-log-requests", FOLIO_OPT_BOOL, H(disable_log_requests), "false", 0, 0, NULL,
     "no log line per request"},
    {"--max-body-bytes", FOLIO_OPT_INT, H(max_body_bytes), "16777216", 1024, 1 << 30, NULL,
     "larger request bodies get 413"},
    {"--event-ring-bytes", FOLIO_OPT_INT, H(event_ring_bytes), "8388608", 1 << 16, 1 << 30, NULL,
     "each frontend's token-event ring"},
};
const size_t folio_http_flag_count = N(folio_http_flag_table);

#define FI(f) FOLIO_OPT_FIELD(struct folio_frontend_internal_flags, f)
const struct folio_opt folio_frontend_internal_flag_table[] = {
    {"--frontend-id", FOLIO_OPT_INT, FI(frontend_id), "0", 0, FOLIO_MAX_FRONTENDS - 1, NULL,
     "this frontend's number (its event ring and metrics slot)"},
    {"--run-dir", FOLIO_OPT_STR, FI(run_dir), NULL, 0, 0, NULL,
     "the scheduler's ipc sockets (default /tmp/folio-UID)"},
    {"--instance", FOLIO_OPT_STR, FI(instance), NULL, 0, 0, NULL,
     "prefix of shared-memory names (default folio-UID)"},
    {"--scheduler-url", FOLIO_OPT_STR, FI(scheduler_url), NULL, 0, 0, NULL,
     "the scheduler's Submit address (default ipc://RUN_DIR/scheduler-submit.ipc)"},
    {"--scheduler-ctl-url", FOLIO_OPT_STR, FI(scheduler_ctl_url), NULL, 0, 0, NULL,
     "the scheduler's control address (default ipc://RUN_DIR/scheduler-ctl.ipc)"},
};
const size_t folio_frontend_internal_flag_count = N(folio_frontend_internal_flag_table);
