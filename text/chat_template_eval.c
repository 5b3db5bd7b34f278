/* The chat-template evaluator: walks the syntax tree with jinja2's
 * semantics (Python values and operators, undefined values, the scoping of
 * for loops and macros) and the public compile and render calls: the scopes,
 * the statements and the public calls first, then the expressions (attribute,
 * item and slice access, calls of macros and callables, ct_eval), then
 * Python's operators on template values. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_template_internal.h"

static struct ct_value ct_arith(struct ct_render *r, const struct ct_node *n, int op,
                                const struct ct_value *a, const struct ct_value *b);
static struct ct_value ct_call_value(struct ct_render *r, const struct ct_node *at,
                                     const struct ct_value *callee, const struct ct_args *args);
static bool ct_compare_op(struct ct_render *r, const struct ct_node *at, int op,
                          const struct ct_value *a, const struct ct_value *b);
static struct ct_value ct_eval(struct ct_render *r, const struct ct_node *n);
static int ct_exec_body(struct ct_render *r, const struct ct_node *body);
static void ct_frame_set(struct ct_render *r, struct ct_frame *f, const char *name, size_t len,
                         struct ct_value v);
static struct ct_value ct_lookup(struct ct_render *r, const char *name, size_t len);
static int64_t ct_num_i(const struct ct_value *v);
static _Noreturn void ct_undefined_error(struct ct_render *r, const struct ct_node *at,
                                         const struct ct_value *v);

#define DEFAULT_MAX_OUTPUT (32u << 20)
#define DEFAULT_MAX_MEMORY (256u << 20)
#define DEFAULT_MAX_STEPS 20000000u
#define DEFAULT_MAX_DEPTH 64
/* Strings carry a 32-bit length, so memory is capped below 4 GiB. */
#define MAX_MEMORY_CAP ((size_t)3 << 30)

struct folio_chat_template {
    struct ct_arena arena;
    jmp_buf jump;
    struct ct_node *body;
};

_Noreturn void ct_error(struct ct_render *r, const struct ct_node *at, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (at)
        ct_fail(&r->arena, "chat template error at line %d: %s", at->line, msg);
    ct_fail(&r->arena, "chat template error: %s", msg);
}

static _Noreturn void ct_undefined_error(struct ct_render *r, const struct ct_node *at,
                                  const struct ct_value *v)
{
    if (v->flags)
        ct_error(r, at, "'%s object' has no attribute '%.*s'", ct_type_name(v->flags), (int)v->len,
                 v->u.s ? v->u.s : "");
    if (v->u.s)
        ct_error(r, at, "'%.*s' is undefined", (int)v->len, v->u.s);
    ct_error(r, at, "undefined value used");
}

void ct_step(struct ct_render *r, const struct ct_node *at)
{
    if (++r->steps > r->limits.max_steps)
        ct_error(r, at, "template did more than %llu steps of work",
                 (unsigned long long)r->limits.max_steps);
}

enum { FLOW_NORMAL, FLOW_BREAK, FLOW_CONTINUE };

/* ---- scopes ---- */

static void ct_frame_set(struct ct_render *r, struct ct_frame *f, const char *name, size_t len,
                         struct ct_value v)
{
    for (size_t i = 0; i < f->n; i++) {
        if (f->vars[i].len == len && memcmp(f->vars[i].name, name, len) == 0) {
            f->vars[i].v = v;
            return;
        }
    }
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 8;
        struct ct_var *vars = ct_alloc(&r->arena, cap * sizeof(*vars));
        if (f->n)
            memcpy(vars, f->vars, f->n * sizeof(*vars));
        f->vars = vars;
        f->cap = cap;
    }
    f->vars[f->n++] = (struct ct_var){name, len, v};
}

static struct ct_value ct_lookup(struct ct_render *r, const char *name, size_t len)
{
    for (struct ct_frame *f = r->frame; f; f = f->parent)
        for (size_t i = f->n; i-- > 0;)
            if (f->vars[i].len == len && memcmp(f->vars[i].name, name, len) == 0)
                return f->vars[i].v;
    int id = ct_global_id(name, len);
    if (id >= 0) {
        struct ct_value v = {.type = CT_FUNC};
        v.u.func = id;
        return v;
    }
    return ct_undef(name, len, 0);
}

/* ---- statements ---- */

