/* --speculative-config: vLLM's JSON for speculative decoding, read once at start so that a
 * wrong value is a startup error naming its field, never a silent fallback. */
#ifndef FOLIO_SPEC_CONFIG_H
#define FOLIO_SPEC_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

struct folio_spec_config {
    bool on;        /* a config was given */
    int num_tokens; /* num_speculative_tokens: drafts per sequence and step */
    int lookup_max; /* prompt_lookup_max: the longest suffix an n-gram draft matches */
    int lookup_min; /* prompt_lookup_min: the shortest */
};

/* Parses text (NULL or empty: off). 0, or -1 with a message naming the field. */
int folio_spec_config_parse(const char *text, struct folio_spec_config *out, char *err,
                            size_t errlen);

#endif
