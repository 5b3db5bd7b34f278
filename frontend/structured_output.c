/* Where a request's constraint may come from, as vLLM reads them:
 *
 *   response_format      {"type": "text"} (none), {"type": "json_object"},
 *                        {"type": "json_schema", "json_schema": {"name", "schema",
 *                        "strict", "description"}}
 *   structured_outputs   {"json": schema object or its JSON text, "regex": string,
 *                        "choice": list of strings, "grammar": Lark text,
 *                        "json_object": true}
 *   guided_json, guided_regex, guided_choice, guided_grammar   the same, older names
 *
 * A null value is absent. Everything else these objects may hold in vLLM
 * (structural tags, whitespace patterns, backend choices) is a 400 naming
 * it, and so is a second constraint. */
#include "structured_output.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define fail folio_oai_fail

/* One place a constraint was given. */
struct source {
    const char *param;
    enum folio_grammar_kind kind;
    json_t *value; /* NULL for json_object */
};

#define MAX_SOURCES 16

struct sources {
    struct source s[MAX_SOURCES];
    int n;
};

static void add(struct sources *ss, const char *param, enum folio_grammar_kind kind, json_t *value)
{
    if (ss->n < MAX_SOURCES)
        ss->s[ss->n++] = (struct source){param, kind, value};
}

static json_t *field(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    return json_is_null(v) ? NULL : v;
}

/* Only the listed keys (with a value) may appear in obj. */
static int only_keys(json_t *obj, const char *where, const char *const *keys,
                     struct folio_oai_error *e, const char *param)
{
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v)
    {
        bool known = json_is_null(v);
        for (const char *const *k = keys; *k && !known; k++)
            known = !strcmp(*k, key);
        if (!known)
            return fail(e, 400, param, "'%s.%s' is not supported by this server", where, key);
    }
    return 0;
}

static int read_response_format(json_t *root, struct sources *ss, struct folio_oai_error *e)
{
    const char *P = "response_format";
    json_t *rf = field(root, P);
    if (!rf)
        return 0;
    json_t *type = json_object_get(rf, "type");
    if (!json_is_object(rf) || !json_is_string(type))
        return fail(e, 400, P, "'response_format' must be an object with a string 'type'");
    const char *t = json_string_value(type);
    static const char *const rf_keys[] = {"type", "json_schema", NULL};
    if (only_keys(rf, P, rf_keys, e, P))
        return -1;
    if (!strcmp(t, "text"))
        return 0;
    if (!strcmp(t, "json_object")) {
        add(ss, P, FOLIO_GRAMMAR_JSON_OBJECT, NULL);
        return 0;
    }
    if (strcmp(t, "json_schema") != 0)
        return fail(e, 400, P,
                    "'response_format' of type '%s' is not supported (only 'text', "
                    "'json_object' and 'json_schema')",
                    t);
    json_t *js = field(rf, "json_schema");
    if (!json_is_object(js))
        return fail(e, 400, P, "'response_format.json_schema' must be an object");
    static const char *const js_keys[] = {"name", "schema", "strict", "description", NULL};
    if (only_keys(js, "response_format.json_schema", js_keys, e, P))
        return -1;
    json_t *name = field(js, "name"), *strict = field(js, "strict"),
           *desc = field(js, "description");
    if ((name && !json_is_string(name)) || (desc && !json_is_string(desc)))
        return fail(e, 400, P, "'response_format.json_schema.%s' must be a string",
                    name && !json_is_string(name) ? "name" : "description");
    if (strict && !json_is_boolean(strict))
        return fail(e, 400, P, "'response_format.json_schema.strict' must be a boolean");
    json_t *schema = field(js, "schema");
    if (!json_is_object(schema) && !json_is_boolean(schema))
        return fail(e, 400, P,
                    "'response_format.json_schema.schema' must be a JSON schema (an "
                    "object)");
    add(ss, P, FOLIO_GRAMMAR_JSON_SCHEMA, schema);
    return 0;
}

/* One of json/regex/choice/grammar under its name (param): its kind and value checked for
 * shape. */
