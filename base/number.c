/* The one reader of unsigned numbers (see internal/number.h). */
#include "base/internal/number.h"

static int digit_value(char c, unsigned base)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (base == 16 && c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

long nxr__parse_digits(const char *s, unsigned base, unsigned long long max,
                       unsigned long long *out)
{
    unsigned long long v = 0;
    long n = 0;
    for (int d; (d = digit_value(s[n], base)) >= 0; n++) {
        /* v * base + d <= max, checked without overflowing. */
        if ((unsigned long long)d > max || v > (max - (unsigned long long)d) / base)
            return -1;
        v = v * base + (unsigned long long)d;
    }
    if (n > 0)
        *out = v;
    return n;
}
