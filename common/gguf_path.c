/* Which --model paths are GGUF files: a file named *.gguf, or a folder that
 * holds exactly one *.gguf and no config.json (a folder with config.json is a
 * Hugging Face model, whatever else it holds). */
#include "error.h"
#include "gguf.h"

#include <dirent.h>
#include <limits.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool ends_with_gguf(const char *s)
{
    size_t n = strlen(s);
    return n > 5 && strcmp(s + n - 5, ".gguf") == 0;
}

int folio_gguf_resolve(const char *path, char *out, size_t outlen, char *err, size_t errlen)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return 0;
    if (S_ISREG(st.st_mode)) {
        if (!ends_with_gguf(path))
            return 0;
        if ((size_t)snprintf(out, outlen, "%s", path) >= outlen) {
            folio_set_err(err, errlen, "%s: path too long", path);
            return -1;
        }
        return 1;
    }
    if (!S_ISDIR(st.st_mode))
        return 0;
    char probe[4096];
    if ((size_t)snprintf(probe, sizeof probe, "%s/config.json", path) >= sizeof probe) {
        folio_set_err(err, errlen, "%s: path too long", path);
        return -1;
    }
    if (access(probe, F_OK) == 0)
        return 0;
    DIR *d = opendir(path);
    if (!d) {
        folio_set_err(err, errlen, "%s: cannot list: %s", path, strerror(errno));
        return -1;
    }
    int found = 0;
    char first[NAME_MAX + 1] = "", second[NAME_MAX + 1] = "";
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || !ends_with_gguf(e->d_name))
            continue;
        snprintf(found ? second : first, sizeof first, "%s", e->d_name);
        found++;
    }
    closedir(d);
    if (found == 0)
        return 0;
    if (found > 1) {
        folio_set_err(err, errlen,
                      "%s: holds %d .gguf files (%s, %s%s) and no config.json; give --model the "
                      "one to serve",
                      path, found, first, second, found > 2 ? ", ..." : "");
        return -1;
    }
    if ((size_t)snprintf(out, outlen, "%s/%s", path, first) >= outlen) {
        folio_set_err(err, errlen, "%s: path too long", path);
        return -1;
    }
    return 1;
}
