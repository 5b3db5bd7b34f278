#include "stream.h"

#include <stdlib.h>
#include <string.h>

int folio_text_stream_init(struct folio_text_stream *s, const struct folio_tokenizer *t,
                           bool skip_special, const char *const *stops, const size_t *stop_len,
                           size_t num_stops, int32_t min_tokens)
{
    memset(s, 0, sizeof *s);
    folio_jw_init(&s->held);
    s->stops = stops;
    s->stop_len = stop_len;
    s->num_stops = num_stops;
    s->min_tokens = min_tokens;
    s->detok = folio_detok_new(t, skip_special);
    return s->detok ? 0 : -1;
}

void folio_text_stream_free(struct folio_text_stream *s)
{
    folio_detok_free(s->detok);
    folio_jw_free(&s->held);
    memset(s, 0, sizeof *s);
}

void folio_text_stream_set_output(struct folio_text_stream *s, const struct folio_tokenizer *t,
                                  bool skip_special, bool spaces_between_special, bool include_stop)
{
    s->include_stop = include_stop;
    s->space_specials = !skip_special && spaces_between_special ? t : NULL;
}

static void emit(struct folio_text_stream *s, struct folio_jw *out, size_t n)
{
    folio_jw_raw(out, s->held.data, n);
    s->emitted += n;
    memmove(s->held.data, s->held.data + n, s->held.len - n);
    s->held.len -= n;
    s->held.data[s->held.len] = 0;
}

/* The earliest stop string in held, as vLLM cuts at the first match; *len
 * its length. */
static bool find_stop(const struct folio_text_stream *s, size_t *at, size_t *len)
{
    bool found = false;
    for (size_t i = 0; i < s->num_stops; i++) {
        size_t n = s->stop_len[i];
        if (n > s->held.len)
            continue;
        for (size_t p = 0; p + n <= s->held.len && (!found || p < *at); p++) {
            if (memcmp(s->held.data + p, s->stops[i], n) == 0) {
                *at = p;
                *len = n;
                found = true;
                break;
            }
        }
    }
    return found;
}

/* The longest tail of held that is a proper prefix of some stop string: it
 * must wait, since the next token may complete the stop. */
static size_t hold_back(const struct folio_text_stream *s)
{
    size_t keep = 0;
    for (size_t i = 0; i < s->num_stops; i++) {
        size_t n = s->stop_len[i] - 1;
        if (n > s->held.len)
            n = s->held.len;
        for (; n > keep; n--) {
            if (memcmp(s->held.data + s->held.len - n, s->stops[i], n) == 0) {
                keep = n;
                break;
            }
        }
    }
    return keep;
}

static int settle(struct folio_text_stream *s, struct folio_jw *out, bool final)
{
    if (s->num_stops && (int64_t)s->num_tokens >= s->min_tokens) {
        size_t at = 0, len = 0;
        if (find_stop(s, &at, &len)) {
            emit(s, out, s->include_stop ? at + len : at);
            s->held.len = 0;
            s->stopped = true;
            return 1;
        }
        if (!final) {
            emit(s, out, s->held.len - hold_back(s));
            return 0;
        }
    }
    emit(s, out, s->held.len);
    return 0;
}

int folio_text_stream_push(struct folio_text_stream *s, int32_t id, struct folio_jw *out)
{
    if (s->stopped)
        return 1;
    char *text = NULL;
    size_t len = 0;
    if (folio_detok_push(s->detok, id, &text, &len) != 0)
        return -1;
    if (s->space_specials) {
        bool special = folio_tokenizer_is_special(s->space_specials, id);
        if (s->num_tokens > 0 && (special || s->prev_special) && len > 0)
            folio_jw_raw(&s->held, " ", 1);
        s->prev_special = special;
    }
    s->num_tokens++;
    folio_jw_raw(&s->held, text ? text : "", len);
    free(text);
    if (s->held.failed)
        return -1;
    return settle(s, out, false);
}

int folio_text_stream_finish(struct folio_text_stream *s, struct folio_jw *out)
{
    if (s->stopped)
        return 1;
    char *text = NULL;
    size_t len = 0;
    if (folio_detok_finish(s->detok, &text, &len) != 0)
        return -1;
    folio_jw_raw(&s->held, text ? text : "", len);
    free(text);
    if (s->held.failed)
        return -1;
    return settle(s, out, true);
}
