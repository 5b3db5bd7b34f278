/* The chat-template parser: tokens to a syntax tree, with jinja2's grammar
 * and operator precedence (jinja2/parser.py): condexpr < or < and < not <
 * comparisons < + - < ~ < * / // % < ** < unary < postfix, filters, tests.
 * The statements first, then the expressions. Filter and test names are
 * resolved here, so a template that names one this interpreter lacks fails
 * when it is loaded, not on a request. */
#include <stdio.h>
#include <string.h>

#include "chat_template_internal.h"

static const struct ct_token *ct_parse_cur(struct ct_parser *p);
static void ct_parse_enter(struct ct_parser *p);
static void ct_parse_expect_op(struct ct_parser *p, const char *op);
static void ct_parse_expect_type(struct ct_parser *p, int type, const char *what);
static struct ct_node *ct_parse_expression(struct ct_parser *p, bool with_condexpr);
static _Noreturn void ct_parse_fail_at(struct ct_parser *p, const struct ct_token *tok,
                                       const char *fmt, const char *arg, size_t arglen);
static bool ct_parse_is_name(const struct ct_token *t, const char *name);
static bool ct_parse_is_op(const struct ct_token *t, const char *op);
static struct ct_node *ct_parse_node(struct ct_parser *p, int kind, const struct ct_token *at);
static const struct ct_token *ct_parse_peek(struct ct_parser *p, size_t k);
static void ct_parse_push(struct ct_parser *p, struct ct_nodes *l, struct ct_node *x);
static bool ct_parse_skip_name(struct ct_parser *p, const char *name);
static bool ct_parse_skip_op(struct ct_parser *p, const char *op);
static struct ct_node *ct_parse_tuple(struct ct_parser *p, bool with_condexpr,
                                      const char *extra_end, bool explicit_parens);
static _Noreturn void ct_parse_unexpected(struct ct_parser *p, const char *expected);

#define MAX_NESTING 200
/* Chains (a.b.c..., x[0][0]..., 1 ~ 1 ~ ..., x|f|f...) are parsed in loops
 * that MAX_NESTING does not see, yet each link is one level of the tree that
 * eval() walks recursively: the whole tree's depth is bounded too, far above
 * any real template's and far below what the stack holds. */
#define MAX_TREE_DEPTH 1000

static const struct ct_token *ct_parse_cur(struct ct_parser *p)
{
    return &p->t[p->pos];
}

static const struct ct_token *ct_parse_peek(struct ct_parser *p, size_t k)
{
    return p->pos + k < p->n ? &p->t[p->pos + k] : &p->t[p->n - 1];
}

/* fmt takes one "%.*s" argument (arg, arglen). */
static _Noreturn void ct_parse_fail_at(struct ct_parser *p, const struct ct_token *tok, const char *fmt,
                                const char *arg, size_t arglen)
{
    char msg[256];
    snprintf(msg, sizeof(msg), fmt, (int)arglen, arg);
    ct_fail(p->a, "chat template syntax error at line %d, column %d: %s", tok->line, tok->col, msg);
}

static const char *describe(const struct ct_token *t, size_t *len)
{
    switch (t->type) {
    case TK_EOF:
        *len = 15;
        return "end of template";
    case TK_VAR_END:
        *len = 2;
        return "}}";
    case TK_BLOCK_END:
        *len = 2;
        return "%}";
    case TK_STRING:
        *len = 14;
        return "string literal";
    case TK_INT:
    case TK_FLOAT:
        *len = 6;
        return "number";
    case TK_TEXT:
        *len = 4;
        return "text";
    default:
        *len = t->len;
        return t->s;
    }
}

static _Noreturn void ct_parse_unexpected(struct ct_parser *p, const char *expected)
{
    size_t len;
    const char *what = describe(ct_parse_cur(p), &len);
    ct_fail(p->a, "chat template syntax error at line %d, column %d: expected %s, got '%.*s'",
            ct_parse_cur(p)->line, ct_parse_cur(p)->col, expected, (int)len, what);
}

static bool ct_parse_is_op(const struct ct_token *t, const char *op)
{
    return t->type == TK_OP && t->len == strlen(op) && memcmp(t->s, op, t->len) == 0;
}

static bool ct_parse_is_name(const struct ct_token *t, const char *name)
{
    return t->type == TK_NAME && t->len == strlen(name) && memcmp(t->s, name, t->len) == 0;
}

static bool ct_parse_skip_op(struct ct_parser *p, const char *op)
{
    if (!ct_parse_is_op(ct_parse_cur(p), op))
        return false;
    p->pos++;
    return true;
}

