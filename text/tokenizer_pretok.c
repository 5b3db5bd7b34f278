/* Pre-tokenizers: cutting a normalized piece into the words BPE sees.
 *
 *  - Metaspace (Llama-2 style): spaces become "▁", a word starts at each;
 *    alone (or the only member of a Sequence).
 *  - Split (a Regex or a String pattern; behaviours Removed, Isolated,
 *    MergedWithPrevious, MergedWithNext, Contiguous; invert), Digits (a Split
 *    on \p{N}, each digit alone or runs together) and ByteLevel
 *    (add_prefix_space, use_regex with GPT-2's pattern; the bytes of each word
 *    spelled in GPT-2's alphabet), in a Sequence with ByteLevel last.
 *
 * Hugging Face runs these regexes with Oniguruma; Folio with PCRE2 in UTF
 * mode with Unicode properties (\p{L}, \p{N} are the Unicode general
 * categories in both). The one class they differ on is \s: PCRE2's takes
 * U+180E and U+0085 differently from Oniguruma's White_Space, so every \s and
 * \S in a pattern is written out as the White_Space set before compiling.
 * The match loop is Oniguruma's find_iter (an empty match right after a
 * match is skipped), and the behaviours fold matches exactly as
 * NormalizedString::split does, empty pieces dropped. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "tokenizer_internal.h"

/* Unicode White_Space, which is Oniguruma's (and Rust regex's) \s. */
#define WHITE_SPACE                                                                                \
    "\\t-\\r "                                                                                     \
    "\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"
