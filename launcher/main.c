/* `folio COMMAND ...`: one binary for every user-facing command. */
#include <stdio.h>
#include <string.h>

#include "commands.h"

static const struct {
    const char *name;
    int (*main)(int, char **);
    const char *help;
} commands[] = {
    {"serve", folio_serve_main, "serve a model over an OpenAI-compatible HTTP API"},
    {"generate", folio_generate_main, "complete one prompt and print tokens/s"},
    {"chat", folio_chat_main, "chat with the model in the terminal, replies streamed"},
    {"tokenize", folio_tokenize_main, "JSON strings in, JSON id arrays out (--decode: reverse)"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: folio COMMAND [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\n`folio COMMAND --help` describes a command's options; `folio --version` says "
               "which Folio this is.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
        printf("folio %s\n", FOLIO_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].main(argc - 1, argv + 1);
    fprintf(stderr, "folio: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
