/* The chat-template parser: tokens to a syntax tree, with jinja2's grammar
 * and operator precedence (jinja2/parser.py): condexpr < or < and < not <
 * comparisons < + - < ~ < * / // % < ** < unary < postfix, filters, tests.
 * Filter and test names are resolved here, so a template that names one
 * this interpreter lacks fails when it is loaded, not on a request. */
#include <stdio.h>
#include <string.h>

#include "chat_template_internal.h"

#define MAX_NESTING 200
/* Chains (a.b.c..., x[0][0]..., 1 ~ 1 ~ ..., x|f|f...) are parsed in loops
 * that MAX_NESTING does not see, yet each link is one level of the tree that
 * eval() walks recursively: the whole tree's depth is bounded too, far above
 * any real template's and far below what the stack holds. */
#define MAX_TREE_DEPTH 1000

struct parser {
    struct ct_arena *a;
    const struct ct_token *t;
    size_t n, pos;
    int nesting;
};

static const struct ct_token *cur(struct parser *p)
{
    return &p->t[p->pos];
}

static const struct ct_token *peek(struct parser *p, size_t k)
{
    return p->pos + k < p->n ? &p->t[p->pos + k] : &p->t[p->n - 1];
}

/* fmt takes one "%.*s" argument (arg, arglen). */
static _Noreturn void parse_fail_at(struct parser *p, const struct ct_token *tok, const char *fmt,
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

static _Noreturn void unexpected(struct parser *p, const char *expected)
{
    size_t len;
    const char *what = describe(cur(p), &len);
    ct_fail(p->a, "chat template syntax error at line %d, column %d: expected %s, got '%.*s'",
            cur(p)->line, cur(p)->col, expected, (int)len, what);
}

static bool is_op(const struct ct_token *t, const char *op)
{
    return t->type == TK_OP && t->len == strlen(op) && memcmp(t->s, op, t->len) == 0;
}

static bool is_name(const struct ct_token *t, const char *name)
{
    return t->type == TK_NAME && t->len == strlen(name) && memcmp(t->s, name, t->len) == 0;
}

static bool skip_op(struct parser *p, const char *op)
{
    if (!is_op(cur(p), op))
        return false;
    p->pos++;
    return true;
}

static bool skip_name(struct parser *p, const char *name)
{
    if (!is_name(cur(p), name))
        return false;
    p->pos++;
    return true;
}

static void expect_op(struct parser *p, const char *op)
{
    if (!skip_op(p, op)) {
        char what[16];
        snprintf(what, sizeof(what), "'%s'", op);
        unexpected(p, what);
    }
}

static void expect_type(struct parser *p, int type, const char *what)
{
    if (cur(p)->type != type)
        unexpected(p, what);
    p->pos++;
}

static struct ct_node *node(struct parser *p, int kind, const struct ct_token *at)
{
    struct ct_node *n = ct_alloc(p->a, sizeof(*n));
    memset(n, 0, sizeof(*n));
    n->kind = (uint8_t)kind;
    n->line = at->line;
    n->col = at->col;
    return n;
}

/* A growable list of child nodes. */
struct nodes {
    struct ct_node **v;
    size_t n, cap;
};

static void push(struct parser *p, struct nodes *l, struct ct_node *x)
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

static void enter(struct parser *p)
{
    if (++p->nesting > MAX_NESTING)
        parse_fail_at(p, cur(p), "%.*s", "nested too deeply", 17);
}

static struct ct_node *parse_expression(struct parser *p, bool with_condexpr);
static struct ct_node *parse_unary(struct parser *p, bool with_filter);
static struct ct_node *parse_primary(struct parser *p);
static struct ct_node *parse_postfix(struct parser *p, struct ct_node *n);

/* Where a bare tuple ends: the end of the tag or a closing parenthesis. */
static bool tuple_end(struct parser *p, const char *extra_end)
{
    const struct ct_token *t = cur(p);
    if (t->type == TK_VAR_END || t->type == TK_BLOCK_END || t->type == TK_EOF || is_op(t, ")"))
        return true;
    return extra_end && is_name(t, extra_end);
}

static struct ct_node *parse_tuple(struct parser *p, bool with_condexpr, const char *extra_end,
                                   bool explicit_parens)
{
    const struct ct_token *start = cur(p);
    struct nodes items = {0};
    bool is_tuple = false;
    for (;;) {
        if (items.n)
            expect_op(p, ",");
        if (tuple_end(p, extra_end))
            break;
        push(p, &items, parse_expression(p, with_condexpr));
        if (is_op(cur(p), ","))
            is_tuple = true;
        else
            break;
    }
    if (!is_tuple) {
        if (items.n)
            return items.v[0];
        if (!explicit_parens)
            unexpected(p, "an expression");
    }
    struct ct_node *t = node(p, N_TUPLE, start);
    t->list = items.v;
    t->n = items.n;
    return t;
}

static void parse_call_args(struct parser *p, struct ct_node *call)
{
    struct nodes args = {0};
    expect_op(p, "(");
    while (!is_op(cur(p), ")")) {
        if (args.n)
            expect_op(p, ",");
        if (is_op(cur(p), ")"))
            break;
        if (cur(p)->type == TK_NAME && is_op(peek(p, 1), "=")) {
            struct ct_node *kw = node(p, N_KWARG, cur(p));
            kw->name = cur(p)->s;
            kw->name_len = cur(p)->len;
            p->pos += 2;
            kw->a = parse_expression(p, true);
            push(p, &args, kw);
        } else {
            if (args.n && args.v[args.n - 1]->kind == N_KWARG)
                parse_fail_at(p, cur(p), "%.*s", "positional argument follows keyword argument",
                              44);
            push(p, &args, parse_expression(p, true));
        }
    }
    expect_op(p, ")");
    call->list = args.v;
    call->n = args.n;
}

/* A filter or test name, which jinja2 lets be dotted ("a.b"); returns
 * its length in the source from the first token's start. */
static size_t dotted_name(struct parser *p, const char *what)
{
    const struct ct_token *first = cur(p);
    expect_type(p, TK_NAME, what);
    const struct ct_token *last = first;
    while (is_op(cur(p), ".")) {
        p->pos++;
        last = cur(p);
        expect_type(p, TK_NAME, what);
    }
    return (size_t)(last->s - first->s) + last->len;
}

static struct ct_node *parse_filter(struct parser *p, struct ct_node *operand)
{
    const struct ct_token *at = cur(p);
    expect_op(p, "|");
    const struct ct_token *name = cur(p);
    size_t name_len = dotted_name(p, "a filter name");
    int id = ct_filter_id(name->s, name_len); /* -1: checked by check_names */
    struct ct_node *f = node(p, N_FILTER, at);
    f->op = id;
    f->name = name->s;
    f->name_len = name_len;
    f->a = operand;
    if (is_op(cur(p), "("))
        parse_call_args(p, f);
    return f;
}

static struct ct_node *parse_test(struct parser *p, struct ct_node *operand)
{
    const struct ct_token *at = cur(p);
    p->pos++; /* "is" */
    bool negated = skip_name(p, "not");
    const struct ct_token *name = cur(p);
    size_t name_len = dotted_name(p, "a test name");
    int id = ct_test_id(name->s, name_len); /* -1: checked by check_names */
    struct ct_node *t = node(p, N_TEST, at);
    t->op = id;
    t->flag = negated;
    t->name = name->s;
    t->name_len = name_len;
    t->a = operand;
    const struct ct_token *c = cur(p);
    if (is_op(c, "(")) {
        parse_call_args(p, t);
    } else if ((c->type == TK_NAME || c->type == TK_STRING || c->type == TK_INT ||
                c->type == TK_FLOAT || is_op(c, "[") || is_op(c, "{")) &&
               !is_name(c, "else") && !is_name(c, "or") && !is_name(c, "and")) {
        /* "x is divisibleby 3", "x is sameas false": one argument, no parentheses. */
        if (is_name(c, "is"))
            unexpected(p, "a test argument");
        struct ct_node *arg = parse_postfix(p, parse_primary(p));
        t->list = ct_alloc(p->a, sizeof(*t->list));
        t->list[0] = arg;
        t->n = 1;
    }
    return t;
}

/* x[a], x[a:b:c], and as in jinja2 x[a, b] and x[] (a tuple key). */
static struct ct_node *parse_subscript(struct parser *p, struct ct_node *obj,
                                       const struct ct_token *at)
{
    struct ct_node *parts[3] = {NULL, NULL, NULL};
    bool slice = false;
    if (is_op(cur(p), "]") || !is_op(cur(p), ":")) {
        struct nodes keys = {0};
        while (!is_op(cur(p), "]")) {
            if (keys.n)
                expect_op(p, ",");
            push(p, &keys, parse_expression(p, true));
            if (keys.n == 1 && is_op(cur(p), ":"))
                break;
        }
        if (!is_op(cur(p), ":") || keys.n != 1) {
            expect_op(p, "]");
            struct ct_node *g = node(p, N_GETITEM, at);
            g->a = obj;
            if (keys.n == 1) {
                g->b = keys.v[0];
            } else {
                g->b = node(p, N_TUPLE, at);
                g->b->list = keys.v;
                g->b->n = keys.n;
            }
            return g;
        }
        parts[0] = keys.v[0];
    }
    slice = true;
    expect_op(p, ":");
    if (!is_op(cur(p), "]") && !is_op(cur(p), ":"))
        parts[1] = parse_expression(p, true);
    if (skip_op(p, ":")) {
        if (!is_op(cur(p), "]"))
            parts[2] = parse_expression(p, true);
    }
    expect_op(p, "]");
    struct ct_node *s = node(p, N_SLICE, at);
    (void)slice;
    s->a = obj;
    s->b = parts[0];
    s->c = parts[1];
    s->d = parts[2];
    return s;
}

static struct ct_node *parse_postfix(struct parser *p, struct ct_node *n)
{
    for (;;) {
        const struct ct_token *at = cur(p);
        if (skip_op(p, ".")) {
            const struct ct_token *t = cur(p);
            if (t->type == TK_NAME) {
                struct ct_node *g = node(p, N_GETATTR, at);
                g->a = n;
                g->name = t->s;
                g->name_len = t->len;
                p->pos++;
                n = g;
            } else if (t->type == TK_INT) {
                struct ct_node *g = node(p, N_GETITEM, at);
                g->a = n;
                g->b = node(p, N_CONST, t);
                g->b->value = ct_int(t->i);
                p->pos++;
                n = g;
            } else {
                unexpected(p, "an attribute name");
            }
        } else if (skip_op(p, "[")) {
            n = parse_subscript(p, n, at);
        } else if (is_op(at, "(")) {
            struct ct_node *c = node(p, N_CALL, at);
            c->a = n;
            parse_call_args(p, c);
            n = c;
        } else {
            return n;
        }
    }
}

static struct ct_node *parse_primary(struct parser *p)
{
    const struct ct_token *t = cur(p);
    enter(p);
    struct ct_node *n;
    if (t->type == TK_NAME) {
        p->pos++;
        n = node(p, N_CONST, t);
        if (is_name(t, "true") || is_name(t, "True")) {
            n->value = ct_bool(true);
        } else if (is_name(t, "false") || is_name(t, "False")) {
            n->value = ct_bool(false);
        } else if (is_name(t, "none") || is_name(t, "None")) {
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
        while (cur(p)->type == TK_STRING) {
            memcpy(s + len, cur(p)->s, cur(p)->len);
            len += cur(p)->len;
            p->pos++;
        }
        n = node(p, N_CONST, t);
        n->value = ct_str(s, len);
    } else if (t->type == TK_INT || t->type == TK_FLOAT) {
        p->pos++;
        n = node(p, N_CONST, t);
        n->value = t->type == TK_INT ? ct_int(t->i) : ct_float(t->f);
    } else if (skip_op(p, "(")) {
        n = parse_tuple(p, true, NULL, true);
        expect_op(p, ")");
    } else if (skip_op(p, "[")) {
        struct nodes items = {0};
        while (!is_op(cur(p), "]")) {
            if (items.n)
                expect_op(p, ",");
            if (is_op(cur(p), "]"))
                break;
            push(p, &items, parse_expression(p, true));
        }
        expect_op(p, "]");
        n = node(p, N_LIST, t);
        n->list = items.v;
        n->n = items.n;
    } else if (skip_op(p, "{")) {
        struct nodes items = {0};
        while (!is_op(cur(p), "}")) {
            if (items.n)
                expect_op(p, ",");
            if (is_op(cur(p), "}"))
                break;
            struct ct_node *pair = node(p, N_PAIR, cur(p));
            pair->a = parse_expression(p, true);
            expect_op(p, ":");
            pair->b = parse_expression(p, true);
            push(p, &items, pair);
        }
        expect_op(p, "}");
        n = node(p, N_DICT, t);
        n->list = items.v;
        n->n = items.n;
    } else {
        unexpected(p, "an expression");
    }
    p->nesting--;
    return n;
}

static struct ct_node *parse_unary(struct parser *p, bool with_filter)
{
    const struct ct_token *t = cur(p);
    struct ct_node *n;
    enter(p);
    if (skip_op(p, "-")) {
        n = node(p, N_NEG, t);
        n->a = parse_unary(p, false);
    } else if (skip_op(p, "+")) {
        n = node(p, N_POS, t);
        n->a = parse_unary(p, false);
    } else {
        n = parse_primary(p);
    }
    n = parse_postfix(p, n);
    if (with_filter) {
        for (;;) {
            if (is_op(cur(p), "|")) {
                n = parse_filter(p, n);
            } else if (is_name(cur(p), "is")) {
                n = parse_test(p, n);
            } else if (is_op(cur(p), "(")) {
                struct ct_node *c = node(p, N_CALL, cur(p));
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

static struct ct_node *binop(struct parser *p, const struct ct_token *at, int op, struct ct_node *l,
                             struct ct_node *r)
{
    struct ct_node *n = node(p, N_BINOP, at);
    n->op = op;
    n->a = l;
    n->b = r;
    return n;
}

static struct ct_node *parse_pow(struct parser *p)
{
    struct ct_node *n = parse_unary(p, true);
    while (is_op(cur(p), "**")) {
        const struct ct_token *at = cur(p);
        p->pos++;
        n = binop(p, at, OP_POW, n, parse_unary(p, true));
    }
    return n;
}

static struct ct_node *parse_math2(struct parser *p)
{
    struct ct_node *n = parse_pow(p);
    for (;;) {
        const struct ct_token *at = cur(p);
        int op = is_op(at, "*")    ? OP_MUL
                 : is_op(at, "/")  ? OP_DIV
                 : is_op(at, "//") ? OP_FLOORDIV
                 : is_op(at, "%")  ? OP_MOD
                                   : -1;
        if (op < 0)
            return n;
        p->pos++;
        n = binop(p, at, op, n, parse_pow(p));
    }
}

static struct ct_node *parse_concat(struct parser *p)
{
    struct ct_node *n = parse_math2(p);
    while (is_op(cur(p), "~")) {
        const struct ct_token *at = cur(p);
        p->pos++;
        n = binop(p, at, OP_CONCAT, n, parse_math2(p));
    }
    return n;
}

static struct ct_node *parse_math1(struct parser *p)
{
    struct ct_node *n = parse_concat(p);
    for (;;) {
        const struct ct_token *at = cur(p);
        int op = is_op(at, "+") ? OP_ADD : is_op(at, "-") ? OP_SUB : -1;
        if (op < 0)
            return n;
        p->pos++;
        n = binop(p, at, op, n, parse_concat(p));
    }
}

static struct ct_node *parse_compare(struct parser *p)
{
    const struct ct_token *start = cur(p);
    struct ct_node *first = parse_math1(p);
    struct nodes ops = {0};
    for (;;) {
        const struct ct_token *at = cur(p);
        int op = is_op(at, "==")   ? OP_EQ
                 : is_op(at, "!=") ? OP_NE
                 : is_op(at, "<")  ? OP_LT
                 : is_op(at, "<=") ? OP_LE
                 : is_op(at, ">")  ? OP_GT
                 : is_op(at, ">=") ? OP_GE
                                   : -1;
        if (op >= 0) {
            p->pos++;
        } else if (is_name(at, "in")) {
            op = OP_IN;
            p->pos++;
        } else if (is_name(at, "not") && is_name(peek(p, 1), "in")) {
            op = OP_NOTIN;
            p->pos += 2;
        } else {
            break;
        }
        struct ct_node *o = node(p, N_OPERAND, at);
        o->op = op;
        o->a = parse_math1(p);
        push(p, &ops, o);
    }
    if (!ops.n)
        return first;
    struct ct_node *c = node(p, N_COMPARE, start);
    c->a = first;
    c->list = ops.v;
    c->n = ops.n;
    return c;
}

static struct ct_node *parse_not(struct parser *p)
{
    const struct ct_token *at = cur(p);
    if (is_name(at, "not")) {
        p->pos++;
        enter(p);
        struct ct_node *n = node(p, N_NOT, at);
        n->a = parse_not(p);
        p->nesting--;
        return n;
    }
    return parse_compare(p);
}

static struct ct_node *parse_and(struct parser *p)
{
    struct ct_node *n = parse_not(p);
    while (is_name(cur(p), "and")) {
        struct ct_node *x = node(p, N_AND, cur(p));
        p->pos++;
        x->a = n;
        x->b = parse_not(p);
        n = x;
    }
    return n;
}

static struct ct_node *parse_or(struct parser *p)
{
    struct ct_node *n = parse_and(p);
    while (is_name(cur(p), "or")) {
        struct ct_node *x = node(p, N_OR, cur(p));
        p->pos++;
        x->a = n;
        x->b = parse_and(p);
        n = x;
    }
    return n;
}

static struct ct_node *parse_condexpr(struct parser *p)
{
    enter(p);
    struct ct_node *n = parse_or(p);
    while (is_name(cur(p), "if")) {
        struct ct_node *c = node(p, N_CONDEXPR, cur(p));
        p->pos++;
        c->a = n;
        c->b = parse_or(p);
        if (skip_name(p, "else"))
            c->c = parse_condexpr(p);
        n = c;
    }
    p->nesting--;
    return n;
}

static struct ct_node *parse_expression(struct parser *p, bool with_condexpr)
{
    return with_condexpr ? parse_condexpr(p) : parse_or(p);
}

/* ---- statements ---- */

static struct ct_node *parse_body(struct parser *p, const char *const *end_tags);

static void expect_block_end(struct parser *p)
{
    expect_type(p, TK_BLOCK_END, "'%}'");
}

/* The end of a tag that opens a body; jinja2 allows a colon before it
 * ("{% if x: %}"), for Python's sake. */
static void expect_body_start(struct parser *p)
{
    skip_op(p, ":");
    expect_block_end(p);
}

/* After parse_body stopped at an end tag: the tag's name. */
static const struct ct_token *end_tag(struct parser *p)
{
    const struct ct_token *t = cur(p);
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

static struct ct_node *parse_if(struct parser *p, const struct ct_token *at)
{
    struct ct_node *n = node(p, N_IF, at);
    n->a = parse_tuple(p, false, NULL, false);
    expect_body_start(p);
    n->b = parse_body(p, if_ends);
    const struct ct_token *t = end_tag(p);
    if (is_name(t, "elif")) {
        n->c = parse_if(p, t);
        return n;
    }
    if (is_name(t, "else")) {
        expect_body_start(p);
        n->c = parse_body(p, endif_end);
        end_tag(p);
    }
    expect_block_end(p);
    return n;
}

/* A name, a namespace attribute (with_namespace) or a tuple of names. */
static struct ct_node *parse_target(struct parser *p, bool with_namespace)
{
    const struct ct_token *start = cur(p);
    struct nodes names = {0};
    for (;;) {
        const struct ct_token *t = cur(p);
        expect_type(p, TK_NAME, "a variable name");
        struct ct_node *n = node(p, N_NAME, t);
        n->name = t->s;
        n->name_len = t->len;
        if (with_namespace && !names.n && is_op(cur(p), ".")) {
            p->pos++;
            const struct ct_token *attr = cur(p);
            expect_type(p, TK_NAME, "an attribute name");
            struct ct_node *g = node(p, N_GETATTR, attr);
            g->a = n;
            g->name = attr->s;
            g->name_len = attr->len;
            return g;
        }
        push(p, &names, n);
        if (!skip_op(p, ","))
            break;
        if (cur(p)->type != TK_NAME)
            break;
    }
    if (names.n == 1)
        return names.v[0];
    struct ct_node *tuple = node(p, N_TUPLE, start);
    tuple->list = names.v;
    tuple->n = names.n;
    return tuple;
}

static struct ct_node *parse_for(struct parser *p, const struct ct_token *at)
{
    struct ct_node *n = node(p, N_FOR, at);
    n->a = parse_target(p, false);
    if (!skip_name(p, "in"))
        unexpected(p, "'in'");
    n->b = parse_tuple(p, false, "recursive", false);
    if (skip_name(p, "if"))
        n->c = parse_expression(p, true);
    if (is_name(cur(p), "recursive"))
        parse_fail_at(p, cur(p), "%.*s", "recursive loops are not supported", 33);
    expect_body_start(p);
    n->d = parse_body(p, for_ends);
    if (is_name(end_tag(p), "else")) {
        expect_body_start(p);
        n->e = parse_body(p, endfor_end);
        end_tag(p);
    }
    expect_block_end(p);
    return n;
}

static struct ct_node *parse_set(struct parser *p, const struct ct_token *at)
{
    struct ct_node *target = parse_target(p, true);
    if (skip_op(p, "=")) {
        struct ct_node *n = node(p, N_SET, at);
        n->a = target;
        n->b = parse_tuple(p, true, NULL, false);
        expect_block_end(p);
        return n;
    }
    if (target->kind != N_NAME)
        unexpected(p, "'='");
    struct ct_node *n = node(p, N_SET_BLOCK, at);
    n->a = target;
    expect_body_start(p);
    n->d = parse_body(p, endset_end);
    end_tag(p);
    expect_block_end(p);
    return n;
}

static struct ct_node *parse_macro(struct parser *p, const struct ct_token *at)
{
    struct ct_node *n = node(p, N_MACRO, at);
    const struct ct_token *name = cur(p);
    expect_type(p, TK_NAME, "a macro name");
    n->name = name->s;
    n->name_len = name->len;
    struct nodes params = {0};
    expect_op(p, "(");
    while (!is_op(cur(p), ")")) {
        if (params.n)
            expect_op(p, ",");
        const struct ct_token *t = cur(p);
        expect_type(p, TK_NAME, "a parameter name");
        struct ct_node *param = node(p, N_NAME, t);
        param->name = t->s;
        param->name_len = t->len;
        if (skip_op(p, "="))
            param->a = parse_expression(p, true);
        else if (params.n && params.v[params.n - 1]->a)
            parse_fail_at(p, t, "%.*s", "non-default argument follows default argument", 45);
        push(p, &params, param);
    }
    expect_op(p, ")");
    n->list = params.v;
    n->n = params.n;
    expect_body_start(p);
    n->d = parse_body(p, endmacro_end);
    end_tag(p);
    if (cur(p)->type == TK_NAME)
        p->pos++; /* {% endmacro name %} */
    expect_block_end(p);
    return n;
}

static struct ct_node *parse_statement(struct parser *p)
{
    const struct ct_token *t = cur(p);
    if (t->type != TK_NAME)
        unexpected(p, "a tag name");
    p->pos++;
    if (is_name(t, "if"))
        return parse_if(p, t);
    if (is_name(t, "for"))
        return parse_for(p, t);
    if (is_name(t, "set"))
        return parse_set(p, t);
    if (is_name(t, "macro"))
        return parse_macro(p, t);
    if (is_name(t, "break") || is_name(t, "continue")) {
        struct ct_node *n = node(p, is_name(t, "break") ? N_BREAK : N_CONTINUE, t);
        expect_block_end(p);
        return n;
    }
    if (is_name(t, "generation")) {
        /* transformers' {% generation %} marks assistant text for masks;
         * for rendering it is its body. */
        expect_block_end(p);
        struct ct_node *body = parse_body(p, endgeneration_end);
        end_tag(p);
        expect_block_end(p);
        return body;
    }
    parse_fail_at(p, t, "unknown or unexpected tag '%.*s'", t->s, t->len);
}

static bool in_list(const struct ct_token *t, const char *const *names)
{
    for (; names && *names; names++)
        if (is_name(t, *names))
            return true;
    return false;
}

/* Statements until one of end_tags (left at the tag's name) or the end. */
static struct ct_node *parse_body(struct parser *p, const char *const *end_tags)
{
    struct ct_node *body = node(p, N_BODY, cur(p));
    struct nodes items = {0};
    enter(p);
    for (;;) {
        const struct ct_token *t = cur(p);
        if (t->type == TK_EOF) {
            if (end_tags) {
                char msg[160];
                snprintf(msg, sizeof(msg), "unexpected end of template, looking for '%s'",
                         end_tags[0]);
                parse_fail_at(p, t, "%.*s", msg, strlen(msg));
            }
            break;
        }
        if (t->type == TK_TEXT) {
            struct ct_node *n = node(p, N_TEXT, t);
            n->name = t->s;
            n->name_len = t->len;
            push(p, &items, n);
            p->pos++;
        } else if (t->type == TK_VAR_BEGIN) {
            p->pos++;
            struct ct_node *n = node(p, N_OUTPUT, t);
            n->a = parse_tuple(p, true, NULL, false);
            expect_type(p, TK_VAR_END, "'}}'");
            push(p, &items, n);
        } else if (t->type == TK_BLOCK_BEGIN) {
            p->pos++;
            if (in_list(cur(p), end_tags))
                break;
            push(p, &items, parse_statement(p));
        } else {
            unexpected(p, "text or a tag");
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
static void check_names(struct parser *p, const struct ct_node *n, bool soft, int depth)
{
    if (!n)
        return;
    if (depth > MAX_TREE_DEPTH) {
        struct ct_token at = {.line = n->line, .col = n->col};
        parse_fail_at(p, &at, "%.*s", "expression nested too deeply", 28);
    }
    if ((n->kind == N_FILTER || n->kind == N_TEST) && n->op < 0 && !soft) {
        struct ct_token at = {.line = n->line, .col = n->col};
        parse_fail_at(p, &at,
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
    struct parser p = {.a = a, .t = toks->v, .n = toks->n};
    struct ct_node *body = parse_body(&p, NULL);
    check_names(&p, body, false, 0);
    return body;
}
