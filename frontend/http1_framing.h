/* RFC 9112's framing rules for an HTTP/1.x request head that h2o 2.2.5 does
 * not apply. h2o frames a body by the first Content-Length (or the last
 * Transfer-Encoding) and accepts lines ended by a bare LF and obs-fold; a proxy
 * in front may read the same bytes otherwise, which is how requests are
 * smuggled past it. */
#ifndef FOLIO_HTTP1_FRAMING_H
#define FOLIO_HTTP1_FRAMING_H

#include <stddef.h>

/* head: the request as received from its first byte (h2o has parsed it, so its
 * empty line is there; header names may be lower-cased). NULL when the framing
 * is unambiguous, else why not, for a 400 after which the connection must
 * close (RFC 9112 6.1, 6.3, 2.2, 5.2). */
const char *folio_http1_framing_error(const char *head, size_t len);

#endif
