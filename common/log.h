/* One line per event, for every Folio process:
 *
 *   2026-11-29T15:18:56.123456Z folio-scheduler[1234] INFO req=0001000000000007 admitted ...
 *
 * time (UTC, microseconds), process name and pid, level, the request id when
 * there is one (so a request can be followed through every process with one
 * grep), then the message. Each line goes to stderr in one write(2), so lines
 * of concurrent processes sharing a terminal or a log file never interleave. */
#ifndef FOLIO_LOG_H
#define FOLIO_LOG_H

#include <stdint.h>

enum folio_log_level { FOLIO_LOG_DEBUG = 0, FOLIO_LOG_INFO, FOLIO_LOG_WARN, FOLIO_LOG_ERROR };

/* The process name printed on every line (kept by pointer: pass a literal).
 * The level threshold comes from FOLIO_LOG_LEVEL (debug|info|warn|error),
 * default info. */
void folio_log_init(const char *process_name);
void folio_log_set_level(enum folio_log_level level);
int folio_log_enabled(enum folio_log_level level);

/* request_id 0: the event belongs to no request. */
void folio_log(enum folio_log_level level, uint64_t request_id, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define folio_log_debug(req, ...) folio_log(FOLIO_LOG_DEBUG, (req), __VA_ARGS__)
#define folio_log_info(req, ...) folio_log(FOLIO_LOG_INFO, (req), __VA_ARGS__)
#define folio_log_warn(req, ...) folio_log(FOLIO_LOG_WARN, (req), __VA_ARGS__)
#define folio_log_error(req, ...) folio_log(FOLIO_LOG_ERROR, (req), __VA_ARGS__)

#endif
