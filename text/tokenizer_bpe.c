/* The BPE model of a tokenizer.json: one word (a pre-tokenized piece of
 * normalized text) to ids. It reproduces Hugging Face's Word::merge_all
 * step for step: symbols in a linked list, candidate merges in a min-heap
 * ordered by (rank, position), an entry skipped when the pair at its position
 * no longer makes the same new token. Any other order of merging can differ
 * from Hugging Face on odd merge tables, so the algorithm is copied, not just
 * the idea. Hash tables for the vocabulary and the merges keep it O(n log n). */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

static uint64_t hash_bytes(const char *s, size_t len)
{
    uint64_t h = 0x9E3779B97F4A7C15ull ^ len;
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
        h ^= h >> 31;
        s += 8;
        len -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, s, len);
    h = (h ^ w) * 0x94D049BB133111EBull;
    h ^= h >> 29;
    return h;
}

int tok_strmap_init(struct tok_strmap *m, size_t expected)
{
    size_t cap = 16;
    while (cap < expected * 2)
        cap *= 2;
    m->slots = calloc(cap, sizeof *m->slots);
    m->mask = cap - 1;
    m->count = 0;
    return m->slots ? 0 : -1;
}

void tok_strmap_free(struct tok_strmap *m)
{
    free(m->slots);
    m->slots = NULL;
}

static int strmap_grow(struct tok_strmap *m)
{
    struct tok_strmap bigger;
    if (tok_strmap_init(&bigger, (m->mask + 1)))
        return -1;
    for (size_t i = 0; i <= m->mask; i++)
        if (m->slots[i].key)
            tok_strmap_put(&bigger, m->slots[i].key, m->slots[i].len, m->slots[i].id);
    free(m->slots);
    *m = bigger;
    return 0;
}

int tok_strmap_put(struct tok_strmap *m, const char *key, size_t len, int32_t id)
{
    if ((m->count + 1) * 2 > m->mask + 1 && strmap_grow(m))
        return -1;
    for (size_t i = hash_bytes(key, len) & m->mask;; i = (i + 1) & m->mask) {
        struct tok_strmap_slot *s = &m->slots[i];
        if (!s->key) {
            s->key = key;
            s->len = (uint32_t)len;
            s->id = id;
            m->count++;
            return 0;
        }
        if (s->len == len && !memcmp(s->key, key, len)) {
            s->id = id;
            return 0;
        }
    }
}

int32_t tok_strmap_get(const struct tok_strmap *m, const char *key, size_t len)
{
    for (size_t i = hash_bytes(key, len) & m->mask;; i = (i + 1) & m->mask) {
        const struct tok_strmap_slot *s = &m->slots[i];
        if (!s->key)
            return -1;
        if (s->len == len && !memcmp(s->key, key, len))
            return s->id;
    }
}

const struct tok_merge_slot *tok_bpe_merge(const struct tok_bpe *bpe, int32_t a, int32_t b)
{
    uint64_t pair = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    for (size_t i = tok_pair_slot(pair, bpe->merge_mask);; i = (i + 1) & bpe->merge_mask) {
        const struct tok_merge_slot *s = &bpe->merges[i];
        if (s->pair == pair)
            return s;
        if (s->pair == UINT64_MAX)
            return NULL;
    }
}

static int push_id(int32_t **ids, size_t *n, size_t *cap, int32_t id)
{
    if (*n == *cap && tok_grow((void **)ids, cap, *n + 1, sizeof **ids))
        return -1;
    (*ids)[(*n)++] = id;
    return 0;
}

/* Id of the token that is exactly the character c (len bytes), with the
 * subword prefix / word suffix where the model has them; -1 when absent. */
static int32_t char_id(const struct tok_bpe *bpe, struct tok_bpe_scratch *s, const char *c,
                       size_t len, bool first, bool last)
{
    bool add_prefix = !first && bpe->subword_prefix;
    bool add_suffix = last && bpe->word_suffix;
    if (!add_prefix && !add_suffix) {
        if (len <= 3 && bpe->bmp_id) {
            uint32_t cp;
            tok_utf8_decode(c, &cp);
            return bpe->bmp_id[cp];
        }
        return tok_strmap_get(&bpe->vocab, c, len);
    }
    size_t pl = add_prefix ? strlen(bpe->subword_prefix) : 0;
    size_t sl = add_suffix ? strlen(bpe->word_suffix) : 0;
    if (tok_grow((void **)&s->buf, &s->buf_cap, pl + len + sl, 1))
        return -2;
    if (pl)
        memcpy(s->buf, bpe->subword_prefix, pl);
    memcpy(s->buf + pl, c, len);
    if (sl)
        memcpy(s->buf + pl + len, bpe->word_suffix, sl);
    return tok_strmap_get(&bpe->vocab, s->buf, pl + len + sl);
}

