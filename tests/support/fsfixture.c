/*
 * Test support: throwaway directory trees (see fsfixture.h).
 */
#include "tests/support/fsfixture.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int nxr_test_fixture_dir(char *buf, size_t size)
{
    const char *tmp = getenv("TEST_TMPDIR");
    if (tmp == NULL || tmp[0] == '\0')
        tmp = "/tmp";
    int n = snprintf(buf, size, "%s/nxr-fixture-XXXXXX", tmp);
    if (n < 0 || (size_t)n >= size)
        return -ENAMETOOLONG;
    return mkdtemp(buf) != NULL ? 0 : -errno;
}

/* mkdir -p of path's first len bytes' every component. */
static int make_parents(char *path, size_t len)
{
    for (size_t i = 1; i <= len; i++) {
        if (path[i] != '/' && path[i] != '\0')
            continue;
        char keep = path[i];
        path[i] = '\0';
        int rc = mkdir(path, 0755) == 0 || errno == EEXIST ? 0 : -errno;
        path[i] = keep;
        if (rc != 0)
            return rc;
        if (keep == '\0')
            break;
    }
    return 0;
}

int nxr_test_fixture_mkdir(const char *dir, const char *rel)
{
    char path[4096];
    int n = snprintf(path, sizeof(path), "%s/%s", dir, rel);
    if (n < 0 || (size_t)n >= sizeof(path))
        return -ENAMETOOLONG;
    return make_parents(path, (size_t)n);
}

int nxr_test_fixture_write(const char *dir, const char *rel, const char *content)
{
    char path[4096];
    int n = snprintf(path, sizeof(path), "%s/%s", dir, rel);
    if (n < 0 || (size_t)n >= sizeof(path))
        return -ENAMETOOLONG;
    char *slash = strrchr(path, '/');
    int rc = make_parents(path, (size_t)(slash - path));
    if (rc != 0)
        return rc;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    size_t len = strlen(content);
    ssize_t w = write(fd, content, len);
    rc = w == (ssize_t)len ? 0 : -EIO;
    close(fd);
    return rc;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

void nxr_test_fixture_remove(const char *dir)
{
    nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}
