/* The frontend's open generation requests by id, so that the scheduler's
 * token events find their request. */
#include "http_internal.h"

struct gen_req **http_bucket(struct server *s, uint64_t id)
{
    return &s->buckets[(id * 0x9e3779b97f4a7c15ull) >> 52 & (NUM_BUCKETS - 1)];
}

struct gen_req *http_find(struct server *s, uint64_t id)
{
    for (struct gen_req *g = *http_bucket(s, id); g; g = g->next)
        if (g->id == id)
            return g;
    return NULL;
}

void http_table_remove(struct server *s, struct gen_req *g)
{
    for (struct gen_req **p = http_bucket(s, g->id); *p; p = &(*p)->next)
        if (*p == g) {
            *p = g->next;
            s->num_open--;
            return;
        }
}
