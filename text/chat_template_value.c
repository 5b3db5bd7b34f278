/* Values of the chat-template interpreter: the arena they live in, their
 * constructors, truth and equality, byte buffers and UTF-8 helpers.
 * Then Python's str() and repr() of them (what {{ }} prints must equal what
 * jinja2 prints) and JSON both ways (request JSON in, the tojson filter out). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_template_internal.h"

static void ct_put_float(struct ct_arena *a, struct ct_buf *b, double f);

/* ---- arena ---- */

struct ct_chunk {
    struct ct_chunk *next;
    size_t used, size;
    max_align_t data[];
};

_Noreturn void ct_fail(struct ct_arena *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (a->err && a->errlen)
        vsnprintf(a->err, a->errlen, fmt, ap);
    va_end(ap);
    longjmp(*a->fail, 1);
}

void *ct_alloc(struct ct_arena *a, size_t n)
{
    n = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    if (n == 0)
        n = sizeof(max_align_t);
    struct ct_chunk *c = a->head;
    if (!c || c->size - c->used < n) {
        size_t size = n > 16384 ? n : 16384;
        if (c && size < c->size * 2 && c->size * 2 <= (1u << 22))
            size = c->size * 2 > n ? c->size * 2 : n;
        if (a->limit && a->total + size > a->limit)
            ct_fail(a, "chat template: rendering needs more than %zu bytes of memory", a->limit);
        c = malloc(sizeof(*c) + size);
        if (!c)
            ct_fail(a, "chat template: out of memory");
        c->used = 0;
        c->size = size;
        c->next = a->head;
        a->head = c;
        a->total += size;
    }
    void *p = (char *)c->data + c->used;
    c->used += n;
    return p;
}

char *ct_strdup(struct ct_arena *a, const char *s, size_t n)
{
    char *p = ct_alloc(a, n + 1);
    if (n)
        memcpy(p, s, n);
    p[n] = 0;
    return p;
}

void ct_arena_free(struct ct_arena *a)
{
    struct ct_chunk *c = a->head;
    while (c) {
        struct ct_chunk *next = c->next;
        free(c);
        c = next;
    }
    a->head = NULL;
    a->total = 0;
}

/* ---- constructors ---- */

struct ct_value ct_undef(const char *name, size_t len, uint8_t owner_type)
{
    struct ct_value v = {.type = CT_UNDEF, .flags = owner_type, .len = (uint32_t)len};
    v.u.s = name;
    return v;
}

struct ct_value ct_none(void)
{
    return (struct ct_value){.type = CT_NONE};
}

struct ct_value ct_bool(bool b)
{
    struct ct_value v = {.type = CT_BOOL};
    v.u.b = b;
    return v;
}

struct ct_value ct_int(int64_t i)
{
    struct ct_value v = {.type = CT_INT};
    v.u.i = i;
    return v;
}

struct ct_value ct_float(double f)
{
    struct ct_value v = {.type = CT_FLOAT};
    v.u.f = f;
    return v;
}

struct ct_value ct_str(const char *s, size_t len)
{
    struct ct_value v = {.type = CT_STR, .len = (uint32_t)len};
    v.u.s = s;
    return v;
}

struct ct_value ct_str_copy(struct ct_arena *a, const char *s, size_t len)
{
    return ct_str(ct_strdup(a, s, len), len);
}

struct ct_value ct_list_new(struct ct_arena *a, size_t cap)
{
    struct ct_value v = {.type = CT_LIST};
    v.u.list = ct_alloc(a, sizeof(struct ct_list));
    v.u.list->len = 0;
    v.u.list->cap = cap;
    v.u.list->items = cap ? ct_alloc(a, cap * sizeof(struct ct_value)) : NULL;
    return v;
}

