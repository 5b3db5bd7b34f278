/* The chat-template interpreter's filters: jinja2's built-in filters
 * (jinja2/filters.py) that chat templates use, with their list, sort and JSON helpers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_template_internal.h"

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
