/* Filters, tests, methods and global functions of the chat-template
 * interpreter: jinja2's built-ins (jinja2/filters.py, tests.py) that chat
 * templates use, Python's str and dict methods, and the globals that
 * transformers adds (raise_exception, strftime_now). This file holds the
 * name tables, the argument helpers and the global functions; the filters,
 * tests and string helpers and methods are in chat_template_builtins_*.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat_template_internal.h"

struct named {
    const char *name;
    int id;
};

static const struct named filters[] = {
    {"abs", F_ABS},           {"attr", F_ATTR},       {"capitalize", F_CAPITALIZE},
    {"count", F_COUNT},       {"d", F_DEFAULT},       {"default", F_DEFAULT},
    {"dictsort", F_DICTSORT}, {"e", F_ESCAPE},        {"escape", F_ESCAPE},
    {"first", F_FIRST},       {"float", F_FLOAT},     {"indent", F_INDENT},
    {"int", F_INT},           {"items", F_ITEMS},     {"join", F_JOIN},
    {"last", F_LAST},         {"length", F_LENGTH},   {"list", F_LIST},
    {"lower", F_LOWER},       {"map", F_MAP},         {"max", F_MAX},
    {"min", F_MIN},           {"reject", F_REJECT},   {"rejectattr", F_REJECTATTR},
    {"replace", F_REPLACE},   {"reverse", F_REVERSE}, {"round", F_ROUND},
    {"safe", F_SAFE},         {"select", F_SELECT},   {"selectattr", F_SELECTATTR},
    {"sort", F_SORT},         {"string", F_STRING},   {"sum", F_SUM},
    {"title", F_TITLE},       {"tojson", F_TOJSON},   {"trim", F_TRIM},
    {"unique", F_UNIQUE},     {"upper", F_UPPER},     {"wordcount", F_WORDCOUNT},
};

static const struct named tests[] = {
    {"!=", T_NE},
    {"<", T_LT},
    {"<=", T_LE},
    {"==", T_EQ},
    {">", T_GT},
    {">=", T_GE},
    {"boolean", T_BOOLEAN},
    {"callable", T_CALLABLE},
    {"defined", T_DEFINED},
    {"divisibleby", T_DIVISIBLEBY},
    {"eq", T_EQ},
    {"equalto", T_EQ},
    {"even", T_EVEN},
    {"false", T_FALSE},
    {"float", T_FLOAT},
    {"ge", T_GE},
    {"greaterthan", T_GT},
    {"gt", T_GT},
    {"in", T_IN},
    {"integer", T_INTEGER},
    {"iterable", T_ITERABLE},
    {"le", T_LE},
    {"lessthan", T_LT},
    {"lower", T_LOWER},
    {"lt", T_LT},
    {"mapping", T_MAPPING},
    {"ne", T_NE},
    {"none", T_NONE},
    {"number", T_NUMBER},
    {"odd", T_ODD},
    {"sameas", T_SAMEAS},
    {"sequence", T_SEQUENCE},
    {"string", T_STRING},
    {"true", T_TRUE},
    {"undefined", T_UNDEFINED},
    {"upper", T_UPPER},
};

static const struct named globals[] = {
    {"dict", G_DICT},   {"namespace", G_NAMESPACE},       {"raise_exception", G_RAISE_EXCEPTION},
    {"range", G_RANGE}, {"strftime_now", G_STRFTIME_NOW},
};

static const struct named str_methods[] = {
    {"strip", M_STRIP},
    {"lstrip", M_LSTRIP},
    {"rstrip", M_RSTRIP},
    {"split", M_SPLIT},
    {"rsplit", M_RSPLIT},
    {"startswith", M_STARTSWITH},
    {"endswith", M_ENDSWITH},
    {"upper", M_UPPER},
    {"lower", M_LOWER},
    {"title", M_TITLE},
    {"capitalize", M_CAPITALIZE},
    {"replace", M_REPLACE},
    {"find", M_FIND},
    {"count", M_COUNT},
    {"join", M_JOIN},
    {"splitlines", M_SPLITLINES},
    {"isdigit", M_ISDIGIT},
    {"isspace", M_ISSPACE},
    {"isalpha", M_ISALPHA},
    {"isalnum", M_ISALNUM},
    {"isupper", M_ISUPPER},
    {"islower", M_ISLOWER},
};
static const struct named dict_methods[] = {
    {"get", M_GET},
    {"items", M_ITEMS},
    {"keys", M_KEYS},
    {"values", M_VALUES},
};
static const struct named loop_methods[] = {{"cycle", M_CYCLE}};
static const struct named list_methods[] = {{"index", M_INDEX}, {"count", M_LIST_COUNT}};

#define COUNT(x) (sizeof(x) / sizeof((x)[0]))

static int find_named(const struct named *t, size_t n, const char *name, size_t len)
{
    for (size_t i = 0; i < n; i++)
        if (strlen(t[i].name) == len && memcmp(t[i].name, name, len) == 0)
            return t[i].id;
    return -1;
}

int ct_filter_id(const char *name, size_t len)
{
    return find_named(filters, COUNT(filters), name, len);
}

int ct_test_id(const char *name, size_t len)
{
    return find_named(tests, COUNT(tests), name, len);
}

int ct_global_id(const char *name, size_t len)
{
    return find_named(globals, COUNT(globals), name, len);
}

int ct_method_id(uint8_t type, const char *name, size_t len)
{
    switch (type) {
    case CT_STR:
        return find_named(str_methods, COUNT(str_methods), name, len);
    case CT_DICT:
        return find_named(dict_methods, COUNT(dict_methods), name, len);
    case CT_LOOP:
        return find_named(loop_methods, COUNT(loop_methods), name, len);
    case CT_LIST:
        return find_named(list_methods, COUNT(list_methods), name, len);
    default:
        return -1;
    }
}

/* ---- argument helpers ---- */

