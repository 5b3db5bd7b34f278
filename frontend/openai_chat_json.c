/* The chat side of OpenAI's response JSON: a message's or a chunk's delta's
 * content, reasoning_content and tool_calls, as OpenAI and vLLM write them. */
#include "openai_api.h"

#include <string.h>

/* "tool_calls":[...]; a delta's entries carry their index, and id, type and
 * name only in a call's first chunk. */
static void write_tool_calls(struct folio_jw *b, const struct folio_oai_chat_parts *p, bool delta)
{
    folio_jw_str(b, "\"tool_calls\":[");
    for (size_t i = 0; i < p->num_calls; i++) {
        const struct folio_oai_tool_call *t = &p->calls[i];
        folio_jw_str(b, i ? ",{" : "{");
        if (delta)
            folio_jw_printf(b, "\"index\":%u,", t->index);
        if (t->id) {
            folio_jw_str(b, "\"id\":");
            folio_jw_string(b, t->id, strlen(t->id));
            folio_jw_str(b, ",\"type\":\"function\",\"function\":{\"name\":");
            folio_jw_string(b, t->name, strlen(t->name));
            folio_jw_str(b, ",\"arguments\":");
        } else {
            folio_jw_str(b, "\"function\":{\"arguments\":");
        }
        folio_jw_string(b, t->args, t->args_len);
        folio_jw_str(b, "}}");
    }
    folio_jw_str(b, "]");
}

void folio_oai_write_chat_delta(struct folio_jw *b, bool role_chunk, const char *text, size_t len,
                                const struct folio_oai_chat_parts *parts, const char *finish_reason)
{
    bool reasoning = parts && parts->reasoning_len > 0;
    bool calls = parts && parts->num_calls > 0;
    folio_jw_str(b, "\"delta\":{");
    if (role_chunk)
        folio_jw_str(b, "\"role\":\"assistant\",");
    /* The closing chunk carries an empty delta unless text came with it; a
     * chunk of reasoning or calls alone has no content. */
    bool content = len || role_chunk || (!finish_reason && !reasoning && !calls);
    if (content) {
        folio_jw_str(b, "\"content\":");
        folio_jw_string(b, text, len);
    }
    if (reasoning) {
        folio_jw_str(b, content ? ",\"reasoning_content\":" : "\"reasoning_content\":");
        folio_jw_string(b, parts->reasoning, parts->reasoning_len);
    }
    if (calls) {
        if (content || reasoning)
            folio_jw_raw(b, ",", 1);
        write_tool_calls(b, parts, true);
    }
    folio_jw_str(b, "},");
}

void folio_oai_write_chat_message(struct folio_jw *b, const char *text, size_t len,
                                  const struct folio_oai_chat_parts *p)
{
    folio_jw_str(b, "\"message\":{\"role\":\"assistant\",\"content\":");
    if (p && p->num_calls && !len)
        folio_jw_str(b, "null");
    else
        folio_jw_string(b, text, len);
    if (p && p->reasoning_field) {
        folio_jw_str(b, ",\"reasoning_content\":");
        if (p->reasoning_len)
            folio_jw_string(b, p->reasoning, p->reasoning_len);
        else
            folio_jw_str(b, "null");
    }
    if (p && p->num_calls) {
        folio_jw_raw(b, ",", 1);
        write_tool_calls(b, p, false);
    }
    folio_jw_str(b, "},");
}
