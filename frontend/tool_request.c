/* The shapes read here, as OpenAI's API defines them:
 *
 *   tools               [{"type": "function", "function": {"name", "description",
 *                        "parameters": JSON schema object, "strict"}}]
 *   tool_choice         "none" | "auto" | "required" |
 *                       {"type": "function", "function": {"name": ...}}
 *   parallel_tool_calls  boolean
 *   messages[i]         an assistant's "tool_calls": [{"id", "type": "function",
 *                       "function": {"name", "arguments": JSON text}}]; a tool's
 *                       "tool_call_id"; any message's "name"
 *
 * A function name is OpenAI's: letters, digits, '_' and '-', at most 64. */
#include "tool_request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define fail folio_oai_fail

static json_t *field(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    return json_is_null(v) ? NULL : v;
}

static bool valid_name(const char *s, size_t n)
{
    if (n == 0 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-'))
            return false;
    }
    return true;
}

static json_t *tool_function(json_t *tools, size_t i)
{
    return json_object_get(json_array_get(tools, i), "function");
}

static const char *tool_name(json_t *tools, size_t i)
{
    return json_string_value(json_object_get(tool_function(tools, i), "name"));
}

/* The parts of a JSON schema's top a template and the grammar read. */
static int check_schema_shape(json_t *p, const char *param, struct folio_oai_error *e)
{
    if (!json_is_object(p))
        return fail(e, 400, param, "'%s' must be a JSON schema object", param);
    json_t *type = field(p, "type"), *props = field(p, "properties"), *req = field(p, "required");
    if (type && !json_is_string(type) && !json_is_array(type))
        return fail(e, 400, param, "'%s.type' must be a string or a list of strings", param);
    if (props) {
        const char *k;
        json_t *v;
        if (!json_is_object(props))
            return fail(e, 400, param, "'%s.properties' must be an object of schemas", param);
        json_object_foreach(props, k, v)
        {
            if (!json_is_object(v) && !json_is_boolean(v))
                return fail(e, 400, param, "'%s.properties.%s' must be a schema (an object)", param,
                            k);
        }
    }
    if (req) {
        size_t j;
        json_t *v;
        if (!json_is_array(req))
            return fail(e, 400, param, "'%s.required' must be a list of strings", param);
        json_array_foreach(req, j, v)
        {
            if (!json_is_string(v))
                return fail(e, 400, param, "'%s.required[%zu]' must be a string", param, j);
        }
    }
    return 0;
}

static int check_tool(json_t *tools, size_t i, struct folio_oai_error *e)
{
    char param[64];
    json_t *tool = json_array_get(tools, i);
    snprintf(param, sizeof param, "tools[%zu]", i);
    if (!json_is_object(tool))
        return fail(e, 400, param, "'%s' must be an object", param);
    json_t *type = field(tool, "type"), *fn = field(tool, "function");
    if (type && (!json_is_string(type) || strcmp(json_string_value(type), "function") != 0))
        return fail(e, 400, param, "'%s.type' must be \"function\" (the only kind of tool)", param);
    snprintf(param, sizeof param, "tools[%zu].function", i);
    if (!json_is_object(fn))
        return fail(e, 400, param, "'%s' must be an object", param);
    json_t *name = field(fn, "name"), *desc = field(fn, "description"),
           *strict = field(fn, "strict");
    snprintf(param, sizeof param, "tools[%zu].function.name", i);
    if (!json_is_string(name) || !valid_name(json_string_value(name), json_string_length(name)))
        return fail(e, 400, param,
                    "'%s' must be a string of letters, digits, '_' and '-' (at most 64)", param);
    for (size_t j = 0; j < i; j++)
        if (!strcmp(tool_name(tools, j), json_string_value(name)))
            return fail(e, 400, param, "'%s': the function '%s' is already tools[%zu]", param,
                        json_string_value(name), j);
    snprintf(param, sizeof param, "tools[%zu].function.description", i);
    if (desc && !json_is_string(desc))
        return fail(e, 400, param, "'%s' must be a string", param);
    snprintf(param, sizeof param, "tools[%zu].function.strict", i);
    if (strict && !json_is_boolean(strict))
        return fail(e, 400, param, "'%s' must be a boolean", param);
    json_t *params = field(fn, "parameters");
    snprintf(param, sizeof param, "tools[%zu].function.parameters", i);
    return params ? check_schema_shape(params, param, e) : 0;
}

