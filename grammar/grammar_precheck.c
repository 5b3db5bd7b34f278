/* What Folio refuses before llguidance sees a grammar: the inputs whose
 * compile time its limits do not bound. llguidance 1.8.0 builds an array's
 * grammar one item at a time up to minItems (or maxItems when given), before
 * any grammar-size limit looks, so {"maxItems": 1000000000} would compile
 * for minutes and gigabytes. Such bounds past FOLIO_GRAMMAR_MAX_ARRAY_ITEMS
 * are refused here, in a JSON schema and in the %json blocks of a Lark
 * grammar. (llguidance itself fails past about 20,000 items: its grammars
 * hold at most 65,535 symbols.) */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "grammar_internal.h"

/* Every "minItems"/"maxItems" number anywhere in v (enum and const values
 * included: a false refusal there needs such a key with such a number). */
static int check_value(json_t *v, char *err, size_t errlen)
{
    const char *key;
    json_t *child;
    size_t i;
    if (json_is_object(v)) {
        json_object_foreach(v, key, child)
        {
            if ((!strcmp(key, "minItems") || !strcmp(key, "maxItems")) && json_is_number(child) &&
                json_number_value(child) > FOLIO_GRAMMAR_MAX_ARRAY_ITEMS) {
                snprintf(err, errlen, "%s %g is over the limit of %d", key,
                         json_number_value(child), FOLIO_GRAMMAR_MAX_ARRAY_ITEMS);
                return -1;
            }
            if (check_value(child, err, errlen))
                return -1;
        }
    } else if (json_is_array(v)) {
        json_array_foreach(v, i, child) if (check_value(child, err, errlen)) return -1;
    }
    return 0;
}

/* A schema that does not parse is left to llguidance, whose message says where. */
static int check_json(const char *text, size_t len, size_t flags, size_t *used, char *err,
                      size_t errlen)
{
    json_error_t jerr;
    /* Integers as reals: one past int64 is still a number to compare. */
    json_t *v = json_loadb(text, len, flags | JSON_DECODE_INT_AS_REAL, &jerr);
    if (!v)
        return 0;
    if (used)
        *used = jerr.position;
    int rc = check_value(v, err, errlen);
    json_decref(v);
    return rc;
}

int grammar_precheck(enum folio_grammar_kind kind, const char *text, size_t len, char *err,
                     size_t errlen)
{
    if (memchr(text, 0, len)) {
        snprintf(err, errlen, "the text holds a NUL byte");
        return -1;
    }
    if (kind == FOLIO_GRAMMAR_JSON_SCHEMA)
        return check_json(text, len, 0, NULL, err, errlen);
    if (kind != FOLIO_GRAMMAR_LARK)
        return 0;
    /* Each "%json" and the JSON value after it (jansson stops at its end). */
    for (const char *p = text, *end = text + len; (p = memmem(p, (size_t)(end - p), "%json", 5));) {
        p += 5;
        while (p < end && strchr(" \t\r\n", *p) && *p)
            p++;
        size_t used = 0;
        if (check_json(p, (size_t)(end - p), JSON_DISABLE_EOF_CHECK, &used, err, errlen))
            return -1;
        p += used;
    }
    return 0;
}
