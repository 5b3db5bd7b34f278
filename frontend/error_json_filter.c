/* h2o answers some requests itself before Folio sees them (a body past its
 * size limit, a broken chunked encoding) with a text/plain error. Clients of
 * an OpenAI-compatible server parse error bodies as JSON, so this filter,
 * installed on the host's fallback path that h2o uses for those answers,
 * rewrites them into OpenAI's error object, keeping status and message. */
#include "error_json_filter.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "json_writer.h"
#include "openai_api.h"

struct json_error_filter {
    h2o_filter_t super;
    void (*count)(void *arg, int status);
    void *arg;
    size_t max_body;
};

struct json_error_ostream {
    h2o_ostream_t super;
    size_t max_body;
};

static void json_error_send(h2o_ostream_t *self, h2o_req_t *req, h2o_iovec_t *bufs, size_t n,
                            h2o_send_state_t state)
{
    /* h2o_send_inline hands the whole text over at once, with FINAL. */
    if (n == 0 || state != H2O_SEND_STATE_FINAL) {
        h2o_ostream_send_next(self, req, bufs, n, state);
        return;
    }
    size_t len = 0;
    for (size_t i = 0; i < n; i++)
        len += bufs[i].len;
    char *text = h2o_mem_alloc_pool(&req->pool, len + 1);
    len = 0;
    for (size_t i = 0; i < n; i++) {
        memcpy(text + len, bufs[i].base, bufs[i].len);
        len += bufs[i].len;
    }
    while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == '\r'))
        len--;
    text[len] = 0;
    char too_large[96];
    if (req->res.status == 413) {
        snprintf(too_large, sizeof too_large,
                 "the request body is larger than the maximum of %zu bytes",
                 ((struct json_error_ostream *)self)->max_body);
        text = too_large;
    }
    struct folio_jw b;
    folio_jw_init(&b);
    folio_oai_write_error(&b, req->res.status, text, NULL);
    if (b.failed) {
        folio_jw_free(&b);
        h2o_ostream_send_next(self, req, bufs, n, state);
        return;
    }
    h2o_iovec_t out = h2o_strdup(&req->pool, b.data, b.len);
    folio_jw_free(&b);
    req->res.content_length = out.len; /* the headers go out with the first send */
    h2o_ostream_send_next(self, req, &out, 1, state);
}

static void on_setup_ostream(h2o_filter_t *self, h2o_req_t *req, h2o_ostream_t **slot)
{
    struct json_error_filter *f = (struct json_error_filter *)self;
    ssize_t i = h2o_find_header(&req->res.headers, H2O_TOKEN_CONTENT_TYPE, -1);
    bool plain_error =
        req->res.status >= 400 && i >= 0 &&
        h2o_memis(req->res.headers.entries[i].value.base, req->res.headers.entries[i].value.len,
                  H2O_STRLIT("text/plain; charset=utf-8"));
    if (plain_error) {
        if (f->count)
            f->count(f->arg, req->res.status);
        req->res.headers.entries[i].value = h2o_iovec_init(H2O_STRLIT("application/json"));
        struct json_error_ostream *os =
            (void *)h2o_add_ostream(req, sizeof(struct json_error_ostream), slot);
        os->super.do_send = json_error_send;
        os->max_body = f->max_body;
        slot = &os->super.next;
    }
    h2o_setup_next_ostream(req, slot);
}

void folio_register_error_json_filter(h2o_hostconf_t *host, void (*count)(void *arg, int status),
                                      void *arg, size_t max_body)
{
    struct json_error_filter *f =
        (struct json_error_filter *)h2o_create_filter(&host->fallback_path, sizeof *f);
    f->super.on_setup_ostream = on_setup_ostream;
    f->count = count;
    f->arg = arg;
    f->max_body = max_body;
}
