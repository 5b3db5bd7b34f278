/* The chat-template interpreter's string helpers (strip, case changes, replace,
 * split, join) and the methods of str, dict, list and loop values. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_template_internal.h"

/* ---- string helpers ---- */

static bool in_chars(uint32_t cp, const struct ct_value *chars)
{
    for (size_t i = 0; i < chars->len;)
        if (ct_utf8_next(chars->u.s, chars->len, &i) == cp)
            return true;
    return false;
}

/* str.strip/lstrip/rstrip: whitespace, or the characters of chars. */
struct ct_value ct_strip(struct ct_value s, const struct ct_value *chars, bool left, bool right)
{
    size_t b = 0, e = s.len;
    if (left) {
        while (b < e) {
            size_t i = b;
            uint32_t cp = ct_utf8_next(s.u.s, s.len, &i);
            if (chars ? !in_chars(cp, chars) : !ct_py_isspace(cp))
                break;
            b = i;
        }
    }
    if (right) {
        size_t keep = b;
        for (size_t i = b; i < e;) {
            uint32_t cp = ct_utf8_next(s.u.s, s.len, &i);
            if (chars ? !in_chars(cp, chars) : !ct_py_isspace(cp))
                keep = i;
        }
        e = keep;
    }
    return ct_str(s.u.s + b, e - b);
}

/* Case mapping of ASCII and the Latin-1, Latin Extended-A, Greek and
 * Cyrillic letters whose case pairs are a fixed offset apart (Python maps
 * the rest of Unicode too; chat templates rarely change the case of text). */
static bool latin_a_lower(uint32_t c)
{
    return (c >= 0x101 && c <= 0x137 && (c & 1) && c != 0x131) ||
           (c >= 0x13a && c <= 0x148 && !(c & 1)) || (c >= 0x14b && c <= 0x177 && (c & 1)) ||
           (c >= 0x17a && c <= 0x17e && !(c & 1));
}

uint32_t ct_to_upper(uint32_t c)
{
    if (c >= 'a' && c <= 'z')
        return c - 32;
    if (c < 0x80)
        return c;
    if (c >= 0xe0 && c <= 0xfe && c != 0xf7)
        return c - 32;
    if (c == 0xff)
        return 0x178;
    if (latin_a_lower(c))
        return c - 1;
    if (c == 0x3c2)
        return 0x3a3;
    if (c >= 0x3b1 && c <= 0x3c9)
        return c - 32;
    if (c >= 0x430 && c <= 0x44f)
        return c - 32;
    if (c >= 0x450 && c <= 0x45f)
        return c - 80;
    return c;
}

uint32_t ct_to_lower(uint32_t c)
{
    if (c >= 'A' && c <= 'Z')
        return c + 32;
    if (c < 0x80)
        return c;
    if (c >= 0xc0 && c <= 0xde && c != 0xd7)
        return c + 32;
    if (c == 0x178)
        return 0xff;
    if (c >= 0x100 && c <= 0x17e && c != 0x130 && latin_a_lower(c + 1))
        return c + 1;
    if (c >= 0x391 && c <= 0x3a9 && c != 0x3a2)
        return c + 32;
    if (c >= 0x410 && c <= 0x42f)
        return c + 32;
    if (c >= 0x400 && c <= 0x40f)
        return c + 80;
    return c;
}

static bool is_alpha(uint32_t c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || ct_to_upper(c) != c ||
           ct_to_lower(c) != c || (c >= 0x4e00 && c <= 0x9fff);
}

struct ct_value ct_change_case(struct ct_arena *a, struct ct_value s, enum ct_casing how)
{
    struct ct_buf b = {0};
    bool prev_cased = false, first = true;
    for (size_t i = 0; i < s.len;) {
        uint32_t cp = ct_utf8_next(s.u.s, s.len, &i), out;
        switch (how) {
        case CASE_UPPER:
            out = ct_to_upper(cp);
            break;
        case CASE_LOWER:
            out = ct_to_lower(cp);
            break;
        case CASE_CAPITALIZE:
            out = first ? ct_to_upper(cp) : ct_to_lower(cp);
            break;
        default:
            out = prev_cased ? ct_to_lower(cp) : ct_to_upper(cp);
            prev_cased = is_alpha(cp);
        }
        first = false;
        char tmp[4];
        ct_buf_put(a, &b, tmp, ct_utf8_put(tmp, out));
    }
    return ct_from_buf(&b);
}

