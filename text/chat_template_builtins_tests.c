/* The chat-template interpreter's tests: jinja2's built-in tests
 * (jinja2/tests.py) for `is` and select/reject. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_template_internal.h"

bool ct_apply_test(struct ct_render *r, const struct ct_node *at, int id, const struct ct_value *v,
                   const struct ct_args *args)
{
    const struct ct_value *other = ct_arg(args, 0, "other");
    switch ((enum test_id)id) {
    case T_BOOLEAN:
        return v->type == CT_BOOL;
    case T_CALLABLE:
        return v->type == CT_FUNC || v->type == CT_METHOD || v->type == CT_MACRO;
    case T_DEFINED:
        return v->type != CT_UNDEF;
    case T_UNDEFINED:
        return v->type == CT_UNDEF;
    case T_DIVISIBLEBY: {
        const struct ct_value *num = ct_arg(args, 0, "num");
        if (!num || (num->type != CT_INT && num->type != CT_BOOL) ||
            (v->type != CT_INT && v->type != CT_BOOL))
            ct_error(r, at, "divisibleby needs integers");
        int64_t d = num->type == CT_INT ? num->u.i : num->u.b;
        int64_t x = v->type == CT_INT ? v->u.i : v->u.b;
        if (d == 0)
            ct_error(r, at, "integer division or modulo by zero");
        return d == -1 || x % d == 0;
    }
    case T_EVEN:
    case T_ODD: {
        if (v->type != CT_INT && v->type != CT_BOOL)
            ct_error(r, at, "odd/even need an integer");
        int64_t x = v->type == CT_INT ? v->u.i : v->u.b;
        return ((x % 2) != 0) == (id == T_ODD);
    }
    case T_FALSE:
        return v->type == CT_BOOL && !v->u.b;
    case T_TRUE:
        return v->type == CT_BOOL && v->u.b;
    case T_FLOAT:
        return v->type == CT_FLOAT;
    case T_INTEGER:
        return v->type == CT_INT;
    case T_NUMBER:
        return v->type == CT_INT || v->type == CT_FLOAT || v->type == CT_BOOL;
    case T_STRING:
        return v->type == CT_STR;
    case T_MAPPING:
        return v->type == CT_DICT;
    case T_NONE:
        return v->type == CT_NONE;
    case T_ITERABLE:
    case T_SEQUENCE:
        return v->type == CT_STR || v->type == CT_LIST || v->type == CT_DICT || v->type == CT_UNDEF;
    case T_LOWER:
    case T_UPPER: {
        if (v->type != CT_STR)
            return false;
        bool cased = false;
        for (size_t i = 0; i < v->len;) {
            uint32_t cp = ct_utf8_next(v->u.s, v->len, &i);
            if (ct_to_upper(cp) != cp || ct_to_lower(cp) != cp) {
                cased = true;
                if (id == T_LOWER ? ct_to_lower(cp) != cp : ct_to_upper(cp) != cp)
                    return false;
            }
        }
        return cased;
    }
    case T_SAMEAS:
        if (!other)
            ct_error(r, at, "sameas needs an argument");
        if (v->type != other->type)
            return false;
        if (v->type == CT_NONE || v->type == CT_UNDEF)
            return true;
        if (v->type == CT_BOOL)
            return v->u.b == other->u.b;
        if (v->type == CT_INT && v->u.i >= -5 && v->u.i <= 256)
            return v->u.i == other->u.i; /* CPython's small-int cache */
        if (v->type == CT_LIST || v->type == CT_DICT || v->type == CT_NS)
            return v->u.list == other->u.list;
        return false;
    case T_IN: {
        const struct ct_value *seq = ct_arg(args, 0, "seq");
        if (!seq)
            ct_error(r, at, "in needs a container");
        if (seq->type == CT_STR) {
            if (v->type != CT_STR)
                ct_error(r, at, "'in <string>' requires string as left operand");
            return ct_find_sub(seq->u.s, seq->len, v->u.s, v->len) != NULL;
        }
        struct ct_value items = ct_iterate(r, at, seq);
        for (size_t i = 0; i < items.u.list->len; i++)
            if (ct_equal(&items.u.list->items[i], v))
                return true;
        return false;
    }
    case T_EQ:
    case T_NE:
    case T_LT:
    case T_LE:
    case T_GT:
    case T_GE: {
        if (!other)
            ct_error(r, at, "comparison test needs an argument");
        if (id == T_EQ)
            return ct_equal(v, other);
        if (id == T_NE)
            return !ct_equal(v, other);
        int c = ct_compare(r, at, v, other);
        return id == T_LT ? c < 0 : id == T_LE ? c <= 0 : id == T_GT ? c > 0 : c >= 0;
    }
    }
    ct_error(r, at, "internal error: unknown test");
}
