/* Fuzzes common/model_config.h: arbitrary bytes as config.json. A load either
 * fails with a message naming the file, or gives a config whose sizes the
 * loader and backends may index with (the invariants checked below). */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_tmpdir.h"
#include "model_config.h"

#define MAX_INPUT (64 << 10)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > MAX_INPUT)
        return 0;
    const char *dir = fuzz_tmpdir_write("config.json", data, size);
    struct folio_model_config cfg;
    char err[512] = "";
    if (folio_model_config_load(dir, &cfg, err, sizeof err) != 0) {
        if (!err[0] || !strstr(err, "config.json"))
            abort(); /* an error must say what and where */
        return 0;
    }
    if (cfg.hidden_size < 1 || cfg.intermediate_size < 1 || cfg.num_layers < 1 ||
        cfg.num_heads < 1 || cfg.num_kv_heads < 1 || cfg.head_dim < 1 || cfg.vocab_size < 1 ||
        cfg.max_position_embeddings < 1 || cfg.num_heads % cfg.num_kv_heads != 0 ||
        cfg.head_dim % 2 != 0 || (long long)cfg.num_heads * cfg.head_dim > INT32_MAX)
        abort();
    if (!(cfg.rms_norm_eps > 0) || !isfinite(cfg.rms_norm_eps) || !(cfg.rope_theta > 0) ||
        !isfinite(cfg.rope_theta))
        abort();
    if (cfg.bos_token_id < -1 || cfg.bos_token_id >= cfg.vocab_size)
        abort();
    if (cfg.num_eos_token_ids < 0 || cfg.num_eos_token_ids > FOLIO_MAX_EOS_IDS)
        abort();
    for (int i = 0; i < cfg.num_eos_token_ids; i++)
        if (cfg.eos_token_ids[i] < 0 || cfg.eos_token_ids[i] >= cfg.vocab_size)
            abort();
    if (memchr(cfg.model_type, '\0', sizeof cfg.model_type) == NULL)
        abort();
    if (cfg.rope_scaling.type != FOLIO_ROPE_NONE &&
        (!(cfg.rope_scaling.factor > 0) || !isfinite(cfg.rope_scaling.factor)))
        abort();
    return 0;
}
