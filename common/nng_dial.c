#include "nng_dial.h"

#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "log.h"

/* nng 1.5's dialer can stop redialling for good after a connection that
 * failed while it was being set up: seen when the scheduler was killed
 * repeatedly on a loaded machine, one frontend's Submit socket never
 * connected again while the scheduler was up and served the other frontend.
 * A dialer without a connection for this long is replaced by a new one; a
 * working dialer retries far more often (RECONNMAXT) and is never touched. */
#define REDIAL_AFTER_S 2.0

/* nng calls this on its own thread when a connection opens or closes. */
static void on_pipe(nng_pipe p, nng_pipe_ev ev, void *arg)
{
    struct folio_dial *d = arg;
    uint32_t id = (uint32_t)nng_pipe_id(p);
    pthread_mutex_lock(&d->mu);
    for (size_t i = 0; i < sizeof d->pipes / sizeof d->pipes[0]; i++) {
        if (ev == NNG_PIPE_EV_ADD_POST && d->pipes[i] == 0) {
            d->pipes[i] = id;
            break;
        }
        if (ev == NNG_PIPE_EV_REM_POST && d->pipes[i] == id)
            d->pipes[i] = 0;
    }
    pthread_mutex_unlock(&d->mu);
    if (ev == NNG_PIPE_EV_REM_POST)
        atomic_store(&d->lost, true);
}

int folio_dial_start(struct folio_dial *d, nng_socket sock, const char *url, char *err,
                     size_t errlen)
{
    memset(d, 0, sizeof *d);
    d->sock = sock;
    snprintf(d->url, sizeof d->url, "%s", url);
    pthread_mutex_init(&d->mu, NULL);
    nng_pipe_notify(sock, NNG_PIPE_EV_ADD_POST, on_pipe, d);
    nng_pipe_notify(sock, NNG_PIPE_EV_REM_POST, on_pipe, d);
    int rv = nng_dial(sock, d->url, &d->dialer, NNG_FLAG_NONBLOCK);
    if (rv != 0) {
        snprintf(err, errlen, "dial %s: %s", d->url, nng_strerror(rv));
        return -1;
    }
    return 0;
}

int folio_dial_connections(struct folio_dial *d)
{
    int n = 0;
    pthread_mutex_lock(&d->mu);
    for (size_t i = 0; i < sizeof d->pipes / sizeof d->pipes[0]; i++)
        n += d->pipes[i] != 0;
    pthread_mutex_unlock(&d->mu);
    return n;
}

bool folio_dial_lost(struct folio_dial *d)
{
    return atomic_exchange(&d->lost, false);
}

void folio_dial_watch(struct folio_dial *d)
{
    double now = folio_mono_s();
    if (folio_dial_connections(d) > 0) {
        d->down_since = 0;
        return;
    }
    if (d->down_since == 0) {
        d->down_since = now;
        return;
    }
    if (now - d->down_since < REDIAL_AFTER_S)
        return;
    nng_dialer_close(d->dialer);
    int rv = nng_dial(d->sock, d->url, &d->dialer, NNG_FLAG_NONBLOCK);
    folio_log_debug(0, "no connection to %s for %.1f s: a new dialer%s%s", d->url,
                    now - d->down_since, rv ? " failed: " : "", rv ? nng_strerror(rv) : "");
    d->down_since = now;
}

void folio_dial_fini(struct folio_dial *d)
{
    pthread_mutex_destroy(&d->mu);
}