static void assign(struct ct_render *r, const struct ct_node *target, struct ct_value v)
{
    if (target->kind == N_NAME) {
        ct_frame_set(r, r->frame, target->name, target->name_len, v);
        return;
    }
    if (target->kind == N_GETATTR) {
        struct ct_value ns = ct_lookup(r, target->a->name, target->a->name_len);
        if (ns.type != CT_NS)
            ct_error(r, target, "cannot assign attribute on non-namespace object");
        ct_dict_set(&r->arena, &ns, ct_str(target->name, target->name_len), v);
        return;
    }
    /* Tuple unpacking. */
    struct ct_value items = ct_iterate(r, target, &v);
    if (items.u.list->len != target->n)
        ct_error(r, target, "%s values to unpack (expected %zu, got %zu)",
                 items.u.list->len > target->n ? "too many" : "not enough", target->n,
                 items.u.list->len);
    for (size_t i = 0; i < target->n; i++)
        assign(r, target->list[i], items.u.list->items[i]);
}

static int exec_for(struct ct_render *r, const struct ct_node *n)
{
    struct ct_value seq = ct_eval(r, n->b);
    struct ct_value items = ct_iterate(r, n->b, &seq);
    struct ct_frame *saved = r->frame;
    struct ct_frame *frame = ct_alloc(&r->arena, sizeof(*frame));
    memset(frame, 0, sizeof(*frame));
    frame->parent = saved;
    r->frame = frame;
    if (n->c) {
        /* {% for x in xs if cond %}: filtered first, so loop.length counts
         * only the items kept. */
        struct ct_value kept = ct_list_new(&r->arena, items.u.list->len);
        for (size_t i = 0; i < items.u.list->len; i++) {
            ct_step(r, n);
            frame->n = 0;
            assign(r, n->a, items.u.list->items[i]);
            struct ct_value cond = ct_eval(r, n->c);
            if (ct_truthy(&cond))
                kept.u.list->items[kept.u.list->len++] = items.u.list->items[i];
        }
        items = kept;
    }
    struct ct_loop *loop = ct_alloc(&r->arena, sizeof(*loop));
    loop->items = items.u.list->items;
    loop->len = items.u.list->len;
    struct ct_value loopv = {.type = CT_LOOP};
    loopv.u.loop = loop;
    for (size_t i = 0; i < loop->len; i++) {
        ct_step(r, n);
        loop->index0 = i;
        frame->n = 0; /* each iteration starts from the enclosing scope */
        ct_frame_set(r, frame, "loop", 4, loopv);
        assign(r, n->a, items.u.list->items[i]);
        if (ct_exec_body(r, n->d) == FLOW_BREAK)
            break;
    }
    if (loop->len == 0 && n->e) {
        frame->n = 0;
        ct_exec_body(r, n->e);
    }
    r->frame = saved;
    return FLOW_NORMAL;
}

static int exec_node(struct ct_render *r, const struct ct_node *n)
{
    ct_step(r, n);
    switch (n->kind) {
    case N_BODY:
        return ct_exec_body(r, n);
    case N_TEXT:
        ct_buf_put(&r->arena, r->out, n->name, n->name_len);
        return FLOW_NORMAL;
    case N_OUTPUT: {
        struct ct_value v = ct_eval(r, n->a);
        ct_put_str(&r->arena, r->out, &v);
        return FLOW_NORMAL;
    }
    case N_IF:
        for (;;) {
            struct ct_value cond = ct_eval(r, n->a);
            if (ct_truthy(&cond))
                return ct_exec_body(r, n->b);
            if (!n->c)
                return FLOW_NORMAL;
            if (n->c->kind != N_IF)
                return ct_exec_body(r, n->c);
            n = n->c;
        }
    case N_FOR:
        return exec_for(r, n);
    case N_SET:
        assign(r, n->a, ct_eval(r, n->b));
        return FLOW_NORMAL;
    case N_SET_BLOCK: {
        struct ct_buf *saved = r->out;
        struct ct_buf out = {.limit = r->limits.max_output_bytes};
        r->out = &out;
        int flow = ct_exec_body(r, n->d);
        r->out = saved;
        assign(r, n->a, ct_str(out.data ? out.data : "", out.len));
        return flow;
    }
    case N_MACRO: {
        struct ct_value m = {.type = CT_MACRO};
        m.u.macro = n;
        ct_frame_set(r, r->frame, n->name, n->name_len, m);
        return FLOW_NORMAL;
    }
    case N_BREAK:
        return FLOW_BREAK;
    case N_CONTINUE:
        return FLOW_CONTINUE;
    default:
        ct_error(r, n, "internal error: expression executed as a statement");
    }
}

