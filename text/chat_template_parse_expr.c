/* The chat-template parser's expressions: jinja2's operator precedence from
 * conditional expressions down to literals, with filters, tests, calls and subscripts. */
#include <stdio.h>
#include <string.h>

#include "chat_template_internal.h"

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

struct ct_node *ct_parse_tuple(struct ct_parser *p, bool with_condexpr, const char *extra_end,
                               bool explicit_parens)
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

struct ct_node *ct_parse_expression(struct ct_parser *p, bool with_condexpr)
{
    return with_condexpr ? parse_condexpr(p) : parse_or(p);
}
