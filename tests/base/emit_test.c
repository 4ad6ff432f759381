/*
 * The diagnostics emitter (base/emit.h): one walk, two formats.
 * JSON escapes strings and nests objects and lists with commas in the right
 * places; text fills each template from its members in any order, a list's
 * {count} and {items}, a scalar's "{}", a null's text as it is; a member a
 * template does not name is JSON only and a name without a member stays as
 * written. Failures stick: nesting too deep, an allocation refused at any
 * point. Expected strings are written out by hand.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/emit.h"
#include "base/internal/sys.h"

/* One walk over made-up facts, nested three deep, with a list of objects, a
 * list of ints shown in text as a CPU list, and every kind of scalar. */
static void walk(struct nxr__emit *e)
{
    nxr__emit_object(e, NULL, "[{name}] {inner}{items}tail {missing}\n");
    nxr__emit_str(e, "name", "a \"q\" \\ b\n\t\x01", NULL);
    nxr__emit_object(e, "inner", "n={n} u={u} ok={ok} none={none} d={d} w={w} nan={nan}; ");
    nxr__emit_uint(e, "u", UINT64_MAX, NULL);
    nxr__emit_int(e, "n", -7, "({})");
    nxr__emit_bool(e, "ok", true, "yes");
    nxr__emit_null(e, "none", "left {} as is");
    nxr__emit_double(e, "d", 1.0 / 3.0, NULL);
    nxr__emit_double(e, "w", 2.5e7, "  2.5e+07 ({})");
    nxr__emit_double(e, "nan", NAN, "<{}>");
    nxr__emit_str(e, "json_only", "x", NULL);
    nxr__emit_end(e);
    nxr__emit_list(e, "items", "{count} item(s):{items}; ");
    for (int i = 0; i < 2; i++) {
        nxr__emit_object(e, NULL, " <{id} on {cpus}>");
        nxr__emit_int(e, "id", i, NULL);
        nxr__emit_list(e, "cpus", i == 0 ? "0-1" : NULL);
        nxr__emit_int(e, NULL, 2 * i, NULL);
        nxr__emit_int(e, NULL, 2 * i + 1, NULL);
        nxr__emit_end(e);
        nxr__emit_end(e);
    }
    nxr__emit_end(e);
    nxr__emit_list(e, "empty", NULL);
    nxr__emit_end(e);
    nxr__emit_str(e, "absent", NULL, "[{}]");
    nxr__emit_end(e);
}

static char *run(enum nxr__emit_format format, int *rc)
{
    struct nxr__strbuf sb = {0};
    struct nxr__emit e;
    nxr__emit_init(&e, format, &sb);
    walk(&e);
    char *out = NULL;
    *rc = nxr__strbuf_take(&sb, &out);
    return out;
}

static const char want_json[] =
    "{\"name\":\"a \\\"q\\\" \\\\ b\\u000a\\u0009\\u0001\","
    "\"inner\":{\"u\":18446744073709551615,\"n\":-7,\"ok\":true,\"none\":null,"
    "\"d\":0.333333,\"w\":2.5e+07,\"nan\":null,\"json_only\":\"x\"},"
    "\"items\":[{\"id\":0,\"cpus\":[0,1]},{\"id\":1,\"cpus\":[2,3]}],"
    "\"empty\":[],\"absent\":null}\n";

Test(base_emit, json_escapes_strings_and_nests_objects_and_lists)
{
    int rc;
    char *out = run(NXR__EMIT_JSON, &rc);
    cr_assert_eq(rc, 0);
    cr_expect_str_eq(out, want_json);
    free(out);
}