static bool ct_parse_skip_name(struct ct_parser *p, const char *name)
{
    if (!ct_parse_is_name(ct_parse_cur(p), name))
        return false;
    p->pos++;
    return true;
}

static void ct_parse_expect_op(struct ct_parser *p, const char *op)
{
    if (!ct_parse_skip_op(p, op)) {
        char what[16];
        snprintf(what, sizeof(what), "'%s'", op);
        ct_parse_unexpected(p, what);
    }
}

static void ct_parse_expect_type(struct ct_parser *p, int type, const char *what)
{
    if (ct_parse_cur(p)->type != type)
        ct_parse_unexpected(p, what);
    p->pos++;
}

static struct ct_node *ct_parse_node(struct ct_parser *p, int kind, const struct ct_token *at)
{
    struct ct_node *n = ct_alloc(p->a, sizeof(*n));
    memset(n, 0, sizeof(*n));
    n->kind = (uint8_t)kind;
    n->line = at->line;
    n->col = at->col;
    return n;
}

static void ct_parse_push(struct ct_parser *p, struct ct_nodes *l, struct ct_node *x)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        struct ct_node **v = ct_alloc(p->a, cap * sizeof(*v));
        if (l->n)
            memcpy(v, l->v, l->n * sizeof(*v));
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = x;
}

static void ct_parse_enter(struct ct_parser *p)
{
    if (++p->nesting > MAX_NESTING)
        ct_parse_fail_at(p, ct_parse_cur(p), "%.*s", "nested too deeply", 17);
}

/* ---- statements ---- */

static struct ct_node *parse_body(struct ct_parser *p, const char *const *end_tags);

static void expect_block_end(struct ct_parser *p)
{
    ct_parse_expect_type(p, TK_BLOCK_END, "'%}'");
}

/* The end of a tag that opens a body; jinja2 allows a colon before it
 * ("{% if x: %}"), for Python's sake. */
static void expect_body_start(struct ct_parser *p)
{
    ct_parse_skip_op(p, ":");
    expect_block_end(p);
}

/* After parse_body stopped at an end tag: the tag's name. */
static const struct ct_token *end_tag(struct ct_parser *p)
{
    const struct ct_token *t = ct_parse_cur(p);
    p->pos++;
    return t;
}

static const char *const if_ends[] = {"elif", "else", "endif", NULL};
static const char *const endif_end[] = {"endif", NULL};
static const char *const for_ends[] = {"endfor", "else", NULL};
static const char *const endfor_end[] = {"endfor", NULL};
static const char *const endset_end[] = {"endset", NULL};
static const char *const endmacro_end[] = {"endmacro", NULL};
static const char *const endgeneration_end[] = {"endgeneration", NULL};

static struct ct_node *parse_if(struct ct_parser *p, const struct ct_token *at)
{
    struct ct_node *n = ct_parse_node(p, N_IF, at);
    n->a = ct_parse_tuple(p, false, NULL, false);
    expect_body_start(p);
    n->b = parse_body(p, if_ends);
    const struct ct_token *t = end_tag(p);
    if (ct_parse_is_name(t, "elif")) {
        n->c = parse_if(p, t);
        return n;
    }
    if (ct_parse_is_name(t, "else")) {
        expect_body_start(p);
        n->c = parse_body(p, endif_end);
        end_tag(p);
    }
    expect_block_end(p);
    return n;
}

/* A name, a namespace attribute (with_namespace) or a tuple of names. */
static struct ct_node *parse_target(struct ct_parser *p, bool with_namespace)
{
    const struct ct_token *start = ct_parse_cur(p);
    struct ct_nodes names = {0};
    for (;;) {
        const struct ct_token *t = ct_parse_cur(p);
        ct_parse_expect_type(p, TK_NAME, "a variable name");
        struct ct_node *n = ct_parse_node(p, N_NAME, t);
        n->name = t->s;
        n->name_len = t->len;
        if (with_namespace && !names.n && ct_parse_is_op(ct_parse_cur(p), ".")) {
            p->pos++;
            const struct ct_token *attr = ct_parse_cur(p);
            ct_parse_expect_type(p, TK_NAME, "an attribute name");
            struct ct_node *g = ct_parse_node(p, N_GETATTR, attr);
            g->a = n;
            g->name = attr->s;
            g->name_len = attr->len;
            return g;
        }
        ct_parse_push(p, &names, n);
        if (!ct_parse_skip_op(p, ","))
            break;
        if (ct_parse_cur(p)->type != TK_NAME)
            break;
    }
    if (names.n == 1)
        return names.v[0];
    struct ct_node *tuple = ct_parse_node(p, N_TUPLE, start);
    tuple->list = names.v;
    tuple->n = names.n;
    return tuple;
}

