/* The chat-template lexer: template text to tokens, following jinja2's
 * lexer with the settings transformers uses (trim_blocks and lstrip_blocks
 * on, keep_trailing_newline off). Whitespace control is applied here, as in
 * jinja2, so the parser only sees final text. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "chat_template_internal.h"

struct lexer {
    struct ct_arena *a;
    const char *src;
    size_t len;
    size_t pos;
    struct ct_tokens *out;
    /* Line and column of offset at_pos, advanced as tokens move forward. */
    size_t at_pos;
    int at_line, at_col;
};

static void position(struct lexer *lx, size_t pos, int *line, int *col)
{
    if (pos < lx->at_pos) {
        lx->at_pos = 0;
        lx->at_line = 1;
        lx->at_col = 1;
    }
    for (; lx->at_pos < pos; lx->at_pos++) {
        if (lx->src[lx->at_pos] == '\n') {
            lx->at_line++;
            lx->at_col = 1;
        } else {
            lx->at_col++;
        }
    }
    *line = lx->at_line;
    *col = lx->at_col;
}

static _Noreturn void lex_fail(struct lexer *lx, size_t pos, const char *msg)
{
    int line, col;
    position(lx, pos, &line, &col);
    ct_fail(lx->a, "chat template syntax error at line %d, column %d: %s", line, col, msg);
}

static struct ct_token *emit(struct lexer *lx, int type, size_t pos)
{
    struct ct_tokens *t = lx->out;
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        struct ct_token *v = ct_alloc(lx->a, cap * sizeof(*v));
        if (t->n)
            memcpy(v, t->v, t->n * sizeof(*v));
        t->v = v;
        t->cap = cap;
    }
    struct ct_token *tok = &t->v[t->n++];
    memset(tok, 0, sizeof(*tok));
    tok->type = (uint8_t)type;
    position(lx, pos, &tok->line, &tok->col);
    return tok;
}

/* Unicode whitespace (Python's \s) at s[i..]: length of the character, or 0. */
static size_t space_at(const char *s, size_t len, size_t i)
{
    size_t j = i;
    uint32_t cp = ct_utf8_next(s, len, &j);
    return ct_py_isspace(cp) ? j - i : 0;
}

/* Length of text once trailing whitespace is stripped (str.rstrip()). */
static size_t rstrip_len(const char *s, size_t len)
{
    size_t keep = 0;
    for (size_t i = 0; i < len;) {
        size_t n = space_at(s, len, i);
        if (n) {
            i += n;
        } else {
            ct_utf8_next(s, len, &i);
            keep = i;
        }
    }
    return keep;
}

static bool all_space(const char *s, size_t len)
{
    if (len == 0)
        return false; /* jinja2 matches \s+, which needs one character */
    for (size_t i = 0; i < len;) {
        size_t n = space_at(s, len, i);
        if (!n)
            return false;
        i += n;
    }
    return true;
}

static size_t skip_space(const char *s, size_t len, size_t i)
{
    size_t n;
    while (i < len && (n = space_at(s, len, i)))
        i += n;
    return i;
}

static void emit_text(struct lexer *lx, size_t start, size_t len)
{
    if (len == 0)
        return;
    struct ct_token *t = emit(lx, TK_TEXT, start);
    t->s = lx->src + start;
    t->len = len;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* A string literal with Python's escapes (jinja2 decodes literals with
 * the unicode-escape codec). */