static int parse_choice(json_t *root, struct folio_oai_tools *t, struct folio_oai_error *e)
{
    const char *P = "tool_choice";
    json_t *c = field(root, P);
    t->choice = t->tools ? FOLIO_TOOL_CHOICE_AUTO : FOLIO_TOOL_CHOICE_NONE;
    if (!c)
        return 0;
    if (json_is_string(c)) {
        const char *s = json_string_value(c);
        if (!strcmp(s, "none"))
            t->choice = FOLIO_TOOL_CHOICE_NONE;
        else if (!strcmp(s, "auto"))
            t->choice = FOLIO_TOOL_CHOICE_AUTO;
        else if (!strcmp(s, "required"))
            t->choice = FOLIO_TOOL_CHOICE_REQUIRED;
        else
            return fail(e, 400, P,
                        "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": "
                        "\"function\", \"function\": {\"name\": ...}}, got \"%s\"",
                        s);
    } else {
        json_t *type = field(c, "type"), *fn = field(c, "function");
        json_t *name = fn ? field(fn, "name") : NULL;
        if (!json_is_object(c) || !json_is_string(type) ||
            strcmp(json_string_value(type), "function") != 0 || !json_is_string(name))
            return fail(e, 400, P,
                        "'tool_choice' as an object must be {\"type\": \"function\", "
                        "\"function\": {\"name\": ...}}");
        t->choice = FOLIO_TOOL_CHOICE_NAMED;
        if (!(t->function = strdup(json_string_value(name))))
            return fail(e, 500, NULL, "out of memory");
    }
    if (t->choice != FOLIO_TOOL_CHOICE_NONE && !t->tools)
        return fail(e, 400, P, "'tool_choice' %s needs 'tools'",
                    t->choice == FOLIO_TOOL_CHOICE_NAMED ? "naming a function" : "other than none");
    if (t->choice == FOLIO_TOOL_CHOICE_NAMED) {
        for (size_t i = 0; i < t->num_tools; i++)
            if (!strcmp(tool_name(t->tools, i), t->function))
                return 0;
        return fail(e, 400, P, "'tool_choice' names the function '%s', which is not in 'tools'",
                    t->function);
    }
    return 0;
}

/* A tool's parameters for the grammar: the schema as given, or an empty
 * object when it has none (vLLM's). A new reference. */
static json_t *parameters_of(json_t *tools, size_t i)
{
    json_t *p = field(tool_function(tools, i), "parameters");
    return p ? json_deep_copy(p) : json_pack("{s:s, s:{}}", "type", "object", "properties");
}

char *folio_oai_tool_parameters(const struct folio_oai_tools *t, size_t i)
{
    json_t *p = parameters_of(t->tools, i);
    char *s = p ? json_dumps(p, JSON_COMPACT) : NULL;
    json_decref(p);
    return s;
}

/* tool_choice "required": a list of at least one {"name", "parameters"},
 * each element one of the tools (an anyOf), their $defs moved to the root
 * where their "#/$defs/..." references point. */
static json_t *required_schema(const struct folio_oai_tools *t, struct folio_oai_error *e)
{
    json_t *any = json_array(), *defs = json_object();
    for (size_t i = 0; i < t->num_tools; i++) {
        json_t *p = parameters_of(t->tools, i);
        json_t *d = json_object_get(p, "$defs");
        const char *k;
        json_t *v;
        json_object_foreach(d, k, v)
        {
            json_t *have = json_object_get(defs, k);
            if (have && !json_equal(have, v)) {
                json_decref(p);
                json_decref(any);
                json_decref(defs);
                fail(e, 400, "tools",
                     "'tools': two functions define '$defs.%s' differently; tool_choice "
                     "\"required\" needs them to agree",
                     k);
                return NULL;
            }
            json_object_set(defs, k, v);
        }
        json_object_del(p, "$defs");
        json_array_append_new(any,
                              json_pack("{s:s, s:{s:{s:s, s:[s]}, s:o}, s:[s, s], s:b}", "type",
                                        "object", "properties", "name", "type", "string", "enum",
                                        tool_name(t->tools, i), "parameters", p, "required", "name",
                                        "parameters", "additionalProperties", 0));
    }
    json_t *s =
        json_pack("{s:s, s:i, s:{s:o}}", "type", "array", "minItems", 1, "items", "anyOf", any);
    if (!t->parallel)
        json_object_set_new(s, "maxItems", json_integer(1));
    if (json_object_size(defs))
        json_object_set(s, "$defs", defs);
    json_decref(defs);
    return s;
}

static int make_constraint(const struct folio_oai_tools *t, struct folio_oai_grammar *g,
                           struct folio_oai_error *e)
{
    if (g->on)
        return fail(e, 400, "tool_choice",
                    "a request may carry one structured output constraint; this one has '%s' "
                    "and 'tool_choice' \"%s\"",
                    g->param, t->choice == FOLIO_TOOL_CHOICE_REQUIRED ? "required" : t->function);
    json_t *schema = NULL;
    if (t->choice == FOLIO_TOOL_CHOICE_REQUIRED) {
        if (!(schema = required_schema(t, e)))
            return -1;
    } else {
        for (size_t i = 0; i < t->num_tools && !schema; i++)
            if (!strcmp(tool_name(t->tools, i), t->function))
                schema = parameters_of(t->tools, i);
    }
    char *text = schema ? json_dumps(schema, JSON_COMPACT) : NULL;
    json_decref(schema);
    if (!text)
        return fail(e, 500, NULL, "out of memory");
    *g = (struct folio_oai_grammar){.on = true,
                                    .kind = FOLIO_GRAMMAR_JSON_SCHEMA,
                                    .text = text,
                                    .len = strlen(text),
                                    .param = "tool_choice"};
    if (g->len > FOLIO_MAX_GRAMMAR_BYTES)
        return fail(e, 400, "tools", "the tools' schemas have %zu bytes; at most %d are allowed",
                    g->len, FOLIO_MAX_GRAMMAR_BYTES);
    return 0;
}

