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
#include "default_model.h"
#include "options.h"
#include "tokenizer.h"

struct tokenize_args {
    const char *model;
    bool special, decode, skip_special, info, stream;
};

#define T(f) FOLIO_OPT_FIELD(struct tokenize_args, f)
static const struct folio_opt tokenize_flags[] = {
    {"--model", FOLIO_OPT_STR, T(model), NULL, 0, 0, NULL,
     "directory with tokenizer.json (and tokenizer_config.json), or a .gguf file (or a "
     "directory holding one); default: SmolLM2-135M-Instruct, fetched by deploy/setup.sh"},
    {"--special", FOLIO_OPT_BOOL, T(special), "true", 0, 0, NULL,
     "encode with the special tokens (BOS) of the template"},
    {"--decode", FOLIO_OPT_BOOL, T(decode), "false", 0, 0, NULL, "decode instead of encode"},
    {"--skip-special", FOLIO_OPT_BOOL, T(skip_special), "false", 0, 0, NULL,
     "when decoding, leave out special tokens such as <s>"},
    {"--info", FOLIO_OPT_BOOL, T(info), "false", 0, 0, NULL,
     "print the tokenizer's vocab size, BOS/EOS and chat template as one JSON object, and "
     "read nothing"},
    {"--stream", FOLIO_OPT_BOOL, T(stream), "false", 0, 0, NULL,
     "when decoding, feed the ids one at a time to the streaming detokenizer and print the "
     "JSON array of the pieces it gives"},
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

/* The pieces the streaming detokenizer gives, one id at a time, then finish:
 * a JSON array of strings (each whole UTF-8 characters, or the line fails). */
static json_t *stream_pieces(const struct folio_tokenizer *t, const int32_t *ids, size_t n,
                             bool skip_special)
{
    struct folio_detok *d = folio_detok_new(t, skip_special);
    json_t *list = json_array();
    bool ok = d && list;
    for (size_t i = 0; ok && i <= n; i++) {
        char *out;
        size_t len;
        int rc =
            i < n ? folio_detok_push(d, ids[i], &out, &len) : folio_detok_finish(d, &out, &len);
        json_t *s = rc ? NULL : json_stringn(out, len); /* NULL for invalid UTF-8 too */
        ok = s && !json_array_append_new(list, s);
        if (!rc)
            free(out);
    }
    folio_detok_free(d);
    if (!ok) {
        json_decref(list);
        return NULL;
    }
    return list;
}

static int decode_line(const struct folio_tokenizer *t, json_t *v, bool skip_special, bool stream,
                       char *err, size_t errlen)
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
    char *text = stream ? NULL : folio_tokenizer_decode(t, ids, n, skip_special, &len);
    json_t *s = stream ? stream_pieces(t, ids, n, skip_special)
                : text ? json_stringn_nocheck(text, len)
                       : NULL;
    free(ids);
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

static int print_info(const struct folio_tokenizer *t)
{
    const char *tmpl = folio_tokenizer_chat_template(t);
    const char *bos = folio_tokenizer_bos_token(t), *eos = folio_tokenizer_eos_token(t);
    json_t *o =
        json_pack("{s:i, s:i, s:i, s:s?, s:s?, s:s?}", "vocab_size", folio_tokenizer_vocab_size(t),
                  "bos_id", folio_tokenizer_bos_id(t), "eos_id", folio_tokenizer_eos_id(t),
                  "bos_token", bos, "eos_token", eos, "chat_template", tmpl);
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!s)
        return 1;
    puts(s);
    free(s);
    return 0;
}

int folio_tokenize_main(int argc, char **argv)
{
    struct tokenize_args ta;
    struct folio_opt_group g = {NULL, tokenize_flags,
                                sizeof tokenize_flags / sizeof *tokenize_flags, &ta, NULL};
    int prc = folio_opts_parse(
        "folio tokenize",
        "usage: folio tokenize [--model PATH] [--no-special] [--decode [--skip-special] "
        "[--stream]]\n\n"
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
    bool stream = ta.stream, info = ta.info;
    char err[1024];
    if (!model || !*model) {
        model = folio_default_model(false, err, sizeof err);
        if (!model) {
            fprintf(stderr, "folio tokenize: %s\n", err);
            return 2;
        }
    }
    if ((skip_special || stream) && !decode) {
        fprintf(stderr, "folio tokenize: --skip-special and --stream only apply to --decode\n");
        return 2;
    }
    struct folio_tokenizer *t;
    if (folio_tokenizer_load(model, &t, err, sizeof err)) {
        fprintf(stderr, "folio tokenize: %s\n", err);
        return 1;
    }
    if (info) {
        int rc = print_info(t);
        folio_tokenizer_free(t);
        return rc;
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
            rc = decode_line(t, v, skip_special, stream, err, sizeof err);
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
