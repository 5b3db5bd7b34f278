/* Scratch directories and files for the unit tests that read what they write. */
#ifndef FOLIO_TEST_TMP_FILES_H
#define FOLIO_TEST_TMP_FILES_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A new directory /tmp/folio-test-NAME-XXXXXX; the caller frees the path. */
static inline char *make_dir_named(const char *name)
{
    char tmpl[128];
    snprintf(tmpl, sizeof tmpl, "/tmp/folio-test-%s-XXXXXX", name);
    char *d = mkdtemp(tmpl);
    if (!d) {
        perror("mkdtemp");
        exit(1);
    }
    return strdup(d);
}

/* Removes dir's files, dir itself, and frees the path. */
static inline void remove_dir(char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char p[512];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    if (d)
        closedir(d);
    rmdir(dir);
    free(dir);
}

static inline void write_file(const char *dir, const char *name, const void *bytes, size_t len)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    if (!f || fwrite(bytes, 1, len, f) != len) {
        perror(p);
        exit(1);
    }
    fclose(f);
}

static inline void write_text(const char *dir, const char *name, const char *text)
{
    write_file(dir, name, text, strlen(text));
}

#endif
