/* The chat-template evaluator's expressions: attribute, item and slice access,
 * calls of macros and callables, and ct_eval(), the expression tree walker. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_template_internal.h"

/* ---- access ---- */

static struct ct_value loop_attr(struct ct_render *r, const struct ct_value *obj, const char *name,
                                 size_t len)
{
    const struct ct_loop *l = obj->u.loop;
#define IS(s) (len == strlen(s) && memcmp(name, s, len) == 0)
    if (IS("index"))
        return ct_int((int64_t)l->index0 + 1);
    if (IS("index0"))
        return ct_int((int64_t)l->index0);
    if (IS("revindex"))
        return ct_int((int64_t)(l->len - l->index0));
    if (IS("revindex0"))
        return ct_int((int64_t)(l->len - l->index0 - 1));
    if (IS("first"))
        return ct_bool(l->index0 == 0);
    if (IS("last"))
        return ct_bool(l->index0 + 1 == l->len);
    if (IS("length"))
        return ct_int((int64_t)l->len);
    if (IS("depth"))
        return ct_int(1);
    if (IS("depth0"))
        return ct_int(0);
    if (IS("previtem"))
        return l->index0 ? l->items[l->index0 - 1] : ct_undef("previtem", 8, 0);
    if (IS("nextitem"))
        return l->index0 + 1 < l->len ? l->items[l->index0 + 1] : ct_undef("nextitem", 8, 0);
#undef IS
    int id = ct_method_id(CT_LOOP, name, len);
    if (id >= 0) {
        struct ct_value m = {.type = CT_METHOD};
        m.u.method = ct_alloc(&r->arena, sizeof(*m.u.method));
        struct ct_value *self = ct_alloc(&r->arena, sizeof(*self));
        *self = *obj;
        m.u.method->self = self;
        m.u.method->id = id;
        return m;
    }
    return ct_undef(name, len, CT_LOOP);
}

struct ct_value ct_getattr(struct ct_render *r, const struct ct_node *at,
                           const struct ct_value *obj, const char *name, size_t len)
{
    if (obj->type == CT_UNDEF)
        ct_undefined_error(r, at, obj);
    if (obj->type == CT_LOOP)
        return loop_attr(r, obj, name, len);
    /* Python's getattr first: a method such as dict.items wins over a key. */
    int id = ct_method_id(obj->type, name, len);
    if (id >= 0) {
        struct ct_value m = {.type = CT_METHOD};
        m.u.method = ct_alloc(&r->arena, sizeof(*m.u.method));
        struct ct_value *self = ct_alloc(&r->arena, sizeof(*self));
        *self = *obj;
        m.u.method->self = self;
        m.u.method->id = id;
        return m;
    }
    if (obj->type == CT_DICT || obj->type == CT_NS) {
        struct ct_value *v = ct_dict_get(obj, name, len);
        if (v)
            return *v;
    }
    return ct_undef(name, len, obj->type);
}

static bool index_of(const struct ct_value *key, int64_t *out)
{
    if (key->type == CT_INT) {
        *out = key->u.i;
        return true;
    }
    if (key->type == CT_BOOL) {
        *out = key->u.b;
        return true;
    }
    return false;
}

/* Byte offset of code point k of a string (k <= its length). */
static size_t utf8_offset(const char *s, size_t len, size_t k)
{
    size_t i = 0;
    while (k-- > 0 && i < len)
        ct_utf8_next(s, len, &i);
    return i;
}

struct ct_value ct_getitem(struct ct_render *r, const struct ct_node *at,
                           const struct ct_value *obj, const struct ct_value *key)
{
    int64_t idx;
    switch (obj->type) {
    case CT_UNDEF:
        ct_undefined_error(r, at, obj);
    case CT_DICT:
    case CT_NS: {
        struct ct_value *v = ct_dict_find(obj, key);
        if (v)
            return *v;
        break;
    }
    case CT_LIST:
        if (index_of(key, &idx)) {
            int64_t n = (int64_t)obj->u.list->len;
            if (idx < 0)
                idx += n;
            if (idx >= 0 && idx < n)
                return obj->u.list->items[idx];
            return ct_undef(NULL, 0, 0);
        }
        break;
    case CT_STR:
        if (index_of(key, &idx)) {
            int64_t n = (int64_t)ct_utf8_count(obj->u.s, obj->len);
            if (idx < 0)
                idx += n;
            if (idx >= 0 && idx < n) {
                size_t b = utf8_offset(obj->u.s, obj->len, (size_t)idx), e = b;
                ct_utf8_next(obj->u.s, obj->len, &e);
                return ct_str(obj->u.s + b, e - b);
            }
            return ct_undef(NULL, 0, 0);
        }
        break;
    default:
        break;
    }
    if (key->type == CT_STR)
        return ct_getattr(r, at, obj, key->u.s, key->len);
    return ct_undef(NULL, 0, obj->type);
}

