/* --max-body-bytes on HTTP/2, enforced while the body arrives. h2o 2.2.5
 * hands Folio an HTTP/2 request only once its body has ended, buffering it
 * all, and past its own size limit it only resets the stream
 * (REFUSED_STREAM, which tells a client to send it again). */
#ifndef FOLIO_H2_BODY_LIMIT_H
#define FOLIO_H2_BODY_LIMIT_H

#include <stddef.h>

#include "h2o.h"
#include "h2o/http2.h"
#include "h2o/http2_internal.h"

/* Wraps conn's frame reader: a stream whose DATA passes max_body bytes, or
 * whose content-length says it will, is answered 413 there and then. Call it
 * before h2o reads the connection's first frame; again is a no-op. Uses the
 * socket's on_close slot, which h2o leaves free on server connections; where
 * it is taken (or memory is short), conn keeps h2o's own behaviour. */
void folio_h2_body_limit(h2o_http2_conn_t *conn, size_t max_body);

#endif