struct ct_value ct_dict_new(struct ct_arena *a, size_t cap)
{
    struct ct_value v = {.type = CT_DICT};
    v.u.dict = ct_alloc(a, sizeof(struct ct_dict));
    v.u.dict->len = 0;
    v.u.dict->cap = cap;
    v.u.dict->keys = cap ? ct_alloc(a, cap * sizeof(struct ct_value)) : NULL;
    v.u.dict->vals = cap ? ct_alloc(a, cap * sizeof(struct ct_value)) : NULL;
    return v;
}

void ct_list_push(struct ct_arena *a, struct ct_value *list, struct ct_value v)
{
    struct ct_list *l = list->u.list;
    if (l->len == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        struct ct_value *items = ct_alloc(a, cap * sizeof(*items));
        if (l->len)
            memcpy(items, l->items, l->len * sizeof(*items));
        l->items = items;
        l->cap = cap;
    }
    l->items[l->len++] = v;
}

struct ct_value *ct_dict_find(const struct ct_value *dict, const struct ct_value *key)
{
    struct ct_dict *d = dict->u.dict;
    for (size_t i = 0; i < d->len; i++)
        if (ct_equal(&d->keys[i], key))
            return &d->vals[i];
    return NULL;
}

struct ct_value *ct_dict_get(const struct ct_value *dict, const char *key, size_t len)
{
    struct ct_dict *d = dict->u.dict;
    for (size_t i = 0; i < d->len; i++)
        if (d->keys[i].type == CT_STR && d->keys[i].len == len &&
            memcmp(d->keys[i].u.s, key, len) == 0)
            return &d->vals[i];
    return NULL;
}

void ct_dict_set(struct ct_arena *a, struct ct_value *dict, struct ct_value key, struct ct_value v)
{
    struct ct_value *slot = ct_dict_find(dict, &key);
    if (slot) {
        *slot = v;
        return;
    }
    struct ct_dict *d = dict->u.dict;
    if (d->len == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 4;
        struct ct_value *keys = ct_alloc(a, cap * sizeof(*keys));
        struct ct_value *vals = ct_alloc(a, cap * sizeof(*vals));
        if (d->len) {
            memcpy(keys, d->keys, d->len * sizeof(*keys));
            memcpy(vals, d->vals, d->len * sizeof(*vals));
        }
        d->keys = keys;
        d->vals = vals;
        d->cap = cap;
    }
    d->keys[d->len] = key;
    d->vals[d->len] = v;
    d->len++;
}

const char *ct_type_name(uint8_t type)
{
    switch (type) {
    case CT_UNDEF:
        return "Undefined";
    case CT_NONE:
        return "NoneType";
    case CT_BOOL:
        return "bool";
    case CT_INT:
        return "int";
    case CT_FLOAT:
        return "float";
    case CT_STR:
        return "str";
    case CT_LIST:
        return "list";
    case CT_DICT:
        return "dict";
    case CT_NS:
        return "Namespace";
    case CT_FUNC:
        return "function";
    case CT_METHOD:
        return "builtin_function_or_method";
    case CT_MACRO:
        return "Macro";
    case CT_LOOP:
        return "LoopContext";
    }
    return "object";
}

bool ct_truthy(const struct ct_value *v)
{
    switch (v->type) {
    case CT_UNDEF:
    case CT_NONE:
        return false;
    case CT_BOOL:
        return v->u.b;
    case CT_INT:
        return v->u.i != 0;
    case CT_FLOAT:
        return v->u.f != 0.0;
    case CT_STR:
        return v->len != 0;
    case CT_LIST:
        return v->u.list->len != 0;
    case CT_DICT:
        return v->u.dict->len != 0;
    default:
        return true;
    }
}

static bool is_number(const struct ct_value *v)
{
    return v->type == CT_BOOL || v->type == CT_INT || v->type == CT_FLOAT;
}

static double as_double(const struct ct_value *v)
{
    return v->type == CT_FLOAT ? v->u.f : v->type == CT_INT ? (double)v->u.i : v->u.b;
}

