#include "options.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define VALUE(g, o) ((char *)(g)->values + (o)->offset)

static bool is_choice(const char *choices, const char *v)
{
    size_t n = strlen(v);
    for (const char *p = choices; *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && !memcmp(p, v, n))
            return true;
        p += len + (bar != NULL);
    }
    return false;
}

static void print_range(FILE *f, const struct folio_opt *o)
{
    if (o->kind == FOLIO_OPT_INT)
        fprintf(f, "%lld..%lld", (long long)o->lo, (long long)o->hi);
    else
        fprintf(f, "%g..%g", o->lo, o->hi);
}

/* Stores v into the flag's field; an error names prog and the flag. */
static int set_value(const char *prog, const struct folio_opt_group *g, const struct folio_opt *o,
                     const char *v)
{
    void *dst = VALUE(g, o);
    char *end;
    errno = 0;
    switch (o->kind) {
    case FOLIO_OPT_STR:
        *(const char **)dst = v;
        return 0;
    case FOLIO_OPT_CHOICE:
        if (!is_choice(o->choices, v)) {
            fprintf(stderr, "%s: %s must be one of %s, got '%s'\n", prog, o->name, o->choices, v);
            return -1;
        }
        *(const char **)dst = v;
        return 0;
    case FOLIO_OPT_INT: {
        long long x = strtoll(v, &end, 10);
        if (errno || end == v || *end || x < (long long)o->lo || x > (long long)o->hi) {
            fprintf(stderr, "%s: %s must be an integer in ", prog, o->name);
            print_range(stderr, o);
            fprintf(stderr, ", got '%s'\n", v);
            return -1;
        }
        *(int64_t *)dst = x;
        return 0;
    }
    case FOLIO_OPT_NUM: {
        double x = strtod(v, &end);
        if (errno || end == v || *end || !isfinite(x) || x < o->lo || x > o->hi) {
            fprintf(stderr, "%s: %s must be a number in ", prog, o->name);
            print_range(stderr, o);
            fprintf(stderr, ", got '%s'\n", v);
            return -1;
        }
        *(double *)dst = x;
        return 0;
    }
    case FOLIO_OPT_BOOL:
        *(bool *)dst = !strcmp(v, "true");
        return 0;
    case FOLIO_OPT_LIST: {
        struct folio_opt_list *l = dst;
        if (l->n == FOLIO_OPT_LIST_MAX) {
            fprintf(stderr, "%s: %s given more than %d times\n", prog, o->name, FOLIO_OPT_LIST_MAX);
            return -1;
        }
        l->v[l->n++] = v;
        return 0;
    }
    }
    return -1;
}

/* The flag called name (without "=value"), or with negated set the boolean
 * that "--no-NAME" clears. */
static const struct folio_opt *find(struct folio_opt_group *groups, size_t num_groups,
                                    const char *name, size_t len, size_t *gi, bool *negated)
{
    for (int pass = 0; pass < 2; pass++) {
        for (size_t k = 0; k < num_groups; k++) {
            for (size_t i = 0; i < groups[k].n; i++) {
                const struct folio_opt *o = &groups[k].opts[i];
                const char *want = o->name;
                size_t off = 0;
                if (pass == 1) { /* "--no-" + the name without its "--" */
                    if (o->kind != FOLIO_OPT_BOOL || len < 5 || memcmp(name, "--no-", 5) != 0)
                        continue;
                    want += 2;
                    off = 5;
                }
                if (strlen(want) == len - off && !memcmp(want, name + off, len - off)) {
                    *gi = k;
                    *negated = pass == 1;
                    return o;
                }
            }
        }
    }
    return NULL;
}

static int set_defaults(const char *prog, struct folio_opt_group *groups, size_t num_groups)
{
    for (size_t k = 0; k < num_groups; k++) {
        if (groups[k].given)
            memset((void *)groups[k].given, 0, groups[k].n * sizeof *groups[k].given);
        for (size_t i = 0; i < groups[k].n; i++) {
            const struct folio_opt *o = &groups[k].opts[i];
            if (o->kind == FOLIO_OPT_LIST)
                ((struct folio_opt_list *)VALUE(&groups[k], o))->n = 0;
            else if (o->def && set_value(prog, &groups[k], o, o->def) != 0)
                return -1; /* a table's own default out of its range */
        }
    }
    return 0;
}

