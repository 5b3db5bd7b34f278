/* scheduler/ngram_draft.c: which suffix it matches, where, and how much it proposes. */
#include "check.h"
#include "ngram_draft.h"

static int draft_of(const int32_t *t, int n, int min_n, int max_n, int k, int32_t *out)
{
    return folio_ngram_draft(t, n, min_n, max_n, k, out);
}

int main(void)
{
    int32_t d[8];
    /* "1 2 3 4 5 ... 1 2 3": the 3-token suffix recurs at 0; 4 5 6 7 follow it. */
    const int32_t a[] = {1, 2, 3, 4, 5, 6, 7, 9, 1, 2, 3};
    CHECK(draft_of(a, 11, 1, 3, 4, d) == 4);
    CHECK(d[0] == 4 && d[1] == 5 && d[2] == 6 && d[3] == 7);
    /* k bounds the draft; past the end the copy repeats what it proposed. */
    CHECK(draft_of(a, 11, 1, 3, 2, d) == 2 && d[0] == 4 && d[1] == 5);
    const int32_t b[] = {5, 6, 7, 5, 6};
    CHECK(draft_of(b, 5, 2, 2, 4, d) == 4 && d[0] == 7 && d[1] == 5 && d[2] == 6 && d[3] == 7);
    /* The longest suffix wins over a later, shorter match: "8 3" recurs late, "2 8 3" early. */
    const int32_t c[] = {2, 8, 3, 10, 11, 8, 3, 20, 2, 8, 3};
    CHECK(draft_of(c, 11, 1, 3, 1, d) == 1 && d[0] == 10);
    /* Among matches of one length, the latest. */
    CHECK(draft_of(c, 11, 2, 2, 1, d) == 1 && d[0] == 20);
    /* Nothing recurs at min_n: no draft. */
    const int32_t e[] = {1, 2, 3, 4};
    CHECK(draft_of(e, 4, 1, 3, 4, d) == 0);
    /* Too short a history for any suffix, and bad bounds. */
    CHECK(draft_of(e, 1, 1, 3, 4, d) == 0);
    CHECK(draft_of(a, 11, 0, 3, 4, d) == 0);
    CHECK(draft_of(a, 11, 3, 2, 4, d) == 0);
    CHECK(draft_of(a, 11, 1, 3, 0, d) == 0);
    /* A run of one token proposes more of it. */
    const int32_t r[] = {7, 7, 7, 7};
    CHECK(draft_of(r, 4, 1, 2, 3, d) == 3 && d[0] == 7 && d[1] == 7 && d[2] == 7);
    return check_report();
}