static int ct_exec_body(struct ct_render *r, const struct ct_node *body)
{
    for (size_t i = 0; i < body->n; i++) {
        int flow = exec_node(r, body->list[i]);
        if (flow != FLOW_NORMAL)
            return flow;
    }
    return FLOW_NORMAL;
}

/* ---- public calls ---- */

int folio_chat_template_compile(const char *src, struct folio_chat_template **out, char *err,
                                size_t errlen)
{
    *out = NULL;
    if (!src) {
        snprintf(err, errlen, "chat template: no template given");
        return -1;
    }
    struct folio_chat_template *t = calloc(1, sizeof(*t));
    if (!t) {
        snprintf(err, errlen, "chat template: out of memory");
        return -1;
    }
    t->arena.fail = &t->jump;
    t->arena.err = err;
    t->arena.errlen = errlen;
    t->arena.limit = DEFAULT_MAX_MEMORY;
    if (setjmp(t->jump)) {
        ct_arena_free(&t->arena);
        free(t);
        return -1;
    }
    struct ct_tokens toks = {0};
    ct_lex(&t->arena, src, &toks);
    t->body = ct_parse(&t->arena, &toks);
    t->arena.err = NULL;
    t->arena.errlen = 0;
    *out = t;
    return 0;
}

void folio_chat_template_free(struct folio_chat_template *t)
{
    if (!t)
        return;
    ct_arena_free(&t->arena);
    free(t);
}

int folio_chat_template_render_json(const struct folio_chat_template *t, const json_t *vars,
                                    const struct folio_chat_template_limits *limits, char **out,
                                    size_t *outlen, char *err, size_t errlen)
{
    *out = NULL;
    *outlen = 0;
    if (vars && !json_is_object(vars)) {
        snprintf(err, errlen, "chat template: the variables must be a JSON object");
        return -1;
    }
    /* On the heap: longjmp leaves locals of this function indeterminate. */
    struct ct_render *r = calloc(1, sizeof(*r));
    if (!r) {
        snprintf(err, errlen, "chat template: out of memory");
        return -1;
    }
    if (limits)
        r->limits = *limits;
    if (!r->limits.max_output_bytes)
        r->limits.max_output_bytes = DEFAULT_MAX_OUTPUT;
    if (!r->limits.max_memory_bytes || r->limits.max_memory_bytes > MAX_MEMORY_CAP)
        r->limits.max_memory_bytes =
            limits && limits->max_memory_bytes ? MAX_MEMORY_CAP : DEFAULT_MAX_MEMORY;
    if (r->limits.max_output_bytes > r->limits.max_memory_bytes)
        r->limits.max_output_bytes = r->limits.max_memory_bytes;
    if (!r->limits.max_steps)
        r->limits.max_steps = DEFAULT_MAX_STEPS;
    if (r->limits.max_call_depth <= 0)
        r->limits.max_call_depth = DEFAULT_MAX_DEPTH;
    r->arena.fail = &r->jump;
    r->arena.err = err;
    r->arena.errlen = errlen;
    r->arena.limit = r->limits.max_memory_bytes;
    if (setjmp(r->jump)) {
        ct_arena_free(&r->arena);
        free(r);
        return -1;
    }
    r->globals = ct_alloc(&r->arena, sizeof(struct ct_frame));
    memset(r->globals, 0, sizeof(struct ct_frame));
    r->frame = r->globals;
    if (vars) {
        const char *key;
        json_t *val;
        json_object_foreach((json_t *)vars, key, val)
        {
            ct_frame_set(r, r->globals, key, strlen(key), ct_from_json(&r->arena, val, 0));
        }
    }
    if (!vars || !json_object_get(vars, "tools"))
        ct_frame_set(r, r->globals, "tools", 5, ct_none());
    if (!vars || !json_object_get(vars, "documents"))
        ct_frame_set(r, r->globals, "documents", 9, ct_none());
    struct ct_buf *buf = ct_alloc(&r->arena, sizeof(*buf));
    memset(buf, 0, sizeof(*buf));
    buf->limit = r->limits.max_output_bytes;
    r->out = buf;
    ct_exec_body(r, t->body);
    char *result = malloc(buf->len + 1);
    if (!result) {
        ct_arena_free(&r->arena);
        free(r);
        snprintf(err, errlen, "chat template: out of memory");
        return -1;
    }
    if (buf->len)
        memcpy(result, buf->data, buf->len);
    result[buf->len] = 0;
    *out = result;
    *outlen = buf->len;
    ct_arena_free(&r->arena);
    free(r);
    return 0;
}

