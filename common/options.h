/* The command-line parser every Folio program uses: a table of flags (name,
 * kind, default, range, doc), each value validated where it is parsed, and
 * errors that name the program as the user typed it ("folio serve: ...").
 *
 * A table's values live in one struct of the program's (each flag names its
 * field by offset), so that `folio serve` can parse the scheduler's and the
 * frontend's tables beside its own, check every flag before it starts a
 * child, and hand each child exactly the flags it uses. */
#ifndef FOLIO_OPTIONS_H
#define FOLIO_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum folio_opt_kind {
    FOLIO_OPT_STR,    /* const char *: any text */
    FOLIO_OPT_CHOICE, /* const char *: one of choices ("cpu|cuda") */
    FOLIO_OPT_INT,    /* int64_t in lo..hi */
    FOLIO_OPT_NUM,    /* double in lo..hi */
    FOLIO_OPT_BOOL,   /* bool: --name sets it, --no-name clears it; no value */
    FOLIO_OPT_LIST,   /* struct folio_opt_list: repeatable text */
};

#define FOLIO_OPT_LIST_MAX 64

struct folio_opt_list {
    const char *v[FOLIO_OPT_LIST_MAX];
    int n;
};

struct folio_opt {
    const char *name; /* "--max-num-seqs" */
    enum folio_opt_kind kind;
    size_t offset;   /* of the value in the table's struct */
    const char *def; /* the default, parsed like a given value; NULL: none */
    double lo, hi;   /* INT and NUM */
    const char *choices;
    const char *doc; /* one line; says the default when def cannot */
};

#define FOLIO_OPT_FIELD(type, field) offsetof(type, field)

/* One table and the struct it fills. given[i] is the text flag i had on the
 * command line (its value; for a boolean the token itself, "--x" or
 * "--no-x"), NULL when absent; the caller passes an array of n, or NULL. */
struct folio_opt_group {
    const char *title; /* a heading in --help; NULL: none */
    const struct folio_opt *opts;
    size_t n;
    void *values;
    const char **given;
};

/* Sets every default, then parses argv[1..] ("--name VALUE", "--name=VALUE",
 * "--flag", "--no-flag"). Returns 0; 1 when --help or --version was asked
 * (printed to stdout: the caller exits 0); -1 after printing "PROG: what is wrong" to
 * stderr. */
int folio_opts_parse(const char *prog, const char *usage, struct folio_opt_group *groups,
                     size_t num_groups, int argc, char **argv);

/* "usage: ..." and every flag once, with its default. */
void folio_opts_help(FILE *f, const char *usage, const struct folio_opt_group *groups,
                     size_t num_groups);

/* The flags of a group that were given, as arguments to pass on to another
 * program of the same table ("--name", "value", ...; "--flag" or
 * "--no-flag" for booleans). Returns how many were written (at most max),
 * -1 when they do not fit. The strings are the command line's own. */
int folio_opts_forward(const struct folio_opt_group *g, const char **out, int max);

/* Which name the program reports in its errors: FOLIO_PROG when the
 * launcher set it (the child's flags came from `folio serve`), else own. */
const char *folio_opts_prog(const char *own);

#endif
