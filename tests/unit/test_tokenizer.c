/* The tokenizer from C: the Llama-2 files, invalid UTF-8, NUL bytes, the
 * streaming detokenizer against one-shot decoding over the ShareGPT prompts,
 * and clear errors for broken tokenizer.json files. Ids for comparison come
 * from Hugging Face `tokenizers` (tests/test_tokenizer.py checks the rest). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "tokenizer.h"

/* The repository's assets/ folder: ctest runs in the source folder. */
static const char assets[] = "assets";

static bool ids_equal(const int32_t *a, size_t na, const int32_t *b, size_t nb)
{
    return na == nb && (na == 0 || !memcmp(a, b, na * sizeof *a));
}

static bool encodes_as(const struct folio_tokenizer *t, const char *s, size_t len, bool special,
                       const int32_t *want, size_t n_want)
{
    size_t n;
    int32_t *ids = folio_tokenizer_encode(t, s, len, special, &n);
    bool ok = ids && ids_equal(ids, n, want, n_want);
    free(ids);
    return ok;
}

/* Whether two byte strings encode to the same ids. */
static bool same_ids(const struct folio_tokenizer *t, const char *a, size_t la, const char *b,
                     size_t lb)
{
    size_t na, nb;
    int32_t *ia = folio_tokenizer_encode(t, a, la, false, &na);
    int32_t *ib = folio_tokenizer_encode(t, b, lb, false, &nb);
    bool ok = ia && ib && ids_equal(ia, na, ib, nb);
    free(ia);
    free(ib);
    return ok;
}

static bool valid_utf8(const char *s, size_t len)
{
    json_t *j = json_stringn(s, len); /* jansson checks UTF-8 */
    json_decref(j);
    return j != NULL;
}

static void test_llama2_basics(const struct folio_tokenizer *t)
{
    CHECK(folio_tokenizer_vocab_size(t) == 32000);
    CHECK(folio_tokenizer_bos_id(t) == 1);
    CHECK(folio_tokenizer_eos_id(t) == 2);
    CHECK(folio_tokenizer_token_id(t, "<unk>") == 0);
    CHECK(folio_tokenizer_token_id(t, "▁Hello") == 15043);
    CHECK(folio_tokenizer_token_id(t, "no such token") == -1);
    CHECK(folio_tokenizer_is_special(t, 1) && folio_tokenizer_is_special(t, 2));
    CHECK(!folio_tokenizer_is_special(t, 15043) && !folio_tokenizer_is_special(t, -1));
    CHECK(folio_tokenizer_chat_template(t) && strstr(folio_tokenizer_chat_template(t), "<|user|>"));
    CHECK(folio_tokenizer_bos_token(t) && !strcmp(folio_tokenizer_bos_token(t), "<s>"));
    CHECK(folio_tokenizer_eos_token(t) && !strcmp(folio_tokenizer_eos_token(t), "</s>"));

    /* Ids from Hugging Face tokenizers 0.23. */
    CHECK(encodes_as(t, "Hello world", 11, true, (int32_t[]){1, 15043, 3186}, 3));
    CHECK(encodes_as(t, "Hello world", 11, false, (int32_t[]){15043, 3186}, 2));
    CHECK(encodes_as(t, "", 0, true, (int32_t[]){1}, 1));
    CHECK(encodes_as(t, "", 0, false, NULL, 0));
    /* "▁▁" merges first in tokenizer.json's BPE (sentencepiece differs). */
    CHECK(encodes_as(t, "  hi  there\n\tx", 14, false,
                     (int32_t[]){259, 7251, 259, 12711, 13, 12, 29916}, 7));
    /* Special tokens in the text are matched before BPE; after one, the next
     * piece gets its own "▁" from the Prepend normalizer. */
    CHECK(encodes_as(t, "a<s>b</s>", 9, false, (int32_t[]){263, 1, 289, 2}, 4));
    /* A character outside the vocabulary falls back to its bytes. */
    CHECK(encodes_as(t, "\xF0\x9F\x98\x80", 4, false,
                     (int32_t[]){29871, 0xF0 + 3, 0x9F + 3, 0x98 + 3, 0x80 + 3}, 5));
}

