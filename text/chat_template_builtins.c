/* Filters, tests, methods and global functions of the chat-template
 * interpreter: jinja2's built-ins (jinja2/filters.py, tests.py) that chat
 * templates use, Python's str and dict methods, and the globals that
 * transformers adds (raise_exception, strftime_now). In this order: the
 * name tables, the argument helpers and the global functions; the filters
 * with their list, sort and JSON helpers; the string helpers and the methods
 * of str, dict, list and loop values; the tests of `is` and select/reject. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat_template_internal.h"

static const struct ct_value *ct_arg(const struct ct_args *a, size_t pos, const char *name);
static bool ct_bool_arg(const struct ct_args *a, size_t pos, const char *name, bool dflt);
static struct ct_value ct_change_case(struct ct_arena *a, struct ct_value s, enum ct_casing how);
static struct ct_value ct_empty_str(void);
static const char *ct_find_sub(const char *h, size_t hl, const char *n, size_t nl);
static struct ct_value ct_from_buf(const struct ct_buf *b);
static int64_t ct_int_arg(struct ct_render *r, const struct ct_node *at, const struct ct_args *a,
                          size_t pos, const char *name, int64_t dflt, const char *what);
static struct ct_value ct_jinja_title(struct ct_arena *a, struct ct_value s);
static struct ct_value ct_join(struct ct_render *r, const struct ct_value *items,
                               struct ct_value sep);
static void ct_max_args(struct ct_render *r, const struct ct_node *at, const struct ct_args *a,
                        size_t n, const char *what);
static struct ct_value ct_replace(struct ct_render *r, struct ct_value s, struct ct_value old,
                                  struct ct_value new, int64_t count);
static struct ct_value ct_split(struct ct_render *r, const struct ct_node *at, struct ct_value s,
                                const struct ct_value *sep, int64_t maxsplit);
static struct ct_value ct_splitlines(struct ct_render *r, struct ct_value s, bool keepends);
static const struct ct_value *ct_str_arg(struct ct_render *r, const struct ct_node *at,
                                         const struct ct_args *a, size_t pos, const char *name,
                                         const char *what);
static struct ct_value ct_strip(struct ct_value s, const struct ct_value *chars, bool left,
                                bool right);
static uint32_t ct_to_lower(uint32_t c);
static uint32_t ct_to_upper(uint32_t c);

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
static const struct ct_value *ct_arg(const struct ct_args *a, size_t pos, const char *name)
{
    if (pos < a->npos)
        return &a->pos[pos];
    size_t len = strlen(name);
    for (size_t i = 0; i < a->nkw; i++)
        if (a->kw_lens[i] == len && memcmp(a->kw_names[i], name, len) == 0)
            return &a->kw[i];
    return NULL;
}

static void ct_max_args(struct ct_render *r, const struct ct_node *at, const struct ct_args *a,
                        size_t n, const char *what)
{
    if (a->npos > n)
        ct_error(r, at, "%s takes at most %zu positional argument(s), got %zu", what, n, a->npos);
}

static const struct ct_value *ct_str_arg(struct ct_render *r, const struct ct_node *at,
                                         const struct ct_args *a, size_t pos, const char *name,
                                         const char *what)
{
    const struct ct_value *v = ct_arg(a, pos, name);
    if (v && v->type != CT_STR && v->type != CT_NONE)
        ct_error(r, at, "%s: argument '%s' must be a string, not %s", what, name,
                 ct_type_name(v->type));
    return v && v->type == CT_STR ? v : NULL;
}

static int64_t ct_int_arg(struct ct_render *r, const struct ct_node *at, const struct ct_args *a,
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

static bool ct_bool_arg(const struct ct_args *a, size_t pos, const char *name, bool dflt)
{
    const struct ct_value *v = ct_arg(a, pos, name);
    return v ? ct_truthy(v) : dflt;
}

static struct ct_value ct_empty_str(void)
{
    return ct_str("", 0);
}

static struct ct_value ct_from_buf(const struct ct_buf *b)
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

static struct ct_value reversed(struct ct_render *r, const struct ct_node *at,
                                const struct ct_value *v)
{
    if (v->type == CT_STR) {
        struct ct_value chars = ct_iterate(r, at, v);
        struct ct_buf b = {0};
        for (size_t i = chars.u.list->len; i-- > 0;)
            ct_buf_put(&r->arena, &b, chars.u.list->items[i].u.s, chars.u.list->items[i].len);
        return ct_from_buf(&b);
    }
    struct ct_value items = ct_iterate(r, at, v);
    size_t n = items.u.list->len;
    struct ct_value l = ct_list_new(&r->arena, n);
    for (size_t i = 0; i < n; i++)
        l.u.list->items[i] = items.u.list->items[n - 1 - i];
    l.u.list->len = n;
    return l;
}

/* jinja2's make_attrgetter: "a.b.0" looks up a, then b, then item 0. */
static struct ct_value get_path(struct ct_render *r, const struct ct_node *at, struct ct_value v,
                                const struct ct_value *path)
{
    if (path->type == CT_INT)
        return ct_getitem(r, at, &v, path);
    if (path->type != CT_STR)
        ct_error(r, at, "attribute must be a string or an integer");
    size_t start = 0;
    for (size_t i = 0; i <= path->len; i++) {
        if (i < path->len && path->u.s[i] != '.')
            continue;
        const char *part = path->u.s + start;
        size_t len = i - start;
        bool digits = len > 0;
        int64_t num = 0;
        for (size_t k = 0; k < len && digits; k++) {
            if (part[k] < '0' || part[k] > '9')
                digits = false;
            else
                num = num * 10 + (part[k] - '0');
        }
        struct ct_value key = digits ? ct_int(num) : ct_str(part, len);
        if (v.type == CT_UNDEF)
            return v;
        v = ct_getitem(r, at, &v, &key);
        start = i + 1;
    }
    return v;
}

/* Keys for sort, unique, min, max: lower-cased strings unless case_sensitive. */
static struct ct_value sort_key(struct ct_render *r, const struct ct_node *at, struct ct_value v,
                                const struct ct_value *attribute, bool case_sensitive)
{
    if (attribute)
        v = get_path(r, at, v, attribute);
    if (!case_sensitive && v.type == CT_STR)
        v = ct_change_case(&r->arena, v, CASE_LOWER);
    return v;
}

/* A stable merge sort (Python's sort is stable) of items by keys. */
static void merge_sort(struct ct_render *r, const struct ct_node *at, struct ct_value *items,
                       struct ct_value *keys, size_t n, bool reverse, struct ct_value *tmp_i,
                       struct ct_value *tmp_k)
{
    if (n < 2)
        return;
    size_t h = n / 2;
    merge_sort(r, at, items, keys, h, reverse, tmp_i, tmp_k);
    merge_sort(r, at, items + h, keys + h, n - h, reverse, tmp_i, tmp_k);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) {
        int c = ct_compare(r, at, &keys[j], &keys[i]);
        bool take_right = reverse ? c > 0 : c < 0;
        if (take_right) {
            tmp_i[k] = items[j];
            tmp_k[k++] = keys[j++];
        } else {
            tmp_i[k] = items[i];
            tmp_k[k++] = keys[i++];
        }
    }
    while (i < h) {
        tmp_i[k] = items[i];
        tmp_k[k++] = keys[i++];
    }
    while (j < n) {
        tmp_i[k] = items[j];
        tmp_k[k++] = keys[j++];
    }
    memcpy(items, tmp_i, n * sizeof(*items));
    memcpy(keys, tmp_k, n * sizeof(*keys));
}

