/* folio-worker: one backend (cpu, cuda, or the scheduler's simulation) behind
 * two shared-memory rings. The scheduler starts it with flags, it loads the
 * model, says so with a LoadReply on the worker-ctl socket, then runs every
 * step plan that arrives and writes back its result, with a Heartbeat every
 * 500 ms from a small thread.
 *
 * Pipeline (DESIGN.md, "The hot path"): when plan N+1 is already in the ring
 * while step N runs, N+1 is launched before N is collected, so a GPU backend
 * queues it behind N and its FROM_PREV tokens never visit the host.
 *
 * A backend error ends the process: a failed step's result (status -1 with
 * the message) tells the scheduler why, and exit status 1 follows; the
 * scheduler restarts a fresh worker. */
#include <errno.h>
#include <nng/nng.h>
#include <nng/protocol/pipeline0/push.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "folio.pb-c.h"
#include "grammar_slots.h"
#include "ipc_records.h"
#include "log.h"
#include "model.h"
#include "options.h"
#include "process_rss.h"
#include "shm_ring.h"
#include "sim_backend.h"
#include "step_io.h"
#include "clock.h"

#define PIPELINE_DEPTH 2

struct worker_args {
    const char *model_dir, *backend, *plan_ring, *result_ring, *ctl_url, *quantization;
    const char *kv_cache_dtype;
    int64_t max_seqs, max_num_tokens, num_kv_blocks, threads;
    double gpu_memory_utilization;
    int64_t cpu_kv_bytes;
    double sim_time_scale, sim_eos_probability;
    int64_t sim_vocab, sim_eos_id;
    bool enforce_eager;
    int64_t tensor_parallel_size;
    int64_t num_speculative_tokens;
};

#define W(f) FOLIO_OPT_FIELD(struct worker_args, f)
static const struct folio_opt worker_flags[] = {
    {"--plan-ring", FOLIO_OPT_STR, W(plan_ring), NULL, 0, 0, NULL, "step-plan ring (required)"},
    {"--result-ring", FOLIO_OPT_STR, W(result_ring), NULL, 0, 0, NULL,
     "step-result ring (required)"},
    {"--ctl-url", FOLIO_OPT_STR, W(ctl_url), NULL, 0, 0, NULL,
     "the scheduler's worker socket (required)"},
    {"--model", FOLIO_OPT_STR, W(model_dir), NULL, 0, 0, NULL, "model directory"},
    {"--backend", FOLIO_OPT_CHOICE, W(backend), "cpu", 0, 0, "cpu|cpu-ref|cuda|sim", "backend"},
    {"--max-seqs", FOLIO_OPT_INT, W(max_seqs), "64", 1, 4096, NULL, "sequence slots"},
    {"--max-num-tokens", FOLIO_OPT_INT, W(max_num_tokens), "2048", 16, 1 << 20, NULL,
     "tokens of one step"},
    {"--num-kv-blocks", FOLIO_OPT_INT, W(num_kv_blocks), "0", 0, 1 << 24, NULL,
     "KV pool blocks (0: sized from memory)"},
    {"--gpu-memory-utilization", FOLIO_OPT_NUM, W(gpu_memory_utilization), "0.9", 0.05, 1, NULL,
     "cuda: share of the GPU's memory"},
    {"--cpu-kv-bytes", FOLIO_OPT_INT, W(cpu_kv_bytes), "1073741824", 1 << 20, 1ll << 40, NULL,
     "cpu: KV pool bytes"},
    {"--threads", FOLIO_OPT_INT, W(threads), "0", 0, 1024, NULL, "cpu threads (0: all cores)"},
    {"--enforce-eager", FOLIO_OPT_BOOL, W(enforce_eager), "false", 0, 0, NULL,
     "cuda: no CUDA graphs"},
    {"--tensor-parallel-size", FOLIO_OPT_INT, W(tensor_parallel_size), "1", 1, 8, NULL,
     "cpu: ranks emulated in this process"},
    {"--num-speculative-tokens", FOLIO_OPT_INT, W(num_speculative_tokens), "0", 0,
     FOLIO_MAX_DRAFT_TOKENS, NULL, "cuda: drafts a sequence verifies in a step (verify graphs)"},
    {"--quantization", FOLIO_OPT_CHOICE, W(quantization), "none", 0, 0, "none|fp8",
     "fp8: linear weights and activations in float8 e4m3 (common/fp8.h)"},
    {"--kv-cache-dtype", FOLIO_OPT_CHOICE, W(kv_cache_dtype), "auto", 0, 0, "auto|fp8|fp8_e4m3",
     "fp8 (fp8_e4m3): K and V in the paged cache as float8 e4m3 (common/fp8.h)"},
    {"--sim-time-scale", FOLIO_OPT_NUM, W(sim_time_scale), "0", 0, 1e9, NULL,
     "sim: scale of the modelled step time"},
    {"--sim-vocab", FOLIO_OPT_INT, W(sim_vocab), "32000", 2, 1 << 24, NULL, "sim: vocabulary"},
    {"--sim-eos-id", FOLIO_OPT_INT, W(sim_eos_id), "2", -1, 1 << 24, NULL,
     "sim: EOS id (-1: none)"},
    {"--sim-eos-probability", FOLIO_OPT_NUM, W(sim_eos_probability), "0.01", 0, 1, NULL,
     "sim: chance of EOS"},
};

