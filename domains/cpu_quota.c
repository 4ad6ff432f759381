/*
 * The CPU bandwidth quota from the process's control groups (see
 * internal/cpu_quota.h). Three steps: which cgroup the process is in per
 * hierarchy (/proc/self/cgroup), where those hierarchies are mounted
 * (/proc/self/mountinfo), then the limit files of every level from that
 * cgroup up to the mount's root. Kernel files are trusted for nothing:
 * every value is checked, and a file that does not parse is NXR_ESYNTAX
 * with the file named, never a guess. A level that cannot be used does not
 * stop the walk: every level of every hierarchy is read, the tightest valid
 * limit wins, and the first file that could not be used is reported beside
 * it.
 */
#include "domains/internal/cpu_quota.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/internal/number.h"
#include "base/internal/sys.h"
#include "base/nxr_status.h"

#define PATH_LEN  1024                /* a cgroup directory with the root prefix */
#define VALUE_MAX ((uint64_t)1 << 62) /* larger quota or period values are garbage */

enum hierarchy { V2, V1, HIERARCHIES };

/* One hierarchy as the process sees it. */
struct where {
    bool in;                   /* /proc/self/cgroup names it */
    char cgroup[PATH_LEN];     /* the process's cgroup path in it */
    bool mounted;              /* mountinfo has a mount of it */
    char mount_root[PATH_LEN]; /* the cgroup that the mount shows at its top */
    char mount_point[PATH_LEN];
};

struct reader {
    const char *root; /* "" or the fixture directory */
    struct where h[HIERARCHIES];
    struct nxr__cpu_quota *out;
    unsigned line_no;
    char file[PATH_LEN];
    char limit[sizeof(((struct nxr__cpu_quota *)0)->source)];   /* what set out->cpus */
    char problem[sizeof(((struct nxr__cpu_quota *)0)->source)]; /* the first file not used */
};

/* The report, cut short when a path is long (vsnprintf: a cut message is
 * still a message). */
__attribute__((format(printf, 2, 3))) static void say(struct nxr__cpu_quota *q, const char *fmt,
                                                      ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(q->source, sizeof(q->source), fmt, ap);
    va_end(ap);
}

/* Text into a buffer, cut short when paths are long (vsnprintf: a cut
 * message is still a message). */
__attribute__((format(printf, 3, 4))) static void text(char *buf, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, size, fmt, ap);
    va_end(ap);
}

/* Records a file that could not be used (the first one: it is the one
 * reported) and returns its status. A limit already read stands. */
__attribute__((format(printf, 3, 4))) static int fail(struct reader *r, int status, const char *fmt,
                                                      ...)
{
    if (r->out->status == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->problem, sizeof(r->problem), fmt, ap);
        va_end(ap);
        r->out->status = status;
    }
    return status;
}

/* Copies a line into a message without its control bytes, cut short. */
static const char *shown(const char *line, char *buf, size_t size)
{
    size_t i = 0;
    for (; line[i] != '\0' && i + 1 < size && i < 80; i++)
        buf[i] = isprint((unsigned char)line[i]) ? line[i] : '?';
    buf[i] = '\0';
    return buf;
}

/* Whether the comma-separated list holds token. */
static bool has_token(const char *list, const char *token)
{
    size_t n = strlen(token);
    for (const char *p = list; p != NULL && *p != '\0';) {
        const char *end = strchr(p, ',');
        size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
        if (len == n && strncmp(p, token, n) == 0)
            return true;
        p = end != NULL ? end + 1 : NULL;
    }
    return false;
}

/* A cgroup path: absolute, no "..", fits. */
static bool sane_path(const char *p)
{
    return p[0] == '/' && strlen(p) < PATH_LEN / 2 && strstr(p, "/..") == NULL;
}

/* "ID:controllers:path" (the path may itself hold ':'). */
static int cgroup_line(void *arg, char *line)
{
    struct reader *r = arg;
    char shown_buf[96];
    r->line_no++;
    if (line[0] == '\0')
        return 0;
    char *c1 = strchr(line, ':');
    char *c2 = c1 != NULL ? strchr(c1 + 1, ':') : NULL;
    bool digits = c1 != NULL && c1 != line;
    for (const char *p = line; digits && p < c1; p++)
        digits = isdigit((unsigned char)*p) != 0;
    if (c2 == NULL || !digits || !sane_path(c2 + 1))
        return fail(r, NXR_ESYNTAX, "%s: malformed line '%s' (expected ID:controllers:/path)",
                    r->file, shown(line, shown_buf, sizeof(shown_buf)));
    *c1 = *c2 = '\0';
    struct where *w = NULL;
    if (strcmp(line, "0") == 0 && c1 + 1 == c2)
        w = &r->h[V2];
    else if (has_token(c1 + 1, "cpu"))
        w = &r->h[V1];
    if (w != NULL && !w->in) {
        w->in = true;
        snprintf(w->cgroup, sizeof(w->cgroup), "%s", c2 + 1);
    }
    return 0;
}

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static void unescape(char *s)
{
    char *o = s;
    for (char *p = s; *p != '\0'; p++) {
        if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' && p[2] <= '7' &&
            p[3] >= '0' && p[3] <= '7') {
            *o++ = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
            p += 3;
        } else {
            *o++ = *p;
        }
    }
    *o = '\0';
}

