/* The --tool-call-parser names and the parsers they stand for. */
#include <string.h>

#include "tool_parser.h"

const struct folio_tool_parser_ops *folio_tool_parser_find(const char *name)
{
    static const struct folio_tool_parser_ops *const all[] = {
        &folio_tool_parser_hermes, &folio_tool_parser_llama3_json, &folio_tool_parser_mistral};
    for (size_t i = 0; name && i < sizeof all / sizeof *all; i++)
        if (!strcmp(all[i]->name, name))
            return all[i];
    return NULL;
}
