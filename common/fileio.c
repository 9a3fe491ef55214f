/* fileio: capped reads, atomic replacement, durable appends, mkdir -p. */
#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "xalloc.h"

int file_read_fd(int fd, const char *path, struct buf *out, struct err *err, int code)
{
    for (;;) {
        /* read at most the room left under the cap; once full, one more
         * byte tells a file of exactly max bytes from a longer one */
        size_t room = out->max - out->len, want = room < 65536 ? room : 65536;
        char spare;
        char *dst = want ? buf_reserve(out, want) : &spare;
        ssize_t n = read(fd, dst, want ? want : 1);
        if (n > 0 && !want) {
            out->toobig = true;
            err_set(err, code, "%s: larger than the %zu-byte limit", path, out->max);
            return -1;
        }
        if (n < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            err_set(err, code, "%s: %s", path, strerror(e));
            errno = e;
            return -1;
        }
        if (n == 0)
            return 0;
        buf_commit(out, (size_t)n);
    }
}

int file_read_all(const char *path, struct buf *out, struct err *err, int code)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        err_set(err, code, "%s: %s", path, strerror(errno));
        return -1;
    }
    int rc = -1;
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode))
        err_set(err, code, "%s: is a directory", path);
    else
        rc = file_read_fd(fd, path, out, err, code);
    close(fd);
    return rc;
}

static int write_full(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

void file_fsync_dir(const char *path)
{
    char *copy = xstrdup(path);
    int dfd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    free(copy);
}

/* Create tmp for writing as a new file: never through a link planted there,
 * never into an old file (a stale one of a dead process with our pid is
 * removed first). */
static int open_new_tmp(const char *tmp)
{
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 && errno == EEXIST && unlink(tmp) == 0)
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    return fd;
}

int file_write_atomic(const char *path, const void *data, size_t len, struct err *err, int code)
{
    char *tmp = xasprintf("%s.tmp.%ld", path, (long)getpid());
    int rc = -1;
    int fd = open_new_tmp(tmp);
    if (fd < 0) {
        err_set(err, code, "%s: %s", tmp, strerror(errno));
        goto out;
    }
    if (write_full(fd, data, len) != 0 || fsync(fd) != 0) {
        err_set(err, code, "%s: %s", tmp, strerror(errno));
        close(fd);
        unlink(tmp);
        goto out;
    }
    close(fd);
    if (rename(tmp, path) != 0) {
        err_set(err, code, "%s: rename: %s", path, strerror(errno));
        unlink(tmp);
        goto out;
    }
    file_fsync_dir(path);
    rc = 0;
out:
    free(tmp);
    return rc;
}

#define COPY_CHUNK_BYTES 65536

int file_copy_atomic(const char *src, const char *dst, struct err *err, int code)
{
    char *tmp = xasprintf("%s.tmp.%ld", dst, (long)getpid());
    char *chunk = xmalloc(COPY_CHUNK_BYTES);
    int rc = -1, out = -1;
    struct stat st;
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0 || fstat(in, &st) != 0) {
        err_set(err, code, "%s: %s", src, strerror(errno));
        goto done;
    }
    if (S_ISDIR(st.st_mode)) {
        err_set(err, code, "%s: is a directory", src);
        goto done;
    }
    out = open_new_tmp(tmp);
    if (out < 0) {
        err_set(err, code, "%s: %s", tmp, strerror(errno));
        goto done;
    }
    for (;;) {
        ssize_t n = read(in, chunk, COPY_CHUNK_BYTES);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            err_set(err, code, "%s: %s", src, strerror(errno));
            goto done;
        }
        if (n == 0)
            break;
        if (write_full(out, chunk, (size_t)n) != 0) {
            err_set(err, code, "%s: %s", tmp, strerror(errno));
            goto done;
        }
    }
    if (fsync(out) != 0) {
        err_set(err, code, "%s: %s", tmp, strerror(errno));
        goto done;
    }
    close(out);
    out = -1;
    if (rename(tmp, dst) != 0) {
        err_set(err, code, "%s: rename: %s", dst, strerror(errno));
        goto done;
    }
    file_fsync_dir(dst);
    rc = 0;
done:
    if (out >= 0)
        close(out);
    if (rc != 0)
        unlink(tmp); /* ENOENT when it was never made */
    if (in >= 0)
        close(in);
    free(chunk);
    free(tmp);
    return rc;
}

/* Read up to n bytes (fewer only at the end of the file); -1 on error. */
static ssize_t read_full(int fd, char *p, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, p + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

int file_same(const char *a, const char *b)
{
    int fa = open(a, O_RDONLY | O_CLOEXEC), fb = open(b, O_RDONLY | O_CLOEXEC);
    char *ca = xmalloc(COPY_CHUNK_BYTES), *cb = xmalloc(COPY_CHUNK_BYTES);
    int same = 0;
    struct stat sa, sb;
    if (fa < 0 || fb < 0 || fstat(fa, &sa) != 0 || fstat(fb, &sb) != 0 || !S_ISREG(sa.st_mode) ||
        !S_ISREG(sb.st_mode) || sa.st_size != sb.st_size)
        goto out;
    for (;;) {
        ssize_t na = read_full(fa, ca, COPY_CHUNK_BYTES), nb = read_full(fb, cb, COPY_CHUNK_BYTES);
        if (na < 0 || na != nb || memcmp(ca, cb, (size_t)na) != 0)
            goto out;
        if (na == 0)
            break;
    }
    same = 1;
out:
    if (fa >= 0)
        close(fa);
    if (fb >= 0)
        close(fb);
    free(ca);
    free(cb);
    return same;
}

int file_append_sync(const char *path, const void *data, size_t len, struct err *err, int code)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
        err_set(err, code, "%s: %s", path, strerror(errno));
        return -1;
    }
    int rc = 0;
    if (write_full(fd, data, len) != 0 || fsync(fd) != 0) {
        err_set(err, code, "%s: %s", path, strerror(errno));
        rc = -1;
    }
    close(fd);
    return rc;
}

int mkdir_p(const char *path, mode_t mode, struct err *err, int code)
{
    return mkdir_p_made(path, mode, NULL, err, code);
}

int mkdir_p_made(const char *path, mode_t mode, struct strvec *made, struct err *err, int code)
{
    char *p = xstrdup(path);
    int rc = 0;
    for (char *s = p + 1;; s++) {
        if (*s == '/' || *s == '\0') {
            char saved = *s;
            *s = '\0';
            if (mkdir(p, mode) == 0) {
                if (made)
                    strvec_push(made, p);
            } else if (errno != EEXIST) {
                err_set(err, code, "%s: %s", p, strerror(errno));
                rc = -1;
                break;
            }
            *s = saved;
            if (!saved)
                break;
        }
    }
    free(p);
    return rc;
}

int path_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

char *path_join(const char *dir, const char *name)
{
    size_t n = strlen(dir);
    if (n && dir[n - 1] == '/')
        return xasprintf("%s%s", dir, name);
    return xasprintf("%s/%s", dir, name);
}

const char *path_base(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

char *path_dir_name(const char *dir)
{
    size_t len = strlen(dir);
    while (len > 1 && dir[len - 1] == '/')
        len--;
    size_t start = len;
    while (start && dir[start - 1] != '/')
        start--;
    return xstrndup(dir + start, len - start);
}

char *path_stem(const char *path, const char *ext)
{
    const char *base = path_base(path);
    size_t n = strlen(base), e = strlen(ext);
    if (n > e && memcmp(base + n - e, ext, e) == 0)
        n -= e;
    return xstrndup(base, n);
}