static struct ct_value sorted(struct ct_render *r, const struct ct_node *at,
                              const struct ct_value *v, bool reverse, bool case_sensitive,
                              const struct ct_value *attribute)
{
    struct ct_value items = ct_iterate(r, at, v);
    size_t n = items.u.list->len;
    struct ct_value l = ct_list_new(&r->arena, n);
    struct ct_value *keys = ct_alloc(&r->arena, (n + 1) * sizeof(*keys));
    for (size_t i = 0; i < n; i++) {
        l.u.list->items[i] = items.u.list->items[i];
        keys[i] = sort_key(r, at, items.u.list->items[i], attribute, case_sensitive);
    }
    l.u.list->len = n;
    struct ct_value *ti = ct_alloc(&r->arena, (n + 1) * sizeof(*ti));
    struct ct_value *tk = ct_alloc(&r->arena, (n + 1) * sizeof(*tk));
    merge_sort(r, at, l.u.list->items, keys, n, reverse, ti, tk);
    return l;
}

static struct ct_value tojson(struct ct_render *r, const struct ct_node *at,
                              const struct ct_value *v, const struct ct_args *args)
{
    ct_max_args(r, at, args, 4, "tojson");
    bool ensure_ascii = ct_bool_arg(args, 0, "ensure_ascii", false);
    const struct ct_value *indent = ct_arg(args, 1, "indent");
    const struct ct_value *separators = ct_arg(args, 2, "separators");
    bool sort_keys = ct_bool_arg(args, 3, "sort_keys", false);
    const char *ind = NULL;
    size_t ilen = 0;
    if (indent && indent->type != CT_NONE) {
        if (indent->type == CT_STR) {
            ind = indent->u.s;
            ilen = indent->len;
        } else if (indent->type == CT_INT) {
            int64_t k = indent->u.i < 0 ? 0 : indent->u.i > 64 ? 64 : indent->u.i;
            char *spaces = ct_alloc(&r->arena, (size_t)k + 1);
            memset(spaces, ' ', (size_t)k);
            ind = spaces;
            ilen = (size_t)k;
        } else {
            ct_error(r, at, "tojson: indent must be an integer or a string");
        }
    }
    const char *item_sep = ind ? "," : ", ", *key_sep = ": ";
    if (separators && separators->type != CT_NONE) {
        if (separators->type != CT_LIST || separators->u.list->len != 2 ||
            separators->u.list->items[0].type != CT_STR ||
            separators->u.list->items[1].type != CT_STR)
            ct_error(r, at, "tojson: separators must be a pair of strings");
        item_sep = ct_strdup(&r->arena, separators->u.list->items[0].u.s,
                             separators->u.list->items[0].len);
        key_sep = ct_strdup(&r->arena, separators->u.list->items[1].u.s,
                            separators->u.list->items[1].len);
    }
    if (v->type == CT_UNDEF)
        ct_error(r, at, "tojson: Object of type Undefined is not JSON serializable");
    struct ct_buf b = {0};
    ct_put_json(&r->arena, &b, v, ind, ilen, item_sep, key_sep, sort_keys, ensure_ascii, 0);
    return ct_from_buf(&b);
}

/* jinja2's indent filter (3.x): lines after the first indented, blank
 * lines left alone unless blank=True. */
static struct ct_value indent(struct ct_render *r, const struct ct_node *at, struct ct_value s,
                              const struct ct_args *args)
{
    const struct ct_value *w = ct_arg(args, 0, "width");
    struct ct_value ind;
    if (w && w->type == CT_STR) {
        ind = *w;
    } else {
        int64_t k = ct_int_arg(r, at, args, 0, "width", 4, "indent");
        if (k < 0)
            k = 0;
        if (k > 1024)
            ct_error(r, at, "indent: width too large");
        char *sp = ct_alloc(&r->arena, (size_t)k + 1);
        memset(sp, ' ', (size_t)k);
        ind = ct_str(sp, (size_t)k);
    }
    bool first = ct_bool_arg(args, 1, "first", false);
    bool blank = ct_bool_arg(args, 2, "blank", false);
    struct ct_buf tmp = {0};
    ct_buf_put(&r->arena, &tmp, s.u.s, s.len);
    ct_buf_putc(&r->arena, &tmp, '\n');
    struct ct_value lines = ct_splitlines(r, ct_from_buf(&tmp), false);
    struct ct_buf b = {0};
    for (size_t i = 0; i < lines.u.list->len; i++) {
        const struct ct_value *line = &lines.u.list->items[i];
        if (i) {
            ct_buf_putc(&r->arena, &b, '\n');
            if (blank || line->len)
                ct_buf_put(&r->arena, &b, ind.u.s, ind.len);
        }
        ct_buf_put(&r->arena, &b, line->u.s, line->len);
    }
    if (first) {
        struct ct_buf f = {0};
        ct_buf_put(&r->arena, &f, ind.u.s, ind.len);
        ct_buf_put(&r->arena, &f, b.data ? b.data : "", b.len);
        return ct_from_buf(&f);
    }
    return ct_from_buf(&b);
}

/* Python's int() of a string: optional sign, digits, underscores between
 * digits, surrounding whitespace. */
static bool parse_int(struct ct_value s, int64_t base, int64_t *out)
{
    struct ct_value t = ct_strip(s, NULL, true, true);
    size_t i = 0;
    bool neg = false;
    if (i < t.len && (t.u.s[i] == '+' || t.u.s[i] == '-'))
        neg = t.u.s[i++] == '-';
    if (i >= t.len)
        return false;
    /* A 0x / 0o / 0b prefix that matches the base (base 0: any). */
    if (i + 1 < t.len && t.u.s[i] == '0') {
        char p = (char)(t.u.s[i + 1] | 0x20);
        int64_t pb = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
        if (pb && (base == pb || base == 0)) {
            base = pb;
            i += 2;
            if (i < t.len && t.u.s[i] == '_')
                i++;
        }
    }
    if (base == 0)
        base = 10;
    int64_t v = 0;
    bool prev_digit = false;
    for (; i < t.len; i++) {
        char c = t.u.s[i];
        if (c == '_' && prev_digit && i + 1 < t.len) {
            prev_digit = false;
            continue;
        }
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'z' ? c - 'a' + 10
                : c >= 'A' && c <= 'Z' ? c - 'A' + 10
                                       : 99;
        if (d >= base)
            return false;
        if (__builtin_mul_overflow(v, base, &v) || __builtin_add_overflow(v, d, &v))
            return false;
        prev_digit = true;
    }
    if (!prev_digit)
        return false;
    *out = neg ? -v : v;
    return true;
}

static bool parse_float(struct ct_arena *a, struct ct_value s, double *out)
{
    struct ct_value t = ct_strip(s, NULL, true, true);
    if (t.len == 0)
        return false;
    char *z = ct_strdup(a, t.u.s, t.len);
    for (size_t i = 0; i < t.len; i++)
        if (!strchr("0123456789+-.eEinfatyINFATY", z[i]))
            return false;
    char *end;
    *out = strtod(z, &end);
    return *end == 0;
}

/* select/reject/selectattr/rejectattr: keep the items whose test (or
 * truth value) is want. */
