/* folio-scheduler: flags in, folio_scheduler_run out. */
#include <math.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "scheduler.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: folio-scheduler --model DIR [options]\n"
            "\n"
            "  --model DIR                  Hugging Face model directory (config.json ...)\n"
            "  --backend cpu|cuda           worker backend (default cpu)\n"
            "  --simulate                   run the simulated worker (a cost model, no model\n"
            "                               weights; --model optional, for its config)\n"
            "  --run-dir DIR                ipc socket files (default /tmp/folio-<uid>)\n"
            "  --instance NAME              prefix of shared-memory names (default folio-<pid>)\n"
            "  --max-num-seqs N             sequences per step (default 64 cpu, 256 cuda)\n"
            "  --max-num-batched-tokens N   token budget per step (default 2048 cpu, 8192 cuda)\n"
            "  --num-kv-blocks N            KV pool in 16-token blocks (0: the worker sizes it)\n"
            "  --max-model-len N            cap on prompt + output tokens (default: the model's)\n"
            "  --gpu-memory-utilization F   CUDA: share of the card for the worker (0.9)\n"
            "  --cpu-kv-bytes N             CPU: KV pool bytes when --num-kv-blocks is 0 (1 GiB)\n"
            "  --threads N                  CPU worker threads (0: all cores)\n"
            "  --max-waiting-requests N     beyond them, 429 (default 4096)\n"
            "  --max-pending-prompt-tokens N  beyond them, 429 (default 4194304)\n"
            "  --worker-bin PATH            folio-worker (default: beside this program)\n"
            "  --external-worker            do not start the worker: one started elsewhere (its\n"
            "                               own container) runs folio-worker --args-file\n"
            "                               RUN_DIR/worker.args; heartbeats tell it lives\n"
            "  --submit-url URL --ctl-url URL --worker-url URL   nng addresses (default\n"
            "                               ipc://RUN_DIR/scheduler-submit.ipc, -ctl, worker-ctl)\n"
            "  --drain-seconds S            SIGTERM: time left to running requests (30)\n"
            "  --heartbeat-timeout S        a silent worker is killed and restarted (5)\n"
            "  --step-timeout S             a step running longer is a hung worker: killed\n"
            "                               and restarted (300 cuda, none cpu; 0: no limit)\n"
            "  --sim-time-scale F           --simulate: 1 sleeps the modelled step time, 0 none\n"
            "  --sim-eos-probability F      --simulate: chance that a sampled token is EOS\n"
            "  --seed N                     draws the seeds of requests that bring none\n");
}

/* A numeric flag's value; a typo is an error, not a silent 0. */
static int number(const char *flag, const char *v, double *out)
{
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (end == v || *end || errno || !isfinite(d)) {
        fprintf(stderr, "folio-scheduler: %s needs a number, not '%s'\n", flag, v);
        return -1;
    }
    *out = d;
    return 0;
}

#define NUM(field, type)                                                                           \
    do {                                                                                           \
        double d_;                                                                                 \
        if (number(k, v, &d_) != 0)                                                                \
            return 2;                                                                              \
        o.field = (type)d_;                                                                        \
    } while (0)

