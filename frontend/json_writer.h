/* A growable byte buffer that writes JSON by hand: the frontend formats one
 * SSE chunk per token, and building a jansson tree for each would cost more
 * than the token itself. Allocation failure is sticky (b->failed) so callers
 * check once at the end. */
#ifndef FOLIO_JSON_WRITER_H
#define FOLIO_JSON_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct folio_jw {
    char *data;
    size_t len, cap;
    bool failed;
};

void folio_jw_init(struct folio_jw *b);
void folio_jw_free(struct folio_jw *b);
void folio_jw_reset(struct folio_jw *b);
/* Hands the bytes to the caller (NUL-terminated) and leaves b empty. */
char *folio_jw_take(struct folio_jw *b, size_t *len);
void folio_jw_raw(struct folio_jw *b, const char *s, size_t n);
void folio_jw_str(struct folio_jw *b, const char *s); /* raw C string */
void folio_jw_printf(struct folio_jw *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* A JSON string literal: quotes, escapes and \u00XX for control bytes. The
 * input is expected to be UTF-8; bytes are copied as they are. */
void folio_jw_string(struct folio_jw *b, const char *s, size_t n);
/* A number; NaN and infinities become -9999.0 as vLLM writes -inf logprobs. */
void folio_jw_double(struct folio_jw *b, double v);

#endif
