/*
 * `nxr top`: every nxr runtime of this user on the machine, from their
 * counters pages (runtime/nxr_top.h), as a live terminal view refreshed every
 * interval (q quits) or, with --once, one view of two reads an interval
 * apart (--json: one JSON object for scripts).
 *
 * Rates need two reads: each row's rates are the differences of its
 * counters between the previous read and this one, over the difference of
 * the times its runtime refreshed its page (sampled_ns). A runtime that ran
 * nothing in between did not refresh: its rates are 0.
 */
#include "tools/top_cmd.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "runtime/nxr.h"

const char nxr_tool_top_usage[] =
    "  top      every nxr runtime of this user on the machine, refreshed every\n"
    "           interval (q quits): per process pid and command, per domain CPUs,\n"
    "           node, budget and what lowered it, busy %, spin %, regions/s,\n"
    "           tasks/s, admission waits/s, stalls, GB/s of weights, and a warning\n"
    "           where CPU sets of two processes overlap\n"
    "           --once: one view and exit; it takes two reads --interval apart\n"
    "           (rates need two), so it takes that long\n"
    "           --json: with --once, one JSON object instead of the table\n"
    "           --interval MS: between reads, 10-60000 (default 1000)\n";

/* How long a read waits for the runtimes to answer: a busy one answers at
 * its next operation's end, an idle one never (its page is read as is). */
#define ANSWER_WAIT_MS 200

struct sample {
    struct nxr_top top;
    struct nxr_top_runtime *runtimes;
    struct nxr_top_domain *domains;
};

static int bad(const char *flag, const char *why)
{
    fprintf(stderr, "nxr top: %s: %s\n", flag, why);
    return 2;
}

static int take_sample(struct sample *s, size_t *rcap, size_t *dcap)
{
    for (;;) {
        free(s->runtimes);
        free(s->domains);
        s->runtimes = calloc(*rcap, sizeof(*s->runtimes));
        s->domains = calloc(*dcap, sizeof(*s->domains));
        if (s->runtimes == NULL || s->domains == NULL) {
            fprintf(stderr, "nxr top: out of memory\n");
            return 1;
        }
        nxr_top_init(&s->top, s->runtimes, *rcap, s->domains, *dcap);
        int rc = nxr_top_read(NULL, ANSWER_WAIT_MS, &s->top);
        if (rc != 0) {
            fprintf(stderr, "nxr top: %s\n", nxr_last_error());
            return 1;
        }
        if (s->top.runtime_count <= *rcap && s->top.domain_count <= *dcap)
            return 0;
        *rcap = s->top.runtime_count * 2; /* more appeared: read again */
        *dcap = s->top.domain_count * 2;
    }
}

static void free_sample(struct sample *s)
{
    free(s->runtimes);
    free(s->domains);
    s->runtimes = NULL;
    s->domains = NULL;
}

/* The previous read's runtime with the same pid and serial, or NULL. */
static const struct nxr_top_runtime *find_runtime(const struct sample *s,
                                                  const struct nxr_top_runtime *r)
{
    for (size_t i = 0; i < s->top.runtime_count; i++)
        if (s->runtimes[i].pid == r->pid && s->runtimes[i].serial == r->serial)
            return &s->runtimes[i];
    return NULL;
}

struct rates {
    bool known; /* the previous read had this domain */
    double busy_pct, spin_pct, regions, tasks, waits, gbps;
};

static struct rates domain_rates(const struct sample *prev, const struct nxr_top_runtime *r,
                                 const struct nxr_top_domain *d)
{
    struct rates x = {0};
    const struct nxr_top_runtime *p = prev != NULL ? find_runtime(prev, r) : NULL;
    if (p == NULL)
        return x;
    const struct nxr_top_domain *pd = NULL;
    for (size_t i = 0; i < p->domain_filled; i++)
        if (prev->domains[p->domain_first + i].id == d->id)
            pd = &prev->domains[p->domain_first + i];
    if (pd == NULL)
        return x;
    x.known = true;
    if (r->sampled_ns <= p->sampled_ns)
        return x; /* not refreshed since: nothing ended, nothing moved */
    double dt = (double)(r->sampled_ns - p->sampled_ns) / 1e9;
    double cpu_ns = dt * 1e9 * (d->workers > 0 ? d->workers : 1);
    x.busy_pct = 100.0 * (double)(d->busy_ns - pd->busy_ns) / cpu_ns;
    x.spin_pct = 100.0 * (double)(d->spin_ns - pd->spin_ns) / cpu_ns;
    x.regions = (double)(d->regions - pd->regions) / dt;
    x.tasks = (double)(d->tasks - pd->tasks) / dt;
    x.waits = (double)(d->admission_waits - pd->admission_waits) / dt;
    x.gbps = (double)(d->weight_bytes - pd->weight_bytes) / dt / 1e9;
    return x;
}