static struct ct_value select_items(struct ct_render *r, const struct ct_node *at,
                                    const struct ct_value *v, const struct ct_args *args,
                                    bool by_attr, bool want)
{
    struct ct_value items = ct_iterate(r, at, v);
    size_t next = 0;
    const struct ct_value *attribute = NULL;
    if (by_attr) {
        if (args->npos < 1)
            ct_error(r, at, "selectattr/rejectattr need an attribute name");
        attribute = &args->pos[next++];
    }
    int test = -1;
    struct ct_args test_args = {0};
    if (next < args->npos) {
        const struct ct_value *name = &args->pos[next++];
        if (name->type != CT_STR)
            ct_error(r, at, "the test name must be a string");
        test = ct_test_id(name->u.s, name->len);
        if (test < 0)
            ct_error(r, at, "no test named '%.*s'", (int)name->len, name->u.s);
        test_args.pos = args->pos + next;
        test_args.npos = args->npos - next;
        test_args.kw = args->kw;
        test_args.kw_names = args->kw_names;
        test_args.kw_lens = args->kw_lens;
        test_args.nkw = args->nkw;
    }
    struct ct_value out = ct_list_new(&r->arena, items.u.list->len);
    for (size_t i = 0; i < items.u.list->len; i++) {
        ct_step(r, at);
        struct ct_value item = items.u.list->items[i];
        struct ct_value subject = attribute ? get_path(r, at, item, attribute) : item;
        bool ok =
            test >= 0 ? ct_apply_test(r, at, test, &subject, &test_args) : ct_truthy(&subject);
        if (ok == want)
            out.u.list->items[out.u.list->len++] = item;
    }
    return out;
}

static struct ct_value map_items(struct ct_render *r, const struct ct_node *at,
                                 const struct ct_value *v, const struct ct_args *args)
{
    struct ct_value items = ct_iterate(r, at, v);
    struct ct_value out = ct_list_new(&r->arena, items.u.list->len);
    const struct ct_value *attribute = ct_arg(args, 99, "attribute");
    if (attribute) {
        const struct ct_value *dflt = ct_arg(args, 99, "default");
        for (size_t i = 0; i < items.u.list->len; i++) {
            struct ct_value x = get_path(r, at, items.u.list->items[i], attribute);
            if (x.type == CT_UNDEF && dflt)
                x = *dflt;
            out.u.list->items[out.u.list->len++] = x;
        }
        return out;
    }
    if (args->npos < 1 || args->pos[0].type != CT_STR)
        ct_error(r, at, "map needs a filter name or attribute=");
    int id = ct_filter_id(args->pos[0].u.s, args->pos[0].len);
    if (id < 0)
        ct_error(r, at, "no filter named '%.*s'", (int)args->pos[0].len, args->pos[0].u.s);
    struct ct_args rest = *args;
    rest.pos++;
    rest.npos--;
    for (size_t i = 0; i < items.u.list->len; i++) {
        ct_step(r, at);
        out.u.list->items[out.u.list->len++] =
            ct_apply_filter(r, at, id, items.u.list->items[i], &rest);
    }
    return out;
}

static struct ct_value min_max(struct ct_render *r, const struct ct_node *at,
                               const struct ct_value *v, const struct ct_args *args, bool max)
{
    struct ct_value items = ct_iterate(r, at, v);
    bool cs = ct_bool_arg(args, 0, "case_sensitive", false);
    const struct ct_value *attribute = ct_arg(args, 1, "attribute");
    if (items.u.list->len == 0)
        return ct_undef(NULL, 0, 0);
    size_t best = 0;
    struct ct_value best_key = sort_key(r, at, items.u.list->items[0], attribute, cs);
    for (size_t i = 1; i < items.u.list->len; i++) {
        struct ct_value k = sort_key(r, at, items.u.list->items[i], attribute, cs);
        int c = ct_compare(r, at, &k, &best_key);
        if (max ? c > 0 : c < 0) {
            best = i;
            best_key = k;
        }
    }
    return items.u.list->items[best];
}

/* The parameters of each filter after its operand, as Python declares
 * them: keyword arguments must be among them and positional ones no more
 * than them. NULL: any (the filter passes them on to a test or filter). */
static const char *const filter_params[] = {
    [F_ABS] = "",
    [F_ATTR] = "name",
    [F_CAPITALIZE] = "",
    [F_COUNT] = "",
    [F_DEFAULT] = "default_value boolean",
    [F_DICTSORT] = "case_sensitive by reverse",
    [F_ESCAPE] = "",
    [F_FIRST] = "",
    [F_FLOAT] = "default",
    [F_INDENT] = "width first blank",
    [F_INT] = "default base",
    [F_ITEMS] = "",
    [F_JOIN] = "d attribute",
    [F_LAST] = "",
    [F_LENGTH] = "",
    [F_LIST] = "",
    [F_LOWER] = "",
    [F_MAP] = NULL,
    [F_MAX] = "case_sensitive attribute",
    [F_MIN] = "case_sensitive attribute",
    [F_REJECT] = NULL,
    [F_REJECTATTR] = NULL,
    [F_REPLACE] = "old new count",
    [F_REVERSE] = "",
    [F_ROUND] = "precision method",
    [F_SAFE] = "",
    [F_SELECT] = NULL,
    [F_SELECTATTR] = NULL,
    [F_SORT] = "reverse case_sensitive attribute",
    [F_STRING] = "",
    [F_SUM] = "attribute start",
    [F_TITLE] = "",
    [F_TOJSON] = "ensure_ascii indent separators sort_keys",
    [F_TRIM] = "chars",
    [F_UNIQUE] = "case_sensitive attribute",
    [F_UPPER] = "",
    [F_WORDCOUNT] = "",
};

static void check_filter_args(struct ct_render *r, const struct ct_node *at, int id,
                              const struct ct_args *args)
{
    const char *params = filter_params[id];
    if (!params)
        return;
    size_t count = 0;
    for (const char *q = params; *q;) {
        count++;
        q += strcspn(q, " ");
        q += *q == ' ';
    }
    if (args->npos > count)
        ct_error(r, at, "%.*s() takes at most %zu argument(s), got %zu", (int)at->name_len,
                 at->name, count, args->npos);
    for (size_t k = 0; k < args->nkw; k++) {
        bool known = false;
        for (const char *q = params; *q && !known;) {
            size_t len = strcspn(q, " ");
            known = len == args->kw_lens[k] && memcmp(q, args->kw_names[k], len) == 0;
            q += len;
            q += *q == ' ';
        }
        if (!known)
            ct_error(r, at, "%.*s() got an unexpected keyword argument '%.*s'", (int)at->name_len,
                     at->name, (int)args->kw_lens[k], args->kw_names[k]);
    }
}

