/* OpenAI error JSON for the errors h2o answers by itself (see the .c). */
#ifndef FOLIO_ERROR_JSON_FILTER_H
#define FOLIO_ERROR_JSON_FILTER_H

#include "h2o.h"

/* Installs the filter on host's fallback path, where h2o's own errors go. */
void folio_register_error_json_filter(h2o_hostconf_t *host);

#endif