static void lex_string(struct lexer *lx)
{
    size_t start = lx->pos;
    char quote = lx->src[lx->pos++];
    char *buf = ct_alloc(lx->a, lx->len - start + 1);
    size_t n = 0;
    for (;;) {
        if (lx->pos >= lx->len)
            lex_fail(lx, start, "unterminated string");
        char c = lx->src[lx->pos++];
        if (c == quote)
            break;
        if (c != '\\') {
            buf[n++] = c;
            continue;
        }
        if (lx->pos >= lx->len)
            lex_fail(lx, start, "unterminated string");
        char e = lx->src[lx->pos++];
        int digits = 0;
        switch (e) {
        case '\n':
            break;
        case '\\':
        case '\'':
        case '"':
            buf[n++] = e;
            break;
        case 'a':
            buf[n++] = '\a';
            break;
        case 'b':
            buf[n++] = '\b';
            break;
        case 'f':
            buf[n++] = '\f';
            break;
        case 'n':
            buf[n++] = '\n';
            break;
        case 'r':
            buf[n++] = '\r';
            break;
        case 't':
            buf[n++] = '\t';
            break;
        case 'v':
            buf[n++] = '\v';
            break;
        case 'x':
            digits = 2;
            break;
        case 'u':
            digits = 4;
            break;
        case 'U':
            digits = 8;
            break;
        default:
            if (e >= '0' && e <= '7') {
                uint32_t cp = (uint32_t)(e - '0');
                for (int k = 0; k < 2 && lx->pos < lx->len && lx->src[lx->pos] >= '0' &&
                                lx->src[lx->pos] <= '7';
                     k++)
                    cp = cp * 8 + (uint32_t)(lx->src[lx->pos++] - '0');
                n += ct_utf8_put(buf + n, cp);
            } else {
                /* Python keeps an unknown escape as written. */
                buf[n++] = '\\';
                buf[n++] = e;
            }
        }
        if (digits) {
            uint32_t cp = 0;
            for (int k = 0; k < digits; k++) {
                int h = lx->pos < lx->len ? hexval(lx->src[lx->pos]) : -1;
                if (h < 0)
                    lex_fail(lx, lx->pos, "truncated \\x, \\u or \\U escape in a string");
                cp = cp * 16 + (uint32_t)h;
                lx->pos++;
            }
            if (cp > 0x10ffff)
                lex_fail(lx, lx->pos, "illegal Unicode character in a string");
            n += ct_utf8_put(buf + n, cp);
        }
    }
    struct ct_token *t = emit(lx, TK_STRING, start);
    t->s = buf;
    t->len = n;
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Digits with optional single underscores between them; returns the end. */
static size_t scan_digits(const char *s, size_t len, size_t i)
{
    if (i >= len || !is_digit(s[i]))
        return i;
    while (i < len && is_digit(s[i])) {
        i++;
        if (i + 1 < len && s[i] == '_' && is_digit(s[i + 1]))
            i++;
    }
    return i;
}

static void lex_number(struct lexer *lx)
{
    const char *s = lx->src;
    size_t start = lx->pos, i = scan_digits(s, lx->len, start);
    bool is_float = false;
    if (i + 1 < lx->len && s[i] == '.' && is_digit(s[i + 1])) {
        i = scan_digits(s, lx->len, i + 1);
        is_float = true;
    }
    if (i < lx->len && (s[i] == 'e' || s[i] == 'E')) {
        size_t j = i + 1;
        if (j < lx->len && (s[j] == '+' || s[j] == '-'))
            j++;
        if (j < lx->len && is_digit(s[j])) {
            i = scan_digits(s, lx->len, j);
            is_float = true;
        }
    }
    char tmp[64];
    size_t n = 0;
    for (size_t k = start; k < i && n + 1 < sizeof(tmp); k++)
        if (s[k] != '_')
            tmp[n++] = s[k];
    tmp[n] = 0;
    struct ct_token *t = emit(lx, is_float ? TK_FLOAT : TK_INT, start);
    if (is_float) {
        t->f = strtod(tmp, NULL);
    } else {
        errno = 0;
        t->i = strtoll(tmp, NULL, 10);
        if (errno == ERANGE || n + 1 >= sizeof(tmp))
            lex_fail(lx, start, "integer literal too large");
    }
    lx->pos = i;
}

static const char *const operators[] = {
    "//", "**", "==", "!=", ">=", "<=", "+", "-", "*", "/", "%", "~", "[",
    "]",  "(",  ")",  "{",  "}",  "<",  ">", "=", ".", ":", "|", ",", ";",
};

/* Tokens of one {{ }} or {% %} up to its end marker, which it consumes with
 * the whitespace control jinja2 applies: "-}}" / "-%}" eat all following
 * whitespace, "%}" eats one newline (trim_blocks), "+%}" nothing. Returns
 * whether the end consumed a trailing newline (jinja2's line_starting). */
static bool lex_tag(struct lexer *lx, bool block)
{
    const char *s = lx->src;
    int depth = 0;
    size_t tag_start = lx->pos;
    for (;;) {
        lx->pos = skip_space(s, lx->len, lx->pos);
        if (lx->pos >= lx->len)
            lex_fail(lx, tag_start,
                     block ? "unexpected end of template: missing '%}'"
                           : "unexpected end of template: missing '}}'");
        size_t p = lx->pos;
        char end = block ? '%' : '}';
        if (depth == 0) {
            size_t m = 0;
            bool strip = false, keep = false;
            if (s[p] == '-' && p + 2 < lx->len && s[p + 1] == end && s[p + 2] == '}') {
                m = 3;
                strip = true;
            } else if (s[p] == '+' && p + 2 < lx->len && s[p + 1] == end && s[p + 2] == '}') {
                m = 3;
                keep = true;
            } else if (s[p] == end && p + 1 < lx->len && s[p + 1] == '}') {
                m = 2;
            }
            if (m) {
                emit(lx, block ? TK_BLOCK_END : TK_VAR_END, p);
                lx->pos = p + m;
                if (strip) {
                    size_t q = skip_space(s, lx->len, lx->pos);
                    bool nl = q > lx->pos && s[q - 1] == '\n';
                    lx->pos = q;
                    return nl;
                }
                if (block && !keep && lx->pos < lx->len && s[lx->pos] == '\n') {
                    lx->pos++;
                    return true;
                }
                return false;
            }
        }
        char c = s[p];
        if (c == '\'' || c == '"') {
            lex_string(lx);
            continue;
        }
        if (is_digit(c)) {
            lex_number(lx);
            continue;
        }
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') {
            size_t q = p;
            while (q < lx->len && ((s[q] >= 'a' && s[q] <= 'z') || (s[q] >= 'A' && s[q] <= 'Z') ||
                                   s[q] == '_' || is_digit(s[q])))
                q++;
            struct ct_token *t = emit(lx, TK_NAME, p);
            t->s = s + p;
            t->len = q - p;
            lx->pos = q;
            continue;
        }
        size_t k;
        for (k = 0; k < sizeof(operators) / sizeof(operators[0]); k++) {
            size_t ol = strlen(operators[k]);
            if (p + ol <= lx->len && memcmp(s + p, operators[k], ol) == 0)
                break;
        }
        if (k == sizeof(operators) / sizeof(operators[0]))
            lex_fail(lx, p, "unexpected character");
        const char *op = operators[k];
        if (op[0] == '(' || op[0] == '[' || op[0] == '{') {
            depth++;
        } else if (op[0] == ')' || op[0] == ']' || op[0] == '}') {
            if (depth == 0)
                lex_fail(lx, p, "unexpected closing bracket");
            depth--;
        }
        struct ct_token *t = emit(lx, TK_OP, p);
        t->s = op;
        t->len = strlen(op);
        lx->pos = p + t->len;
    }
}

