/* OpenAI error JSON for the errors h2o answers by itself (see the .c). */
#ifndef FOLIO_ERROR_JSON_FILTER_H
#define FOLIO_ERROR_JSON_FILTER_H

#include "h2o.h"

/* Installs the filter on host's fallback path, where h2o's own errors go;
 * count(arg, status) is called for each, so that /metrics counts them too.
 * A 413 (a body past h2o's limit, or h2_body_limit.c's) says max_body, the
 * limit the client has to keep to. */
void folio_register_error_json_filter(h2o_hostconf_t *host, void (*count)(void *arg, int status),
                                      void *arg, size_t max_body);

#endif
