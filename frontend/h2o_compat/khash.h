/* h2o/http2_internal.h includes klib's "khash.h", which Debian's libh2o-dev
 * does not ship; Folio needs that header for h2o's HTTP/2 connection and
 * stream types (h2_body_limit.c). This gives the one table it declares, h2o's
 * streams by id, klib's layout (khash 0.2.8, as h2o 2.2.5 bundles it): bucket
 * arrays whose flags hold 2 bits a bucket, 2 for empty and 1 for deleted. The
 * lookup scans the buckets rather than probing them, so it does not depend on
 * klib's hash function; a connection has few streams. */
#ifndef FOLIO_H2O_KHASH_H
#define FOLIO_H2O_KHASH_H

#include <stdint.h>

typedef uint32_t khint32_t;
typedef uint64_t khint64_t;
typedef khint32_t khint_t;
typedef khint_t khiter_t;

#define KHASH_MAP_INIT_INT64(name, khval_t)                                                        \
    typedef struct kh_##name##_s {                                                                 \
        khint_t n_buckets, size, n_occupied, upper_bound;                                          \
        khint32_t *flags;                                                                          \
        khint64_t *keys;                                                                           \
        khval_t *vals;                                                                             \
    } kh_##name##_t;                                                                               \
    static inline khint_t kh_get_##name(const kh_##name##_t *h, khint64_t key)                     \
    {                                                                                              \
        for (khint_t i = 0; i < h->n_buckets; i++)                                                 \
            if (!((h->flags[i >> 4] >> ((i & 0xfU) << 1)) & 3) && h->keys[i] == key)               \
                return i;                                                                          \
        return h->n_buckets;                                                                       \
    }

#define khash_t(name) kh_##name##_t
#define kh_get(name, h, k) kh_get_##name(h, k)
#define kh_end(h) ((h)->n_buckets)
#define kh_val(h, x) ((h)->vals[x])

#endif
