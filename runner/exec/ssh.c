/*
 * ssh: the ssh executor (see ssh.h): the master connection, the remote
 * wrapper scripts and the commands that ride on the connection (checks,
 * forwards, copies). Every ssh is run from an argv vector; the one string
 * that a remote shell parses is built by ssh_run_line/remote_line from
 * words quoted by shq_word, never pasted.
 */
#include "exec/ssh.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capture.h"
#include "fileio.h"
#include "log.h"
#include "strutil.h"
#include "sweep.h"
#include "timeutil.h"
#include "xalloc.h"

#include "exec/ports.h"
#include "exec/shquote.h"

#define CONNECT_WAIT_S  60.0   /* the master must be up by then (ConnectTimeout is 15 s) */
#define CHECK_POLL_MS   100.0  /* between two `ssh -O check` */
#define SHORT_CMD_MS    30000  /* a check, a forward, the preflight */
#define FETCH_MS        300000 /* copying one point's records back */
#define FETCH_MAX_BYTES ((size_t)1 << 30)
#define REMOTE_SLACK_S  5.0    /* after the remote grace period, for the wrapper to finish */
#define HB_EVERY_MS     2000.0 /* a heartbeat byte to each remote wrapper this often ... */
#define HB_TIMEOUT_S    15     /* ... which stops its program after this long without one */
#define HB_MAX          16     /* wrappers at once (a server and a client in practice) */
/* bytes in the control path: sun_path is 104..108, and ssh adds
 * ".XXXXXXXXXXXXXXXX" while it creates the socket */
#define CTL_MAX 86

/*
 * The remote wrapper of a server or client. $1 work folder, $2 grace in
 * whole seconds, $3 a folder to make first ("" none), $4 the length of the
 * environment script that comes first on stdin (`export 'NAME=value'`
 * lines, each word from shq_word: values such as tokens never appear in a
 * command line that `ps` shows, here or there), then the argv. dd with
 * bs=1 reads exactly that much and no byte more. $5 the heartbeat timeout
 * in seconds (0: none). fd 3 keeps the ssh channel's stdin:
 * the watcher reads it until end of file (sweep closed its end, the local
 * ssh died or the connection dropped) and then stops the program's group.
 * The program runs under setsid, so its pid is its process group id, and
 * gets neither fd 3 nor stdin. With a heartbeat the watcher also stops it
 * when no byte came for that long: a link that died without closing (a
 * cable, a suspended laptop) gives no end of file until TCP gives up,
 * hours later, and the GPU server must not run on that long. When it
 * ends by itself, what is left of its
 * group goes too, and the wrapper exits with its status. `kill -- -PGID`
 * is not for dash: a negative pid follows the signal directly. A stop that
 * comes before setsid made the group signals the pid alone.
 */
static const char run_script[] =
    "wd=$1 grace=$2 dir=$3 envlen=$4 hb=$5\n"
    "shift 5\n"
    "exec 3<&0 </dev/null\n"
    "if [ \"$envlen\" -gt 0 ]; then\n"
    "  e=$(dd bs=1 count=\"$envlen\" <&3 2>/dev/null) || exit 125\n"
    "  eval \"$e\"\n"
    "fi\n"
    "cd -- \"$wd\" || exit 125\n"
    "if [ -n \"$dir\" ]; then mkdir -p -- \"$dir\" || exit 125; fi\n"
    "setsid \"$@\" 3<&- &\n"
    "p=$!\n"
    "reap() {\n"
    "  g=-$p\n"
    "  kill -TERM \"$g\" 2>/dev/null || { g=$p; kill -TERM \"$p\" 2>/dev/null; } || return 0\n"
    "  n=0\n"
    "  while kill -0 \"$g\" 2>/dev/null && [ \"$n\" -lt \"$grace\" ]; do\n"
    "    sleep 1; n=$((n + 1))\n"
    "  done\n"
    "  kill -KILL \"$g\" 2>/dev/null\n"
    "  return 0\n"
    "}\n"
    "if [ \"$hb\" -gt 0 ]; then\n"
    "  { while b=$(timeout \"$hb\" dd bs=1 count=1 <&3 2>/dev/null) && [ -n \"$b\" ]; do :; done\n"
    "    reap; } >/dev/null 2>&1 &\n"
    "else\n"
    "  { while read -r _; do :; done <&3; reap; } >/dev/null 2>&1 &\n"
    "fi\n"
    "w=$!\n"
    "exec 3<&-\n"
    "wait \"$p\"\n"
    "rc=$?\n"
    "kill \"$w\" 2>/dev/null\n"
    "reap\n"
    "if [ \"$rc\" -gt 128 ]; then echo \"sweep: the remote program was ended by signal "
    "$((rc - 128))\" >&2; fi\n"
    "exit \"$rc\"\n";

