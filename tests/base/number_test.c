/*
 * The one reader of unsigned numbers (base/number.c): digits only, the value
 * bounded while it is read, what follows the digits left to the caller. The
 * expected values are written out by hand.
 */
#include <criterion/criterion.h>
#include <limits.h>

#include "base/internal/number.h"

#define UNTOUCHED 0xabcdefULL

/* Parses s; checks how many characters were read and the value (or that
 * *out was left alone when want_n <= 0). */
static void expect_parse(const char *s, unsigned base, unsigned long long max, long want_n,
                         unsigned long long want)
{
    unsigned long long v = UNTOUCHED;
    long n = nxr__parse_digits(s, base, max, &v);
    cr_expect_eq(n, want_n, "'%s' base %u: read %ld characters, want %ld", s, base, n, want_n);
    cr_expect_eq(v, want_n > 0 ? want : UNTOUCHED, "'%s' base %u: value %llu, want %llu", s, base,
                 v, want_n > 0 ? want : UNTOUCHED);
}

Test(base_number, digits_are_read_up_to_the_first_other_character)
{
    expect_parse("123abc", 10, ULLONG_MAX, 3, 123);
    expect_parse("007", 10, ULLONG_MAX, 3, 7);
    expect_parse("42", 10, ULLONG_MAX, 2, 42);
    expect_parse("1,2", 10, ULLONG_MAX, 1, 1);
}

Test(base_number, no_sign_blank_or_prefix_is_a_digit)
{
    expect_parse("", 10, ULLONG_MAX, 0, 0);
    expect_parse("-1", 10, ULLONG_MAX, 0, 0);
    expect_parse("+1", 10, ULLONG_MAX, 0, 0);
    expect_parse(" 1", 10, ULLONG_MAX, 0, 0);
    expect_parse("x1", 16, ULLONG_MAX, 0, 0);
    /* "0x10": the 0 is read, the x ends it (the caller sees what follows). */
    expect_parse("0x10", 16, ULLONG_MAX, 1, 0);
}

Test(base_number, base_16_is_lower_case_as_nxr_writes_it)
{
    expect_parse("ff", 16, ULLONG_MAX, 2, 255);
    expect_parse("7fffffff", 16, ULLONG_MAX, 8, 2147483647);
    expect_parse("FF", 16, ULLONG_MAX, 0, 0);
    expect_parse("ag", 16, ULLONG_MAX, 1, 10);
    expect_parse("ff", 10, ULLONG_MAX, 0, 0);
}

Test(base_number, a_value_past_max_is_refused_and_out_is_untouched)
{
    expect_parse("255", 10, 255, 3, 255);
    expect_parse("256", 10, 255, -1, 0);
    expect_parse("2550", 10, 255, -1, 0);
    expect_parse("0", 10, 0, 1, 0);
    expect_parse("1", 10, 0, -1, 0);
    expect_parse("100", 16, 255, -1, 0);
    expect_parse("18446744073709551615", 10, ULLONG_MAX, 20, ULLONG_MAX);
    expect_parse("18446744073709551616", 10, ULLONG_MAX, -1, 0);
    expect_parse("99999999999999999999999", 10, ULLONG_MAX, -1, 0);
    expect_parse("ffffffffffffffff", 16, ULLONG_MAX, 16, ULLONG_MAX);
    expect_parse("10000000000000000", 16, ULLONG_MAX, -1, 0);
}