static struct ct_node *parse_for(struct ct_parser *p, const struct ct_token *at)
{
    struct ct_node *n = ct_parse_node(p, N_FOR, at);
    n->a = parse_target(p, false);
    if (!ct_parse_skip_name(p, "in"))
        ct_parse_unexpected(p, "'in'");
    n->b = ct_parse_tuple(p, false, "recursive", false);
    if (ct_parse_skip_name(p, "if"))
        n->c = ct_parse_expression(p, true);
    if (ct_parse_is_name(ct_parse_cur(p), "recursive"))
        ct_parse_fail_at(p, ct_parse_cur(p), "%.*s", "recursive loops are not supported", 33);
    expect_body_start(p);
    n->d = parse_body(p, for_ends);
    if (ct_parse_is_name(end_tag(p), "else")) {
        expect_body_start(p);
        n->e = parse_body(p, endfor_end);
        end_tag(p);
    }
    expect_block_end(p);
    return n;
}

static struct ct_node *parse_set(struct ct_parser *p, const struct ct_token *at)
{
    struct ct_node *target = parse_target(p, true);
    if (ct_parse_skip_op(p, "=")) {
        struct ct_node *n = ct_parse_node(p, N_SET, at);
        n->a = target;
        n->b = ct_parse_tuple(p, true, NULL, false);
        expect_block_end(p);
        return n;
    }
    if (target->kind != N_NAME)
        ct_parse_unexpected(p, "'='");
    struct ct_node *n = ct_parse_node(p, N_SET_BLOCK, at);
    n->a = target;
    expect_body_start(p);
    n->d = parse_body(p, endset_end);
    end_tag(p);
    expect_block_end(p);
    return n;
}

static struct ct_node *parse_macro(struct ct_parser *p, const struct ct_token *at)
{
    struct ct_node *n = ct_parse_node(p, N_MACRO, at);
    const struct ct_token *name = ct_parse_cur(p);
    ct_parse_expect_type(p, TK_NAME, "a macro name");
    n->name = name->s;
    n->name_len = name->len;
    struct ct_nodes params = {0};
    ct_parse_expect_op(p, "(");
    while (!ct_parse_is_op(ct_parse_cur(p), ")")) {
        if (params.n)
            ct_parse_expect_op(p, ",");
        const struct ct_token *t = ct_parse_cur(p);
        ct_parse_expect_type(p, TK_NAME, "a parameter name");
        struct ct_node *param = ct_parse_node(p, N_NAME, t);
        param->name = t->s;
        param->name_len = t->len;
        if (ct_parse_skip_op(p, "="))
            param->a = ct_parse_expression(p, true);
        else if (params.n && params.v[params.n - 1]->a)
            ct_parse_fail_at(p, t, "%.*s", "non-default argument follows default argument", 45);
        ct_parse_push(p, &params, param);
    }
    ct_parse_expect_op(p, ")");
    n->list = params.v;
    n->n = params.n;
    expect_body_start(p);
    n->d = parse_body(p, endmacro_end);
    end_tag(p);
    if (ct_parse_cur(p)->type == TK_NAME)
        p->pos++; /* {% endmacro name %} */
    expect_block_end(p);
    return n;
}

static struct ct_node *parse_statement(struct ct_parser *p)
{
    const struct ct_token *t = ct_parse_cur(p);
    if (t->type != TK_NAME)
        ct_parse_unexpected(p, "a tag name");
    p->pos++;
    if (ct_parse_is_name(t, "if"))
        return parse_if(p, t);
    if (ct_parse_is_name(t, "for"))
        return parse_for(p, t);
    if (ct_parse_is_name(t, "set"))
        return parse_set(p, t);
    if (ct_parse_is_name(t, "macro"))
        return parse_macro(p, t);
    if (ct_parse_is_name(t, "break") || ct_parse_is_name(t, "continue")) {
        struct ct_node *n =
            ct_parse_node(p, ct_parse_is_name(t, "break") ? N_BREAK : N_CONTINUE, t);
        expect_block_end(p);
        return n;
    }
    if (ct_parse_is_name(t, "generation")) {
        /* transformers' {% generation %} marks assistant text for masks;
         * for rendering it is its body. */
        expect_block_end(p);
        struct ct_node *body = parse_body(p, endgeneration_end);
        end_tag(p);
        expect_block_end(p);
        return body;
    }
    ct_parse_fail_at(p, t, "unknown or unexpected tag '%.*s'", t->s, t->len);
}

