/* Plain (not streamed) responses: a body with its status, or OpenAI's error
 * body, each counted in /metrics. */
#include "http_internal.h"

#include <stdio.h>
#include <string.h>

#include "metrics.h"
#include "openai_api.h"

static const char *reason_of(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 413:
        return "Payload Too Large";
    case 429:
        return "Too Many Requests";
    case 503:
        return "Service Unavailable";
    default:
        return status >= 500 ? "Internal Server Error" : "Error";
    }
}

void http_send_body(struct server *s, h2o_req_t *req, int status, const char *type,
                    const char *body, size_t len)
{
    folio_metrics_count_response(&s->metrics, status);
    req->res.status = status;
    req->res.reason = reason_of(status);
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, type, strlen(type));
    h2o_send_inline(req, body, len);
}

void http_send_error(struct server *s, h2o_req_t *req, int status, const char *message,
                     const char *param, uint32_t retry_after_s)
{
    struct folio_jw b;
    folio_jw_init(&b);
    folio_oai_write_error(&b, status, message, param);
    if (status == 405)
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_ALLOW, NULL,
                       H2O_STRLIT("GET, POST"));
    if (status == 429) {
        char v[16];
        int n = snprintf(v, sizeof v, "%u", retry_after_s ? retry_after_s : 1);
        h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("retry-after"), 0, NULL,
                              h2o_strdup(&req->pool, v, (size_t)n).base, (size_t)n);
    }
    if (b.failed)
        http_send_body(s, req, 500, "text/plain", H2O_STRLIT("out of memory"));
    else
        http_send_body(s, req, status, "application/json", b.data, b.len);
    folio_jw_free(&b);
}
