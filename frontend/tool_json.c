#include "tool_json.h"

#include <string.h>

enum {
    S_VALUE,     /* a value is expected */
    S_OBJ_FIRST, /* after '{': a key or '}' */
    S_OBJ_KEY,   /* after ',' in an object: a key */
    S_COLON,     /* after a key */
    S_OBJ_NEXT,  /* after a member's value: ',' or '}' */
    S_ARR_FIRST, /* after '[': a value or ']' */
    S_ARR_NEXT,  /* after an element: ',' or ']' */
    S_STR,
    S_STR_ESC,
    S_STR_U,
    S_NUM_MINUS,
    S_NUM_ZERO,
    S_NUM_INT,
    S_NUM_DOT,
    S_NUM_FRAC,
    S_NUM_E,
    S_NUM_ESIGN,
    S_NUM_EXP,
    S_LIT,
    S_DONE,
};

void folio_tj_init(struct folio_tj *s, int watch)
{
    memset(s, 0, sizeof *s);
    s->state = S_VALUE;
    s->watch = watch;
}

static bool is_ws(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static bool is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

static bool is_hex(unsigned char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static bool top_is_object(const struct folio_tj *s)
{
    return s->depth > 0 && s->stack[s->depth - 1] == '{';
}

/* A value has just ended: back to its container, or done at the top. */
static enum folio_tj_status after_value(struct folio_tj *s, struct folio_tj_event *ev)
{
    if (s->depth == 0) {
        s->state = S_DONE;
        return FOLIO_TJ_DONE;
    }
    if (s->in_value && s->depth == s->watch && top_is_object(s)) {
        s->in_value = false;
        ev->member_end = true;
    }
    s->state = top_is_object(s) ? S_OBJ_NEXT : S_ARR_NEXT;
    return FOLIO_TJ_MORE;
}

static enum folio_tj_status push(struct folio_tj *s, unsigned char c, struct folio_tj_event *ev)
{
    if (s->depth == FOLIO_TJ_MAX_DEPTH)
        return FOLIO_TJ_ERROR;
    s->stack[s->depth++] = c;
    if (c == '{' && s->depth == s->watch)
        ev->object_start = true;
    s->state = c == '{' ? S_OBJ_FIRST : S_ARR_FIRST;
    return FOLIO_TJ_MORE;
}

static enum folio_tj_status pop(struct folio_tj *s, unsigned char c, struct folio_tj_event *ev)
{
    if (c == '}' && s->depth == s->watch)
        ev->object_end = true;
    s->depth--;
    return after_value(s, ev);
}

/* The first byte of a value. */
static enum folio_tj_status start_value(struct folio_tj *s, unsigned char c,
                                        struct folio_tj_event *ev)
{
    if (s->depth == 0 && c != '{' && c != '[')
        return FOLIO_TJ_ERROR; /* a call is an object or a list of them */
    if (s->depth == s->watch - 1 && c != '{')
        return FOLIO_TJ_ERROR; /* what sits at the watched depth is a call object */
    if (s->depth == s->watch && top_is_object(s))
        s->in_value = true;
    switch (c) {
    case '{':
    case '[':
        return push(s, c, ev);
    case '"':
        s->state = S_STR;
        s->str_is_key = false;
        return FOLIO_TJ_MORE;
    case '-':
        s->state = S_NUM_MINUS;
        return FOLIO_TJ_MORE;
    case 't':
    case 'f':
    case 'n':
        s->lit = c == 't' ? "true" : c == 'f' ? "false" : "null";
        s->aux = 1;
        s->state = S_LIT;
        return FOLIO_TJ_MORE;
    default:
        if (!is_digit(c))
            return FOLIO_TJ_ERROR;
        s->state = c == '0' ? S_NUM_ZERO : S_NUM_INT;
        return FOLIO_TJ_MORE;
    }
}

static enum folio_tj_status start_key(struct folio_tj *s, unsigned char c)
{
    if (c != '"')
        return FOLIO_TJ_ERROR;
    s->state = S_STR;
    s->str_is_key = true;
    if (s->depth == s->watch)
        s->key_len = 0;
    return FOLIO_TJ_MORE;
}

static enum folio_tj_status string_byte(struct folio_tj *s, unsigned char c,
                                        struct folio_tj_event *ev)
{
    if (c == '"') {
        if (!s->str_is_key)
            return after_value(s, ev);
        if (s->depth == s->watch)
            s->key[s->key_len] = 0;
        s->state = S_COLON;
        return FOLIO_TJ_MORE;
    }
    if (c < 0x20)
        return FOLIO_TJ_ERROR; /* control characters must be escaped */
    if (c == '\\')
        s->state = S_STR_ESC;
    if (s->str_is_key && s->depth == s->watch && s->key_len < FOLIO_TJ_KEY_MAX)
        s->key[s->key_len++] = (char)c;
    return FOLIO_TJ_MORE;
}

/* Numbers end at the first byte that cannot continue them; false when c
 * continues (or breaks) the number. */
static bool number_ends(int state, unsigned char c)
{
    switch (state) {
    case S_NUM_ZERO:
        return c != '.' && c != 'e' && c != 'E';
    case S_NUM_INT:
        return !is_digit(c) && c != '.' && c != 'e' && c != 'E';
    case S_NUM_FRAC:
        return !is_digit(c) && c != 'e' && c != 'E';
    case S_NUM_EXP:
        return !is_digit(c);
    default:
        return false;
    }
}

static enum folio_tj_status number_byte(struct folio_tj *s, unsigned char c)
{
    switch (s->state) {
    case S_NUM_MINUS:
        if (!is_digit(c))
            return FOLIO_TJ_ERROR;
        s->state = c == '0' ? S_NUM_ZERO : S_NUM_INT;
        return FOLIO_TJ_MORE;
    case S_NUM_DOT:
        if (!is_digit(c))
            return FOLIO_TJ_ERROR;
        s->state = S_NUM_FRAC;
        return FOLIO_TJ_MORE;
    case S_NUM_E:
        if (c == '+' || c == '-') {
            s->state = S_NUM_ESIGN;
            return FOLIO_TJ_MORE;
        }
        /* fall through */
    case S_NUM_ESIGN:
        if (!is_digit(c))
            return FOLIO_TJ_ERROR;
        s->state = S_NUM_EXP;
        return FOLIO_TJ_MORE;
    default: /* ZERO, INT, FRAC, EXP with a byte that continues them */
        if (c == '.')
            s->state = S_NUM_DOT;
        else if (c == 'e' || c == 'E')
            s->state = S_NUM_E;
        return FOLIO_TJ_MORE;
    }
}

static enum folio_tj_status step(struct folio_tj *s, unsigned char c, struct folio_tj_event *ev)
{
    switch (s->state) {
    case S_VALUE:
        return is_ws(c) ? FOLIO_TJ_MORE : start_value(s, c, ev);
    case S_OBJ_FIRST:
        if (is_ws(c))
            return FOLIO_TJ_MORE;
        return c == '}' ? pop(s, c, ev) : start_key(s, c);
    case S_OBJ_KEY:
        return is_ws(c) ? FOLIO_TJ_MORE : start_key(s, c);
    case S_COLON:
        if (is_ws(c))
            return FOLIO_TJ_MORE;
        if (c != ':')
            return FOLIO_TJ_ERROR;
        s->state = S_VALUE;
        return FOLIO_TJ_MORE;
    case S_OBJ_NEXT:
        if (is_ws(c))
            return FOLIO_TJ_MORE;
        if (c == ',') {
            s->state = S_OBJ_KEY;
            return FOLIO_TJ_MORE;
        }
        return c == '}' ? pop(s, c, ev) : FOLIO_TJ_ERROR;
    case S_ARR_FIRST:
        if (is_ws(c))
            return FOLIO_TJ_MORE;
        return c == ']' ? pop(s, c, ev) : start_value(s, c, ev);
    case S_ARR_NEXT:
        if (is_ws(c))
            return FOLIO_TJ_MORE;
        if (c == ',') {
            s->state = S_VALUE;
            return FOLIO_TJ_MORE;
        }
        return c == ']' ? pop(s, c, ev) : FOLIO_TJ_ERROR;
    case S_STR:
        return string_byte(s, c, ev);
    case S_STR_ESC:
        if (c == 'u') {
            s->state = S_STR_U;
            s->aux = 4;
        } else if (strchr("\"\\/bfnrt", c) && c) {
            s->state = S_STR;
        } else {
            return FOLIO_TJ_ERROR;
        }
        if (s->str_is_key && s->depth == s->watch && s->key_len < FOLIO_TJ_KEY_MAX)
            s->key[s->key_len++] = (char)c;
        return FOLIO_TJ_MORE;
    case S_STR_U:
        if (!is_hex(c))
            return FOLIO_TJ_ERROR;
        if (--s->aux == 0)
            s->state = S_STR;
        return FOLIO_TJ_MORE;
    case S_LIT:
        if (c != (unsigned char)s->lit[s->aux])
            return FOLIO_TJ_ERROR;
        return s->lit[++s->aux] ? FOLIO_TJ_MORE : after_value(s, ev);
    case S_DONE:
        return FOLIO_TJ_ERROR;
    default:
        return number_byte(s, c);
    }
}

enum folio_tj_status folio_tj_byte(struct folio_tj *s, unsigned char c, struct folio_tj_event *ev)
{
    memset(ev, 0, sizeof *ev);
    if (number_ends(s->state, c) && after_value(s, ev) != FOLIO_TJ_MORE)
        return FOLIO_TJ_ERROR; /* numbers never stand at the top */
    bool was_in = s->in_value;
    enum folio_tj_status st = step(s, c, ev);
    ev->value_byte = st != FOLIO_TJ_ERROR && (was_in || s->in_value);
    return st;
}
