/* After its 413 a refused stream may still receive DATA that the client sent
 * before reading the answer, or sends anyway (httpx uploads the whole body
 * before it reads). h2o would reset the stream on it, cutting the 413 off if
 * not yet written, or once the stream is closed answer each frame with
 * RST_STREAM, on which clients discard the 413 (httpx, curl 7.88; even
 * RST_STREAM(NO_ERROR), which RFC 9113 8.1 says they must not). So that DATA
 * is dropped here up to the stream's end, its flow-control credit given back
 * as h2o gives it for DATA it keeps. */
#include "h2_body_limit.h"

#include <stdbool.h>
#include <stdlib.h>

typedef ssize_t (*frame_reader)(h2o_http2_conn_t *conn, const uint8_t *src, size_t len,
                                const char **err_desc);

/* The streams refused last; DATA for one older than these is h2o's again. */
#define NUM_REMEMBERED 16

struct body_limit {
    frame_reader inner; /* h2o's reader for the connection's state now */
    size_t max_body;
    struct {
        uint32_t id;               /* 0: none (no stream has id 0) */
        h2o_http2_window_t window; /* the stream's receive window, kept past its close */
    } refused[NUM_REMEMBERED];
    unsigned next_slot;
};

static int find_refused(const struct body_limit *b, uint32_t id)
{
    for (int i = 0; i < NUM_REMEMBERED; i++)
        if (b->refused[i].id == id)
            return i;
    return -1;
}

/* h2o's update_input_window: credit for consumed bytes, returned once half
 * the window is used. */
static void give_back(h2o_http2_conn_t *conn, uint32_t stream_id, h2o_http2_window_t *w,
                      size_t consumed)
{
    h2o_http2_window_consume_window(w, consumed);
    ssize_t avail = h2o_http2_window_get_window(w);
    if (avail * 2 < (ssize_t)H2O_HTTP2_SETTINGS_HOST.initial_window_size) {
        int32_t delta = (int32_t)(H2O_HTTP2_SETTINGS_HOST.initial_window_size - avail);
        h2o_http2_encode_window_update_frame(&conn->_write.buf, stream_id, delta);
        h2o_http2_conn_request_write(conn);
        h2o_http2_window_update(w, delta);
    }
}

/* As h2o answers a request whose headers it cannot take (its handling of
 * invalid header characters): the stream goes straight to sending. */
static int refuse(struct body_limit *b, h2o_http2_conn_t *conn, h2o_http2_stream_t *stream)
{
    int slot = (int)(b->next_slot++ % NUM_REMEMBERED);
    b->refused[slot].id = stream->stream_id;
    b->refused[slot].window = stream->input_window;
    if (conn->pull_stream_ids.max_processed < stream->stream_id)
        conn->pull_stream_ids.max_processed = stream->stream_id; /* GOAWAY counts it handled */
    h2o_http2_stream_set_state(conn, stream, H2O_HTTP2_STREAM_STATE_REQ_PENDING);
    h2o_http2_stream_set_state(conn, stream, H2O_HTTP2_STREAM_STATE_SEND_HEADERS);
    /* error_json_filter.c words it with the limit, as OpenAI's error JSON,
     * and counts it. */
    h2o_send_error_generic(&stream->req, 413, "Payload Too Large", "request entity is too large",
                           0);
    return slot;
}

/* The length of a DATA frame it consumed (refusing its stream, or dropping
 * DATA of a stream refused before); 0 for a frame h2o is to read. */
static ssize_t limit_data(struct body_limit *b, h2o_http2_conn_t *conn, const uint8_t *src,
                          size_t len)
{
    h2o_http2_frame_t frame;
    h2o_http2_data_payload_t payload;
    const char *err = NULL;
    ssize_t n = h2o_http2_decode_frame(&frame, src, len, &H2O_HTTP2_SETTINGS_HOST, &err);
    if (n < 0 || frame.type != H2O_HTTP2_FRAME_TYPE_DATA ||
        h2o_http2_decode_data_payload(&payload, &frame, &err) != 0)
        return 0; /* incomplete or malformed: h2o's to answer */
    h2o_http2_stream_t *stream = h2o_http2_conn_get_stream(conn, frame.stream_id);
    int slot = find_refused(b, frame.stream_id);
    if (slot < 0) {
        if (!stream || stream->state != H2O_HTTP2_STREAM_STATE_RECV_BODY)
            return 0;
        size_t declared = stream->_expected_content_length; /* SIZE_MAX: none */
        if (stream->_req_body->size + payload.length <= b->max_body &&
            (declared == SIZE_MAX || declared <= b->max_body))
            return 0;
        slot = refuse(b, conn, stream);
    }
    give_back(conn, 0, &conn->_input_window, frame.length);
    if (frame.flags & H2O_HTTP2_FRAME_FLAG_END_STREAM)
        b->refused[slot].id = 0; /* the client is done with it */
    else
        give_back(conn, frame.stream_id, &b->refused[slot].window, frame.length);
    return n;
}

static ssize_t read_frame(h2o_http2_conn_t *conn, const uint8_t *src, size_t len,
                          const char **err_desc)
{
    struct body_limit *b = conn->sock->on_close.data;
    /* Not while HEADERS await their CONTINUATION (DATA there is h2o's
     * protocol error to report) nor once the connection is winding down. */
    if (conn->_headers_unparsed == NULL && conn->state == H2O_HTTP2_CONN_STATE_OPEN &&
        len >= H2O_HTTP2_FRAME_HEADER_SIZE && src[3] == H2O_HTTP2_FRAME_TYPE_DATA) {
        ssize_t n = limit_data(b, conn, src, len);
        if (n != 0)
            return n;
    }
    ssize_t n = b->inner(conn, src, len, err_desc);
    /* h2o moves on to its reader for the next state (after the preface,
     * around CONTINUATION frames): wrap that one instead. */
    if (conn->_read_expect != read_frame) {
        b->inner = conn->_read_expect;
        conn->_read_expect = read_frame;
    }
    return n;
}

static void free_limit(void *data)
{
    free(data);
}

void folio_h2_body_limit(h2o_http2_conn_t *conn, size_t max_body)
{
    if (conn->_read_expect == read_frame || !conn->sock || conn->sock->on_close.cb)
        return;
    struct body_limit *b = calloc(1, sizeof *b);
    if (!b)
        return;
    b->inner = conn->_read_expect;
    b->max_body = max_body;
    conn->sock->on_close.cb = free_limit;
    conn->sock->on_close.data = b;
    conn->_read_expect = read_frame;
}
