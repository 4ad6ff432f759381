/*
 * Stand-in for <criterion/redirect.h> (see criterion.h here): stderr of the
 * test process goes to a temporary file that the test reads back.
 */
#ifndef NXR_TSAN_CRITERION_REDIRECT_H
#define NXR_TSAN_CRITERION_REDIRECT_H

#include <stdio.h>

/* Sends this process's stderr (fd 2) to a temporary file. */
void cr_redirect_stderr(void);

/* The redirected stderr, rewound for reading (NULL before a redirect). */
FILE *cr_get_redirected_stderr(void);

#endif /* NXR_TSAN_CRITERION_REDIRECT_H */
