/* The model a command uses when no --model is given. */
#ifndef FOLIO_DEFAULT_MODEL_H
#define FOLIO_DEFAULT_MODEL_H

#include <stdbool.h>
#include <stddef.h>

/* demo: the small random demo model made at build time (for tests: its text
 * is noise). Otherwise SmolLM2-135M-Instruct, which deploy/setup.sh fetches
 * into the repository's models/smollm2/. Returns the path, or NULL with a
 * message in err that says how to get the model. */
const char *folio_default_model(bool demo, char *err, size_t errlen);

#endif
