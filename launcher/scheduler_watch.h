/* The launcher's heartbeat on its scheduler: a thread asks the scheduler's
 * control socket for its status twice a second and records when it last
 * answered. A scheduler that is alive but silent (stopped with SIGSTOP,
 * deadlocked) is invisible to waitpid; `folio serve` kills and restarts one
 * that stays silent, as the scheduler does for its worker. */
#ifndef FOLIO_SCHEDULER_WATCH_H
#define FOLIO_SCHEDULER_WATCH_H

#include <stddef.h>

struct folio_sched_watch;

/* Starts asking ctl_url (an nng URL; the scheduler may start later). */
int folio_sched_watch_start(const char *ctl_url, struct folio_sched_watch **out, char *err,
                            size_t errlen);

/* folio_mono_s() of the last answer; 0 before the first one. */
double folio_sched_watch_last_answer(struct folio_sched_watch *w);

void folio_sched_watch_stop(struct folio_sched_watch *w);

#endif
