/* Internals of the chat-template interpreter, shared by its parts:
 * chat_template_value.c             arena, values, buffers and UTF-8 helpers
 * chat_template_print.c             Python str()/repr() and JSON both ways
 * chat_template_lex.c               template source to tokens (whitespace control)
 * chat_template_parse.c             tokens to a syntax tree: parser helpers, statements
 * chat_template_parse_expr.c        the parser's expressions
 * chat_template_eval.c              scopes, statements, the public compile and render
 * chat_template_eval_expr.c         access, calls and the expression walker
 * chat_template_eval_ops.c          arithmetic and comparison operators
 * chat_template_builtins.c          builtin names, argument helpers, globals
 * chat_template_builtins_str.c      string helpers; str/dict/list/loop methods
 * chat_template_builtins_filters.c  filters
 * chat_template_builtins_tests.c    tests
 *
 * Errors unwind with longjmp to the compile or render entry point: every
 * allocation of a compile or a render lives in one arena that is dropped
 * whole, so an error deep in an expression needs no cleanup on the way out
 * and no caller has to check a return value. */
#ifndef FOLIO_CHAT_TEMPLATE_INTERNAL_H
#define FOLIO_CHAT_TEMPLATE_INTERNAL_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "chat_template.h"

/* ---- arena ---- */

struct ct_chunk;
struct ct_arena {
    struct ct_chunk *head;
    size_t total;  /* bytes taken from malloc */
    size_t limit;  /* 0: none */
    jmp_buf *fail; /* where to go when the limit is passed or malloc fails */
    char *err;
    size_t errlen;
};

