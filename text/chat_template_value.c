/* Values of the chat-template interpreter: the arena they live in, their
 * constructors, truth and equality, byte buffers and UTF-8 helpers. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_template_internal.h"

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