int folio_chat_template_render(const struct folio_chat_template *t,
                               const struct folio_chat_message *msgs, size_t n,
                               bool add_generation_prompt, const char *bos_token,
                               const char *eos_token, char **out, size_t *outlen, char *err,
                               size_t errlen)
{
    *out = NULL;
    *outlen = 0;
    json_t *vars = json_object();
    json_t *messages = json_array();
    if (!vars || !messages) {
        json_decref(vars);
        json_decref(messages);
        snprintf(err, errlen, "chat template: out of memory");
        return -1;
    }
    json_object_set_new(vars, "messages", messages);
    for (size_t i = 0; i < n; i++) {
        json_t *m = json_object();
        if (!m || !msgs[i].role) {
            json_decref(m);
            json_decref(vars);
            snprintf(err, errlen, "chat template: message %zu has no role", i);
            return -1;
        }
        json_object_set_new(m, "role", json_string(msgs[i].role));
        json_object_set_new(m, "content",
                            msgs[i].content ? json_string(msgs[i].content) : json_null());
        if (!json_object_get(m, "role") || !json_object_get(m, "content")) {
            json_decref(m);
            json_decref(vars);
            snprintf(err, errlen, "chat template: message %zu is not valid UTF-8", i);
            return -1;
        }
        json_array_append_new(messages, m);
    }
    json_object_set_new(vars, "add_generation_prompt", json_boolean(add_generation_prompt));
    if (bos_token)
        json_object_set_new(vars, "bos_token", json_string(bos_token));
    if (eos_token)
        json_object_set_new(vars, "eos_token", json_string(eos_token));
    int rc = folio_chat_template_render_json(t, vars, NULL, out, outlen, err, errlen);
    json_decref(vars);
    return rc;
}

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