/* Argument pos (0-based, after the filter's operand) or keyword name. */
const struct ct_value *ct_arg(const struct ct_args *a, size_t pos, const char *name)
{
    if (pos < a->npos)
        return &a->pos[pos];
    size_t len = strlen(name);
    for (size_t i = 0; i < a->nkw; i++)
        if (a->kw_lens[i] == len && memcmp(a->kw_names[i], name, len) == 0)
            return &a->kw[i];
    return NULL;
}

void ct_max_args(struct ct_render *r, const struct ct_node *at, const struct ct_args *a, size_t n,
                 const char *what)
{
    if (a->npos > n)
        ct_error(r, at, "%s takes at most %zu positional argument(s), got %zu", what, n, a->npos);
}

const struct ct_value *ct_str_arg(struct ct_render *r, const struct ct_node *at,
                                  const struct ct_args *a, size_t pos, const char *name,
                                  const char *what)
{
    const struct ct_value *v = ct_arg(a, pos, name);
    if (v && v->type != CT_STR && v->type != CT_NONE)
        ct_error(r, at, "%s: argument '%s' must be a string, not %s", what, name,
                 ct_type_name(v->type));
    return v && v->type == CT_STR ? v : NULL;
}

int64_t ct_int_arg(struct ct_render *r, const struct ct_node *at, const struct ct_args *a,
                   size_t pos, const char *name, int64_t dflt, const char *what)
{
    const struct ct_value *v = ct_arg(a, pos, name);
    if (!v || v->type == CT_NONE)
        return dflt;
    if (v->type == CT_INT)
        return v->u.i;
    if (v->type == CT_BOOL)
        return v->u.b;
    ct_error(r, at, "%s: argument '%s' must be an integer, not %s", what, name,
             ct_type_name(v->type));
}

bool ct_bool_arg(const struct ct_args *a, size_t pos, const char *name, bool dflt)
{
    const struct ct_value *v = ct_arg(a, pos, name);
    return v ? ct_truthy(v) : dflt;
}

