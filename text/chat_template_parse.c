/* The chat-template parser: tokens to a syntax tree (this file: the parser's
 * helpers and the statements; chat_template_parse_expr.c: expressions), with jinja2's grammar
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

const struct ct_token *ct_parse_cur(struct ct_parser *p)
{
    return &p->t[p->pos];
}

const struct ct_token *ct_parse_peek(struct ct_parser *p, size_t k)
{
    return p->pos + k < p->n ? &p->t[p->pos + k] : &p->t[p->n - 1];
}

/* fmt takes one "%.*s" argument (arg, arglen). */
_Noreturn void ct_parse_fail_at(struct ct_parser *p, const struct ct_token *tok, const char *fmt,
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

_Noreturn void ct_parse_unexpected(struct ct_parser *p, const char *expected)
{
    size_t len;
    const char *what = describe(ct_parse_cur(p), &len);
    ct_fail(p->a, "chat template syntax error at line %d, column %d: expected %s, got '%.*s'",
            ct_parse_cur(p)->line, ct_parse_cur(p)->col, expected, (int)len, what);
}

bool ct_parse_is_op(const struct ct_token *t, const char *op)
{
    return t->type == TK_OP && t->len == strlen(op) && memcmp(t->s, op, t->len) == 0;
}

bool ct_parse_is_name(const struct ct_token *t, const char *name)
{
    return t->type == TK_NAME && t->len == strlen(name) && memcmp(t->s, name, t->len) == 0;
}

bool ct_parse_skip_op(struct ct_parser *p, const char *op)
{
    if (!ct_parse_is_op(ct_parse_cur(p), op))
        return false;
    p->pos++;
    return true;
}

bool ct_parse_skip_name(struct ct_parser *p, const char *name)
{
    if (!ct_parse_is_name(ct_parse_cur(p), name))
        return false;
    p->pos++;
    return true;
}

void ct_parse_expect_op(struct ct_parser *p, const char *op)
{
    if (!ct_parse_skip_op(p, op)) {
        char what[16];
        snprintf(what, sizeof(what), "'%s'", op);
        ct_parse_unexpected(p, what);
    }
}

void ct_parse_expect_type(struct ct_parser *p, int type, const char *what)
{
    if (ct_parse_cur(p)->type != type)
        ct_parse_unexpected(p, what);
    p->pos++;
}

struct ct_node *ct_parse_node(struct ct_parser *p, int kind, const struct ct_token *at)
{
    struct ct_node *n = ct_alloc(p->a, sizeof(*n));
    memset(n, 0, sizeof(*n));
    n->kind = (uint8_t)kind;
    n->line = at->line;
    n->col = at->col;
    return n;
}

void ct_parse_push(struct ct_parser *p, struct ct_nodes *l, struct ct_node *x)
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

void ct_parse_enter(struct ct_parser *p)
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