bool ct_equal(const struct ct_value *a, const struct ct_value *b)
{
    if (is_number(a) && is_number(b)) {
        if (a->type != CT_FLOAT && b->type != CT_FLOAT) {
            int64_t x = a->type == CT_INT ? a->u.i : a->u.b;
            int64_t y = b->type == CT_INT ? b->u.i : b->u.b;
            return x == y;
        }
        return as_double(a) == as_double(b);
    }
    if (a->type != b->type)
        return false;
    switch (a->type) {
    case CT_UNDEF:
    case CT_NONE:
        return true;
    case CT_STR:
        return a->len == b->len && memcmp(a->u.s, b->u.s, a->len) == 0;
    case CT_LIST:
        if (a->u.list->len != b->u.list->len)
            return false;
        for (size_t i = 0; i < a->u.list->len; i++)
            if (!ct_equal(&a->u.list->items[i], &b->u.list->items[i]))
                return false;
        return true;
    case CT_DICT:
        if (a->u.dict->len != b->u.dict->len)
            return false;
        for (size_t i = 0; i < a->u.dict->len; i++) {
            struct ct_value *o = ct_dict_find(b, &a->u.dict->keys[i]);
            if (!o || !ct_equal(&a->u.dict->vals[i], o))
                return false;
        }
        return true;
    case CT_NS:
        return a->u.dict == b->u.dict;
    case CT_FUNC:
        return a->u.func == b->u.func;
    case CT_MACRO:
        return a->u.macro == b->u.macro;
    case CT_LOOP:
        return a->u.loop == b->u.loop;
    case CT_METHOD:
        return a->u.method == b->u.method;
    }
    return false;
}

/* ---- buffers ---- */

void ct_buf_put(struct ct_arena *a, struct ct_buf *b, const char *s, size_t n)
{
    if (n == 0)
        return;
    if (b->limit && n > b->limit - b->len)
        ct_fail(a, "chat template: output longer than %zu bytes", b->limit);
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *data = ct_alloc(a, cap);
        if (b->len)
            memcpy(data, b->data, b->len);
        b->data = data;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = 0;
}

void ct_buf_putc(struct ct_arena *a, struct ct_buf *b, char c)
{
    ct_buf_put(a, b, &c, 1);
}

/* ---- UTF-8 ---- */

uint32_t ct_utf8_next(const char *s, size_t len, size_t *i)
{
    const unsigned char *p = (const unsigned char *)s + *i;
    size_t left = len - *i;
    unsigned c = p[0];
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || (size_t)n > left) {
        (*i)++;
        return c;
    }
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1f) : n == 3 ? (c & 0x0f) : (c & 0x07);
    for (int k = 1; k < n; k++) {
        if ((p[k] & 0xc0) != 0x80) {
            (*i)++;
            return c;
        }
        cp = cp << 6 | (p[k] & 0x3f);
    }
    *i += n;
    return cp;
}

size_t ct_utf8_put(char *out, uint32_t cp)
{
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xc0 | cp >> 6);
        o[1] = (unsigned char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xe0 | cp >> 12);
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
        o[2] = (unsigned char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (unsigned char)(0xf0 | cp >> 18);
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
    o[3] = (unsigned char)(0x80 | (cp & 0x3f));
    return 4;
}

size_t ct_utf8_count(const char *s, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        ct_utf8_next(s, len, &i);
        n++;
    }
    return n;
}

/* str.isspace() of Python: the Unicode White_Space characters plus the
 * ASCII separators 0x1c-0x1f. */
bool ct_py_isspace(uint32_t cp)
{
    if (cp <= 0x20)
        return cp == 0x20 || (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x1f);
    return cp == 0x85 || cp == 0xa0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) ||
           cp == 0x2028 || cp == 0x2029 || cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

/* ---- str() and repr() ---- */

/* Python's float repr: the shortest digits that read back the same, in
 * positional notation for exponents -5 < e < 16 and scientific otherwise. */
