/* A dialer that stays connected: nng's own redialling, watched. The frontends
 * and the launcher dial the scheduler, which restarts; each socket here has
 * one dialer, whose connections are counted from nng's pipe events. */
#ifndef FOLIO_NNG_DIAL_H
#define FOLIO_NNG_DIAL_H

#include <nng/nng.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

struct folio_dial {
    nng_socket sock;
    char url[512];
    nng_dialer dialer;
    /* Connected pipes by id. A set, not a counter: nng may report a pipe's
     * removal without having reported its addition (a connection that died
     * while being set up). */
    uint32_t pipes[8];
    pthread_mutex_t mu;
    atomic_bool lost;  /* a connection closed since folio_dial_lost last said so */
    double down_since; /* when the last connection went (0: connected); the watcher's */
};

/* Starts a non-blocking dial of url on sock (nng keeps redialling, also
 * after the peer restarts). 0, or -1 with err set. */
int folio_dial_start(struct folio_dial *d, nng_socket sock, const char *url, char *err,
                     size_t errlen);

/* Connections open now. */
int folio_dial_connections(struct folio_dial *d);

/* True once after a connection closed. */
bool folio_dial_lost(struct folio_dial *d);

/* Called now and then from one thread: replaces a dialer that has had no
 * connection for a while (see nng_dial.c). */
void folio_dial_watch(struct folio_dial *d);

void folio_dial_fini(struct folio_dial *d);

#endif