Test(base_emit, text_fills_each_template_from_its_members)
{
    int rc;
    char *out = run(NXR__EMIT_TEXT, &rc);
    cr_assert_eq(rc, 0);
    /* Members in the template's order, not the walk's; strings unescaped;
     * json_only nowhere; the first element's list shows its template (a CPU
     * list), the second's, without one, its items' texts one after another. */
    cr_expect_str_eq(out, "[a \"q\" \\ b\n\t\x01] n=(-7) u=18446744073709551615 ok=yes "
                          "none=left {} as is d=0.333333 w=  2.5e+07 (2.5e+07) nan=<->; 2 item(s): "
                          "<0 on 0-1> <1 on 23>; "
                          "tail {missing}\n");
    free(out);
}

Test(base_emit, nesting_deeper_than_the_limit_fails_and_frees)
{
    for (int f = 0; f < 2; f++) {
        struct nxr__strbuf sb = {0};
        struct nxr__emit e;
        nxr__emit_init(&e, f ? NXR__EMIT_JSON : NXR__EMIT_TEXT, &sb);
        for (int i = 0; i < NXR__EMIT_DEPTH + 2; i++)
            nxr__emit_object(&e, i ? "k" : NULL, "{k}");
        nxr__emit_uint(&e, "v", 1, NULL);
        for (int i = 0; i < NXR__EMIT_DEPTH + 2; i++)
            nxr__emit_end(&e);
        cr_expect_eq(e.depth, 0, "every end matched its open");
        char *out = (char *)1;
        cr_expect_eq(nxr__strbuf_take(&sb, &out), -EOVERFLOW);
        cr_expect_null(out);
    }
}

/* Every allocation of a text walk refused in turn: the walk reports
 * -ENOMEM and hands out nothing, or, past the last, the whole text (LSan
 * under --config=asan sees what a failure would leak). */
Test(base_emit, a_refused_allocation_sticks)
{
    int rc;
    char *whole = run(NXR__EMIT_TEXT, &rc);
    cr_assert_eq(rc, 0);
    long failed = 0;
    for (long n = 1; n < 200; n++) {
        nxr__fault_arm(NXR_FAULT_ALLOC, n);
        char *out = run(NXR__EMIT_TEXT, &rc);
        long calls = nxr__fault_calls();
        nxr__fault_arm(NXR_FAULT_ALLOC, 0);
        if (n > calls) { /* past the walk's last allocation */
            cr_expect_eq(rc, 0);
            cr_expect_str_eq(out, whole);
            free(out);
            break;
        }
        cr_expect_eq(rc, -ENOMEM, "allocation %ld of %ld", n, calls);
        cr_expect_null(out);
        failed++;
    }
    cr_expect_gt(failed, 10, "the text walk allocates per object and per scalar");
    free(whole);
}

/* A member whose text outgrows the object's buffer: the growth refused
 * between its key and its text leaves the buffer ending inside an entry,
 * which the object's end must not read (ASan saw it read past the end). */
Test(base_emit, a_refused_growth_inside_a_member_is_not_read)
{
    char big[400];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    for (long n = 1; n < 50; n++) {
        struct nxr__strbuf sb = {0};
        struct nxr__emit e;
        nxr__emit_init(&e, NXR__EMIT_TEXT, &sb);
        nxr__fault_arm(NXR_FAULT_ALLOC, n);
        nxr__emit_object(&e, NULL, "{b}|{a}");
        nxr__emit_str(&e, "b", "short", NULL);
        nxr__emit_str(&e, "a", big, NULL);
        nxr__emit_end(&e);
        long calls = nxr__fault_calls();
        nxr__fault_arm(NXR_FAULT_ALLOC, 0);
        char *out = NULL;
        int rc = nxr__strbuf_take(&sb, &out);
        if (n > calls) {
            cr_expect_eq(rc, 0);
            cr_expect_eq(strncmp(out, "short|xxx", 9), 0, "%s", out);
            cr_expect_eq(strlen(out), strlen("short|") + sizeof(big) - 1);
            free(out);
            cr_expect_gt(n, 2, "the object's buffer grew at least once");
            return;
        }
        cr_expect_eq(rc, -ENOMEM, "allocation %ld of %ld", n, calls);
        cr_expect_null(out);
    }
    cr_assert_fail("the walk allocated more than 50 times");
}