/* The dictsort filter (ct_apply_filter's case F_DICTSORT). */
static struct ct_value filter_dictsort(struct ct_render *r, const struct ct_node *at,
                                       struct ct_value v, const struct ct_args *args)
{
    struct ct_arena *a = &r->arena;
    if (v.type != CT_DICT)
        ct_error(r, at, "dictsort needs a mapping");
    bool cs = ct_bool_arg(args, 0, "case_sensitive", false);
    const struct ct_value *by = ct_str_arg(r, at, args, 1, "by", "dictsort");
    bool by_value = by && by->len == 5 && memcmp(by->u.s, "value", 5) == 0;
    bool reverse = ct_bool_arg(args, 2, "reverse", false);
    struct ct_value pairs = ct_list_new(a, v.u.dict->len);
    for (size_t i = 0; i < v.u.dict->len; i++) {
        struct ct_value t = ct_list_new(a, 2);
        t.flags = CT_F_TUPLE;
        t.u.list->items[0] = v.u.dict->keys[i];
        t.u.list->items[1] = v.u.dict->vals[i];
        t.u.list->len = 2;
        pairs.u.list->items[pairs.u.list->len++] = t;
    }
    struct ct_value pos = ct_int(by_value ? 1 : 0);
    return sorted(r, at, &pairs, reverse, cs, &pos);
}

/* The escape filter (ct_apply_filter's case F_ESCAPE). */
static struct ct_value filter_escape(struct ct_render *r, struct ct_value v)
{
    struct ct_arena *a = &r->arena;
    struct ct_value s = ct_to_str(a, &v);
    struct ct_buf b = {0};
    for (size_t i = 0; i < s.len; i++) {
        char c = s.u.s[i];
        const char *rep = c == '&'    ? "&amp;"
                          : c == '<'  ? "&lt;"
                          : c == '>'  ? "&gt;"
                          : c == '"'  ? "&#34;"
                          : c == '\'' ? "&#39;"
                                      : NULL;
        if (rep)
            ct_buf_put(a, &b, rep, strlen(rep));
        else
            ct_buf_putc(a, &b, c);
    }
    return ct_from_buf(&b);
}

/* The float filter (ct_apply_filter's case F_FLOAT). */
static struct ct_value filter_float(struct ct_render *r, struct ct_value v,
                                    const struct ct_args *args)
{
    struct ct_arena *a = &r->arena;
    const struct ct_value *d = ct_arg(args, 0, "default");
    double f;
    if (v.type == CT_FLOAT)
        return v;
    if (v.type == CT_INT || v.type == CT_BOOL)
        return ct_float(v.type == CT_INT ? (double)v.u.i : v.u.b);
    if (v.type == CT_STR && parse_float(a, v, &f))
        return ct_float(f);
    return d ? *d : ct_float(0.0);
}

/* The int filter (ct_apply_filter's case F_INT). */
static struct ct_value filter_int(struct ct_render *r, const struct ct_node *at, struct ct_value v,
                                  const struct ct_args *args)
{
    struct ct_arena *a = &r->arena;
    const struct ct_value *d = ct_arg(args, 0, "default");
    int64_t base = ct_int_arg(r, at, args, 1, "base", 10, "int");
    int64_t i;
    double f;
    if (v.type == CT_INT)
        return v;
    if (v.type == CT_BOOL)
        return ct_int(v.u.b);
    if (v.type == CT_FLOAT && isfinite(v.u.f) && fabs(v.u.f) < 9.2e18)
        return ct_int((int64_t)v.u.f);
    if (v.type == CT_STR) {
        if ((base == 0 || (base >= 2 && base <= 36)) && parse_int(v, base, &i))
            return ct_int(i);
        if (parse_float(a, v, &f) && isfinite(f) && fabs(f) < 9.2e18)
            return ct_int((int64_t)f);
    }
    return d ? *d : ct_int(0);
}

/* The items filter (ct_apply_filter's case F_ITEMS). */
static struct ct_value filter_items(struct ct_render *r, const struct ct_node *at,
                                    struct ct_value v)
{
    struct ct_arena *a = &r->arena;
    if (v.type == CT_UNDEF)
        return ct_list_new(a, 0);
    if (v.type != CT_DICT)
        ct_error(r, at, "Can only get item pairs from a mapping.");
    struct ct_value pairs = ct_list_new(a, v.u.dict->len);
    for (size_t i = 0; i < v.u.dict->len; i++) {
        struct ct_value t = ct_list_new(a, 2);
        t.flags = CT_F_TUPLE;
        t.u.list->items[0] = v.u.dict->keys[i];
        t.u.list->items[1] = v.u.dict->vals[i];
        t.u.list->len = 2;
        pairs.u.list->items[pairs.u.list->len++] = t;
    }
    return pairs;
}

/* The join filter (ct_apply_filter's case F_JOIN). */
static struct ct_value filter_join(struct ct_render *r, const struct ct_node *at, struct ct_value v,
                                   const struct ct_args *args)
{
    struct ct_arena *a = &r->arena;
    const struct ct_value *sep = ct_arg(args, 0, "d");
    const struct ct_value *attribute = ct_arg(args, 1, "attribute");
    struct ct_value items = ct_iterate(r, at, &v);
    if (attribute) {
        struct ct_value mapped = ct_list_new(a, items.u.list->len);
        for (size_t i = 0; i < items.u.list->len; i++)
            mapped.u.list->items[mapped.u.list->len++] =
                get_path(r, at, items.u.list->items[i], attribute);
        items = mapped;
    }
    return ct_join(r, &items, sep ? ct_to_str(a, sep) : ct_empty_str());
}

/* The replace filter (ct_apply_filter's case F_REPLACE). */
static struct ct_value filter_replace(struct ct_render *r, const struct ct_node *at,
                                      struct ct_value v, const struct ct_args *args)
{
    struct ct_arena *a = &r->arena;
    const struct ct_value *old = ct_arg(args, 0, "old");
    const struct ct_value *new = ct_arg(args, 1, "new");
    if (!old || !new)
        ct_error(r, at, "replace needs the old and the new string");
    int64_t count = ct_int_arg(r, at, args, 2, "count", -1, "replace");
    return ct_replace(r, ct_to_str(a, &v), ct_to_str(a, old), ct_to_str(a, new), count);
}

/* The round filter (ct_apply_filter's case F_ROUND). */
static struct ct_value filter_round(struct ct_render *r, const struct ct_node *at,
                                    struct ct_value v, const struct ct_args *args)
{
    int64_t precision = ct_int_arg(r, at, args, 0, "precision", 0, "round");
    const struct ct_value *method = ct_str_arg(r, at, args, 1, "method", "round");
    double x = v.type == CT_FLOAT ? v.u.f : v.type == CT_INT ? (double)v.u.i : 0;
    if (v.type != CT_FLOAT && v.type != CT_INT && v.type != CT_BOOL)
        ct_error(r, at, "round needs a number");
    if (v.type == CT_BOOL)
        x = v.u.b;
    double scale = pow(10.0, (double)precision), y = x * scale;
    if (method && method->len == 4 && memcmp(method->u.s, "ceil", 4) == 0)
        y = ceil(y);
    else if (method && method->len == 5 && memcmp(method->u.s, "floor", 5) == 0)
        y = floor(y);
    else
        y = nearbyint(y); /* round half to even, as Python's round() */
    return ct_float(y / scale);
}

/* The sort filter (ct_apply_filter's case F_SORT). */
static struct ct_value filter_sort(struct ct_render *r, const struct ct_node *at, struct ct_value v,
                                   const struct ct_args *args)
{
    bool reverse = ct_bool_arg(args, 0, "reverse", false);
    bool cs = ct_bool_arg(args, 1, "case_sensitive", false);
    const struct ct_value *attribute = ct_arg(args, 2, "attribute");
    return sorted(r, at, &v, reverse, cs, attribute);
}