static bool in_list(const struct ct_token *t, const char *const *names)
{
    for (; names && *names; names++)
        if (ct_parse_is_name(t, *names))
            return true;
    return false;
}

/* Statements until one of end_tags (left at the tag's name) or the end. */
static struct ct_node *parse_body(struct ct_parser *p, const char *const *end_tags)
{
    struct ct_node *body = ct_parse_node(p, N_BODY, ct_parse_cur(p));
    struct ct_nodes items = {0};
    ct_parse_enter(p);
    for (;;) {
        const struct ct_token *t = ct_parse_cur(p);
        if (t->type == TK_EOF) {
            if (end_tags) {
                char msg[160];
                snprintf(msg, sizeof(msg), "unexpected end of template, looking for '%s'",
                         end_tags[0]);
                ct_parse_fail_at(p, t, "%.*s", msg, strlen(msg));
            }
            break;
        }
        if (t->type == TK_TEXT) {
            struct ct_node *n = ct_parse_node(p, N_TEXT, t);
            n->name = t->s;
            n->name_len = t->len;
            ct_parse_push(p, &items, n);
            p->pos++;
        } else if (t->type == TK_VAR_BEGIN) {
            p->pos++;
            struct ct_node *n = ct_parse_node(p, N_OUTPUT, t);
            n->a = ct_parse_tuple(p, true, NULL, false);
            ct_parse_expect_type(p, TK_VAR_END, "'}}'");
            ct_parse_push(p, &items, n);
        } else if (t->type == TK_BLOCK_BEGIN) {
            p->pos++;
            if (in_list(ct_parse_cur(p), end_tags))
                break;
            ct_parse_push(p, &items, parse_statement(p));
        } else {
            ct_parse_unexpected(p, "text or a tag");
        }
    }
    p->nesting--;
    body->list = items.v;
    body->n = items.n;
    return body;
}

/* Unknown filters and tests fail at load time, except inside an if
 * statement or an inline if, where jinja2 lets them fail only when they
 * run (its "soft frames"); loop and macro bodies are not soft. */
static void check_names(struct ct_parser *p, const struct ct_node *n, bool soft, int depth)
{
    if (!n)
        return;
    if (depth > MAX_TREE_DEPTH) {
        struct ct_token at = {.line = n->line, .col = n->col};
        ct_parse_fail_at(p, &at, "%.*s", "expression nested too deeply", 28);
    }
    if ((n->kind == N_FILTER || n->kind == N_TEST) && n->op < 0 && !soft) {
        struct ct_token at = {.line = n->line, .col = n->col};
        ct_parse_fail_at(p, &at,
                         n->kind == N_FILTER ? "no filter named '%.*s'" : "no test named '%.*s'",
                         n->name, n->name_len);
    }
    bool inner = soft;
    switch (n->kind) {
    case N_IF:
    case N_CONDEXPR:
        inner = true;
        break;
    case N_FOR:
        check_names(p, n->b, soft, depth + 1);
        check_names(p, n->a, false, depth + 1);
        check_names(p, n->c, false, depth + 1);
        check_names(p, n->d, false, depth + 1);
        check_names(p, n->e, false, depth + 1);
        return;
    case N_MACRO:
    case N_SET_BLOCK:
        inner = false;
        break;
    default:
        break;
    }
    check_names(p, n->a, inner, depth + 1);
    check_names(p, n->b, inner, depth + 1);
    check_names(p, n->c, inner, depth + 1);
    check_names(p, n->d, inner, depth + 1);
    check_names(p, n->e, inner, depth + 1);
    for (size_t i = 0; i < n->n; i++)
        check_names(p, n->list[i], inner, depth + 1);
}

struct ct_node *ct_parse(struct ct_arena *a, const struct ct_tokens *toks)
{
    struct ct_parser p = {.a = a, .t = toks->v, .n = toks->n};
    struct ct_node *body = parse_body(&p, NULL);
    check_names(&p, body, false, 0);
    return body;
}

static struct ct_node *parse_unary(struct ct_parser *p, bool with_filter);
static struct ct_node *parse_primary(struct ct_parser *p);
static struct ct_node *parse_postfix(struct ct_parser *p, struct ct_node *n);

/* Where a bare tuple ends: the end of the tag or a closing parenthesis. */
static bool tuple_end(struct ct_parser *p, const char *extra_end)
{
    const struct ct_token *t = ct_parse_cur(p);
    if (t->type == TK_VAR_END || t->type == TK_BLOCK_END || t->type == TK_EOF ||
        ct_parse_is_op(t, ")"))
        return true;
    return extra_end && ct_parse_is_name(t, extra_end);
}

