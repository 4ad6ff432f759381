/*
 * A host that loads libnxr.so at run time (a plug-in, a Python extension),
 * with no environment set up for it: dlopen(RTLD_NOW | RTLD_LOCAL) twice,
 * a runtime created through each handle, both destroyed, both handles
 * closed -- and the process left as it was found.
 *
 * usage: dlopen_host PATH [COPY]
 *   PATH  the library: opened twice, so the second dlopen returns the same
 *         object (the same handle, its reference count raised);
 *   COPY  optional, the same library under another file name: the second
 *         handle is then a second instance in the process (its own globals,
 *         its own arenas), as when two plug-ins each bring their own nxr.
 * Checks, each printed as a FAILED line when it does not hold:
 *   - both loads succeed (no "cannot allocate memory in static TLS block");
 *   - RTLD_LOCAL: nxr's symbols do not enter the global scope;
 *   - the runtimes start threads, and destroying both leaves exactly the
 *     threads there were once the library was loaded (its dependencies'
 *     own, OpenBLAS's pool), counted in /proc/self/task, not taken from nxr;
 *   - the peer registry (NXR_PEERS=warn, a private XDG_RUNTIME_DIR) tells
 *     two instances apart: the second instance's runtime warns on stderr
 *     that another copy of libnxr in this process has a runtime over its
 *     CPUs (the copies' arbiters do not see each other); one object opened
 *     twice is one instance and says nothing of the kind;
 *   - after the first dlclose the library stays loaded (the other handle),
 *     after the last one it is gone (RTLD_NOLOAD finds nothing), and the
 *     process has the threads it had before the first dlopen.
 * Prints "dlopen_host: ok, ..." on success. Built outside Bazel with plain
 * cc -ldl (tests/dist/exports_test.sh), so it counts threads itself rather
 * than through tests/support.
 */
#define _GNU_SOURCE /* RTLD_DEFAULT, mkdtemp, setenv */
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures;

static void check(int ok, const char *what, const char *detail)
{
    if (!ok) {
        printf("dlopen_host: FAILED: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
        failures++;
    }
}

/* Entries of /proc/self/task: the kernel's count of this process's threads. */
static int thread_count(void)
{
    DIR *d = opendir("/proc/self/task");
    if (d == NULL)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

struct nxr_entry {
    void *handle;
    const char *(*version)(void);
    int (*create)(const void *, void **);
    void (*destroy)(void *);
};

static int load(struct nxr_entry *e, const char *path)
{
    memset(e, 0, sizeof(*e));
    e->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (e->handle == NULL) {
        check(0, "dlopen", dlerror());
        return -1;
    }
    e->version = (const char *(*)(void))dlsym(e->handle, "nxr_version_string");
    e->create = (int (*)(const void *, void **))dlsym(e->handle, "nxr_runtime_create");
    e->destroy = (void (*)(void *))dlsym(e->handle, "nxr_runtime_destroy");
    if (e->version == NULL || e->create == NULL || e->destroy == NULL) {
        check(0, "dlsym of nxr_version_string, nxr_runtime_create, nxr_runtime_destroy", path);
        return -1;
    }
    return 0;
}

/* Whether path's object is still loaded (RTLD_NOLOAD loads nothing). */
static int loaded(const char *path)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (h != NULL)
        dlclose(h);
    return h != NULL;
}

int main(int argc, char **argv)
{
    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: dlopen_host PATH [COPY]\n");
        return 2;
    }
    const char *path = argv[1];
    const char *second = argc == 3 ? argv[2] : argv[1];
    int before = thread_count();
    check(before > 0, "reading /proc/self/task", NULL);

    struct nxr_entry a, b;
    if (load(&a, path) != 0 || load(&b, second) != 0)
        return 1;
    /* What loading started (OpenBLAS's thread pool, from its constructor). */
    int opened = thread_count();
    check(dlsym(RTLD_DEFAULT, "nxr_runtime_create") == NULL,
          "RTLD_LOCAL: nxr_runtime_create is in the global scope", NULL);
    if (argc == 2)
        check(a.handle == b.handle, "the second dlopen of one path returned another object", NULL);
    else
        check(a.handle != b.handle && a.create != b.create,
              "the copy under another name is not a second instance", NULL);

    /* A private registry, warnings on: what the second create says. */
    char registry[] = "/tmp/nxr-dlopen-host-XXXXXX", peers[64], said[96];
    check(mkdtemp(registry) != NULL, "mkdtemp", registry);
    setenv("XDG_RUNTIME_DIR", registry, 1);
    setenv("NXR_PEERS", "warn", 1);
    snprintf(peers, sizeof(peers), "%s/nxr-peers", registry);
    snprintf(said, sizeof(said), "%s/stderr", registry);

    void *rt_a = NULL, *rt_b = NULL;
    int rc_a = a.create(NULL, &rt_a);
    fflush(stderr);
    int saved = dup(2), out = open(said, O_RDWR | O_CREAT | O_TRUNC, 0600);
    dup2(out, 2);
    int rc_b = b.create(NULL, &rt_b);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    char text[4096] = "";
    ssize_t got = pread(out, text, sizeof(text) - 1, 0);
    text[got > 0 ? got : 0] = '\0';
    close(out);
    unlink(said);
    const int copy_warned = strstr(text, "another copy of libnxr loaded in this process") != NULL;
    if (argc == 3)
        check(copy_warned, "the second instance's runtime did not warn of the first", text);
    else
        check(!copy_warned, "one object opened twice warned of another copy", text);
    char detail[64];
    snprintf(detail, sizeof(detail), "returned %d and %d", rc_a, rc_b);
    check(rc_a == 0 && rc_b == 0, "nxr_runtime_create through each handle", detail);
    int running = thread_count();
    if (rc_a == 0)
        a.destroy(rt_a);
    if (rc_b == 0)
        b.destroy(rt_b);
    int destroyed = thread_count();
    check(rmdir(peers) == 0 && rmdir(registry) == 0,
          "the registry is not empty after both runtimes were destroyed", peers);
    snprintf(detail, sizeof(detail), "%d loaded, %d with two runtimes, %d destroyed", opened,
             running, destroyed);
    check(running > opened, "the runtimes started no thread", detail);
    check(destroyed == opened, "nxr_runtime_destroy left threads behind", detail);
    const char *version = a.version();
    char version_copy[32];
    snprintf(version_copy, sizeof(version_copy), "%s", version);

    check(dlclose(a.handle) == 0, "the first dlclose", dlerror());
    check(loaded(second), "the library went away while the second handle was open", NULL);
    check(dlclose(b.handle) == 0, "the second dlclose", dlerror());
    check(!loaded(path) && !loaded(second), "the library is still loaded after the last dlclose",
          NULL);
    int after = thread_count();
    snprintf(detail, sizeof(detail), "%d before the first dlopen, %d after the last dlclose",
             before, after);
    check(after == before, "dlclose left threads behind", detail);
    if (failures != 0)
        return 1;
    printf("dlopen_host: ok, nxr %s dlopen()ed twice (%s%s), two runtimes created and destroyed, "
           "threads %d before, %d loaded, %d running, %d destroyed, %d after dlclose\n",
           version_copy, argc == 3 ? "two instances" : "one object, two references",
           argc == 3 ? ", the second warned of the first" : "", before, opened, running, destroyed,
           after);
    return 0;
}
