/* common/options.c: defaults, every kind of flag, --name=value, --no-name,
 * ranges and choices as errors, repeatable flags, and forwarding the given
 * flags as typed. */
#include <string.h>

#include "check.h"
#include "options.h"

struct vals {
    const char *name, *mode;
    int64_t count;
    double ratio;
    bool fast;
    struct folio_opt_list keys;
};

#define V(f) FOLIO_OPT_FIELD(struct vals, f)
static const struct folio_opt table[] = {
    {"--name", FOLIO_OPT_STR, V(name), NULL, 0, 0, NULL, "a name"},
    {"--mode", FOLIO_OPT_CHOICE, V(mode), "a", 0, 0, "a|bb|c", "a mode"},
    {"--count", FOLIO_OPT_INT, V(count), "4", 1, 10, NULL, "a count"},
    {"--ratio", FOLIO_OPT_NUM, V(ratio), "0.5", 0, 1, NULL, "a ratio"},
    {"--fast", FOLIO_OPT_BOOL, V(fast), "true", 0, 0, NULL, "go fast"},
    {"--key", FOLIO_OPT_LIST, V(keys), NULL, 0, 0, NULL, "a key"},
};
#define N (sizeof table / sizeof *table)

static int parse(struct vals *v, const char **given, int argc, const char **argv)
{
    struct folio_opt_group g = {NULL, table, N, v, given};
    memset(v, 0, sizeof *v);
    return folio_opts_parse("prog", "usage: prog", &g, 1, argc, (char **)argv);
}

int main(void)
{
    struct vals v;
    const char *given[N];
    const char *none[] = {"prog"};
    CHECK(parse(&v, given, 1, none) == 0);
    CHECK(v.count == 4 && v.ratio == 0.5 && v.fast && !strcmp(v.mode, "a") && !v.name);
    CHECK(v.keys.n == 0 && given[2] == NULL);

    const char *all[] = {"prog",    "--name", "x",         "--mode=bb", "--count", "10",
                         "--ratio", "1",      "--no-fast", "--key",     "k1",      "--key=k2"};
    CHECK(parse(&v, given, 12, all) == 0);
    CHECK(!strcmp(v.name, "x") && !strcmp(v.mode, "bb") && v.count == 10 && v.ratio == 1.0);
    CHECK(!v.fast && v.keys.n == 2 && !strcmp(v.keys.v[1], "k2"));
    struct folio_opt_group g = {NULL, table, N, &v, given};
    const char *out[16];
    int n = folio_opts_forward(&g, out, 16);
    CHECK(n == 13);
    CHECK(n == 13 && !strcmp(out[0], "--name") && !strcmp(out[1], "x") && !strcmp(out[3], "bb") &&
          !strcmp(out[5], "10") && !strcmp(out[8], "--no-fast") && !strcmp(out[9], "--key") &&
          !strcmp(out[10], "k1"));
    CHECK(folio_opts_forward(&g, out, 3) == -1);

    const char *bad[][3] = {
        {"prog", "--count", "0"},   {"prog", "--count", "11"},  {"prog", "--count", "3x"},
        {"prog", "--ratio", "2"},   {"prog", "--ratio", "nan"}, {"prog", "--mode", "b"},
        {"prog", "--nope", "1"},    {"prog", "--fast=1", "x"},  {"prog", "plain", "x"},
        {"prog", "--no-name", "x"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK(parse(&v, given, 3, bad[i]) == -1);
    const char *missing[] = {"prog", "--count"};
    CHECK(parse(&v, given, 2, missing) == -1);
    return check_report();
}