static struct ct_node *ct_parse_tuple(struct ct_parser *p, bool with_condexpr,
                                      const char *extra_end, bool explicit_parens)
{
    const struct ct_token *start = ct_parse_cur(p);
    struct ct_nodes items = {0};
    bool is_tuple = false;
    for (;;) {
        if (items.n)
            ct_parse_expect_op(p, ",");
        if (tuple_end(p, extra_end))
            break;
        ct_parse_push(p, &items, ct_parse_expression(p, with_condexpr));
        if (ct_parse_is_op(ct_parse_cur(p), ","))
            is_tuple = true;
        else
            break;
    }
    if (!is_tuple) {
        if (items.n)
            return items.v[0];
        if (!explicit_parens)
            ct_parse_unexpected(p, "an expression");
    }
    struct ct_node *t = ct_parse_node(p, N_TUPLE, start);
    t->list = items.v;
    t->n = items.n;
    return t;
}

static void parse_call_args(struct ct_parser *p, struct ct_node *call)
{
    struct ct_nodes args = {0};
    ct_parse_expect_op(p, "(");
    while (!ct_parse_is_op(ct_parse_cur(p), ")")) {
        if (args.n)
            ct_parse_expect_op(p, ",");
        if (ct_parse_is_op(ct_parse_cur(p), ")"))
            break;
        if (ct_parse_cur(p)->type == TK_NAME && ct_parse_is_op(ct_parse_peek(p, 1), "=")) {
            struct ct_node *kw = ct_parse_node(p, N_KWARG, ct_parse_cur(p));
            kw->name = ct_parse_cur(p)->s;
            kw->name_len = ct_parse_cur(p)->len;
            p->pos += 2;
            kw->a = ct_parse_expression(p, true);
            ct_parse_push(p, &args, kw);
        } else {
            if (args.n && args.v[args.n - 1]->kind == N_KWARG)
                ct_parse_fail_at(p, ct_parse_cur(p), "%.*s",
                                 "positional argument follows keyword argument", 44);
            ct_parse_push(p, &args, ct_parse_expression(p, true));
        }
    }
    ct_parse_expect_op(p, ")");
    call->list = args.v;
    call->n = args.n;
}

/* A filter or test name, which jinja2 lets be dotted ("a.b"); returns
 * its length in the source from the first token's start. */
static size_t dotted_name(struct ct_parser *p, const char *what)
{
    const struct ct_token *first = ct_parse_cur(p);
    ct_parse_expect_type(p, TK_NAME, what);
    const struct ct_token *last = first;
    while (ct_parse_is_op(ct_parse_cur(p), ".")) {
        p->pos++;
        last = ct_parse_cur(p);
        ct_parse_expect_type(p, TK_NAME, what);
    }
    return (size_t)(last->s - first->s) + last->len;
}

static struct ct_node *parse_filter(struct ct_parser *p, struct ct_node *operand)
{
    const struct ct_token *at = ct_parse_cur(p);
    ct_parse_expect_op(p, "|");
    const struct ct_token *name = ct_parse_cur(p);
    size_t name_len = dotted_name(p, "a filter name");
    int id = ct_filter_id(name->s, name_len); /* -1: checked by check_names */
    struct ct_node *f = ct_parse_node(p, N_FILTER, at);
    f->op = id;
    f->name = name->s;
    f->name_len = name_len;
    f->a = operand;
    if (ct_parse_is_op(ct_parse_cur(p), "("))
        parse_call_args(p, f);
    return f;
}

static struct ct_node *parse_test(struct ct_parser *p, struct ct_node *operand)
{
    const struct ct_token *at = ct_parse_cur(p);
    p->pos++; /* "is" */
    bool negated = ct_parse_skip_name(p, "not");
    const struct ct_token *name = ct_parse_cur(p);
    size_t name_len = dotted_name(p, "a test name");
    int id = ct_test_id(name->s, name_len); /* -1: checked by check_names */
    struct ct_node *t = ct_parse_node(p, N_TEST, at);
    t->op = id;
    t->flag = negated;
    t->name = name->s;
    t->name_len = name_len;
    t->a = operand;
    const struct ct_token *c = ct_parse_cur(p);
    if (ct_parse_is_op(c, "(")) {
        parse_call_args(p, t);
    } else if ((c->type == TK_NAME || c->type == TK_STRING || c->type == TK_INT ||
                c->type == TK_FLOAT || ct_parse_is_op(c, "[") || ct_parse_is_op(c, "{")) &&
               !ct_parse_is_name(c, "else") && !ct_parse_is_name(c, "or") &&
               !ct_parse_is_name(c, "and")) {
        /* "x is divisibleby 3", "x is sameas false": one argument, no parentheses. */
        if (ct_parse_is_name(c, "is"))
            ct_parse_unexpected(p, "a test argument");
        struct ct_node *arg = parse_postfix(p, parse_primary(p));
        t->list = ct_alloc(p->a, sizeof(*t->list));
        t->list[0] = arg;
        t->n = 1;
    }
    return t;
}