/* jinja2's title filter: words begin after "-", whitespace, or an opening
 * bracket; each word's first character upper-cased, the rest lower-cased. */
struct ct_value ct_jinja_title(struct ct_arena *a, struct ct_value s)
{
    struct ct_buf b = {0};
    bool at_start = true;
    for (size_t i = 0; i < s.len;) {
        uint32_t cp = ct_utf8_next(s.u.s, s.len, &i);
        bool sep =
            cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || ct_py_isspace(cp);
        uint32_t out = sep ? cp : at_start ? ct_to_upper(cp) : ct_to_lower(cp);
        at_start = sep;
        char tmp[4];
        ct_buf_put(a, &b, tmp, ct_utf8_put(tmp, out));
    }
    return ct_from_buf(&b);
}

const char *ct_find_sub(const char *h, size_t hl, const char *n, size_t nl)
{
    if (nl == 0)
        return h;
    for (size_t i = 0; i + nl <= hl; i++)
        if (memcmp(h + i, n, nl) == 0)
            return h + i;
    return NULL;
}

struct ct_value ct_replace(struct ct_render *r, struct ct_value s, struct ct_value old,
                           struct ct_value new, int64_t count)
{
    struct ct_buf b = {0};
    struct ct_arena *a = &r->arena;
    if (old.len == 0) {
        /* Python inserts new before every character and at the end. */
        int64_t done = 0;
        for (size_t i = 0; i < s.len;) {
            if (count < 0 || done < count) {
                ct_buf_put(a, &b, new.u.s, new.len);
                done++;
            }
            size_t start = i;
            ct_utf8_next(s.u.s, s.len, &i);
            ct_buf_put(a, &b, s.u.s + start, i - start);
        }
        if (count < 0 || done < count)
            ct_buf_put(a, &b, new.u.s, new.len);
        return ct_from_buf(&b);
    }
    size_t pos = 0;
    int64_t done = 0;
    while (count < 0 || done < count) {
        const char *hit = ct_find_sub(s.u.s + pos, s.len - pos, old.u.s, old.len);
        if (!hit)
            break;
        size_t at = (size_t)(hit - s.u.s);
        ct_buf_put(a, &b, s.u.s + pos, at - pos);
        ct_buf_put(a, &b, new.u.s, new.len);
        pos = at + old.len;
        done++;
    }
    if (done == 0)
        return s;
    ct_buf_put(a, &b, s.u.s + pos, s.len - pos);
    return ct_from_buf(&b);
}

struct ct_value ct_split(struct ct_render *r, const struct ct_node *at, struct ct_value s,
                         const struct ct_value *sep, int64_t maxsplit)
{
    struct ct_value l = ct_list_new(&r->arena, 4);
    if (sep) {
        if (sep->len == 0)
            ct_error(r, at, "split: empty separator");
        size_t pos = 0;
        int64_t done = 0;
        for (;;) {
            const char *hit = maxsplit >= 0 && done >= maxsplit
                                  ? NULL
                                  : ct_find_sub(s.u.s + pos, s.len - pos, sep->u.s, sep->len);
            if (!hit) {
                ct_list_push(&r->arena, &l, ct_str(s.u.s + pos, s.len - pos));
                return l;
            }
            size_t e = (size_t)(hit - s.u.s);
            ct_list_push(&r->arena, &l, ct_str(s.u.s + pos, e - pos));
            pos = e + sep->len;
            done++;
        }
    }
    /* No separator: runs of whitespace, empty pieces dropped. */
    size_t i = 0;
    int64_t done = 0;
    for (;;) {
        size_t j;
        while (i < s.len) {
            j = i;
            if (!ct_py_isspace(ct_utf8_next(s.u.s, s.len, &j)))
                break;
            i = j;
        }
        if (i >= s.len)
            return l;
        if (maxsplit >= 0 && done >= maxsplit) {
            struct ct_value rest = ct_strip(ct_str(s.u.s + i, s.len - i), NULL, false, true);
            ct_list_push(&r->arena, &l, rest);
            return l;
        }
        size_t start = i;
        while (i < s.len) {
            j = i;
            if (ct_py_isspace(ct_utf8_next(s.u.s, s.len, &j)))
                break;
            i = j;
        }
        ct_list_push(&r->arena, &l, ct_str(s.u.s + start, i - start));
        done++;
    }
}