static int read_one(const char *param, const char *what, json_t *v, struct sources *ss,
                    struct folio_oai_error *e)
{
    if (!v)
        return 0;
    if (!strcmp(what, "json")) {
        if (!json_is_object(v) && !json_is_boolean(v) && !json_is_string(v))
            return fail(e, 400, param, "'%s' must be a JSON schema (an object, or its JSON text)",
                        param);
        add(ss, param, FOLIO_GRAMMAR_JSON_SCHEMA, v);
    } else if (!strcmp(what, "regex")) {
        if (!json_is_string(v))
            return fail(e, 400, param, "'%s' must be a string", param);
        add(ss, param, FOLIO_GRAMMAR_REGEX, v);
    } else if (!strcmp(what, "choice")) {
        if (!json_is_array(v))
            return fail(e, 400, param, "'%s' must be a list of strings", param);
        add(ss, param, FOLIO_GRAMMAR_CHOICE, v);
    } else if (!strcmp(what, "grammar")) {
        if (!json_is_string(v))
            return fail(e, 400, param, "'%s' must be a string (a grammar in Lark syntax)", param);
        add(ss, param, FOLIO_GRAMMAR_LARK, v);
    } else if (!strcmp(what, "json_object")) {
        if (!json_is_boolean(v))
            return fail(e, 400, param, "'%s' must be a boolean", param);
        if (json_is_true(v))
            add(ss, param, FOLIO_GRAMMAR_JSON_OBJECT, NULL);
    }
    return 0;
}

static int read_structured_outputs(json_t *root, struct sources *ss, struct folio_oai_error *e)
{
    json_t *so = field(root, "structured_outputs");
    if (!so)
        return 0;
    if (!json_is_object(so))
        return fail(e, 400, "structured_outputs", "'structured_outputs' must be an object");
    static const char *const keys[] = {"json", "regex", "choice", "grammar", "json_object", NULL};
    static const char *const params[] = {"structured_outputs.json", "structured_outputs.regex",
                                         "structured_outputs.choice", "structured_outputs.grammar",
                                         "structured_outputs.json_object"};
    if (only_keys(so, "structured_outputs", keys, e, "structured_outputs"))
        return -1;
    for (int k = 0; keys[k]; k++)
        if (read_one(params[k], keys[k], field(so, keys[k]), ss, e))
            return -1;
    return 0;
}

/* The constraint's text: strings as they are, schemas and choice lists as compact JSON (the
 * keys keep their order, which the output follows). */
static int source_text(const struct source *src, struct folio_oai_grammar *g,
                       struct folio_oai_error *e)
{
    if (!src->value)
        g->text = strdup("");
    else if (json_is_string(src->value))
        g->text = strndup(json_string_value(src->value), json_string_length(src->value));
    else
        g->text = json_dumps(src->value, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!g->text)
        return fail(e, 500, NULL, "out of memory");
    g->len = strlen(g->text);
    if (src->value && json_is_string(src->value) && g->len != json_string_length(src->value))
        return fail(e, 400, src->param, "'%s' holds a NUL character", src->param);
    if (g->len > FOLIO_MAX_GRAMMAR_BYTES)
        return fail(e, 400, src->param, "'%s' has %zu bytes; at most %d are allowed", src->param,
                    g->len, FOLIO_MAX_GRAMMAR_BYTES);
    return 0;
}

int folio_oai_parse_structured(json_t *root, struct folio_oai_grammar *g, struct folio_oai_error *e)
{
    memset(g, 0, sizeof *g);
    struct sources ss = {.n = 0};
    static const char *const guided[] = {"guided_json", "guided_regex", "guided_choice",
                                         "guided_grammar"};
    static const char *const what[] = {"json", "regex", "choice", "grammar"};
    if (read_response_format(root, &ss, e) || read_structured_outputs(root, &ss, e))
        return -1;
    for (int k = 0; k < 4; k++)
        if (read_one(guided[k], what[k], field(root, guided[k]), &ss, e))
            return -1;
    if (ss.n == 0)
        return 0;
    if (ss.n > 1)
        return fail(e, 400, ss.s[1].param,
                    "a request may carry one structured output constraint; this one has '%s' "
                    "and '%s'",
                    ss.s[0].param, ss.s[1].param);
    g->on = true;
    g->kind = ss.s[0].kind;
    g->param = ss.s[0].param;
    return source_text(&ss.s[0], g, e);
}

void folio_oai_grammar_free(struct folio_oai_grammar *g)
{
    free(g->text);
    memset(g, 0, sizeof *g);
}