/* x[a], x[a:b:c], and as in jinja2 x[a, b] and x[] (a tuple key). */
static struct ct_node *parse_subscript(struct ct_parser *p, struct ct_node *obj,
                                       const struct ct_token *at)
{
    struct ct_node *parts[3] = {NULL, NULL, NULL};
    bool slice = false;
    if (ct_parse_is_op(ct_parse_cur(p), "]") || !ct_parse_is_op(ct_parse_cur(p), ":")) {
        struct ct_nodes keys = {0};
        while (!ct_parse_is_op(ct_parse_cur(p), "]")) {
            if (keys.n)
                ct_parse_expect_op(p, ",");
            ct_parse_push(p, &keys, ct_parse_expression(p, true));
            if (keys.n == 1 && ct_parse_is_op(ct_parse_cur(p), ":"))
                break;
        }
        if (!ct_parse_is_op(ct_parse_cur(p), ":") || keys.n != 1) {
            ct_parse_expect_op(p, "]");
            struct ct_node *g = ct_parse_node(p, N_GETITEM, at);
            g->a = obj;
            if (keys.n == 1) {
                g->b = keys.v[0];
            } else {
                g->b = ct_parse_node(p, N_TUPLE, at);
                g->b->list = keys.v;
                g->b->n = keys.n;
            }
            return g;
        }
        parts[0] = keys.v[0];
    }
    slice = true;
    ct_parse_expect_op(p, ":");
    if (!ct_parse_is_op(ct_parse_cur(p), "]") && !ct_parse_is_op(ct_parse_cur(p), ":"))
        parts[1] = ct_parse_expression(p, true);
    if (ct_parse_skip_op(p, ":")) {
        if (!ct_parse_is_op(ct_parse_cur(p), "]"))
            parts[2] = ct_parse_expression(p, true);
    }
    ct_parse_expect_op(p, "]");
    struct ct_node *s = ct_parse_node(p, N_SLICE, at);
    (void)slice;
    s->a = obj;
    s->b = parts[0];
    s->c = parts[1];
    s->d = parts[2];
    return s;
}

static struct ct_node *parse_postfix(struct ct_parser *p, struct ct_node *n)
{
    for (;;) {
        const struct ct_token *at = ct_parse_cur(p);
        if (ct_parse_skip_op(p, ".")) {
            const struct ct_token *t = ct_parse_cur(p);
            if (t->type == TK_NAME) {
                struct ct_node *g = ct_parse_node(p, N_GETATTR, at);
                g->a = n;
                g->name = t->s;
                g->name_len = t->len;
                p->pos++;
                n = g;
            } else if (t->type == TK_INT) {
                struct ct_node *g = ct_parse_node(p, N_GETITEM, at);
                g->a = n;
                g->b = ct_parse_node(p, N_CONST, t);
                g->b->value = ct_int(t->i);
                p->pos++;
                n = g;
            } else {
                ct_parse_unexpected(p, "an attribute name");
            }
        } else if (ct_parse_skip_op(p, "[")) {
            n = parse_subscript(p, n, at);
        } else if (ct_parse_is_op(at, "(")) {
            struct ct_node *c = ct_parse_node(p, N_CALL, at);
            c->a = n;
            parse_call_args(p, c);
            n = c;
        } else {
            return n;
        }
    }
}