static void json_string(const char *s)
{
    putchar('"');
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20 || c >= 0x7f)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

static void print_json(const struct sample *prev, const struct sample *cur, unsigned interval_ms)
{
    printf("{\"interval_ms\": %u, \"runtimes\": [", interval_ms);
    for (size_t i = 0; i < cur->top.runtime_count && i < cur->top.runtime_cap; i++) {
        const struct nxr_top_runtime *r = &cur->runtimes[i];
        printf("%s\n  {\"pid\": %d, \"serial\": %u, \"command\": ", i > 0 ? "," : "", r->pid,
               r->serial);
        json_string(r->command);
        printf(", \"answered\": %s, \"cpu_quota\": %u, \"stalls\": %llu, \"domains\": [",
               r->answered ? "true" : "false", r->cpu_quota, (unsigned long long)r->stalls);
        for (size_t j = 0; j < r->domain_filled; j++) {
            const struct nxr_top_domain *d = &cur->domains[r->domain_first + j];
            struct rates x = domain_rates(prev, r, d);
            printf("%s\n    {\"id\": %d, \"node\": %d, \"cpus\": ", j > 0 ? "," : "", d->id,
                   d->node);
            json_string(d->cpus);
            printf(", \"workers\": %u, \"budget\": %u, \"budget_created\": %u, "
                   "\"budget_limit\": ",
                   d->workers, d->budget, d->budget_created);
            json_string(d->budget_limit);
            printf(", \"busy_ns\": %llu, \"spin_ns\": %llu, \"regions\": %llu, \"tasks\": %llu, "
                   "\"admission_waits\": %llu, \"weight_bytes\": %llu",
                   (unsigned long long)d->busy_ns, (unsigned long long)d->spin_ns,
                   (unsigned long long)d->regions, (unsigned long long)d->tasks,
                   (unsigned long long)d->admission_waits, (unsigned long long)d->weight_bytes);
            if (x.known)
                printf(", \"busy_pct\": %.1f, \"spin_pct\": %.1f, \"regions_per_s\": %.1f, "
                       "\"tasks_per_s\": %.1f, \"admission_waits_per_s\": %.1f, "
                       "\"weight_gb_per_s\": %.3f",
                       x.busy_pct, x.spin_pct, x.regions, x.tasks, x.waits, x.gbps);
            else
                printf(", \"busy_pct\": null, \"spin_pct\": null, \"regions_per_s\": null, "
                       "\"tasks_per_s\": null, \"admission_waits_per_s\": null, "
                       "\"weight_gb_per_s\": null");
            printf(", \"overlap\": ");
            json_string(d->overlap);
            printf("}");
        }
        printf("]}");
    }
    /* Pages of dead processes either read removed count: the first one
     * removes them. */
    printf("\n], \"refused\": %zu, \"stale\": %zu, \"other_pidns\": %zu}\n", cur->top.refused,
           cur->top.stale + (prev != NULL ? prev->top.stale : 0), cur->top.other_pidns);
}

/* The command without its program's directory: "nxr demo ..." fits the
 * column where "/usr/local/bin/nxr demo ..." does not. */
static const char *short_command(const char *command)
{
    const char *space = strchr(command, ' ');
    const char *slash = command;
    for (const char *c = command; *c != '\0' && (space == NULL || c < space); c++)
        if (*c == '/')
            slash = c + 1;
    return slash;
}

static void print_table(const struct sample *prev, const struct sample *cur, bool live)
{
    if (live)
        fputs("\033[H\033[J", stdout); /* home, clear */
    printf("nxr top: %zu runtime(s)%s\n", cur->top.runtime_count, live ? "   (q quits)" : "");
    printf("%7s %-16s %3s %4s %-10s %-14s %6s %6s %8s %8s %7s %6s %6s  %s\n", "PID", "COMMAND",
           "DOM", "NODE", "CPUS", "BUDGET", "BUSY%", "SPIN%", "REG/s", "TASK/s", "WAIT/s", "STALLS",
           "GB/s", "WARNING");
    for (size_t i = 0; i < cur->top.runtime_count && i < cur->top.runtime_cap; i++) {
        const struct nxr_top_runtime *r = &cur->runtimes[i];
        for (size_t j = 0; j < r->domain_filled; j++) {
            const struct nxr_top_domain *d = &cur->domains[r->domain_first + j];
            struct rates x = domain_rates(prev, r, d);
            char budget[32], node[16];
            snprintf(budget, sizeof(budget), "%u/%u%s%s", d->budget, d->budget_created,
                     d->budget_limit[0] != '\0' ? " " : "", d->budget_limit);
            if (d->node < 0)
                snprintf(node, sizeof(node), "-");
            else
                snprintf(node, sizeof(node), "%d", d->node);
            char warn[160] = "";
            if (d->overlap[0] != '\0')
                snprintf(warn, sizeof(warn), "CPUs shared with %s", d->overlap);
            printf("%7d %-16.16s %3d %4s %-10.10s %-14.14s ", r->pid,
                   j == 0 ? short_command(r->command) : "", d->id, node, d->cpus, budget);
            if (x.known)
                printf("%6.1f %6.1f %8.1f %8.1f %7.1f ", x.busy_pct, x.spin_pct, x.regions, x.tasks,
                       x.waits);
            else
                printf("%6s %6s %8s %8s %7s ", "-", "-", "-", "-", "-");
            printf("%6llu ", (unsigned long long)r->stalls);
            if (x.known)
                printf("%6.2f", x.gbps);
            else
                printf("%6s", "-");
            printf("  %s\n", warn);
        }
    }
    if (cur->top.refused + cur->top.stale + cur->top.other_pidns > 0)
        printf("(pages refused: %zu, of dead processes removed: %zu, of other PID namespaces: "
               "%zu)\n",
               cur->top.refused, cur->top.stale, cur->top.other_pidns);
    fflush(stdout);
}