/* str.splitlines(): \n, \r, \r\n, \v, \f, \x1c-\x1e, \x85, U+2028, U+2029. */
struct ct_value ct_splitlines(struct ct_render *r, struct ct_value s, bool keepends)
{
    struct ct_value l = ct_list_new(&r->arena, 4);
    size_t start = 0, i = 0;
    while (i < s.len) {
        size_t j = i;
        uint32_t cp = ct_utf8_next(s.u.s, s.len, &j);
        bool brk = cp == '\n' || cp == '\r' || cp == 0x0b || cp == 0x0c ||
                   (cp >= 0x1c && cp <= 0x1e) || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
        if (!brk) {
            i = j;
            continue;
        }
        if (cp == '\r' && j < s.len && s.u.s[j] == '\n')
            j++;
        ct_list_push(&r->arena, &l, ct_str(s.u.s + start, (keepends ? j : i) - start));
        start = i = j;
    }
    if (start < s.len)
        ct_list_push(&r->arena, &l, ct_str(s.u.s + start, s.len - start));
    return l;
}

static bool starts_or_ends(struct ct_render *r, const struct ct_node *at, struct ct_value s,
                           const struct ct_value *affix, bool ends)
{
    if (affix && affix->type == CT_LIST && (affix->flags & CT_F_TUPLE)) {
        for (size_t i = 0; i < affix->u.list->len; i++)
            if (starts_or_ends(r, at, s, &affix->u.list->items[i], ends))
                return true;
        return false;
    }
    if (!affix || affix->type != CT_STR)
        ct_error(r, at, "%s first arg must be str or a tuple of str",
                 ends ? "endswith" : "startswith");
    if (affix->len > s.len)
        return false;
    return memcmp(ends ? s.u.s + s.len - affix->len : s.u.s, affix->u.s, affix->len) == 0;
}

struct ct_value ct_join(struct ct_render *r, const struct ct_value *items, struct ct_value sep)
{
    struct ct_buf b = {0};
    for (size_t i = 0; i < items->u.list->len; i++) {
        if (i)
            ct_buf_put(&r->arena, &b, sep.u.s, sep.len);
        ct_put_str(&r->arena, &b, &items->u.list->items[i]);
    }
    return ct_from_buf(&b);
}

/* str.find and str.count (ct_call_method's cases M_FIND and M_COUNT). */
static struct ct_value method_find_count(struct ct_render *r, const struct ct_node *at,
                                         const struct ct_method *m, const struct ct_args *args)
{
    const struct ct_value *self = m->self;
    const struct ct_value *sub = ct_str_arg(r, at, args, 0, "sub", "find");
    if (!sub)
        ct_error(r, at, "find/count need a string");
    if (m->id == M_FIND) {
        const char *hit = ct_find_sub(self->u.s, self->len, sub->u.s, sub->len);
        return ct_int(hit ? (int64_t)ct_utf8_count(self->u.s, (size_t)(hit - self->u.s)) : -1);
    }
    if (sub->len == 0)
        return ct_int((int64_t)ct_utf8_count(self->u.s, self->len) + 1);
    int64_t n = 0;
    for (size_t pos = 0;;) {
        const char *hit = ct_find_sub(self->u.s + pos, self->len - pos, sub->u.s, sub->len);
        if (!hit)
            break;
        n++;
        pos = (size_t)(hit - self->u.s) + sub->len;
    }
    return ct_int(n);
}