static struct ct_node *parse_primary(struct ct_parser *p)
{
    const struct ct_token *t = ct_parse_cur(p);
    ct_parse_enter(p);
    struct ct_node *n;
    if (t->type == TK_NAME) {
        p->pos++;
        n = ct_parse_node(p, N_CONST, t);
        if (ct_parse_is_name(t, "true") || ct_parse_is_name(t, "True")) {
            n->value = ct_bool(true);
        } else if (ct_parse_is_name(t, "false") || ct_parse_is_name(t, "False")) {
            n->value = ct_bool(false);
        } else if (ct_parse_is_name(t, "none") || ct_parse_is_name(t, "None")) {
            n->value = ct_none();
        } else {
            n->kind = N_NAME;
            n->name = t->s;
            n->name_len = t->len;
        }
    } else if (t->type == TK_STRING) {
        /* Adjacent literals concatenate, as in Python. */
        size_t len = 0, k = p->pos;
        while (p->t[k].type == TK_STRING)
            len += p->t[k++].len;
        char *s = ct_alloc(p->a, len + 1);
        len = 0;
        while (ct_parse_cur(p)->type == TK_STRING) {
            memcpy(s + len, ct_parse_cur(p)->s, ct_parse_cur(p)->len);
            len += ct_parse_cur(p)->len;
            p->pos++;
        }
        n = ct_parse_node(p, N_CONST, t);
        n->value = ct_str(s, len);
    } else if (t->type == TK_INT || t->type == TK_FLOAT) {
        p->pos++;
        n = ct_parse_node(p, N_CONST, t);
        n->value = t->type == TK_INT ? ct_int(t->i) : ct_float(t->f);
    } else if (ct_parse_skip_op(p, "(")) {
        n = ct_parse_tuple(p, true, NULL, true);
        ct_parse_expect_op(p, ")");
    } else if (ct_parse_skip_op(p, "[")) {
        struct ct_nodes items = {0};
        while (!ct_parse_is_op(ct_parse_cur(p), "]")) {
            if (items.n)
                ct_parse_expect_op(p, ",");
            if (ct_parse_is_op(ct_parse_cur(p), "]"))
                break;
            ct_parse_push(p, &items, ct_parse_expression(p, true));
        }
        ct_parse_expect_op(p, "]");
        n = ct_parse_node(p, N_LIST, t);
        n->list = items.v;
        n->n = items.n;
    } else if (ct_parse_skip_op(p, "{")) {
        struct ct_nodes items = {0};
        while (!ct_parse_is_op(ct_parse_cur(p), "}")) {
            if (items.n)
                ct_parse_expect_op(p, ",");
            if (ct_parse_is_op(ct_parse_cur(p), "}"))
                break;
            struct ct_node *pair = ct_parse_node(p, N_PAIR, ct_parse_cur(p));
            pair->a = ct_parse_expression(p, true);
            ct_parse_expect_op(p, ":");
            pair->b = ct_parse_expression(p, true);
            ct_parse_push(p, &items, pair);
        }
        ct_parse_expect_op(p, "}");
        n = ct_parse_node(p, N_DICT, t);
        n->list = items.v;
        n->n = items.n;
    } else {
        ct_parse_unexpected(p, "an expression");
    }
    p->nesting--;
    return n;
}

static struct ct_node *parse_unary(struct ct_parser *p, bool with_filter)
{
    const struct ct_token *t = ct_parse_cur(p);
    struct ct_node *n;
    ct_parse_enter(p);
    if (ct_parse_skip_op(p, "-")) {
        n = ct_parse_node(p, N_NEG, t);
        n->a = parse_unary(p, false);
    } else if (ct_parse_skip_op(p, "+")) {
        n = ct_parse_node(p, N_POS, t);
        n->a = parse_unary(p, false);
    } else {
        n = parse_primary(p);
    }
    n = parse_postfix(p, n);
    if (with_filter) {
        for (;;) {
            if (ct_parse_is_op(ct_parse_cur(p), "|")) {
                n = parse_filter(p, n);
            } else if (ct_parse_is_name(ct_parse_cur(p), "is")) {
                n = parse_test(p, n);
            } else if (ct_parse_is_op(ct_parse_cur(p), "(")) {
                struct ct_node *c = ct_parse_node(p, N_CALL, ct_parse_cur(p));
                c->a = n;
                parse_call_args(p, c);
                n = c;
            } else {
                break;
            }
        }
    }
    p->nesting--;
    return n;
}

static struct ct_node *binop(struct ct_parser *p, const struct ct_token *at, int op,
                             struct ct_node *l, struct ct_node *r)
{
    struct ct_node *n = ct_parse_node(p, N_BINOP, at);
    n->op = op;
    n->a = l;
    n->b = r;
    return n;
}

static struct ct_node *parse_pow(struct ct_parser *p)
{
    struct ct_node *n = parse_unary(p, true);
    while (ct_parse_is_op(ct_parse_cur(p), "**")) {
        const struct ct_token *at = ct_parse_cur(p);
        p->pos++;
        n = binop(p, at, OP_POW, n, parse_unary(p, true));
    }
    return n;
}

