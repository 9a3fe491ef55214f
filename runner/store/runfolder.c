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

int rundir_lock(const char *dir, struct err *err)
{
    char *path = path_join(dir, RUNDIR_LOCK_NAME);
    /* CLOEXEC: a server that inherited the fd would keep the folder locked
     * after sweep is gone */
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        err_set(err, RN_ERR_ENV, "run folder '%s': cannot create the lock file: %s: %s", dir, path,
                strerror(errno));
        goto out;
    }
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
                    "run folder '%s' is in use by %s (another sweep run, plot or import writes "
                    "into it); wait until it ends or use another folder",
                    dir, holder);
        } else {
            err_set(err, RN_ERR_ENV, "run folder '%s': cannot lock %s: %s", dir, path,
                    strerror(errno));
        }
        close(fd);
        fd = -1;
        goto out;
    }
    char pid[32];
    int len = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
    ssize_t w = ftruncate(fd, 0) == 0 ? pwrite(fd, pid, (size_t)len, 0) : -1;
    if (w != len) {
        err_set(err, RN_ERR_ENV, "run folder '%s': cannot write the lock file %s: %s", dir, path,
                w < 0 ? strerror(errno) : "short write");
        close(fd);
        fd = -1;
    }
out:
    free(path);
    return fd;
}

void rundir_unlock(int fd)
{
    if (fd >= 0)
        close(fd); /* drops the flock; the file stays for the next owner */
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
                strcmp(de->d_name, RUNDIR_LOCK_NAME) == 0;
    closedir(d);
    return empty;
}

/* "previous-N" with N >= 1: a folder an earlier rundir_move_aside made. */
static bool is_previous(const char *name)
{
    long n;
    return str_starts_with(name, "previous-") && str_to_long(name + 9, &n) == 0 && n >= 1;
}

int rundir_move_aside(const char *dir, char **moved_to, struct err *err)
{
    *moved_to = NULL;
    DIR *d = opendir(dir);
    if (!d)
        return err_set(err, RN_ERR_ENV, "%s: %s", dir, strerror(errno)), -1;
    struct strvec names = STRVEC_INIT;
    struct dirent *de;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0 &&
            strcmp(de->d_name, RUNDIR_LOCK_NAME) != 0 && !is_previous(de->d_name))
            strvec_push(&names, de->d_name);
    closedir(d);
    int rc = 0;
    if (!names.n)
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
