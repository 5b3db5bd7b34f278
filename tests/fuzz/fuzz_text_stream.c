/* Fuzzes frontend/stream.h (incremental detokenization with stop strings)
 * with the real Llama-2 tokenizer (assets/models/llama2-tokenizer).
 * Input: one byte of settings (number of stop strings, min_tokens, skip
 * special), the stop strings (each ended by a 0 byte), then token ids as
 * little-endian 16-bit values (some beyond the vocabulary). Checked:
 *   - until a stop string matches, push fails exactly for the ids the
 *     tokenizer does not know (after one, pushes are ignored);
 *   - the bytes handed out equal the stream's own count (text_offset);
 *   - without stop strings the text is the one-shot decode of the ids;
 *   - with them (and min_tokens 0), no stop string appears in the text,
 *     and after a match nothing more is emitted. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_llama2_tokenizer.h"
#include "json_writer.h"
#include "stream.h"
#include "tokenizer.h"

#define MAX_STOPS 4
#define MAX_IDS 512

static struct folio_tokenizer *tok;

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_text_stream: %s\n", what);
    abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    tok = fuzz_load_llama2_tokenizer("fuzz_text_stream");
    return 0;
}

static bool contains(const char *hay, size_t n, const char *needle, size_t m)
{
    for (size_t i = 0; m <= n && i + m <= n; i++)
        if (!memcmp(hay + i, needle, m))
            return true;
    return false;
}

/* Splits the input; returns the number of ids, or -1 when it is unusable. */
static int parse(const uint8_t *data, size_t size, const char **stops, size_t *stop_len,
                 size_t *num_stops, int32_t *min_tokens, bool *skip, int32_t *ids)
{
    if (size < 1)
        return -1;
    *num_stops = data[0] % (MAX_STOPS + 1);
    *min_tokens = (data[0] >> 3) & 3;
    *skip = data[0] & 0x80;
    size_t pos = 1;
    for (size_t i = 0; i < *num_stops; i++) {
        const uint8_t *end = memchr(data + pos, 0, size - pos);
        if (!end || end == data + pos)
            return -1;
        stops[i] = (const char *)data + pos;
        stop_len[i] = (size_t)(end - (data + pos));
        pos += stop_len[i] + 1;
    }
    int n = 0;
    for (; pos + 1 < size && n < MAX_IDS; pos += 2)
        ids[n++] = (int32_t)(data[pos] | data[pos + 1] << 8);
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *stops[MAX_STOPS];
    size_t stop_len[MAX_STOPS], num_stops;
    int32_t min_tokens, ids[MAX_IDS];
    bool skip;
    int n = parse(data, size, stops, stop_len, &num_stops, &min_tokens, &skip, ids);
    if (n < 0)
        return 0;
    int32_t vocab = folio_tokenizer_vocab_size(tok);
    struct folio_text_stream s;
    if (folio_text_stream_init(&s, tok, skip, stops, stop_len, num_stops, min_tokens) != 0)
        fail("init failed");
    struct folio_jw out;
    folio_jw_init(&out);
    bool stopped = false;
    int pushed = 0;
    for (int i = 0; i < n; i++) {
        size_t before = out.len;
        int rc = folio_text_stream_push(&s, ids[i], &out);
        if (!stopped && (rc < 0) != (ids[i] >= vocab))
            fail("push failed for a known id, or took an unknown one");
        if (rc < 0)
            continue;
        if (stopped && out.len != before)
            fail("text emitted after a stop string matched");
        stopped |= rc == 1;
        ids[pushed++] = ids[i];
    }
    if (!stopped && folio_text_stream_finish(&s, &out) < 0)
        fail("finish failed");
    if (out.failed)
        fail("out of memory");
    if (s.emitted != out.len)
        fail("emitted count differs from the bytes handed out");
    if (num_stops == 0) {
        size_t len = 0;
        char *whole = folio_tokenizer_decode(tok, ids, (size_t)pushed, skip, &len);
        if (!whole)
            fail("one-shot decode failed");
        if (len != out.len || memcmp(whole, out.data, len) != 0)
            fail("streamed text differs from the one-shot decode");
        free(whole);
    } else if (min_tokens == 0) {
        for (size_t k = 0; k < num_stops; k++)
            if (contains(out.data ? out.data : "", out.len, stops[k], stop_len[k]))
                fail("a stop string was emitted");
    }
    folio_jw_free(&out);
    folio_text_stream_free(&s);
    return 0;
}
