/* render_template: renders a chat template for the Python tests.
 * stdin: JSON {"template": "...", "messages": [...], "add_generation_prompt": bool,
 * "bos_token": "...", "eos_token": "...", optional "vars": {more variables},
 * optional "limits": {"max_output_bytes", "max_memory_bytes", "max_steps", "max_call_depth"}}.
 * stdout: the rendering, byte for byte; exit 0. On a compile error exit 2, on a
 * render error exit 1, with the message on stderr. A JSON array of such cases
 * renders each and prints an array of {"output"} or {"error", "stage"}. The template and messages
 * pass through folio_chat_template_render_json, so messages may carry
 * tool_calls and other fields. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "chat_template.h"

/* Renders one case; returns 0, or 1 (render error) / 2 (compile error)
 * with the message in err. */
static int render_case(json_t *in, char **out, size_t *outlen, char *err, size_t errlen)
{
    const char *src = json_string_value(json_object_get(in, "template"));
    if (!src) {
        snprintf(err, errlen, "render_template: \"template\" (a string) is missing");
        return 2;
    }
    struct folio_chat_template *t;
    if (folio_chat_template_compile(src, &t, err, errlen) != 0)
        return 2;
    json_t *vars = json_object();
    json_t *extra = json_object_get(in, "vars");
    if (extra && json_is_object(extra))
        json_object_update(vars, extra);
    static const char *const names[] = {"messages", "add_generation_prompt", "bos_token",
                                        "eos_token"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        json_t *v = json_object_get(in, names[i]);
        if (v)
            json_object_set(vars, names[i], v);
    }
    struct folio_chat_template_limits limits = {0};
    json_t *lim = json_object_get(in, "limits");
    if (lim) {
        limits.max_output_bytes =
            (size_t)json_integer_value(json_object_get(lim, "max_output_bytes"));
        limits.max_memory_bytes =
            (size_t)json_integer_value(json_object_get(lim, "max_memory_bytes"));
        limits.max_steps = (uint64_t)json_integer_value(json_object_get(lim, "max_steps"));
        limits.max_call_depth = (int)json_integer_value(json_object_get(lim, "max_call_depth"));
    }
    int rc = folio_chat_template_render_json(t, vars, &limits, out, outlen, err, errlen);
    json_decref(vars);
    folio_chat_template_free(t);
    return rc == 0 ? 0 : 1;
}

int main(void)
{
    json_error_t jerr;
    json_t *in = json_loadf(stdin, JSON_ALLOW_NUL, &jerr);
    if (!in || !(json_is_object(in) || json_is_array(in))) {
        fprintf(stderr, "render_template: stdin is not a JSON object or array: %s\n", jerr.text);
        return 2;
    }
    char err[1024];
    char *out;
    size_t outlen;
    if (json_is_object(in)) {
        int rc = render_case(in, &out, &outlen, err, sizeof(err));
        json_decref(in);
        if (rc != 0) {
            fprintf(stderr, "%s\n", err);
            return rc;
        }
        fwrite(out, 1, outlen, stdout);
        free(out);
        return 0;
    }
    /* A batch: an array of cases in, an array of {"output"} or {"error", "stage"} out. */
    json_t *results = json_array();
    size_t i;
    json_t *c;
    json_array_foreach(in, i, c)
    {
        int rc = render_case(c, &out, &outlen, err, sizeof(err));
        if (rc == 0) {
            json_t *s = json_stringn(out, outlen);
            free(out);
            json_array_append_new(results, s ? json_pack("{so}", "output", s)
                                             : json_pack("{ssss}", "error", "output is not UTF-8",
                                                         "stage", "render"));
        } else {
            json_t *e = json_string(err);
            json_array_append_new(results, json_pack("{soss}", "error", e ? e : json_string("?"),
                                                     "stage", rc == 2 ? "compile" : "render"));
        }
    }
    json_dumpf(results, stdout, JSON_COMPACT);
    json_decref(results);
    json_decref(in);
    return 0;
}
