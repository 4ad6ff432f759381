/*
 * Test support: a throwaway directory tree standing for "/" (a fake cgroup
 * root, a fake per-user run directory), so that code reading /proc and
 * /sys can be fed any file, well-formed or not.
 */
#ifndef NXR_TESTS_FSFIXTURE_H
#define NXR_TESTS_FSFIXTURE_H

#include <stddef.h>

/* Creates a fresh, empty directory (under $TEST_TMPDIR, else /tmp) and
 * writes its path into buf. 0 or -errno. */
int nxr_test_fixture_dir(char *buf, size_t size);

/* Writes content to dir/rel, creating the directories on the way (mode
 * 0755) and replacing any old file. 0 or -errno. */
int nxr_test_fixture_write(const char *dir, const char *rel, const char *content);

/* Creates dir/rel as a directory (and its parents). 0 or -errno. */
int nxr_test_fixture_mkdir(const char *dir, const char *rel);

/* Removes dir and everything below it (best effort). */
void nxr_test_fixture_remove(const char *dir);

#endif /* NXR_TESTS_FSFIXTURE_H */
