/* frontend/stream.c with the real Llama-2 tokenizer: streamed text equals the
 * full decode, stop strings cut at their first match (also across token
 * boundaries), and held-back text is never shown before it is safe. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "stream.h"
#include "tokenizer.h"

static struct folio_tokenizer *tok;

/* Streams text's tokens; returns what was shown, *stopped when a stop hit.
 * tokens_used: the tokens pushed before the stream ended. */
static char *run(const char *text, const char **stops, size_t nstops, int32_t min_tokens,
                 bool *stopped, uint32_t *tokens_used)
{
    size_t n;
    int32_t *ids = folio_tokenizer_encode(tok, text, strlen(text), false, &n);
    CHECK(ids != NULL);
    size_t lens[8];
    for (size_t i = 0; i < nstops; i++)
        lens[i] = strlen(stops[i]);
    struct folio_text_stream s;
    CHECK(folio_text_stream_init(&s, tok, true, stops, lens, nstops, min_tokens) == 0);
    struct folio_jw out;
    folio_jw_init(&out);
    *stopped = false;
    for (size_t i = 0; i < n && !*stopped; i++) {
        int rc = folio_text_stream_push(&s, ids[i], &out);
        CHECK(rc >= 0);
        *stopped = rc == 1;
        /* Whatever was shown so far never contains a whole stop string. */
        for (size_t k = 0; k < nstops && min_tokens == 0; k++)
            CHECK(out.data == NULL || strstr(out.data, stops[k]) == NULL);
    }
    if (!*stopped)
        *stopped = folio_text_stream_finish(&s, &out) == 1;
    *tokens_used = s.num_tokens;
    CHECK(s.emitted == out.len);
    folio_text_stream_free(&s);
    free(ids);
    char *r = folio_jw_take(&out, NULL);
    return r;
}

int main(void)
{
    const char *dir = "assets/models/llama2-tokenizer"; /* ctest runs in the source folder */
    char err[256];
    if (folio_tokenizer_load(dir, &tok, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    bool stopped;
    uint32_t used;

    /* No stops: the stream equals the text (the tokenizer round-trips it). */
    const char *t1 = "Hello world, h\xc3\xa9llo \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80 end.";
    char *o = run(t1, NULL, 0, 0, &stopped, &used);
    CHECK(!stopped && !strcmp(o, t1));
    free(o);

    /* A stop string in the middle cuts there; the stop is not shown. */
    const char *stops1[] = {"STOP"};
    o = run("Count: one two STOP three four", stops1, 1, 0, &stopped, &used);
    CHECK(stopped && !strcmp(o, "Count: one two "));
    free(o);

    /* The earliest of several stops wins, across token boundaries. */
    const char *stops2[] = {"four", "wo th"};
    o = run("one two three four", stops2, 2, 0, &stopped, &used);
    CHECK(stopped && !strcmp(o, "one t"));
    free(o);

    /* A stop prefix that never completes is released at the end. */
    const char *stops3[] = {"endgame"};
    o = run("the end", stops3, 1, 0, &stopped, &used);
    CHECK(!stopped && !strcmp(o, "the end"));
    free(o);

    /* A newline stop, as chat clients send. */
    const char *stops4[] = {"\n"};
    o = run("first line\nsecond line", stops4, 1, 0, &stopped, &used);
    CHECK(stopped && !strcmp(o, "first line"));
    free(o);

    /* min_tokens: stops do not count before that many tokens. */
    const char *stops5[] = {"a"};
    o = run("a b a b", stops5, 1, 100, &stopped, &used);
    CHECK(!stopped && !strcmp(o, "a b a b"));
    free(o);

    folio_tokenizer_free(tok);
    return check_report();
}
