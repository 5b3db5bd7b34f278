/* One request's generated text as it streams: incremental detokenization
 * (only whole UTF-8 characters leave), stop strings with hold-back (text that
 * could be the start of a stop string waits until it cannot be), and the
 * token count that usage reports. Pure: no I/O, unit-tested alone. */
#ifndef FOLIO_STREAM_H
#define FOLIO_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "json_writer.h"
#include "tokenizer.h"

struct folio_text_stream {
    struct folio_detok *detok;
    const char *const *stops; /* borrowed from the request */
    const size_t *stop_len;
    size_t num_stops;
    int32_t min_tokens;   /* stop strings count only after this many tokens */
    struct folio_jw held; /* decoded text not yet emitted */
    uint32_t num_tokens;  /* tokens pushed, the one that completed a stop included */
    size_t emitted;       /* bytes emitted so far (completions' text_offset) */
    bool stopped;         /* a stop string matched: nothing more is emitted */
    bool include_stop;    /* a matched stop string is emitted too (include_stop_str_in_output) */
    const struct folio_tokenizer *space_specials; /* non-NULL: a space between a special
                                                     token and its neighbours */
    bool prev_special;
};

int folio_text_stream_init(struct folio_text_stream *s, const struct folio_tokenizer *t,
                           bool skip_special, const char *const *stops, const size_t *stop_len,
                           size_t num_stops, int32_t min_tokens);
void folio_text_stream_free(struct folio_text_stream *s);

/* vLLM's output options. include_stop: a matched stop string stays in the
 * text. spaces_between_special: with special tokens shown (skip_special
 * false), each is set apart from the text around it by a space, as vLLM's
 * spaces_between_special_tokens joins them. */
void folio_text_stream_set_output(struct folio_text_stream *s, const struct folio_tokenizer *t,
                                  bool skip_special, bool spaces_between_special,
                                  bool include_stop);

/* Pushes one generated token; appends the text that may now be shown to out.
 * Returns 1 when a stop string matched (the text before it has been
 * appended; the stop string itself is not), 0 otherwise, -1 for an id the
 * tokenizer does not know. After a match further pushes are ignored. */
int folio_text_stream_push(struct folio_text_stream *s, int32_t id, struct folio_jw *out);
/* The request finished: flushes held text (and an unfinished UTF-8 sequence
 * as U+FFFD) to out, still cutting at a stop string if one completes. */
int folio_text_stream_finish(struct folio_text_stream *s, struct folio_jw *out);

#endif
