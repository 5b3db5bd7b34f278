/* Compiling a (kind, text) into llguidance's matcher, once: the cache keeps
 * a pristine matcher per grammar and every sequence gets a clone of it
 * (cheap: the clone shares the compiled grammar and its lexer). Refusals are
 * kept too, so a bad or pathological grammar sent again costs a look-up.
 *
 * Bounds: llguidance's default parser limits, which make a grammar past
 * them an error rather than a long compile or a long mask: lexer work while
 * compiling (initial_lexer_fuel), grammar size (max_grammar_size), lexer
 * states (max_lexer_states), Earley items per row (max_items_in_row), and
 * per mask lexer work and items (step_lexer_fuel, step_max_items).
 * verbose_errors is off so a message is about the grammar, not a dump of
 * the parser. */
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar_internal.h"

static const char *const kind_names[] = {
    [FOLIO_GRAMMAR_JSON_OBJECT] = "json_object",
    [FOLIO_GRAMMAR_JSON_SCHEMA] = "json_schema",
    [FOLIO_GRAMMAR_REGEX] = "regex",
    [FOLIO_GRAMMAR_CHOICE] = "choice",
    [FOLIO_GRAMMAR_LARK] = "lark",
};
#define N_KINDS (sizeof kind_names / sizeof kind_names[0])
_Static_assert(N_KINDS == FOLIO_GRAMMAR_NUM_KINDS, "a name for every kind");

const char *folio_grammar_kind_name(enum folio_grammar_kind kind)
{
    return (unsigned)kind < N_KINDS ? kind_names[kind] : "unknown";
}

int folio_grammar_kind_parse(const char *name, enum folio_grammar_kind *out)
{
    for (size_t k = 0; k < N_KINDS; k++)
        if (!strcmp(name, kind_names[k])) {
            *out = (enum folio_grammar_kind)k;
            return 0;
        }
    return -1;
}

struct entry {
    uint64_t hash;
    enum folio_grammar_kind kind;
    char *text;
    size_t len;
    struct LlgMatcher *pristine; /* NULL: refused, error says why */
    char *error;
    uint64_t used; /* 0: an empty slot */
};

struct folio_grammar_cache {
    const struct folio_grammar_vocab *v;
    pthread_mutex_t lock;
    struct entry *e;
    size_t cap;
    uint64_t clock;
};

struct folio_grammar_cache *folio_grammar_cache_new(const struct folio_grammar_vocab *v,
                                                    size_t capacity)
{
    struct folio_grammar_cache *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->cap = capacity ? capacity : 1;
    c->e = calloc(c->cap, sizeof *c->e);
    if (!c->e || pthread_mutex_init(&c->lock, NULL)) {
        free(c->e);
        free(c);
        return NULL;
    }
    c->v = v;
    return c;
}

const struct folio_grammar_vocab *grammar_cache_vocab(const struct folio_grammar_cache *c)
{
    return c->v;
}

static void entry_clear(struct entry *e)
{
    llg_free_matcher(e->pristine);
    free(e->text);
    free(e->error);
    memset(e, 0, sizeof *e);
}

void folio_grammar_cache_free(struct folio_grammar_cache *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->cap; i++)
        entry_clear(&c->e[i]);
    free(c->e);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

static uint64_t key_hash(enum folio_grammar_kind kind, const char *text, size_t len)
{
    uint64_t h = 1469598103934665603ull ^ (uint64_t)kind; /* FNV-1a */
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)text[i]) * 1099511628211ull;
    return h;
}

static struct entry *find(struct folio_grammar_cache *c, uint64_t hash,
                          enum folio_grammar_kind kind, const char *text, size_t len)
{
    for (size_t i = 0; i < c->cap; i++) {
        struct entry *e = &c->e[i];
        if (e->used && e->hash == hash && e->kind == kind && e->len == len &&
            !memcmp(e->text, text, len))
            return e;
    }
    return NULL;
}

/* Appends codepoint cp to a regex as a literal. */
static void regex_literal(char *out, size_t *n, uint32_t cp)
{
    if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9'))
        out[(*n)++] = (char)cp;
    else
        *n += (size_t)sprintf(out + *n, "\\x{%X}", (unsigned)cp);
}

/* A choice list (a JSON array of strings) as a regex of escaped alternatives. */
static char *choice_regex(const char *text, size_t len, char *err, size_t errlen)
{
    json_error_t jerr;
    json_t *list = json_loadb(text, len, JSON_DECODE_ANY, &jerr);
    if (!list || !json_is_array(list) || !json_array_size(list)) {
        snprintf(err, errlen, "invalid choice: %s",
                 list ? "not a non-empty JSON array of strings" : jerr.text);
        json_decref(list);
        return NULL;
    }
    size_t cap = 8, i;
    json_t *s;
    json_array_foreach(list, i, s)
    {
        if (!json_is_string(s)) {
            snprintf(err, errlen, "invalid choice: item %zu is not a string", i);
            json_decref(list);
            return NULL;
        }
        cap += 1 + 10 * json_string_length(s); /* "\x{10FFFF}" per byte at most */
    }
    char *re = malloc(cap);
    if (!re) {
        snprintf(err, errlen, "invalid choice: out of memory");
        json_decref(list);
        return NULL;
    }
    size_t n = 0;
    n += (size_t)sprintf(re, "(?:");
    json_array_foreach(list, i, s)
    {
        const unsigned char *p = (const unsigned char *)json_string_value(s);
        size_t sl = json_string_length(s);
        if (i)
            re[n++] = '|';
        /* jansson holds valid UTF-8 (NUL included as a character). */
        for (size_t k = 0; k < sl;) {
            uint32_t cp = p[k];
            size_t cl = cp < 0x80 ? 1 : cp < 0xE0 ? 2 : cp < 0xF0 ? 3 : 4;
            if (cl > 1)
                cp &= 0x3Fu >> (cl - 1);
            for (size_t j = 1; j < cl; j++)
                cp = (cp << 6) | (p[k + j] & 0x3F);
            regex_literal(re, &n, cp);
            k += cl;
        }
    }
    re[n++] = ')';
    re[n] = 0;
    json_decref(list);
    return re;
}