/* A short command in the work folder: $1 the folder, then the argv. */
static const char cmd_script[] = "cd -- \"$1\" || exit 125\nshift\nexec \"$@\"\n";

/*
 * The preflight checks, run in the work folder: one "LABEL<TAB>problem"
 * line per problem, nothing when all is well. Arguments: triples of a kind
 * (m: model path, p: program), the label for messages and the path.
 */
static const char check_script[] =
    "for t in setsid timeout dd; do\n"
    "  command -v \"$t\" >/dev/null 2>&1 ||\n"
    "    printf '%s\\t%s\\n' remote \"program '$t' (util-linux, coreutils): not found in PATH\"\n"
    "done\n"
    "c=.sweep-cache/model-sha256\n"
    "cp='{ r = $0; for (i = 0; i < 6; i++) sub(/^[^ ]* /, \"\", r) }'\n"
    "while [ \"$#\" -ge 3 ]; do\n"
    "  k=$1 v=$2 f=$3\n"
    "  shift 3\n"
    "  case $k in\n"
    "  m) if [ ! -e \"$f\" ]; then printf '%s\\t%s\\n' \"$v\" \"model path '$f': not found\"\n"
    "     elif [ ! -r \"$f\" ]; then printf '%s\\t%s\\n' \"$v\" \"model path '$f': not "
    "readable\"\n"
    "     elif [ -d \"$f\" ]; then\n"
    "       h=$(cd -- \"$f\" && for e in * .[!.]* ..?*; do\n"
    "         [ -e \"$e\" ] || [ -L \"$e\" ] || continue\n"
    "         printf '%s\\t%s\\n' \"$e\" \"$(stat -L -c %s -- \"$e\" 2>/dev/null || echo -1)\"\n"
    "       done | LC_ALL=C sort | sha256sum)\n"
    "       printf '%s\\tfp\\t0\\t%s\\n' \"$f\" \"${h%% *}\"\n"
    "     else\n"
    "       n=$(wc -c < \"$f\")\n"
    "       if [ \"$n\" -eq 0 ]; then printf '%s\\t%s\\n' \"$v\" \"model path '$f': the file is "
    "empty\"\n"
    "       else\n"
    /* the whole file's sha256 (modelfp.h), cached in the work folder by
     * device, inode, size, mtime, ctime and path: a large model is read once */
    "         id=$(stat -L -c '%d %i %s %.9Y %.9Z' -- \"$f\" 2>/dev/null) || id=\n"
    "         h=\n"
    "         if [ -n \"$id\" ] && [ -f \"$c\" ]; then\n"
    "           h=$(ID=$id P=$f awk \"$cp\"' $2\" \"$3\" \"$4\" \"$5\" \"$6 == ENVIRON[\"ID\"] &&\n"
    "             r == ENVIRON[\"P\"] && $1 ~ /^[0-9a-f]+$/ && length($1) == 64 { h = $1 }\n"
    "             END { print h }' \"$c\")\n"
    "         fi\n"
    "         if [ -z \"$h\" ]; then\n"
    "           h=$(sha256sum < \"$f\")\n"
    "           h=${h%% *}\n"
    "           if [ -n \"$id\" ] && mkdir -p .sweep-cache 2>/dev/null; then\n"
    "             { if [ -f \"$c\" ]; then P=$f awk \"$cp\"' r != ENVIRON[\"P\"]' \"$c\" | "
    "tail -n 255; fi\n"
    "               printf '%s %s %s\\n' \"$h\" \"$id\" \"$f\"; } >\"$c.$$\" 2>/dev/null &&\n"
    "               mv -f \"$c.$$\" \"$c\" 2>/dev/null\n"
    "           fi\n"
    "         fi\n"
    "         printf '%s\\tfp\\t%s\\t%s\\n' \"$f\" \"$n\" \"$h\"; fi\n"
    "     fi ;;\n"
    "  p) case $f in\n"
    "     */*) if [ ! -f \"$f\" ] || [ ! -x \"$f\" ]; then\n"
    "            printf '%s\\t%s\\n' \"$v\" \"program '$f': not an executable file\"; fi ;;\n"
    "     *) command -v \"$f\" >/dev/null 2>&1 ||\n"
    "          printf '%s\\t%s\\n' \"$v\" \"program '$f': not found in PATH\" ;;\n"
    "     esac ;;\n"
    "  g) if [ -d \"$f\" ]; then printf '%s\\t%s\\n' \"$v\" \"server.model '$f' is a folder; the "
    "bundled engine (fp4serve) loads a GGUF file\"; fi ;;\n"
    "  esac\n"
    "done\n";

