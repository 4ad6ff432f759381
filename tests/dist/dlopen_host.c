/*
 * A host that loads libnxr.so at run time (a plug-in, a Python extension):
 * dlopen, then create and destroy a runtime through dlsym'ed entry points.
 * usage: dlopen_host PATH. Prints "dlopen_host: ok" or a FAILED line.
 */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        printf("dlopen_host: FAILED: %s\n", dlerror());
        return 1;
    }
    const char *(*version)(void) = (const char *(*)(void))dlsym(lib, "nxr_version_string");
    int (*create)(void **, const void *) = (int (*)(void **, const void *))dlsym(lib, "nxr_runtime_create");
    void (*destroy)(void *) = (void (*)(void *))dlsym(lib, "nxr_runtime_destroy");
    void *rt = NULL;
    int rc = create != NULL ? create(&rt, NULL) : -1;
    if (version == NULL || destroy == NULL || rc != 0) {
        printf("dlopen_host: FAILED: entry points or nxr_runtime_create (%d)\n", rc);
        return 1;
    }
    destroy(rt);
    printf("dlopen_host: ok, nxr %s loaded at run time, runtime created and destroyed\n", version());
    return dlclose(lib) == 0 ? 0 : 1;
}