/* The sum filter (ct_apply_filter's case F_SUM). */
static struct ct_value filter_sum(struct ct_render *r, const struct ct_node *at, struct ct_value v,
                                  const struct ct_args *args)
{
    const struct ct_value *attribute = ct_arg(args, 0, "attribute");
    const struct ct_value *start = ct_arg(args, 1, "start");
    struct ct_value items = ct_iterate(r, at, &v);
    struct ct_value total = start ? *start : ct_int(0);
    for (size_t i = 0; i < items.u.list->len; i++) {
        struct ct_value x = items.u.list->items[i];
        if (attribute)
            x = get_path(r, at, x, attribute);
        if (total.type == CT_FLOAT || x.type == CT_FLOAT) {
            if ((total.type != CT_FLOAT && total.type != CT_INT && total.type != CT_BOOL) ||
                (x.type != CT_FLOAT && x.type != CT_INT && x.type != CT_BOOL))
                ct_error(r, at, "sum: unsupported operand types");
            double t = total.type == CT_FLOAT ? total.u.f
                       : total.type == CT_INT ? (double)total.u.i
                                              : total.u.b;
            double y = x.type == CT_FLOAT ? x.u.f : x.type == CT_INT ? (double)x.u.i : x.u.b;
            total = ct_float(t + y);
        } else if ((total.type == CT_INT || total.type == CT_BOOL) &&
                   (x.type == CT_INT || x.type == CT_BOOL)) {
            int64_t t = total.type == CT_INT ? total.u.i : total.u.b, z;
            if (__builtin_add_overflow(t, x.type == CT_INT ? x.u.i : x.u.b, &z))
                ct_error(r, at, "integer overflow");
            total = ct_int(z);
        } else {
            ct_error(r, at, "sum: unsupported operand type(s) for +: '%s' and '%s'",
                     ct_type_name(total.type), ct_type_name(x.type));
        }
    }
    return total;
}

/* The unique filter (ct_apply_filter's case F_UNIQUE). */
static struct ct_value filter_unique(struct ct_render *r, const struct ct_node *at,
                                     struct ct_value v, const struct ct_args *args)
{
    struct ct_arena *a = &r->arena;
    bool cs = ct_bool_arg(args, 0, "case_sensitive", false);
    const struct ct_value *attribute = ct_arg(args, 1, "attribute");
    struct ct_value items = ct_iterate(r, at, &v);
    struct ct_value out = ct_list_new(a, items.u.list->len);
    struct ct_value seen = ct_list_new(a, items.u.list->len);
    for (size_t i = 0; i < items.u.list->len; i++) {
        ct_step(r, at);
        struct ct_value k = sort_key(r, at, items.u.list->items[i], attribute, cs);
        bool dup = false;
        for (size_t j = 0; j < seen.u.list->len && !dup; j++)
            dup = ct_equal(&seen.u.list->items[j], &k);
        if (!dup) {
            seen.u.list->items[seen.u.list->len++] = k;
            out.u.list->items[out.u.list->len++] = items.u.list->items[i];
        }
    }
    return out;
}

struct ct_value ct_apply_filter(struct ct_render *r, const struct ct_node *at, int id,
                                struct ct_value v, const struct ct_args *args)
{
    struct ct_arena *a = &r->arena;
    check_filter_args(r, at, id, args);
    switch ((enum filter_id)id) {
    case F_ABS:
        if (v.type == CT_INT)
            return ct_int(v.u.i < 0 ? -v.u.i : v.u.i);
        if (v.type == CT_BOOL)
            return ct_int(v.u.b);
        if (v.type == CT_FLOAT)
            return ct_float(fabs(v.u.f));
        ct_error(r, at, "bad operand type for abs(): '%s'", ct_type_name(v.type));
    case F_ATTR: {
        const struct ct_value *name = ct_str_arg(r, at, args, 0, "name", "attr");
        if (!name)
            ct_error(r, at, "attr needs an attribute name");
        if (v.type == CT_DICT)
            return ct_undef(name->u.s, name->len, CT_DICT); /* getattr only: no items */
        return ct_getattr(r, at, &v, name->u.s, name->len);
    }
    case F_CAPITALIZE:
        return ct_change_case(a, ct_to_str(a, &v), CASE_CAPITALIZE);
    case F_COUNT:
    case F_LENGTH:
        switch (v.type) {
        case CT_UNDEF:
            return ct_int(0);
        case CT_STR:
            return ct_int((int64_t)ct_utf8_count(v.u.s, v.len));
        case CT_LIST:
            return ct_int((int64_t)v.u.list->len);
        case CT_DICT:
            return ct_int((int64_t)v.u.dict->len);
        default:
            ct_error(r, at, "object of type '%s' has no len()", ct_type_name(v.type));
        }
    case F_DEFAULT: {
        const struct ct_value *d = ct_arg(args, 0, "default_value");
        bool boolean = ct_bool_arg(args, 1, "boolean", false);
        if (v.type == CT_UNDEF || (boolean && !ct_truthy(&v)))
            return d ? *d : ct_empty_str();
        return v;
    }
    case F_DICTSORT:
        return filter_dictsort(r, at, v, args);
    case F_ESCAPE:
        return filter_escape(r, v);
    case F_FIRST: {
        struct ct_value items = ct_iterate(r, at, &v);
        return items.u.list->len ? items.u.list->items[0] : ct_undef(NULL, 0, 0);
    }
    case F_LAST: {
        struct ct_value items = ct_iterate(r, at, &v);
        size_t n = items.u.list->len;
        return n ? items.u.list->items[n - 1] : ct_undef(NULL, 0, 0);
    }
    case F_FLOAT:
        return filter_float(r, v, args);
    case F_INT:
        return filter_int(r, at, v, args);
    case F_INDENT:
        return indent(r, at, ct_to_str(a, &v), args);
    case F_ITEMS:
        return filter_items(r, at, v);
    case F_JOIN:
        return filter_join(r, at, v, args);
    case F_LIST:
        return ct_iterate(r, at, &v);
    case F_LOWER:
        return ct_change_case(a, ct_to_str(a, &v), CASE_LOWER);
    case F_UPPER:
        return ct_change_case(a, ct_to_str(a, &v), CASE_UPPER);
    case F_MAP:
        return map_items(r, at, &v, args);
    case F_MAX:
        return min_max(r, at, &v, args, true);
    case F_MIN:
        return min_max(r, at, &v, args, false);
    case F_REJECT:
        return select_items(r, at, &v, args, false, false);
    case F_REJECTATTR:
        return select_items(r, at, &v, args, true, false);
    case F_SELECT:
        return select_items(r, at, &v, args, false, true);
    case F_SELECTATTR:
        return select_items(r, at, &v, args, true, true);
    case F_REPLACE:
        return filter_replace(r, at, v, args);
    case F_REVERSE:
        return reversed(r, at, &v);
    case F_ROUND:
        return filter_round(r, at, v, args);
    case F_SAFE:
    case F_STRING:
        return ct_to_str(a, &v);
    case F_SORT:
        return filter_sort(r, at, v, args);
    case F_SUM:
        return filter_sum(r, at, v, args);
    case F_TITLE:
        return ct_jinja_title(a, ct_to_str(a, &v));
    case F_TOJSON:
        return tojson(r, at, &v, args);
    case F_TRIM: {
        const struct ct_value *chars = ct_str_arg(r, at, args, 0, "chars", "trim");
        return ct_strip(ct_to_str(a, &v), chars, true, true);
    }
    case F_UNIQUE:
        return filter_unique(r, at, v, args);
    case F_WORDCOUNT: {
        struct ct_value words = ct_split(r, at, ct_to_str(a, &v), NULL, -1);
        return ct_int((int64_t)words.u.list->len);
    }
    }
    ct_error(r, at, "internal error: unknown filter");
}

