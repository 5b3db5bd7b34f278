/* struct folio_seq_params (common/seq_params.h) in the Submit message and
 * back: the one place that maps its fields to the wire. */
#ifndef FOLIO_SEQ_PARAMS_CODEC_H
#define FOLIO_SEQ_PARAMS_CODEC_H

#include <stddef.h>

#include "folio.pb-c.h"
#include "seq_params.h"

/* Fills s's parameter fields, *sp and *g (which s then points to; g only
 * when p has a grammar) from p; the logit bias goes through ids[] and
 * values[], num_logit_bias entries each, which the caller provides. s, sp
 * and g borrow p's arrays. */
void folio_seq_params_to_submit(const struct folio_seq_params *p, Folio__Submit *s,
                                Folio__SamplingParams *sp, Folio__Grammar *g, int32_t *ids,
                                float *values);

/* p from a received Submit. Its arrays (the grammar's text too) borrow the
 * message's, but for the logit bias, allocated into *bias (free it; NULL when
 * none). 0; -1 with why for a malformed message (an unknown grammar kind, a
 * grammar text past FOLIO_MAX_GRAMMAR_BYTES); -2 when out of memory. */
int folio_seq_params_from_submit(const Folio__Submit *s, struct folio_seq_params *p,
                                 struct folio_logit_bias **bias, char *why, size_t whylen);

#endif