struct ct_value ct_iterate(struct ct_render *r, const struct ct_node *at, const struct ct_value *v)
{
    switch (v->type) {
    case CT_UNDEF:
        return ct_list_new(&r->arena, 0);
    case CT_LIST: {
        struct ct_value l = *v;
        l.flags = 0;
        return l;
    }
    case CT_DICT: {
        struct ct_value l = ct_list_new(&r->arena, v->u.dict->len);
        memcpy(l.u.list->items, v->u.dict->keys, v->u.dict->len * sizeof(struct ct_value));
        l.u.list->len = v->u.dict->len;
        return l;
    }
    case CT_STR: {
        struct ct_value l = ct_list_new(&r->arena, ct_utf8_count(v->u.s, v->len));
        for (size_t i = 0; i < v->len;) {
            size_t start = i;
            ct_utf8_next(v->u.s, v->len, &i);
            l.u.list->items[l.u.list->len++] = ct_str(v->u.s + start, i - start);
        }
        return l;
    }
    default:
        ct_error(r, at, "'%s' object is not iterable", ct_type_name(v->type));
    }
}

/* Python's slice index rules (PySlice_AdjustIndices). */
static size_t slice_indices(int64_t len, const struct ct_value *startv,
                            const struct ct_value *stopv, int64_t step, int64_t *start,
                            int64_t *stop)
{
    int64_t lo = step < 0 ? -1 : 0, hi = step < 0 ? len - 1 : len;
    int64_t s, e;
    if (startv) {
        s = startv->u.i;
        if (s < 0) {
            s += len;
            if (s < lo)
                s = lo;
        } else if (s > hi) {
            s = hi;
        }
    } else {
        s = step < 0 ? hi : lo;
    }
    if (stopv) {
        e = stopv->u.i;
        if (e < 0) {
            e += len;
            if (e < lo)
                e = lo;
        } else if (e > hi) {
            e = hi;
        }
    } else {
        e = step < 0 ? lo : hi;
    }
    *start = s;
    *stop = e;
    if (step < 0)
        return e < s ? (size_t)((s - e - 1) / (-step) + 1) : 0;
    return s < e ? (size_t)((e - s - 1) / step + 1) : 0;
}

static struct ct_value eval_slice(struct ct_render *r, const struct ct_node *n)
{
    struct ct_value obj = ct_eval(r, n->a);
    struct ct_value parts[3];
    const struct ct_value *p[3] = {NULL, NULL, NULL};
    const struct ct_node *nodes[3] = {n->b, n->c, n->d};
    for (int k = 0; k < 3; k++) {
        if (!nodes[k])
            continue;
        parts[k] = ct_eval(r, nodes[k]);
        if (parts[k].type == CT_NONE)
            continue;
        if (parts[k].type == CT_BOOL)
            parts[k] = ct_int(parts[k].u.b);
        if (parts[k].type != CT_INT)
            ct_error(r, n, "slice indices must be integers or None");
        p[k] = &parts[k];
    }
    int64_t step = p[2] ? p[2]->u.i : 1;
    if (step == 0)
        ct_error(r, n, "slice step cannot be zero");
    if (obj.type == CT_UNDEF)
        ct_undefined_error(r, n, &obj);
    if (obj.type == CT_LIST) {
        int64_t s, e;
        size_t count = slice_indices((int64_t)obj.u.list->len, p[0], p[1], step, &s, &e);
        struct ct_value l = ct_list_new(&r->arena, count);
        l.flags = obj.flags;
        for (size_t i = 0; i < count; i++)
            l.u.list->items[i] = obj.u.list->items[s + (int64_t)i * step];
        l.u.list->len = count;
        return l;
    }
    if (obj.type == CT_STR) {
        /* Offsets of every code point, so that slicing counts characters. */
        size_t nchars = ct_utf8_count(obj.u.s, obj.len);
        size_t *off = ct_alloc(&r->arena, (nchars + 1) * sizeof(*off));
        size_t i = 0, k = 0;
        while (i < obj.len) {
            off[k++] = i;
            ct_utf8_next(obj.u.s, obj.len, &i);
        }
        off[k] = obj.len;
        int64_t s, e;
        size_t count = slice_indices((int64_t)nchars, p[0], p[1], step, &s, &e);
        if (step == 1)
            return ct_str(obj.u.s + off[s], off[s + (int64_t)count] - off[s]);
        struct ct_buf b = {0};
        for (size_t j = 0; j < count; j++) {
            int64_t c = s + (int64_t)j * step;
            ct_buf_put(&r->arena, &b, obj.u.s + off[c], off[c + 1] - off[c]);
        }
        return ct_str(b.data ? b.data : "", b.len);
    }
    ct_error(r, n, "'%s' object is not subscriptable", ct_type_name(obj.type));
}