static void test_odd_bytes(const struct folio_tokenizer *t)
{
    /* NUL is a character like any other: <0x00> is id 3. */
    CHECK(encodes_as(t, "a\0b", 3, false, (int32_t[]){263, 3, 29890}, 3));
    /* Invalid UTF-8: each maximal invalid subsequence is U+FFFD. */
    CHECK(same_ids(t,
                   "a\xFF"
                   "b",
                   3,
                   "a\xEF\xBF\xBD"
                   "b",
                   5));
    CHECK(same_ids(t, "\xE4\xB8x", 3, "\xEF\xBF\xBDx", 4)); /* truncated 3-byte char */
    CHECK(
        same_ids(t, "\xED\xA0\x80", 3, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD", 9)); /* surrogate */
    CHECK(same_ids(t, "\xC0\xAF!", 3, "\xEF\xBF\xBD\xEF\xBF\xBD!", 7));             /* overlong */
    CHECK(same_ids(t, "end\xF0\x9F\x98", 6, "end\xEF\xBF\xBD", 6)); /* cut at the end */
    CHECK(same_ids(t, "\xF4\x90\x80\x80", 4, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD",
                   12)); /* > U+10FFFF */

    /* A 10,000-character word: exact and linear enough to finish at once. */
    size_t n_long = 10000;
    char *word = malloc(n_long);
    for (size_t i = 0; i < n_long; i++)
        word[i] = "abcdefghij"[i % 7];
    size_t n;
    int32_t *ids = folio_tokenizer_encode(t, word, n_long, false, &n);
    CHECK(ids && n > 0 && n < n_long);
    size_t len;
    char *back = ids ? folio_tokenizer_decode(t, ids, n, false, &len) : NULL;
    CHECK(back && len == n_long && !memcmp(back, word, n_long));
    free(back);
    free(ids);
    free(word);
}

/* Concatenation of what the streaming detokenizer emits, one id at a time. */
static char *stream_decode(const struct folio_tokenizer *t, const int32_t *ids, size_t n, bool skip,
                           size_t *len, bool *chunks_valid)
{
    struct folio_detok *d = folio_detok_new(t, skip);
    size_t cap = 64, total = 0;
    char *all = malloc(cap);
    *chunks_valid = true;
    for (size_t i = 0; i <= n; i++) {
        char *out;
        size_t olen;
        int rc =
            i < n ? folio_detok_push(d, ids[i], &out, &olen) : folio_detok_finish(d, &out, &olen);
        if (rc) {
            *chunks_valid = false;
            break;
        }
        if (!valid_utf8(out, olen))
            *chunks_valid = false;
        while (total + olen + 1 > cap)
            all = realloc(all, cap *= 2);
        memcpy(all + total, out, olen);
        total += olen;
        free(out);
    }
    all[total] = 0;
    *len = total;
    folio_detok_free(d);
    return all;
}

static void test_streaming_detok_sharegpt(const struct folio_tokenizer *t)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/data/sharegpt/sharegpt_v3_first_turns_500.json", assets);
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    CHECK(json_is_array(root));
    size_t i, same = 0, total = 0;
    json_t *row;
    json_array_foreach(root, i, row)
    {
        json_t *v =
            json_object_get(json_array_get(json_object_get(row, "conversations"), 0), "value");
        size_t n;
        int32_t *ids =
            folio_tokenizer_encode(t, json_string_value(v), json_string_length(v), true, &n);
        for (int skip = 0; skip < 2; skip++) {
            size_t one_len, stream_len;
            bool chunks_valid;
            char *one = folio_tokenizer_decode(t, ids, n, skip, &one_len);
            char *stream = stream_decode(t, ids, n, skip, &stream_len, &chunks_valid);
            total++;
            /* Without the BOS, decoding gives the prompt back. */
            if (one && chunks_valid && one_len == stream_len && !memcmp(one, stream, one_len) &&
                (!skip ||
                 (one_len == json_string_length(v) && !memcmp(one, json_string_value(v), one_len))))
                same++;
            free(one);
            free(stream);
        }
        free(ids);
    }
    printf("streaming detokenizer: %zu of %zu decodes identical to one-shot decode\n", same, total);
    CHECK(total == 1000 && same == total);
    json_decref(root);
}

static void test_streaming_detok_bytes(const struct folio_tokenizer *t)
{
    struct folio_detok *d = folio_detok_new(t, false);
    char *out;
    size_t len;
    /* 中 as byte tokens: nothing comes out until the run of bytes ends. */
    CHECK(folio_detok_push(d, 0xE4 + 3, &out, &len) == 0 && len == 0);
    free(out);
    CHECK(folio_detok_push(d, 0xB8 + 3, &out, &len) == 0 && len == 0);
    free(out);
    CHECK(folio_detok_push(d, 0xAD + 3, &out, &len) == 0 && len == 0);
    free(out);
    CHECK(folio_detok_push(d, 15043, &out, &len) == 0 && !strcmp(out, "中 Hello"));
    free(out);
    /* An unfinished sequence at the end: one U+FFFD per byte, as HF. */
    CHECK(folio_detok_push(d, 0xE4 + 3, &out, &len) == 0 && len == 0);
    free(out);
    CHECK(folio_detok_push(d, 0xB8 + 3, &out, &len) == 0 && len == 0);
    free(out);
    CHECK(folio_detok_finish(d, &out, &len) == 0 && !strcmp(out, "\xEF\xBF\xBD\xEF\xBF\xBD"));
    free(out);
    /* Out-of-range ids are errors. */
    CHECK(folio_detok_push(d, 32000, &out, &len) == -1);
    CHECK(folio_detok_push(d, -1, &out, &len) == -1);
    folio_detok_free(d);
    CHECK(folio_tokenizer_decode(t, (int32_t[]){15043, 40000}, 2, false, &len) == NULL);

    /* The first leading space is stripped once, like HF's Strip decoder;
     * special tokens are dropped only when asked. */
    char *s = folio_tokenizer_decode(t, (int32_t[]){1, 15043, 2}, 3, false, &len);
    CHECK(s && !strcmp(s, "<s> Hello</s>"));
    free(s);
    s = folio_tokenizer_decode(t, (int32_t[]){1, 15043, 2}, 3, true, &len);
    CHECK(s && !strcmp(s, "Hello"));
    free(s);
}

/* Writes DIR/tokenizer.json with the given text and returns the load error. */
static int load_text(const char *dir, const char *json_text, char *err, size_t errlen)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    FILE *f = fopen(path, "w");
    fputs(json_text, f);
    fclose(f);
    struct folio_tokenizer *t = NULL;
    int rc = folio_tokenizer_load(dir, &t, err, errlen);
    folio_tokenizer_free(t);
    return rc;
}

