/* Added tokens (special tokens such as <|im_start|>, and user-defined
 * ones): read from tokenizer.json or pushed one by one, then matched in the
 * text before the pre-tokenizer by a byte trie (tokenizer_encode.c). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

static int trie_node(struct tok_trie *tr, uint8_t byte)
{
    if (tok_grow((void **)&tr->nodes, &tr->cap, tr->n + 1, sizeof *tr->nodes))
        return -1;
    tr->nodes[tr->n] = (struct tok_trie_node){-1, -1, -1, byte};
    return (int)tr->n++;
}

static int trie_add(struct tok_trie *tr, const char *s, size_t len, int32_t token)
{
    if (!tr->n && trie_node(tr, 0) < 0)
        return -1;
    int32_t node = 0;
    tr->first_byte[(uint8_t)s[0] >> 3] |= (uint8_t)(1u << ((uint8_t)s[0] & 7));
    for (size_t i = 0; i < len; i++) {
        int32_t c = tr->nodes[node].first_child;
        while (c >= 0 && tr->nodes[c].byte != (uint8_t)s[i])
            c = tr->nodes[c].next_sibling;
        if (c < 0) {
            c = trie_node(tr, (uint8_t)s[i]);
            if (c < 0)
                return -1;
            tr->nodes[c].next_sibling = tr->nodes[node].first_child;
            tr->nodes[node].first_child = c;
        }
        node = c;
    }
    tr->nodes[node].token = token;
    return 0;
}

/* The normalizer applied to a whole string (for normalized added tokens). */
static int normalize_string(const struct folio_tokenizer *t, const char *s, size_t len, char **out,
                            size_t *out_len)
{
    char *tmp = NULL;
    size_t cap = 0, tmp_cap = 0;
    *out = NULL;
    int rc = tok_normalize(t, s, len, out, &cap, &tmp, &tmp_cap, out_len);
    free(tmp);
    return rc;
}

int tok_added_push(struct folio_tokenizer *t, struct tok_added a, const char *content, size_t len)
{
    struct tok_added *p = realloc(t->added, (t->n_added + 1) * sizeof *p);
    if (!p)
        return -1;
    t->added = p;
    a.len = len;
    a.content = tok_dup_bytes(content, len);
    if (!a.content)
        return -1;
    if (a.normalized) {
        if (normalize_string(t, content, len, &a.pattern, &a.pattern_len)) {
            free(a.content);
            free(a.pattern);
            return -1;
        }
    } else {
        a.pattern = tok_dup_bytes(content, len);
        a.pattern_len = len;
        if (!a.pattern) {
            free(a.content);
            return -1;
        }
    }
    t->added[t->n_added++] = a;
    return 0;
}

int tok_added_finish(struct folio_tokenizer *t)
{
    struct tok_strmap specials;
    if (tok_strmap_init(&specials, 2 * t->n_added + 8))
        return -1;
    /* A later entry for the same id replaces an earlier one (a map by id). */
    for (size_t k = 0; k < t->n_added; k++) {
        struct tok_added *a = &t->added[k];
        bool replaced = false;
        for (size_t later = k + 1; later < t->n_added; later++)
            if (t->added[later].id == a->id)
                replaced = true;
        if (replaced)
            continue;
        /* Decoding gives back what was matched: the normalized form for a
         * normalized token (Hugging Face's simple_id_to_token). */
        if (trie_add(a->normalized ? &t->norm_trie : &t->raw_trie, a->pattern, a->pattern_len,
                     (int32_t)k) ||
            tok_set_id_str(t, a->id, a->pattern, a->pattern_len))
            goto fail;
    }
    for (size_t k = 0; k < t->n_added; k++)
        if (t->added[k].special &&
            tok_strmap_put(&specials, t->added[k].content, t->added[k].len, 1))
            goto fail;
    for (int32_t id = 0; id < t->n_ids; id++)
        if (t->id_str[id] && tok_strmap_get(&specials, t->id_str[id], t->id_len[id]) >= 0)
            t->id_special[id] = 1;
    tok_strmap_free(&specials);
    return 0;
fail:
    tok_strmap_free(&specials);
    return -1;
}

int tok_added_tokens_parse(struct folio_tokenizer *t, const void *json_root, char *err,
                           size_t errlen)
{
    json_t *list = json_object_get((json_t *)json_root, "added_tokens"), *v;
    struct tok_strmap added_ids;
    size_t i;
    if (list && !json_is_array(list)) {
        snprintf(err, errlen, "tokenizer.json: \"added_tokens\" is not a list");
        return -1;
    }
    if (tok_strmap_init(&added_ids, json_array_size(list) + 8))
        return -1;
    /* Hugging Face numbers added tokens that are not in the vocab from the
     * vocab's size on (its token count, not its largest id). */
    int32_t next_id = (int32_t)t->bpe.vocab.count;
    json_array_foreach(list, i, v)
    {
        json_t *content = json_object_get(v, "content");
        if (!json_is_string(content)) {
            snprintf(err, errlen, "tokenizer.json: added_tokens[%zu] has no \"content\" string", i);
            goto fail;
        }
        size_t len = json_string_length(content);
        const char *s = json_string_value(content);
        if (!len)
            continue; /* Hugging Face ignores empty added tokens */
        struct tok_added a = {
            .single_word = json_is_true(json_object_get(v, "single_word")),
            .lstrip = json_is_true(json_object_get(v, "lstrip")),
            .rstrip = json_is_true(json_object_get(v, "rstrip")),
            .normalized = !json_is_false(json_object_get(v, "normalized")),
            .special = json_is_true(json_object_get(v, "special")),
        };
        a.id = tok_strmap_get(&added_ids, s, len);
        if (a.id < 0)
            a.id = tok_strmap_get(&t->bpe.vocab, s, len);
        if (a.id < 0)
            a.id = next_id++;
        if (a.id >= t->n_ids) {
            snprintf(err, errlen, "tokenizer.json: added_tokens[%zu] gets id %d, too large", i,
                     a.id);
            goto fail;
        }
        if (tok_added_push(t, a, s, len) ||
            tok_strmap_put(&added_ids, t->added[t->n_added - 1].content, len, a.id))
            goto fail;
    }
    tok_strmap_free(&added_ids);
    return tok_added_finish(t);
fail:
    tok_strmap_free(&added_ids);
    return -1;
}
