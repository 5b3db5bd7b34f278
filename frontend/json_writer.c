#include "json_writer.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void folio_jw_init(struct folio_jw *b)
{
    memset(b, 0, sizeof *b);
}

void folio_jw_free(struct folio_jw *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

void folio_jw_reset(struct folio_jw *b)
{
    b->len = 0;
    b->failed = false;
    if (b->data)
        b->data[0] = 0;
}

char *folio_jw_take(struct folio_jw *b, size_t *len)
{
    if (b->failed) {
        folio_jw_free(b);
        return NULL;
    }
    if (!b->data)
        folio_jw_raw(b, "", 0);
    char *d = b->data;
    if (len)
        *len = b->len;
    memset(b, 0, sizeof *b);
    return d;
}

static bool reserve(struct folio_jw *b, size_t extra)
{
    if (b->failed)
        return false;
    if (b->len + extra + 1 <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1)
        cap *= 2;
    char *d = realloc(b->data, cap);
    if (!d) {
        b->failed = true;
        return false;
    }
    b->data = d;
    b->cap = cap;
    return true;
}

void folio_jw_raw(struct folio_jw *b, const char *s, size_t n)
{
    if (!reserve(b, n))
        return;
    if (n) /* s may be NULL then (an empty buffer's data) */
        memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = 0;
}

void folio_jw_str(struct folio_jw *b, const char *s)
{
    folio_jw_raw(b, s, strlen(s));
}

void folio_jw_printf(struct folio_jw *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char small[256];
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = true;
        return;
    }
    if ((size_t)n < sizeof small) {
        folio_jw_raw(b, small, (size_t)n);
        return;
    }
    if (!reserve(b, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void folio_jw_string(struct folio_jw *b, const char *s, size_t n)
{
    /* Worst case every byte becomes \u00XX. */
    if (!reserve(b, n * 6 + 2))
        return;
    char *o = b->data + b->len;
    *o++ = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"':
            *o++ = '\\', *o++ = '"';
            break;
        case '\\':
            *o++ = '\\', *o++ = '\\';
            break;
        case '\n':
            *o++ = '\\', *o++ = 'n';
            break;
        case '\r':
            *o++ = '\\', *o++ = 'r';
            break;
        case '\t':
            *o++ = '\\', *o++ = 't';
            break;
        default:
            if (c < 0x20) {
                static const char hex[] = "0123456789abcdef";
                *o++ = '\\', *o++ = 'u', *o++ = '0', *o++ = '0';
                *o++ = hex[c >> 4], *o++ = hex[c & 15];
            } else if (c == 0xC2 && i + 1 < n && (unsigned char)s[i + 1] == 0x85) {
                /* U+0085, U+2028 and U+2029 are line breaks to Python's
                 * str.splitlines (httpx's SSE reader splits there): escape
                 * them so one event stays on one line. */
                memcpy(o, "\\u0085", 6), o += 6, i += 1;
            } else if (c == 0xE2 && i + 2 < n && (unsigned char)s[i + 1] == 0x80 &&
                       ((unsigned char)s[i + 2] == 0xA8 || (unsigned char)s[i + 2] == 0xA9)) {
                memcpy(o, (unsigned char)s[i + 2] == 0xA8 ? "\\u2028" : "\\u2029", 6);
                o += 6, i += 2;
            } else {
                *o++ = (char)c;
            }
        }
    }
    *o++ = '"';
    b->len = (size_t)(o - b->data);
    b->data[b->len] = 0;
}

void folio_jw_double(struct folio_jw *b, double v)
{
    if (!isfinite(v))
        v = -9999.0;
    char tmp[40];
    int n = snprintf(tmp, sizeof tmp, "%.9g", v);
    /* Keep it a float in JSON (1 -> 1.0) as Python clients print it. */
    if (!strpbrk(tmp, ".eE") && n + 2 < (int)sizeof tmp) {
        tmp[n++] = '.';
        tmp[n++] = '0';
        tmp[n] = 0;
    }
    folio_jw_raw(b, tmp, (size_t)n);
}
