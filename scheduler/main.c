/* folio-scheduler: flags in, folio_scheduler_run out. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "options.h"
#include "program_flags.h"
#include "scheduler.h"
#include "spec_config.h"

/* The parsed tables into the scheduler's options; 2 (a usage error) when a
 * combination is wrong. */
static int to_options(const char *prog, const struct folio_common_flags *c,
                      const struct folio_engine_flags *e, const char *const *engine_given,
                      struct folio_scheduler_options *o)
{
    bool cuda = !strcmp(e->backend, "cuda");
    *o = (struct folio_scheduler_options){
        .model_dir = c->model,
        .backend = e->backend,
        .quantization = e->quantization && strcmp(e->quantization, "none") ? e->quantization : NULL,
        .kv_cache_dtype =
            e->kv_cache_dtype && strcmp(e->kv_cache_dtype, "auto") ? e->kv_cache_dtype : NULL,
        .max_num_seqs = e->max_num_seqs ? (int)e->max_num_seqs
                        : cuda          ? 1024
                                        : 64,
        .max_num_batched_tokens = e->max_num_batched_tokens ? (int)e->max_num_batched_tokens
                                  : cuda                    ? 8192
                                                            : 2048,
        .num_kv_blocks = (int)e->num_kv_blocks,
        .max_model_len = (int)e->max_model_len,
        .gpu_memory_utilization = (float)e->gpu_memory_utilization,
        .cpu_kv_bytes = (uint64_t)e->cpu_kv_bytes,
        .threads = (int)e->threads,
        .max_waiting_requests = (int)e->max_waiting_requests,
        .max_pending_prompt_tokens = e->max_pending_prompt_tokens,
        .simulate = e->simulate,
        .sim_time_scale = e->sim_time_scale,
        .sim_eos_probability = e->sim_eos_probability,
        .drain_seconds = c->drain_seconds,
        .heartbeat_timeout_seconds = e->heartbeat_timeout,
        /* A GPU step takes milliseconds, so 300 s means hung; a CPU step over
         * a big model may honestly take minutes, so there is no default. */
        .step_timeout_seconds = e->step_timeout >= 0 ? e->step_timeout
                                : cuda               ? 300
                                                     : 0,
        .seed = (uint64_t)time(NULL),
        .disable_prefix_caching = !e->enable_prefix_caching,
        .disable_chunked_prefill = !e->enable_chunked_prefill,
        .max_num_batched_tokens_given = e->max_num_batched_tokens != 0,
        .serial_steps = !e->async_scheduling,
        .enforce_eager = e->enforce_eager,
        .tensor_parallel_size = (int)e->tensor_parallel_size,
    };
    if (cuda && e->tensor_parallel_size > 1) {
        fprintf(stderr,
                "%s: --tensor-parallel-size %lld: the CUDA worker runs on one GPU; tensor "
                "parallelism over NCCL is not built yet (--backend cpu emulates it)\n",
                prog, (long long)e->tensor_parallel_size);
        return 2;
    }
    char err[512];
    if (folio_spec_config_parse(e->speculative_config, &o->spec, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", prog, err);
        return 2;
    }
    for (size_t i = 0; i < folio_engine_flag_count; i++)
        if (engine_given[i] && !strcmp(folio_engine_flag_table[i].name, "--seed"))
            o->seed = (uint64_t)e->seed;
    if (!o->model_dir && !o->simulate) {
        fprintf(stderr, "%s: --model DIR is required (or --simulate)\n", prog);
        return 2;
    }
    return 0;
}

int main(int argc, char **argv)
{
    folio_log_init("folio-scheduler");
    const char *prog = folio_opts_prog("folio-scheduler");
    struct folio_common_flags cf = {0};
    struct folio_engine_flags ef = {.step_timeout = -1};
    struct folio_scheduler_internal_flags sf = {0};
    const char *engine_given[64] = {0};
    _Static_assert(sizeof engine_given / sizeof *engine_given >= 20, "room for every flag");
    struct folio_opt_group groups[] = {
        {NULL, folio_common_flag_table, folio_common_flag_count, &cf, NULL},
        {NULL, folio_engine_flag_table, folio_engine_flag_count, &ef, engine_given},
        {"set by folio serve", folio_scheduler_internal_flag_table,
         folio_scheduler_internal_flag_count, &sf, NULL},
    };
    int prc = folio_opts_parse(prog, "usage: folio-scheduler --model DIR [options]", groups,
                               sizeof groups / sizeof *groups, argc, argv);
    if (prc != 0)
        return prc > 0 ? 0 : 2;
    struct folio_scheduler_options o;
    int rc = to_options(prog, &cf, &ef, engine_given, &o);
    if (rc != 0)
        return rc;
    const char *run_dir = sf.run_dir, *instance = sf.instance, *worker_bin = sf.worker_bin;
    const char *submit_url = sf.submit_url, *ctl_url = sf.ctl_url, *worker_url = sf.worker_url;

    static char run_buf[PATH_MAX], inst_buf[128], bin_buf[PATH_MAX];
    static char submit_buf[PATH_MAX + 64], ctl_buf[PATH_MAX + 64], worker_buf[PATH_MAX + 64];
    if (strlen(run_dir ? run_dir : "") > PATH_MAX - 64) {
        fprintf(stderr, "%s: --run-dir is too long\n", prog);
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
            fprintf(stderr, "%s: cannot read /proc/self/exe; pass --worker-bin\n", prog);
            return 2;
        }
        bin_buf[n] = 0;
        char *slash = strrchr(bin_buf, '/');
        strcpy(slash ? slash + 1 : bin_buf, "folio-worker");
        worker_bin = bin_buf;
    }
    if (!sf.external_worker && access(worker_bin, X_OK) != 0) {
        fprintf(stderr, "%s: worker binary %s is not executable\n", prog, worker_bin);
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
    o.external_worker = sf.external_worker;
    o.submit_url = submit_url;
    o.ctl_url = ctl_url;
    o.worker_url = worker_url;
    return folio_scheduler_run(&o);
}