/* {% raw %}...{% endraw %}: returns true and emits the text when the block
 * at lx->pos (just after "{%" and its sign) is a raw block. */
static bool lex_raw(struct lexer *lx, bool *line_starting)
{
    const char *s = lx->src;
    size_t p = skip_space(s, lx->len, lx->pos);
    if (lx->len - p < 3 || memcmp(s + p, "raw", 3) != 0)
        return false;
    p = skip_space(s, lx->len, p + 3);
    if (p < lx->len && (s[p] == '-' || s[p] == '+'))
        p++;
    if (lx->len - p < 2 || memcmp(s + p, "%}", 2) != 0)
        return false;
    p += 2;
    size_t body = p;
    for (size_t q = p; q + 1 < lx->len; q++) {
        if (s[q] != '{' || s[q + 1] != '%')
            continue;
        size_t r = q + 2;
        bool strip = r < lx->len && s[r] == '-';
        if (r < lx->len && (s[r] == '-' || s[r] == '+'))
            r++;
        r = skip_space(s, lx->len, r);
        if (lx->len - r < 6 || memcmp(s + r, "endraw", 6) != 0)
            continue;
        r = skip_space(s, lx->len, r + 6);
        bool strip_after = r < lx->len && s[r] == '-';
        bool keep = r < lx->len && s[r] == '+';
        if (strip_after || keep)
            r++;
        if (lx->len - r < 2 || memcmp(s + r, "%}", 2) != 0)
            continue;
        size_t text_len = q - body;
        if (strip)
            text_len = rstrip_len(s + body, text_len);
        emit_text(lx, body, text_len);
        r += 2;
        *line_starting = false;
        if (strip_after) {
            size_t e = skip_space(s, lx->len, r);
            *line_starting = e > r && s[e - 1] == '\n';
            r = e;
        } else if (!keep && r < lx->len && s[r] == '\n') {
            r++;
            *line_starting = true;
        }
        lx->pos = r;
        return true;
    }
    lex_fail(lx, lx->pos, "missing end of raw directive");
}