void *ct_alloc(struct ct_arena *a, size_t n);
char *ct_strdup(struct ct_arena *a, const char *s, size_t n);
void ct_arena_free(struct ct_arena *a);
/* Formats the error message into a->err and unwinds. */
_Noreturn void ct_fail(struct ct_arena *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- values ---- */

enum ct_type {
    CT_UNDEF,
    CT_NONE,
    CT_BOOL,
    CT_INT,
    CT_FLOAT,
    CT_STR,
    CT_LIST,   /* also tuples (flag CT_F_TUPLE), printed with parentheses */
    CT_DICT,   /* insertion-ordered, as Python's dict */
    CT_NS,     /* namespace(): a dict whose attributes `set` may assign */
    CT_FUNC,   /* a global function: raise_exception, namespace, range, ... */
    CT_METHOD, /* a bound method such as 'abc'.strip */
    CT_MACRO,
    CT_LOOP,
};

#define CT_F_TUPLE 1

struct ct_value;
struct ct_list {
    struct ct_value *items;
    size_t len, cap;
};
struct ct_dict {
    struct ct_value *keys;
    struct ct_value *vals;
    size_t len, cap;
};
struct ct_method {
    const struct ct_value *self;
    int id;
};
struct ct_node;
/* The state behind a for loop's `loop` variable. */
struct ct_loop {
    const struct ct_value *items;
    size_t len, index0;
};

struct ct_value {
    uint8_t type;
    uint8_t flags;
    uint32_t len; /* string length: render memory is capped below 4 GiB */
    union {
        bool b;
        int64_t i;
        double f;
        const char *s; /* CT_STR bytes (UTF-8, not NUL-terminated) or CT_UNDEF's name */
        struct ct_list *list;
        struct ct_dict *dict;
        struct ct_method *method;
        const struct ct_node *macro;
        struct ct_loop *loop;
        int func;
    } u;
};

/* Undefined values remember what was looked up, for the error message:
 * flags 0: "'name' is undefined"; otherwise the owner's type ("'dict object'
 * has no attribute 'name'"). */
struct ct_value ct_undef(const char *name, size_t len, uint8_t owner_type);
struct ct_value ct_none(void);
struct ct_value ct_bool(bool b);
struct ct_value ct_int(int64_t i);
struct ct_value ct_float(double f);
struct ct_value ct_str(const char *s, size_t len);
struct ct_value ct_str_copy(struct ct_arena *a, const char *s, size_t len);
struct ct_value ct_list_new(struct ct_arena *a, size_t cap);
struct ct_value ct_dict_new(struct ct_arena *a, size_t cap);
void ct_list_push(struct ct_arena *a, struct ct_value *list, struct ct_value v);
/* Sets key (replacing an equal key) in a dict or namespace. */
void ct_dict_set(struct ct_arena *a, struct ct_value *dict, struct ct_value key, struct ct_value v);
/* NULL when absent. */
struct ct_value *ct_dict_get(const struct ct_value *dict, const char *key, size_t len);
struct ct_value *ct_dict_find(const struct ct_value *dict, const struct ct_value *key);

const char *ct_type_name(uint8_t type);
bool ct_truthy(const struct ct_value *v);
bool ct_equal(const struct ct_value *a, const struct ct_value *b);

/* A growable byte buffer in the arena, capped at limit bytes. */
struct ct_buf {
    char *data;
    size_t len, cap, limit;
};
void ct_buf_put(struct ct_arena *a, struct ct_buf *b, const char *s, size_t n);
void ct_buf_putc(struct ct_arena *a, struct ct_buf *b, char c);

/* Python's str(v) (undefined prints nothing) and repr(v). */
void ct_put_str(struct ct_arena *a, struct ct_buf *b, const struct ct_value *v);
struct ct_value ct_to_str(struct ct_arena *a, const struct ct_value *v);
/* json.dumps(v, ensure_ascii, indent, separators, sort_keys) as
 * transformers' tojson filter calls it. indent NULL: one line. */
void ct_put_json(struct ct_arena *a, struct ct_buf *b, const struct ct_value *v, const char *indent,
                 size_t indent_len, const char *item_sep, const char *key_sep, bool sort_keys,
                 bool ensure_ascii, int depth);
/* JSON (jansson) to a value; depth guards against hostile nesting. */
struct ct_value ct_from_json(struct ct_arena *a, const json_t *j, int depth);

/* ---- UTF-8 and Python string helpers ---- */

/* Decodes one code point at s[*i] (an invalid byte is taken as itself). */
uint32_t ct_utf8_next(const char *s, size_t len, size_t *i);
size_t ct_utf8_put(char *out, uint32_t cp);
size_t ct_utf8_count(const char *s, size_t len);
bool ct_py_isspace(uint32_t cp);

/* ---- tokens ---- */

enum ct_tok {
    TK_EOF,
    TK_TEXT,
    TK_VAR_BEGIN,
    TK_VAR_END,
    TK_BLOCK_BEGIN,
    TK_BLOCK_END,
    TK_NAME,
    TK_STRING,
    TK_INT,
    TK_FLOAT,
    TK_OP,
};

struct ct_token {
    uint8_t type;
    int line, col;
    const char *s; /* text, name, decoded string, operator */
    size_t len;
    int64_t i;
    double f;
};

struct ct_tokens {
    struct ct_token *v;
    size_t n, cap;
};

/* Tokenizes src with trim_blocks and lstrip_blocks on and the trailing
 * newline dropped (jinja2's keep_trailing_newline=False). */
void ct_lex(struct ct_arena *a, const char *src, struct ct_tokens *out);

/* ---- syntax tree ---- */

enum ct_kind {
    /* statements */
    N_BODY,      /* list: statements */
    N_TEXT,      /* name: the text */
    N_OUTPUT,    /* a: expression */
    N_IF,        /* a: condition, b: body, c: else (N_BODY or N_IF) or NULL */
    N_FOR,       /* a: target, b: iterable, c: filter or NULL, d: body, e: else body */
    N_SET,       /* a: target (N_NAME, N_GETATTR of a name, N_TUPLE), b: value */
    N_SET_BLOCK, /* a: target N_NAME, d: body */
    N_MACRO,     /* name; list: parameters (N_NAME with a: default or NULL); d: body */
    N_BREAK,
    N_CONTINUE,
    /* expressions */
    N_CONST,    /* value */
    N_NAME,     /* name */
    N_GETATTR,  /* a: object, name */
    N_GETITEM,  /* a: object, b: key */
    N_SLICE,    /* a: object, b: start, c: stop, d: step (each may be NULL) */
    N_CALL,     /* a: callee, list: arguments (N_KWARG for name=value) */
    N_KWARG,    /* name, a: value */
    N_FILTER,   /* op: filter id, name, a: operand, list: arguments */
    N_TEST,     /* op: test id, flag: negated, name, a: operand, list: arguments */
    N_BINOP,    /* op: operator, a, b */
    N_NOT,      /* a */
    N_NEG,      /* a */
    N_POS,      /* a */
    N_AND,      /* a, b */
    N_OR,       /* a, b */
    N_CONDEXPR, /* a: value, b: condition, c: else value or NULL */
    N_COMPARE,  /* a: first; list: N_OPERAND (op, a) */
    N_OPERAND,
    N_LIST,  /* list */
    N_TUPLE, /* list */
    N_DICT,  /* list: N_PAIR (a: key, b: value) */
    N_PAIR,
};

enum ct_op {
    OP_ADD,
    OP_SUB,
    OP_MUL,
    OP_DIV,
    OP_FLOORDIV,
    OP_MOD,
    OP_POW,
    OP_CONCAT,
    OP_EQ,
    OP_NE,
    OP_LT,
    OP_LE,
    OP_GT,
    OP_GE,
    OP_IN,
    OP_NOTIN,
};

struct ct_node {
    uint8_t kind;
    bool flag;
    int op;
    int line, col;
    struct ct_node *a, *b, *c, *d, *e;
    struct ct_node **list;
    size_t n;
    const char *name;
    size_t name_len;
    struct ct_value value;
};

/* Parses tokens into the body of a template; syntax errors unwind. */
struct ct_node *ct_parse(struct ct_arena *a, const struct ct_tokens *toks);

/* The parser's state and helpers, shared by chat_template_parse.c
 * (statements) and chat_template_parse_expr.c (expressions). */
struct ct_parser {
    struct ct_arena *a;
    const struct ct_token *t;
    size_t n, pos;
    int nesting;
};

/* A growable list of child nodes. */
struct ct_nodes {
    struct ct_node **v;
    size_t n, cap;
};

/* fmt takes one "%.*s" argument (arg, arglen). */
/* One level deeper; too deep is a syntax error. */
/* An expression; with_condexpr false stops below `a if b else c`. */
/* A tuple or a single expression, up to the end of the tag, a closing
 * parenthesis or the name extra_end. */

/* ---- builtins (filters, tests, methods, globals) ---- */

/* The ids of the filters, tests, global functions and methods (their names
 * are in chat_template_builtins.c's tables). */
enum filter_id {
    F_ABS,
    F_ATTR,
    F_CAPITALIZE,
    F_COUNT,
    F_DEFAULT,
    F_DICTSORT,
    F_ESCAPE,
    F_FIRST,
    F_FLOAT,
    F_INDENT,
    F_INT,
    F_ITEMS,
    F_JOIN,
    F_LAST,
    F_LENGTH,
    F_LIST,
    F_LOWER,
    F_MAP,
    F_MAX,
    F_MIN,
    F_REJECT,
    F_REJECTATTR,
    F_REPLACE,
    F_REVERSE,
    F_ROUND,
    F_SAFE,
    F_SELECT,
    F_SELECTATTR,
    F_SORT,
    F_STRING,
    F_SUM,
    F_TITLE,
    F_TOJSON,
    F_TRIM,
    F_UNIQUE,
    F_UPPER,
    F_WORDCOUNT,
};

enum test_id {
    T_BOOLEAN,
    T_CALLABLE,
    T_DEFINED,
    T_DIVISIBLEBY,
    T_EQ,
    T_EVEN,
    T_FALSE,
    T_FLOAT,
    T_GE,
    T_GT,
    T_IN,
    T_INTEGER,
    T_ITERABLE,
    T_LE,
    T_LOWER,
    T_LT,
    T_MAPPING,
    T_NE,
    T_NONE,
    T_NUMBER,
    T_ODD,
    T_SAMEAS,
    T_SEQUENCE,
    T_STRING,
    T_TRUE,
    T_UNDEFINED,
    T_UPPER,
};

enum global_id {
    G_DICT,
    G_NAMESPACE,
    G_RAISE_EXCEPTION,
    G_RANGE,
    G_STRFTIME_NOW,
};

enum method_id {
    /* str */
    M_STRIP,
    M_LSTRIP,
    M_RSTRIP,
    M_SPLIT,
    M_RSPLIT,
    M_STARTSWITH,
    M_ENDSWITH,
    M_UPPER,
    M_LOWER,
    M_TITLE,
    M_CAPITALIZE,
    M_REPLACE,
    M_FIND,
    M_COUNT,
    M_JOIN,
    M_SPLITLINES,
    M_ISDIGIT,
    M_ISSPACE,
    M_ISALPHA,
    M_ISALNUM,
    M_ISUPPER,
    M_ISLOWER,
    /* dict */
    M_GET,
    M_ITEMS,
    M_KEYS,
    M_VALUES,
    /* loop */
    M_CYCLE,
    /* list */
    M_INDEX,
    M_LIST_COUNT,
};

/* Lookups by name at parse time; -1 when unknown. */
int ct_filter_id(const char *name, size_t len);
int ct_test_id(const char *name, size_t len);
int ct_global_id(const char *name, size_t len);
/* The method id of attribute name on a value of this type; -1 when none. */
int ct_method_id(uint8_t type, const char *name, size_t len);

struct ct_render;
/* Arguments of a call, after evaluation. */
struct ct_args {
    struct ct_value *pos;
    size_t npos;
    const char **kw_names;
    size_t *kw_lens;
    struct ct_value *kw;
    size_t nkw;
};

/* Argument helpers of the builtins (chat_template_builtins.c). */
/* Argument pos (0-based, after the filter's operand) or keyword name. */
/* At most n arguments, else an error naming what. */
/* A string argument (NULL when absent or None); another type is an error. */
/* An integer (or bool) argument, dflt when absent or None; another type is
 * an error. */

/* String helpers shared by the filters and the str methods
 * (chat_template_builtins_str.c). */
enum ct_casing { CASE_UPPER, CASE_LOWER, CASE_CAPITALIZE, CASE_PY_TITLE };
/* Case mapping of ASCII and the Latin-1, Latin Extended-A, Greek and
 * Cyrillic letters whose case pairs are a fixed offset apart. */
/* The first occurrence of n (nl bytes) in h (hl bytes); NULL when none. */
/* str.strip/lstrip/rstrip: whitespace, or the characters of chars. */
/* jinja2's title filter: words begin after "-", whitespace, or an opening
 * bracket; each word's first character upper-cased, the rest lower-cased. */
/* str.replace(old, new, count); count < 0: all. */
/* str.split(sep, maxsplit); sep NULL: runs of whitespace. */
/* str.splitlines(): \n, \r, \r\n, \v, \f, \x1c-\x1e, \x85, U+2028, U+2029. */
/* sep.join(items): the str() of each item. */

struct ct_value ct_apply_filter(struct ct_render *r, const struct ct_node *at, int id,
                                struct ct_value v, const struct ct_args *args);
bool ct_apply_test(struct ct_render *r, const struct ct_node *at, int id, const struct ct_value *v,
                   const struct ct_args *args);
struct ct_value ct_call_method(struct ct_render *r, const struct ct_node *at,
                               const struct ct_method *m, const struct ct_args *args);
struct ct_value ct_call_global(struct ct_render *r, const struct ct_node *at, int id,
                               const struct ct_args *args);

/* ---- the render state, shared with the builtins ---- */

struct ct_render {
    struct ct_arena arena;
    jmp_buf jump;
    struct folio_chat_template_limits limits;
    uint64_t steps;
    int depth;
    struct ct_frame *globals;
    struct ct_frame *frame;
    struct ct_buf *out;
};

/* Scopes: the template's globals, then one frame per for-loop iteration and
 * per macro call; {% if %} opens none, as in jinja2. */
struct ct_var {
    const char *name;
    size_t len;
    struct ct_value v;
};
struct ct_frame {
    struct ct_frame *parent;
    struct ct_var *vars;
    size_t n, cap;
};

/* Sets name in frame f (replacing it when already there). */
/* A variable from the innermost frame outwards, else a global function,
 * else undefined. */
/* Evaluates an expression node (chat_template_eval_expr.c). */
/* Runs a body of statements; returns FLOW_NORMAL, FLOW_BREAK or FLOW_CONTINUE
 * (chat_template_eval.c). */
/* Binary arithmetic and comparison operators (chat_template_eval_ops.c). */
/* A number (int, bool) as int64_t. */

/* Raises a render error located at node at (may be NULL). */
_Noreturn void ct_error(struct ct_render *r, const struct ct_node *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Item and attribute access with jinja2's fallbacks (obj[key], then
 * getattr; undefined when both fail). */
struct ct_value ct_getitem(struct ct_render *r, const struct ct_node *at,
                           const struct ct_value *obj, const struct ct_value *key);
struct ct_value ct_getattr(struct ct_render *r, const struct ct_node *at,
                           const struct ct_value *obj, const char *name, size_t len);
/* Iteration: a list of the items of a list, tuple, dict (its keys), string
 * (its characters) or undefined (nothing); others are an error. */
struct ct_value ct_iterate(struct ct_render *r, const struct ct_node *at, const struct ct_value *v);
/* Python's comparison for sort and < (numbers, strings, lists). */
int ct_compare(struct ct_render *r, const struct ct_node *at, const struct ct_value *a,
               const struct ct_value *b);
/* Accounts for one unit of work and stops the render past the limit. */
void ct_step(struct ct_render *r, const struct ct_node *at);
/* Undefined values fail on use: attribute access, arithmetic, tojson. */

#endif
