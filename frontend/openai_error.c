#include "openai_error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Cuts a UTF-8 sequence that truncation left incomplete at the end of s: the
 * error body is JSON, and a field name the client sent may be longer than
 * the buffers and not ASCII. */
static void drop_partial_utf8(char *s)
{
    size_t n = strlen(s), lead = n;
    while (lead > 0 && n - lead < 4 && ((unsigned char)s[lead - 1] & 0xC0) == 0x80)
        lead--;
    if (lead == 0)
        return;
    unsigned char c = (unsigned char)s[lead - 1];
    size_t want = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (n - (lead - 1) < want)
        s[lead - 1] = '\0';
}

int folio_oai_fail(struct folio_oai_error *e, int status, const char *param, const char *fmt, ...)
{
    e->status = status;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    drop_partial_utf8(e->param);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    drop_partial_utf8(e->message);
    return -1;
}