struct ssh_conn {
    const struct exp_executor *cfg; /* borrowed */
    proc_stop_flag *stop;
    char *dir;          /* owned: our temporary folder (control socket, master log) */
    char *ctl;          /* owned: dir/c, the ControlPath */
    char *log;          /* owned: dir/master.log, the master's stderr */
    struct proc master; /* the ControlMaster, running while the connection is up */
    char *fwd;          /* owned: the forward in place ("127.0.0.1:LP:HOST:PORT"), or NULL */
    char *fwd_to;       /* owned: its target "HOST PORT" */
    long fwd_port;      /* its local port */
    /* the heartbeat thread: one byte every HB_EVERY_MS into each running
     * wrapper's stdin (hb_fd: our dups of the procs' stdin_w, hb_of: those) */
    pthread_t hb_thread;
    bool hb_started;
    bool hb_quit;
    pthread_mutex_t hb_mu;
    pthread_cond_t hb_cv;
    int hb_fd[HB_MAX];
    int hb_of[HB_MAX];
    size_t hb_n;
};

/* ---- heartbeat ---- */

static void *hb_main(void *arg)
{
    struct ssh_conn *s = arg;
    pthread_mutex_lock(&s->hb_mu);
    while (!s->hb_quit) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        long long ns = until.tv_nsec + (long long)(HB_EVERY_MS * 1e6);
        until.tv_sec += (time_t)(ns / 1000000000LL);
        until.tv_nsec = (long)(ns % 1000000000LL);
        pthread_cond_timedwait(&s->hb_cv, &s->hb_mu, &until);
        /* non-blocking: a full pipe (ssh stuck) or a gone reader changes nothing */
        for (size_t i = 0; i < s->hb_n && !s->hb_quit; i++) {
            ssize_t w = write(s->hb_fd[i], ".", 1);
            (void)w;
        }
    }
    pthread_mutex_unlock(&s->hb_mu);
    return NULL;
}

/* Start sending heartbeats to the wrapper whose stdin is fd (a dup of it
 * is kept, so the thread never writes to a number reused for a file). */
static void hb_add(struct ssh_conn *s, int fd)
{
    int dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (dup_fd < 0)
        return;
    fcntl(dup_fd, F_SETFL, fcntl(dup_fd, F_GETFL) | O_NONBLOCK);
    pthread_mutex_lock(&s->hb_mu);
    if (s->hb_n < HB_MAX) {
        s->hb_fd[s->hb_n] = dup_fd;
        s->hb_of[s->hb_n++] = fd;
        dup_fd = -1;
    }
    pthread_mutex_unlock(&s->hb_mu);
    if (dup_fd >= 0) {
        log_warn("more than %d remote programs at once: one gets no heartbeat", HB_MAX);
        close(dup_fd);
    }
}

/* Stop the heartbeats for fd and close our dup: from now on, closing fd
 * is end of file for the wrapper. */
static void hb_remove(struct ssh_conn *s, int fd)
{
    pthread_mutex_lock(&s->hb_mu);
    for (size_t i = 0; i < s->hb_n; i++)
        if (s->hb_of[i] == fd) {
            close(s->hb_fd[i]);
            s->hb_fd[i] = s->hb_fd[s->hb_n - 1];
            s->hb_of[i] = s->hb_of[s->hb_n - 1];
            s->hb_n--;
            break;
        }
    pthread_mutex_unlock(&s->hb_mu);
}

/* ---- argv and the remote command line ---- */

/* [ssh -S CTL -o ControlMaster=.. OPTIONS -p PORT (-i ID) -o BatchMode=yes ...]:
 * ours that must hold first (ssh keeps the first value of an option), then
 * the user's, then defaults the user may have overridden. */
