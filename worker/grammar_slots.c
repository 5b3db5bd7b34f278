#include "grammar_slots.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"
#include "log.h"
#include "tokenizer.h"

struct slot {
    struct folio_grammar_matcher *m; /* NULL: none, or its grammar failed */
    uint64_t request_id;             /* the sequence it is for */
};

struct folio_grammar_slots {
    struct folio_tokenizer *tok;
    struct folio_grammar_vocab *vocab;
    struct folio_grammar_cache *cache;
    int max_seqs;
    bool parallel; /* masks on several threads */
    size_t words;
    struct slot *slots;
    uint32_t *masks; /* [max_seqs][words], by slot */
};

/* Enough for the grammars of a busy server's requests; a miss recompiles. */
#define GRAMMAR_CACHE_ENTRIES 64

int folio_grammar_slots_new(const char *model_dir, int32_t vocab_size, const int *eos_ids,
                            int num_eos, int max_seqs, bool parallel,
                            struct folio_grammar_slots **out, char *err, size_t errlen)
{
    *out = NULL;
    struct folio_grammar_slots *g = calloc(1, sizeof *g);
    if (!g) {
        snprintf(err, errlen, "grammar: out of memory");
        return -1;
    }
    if (folio_tokenizer_load(model_dir, &g->tok, err, errlen) != 0 ||
        folio_grammar_vocab_new(g->tok, vocab_size, eos_ids, num_eos, &g->vocab, err, errlen) !=
            0) {
        folio_grammar_slots_free(g);
        return -1;
    }
    g->max_seqs = max_seqs;
    g->parallel = parallel;
    g->words = folio_grammar_mask_words(g->vocab);
    g->cache = folio_grammar_cache_new(g->vocab, GRAMMAR_CACHE_ENTRIES);
    g->slots = calloc((size_t)max_seqs, sizeof *g->slots);
    g->masks = malloc((size_t)max_seqs * g->words * sizeof *g->masks);
    if (!g->cache || !g->slots || !g->masks) {
        folio_grammar_slots_free(g);
        snprintf(err, errlen, "grammar: out of memory for %d slots", max_seqs);
        return -1;
    }
    *out = g;
    return 0;
}

void folio_grammar_slots_free(struct folio_grammar_slots *g)
{
    if (!g)
        return;
    for (int i = 0; g->slots && i < g->max_seqs; i++)
        folio_grammar_matcher_free(g->slots[i].m);
    free(g->slots);
    free(g->masks);
    folio_grammar_cache_free(g->cache);
    folio_grammar_vocab_free(g->vocab);
    folio_tokenizer_free(g->tok);
    free(g);
}

int folio_grammar_step_init(struct folio_grammar_step *st, int max_seqs)
{
    st->num_seqs = 0;
    st->masked_slot = calloc((size_t)max_seqs, sizeof *st->masked_slot);
    st->request_id = calloc((size_t)max_seqs, sizeof *st->request_id);
    st->failed = calloc((size_t)max_seqs, sizeof *st->failed);
    return st->masked_slot && st->request_id && st->failed ? 0 : -1;
}

void folio_grammar_step_free(struct folio_grammar_step *st)
{
    free(st->masked_slot);
    free(st->request_id);
    free(st->failed);
    memset(st, 0, sizeof *st);
}

bool folio_grammar_plan_constrained(const struct folio_plan_view *v)
{
    for (int32_t i = 0; i < v->hdr->num_seqs; i++)
        if (v->seqs[i].grammar_kind >= 0 && v->seqs[i].sample)
            return true;
    return false;
}

static void drop(struct slot *sl)
{
    folio_grammar_matcher_free(sl->m);
    sl->m = NULL;
}

/* Sequence i of step st failed its grammar: said once in the log, its matcher dropped. */
static void fail(struct folio_grammar_step *st, int i, struct slot *sl, const char *why)
{
    if (!st->failed[i])
        folio_log_error(sl->request_id, "structured output: %s", why);
    st->failed[i] = true;
    st->masked_slot[i] = -1;
    drop(sl);
}

/* A new matcher for the grammar plan entry p brings, with its earlier outputs replayed. */
static void make_matcher(struct folio_grammar_slots *g, const struct folio_plan_view *v,
                         struct folio_grammar_step *st, int i)
{
    const struct folio_plan_seq *p = &v->seqs[i];
    struct slot *sl = &g->slots[p->slot];
    char err[512];
    drop(sl);
    sl->request_id = p->request_id;
    if (folio_grammar_matcher_new(g->cache, (enum folio_grammar_kind)p->grammar_kind,
                                  v->grammar_text + p->grammar_offset, (size_t)p->grammar_len,
                                  &sl->m, err, sizeof err) != 0) {
        fail(st, i, sl, err);
        return;
    }
    for (int32_t k = 0; k < p->num_replay; k++)
        if (folio_grammar_commit(sl->m, v->replay[p->replay_offset + k], err, sizeof err) != 0) {
            fail(st, i, sl, err);
            return;
        }
}

