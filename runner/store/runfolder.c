/*
 * runfolder: writing into a run folder (see runfolder.h): JSON files, the
 * flock that makes one command at a time its owner, and previous-N.
 */
#include "store/runfolder.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "strutil.h"
#include "strvec.h"
#include "sweep.h"
#include "xalloc.h"

int rundir_write_json(const char *path, const json_t *root, size_t extra_flags, struct err *err)
{
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | extra_flags);
    if (!text)
        return err_set(err, RN_ERR_ENV, "%s: cannot serialise the JSON", path), -1;
    char *with_nl = xasprintf("%s\n", text);
    int rc = file_write_atomic(path, with_nl, strlen(with_nl), err, RN_ERR_ENV);
    free(with_nl);
    free(text);
    return rc;
}

/* ---- owning the folder ---- */

/* Open dir's lock file without following a link: a .sweep.lock that is a
 * symlink (or anything but a regular file) is refused, never written
 * through. *created says whether this call made the file. -1 with err. */
static int open_lock_file(const char *dir, const char *path, bool *created, struct err *err)
{
    *created = false;
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd >= 0)
        *created = true;
    else if (errno == EEXIST)
        fd = open(path, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0 && errno == ELOOP)
        return err_set(err, RN_ERR_ENV,
                       "run folder '%s': %s is a symbolic link (sweep never writes through a "
                       "link in a run folder); remove it",
                       dir, path),
               -1;
    if (fd < 0)
        return err_set(err, RN_ERR_ENV, "run folder '%s': cannot create the lock file: %s: %s", dir,
                       path, strerror(errno)),
               -1;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return err_set(err, RN_ERR_ENV,
                       "run folder '%s': %s is not a regular file (sweep keeps its lock there); "
                       "remove it",
                       dir, path),
               -1;
    }
    return fd;
}

/* Whether fd is still the file at path: a refused run removes the lock
 * file it created (rundir_unlock_undo), so a lock taken on the old inode
 * after that owns nothing. */
