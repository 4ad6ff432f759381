/*
 * The one reader of unsigned numbers in text nxr is given (settings,
 * NXR_DOMAINS, cgroup files, peer registry entries): digits only, so no
 * sign, no blank, no base prefix, no locale; the value bounded while it is
 * read, so it never overflows and never sizes anything past the caller's
 * bound. What may follow the digits is the caller's to check.
 */
#ifndef NXR_BASE_INTERNAL_NUMBER_H
#define NXR_BASE_INTERNAL_NUMBER_H

#include <stddef.h>

/*
 * Reads the digits at the start of s in base 10 or 16 (16: 0-9 and a-f,
 * lower case, as nxr writes them) into *out. Returns how many characters
 * it read: > 0 on success, 0 when s does not start with a digit, -1 when
 * the value would pass max (*out is then untouched).
 */
long nxr__parse_digits(const char *s, unsigned base, unsigned long long max,
                       unsigned long long *out);

#endif /* NXR_BASE_INTERNAL_NUMBER_H */
