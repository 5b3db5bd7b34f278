/* The error convention of every function here: return -1 and leave a
 * message in the caller's buffer. */
#ifndef FOLIO_ERROR_H
#define FOLIO_ERROR_H

#include <stddef.h>

/* printf into err (errlen bytes); does nothing when err is NULL. */
void folio_set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
