/* The API's error: what went wrong, ready to send as OpenAI's error body. */
#ifndef FOLIO_OPENAI_ERROR_H
#define FOLIO_OPENAI_ERROR_H

/* What went wrong, ready to send: status 400/404/..., a message naming the
 * field, and the field's name in param (empty when none). */
struct folio_oai_error {
    int status;
    char message[512];
    char param[64];
};

/* Fills e (param NULL: none) and returns -1, for `return folio_oai_fail(...)`. */
int folio_oai_fail(struct folio_oai_error *e, int status, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