struct ct_value ct_empty_str(void)
{
    return ct_str("", 0);
}

struct ct_value ct_from_buf(const struct ct_buf *b)
{
    return ct_str(b->data ? b->data : "", b->len);
}

static struct ct_value strftime_now(struct ct_render *r, const struct ct_node *at,
                                    const struct ct_value *fmt)
{
    if (!fmt || fmt->type != CT_STR)
        ct_error(r, at, "strftime_now needs a format string");
    char *f = ct_strdup(&r->arena, fmt->u.s, fmt->len);
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    char out[512];
    size_t n = strftime(out, sizeof(out), f, &tm);
    if (n == 0 && fmt->len)
        ct_error(r, at, "strftime_now: format too long or empty result");
    return ct_str_copy(&r->arena, out, n);
}

struct ct_value ct_call_global(struct ct_render *r, const struct ct_node *at, int id,
                               const struct ct_args *args)
{
    switch ((enum global_id)id) {
    case G_RAISE_EXCEPTION: {
        /* The template's own message, verbatim: it says what is wrong with
         * the request (e.g. roles that do not alternate). */
        struct ct_value msg = args->npos ? ct_to_str(&r->arena, &args->pos[0]) : ct_empty_str();
        ct_fail(&r->arena, "%.*s", (int)msg.len, msg.u.s);
    }
    case G_NAMESPACE:
    case G_DICT: {
        struct ct_value d = ct_dict_new(&r->arena, args->nkw + 4);
        if (id == G_NAMESPACE)
            d.type = CT_NS;
        for (size_t i = 0; i < args->npos; i++) {
            const struct ct_value *init = &args->pos[i];
            if (init->type != CT_DICT)
                ct_error(r, at, "namespace()/dict() take a mapping or keyword arguments");
            for (size_t k = 0; k < init->u.dict->len; k++)
                ct_dict_set(&r->arena, &d, init->u.dict->keys[k], init->u.dict->vals[k]);
        }
        for (size_t i = 0; i < args->nkw; i++)
            ct_dict_set(&r->arena, &d, ct_str(args->kw_names[i], args->kw_lens[i]), args->kw[i]);
        return d;
    }
    case G_RANGE: {
        int64_t start = 0, stop, step = 1;
        for (size_t i = 0; i < args->npos; i++)
            if (args->pos[i].type != CT_INT && args->pos[i].type != CT_BOOL)
                ct_error(r, at, "range() arguments must be integers");
        if (args->npos == 1) {
            stop = ct_int_arg(r, at, args, 0, "stop", 0, "range");
        } else if (args->npos == 2 || args->npos == 3) {
            start = ct_int_arg(r, at, args, 0, "start", 0, "range");
            stop = ct_int_arg(r, at, args, 1, "stop", 0, "range");
            step = ct_int_arg(r, at, args, 2, "step", 1, "range");
        } else {
            ct_error(r, at, "range expected 1 to 3 arguments, got %zu", args->npos);
        }
        if (step == 0)
            ct_error(r, at, "range() arg 3 must not be zero");
        /* jinja2's sandbox refuses ranges of more than 100000 items. */
        double count = step > 0 ? ceil(((double)stop - (double)start) / (double)step)
                                : ceil(((double)start - (double)stop) / (double)-step);
        if (count < 0)
            count = 0;
        if (count > 100000)
            ct_error(r, at,
                     "Range too big. The sandbox blocks ranges larger than MAX_RANGE "
                     "(100000).");
        struct ct_value l = ct_list_new(&r->arena, (size_t)count);
        for (size_t i = 0; i < (size_t)count; i++)
            l.u.list->items[i] = ct_int(start + (int64_t)i * step);
        l.u.list->len = (size_t)count;
        return l;
    }
    case G_STRFTIME_NOW:
        return strftime_now(r, at, ct_arg(args, 0, "format"));
    }
    ct_error(r, at, "internal error: unknown function");
}
