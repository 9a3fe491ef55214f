/*
 * fileio: whole-file reads with a size cap, and atomic writes (temporary
 * name, fsync, rename) so a crash never leaves a half-written file behind.
 */
#ifndef COMMON_FILEIO_H
#define COMMON_FILEIO_H

#include <stddef.h>
#include <sys/types.h>

#include "buf.h"
#include "err.h"
#include "strvec.h"

/* Read all of path into out (which must be buf_init'ed; its cap applies).
 * Returns 0, or -1 with "path: reason" in err (code `code`). */
int file_read_all(const char *path, struct buf *out, struct err *err, int code);
/* The reading half of file_read_all, on an fd the caller opened (and
 * closes): appends up to out's cap, then -1 with out->toobig set if more
 * follows; on a read error -1 with errno left as the read's. path only
 * names the file in err. */
int file_read_fd(int fd, const char *path, struct buf *out, struct err *err, int code);
/* Replace path with data[0..len) atomically: write path.tmp.PID, fsync,
 * rename over path, fsync the directory. Returns 0 or -1 with err set. */
int file_write_atomic(const char *path, const void *data, size_t len, struct err *err, int code);
/* Copy the file at src to dst atomically (as file_write_atomic), in 64 KiB
 * chunks, so any size costs no memory. Returns 0, or -1 with "path: reason"
 * in err (code `code`). */
int file_copy_atomic(const char *src, const char *dst, struct err *err, int code);
/* 1 when the files at a and b hold the same bytes; 0 when they differ or
 * either cannot be read. Compared in chunks. */
int file_same(const char *a, const char *b);
/* Append data to path (created 0644 if missing) and fsync: for logs and CSV
 * rows that must survive a crash right after the call. A symlink at path is
 * refused (ELOOP), never followed. */
int file_append_sync(const char *path, const void *data, size_t len, struct err *err, int code);
/* fsync the folder that holds path, so a rename into it is durable;
 * errors are ignored (best effort, as after a successful rename). */
void file_fsync_dir(const char *path);
/* mkdir -p; returns 0 or -1 with err set. */
int mkdir_p(const char *path, mode_t mode, struct err *err, int code);
/* mkdir -p, pushing onto made (may be NULL) each folder this call created,
 * outermost first (so that they can be removed again). */
int mkdir_p_made(const char *path, mode_t mode, struct strvec *made, struct err *err, int code);
/* 1 if path exists (any type), else 0. */
int path_exists(const char *path);
/* Join a directory and a name into a fresh heap string. */
char *path_join(const char *dir, const char *name);
/* The last component of path: what follows its last '/' (a pointer into
 * path, "" when path ends with '/'), or path itself when it has none. The
 * folder part is then path[0 .. base - path), its '/' included. */
const char *path_base(const char *path);
/* The name of the folder dir, trailing '/' ignored ("runs/a/" -> "a",
 * "/" -> ""); a fresh heap string. */
char *path_dir_name(const char *dir);
/* path_base(path) without the extension ext (".gguf", ".log") when it ends
 * with it and has something before it; a fresh heap string. */
char *path_stem(const char *path, const char *ext);

#endif