/* ---- string helpers ---- */

static bool in_chars(uint32_t cp, const struct ct_value *chars)
{
    for (size_t i = 0; i < chars->len;)
        if (ct_utf8_next(chars->u.s, chars->len, &i) == cp)
            return true;
    return false;
}

/* str.strip/lstrip/rstrip: whitespace, or the characters of chars. */
static struct ct_value ct_strip(struct ct_value s, const struct ct_value *chars, bool left,
                                bool right)
{
    size_t b = 0, e = s.len;
    if (left) {
        while (b < e) {
            size_t i = b;
            uint32_t cp = ct_utf8_next(s.u.s, s.len, &i);
            if (chars ? !in_chars(cp, chars) : !ct_py_isspace(cp))
                break;
            b = i;
        }
    }
    if (right) {
        size_t keep = b;
        for (size_t i = b; i < e;) {
            uint32_t cp = ct_utf8_next(s.u.s, s.len, &i);
            if (chars ? !in_chars(cp, chars) : !ct_py_isspace(cp))
                keep = i;
        }
        e = keep;
    }
    return ct_str(s.u.s + b, e - b);
}

/* Case mapping of ASCII and the Latin-1, Latin Extended-A, Greek and
 * Cyrillic letters whose case pairs are a fixed offset apart (Python maps
 * the rest of Unicode too; chat templates rarely change the case of text). */
static bool latin_a_lower(uint32_t c)
{
    return (c >= 0x101 && c <= 0x137 && (c & 1) && c != 0x131) ||
           (c >= 0x13a && c <= 0x148 && !(c & 1)) || (c >= 0x14b && c <= 0x177 && (c & 1)) ||
           (c >= 0x17a && c <= 0x17e && !(c & 1));
}

static uint32_t ct_to_upper(uint32_t c)
{
    if (c >= 'a' && c <= 'z')
        return c - 32;
    if (c < 0x80)
        return c;
    if (c >= 0xe0 && c <= 0xfe && c != 0xf7)
        return c - 32;
    if (c == 0xff)
        return 0x178;
    if (latin_a_lower(c))
        return c - 1;
    if (c == 0x3c2)
        return 0x3a3;
    if (c >= 0x3b1 && c <= 0x3c9)
        return c - 32;
    if (c >= 0x430 && c <= 0x44f)
        return c - 32;
    if (c >= 0x450 && c <= 0x45f)
        return c - 80;
    return c;
}

static uint32_t ct_to_lower(uint32_t c)
{
    if (c >= 'A' && c <= 'Z')
        return c + 32;
    if (c < 0x80)
        return c;
    if (c >= 0xc0 && c <= 0xde && c != 0xd7)
        return c + 32;
    if (c == 0x178)
        return 0xff;
    if (c >= 0x100 && c <= 0x17e && c != 0x130 && latin_a_lower(c + 1))
        return c + 1;
    if (c >= 0x391 && c <= 0x3a9 && c != 0x3a2)
        return c + 32;
    if (c >= 0x410 && c <= 0x42f)
        return c + 32;
    if (c >= 0x400 && c <= 0x40f)
        return c + 80;
    return c;
}

static bool is_alpha(uint32_t c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || ct_to_upper(c) != c ||
           ct_to_lower(c) != c || (c >= 0x4e00 && c <= 0x9fff);
}

static struct ct_value ct_change_case(struct ct_arena *a, struct ct_value s, enum ct_casing how)
{
    struct ct_buf b = {0};
    bool prev_cased = false, first = true;
    for (size_t i = 0; i < s.len;) {
        uint32_t cp = ct_utf8_next(s.u.s, s.len, &i), out;
        switch (how) {
        case CASE_UPPER:
            out = ct_to_upper(cp);
            break;
        case CASE_LOWER:
            out = ct_to_lower(cp);
            break;
        case CASE_CAPITALIZE:
            out = first ? ct_to_upper(cp) : ct_to_lower(cp);
            break;
        default:
            out = prev_cased ? ct_to_lower(cp) : ct_to_upper(cp);
            prev_cased = is_alpha(cp);
        }
        first = false;
        char tmp[4];
        ct_buf_put(a, &b, tmp, ct_utf8_put(tmp, out));
    }
    return ct_from_buf(&b);
}

/* jinja2's title filter: words begin after "-", whitespace, or an opening
 * bracket; each word's first character upper-cased, the rest lower-cased. */
static struct ct_value ct_jinja_title(struct ct_arena *a, struct ct_value s)
{
    struct ct_buf b = {0};
    bool at_start = true;
    for (size_t i = 0; i < s.len;) {
        uint32_t cp = ct_utf8_next(s.u.s, s.len, &i);
        bool sep =
            cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || ct_py_isspace(cp);
        uint32_t out = sep ? cp : at_start ? ct_to_upper(cp) : ct_to_lower(cp);
        at_start = sep;
        char tmp[4];
        ct_buf_put(a, &b, tmp, ct_utf8_put(tmp, out));
    }
    return ct_from_buf(&b);
}

static const char *ct_find_sub(const char *h, size_t hl, const char *n, size_t nl)
{
    if (nl == 0)
        return h;
    for (size_t i = 0; i + nl <= hl; i++)
        if (memcmp(h + i, n, nl) == 0)
            return h + i;
    return NULL;
}

static struct ct_value ct_replace(struct ct_render *r, struct ct_value s, struct ct_value old,
                                  struct ct_value new, int64_t count)
{
    struct ct_buf b = {0};
    struct ct_arena *a = &r->arena;
    if (old.len == 0) {
        /* Python inserts new before every character and at the end. */
        int64_t done = 0;
        for (size_t i = 0; i < s.len;) {
            if (count < 0 || done < count) {
                ct_buf_put(a, &b, new.u.s, new.len);
                done++;
            }
            size_t start = i;
            ct_utf8_next(s.u.s, s.len, &i);
            ct_buf_put(a, &b, s.u.s + start, i - start);
        }
        if (count < 0 || done < count)
            ct_buf_put(a, &b, new.u.s, new.len);
        return ct_from_buf(&b);
    }
    size_t pos = 0;
    int64_t done = 0;
    while (count < 0 || done < count) {
        const char *hit = ct_find_sub(s.u.s + pos, s.len - pos, old.u.s, old.len);
        if (!hit)
            break;
        size_t at = (size_t)(hit - s.u.s);
        ct_buf_put(a, &b, s.u.s + pos, at - pos);
        ct_buf_put(a, &b, new.u.s, new.len);
        pos = at + old.len;
        done++;
    }
    if (done == 0)
        return s;
    ct_buf_put(a, &b, s.u.s + pos, s.len - pos);
    return ct_from_buf(&b);
}