void grammar_trim_error(char *msg)
{
    /* A caught panic carries a backtrace, and every error a marker that verbose
     * errors are off: neither says anything about the grammar. */
    static const char *const tails[] = {"\n<backtrace>", "\n<non-verbose/>"};
    for (size_t i = 0; i < sizeof tails / sizeof tails[0]; i++) {
        char *t = strstr(msg, tails[i]);
        if (t)
            *t = 0;
    }
    size_t n = strlen(msg);
    while (n && msg[n - 1] == '\n')
        msg[--n] = 0;
}

/* Compiles (kind, text): a pristine matcher, or NULL with the message in *error. */
static struct LlgMatcher *compile(const struct folio_grammar_vocab *v, enum folio_grammar_kind kind,
                                  const char *text, size_t len, char **error)
{
    char msg[1024] = "";
    const char *name = folio_grammar_kind_name(kind), *type = name;
    char *data = NULL;
    struct LlgMatcher *m = NULL;
    if ((unsigned)kind >= N_KINDS) {
        snprintf(msg, sizeof msg, "unknown grammar kind %d", (int)kind);
        goto out;
    }
    char why[512];
    if (grammar_precheck(kind, text, len, why, sizeof why)) {
        snprintf(msg, sizeof msg, "invalid %s: %s", name, why);
        goto out;
    }
    if (kind == FOLIO_GRAMMAR_CHOICE) {
        data = choice_regex(text, len, msg, sizeof msg);
        type = "regex";
    } else {
        data = malloc(len + 1);
        if (data) {
            memcpy(data, text, len);
            data[len] = 0;
        } else {
            snprintf(msg, sizeof msg, "invalid %s: out of memory", name);
        }
    }
    if (!data)
        goto out;
    struct LlgConstraintInit init;
    llg_constraint_init_set_defaults(&init, v->llg);
    init.log_buffer_level = 0;
    init.log_stderr_level = 0;
    init.limits.verbose_errors = false;
    m = llg_new_matcher(&init, type, data);
    if (m && llg_matcher_is_error(m)) {
        const char *e = llg_matcher_get_error(m);
        snprintf(msg, sizeof msg, "invalid %s: %s", name, e ? e : "refused by llguidance");
        grammar_trim_error(msg);
        llg_free_matcher(m);
        m = NULL;
    } else if (!m) {
        snprintf(msg, sizeof msg, "invalid %s: out of memory", name);
    }
out:
    free(data);
    *error = m ? NULL : strdup(msg);
    return m;
}

/* Under the lock: a clone of e's matcher, or its error. */
static int take(const struct entry *e, struct LlgMatcher **out, char *err, size_t errlen)
{
    if (!e->pristine) {
        snprintf(err, errlen, "%s", e->error ? e->error : "out of memory");
        return -1;
    }
    *out = llg_clone_matcher(e->pristine);
    if (!*out) {
        snprintf(err, errlen, "grammar: out of memory");
        return -1;
    }
    return 0;
}

int grammar_cache_clone(struct folio_grammar_cache *c, enum folio_grammar_kind kind,
                        const char *text, size_t len, struct LlgMatcher **out, char *err,
                        size_t errlen)
{
    *out = NULL;
    if (kind == FOLIO_GRAMMAR_JSON_OBJECT)
        len = 0; /* the text means nothing: one entry for all */
    uint64_t hash = key_hash(kind, text, len);
    pthread_mutex_lock(&c->lock);
    struct entry *e = find(c, hash, kind, text, len);
    if (e) {
        e->used = ++c->clock;
        int rc = take(e, out, err, errlen);
        pthread_mutex_unlock(&c->lock);
        return rc;
    }
    pthread_mutex_unlock(&c->lock);

    /* Compiled outside the lock: other grammars go on meanwhile. */
    char *error = NULL;
    struct LlgMatcher *m = compile(c->v, kind, text, len, &error);
    char *copy = malloc(len + 1);
    if (!copy || (!m && !error)) {
        llg_free_matcher(m);
        free(error);
        free(copy);
        snprintf(err, errlen, "grammar: out of memory");
        return -1;
    }
    memcpy(copy, text, len);
    copy[len] = 0;

    pthread_mutex_lock(&c->lock);
    e = find(c, hash, kind, text, len); /* another thread may have been quicker */
    if (e) {
        llg_free_matcher(m);
        free(error);
        free(copy);
    } else {
        e = &c->e[0];
        for (size_t i = 1; i < c->cap && e->used; i++)
            if (!c->e[i].used || c->e[i].used < e->used)
                e = &c->e[i];
        entry_clear(e);
        *e = (struct entry){hash, kind, copy, len, m, error, 0};
    }
    e->used = ++c->clock;
    int rc = take(e, out, err, errlen);
    pthread_mutex_unlock(&c->lock);
    return rc;
}

int folio_grammar_compile(struct folio_grammar_cache *c, enum folio_grammar_kind kind,
                          const char *text, size_t len, char *err, size_t errlen)
{
    struct LlgMatcher *m;
    if (grammar_cache_clone(c, kind, text, len, &m, err, errlen))
        return -1;
    llg_free_matcher(m);
    return 0;
}