/* Loads a one-token BPE with the given pre_tokenizer JSON; returns the error. */
static int load_pre(const char *dir, const char *pre, char *err, size_t errlen)
{
    char text[1024];
    snprintf(text, sizeof text,
             "{\"pre_tokenizer\": %s, \"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, "
             "\"merges\": []}}",
             pre);
    return load_text(dir, text, err, errlen);
}

static void test_bad_pre_tokenizers(const char *dir)
{
    char err[512];
    CHECK(load_pre(dir, "{\"type\": \"Whitespace\"}", err, sizeof err) == -1 &&
          strstr(err, "\"Whitespace\" is not supported"));
    CHECK(load_pre(dir,
                   "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"(a\"}, "
                   "\"behavior\": \"Isolated\"}",
                   err, sizeof err) == -1 &&
          strstr(err, "does not compile") && strstr(err, "(a"));
    CHECK(load_pre(dir,
                   "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"[^\\\\S]\"}, "
                   "\"behavior\": \"Isolated\"}",
                   err, sizeof err) == -1 &&
          strstr(err, "\\S inside [...]"));
    CHECK(load_pre(dir,
                   "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"a\"}, "
                   "\"behavior\": \"Sideways\"}",
                   err, sizeof err) == -1 &&
          strstr(err, "Sideways"));
    CHECK(load_pre(dir,
                   "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"ByteLevel\"}, "
                   "{\"type\": \"Digits\"}]}",
                   err, sizeof err) == -1 &&
          strstr(err, "ByteLevel must come last"));
    CHECK(load_pre(dir,
                   "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Digits\"}, "
                   "{\"type\": \"Metaspace\", \"replacement\": \"_\"}]}",
                   err, sizeof err) == -1 &&
          strstr(err, "Metaspace with Split"));
    /* The behaviours on "a1b22" split by digits (HF's NormalizedString::split). */
    static const struct {
        const char *behavior, *ids;
    } cases[] = {{"Removed", "0 2"},
                 {"Isolated", "0 1 2 3 3"},
                 {"MergedWithPrevious", "4 6 3"},
                 {"MergedWithNext", "0 5 3 3"},
                 {"Contiguous", "0 1 2 7"}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char text[1024];
        snprintf(text, sizeof text,
                 "{\"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": "
                 "\"\\\\d\"}, \"behavior\": \"%s\"}, \"model\": {\"type\": \"BPE\", "
                 "\"vocab\": {\"a\": 0, \"1\": 1, \"b\": 2, \"2\": 3, \"a1\": 4, \"1b\": 5, "
                 "\"b2\": 6, \"22\": 7, \"b22\": 8, \"a1b22\": 9}, \"merges\": [\"a 1\", \"1 b\", "
                 "\"b 2\", \"2 2\", \"b 22\"]}}",
                 cases[k].behavior);
        CHECK(load_text(dir, text, err, sizeof err) == 0);
        struct folio_tokenizer *t;
        CHECK(folio_tokenizer_load(dir, &t, err, sizeof err) == 0);
        size_t n;
        int32_t *ids = folio_tokenizer_encode(t, "a1b22", 5, false, &n);
        char got[64] = "";
        for (size_t i = 0; ids && i < n; i++)
            snprintf(got + strlen(got), sizeof got - strlen(got), i ? " %d" : "%d", ids[i]);
        if (strcmp(got, cases[k].ids))
            printf("Split %s: got %s, want %s\n", cases[k].behavior, got, cases[k].ids);
        CHECK(!strcmp(got, cases[k].ids));
        free(ids);
        folio_tokenizer_free(t);
    }
}

static void test_bad_files(void)
{
    char err[512];
    struct folio_tokenizer *t = (struct folio_tokenizer *)1;
    CHECK(folio_tokenizer_load("/nonexistent/model", &t, err, sizeof err) == -1);
    CHECK(t == NULL && strstr(err, "/nonexistent/model/tokenizer.json") &&
          strstr(err, "cannot open"));

    char dir[] = "/tmp/folio_tok_test_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    CHECK(load_text(dir, "{\"model\": {", err, sizeof err) == -1 && strstr(err, "invalid JSON"));
    CHECK(load_text(dir, "{\"version\": \"1.0\"}", err, sizeof err) == -1 &&
          strstr(err, "no \"model\""));
    CHECK(load_text(dir, "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}", err,
                    sizeof err) == -1 &&
          strstr(err, "WordPiece"));
    CHECK(load_text(dir, "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}}}", err,
                    sizeof err) == -1 &&
          strstr(err, "merges"));
    CHECK(load_text(dir,
                    "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, "
                    "\"merges\": [\"a b\"]}}",
                    err, sizeof err) == -1 &&
          strstr(err, "merges[0]") && strstr(err, "not in the vocab"));
    CHECK(load_text(dir,
                    "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2}, "
                    "\"merges\": [\"a b c\"]}}",
                    err, sizeof err) == -1 &&
          strstr(err, "merges[0]"));
    CHECK(load_text(dir,
                    "{\"normalizer\": {\"type\": \"NFKC\"}, \"model\": {\"type\": \"BPE\", "
                    "\"vocab\": {\"a\": 0}, \"merges\": []}}",
                    err, sizeof err) == -1 &&
          strstr(err, "NFKC"));
    test_bad_pre_tokenizers(dir);
    CHECK(load_text(dir,
                    "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [], "
                    "\"unk_token\": \"<unk>\"}}",
                    err, sizeof err) == -1 &&
          strstr(err, "unk_token"));
    /* The smallest working file: both merge forms, no decoder (join by " "). */
    CHECK(load_text(dir,
                    "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2, "
                    "\"abab\": 3}, \"merges\": [\"a b\", [\"ab\", \"ab\"]]}}",
                    err, sizeof err) == 0);
    CHECK(folio_tokenizer_load(dir, &t, err, sizeof err) == 0);
    if (t) {
        CHECK(encodes_as(t, "ababa", 5, true, (int32_t[]){3, 0}, 2));
        size_t len;
        char *s = folio_tokenizer_decode(t, (int32_t[]){3, 0}, 2, false, &len);
        CHECK(s && !strcmp(s, "abab a"));
        free(s);
        CHECK(folio_tokenizer_bos_id(t) == -1 && folio_tokenizer_chat_template(t) == NULL);
        folio_tokenizer_free(t);
    }
    /* ByteLevel after Fuse (as gguf_to_hf's files have it) decodes as ByteLevel alone does:
     * Hugging Face's ByteLevel joins its tokens into one string in any case. */
    static const char *decoders[] = {"{\"type\": \"ByteLevel\"}",
                                     "{\"type\": \"Sequence\", \"decoders\": [{\"type\": "
                                     "\"Fuse\"}, {\"type\": \"ByteLevel\"}]}"};
    for (int k = 0; k < 2; k++) {
        char text[512];
        snprintf(text, sizeof text,
                 "{\"decoder\": %s, \"model\": {\"type\": \"BPE\", \"vocab\": {\"\u0120a\": "
                 "0, \"b\": 1, \"\u00c3\": 2, \"\u00a9\": 3}, \"merges\": []}}",
                 decoders[k]);
        CHECK(load_text(dir, text, err, sizeof err) == 0);
        t = NULL;
        CHECK(folio_tokenizer_load(dir, &t, err, sizeof err) == 0);
        if (!t) {
            printf("decoder %s: %s\n", decoders[k], err);
            continue;
        }
        size_t len;
        char *s = folio_tokenizer_decode(t, (int32_t[]){0, 1, 2, 3}, 4, false, &len);
        CHECK(s && !strcmp(s, " ab\xc3\xa9"));
        free(s);
        folio_tokenizer_free(t);
    }
    char path[1200];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    FILE *f = fopen(path, "w");
    fputs("{\"chat_template\": [", f);
    fclose(f);
    CHECK(folio_tokenizer_load(dir, &t, err, sizeof err) == -1 &&
          strstr(err, "tokenizer_config.json"));
    unlink(path);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    char dir[1200], err[512];
    snprintf(dir, sizeof dir, "%s/models/llama2-tokenizer", assets);
    struct folio_tokenizer *t;
    if (folio_tokenizer_load(dir, &t, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    test_llama2_basics(t);
    test_odd_bytes(t);
    test_streaming_detok_sharegpt(t);
    test_streaming_detok_bytes(t);
    folio_tokenizer_free(t);
    test_bad_files();
    return check_report();
}