static struct ct_value ct_split(struct ct_render *r, const struct ct_node *at, struct ct_value s,
                                const struct ct_value *sep, int64_t maxsplit)
{
    struct ct_value l = ct_list_new(&r->arena, 4);
    if (sep) {
        if (sep->len == 0)
            ct_error(r, at, "split: empty separator");
        size_t pos = 0;
        int64_t done = 0;
        for (;;) {
            const char *hit = maxsplit >= 0 && done >= maxsplit
                                  ? NULL
                                  : ct_find_sub(s.u.s + pos, s.len - pos, sep->u.s, sep->len);
            if (!hit) {
                ct_list_push(&r->arena, &l, ct_str(s.u.s + pos, s.len - pos));
                return l;
            }
            size_t e = (size_t)(hit - s.u.s);
            ct_list_push(&r->arena, &l, ct_str(s.u.s + pos, e - pos));
            pos = e + sep->len;
            done++;
        }
    }
    /* No separator: runs of whitespace, empty pieces dropped. */
    size_t i = 0;
    int64_t done = 0;
    for (;;) {
        size_t j;
        while (i < s.len) {
            j = i;
            if (!ct_py_isspace(ct_utf8_next(s.u.s, s.len, &j)))
                break;
            i = j;
        }
        if (i >= s.len)
            return l;
        if (maxsplit >= 0 && done >= maxsplit) {
            struct ct_value rest = ct_strip(ct_str(s.u.s + i, s.len - i), NULL, false, true);
            ct_list_push(&r->arena, &l, rest);
            return l;
        }
        size_t start = i;
        while (i < s.len) {
            j = i;
            if (ct_py_isspace(ct_utf8_next(s.u.s, s.len, &j)))
                break;
            i = j;
        }
        ct_list_push(&r->arena, &l, ct_str(s.u.s + start, i - start));
        done++;
    }
}

/* str.splitlines(): \n, \r, \r\n, \v, \f, \x1c-\x1e, \x85, U+2028, U+2029. */
static struct ct_value ct_splitlines(struct ct_render *r, struct ct_value s, bool keepends)
{
    struct ct_value l = ct_list_new(&r->arena, 4);
    size_t start = 0, i = 0;
    while (i < s.len) {
        size_t j = i;
        uint32_t cp = ct_utf8_next(s.u.s, s.len, &j);
        bool brk = cp == '\n' || cp == '\r' || cp == 0x0b || cp == 0x0c ||
                   (cp >= 0x1c && cp <= 0x1e) || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
        if (!brk) {
            i = j;
            continue;
        }
        if (cp == '\r' && j < s.len && s.u.s[j] == '\n')
            j++;
        ct_list_push(&r->arena, &l, ct_str(s.u.s + start, (keepends ? j : i) - start));
        start = i = j;
    }
    if (start < s.len)
        ct_list_push(&r->arena, &l, ct_str(s.u.s + start, s.len - start));
    return l;
}

static bool starts_or_ends(struct ct_render *r, const struct ct_node *at, struct ct_value s,
                           const struct ct_value *affix, bool ends)
{
    if (affix && affix->type == CT_LIST && (affix->flags & CT_F_TUPLE)) {
        for (size_t i = 0; i < affix->u.list->len; i++)
            if (starts_or_ends(r, at, s, &affix->u.list->items[i], ends))
                return true;
        return false;
    }
    if (!affix || affix->type != CT_STR)
        ct_error(r, at, "%s first arg must be str or a tuple of str",
                 ends ? "endswith" : "startswith");
    if (affix->len > s.len)
        return false;
    return memcmp(ends ? s.u.s + s.len - affix->len : s.u.s, affix->u.s, affix->len) == 0;
}

static struct ct_value ct_join(struct ct_render *r, const struct ct_value *items,
                               struct ct_value sep)
{
    struct ct_buf b = {0};
    for (size_t i = 0; i < items->u.list->len; i++) {
        if (i)
            ct_buf_put(&r->arena, &b, sep.u.s, sep.len);
        ct_put_str(&r->arena, &b, &items->u.list->items[i]);
    }
    return ct_from_buf(&b);
}

/* str.find and str.count (ct_call_method's cases M_FIND and M_COUNT). */
static struct ct_value method_find_count(struct ct_render *r, const struct ct_node *at,
                                         const struct ct_method *m, const struct ct_args *args)
{
    const struct ct_value *self = m->self;
    const struct ct_value *sub = ct_str_arg(r, at, args, 0, "sub", "find");
    if (!sub)
        ct_error(r, at, "find/count need a string");
    if (m->id == M_FIND) {
        const char *hit = ct_find_sub(self->u.s, self->len, sub->u.s, sub->len);
        return ct_int(hit ? (int64_t)ct_utf8_count(self->u.s, (size_t)(hit - self->u.s)) : -1);
    }
    if (sub->len == 0)
        return ct_int((int64_t)ct_utf8_count(self->u.s, self->len) + 1);
    int64_t n = 0;
    for (size_t pos = 0;;) {
        const char *hit = ct_find_sub(self->u.s + pos, self->len - pos, sub->u.s, sub->len);
        if (!hit)
            break;
        n++;
        pos = (size_t)(hit - self->u.s) + sub->len;
    }
    return ct_int(n);
}

