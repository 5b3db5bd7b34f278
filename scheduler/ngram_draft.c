#include "ngram_draft.h"

#include <string.h>

int folio_ngram_draft(const int32_t *tokens, int n, int min_n, int max_n, int k, int32_t *draft)
{
    if (min_n < 1 || k < 1 || max_n < min_n)
        return 0;
    for (int len = max_n < n - 1 ? max_n : n - 1; len >= min_n; len--) {
        const int32_t *suffix = tokens + n - len;
        /* Latest occurrence first: the nearer context predicts better. It must end before the
         * suffix's last token, so that at least one token follows it. */
        for (int at = n - len - 1; at >= 0; at--) {
            if (memcmp(tokens + at, suffix, (size_t)len * sizeof *tokens) != 0)
                continue;
            /* What followed it, read on past the sequence's end as a copy of itself (so a
             * repeating run proposes its next period, not just the tokens already there). */
            for (int j = 0, from = at + len; j < k; j++)
                draft[j] = from + j < n ? tokens[from + j] : draft[from + j - n];
            return k;
        }
    }
    return 0;
}