void ct_lex(struct ct_arena *a, const char *src, struct ct_tokens *out)
{
    /* Newlines normalised to \n and one trailing newline dropped, as
     * jinja2 does before lexing. */
    size_t srclen = strlen(src);
    char *norm = ct_alloc(a, srclen + 1);
    size_t n = 0;
    for (size_t i = 0; i < srclen; i++) {
        if (src[i] == '\r') {
            norm[n++] = '\n';
            if (i + 1 < srclen && src[i + 1] == '\n')
                i++;
        } else {
            norm[n++] = src[i];
        }
    }
    if (n && norm[n - 1] == '\n')
        n--;
    norm[n] = 0;

    struct lexer lx = {.a = a, .src = norm, .len = n, .out = out, .at_line = 1, .at_col = 1};
    bool line_starting = true;
    while (lx.pos < lx.len) {
        /* The next "{{", "{%" or "{#". */
        size_t tag = lx.pos;
        while (tag + 1 < lx.len &&
               !(norm[tag] == '{' &&
                 (norm[tag + 1] == '{' || norm[tag + 1] == '%' || norm[tag + 1] == '#')))
            tag++;
        if (tag + 1 >= lx.len) {
            emit_text(&lx, lx.pos, lx.len - lx.pos);
            break;
        }
        char kind = norm[tag + 1];
        char sign = tag + 2 < lx.len ? norm[tag + 2] : 0;
        size_t text_start = lx.pos, text_len = tag - lx.pos;
        if (sign == '-') {
            text_len = rstrip_len(norm + text_start, text_len);
        } else if (sign != '+' && kind != '{') {
            /* lstrip_blocks: drop the indentation before a block or
             * comment tag that starts its line. */
            size_t l_pos = text_len;
            while (l_pos > 0 && norm[text_start + l_pos - 1] != '\n')
                l_pos--;
            if ((l_pos > 0 || line_starting) &&
                all_space(norm + text_start + l_pos, text_len - l_pos))
                text_len = l_pos;
        }
        emit_text(&lx, text_start, text_len);
        lx.pos = tag + 2 + (sign == '-' || sign == '+');
        if (kind == '#') {
            size_t q = lx.pos;
            if (q >= lx.len)
                break; /* jinja2 drops a "{#" that ends the template */
            for (;;) {
                if (q + 1 >= lx.len)
                    lex_fail(&lx, tag, "missing end of comment tag");
                if (norm[q] == '#' && norm[q + 1] == '}')
                    break;
                if ((norm[q] == '-' || norm[q] == '+') && q + 2 < lx.len && norm[q + 1] == '#' &&
                    norm[q + 2] == '}')
                    break;
                q++;
            }
            line_starting = false;
            if (norm[q] == '-') {
                size_t e = skip_space(norm, lx.len, q + 3);
                line_starting = e > q + 3 && norm[e - 1] == '\n';
                lx.pos = e;
            } else if (norm[q] == '+') {
                lx.pos = q + 3;
            } else {
                lx.pos = q + 2;
                if (lx.pos < lx.len && norm[lx.pos] == '\n') {
                    lx.pos++;
                    line_starting = true;
                }
            }
            continue;
        }
        if (kind == '%' && lex_raw(&lx, &line_starting))
            continue;
        emit(&lx, kind == '%' ? TK_BLOCK_BEGIN : TK_VAR_BEGIN, tag);
        line_starting = lex_tag(&lx, kind == '%');
    }
    emit(&lx, TK_EOF, lx.len);
}