struct ct_value ct_call_method(struct ct_render *r, const struct ct_node *at,
                               const struct ct_method *m, const struct ct_args *args)
{
    struct ct_arena *a = &r->arena;
    const struct ct_value *self = m->self;
    switch ((enum method_id)m->id) {
    case M_STRIP:
    case M_LSTRIP:
    case M_RSTRIP: {
        const struct ct_value *chars = ct_str_arg(r, at, args, 0, "chars", "strip");
        return ct_strip(*self, chars, m->id != M_RSTRIP, m->id != M_LSTRIP);
    }
    case M_SPLIT:
    case M_RSPLIT: {
        const struct ct_value *sep = ct_str_arg(r, at, args, 0, "sep", "split");
        int64_t maxsplit = ct_int_arg(r, at, args, 1, "maxsplit", -1, "split");
        if (m->id == M_RSPLIT && maxsplit >= 0)
            ct_error(r, at, "rsplit with maxsplit is not supported");
        return ct_split(r, at, *self, sep, maxsplit);
    }
    case M_STARTSWITH:
    case M_ENDSWITH:
        return ct_bool(
            starts_or_ends(r, at, *self, ct_arg(args, 0, "prefix"), m->id == M_ENDSWITH));
    case M_UPPER:
        return ct_change_case(a, *self, CASE_UPPER);
    case M_LOWER:
        return ct_change_case(a, *self, CASE_LOWER);
    case M_TITLE:
        return ct_change_case(a, *self, CASE_PY_TITLE);
    case M_CAPITALIZE:
        return ct_change_case(a, *self, CASE_CAPITALIZE);
    case M_REPLACE: {
        const struct ct_value *old = ct_str_arg(r, at, args, 0, "old", "replace");
        const struct ct_value *new = ct_str_arg(r, at, args, 1, "new", "replace");
        if (!old || !new)
            ct_error(r, at, "replace needs two strings");
        return ct_replace(r, *self, *old, *new, ct_int_arg(r, at, args, 2, "count", -1, "replace"));
    }
    case M_FIND:
    case M_COUNT:
        return method_find_count(r, at, m, args);
    case M_JOIN: {
        const struct ct_value *items = ct_arg(args, 0, "iterable");
        if (!items)
            ct_error(r, at, "join needs an iterable");
        struct ct_value list = ct_iterate(r, at, items);
        for (size_t i = 0; i < list.u.list->len; i++)
            if (list.u.list->items[i].type != CT_STR)
                ct_error(r, at, "sequence item %zu: expected str instance, %s found", i,
                         ct_type_name(list.u.list->items[i].type));
        return ct_join(r, &list, *self);
    }
    case M_SPLITLINES:
        return ct_splitlines(r, *self, ct_bool_arg(args, 0, "keepends", false));
    case M_ISDIGIT:
    case M_ISSPACE:
    case M_ISALPHA:
    case M_ISALNUM: {
        if (self->len == 0)
            return ct_bool(false);
        for (size_t i = 0; i < self->len;) {
            uint32_t cp = ct_utf8_next(self->u.s, self->len, &i);
            bool digit = cp >= '0' && cp <= '9';
            bool ok = m->id == M_ISDIGIT   ? digit
                      : m->id == M_ISSPACE ? ct_py_isspace(cp)
                      : m->id == M_ISALPHA ? is_alpha(cp)
                                           : is_alpha(cp) || digit;
            if (!ok)
                return ct_bool(false);
        }
        return ct_bool(true);
    }
    case M_ISUPPER:
    case M_ISLOWER: {
        struct ct_args none = {0};
        return ct_bool(ct_apply_test(r, at, m->id == M_ISUPPER ? T_UPPER : T_LOWER, self, &none));
    }
    case M_GET: {
        const struct ct_value *key = ct_arg(args, 0, "key");
        const struct ct_value *dflt = ct_arg(args, 1, "default");
        if (!key)
            ct_error(r, at, "get needs a key");
        struct ct_value *v = ct_dict_find(self, key);
        return v ? *v : dflt ? *dflt : ct_none();
    }
    case M_ITEMS:
        return ct_apply_filter(r, at, F_ITEMS, *self, args);
    case M_KEYS:
        return ct_iterate(r, at, self);
    case M_VALUES: {
        struct ct_value l = ct_list_new(a, self->u.dict->len);
        memcpy(l.u.list->items, self->u.dict->vals, self->u.dict->len * sizeof(struct ct_value));
        l.u.list->len = self->u.dict->len;
        return l;
    }
    case M_CYCLE: {
        if (args->npos == 0)
            ct_error(r, at, "no items for cycling given");
        return args->pos[self->u.loop->index0 % args->npos];
    }
    case M_INDEX:
        for (size_t i = 0; i < self->u.list->len; i++)
            if (args->npos && ct_equal(&self->u.list->items[i], &args->pos[0]))
                return ct_int((int64_t)i);
        ct_error(r, at, "value is not in list");
    case M_LIST_COUNT: {
        int64_t n = 0;
        for (size_t i = 0; i < self->u.list->len; i++)
            if (args->npos && ct_equal(&self->u.list->items[i], &args->pos[0]))
                n++;
        return ct_int(n);
    }
    }
    ct_error(r, at, "internal error: unknown method");
}

bool ct_apply_test(struct ct_render *r, const struct ct_node *at, int id, const struct ct_value *v,
                   const struct ct_args *args)
{
    const struct ct_value *other = ct_arg(args, 0, "other");
    switch ((enum test_id)id) {
    case T_BOOLEAN:
        return v->type == CT_BOOL;
    case T_CALLABLE:
        return v->type == CT_FUNC || v->type == CT_METHOD || v->type == CT_MACRO;
    case T_DEFINED:
        return v->type != CT_UNDEF;
    case T_UNDEFINED:
        return v->type == CT_UNDEF;
    case T_DIVISIBLEBY: {
        const struct ct_value *num = ct_arg(args, 0, "num");
        if (!num || (num->type != CT_INT && num->type != CT_BOOL) ||
            (v->type != CT_INT && v->type != CT_BOOL))
            ct_error(r, at, "divisibleby needs integers");
        int64_t d = num->type == CT_INT ? num->u.i : num->u.b;
        int64_t x = v->type == CT_INT ? v->u.i : v->u.b;
        if (d == 0)
            ct_error(r, at, "integer division or modulo by zero");
        return d == -1 || x % d == 0;
    }
    case T_EVEN:
    case T_ODD: {
        if (v->type != CT_INT && v->type != CT_BOOL)
            ct_error(r, at, "odd/even need an integer");
        int64_t x = v->type == CT_INT ? v->u.i : v->u.b;
        return ((x % 2) != 0) == (id == T_ODD);
    }
    case T_FALSE:
        return v->type == CT_BOOL && !v->u.b;
    case T_TRUE:
        return v->type == CT_BOOL && v->u.b;
    case T_FLOAT:
        return v->type == CT_FLOAT;
    case T_INTEGER:
        return v->type == CT_INT;
    case T_NUMBER:
        return v->type == CT_INT || v->type == CT_FLOAT || v->type == CT_BOOL;
    case T_STRING:
        return v->type == CT_STR;
    case T_MAPPING:
        return v->type == CT_DICT;
    case T_NONE:
        return v->type == CT_NONE;
    case T_ITERABLE:
    case T_SEQUENCE:
        return v->type == CT_STR || v->type == CT_LIST || v->type == CT_DICT || v->type == CT_UNDEF;
    case T_LOWER:
    case T_UPPER: {
        if (v->type != CT_STR)
            return false;
        bool cased = false;
        for (size_t i = 0; i < v->len;) {
            uint32_t cp = ct_utf8_next(v->u.s, v->len, &i);
            if (ct_to_upper(cp) != cp || ct_to_lower(cp) != cp) {
                cased = true;
                if (id == T_LOWER ? ct_to_lower(cp) != cp : ct_to_upper(cp) != cp)
                    return false;
            }
        }
        return cased;
    }
    case T_SAMEAS:
        if (!other)
            ct_error(r, at, "sameas needs an argument");
        if (v->type != other->type)
            return false;
        if (v->type == CT_NONE || v->type == CT_UNDEF)
            return true;
        if (v->type == CT_BOOL)
            return v->u.b == other->u.b;
        if (v->type == CT_INT && v->u.i >= -5 && v->u.i <= 256)
            return v->u.i == other->u.i; /* CPython's small-int cache */
        if (v->type == CT_LIST || v->type == CT_DICT || v->type == CT_NS)
            return v->u.list == other->u.list;
        return false;
    case T_IN: {
        const struct ct_value *seq = ct_arg(args, 0, "seq");
        if (!seq)
            ct_error(r, at, "in needs a container");
        if (seq->type == CT_STR) {
            if (v->type != CT_STR)
                ct_error(r, at, "'in <string>' requires string as left operand");
            return ct_find_sub(seq->u.s, seq->len, v->u.s, v->len) != NULL;
        }
        struct ct_value items = ct_iterate(r, at, seq);
        for (size_t i = 0; i < items.u.list->len; i++)
            if (ct_equal(&items.u.list->items[i], v))
                return true;
        return false;
    }
    case T_EQ:
    case T_NE:
    case T_LT:
    case T_LE:
    case T_GT:
    case T_GE: {
        if (!other)
            ct_error(r, at, "comparison test needs an argument");
        if (id == T_EQ)
            return ct_equal(v, other);
        if (id == T_NE)
            return !ct_equal(v, other);
        int c = ct_compare(r, at, v, other);
        return id == T_LT ? c < 0 : id == T_LE ? c <= 0 : id == T_GT ? c > 0 : c >= 0;
    }
    }
    ct_error(r, at, "internal error: unknown test");
}