/* 0, 1 after --help, -1 on a bad flag (printed). The scheduler passes these
 * flags, not a user, so errors name folio-worker itself. */
static int parse_args(int argc, char **argv, struct worker_args *a)
{
    memset(a, 0, sizeof *a);
    struct folio_opt_group g = {NULL, worker_flags, sizeof worker_flags / sizeof *worker_flags, a,
                                NULL};
    int rc = folio_opts_parse("folio-worker",
                              "usage: folio-worker --plan-ring NAME --result-ring NAME --ctl-url "
                              "URL [options]\n       folio-worker --args-file FILE "
                              "[options that override it]\nStarted by folio-scheduler, which "
                              "creates the rings and listens on the URL; or, beside "
                              "folio-scheduler --external-worker (its own container), with the "
                              "arguments it wrote to RUN_DIR/worker.args.",
                              &g, 1, argc, argv);
    if (rc != 0)
        return rc;
    if (!a->plan_ring || !a->result_ring || !a->ctl_url) {
        fprintf(stderr, "folio-worker: --plan-ring, --result-ring and --ctl-url are required\n");
        return -1;
    }
    return 0;
}

/* ---- --args-file ------------------------------------------------------------ */

#define ARGS_FILE_WAIT_S 60
#define ARGS_FILE_MAX_ARGS 64

static char *args_file_text; /* the expanded argv's strings from the file point here */
static char **expanded_argv;

/* `--args-file FILE`: the arguments an external-worker scheduler wrote, one
 * per line, in place of the flag; later flags override them (e.g. --threads).
 * The scheduler may still be starting (a container restarted before it), so
 * the file is waited for. Returns 0 (argc and argv replaced) or -1. */
