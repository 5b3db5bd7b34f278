#include "chat_prompt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int32_t *folio_chat_prompt_ids(const struct folio_tokenizer *t,
                               const struct folio_chat_template *tmpl,
                               const struct folio_oai_request *r, bool add_bos, size_t *n,
                               char *err, size_t errlen)
{
    err[0] = 0;
    if (!tmpl) {
        snprintf(err, errlen,
                 "this model has no chat template (tokenizer_config.json has no "
                 "chat_template); use /v1/completions");
        return NULL;
    }
    const char *bos = folio_tokenizer_bos_token(t), *eos = folio_tokenizer_eos_token(t);
    json_t *vars = json_pack("{s:O, s:b}", "messages", r->template_messages,
                             "add_generation_prompt", r->add_generation_prompt);
    if (!vars)
        return NULL;
    if (r->tools.tools)
        json_object_set(vars, "tools", r->tools.tools);
    if (bos)
        json_object_set_new(vars, "bos_token", json_string(bos));
    if (eos)
        json_object_set_new(vars, "eos_token", json_string(eos));
    char *text = NULL;
    size_t len = 0;
    int rc = folio_chat_template_render_json(tmpl, vars, NULL, &text, &len, err, errlen);
    json_decref(vars);
    if (rc != 0) {
        if (!err[0])
            snprintf(err, errlen, "the chat template failed to render");
        return NULL;
    }
    /* A template that writes the BOS text itself must not get a second BOS
     * from the tokenizer (HF renders, then tokenizes without special tokens
     * in that case); one that does not gets the tokenizer's BOS. */
    bool has_bos = bos && *bos && len >= strlen(bos) && !memcmp(text, bos, strlen(bos));
    int32_t *ids = folio_tokenizer_encode(t, text, len, add_bos && !has_bos, n);
    free(text);
    return ids;
}