/* The logit bias's bans (-inf: min_tokens' stop ids) leave the mask; false when nothing is
 * left to sample. */
static bool mask_without_bans(uint32_t *mask, size_t words, const struct folio_step_seq *q)
{
    for (int32_t k = 0; k < q->num_bias; k++)
        if (q->bias[k].value == -INFINITY && (size_t)q->bias[k].token < words * 32)
            mask[q->bias[k].token >> 5] &= ~(1u << (q->bias[k].token & 31));
    for (size_t w = 0; w < words; w++)
        if (mask[w])
            return true;
    return false;
}

void folio_grammar_slots_bind(struct folio_grammar_slots *g, const struct folio_plan_view *v,
                              struct folio_grammar_step *st, struct folio_step_seq *seqs)
{
    int n = v->hdr->num_seqs;
    st->num_seqs = n;
    for (int i = 0; i < n; i++) {
        const struct folio_plan_seq *p = &v->seqs[i];
        struct slot *sl = &g->slots[p->slot];
        st->failed[i] = false;
        st->masked_slot[i] = -1;
        st->request_id[i] = p->request_id;
        seqs[i].allowed = NULL;
        if (p->grammar_kind < 0) {
            drop(sl); /* another sequence has the slot now */
            continue;
        }
        if (p->grammar_new)
            make_matcher(g, v, st, i);
        else if (sl->m && sl->request_id != p->request_id)
            drop(sl); /* the slot's previous sequence's: this one's comes with its first sample */
        if (p->sample && !sl->m)
            st->failed[i] = true; /* its grammar failed before (the scheduler ends it): unmasked */
        else if (p->sample)
            st->masked_slot[i] = p->slot;
    }
}

/* The slot's matcher is still the one step st bound for sequence i. */
static struct slot *bound_slot(struct folio_grammar_slots *g, const struct folio_grammar_step *st,
                               int i)
{
    int s = st->masked_slot[i];
    if (s < 0 || !g->slots[s].m || g->slots[s].request_id != st->request_id[i])
        return NULL;
    return &g->slots[s];
}

void folio_grammar_slots_fill(struct folio_grammar_slots *g, struct folio_grammar_step *st,
                              struct folio_step_seq *seqs)
{
    int n = st->num_seqs, masked = 0;
    for (int i = 0; i < n; i++)
        masked += st->masked_slot[i] >= 0;
    /* Masks are the costly part, and each sequence's matcher is its own. A team woken for one
     * mask costs more than the mask, and an OpenMP team spins for a while after its region,
     * on cores a CPU backend computes on. */
    int team = masked < omp_get_max_threads() ? masked : omp_get_max_threads();
#pragma omp parallel for schedule(dynamic, 1) if (g->parallel && masked > 1) num_threads(team)
    for (int i = 0; i < n; i++) {
        struct slot *sl = bound_slot(g, st, i);
        seqs[i].allowed = NULL;
        if (!sl) {
            if (st->masked_slot[i] >= 0)
                st->failed[i] = true; /* an earlier step's token failed it */
            continue;
        }
        uint32_t *mask = g->masks + (size_t)st->masked_slot[i] * g->words;
        char err[512];
        const char *why = NULL;
        if (folio_grammar_fill_mask(sl->m, mask, g->words, err, sizeof err) != 0)
            why = err;
        else if (!mask_without_bans(mask, g->words, &seqs[i]))
            why = "min_tokens bans every token the grammar allows here";
        else
            seqs[i].allowed = mask;
        if (why) {
            st->failed[i] = true;
#pragma omp critical
            folio_log_error(sl->request_id, "structured output: %s", why);
        }
    }
    for (int i = 0; i < n; i++)
        if (st->failed[i] && st->masked_slot[i] >= 0) {
            struct slot *sl = bound_slot(g, st, i);
            if (sl)
                drop(sl);
            st->masked_slot[i] = -1;
        }
}

void folio_grammar_slots_commit(struct folio_grammar_slots *g, struct folio_grammar_step *st,
                                const int32_t *token_ids)
{
    for (int i = 0; i < st->num_seqs; i++) {
        struct slot *sl = bound_slot(g, st, i);
        if (!sl || folio_grammar_is_finished(sl->m))
            continue; /* the token after a complete grammar is its EOS, which ends it */
        char err[512];
        if (folio_grammar_commit(sl->m, token_ids[i], err, sizeof err) != 0)
            fail(st, i, sl, err);
    }
}

bool folio_grammar_step_failed(const struct folio_grammar_step *st, int i)
{
    return i < st->num_seqs && st->failed[i];
}
