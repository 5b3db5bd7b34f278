/* Speculative decoding's n-gram drafts (vLLM's "ngram" method, prompt lookup): a sequence that
 * quotes or reworks its prompt repeats runs of its own tokens, so the tokens that followed the
 * latest earlier occurrence of its last few tokens are a cheap guess at its next ones. */
#ifndef FOLIO_SCHEDULER_NGRAM_DRAFT_H
#define FOLIO_SCHEDULER_NGRAM_DRAFT_H

#include <stdint.h>

/* The draft for tokens[0..n): the longest suffix of min_n..max_n tokens that occurs earlier in
 * tokens (its latest such occurrence), and the k tokens that followed it there, into draft[0..k)
 * (where fewer follow before the end, the copy goes on from its own start, as a repeating run
 * would). Returns k, or 0 when no suffix of min_n tokens recurs. */
int folio_ngram_draft(const int32_t *tokens, int n, int min_n, int max_n, int k, int32_t *draft);

#endif
