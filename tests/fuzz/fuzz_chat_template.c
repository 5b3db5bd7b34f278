/* Fuzzes text/chat_template.h: arbitrary bytes as a chat template's
 * source, compiled and (when it compiles) rendered with a fixed conversation.
 * Compile and render either succeed or fail with a message; nothing may crash,
 * leak or run away. The render runs under tight limits (output, memory, steps,
 * call depth) so that the interpreter's limit checks, not the fuzzer's
 * timeout, end templates that loop or grow; FUZZ_DEFAULT_LIMITS=1 in the
 * environment renders with the library's defaults instead (for long runs that
 * look for work the step count does not bound; give them -timeout=30: spending
 * the default 20M steps takes about 1 s in a normal build, 11 s here). */
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_template.h"

#define MAX_INPUT (64 << 10)

static json_t *vars;
static struct folio_chat_template_limits limits = {
    .max_output_bytes = 1 << 20,
    .max_memory_bytes = 32 << 20,
    .max_steps = 200000,
    .max_call_depth = 32,
};
static bool default_limits;

static const struct folio_chat_message conversation[] = {
    {"system", "You are a helpful assistant."},
    {"user", "Hello! What is 2+2?"},
    {"assistant", "2 + 2 = 4. <b>\"quoted\"</b> and \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80"},
    {"user", "Thanks.\nAnd {{ braces }} {% tags %}?"},
};
#define NUM_MESSAGES (sizeof conversation / sizeof conversation[0])

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    const char *env = getenv("FUZZ_DEFAULT_LIMITS");
    default_limits = env && strcmp(env, "1") == 0;
    /* The variables render_template_json receives for a chat request, as
     * folio_chat_template_render builds them. */
    json_t *msgs = json_array();
    for (size_t i = 0; i < NUM_MESSAGES; i++)
        json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", conversation[i].role, "content",
                                              conversation[i].content));
    vars = json_pack("{s:o, s:b, s:s, s:s}", "messages", msgs, "add_generation_prompt", 1,
                     "bos_token", "<s>", "eos_token", "</s>");
    if (!vars) {
        fprintf(stderr, "fuzz_chat_template: cannot build the variables\n");
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > MAX_INPUT)
        return 0;
    char *src = malloc(size + 1);
    if (!src)
        return 0;
    memcpy(src, data, size);
    src[size] = '\0'; /* a NUL inside ends the template, as in a C string */
    struct folio_chat_template *t = NULL;
    char err[512] = "";
    if (folio_chat_template_compile(src, &t, err, sizeof err) != 0) {
        free(src);
        if (!err[0])
            abort(); /* a failure says why */
        return 0;
    }
    free(src); /* the compiled template must not point into its source */
    char *out = NULL;
    size_t outlen = 0;
    err[0] = '\0';
    int rc = folio_chat_template_render_json(t, vars, default_limits ? NULL : &limits, &out,
                                             &outlen, err, sizeof err);
    if (rc == 0) {
        if (!out || out[outlen] != '\0' || strlen(out) > outlen ||
            (!default_limits && outlen > limits.max_output_bytes))
            abort();
        free(out);
    } else if (out) {
        abort(); /* (err may be empty: raise_exception('') says exactly that) */
    }
    folio_chat_template_free(t);
    return 0;
}
