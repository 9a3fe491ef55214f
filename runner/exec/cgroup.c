/*
 * cgroup: one cgroup v2 per child sweep starts (exec/cgroup.h): locating
 * the cgroup2 mount and our own cgroup, creating and removing children,
 * signalling and killing their members, and the clean-up of what a
 * SIGKILLed sweep left. Everything goes through plain files under the
 * cgroup2 mount (cgroup.procs, cgroup.events, cgroup.kill).
 */
#include "exec/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "log.h"
#include "strutil.h"
#include "timeutil.h"
#include "xalloc.h"

#define NAME_PREFIX   "sweep-"
#define PIDS_MAX      256    /* leftover processes named per cgroup */
#define TREE_DEPTH    8      /* nested cgroups a child may have made, followed this deep */
#define LEFTOVER_MS   2000.0 /* wait for a killed leftover cgroup to empty */
#define CMDLINE_BYTES 400    /* of a leftover's command line shown */

/* Read up to size-1 bytes of a small (proc or cgroup) file, NUL-terminated.
 * Returns the length, or -1 (errno set) when it cannot be opened. */
static ssize_t read_small(const char *path, char *out, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t len = 0;
    while (len + 1 < size) {
        ssize_t n = read(fd, out + len, size - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    out[len] = '\0';
    return (ssize_t)len;
}

/* Field 22 of /proc/PID/stat (start time, clock ticks after boot); the
 * name in parentheses may hold anything, so count after the last ')'. */
static bool start_time(pid_t pid, unsigned long long *ticks)
{
    char path[64], text[1024];
    snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
    if (read_small(path, text, sizeof(text)) <= 0)
        return false;
    char *s = strrchr(text, ')');
    if (!s)
        return false;
    /* s is at the ')' ending field 2; each space found moves to the next
     * field, so after 20 of them s + 1 is field 22 */
    for (int field = 2; field < 22; field++) {
        s = strchr(s + 1, ' ');
        if (!s)
            return false;
    }
    char *end;
    errno = 0;
    *ticks = strtoull(s + 1, &end, 10);
    return errno == 0 && end != s + 1;
}

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static void unescape_octal(char *s)
{
    char *w = s;
    for (char *r = s; *r; r++) {
        if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' &&
            r[3] >= '0' && r[3] <= '7') {
            *w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
            r += 3;
        } else {
            *w++ = *r;
        }
    }
    *w = '\0';
}

/* The first cgroup2 mount in mountinfo: its mount point and the root of
 * the hierarchy it shows (field 4, "/" unless bind-mounted or namespaced).
 * Line: ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SRC SUPER. */
static bool find_cgroup2(const char *mountinfo, char **mnt, char **root)
{
    FILE *f = fopen(mountinfo, "re");
    if (!f)
        return false;
    char *line = NULL;
    size_t cap = 0;
    bool found = false;
    while (!found && getline(&line, &cap, f) > 0) {
        char *sep = strstr(line, " - ");
        char fstype[32], r[4096], m[4096];
        if (!sep || sscanf(sep + 3, "%31s", fstype) != 1 || strcmp(fstype, "cgroup2") != 0)
            continue;
        if (sscanf(line, "%*s %*s %*s %4095s %4095s", r, m) != 2)
            continue;
        unescape_octal(r);
        unescape_octal(m);
        *root = xstrdup(r);
        *mnt = xstrdup(m);
        found = true;
    }
    free(line);
    fclose(f);
    return found;
}

/* Our cgroup v2 path, the "0::/path" line of /proc/self/cgroup; heap. */
static char *own_cgroup(const char *cgroup_file)
{
    char text[8192];
    if (read_small(cgroup_file, text, sizeof(text)) <= 0)
        return NULL;
    for (char *line = text; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        if (str_starts_with(line, "0::/"))
            return xstrdup(line + 3);
        line = nl ? nl + 1 : NULL;
    }
    return NULL;
}

/* "sweep-<pid>-<start>-...": the owner's pid and start time. */
/* sweep-<pid>-<start>-ns<pidns>-..., or (an older sweep's name) without the
 * ns<pidns> part: *ns is 0 then. */
static bool parse_name(const char *name, pid_t *pid, unsigned long long *start,
                       unsigned long long *ns)
{
    if (!str_starts_with(name, NAME_PREFIX))
        return false;
    const char *s = name + strlen(NAME_PREFIX);
    char *end;
    errno = 0;
    long p = strtol(s, &end, 10);
    if (errno || end == s || *end != '-' || p <= 0)
        return false;
    s = end + 1;
    unsigned long long t = strtoull(s, &end, 10);
    if (errno || end == s || *end != '-')
        return false;
    *pid = (pid_t)p;
    *start = t;
    *ns = 0;
    s = end + 1;
    if (str_starts_with(s, "ns")) {
        unsigned long long n = strtoull(s + 2, &end, 10);
        if (errno == 0 && end != s + 2 && *end == '-')
            *ns = n;
    }
    return true;
}

/* mkdir a probe child and check that both ends of a move are writable:
 * moving a process needs write access to cgroup.procs of the target and
 * of the common ancestor (our own cgroup). NULL when fine, else a reason. */
static char *probe(const struct cg_base *b, const char *dir)
{
    char *why = NULL;
    char *own_procs = path_join(dir, "cgroup.procs");
    char *child = xasprintf("%s/" NAME_PREFIX "%ld-%llu-ns%llu-probe", dir, (long)b->owner,
                            b->owner_start, b->owner_ns);
    char *child_procs = path_join(child, "cgroup.procs");
    if (access(own_procs, W_OK) != 0) {
        why = xasprintf("%s: %s", own_procs, strerror(errno));
    } else if (mkdir(child, 0755) != 0) {
        why = xasprintf("cannot create a cgroup in %s: %s", dir, strerror(errno));
    } else {
        if (access(child_procs, W_OK) != 0)
            why = xasprintf("%s: %s", child_procs, strerror(errno));
        rmdir(child);
    }
    free(own_procs);
    free(child_procs);
    free(child);
    return why;
}

int cg_open(struct cg_base *b, const char *mountinfo, const char *cgroup_file)
{
    memset(b, 0, sizeof(*b));
    b->owner = getpid();
    char *mnt = NULL, *root = NULL, *own = NULL, *dir = NULL;
    if (!start_time(b->owner, &b->owner_start)) {
        b->why = xstrdup("cannot read our start time from /proc/self/stat");
        goto out;
    }
    struct stat ns;
    if (stat("/proc/self/ns/pid", &ns) != 0) {
        b->why =
            xasprintf("cannot tell our PID namespace (/proc/self/ns/pid: %s)", strerror(errno));
        goto out;
    }
    b->owner_ns = (unsigned long long)ns.st_ino;
    if (!find_cgroup2(mountinfo ? mountinfo : "/proc/self/mountinfo", &mnt, &root)) {
        b->why = xstrdup("no cgroup2 file system is mounted");
        goto out;
    }
    own = own_cgroup(cgroup_file ? cgroup_file : "/proc/self/cgroup");
    if (!own) {
        b->why = xstrdup("this process has no cgroup v2 (no \"0::\" line in /proc/self/cgroup)");
        goto out;
    }
    /* The mount may show a subtree (bind mount, cgroup namespace): our
     * path must lie in it, and is taken relative to it. */
    size_t rl = strcmp(root, "/") == 0 ? 0 : strlen(root);
    if (rl && (strncmp(own, root, rl) != 0 || (own[rl] && own[rl] != '/'))) {
        b->why =
            xasprintf("our cgroup %s is outside the cgroup2 mount %s (root %s)", own, mnt, root);
        goto out;
    }
    const char *rel = own + rl;
    dir = (*rel && strcmp(rel, "/") != 0) ? xasprintf("%s%s", mnt, rel) : xstrdup(mnt);
    b->why = probe(b, dir);
    if (!b->why) {
        b->dir = dir;
        dir = NULL;
    }
out:
    free(mnt);
    free(root);
    free(own);
    free(dir);
    return b->dir ? 0 : -1;
}

void cg_close(struct cg_base *b)
{
    free(b->dir);
    free(b->why);
    b->dir = NULL;
    b->why = NULL;
}

char *cg_create(struct cg_base *b, const char *role, char **why)
{
    if (why)
        *why = NULL;
    if (!b->dir)
        return NULL;
    char *path = xasprintf("%s/" NAME_PREFIX "%ld-%llu-ns%llu-%s-%ld", b->dir, (long)b->owner,
                           b->owner_start, b->owner_ns, role, ++b->n);
    if (mkdir(path, 0755) == 0)
        return path;
    if (why)
        *why = xasprintf("cannot create cgroup %s: %s", path, strerror(errno));
    free(path);
    cg_close(b);
    return NULL;
}

/* Pids listed in one cgroup.procs file, appended to out[*n..max). */
static void read_procs(const char *dir, pid_t *out, size_t *n, size_t max)
{
    char *path = path_join(dir, "cgroup.procs");
    FILE *f = fopen(path, "re");
    free(path);
    if (!f)
        return;
    long pid;
    while (*n < max && fscanf(f, "%ld", &pid) == 1)
        if (pid > 0)
            out[(*n)++] = (pid_t)pid;
    fclose(f);
}

size_t cg_pids(const char *dir, pid_t *out, size_t max)
{
    size_t n = 0;
    read_procs(dir, out, &n, max);
    return n;
}

bool cg_has_pid(const char *dir, pid_t pid)
{
    char *path = path_join(dir, "cgroup.procs");
    FILE *f = fopen(path, "re");
    free(path);
    if (!f)
        return false;
    long got;
    bool found = false;
    while (!found && fscanf(f, "%ld", &got) == 1)
        found = got == (long)pid;
    fclose(f);
    return found;
}

size_t cg_signal(const char *dir, int sig)
{
    pid_t pids[PIDS_MAX];
    size_t n = cg_pids(dir, pids, PIDS_MAX), sent = 0;
    for (size_t i = 0; i < n; i++)
        sent += kill(pids[i], sig) == 0;
    return sent;
}

void cg_kill(const char *dir)
{
    char *path = path_join(dir, "cgroup.kill");
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    free(path);
    if (fd >= 0) {
        ssize_t w = write(fd, "1", 1);
        close(fd);
        if (w == 1)
            return;
    }
    /* before Linux 5.14: one by one (a fork racing us is caught by the
     * caller's wait loop, which calls us again) */
    cg_signal(dir, SIGKILL);
}

int cg_populated(const char *dir)
{
    char *path = path_join(dir, "cgroup.events");
    char text[256];
    ssize_t n = read_small(path, text, sizeof(text));
    free(path);
    if (n <= 0)
        return -1;
    const char *p = strstr(text, "populated ");
    if (!p)
        return -1;
    return p[strlen("populated ")] == '1' ? 1 : 0;
}

bool cg_wait_empty(const char *dir, double timeout_ms)
{
    double end = clock_ms() + timeout_ms;
    for (;;) {
        if (cg_populated(dir) != 1)
            return true;
        if (clock_ms() >= end)
            return false;
        sleep_ms(10, NULL);
    }
}

/* Pids of dir and of the cgroups below it (a child may make its own). */
static void collect_pids(const char *dir, int depth, pid_t *out, size_t *n, size_t max)
{
    read_procs(dir, out, n, max);
    DIR *d = depth < TREE_DEPTH ? opendir(dir) : NULL;
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_type != DT_DIR || de->d_name[0] == '.')
            continue;
        char *sub = path_join(dir, de->d_name);
        collect_pids(sub, depth + 1, out, n, max);
        free(sub);
    }
    closedir(d);
}