/* ---- calls ---- */

static void eval_args(struct ct_render *r, const struct ct_node *n, size_t first,
                      struct ct_args *args)
{
    memset(args, 0, sizeof(*args));
    size_t count = n->n - first;
    if (!count)
        return;
    args->pos = ct_alloc(&r->arena, count * sizeof(struct ct_value));
    args->kw = ct_alloc(&r->arena, count * sizeof(struct ct_value));
    args->kw_names = ct_alloc(&r->arena, count * sizeof(const char *));
    args->kw_lens = ct_alloc(&r->arena, count * sizeof(size_t));
    for (size_t i = first; i < n->n; i++) {
        const struct ct_node *arg = n->list[i];
        if (arg->kind == N_KWARG) {
            args->kw_names[args->nkw] = arg->name;
            args->kw_lens[args->nkw] = arg->name_len;
            args->kw[args->nkw++] = ct_eval(r, arg->a);
        } else {
            args->pos[args->npos++] = ct_eval(r, arg);
        }
    }
}

static struct ct_value call_macro(struct ct_render *r, const struct ct_node *at,
                                  const struct ct_node *m, const struct ct_args *args)
{
    if (args->npos > m->n)
        ct_error(r, at, "macro '%.*s' takes not more than %zu argument(s)", (int)m->name_len,
                 m->name, m->n);
    if (r->depth >= r->limits.max_call_depth)
        ct_error(r, at, "macro calls nested deeper than %d", r->limits.max_call_depth);
    struct ct_frame *frame = ct_alloc(&r->arena, sizeof(*frame));
    memset(frame, 0, sizeof(*frame));
    frame->parent = r->globals;
    struct ct_frame *saved_frame = r->frame;
    struct ct_buf *saved_out = r->out;
    struct ct_buf out = {.limit = r->limits.max_output_bytes};
    r->frame = frame;
    r->depth++;
    for (size_t k = 0; k < args->nkw; k++) {
        size_t i;
        for (i = 0; i < m->n; i++)
            if (m->list[i]->name_len == args->kw_lens[k] &&
                memcmp(m->list[i]->name, args->kw_names[k], args->kw_lens[k]) == 0)
                break;
        if (i == m->n || i < args->npos)
            ct_error(r, at, "macro '%.*s' got an unexpected keyword argument '%.*s'",
                     (int)m->name_len, m->name, (int)args->kw_lens[k], args->kw_names[k]);
    }
    for (size_t i = 0; i < m->n; i++) {
        const struct ct_node *param = m->list[i];
        struct ct_value v = ct_undef(param->name, param->name_len, 0);
        bool given = false;
        if (i < args->npos) {
            v = args->pos[i];
            given = true;
        }
        for (size_t k = 0; k < args->nkw && !given; k++)
            if (param->name_len == args->kw_lens[k] &&
                memcmp(param->name, args->kw_names[k], args->kw_lens[k]) == 0) {
                v = args->kw[k];
                given = true;
            }
        if (!given && param->a)
            v = ct_eval(r, param->a);
        ct_frame_set(r, frame, param->name, param->name_len, v);
    }
    r->out = &out;
    ct_exec_body(r, m->d);
    r->out = saved_out;
    r->frame = saved_frame;
    r->depth--;
    return ct_str(out.data ? out.data : "", out.len);
}

struct ct_value ct_call_value(struct ct_render *r, const struct ct_node *at,
                              const struct ct_value *callee, const struct ct_args *args)
{
    switch (callee->type) {
    case CT_FUNC:
        return ct_call_global(r, at, callee->u.func, args);
    case CT_METHOD:
        return ct_call_method(r, at, callee->u.method, args);
    case CT_MACRO:
        return call_macro(r, at, callee->u.macro, args);
    case CT_UNDEF:
        ct_undefined_error(r, at, callee);
    default:
        ct_error(r, at, "'%s' object is not callable", ct_type_name(callee->type));
    }
}

/* ---- expressions ---- */