static bool same_file(int fd, const char *path)
{
    struct stat a, b;
    return fstat(fd, &a) == 0 && lstat(path, &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

int rundir_lock_ex(const char *dir, bool *created, struct err *err)
{
    char *path = path_join(dir, RUNDIR_LOCK_NAME);
    bool made = false;
    int fd = -1;
    for (int tries = 0; fd < 0 && tries < 8; tries++) {
        /* CLOEXEC: a server that inherited the fd would keep the folder
         * locked after sweep is gone */
        fd = open_lock_file(dir, path, &made, err);
        if (fd < 0)
            goto out;
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            if (errno == EWOULDBLOCK) {
                /* the holder wrote its pid after locking; it may not have yet */
                char text[32];
                ssize_t n = pread(fd, text, sizeof(text) - 1, 0);
                text[n > 0 ? n : 0] = '\0';
                text[strcspn(text, "\n")] = '\0';
                long pid = 0;
                if (str_to_long(text, &pid) != 0 || pid <= 0)
                    pid = 0;
                char holder[48] = "another sweep process";
                if (pid)
                    snprintf(holder, sizeof(holder), "pid %ld", pid);
                err_set(err, RN_ERR_ENV,
                        "run folder '%s' is in use by %s (another sweep run, plot or import "
                        "writes into it); wait until it ends or use another folder",
                        dir, holder);
            } else {
                err_set(err, RN_ERR_ENV, "run folder '%s': cannot lock %s: %s", dir, path,
                        strerror(errno));
            }
            close(fd);
            fd = -1;
            goto out;
        }
        if (!same_file(fd, path)) { /* removed or replaced meanwhile: take the new one */
            close(fd);
            fd = -1;
        }
    }
    if (fd < 0) {
        err_set(err, RN_ERR_ENV, "run folder '%s': %s keeps being replaced; cannot lock it", dir,
                path);
        goto out;
    }
    char pid[32];
    int len = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
    ssize_t w = ftruncate(fd, 0) == 0 ? pwrite(fd, pid, (size_t)len, 0) : -1;
    if (w != len) {
        err_set(err, RN_ERR_ENV, "run folder '%s': cannot write the lock file %s: %s", dir, path,
                w < 0 ? strerror(errno) : "short write");
        if (made)
            unlink(path);
        close(fd);
        fd = -1;
    }
out:
    if (created)
        *created = fd >= 0 && made;
    free(path);
    return fd;
}

int rundir_lock(const char *dir, struct err *err)
{
    return rundir_lock_ex(dir, NULL, err);
}

void rundir_unlock(int fd)
{
    if (fd >= 0)
        close(fd); /* drops the flock; the file stays for the next owner */
}

void rundir_unlock_undo(int fd, const char *dir, bool remove_lock)
{
    if (fd < 0)
        return;
    if (remove_lock) { /* while still held: nobody else can own it meanwhile */
        char *path = path_join(dir, RUNDIR_LOCK_NAME);
        if (same_file(fd, path))
            unlink(path);
        free(path);
    }
    close(fd);
}

/* The entry name in dir is our lock file: a regular file, not a link. */
static bool is_lock_file(const char *dir, const char *name)
{
    if (strcmp(name, RUNDIR_LOCK_NAME) != 0)
        return false;
    char *path = path_join(dir, name);
    struct stat st;
    bool reg = lstat(path, &st) == 0 && S_ISREG(st.st_mode);
    free(path);
    return reg;
}

bool rundir_is_empty(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT;
    bool empty = true;
    struct dirent *de;
    while (empty && (de = readdir(d)))
        empty = strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
                is_lock_file(dir, de->d_name);
    closedir(d);
    return empty;
}

int rundir_mkdirs(const char *dir, struct strvec *made, struct err *err)
{
    return mkdir_p_made(dir, 0755, made, err, RN_ERR_ENV);
}

void rundir_unmake(const struct strvec *made)
{
    for (size_t i = made->n; i-- > 0;)
        rmdir(made->v[i]); /* fails, harmlessly, once something else is inside */
}

char *rundir_claim_new(const char *parent, const char *stem, struct strvec *made, struct err *err)
{
    int retries = 0;
    for (int n = 1; n < 1000; n++) {
        char *dir =
            n == 1 ? xasprintf("%s/%s", parent, stem) : xasprintf("%s/%s-%d", parent, stem, n);
        /* mkdir is the claim: of two runs started together, one gets each name */
        if (mkdir(dir, 0755) == 0) {
            if (made)
                strvec_push(made, dir);
            return dir;
        }
        int e = errno;
        free(dir);
        if (e == ENOENT && retries++ < 5) {
            if (rundir_mkdirs(parent, made, err) != 0)
                return NULL;
            n--; /* the parent is there now: the same name again */
            continue;
        }
        if (e != EEXIST)
            return err_set(err, RN_ERR_ENV, "results folder not writable: %s/%s: %s", parent, stem,
                           strerror(e)),
                   NULL;
    }
    return err_set(err, RN_ERR_ENV, "%s: %s-2 ... %s-999 are all taken", parent, stem, stem), NULL;
}

/* "previous-N" with N >= 1: a folder an earlier rundir_move_aside made. */
static bool is_previous(const char *name)
{
    long n;
    return str_starts_with(name, "previous-") && str_to_long(name + 9, &n) == 0 && n >= 1;
}

/* Whether path a is b or lies below it (both canonical). */
static bool is_within(const char *a, const char *b)
{
    size_t n = strlen(b);
    return strncmp(a, b, n) == 0 && (a[n] == '\0' || a[n] == '/' || (n == 1 && b[0] == '/'));
}

/*
 * Whether moving dir/name elsewhere takes path used with it: path (as the
 * run opens it, relative to the working folder) goes through dir/name, or
 * the file it resolves to lies in dir/name. real_dir is dir's realpath.
 */
static bool moves_path(const char *real_dir, const char *dir, const char *name, const char *used)
{
    char *cwd = getcwd(NULL, 0);
    char *abs = used[0] == '/' || !cwd ? xstrdup(used) : xasprintf("%s/%s", cwd, used);
    free(cwd);
    bool hit = false;
    /* each component of the path as written: is it name, inside dir? */
    for (char *slash = strrchr(abs, '/'); !hit && slash && slash > abs; slash = strrchr(abs, '/')) {
        const char *base = slash + 1;
        *slash = '\0';
        if (strcmp(base, name) != 0)
            continue;
        char *parent = realpath(abs, NULL);
        hit = parent && strcmp(parent, real_dir) == 0;
        free(parent);
    }
    free(abs);
    char *entry = path_join(dir, name);
    struct stat st;
    if (!hit && lstat(entry, &st) == 0 && !S_ISLNK(st.st_mode)) {
        /* reached through a link elsewhere that points into dir/name (moving
         * a link itself moves nothing it points to) */
        char *real_entry = realpath(entry, NULL), *real_used = realpath(used, NULL);
        hit = real_entry && real_used && is_within(real_used, real_entry);
        free(real_entry);
        free(real_used);
    }
    free(entry);
    return hit;
}

int rundir_move_aside(const char *dir, const struct strvec *used, char **moved_to, struct err *err)
{
    *moved_to = NULL;
    DIR *d = opendir(dir);
    if (!d)
        return err_set(err, RN_ERR_ENV, "%s: %s", dir, strerror(errno)), -1;
    struct strvec names = STRVEC_INIT;
    struct dirent *de;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0 &&
            !is_lock_file(dir, de->d_name) && !is_previous(de->d_name))
            strvec_push(&names, de->d_name);
    closedir(d);
    int rc = 0;
    if (!names.n)
        goto out;
    /* nothing moves when one entry is something this run itself reads */
    char *real_dir = realpath(dir, NULL);
    for (size_t i = 0; real_dir && used && i < names.n && rc == 0; i++)
        for (size_t j = 0; j < used->n && rc == 0; j++)
            if (used->v[j] && *used->v[j] && moves_path(real_dir, dir, names.v[i], used->v[j])) {
                err_set(err, RN_ERR_USAGE,
                        "--force would move '%s' into %s/previous-N/, but this run uses '%s'; "
                        "nothing was moved: choose another --out folder",
                        names.v[i], dir, used->v[j]);
                rc = -1;
            }
    free(real_dir);
    if (rc != 0)
        goto out;
    char *to = NULL;
    for (int n = 1; !to; n++) {
        char *cand = xasprintf("%s/previous-%d", dir, n);
        if (mkdir(cand, 0755) == 0) {
            to = cand;
        } else {
            int e = errno;
            free(cand);
            if (e != EEXIST || n >= 100000) {
                rc = -1;
                err_set(err, RN_ERR_ENV, "%s: cannot make a previous-N folder: %s", dir,
                        strerror(e));
                goto out;
            }
        }
    }
    *moved_to = to;
    for (size_t i = 0; i < names.n && rc == 0; i++) {
        char *from = path_join(dir, names.v[i]), *dst = path_join(to, names.v[i]);
        if (rename(from, dst) != 0) {
            err_set(err, RN_ERR_ENV, "cannot move '%s' to '%s': %s", from, dst, strerror(errno));
            rc = -1;
        }
        free(from);
        free(dst);
    }
    if (rc == 0) { /* make the renames durable: dir lost the entries, to gained them */
        char *inside = path_join(to, names.v[0]);
        file_fsync_dir(to);
        file_fsync_dir(inside);
        free(inside);
    }
out:
    strvec_release(&names);
    return rc;
}

int rundir_keep_old(const char *path, struct err *err)
{
    if (!path_exists(path))
        return 0;
    for (int n = 1; n < 10000; n++) {
        char *cand = xasprintf("%s.%d", path, n);
        bool taken = path_exists(cand);
        int rc = 0;
        if (!taken && rename(path, cand) != 0) {
            err_set(err, RN_ERR_ENV, "%s: cannot keep the old log as %s: %s", path, cand,
                    strerror(errno));
            rc = -1;
        }
        free(cand);
        if (!taken)
            return rc;
    }
    return err_set(err, RN_ERR_ENV, "%s: cannot keep the old log: 9999 old copies", path), -1;
}
