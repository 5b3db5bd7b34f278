#include "http1_framing.h"

#include <stdbool.h>
#include <string.h>
#include <strings.h>

static bool is_name(const char *name, size_t len, const char *want)
{
    return len == strlen(want) && strncasecmp(name, want, len) == 0;
}

const char *folio_http1_framing_error(const char *head, size_t len)
{
    const char *p = head, *end = head + len;
    const char *length = NULL;
    size_t length_len = 0, num_lengths = 0, num_encodings = 0;
    bool http10 = false;
    /* One empty line before the request line is ignored (RFC 9112 2.2). */
    if (end - p >= 2 && p[0] == '\r' && p[1] == '\n')
        p += 2;
    for (bool request_line = true; p < end; request_line = false) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl)
            return NULL; /* cannot be: h2o has parsed the whole head */
        if (nl == p || nl[-1] != '\r')
            return "a line of the request head ends in a bare LF; lines end in CRLF";
        const char *line = p, *line_end = nl - 1;
        p = nl + 1;
        if (line == line_end)
            break; /* the empty line that ends the head */
        if (request_line) {
            http10 = line_end - line >= 8 && !memcmp(line_end - 8, "HTTP/1.0", 8);
            continue;
        }
        if (*line == ' ' || *line == '\t')
            return "a header is folded over two lines (obs-fold)";
        const char *colon = memchr(line, ':', (size_t)(line_end - line));
        if (!colon)
            continue;
        const char *v = colon + 1, *v_end = line_end;
        while (v < v_end && (*v == ' ' || *v == '\t'))
            v++;
        while (v_end > v && (v_end[-1] == ' ' || v_end[-1] == '\t'))
            v_end--;
        if (is_name(line, (size_t)(colon - line), "content-length")) {
            if (num_lengths++ &&
                ((size_t)(v_end - v) != length_len || memcmp(v, length, length_len)))
                return "the request has Content-Length headers that differ";
            length = v;
            length_len = (size_t)(v_end - v);
        } else if (is_name(line, (size_t)(colon - line), "transfer-encoding")) {
            num_encodings++;
        }
    }
    if (num_encodings > 1)
        return "the request has more than one Transfer-Encoding header";
    if (num_encodings && num_lengths)
        return "the request has both Transfer-Encoding and Content-Length";
    if (num_encodings && http10)
        return "an HTTP/1.0 request cannot have Transfer-Encoding";
    return NULL;
}
