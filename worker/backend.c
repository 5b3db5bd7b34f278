#include "backend.h"

int folio_backend_step(struct folio_backend *b, const struct folio_step_batch *batch,
                       struct folio_step_result *res, char *err, size_t errlen)
{
    if (b->ops->launch(b, batch, err, errlen) != 0)
        return -1;
    return b->ops->collect(b, res, err, errlen);
}