/* Whether cgroup lies at or under the mount's root, component-wise. */
static bool under(const char *cgroup, const char *mount_root)
{
    size_t n = strlen(mount_root);
    if (n == 1 && mount_root[0] == '/')
        return true;
    return strncmp(cgroup, mount_root, n) == 0 && (cgroup[n] == '\0' || cgroup[n] == '/');
}

/* "id parent maj:min root mountpoint opts [optional...] - fstype source superopts" */
static int mount_line(void *arg, char *line)
{
    struct reader *r = arg;
    char shown_buf[96];
    char *field[16];
    size_t n = 0, dash = 0;
    r->line_no++;
    for (char *save = NULL, *tok = strtok_r(line, " ", &save); tok != NULL && n < 16;
         tok = strtok_r(NULL, " ", &save)) {
        if (dash == 0 && n >= 6 && strcmp(tok, "-") == 0)
            dash = n;
        field[n++] = tok;
    }
    if (n == 0)
        return 0;
    if (dash == 0 || n < dash + 4)
        return fail(r, NXR_ESYNTAX, "%s: malformed line '%s' (expected the mountinfo fields)",
                    r->file, shown(field[0], shown_buf, sizeof(shown_buf)));
    const char *fstype = field[dash + 1], *superopts = field[dash + 3];
    struct where *w = NULL;
    if (strcmp(fstype, "cgroup2") == 0)
        w = &r->h[V2];
    else if (strcmp(fstype, "cgroup") == 0 && has_token(superopts, "cpu"))
        w = &r->h[V1];
    if (w == NULL || !w->in)
        return 0;
    unescape(field[3]);
    unescape(field[4]);
    if (!sane_path(field[3]) || !sane_path(field[4]))
        return 0; /* a mount nxr cannot name a file under: not this one */
    /* Several mounts of one hierarchy (bind mounts): the first that shows
     * the process's cgroup; else the first at all. */
    if (w->mounted && under(w->cgroup, w->mount_root))
        return 0;
    if (w->mounted && !under(w->cgroup, field[3]))
        return 0;
    w->mounted = true;
    snprintf(w->mount_root, sizeof(w->mount_root), "%s", field[3]);
    snprintf(w->mount_point, sizeof(w->mount_point), "%s", field[4]);
    return 0;
}

struct first_line {
    char text[128];
    bool got;
};

static int take_first(void *arg, char *line)
{
    struct first_line *f = arg;
    snprintf(f->text, sizeof(f->text), "%s", line);
    f->got = true;
    return 1;
}

/* The first line of dir/name: 1, 0 when the file does not exist, or the
 * failure (recorded in r->out). An empty file is malformed. */
static int read_value(struct reader *r, const char *dir, const char *name, struct first_line *f)
{
    int len = snprintf(r->file, sizeof(r->file), "%s/%s", dir, name);
    if (len < 0 || (size_t)len >= sizeof(r->file))
        return fail(r, -ENAMETOOLONG, "%s%s: path too long", dir, "");
    f->got = false;
    int rc = nxr__read_lines(r->file, take_first, f);
    if (rc == -ENOENT)
        return 0;
    if (rc < 0)
        return fail(r, rc, "%s: cannot be read (%s)", r->file, nxr_strerror(rc));
    if (!f->got)
        return fail(r, NXR_ESYNTAX, "%s: empty%s", r->file, "");
    return 1;
}

/* A decimal number in 1..VALUE_MAX, the whole string. */
static bool parse_value(const char *s, uint64_t *out)
{
    unsigned long long v;
    long n = nxr__parse_digits(s, 10, VALUE_MAX, &v);
    if (n <= 0 || s[n] != '\0' || v < 1)
        return false;
    *out = v;
    return true;
}

/* Keeps the level's limit when it is the tightest so far (the caller then
 * says where it came from): floor(quota / period), at least 1 (see
 * internal/cpu_quota.h for why). */