struct ct_value ct_call_method(struct ct_render *r, const struct ct_node *at,
                               const struct ct_method *m, const struct ct_args *args)
{
    struct ct_arena *a = &r->arena;
    const struct ct_value *self = m->self;
    switch ((enum method_id)m->id) {
    case M_STRIP:
    case M_LSTRIP:
    case M_RSTRIP: {
        const struct ct_value *chars = ct_str_arg(r, at, args, 0, "chars", "strip");
        return ct_strip(*self, chars, m->id != M_RSTRIP, m->id != M_LSTRIP);
    }
    case M_SPLIT:
    case M_RSPLIT: {
        const struct ct_value *sep = ct_str_arg(r, at, args, 0, "sep", "split");
        int64_t maxsplit = ct_int_arg(r, at, args, 1, "maxsplit", -1, "split");
        if (m->id == M_RSPLIT && maxsplit >= 0)
            ct_error(r, at, "rsplit with maxsplit is not supported");
        return ct_split(r, at, *self, sep, maxsplit);
    }
    case M_STARTSWITH:
    case M_ENDSWITH:
        return ct_bool(
            starts_or_ends(r, at, *self, ct_arg(args, 0, "prefix"), m->id == M_ENDSWITH));
    case M_UPPER:
        return ct_change_case(a, *self, CASE_UPPER);
    case M_LOWER:
        return ct_change_case(a, *self, CASE_LOWER);
    case M_TITLE:
        return ct_change_case(a, *self, CASE_PY_TITLE);
    case M_CAPITALIZE:
        return ct_change_case(a, *self, CASE_CAPITALIZE);
    case M_REPLACE: {
        const struct ct_value *old = ct_str_arg(r, at, args, 0, "old", "replace");
        const struct ct_value *new = ct_str_arg(r, at, args, 1, "new", "replace");
        if (!old || !new)
            ct_error(r, at, "replace needs two strings");
        return ct_replace(r, *self, *old, *new, ct_int_arg(r, at, args, 2, "count", -1, "replace"));
    }
    case M_FIND:
    case M_COUNT:
        return method_find_count(r, at, m, args);
    case M_JOIN: {
        const struct ct_value *items = ct_arg(args, 0, "iterable");
        if (!items)
            ct_error(r, at, "join needs an iterable");
        struct ct_value list = ct_iterate(r, at, items);
        for (size_t i = 0; i < list.u.list->len; i++)
            if (list.u.list->items[i].type != CT_STR)
                ct_error(r, at, "sequence item %zu: expected str instance, %s found", i,
                         ct_type_name(list.u.list->items[i].type));
        return ct_join(r, &list, *self);
    }
    case M_SPLITLINES:
        return ct_splitlines(r, *self, ct_bool_arg(args, 0, "keepends", false));
    case M_ISDIGIT:
    case M_ISSPACE:
    case M_ISALPHA:
    case M_ISALNUM: {
        if (self->len == 0)
            return ct_bool(false);
        for (size_t i = 0; i < self->len;) {
            uint32_t cp = ct_utf8_next(self->u.s, self->len, &i);
            bool digit = cp >= '0' && cp <= '9';
            bool ok = m->id == M_ISDIGIT   ? digit
                      : m->id == M_ISSPACE ? ct_py_isspace(cp)
                      : m->id == M_ISALPHA ? is_alpha(cp)
                                           : is_alpha(cp) || digit;
            if (!ok)
                return ct_bool(false);
        }
        return ct_bool(true);
    }
    case M_ISUPPER:
    case M_ISLOWER: {
        struct ct_args none = {0};
        return ct_bool(ct_apply_test(r, at, m->id == M_ISUPPER ? T_UPPER : T_LOWER, self, &none));
    }
    case M_GET: {
        const struct ct_value *key = ct_arg(args, 0, "key");
        const struct ct_value *dflt = ct_arg(args, 1, "default");
        if (!key)
            ct_error(r, at, "get needs a key");
        struct ct_value *v = ct_dict_find(self, key);
        return v ? *v : dflt ? *dflt : ct_none();
    }
    case M_ITEMS:
        return ct_apply_filter(r, at, F_ITEMS, *self, args);
    case M_KEYS:
        return ct_iterate(r, at, self);
    case M_VALUES: {
        struct ct_value l = ct_list_new(a, self->u.dict->len);
        memcpy(l.u.list->items, self->u.dict->vals, self->u.dict->len * sizeof(struct ct_value));
        l.u.list->len = self->u.dict->len;
        return l;
    }
    case M_CYCLE: {
        if (args->npos == 0)
            ct_error(r, at, "no items for cycling given");
        return args->pos[self->u.loop->index0 % args->npos];
    }
    case M_INDEX:
        for (size_t i = 0; i < self->u.list->len; i++)
            if (args->npos && ct_equal(&self->u.list->items[i], &args->pos[0]))
                return ct_int((int64_t)i);
        ct_error(r, at, "value is not in list");
    case M_LIST_COUNT: {
        int64_t n = 0;
        for (size_t i = 0; i < self->u.list->len; i++)
            if (args->npos && ct_equal(&self->u.list->items[i], &args->pos[0]))
                n++;
        return ct_int(n);
    }
    }
    ct_error(r, at, "internal error: unknown method");
}