static const char GPT2_PATTERN[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

/* ---- compiling patterns */

static int out_put(char **o, size_t *n, size_t *cap, const char *s, size_t len)
{
    if (tok_grow((void **)o, cap, *n + len + 1, 1))
        return -1;
    memcpy(*o + *n, s, len);
    *n += len;
    (*o)[*n] = 0;
    return 0;
}

/* The pattern with \s and \S written out as White_Space sets; NULL with err
 * set for \S inside a class, which has no such spelling. */
static char *rewrite_space_classes(const char *p, size_t len, char *err, size_t errlen)
{
    char *o = NULL;
    size_t n = 0, cap = 0;
    bool in_class = false;
    int rc = 0;
    for (size_t i = 0; i < len && !rc; i++) {
        char c = p[i];
        if (c == '\\' && i + 1 < len) {
            char e = p[++i];
            if (e == 's')
                rc = out_put(&o, &n, &cap, in_class ? WHITE_SPACE : "[" WHITE_SPACE "]",
                             strlen(WHITE_SPACE) + (in_class ? 0 : 2));
            else if (e == 'S' && !in_class)
                rc = out_put(&o, &n, &cap, "[^" WHITE_SPACE "]", strlen(WHITE_SPACE) + 3);
            else if (e == 'S') {
                snprintf(err, errlen, "pre_tokenizer Split: \\S inside [...] is not supported");
                free(o);
                return NULL;
            } else
                rc = out_put(&o, &n, &cap, p + i - 1, 2);
            continue;
        }
        if (c == '[' && !in_class) {
            in_class = true;
            rc = out_put(&o, &n, &cap, p + i, 1);
            /* A ']' right after '[' or '[^' is a literal. */
            if (!rc && i + 1 < len && p[i + 1] == '^')
                rc = out_put(&o, &n, &cap, p + ++i, 1);
            if (!rc && i + 1 < len && p[i + 1] == ']')
                rc = out_put(&o, &n, &cap, p + ++i, 1);
            continue;
        }
        if (c == ']' && in_class)
            in_class = false;
        rc = out_put(&o, &n, &cap, p + i, 1);
    }
    if (rc || (!o && out_put(&o, &n, &cap, "", 0))) {
        free(o);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    return o;
}

static pcre2_code *compile(const char *pattern, size_t len, bool literal, char *err, size_t errlen)
{
    char *rewritten = literal ? NULL : rewrite_space_classes(pattern, len, err, errlen);
    if (!literal && !rewritten)
        return NULL;
    int code;
    PCRE2_SIZE offset;
    uint32_t opts = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
    pcre2_code *re =
        pcre2_compile((PCRE2_SPTR)(literal ? pattern : rewritten),
                      literal ? len : PCRE2_ZERO_TERMINATED, opts, &code, &offset, NULL);
    free(rewritten);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(code, msg, sizeof msg);
        snprintf(err, errlen, "pre_tokenizer Split: the pattern \"%.*s\" does not compile: %s",
                 (int)(len > 200 ? 200 : len), pattern, (const char *)msg);
        return NULL;
    }
    /* Without JIT (not built for this CPU) the interpreter gives the same matches. */
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
    return re;
}

static int add_op(struct folio_tokenizer *t, struct tok_pre_op op, char *err, size_t errlen)
{
    if (t->n_pre && t->pre[t->n_pre - 1].kind == TOK_PRE_BYTELEVEL) {
        pcre2_code_free(op.re);
        snprintf(err, errlen, "pre_tokenizer: ByteLevel must come last in the Sequence");
        return -1;
    }
    struct tok_pre_op *p = realloc(t->pre, (t->n_pre + 1) * sizeof *p);
    if (!p) {
        pcre2_code_free(op.re);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    t->pre = p;
    t->pre[t->n_pre++] = op;
    return 0;
}

int tok_pre_add_split(struct folio_tokenizer *t, const char *pattern, size_t len, bool literal,
                      enum tok_split_behavior behavior, bool invert, char *err, size_t errlen)
{
    struct tok_pre_op op = {.kind = TOK_PRE_SPLIT, .behavior = behavior, .invert = invert};
    op.re = compile(pattern, len, literal, err, errlen);
    return op.re ? add_op(t, op, err, errlen) : -1;
}

int tok_pre_add_byte_level(struct folio_tokenizer *t, bool add_prefix_space, bool use_regex,
                           char *err, size_t errlen)
{
    struct tok_pre_op op = {.kind = TOK_PRE_BYTELEVEL, .add_prefix_space = add_prefix_space};
    if (use_regex && !(op.re = compile(GPT2_PATTERN, strlen(GPT2_PATTERN), false, err, errlen)))
        return -1;
    return add_op(t, op, err, errlen);
}

void tok_pre_free(struct folio_tokenizer *t)
{
    for (size_t k = 0; k < t->n_pre; k++)
        pcre2_code_free(t->pre[k].re);
    free(t->pre);
    t->pre = NULL;
    t->n_pre = 0;
}

/* ---- reading tokenizer.json */

static int parse_metaspace(struct folio_tokenizer *t, json_t *p, char *err, size_t errlen)
{
    struct tok_metaspace *m = &t->metaspace;
    json_t *r = json_object_get(p, "replacement");
    const char *repl = json_string_value(r);
    if (!repl || !json_string_length(r) ||
        json_string_length(r) != tok_utf8_len((unsigned char)repl[0])) {
        snprintf(err, errlen, "pre_tokenizer Metaspace needs a one-character \"replacement\"");
        return -1;
    }
    m->repl_len = json_string_length(r);
    memcpy(m->repl, repl, m->repl_len);
    m->scheme = TOK_PREPEND_ALWAYS;
    const char *scheme = json_string_value(json_object_get(p, "prepend_scheme"));
    if (scheme && !strcmp(scheme, "first"))
        m->scheme = TOK_PREPEND_FIRST;
    else if (scheme && !strcmp(scheme, "never"))
        m->scheme = TOK_PREPEND_NEVER;
    else if (scheme && strcmp(scheme, "always")) {
        snprintf(err, errlen, "pre_tokenizer Metaspace prepend_scheme \"%s\" is unknown", scheme);
        return -1;
    }
    if (json_is_false(json_object_get(p, "add_prefix_space")))
        m->scheme = TOK_PREPEND_NEVER;
    m->split = !json_is_false(json_object_get(p, "split"));
    t->has_metaspace = true;
    return 0;
}

static int parse_split(struct folio_tokenizer *t, json_t *p, char *err, size_t errlen)
{
    static const char *const names[] = {"Removed", "Isolated", "MergedWithPrevious",
                                        "MergedWithNext", "Contiguous"};
    const char *behavior = json_string_value(json_object_get(p, "behavior"));
    json_t *pat = json_object_get(p, "pattern");
    json_t *regex = json_object_get(pat, "Regex"), *string = json_object_get(pat, "String");
    json_t *text = json_is_string(regex) ? regex : string;
    int b = -1;
    for (int k = 0; behavior && k < 5; k++)
        if (!strcmp(behavior, names[k]))
            b = k;
    if (b < 0 || !json_is_string(text)) {
        snprintf(err, errlen,
                 "pre_tokenizer Split needs a {\"Regex\"|\"String\": ...} pattern and a behavior "
                 "(Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous)%s%s",
                 behavior ? "; got " : "", behavior ? behavior : "");
        return -1;
    }
    return tok_pre_add_split(t, json_string_value(text), json_string_length(text), text == string,
                             (enum tok_split_behavior)b, json_is_true(json_object_get(p, "invert")),
                             err, errlen);
}

static int parse_one(struct folio_tokenizer *t, json_t *p, char *err, size_t errlen)
{
    const char *type = json_string_value(json_object_get(p, "type"));
    if (!type)
        type = "?";
    if (!strcmp(type, "Sequence")) {
        json_t *list = json_object_get(p, "pretokenizers"), *v;
        size_t i;
        if (!json_is_array(list)) {
            snprintf(err, errlen, "pre_tokenizer Sequence has no \"pretokenizers\" list");
            return -1;
        }
        json_array_foreach(list, i, v)
        {
            if (parse_one(t, v, err, errlen))
                return -1;
        }
        return 0;
    }
    if (!strcmp(type, "Metaspace"))
        return parse_metaspace(t, p, err, errlen);
    if (!strcmp(type, "Split"))
        return parse_split(t, p, err, errlen);
    if (!strcmp(type, "Digits")) {
        bool each = json_is_true(json_object_get(p, "individual_digits"));
        return tok_pre_add_split(t, each ? "\\p{N}" : "\\p{N}+", each ? 5 : 6, false,
                                 TOK_SPLIT_ISOLATED, false, err, errlen);
    }
    if (!strcmp(type, "ByteLevel"))
        return tok_pre_add_byte_level(t, json_is_true(json_object_get(p, "add_prefix_space")),
                                      !json_is_false(json_object_get(p, "use_regex")), err, errlen);
    snprintf(err, errlen, "pre_tokenizer type \"%s\" is not supported", type);
    return -1;
}

int tok_pre_tokenizer_parse(struct folio_tokenizer *t, const void *json_pre_tokenizer, char *err,
                            size_t errlen)
{
    json_t *p = (json_t *)json_pre_tokenizer;
    char sub[400] = "";
    if (!p || json_is_null(p))
        return 0;
    if (parse_one(t, p, sub, sizeof sub)) {
        snprintf(err, errlen, "tokenizer.json: %s", sub);
        return -1;
    }
    if (t->has_metaspace && t->n_pre) {
        snprintf(err, errlen,
                 "tokenizer.json: pre_tokenizer Metaspace with Split, Digits or "
                 "ByteLevel in one Sequence is not supported");
        return -1;
    }
    return 0;
}

/* ---- running them */

/* The pieces of s[0..len) by re, as Hugging Face's Split with behavior and
 * invert, appended to out with offsets shifted by base. */
static int split_piece(struct tok_encoder *e, const pcre2_code *re,
                       enum tok_split_behavior behavior, bool invert, const char *s, size_t len,
                       size_t base, struct tok_span_vec *out)
{
    struct tok_span_vec *found = &e->found;
    size_t prev = 0, from = 0, last_match_end = SIZE_MAX;
    found->n = 0;
    while (from <= len) {
        int rc = pcre2_match(re, (PCRE2_SPTR)s, len, from, PCRE2_NO_UTF_CHECK, e->md, NULL);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
            rc = pcre2_match(re, (PCRE2_SPTR)s, len, from, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, e->md,
                             NULL);
        if (rc == PCRE2_ERROR_NOMATCH)
            break;
        if (rc < 0)
            return -1;
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(e->md);
        size_t ms = ov[0], me = ov[1];
        if (ms == me && me == last_match_end) {
            if (from >= len)
                break;
            from += tok_utf8_len((unsigned char)s[from]);
            continue;
        }
        if (prev != ms && tok_span_push(found, (struct tok_span){prev, ms, -1, invert}))
            return -1;
        if (tok_span_push(found, (struct tok_span){ms, me, -1, !invert}))
            return -1;
        prev = from = last_match_end = me;
    }
    if (prev != len && tok_span_push(found, (struct tok_span){prev, len, -1, invert}))
        return -1;

    /* Fold as NormalizedString::split; "match" then means "remove". */
    struct tok_span *v = found->v;
    size_t n = 0;
    bool previous_match = false;
    if (behavior == TOK_SPLIT_MERGED_NEXT) {
        for (size_t i = found->n; i-- > 0;) {
            bool m = v[i].match;
            if (m && !previous_match && n)
                v[found->n - n].start = v[i].start;
            else
                v[found->n - ++n] = (struct tok_span){v[i].start, v[i].stop, -1, false};
            previous_match = m;
        }
        memmove(v, v + found->n - n, n * sizeof *v);
    } else {
        for (size_t i = 0; i < found->n; i++) {
            bool m = v[i].match;
            bool join = behavior == TOK_SPLIT_CONTIGUOUS    ? m == previous_match
                        : behavior == TOK_SPLIT_MERGED_PREV ? m && !previous_match
                                                            : false;
            if (join && n)
                v[n - 1].stop = v[i].stop;
            else
                v[n++] = (struct tok_span){v[i].start, v[i].stop, -1,
                                           behavior == TOK_SPLIT_REMOVED && m};
            previous_match = m;
        }
    }
    for (size_t i = 0; i < n; i++)
        if (!v[i].match && v[i].stop > v[i].start &&
            tok_span_push(out, (struct tok_span){base + v[i].start, base + v[i].stop, -1, false}))
            return -1;
    return 0;
}

static int byte_level_word(struct tok_encoder *e, const char *w, size_t len)
{
    if (tok_grow((void **)&e->mapped, &e->mapped_cap, 2 * len + 1, 1))
        return -1;
    size_t n = tok_byte_level_map(e->t, w, len, e->mapped);
    return tok_bpe_word(&e->t->bpe, &e->bpe, e->mapped, n, &e->ids, &e->n, &e->cap);
}

/* ByteLevel on one piece: a space in front unless there is one, GPT-2's
 * regex, then each word's bytes spelled in the alphabet and BPE'd. */
static int byte_level(struct tok_encoder *e, const struct tok_pre_op *op, const char *s, size_t len)
{
    if (op->add_prefix_space && s[0] != ' ') {
        if (tok_grow((void **)&e->prefixed, &e->prefixed_cap, len + 2, 1))
            return -1;
        e->prefixed[0] = ' ';
        memcpy(e->prefixed + 1, s, len);
        s = e->prefixed;
        len++;
    }
    if (!op->re)
        return byte_level_word(e, s, len);
    e->next.n = 0;
    if (split_piece(e, op->re, TOK_SPLIT_ISOLATED, false, s, len, 0, &e->next))
        return -1;
    for (size_t i = 0; i < e->next.n; i++)
        if (byte_level_word(e, s + e->next.v[i].start, e->next.v[i].stop - e->next.v[i].start))
            return -1;
    return 0;
}

static int split_and_model(struct tok_encoder *e, const char *s, size_t len)
{
    const struct folio_tokenizer *t = e->t;
    if (!e->md && !(e->md = pcre2_match_data_create(8, NULL)))
        return -1;
    e->words.n = 0;
    if (tok_span_push(&e->words, (struct tok_span){0, len, -1, false}))
        return -1;
    size_t k = 0;
    for (; k < t->n_pre && t->pre[k].kind == TOK_PRE_SPLIT; k++) {
        const struct tok_pre_op *op = &t->pre[k];
        e->next.n = 0;
        for (size_t i = 0; i < e->words.n; i++) {
            struct tok_span w = e->words.v[i];
            if (split_piece(e, op->re, op->behavior, op->invert, s + w.start, w.stop - w.start,
                            w.start, &e->next))
                return -1;
        }
        struct tok_span_vec tmp = e->words;
        e->words = e->next;
        e->next = tmp;
    }
    for (size_t i = 0; i < e->words.n; i++) {
        struct tok_span w = e->words.v[i];
        int rc = k < t->n_pre ? byte_level(e, &t->pre[k], s + w.start, w.stop - w.start)
                              : tok_bpe_word(&t->bpe, &e->bpe, s + w.start, w.stop - w.start,
                                             &e->ids, &e->n, &e->cap);
        if (rc)
            return -1;
    }
    return 0;
}

/* Metaspace: spaces become the replacement, one in front as the scheme says,
 * and (split) each replacement begins a new word. */
static int metaspace_and_model(struct tok_encoder *e, const char *s, size_t len, bool at_origin)
{
    const struct folio_tokenizer *t = e->t;
    const struct tok_metaspace *m = &t->metaspace;
    if (tok_grow((void **)&e->pre, &e->pre_cap, (len + 1) * m->repl_len + 1, 1))
        return -1;
    size_t n = 0;
    bool starts =
        len >= 1 && (s[0] == ' ' || (len >= m->repl_len && !memcmp(s, m->repl, m->repl_len)));
    if (!starts &&
        (m->scheme == TOK_PREPEND_ALWAYS || (m->scheme == TOK_PREPEND_FIRST && at_origin))) {
        memcpy(e->pre, m->repl, m->repl_len);
        n = m->repl_len;
    }
    for (size_t i = 0; i < len; i++)
        if (s[i] == ' ') {
            memcpy(e->pre + n, m->repl, m->repl_len);
            n += m->repl_len;
        } else {
            e->pre[n++] = s[i];
        }
    const char *w = e->pre;
    if (!m->split)
        return tok_bpe_word(&t->bpe, &e->bpe, w, n, &e->ids, &e->n, &e->cap);
    size_t start = 0;
    for (size_t i = 1; i + m->repl_len <= n; i++)
        if (!memcmp(w + i, m->repl, m->repl_len)) {
            if (tok_bpe_word(&t->bpe, &e->bpe, w + start, i - start, &e->ids, &e->n, &e->cap))
                return -1;
            start = i;
            i += m->repl_len - 1;
        }
    return tok_bpe_word(&t->bpe, &e->bpe, w + start, n - start, &e->ids, &e->n, &e->cap);
}

int tok_pretokenize_and_model(struct tok_encoder *e, const char *s, size_t len, bool at_origin)
{
    const struct folio_tokenizer *t = e->t;
    if (t->has_metaspace)
        return metaspace_and_model(e, s, len, at_origin);
    if (t->n_pre)
        return split_and_model(e, s, len);
    return tok_bpe_word(&t->bpe, &e->bpe, s, len, &e->ids, &e->n, &e->cap);
}
