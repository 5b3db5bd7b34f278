/* `folio tokenize`: the tokenizer as a filter, one JSON value per line, so
 * that tests and tools can compare it with other tokenizers in one process.
 *
 * Encoding: each input line is a JSON string; the output line is the JSON
 * array of its ids (with the special tokens of the post-processor / config,
 * i.e. BOS for Llama, unless --no-special). --decode: each input line is a
 * JSON array of ids; the output line is the decoded JSON string.
 * A bad line (not JSON, wrong type, an id out of range) prints "null" in its
 * place, so that output line N still answers input line N, and an error
 * naming the line on stderr; the exit status is then 1 once all lines are
 * done. Each answer is flushed at once so a tool may talk to it line by line. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "options.h"
#include "tokenizer.h"

struct tokenize_args {
    const char *model;
    bool special, decode, skip_special;
};

#define T(f) FOLIO_OPT_FIELD(struct tokenize_args, f)
static const struct folio_opt tokenize_flags[] = {
    {"--model", FOLIO_OPT_STR, T(model), NULL, 0, 0, NULL,
     "directory with tokenizer.json (and tokenizer_config.json); required"},
    {"--special", FOLIO_OPT_BOOL, T(special), "true", 0, 0, NULL,
     "encode with the special tokens (BOS) of the template"},
    {"--decode", FOLIO_OPT_BOOL, T(decode), "false", 0, 0, NULL, "decode instead of encode"},
    {"--skip-special", FOLIO_OPT_BOOL, T(skip_special), "false", 0, 0, NULL,
     "when decoding, leave out special tokens such as <s>"},
};

static int encode_line(const struct folio_tokenizer *t, json_t *v, bool add_special, char *err,
                       size_t errlen)
{
    if (!json_is_string(v)) {
        snprintf(err, errlen, "expected a JSON string");
        return -1;
    }
    size_t n;
    int32_t *ids =
        folio_tokenizer_encode(t, json_string_value(v), json_string_length(v), add_special, &n);
    if (!ids) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    putchar('[');
    for (size_t i = 0; i < n; i++)
        printf(i ? ", %d" : "%d", ids[i]);
    puts("]");
    free(ids);
    return 0;
}

static int decode_line(const struct folio_tokenizer *t, json_t *v, bool skip_special, char *err,
                       size_t errlen)
{
    if (!json_is_array(v)) {
        snprintf(err, errlen, "expected a JSON array of token ids");
        return -1;
    }
    size_t n = json_array_size(v);
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    if (!ids) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int32_t vocab = folio_tokenizer_vocab_size(t);
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(v, i);
        json_int_t id = json_integer_value(e);
        if (!json_is_integer(e) || id < 0 || id >= vocab) {
            snprintf(err, errlen, "element %zu is not a token id in [0, %d)", i, vocab);
            free(ids);
            return -1;
        }
        ids[i] = (int32_t)id;
    }
    size_t len;
    char *text = folio_tokenizer_decode(t, ids, n, skip_special, &len);
    free(ids);
    json_t *s = text ? json_stringn_nocheck(text, len) : NULL;
    char *out = s ? json_dumps(s, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
    free(text);
    json_decref(s);
    if (!out) {
        snprintf(err, errlen, "cannot decode these ids");
        return -1;
    }
    puts(out);
    free(out);
    return 0;
}

int folio_tokenize_main(int argc, char **argv)
{
    struct tokenize_args ta;
    struct folio_opt_group g = {NULL, tokenize_flags,
                                sizeof tokenize_flags / sizeof *tokenize_flags, &ta, NULL};
    int prc = folio_opts_parse(
        "folio tokenize",
        "usage: folio tokenize --model DIR [--no-special] [--decode [--skip-special]]\n\n"
        "Reads one JSON value per line on stdin and answers one line each on stdout:\n"
        "  encode (default): a JSON string in, its token ids out as a JSON array\n"
        "  --decode:         a JSON array of ids in, the text out as a JSON string\n"
        "A bad line is answered with null and reported on stderr; the exit status is 1 when\n"
        "any line was bad.",
        &g, 1, argc, argv);
    if (prc != 0)
        return prc > 0 ? 0 : 2;
    const char *model = ta.model;
    bool add_special = ta.special, decode = ta.decode, skip_special = ta.skip_special;
    if (!model) {
        fprintf(stderr, "folio tokenize: --model DIR is required (see --help)\n");
        return 2;
    }
    if (skip_special && !decode) {
        fprintf(stderr, "folio tokenize: --skip-special only applies to --decode\n");
        return 2;
    }
    char err[1024];
    struct folio_tokenizer *t;
    if (folio_tokenizer_load(model, &t, err, sizeof err)) {
        fprintf(stderr, "folio tokenize: %s\n", err);
        return 1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    size_t lineno = 0, bad = 0;
    while ((got = getline(&line, &cap, stdin)) >= 0) {
        lineno++;
        json_error_t je;
        json_t *v = json_loadb(line, (size_t)got, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
        int rc;
        if (!v) {
            snprintf(err, sizeof err, "invalid JSON: %s", je.text);
            rc = -1;
        } else if (decode) {
            rc = decode_line(t, v, skip_special, err, sizeof err);
        } else {
            rc = encode_line(t, v, add_special, err, sizeof err);
        }
        json_decref(v);
        if (rc) {
            bad++;
            puts("null");
            fprintf(stderr, "folio tokenize: stdin line %zu: %s\n", lineno, err);
        }
        fflush(stdout);
    }
    free(line);
    folio_tokenizer_free(t);
    if (bad) {
        fprintf(stderr, "folio tokenize: %zu of %zu lines were bad\n", bad, lineno);
        return 1;
    }
    return 0;
}
