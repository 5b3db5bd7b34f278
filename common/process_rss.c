#include "process_rss.h"

#include <stdio.h>
#include <unistd.h>

uint64_t folio_process_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return 0;
    unsigned long long size = 0, resident = 0;
    int n = fscanf(f, "%llu %llu", &size, &resident);
    fclose(f);
    return n == 2 ? resident * (uint64_t)sysconf(_SC_PAGESIZE) : 0;
}
