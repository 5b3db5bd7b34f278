/* A process's resident memory, as /proc/self/statm counts it: each process
 * reads its own, and /metrics shows the frontend's, the scheduler's and the
 * worker's (the worker's weights and the pages of its KV pool touched so far). */
#ifndef FOLIO_PROCESS_RSS_H
#define FOLIO_PROCESS_RSS_H

#include <stdint.h>

/* Resident bytes of the calling process; 0 when /proc cannot be read. */
uint64_t folio_process_rss_bytes(void);

#endif