static bool tightest(struct reader *r, uint64_t quota, uint64_t period, const char *dir, int v)
{
    uint64_t whole = quota / period;
    unsigned cpus = whole < 1 ? 1 : whole > 1u << 20 ? 1u << 20 : (unsigned)whole;
    if (r->out->cpus != 0 && cpus >= r->out->cpus)
        return false;
    r->out->cpus = cpus;
    r->out->quota_us = quota;
    r->out->period_us = period;
    r->out->v = v;
    snprintf(r->out->dir, sizeof(r->out->dir), "%s", dir);
    return true;
}

static const char *plural(unsigned n)
{
    return n == 1 ? "" : "s";
}

/* cpu.max: "max PERIOD" or "QUOTA PERIOD". 0 (read or absent) or the failure. */
static int level_v2(struct reader *r, const char *dir)
{
    struct first_line f;
    char shown_buf[96];
    int rc = read_value(r, dir, "cpu.max", &f);
    if (rc <= 0)
        return rc;
    char q[32], p[32], extra;
    uint64_t quota = 0, period = 0;
    if (sscanf(f.text, "%31s %31s %c", q, p, &extra) != 2 || !parse_value(p, &period) ||
        (strcmp(q, "max") != 0 && !parse_value(q, &quota)))
        return fail(r, NXR_ESYNTAX, "%s: '%s' is not 'max PERIOD' or 'QUOTA PERIOD'", r->file,
                    shown(f.text, shown_buf, sizeof(shown_buf)));
    if (quota == 0)
        return 0; /* "max": no limit at this level */
    if (tightest(r, quota, period, dir, 2))
        text(r->limit, sizeof(r->limit), "cgroup v2 %s: %s -> %u CPU%s", r->file, f.text,
             r->out->cpus, plural(r->out->cpus));
    return 0;
}

/* cpu.cfs_quota_us (-1: none) and cpu.cfs_period_us. */
static int level_v1(struct reader *r, const char *dir)
{
    struct first_line fq, fp;
    char shown_buf[96];
    int rc = read_value(r, dir, "cpu.cfs_quota_us", &fq);
    if (rc <= 0)
        return rc;
    uint64_t quota, period;
    if (strcmp(fq.text, "-1") == 0)
        return 0;
    if (!parse_value(fq.text, &quota))
        return fail(r, NXR_ESYNTAX, "%s: '%s' is not -1 or a positive number", r->file,
                    shown(fq.text, shown_buf, sizeof(shown_buf)));
    char quota_file[PATH_LEN];
    snprintf(quota_file, sizeof(quota_file), "%s", r->file);
    rc = read_value(r, dir, "cpu.cfs_period_us", &fp);
    if (rc == 0)
        return fail(r, -ENOENT, "%s: missing beside %s", r->file, quota_file);
    if (rc < 0)
        return rc;
    if (!parse_value(fp.text, &period))
        return fail(r, NXR_ESYNTAX, "%s: '%s' is not a positive number", r->file,
                    shown(fp.text, shown_buf, sizeof(shown_buf)));
    if (tightest(r, quota, period, dir, 1))
        text(r->limit, sizeof(r->limit), "cgroup v1 %s: %s, cpu.cfs_period_us: %s -> %u CPU%s",
             quota_file, fq.text, fp.text, r->out->cpus, plural(r->out->cpus));
    return 0;
}

/* Every level from the process's cgroup up to the mount's top, however
 * deep (sane_path bounds the path, so the levels too): a level that cannot
 * be used is recorded and the walk goes on, since a level above may set a
 * tighter limit. */
static int walk(struct reader *r, enum hierarchy which)
{
    const struct where *w = &r->h[which];
    char dir[PATH_LEN];
    /* The cgroup relative to the mount's root; a cgroup the mount does not
     * show (another namespace's view) leaves the mount's top, which is the
     * nearest level this process can read. */
    const char *rel = "";
    if (under(w->cgroup, w->mount_root))
        rel = w->cgroup + (strcmp(w->mount_root, "/") == 0 ? 0 : strlen(w->mount_root));
    if (strcmp(rel, "/") == 0)
        rel = "";
    int base = snprintf(dir, sizeof(dir), "%s%s", r->root,
                        strcmp(w->mount_point, "/") == 0 ? "" : w->mount_point);
    int len = snprintf(dir + base, sizeof(dir) - (size_t)base, "%s", rel);
    if (base < 0 || len < 0 || (size_t)(base + len) >= sizeof(dir))
        return fail(r, -ENAMETOOLONG, "%s%s: path too long", w->mount_point, rel);
    for (;;) {
        if (which == V2)
            (void)level_v2(r, base + len == 0 ? "/" : dir);
        else
            (void)level_v1(r, base + len == 0 ? "/" : dir);
        char *slash = strrchr(dir + base, '/');
        if (slash == NULL)
            break; /* the mount's top was just read */
        *slash = '\0';
        len = (int)(slash - (dir + base));
    }
    return 0;
}

