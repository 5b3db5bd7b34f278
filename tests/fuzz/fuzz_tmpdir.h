/* A private temporary model directory for the fuzz targets whose API reads
 * files (config.json, model.safetensors): made once per process under $TMPDIR
 * (default /tmp), emptied and removed at exit. Header-only so each target stays
 * one file plus this. */
#ifndef FOLIO_FUZZ_TMPDIR_H
#define FOLIO_FUZZ_TMPDIR_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char fuzz_dir[512];
static char fuzz_file[600];

static void fuzz_tmpdir_remove(void)
{
    if (fuzz_file[0])
        unlink(fuzz_file);
    if (fuzz_dir[0])
        rmdir(fuzz_dir);
}

/* Makes the directory on first use; returns DIR/name (the one file the target
 * writes), or aborts: a fuzz run that cannot write its input tests nothing. */
static const char *fuzz_tmpdir_file(const char *name)
{
    if (!fuzz_dir[0]) {
        const char *tmp = getenv("TMPDIR");
        snprintf(fuzz_dir, sizeof fuzz_dir, "%s/folio-fuzz-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(fuzz_dir)) {
            perror(fuzz_dir);
            abort();
        }
        snprintf(fuzz_file, sizeof fuzz_file, "%s/%s", fuzz_dir, name);
        atexit(fuzz_tmpdir_remove);
    }
    return fuzz_file;
}

/* Writes the fuzzer's bytes as DIR/name and returns DIR. */
static const char *fuzz_tmpdir_write(const char *name, const uint8_t *data, size_t size)
{
    const char *path = fuzz_tmpdir_file(name);
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
        perror(path);
        abort();
    }
    return fuzz_dir;
}

#endif
