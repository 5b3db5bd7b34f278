/* common/spec_config.c: vLLM's --speculative-config JSON, its defaults, and an error naming the
 * field for every value it refuses. */
#include <string.h>

#include "check.h"
#include "spec_config.h"

static void refused(const char *json, const char *names)
{
    struct folio_spec_config c;
    char err[512] = "";
    CHECK(folio_spec_config_parse(json, &c, err, sizeof err) == -1);
    CHECK(strstr(err, names) != NULL);
    if (!strstr(err, names))
        fprintf(stderr, "  %s -> %s\n", json, err);
}

int main(void)
{
    struct folio_spec_config c;
    char err[512];
    CHECK(folio_spec_config_parse(NULL, &c, err, sizeof err) == 0 && !c.on);
    CHECK(folio_spec_config_parse("", &c, err, sizeof err) == 0 && !c.on);
    CHECK(folio_spec_config_parse("{\"method\": \"ngram\", \"num_speculative_tokens\": 4, "
                                  "\"prompt_lookup_max\": 3, \"prompt_lookup_min\": 2}",
                                  &c, err, sizeof err) == 0);
    CHECK(c.on && c.num_tokens == 4 && c.lookup_max == 3 && c.lookup_min == 2);
    /* vLLM's defaults: 5 and 5, or the one bound given for both */
    CHECK(folio_spec_config_parse("{\"method\": \"ngram\", \"num_speculative_tokens\": 2}", &c, err,
                                  sizeof err) == 0);
    CHECK(c.lookup_max == 5 && c.lookup_min == 5);
    CHECK(folio_spec_config_parse("{\"method\": \"ngram\", \"num_speculative_tokens\": 2, "
                                  "\"prompt_lookup_max\": 3}",
                                  &c, err, sizeof err) == 0);
    CHECK(c.lookup_max == 3 && c.lookup_min == 3);
    CHECK(folio_spec_config_parse("{\"method\": \"ngram\", \"num_speculative_tokens\": 2, "
                                  "\"prompt_lookup_min\": 4}",
                                  &c, err, sizeof err) == 0);
    CHECK(c.lookup_max == 4 && c.lookup_min == 4);

    refused("{\"method\": \"ngram\"", "not a JSON object");
    refused("[1]", "not a JSON object");
    refused("{\"num_speculative_tokens\": 2}", "\"method\"");
    refused("{\"method\": 3, \"num_speculative_tokens\": 2}", "\"method\"");
    refused("{\"method\": \"ngram\"}", "\"num_speculative_tokens\"");
    refused("{\"method\": \"ngram\", \"num_speculative_tokens\": 0}", "\"num_speculative_tokens\"");
    refused("{\"method\": \"ngram\", \"num_speculative_tokens\": 17}",
            "\"num_speculative_tokens\"");
    refused("{\"method\": \"ngram\", \"num_speculative_tokens\": 2.5}",
            "\"num_speculative_tokens\"");
    refused("{\"method\": \"ngram\", \"num_speculative_tokens\": 2, \"prompt_lookup_max\": 65}",
            "\"prompt_lookup_max\"");
    refused("{\"method\": \"ngram\", \"num_speculative_tokens\": 2, \"prompt_lookup_min\": 0}",
            "\"prompt_lookup_min\"");
    refused("{\"method\": \"ngram\", \"num_speculative_tokens\": 2, \"prompt_lookup_min\": 4, "
            "\"prompt_lookup_max\": 2}",
            "\"prompt_lookup_min\" (4) is above");
    refused("{\"method\": \"ngram\", \"num_speculative_tokens\": 2, \"extra\": true}",
            "unknown field \"extra\"");
    refused("{\"method\": \"medusa\", \"num_speculative_tokens\": 2}", "\"medusa\" is unknown");
    refused("{\"method\": \"draft_model\", \"model\": \"m\", \"num_speculative_tokens\": 2}",
            "not built");
    return check_report();
}