static void ct_put_float(struct ct_arena *a, struct ct_buf *b, double f)
{
    char tmp[64];
    if (isnan(f)) {
        ct_buf_put(a, b, "nan", 3);
        return;
    }
    if (isinf(f)) {
        ct_buf_put(a, b, f < 0 ? "-inf" : "inf", f < 0 ? 4 : 3);
        return;
    }
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof(tmp), "%.*e", prec - 1, f);
        if (strtod(tmp, NULL) == f)
            break;
    }
    /* tmp is [-]d.ddde[+-]XX: split into digits and exponent. */
    char digits[32];
    size_t nd = 0;
    const char *p = tmp;
    bool neg = false;
    if (*p == '-') {
        neg = true;
        p++;
    }
    for (; *p && *p != 'e'; p++)
        if (*p != '.')
            digits[nd++] = *p;
    int exp10 = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    char out[96];
    size_t o = 0;
    if (neg)
        out[o++] = '-';
    if (exp10 < -4 || exp10 >= 16) {
        out[o++] = digits[0];
        if (nd > 1) {
            out[o++] = '.';
            memcpy(out + o, digits + 1, nd - 1);
            o += nd - 1;
        }
        o += (size_t)snprintf(out + o, sizeof(out) - o, "e%c%02d", exp10 < 0 ? '-' : '+',
                              exp10 < 0 ? -exp10 : exp10);
    } else if (exp10 < 0) {
        out[o++] = '0';
        out[o++] = '.';
        for (int k = 0; k < -exp10 - 1; k++)
            out[o++] = '0';
        memcpy(out + o, digits, nd);
        o += nd;
    } else {
        for (int k = 0; k <= exp10; k++)
            out[o++] = (size_t)k < nd ? digits[k] : '0';
        out[o++] = '.';
        if ((size_t)exp10 + 1 < nd) {
            memcpy(out + o, digits + exp10 + 1, nd - (size_t)exp10 - 1);
            o += nd - (size_t)exp10 - 1;
        } else {
            out[o++] = '0';
        }
    }
    ct_buf_put(a, b, out, o);
}

/* Characters repr() escapes besides the ASCII controls: the common
 * non-printable ones (separators, format characters, C1 controls). */
static bool py_unprintable(uint32_t cp)
{
    return cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0xa0) || cp == 0xad ||
           (cp >= 0x2000 && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202f) ||
           (cp >= 0x205f && cp <= 0x206f) || cp == 0x3000 || cp == 0xfeff ||
           (cp >= 0xd800 && cp <= 0xdfff) || (cp >= 0xe000 && cp <= 0xf8ff) || cp == 0x1680;
}

static void put_str_repr(struct ct_arena *a, struct ct_buf *b, const char *s, size_t len)
{
    bool has_single = memchr(s, '\'', len) != NULL;
    bool has_double = memchr(s, '"', len) != NULL;
    char quote = has_single && !has_double ? '"' : '\'';
    ct_buf_putc(a, b, quote);
    for (size_t i = 0; i < len;) {
        size_t start = i;
        uint32_t cp = ct_utf8_next(s, len, &i);
        char tmp[16];
        if (cp == (uint32_t)quote || cp == '\\') {
            tmp[0] = '\\';
            tmp[1] = (char)cp;
            ct_buf_put(a, b, tmp, 2);
        } else if (cp == '\n') {
            ct_buf_put(a, b, "\\n", 2);
        } else if (cp == '\r') {
            ct_buf_put(a, b, "\\r", 2);
        } else if (cp == '\t') {
            ct_buf_put(a, b, "\\t", 2);
        } else if (py_unprintable(cp)) {
            int n = cp < 0x100     ? snprintf(tmp, sizeof(tmp), "\\x%02x", cp)
                    : cp < 0x10000 ? snprintf(tmp, sizeof(tmp), "\\u%04x", cp)
                                   : snprintf(tmp, sizeof(tmp), "\\U%08x", cp);
            ct_buf_put(a, b, tmp, (size_t)n);
        } else {
            ct_buf_put(a, b, s + start, i - start);
        }
    }
    ct_buf_putc(a, b, quote);
}