static struct ct_node *parse_math2(struct ct_parser *p)
{
    struct ct_node *n = parse_pow(p);
    for (;;) {
        const struct ct_token *at = ct_parse_cur(p);
        int op = ct_parse_is_op(at, "*")    ? OP_MUL
                 : ct_parse_is_op(at, "/")  ? OP_DIV
                 : ct_parse_is_op(at, "//") ? OP_FLOORDIV
                 : ct_parse_is_op(at, "%")  ? OP_MOD
                                            : -1;
        if (op < 0)
            return n;
        p->pos++;
        n = binop(p, at, op, n, parse_pow(p));
    }
}

static struct ct_node *parse_concat(struct ct_parser *p)
{
    struct ct_node *n = parse_math2(p);
    while (ct_parse_is_op(ct_parse_cur(p), "~")) {
        const struct ct_token *at = ct_parse_cur(p);
        p->pos++;
        n = binop(p, at, OP_CONCAT, n, parse_math2(p));
    }
    return n;
}

static struct ct_node *parse_math1(struct ct_parser *p)
{
    struct ct_node *n = parse_concat(p);
    for (;;) {
        const struct ct_token *at = ct_parse_cur(p);
        int op = ct_parse_is_op(at, "+") ? OP_ADD : ct_parse_is_op(at, "-") ? OP_SUB : -1;
        if (op < 0)
            return n;
        p->pos++;
        n = binop(p, at, op, n, parse_concat(p));
    }
}

static struct ct_node *parse_compare(struct ct_parser *p)
{
    const struct ct_token *start = ct_parse_cur(p);
    struct ct_node *first = parse_math1(p);
    struct ct_nodes ops = {0};
    for (;;) {
        const struct ct_token *at = ct_parse_cur(p);
        int op = ct_parse_is_op(at, "==")   ? OP_EQ
                 : ct_parse_is_op(at, "!=") ? OP_NE
                 : ct_parse_is_op(at, "<")  ? OP_LT
                 : ct_parse_is_op(at, "<=") ? OP_LE
                 : ct_parse_is_op(at, ">")  ? OP_GT
                 : ct_parse_is_op(at, ">=") ? OP_GE
                                            : -1;
        if (op >= 0) {
            p->pos++;
        } else if (ct_parse_is_name(at, "in")) {
            op = OP_IN;
            p->pos++;
        } else if (ct_parse_is_name(at, "not") && ct_parse_is_name(ct_parse_peek(p, 1), "in")) {
            op = OP_NOTIN;
            p->pos += 2;
        } else {
            break;
        }
        struct ct_node *o = ct_parse_node(p, N_OPERAND, at);
        o->op = op;
        o->a = parse_math1(p);
        ct_parse_push(p, &ops, o);
    }
    if (!ops.n)
        return first;
    struct ct_node *c = ct_parse_node(p, N_COMPARE, start);
    c->a = first;
    c->list = ops.v;
    c->n = ops.n;
    return c;
}

static struct ct_node *parse_not(struct ct_parser *p)
{
    const struct ct_token *at = ct_parse_cur(p);
    if (ct_parse_is_name(at, "not")) {
        p->pos++;
        ct_parse_enter(p);
        struct ct_node *n = ct_parse_node(p, N_NOT, at);
        n->a = parse_not(p);
        p->nesting--;
        return n;
    }
    return parse_compare(p);
}

static struct ct_node *parse_and(struct ct_parser *p)
{
    struct ct_node *n = parse_not(p);
    while (ct_parse_is_name(ct_parse_cur(p), "and")) {
        struct ct_node *x = ct_parse_node(p, N_AND, ct_parse_cur(p));
        p->pos++;
        x->a = n;
        x->b = parse_not(p);
        n = x;
    }
    return n;
}

static struct ct_node *parse_or(struct ct_parser *p)
{
    struct ct_node *n = parse_and(p);
    while (ct_parse_is_name(ct_parse_cur(p), "or")) {
        struct ct_node *x = ct_parse_node(p, N_OR, ct_parse_cur(p));
        p->pos++;
        x->a = n;
        x->b = parse_and(p);
        n = x;
    }
    return n;
}

static struct ct_node *parse_condexpr(struct ct_parser *p)
{
    ct_parse_enter(p);
    struct ct_node *n = parse_or(p);
    while (ct_parse_is_name(ct_parse_cur(p), "if")) {
        struct ct_node *c = ct_parse_node(p, N_CONDEXPR, ct_parse_cur(p));
        p->pos++;
        c->a = n;
        c->b = parse_or(p);
        if (ct_parse_skip_name(p, "else"))
            c->c = parse_condexpr(p);
        n = c;
    }
    p->nesting--;
    return n;
}

static struct ct_node *ct_parse_expression(struct ct_parser *p, bool with_condexpr)
{
    return with_condexpr ? parse_condexpr(p) : parse_or(p);
}
