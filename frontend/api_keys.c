#include "api_keys.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/sha.h>

static int add_key(struct folio_api_keys *k, const char *key, size_t len, char *err, size_t errlen)
{
    if (len == 0) {
        snprintf(err, errlen, "an API key must not be empty");
        return -1;
    }
    if (k->num == FOLIO_MAX_API_KEYS) {
        snprintf(err, errlen, "at most %d API keys", FOLIO_MAX_API_KEYS);
        return -1;
    }
    SHA256((const unsigned char *)key, len, k->digest[k->num++]);
    return 0;
}

int folio_api_keys_init(struct folio_api_keys *k, const char *const *flags, size_t num_flags,
                        const char *env_value, char *err, size_t errlen)
{
    memset(k, 0, sizeof *k);
    for (size_t i = 0; i < num_flags; i++)
        if (add_key(k, flags[i], strlen(flags[i]), err, errlen) != 0)
            return -1;
    if (!env_value || !*env_value)
        return 0;
    for (const char *p = env_value; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (add_key(k, p, len, err, errlen) != 0)
            return -1;
        p += len + (nl != NULL);
    }
    return 0;
}

static bool is(const char *path, size_t len, const char *want)
{
    return len == strlen(want) && !memcmp(path, want, len);
}

bool folio_api_keys_guard(const struct folio_api_keys *k, const char *path, size_t len,
                          bool metrics_require_key)
{
    if (k->num == 0)
        return false;
    return (len >= 4 && !memcmp(path, "/v1/", 4)) || is(path, len, "/v1") ||
           is(path, len, "/tokenize") || is(path, len, "/detokenize") ||
           (metrics_require_key && is(path, len, "/metrics"));
}

bool folio_api_keys_allow(const struct folio_api_keys *k, const char *header, size_t len)
{
    if (k->num == 0)
        return true;
    if (!header || len < 7 || strncasecmp(header, "Bearer ", 7) != 0)
        return false;
    const char *key = header + 7;
    size_t key_len = len - 7;
    while (key_len && *key == ' ')
        key++, key_len--;
    /* Digests have one length whatever the key's, and every configured key
     * is compared: the time taken says nothing about which bytes matched. */
    unsigned char d[32];
    SHA256((const unsigned char *)key, key_len, d);
    int match = 0;
    for (size_t i = 0; i < k->num; i++)
        match |= CRYPTO_memcmp(d, k->digest[i], sizeof d) == 0;
    return match && key_len > 0;
}