static void base_argv(const struct ssh_conn *s, bool master, struct strvec *a)
{
    const struct exp_executor *cfg = s->cfg;
    strvec_push(a, "ssh");
    strvec_push(a, "-S");
    strvec_push(a, s->ctl);
    strvec_push(a, "-o");
    strvec_push(a, master ? "ControlMaster=yes" : "ControlMaster=no");
    if (master) {
        strvec_push(a, "-o");
        strvec_push(a, "ControlPersist=no");
    }
    strvec_extend(a, &cfg->options);
    strvec_push(a, "-p");
    strvec_pushf(a, "%ld", cfg->port);
    if (cfg->identity) {
        strvec_push(a, "-i");
        strvec_push(a, cfg->identity);
        strvec_push(a, "-o");
        strvec_push(a, "IdentitiesOnly=yes");
    }
    strvec_push(a, "-o");
    strvec_push(a, "BatchMode=yes"); /* never a password prompt: sweep has no terminal to give */
    if (master) {
        /* a dead link is noticed in 15 s; the master then exits, which ends
         * every channel and so (through the wrappers) every remote program */
        strvec_push(a, "-o");
        strvec_push(a, "ConnectTimeout=15");
        strvec_push(a, "-o");
        strvec_push(a, "ServerAliveInterval=5");
        strvec_push(a, "-o");
        strvec_push(a, "ServerAliveCountMax=3");
    }
}

/* "exec /bin/sh -c SCRIPT NAME PARAMS..." quoted into out (fresh). */
static int remote_line(const char *script, const char *name, const struct strvec *params,
                       struct buf *out, struct err *err)
{
    struct strvec words;
    strvec_init(&words);
    strvec_push(&words, "exec");
    strvec_push(&words, "/bin/sh");
    strvec_push(&words, "-c");
    strvec_push(&words, script);
    strvec_push(&words, name);
    strvec_extend(&words, params);
    buf_init(out, SSH_REMOTE_MAX);
    int rc = shq_words(out, &words);
    strvec_release(&words);
    if (rc != 0)
        return err_set(err, RN_ERR_ENV,
                       "the remote command line would be over %zu KiB (argv and environment "
                       "together); shorten them",
                       SSH_REMOTE_MAX >> 10),
               -1;
    return 0;
}

int ssh_run_line(const char *workdir, double grace_s, const char *remote_dir,
                 const struct strvec *env_add, const struct strvec *argv, long heartbeat_s,
                 struct buf *out, struct buf *env_out, struct err *err)
{
    buf_init(out, SSH_REMOTE_MAX); /* both released by the caller whatever happens */
    buf_init(env_out, SSH_ENV_MAX);
    struct strvec params;
    strvec_init(&params);
    int rc = -1;
    for (size_t i = 0; env_add && i < env_add->n; i++) {
        /* the wrapper exports these: a name that is not one would be an error there */
        const char *e = env_add->v[i];
        size_t n = strcspn(e, "=");
        bool ok = n > 0 && e[n] == '=' && !isdigit((unsigned char)e[0]);
        for (size_t j = 0; ok && j < n; j++)
            ok = isalnum((unsigned char)e[j]) || e[j] == '_';
        if (!ok) {
            err_set(err, RN_ERR_USAGE, "environment entry '%.40s' is not NAME=value", e);
            goto out;
        }
        if (buf_puts(env_out, "export ") != 0 || shq_word(env_out, e) != 0 ||
            buf_putc(env_out, '\n') != 0) {
            err_set(err, RN_ERR_ENV, "the server environment is over %zu KiB", SSH_ENV_MAX >> 10);
            goto out;
        }
    }
    strvec_push(&params, workdir);
    strvec_pushf(&params, "%ld", (long)ceil(grace_s > 0 ? grace_s : 0));
    strvec_push(&params, remote_dir ? remote_dir : "");
    strvec_pushf(&params, "%zu", env_out->len);
    strvec_pushf(&params, "%ld", heartbeat_s > 0 ? heartbeat_s : 0);
    strvec_extend(&params, argv);
    rc = remote_line(run_script, "sweep-remote", &params, out, err);
out:
    strvec_release(&params);
    return rc;
}

/* ---- short commands on the connection ---- */

