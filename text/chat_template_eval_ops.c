/* The chat-template evaluator's operators: Python's arithmetic, comparison and
 * `in` on template values. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_template_internal.h"

/* ---- operators ---- */

static bool is_num(const struct ct_value *v)
{
    return v->type == CT_BOOL || v->type == CT_INT || v->type == CT_FLOAT;
}

static double num_f(const struct ct_value *v)
{
    return v->type == CT_FLOAT ? v->u.f : v->type == CT_INT ? (double)v->u.i : (double)v->u.b;
}

int64_t ct_num_i(const struct ct_value *v)
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

struct ct_value ct_arith(struct ct_render *r, const struct ct_node *n, int op,
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

bool ct_compare_op(struct ct_render *r, const struct ct_node *at, int op, const struct ct_value *a,
                   const struct ct_value *b)
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