static void put_value(struct ct_arena *a, struct ct_buf *b, const struct ct_value *v, bool repr,
                      int depth)
{
    char tmp[32];
    if (depth > 200)
        ct_fail(a, "chat template: value nested too deeply to print");
    switch (v->type) {
    case CT_UNDEF:
        if (repr) /* inside a list or tuple Python prints the object */
            ct_buf_put(a, b, "Undefined", 9);
        return;
    case CT_NONE:
        ct_buf_put(a, b, "None", 4);
        return;
    case CT_BOOL:
        ct_buf_put(a, b, v->u.b ? "True" : "False", v->u.b ? 4 : 5);
        return;
    case CT_INT:
        ct_buf_put(a, b, tmp, (size_t)snprintf(tmp, sizeof(tmp), "%lld", (long long)v->u.i));
        return;
    case CT_FLOAT:
        ct_put_float(a, b, v->u.f);
        return;
    case CT_STR:
        if (repr)
            put_str_repr(a, b, v->u.s, v->len);
        else
            ct_buf_put(a, b, v->u.s, v->len);
        return;
    case CT_LIST: {
        bool tuple = v->flags & CT_F_TUPLE;
        ct_buf_putc(a, b, tuple ? '(' : '[');
        for (size_t i = 0; i < v->u.list->len; i++) {
            if (i)
                ct_buf_put(a, b, ", ", 2);
            put_value(a, b, &v->u.list->items[i], true, depth + 1);
        }
        if (tuple && v->u.list->len == 1)
            ct_buf_putc(a, b, ',');
        ct_buf_putc(a, b, tuple ? ')' : ']');
        return;
    }
    case CT_NS:
        ct_buf_put(a, b, "<Namespace ", 11);
        /* fall through */
    case CT_DICT:
        ct_buf_putc(a, b, '{');
        for (size_t i = 0; i < v->u.dict->len; i++) {
            if (i)
                ct_buf_put(a, b, ", ", 2);
            put_value(a, b, &v->u.dict->keys[i], true, depth + 1);
            ct_buf_put(a, b, ": ", 2);
            put_value(a, b, &v->u.dict->vals[i], true, depth + 1);
        }
        ct_buf_putc(a, b, '}');
        if (v->type == CT_NS)
            ct_buf_putc(a, b, '>');
        return;
    case CT_FUNC:
        ct_buf_put(a, b, "<function>", 10);
        return;
    case CT_METHOD:
        ct_buf_put(a, b, "<built-in method>", 17);
        return;
    case CT_MACRO:
        ct_buf_put(a, b, "<Macro>", 7);
        return;
    case CT_LOOP:
        ct_buf_put(a, b, "<LoopContext>", 13);
        return;
    }
}

void ct_put_str(struct ct_arena *a, struct ct_buf *b, const struct ct_value *v)
{
    put_value(a, b, v, false, 0);
}

struct ct_value ct_to_str(struct ct_arena *a, const struct ct_value *v)
{
    if (v->type == CT_STR)
        return *v;
    if (v->type == CT_UNDEF)
        return ct_str("", 0);
    struct ct_buf b = {0};
    put_value(a, &b, v, false, 0);
    return ct_str(b.data ? b.data : "", b.len);
}

/* ---- JSON ---- */

