// A C++17 host: the installed umbrella header, included as is (its own
// extern "C" gives C linkage), links and runs against libnxr. usage:
// cxx_consumer VERSION.
#include <nxr/nxr.h>

#include <cstdio>
#include <cstring>

int main(int argc, char **argv)
{
    nxr_runtime_t *rt = nullptr;
    int rc = nxr_runtime_create(nullptr, &rt);
    bool ok = argc == 2 && std::strcmp(nxr_version_string(), argv[1]) == 0 && rc == 0 &&
              nxr_runtime_domain_count(rt) >= 1;
    nxr_runtime_destroy(rt);
    if (!ok) {
        std::fprintf(stderr, "cxx_consumer: FAILED (%s)\n", nxr_strerror(rc));
        return 1;
    }
    std::printf("cxx_consumer: ok, nxr %s from C++\n", nxr_version_string());
    return 0;
}