/* ---- the terminal: raw while live, restored on every way out ---------- */

static struct termios saved_tty;
static volatile sig_atomic_t tty_raw;

static void restore_tty(void)
{
    if (tty_raw) {
        tcsetattr(STDIN_FILENO, TCSANOW, &saved_tty);
        tty_raw = 0;
    }
}

static void on_signal(int sig)
{
    restore_tty(); /* tcsetattr is async-signal-safe */
    signal(sig, SIG_DFL);
    raise(sig);
}

static void raw_tty(void)
{
    if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &saved_tty) != 0)
        return;
    struct termios raw = saved_tty;
    raw.c_lflag &= (tcflag_t) ~(ICANON | ECHO);
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    if (tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0) {
        tty_raw = 1;
        atexit(restore_tty);
    }
}

/* Waits the interval; true when q was pressed (or stdin closed on a tty). */
static bool wait_or_quit(unsigned interval_ms)
{
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long long spent =
            (now.tv_sec - start.tv_sec) * 1000LL + (now.tv_nsec - start.tv_nsec) / 1000000;
        if (spent >= interval_ms)
            return false;
        struct pollfd pfd = {.fd = STDIN_FILENO, .events = POLLIN};
        int n = poll(&pfd, tty_raw ? 1 : 0, (int)(interval_ms - spent));
        if (n > 0 && (pfd.revents & POLLIN)) {
            char c;
            ssize_t got = read(STDIN_FILENO, &c, 1);
            if (got == 0 || (got == 1 && (c == 'q' || c == 'Q')))
                return true;
        }
    }
}

static void pause_ms(unsigned ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

int nxr_tool_top(int argc, char **argv)
{
    bool once = false, json = false;
    unsigned interval_ms = 1000;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--once") == 0) {
            once = true;
        } else if (strcmp(a, "--json") == 0) {
            json = true;
        } else if (strcmp(a, "--interval") == 0 || strncmp(a, "--interval=", 11) == 0) {
            const char *v = a[10] == '=' ? a + 11 : (i + 1 < argc ? argv[++i] : NULL);
            if (v == NULL)
                return bad("--interval", "needs a value (milliseconds, 10-60000)");
            char *end;
            errno = 0;
            unsigned long x = strtoul(v, &end, 10);
            if (v[0] < '0' || v[0] > '9' || *end != '\0' || errno != 0 || x < 10 || x > 60000) {
                fprintf(stderr, "nxr top: --interval: '%s': expected milliseconds, 10-60000\n", v);
                return 2;
            }
            interval_ms = (unsigned)x;
        } else {
            fprintf(stderr, "nxr top: unknown flag '%s' (flags: --once, --json, --interval MS)\n",
                    a);
            return 2;
        }
    }
    if (json && !once)
        return bad("--json", "needs --once (the live view is a table)");
    size_t rcap = 64, dcap = 512;
    struct sample prev = {0}, cur = {0};
    int rc = take_sample(&prev, &rcap, &dcap);
    if (rc != 0)
        return rc;
    if (once) {
        pause_ms(interval_ms);
        rc = take_sample(&cur, &rcap, &dcap);
        if (rc == 0) {
            if (json)
                print_json(&prev, &cur, interval_ms);
            else
                print_table(&prev, &cur, false);
        }
    } else {
        raw_tty();
        print_table(NULL, &prev, true);
        while (rc == 0 && !wait_or_quit(interval_ms)) {
            rc = take_sample(&cur, &rcap, &dcap);
            if (rc == 0)
                print_table(&prev, &cur, true);
            free_sample(&prev);
            prev = cur;
            cur = (struct sample){0};
        }
        restore_tty();
    }
    free_sample(&prev);
    free_sample(&cur);
    return rc;
}