int folio_oai_parse_tools(json_t *root, struct folio_oai_tools *t, struct folio_oai_grammar *g,
                          struct folio_oai_error *e)
{
    memset(t, 0, sizeof *t);
    t->parallel = true;
    json_t *tools = field(root, "tools"), *par = field(root, "parallel_tool_calls");
    if (par && !json_is_boolean(par))
        return fail(e, 400, "parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
    if (par)
        t->parallel = json_is_true(par);
    if (tools) {
        if (!json_is_array(tools) || json_array_size(tools) == 0)
            return fail(e, 400, "tools", "'tools' must be a non-empty list of functions");
        for (size_t i = 0; i < json_array_size(tools); i++)
            if (check_tool(tools, i, e) != 0)
                return -1;
        t->tools = json_incref(tools);
        t->num_tools = json_array_size(tools);
    }
    if (parse_choice(root, t, e) != 0)
        return -1;
    if (t->choice == FOLIO_TOOL_CHOICE_REQUIRED || t->choice == FOLIO_TOOL_CHOICE_NAMED)
        return make_constraint(t, g, e);
    return 0;
}

void folio_oai_tools_free(struct folio_oai_tools *t)
{
    json_decref(t->tools);
    free(t->function);
    memset(t, 0, sizeof *t);
}

/* messages[i].tool_calls[j], for the template: arguments parsed (templates
 * write them with tojson, as transformers' do with vLLM's parsed ones). */
static json_t *template_call(json_t *call, size_t i, size_t j, struct folio_oai_error *e)
{
    json_t *id = field(call, "id"), *type = field(call, "type"), *fn = field(call, "function");
    json_t *name = fn ? field(fn, "name") : NULL, *args = fn ? field(fn, "arguments") : NULL;
    if (!json_is_object(call) || !json_is_string(id) || !json_is_object(fn) ||
        !json_is_string(name) ||
        (type && (!json_is_string(type) || strcmp(json_string_value(type), "function") != 0))) {
        fail(e, 400, "messages",
             "'messages[%zu].tool_calls[%zu]' must be {\"id\": string, \"type\": \"function\", "
             "\"function\": {\"name\": string, \"arguments\": string}}",
             i, j);
        return NULL;
    }
    json_t *parsed = NULL;
    if (args && !json_is_string(args)) {
        fail(e, 400, "messages",
             "'messages[%zu].tool_calls[%zu].function.arguments' must be a string of JSON", i, j);
        return NULL;
    }
    parsed =
        args ? json_loadb(json_string_value(args), json_string_length(args), JSON_DECODE_ANY, NULL)
             : json_object();
    if (!parsed) {
        fail(e, 400, "messages",
             "'messages[%zu].tool_calls[%zu].function.arguments' is not valid JSON", i, j);
        return NULL;
    }
    return json_pack("{s:O, s:s, s:{s:O, s:o}}", "id", id, "type", "function", "function", "name",
                     name, "arguments", parsed);
}

int folio_oai_message_tool_fields(json_t *msg, size_t i, json_t *out, struct folio_oai_error *e)
{
    const char *role = json_string_value(json_object_get(msg, "role"));
    static const char *const strings[] = {"name", "tool_call_id", "reasoning_content"};
    for (size_t k = 0; k < 3; k++) {
        json_t *v = field(msg, strings[k]);
        if (v && !json_is_string(v))
            return fail(e, 400, "messages", "'messages[%zu].%s' must be a string", i, strings[k]);
        if (v)
            json_object_set(out, strings[k], v);
    }
    if (role && !strcmp(role, "tool") && !field(msg, "tool_call_id"))
        return fail(e, 400, "messages",
                    "'messages[%zu].tool_call_id' is required: a tool message answers the call "
                    "with that id",
                    i);
    json_t *calls = field(msg, "tool_calls");
    if (!calls)
        return 0;
    if (!json_is_array(calls))
        return fail(e, 400, "messages", "'messages[%zu].tool_calls' must be a list", i);
    json_t *list = json_array();
    size_t j;
    json_t *call;
    json_array_foreach(calls, j, call)
    {
        json_t *c = template_call(call, i, j, e);
        if (!c) {
            json_decref(list);
            return -1;
        }
        json_array_append_new(list, c);
    }
    json_object_set_new(out, "tool_calls", list);
    return 0;
}