static struct ct_value ct_call_value(struct ct_render *r, const struct ct_node *at,
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

static struct ct_value ct_eval(struct ct_render *r, const struct ct_node *n)
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

/* ---- operators ---- */

static bool is_num(const struct ct_value *v)
{
    return v->type == CT_BOOL || v->type == CT_INT || v->type == CT_FLOAT;
}

static double num_f(const struct ct_value *v)
{
    return v->type == CT_FLOAT ? v->u.f : v->type == CT_INT ? (double)v->u.i : (double)v->u.b;
}

static int64_t ct_num_i(const struct ct_value *v)
{
    return v->type == CT_INT ? v->u.i : v->u.b;
}

static const char *op_symbol(int op)
{
    static const char *const s[] = {"+",  "-",  "*", "/",  "//", "%",  "**", "~",
                                    "==", "!=", "<", "<=", ">",  ">=", "in", "not in"};
    return s[op];
}

static _Noreturn void bad_operands(struct ct_render *r, const struct ct_node *n, int op,
                                   const struct ct_value *a, const struct ct_value *b)
{
    if (a->type == CT_UNDEF)
        ct_undefined_error(r, n, a);
    if (b->type == CT_UNDEF)
        ct_undefined_error(r, n, b);
    if (op == OP_ADD && a->type == CT_STR)
        ct_error(r, n, "can only concatenate str (not \"%s\") to str", ct_type_name(b->type));
    ct_error(r, n, "unsupported operand type(s) for %s: '%s' and '%s'", op_symbol(op),
             ct_type_name(a->type), ct_type_name(b->type));
}

static struct ct_value repeat(struct ct_render *r, const struct ct_node *n,
                              const struct ct_value *seq, int64_t times)
{
    if (times < 0)
        times = 0;
    if (seq->type == CT_STR) {
        if (seq->len && (uint64_t)times > r->limits.max_output_bytes / seq->len)
            ct_error(r, n, "string repetition longer than the output limit");
        struct ct_buf b = {0};
        for (int64_t k = 0; k < times; k++)
            ct_buf_put(&r->arena, &b, seq->u.s, seq->len);
        return ct_str(b.data ? b.data : "", b.len);
    }
    size_t len = seq->u.list->len;
    if (len && (uint64_t)times > (r->limits.max_memory_bytes / sizeof(struct ct_value)) / len)
        ct_error(r, n, "list repetition larger than the memory limit");
    struct ct_value l = ct_list_new(&r->arena, len * (size_t)times);
    l.flags = seq->flags;
    for (int64_t k = 0; k < times; k++)
        for (size_t i = 0; i < len; i++)
            l.u.list->items[l.u.list->len++] = seq->u.list->items[i];
    return l;
}

static struct ct_value ct_arith(struct ct_render *r, const struct ct_node *n, int op,
                                const struct ct_value *a, const struct ct_value *b)
{
    if (op == OP_CONCAT) {
        struct ct_buf buf = {0};
        ct_put_str(&r->arena, &buf, a);
        ct_put_str(&r->arena, &buf, b);
        return ct_str(buf.data ? buf.data : "", buf.len);
    }
    if (is_num(a) && is_num(b)) {
        bool ints = a->type != CT_FLOAT && b->type != CT_FLOAT;
        int64_t x = ints ? ct_num_i(a) : 0, y = ints ? ct_num_i(b) : 0, z;
        double fx = num_f(a), fy = num_f(b);
        switch (op) {
        case OP_ADD:
            if (!ints)
                return ct_float(fx + fy);
            if (__builtin_add_overflow(x, y, &z))
                ct_error(r, n, "integer overflow");
            return ct_int(z);
        case OP_SUB:
            if (!ints)
                return ct_float(fx - fy);
            if (__builtin_sub_overflow(x, y, &z))
                ct_error(r, n, "integer overflow");
            return ct_int(z);
        case OP_MUL:
            if (!ints)
                return ct_float(fx * fy);
            if (__builtin_mul_overflow(x, y, &z))
                ct_error(r, n, "integer overflow");
            return ct_int(z);
        case OP_DIV:
            if (fy == 0)
                ct_error(r, n, "division by zero");
            return ct_float(fx / fy);
        case OP_FLOORDIV:
            if (ints) {
                if (y == 0)
                    ct_error(r, n, "integer division or modulo by zero");
                if (x == INT64_MIN && y == -1)
                    ct_error(r, n, "integer overflow");
                z = x / y;
                if ((x % y != 0) && ((x < 0) != (y < 0)))
                    z--;
                return ct_int(z);
            }
            if (fy == 0)
                ct_error(r, n, "float floor division by zero");
            return ct_float(floor(fx / fy));
        case OP_MOD:
            if (ints) {
                if (y == 0)
                    ct_error(r, n, "integer division or modulo by zero");
                if (y == -1)
                    return ct_int(0);
                z = x % y;
                if (z != 0 && ((z < 0) != (y < 0)))
                    z += y;
                return ct_int(z);
            }
            if (fy == 0)
                ct_error(r, n, "float modulo");
            {
                double m = fmod(fx, fy);
                if (m != 0 && ((m < 0) != (fy < 0)))
                    m += fy;
                return ct_float(m);
            }
        case OP_POW:
            if (ints && y >= 0) {
                int64_t result = 1, base = x;
                for (int64_t e = y; e > 0; e >>= 1) {
                    if ((e & 1) && __builtin_mul_overflow(result, base, &result))
                        ct_error(r, n, "integer overflow");
                    if (e > 1 && __builtin_mul_overflow(base, base, &base))
                        ct_error(r, n, "integer overflow");
                }
                return ct_int(result);
            }
            if (fx == 0 && fy < 0)
                ct_error(r, n, "0.0 cannot be raised to a negative power");
            return ct_float(pow(fx, fy));
        }
    }
    if (op == OP_ADD && a->type == CT_STR && b->type == CT_STR) {
        char *s = ct_alloc(&r->arena, (size_t)a->len + b->len + 1);
        memcpy(s, a->u.s, a->len);
        memcpy(s + a->len, b->u.s, b->len);
        s[a->len + b->len] = 0;
        return ct_str(s, (size_t)a->len + b->len);
    }
    if (op == OP_ADD && a->type == CT_LIST && b->type == CT_LIST &&
        (a->flags & CT_F_TUPLE) == (b->flags & CT_F_TUPLE)) {
        size_t la = a->u.list->len, lb = b->u.list->len;
        struct ct_value l = ct_list_new(&r->arena, la + lb);
        l.flags = a->flags;
        if (la)
            memcpy(l.u.list->items, a->u.list->items, la * sizeof(struct ct_value));
        if (lb)
            memcpy(l.u.list->items + la, b->u.list->items, lb * sizeof(struct ct_value));
        l.u.list->len = la + lb;
        return l;
    }
    if (op == OP_MUL) {
        if ((a->type == CT_STR || a->type == CT_LIST) && (b->type == CT_INT || b->type == CT_BOOL))
            return repeat(r, n, a, ct_num_i(b));
        if ((b->type == CT_STR || b->type == CT_LIST) && (a->type == CT_INT || a->type == CT_BOOL))
            return repeat(r, n, b, ct_num_i(a));
    }
    if (op == OP_MOD && a->type == CT_STR)
        ct_error(r, n, "printf-style '%%' formatting of strings is not supported");
    bad_operands(r, n, op, a, b);
}

static int cmp_strings(const struct ct_value *a, const struct ct_value *b)
{
    size_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->u.s, b->u.s, n);
    if (c)
        return c < 0 ? -1 : 1;
    return (a->len > b->len) - (a->len < b->len);
}

