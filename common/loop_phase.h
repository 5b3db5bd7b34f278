/* What the scheduler's loop spends its time on, so that a saturated server's
 * time budget has names: the scheduler adds each turn's phases up, the
 * StatusReply carries them (loop_seconds_total, in this order) and each
 * frontend's /metrics shows them as folio_scheduler_loop_seconds_total{phase}. */
#ifndef FOLIO_LOOP_PHASE_H
#define FOLIO_LOOP_PHASE_H

enum folio_loop_phase {
    FOLIO_LOOP_INTAKE,   /* signals, the worker's messages, status requests, submits, aborts */
    FOLIO_LOOP_RESULTS,  /* step results applied: tokens appended, token events into the rings */
    FOLIO_LOOP_PLAN,     /* steps planned and written to the plan ring */
    FOLIO_LOOP_EVENTS,   /* events that did not fit a frontend's ring, flushed later */
    FOLIO_LOOP_WAIT_GPU, /* waiting for results with steps in flight, nothing else to plan */
    FOLIO_LOOP_HELD,     /* work to plan, held back: a frontend's events are over their bound */
    FOLIO_LOOP_IDLE,     /* nothing to plan and nothing in flight, or no worker ready */
    FOLIO_LOOP_PHASES
};

static inline const char *folio_loop_phase_name(int phase)
{
    static const char *const names[FOLIO_LOOP_PHASES] = {
        "intake", "results", "plan", "events", "wait_gpu", "held_by_events", "idle"};
    return phase >= 0 && phase < FOLIO_LOOP_PHASES ? names[phase] : "?";
}

#endif