static int add_symbol(struct tok_bpe_scratch *s, size_t *n, int32_t id, size_t len)
{
    if (tok_grow((void **)&s->sym, &s->sym_cap, *n + 1, sizeof *s->sym))
        return -1;
    struct tok_symbol *y = &s->sym[*n];
    y->id = id;
    y->len = (uint32_t)len;
    y->prev = (int32_t)*n - 1;
    y->next = (int32_t)*n + 1;
    (*n)++;
    return 0;
}

/* Hugging Face's merge_word: one symbol per character, byte fallback for
 * characters outside the vocabulary, runs of unknown characters fused into
 * one unk when fuse_unk. Note the order quirk kept from Hugging Face: an unk
 * still pending is only flushed by the next in-vocabulary character, so byte
 * fallback tokens after it come first. */
static int initial_symbols(const struct tok_bpe *bpe, struct tok_bpe_scratch *s, const char *w,
                           size_t len, size_t *n_out)
{
    size_t n = 0;
    int32_t unk_id = -1;
    size_t unk_len = 0;
    for (size_t i = 0; i < len;) {
        size_t cl = tok_utf8_len((unsigned char)w[i]);
        int32_t id = char_id(bpe, s, w + i, cl, i == 0, i + cl == len);
        if (id == -2)
            return -1;
        if (id >= 0) {
            if (unk_id >= 0 && add_symbol(s, &n, unk_id, unk_len))
                return -1;
            unk_id = -1;
            if (add_symbol(s, &n, id, cl))
                return -1;
        } else {
            bool fell_back = false;
            if (bpe->byte_fallback) {
                fell_back = true;
                for (size_t k = 0; k < cl; k++)
                    if (bpe->byte_id[(unsigned char)w[i + k]] < 0)
                        fell_back = false;
                if (fell_back)
                    for (size_t k = 0; k < cl; k++)
                        if (add_symbol(s, &n, bpe->byte_id[(unsigned char)w[i + k]], 1))
                            return -1;
            }
            if (!fell_back && bpe->unk_id >= 0) {
                if (unk_id >= 0 && bpe->fuse_unk) {
                    unk_len += cl;
                } else {
                    if (unk_id >= 0 && add_symbol(s, &n, unk_id, unk_len))
                        return -1;
                    unk_id = bpe->unk_id;
                    unk_len = cl;
                }
            }
        }
        i += cl;
    }
    if (unk_id >= 0 && add_symbol(s, &n, unk_id, unk_len))
        return -1;
    if (n)
        s->sym[n - 1].next = -1;
    *n_out = n;
    return 0;
}

static void heap_push(struct tok_heap_item *h, size_t *n, struct tok_heap_item it)
{
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (h[p].key <= it.key)
            break;
        h[i] = h[p];
        i = p;
    }
    h[i] = it;
}

static struct tok_heap_item heap_pop(struct tok_heap_item *h, size_t *n)
{
    struct tok_heap_item top = h[0], last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && h[c + 1].key < h[c].key)
            c++;
        if (last.key <= h[c].key)
            break;
        h[i] = h[c];
        i = c;
    }
    h[i] = last;
    return top;
}

static inline uint64_t heap_key(uint32_t rank, size_t pos)
{
    return ((uint64_t)rank << 32) | (uint32_t)pos;
}