static void put_json_string(struct ct_arena *a, struct ct_buf *b, const char *s, size_t len,
                            bool ensure_ascii)
{
    ct_buf_putc(a, b, '"');
    for (size_t i = 0; i < len;) {
        size_t start = i;
        uint32_t cp = ct_utf8_next(s, len, &i);
        char tmp[16];
        switch (cp) {
        case '"':
            ct_buf_put(a, b, "\\\"", 2);
            continue;
        case '\\':
            ct_buf_put(a, b, "\\\\", 2);
            continue;
        case '\n':
            ct_buf_put(a, b, "\\n", 2);
            continue;
        case '\r':
            ct_buf_put(a, b, "\\r", 2);
            continue;
        case '\t':
            ct_buf_put(a, b, "\\t", 2);
            continue;
        case '\b':
            ct_buf_put(a, b, "\\b", 2);
            continue;
        case '\f':
            ct_buf_put(a, b, "\\f", 2);
            continue;
        }
        if (cp < 0x20) {
            ct_buf_put(a, b, tmp, (size_t)snprintf(tmp, sizeof(tmp), "\\u%04x", cp));
        } else if (ensure_ascii && cp >= 0x80) {
            if (cp >= 0x10000) {
                uint32_t c = cp - 0x10000;
                snprintf(tmp, sizeof(tmp), "\\u%04x\\u%04x", 0xd800 + (c >> 10),
                         0xdc00 + (c & 0x3ff));
                ct_buf_put(a, b, tmp, 12);
            } else {
                ct_buf_put(a, b, tmp, (size_t)snprintf(tmp, sizeof(tmp), "\\u%04x", cp));
            }
        } else {
            ct_buf_put(a, b, s + start, i - start);
        }
    }
    ct_buf_putc(a, b, '"');
}

static void put_indent(struct ct_arena *a, struct ct_buf *b, const char *indent, size_t ilen,
                       int level)
{
    ct_buf_putc(a, b, '\n');
    for (int k = 0; k < level; k++)
        ct_buf_put(a, b, indent, ilen);
}

static int key_order(const void *x, const void *y)
{
    const struct ct_value *const *p = x, *const *q = y;
    const struct ct_value *a = *p, *b = *q;
    size_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->u.s, b->u.s, n);
    return c ? c : (a->len > b->len) - (a->len < b->len);
}

