/* The chat-template evaluator: walks the syntax tree with jinja2's
 * semantics (Python values and operators, undefined values, the scoping of
 * for loops and macros) and the public compile and render calls. This file
 * holds the scopes, the statements and the public calls;
 * chat_template_eval_expr.c the expressions, chat_template_eval_ops.c the
 * operators. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_template_internal.h"

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

_Noreturn void ct_undefined_error(struct ct_render *r, const struct ct_node *at,
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

void ct_frame_set(struct ct_render *r, struct ct_frame *f, const char *name, size_t len,
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

struct ct_value ct_lookup(struct ct_render *r, const char *name, size_t len)
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

int ct_exec_body(struct ct_render *r, const struct ct_node *body)
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