static int merge_all(const struct tok_bpe *bpe, struct tok_bpe_scratch *s, size_t n)
{
    struct tok_symbol *sym = s->sym;
    /* Every merge removes a symbol and pushes at most two entries. */
    if (tok_grow((void **)&s->heap, &s->heap_cap, 3 * n + 1, sizeof *s->heap))
        return -1;
    struct tok_heap_item *heap = s->heap;
    size_t hn = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        const struct tok_merge_slot *m = tok_bpe_merge(bpe, sym[i].id, sym[i + 1].id);
        if (m)
            heap_push(heap, &hn, (struct tok_heap_item){heap_key(m->rank, i), m->new_id});
    }
    while (hn) {
        struct tok_heap_item top = heap_pop(heap, &hn);
        size_t pos = (uint32_t)top.key;
        if (sym[pos].len == 0 || sym[pos].next < 0)
            continue;
        size_t next = (size_t)sym[pos].next;
        const struct tok_merge_slot *m = tok_bpe_merge(bpe, sym[pos].id, sym[next].id);
        if (!m || m->new_id != top.new_id)
            continue; /* an expired entry */
        sym[pos].id = top.new_id;
        sym[pos].len += sym[next].len;
        sym[pos].next = sym[next].next;
        sym[next].len = 0;
        if (sym[pos].next >= 0)
            sym[sym[pos].next].prev = (int32_t)pos;
        if (sym[pos].prev >= 0) {
            size_t prev = (size_t)sym[pos].prev;
            m = tok_bpe_merge(bpe, sym[prev].id, sym[pos].id);
            if (m)
                heap_push(heap, &hn, (struct tok_heap_item){heap_key(m->rank, prev), m->new_id});
        }
        if (sym[pos].next >= 0) {
            m = tok_bpe_merge(bpe, sym[pos].id, sym[sym[pos].next].id);
            if (m)
                heap_push(heap, &hn, (struct tok_heap_item){heap_key(m->rank, pos), m->new_id});
        }
    }
    return 0;
}

static int bpe_one(const struct tok_bpe *bpe, struct tok_bpe_scratch *s, const char *w, size_t len,
                   int32_t **ids, size_t *n, size_t *cap)
{
    if (bpe->ignore_merges) {
        int32_t id = tok_strmap_get(&bpe->vocab, w, len);
        if (id >= 0)
            return push_id(ids, n, cap, id);
    }
    if (bpe->self_word) {
        int32_t id = tok_strmap_get(&bpe->vocab, w, len);
        if (id >= 0 && id < bpe->n_self && bpe->self_word[id])
            return push_id(ids, n, cap, id);
    }
    size_t ns;
    if (initial_symbols(bpe, s, w, len, &ns))
        return -1;
    if (ns > 1 && merge_all(bpe, s, ns))
        return -1;
    for (size_t i = 0; i < ns; i++)
        if (s->sym[i].len && push_id(ids, n, cap, s->sym[i].id))
            return -1;
    return 0;
}

int tok_bpe_word(const struct tok_bpe *bpe, struct tok_bpe_scratch *s, const char *w, size_t len,
                 int32_t **ids, size_t *n, size_t *cap)
{
    if (!bpe->split_at_metaspace)
        return bpe_one(bpe, s, w, len, ids, n, cap);
    /* Cut before each metaspace that follows another character: the pieces
     * merge exactly as the whole would (checked at load), in less time. */
    const char *ms = bpe->metaspace;
    size_t ml = bpe->metaspace_len;
    size_t start = 0;
    for (size_t i = 1; i + ml <= len; i++) {
        if (w[i] == ms[0] && !memcmp(w + i, ms, ml) && !(i >= ml && !memcmp(w + i - ml, ms, ml))) {
            if (bpe_one(bpe, s, w + start, i - start, ids, n, cap))
                return -1;
            start = i;
            i += ml - 1;
        }
    }
    return bpe_one(bpe, s, w + start, len - start, ids, n, cap);
}

int tok_bpe_mark_self(struct tok_bpe *bpe, char *const *strs, const uint32_t *lens, int32_t n)
{
    struct tok_bpe_scratch s = {0};
    uint8_t *self = calloc(n ? (size_t)n : 1, 1);
    int32_t *ids = NULL;
    size_t cap = 0;
    if (!self)
        return -1;
    for (int32_t id = 0; id < n; id++) {
        size_t k = 0;
        if (!strs[id] || !lens[id])
            continue;
        if (bpe_one(bpe, &s, strs[id], lens[id], &ids, &k, &cap)) {
            free(self);
            free(ids);
            tok_bpe_scratch_free(&s);
            return -1;
        }
        self[id] = k == 1 && ids[0] == id;
    }
    free(ids);
    tok_bpe_scratch_free(&s);
    bpe->self_word = self;
    bpe->n_self = n;
    return 0;
}

void tok_bpe_scratch_free(struct tok_bpe_scratch *s)
{
    free(s->sym);
    free(s->heap);
    free(s->buf);
}