void ct_put_json(struct ct_arena *a, struct ct_buf *b, const struct ct_value *v, const char *indent,
                 size_t ilen, const char *item_sep, const char *key_sep, bool sort_keys,
                 bool ensure_ascii, int depth)
{
    if (depth > 200)
        ct_fail(a, "chat template: tojson: value nested too deeply");
    switch (v->type) {
    case CT_NONE:
        ct_buf_put(a, b, "null", 4);
        return;
    case CT_BOOL:
        ct_buf_put(a, b, v->u.b ? "true" : "false", v->u.b ? 4 : 5);
        return;
    case CT_INT:
        ct_put_str(a, b, v);
        return;
    case CT_FLOAT:
        if (isnan(v->u.f))
            ct_buf_put(a, b, "NaN", 3);
        else if (isinf(v->u.f))
            ct_buf_put(a, b, v->u.f < 0 ? "-Infinity" : "Infinity", v->u.f < 0 ? 9 : 8);
        else
            ct_put_float(a, b, v->u.f);
        return;
    case CT_STR:
        put_json_string(a, b, v->u.s, v->len, ensure_ascii);
        return;
    case CT_LIST: {
        size_t n = v->u.list->len;
        if (n == 0) {
            ct_buf_put(a, b, "[]", 2);
            return;
        }
        ct_buf_putc(a, b, '[');
        for (size_t i = 0; i < n; i++) {
            if (i)
                ct_buf_put(a, b, item_sep, strlen(item_sep));
            if (indent)
                put_indent(a, b, indent, ilen, depth + 1);
            ct_put_json(a, b, &v->u.list->items[i], indent, ilen, item_sep, key_sep, sort_keys,
                        ensure_ascii, depth + 1);
        }
        if (indent)
            put_indent(a, b, indent, ilen, depth);
        ct_buf_putc(a, b, ']');
        return;
    }
    case CT_DICT: {
        size_t n = v->u.dict->len;
        if (n == 0) {
            ct_buf_put(a, b, "{}", 2);
            return;
        }
        /* Keys become strings as json.dumps makes them. */
        const struct ct_value **keys = ct_alloc(a, n * sizeof(*keys));
        size_t *order = ct_alloc(a, n * sizeof(*order));
        for (size_t i = 0; i < n; i++) {
            const struct ct_value *k = &v->u.dict->keys[i];
            struct ct_value *ks = ct_alloc(a, sizeof(*ks));
            if (k->type == CT_STR)
                *ks = *k;
            else if (k->type == CT_NONE)
                *ks = ct_str("null", 4);
            else if (k->type == CT_BOOL)
                *ks = ct_str(k->u.b ? "true" : "false", k->u.b ? 4 : 5);
            else if (k->type == CT_INT || k->type == CT_FLOAT)
                *ks = ct_to_str(a, k);
            else
                ct_fail(a,
                        "chat template: tojson: keys must be str, int, float, bool or None, "
                        "not %s",
                        ct_type_name(k->type));
            keys[i] = ks;
        }
        if (sort_keys) {
            const struct ct_value **sorted = ct_alloc(a, n * sizeof(*sorted));
            memcpy(sorted, keys, n * sizeof(*sorted));
            qsort(sorted, n, sizeof(*sorted), key_order);
            for (size_t i = 0; i < n; i++)
                for (size_t j = 0; j < n; j++)
                    if (keys[j] == sorted[i])
                        order[i] = j;
        } else {
            for (size_t i = 0; i < n; i++)
                order[i] = i;
        }
        ct_buf_putc(a, b, '{');
        for (size_t i = 0; i < n; i++) {
            size_t j = order[i];
            if (i)
                ct_buf_put(a, b, item_sep, strlen(item_sep));
            if (indent)
                put_indent(a, b, indent, ilen, depth + 1);
            put_json_string(a, b, keys[j]->u.s, keys[j]->len, ensure_ascii);
            ct_buf_put(a, b, key_sep, strlen(key_sep));
            ct_put_json(a, b, &v->u.dict->vals[j], indent, ilen, item_sep, key_sep, sort_keys,
                        ensure_ascii, depth + 1);
        }
        if (indent)
            put_indent(a, b, indent, ilen, depth);
        ct_buf_putc(a, b, '}');
        return;
    }
    default:
        ct_fail(a, "chat template: tojson: Object of type %s is not JSON serializable",
                ct_type_name(v->type));
    }
}

struct ct_value ct_from_json(struct ct_arena *a, const json_t *j, int depth)
{
    if (depth > 100)
        ct_fail(a, "chat template: input JSON nested deeper than 100 levels");
    switch (json_typeof(j)) {
    case JSON_NULL:
        return ct_none();
    case JSON_TRUE:
        return ct_bool(true);
    case JSON_FALSE:
        return ct_bool(false);
    case JSON_INTEGER:
        return ct_int((int64_t)json_integer_value(j));
    case JSON_REAL:
        return ct_float(json_real_value(j));
    case JSON_STRING:
        return ct_str(json_string_value(j), json_string_length(j));
    case JSON_ARRAY: {
        size_t n = json_array_size(j);
        struct ct_value l = ct_list_new(a, n);
        for (size_t i = 0; i < n; i++)
            l.u.list->items[i] = ct_from_json(a, json_array_get(j, i), depth + 1);
        l.u.list->len = n;
        return l;
    }
    case JSON_OBJECT: {
        struct ct_value d = ct_dict_new(a, json_object_size(j));
        const char *key;
        json_t *val;
        /* jansson keeps insertion order, as Python's json.loads does. */
        json_object_foreach((json_t *)j, key, val)
        {
            struct ct_dict *dd = d.u.dict;
            dd->keys[dd->len] = ct_str(key, strlen(key));
            dd->vals[dd->len] = ct_from_json(a, val, depth + 1);
            dd->len++;
        }
        return d;
    }
    }
    return ct_none();
}