/* rmdir dir after the cgroups below it (only empty cgroups can go). */
static int remove_tree(const char *dir, int depth)
{
    DIR *d = depth < TREE_DEPTH ? opendir(dir) : NULL;
    if (d) {
        struct dirent *de;
        while ((de = readdir(d))) {
            if (de->d_type != DT_DIR || de->d_name[0] == '.')
                continue;
            char *sub = path_join(dir, de->d_name);
            remove_tree(sub, depth + 1);
            free(sub);
        }
        closedir(d);
    }
    return rmdir(dir);
}

/* "pid 123: sleep 1000 (output to /tmp/run/default/server.log)": what a
 * user needs to recognise a process, and its log names the run folder. */
static void describe_pid(pid_t pid, char *out, size_t size)
{
    char path[64], cmd[CMDLINE_BYTES + 1], target[1024];
    snprintf(path, sizeof(path), "/proc/%ld/cmdline", (long)pid);
    ssize_t n = read_small(path, cmd, sizeof(cmd));
    if (n > 0) {
        while (n > 0 && cmd[n - 1] == '\0')
            n--;
        cmd[n] = '\0';
        for (ssize_t i = 0; i < n; i++) /* argv separators and control bytes */
            if ((unsigned char)cmd[i] < 0x20)
                cmd[i] = cmd[i] ? '?' : ' ';
    } else {
        snprintf(path, sizeof(path), "/proc/%ld/comm", (long)pid);
        if (read_small(path, cmd, sizeof(cmd)) <= 0)
            snprintf(cmd, sizeof(cmd), "?");
        cmd[strcspn(cmd, "\n")] = '\0';
    }
    snprintf(path, sizeof(path), "/proc/%ld/fd/1", (long)pid);
    ssize_t t = readlink(path, target, sizeof(target) - 1);
    target[t > 0 ? t : 0] = '\0';
    snprintf(out, size, "pid %ld: %s%s%s%s", (long)pid, cmd, t > 0 ? " (output to " : "", target,
             t > 0 ? ")" : "");
}