/* write(2) until all of data went, retrying on EINTR. 0 or -1 (errno). */
static int write_all(int fd, const char *data, size_t len)
{
    while (len) {
        ssize_t n = write(fd, data, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Run base_argv + extra + [host] (+ the remote line when given) to its end,
 * its stdout and stderr into out (fresh, capped at max). Returns the exit
 * code, or -1 (killed, timed out, could not start). */
static int run_short(const struct ssh_conn *s, const char *const *extra, const char *line,
                     struct buf *out, size_t max, double timeout_ms, bool with_stderr)
{
    struct strvec a;
    strvec_init(&a);
    base_argv(s, false, &a);
    for (size_t i = 0; extra && extra[i]; i++)
        strvec_push(&a, extra[i]);
    strvec_push(&a, s->cfg->host);
    if (line)
        strvec_push(&a, line);
    buf_init(out, max);
    struct capture_opts opts = {.with_stderr = with_stderr, .timeout_ms = timeout_ms};
    struct capture_result res;
    int code = capture_run((const char *const *)strvec_argv(&a), &opts, out, &res) == 0
                   ? capture_exit_code(&res)
                   : -1;
    strvec_release(&a);
    return code;
}

/* argv run in the work folder through cmd_script; as run_short. */
static int run_in_workdir(const struct ssh_conn *s, const struct strvec *argv, struct buf *out,
                          size_t max, double timeout_ms, bool with_stderr, struct err *err)
{
    struct strvec params;
    strvec_init(&params);
    strvec_push(&params, s->cfg->workdir);
    strvec_extend(&params, argv);
    struct buf line;
    int rc = remote_line(cmd_script, "sweep-remote", &params, &line, err);
    strvec_release(&params);
    if (rc != 0) {
        buf_release(&line);
        buf_init(out, 1);
        return -1;
    }
    static const char *const extra[] = {"-T", NULL};
    int code = run_short(s, extra, line.data, out, max, timeout_ms, with_stderr);
    buf_release(&line);
    return code;
}

/* The last non-empty line of text (at most 200 bytes), for messages. */
static char *last_line(const char *text)
{
    const char *line = "";
    size_t n = text ? str_last_line(text, strlen(text), &line) : 0;
    return xasprintf("%.*s", (int)(n > 200 ? 200 : n), line);
}

/* ---- the connection ---- */

/* mkdtemp under $TMPDIR when the control path stays short enough there,
 * else under /tmp. */
static char *make_dir(struct err *err)
{
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp || strlen(tmp) + strlen("/sweep-ssh-XXXXXX/c") > CTL_MAX)
        tmp = "/tmp";
    char *dir = xasprintf("%s/sweep-ssh-XXXXXX", tmp);
    if (!mkdtemp(dir)) {
        err_set(err, RN_ERR_ENV, "cannot make a folder for the ssh control socket in %s: %s", tmp,
                strerror(errno));
        free(dir);
        return NULL;
    }
    return dir;
}

/* Start the master and wait until `ssh -O check` answers. */
static int connect_master(struct ssh_conn *s, struct err *err)
{
    struct strvec a;
    strvec_init(&a);
    base_argv(s, true, &a);
    strvec_push(&a, "-N");
    strvec_push(&a, "-T");
    strvec_push(&a, s->cfg->host);
    proc_init(&s->master);
    int rc = proc_spawn(&s->master, &a, NULL, s->log, err);
    strvec_release(&a);
    if (rc != 0)
        return -1;
    double end = clock_ms() + CONNECT_WAIT_S * 1000.0;
    static const char *const check[] = {"-O", "check", NULL};
    for (;;) {
        struct buf out;
        int code = run_short(s, check, NULL, &out, 4096, SHORT_CMD_MS, true);
        buf_release(&out);
        if (code == 0)
            return 0;
        if (!proc_alive(&s->master)) {
            char how[96];
            proc_describe_status(s->master.wstatus, how, sizeof(how));
            char *tail = proc_log_tail(&s->master, 5);
            char *line = last_line(tail);
            err_set(err, RN_ERR_ENV, "ssh to '%s' port %ld: cannot connect (ssh %s%s%s%s)",
                    s->cfg->host, s->cfg->port, how, *line ? ": '" : "", line, *line ? "'" : "");
            free(line);
            free(tail);
            break;
        }
        if (s->stop && *s->stop) {
            err_set(err, RN_ERR_INTERRUPTED, "interrupted");
            break;
        }
        if (clock_ms() >= end) {
            err_set(err, RN_ERR_ENV, "ssh to '%s' port %ld: no connection after %.0f s",
                    s->cfg->host, s->cfg->port, CONNECT_WAIT_S);
            break;
        }
        sleep_ms(CHECK_POLL_MS, s->stop);
    }
    proc_stop(&s->master, 1.0, NULL, NULL);
    proc_release(&s->master);
    return -1;
}

struct ssh_conn *ssh_open(const struct exp_executor *cfg, proc_stop_flag *stop, struct err *err)
{
    char *prog = proc_resolve_program("ssh", err);
    if (!prog) {
        err_prefix(err, "executor: ssh");
        return NULL;
    }
    free(prog);
    char *dir = make_dir(err);
    if (!dir)
        return NULL;
    struct ssh_conn *s = xcalloc(1, sizeof(*s));
    s->cfg = cfg;
    s->stop = stop;
    s->dir = dir;
    s->ctl = path_join(dir, "c");
    s->log = path_join(dir, "master.log");
    proc_init(&s->master);
    pthread_mutex_init(&s->hb_mu, NULL);
    pthread_cond_init(&s->hb_cv, NULL);
    if (connect_master(s, err) != 0) {
        ssh_close(s);
        return NULL;
    }
    if (pthread_create(&s->hb_thread, NULL, hb_main, s) == 0)
        s->hb_started = true;
    else
        log_warn("no heartbeat thread: a remote program outlives a silently dead link");
    return s;
}

void ssh_close(struct ssh_conn *s)
{
    if (!s)
        return;
    if (s->hb_started) {
        pthread_mutex_lock(&s->hb_mu);
        s->hb_quit = true;
        pthread_cond_signal(&s->hb_cv);
        pthread_mutex_unlock(&s->hb_mu);
        pthread_join(s->hb_thread, NULL);
    }
    for (size_t i = 0; i < s->hb_n; i++)
        close(s->hb_fd[i]);
    pthread_cond_destroy(&s->hb_cv);
    pthread_mutex_destroy(&s->hb_mu);
    /* the master's end closes every channel: a wrapper still running
     * remotely sees end of file and stops its program */
    if (s->master.pid)
        proc_stop(&s->master, 2.0, NULL, NULL);
    proc_release(&s->master);
    if (s->ctl)
        unlink(s->ctl);
    if (s->log)
        unlink(s->log);
    if (s->dir)
        rmdir(s->dir);
    free(s->fwd);
    free(s->fwd_to);
    free(s->ctl);
    free(s->log);
    free(s->dir);
    free(s);
}

pid_t ssh_master_pid(const struct ssh_conn *s)
{
    return s && s->master.pid && !s->master.reaped ? s->master.pid : 0;
}

/* The master died (the link dropped, someone killed it): start a new one,
 * so the next server start is not refused for an old loss. */
static int ensure_master(struct ssh_conn *s, struct err *err)
{
    if (proc_alive(&s->master))
        return 0;
    char how[96];
    proc_describe_status(s->master.wstatus, how, sizeof(how));
    log_warn("the ssh connection to '%s' ended (ssh %s); connecting again", s->cfg->host, how);
    proc_stop(&s->master, 1.0, NULL, NULL);
    proc_release(&s->master);
    free(s->fwd); /* forwards went with it */
    free(s->fwd_to);
    s->fwd = s->fwd_to = NULL;
    return connect_master(s, err);
}

/* ---- preflight ---- */

/* Append a check triple unless the same one is there already. */
static void add_check(struct strvec *sv, const char *kind, const char *label, const char *path)
{
    for (size_t i = 0; i + 2 < sv->n; i += 3)
        if (strcmp(sv->v[i], kind) == 0 && strcmp(sv->v[i + 2], path) == 0)
            return;
    strvec_push(sv, kind);
    strvec_push(sv, label);
    strvec_push(sv, path);
}

/* "SIZE<TAB>SHA256" of the model at path on the host: the fingerprint of
 * every variant with that model path (plan_check_model's, computed there),
 * so that point keys cover the remote model's contents. */
static int model_fp_line(struct plan *p, const char *path, const char *rest, struct err *err)
{
    struct model_fp fp;
    memset(&fp, 0, sizeof(fp));
    const char *tab = strchr(rest, '\t');
    long long size;
    if (!tab || sscanf(rest, "%lld", &size) != 1 || strlen(tab + 1) != 64)
        return 0; /* not what the script prints: no fingerprint, not an error */
    fp.exists = 1;
    fp.size = size;
    memcpy(fp.sha256, tab + 1, 64);
    fp.sha256[64] = '\0';
    for (size_t vi = 0; vi < p->n_variants; vi++)
        if (p->variants[vi].model_path && strcmp(p->variants[vi].model_path, path) == 0 &&
            plan_set_model_fp(p, vi, &fp, err) != 0)
            return -1;
    return 0;
}

int ssh_preflight(struct ssh_conn *s, struct plan *p, struct err *err)
{
    struct strvec argv;
    strvec_init(&argv);
    strvec_push(&argv, "/bin/sh");
    strvec_push(&argv, "-c");
    strvec_push(&argv, check_script);
    strvec_push(&argv, "sweep-check");
    for (size_t vi = 0; vi < p->n_variants; vi++) {
        const struct plan_variant *pv = &p->variants[vi];
        char *label = xasprintf("variant '%s'", pv->v->name);
        char *srv = xasprintf("variant '%s': server", pv->v->name);
        if (pv->model_path)
            add_check(&argv, "m", label, pv->model_path);
        if (pv->model_path && pv->v->server.engine == EXP_ENGINE_BUNDLED) /* W3-N19 */
            add_check(&argv, "g", label, pv->model_path);
        if (pv->server_argv.n)
            add_check(&argv, "p", srv, pv->server_argv.v[0]);
        free(label);
        free(srv);
    }
    for (size_t pi = 0; pi < p->n_points; pi++) {
        const struct plan_point *pp = &p->points[pi];
        char *cli = xasprintf("variant '%s': bench client", p->variants[pp->variant].v->name);
        if (pp->client_argv.n)
            add_check(&argv, "p", cli, pp->client_argv.v[0]);
        free(cli);
    }
    struct buf out;
    int code = run_in_workdir(s, &argv, &out, 1 << 20, SHORT_CMD_MS, true, err);
    strvec_release(&argv);
    int rc = -1;
    if (code == 125) {
        err_set(err, RN_ERR_ENV, "on host '%s': work folder '%s': not found or not a folder",
                s->cfg->host, s->cfg->workdir);
    } else if (code != 0) {
        char *line = last_line(out.data);
        if (!err->code)
            err_set(err, RN_ERR_ENV, "on host '%s': the checks did not run (exit %d%s%s%s)",
                    s->cfg->host, code, *line ? ": '" : "", line, *line ? "'" : "");
        free(line);
    } else {
        /* "PATH<TAB>fp<TAB>SIZE<TAB>SHA256" lines fingerprint the models;
         * the first "LABEL<TAB>problem" line, if any, is the error */
        rc = 0;
        for (char *line = out.data; line && *line && rc == 0;) {
            char *nl = strchr(line, '\n');
            if (nl)
                *nl = '\0';
            char *tab = strchr(line, '\t');
            if (tab && strncmp(tab, "\tfp\t", 4) == 0) {
                *tab = '\0';
                if (model_fp_line(p, line, tab + 4, err) != 0)
                    rc = -1;
            } else if (tab) {
                err_set(err, RN_ERR_ENV, "%.*s: on host '%s': %s%s%s%s", (int)(tab - line), line,
                        s->cfg->host, tab + 1,
                        strcmp(s->cfg->workdir, ".") ? " (work folder '" : "",
                        strcmp(s->cfg->workdir, ".") ? s->cfg->workdir : "",
                        strcmp(s->cfg->workdir, ".") ? "')" : "");
                rc = -1;
            }
            line = nl ? nl + 1 : NULL;
        }
    }
    buf_release(&out);
    return rc;
}

/* ---- servers and clients ---- */

int ssh_spawn(struct ssh_conn *s, struct proc *p, const struct strvec *argv,
              const struct strvec *env_add, const char *log_path, const char *remote_dir,
              double grace_s, struct err *err)
{
    if (ensure_master(s, err) != 0)
        return -1;
    struct buf line, env;
    if (ssh_run_line(s->cfg->workdir, grace_s, remote_dir, env_add, argv, HB_TIMEOUT_S, &line, &env,
                     err) != 0) {
        buf_release(&line);
        buf_release(&env);
        return -1;
    }
    struct strvec a;
    strvec_init(&a);
    base_argv(s, false, &a);
    strvec_push(&a, "-T");
    strvec_push(&a, s->cfg->host);
    strvec_push(&a, line.data);
    buf_release(&line);
    p->stdin_pipe = true; /* the environment, then the wrapper's stop signal: end of file */
    int rc = proc_spawn(p, &a, NULL, log_path, err);
    strvec_release(&a);
    /* a failed write (ssh already gone) shows as the start failing */
    if (rc == 0 && env.len && write_all(p->stdin_w, env.data, env.len) != 0)
        log_warn("cannot pass the environment to the remote side: %s", strerror(errno));
    if (rc == 0) /* after the environment: no byte may come before it */
        hb_add(s, p->stdin_w);
    buf_release(&env);
    return rc;
}

int ssh_stop(struct ssh_conn *s, struct proc *p, double grace_s, const proc_stop_flag *stop,
             struct proc_stop_info *info)
{
    if (p->stdin_w >= 0)
        hb_remove(s, p->stdin_w);
    if (p->pid && p->stdin_w >= 0) {
        /* end of file for the remote watcher: SIGTERM to the group there,
         * SIGKILL after grace_s, and the wrapper (so our ssh) exits once the
         * group is gone */
        close(p->stdin_w);
        p->stdin_w = -1;
        double end = clock_ms() + (grace_s + REMOTE_SLACK_S) * 1000.0;
        struct proc *w[1] = {p};
        while (proc_alive(p) && clock_ms() < end && !(stop && *stop >= 2))
            proc_wait_any(w, 1, 100, NULL);
    }
    /* the local ssh (normally gone by now; after a hurry or a hung link it
     * is killed, and the remote side still cleans up when the channel ends) */
    return proc_stop(p, grace_s < 1.0 ? grace_s : 1.0, stop, info);
}

long ssh_forward(struct ssh_conn *s, const char *host, long port, struct err *err)
{
    if (ensure_master(s, err) != 0)
        return -1;
    char *to = xasprintf("%s %ld", host, port);
    if (s->fwd && strcmp(s->fwd_to, to) == 0) {
        free(to);
        return s->fwd_port;
    }
    struct buf out;
    if (s->fwd) {
        const char *const cancel[] = {"-O", "cancel", "-L", s->fwd, NULL};
        run_short(s, cancel, NULL, &out, 4096, SHORT_CMD_MS, true);
        buf_release(&out);
        free(s->fwd);
        free(s->fwd_to);
        s->fwd = s->fwd_to = NULL;
    }
    bool v6 = strchr(host, ':') != NULL;
    int code = -1;
    char *why = NULL;
    /* a free port may be taken between the look and the forward: try again */
    for (int tries = 0; tries < 5 && code != 0; tries++) {
        long lport = port_free("127.0.0.1");
        if (lport < 0)
            continue;
        char *spec =
            xasprintf("127.0.0.1:%ld:%s%s%s:%ld", lport, v6 ? "[" : "", host, v6 ? "]" : "", port);
        const char *const fwd[] = {"-O", "forward", "-L", spec, NULL};
        code = run_short(s, fwd, NULL, &out, 4096, SHORT_CMD_MS, true);
        if (code == 0) {
            s->fwd = spec;
            s->fwd_to = to;
            s->fwd_port = lport;
            to = NULL;
        } else {
            free(why);
            why = last_line(out.data);
            free(spec);
        }
        buf_release(&out);
    }
    free(to);
    if (code != 0)
        err_set(err, RN_ERR_ENV, "ssh to '%s': cannot forward a local port to %s:%ld (%s)",
                s->cfg->host, host, port, why && *why ? why : "no free local port");
    free(why);
    return code == 0 ? s->fwd_port : -1;
}

int ssh_fetch(struct ssh_conn *s, const char *remote_path, const char *local_path, struct err *err)
{
    if (ensure_master(s, err) != 0)
        return -1;
    struct strvec argv;
    strvec_init(&argv);
    strvec_push(&argv, "cat");
    strvec_push(&argv, "--");
    strvec_push(&argv, remote_path);
    struct buf out;
    int code = run_in_workdir(s, &argv, &out, FETCH_MAX_BYTES, FETCH_MS, false, err);
    strvec_release(&argv);
    int rc = -1;
    if (code != 0 || out.toobig) {
        if (!err->code)
            err_set(err, RN_ERR_ENV, "on host '%s': cannot copy '%s' back (%s)", s->cfg->host,
                    remote_path, out.toobig ? "over 1 GiB" : "cat failed");
    } else {
        rc = file_write_atomic(local_path, out.data ? out.data : "", out.len, err, RN_ERR_ENV);
    }
    buf_release(&out);
    return rc;
}
