#include "scheduler_watch.h"

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "folio.pb-c.h"
#include "nng_dial.h"

#define ASK_EVERY_US 500000

struct folio_sched_watch {
    nng_socket req;
    struct folio_dial dial;
    pthread_t thread;
    atomic_bool stopping;
    _Atomic double last_answer;
};

/* One StatusRequest and its reply; 0 when the scheduler answered. */
static int ask(struct folio_sched_watch *w)
{
    Folio__StatusRequest sr = FOLIO__STATUS_REQUEST__INIT;
    sr.frontend_id = UINT32_MAX; /* not a frontend: the launcher */
    Folio__Envelope env = FOLIO__ENVELOPE__INIT;
    env.body_case = FOLIO__ENVELOPE__BODY_STATUS_REQUEST;
    env.status_request = &sr;
    uint8_t buf[64];
    size_t n = folio__envelope__get_packed_size(&env);
    if (n > sizeof buf)
        return -1;
    folio__envelope__pack(&env, buf);
    if (nng_send(w->req, buf, n, 0) != 0)
        return -1;
    void *in = NULL;
    size_t inlen = 0;
    if (nng_recv(w->req, &in, &inlen, NNG_FLAG_ALLOC) != 0)
        return -1;
    Folio__Envelope *reply = folio__envelope__unpack(NULL, inlen, in);
    nng_free(in, inlen);
    bool ok = reply && reply->body_case == FOLIO__ENVELOPE__BODY_STATUS_REPLY;
    if (reply)
        folio__envelope__free_unpacked(reply, NULL);
    return ok ? 0 : -1;
}

static void *watch_main(void *arg)
{
    struct folio_sched_watch *w = arg;
    while (!atomic_load(&w->stopping)) {
        double asked = folio_mono_s();
        if (ask(w) == 0)
            atomic_store(&w->last_answer, folio_mono_s());
        /* A dialer that never connects again would read as a silent
         * scheduler, and have a healthy one killed over and over. */
        folio_dial_watch(&w->dial);
        double spent_us = (folio_mono_s() - asked) * 1e6;
        if (spent_us < ASK_EVERY_US)
            usleep((useconds_t)(ASK_EVERY_US - spent_us));
    }
    return NULL;
}

int folio_sched_watch_start(const char *ctl_url, struct folio_sched_watch **out, char *err,
                            size_t errlen)
{
    struct folio_sched_watch *w = calloc(1, sizeof *w);
    if (!w) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int rv;
    if ((rv = nng_req0_open(&w->req)) != 0) {
        snprintf(err, errlen, "nng socket: %s", nng_strerror(rv));
        free(w);
        return -1;
    }
    nng_socket_set_ms(w->req, NNG_OPT_RECONNMINT, 20);
    nng_socket_set_ms(w->req, NNG_OPT_RECONNMAXT, 500);
    nng_socket_set_ms(w->req, NNG_OPT_SENDTIMEO, 1000);
    nng_socket_set_ms(w->req, NNG_OPT_RECVTIMEO, 1000);
    nng_socket_set_size(w->req, NNG_OPT_RECVMAXSZ, 1 << 20);
    if ((rv = folio_dial_start(&w->dial, w->req, ctl_url, err, errlen)) == 0 &&
        (rv = pthread_create(&w->thread, NULL, watch_main, w)) != 0)
        snprintf(err, errlen, "watching %s: %s", ctl_url, strerror(rv));
    if (rv != 0) {
        nng_close(w->req);
        folio_dial_fini(&w->dial);
        free(w);
        return -1;
    }
    *out = w;
    return 0;
}

double folio_sched_watch_last_answer(struct folio_sched_watch *w)
{
    return atomic_load(&w->last_answer);
}

void folio_sched_watch_stop(struct folio_sched_watch *w)
{
    if (!w)
        return;
    atomic_store(&w->stopping, true);
    pthread_join(w->thread, NULL);
    nng_close(w->req);
    folio_dial_fini(&w->dial);
    free(w);
}