/* A leftover cgroup that still holds processes: name them, kill them,
 * remove it. Returns how many were named (and killed). */
static size_t kill_leftover(const char *path, pid_t owner)
{
    pid_t pids[PIDS_MAX];
    size_t n = 0;
    collect_pids(path, 0, pids, &n, PIDS_MAX);
    log_warn("%s: %zu process(es) left by sweep pid %ld, which is no longer running; "
             "killing them:",
             path, n, (long)owner);
    for (size_t i = 0; i < n; i++) {
        char line[CMDLINE_BYTES + 1200];
        describe_pid(pids[i], line, sizeof(line));
        log_warn("  %s", line);
    }
    cg_kill(path);
    if (!cg_wait_empty(path, LEFTOVER_MS)) {
        log_warn("%s: still not empty %.0f s after cgroup.kill; left as it is", path,
                 LEFTOVER_MS / 1000.0);
        return n;
    }
    remove_tree(path, 0);
    log_warn("%s: killed and removed", path);
    return n;
}

int cg_remove(const char *dir)
{
    return remove_tree(dir, 0);
}

size_t cg_clean_leftovers(struct cg_base *b)
{
    if (!b->dir)
        return 0;
    DIR *d = opendir(b->dir);
    if (!d)
        return 0;
    size_t killed = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        pid_t pid;
        unsigned long long start, ns, now;
        if (de->d_type != DT_DIR || !parse_name(de->d_name, &pid, &start, &ns))
            continue;
        /* a sweep in another PID namespace sharing this cgroup (a container
         * without a cgroup namespace): its pid means nothing here, so
         * whether it lives cannot be told; never touched */
        if (ns && ns != b->owner_ns)
            continue;
        /* a live sweep's cgroup (ours included): the pid runs and started
         * when the name says, so it is the same process */
        if (start_time(pid, &now) && now == start)
            continue;
        char *path = path_join(b->dir, de->d_name);
        if (cg_populated(path) == 1)
            killed += kill_leftover(path, pid);
        else
            remove_tree(path, 0); /* empty: removed without a word */
        free(path);
    }
    closedir(d);
    return killed;
}
