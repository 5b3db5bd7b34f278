/* The buckets of the queue-time histogram (a request's wait from submit to
 * its first admission), which the scheduler counts and each frontend's
 * /metrics shows as vLLM's request_queue_time_seconds: vLLM's own bounds. */
#ifndef FOLIO_QUEUE_TIME_H
#define FOLIO_QUEUE_TIME_H

#define FOLIO_QUEUE_TIME_BUCKETS 21

static const double folio_queue_time_bounds[FOLIO_QUEUE_TIME_BUCKETS] = {
    0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
    30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};

#endif
