#include "chat_prompt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int32_t *folio_chat_prompt_ids(const struct folio_tokenizer *t,
                               const struct folio_chat_template *tmpl,
                               const struct folio_oai_message *messages, size_t num_messages,
                               bool add_generation_prompt, bool add_bos, size_t *n, char *err,
                               size_t errlen)
{
    err[0] = 0;
    if (!tmpl) {
        snprintf(err, errlen,
                 "this model has no chat template (tokenizer_config.json has no "
                 "chat_template); use /v1/completions");
        return NULL;
    }
    struct folio_chat_message *msgs = calloc(num_messages ? num_messages : 1, sizeof *msgs);
    if (!msgs)
        return NULL;
    for (size_t i = 0; i < num_messages; i++) {
        msgs[i].role = messages[i].role;
        msgs[i].content = messages[i].content;
    }
    char *text = NULL;
    size_t len = 0;
    const char *bos = folio_tokenizer_bos_token(t);
    int rc = folio_chat_template_render(tmpl, msgs, num_messages, add_generation_prompt, bos,
                                        folio_tokenizer_eos_token(t), &text, &len, err, errlen);
    free(msgs);
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