static int expand_args_file(int *argcp, char ***argvp)
{
    int argc = *argcp, at = -1;
    char **argv = *argvp;
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--args-file"))
            at = i;
    if (at < 0)
        return 0;
    const char *path = argv[at + 1];
    FILE *f = NULL;
    for (int waited = 0; !(f = fopen(path, "r")) && errno == ENOENT; waited++) {
        if (waited == 0)
            folio_log_info(0, "waiting for %s (written by folio-scheduler --external-worker)",
                           path);
        if (waited >= ARGS_FILE_WAIT_S * 10)
            break;
        usleep(100 * 1000);
    }
    if (!f) {
        fprintf(stderr, "folio-worker: --args-file %s: %s\n", path, strerror(errno));
        return -1;
    }
    size_t cap = 0;
    ssize_t n = getdelim(&args_file_text, &cap, '\0', f);
    fclose(f);
    expanded_argv = calloc((size_t)argc + ARGS_FILE_MAX_ARGS + 1, sizeof *expanded_argv);
    if (n < 0 || !expanded_argv) {
        fprintf(stderr, "folio-worker: cannot read --args-file %s\n", path);
        return -1;
    }
    int out = 0;
    for (int i = 0; i < at; i++)
        expanded_argv[out++] = argv[i];
    for (char *save = NULL, *line = strtok_r(args_file_text, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        if (out == at + ARGS_FILE_MAX_ARGS) {
            fprintf(stderr, "folio-worker: --args-file %s: too many arguments\n", path);
            return -1;
        }
        expanded_argv[out++] = line;
    }
    for (int i = at + 2; i < argc; i++)
        expanded_argv[out++] = argv[i];
    *argcp = out;
    *argvp = expanded_argv;
    return 0;
}

static void free_args_file(void)
{
    free(args_file_text);
    free(expanded_argv);
}

/* ---- control socket: LoadReply and heartbeats ----------------------------- */

static nng_socket ctl_sock;
static atomic_bool heartbeat_stop;

static int send_envelope(Folio__Envelope *env)
{
    size_t n = folio__envelope__get_packed_size(env);
    void *buf = nng_alloc(n ? n : 1);
    if (!buf)
        return -1;
    folio__envelope__pack(env, buf);
    int rv = nng_send(ctl_sock, buf, n, NNG_FLAG_ALLOC);
    if (rv != 0) {
        nng_free(buf, n ? n : 1);
        return -1;
    }
    return 0;
}

static void *heartbeat_main(void *arg)
{
    (void)arg;
    while (!atomic_load(&heartbeat_stop)) {
        Folio__Heartbeat hb = FOLIO__HEARTBEAT__INIT;
        hb.pid = (uint32_t)getpid();
        hb.unix_ns = folio_unix_ns();
        hb.rss_bytes = folio_process_rss_bytes();
        Folio__Envelope env = FOLIO__ENVELOPE__INIT;
        env.body_case = FOLIO__ENVELOPE__BODY_HEARTBEAT;
        env.heartbeat = &hb;
        send_envelope(&env);
        usleep(500 * 1000);
    }
    return NULL;
}

static void send_load_reply(bool ok, const char *error, const struct folio_backend *b, int vocab,
                            int max_len, bool grammar)
{
    Folio__LoadReply r = FOLIO__LOAD_REPLY__INIT;
    r.ok = ok;
    r.error = (char *)(error ? error : "");
    if (b) {
        r.num_kv_blocks = b->num_kv_blocks;
        r.vocab_size = vocab;
        r.max_model_len = max_len;
        r.pipeline_depth = b->caps.pipeline_depth;
        r.prompt_logprobs = b->caps.prompt_logprobs;
        r.grammar = grammar;
        r.verify_drafts = b->caps.verify_drafts;
    }
    Folio__Envelope env = FOLIO__ENVELOPE__INIT;
    env.body_case = FOLIO__ENVELOPE__BODY_LOAD_REPLY;
    env.load_reply = &r;
    send_envelope(&env);
}

/* ---- the step loop -------------------------------------------------------- */

struct launched {
    struct folio_plan_header hdr; /* copied: the plan record is released at launch */
    int32_t *num_logprobs;
    int32_t *num_draft;
    uint64_t launch_ns;
    bool constrained;             /* samples under a grammar */
    struct folio_grammar_step gs; /* its sequences' grammars, until its tokens are committed */
};

static volatile sig_atomic_t stop_requested;

static void on_term(int sig)
{
    (void)sig;
    stop_requested = 1;
}

static int write_result(struct folio_ring *ring, const void *rec, size_t len, char *err,
                        size_t errlen)
{
    for (;;) {
        int rc = folio_ring_try_write(ring, rec, (uint32_t)len, err, errlen);
        if (rc != 0)
            return rc < 0 ? -1 : 0;
        /* Full: the scheduler is behind; wait for it (back-pressure). */
        if (folio_ring_wait_space(ring, (uint32_t)len, 100 * 1000000ll, err, errlen) < 0)
            return -1;
        if (stop_requested)
            return -1;
    }
}

/* The masks of the step launched with masks_later (its batch `awaiting`, its plan record still
 * held), once every earlier step's tokens are committed: filled, handed to the backend, and the
 * plan record released. */
static int finish_masks(struct folio_backend *b, struct folio_step_io *io, struct folio_ring *plans,
                        const struct folio_step_batch *awaiting, struct launched *l, char *err,
                        size_t errlen)
{
    folio_step_io_fill_masks(io, &l->gs);
    int rc = b->ops->sample_masked(b, awaiting, err, errlen);
    folio_ring_release(plans);
    return rc;
}

/* stale_epoch: the plan ring's writer epoch when this worker loaded. Plans
 * of it were written for a predecessor (the scheduler starts a new epoch once
 * it has this worker's LoadReply) and are skipped. */
static int run_steps(struct folio_backend *b, struct folio_ring *plans, struct folio_ring *results,
                     struct folio_step_io *io, uint32_t stale_epoch, char *err, size_t errlen)
{
    struct launched q[PIPELINE_DEPTH];
    int rc = 0;
    memset(q, 0, sizeof q);
    for (int i = 0; i < PIPELINE_DEPTH; i++)
        if (!(q[i].num_logprobs = calloc((size_t)io->max_seqs, sizeof(int32_t))) ||
            !(q[i].num_draft = calloc((size_t)io->max_seqs, sizeof(int32_t))) ||
            folio_grammar_step_init(&q[i].gs, io->max_seqs) != 0) {
            snprintf(err, errlen, "worker: out of memory");
            rc = -1;
        }
    /* A backend that runs a step whole inside launch() says depth 1: launching
     * N+1 before collecting N would hold N's tokens back for a whole step. */
    int depth = b->caps.pipeline_depth < 1                ? 1
                : b->caps.pipeline_depth > PIPELINE_DEPTH ? PIPELINE_DEPTH
                                                          : b->caps.pipeline_depth;
    /* A constrained step's masks need the previous step's tokens committed. Where the backend
     * takes masks after launch, its forward is queued at once and its masks follow once the
     * previous step is collected (its plan record held until then); elsewhere it runs alone. */
    bool late_masks = depth > 1 && b->ops->sample_masked;
    struct folio_step_batch awaiting = {0}; /* the latest step's batch, launched with masks_later */
    bool holding = false;
    int head = 0, count = 0;
    uint64_t failed_step = 0, failed_plan_ns = 0;
    while (rc == 0 && !stop_requested) {
        if (count == 0) {
            int w = folio_ring_wait(plans, 100 * 1000000ll, err, errlen);
            if (w < 0) {
                rc = -1;
                break;
            }
            if (w == 0)
                continue;
        }
        /* Launch every plan already waiting, up to the pipeline depth. */
        bool plan_waits = false;
        while (count < depth && !holding &&
               !(count > 0 && !late_masks && q[(head + count - 1) % PIPELINE_DEPTH].constrained)) {
            struct folio_ring_record rec;
            int r = folio_ring_peek(plans, &rec, err, errlen);
            if (r < 0) {
                rc = -1;
                break;
            }
            if (r == 0)
                break;
            if (rec.epoch == stale_epoch) {
                folio_ring_release(plans);
                continue;
            }
            struct folio_plan_view v;
            struct folio_step_batch batch;
            struct launched *l = &q[(head + count) % PIPELINE_DEPTH];
            int dr = folio_plan_decode(rec.data, rec.len, &v, err, errlen);
            bool constrained = dr == 0 && folio_grammar_plan_constrained(&v);
            if (constrained && count > 0 && !late_masks) {
                plan_waits = true; /* in the ring, for the steps in flight */
                break;
            }
            if (dr != 0 || folio_step_io_batch(io, &v, &l->gs, constrained && late_masks, &batch,
                                               err, errlen) != 0) {
                const struct folio_plan_header *h = rec.data;
                failed_step = rec.len >= sizeof *h ? h->step_id : 0;
                failed_plan_ns = rec.len >= sizeof *h ? h->plan_unix_ns : 0;
                folio_ring_release(plans);
                rc = -1;
                break;
            }
            l->hdr = *v.hdr;
            l->constrained = constrained;
            memcpy(l->num_logprobs, io->num_logprobs, (size_t)v.hdr->num_seqs * sizeof(int32_t));
            memcpy(l->num_draft, io->num_draft, (size_t)v.hdr->num_seqs * sizeof(int32_t));
            l->launch_ns = folio_mono_ns();
            if (b->ops->launch(b, &batch, err, errlen) != 0) {
                failed_step = v.hdr->step_id;
                failed_plan_ns = v.hdr->plan_unix_ns;
                rc = -1;
                break;
            }
            count++;
            if (batch.masks_later) {
                awaiting = batch; /* points into the plan record, released with its masks */
                holding = true;
            } else {
                folio_ring_release(plans);
            }
        }
        if (rc != 0 || count == 0)
            continue;
        /* A plan that arrives while the oldest step runs is launched then, not after it: the
         * GPU goes from step to step without waiting for this loop. */
        if (b->ops->ready && count < depth && !holding && !plan_waits &&
            (late_masks || !q[(head + count - 1) % PIPELINE_DEPTH].constrained)) {
            int r = 0, p = 0;
            while ((r = b->ops->ready(b)) == 0 &&
                   (p = folio_ring_readable(plans, err, errlen)) == 0)
                sched_yield(); /* at once where a core is free; the core where none is */
            if (p < 0) {
                rc = -1;
                break;
            }
            if (r == 0)
                continue; /* a plan waits: launch it */
        }
        struct launched *l = &q[head];
        struct launched *last = &q[(head + count - 1) % PIPELINE_DEPTH];
        if (holding && count == 1 && finish_masks(b, io, plans, &awaiting, l, err, errlen) != 0) {
            failed_step = l->hdr.step_id;
            failed_plan_ns = l->hdr.plan_unix_ns;
            rc = -1;
            break;
        }
        holding = holding && count > 1;
        if (b->ops->collect(b, &io->res, err, errlen) != 0) {
            failed_step = l->hdr.step_id;
            failed_plan_ns = l->hdr.plan_unix_ns;
            rc = -1;
            break;
        }
        if (l->constrained)
            folio_step_io_commit(io, &l->gs);
        /* Pipelined, a step's backend time runs from its own launch or from
         * the end of the previous collect, whichever is later. */
        uint64_t done = folio_mono_ns();
        size_t len =
            folio_step_io_encode_result(io, &l->gs, &l->hdr, l->hdr.num_seqs, l->num_logprobs,
                                        l->num_draft, done - l->launch_ns);
        if (write_result(results, io->result_buf, len, err, errlen) != 0) {
            rc = stop_requested ? 0 : -1;
            break;
        }
        /* The next step's masks follow from these tokens; they are filled after the result is
         * out, so the scheduler plans the step after while the host fills and the GPU runs the
         * forward. */
        if (holding) {
            holding = false;
            if (finish_masks(b, io, plans, &awaiting, last, err, errlen) != 0) {
                failed_step = last->hdr.step_id;
                failed_plan_ns = last->hdr.plan_unix_ns;
                rc = -1;
                break;
            }
        }
        head = (head + 1) % PIPELINE_DEPTH;
        count--;
        if (count > 0)
            q[head].launch_ns = q[head].launch_ns > done ? q[head].launch_ns : done;
    }
    if (rc != 0 && failed_step) {
        size_t len = folio_step_io_encode_failure(io, failed_step, failed_plan_ns, err);
        char werr[128];
        folio_ring_try_write(results, io->result_buf, (uint32_t)len, werr, sizeof werr);
    }
    for (int i = 0; i < PIPELINE_DEPTH; i++) {
        free(q[i].num_logprobs);
        free(q[i].num_draft);
        folio_grammar_step_free(&q[i].gs);
    }
    return rc;
}

static int create_backend(const struct worker_args *a, struct folio_model **model,
                          struct folio_backend **b, int *vocab, int *max_len, char *err,
                          size_t errlen)
{
    struct folio_backend_options opt = {.max_seqs = (int)a->max_seqs,
                                        .max_num_tokens = (int)a->max_num_tokens,
                                        .num_kv_blocks = (int)a->num_kv_blocks,
                                        .gpu_memory_utilization = (float)a->gpu_memory_utilization,
                                        .cpu_kv_bytes = (size_t)a->cpu_kv_bytes,
                                        .num_threads = (int)a->threads,
                                        .logits_unread = true,
                                        .enforce_eager = a->enforce_eager,
                                        .tensor_parallel_size = (int)a->tensor_parallel_size,
                                        .num_speculative_tokens = (int)a->num_speculative_tokens};
    if (folio_quantization_parse(a->quantization, &opt.quantization) != 0) {
        snprintf(err, errlen, "--quantization %s is not one of none, fp8", a->quantization);
        return -1;
    }
    if (folio_kv_cache_dtype_parse(a->kv_cache_dtype, &opt.kv_cache_dtype) != 0) {
        snprintf(err, errlen, "--kv-cache-dtype %s is not one of auto, fp8, fp8_e4m3",
                 a->kv_cache_dtype);
        return -1;
    }
    if (!strcmp(a->backend, "sim")) {
        struct folio_sim_options so;
        folio_sim_options_default(&so);
        so.vocab_size = (int)a->sim_vocab;
        so.eos_id = (int)a->sim_eos_id;
        so.eos_probability = a->sim_eos_probability;
        so.time_scale = a->sim_time_scale;
        *vocab = (int)a->sim_vocab;
        *max_len = 1 << 20;
        return folio_sim_backend_create(&opt, &so, b, err, errlen);
    }
    if (!a->model_dir) {
        snprintf(err, errlen, "--model is required for the %s backend", a->backend);
        return -1;
    }
    /* The CPU's fast path computes on GGUF's blocks: no f32 copy of them at load. */
    unsigned flags = !strcmp(a->backend, "cpu") ? FOLIO_CHECKPOINT_KEEP_BLOCKS : 0;
    if (folio_model_open_flags(a->model_dir, flags, model, err, errlen) != 0)
        return -1;
    *vocab = (*model)->config.vocab_size;
    *max_len = (*model)->config.max_position_embeddings;
    if (!strcmp(a->backend, "cpu") || !strcmp(a->backend, "cpu-ref")) {
        opt.cpu_reference = !strcmp(a->backend, "cpu-ref");
        return folio_cpu_backend_create(*model, &opt, b, err, errlen);
    }
#ifdef FOLIO_HAVE_CUDA
    if (!strcmp(a->backend, "cuda"))
        return folio_cuda_backend_create(*model, &opt, b, err, errlen);
#endif
    snprintf(err, errlen, "backend '%s' is not built in (cpu, cpu-ref%s, sim)", a->backend,
#ifdef FOLIO_HAVE_CUDA
             ", cuda"
#else
             ""
#endif
    );
    return -1;
}

int main(int argc, char **argv)
{
    folio_log_init("folio-worker");
    struct worker_args a;
    int prc = expand_args_file(&argc, &argv) != 0 ? -1 : parse_args(argc, argv, &a);
    if (prc != 0) {
        free_args_file();
        return prc > 0 ? 0 : 2;
    }
    struct sigaction sa = {.sa_handler = on_term};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    int rv = nng_push0_open(&ctl_sock);
    if (rv == 0)
        rv = nng_dial(ctl_sock, a.ctl_url, NULL, 0);
    if (rv != 0) {
        folio_log_error(0, "cannot dial the scheduler at %s: %s", a.ctl_url, nng_strerror(rv));
        free_args_file();
        return 1;
    }
    char err[1024];
    struct folio_ring *plans = NULL, *results = NULL;
    struct folio_model *model = NULL;
    struct folio_backend *b = NULL;
    struct folio_step_io io = {0};
    int vocab = 0, max_len = 0, status = 1;
    if (folio_ring_attach_reader(a.plan_ring, &plans, err, sizeof err) != 0 ||
        folio_ring_attach_writer(a.result_ring, &results, err, sizeof err) != 0 ||
        create_backend(&a, &model, &b, &vocab, &max_len, err, sizeof err) != 0 ||
        folio_step_io_init(&io, (int)a.max_seqs, (int)a.max_num_tokens, err, sizeof err) != 0) {
        folio_log_error(0, "load failed: %s", err);
        send_load_reply(false, err, NULL, 0, 0, false);
        usleep(100 * 1000); /* let the reply leave before the socket closes */
        goto out;
    }
    folio_log_info(
        0,
        "%s backend ready: %d KV blocks (kv cache dtype %s), %d slots, %d tokens per "
        "step%s%s",
        a.backend, b->num_kv_blocks, strcmp(a.kv_cache_dtype, "auto") ? "fp8 e4m3" : "auto",
        (int)a.max_seqs, (int)a.max_num_tokens,
        a.tensor_parallel_size > 1 ? ", tensor-parallel ranks emulated" : "",
        strcmp(a.quantization, "none") || folio_model_is_fp8(model) ? ", fp8 (e4m3) linear layers"
                                                                    : "");
    if (model && model->kv_scales)
        folio_log_info(0, strcmp(a.kv_cache_dtype, "auto")
                              ? "fp8 kv cache: each layer's K and V scales from the checkpoint"
                              : "the checkpoint's KV cache scales are not used: --kv-cache-dtype "
                                "auto keeps K and V in the model's dtype");
    /* Structured outputs: the model's tokenizer and vocab for the matchers, where the backend
     * applies masks; without them the scheduler refuses constrained requests. */
    if (b->caps.grammar && model &&
        folio_grammar_slots_new(a.model_dir, vocab, model->config.eos_token_ids,
                                model->config.num_eos_token_ids, (int)a.max_seqs,
                                !b->caps.host_cores, &io.grammar, err, sizeof err) != 0)
        folio_log_warn(0, "structured outputs are off: %s", err);
    uint32_t stale_epoch = folio_ring_writer_epoch(plans);
    send_load_reply(true, NULL, b, vocab, max_len, io.grammar != NULL);
    pthread_t hb;
    pthread_create(&hb, NULL, heartbeat_main, NULL);
    if (run_steps(b, plans, results, &io, stale_epoch, err, sizeof err) != 0) {
        folio_log_error(0, "step failed, exiting: %s", err);
    } else {
        status = 0;
        folio_log_info(0, "stopping");
    }
    atomic_store(&heartbeat_stop, true);
    pthread_join(hb, NULL);
out:
    folio_grammar_slots_free(io.grammar);
    folio_step_io_free(&io);
    if (b)
        b->ops->destroy(b);
    folio_model_close(model);
    folio_ring_close(plans);
    folio_ring_close(results);
    nng_close(ctl_sock);
    free_args_file();
    return status;
}
