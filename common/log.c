#include "log.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

static const char *log_process = "folio";
static enum folio_log_level log_threshold = FOLIO_LOG_INFO;
static const char *const level_names[] = {"DEBUG", "INFO", "WARN", "ERROR"};

void folio_log_init(const char *process_name)
{
    log_process = process_name;
    /* Logs go to stderr, often a pipe: once its reader is gone (`| head`),
     * a write must fail with EPIPE (ignored below), not kill the process. */
    signal(SIGPIPE, SIG_IGN);
    const char *env = getenv("FOLIO_LOG_LEVEL");
    if (!env)
        return;
    for (int i = FOLIO_LOG_DEBUG; i <= FOLIO_LOG_ERROR; i++)
        if (!strcasecmp(env, level_names[i]))
            log_threshold = (enum folio_log_level)i;
}

void folio_log_set_level(enum folio_log_level level)
{
    log_threshold = level;
}

int folio_log_enabled(enum folio_log_level level)
{
    return level >= log_threshold;
}

void folio_log(enum folio_log_level level, uint64_t request_id, const char *fmt, ...)
{
    if (level < log_threshold)
        return;
    char line[2048];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    int n = snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ %s[%d] %s ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     ts.tv_nsec / 1000, log_process, (int)getpid(), level_names[level]);
    if (request_id && n < (int)sizeof line)
        n += snprintf(line + n, sizeof line - n, "req=%016llx ", (unsigned long long)request_id);
    if (n < (int)sizeof line) {
        va_list ap;
        va_start(ap, fmt);
        n += vsnprintf(line + n, sizeof line - n, fmt, ap);
        va_end(ap);
    }
    /* A message longer than the buffer is cut, keeping the line whole. */
    if (n >= (int)sizeof line - 1)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    ssize_t off = 0;
    while (off < n) {
        ssize_t w = write(STDERR_FILENO, line + off, (size_t)(n - off));
        if (w <= 0)
            break;
        off += w;
    }
}