int main(int argc, char **argv)
{
    folio_log_init("folio-scheduler");
    struct folio_scheduler_options o = {
        .backend = "cpu",
        .max_waiting_requests = 4096,
        .max_pending_prompt_tokens = 4 << 20,
        .gpu_memory_utilization = 0.9f,
        .cpu_kv_bytes = 1ull << 30,
        .drain_seconds = 30,
        .heartbeat_timeout_seconds = 5,
        .step_timeout_seconds = -1,
        .sim_eos_probability = 0.01,
        .seed = (uint64_t)time(NULL),
    };
    const char *run_dir = NULL, *instance = NULL, *worker_bin = NULL;
    const char *submit_url = NULL, *ctl_url = NULL, *worker_url = NULL;
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i];
        if (!strcmp(k, "--help") || !strcmp(k, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(k, "--simulate")) {
            o.simulate = true;
            continue;
        }
        if (!strcmp(k, "--external-worker")) {
            o.external_worker = true;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "folio-scheduler: %s needs a value\n", k);
            return 2;
        }
        const char *v = argv[++i];
        if (!strcmp(k, "--model"))
            o.model_dir = v;
        else if (!strcmp(k, "--backend"))
            o.backend = v;
        else if (!strcmp(k, "--run-dir"))
            run_dir = v;
        else if (!strcmp(k, "--instance"))
            instance = v;
        else if (!strcmp(k, "--worker-bin"))
            worker_bin = v;
        else if (!strcmp(k, "--submit-url"))
            submit_url = v;
        else if (!strcmp(k, "--ctl-url"))
            ctl_url = v;
        else if (!strcmp(k, "--worker-url"))
            worker_url = v;
        else if (!strcmp(k, "--max-num-seqs"))
            NUM(max_num_seqs, int);
        else if (!strcmp(k, "--max-num-batched-tokens"))
            NUM(max_num_batched_tokens, int);
        else if (!strcmp(k, "--num-kv-blocks"))
            NUM(num_kv_blocks, int);
        else if (!strcmp(k, "--max-model-len"))
            NUM(max_model_len, int);
        else if (!strcmp(k, "--gpu-memory-utilization"))
            NUM(gpu_memory_utilization, float);
        else if (!strcmp(k, "--cpu-kv-bytes"))
            NUM(cpu_kv_bytes, uint64_t);
        else if (!strcmp(k, "--threads"))
            NUM(threads, int);
        else if (!strcmp(k, "--max-waiting-requests"))
            NUM(max_waiting_requests, int);
        else if (!strcmp(k, "--max-pending-prompt-tokens"))
            NUM(max_pending_prompt_tokens, int64_t);
        else if (!strcmp(k, "--drain-seconds"))
            NUM(drain_seconds, double);
        else if (!strcmp(k, "--heartbeat-timeout"))
            NUM(heartbeat_timeout_seconds, double);
        else if (!strcmp(k, "--step-timeout"))
            NUM(step_timeout_seconds, double);
        else if (!strcmp(k, "--sim-time-scale"))
            NUM(sim_time_scale, double);
        else if (!strcmp(k, "--sim-eos-probability"))
            NUM(sim_eos_probability, double);
        else if (!strcmp(k, "--seed")) {
            char *end;
            errno = 0;
            o.seed = strtoull(v, &end, 10);
            if (end == v || *end || errno) {
                fprintf(stderr, "folio-scheduler: --seed needs an integer, not '%s'\n", v);
                return 2;
            }
        } else {
            fprintf(stderr, "folio-scheduler: unknown option %s (see --help)\n", k);
            return 2;
        }
    }
    if (!o.model_dir && !o.simulate) {
        fprintf(stderr, "folio-scheduler: --model DIR is required (or --simulate)\n");
        return 2;
    }
    if (strcmp(o.backend, "cpu") && strcmp(o.backend, "cuda")) {
        fprintf(stderr, "folio-scheduler: --backend must be cpu or cuda, not '%s'\n", o.backend);
        return 2;
    }
    bool cuda = !strcmp(o.backend, "cuda");
    if (o.max_num_seqs <= 0)
        o.max_num_seqs = cuda ? 256 : 64;
    if (o.max_num_batched_tokens <= 0)
        o.max_num_batched_tokens = cuda ? 8192 : 2048;
    /* A GPU step takes milliseconds, so 300 s means hung; a CPU step over a
     * big model may honestly take minutes, so there is no default limit. */
    if (o.step_timeout_seconds < 0)
        o.step_timeout_seconds = cuda ? 300 : 0;
    if (o.max_waiting_requests <= 0 || o.max_pending_prompt_tokens <= 0 || o.num_kv_blocks < 0) {
        fprintf(stderr, "folio-scheduler: the queue limits must be positive and "
                        "--num-kv-blocks not negative\n");
        return 2;
    }

    static char run_buf[PATH_MAX], inst_buf[128], bin_buf[PATH_MAX];
    static char submit_buf[PATH_MAX + 64], ctl_buf[PATH_MAX + 64], worker_buf[PATH_MAX + 64];
    if (strlen(run_dir ? run_dir : "") > PATH_MAX - 64) {
        fprintf(stderr, "folio-scheduler: --run-dir is too long\n");
        return 2;
    }
    if (!run_dir) {
        snprintf(run_buf, sizeof run_buf, "/tmp/folio-%u", (unsigned)getuid());
        run_dir = run_buf;
    }
    if (!instance) {
        snprintf(inst_buf, sizeof inst_buf, "folio-%d", (int)getpid());
        instance = inst_buf;
    }
    if (!worker_bin) {
        /* Beside our own executable: build/bin, or a bundle's bin. */
        ssize_t n = readlink("/proc/self/exe", bin_buf, sizeof bin_buf - 32);
        if (n <= 0) {
            fprintf(stderr, "folio-scheduler: cannot read /proc/self/exe; pass --worker-bin\n");
            return 2;
        }
        bin_buf[n] = 0;
        char *slash = strrchr(bin_buf, '/');
        strcpy(slash ? slash + 1 : bin_buf, "folio-worker");
        worker_bin = bin_buf;
    }
    if (!o.external_worker && access(worker_bin, X_OK) != 0) {
        fprintf(stderr, "folio-scheduler: worker binary %s is not executable\n", worker_bin);
        return 2;
    }
    if (!submit_url) {
        snprintf(submit_buf, sizeof submit_buf, "ipc://%s/scheduler-submit.ipc", run_dir);
        submit_url = submit_buf;
    }
    if (!ctl_url) {
        snprintf(ctl_buf, sizeof ctl_buf, "ipc://%s/scheduler-ctl.ipc", run_dir);
        ctl_url = ctl_buf;
    }
    if (!worker_url) {
        snprintf(worker_buf, sizeof worker_buf, "ipc://%s/worker-ctl.ipc", run_dir);
        worker_url = worker_buf;
    }
    o.run_dir = run_dir;
    o.instance = instance;
    o.worker_bin = worker_bin;
    o.submit_url = submit_url;
    o.ctl_url = ctl_url;
    o.worker_url = worker_url;
    return folio_scheduler_run(&o);
}
