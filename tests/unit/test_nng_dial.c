/* common/nng_dial.c: a dialer counts its connections, says when one closed,
 * redials a restarted peer, and a dialer that stopped redialling (what nng
 * 1.5 sometimes does) is replaced by the watch. */
#include <nng/nng.h>
#include <nng/protocol/pipeline0/pull.h>
#include <nng/protocol/pipeline0/push.h>
#include <stdio.h>
#include <unistd.h>

#include "check.h"
#include "clock.h"
#include "nng_dial.h"

/* Calls the watch every 50 ms (as the frontends' control thread does) until
 * d has want connections or timeout_s passes; the seconds it took, or -1. */
static double wait_connections(struct folio_dial *d, int want, double timeout_s)
{
    double t0 = folio_mono_s();
    while (folio_mono_s() - t0 < timeout_s) {
        folio_dial_watch(d);
        if (folio_dial_connections(d) == want)
            return folio_mono_s() - t0;
        usleep(50000);
    }
    return -1;
}

static int listen_on(const char *url, nng_socket *pull)
{
    if (nng_pull0_open(pull) != 0)
        return -1;
    return nng_listen(*pull, url, NULL, 0);
}

int main(void)
{
    char url[128], err[256];
    snprintf(url, sizeof url, "ipc:///tmp/folio-test-dial-%d.ipc", (int)getpid());
    nng_socket push, pull;
    CHECK(nng_push0_open(&push) == 0);
    nng_socket_set_ms(push, NNG_OPT_RECONNMINT, 20);
    nng_socket_set_ms(push, NNG_OPT_RECONNMAXT, 500);

    /* The peer starts after the dial. */
    struct folio_dial d;
    CHECK(folio_dial_start(&d, push, url, err, sizeof err) == 0);
    CHECK(folio_dial_connections(&d) == 0);
    CHECK(listen_on(url, &pull) == 0);
    CHECK(wait_connections(&d, 1, 5) >= 0);
    CHECK(!folio_dial_lost(&d));

    /* The peer restarts: the loss is said once, and nng redials. */
    nng_close(pull);
    CHECK(wait_connections(&d, 0, 5) >= 0);
    CHECK(folio_dial_lost(&d));
    CHECK(!folio_dial_lost(&d));
    CHECK(listen_on(url, &pull) == 0);
    CHECK(wait_connections(&d, 1, 5) >= 0);

    /* A dialer that stopped redialling (closed behind the watch's back, as
     * nng's own gives up): the watch replaces it within its 2 s and a bit. */
    nng_dialer_close(d.dialer);
    CHECK(wait_connections(&d, 0, 5) >= 0);
    double took = wait_connections(&d, 1, 10);
    if (took < 0)
        fprintf(stderr, "the watch did not replace a dead dialer within 10 s\n");
    CHECK(took >= 0);

    nng_close(push);
    nng_close(pull);
    folio_dial_fini(&d);
    return check_report();
}