int ct_compare(struct ct_render *r, const struct ct_node *at, const struct ct_value *a,
               const struct ct_value *b)
{
    if (is_num(a) && is_num(b)) {
        if (a->type != CT_FLOAT && b->type != CT_FLOAT)
            return (ct_num_i(a) > ct_num_i(b)) - (ct_num_i(a) < ct_num_i(b));
        double x = num_f(a), y = num_f(b);
        return (x > y) - (x < y);
    }
    if (a->type == CT_STR && b->type == CT_STR)
        return cmp_strings(a, b); /* UTF-8 byte order is code point order */
    if (a->type == CT_LIST && b->type == CT_LIST) {
        size_t n = a->u.list->len < b->u.list->len ? a->u.list->len : b->u.list->len;
        for (size_t i = 0; i < n; i++) {
            if (!ct_equal(&a->u.list->items[i], &b->u.list->items[i]))
                return ct_compare(r, at, &a->u.list->items[i], &b->u.list->items[i]);
        }
        return (a->u.list->len > b->u.list->len) - (a->u.list->len < b->u.list->len);
    }
    if (a->type == CT_UNDEF)
        ct_undefined_error(r, at, a);
    if (b->type == CT_UNDEF)
        ct_undefined_error(r, at, b);
    ct_error(r, at, "'<' not supported between instances of '%s' and '%s'", ct_type_name(a->type),
             ct_type_name(b->type));
}

static bool contains(struct ct_render *r, const struct ct_node *at, const struct ct_value *item,
                     const struct ct_value *container)
{
    switch (container->type) {
    case CT_UNDEF:
        return false;
    case CT_STR:
        if (item->type != CT_STR)
            ct_error(r, at, "'in <string>' requires string as left operand, not %s",
                     ct_type_name(item->type));
        if (item->len == 0)
            return true;
        if (item->len > container->len)
            return false;
        for (size_t i = 0; i + item->len <= container->len; i++)
            if (memcmp(container->u.s + i, item->u.s, item->len) == 0)
                return true;
        return false;
    case CT_LIST:
        for (size_t i = 0; i < container->u.list->len; i++)
            if (ct_equal(&container->u.list->items[i], item))
                return true;
        return false;
    case CT_DICT:
        return ct_dict_find(container, item) != NULL;
    default:
        ct_error(r, at, "argument of type '%s' is not iterable", ct_type_name(container->type));
    }
}

static bool ct_compare_op(struct ct_render *r, const struct ct_node *at, int op,
                          const struct ct_value *a, const struct ct_value *b)
{
    switch (op) {
    case OP_EQ:
        return ct_equal(a, b);
    case OP_NE:
        return !ct_equal(a, b);
    case OP_LT:
        return ct_compare(r, at, a, b) < 0;
    case OP_LE:
        return ct_compare(r, at, a, b) <= 0;
    case OP_GT:
        return ct_compare(r, at, a, b) > 0;
    case OP_GE:
        return ct_compare(r, at, a, b) >= 0;
    case OP_IN:
        return contains(r, at, a, b);
    default:
        return !contains(r, at, a, b);
    }
}