/* The process's cgroups, where they are mounted, then every level. */
static int read_all(struct reader *r, struct nxr__cpu_quota *out)
{
    if (strlen(r->root) >= PATH_LEN / 4)
        return fail(r, -ENAMETOOLONG, "cgroup root '%.64s%s' is too long", r->root, "...");

    snprintf(r->file, sizeof(r->file), "%s/proc/self/cgroup", r->root);
    int rc = nxr__read_lines(r->file, cgroup_line, r);
    if (rc == -ENOENT) {
        say(out, "none: %s does not exist", r->file);
        return 0;
    }
    if (rc < 0 && out->status == 0)
        return fail(r, rc, "%s: cannot be read (%s)", r->file, nxr_strerror(rc));
    if (rc != 0)
        return out->status;
    if (!r->h[V1].in && !r->h[V2].in) {
        say(out, "none: %s names no cpu hierarchy", r->file);
        return 0;
    }

    snprintf(r->file, sizeof(r->file), "%s/proc/self/mountinfo", r->root);
    r->line_no = 0;
    rc = nxr__read_lines(r->file, mount_line, r);
    if (rc < 0 && out->status == 0)
        return fail(r, rc, "%s: cannot be read (%s)", r->file, nxr_strerror(rc));
    if (rc != 0)
        return out->status;

    for (int h = 0; h < HIERARCHIES; h++) {
        if (r->h[h].in && r->h[h].mounted)
            (void)walk(r, (enum hierarchy)h);
    }
    if (out->cpus == 0 && out->status == 0) {
        bool any = r->h[V2].mounted || r->h[V1].mounted;
        say(out, "none: %s%s%s%s", any ? "no limit in " : "",
            r->h[V1].mounted ? "cgroup v1 cpu" : "",
            r->h[V1].mounted && r->h[V2].mounted ? ", " : "",
            r->h[V2].mounted ? "cgroup v2"
            : any            ? ""
                             : "no cgroup cpu hierarchy mounted");
    }
    return out->status;
}

int nxr__cpu_quota_read(const char *root, struct nxr__cpu_quota *out)
{
    struct reader r;
    memset(&r, 0, sizeof(r));
    memset(out, 0, sizeof(*out));
    r.root = root != NULL ? root : "";
    r.out = out;
    (void)read_all(&r, out);
    /* The limit, the file that could not be used beside it, or only that. */
    if (out->cpus != 0 && out->status != 0)
        say(out, "%s; and a file that could not be used: %s", r.limit, r.problem);
    else if (out->cpus != 0)
        say(out, "%s", r.limit);
    else if (out->status != 0)
        say(out, "%s", r.problem);
    return out->status;
}

/* ---- throttling --------------------------------------------------------- */

struct stat_lines {
    const char *time_key; /* throttled_usec (v2) or throttled_time (v1, ns) */
    unsigned long long nr, time;
    bool got_nr, got_time, bad;
};

/* One "key value" line of cpu.stat; other keys are skipped. */
static int stat_line(void *arg, char *line)
{
    struct stat_lines *st = arg;
    char *space = strchr(line, ' ');
    if (space == NULL)
        return 0;
    *space = '\0';
    unsigned long long *to = NULL;
    bool *got = NULL;
    if (strcmp(line, "nr_throttled") == 0)
        to = &st->nr, got = &st->got_nr;
    else if (strcmp(line, st->time_key) == 0)
        to = &st->time, got = &st->got_time;
    if (to == NULL)
        return 0;
    const char *value = space + 1;
    long n = nxr__parse_digits(value, 10, VALUE_MAX, to);
    if (n <= 0 || value[n] != '\0') {
        st->bad = true;
        return 1;
    }
    *got = true;
    return 0;
}

int nxr__cpu_throttle_read(const struct nxr__cpu_quota *q, struct nxr__cpu_throttle *out)
{
    memset(out, 0, sizeof(*out));
    if (q->dir[0] == '\0')
        return -ENOENT;
    char file[PATH_LEN + 16];
    int len = snprintf(file, sizeof(file), "%s/cpu.stat", q->dir);
    if (len < 0 || (size_t)len >= sizeof(file))
        return -ENAMETOOLONG;
    struct stat_lines st = {.time_key = q->v == 1 ? "throttled_time" : "throttled_usec"};
    int rc = nxr__read_lines(file, stat_line, &st);
    if (rc < 0)
        return rc;
    if (st.bad || !st.got_nr || !st.got_time)
        return NXR_ESYNTAX;
    out->nr_throttled = st.nr;
    out->throttled_usec = q->v == 1 ? st.time / 1000u : st.time;
    return 0;
}