int folio_opts_parse(const char *prog, const char *usage, struct folio_opt_group *groups,
                     size_t num_groups, int argc, char **argv)
{
    if (set_defaults(prog, groups, num_groups) != 0)
        return -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            folio_opts_help(stdout, usage, groups, num_groups);
            return 1;
        }
        if (!strcmp(a, "--version")) {
            printf("%s %s\n", prog, FOLIO_VERSION);
            return 1;
        }
        if (strncmp(a, "--", 2) != 0) {
            fprintf(stderr, "%s: expected a --flag, got '%s' (see --help)\n", prog, a);
            return -1;
        }
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        size_t gi = 0;
        bool negated = false;
        const struct folio_opt *o = find(groups, num_groups, a, len, &gi, &negated);
        if (!o) {
            fprintf(stderr, "%s: unknown flag '%.*s' (see --help)\n", prog, (int)len, a);
            return -1;
        }
        const char *v;
        if (o->kind == FOLIO_OPT_BOOL) {
            if (eq) {
                fprintf(stderr, "%s: %s takes no value\n", prog, o->name);
                return -1;
            }
            v = negated ? "false" : "true";
        } else if (eq) {
            v = eq + 1;
        } else if (i + 1 < argc) {
            v = argv[++i];
        } else {
            fprintf(stderr, "%s: %s needs a value\n", prog, o->name);
            return -1;
        }
        if (set_value(prog, &groups[gi], o, v) != 0)
            return -1;
        if (groups[gi].given)
            groups[gi].given[o - groups[gi].opts] = o->kind == FOLIO_OPT_BOOL ? a : v;
    }
    return 0;
}

void folio_opts_help(FILE *f, const char *usage, const struct folio_opt_group *groups,
                     size_t num_groups)
{
    fprintf(f, "%s\n", usage);
    for (size_t k = 0; k < num_groups; k++) {
        if (groups[k].title)
            fprintf(f, "\n%s:\n", groups[k].title);
        for (size_t i = 0; i < groups[k].n; i++) {
            const struct folio_opt *o = &groups[k].opts[i];
            char head[96];
            if (o->kind == FOLIO_OPT_BOOL)
                snprintf(head, sizeof head, "%s, --no-%s", o->name, o->name + 2);
            else if (o->kind == FOLIO_OPT_CHOICE)
                snprintf(head, sizeof head, "%s %s", o->name, o->choices);
            else
                snprintf(head, sizeof head, "%s %s", o->name,
                         o->kind == FOLIO_OPT_INT   ? "N"
                         : o->kind == FOLIO_OPT_NUM ? "X"
                                                    : "VALUE");
            if (strlen(head) > 34) /* the doc on a line of its own */
                fprintf(f, "  %s\n  %-34s %s", head, "", o->doc);
            else
                fprintf(f, "  %-34s %s", head, o->doc);
            if (o->kind == FOLIO_OPT_INT || o->kind == FOLIO_OPT_NUM) {
                fprintf(f, " [");
                print_range(f, o);
                fprintf(f, "]");
            }
            if (o->def)
                fprintf(f, " (default: %s)", o->def);
            fputc('\n', f);
        }
    }
}

int folio_opts_forward(const struct folio_opt_group *g, const char **out, int max)
{
    int n = 0;
    for (size_t i = 0; i < g->n; i++) {
        if (!g->given || !g->given[i])
            continue;
        const struct folio_opt *o = &g->opts[i];
        if (o->kind == FOLIO_OPT_BOOL) { /* the token as typed: --x or --no-x */
            if (n + 1 > max)
                return -1;
            out[n++] = g->given[i];
            continue;
        }
        if (o->kind == FOLIO_OPT_LIST) {
            const struct folio_opt_list *l = (const void *)((const char *)g->values + o->offset);
            for (int j = 0; j < l->n; j++) {
                if (n + 2 > max)
                    return -1;
                out[n++] = o->name;
                out[n++] = l->v[j];
            }
            continue;
        }
        if (n + 2 > max)
            return -1;
        out[n++] = o->name;
        out[n++] = g->given[i];
    }
    return n;
}

const char *folio_opts_prog(const char *own)
{
    const char *p = getenv("FOLIO_PROG");
    return p && *p ? p : own;
}