struct ct_value ct_eval(struct ct_render *r, const struct ct_node *n)
{
    ct_step(r, n);
    switch (n->kind) {
    case N_CONST:
        return n->value;
    case N_NAME:
        return ct_lookup(r, n->name, n->name_len);
    case N_GETATTR: {
        struct ct_value obj = ct_eval(r, n->a);
        return ct_getattr(r, n, &obj, n->name, n->name_len);
    }
    case N_GETITEM: {
        struct ct_value obj = ct_eval(r, n->a);
        struct ct_value key = ct_eval(r, n->b);
        return ct_getitem(r, n, &obj, &key);
    }
    case N_SLICE:
        return eval_slice(r, n);
    case N_CALL: {
        struct ct_value callee = ct_eval(r, n->a);
        struct ct_args args;
        eval_args(r, n, 0, &args);
        return ct_call_value(r, n, &callee, &args);
    }
    case N_FILTER: {
        if (n->op < 0)
            ct_error(r, n, "No filter named '%.*s' found.", (int)n->name_len, n->name);
        struct ct_value v = ct_eval(r, n->a);
        struct ct_args args;
        eval_args(r, n, 0, &args);
        return ct_apply_filter(r, n, n->op, v, &args);
    }
    case N_TEST: {
        if (n->op < 0)
            ct_error(r, n, "No test named '%.*s' found.", (int)n->name_len, n->name);
        struct ct_value v = ct_eval(r, n->a);
        struct ct_args args;
        eval_args(r, n, 0, &args);
        return ct_bool(ct_apply_test(r, n, n->op, &v, &args) != n->flag);
    }
    case N_BINOP: {
        struct ct_value a = ct_eval(r, n->a);
        struct ct_value b = ct_eval(r, n->b);
        return ct_arith(r, n, n->op, &a, &b);
    }
    case N_NOT: {
        struct ct_value a = ct_eval(r, n->a);
        return ct_bool(!ct_truthy(&a));
    }
    case N_NEG:
    case N_POS: {
        struct ct_value a = ct_eval(r, n->a);
        if (a.type == CT_FLOAT)
            return ct_float(n->kind == N_NEG ? -a.u.f : a.u.f);
        if (a.type == CT_INT || a.type == CT_BOOL) {
            int64_t x = ct_num_i(&a);
            if (n->kind == N_POS)
                return ct_int(x);
            if (x == INT64_MIN)
                ct_error(r, n, "integer overflow");
            return ct_int(-x);
        }
        if (a.type == CT_UNDEF)
            ct_undefined_error(r, n, &a);
        ct_error(r, n, "bad operand type for unary %s: '%s'", n->kind == N_NEG ? "-" : "+",
                 ct_type_name(a.type));
    }
    case N_AND: {
        struct ct_value a = ct_eval(r, n->a);
        return ct_truthy(&a) ? ct_eval(r, n->b) : a;
    }
    case N_OR: {
        struct ct_value a = ct_eval(r, n->a);
        return ct_truthy(&a) ? a : ct_eval(r, n->b);
    }
    case N_CONDEXPR: {
        struct ct_value cond = ct_eval(r, n->b);
        if (ct_truthy(&cond))
            return ct_eval(r, n->a);
        return n->c ? ct_eval(r, n->c) : ct_undef(NULL, 0, 0);
    }
    case N_COMPARE: {
        struct ct_value left = ct_eval(r, n->a);
        for (size_t i = 0; i < n->n; i++) {
            struct ct_value right = ct_eval(r, n->list[i]->a);
            if (!ct_compare_op(r, n->list[i], n->list[i]->op, &left, &right))
                return ct_bool(false);
            left = right;
        }
        return ct_bool(true);
    }
    case N_LIST:
    case N_TUPLE: {
        struct ct_value l = ct_list_new(&r->arena, n->n);
        for (size_t i = 0; i < n->n; i++)
            l.u.list->items[i] = ct_eval(r, n->list[i]);
        l.u.list->len = n->n;
        if (n->kind == N_TUPLE)
            l.flags = CT_F_TUPLE;
        return l;
    }
    case N_DICT: {
        struct ct_value d = ct_dict_new(&r->arena, n->n);
        for (size_t i = 0; i < n->n; i++) {
            struct ct_value k = ct_eval(r, n->list[i]->a);
            if (k.type == CT_LIST && !(k.flags & CT_F_TUPLE))
                ct_error(r, n, "unhashable type: 'list'");
            if (k.type == CT_DICT || k.type == CT_UNDEF)
                ct_error(r, n, "unhashable type: '%s'", ct_type_name(k.type));
            struct ct_value v = ct_eval(r, n->list[i]->b);
            ct_dict_set(&r->arena, &d, k, v);
        }
        return d;
    }
    default:
        ct_error(r, n, "internal error: statement evaluated as an expression");
    }
}
