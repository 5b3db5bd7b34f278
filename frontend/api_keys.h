/* API keys: `--api-key KEY` (repeatable) and FOLIO_API_KEY (one key, or
 * several separated by newlines, which is how `folio serve` hands its keys to
 * the frontends without putting them in a command line that every local user
 * can read). Keys are kept as SHA-256 digests and a presented key is compared
 * with every one of them in constant time. */
#ifndef FOLIO_API_KEYS_H
#define FOLIO_API_KEYS_H

#include <stdbool.h>
#include <stddef.h>

#define FOLIO_MAX_API_KEYS 64

struct folio_api_keys {
    size_t num;
    unsigned char digest[FOLIO_MAX_API_KEYS][32];
};

/* Adds each key of flags[] and of the FOLIO_API_KEY variable (env_value,
 * NULL when unset). An empty key or more than FOLIO_MAX_API_KEYS is an
 * error in err. */
int folio_api_keys_init(struct folio_api_keys *k, const char *const *flags, size_t num_flags,
                        const char *env_value, char *err, size_t errlen);

/* Whether the route at path needs a key (when any is set): the OpenAI routes
 * (everything under /v1/), /tokenize and /detokenize; /metrics with
 * metrics_require_key. /health, /ping, /version and /metrics otherwise stay
 * open, as in vLLM, so that probes and scrapers need no secret. */
bool folio_api_keys_guard(const struct folio_api_keys *k, const char *path, size_t len,
                          bool metrics_require_key);

/* Whether an Authorization header value ("Bearer KEY") carries one of the
 * keys. Always true when no key is configured. */
bool folio_api_keys_allow(const struct folio_api_keys *k, const char *header, size_t len);

#endif
